//! `rootfence learn`: run a server under its plan until it starts, and
//! print the policy lines what the sandbox refused it calls for.
//!
//! Each round launches the server fenced and observed (every call naming
//! a path goes through rootfence's supervisor, which records the paths the
//! sandbox refuses and that exist outside: see
//! [`crate::sandbox::observed`]), and drives `initialize` and
//! `tools/list`. A refused path that [`crate::refusals`] allows becomes a
//! `[runtime] read`, `exec` or `write` line of the next round's policy,
//! shown with why; a denied one is named and never proposed. What the
//! server prints is shown to the user, never read for paths: it could
//! name anything. It stops when the server answers `tools/list`, when a
//! round finds nothing new, or after `--rounds`; what was refused in the
//! round it started is said, not proposed (it started without it).
//!
//! The server's network goes through rootfence's proxy while it learns
//! (unless the policy opens TCP ports or UDP itself): the hosts it asked
//! for in the last round that the policy's `allow_domains` does not list
//! are proposed as `[network] allow_domains` lines. They are not granted
//! while learning (the server learns nothing it could send out).

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::netproxy::{Target, TargetHost};
use crate::policy::{ExtraKind, ExtraPath, Policy};
use crate::refusals::{self as propose, Context, Right, Verdict};
use crate::roots::Origin;
use crate::runtime::{HostEnv, shown_quoted, shown_toml};
use crate::sandbox::observed::{Need, Observed, Refusal};
use crate::sandbox::{self, StdioConfig};

use super::{LaunchArgs, load_launch_policy};

/// `rootfence learn` options.
#[derive(Debug, clap::Args)]
pub struct LearnArgs {
    /// Most launches tried.
    #[arg(long, default_value_t = 6, value_name = "N")]
    pub rounds: u32,
    /// How long one launch may take to answer `tools/list`, in seconds.
    #[arg(long, default_value_t = 30, value_name = "SECONDS")]
    pub timeout: u64,
    #[command(flatten)]
    pub launch: LaunchArgs,
}

/// How one launch ended.
#[derive(Debug)]
enum Outcome {
    /// `tools/list` answered with this many tools.
    Started { tools: usize },
    /// The server ended, or did not answer in time.
    Failed { why: String },
}

/// One path the refusals call for, with the rights they call for and
/// why.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Learned {
    path: PathBuf,
    read: bool,
    exec: bool,
    write: bool,
    /// The refusal that called for it, as the user reads it.
    why: String,
}

impl Learned {
    /// Add `right`: whether that is new.
    fn add(&mut self, right: Right) -> bool {
        let flag = match right {
            Right::Read => &mut self.read,
            Right::Exec => &mut self.exec,
            Right::Write => &mut self.write,
        };
        !std::mem::replace(flag, true)
    }

    /// The `[runtime]` lists it goes in: `write` and `exec` each give
    /// read, so `read` only without them.
    fn kinds(&self) -> Vec<ExtraKind> {
        let mut k = Vec::new();
        if self.read && !self.write && !self.exec {
            k.push(ExtraKind::Read);
        }
        if self.exec {
            k.push(ExtraKind::Exec);
        }
        if self.write {
            k.push(ExtraKind::Write);
        }
        k
    }
}

/// What learn has said about paths it does not propose (each once).
#[derive(Debug, Default)]
struct Said(Vec<PathBuf>);

impl Said {
    fn first(&mut self, p: &Path) -> bool {
        if self.0.iter().any(|s| s == p) {
            return false;
        }
        self.0.push(p.to_path_buf());
        true
    }
}

