//! The session state machine: one task that owns all state and reacts to
//! events from the host, the server generations, timers and watchers.
//!
//! Invariants it keeps:
//! - every request the host sends gets exactly one response (from the
//!   server, or an error from rootfence), across rebuilds and crashes;
//! - ids rootfence sends to the host come from one counter, so its own
//!   requests and remapped server requests never collide, and a server can
//!   never answer a request rootfence sent to the host;
//! - a new generation receives host traffic only after its replayed
//!   handshake completed, so rootfence's own ids to a server never overlap
//!   host ids in flight on that server.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::time::Duration;

use serde_json::Value;
use serde_json::value::RawValue;

use tokio::time::Instant;

use super::flow;
use super::framing::{Frame, LineSender};
use super::guard::{self, Guard, Revision};
use super::message::{self, Envelope, Invalid, Kind, code};
use super::server::{Generation, Launcher, ServerEvent};
use crate::plan::{self, SandboxPlan};
use crate::policy::{Policy, RestartName};
use crate::roots::{Access, CanonicalRoot, Refusal, RootInput, RootSource, resolve_all};
use crate::runtime::{self, CommandSpec, HostEnv};

/// Called with the enforced root paths whenever they change.
pub type RootsObserver = Box<dyn FnMut(&[std::path::PathBuf]) + Send>;

/// Everything a session needs to start.
pub struct SessionConfig {
    /// The policy in force at start.
    pub policy: Policy,
    /// Roots from the command line.
    pub cli_roots: Vec<RootInput>,
    /// `--no-host-roots`: ignore the host's roots.
    pub no_host_roots: bool,
    /// The server command.
    pub command: Vec<std::ffi::OsString>,
    /// rootfence's environment.
    pub env: HostEnv,
    /// Told the enforced root paths whenever they change (to watch them).
    pub roots_observer: Option<RootsObserver>,
}

/// Events the session reacts to.
#[derive(Debug)]
pub enum Event {
    /// A frame from the host.
    Host(Frame),
    /// The host closed its side.
    HostEof,
    /// From a server generation.
    Server(ServerEvent),
    /// The policy file changed on disk: the new policy, or why it is
    /// rejected.
    PolicyChanged(Result<Box<Policy>, String>),
    /// Something changed near a root directory.
    RootsMaybeChanged,
}

/// How a session ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// The host closed stdin.
    HostClosed,
    /// The server ended and the restart policy says stop.
    ServerEnded(String),
    /// The server could not be launched.
    LaunchFailed(String),
}

/// A host request forwarded to (or held for) a server.
struct PendingHost {
    /// The id, as the host wrote it.
    id_raw: String,
    /// The generation handling it (0: not yet forwarded).
    generation: u64,
    /// The method.
    method: String,
    /// Whether the request asked for a later page (`params.cursor`).
    method_params_cursor: bool,
    /// The batch it belongs to.
    batch: Option<u64>,
}

/// A request rootfence sent to the host, or a server's request it relays.
enum ToHost {
    /// rootfence's own `roots/list`.
    RootsList,
    /// A server request: its generation, its id as the server wrote it,
    /// and how the guard checks the host's answer (elicitation forms).
    Server {
        generation: u64,
        id_raw: String,
        check: Option<guard::AnswerCheck>,
    },
}

/// A request rootfence sent to a server itself.
enum OwnServerReq {
    /// The replayed `initialize`.
    Initialize,
    /// Replayed state (`logging/setLevel`, `resources/subscribe`) or a
    /// `tools/list`/`prompts/list`/`resources/list` comparison; the answer is
    /// dropped or compared.
    Replay,
    /// A list comparison after a rebuild.
    List(&'static str),
}

struct GenState {
    handle: Generation,
    /// The roots this generation is enforcing (answers its `roots/list`).
    roots: Vec<CanonicalRoot>,
    /// Handshake done (host traffic may flow).
    ready: bool,
    /// Replaced; finishing requests in flight until this instant.
    draining_until: Option<Instant>,
    /// rootfence's own requests to it.
    own: HashMap<String, OwnServerReq>,
    /// Shutdown requested.
    stopping: bool,
}

struct Batch {
    remaining: usize,
    parts: Vec<Vec<u8>>,
}

/// Why roots are being recomputed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for the host's `initialize`.
    Start,
    /// Server launched with the host's `initialize` forwarded.
    Handshake,
    /// Normal relaying.
    Ready,
}

/// The session.
pub struct Session<L: Launcher> {
    launcher: L,
    policy: Policy,
    cli_roots: Vec<RootInput>,
    no_host_roots: bool,
    command: Vec<std::ffi::OsString>,
    spec: CommandSpec,
    env: HostEnv,
    roots_observer: Option<RootsObserver>,

    host_out: LineSender,
    server_events: flow::Sender<ServerEvent>,

    phase: Phase,
    gens: HashMap<u64, GenState>,
    current: Option<u64>,
    next_gen: u64,
    /// A rebuild in progress: the generation being brought up.
    rising: Option<u64>,
    /// Host messages held until the current generation is ready.
    queue: VecDeque<Vec<u8>>,
    /// Holding host traffic until the host's roots arrive.
    awaiting_roots: bool,

    host_init: Option<Value>,
    server_init: Option<Value>,
    protocol: Option<String>,
    host_has_roots: bool,
    log_level: Option<String>,
    subscriptions: BTreeSet<String>,

    pending_host: HashMap<String, PendingHost>,
    to_host: HashMap<String, ToHost>,
    next_id: u64,
    batches: HashMap<u64, Batch>,
    next_batch: u64,

    host_roots: Vec<RootInput>,
    roots_request_in_flight: bool,
    roots_request_again: bool,
    /// Inputs whose directory was deleted or replaced after resolution.
    dropped_inputs: HashSet<String>,
    enforced: Vec<CanonicalRoot>,
    rebuild_at: Option<Instant>,
    rebuild_force: bool,
    roots_deadline: Option<Instant>,

    /// The last `tools/list`, `prompts/list`, `resources/list` results the
    /// host saw, to tell it when a rebuilt server's lists differ.
    lists: HashMap<&'static str, String>,

    restarts: u32,
    restart_at: Option<Instant>,
    ending: Option<Ending>,

    /// The sampling/elicitation guard: rate limit, audit, answer checks.
    /// Session state, so a relaunched server gets no fresh budget.
    guard: Guard,
}

