//! Tests of the session core, driven with no process and no sleep: a
//! simulated host, simulated server generations and a virtual clock
//! ([`Sim`]). `races.rs` plays each known race as a scenario; `model.rs`
//! drives random interleavings against a small reference model.

mod fail_closed;
mod fast_path;
mod model;
mod notes;
mod races;
mod remembered;
mod stateless;

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Action, Event, GenId, PlanRequest, Planned, Session, SessionConfig, Stop};
use crate::plan::SandboxPlan;
use crate::policy::Policy;
use crate::proxy::server::LaunchError;
use crate::proxy::session::Frame;
use crate::proxy::session::{ExitInfo, ServerEvent};
use crate::roots::{Access, RootInput};
use crate::runtime::HostEnv;

/// A scratch tree: directories `a`, `b`, `c` (the roots the tests use)
/// and a home.
pub struct Tree {
    _dir: tempfile::TempDir,
    pub base: PathBuf,
}

impl Tree {
    pub fn new() -> Tree {
        let dir = tempfile::tempdir().expect("temporary directory");
        let base = std::fs::canonicalize(dir.path()).expect("canonical");
        for d in ["a", "b", "c", "home"] {
            std::fs::create_dir_all(base.join(d)).expect("mkdir");
        }
        Tree { _dir: dir, base }
    }

    pub fn p(&self, name: &str) -> PathBuf {
        self.base.join(name)
    }

    /// A policy: the tree as ceiling, these TCP ports, short limits, and
    /// `extra` limits.
    pub fn policy(&self, ports: &[u16], extra: &str) -> Policy {
        let ports: Vec<String> = ports.iter().map(u16::to_string).collect();
        let mut limits = String::new();
        for (k, v) in [
            ("rebuild_debounce_ms", "0"),
            ("drain_timeout_ms", "300"),
            ("shutdown_grace_ms", "100"),
            ("restart_backoff_ms", "50"),
            ("initialize_timeout_ms", "1000"),
            ("roots_timeout_ms", "1000"),
        ] {
            if !extra.contains(k) {
                limits.push_str(&format!("{k} = {v}\n"));
            }
        }
        let text = format!(
            "[roots]\nallow_under = [\"{}\"]\n[network]\ntcp_connect = [{}]\n[limits]\n{limits}{extra}",
            self.base.display(),
            ports.join(", ")
        );
        Policy::parse(&text, None, Some(&self.p("home"))).expect("policy")
    }

    pub fn config(&self, policy: Policy, cli: &[&str]) -> SessionConfig {
        SessionConfig {
            policy,
            cli_roots: cli
                .iter()
                .map(|c| {
                    RootInput::command_line(self.p(c).display().to_string(), Access::ReadWrite)
                })
                .collect(),
            no_host_roots: false,
            command: vec!["/bin/true".into()],
            env: HostEnv {
                vars: [("PATH".to_string(), "/usr/bin:/bin".to_string())]
                    .into_iter()
                    .collect(),
                home: Some(self.p("home")),
                cwd: Some(self.base.clone()),
                host_set: None,
            },
            roots_observer: None,
            remembered_init: None,
            remember: None,
        }
    }
}

/// A planner that reads no file once the session is up: each root input
/// is taken as the directory its text names (no root is opened, none is
/// refused, the policy's ceiling is not looked at), and put in the plan
/// the first request got (the only one built, with no root: it reads what
/// a plan reads besides roots). Each path gets one handle on no file, kept
/// across plans (the same directory in every plan); the ports are the
/// policy's.
pub fn fake_planner() -> Box<dyn FnMut(&PlanRequest) -> Planned> {
    let mut handles: HashMap<PathBuf, crate::roots::RootHandle> = HashMap::new();
    let mut base: Option<SandboxPlan> = None;
    Box::new(move |request: &PlanRequest| {
        let mut plan = base
            .get_or_insert_with(|| {
                crate::plan::build(
                    &request.policy,
                    Vec::new(),
                    Vec::new(),
                    request.spec.clone(),
                    &request.env,
                )
            })
            .clone();
        let mut roots: Vec<crate::roots::CanonicalRoot> = Vec::new();
        for input in &request.inputs {
            let path = crate::roots::parse_file_uri(&input.raw)
                .unwrap_or_else(|_| PathBuf::from(&input.raw));
            if roots.iter().any(|r| r.path == path) {
                continue;
            }
            let handle = handles
                .entry(path.clone())
                .or_insert_with(crate::roots::RootHandle::detached)
                .clone();
            let name = input.name.clone().unwrap_or_else(|| {
                path.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default()
            });
            roots.push(crate::roots::CanonicalRoot {
                uri: crate::roots::path_to_uri(&path),
                name,
                path,
                access: input.access,
                kind: crate::roots::RootKind::Directory,
                source: input.source,
                input: input.raw.clone(),
                handle,
                control: (Vec::new(), false),
            });
        }
        roots.sort_by(|a, b| a.path.cmp(&b.path));
        plan.grants
            .extend(crate::plan::root_grants(&roots, plan.exec_in_roots));
        plan.roots = roots;
        plan.network.tcp_connect.clone_from(&request.policy.tcp_connect);
        Planned {
            seq: request.seq,
            policy: request.policy.clone(),
            rights: super::Entitlements::of(&plan),
            plan,
            discovered: request.discover.then(|| Ok(request.spec.clone())),
            moved: Vec::new(),
        }
    })
}

