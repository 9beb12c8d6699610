//! Process escapes, run by an unprivileged user (`rootfence-test` when the
//! tests run as root; `tests/peers/install.sh` creates it), who owns the
//! roots and the fake home: the same cases as `escapes_proc`, with the
//! server's own namespaces (a user namespace of its own) and without them.

#[macro_use]
mod common;

as_the_test_user!("suites/escapes_proc.rs");
