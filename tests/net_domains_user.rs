//! Network by domain run by an unprivileged user (`rootfence-test` when
//! the tests run as root; `tests/peers/install.sh` creates it), who owns
//! the roots: the same cases as `net_domains`, with the server's own
//! namespaces (its network namespace inside a user namespace of its own)
//! and without them (the supervised `connect()`).

#[macro_use]
mod common;
mod net_support;

as_the_test_user!("suites/net_domains.rs");