/// How a launch goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Launch {
    /// Up at once.
    Fast,
    /// Answers nothing until [`Sim::start`].
    Slow,
    /// Never answers `initialize`.
    Mute,
    /// The launcher fails.
    Fail,
}

/// A simulated server generation.
#[derive(Debug)]
pub struct Server {
    pub id: GenId,
    pub roots: BTreeSet<PathBuf>,
    pub ports: BTreeSet<u16>,
    pub kind: Launch,
    pub started: bool,
    /// Lines received, not yet processed.
    pub inbox: VecDeque<Value>,
    /// Slow tool calls held (ids).
    pub held: Vec<Value>,
    /// Every line received.
    pub got: Vec<Value>,
    /// Host requests received (their ids, as the server saw them).
    pub host_requests: usize,
    pub stop: Option<Stop>,
    pub stdout_closed: bool,
    pub exited: bool,
    /// Its own requests to the host, waiting for an answer: id → the
    /// progress notifications received about it.
    pub asked: BTreeMap<i64, Vec<Value>>,
    /// Answers to its own requests, with the progress seen meanwhile.
    pub answered: Vec<(i64, Vec<Value>)>,
    next_ask: i64,
}

/// The session core with a simulated host, servers and clock.
pub struct Sim {
    pub tree: Tree,
    pub s: Session,
    pub now: Instant,
    pub servers: BTreeMap<GenId, Server>,
    /// How the next launches go (then [`Launch::Fast`]).
    pub script: VecDeque<Launch>,
    /// Everything the host received, parsed (batches as arrays).
    pub host_got: Vec<Value>,
    /// What the host answers to `roots/list`.
    pub host_roots: Vec<PathBuf>,
    /// Answer `roots/list` at once.
    pub auto_roots: bool,
    /// `roots/list` requests not yet answered (their ids).
    pub roots_asked: Vec<Value>,
    /// Server requests the host has not answered (id, progress token).
    pub server_asks: Vec<(Value, Option<Value>)>,
    /// Responses to host requests, by id text.
    pub answers: HashMap<String, Vec<Value>>,
    /// Every action, for failure messages.
    pub trace: Vec<String>,
    /// The reference model's target, when the invariants are checked: as
    /// the host and the policy last set it.
    pub model: Option<Model>,
    /// The model's target in force: [`Sim::model`] as it was when the
    /// plan that is the session's target was asked for (the target
    /// changes when its plan comes); a policy that cannot be read
    /// suspends it at once.
    in_force: Option<Model>,
    /// The model's target as each plan asked for was asked.
    plan_models: HashMap<u64, Model>,
    /// Invariants broken, with the step.
    pub violations: Vec<String>,
    /// Generations seen serving.
    promoted: BTreeSet<GenId>,
    /// Requests the host sent, by id text: how many answers each may get.
    pub expected: HashMap<String, usize>,
    /// The raw lines the host received.
    pub host_raw: Vec<String>,
    /// The raw lines each generation received.
    pub server_raw: Vec<(GenId, Vec<u8>)>,
    /// When each request (by id text) was first answered.
    pub answered_at: HashMap<String, Instant>,
    /// The host closed its side.
    pub host_closed: bool,
    /// Handshakes the session asked to remember.
    pub remembered: Vec<crate::proxy::init_cache::RememberedInit>,
    /// The servers declare no `logging` capability.
    pub no_logging: bool,
    /// Makes the plans the session asks for (the real planner unless a
    /// test says otherwise), at once unless [`Sim::hold_plans`].
    pub planner: Box<dyn FnMut(&PlanRequest) -> Planned>,
    /// Keep the plans asked for until [`Sim::deliver_plans`].
    pub hold_plans: bool,
    /// The plans asked for and held.
    pub plans_held: Vec<PlanRequest>,
    events: VecDeque<Event>,
}

