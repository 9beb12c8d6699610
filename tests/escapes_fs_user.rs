//! Filesystem escapes, run by an unprivileged user (`rootfence-test` when the
//! tests run as root; `tests/peers/install.sh` creates it), who owns the
//! roots and the fake home: the same cases as `escapes_fs`, with the
//! server's own namespaces (a user namespace of its own) and without them.

mod common;

mod with_namespaces {
    use super::common;

    fn tree() -> common::Tree {
        common::Tree::unprivileged(true)
    }

    include!("suites/escapes_fs.rs");
}

mod without_namespaces {
    use super::common;

    fn tree() -> common::Tree {
        common::Tree::unprivileged(false)
    }

    include!("suites/escapes_fs.rs");
}
