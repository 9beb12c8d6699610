//! Network by domain run by an unprivileged user (`rootfence-test` when
//! the tests run as root; `tests/peers/install.sh` creates it), who owns
//! the roots: the same cases as `net_domains`, with the server's own
//! namespaces (its network namespace inside a user namespace of its own)
//! and without them (the supervised `connect()`).

mod common;
mod net_support;

mod with_namespaces {
    use super::{common, net_support};

    fn tree() -> common::Tree {
        common::Tree::unprivileged(true)
    }

    include!("suites/net_domains.rs");
}

mod without_namespaces {
    use super::{common, net_support};

    fn tree() -> common::Tree {
        common::Tree::unprivileged(false)
    }

    include!("suites/net_domains.rs");
}