pub(super) fn learn(args: &LearnArgs) -> ExitCode {
    let env = HostEnv::current();
    let base = match load_launch_policy(&args.launch, &env) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("rootfence: {e}");
            return ExitCode::from(2);
        }
    };
    let mut learned: Vec<Learned> = Vec::new();
    let mut asked_before: Vec<Target> = Vec::new();
    let mut hosts: Vec<Target> = Vec::new();
    let mut said = Said::default();
    let uid = rustix::process::geteuid().as_raw();
    for round in 1..=args.rounds.max(1) {
        let policy = with_learned(&base, &learned);
        let mut plan = match args.launch.plan(&policy, &env) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("rootfence: {e}");
                return ExitCode::from(2);
            }
        };
        through_proxy(&mut plan);
        plan.observe_paths = true;
        eprintln!(
            "rootfence learn: round {round}: launching {}",
            plan.command.program.display()
        );
        let Attempt {
            outcome,
            observed,
            asked,
        } = match attempt(&plan, Duration::from_secs(args.timeout)) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("rootfence: {e}");
                return ExitCode::from(2);
            }
        };
        for t in &asked {
            if !asked_before.contains(t) {
                eprintln!(
                    "rootfence learn: the server asked for {t}, which the policy's allow_domains does not list"
                );
                asked_before.push(t.clone());
            }
        }
        // The hosts the last round asked for: those asked only before a
        // path it needed was granted are not proposed.
        hosts = asked;
        let refused = observed.refusals;
        eprintln!(
            "rootfence learn: round {round}: {} calls naming a path observed, {} paths refused",
            observed.calls,
            refused.len()
        );
        if observed.dropped > 0 {
            eprintln!(
                "rootfence learn: {} refusals of paths past the first {} were not recorded",
                observed.dropped,
                sandbox::observed::MAX_PATHS
            );
        }
        let started = matches!(outcome, Outcome::Started { .. });
        let cx = Context {
            deny: &base.deny,
            plan: &plan,
            env: &env,
            uid,
        };
        let home = env.home.as_deref();
        let mut learn_from =
            |looks| take(&refused, &cx, started, looks, &mut learned, &mut said, home);
        // Paths it only looked at (a runtime probes many) count when
        // nothing it opened, ran or wrote is left to learn.
        let mut new = learn_from(false);
        if new == 0 && !started {
            new = learn_from(true);
        }
        if started {
            let looked = refused.iter().filter(|r| r.need == Need::Look).count();
            if looked > 0 {
                eprintln!(
                    "rootfence learn: the sandbox also hid {looked} paths it only looked at; not proposed: the server started without them"
                );
            }
        }
        match outcome {
            Outcome::Started { tools } => {
                eprintln!("rootfence learn: the server started and listed {tools} tools");
                print_policy(&learned, &hosts, env.home.as_deref(), true);
                return ExitCode::SUCCESS;
            }
            Outcome::Failed { why } => {
                eprintln!("rootfence learn: round {round}: {why}");
                if new == 0 {
                    eprintln!(
                        "rootfence learn: nothing more to learn from what the sandbox refused it; the server does not start under this policy"
                    );
                    print_policy(&learned, &hosts, env.home.as_deref(), false);
                    return ExitCode::FAILURE;
                }
            }
        }
    }
    eprintln!("rootfence learn: --rounds used up before the server started");
    print_policy(&learned, &hosts, env.home.as_deref(), false);
    ExitCode::FAILURE
}

/// Take what one round's refusals call for into `learned` (not when the
/// server `started` without it: then it is only said), saying once each
/// path that is never proposed and why: of the paths it only looked at
/// too with `looks`, else of those it opened, ran or wrote. How many
/// lines are new.
fn take(
    refused: &[Refusal],
    cx: &Context<'_>,
    started: bool,
    looks: bool,
    learned: &mut Vec<Learned>,
    said: &mut Said,
    home: Option<&Path>,
) -> usize {
    let mut new = 0;
    for r in refused.iter().filter(|r| looks == (r.need == Need::Look)) {
        let name = shown_quoted(&r.path, home);
        match propose::verdict(r, cx) {
            Verdict::Denied {
                rule,
                origin,
                inside,
            } => {
                if said.first(&r.path) {
                    let how = if inside {
                        "is denied"
                    } else {
                        "holds a denied path"
                    };
                    eprintln!(
                        "rootfence learn: the server asked for {name}, which {how} ({rule} {origin}): no policy line is proposed for it"
                    );
                }
            }
            Verdict::Never(why) => {
                if said.first(&r.path) {
                    eprintln!(
                        "rootfence learn: the sandbox refused {name} ({r}); not proposed: {why}"
                    );
                }
            }
            Verdict::Propose(_) if started => {
                if said.first(&r.path) {
                    eprintln!(
                        "rootfence learn: the sandbox also refused {name} ({r}); not proposed: the server started without it"
                    );
                }
            }
            Verdict::Propose(right) => match learned.iter_mut().find(|l| l.path == r.path) {
                Some(l) => {
                    if l.add(right) {
                        l.why = r.to_string();
                        new += 1;
                    }
                }
                None => {
                    let mut l = Learned {
                        path: r.path.clone(),
                        read: false,
                        exec: false,
                        write: false,
                        why: r.to_string(),
                    };
                    l.add(right);
                    learned.push(l);
                    new += 1;
                }
            },
        }
    }
    new
}

