//! Which roots a call is served with: the command line's, or the host's
//! when it declares roots.
//!
//! As the reference server does, the host's roots replace the command
//! line's: asked with `roots/list` after `notifications/initialized` and
//! again on every `notifications/roots/list_changed`. Unlike it, a change
//! takes effect before any later call: while a `roots/list` is unanswered,
//! `tools/call` requests wait for its answer, and get an error if it does
//! not come (a host that said its roots changed and then says nothing
//! leaves the server with no host root, never with the old ones). The new
//! handles are opened and the old ones closed as the answer is applied.
//!
//! In the 2026-07-28 revision there is no handshake and the server cannot
//! ask: a call whose client capabilities declare roots is answered with an
//! `input_required` result asking for them, and served with the roots the
//! host's retry carries (each request brings its own).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::paths::{Root, Roots};

/// How long calls wait for an answer to `roots/list`.
pub const ROOTS_TIMEOUT: Duration = Duration::from_secs(10);

/// The `inputRequests` key under which a 2026-07-28 call asks for roots.
pub const ROOTS_KEY: &str = "roots";

/// The roots of the command line, and the host's when it has any.
pub struct RootsClient {
    cli: Vec<(String, bool)>,
    /// Canonical paths of the command line's read-only roots: a host root
    /// at or under one of them is read-only too.
    read_only: Vec<PathBuf>,
    home: Option<PathBuf>,
    /// The roots calls are served with now.
    pub current: Roots,
    /// Whether `current` came from the host.
    from_host: bool,
    /// Whether the host declared the roots capability in `initialize`.
    pub host_declared: bool,
    /// The id of the `roots/list` awaiting an answer, and until when.
    pending: Option<(String, Instant)>,
    next_id: u64,
}

impl RootsClient {
    /// Open the command line's roots (`(path, read_only)`); the ones that
    /// cannot be opened are left out and their errors returned.
    pub fn new(cli: Vec<(String, bool)>, home: Option<PathBuf>) -> (RootsClient, Vec<String>) {
        let mut errors = Vec::new();
        let mut list = Vec::new();
        for (given, ro) in &cli {
            match Root::open(given, *ro, home.as_deref()) {
                Ok(r) => list.push(r),
                Err(e) => errors.push(e.to_string()),
            }
        }
        let read_only = list
            .iter()
            .filter(|r| r.read_only)
            .map(|r| r.path.clone())
            .collect();
        let client = RootsClient {
            cli,
            read_only,
            home,
            current: Roots { list },
            from_host: false,
            host_declared: false,
            pending: None,
            next_id: 0,
        };
        (client, errors)
    }

    /// The command line's roots, opened again (a fresh set of handles).
    pub fn cli_roots(&self) -> Roots {
        let list = self
            .cli
            .iter()
            .filter_map(|(g, ro)| Root::open(g, *ro, self.home.as_deref()).ok())
            .collect();
        Roots { list }
    }

    /// Until when calls wait, if a `roots/list` is unanswered.
    pub fn waiting_until(&self) -> Option<Instant> {
        self.pending.as_ref().map(|(_, d)| *d)
    }

    /// A `roots/list` request to send now (it supersedes any unanswered
    /// one).
    pub fn ask(&mut self, now: Instant) -> Value {
        self.next_id += 1;
        let id = format!("rootfence-fs-roots-{}", self.next_id);
        self.pending = Some((id.clone(), now + ROOTS_TIMEOUT));
        json!({"jsonrpc": "2.0", "id": id, "method": "roots/list"})
    }

    /// A response from the host: whether it answered the pending
    /// `roots/list` (then the roots are applied).
    pub fn on_response(&mut self, id: &Value, result: Option<&Value>) -> bool {
        let matches = matches!((&self.pending, id.as_str()), (Some((p, _)), Some(i)) if p == i);
        if !matches {
            return false;
        }
        self.pending = None;
        match result.and_then(|r| r.get("roots")) {
            Some(list) => {
                let (roots, from_host) = self.roots_in(list);
                self.current = roots;
                self.from_host = from_host;
                tracing::info!(
                    "roots from the host: {}",
                    if self.current.is_empty() {
                        "none valid".to_string()
                    } else {
                        self.current.joined()
                    }
                );
            }
            None => {
                tracing::warn!("the host answered roots/list with an error or no roots member");
                self.give_up();
            }
        }
        true
    }

    /// No answer in time (or an error): the host's old roots are dropped
    /// (the command line's are kept if the host never gave any).
    pub fn give_up(&mut self) {
        self.pending = None;
        if self.from_host {
            tracing::warn!(
                "the host's roots are unknown: serving no root until it answers roots/list"
            );
            self.current = Roots::default();
        }
    }

    /// The roots a host's `roots` list stands for, and whether they are the
    /// host's: its valid directories, or, when the list is empty, the
    /// command line's (as the reference server keeps its arguments).
    pub fn roots_in(&self, list: &Value) -> (Roots, bool) {
        let items = list.as_array().map(Vec::as_slice).unwrap_or_default();
        if items.is_empty() {
            return (self.cli_roots(), false);
        }
        let mut out = Vec::new();
        for item in items {
            let Some(uri) = item.get("uri").and_then(Value::as_str) else {
                tracing::warn!("a root without a uri was skipped: {item}");
                continue;
            };
            match Root::open_uri(uri, false) {
                Ok(mut r) => {
                    r.read_only = self.read_only.iter().any(|ro| r.path.starts_with(ro));
                    out.push(r);
                }
                Err(e) => tracing::warn!("skipped: {e}"),
            }
        }
        (Roots { list: out }, true)
    }
}
