//! Process escapes: /proc of other processes, leaked descriptors, exec
//! outside the runtime paths, signals, ptrace, the terminal, the
//! environment, the scratch directory and exit status pass-through.
//!
//! Without namespaces (`[isolation] namespaces = "off"`): Landlock and
//! seccomp only, as on a kernel that grants no user namespace.

mod common;

fn tree() -> common::Tree {
    common::Tree::without_namespaces()
}

include!("suites/escapes_proc.rs");
