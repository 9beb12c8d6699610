//! Network by domain on the view + seccomp rung: rootfence runs under a
//! filter that makes Landlock's calls answer `ENOSYS`, as on a kernel
//! without Landlock, with `[isolation] landlock = "prefer"`. With no
//! Landlock to rule on ports, the server's own network namespace (only
//! loopback and rootfence's proxy in it) is what holds: the same cases as
//! `net_domains`.

mod common;
mod net_support;

fn tree() -> common::Tree {
    common::Tree::without_landlock()
}

include!("suites/net_domains.rs");
include!("suites/net_domains_peers.rs");
