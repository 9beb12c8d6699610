//! Real MCP servers, installed from the lockfiles in `tests/peers` by
//! `tests/peers/install.sh`: popular servers launched the way users and
//! host configs launch them, the runtimes they start on, the credentials
//! of a user's home none of them may read, and the hostile peers of the
//! end-to-end tests checked without rootfence.

#[path = "../common/mod.rs"]
mod common;
#[path = "../peer/mod.rs"]
mod peer;

mod credentials;
mod hostile_peers;
mod popular_servers;
mod real_servers;
mod runtimes;