/// `base` with the learned paths granted as `[runtime]` entries.
fn with_learned(base: &Policy, learned: &[Learned]) -> Policy {
    let mut p = base.clone();
    for l in learned {
        for kind in l.kinds() {
            p.extra.push(ExtraPath {
                shown: l.path.display().to_string(),
                path: l.path.clone(),
                kind,
                origin: Origin::Learned,
            });
        }
    }
    p
}

/// Send the server's network through the proxy while it learns, so that
/// the hosts it asks for are seen (and refused unless listed): unless the
/// policy gives it TCP ports or UDP of its own, or this machine cannot
/// keep a server to the proxy (then it learns no hosts, said once).
fn through_proxy(plan: &mut crate::plan::SandboxPlan) {
    let n = &plan.network;
    if n.domains.is_some() || !n.tcp_connect.is_empty() || !n.tcp_bind.is_empty() || n.udp {
        return;
    }
    let mut proxied = plan.clone();
    proxied.network.domains = Some(crate::plan::DomainPlan::default());
    if let Err(why) = sandbox::domain_rung_here(&proxied, &sandbox::probe_remembered()) {
        static SAID: std::sync::Once = std::sync::Once::new();
        SAID.call_once(|| {
            eprintln!(
                "rootfence learn: the hosts the server asks for cannot be learned here (its network stays closed): {why}"
            );
        });
        return;
    }
    plan.network.domains = Some(crate::plan::DomainPlan::default());
    let mut notes = Vec::new();
    crate::plan::proxied_env(&mut plan.env, &mut notes);
}

/// A host as an `allow_domains` entry (the port left out when it is
/// `http`'s or `https`'s).
fn entry(t: &Target) -> String {
    match &t.host {
        TargetHost::Name(n) if crate::netproxy::rule::DEFAULT_PORTS.contains(&t.port) => n.clone(),
        _ => t.to_string(),
    }
}