/// What the target should be, by the reference model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Model {
    /// Root directories.
    pub roots: BTreeSet<PathBuf>,
    /// TCP ports.
    pub ports: BTreeSet<u16>,
    /// The last policy edit cannot be read: nothing is granted.
    pub suspended: bool,
}

impl Model {
    fn grants_all_of(&self, s: &Server) -> bool {
        !self.suspended && s.roots.is_subset(&self.roots) && s.ports.is_subset(&self.ports)
    }

    fn is(&self, s: &Server) -> bool {
        !self.suspended && s.roots == self.roots && s.ports == self.ports
    }
}

fn plan_ports(plan: &SandboxPlan) -> BTreeSet<u16> {
    plan.network.tcp_connect.iter().copied().collect()
}

impl Sim {
    pub fn new(tree: Tree, config: SessionConfig) -> Sim {
        let (spec, first) = crate::proxy::planner::first(
            &config.policy,
            &config.cli_roots,
            &config.command,
            &config.env,
        )
        .expect("session");
        Sim::started(tree, Session::new(config, spec, first))
    }

    /// A session whose every plan, its first included, `planner` makes,
    /// its command taken as found with nothing discovered.
    pub fn with_planner(
        tree: Tree,
        config: SessionConfig,
        mut planner: Box<dyn FnMut(&PlanRequest) -> Planned>,
    ) -> Sim {
        let program = config.command.first().cloned().unwrap_or_default();
        let spec = crate::runtime::CommandSpec::with_needs(program, Vec::new());
        let mut inputs = config.policy.static_roots.clone();
        inputs.extend(config.cli_roots.iter().cloned());
        let first = planner(&PlanRequest {
            seq: 1,
            policy: Arc::new(config.policy.clone()),
            inputs,
            command: config.command.clone().into(),
            env: Arc::new(config.env.clone()),
            spec: spec.clone(),
            discover: false,
            check: Vec::new(),
        });
        let mut sim = Sim::started(tree, Session::new(config, spec, first));
        sim.planner = planner;
        sim
    }

    fn started(tree: Tree, s: Session) -> Sim {
        Sim {
            tree,
            s,
            now: Instant::now(),
            servers: BTreeMap::new(),
            script: VecDeque::new(),
            host_got: Vec::new(),
            host_roots: Vec::new(),
            auto_roots: true,
            roots_asked: Vec::new(),
            server_asks: Vec::new(),
            answers: HashMap::new(),
            trace: Vec::new(),
            model: None,
            in_force: None,
            plan_models: HashMap::new(),
            violations: Vec::new(),
            promoted: BTreeSet::new(),
            expected: HashMap::new(),
            host_raw: Vec::new(),
            server_raw: Vec::new(),
            answered_at: HashMap::new(),
            host_closed: false,
            remembered: Vec::new(),
            no_logging: false,
            planner: Box::new(crate::proxy::planner::plan),
            hold_plans: false,
            plans_held: Vec::new(),
            events: VecDeque::new(),
        }
    }

    /// A session with the default test policy and these command-line
    /// roots.
    pub fn with(cli: &[&str], ports: &[u16], extra: &str) -> Sim {
        let tree = Tree::new();
        let config = tree.config(tree.policy(ports, extra), cli);
        Sim::new(tree, config)
    }

    // ------------------------------------------------------------------
    // Driving

    /// Deliver an event, then everything it leads to.
    pub fn event(&mut self, ev: Event) {
        if matches!(ev, Event::HostEof) {
            self.host_closed = true;
        } else if self.host_closed && matches!(ev, Event::Host(_)) {
            // The host closed its side: it sends nothing more.
            return;
        }
        self.events.push_back(ev);
        self.pump();
    }

    fn pump(&mut self) {
        loop {
            while let Some(ev) = self.events.pop_front() {
                self.trace.push(format!("event {}", short(&ev)));
                self.model_in_force(&ev);
                self.s.on_event(ev, self.now);
                self.run_actions();
                self.after_step();
            }
            if self.s.next_deadline().is_some_and(|d| d <= self.now) {
                self.trace.push("timer".into());
                self.s.on_timer(self.now);
                self.run_actions();
                self.after_step();
            }
            if self.events.is_empty() && self.s.next_deadline().is_none_or(|d| d > self.now) {
                self.after_pump();
                return;
            }
        }
    }

