//! What only the server's own filesystem view closes (with namespaces):
//! metadata of files outside the roots and of read-only roots, watching
//! directories that are not granted, and running code from roots through
//! the dynamic loader or a memfd. Without namespaces these stay open
//! (Landlock does not rule on them); `rootfence doctor` says so, and
//! `cli.rs` checks that it does.

mod common;

fn tree() -> common::Tree {
    common::Tree::new()
}

include!("suites/escapes_view.rs");
