//! Network escapes against real listeners on this machine: each listener
//! asserts it received nothing when the sandbox refused, and something when
//! the policy allowed it.
//!
//! With the server's own namespaces (the default where the kernel grants
//! them); `escapes_net_no_ns` runs the same cases with Landlock and seccomp
//! only.

mod common;

fn tree() -> common::Tree {
    common::Tree::new()
}

include!("suites/escapes_net.rs");
