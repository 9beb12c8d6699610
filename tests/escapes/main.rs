//! The escape suites: each case runs a real program through `rootfence
//! exec` and asserts that the escape is refused with the specific error,
//! and that the allowed counterpart works. The cases are in
//! `tests/suites/escapes_*.rs`; each suite runs here once per mode, a
//! module whose `tree()` makes the mode's scratch tree ([`common::Tree`]):
//!
//! - `fs`, `net`, `proc`, `view`: with the server's own namespaces (the
//!   default where the kernel grants them);
//! - `*_no_ns`: without namespaces (`[isolation] namespaces = "off"`):
//!   Landlock and seccomp only, as on a kernel that grants no user
//!   namespace;
//! - `*_no_landlock`: the view + seccomp rung: rootfence runs under a
//!   filter that makes `landlock_create_ruleset` answer `ENOSYS`, as on a
//!   kernel without Landlock, with `[isolation] landlock = "prefer"`; the
//!   server is confined by its own namespaces' filesystem view and the
//!   seccomp filter. Where this rung closes a class differently (README,
//!   "What the fence holds"), the case says so;
//! - `*_user`: run by an unprivileged user (`rootfence-test` when the tests
//!   run as root; `tests/peers/install.sh` creates it), who owns the roots
//!   and the fake home, with the server's own namespaces (a user namespace
//!   of its own) and without them.
//!
//! The mode is the tree's, never the process's: the modes run side by
//! side in this one binary.

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

/// A module `$name` running the cases of `tests/suites/$suite.rs` on the
/// trees `Tree::$make(...)` makes.
macro_rules! mode {
    ($name:ident, $make:ident($($arg:expr),*), $suite:literal) => {
        mod $name {
            use crate::common;

            fn tree() -> common::Tree {
                common::Tree::$make($($arg),*)
            }

            include!(concat!("../suites/", $suite, ".rs"));
        }
    };
}

/// A module `$name` running the cases of `tests/suites/$suite.rs` as the
/// unprivileged test user, with namespaces and without.
macro_rules! as_the_user {
    ($name:ident, $suite:literal) => {
        mod $name {
            #[allow(unused_imports)]
            use crate::common;

            as_the_test_user!(concat!("../suites/", $suite, ".rs"));
        }
    };
}

// Filesystem escapes.
mode!(fs, new(), "escapes_fs");
mode!(fs_no_ns, without_namespaces(), "escapes_fs");
mode!(fs_no_landlock, without_landlock(), "escapes_fs");
as_the_user!(fs_user, "escapes_fs");

// Network and IPC escapes against real listeners on this machine: each
// listener asserts it received nothing when the sandbox refused, and
// something when the policy allowed it.
mode!(net, new(), "escapes_net");
mode!(net_no_ns, without_namespaces(), "escapes_net");
mode!(net_no_landlock, without_landlock(), "escapes_net");
as_the_user!(net_user, "escapes_net");

// Process escapes: /proc of other processes, leaked descriptors, exec
// outside the runtime paths, signals, ptrace, the terminal, the
// environment, the scratch directory and exit status pass-through.
mode!(proc, new(), "escapes_proc");
mode!(proc_no_ns, without_namespaces(), "escapes_proc");
mode!(proc_no_landlock, without_landlock(), "escapes_proc");
as_the_user!(proc_user, "escapes_proc");

// What only the server's own filesystem view closes (with namespaces):
// metadata of files outside the roots and of read-only roots, watching
// directories that are not granted, and running code from roots through
// the dynamic loader or a memfd. Without namespaces these stay open
// (Landlock does not rule on them); `rootfence doctor` says so, and
// `tests/cli/commands.rs` checks that it does. The unprivileged user's
// server has a user namespace of its own.
mode!(view, new(), "escapes_view");
mode!(view_user, unprivileged(true), "escapes_view");
