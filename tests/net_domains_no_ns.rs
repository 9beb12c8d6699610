//! Network by domain without namespaces (`[isolation] namespaces =
//! "off"`): Landlock allows the server no TCP port and rootfence's seccomp
//! supervisor connects its sockets to the proxy only. The same cases as
//! `net_domains`.

mod common;
mod net_support;

fn tree() -> common::Tree {
    common::Tree::without_namespaces()
}

include!("suites/net_domains.rs");
include!("suites/net_domains_peers.rs");