/// The policy lines on stdout.
fn print_policy(learned: &[Learned], hosts: &[Target], home: Option<&Path>, started: bool) {
    let mut out = std::io::stdout().lock();
    if !hosts.is_empty() {
        let mut entries: Vec<String> = Vec::new();
        for e in hosts.iter().map(entry) {
            if !entries.contains(&e) {
                entries.push(e);
            }
        }
        let _ = writeln!(
            out,
            "# The server asked for these hosts (not granted while learning; add them if it should reach them):\n[network]\nallow_domains = [{}]",
            entries
                .iter()
                .map(|e| format!("\"{e}\""))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if learned.is_empty() && !hosts.is_empty() {
        let _ = writeln!(out, "# no [runtime] line to propose");
        return;
    }
    if learned.is_empty() {
        let _ = writeln!(
            out,
            "# {}",
            if started {
                "nothing to add: the server starts under this policy"
            } else {
                "no policy line to propose"
            }
        );
        return;
    }
    let _ = writeln!(
        out,
        "# Add to the server's policy ({}):",
        if started {
            "with these, it started"
        } else {
            "with these it still did not start"
        }
    );
    for l in learned {
        let _ = writeln!(out, "# {}: {}", shown_quoted(&l.path, home), l.why);
    }
    let _ = writeln!(out, "[runtime]");
    for (key, kind) in [
        ("read", ExtraKind::Read),
        ("exec", ExtraKind::Exec),
        ("write", ExtraKind::Write),
    ] {
        let list: Vec<String> = learned
            .iter()
            .filter(|l| l.kinds().contains(&kind))
            .map(|l| shown_toml(&l.path, home))
            .collect();
        if !list.is_empty() {
            let _ = writeln!(out, "{key} = [{}]", list.join(", "));
        }
    }
}

/// What one launch found.
struct Attempt {
    /// How it ended.
    outcome: Outcome,
    /// What rootfence observed of it: the paths the sandbox refused it.
    observed: Observed,
    /// The hosts the proxy refused because the list does not name them.
    asked: Vec<Target>,
}

/// Launch the server once under `plan` and drive it to `tools/list`.
fn attempt(plan: &crate::plan::SandboxPlan, timeout: Duration) -> Result<Attempt, String> {
    let mut child = sandbox::spawn(plan, StdioConfig::all_piped()).map_err(|e| e.to_string())?;
    let mut stdin = child.take_stdin().ok_or("no stdin")?;
    let stdout = child.take_stdout().ok_or("no stdout")?;
    let stderr = child.take_stderr().ok_or("no stderr")?;
    let (tx, rx) = mpsc::channel::<Option<serde_json::Value>>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Ok(v) = serde_json::from_str(&line)
                && tx.send(Some(v)).is_err()
            {
                return;
            }
        }
        let _ = tx.send(None);
    });
    // Its stderr is shown (its last lines), never read for paths.
    let stderr_thread = std::thread::spawn(move || {
        let mut tail: Vec<String> = Vec::new();
        let mut r = BufReader::new(stderr);
        let mut buf = Vec::new();
        while r.read_until(b'\n', &mut buf).is_ok_and(|n| n > 0) {
            tail.push(String::from_utf8_lossy(&buf).trim_end().to_string());
            if tail.len() > 5 {
                tail.remove(0);
            }
            buf.clear();
        }
        tail
    });
    let send = |stdin: &mut std::process::ChildStdin, v: serde_json::Value| {
        let _ = writeln!(stdin, "{v}");
        let _ = stdin.flush();
    };
    send(
        &mut stdin,
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "rootfence-learn", "version": env!("CARGO_PKG_VERSION")}}}),
    );
    let deadline = Instant::now() + timeout;
    let mut outcome = None;
    while outcome.is_none() {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(Some(v)) if v["id"] == 1 => {
                if v.get("error").is_some() {
                    outcome = Some(Outcome::Failed {
                        why: format!("initialize was refused: {}", v["error"]),
                    });
                } else {
                    send(
                        &mut stdin,
                        serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
                    );
                    send(
                        &mut stdin,
                        serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
                    );
                }
            }
            Ok(Some(v)) if v["id"] == 2 => {
                outcome = Some(match v["result"]["tools"].as_array() {
                    Some(t) => Outcome::Started { tools: t.len() },
                    None => Outcome::Failed {
                        why: format!("tools/list was not answered with tools: {v}"),
                    },
                });
            }
            Ok(Some(_)) => {}
            Ok(None) => {
                outcome = Some(Outcome::Failed {
                    why: "the server ended before answering".into(),
                })
            }
            Err(_) => {
                outcome = Some(Outcome::Failed {
                    why: format!("no answer within {} s", timeout.as_secs()),
                })
            }
        }
    }
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
    let asked: Vec<Target> = child
        .network_decisions()
        .into_iter()
        .filter(|j| j.decision == crate::netproxy::Decision::Refused && j.unlisted)
        .filter_map(|j| j.target)
        .collect();
    let observed = child
        .observed()
        .ok_or("the sandbox could not be observed (no supervisor of its filter)")?;
    let tail = stderr_thread.join().unwrap_or_default();
    let outcome = match outcome {
        Some(Outcome::Failed { why }) if !tail.is_empty() => Outcome::Failed {
            why: format!("{why}; its last words: {}", tail.join(" | ")),
        },
        Some(o) => o,
        None => Outcome::Failed {
            why: "no answer".into(),
        },
    };
    Ok(Attempt {
        outcome,
        observed,
        asked,
    })
}