    /// The model's target in force once `ev` is taken: the one a plan
    /// was asked for under, when it is the one the session waits for.
    fn model_in_force(&mut self, ev: &Event) {
        if self.in_force.is_none() {
            self.in_force.clone_from(&self.model);
        }
        match ev {
            Event::Planned(p) if self.s.planning.is_some_and(|w| w.seq == p.seq) => {
                if let Some(m) = self.plan_models.remove(&p.seq) {
                    self.in_force = Some(m);
                }
            }
            Event::PolicyChanged(Err(_)) => {
                if let Some(m) = self.in_force.as_mut() {
                    m.suspended = true;
                }
            }
            _ => {}
        }
    }

    /// Move the clock, firing each timer at its own instant.
    pub fn advance(&mut self, ms: u64) {
        let end = self.now + Duration::from_millis(ms);
        while let Some(d) = self.s.next_deadline().filter(|d| *d <= end) {
            self.now = self.now.max(d);
            self.pump();
            if self.s.next_deadline() == Some(d) {
                break;
            }
        }
        self.now = end;
        self.pump();
    }

    /// Move the clock to the next timer, if any; returns whether there
    /// was one.
    pub fn jump_to_next_timer(&mut self) -> bool {
        match self.s.next_deadline() {
            Some(d) => {
                if d > self.now {
                    self.now = d;
                }
                self.pump();
                true
            }
            None => false,
        }
    }

    fn violation(&mut self, what: String) {
        self.trace.push(format!("VIOLATION {what}"));
        self.violations.push(what);
    }

    /// The invariants that hold once a step (an event and the timers it
    /// makes due) is through, by the model.
    fn after_pump(&mut self) {
        let Some(model) = self.in_force.clone() else {
            return;
        };
        // Revocation first: a live generation with a right outside the
        // target was killed in the same step.
        let unkilled: Vec<GenId> = self
            .servers
            .values()
            .filter(|s| !s.exited && !model.grants_all_of(s) && s.stop != Some(Stop::Kill))
            .map(|s| s.id)
            .collect();
        for g in unkilled {
            self.violation(format!(
                "generation {g} holds a revoked right and was not killed"
            ));
        }
    }

    /// The invariants that hold after every event, by the model.
    fn after_step(&mut self) {
        let Some(model) = self.in_force.clone() else {
            return;
        };
        // Promotion: only of the target, and only once every generation
        // with a revoked right has exited.
        if let Some(g) = self.s.fleet.current
            && self.promoted.insert(g)
        {
            match self.servers.get(&g) {
                Some(s) if !model.is(s) => self.violation(format!(
                    "generation {g} promoted with a plan that is not the target"
                )),
                None => self.violation(format!("generation {g} promoted but never launched")),
                _ => {}
            }
            let dying: Vec<GenId> = self
                .servers
                .values()
                .filter(|s| !s.exited && !model.grants_all_of(s))
                .map(|s| s.id)
                .collect();
            if !dying.is_empty() {
                self.violation(format!(
                    "generation {g} promoted while {dying:?} with revoked rights still run"
                ));
            }
        }
    }

    /// The invariants on one action, by the model.
    fn check_action(&mut self, a: &Action) {
        let Some(model) = self.in_force.clone() else {
            return;
        };
        match a {
            Action::ToServer(g, line) => {
                let v: Value = serde_json::from_slice(line).unwrap_or(Value::Null);
                if is_host_request(&v)
                    && let Some(s) = self.servers.get(g)
                    && !model.is(s)
                {
                    self.violation(format!(
                        "host request {} sent to generation {g}, whose plan is not the target",
                        v["id"]
                    ));
                }
            }
            Action::Launch(g, plan) => {
                let roots: BTreeSet<PathBuf> = plan.roots.iter().map(|r| r.path.clone()).collect();
                if model.suspended || roots != model.roots || plan_ports(plan) != model.ports {
                    self.violation(format!(
                        "generation {g} launched with a plan that is not the target"
                    ));
                }
            }
            _ => {}
        }
    }

    fn run_actions(&mut self) {
        let mut actions = Vec::new();
        self.s.take_actions(&mut actions);
        for a in actions {
            self.check_action(&a);
            self.trace.push(format!("action {}", short_action(&a)));
            match a {
                Action::ToHost(line) => self.host_receives(&line),
                Action::RememberInit(init) => self.remembered.push(init),
                Action::ToServer(g, line) => {
                    assert_readable(&line, "a server");
                    self.server_raw.push((g, line.clone()));
                    let v: Value = serde_json::from_slice(&line).expect("JSON to a server");
                    if let Some(s) = self.servers.get_mut(&g) {
                        s.got.push(v.clone());
                        if is_host_request(&v) {
                            s.host_requests += 1;
                        }
                        if !s.exited && s.stop.is_none() {
                            s.inbox.push_back(v);
                        }
                    }
                }
                Action::Launch(g, plan) => self.launch(g, &plan),
                Action::Stop(g, how) => {
                    if let Some(s) = self.servers.get_mut(&g) {
                        // A kill overrides a graceful stop in progress.
                        if s.stop.is_none() || how == Stop::Kill {
                            s.stop = Some(how);
                        }
                        s.inbox.clear();
                    }
                }
                Action::WatchRoots(_) | Action::ServerStarted(_) => {}
                Action::Plan(request) => {
                    if let Some(m) = &self.model {
                        self.plan_models.insert(request.seq, m.clone());
                    }
                    if self.hold_plans {
                        self.plans_held.push(*request);
                    } else {
                        let planned = (self.planner)(&request);
                        self.events.push_back(Event::Planned(Box::new(planned)));
                    }
                }
            }
        }
    }