impl<L: Launcher> Session<L> {
    /// A new session. `host_out` carries lines to the host's stdout.
    pub fn new(
        config: SessionConfig,
        launcher: L,
        host_out: LineSender,
        server_events: flow::Sender<ServerEvent>,
    ) -> Result<Self, String> {
        let spec = runtime::discover_for(&config.command, &config.policy, &config.env)
            .map_err(|e| e.to_string())?;
        let guard = Guard::new(&config.policy);
        Ok(Session {
            guard,
            launcher,
            policy: config.policy,
            cli_roots: config.cli_roots,
            no_host_roots: config.no_host_roots,
            command: config.command,
            spec,
            env: config.env,
            roots_observer: config.roots_observer,
            host_out,
            server_events,
            phase: Phase::Start,
            gens: HashMap::new(),
            current: None,
            next_gen: 1,
            rising: None,
            queue: VecDeque::new(),
            awaiting_roots: false,
            host_init: None,
            server_init: None,
            protocol: None,
            host_has_roots: false,
            log_level: None,
            subscriptions: BTreeSet::new(),
            pending_host: HashMap::new(),
            to_host: HashMap::new(),
            next_id: 1,
            batches: HashMap::new(),
            next_batch: 1,
            host_roots: Vec::new(),
            roots_request_in_flight: false,
            roots_request_again: false,
            dropped_inputs: HashSet::new(),
            enforced: Vec::new(),
            rebuild_at: None,
            rebuild_force: false,
            roots_deadline: None,
            lists: HashMap::new(),
            restarts: 0,
            restart_at: None,
            ending: None,
        })
    }

    /// The roots currently enforced.
    pub fn enforced(&self) -> &[CanonicalRoot] {
        &self.enforced
    }

    /// How the session ended, once it has.
    pub fn ending(&self) -> Option<&Ending> {
        self.ending.as_ref()
    }

    /// The earliest timer the session is waiting for.
    pub fn next_deadline(&self) -> Option<Instant> {
        let drains = self.gens.values().filter_map(|g| g.draining_until);
        [self.rebuild_at, self.roots_deadline, self.restart_at]
            .into_iter()
            .flatten()
            .chain(drains)
            .min()
    }

    /// Whether more than [`super::framing::HIGH_WATER`] bytes wait for the
    /// host: stop reading the servers until it catches up.
    pub fn host_backed_up(&self) -> bool {
        self.host_out.backed_up()
    }

    /// Whether more than [`super::framing::HIGH_WATER`] bytes wait for a
    /// server: stop reading the host until it catches up.
    pub fn server_backed_up(&self) -> bool {
        self.gens
            .values()
            .any(|g| !g.stopping && g.handle.backed_up())
    }

    /// Whether the session is over and every server is gone.
    pub fn finished(&self) -> bool {
        self.ending.is_some() && self.gens.is_empty()
    }

    // ------------------------------------------------------------------
    // Event entry points

    /// React to one event.
    pub fn on_event(&mut self, ev: Event) {
        match ev {
            Event::Host(Frame::Line(line)) => self.on_host_line(line, None),
            Event::Host(Frame::TooLong { len, head }) => self.on_host_too_long(len, &head),
            Event::HostEof => self.end(Ending::HostClosed),
            Event::Server(ServerEvent::Frame(g, Frame::Line(line))) => self.on_server_line(g, line),
            Event::Server(ServerEvent::Frame(g, Frame::TooLong { len, head })) => {
                self.on_server_too_long(g, len, &head)
            }
            Event::Server(ServerEvent::Eof(g)) => {
                tracing::debug!(generation = g, "server closed stdout")
            }
            Event::Server(ServerEvent::Exited(g, status)) => self.on_server_exit(g, status),
            Event::PolicyChanged(Ok(p)) => {
                tracing::info!(policy = %p.name(), "policy changed on disk: rebuilding");
                self.policy = *p;
                self.guard.policy_changed(&self.policy);
                match runtime::discover_for(&self.command, &self.policy, &self.env) {
                    Ok(spec) => self.spec = spec,
                    Err(e) => tracing::error!(
                        "after the policy change the command cannot be resolved: {e}; keeping the old runtime"
                    ),
                }
                self.schedule_rebuild(true);
            }
            Event::PolicyChanged(Err(e)) => {
                tracing::error!("policy change rejected, the previous policy stays in force: {e}");
            }
            Event::RootsMaybeChanged => self.check_roots_on_disk(),
        }
    }

    /// Fire every timer that is due.
    pub fn on_timer(&mut self, now: Instant) {
        if self.roots_deadline.is_some_and(|d| d <= now) {
            self.roots_deadline = None;
            if self.awaiting_roots {
                tracing::warn!(
                    "the host did not answer roots/list in time; continuing with the static roots"
                );
                self.awaiting_roots = false;
                self.flush_queue();
            }
        }
        if self.rebuild_at.is_some_and(|d| d <= now) {
            self.rebuild_at = None;
            self.recompute_roots();
        }
        if self.restart_at.is_some_and(|d| d <= now) {
            self.restart_at = None;
            let roots = self.enforced.clone();
            self.launch_generation(roots, true);
        }
        let due: Vec<u64> = self
            .gens
            .iter()
            .filter(|(_, g)| g.draining_until.is_some_and(|d| d <= now))
            .map(|(id, _)| *id)
            .collect();
        for g in due {
            self.fail_pending_of(g, "the server was restarted because its roots changed, and this request did not finish in time");
            self.stop_generation(g);
        }
    }

    // ------------------------------------------------------------------
    // Host side

    fn send_host(&self, line: Vec<u8>) {
        self.host_out.send(line);
    }

    fn alloc_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    fn on_host_too_long(&mut self, len: u64, head: &[u8]) {
        let (id, method) = message::sniff(head);
        let max = self.policy.raw.limits.max_message_bytes;
        tracing::warn!(
            bytes = len,
            method = method.as_deref().unwrap_or("?"),
            "host message over limits.max_message_bytes = {max}: refused"
        );
        if let Some(id) = id {
            self.send_host(message::error_response(
                Some(&id),
                code::INVALID_REQUEST,
                &format!("message of {len} bytes exceeds the limit of {max} bytes (limits.max_message_bytes in the rootfence policy)"),
            ));
        } else if method.is_none() {
            self.send_host(message::error_response(
                None,
                code::INVALID_REQUEST,
                &format!("message of {len} bytes exceeds the limit of {max} bytes (limits.max_message_bytes)"),
            ));
        }
    }

