//! `rootfence run`, the proxy between a host and its server: the built
//! binary with scripted hosts, real peers and hostile ones, overlapping
//! events, start-up, containment of what a server leaves behind, the
//! hints a failed start gets, the sampling and elicitation guard, and the
//! proxy's session and watchers in process.

#[path = "../common/mod.rs"]
mod common;
#[path = "../host/mod.rs"]
mod host;
#[path = "../peer/mod.rs"]
mod peer;

mod binary;
mod containment;
mod e2e;
mod fail_closed_e2e;
mod guard_e2e;
mod guard_session;
mod hints;
mod proxy_session;
mod races;
mod relay_hostile;
mod start;
mod stateless_e2e;
mod watch;
