//! Network by domain: the HTTP proxy rootfence runs for a server whose
//! policy lists `[network] allow_domains`.
//!
//! The server reaches nothing but this proxy (the sandbox sees to that:
//! `crate::sandbox`'s network namespace, or without namespaces Landlock
//! and the seccomp supervisor's `connect()`); the proxy serves
//! absolute-form `http` requests and `CONNECT` tunnels to the hosts the
//! list allows, resolves names itself, refuses everything else with a 403
//! naming the rule, and audits every decision.
//!
//! - [`rule`]: the list's entries and which allows a target (pure);
//! - [`http`]: request and response heads (pure);
//! - [`body`]: where a request's body ends (pure);
//! - [`conn`]: one connection as a state machine with no I/O;
//! - [`local`]: this machine's own addresses, which a name never reaches;
//! - [`shell`]: the tokio side, [`Proxy`].

pub mod body;
pub mod conn;
pub mod http;
pub mod local;
pub mod rule;
pub mod shell;

pub use conn::{Config, Decision, Judged};
pub use rule::{DomainRule, RuleError, Target, TargetHost};
pub use shell::Proxy;

/// The variables that point a server's HTTP clients at the proxy, and
/// `url` as their value: upper and lower case, as runtimes read one or
/// the other (curl only the lower-case `http_proxy`).
pub fn proxy_env(url: &str) -> Vec<(&'static str, String)> {
    [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ]
    .into_iter()
    .map(|k| (k, url.to_string()))
    .collect()
}

/// Variables that would send a server's requests around the proxy (and
/// so to a refusal): removed from its environment.
pub const BYPASS_ENV: &[&str] = &["NO_PROXY", "no_proxy"];