    fn on_host_line(&mut self, line: Vec<u8>, batch: Option<u64>) {
        let env = match message::parse(&line) {
            Ok(env) => env,
            Err(Invalid::Batch) => return self.on_host_batch(&line),
            Err(Invalid::NotJson(e)) => {
                tracing::warn!(
                    "host sent a line that is not JSON ({e}); answered with a parse error"
                );
                let reply =
                    message::error_response(None, code::PARSE_ERROR, "Parse error: not JSON");
                return self.reply_host(reply, batch);
            }
            Err(Invalid::NotJsonRpc { why, id }) => {
                tracing::warn!("host sent an invalid JSON-RPC message: {why}");
                let reply = message::error_response(
                    id.as_deref(),
                    code::INVALID_REQUEST,
                    &format!("Invalid Request: {why}"),
                );
                return self.reply_host(reply, batch);
            }
        };
        match env.kind {
            Kind::Response => self.on_host_response(&line, &env),
            Kind::Notification => {
                let method = env.method.as_deref().unwrap_or_default().to_string();
                self.on_host_notification(&method, &line, &env)
            }
            Kind::Request => {
                let method = env.method.as_deref().unwrap_or_default().to_string();
                // Checked by parse: requests have ids.
                let Some(id) = env.id else { return };
                let key = message::id_key(id);
                let id_raw = id.get().to_string();
                if self.pending_host.contains_key(&key) {
                    tracing::warn!(id = %id_raw, "host reused the id of a request still in flight");
                    let reply = message::error_response(
                        Some(&id_raw),
                        code::INVALID_REQUEST,
                        "Invalid Request: id already in use by a request in flight",
                    );
                    return self.reply_host(reply, batch);
                }
                // Only the few methods rootfence acts on need their params
                // (a tools/call may carry megabytes: never copy those).
                let needs_params = matches!(
                    method.as_str(),
                    "initialize"
                        | "logging/setLevel"
                        | "resources/subscribe"
                        | "resources/unsubscribe"
                        | "tools/list"
                        | "prompts/list"
                        | "resources/list"
                );
                let params = env
                    .params
                    .filter(|_| needs_params)
                    .map(|p| p.get().to_string());
                drop(env);
                self.on_host_request(key, id_raw, &method, params, line, batch);
            }
        }
    }

    /// Send a reply to the host, or add it to its batch.
    fn reply_host(&mut self, reply: Vec<u8>, batch: Option<u64>) {
        match batch.and_then(|b| self.batches.get_mut(&b).map(|x| (b, x))) {
            Some((b, state)) => {
                state.parts.push(reply);
                state.remaining = state.remaining.saturating_sub(1);
                if state.remaining == 0 {
                    self.finish_batch(b);
                }
            }
            None => self.send_host(reply),
        }
    }