    /// Deliver the plans held (see [`Sim::hold_plans`]) in the order
    /// `order` gives (indices into them), then the rest in order.
    pub fn deliver_plans(&mut self, order: &[usize]) {
        let mut held: Vec<Option<PlanRequest>> =
            std::mem::take(&mut self.plans_held).into_iter().map(Some).collect();
        let mut picked: Vec<usize> = order.iter().copied().filter(|i| *i < held.len()).collect();
        picked.extend(0..held.len());
        for i in picked {
            if let Some(request) = held[i].take() {
                let planned = (self.planner)(&request);
                self.event(Event::Planned(Box::new(planned)));
            }
        }
    }

    fn launch(&mut self, g: GenId, plan: &Arc<SandboxPlan>) {
        let kind = self.script.pop_front().unwrap_or(Launch::Fast);
        if kind == Launch::Fail {
            let refused = LaunchError::Io {
                what: "launch refused by the test",
                source: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
            };
            self.events.push_front(Event::Launched(g, Err(refused)));
            return;
        }
        self.servers.insert(
            g,
            Server {
                id: g,
                roots: plan.roots.iter().map(|r| r.path.clone()).collect(),
                ports: plan_ports(plan),
                kind,
                started: kind != Launch::Slow,
                inbox: VecDeque::new(),
                held: Vec::new(),
                got: Vec::new(),
                host_requests: 0,
                stop: None,
                stdout_closed: false,
                exited: false,
                asked: BTreeMap::new(),
                answered: Vec::new(),
                next_ask: 1,
            },
        );
        // The loop reports a launch at once.
        self.events
            .push_front(Event::Launched(g, Ok(10_000 + g as u32)));
    }

    fn host_receives(&mut self, line: &[u8]) {
        assert_readable(line, "the host");
        self.host_raw
            .push(String::from_utf8_lossy(line).into_owned());
        let v: Value = serde_json::from_slice(line).expect("JSON to the host");
        self.host_got.push(v.clone());
        let items = match &v {
            Value::Array(items) => items.clone(),
            _ => vec![v],
        };
        for m in items {
            if m.get("method").is_some() && m.get("id").is_some() {
                if m["method"] == "roots/list" {
                    self.roots_asked.push(m["id"].clone());
                    if self.auto_roots {
                        self.answer_roots();
                    }
                } else {
                    let token = m.pointer("/params/_meta/progressToken").cloned();
                    self.server_asks.push((m["id"].clone(), token));
                }
                continue;
            }
            if m.get("method").is_none() {
                let id = m.get("id").cloned().unwrap_or(Value::Null).to_string();
                if self.model.is_some()
                    && m.pointer("/result/inputRequests")
                        .is_some_and(|r| r.to_string().contains("roots/list"))
                {
                    self.violation(format!("request {id}: a roots question reached the host"));
                }
                self.answered_at.entry(id.clone()).or_insert(self.now);
                let got = {
                    let list = self.answers.entry(id.clone()).or_default();
                    list.push(m);
                    list.len()
                };
                if self.model.is_some() && id != "null" {
                    let may = self.expected.get(&id).copied().unwrap_or(0);
                    if got > may {
                        self.violation(format!("request {id} answered {got} times (sent {may})"));
                    }
                }
            }
        }
    }

    /// Answer the host's pending `roots/list` requests with `host_roots`.
    pub fn answer_roots(&mut self) {
        if self.host_closed {
            self.roots_asked.clear();
            return;
        }
        let roots: Vec<Value> = self
            .host_roots
            .iter()
            .map(|p| json!({"uri": crate::roots::path_to_uri(p)}))
            .collect();
        for id in std::mem::take(&mut self.roots_asked) {
            // The model's target follows every answer rootfence takes.
            let taken = matches!(
                self.s.ledger.asked_get(&id.to_string()),
                Some(super::ledger::ToHost::RootsList(_))
            );
            if taken && let Some(m) = self.model.as_mut() {
                m.roots = self.host_roots.iter().cloned().collect();
            }
            let line = json!({"jsonrpc":"2.0","id":id,"result":{"roots":roots}});
            self.events.push_back(host_line(&line));
        }
    }

