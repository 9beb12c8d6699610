//! Filesystem escapes: each test runs a real program through `rootfence
//! exec` and asserts that the escape is refused with the specific error,
//! and that the allowed counterpart works.
//!
//! With the server's own namespaces (the default where the kernel grants
//! them); `escapes_fs_no_ns` runs the same cases with Landlock and seccomp
//! only.

mod common;

fn tree() -> common::Tree {
    common::Tree::new()
}

include!("suites/escapes_fs.rs");
