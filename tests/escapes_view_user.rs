//! What only the server's own filesystem view closes, run by an
//! unprivileged user (`rootfence-test` when the tests run as root), whose
//! server has a user namespace of its own: the cases of `escapes_view`.

mod common;

fn tree() -> common::Tree {
    common::Tree::unprivileged(true)
}

include!("suites/escapes_view.rs");