    /// The host sends a message.
    pub fn host(&mut self, v: Value) {
        self.event(host_line(&v));
    }

    /// The host writes `msgs` (and closes its side, when `eof`) all at
    /// once, before rootfence acts on any of them: what a pipe does. The
    /// launch a message asks for completes after all of them are read.
    pub fn host_burst(&mut self, msgs: &[Value], eof: bool) {
        self.events.extend(msgs.iter().map(host_line));
        if eof {
            self.host_closed = true;
            self.events.push_back(Event::HostEof);
        }
        self.pump();
    }

    /// The host sends raw text.
    pub fn host_raw(&mut self, s: &str) {
        self.event(Event::Host(Frame::Line(s.as_bytes().to_vec())));
    }

    /// The host's handshake (with the roots capability when `roots`).
    pub fn handshake(&mut self, version: &str, roots: bool) {
        let caps = if roots {
            json!({"roots":{"listChanged":true}})
        } else {
            json!({})
        };
        self.host(json!({"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":version,"capabilities":caps,"clientInfo":{"name":"sim","version":"1"}}}));
        self.serve_all();
        self.host(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
        self.serve_all();
    }

    /// The host changes its roots (and says so).
    pub fn set_roots(&mut self, names: &[&str]) {
        self.host_roots = names.iter().map(|n| self.tree.p(n)).collect();
        self.host(json!({"jsonrpc":"2.0","method":"notifications/roots/list_changed"}));
    }

