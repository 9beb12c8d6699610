//! Network and IPC escapes on the view + seccomp rung: rootfence runs under a filter
//! that makes `landlock_create_ruleset` answer `ENOSYS`, as on a kernel
//! without Landlock, with `[isolation] landlock = "prefer"`; the server is
//! confined by its own namespaces' filesystem view and the seccomp filter.
//! The same cases as `escapes_net`; where this rung closes a class
//! differently (README, "What the fence holds"), the case says so.

mod common;

fn tree() -> common::Tree {
    common::Tree::without_landlock()
}

include!("suites/escapes_net.rs");
