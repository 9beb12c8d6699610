//! Network by domain, with the server's own namespaces (its own network,
//! holding only loopback and rootfence's proxy): allowed names work
//! through curl, python and node, everything else is refused, judged by
//! what reached a local site and listeners on this machine.
//! `net_domains_no_ns` runs the same cases with Landlock and the seccomp
//! supervisor only.

mod common;
mod net_support;

fn tree() -> common::Tree {
    common::Tree::new()
}

include!("suites/net_domains.rs");
include!("suites/net_domains_peers.rs");
