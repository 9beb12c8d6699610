//! The session core against a small reference model, with plans made
//! without a filesystem ([`fake_planner`]), under random
//! interleavings of host requests (some answered first with a roots-only
//! `input_required` result rootfence answers and sends again), batches,
//! cancellations and duplicate
//! ids, roots changes (reverts included) answered at once or later, policy
//! edits of the TCP ports, slow, silent and failed launches, server
//! requests with progress, crashes, closed stdouts, timeouts and host EOF.
//!
//! The model's target is the roots the host last answered (when rootfence
//! takes that answer; none once rootfence stopped waiting for an answer,
//! until one comes, or once the host closed while asked) and the ports of the last policy, or nothing at all
//! while the last policy edit cannot be read; it knows nothing of the
//! core's plans or comparisons. Checked at every step (see
//! `Sim::after_step` and `Sim::check_action`): a generation holding a
//! right outside the target is killed in the same step; only a generation
//! launched with exactly the target is promoted or sent host requests, and
//! only once every generation with a revoked right has exited; every
//! launch is of the target; no request is answered twice; no roots
//! question reaches the host. At rest: the
//! serving generation holds exactly the target and is the only one left,
//! every request got its answer (`initialize` within its deadline),
//! every batch one reply, and nothing is left in flight or held.

use std::collections::BTreeSet;
use std::time::Duration;

use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::{Value, json};

use super::{Launch, Model, Sim, Tree, fake_planner};
use crate::policy::PolicyError;
use crate::proxy::session::Event;

const DIRS: [&str; 3] = ["a", "b", "c"];
const PORTS: [u16; 2] = [1001, 1002];

#[derive(Debug, Clone)]
enum Op {
    Call { slow: bool },
    RootsCall,
    Dup(Index),
    Batch,
    Cancel(Index),
    Roots { mask: u8, later: bool },
    AnswerRoots,
    Policy(u8),
    PolicyBroken,
    RootsTimeout,
    NextLaunch(Launch),
    Serve(Index),
    Start(Index),
    Finish(Index),
    Crash(Index, i32),
    CloseStdout(Index),
    Ask(Index),
    HostAnswers,
    Initialized,
    Reap,
    Advance(u16),
    HostEof,
}

fn launch() -> impl Strategy<Value = Launch> {
    prop_oneof![
        8 => Just(Launch::Fast),
        5 => Just(Launch::Slow),
        1 => Just(Launch::Mute),
        1 => Just(Launch::Fail),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => any::<bool>().prop_map(|slow| Op::Call { slow }),
        2 => Just(Op::RootsCall),
        1 => any::<Index>().prop_map(Op::Dup),
        1 => Just(Op::Batch),
        2 => any::<Index>().prop_map(Op::Cancel),
        6 => (0u8..8, any::<bool>()).prop_map(|(mask, later)| Op::Roots { mask, later }),
        2 => Just(Op::AnswerRoots),
        3 => (0u8..4).prop_map(Op::Policy),
        1 => Just(Op::PolicyBroken),
        1 => Just(Op::RootsTimeout),
        2 => launch().prop_map(Op::NextLaunch),
        5 => any::<Index>().prop_map(Op::Serve),
        3 => any::<Index>().prop_map(Op::Start),
        3 => any::<Index>().prop_map(Op::Finish),
        1 => (any::<Index>(), prop_oneof![1 => Just(0), 4 => Just(3)]).prop_map(|(i, c)| Op::Crash(i, c)),
        1 => any::<Index>().prop_map(Op::CloseStdout),
        2 => any::<Index>().prop_map(Op::Ask),
        2 => Just(Op::HostAnswers),
        3 => Just(Op::Initialized),
        3 => Just(Op::Reap),
        5 => (0u16..700).prop_map(Op::Advance),
    ]
}

fn mask_dirs(mask: u8) -> Vec<&'static str> {
    DIRS.iter()
        .enumerate()
        .filter(|(i, _)| mask & (1 << i) != 0)
        .map(|(_, d)| *d)
        .collect()
}