    /// A host `tools/call` of `tool` with id `id`.
    pub fn call(&mut self, id: Value, tool: &str) {
        self.host(json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool,"arguments":{}}}));
    }

    /// The answers the host got for `id` (JSON text of the id).
    pub fn answers_to(&self, id: &Value) -> Vec<Value> {
        self.answers
            .get(&id.to_string())
            .cloned()
            .unwrap_or_default()
    }

    /// The one answer to `id`.
    pub fn answer(&self, id: &Value) -> Value {
        let a = self.answers_to(id);
        assert_eq!(
            a.len(),
            1,
            "answers to {id}: {a:?}\n{}",
            self.trace.join("\n")
        );
        a[0].clone()
    }

    // ------------------------------------------------------------------
    // Servers

    /// A slow server starts (answers from now on), and serves.
    pub fn start(&mut self, g: GenId) {
        if let Some(s) = self.servers.get_mut(&g) {
            s.started = true;
        }
        self.serve(g);
    }

    /// Server `g` handles everything in its inbox.
    pub fn serve(&mut self, g: GenId) {
        let mut out = Vec::new();
        let caps = if self.no_logging {
            json!({"tools":{}})
        } else {
            json!({"tools":{},"logging":{}})
        };
        let Some(s) = self.servers.get_mut(&g) else {
            return;
        };
        if s.exited || s.stop.is_some() || s.stdout_closed || !s.started {
            return;
        }
        while let Some(m) = s.inbox.pop_front() {
            let id = m.get("id").cloned();
            let method = m.get("method").and_then(Value::as_str).unwrap_or("");
            match (id, method) {
                (Some(id), "") => {
                    // An answer to one of its requests.
                    if let Some(n) = id.as_i64()
                        && let Some(progress) = s.asked.remove(&n)
                    {
                        s.answered.push((n, progress));
                    }
                }
                (None, "notifications/progress") => {
                    let token = m.pointer("/params/progressToken").and_then(Value::as_i64);
                    if let Some(list) = token.and_then(|t| s.asked.get_mut(&t)) {
                        list.push(m["params"].clone());
                    }
                }
                (None, _) => {}
                (Some(id), "initialize") => {
                    if s.kind == Launch::Mute {
                        continue;
                    }
                    let v = m
                        .pointer("/params/protocolVersion")
                        .cloned()
                        .unwrap_or(json!("2025-06-18"));
                    out.push(json!({"jsonrpc":"2.0","id":id,"result":{"protocolVersion":v,"capabilities":caps,"serverInfo":{"name":"sim","version":"1"}}}));
                }
                (Some(id), "tools/call")
                    if m.pointer("/params/name") == Some(&json!("roots"))
                        && m.pointer("/params/inputResponses").is_none() =>
                {
                    // Asks for roots first (2026-07-28's way; judged in
                    // every revision): rootfence answers and sends again.
                    out.push(json!({"jsonrpc":"2.0","id":id,"result":{"resultType":"input_required","inputRequests":{"w":{"method":"roots/list"}},"requestState":"s"}}));
                }
                (Some(id), "tools/call") if m.pointer("/params/name") == Some(&json!("slow")) => {
                    s.held.push(id);
                }
                (Some(id), "tools/call") => {
                    out.push(json!({"jsonrpc":"2.0","id":id,"result":{"content":[{"type":"text","text":format!("gen {g}")}]}}));
                }
                (Some(id), "tools/list") => {
                    out.push(json!({"jsonrpc":"2.0","id":id,"result":{"tools":[]}}));
                }
                (Some(id), _) => {
                    out.push(json!({"jsonrpc":"2.0","id":id,"result":{}}));
                }
            }
        }
        for v in out {
            self.events.push_back(server_line(g, &v));
        }
        self.pump();
    }

    /// Every live server handles its inbox.
    pub fn serve_all(&mut self) {
        let ids: Vec<GenId> = self.servers.keys().copied().collect();
        for g in ids {
            self.serve(g);
        }
    }

    /// Server `g` answers its held slow calls.
    pub fn finish(&mut self, g: GenId) {
        let held = match self.servers.get_mut(&g) {
            Some(s) if !s.exited && s.stop.is_none() && !s.stdout_closed => {
                std::mem::take(&mut s.held)
            }
            _ => return,
        };
        for id in held {
            self.events.push_back(server_line(
                g,
                &json!({"jsonrpc":"2.0","id":id,"result":{"content":[{"type":"text","text":"slow done"}]}}),
            ));
        }
        self.pump();
    }

    /// Server `g` asks the host something (a `ping` with a progress
    /// token equal to its id).
    pub fn server_asks(&mut self, g: GenId) {
        let Some(s) = self.servers.get_mut(&g) else {
            return;
        };
        if s.exited || s.stop.is_some() || s.stdout_closed {
            return;
        }
        let n = s.next_ask;
        s.next_ask += 1;
        s.asked.insert(n, Vec::new());
        let v =
            json!({"jsonrpc":"2.0","id":n,"method":"ping","params":{"_meta":{"progressToken":n}}});
        self.event(server_line(g, &v));
    }

    /// The host reports progress on, then answers, every server request.
    pub fn host_answers_servers(&mut self) {
        if self.host_closed {
            return;
        }
        for (id, token) in std::mem::take(&mut self.server_asks) {
            if let Some(t) = token {
                self.host(json!({"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":t,"progress":1}}));
            }
            self.host(json!({"jsonrpc":"2.0","id":id,"result":{}}));
        }
    }

    /// Server `g`'s process ends by itself with `code`.
    pub fn crash(&mut self, g: GenId, code: i32) {
        let Some(s) = self.servers.get_mut(&g) else {
            return;
        };
        if s.exited {
            return;
        }
        s.exited = true;
        let eof = !s.stdout_closed;
        s.stdout_closed = true;
        if eof {
            self.events.push_back(Event::Server(ServerEvent::Eof(g)));
        }
        self.event(Event::Server(ServerEvent::Exited(
            g,
            Some(ExitInfo::Code(code)),
        )));
    }

    /// Server `g` closes its stdout and keeps running.
    pub fn close_stdout(&mut self, g: GenId) {
        let Some(s) = self.servers.get_mut(&g) else {
            return;
        };
        if s.exited || s.stdout_closed {
            return;
        }
        s.stdout_closed = true;
        self.event(Event::Server(ServerEvent::Eof(g)));
    }

    /// Every server asked to stop exits (killed, or closing at once).
    pub fn reap(&mut self) {
        let stopped: Vec<(GenId, Stop)> = self
            .servers
            .values()
            .filter(|s| !s.exited)
            .filter_map(|s| s.stop.map(|how| (s.id, how)))
            .collect();
        for (g, how) in stopped {
            let status = match how {
                Stop::Kill | Stop::KillSoon(_) => ExitInfo::Signal(9),
                Stop::Graceful(_) => ExitInfo::Code(0),
            };
            if let Some(s) = self.servers.get_mut(&g) {
                s.exited = true;
                if !s.stdout_closed {
                    s.stdout_closed = true;
                    self.events.push_back(Event::Server(ServerEvent::Eof(g)));
                }
            }
            self.event(Event::Server(ServerEvent::Exited(g, Some(status))));
        }
    }

    /// The generations not exited.
    pub fn alive(&self) -> Vec<GenId> {
        self.servers
            .values()
            .filter(|s| !s.exited)
            .map(|s| s.id)
            .collect()
    }

    /// The newest generation launched.
    pub fn newest(&self) -> GenId {
        *self.servers.keys().last().expect("a generation")
    }

    /// The serving generation.
    pub fn current(&self) -> Option<GenId> {
        self.s.fleet.current
    }

    /// The roots of the serving generation.
    pub fn enforced(&self) -> Vec<PathBuf> {
        self.s.enforced().iter().map(|r| r.path.clone()).collect()
    }

    /// Run until nothing more happens: roots answered, servers started
    /// and serving, slow calls finished, server requests answered, stops
    /// reaped, timers fired.
    pub fn settle_all(&mut self) {
        for _ in 0..200 {
            let before = self.trace.len();
            if self.auto_roots {
                self.answer_roots();
            }
            self.pump();
            let ids: Vec<GenId> = self.servers.keys().copied().collect();
            for g in ids {
                self.start(g);
                self.finish(g);
            }
            self.host_answers_servers();
            self.reap();
            if self.trace.len() == before && !self.jump_to_next_timer() {
                return;
            }
        }
        panic!("the session never came to rest:\n{}", self.trace.join("\n"));
    }
}

