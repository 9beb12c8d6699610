//! The sandbox around the escape suites: the seccomp allow-list against
//! real work, the environments rootfence's users run in, the bounds on the
//! machine's resources, the AppArmor profile, and the library's launch API
//! as a Rust host uses it.

#[path = "../common/mod.rs"]
mod common;
#[path = "../net_support/mod.rs"]
mod net_support;

mod allowlist;
mod apparmor;
mod embed_example;
mod environments;
mod resources;
mod tokio_spawn;