fn mask_ports(mask: u8) -> Vec<u16> {
    PORTS
        .iter()
        .enumerate()
        .filter(|(i, _)| mask & (1 << i) != 0)
        .map(|(_, p)| *p)
        .collect()
}

/// The host side of a run, and what it expects.
struct Driver {
    sim: Sim,
    next_id: u64,
    /// Request ids sent, not cancelled.
    sent: Vec<String>,
    cancelled: BTreeSet<String>,
    batches: Vec<Vec<String>>,
    initialized: bool,
    eof: bool,
    init_sent: std::time::Instant,
}

impl Driver {
    fn new(first: Launch, ports: u8) -> Driver {
        let tree = Tree::new();
        let config = tree.config(tree.policy(&mask_ports(ports), ""), &[]);
        // Its plans read no file: the model needs no directory.
        let mut sim = Sim::with_planner(tree, config, fake_planner());
        sim.auto_roots = false;
        sim.model = Some(Model {
            roots: BTreeSet::new(),
            ports: mask_ports(ports).into_iter().collect(),
            suspended: false,
        });
        sim.script.push_back(first);
        sim.expected.insert("\"init\"".into(), 1);
        let init_sent = sim.now;
        sim.host(json!({"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{"roots":{"listChanged":true}},"clientInfo":{"name":"model","version":"1"}}}));
        Driver {
            sim,
            next_id: 1,
            sent: vec!["\"init\"".into()],
            cancelled: BTreeSet::new(),
            batches: Vec::new(),
            initialized: false,
            eof: false,
            init_sent,
        }
    }

    fn unanswered(&self) -> Vec<String> {
        self.sent
            .iter()
            .filter(|id| !self.cancelled.contains(*id))
            .filter(|id| !self.sim.answers.contains_key(*id))
            .cloned()
            .collect()
    }

    fn new_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.sent.push(id.to_string());
        *self.sim.expected.entry(id.to_string()).or_default() += 1;
        id
    }

    fn alive(&self, i: &Index) -> Option<u64> {
        let alive = self.sim.alive();
        (!alive.is_empty()).then(|| alive[i.index(alive.len())])
    }

    fn init_answered(&self) -> bool {
        self.sim
            .answers_to(&json!("init"))
            .iter()
            .any(|a| a.get("result").is_some())
    }

    /// The host answers `roots/list` at once unless told to wait.
    fn roots_now(&mut self) {
        if self.eof {
            // The host has closed its side.
            self.sim.roots_asked.clear();
            return;
        }
        self.sim.answer_roots();
        self.sim.advance(0);
    }

    fn apply(&mut self, op: &Op, later: &mut bool) {
        let host = !self.eof;
        match op {
            Op::Call { slow } if host => {
                let id = self.new_id();
                let tool = if *slow { "slow" } else { "echo" };
                self.sim.call(json!(id), tool);
            }
            Op::RootsCall if host => {
                let id = self.new_id();
                self.sim.call(json!(id), "roots");
            }
            Op::Dup(i) if host => {
                let open = self.unanswered();
                if open.is_empty() {
                    return;
                }
                let id = open[i.index(open.len())].clone();
                *self.sim.expected.entry(id.clone()).or_default() += 1;
                let id: Value = serde_json::from_str(&id).unwrap_or(Value::Null);
                self.sim
                    .host(json!({"jsonrpc":"2.0","id":id,"method":"ping"}));
            }
            Op::Batch if host && self.init_answered() => {
                let (p, c) = (self.new_id(), self.new_id());
                self.batches.push(vec![p.to_string(), c.to_string()]);
                let batch = json!([
                    {"jsonrpc":"2.0","id":p,"method":"ping"},
                    {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"x","progress":1}},
                    {"jsonrpc":"2.0","id":c,"method":"tools/call","params":{"name":"slow"}},
                ]);
                self.sim.host_raw(&batch.to_string());
            }
            Op::Cancel(i) if host => {
                let open = self.unanswered();
                let open: Vec<String> = open.into_iter().filter(|id| id != "\"init\"").collect();
                if open.is_empty() {
                    return;
                }
                let id = open[i.index(open.len())].clone();
                self.cancelled.insert(id.clone());
                let id: Value = serde_json::from_str(&id).unwrap_or(Value::Null);
                self.sim.host(json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":id}}));
            }
            Op::Roots { mask, later: l } if host => {
                *later = *l;
                let dirs = mask_dirs(*mask);
                self.sim.set_roots(&dirs);
            }
            Op::AnswerRoots => self.roots_now(),
            Op::Policy(mask) => {
                let ports = mask_ports(*mask);
                if let Some(m) = self.sim.model.as_mut() {
                    m.ports = ports.iter().copied().collect();
                    m.suspended = false;
                }
                let p = self.sim.tree.policy(&ports, "");
                self.sim.event(Event::PolicyChanged(Ok(Box::new(p))));
            }
            Op::PolicyBroken => {
                if let Some(m) = self.sim.model.as_mut() {
                    m.suspended = true;
                }
                self.sim.event(Event::PolicyChanged(Err(PolicyError::Gone {
                    file: "policy.toml".into(),
                })));
            }
            Op::RootsTimeout => {
                // The host does not answer in time: from the deadline on,
                // the target has no host roots.
                if let Some(d) = self.sim.s.exchange.awaiting {
                    let left = d.saturating_duration_since(self.sim.now).as_micros();
                    let left = u64::try_from(left.div_ceil(1000)).unwrap_or(u64::MAX);
                    self.sim.advance(left.saturating_sub(1));
                    // Still waiting (the session may have ended meanwhile).
                    if self.sim.s.exchange.awaiting == Some(d) {
                        if let Some(m) = self.sim.model.as_mut() {
                            m.roots = BTreeSet::new();
                        }
                        self.sim.advance(1);
                    }
                }
            }
            Op::NextLaunch(l) => self.sim.script.push_back(*l),
            Op::Serve(i) => {
                if let Some(g) = self.alive(i) {
                    self.sim.serve(g);
                }
            }
            Op::Start(i) => {
                if let Some(g) = self.alive(i) {
                    self.sim.start(g);
                }
            }
            Op::Finish(i) => {
                if let Some(g) = self.alive(i) {
                    self.sim.finish(g);
                }
            }
            Op::Crash(i, code) => {
                if let Some(g) = self.alive(i) {
                    self.sim.crash(g, *code);
                }
            }
            Op::CloseStdout(i) => {
                if let Some(g) = self.alive(i) {
                    self.sim.close_stdout(g);
                }
            }
            Op::Ask(i) => {
                if let Some(g) = self.alive(i) {
                    self.sim.server_asks(g);
                }
            }
            Op::HostAnswers if host => self.sim.host_answers_servers(),
            Op::Initialized if host => self.initialized(),
            Op::Reap => self.sim.reap(),
            Op::Advance(ms) => {
                // The host's roots are answered before rootfence stops
                // waiting for them (that timeout is not modelled: a late
                // answer is dropped, and the model would not know).
                let mut ms = u64::from(*ms);
                if let Some(d) = self.sim.s.exchange.awaiting {
                    let left = d.saturating_duration_since(self.sim.now);
                    ms = ms.min(left.as_millis().saturating_sub(1) as u64);
                }
                self.sim.advance(ms);
            }
            Op::HostEof if host => {
                self.eof = true;
                // The host can answer nothing more: a roots question it
                // was asked is given up (its roots dropped).
                if self.sim.s.exchange.awaiting.is_some()
                    && let Some(m) = self.sim.model.as_mut()
                {
                    m.roots.clear();
                }
                self.sim.event(Event::HostEof);
            }
            _ => {}
        }
    }

    fn initialized(&mut self) {
        if !self.initialized && self.init_answered() {
            self.initialized = true;
            self.sim
                .host(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
        }
    }

    /// Bring the run to rest and check what must hold then.
    fn finish(mut self) -> Result<(), TestCaseError> {
        self.sim.auto_roots = !self.eof;
        self.roots_now();
        for _ in 0..3 {
            self.sim.settle_all();
            if !self.eof {
                self.initialized();
            }
        }
        self.sim.settle_all();
        let sim = &self.sim;
        let trace = || sim.trace.join("\n");
        prop_assert!(
            sim.violations.is_empty(),
            "{:?}\n{}",
            sim.violations,
            trace()
        );
        for id in &self.sent {
            let got = sim.answers.get(id).map_or(0, Vec::len);
            let want = sim.expected.get(id).copied().unwrap_or(0);
            if self.cancelled.contains(id) {
                prop_assert!(
                    got <= want,
                    "cancelled {id} answered {got} times\n{}",
                    trace()
                );
            } else {
                prop_assert_eq!(got, want, "request {} answers\n{}", id, trace());
            }
        }
        if let Some(at) = sim.answered_at.get("\"init\"") {
            prop_assert!(
                *at <= self.init_sent + Duration::from_millis(1000),
                "initialize answered after its deadline\n{}",
                trace()
            );
        }
        for b in &self.batches {
            let replies = sim
                .host_got
                .iter()
                .filter(|v| {
                    v.as_array()
                        .is_some_and(|items| items.iter().any(|m| b.contains(&m["id"].to_string())))
                })
                .count();
            let live = b.iter().any(|id| !self.cancelled.contains(id));
            if live {
                prop_assert_eq!(replies, 1, "batch {:?}\n{}", b, trace());
            } else {
                prop_assert!(replies <= 1, "batch {:?}\n{}", b, trace());
            }
        }
        if sim.s.ending().is_some() {
            prop_assert!(sim.s.finished(), "ended but not finished\n{}", trace());
            prop_assert!(sim.alive().is_empty(), "{:?}\n{}", sim.alive(), trace());
            return Ok(());
        }
        let model = sim.model.clone().unwrap_or(Model {
            roots: BTreeSet::new(),
            ports: BTreeSet::new(),
            suspended: false,
        });
        if model.suspended {
            // Nothing may run while the policy cannot be applied.
            prop_assert!(sim.alive().is_empty(), "{:?}\n{}", sim.alive(), trace());
            return Ok(());
        }
        let current = sim.current();
        prop_assert!(current.is_some(), "nothing serves at rest\n{}", trace());
        let g = current.unwrap_or_default();
        let s = &sim.servers[&g];
        prop_assert_eq!(&s.roots, &model.roots, "roots at rest\n{}", trace());
        prop_assert_eq!(&s.ports, &model.ports, "ports at rest\n{}", trace());
        let enforced: BTreeSet<_> = sim.enforced().into_iter().collect();
        prop_assert_eq!(&enforced, &model.roots);
        prop_assert_eq!(
            sim.alive(),
            vec![g],
            "only the serving generation is left\n{}",
            trace()
        );
        prop_assert!(sim.s.is_idle(), "not idle at rest\n{}", trace());
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Random interleavings against the reference model (see the module
    /// documentation for what is checked).
    #[test]
    fn the_session_converges_on_the_target_and_answers_everything(
        first in prop_oneof![4 => Just(Launch::Fast), 2 => Just(Launch::Slow), 1 => Just(Launch::Mute)],
        ports in 0u8..4,
        ops in proptest::collection::vec(op(), 0..80),
        eof in proptest::option::weighted(0.2, any::<Index>()),
    ) {
        let mut d = Driver::new(first, ports);
        let mut later = false;
        let eof_at = eof.map(|i| i.index(ops.len() + 1));
        for (i, op) in ops.iter().enumerate() {
            if eof_at == Some(i) {
                d.apply(&Op::HostEof, &mut later);
            }
            d.apply(op, &mut later);
            if !later {
                d.roots_now();
            }
        }
        d.finish()?;
    }
}
