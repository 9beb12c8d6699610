//! Filesystem escapes: each test runs a real program through `rootfence
//! exec` and asserts that the escape is refused with the specific error,
//! and that the allowed counterpart works.
//!
//! Without namespaces (`[isolation] namespaces = "off"`): Landlock and
//! seccomp only, as on a kernel that grants no user namespace.

mod common;

fn tree() -> common::Tree {
    common::Tree::without_namespaces()
}

include!("suites/escapes_fs.rs");
