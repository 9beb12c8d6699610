//! Process escapes: /proc of other processes, leaked descriptors, exec
//! outside the runtime paths, signals, ptrace, the terminal, the
//! environment, the scratch directory and exit status pass-through.
//!
//! With the server's own namespaces (the default where the kernel grants
//! them); `escapes_proc_no_ns` runs the same cases with Landlock and seccomp
//! only.

mod common;

fn tree() -> common::Tree {
    common::Tree::new()
}

include!("suites/escapes_proc.rs");
