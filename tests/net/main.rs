//! The network: by domain on every rung, rootfence's proxy against hostile
//! clients and names, and the tools servers use.
//!
//! Network by domain (`tests/suites/net_domains.rs`, and
//! `net_domains_peers.rs` with real servers): allowed names work through
//! curl, python and node, everything else is refused, judged by what
//! reached a local site and listeners on this machine. The cases run once
//! per mode, a module whose `tree()` makes the mode's scratch tree (the
//! mode is the tree's, never the process's):
//!
//! - `domains`: with the server's own namespaces (its own network, holding
//!   only loopback and rootfence's proxy);
//! - `domains_no_ns`: without namespaces (`[isolation] namespaces =
//!   "off"`): Landlock allows the server no TCP port and rootfence's
//!   seccomp supervisor connects its sockets to the proxy only;
//! - `domains_no_landlock`: the view + seccomp rung: rootfence runs under
//!   a filter that makes Landlock's calls answer `ENOSYS`, as on a kernel
//!   without Landlock, with `[isolation] landlock = "prefer"`. With no
//!   Landlock to rule on ports, the server's own network namespace (only
//!   loopback and rootfence's proxy in it) is what holds;
//! - `domains_user`: run by an unprivileged user (`rootfence-test` when the
//!   tests run as root; `tests/peers/install.sh` creates it), who owns the
//!   roots, with the server's own namespaces (its network namespace inside
//!   a user namespace of its own) and without them (the supervised
//!   `connect()`).

#[macro_use]
#[path = "../common/mod.rs"]
mod common;
#[path = "../net_support/mod.rs"]
mod net_support;

mod hostile;
mod tools;

/// A module `$name` running the cases on the trees `Tree::$make()` makes.
macro_rules! mode {
    ($name:ident, $make:ident()) => {
        mod $name {
            use crate::{common, net_support};

            fn tree() -> common::Tree {
                common::Tree::$make()
            }

            include!("../suites/net_domains.rs");
            include!("../suites/net_domains_peers.rs");
        }
    };
}

mode!(domains, new());
mode!(domains_no_ns, without_namespaces());
mode!(domains_no_landlock, without_landlock());

/// As the unprivileged test user: the cases of `net_domains.rs` (the
/// clients of `net_domains_peers.rs`, installed in tests/peers, are out of
/// that user's reach).
mod domains_user {
    #[allow(unused_imports)]
    use crate::{common, net_support};

    as_the_test_user!("../suites/net_domains.rs");
}