    fn finish_batch(&mut self, b: u64) {
        if let Some(state) = self.batches.remove(&b) {
            if state.parts.is_empty() {
                return;
            }
            let mut out =
                Vec::with_capacity(state.parts.iter().map(|p| p.len() + 1).sum::<usize>() + 2);
            out.push(b'[');
            for (i, p) in state.parts.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(p);
            }
            out.push(b']');
            self.send_host(out);
        }
    }

    fn on_host_batch(&mut self, line: &[u8]) {
        if self.protocol.as_deref() != Some("2025-03-26") {
            let v = self.protocol.as_deref().unwrap_or("not yet negotiated");
            tracing::warn!(
                "host sent a batch; batches exist only in protocol 2025-03-26 (this session: {v})"
            );
            self.send_host(message::error_response(None, code::INVALID_REQUEST, &format!("Invalid Request: JSON-RPC batches are only allowed in protocol revision 2025-03-26 (this session: {v})")));
            return;
        }
        let items: Vec<&RawValue> = match serde_json::from_slice(line) {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!("host sent a malformed batch: {e}");
                self.send_host(message::error_response(
                    None,
                    code::PARSE_ERROR,
                    "Parse error: malformed batch",
                ));
                return;
            }
        };
        if items.is_empty() {
            self.send_host(message::error_response(
                None,
                code::INVALID_REQUEST,
                "Invalid Request: empty batch",
            ));
            return;
        }
        // Count the members that will be answered: requests, and members
        // that are invalid.
        let expected = items
            .iter()
            .filter(|i| match message::parse(i.get().as_bytes()) {
                Ok(e) => e.kind == Kind::Request,
                Err(_) => true,
            })
            .count();
        let b = self.next_batch;
        self.next_batch += 1;
        if expected > 0 {
            self.batches.insert(
                b,
                Batch {
                    remaining: expected,
                    parts: Vec::new(),
                },
            );
        }
        for item in items {
            self.on_host_line(item.get().as_bytes().to_vec(), (expected > 0).then_some(b));
        }
    }

    fn on_host_request(
        &mut self,
        key: String,
        id_raw: String,
        method: &str,
        params: Option<String>,
        line: Vec<u8>,
        batch: Option<u64>,
    ) {
        let cursor = params.as_deref().is_some_and(|p| p.contains("\"cursor\""));
        self.pending_host.insert(
            key.clone(),
            PendingHost {
                id_raw: id_raw.clone(),
                generation: 0,
                method: method.to_string(),
                method_params_cursor: cursor,
                batch,
            },
        );
        match method {
            "initialize" if self.phase == Phase::Start => {
                let params: Value = params
                    .as_deref()
                    .and_then(|p| serde_json::from_str(p).ok())
                    .unwrap_or(Value::Null);
                self.host_has_roots = params
                    .pointer("/capabilities/roots")
                    .is_some_and(Value::is_object);
                self.host_init = Some(params);
                self.phase = Phase::Handshake;
                let Some(g) = self.current.or_else(|| self.start_first_generation()) else {
                    return;
                };
                let init = self.server_initialize_line(&id_raw);
                if let Some(gen_state) = self.gens.get(&g) {
                    gen_state.handle.send(init);
                }
                if let Some(p) = self.pending_host.get_mut(&key) {
                    p.generation = g;
                }
                return;
            }
            "initialize" => {
                self.pending_host.remove(&key);
                let reply = message::error_response(
                    Some(&id_raw),
                    code::INVALID_REQUEST,
                    "Invalid Request: initialize was already sent in this session",
                );
                return self.reply_host(reply, batch);
            }
            "logging/setLevel" => {
                if let Some(level) = params
                    .as_deref()
                    .and_then(|p| serde_json::from_str::<Value>(p).ok())
                    .and_then(|v| v.get("level").and_then(Value::as_str).map(str::to_string))
                {
                    self.log_level = Some(level);
                }
            }
            "resources/subscribe" | "resources/unsubscribe" => {
                if let Some(uri) = params
                    .as_deref()
                    .and_then(|p| serde_json::from_str::<Value>(p).ok())
                    .and_then(|v| v.get("uri").and_then(Value::as_str).map(str::to_string))
                {
                    if method == "resources/subscribe" {
                        self.subscriptions.insert(uri);
                    } else {
                        self.subscriptions.remove(&uri);
                    }
                }
            }
            _ => {}
        }
        if self.phase == Phase::Start && self.current.is_none() {
            // A request before `initialize` (a `server/discover` probe from
            // a newer host): the server answers it, so start it now.
            self.start_first_generation();
        }
        self.forward_host_request(key, line);
    }

    /// Launch the first generation with the static roots (the host's are
    /// known only after `initialized`). Host traffic flows to it at once.
    fn start_first_generation(&mut self) -> Option<u64> {
        let roots = self.compute_roots(false).0;
        let g = self.launch_generation(roots, false)?;
        if let Some(s) = self.gens.get_mut(&g) {
            s.ready = true;
        }
        Some(g)
    }

    /// Forward a host request to the current generation, or hold it.
    fn forward_host_request(&mut self, key: String, line: Vec<u8>) {
        if self.holding() {
            self.queue.push_back(line);
            return;
        }
        let Some(g) = self.current else {
            self.queue.push_back(line);
            return;
        };
        let sent = self.gens.get(&g).is_some_and(|s| s.handle.send(line));
        if sent {
            if let Some(p) = self.pending_host.get_mut(&key) {
                p.generation = g;
            }
        } else if let Some(p) = self.pending_host.remove(&key) {
            let reply = message::error_response(
                Some(&p.id_raw),
                code::SERVER_GONE,
                "the server is not running",
            );
            self.reply_host(reply, p.batch);
        }
    }

    /// Whether host traffic is held (rebuild, restart, waiting for roots).
    fn holding(&self) -> bool {
        self.awaiting_roots
            || self.rising.is_some()
            || self.restart_at.is_some()
            || self
                .current
                .is_none_or(|g| !self.gens.get(&g).is_some_and(|s| s.ready))
    }

    fn flush_queue(&mut self) {
        while !self.holding() {
            let Some(line) = self.queue.pop_front() else {
                break;
            };
            self.route_queued(line);
        }
    }

    fn route_queued(&mut self, line: Vec<u8>) {
        let key = match message::parse(&line) {
            Ok(env) if env.kind == Kind::Request => env.id.map(message::id_key),
            _ => None,
        };
        match key {
            Some(key) => self.forward_host_request(key, line),
            None => {
                if let Some(g) = self.current
                    && let Some(s) = self.gens.get(&g)
                {
                    s.handle.send(line);
                }
            }
        }
    }

    fn on_host_notification(&mut self, method: &str, line: &[u8], env: &Envelope<'_>) {
        match method {
            "notifications/initialized" => {
                self.phase = Phase::Ready;
                self.send_or_queue(line.to_vec());
                if self.host_has_roots && self.accepts_host_roots() {
                    self.await_host_roots();
                }
            }
            "notifications/roots/list_changed" => {
                // rootfence provides the server's roots; the host's change is
                // fetched, validated and turned into a rebuild. Requests the
                // host sends from now on are held until then, so they see the
                // new roots.
                if self.host_has_roots && self.accepts_host_roots() {
                    self.await_host_roots();
                }
            }
            "notifications/cancelled" => {
                let target = env
                    .params
                    .and_then(|p| serde_json::from_str::<Value>(p.get()).ok())
                    .and_then(|v| v.get("requestId").map(Value::to_string));
                let Some(key) = target else {
                    return self.send_or_queue(line.to_vec());
                };
                match self.pending_host.get(&key).map(|p| p.generation) {
                    Some(0) => {
                        // Still queued: drop it; a cancelled request needs no reply.
                        self.pending_host.remove(&key);
                        self.queue.retain(|l| {
                            message::parse(l)
                                .ok()
                                .and_then(|e| e.id.map(message::id_key))
                                .as_deref()
                                != Some(key.as_str())
                        });
                    }
                    Some(g) => {
                        if let Some(s) = self.gens.get(&g) {
                            s.handle.send(line.to_vec());
                        }
                    }
                    None => self.send_or_queue(line.to_vec()),
                }
            }
            _ => self.send_or_queue(line.to_vec()),
        }
    }

    fn send_or_queue(&mut self, line: Vec<u8>) {
        if self.holding() && self.phase != Phase::Handshake {
            self.queue.push_back(line);
        } else if let Some(g) = self.current {
            if let Some(s) = self.gens.get(&g) {
                s.handle.send(line);
            }
        } else {
            self.queue.push_back(line);
        }
    }

    fn on_host_response(&mut self, line: &[u8], env: &Envelope<'_>) {
        let Some(id) = env.id else {
            tracing::warn!("host sent an error response without id: dropped");
            return;
        };
        let key = message::id_key(id);
        match self.to_host.remove(&key) {
            Some(ToHost::RootsList) => {
                let result = env.result.map(|r| r.get().to_string());
                self.on_host_roots(result);
            }
            Some(ToHost::Server {
                generation,
                id_raw,
                check,
            }) => {
                if let Some(check) = check {
                    let result = (!env.is_error).then(|| {
                        env.result
                            .and_then(|r| serde_json::from_str::<Value>(r.get()).ok())
                            .unwrap_or(Value::Null)
                    });
                    if let Err(refusal) = self.guard.on_answer(&check, result.as_ref()) {
                        if let Some(s) = self.gens.get(&generation).filter(|s| !s.stopping) {
                            s.handle.send(refusal.response(&id_raw));
                        }
                        return;
                    }
                }
                let Some(range) = message::span_in(line, id) else {
                    return;
                };
                let out = message::splice(line, range, id_raw.as_bytes());
                match self.gens.get(&generation) {
                    Some(s) if !s.stopping => {
                        s.handle.send(out);
                    }
                    _ => tracing::debug!(
                        generation,
                        "host answered a request of a server that is gone: dropped"
                    ),
                }
            }
            None => {
                tracing::warn!(id = %id.get(), "host sent a response to no request in flight: dropped")
            }
        }
    }

    fn accepts_host_roots(&self) -> bool {
        !self.no_host_roots
            && (self.policy.sources.is_empty() || self.policy.sources.contains(&RootSource::Host))
    }

    /// Ask the host for its roots and hold host traffic until the answer
    /// (and any rebuild it causes) is through, or the timeout passes.
    fn await_host_roots(&mut self) {
        self.awaiting_roots = true;
        let timeout = Duration::from_millis(self.policy.raw.limits.initialize_timeout_ms);
        self.roots_deadline = Some(Instant::now() + timeout);
        self.request_host_roots();
    }

    fn request_host_roots(&mut self) {
        if self.roots_request_in_flight {
            self.roots_request_again = true;
            return;
        }
        self.roots_request_in_flight = true;
        let id = self.alloc_id();
        self.to_host.insert(id.to_string(), ToHost::RootsList);
        self.send_host(message::request(&id.to_string(), "roots/list", None));
    }

    fn on_host_roots(&mut self, result: Option<String>) {
        self.roots_request_in_flight = false;
        match result.as_deref().map(serde_json::from_str::<Value>) {
            Some(Ok(v)) => {
                let access: Access = self.policy.raw.roots.host_access.into();
                let list = v
                    .get("roots")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                let mut inputs = Vec::new();
                for r in list {
                    match r.get("uri").and_then(Value::as_str) {
                        Some(uri) => inputs.push(RootInput::host(
                            uri,
                            r.get("name").and_then(Value::as_str).map(str::to_string),
                            access,
                        )),
                        None => tracing::warn!("host root without a uri: ignored"),
                    }
                }
                // A fresh list from the host re-affirms its roots.
                self.dropped_inputs
                    .retain(|d| !inputs.iter().any(|i| &i.raw == d));
                self.host_roots = inputs;
            }
            Some(Err(e)) => tracing::warn!(
                "host answered roots/list with something unreadable ({e}); keeping the previous host roots"
            ),
            None => tracing::warn!(
                "host answered roots/list with an error; keeping the previous host roots"
            ),
        }
        if self.roots_request_again {
            // Another change came in meanwhile: the newest list decides.
            self.roots_request_again = false;
            self.request_host_roots();
            return;
        }
        if self.awaiting_roots {
            // The host is waiting: no debounce (a burst of changes was
            // already folded into the requests above).
            self.roots_deadline = None;
            self.awaiting_roots = false;
            self.rebuild_force = false;
            self.recompute_roots();
            self.flush_queue();
        } else {
            self.schedule_rebuild(false);
        }
    }

    // ------------------------------------------------------------------
    // Roots and rebuilds

    fn schedule_rebuild(&mut self, force: bool) {
        self.rebuild_force |= force;
        let debounce = Duration::from_millis(self.policy.raw.limits.rebuild_debounce_ms);
        if self.rebuild_at.is_none() {
            self.rebuild_at = Some(Instant::now() + debounce);
        }
    }

    /// Resolve every root input; returns the plan-ready roots and refusals.
    fn compute_roots(&mut self, report: bool) -> (Vec<CanonicalRoot>, Vec<Refusal>) {
        let mut inputs: Vec<RootInput> = self.policy.static_roots.clone();
        inputs.extend(self.cli_roots.iter().cloned());
        if self.accepts_host_roots() {
            inputs.extend(self.host_roots.iter().cloned());
        }
        inputs.retain(|i| !self.dropped_inputs.contains(&i.raw));
        let rules = self.policy.root_rules(self.env.cwd.clone());
        let (ok, refused) = resolve_all(&inputs, &rules);
        for r in &refused {
            tracing::warn!("{r}");
            if report && r.from == RootSource::Host {
                self.log_to_host("warning", &r.to_string());
            }
        }
        (ok, refused)
    }

    /// Send a `notifications/message` to the host when it can receive them.
    fn log_to_host(&self, level: &str, text: &str) {
        let server_logs = self
            .server_init
            .as_ref()
            .is_some_and(|v| v.pointer("/capabilities/logging").is_some());
        if !server_logs {
            return;
        }
        const ORDER: [&str; 8] = [
            "debug",
            "info",
            "notice",
            "warning",
            "error",
            "critical",
            "alert",
            "emergency",
        ];
        let rank = |l: &str| ORDER.iter().position(|x| *x == l).unwrap_or(0);
        if self
            .log_level
            .as_deref()
            .is_some_and(|min| rank(level) < rank(min))
        {
            return;
        }
        let params = serde_json::json!({"level": level, "logger": "rootfence", "data": text});
        self.send_host(message::notification(
            "notifications/message",
            Some(&params.to_string()),
        ));
    }

    fn plan_for(&self, roots: Vec<CanonicalRoot>, refused: Vec<Refusal>) -> SandboxPlan {
        plan::build(&self.policy, roots, refused, self.spec.clone(), &self.env)
    }

    fn recompute_roots(&mut self) {
        let (ok, refused) = self.compute_roots(true);
        let plan = self.plan_for(ok, refused);
        let same_rights = plan.roots.len() == self.enforced.len()
            && plan
                .roots
                .iter()
                .zip(&self.enforced)
                .all(|(a, b)| a.path == b.path && a.access == b.access && a.kind == b.kind);
        let force = std::mem::take(&mut self.rebuild_force);
        if same_rights && !force {
            let same_names = plan
                .roots
                .iter()
                .zip(&self.enforced)
                .all(|(a, b)| a.name == b.name && a.uri == b.uri);
            if !same_names {
                tracing::info!("root names changed: notifying the server, no relaunch");
                self.set_enforced(plan.roots.clone());
                if let Some(g) = self.current.and_then(|g| self.gens.get_mut(&g)) {
                    g.roots = plan.roots;
                    g.handle.send(message::notification(
                        "notifications/roots/list_changed",
                        None,
                    ));
                }
            }
            return;
        }
        if self.server_init.is_none() && self.phase != Phase::Ready {
            // Not yet through the first handshake: nothing to replay.
            return;
        }
        tracing::info!(
            roots = plan.roots.len(),
            "roots changed: rebuilding the sandbox"
        );
        self.launch_generation(plan.roots, true);
    }

    /// Launch a generation for `roots`. With `replay`, it is brought up with
    /// the recorded handshake and replaces the current one when ready.
    fn launch_generation(&mut self, roots: Vec<CanonicalRoot>, replay: bool) -> Option<u64> {
        let plan = self.plan_for(roots, Vec::new());
        let g = self.next_gen;
        self.next_gen += 1;
        let proc = match self.launcher.launch(&plan) {
            Ok(p) => p,
            Err(e) => {
                tracing::error!("cannot launch the server: {e}");
                self.launch_failed(e);
                return None;
            }
        };
        let max = usize::try_from(self.policy.raw.limits.max_message_bytes).unwrap_or(usize::MAX);
        let handle = match Generation::start(g, proc, max, self.server_events.clone()) {
            Ok(h) => h,
            Err(e) => {
                self.launch_failed(e);
                return None;
            }
        };
        tracing::info!(
            generation = g,
            pid = handle.pid,
            roots = plan.roots.len(),
            "server launched"
        );
        let mut state = GenState {
            handle,
            roots: plan.roots.clone(),
            ready: false,
            draining_until: None,
            own: HashMap::new(),
            stopping: false,
        };
        if replay {
            let id = format!("\"rootfence-init-{g}\"");
            state
                .own
                .insert(message::id_key_str(&id), OwnServerReq::Initialize);
            state.handle.send(self.server_initialize_line(&id));
            // A previous rising generation is abandoned.
            if let Some(old) = self.rising.replace(g) {
                self.stop_generation(old);
            }
        } else {
            self.current = Some(g);
            self.set_enforced(plan.roots.clone());
        }
        self.gens.insert(g, state);
        Some(g)
    }

    fn launch_failed(&mut self, e: String) {
        // Fail closed: no server is better than one with the wrong roots.
        if let Some(g) = self.current.take() {
            self.fail_pending_of(g, "the server could not be relaunched");
            self.stop_generation(g);
        }
        let unanswered: Vec<String> = self.pending_host.keys().cloned().collect();
        for k in unanswered {
            if let Some(p) = self.pending_host.remove(&k) {
                let reply = message::error_response(
                    Some(&p.id_raw),
                    code::SERVER_GONE,
                    &format!("rootfence could not launch the server: {e}"),
                );
                self.reply_host(reply, p.batch);
            }
        }
        self.queue.clear();
        self.end(Ending::LaunchFailed(e));
    }

    /// The `initialize` line for a server: the host's params with
    /// `capabilities.roots = {"listChanged": true}`, and without the
    /// sampling/elicitation capabilities the policy denies.
    fn server_initialize_line(&self, id_raw: &str) -> Vec<u8> {
        let mut params = self
            .host_init
            .clone()
            .unwrap_or_else(|| serde_json::json!({}));
        if !params.is_object() {
            params = serde_json::json!({});
        }
        if let Some(obj) = params.as_object_mut() {
            let caps = obj
                .entry("capabilities")
                .or_insert_with(|| serde_json::json!({}));
            if !caps.is_object() {
                *caps = serde_json::json!({});
            }
            if let Some(c) = caps.as_object_mut() {
                c.insert("roots".into(), serde_json::json!({"listChanged": true}));
                guard::shape_capabilities(c, &self.policy.raw);
            }
        }
        message::request(id_raw, "initialize", Some(&params.to_string()))
    }

    fn set_enforced(&mut self, roots: Vec<CanonicalRoot>) {
        if let Some(obs) = self.roots_observer.as_mut() {
            let paths: Vec<std::path::PathBuf> = roots.iter().map(|r| r.path.clone()).collect();
            obs(&paths);
        }
        self.enforced = roots;
    }

    fn check_roots_on_disk(&mut self) {
        let mut changed = false;
        for r in &self.enforced {
            if !r.handle.still_at(&r.path) {
                tracing::warn!(root = %r.uri, "root directory was deleted, renamed or replaced: dropping it");
                self.dropped_inputs.insert(r.input.clone());
                changed = true;
            }
        }
        if changed {
            self.schedule_rebuild(false);
        }
    }

    // ------------------------------------------------------------------
    // Server side

    fn on_server_too_long(&mut self, g: u64, len: u64, head: &[u8]) {
        let (id, method) = message::sniff(head);
        let max = self.policy.raw.limits.max_message_bytes;
        tracing::warn!(
            generation = g,
            bytes = len,
            "server message over limits.max_message_bytes = {max}: dropped"
        );
        let Some(id) = id else { return };
        if method.is_some() {
            // A request from the server: refuse it back to the server.
            if let Some(s) = self.gens.get(&g) {
                s.handle.send(message::error_response(
                    Some(&id),
                    code::INVALID_REQUEST,
                    &format!("message of {len} bytes exceeds the limit of {max} bytes"),
                ));
            }
            return;
        }
        // A response too large for the host: answer the host with an error.
        let key = message::id_key_str(&id);
        if self
            .pending_host
            .get(&key)
            .is_some_and(|p| p.generation == g)
        {
            if let Some(p) = self.pending_host.remove(&key) {
                let reply = message::error_response(
                    Some(&p.id_raw),
                    code::INTERNAL_ERROR,
                    &format!(
                        "the server's response of {len} bytes exceeds the limit of {max} bytes (limits.max_message_bytes in the rootfence policy)"
                    ),
                );
                self.reply_host(reply, p.batch);
            }
            self.after_response(g);
        }
    }

    fn on_server_line(&mut self, g: u64, line: Vec<u8>) {
        let env = match message::parse(&line) {
            Ok(env) => env,
            Err(Invalid::Batch) => {
                if self.protocol.as_deref() == Some("2025-03-26")
                    && let Ok(items) = serde_json::from_slice::<Vec<&RawValue>>(&line)
                {
                    for item in items {
                        self.on_server_line(g, item.get().as_bytes().to_vec());
                    }
                    return;
                }
                tracing::warn!(
                    generation = g,
                    "server sent a batch outside protocol 2025-03-26: refused"
                );
                if let Some(s) = self.gens.get(&g) {
                    s.handle.send(message::error_response(
                        None,
                        code::INVALID_REQUEST,
                        "Invalid Request: batches are not allowed in this protocol revision",
                    ));
                }
                return;
            }
            Err(Invalid::NotJson(e)) => {
                tracing::warn!(
                    generation = g,
                    "server wrote a line that is not JSON ({e}): dropped"
                );
                if let Some(s) = self.gens.get(&g) {
                    s.handle.send(message::error_response(
                        None,
                        code::PARSE_ERROR,
                        "Parse error: not JSON",
                    ));
                }
                return;
            }
            Err(Invalid::NotJsonRpc { why, id }) => {
                tracing::warn!(
                    generation = g,
                    "server sent an invalid JSON-RPC message ({why}): dropped"
                );
                if let Some(s) = self.gens.get(&g) {
                    s.handle.send(message::error_response(
                        id.as_deref(),
                        code::INVALID_REQUEST,
                        &format!("Invalid Request: {why}"),
                    ));
                }
                return;
            }
        };
        match env.kind {
            Kind::Response => {
                let Some(id) = env.id else {
                    tracing::warn!(
                        generation = g,
                        "server sent an error response without id: dropped"
                    );
                    return;
                };
                let key = message::id_key(id);
                let own = self.gens.get_mut(&g).and_then(|s| s.own.remove(&key));
                if let Some(own) = own {
                    let result = env.result.map(|r| r.get().to_string());
                    drop(env);
                    return self.on_own_response(g, own, result);
                }
                match self.pending_host.get(&key) {
                    Some(p) if p.generation == g => {
                        let Some(p) = self.pending_host.remove(&key) else {
                            return;
                        };
                        if p.method == "initialize"
                            && self.server_init.is_none()
                            && let Some(r) = env.result
                        {
                            self.record_server_init(r.get());
                        }
                        if let (Some(list), Some(r)) = (list_method(&p.method), env.result) {
                            // Only first pages are compared across rebuilds.
                            let paged = p.method_params_cursor;
                            if !paged {
                                self.lists.insert(list, r.get().to_string());
                            }
                        }
                        drop(env);
                        self.reply_host(line, p.batch);
                        self.after_response(g);
                    }
                    _ => {
                        tracing::warn!(generation = g, id = %id.get(), "server answered no request in flight: dropped")
                    }
                }
            }
            Kind::Request => {
                let method = env.method.as_deref().unwrap_or_default().to_string();
                let Some(id) = env.id else { return };
                let id_raw = id.get().to_string();
                if method == "roots/list" {
                    let reply = self.roots_result(g, &id_raw);
                    if let Some(s) = self.gens.get(&g) {
                        s.handle.send(reply);
                    }
                    return;
                }
                let Some(range) = message::span_in(&line, id) else {
                    return;
                };
                let (mut params, mut check) = (None, None);
                if guard::GUARDED.contains(&method.as_str()) {
                    match self.guard_request(g, &method, env.params, line.len()) {
                        guard::Verdict::Refuse(refusal) => {
                            if let Some(s) = self.gens.get(&g) {
                                s.handle.send(refusal.response(&id_raw));
                            }
                            return;
                        }
                        guard::Verdict::Forward {
                            params: p,
                            check: c,
                        } => (params, check) = (p, c),
                    }
                }
                let host_id = self.alloc_id();
                let out = match params {
                    // A clamp: the request is rewritten.
                    Some(p) => {
                        message::request(&host_id.to_string(), &method, Some(&p.to_string()))
                    }
                    None => message::splice(&line, range, host_id.to_string().as_bytes()),
                };
                self.to_host.insert(
                    host_id.to_string(),
                    ToHost::Server {
                        generation: g,
                        id_raw,
                        check,
                    },
                );
                self.send_host(out);
            }
            Kind::Notification => {
                let method = env.method.as_deref().unwrap_or_default().to_string();
                if method == "notifications/cancelled" {
                    // The server cancels one of its requests to the host: use
                    // the id the host knows.
                    let target = env
                        .params
                        .and_then(|p| serde_json::from_str::<CancelParams<'_>>(p.get()).ok());
                    if let Some(t) = target {
                        let orig = message::id_key(t.request_id.into());
                        let host_id = self.to_host.iter().find_map(|(k, v)| match v {
                            ToHost::Server {
                                generation, id_raw, ..
                            } if *generation == g && message::id_key_str(id_raw) == orig => {
                                Some(k.clone())
                            }
                            _ => None,
                        });
                        if let (Some(hid), Some(range)) =
                            (host_id, message::span_in(&line, t.request_id.into()))
                        {
                            self.to_host.remove(&hid);
                            let out = message::splice(&line, range, hid.as_bytes());
                            return self.send_host(out);
                        }
                        return tracing::debug!(
                            "server cancelled a request the host never saw: dropped"
                        );
                    }
                }
                if self.gens.get(&g).is_some_and(|s| s.stopping) {
                    return;
                }
                drop(env);
                self.send_host(line);
            }
        }
    }

    /// Ask the guard about a server request `method` in [`guard::GUARDED`].
    fn guard_request(
        &mut self,
        g: u64,
        method: &str,
        params: Option<message::Raw<'_>>,
        bytes: usize,
    ) -> guard::Verdict {
        let params: Value = params
            .and_then(|p| serde_json::from_str(p.get()).ok())
            .unwrap_or(Value::Null);
        let requested = self
            .host_init
            .as_ref()
            .and_then(|v| v.get("protocolVersion"))
            .and_then(Value::as_str);
        // Negotiated, else what the host asked for, else the newest
        // handshake revision.
        let revision = Revision::parse(
            self.protocol
                .as_deref()
                .or(requested)
                .unwrap_or("2025-11-25"),
        );
        let host_caps = self
            .host_init
            .as_ref()
            .and_then(|v| v.get("capabilities"))
            .unwrap_or(&Value::Null);
        let ctx = guard::Context {
            policy: &self.policy,
            revision,
            host_caps,
            generation: g,
        };
        self.guard
            .on_request(ctx, method, &params, bytes, std::time::Instant::now())
    }

    fn roots_result(&self, g: u64, id_raw: &str) -> Vec<u8> {
        let roots = self
            .gens
            .get(&g)
            .map(|s| s.roots.as_slice())
            .unwrap_or_default();
        let list: Vec<Value> = roots
            .iter()
            .map(|r| serde_json::json!({"uri": r.uri, "name": r.name}))
            .collect();
        message::result_response(id_raw, &serde_json::json!({"roots": list}).to_string())
    }

    fn record_server_init(&mut self, result: &str) {
        if let Ok(v) = serde_json::from_str::<Value>(result) {
            self.protocol = v
                .get("protocolVersion")
                .and_then(Value::as_str)
                .map(str::to_string);
            self.server_init = Some(v);
        }
    }

    fn on_own_response(&mut self, g: u64, own: OwnServerReq, result: Option<String>) {
        match own {
            OwnServerReq::Initialize => {
                if result.is_none() {
                    tracing::error!(
                        generation = g,
                        "the relaunched server refused the replayed initialize"
                    );
                    self.stop_generation(g);
                    if self.rising == Some(g) {
                        self.rising = None;
                    }
                    self.launch_failed("the relaunched server refused initialize".into());
                    return;
                }
                self.promote(g, result.as_deref());
            }
            OwnServerReq::Replay => {}
            OwnServerReq::List(method) => {
                let Some(new) = result else { return };
                let Some(old) = self.lists.insert(method, new.clone()) else {
                    // The host never listed: nothing to compare with.
                    return;
                };
                if !same_json(&new, &old) {
                    let note = match method {
                        "tools/list" => "notifications/tools/list_changed",
                        "prompts/list" => "notifications/prompts/list_changed",
                        _ => "notifications/resources/list_changed",
                    };
                    tracing::info!("the relaunched server's {method} differs: telling the host");
                    self.send_host(message::notification(note, None));
                }
            }
        }
    }

    /// A rebuilt generation finished its handshake: make it current.
    fn promote(&mut self, g: u64, init_result: Option<&str>) {
        let Some(state) = self.gens.get_mut(&g) else {
            return;
        };
        state
            .handle
            .send(message::notification("notifications/initialized", None));
        let mut own_sends = Vec::new();
        if let Some(level) = &self.log_level {
            own_sends.push(("logging/setLevel", serde_json::json!({"level": level})));
        }
        for uri in &self.subscriptions {
            own_sends.push(("resources/subscribe", serde_json::json!({"uri": uri})));
        }
        let caps = init_result
            .and_then(|r| serde_json::from_str::<Value>(r).ok())
            .and_then(|v| v.get("capabilities").cloned())
            .unwrap_or(Value::Null);
        for (cap, method) in [
            ("tools", "tools/list"),
            ("prompts", "prompts/list"),
            ("resources", "resources/list"),
        ] {
            if caps.get(cap).is_some() {
                own_sends.push((method, serde_json::json!({})));
            }
        }
        for (i, (method, params)) in own_sends.into_iter().enumerate() {
            let id = format!("\"rootfence-{g}-{i}\"");
            let kind = match list_method(method) {
                Some(m) => OwnServerReq::List(m),
                None => OwnServerReq::Replay,
            };
            state.own.insert(message::id_key_str(&id), kind);
            state
                .handle
                .send(message::request(&id, method, Some(&params.to_string())));
        }
        state.ready = true;
        let roots = state.roots.clone();
        self.set_enforced(roots);
        if self.rising == Some(g) {
            self.rising = None;
        }
        let old = self.current.replace(g);
        if let Some(old) = old.filter(|o| *o != g) {
            let has_pending = self.pending_host.values().any(|p| p.generation == old);
            if has_pending {
                let drain = Duration::from_millis(self.policy.raw.limits.drain_timeout_ms);
                if let Some(o) = self.gens.get_mut(&old) {
                    o.draining_until = Some(Instant::now() + drain);
                }
            } else {
                self.stop_generation(old);
            }
        }
        self.flush_queue();
        if let Some(state) = self.gens.get(&g) {
            state.handle.send(message::notification(
                "notifications/roots/list_changed",
                None,
            ));
        }
        tracing::info!(generation = g, "rebuild complete");
    }

    /// After a host request of generation `g` was answered.
    fn after_response(&mut self, g: u64) {
        let draining = self
            .gens
            .get(&g)
            .is_some_and(|s| s.draining_until.is_some());
        if draining && !self.pending_host.values().any(|p| p.generation == g) {
            self.stop_generation(g);
        }
    }

    fn stop_generation(&mut self, g: u64) {
        let grace = Duration::from_millis(self.policy.raw.limits.shutdown_grace_ms);
        if let Some(s) = self.gens.get_mut(&g) {
            s.stopping = true;
            s.draining_until = None;
            s.handle.shutdown(grace);
        }
        self.to_host
            .retain(|_, v| !matches!(v, ToHost::Server { generation, .. } if *generation == g));
    }

    fn fail_pending_of(&mut self, g: u64, why: &str) {
        let keys: Vec<String> = self
            .pending_host
            .iter()
            .filter(|(_, p)| p.generation == g)
            .map(|(k, _)| k.clone())
            .collect();
        for k in keys {
            if let Some(p) = self.pending_host.remove(&k) {
                let reply = message::error_response(Some(&p.id_raw), code::SERVER_GONE, why);
                self.reply_host(reply, p.batch);
            }
        }
    }

    fn on_server_exit(&mut self, g: u64, status: Option<super::server::ExitInfo>) {
        let Some(state) = self.gens.remove(&g) else {
            return;
        };
        let what = status.map_or_else(|| "ended".to_string(), |s| s.to_string());
        self.to_host
            .retain(|_, v| !matches!(v, ToHost::Server { generation, .. } if *generation == g));
        if state.stopping {
            tracing::debug!(generation = g, "server stopped ({what})");
            let why = if self.ending.is_some() {
                "the session is ending"
            } else {
                "the server was restarted because its roots changed"
            };
            self.fail_pending_of(g, why);
            return;
        }
        tracing::warn!(generation = g, "server exited unexpectedly ({what})");
        self.fail_pending_of(g, &format!("the server exited ({what}) before answering"));
        if self.rising == Some(g) {
            self.rising = None;
            self.launch_failed(format!(
                "the relaunched server exited during its handshake ({what})"
            ));
            return;
        }
        if self.current != Some(g) {
            return;
        }
        self.current = None;
        if self.ending.is_some() {
            return;
        }
        let success = status.is_some_and(|s| s.success());
        let limits = &self.policy.raw.limits;
        let restart = match limits.restart {
            RestartName::Never => false,
            RestartName::OnFailure => !success,
            RestartName::Always => true,
        };
        if !restart || self.restarts >= limits.max_restarts || self.server_init.is_none() {
            let why = if restart && self.server_init.is_some() {
                format!(
                    "the server exited ({what}) and limits.max_restarts = {} is used up",
                    limits.max_restarts
                )
            } else {
                format!("the server exited ({what})")
            };
            self.fail_queue(&why);
            self.end(Ending::ServerEnded(why));
            return;
        }
        let backoff = limits
            .restart_backoff_ms
            .saturating_mul(1u64 << self.restarts.min(16));
        self.restarts += 1;
        tracing::warn!(
            attempt = self.restarts,
            "restarting the server in {backoff} ms"
        );
        self.restart_at = Some(Instant::now() + Duration::from_millis(backoff));
    }

    fn fail_queue(&mut self, why: &str) {
        self.queue.clear();
        let keys: Vec<String> = self.pending_host.keys().cloned().collect();
        for k in keys {
            if let Some(p) = self.pending_host.remove(&k) {
                let reply = message::error_response(Some(&p.id_raw), code::SERVER_GONE, why);
                self.reply_host(reply, p.batch);
            }
        }
    }

    fn end(&mut self, why: Ending) {
        if self.ending.is_none() {
            tracing::info!("session ending: {why:?}");
            self.ending = Some(why);
        }
        let gens: Vec<u64> = self.gens.keys().copied().collect();
        for g in gens {
            if !self.gens.get(&g).is_some_and(|s| s.stopping) {
                self.stop_generation(g);
            }
        }
        self.rebuild_at = None;
        self.restart_at = None;
        self.roots_deadline = None;
    }
}

#[derive(serde::Deserialize)]
struct CancelParams<'a> {
    #[serde(rename = "requestId", borrow)]
    request_id: &'a RawValue,
}

fn list_method(method: &str) -> Option<&'static str> {
    match method {
        "tools/list" => Some("tools/list"),
        "prompts/list" => Some("prompts/list"),
        "resources/list" => Some("resources/list"),
        _ => None,
    }
}

fn same_json(a: &str, b: &str) -> bool {
    match (
        serde_json::from_str::<Value>(a),
        serde_json::from_str::<Value>(b),
    ) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}