/// Every line rootfence writes is one line every parser reads the same
/// way: strictly readable (valid UTF-8, no key twice, no lone surrogate,
/// finite numbers), and no carriage return or newline in it.
pub fn assert_readable(line: &[u8], to: &str) {
    let text = String::from_utf8_lossy(line);
    assert!(
        !line.contains(&b'\r') && !line.contains(&b'\n'),
        "a line break in a line to {to}: {text:?}"
    );
    let batch = line.first() == Some(&b'[');
    let members: Vec<Vec<u8>> = if batch {
        serde_json::from_slice::<Vec<&serde_json::value::RawValue>>(line)
            .unwrap_or_else(|e| panic!("unreadable batch to {to} ({e}): {text}"))
            .iter()
            .map(|m| m.get().as_bytes().to_vec())
            .collect()
    } else {
        vec![line.to_vec()]
    };
    for m in members {
        if let Err(e) = crate::proxy::canonical::canonical(&m) {
            panic!("unreadable line to {to} ({}): {text}", e.why);
        }
    }
}

/// Whether a line to a server is a request from the host (the tests' host
/// ids are numbers, `"init"`, or strings starting with `h`).
pub fn is_host_request(v: &Value) -> bool {
    let Some(id) = v.get("id") else { return false };
    v.get("method").is_some()
        && match id {
            Value::Number(_) => true,
            Value::String(s) => s == "init" || s.starts_with('h'),
            _ => false,
        }
}

pub fn host_line(v: &Value) -> Event {
    Event::Host(Frame::Line(v.to_string().into_bytes()))
}

pub fn server_line(g: GenId, v: &Value) -> Event {
    Event::Server(ServerEvent::Frame(
        g,
        Frame::Line(v.to_string().into_bytes()),
    ))
}

fn clip(s: &[u8]) -> String {
    let t = String::from_utf8_lossy(s);
    if t.chars().count() > 160 {
        format!("{}…", t.chars().take(160).collect::<String>())
    } else {
        t.into_owned()
    }
}

fn short(ev: &Event) -> String {
    match ev {
        Event::Host(Frame::Line(l)) => format!("host {}", clip(l)),
        Event::Server(ServerEvent::Frame(g, Frame::Line(l))) => format!("server {g} {}", clip(l)),
        Event::Server(e) => format!("{e:?}"),
        Event::Launched(g, r) => format!("launched {g} {r:?}"),
        Event::Planned(p) => format!("planned {} ({} roots)", p.seq, p.plan.roots.len()),
        other => format!("{other:?}").chars().take(120).collect(),
    }
}

fn short_action(a: &Action) -> String {
    match a {
        Action::ToHost(l) => format!("to host {}", clip(l)),
        Action::ToServer(g, l) => format!("to {g} {}", clip(l)),
        Action::Launch(g, p) => format!(
            "launch {g} roots {:?} ports {:?}",
            p.roots
                .iter()
                .map(|r| r.path.file_name())
                .collect::<Vec<_>>(),
            p.network.tcp_connect
        ),
        Action::Stop(g, how) => format!("stop {g} {how:?}"),
        Action::WatchRoots(p) => format!("watch {}", p.len()),
        Action::RememberInit(_) => "remember initialize".to_string(),
        Action::ServerStarted(g) => format!("started {g}"),
        Action::Plan(r) => format!("plan {} of {} inputs", r.seq, r.inputs.len()),
    }
}
