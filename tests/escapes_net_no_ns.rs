//! Network escapes against real listeners on this machine: each listener
//! asserts it received nothing when the sandbox refused, and something when
//! the policy allowed it.
//!
//! Without namespaces (`[isolation] namespaces = "off"`): Landlock and
//! seccomp only, as on a kernel that grants no user namespace.

mod common;

fn tree() -> common::Tree {
    common::Tree::without_namespaces()
}

include!("suites/escapes_net.rs");
