//! `rootfence learn`: run a server under its plan until it starts, and
//! print the policy lines its denials call for.
//!
//! Each round launches the server fenced, drives `initialize` and
//! `tools/list`, and reads its stderr for the sandbox's denials (see
//! [`crate::sandbox::hints`]). A denied path that no rule forbids becomes a
//! `[runtime] read` or `write` line of the next round's policy; a denied
//! path that is a secret is named and never proposed. It stops when the
//! server answers `tools/list`, when a round finds nothing new, or after
//! `--rounds`.
//!
//! The server's network goes through rootfence's proxy while it learns
//! (unless the policy opens TCP ports or UDP itself): the hosts it asked
//! for that the policy's `allow_domains` does not list are proposed as
//! `[network] allow_domains` lines. They are not granted while learning
//! (the server learns nothing it could send out).

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::netproxy::{Target, TargetHost};
use crate::policy::{ExtraKind, ExtraPath, Policy, deny_conflict};
use crate::roots::Origin;
use crate::runtime::{HostEnv, shown};
use crate::sandbox::{self, StdioConfig, hints::StderrWatch};

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

/// One line the denials call for.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Learned {
    path: PathBuf,
    write: bool,
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
    let mut hosts: Vec<Target> = Vec::new();
    let mut secrets: Vec<PathBuf> = Vec::new();
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
        eprintln!(
            "rootfence learn: round {round}: launching {}",
            plan.command.program.display()
        );
        let (outcome, denials, asked) =
            match attempt(&plan, &env, Duration::from_secs(args.timeout)) {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("rootfence: {e}");
                    return ExitCode::from(2);
                }
            };
        for t in asked {
            if !hosts.contains(&t) {
                eprintln!(
                    "rootfence learn: the server asked for {t}, which the policy's allow_domains does not list"
                );
                hosts.push(t);
            }
        }
        let mut new = 0;
        for d in denials {
            if let Some((rule, _)) = deny_conflict(&d.path, &base.deny) {
                if !secrets.contains(&d.path) {
                    eprintln!(
                        "rootfence learn: the server asked for {}, which is denied ({} {}): no policy line is proposed for it",
                        d.path.display(),
                        rule.shown,
                        rule.origin
                    );
                    secrets.push(d.path.clone());
                }
                continue;
            }
            match learned.iter_mut().find(|l| l.path == d.path) {
                Some(l) if d.write && !l.write => {
                    l.write = true;
                    new += 1;
                }
                Some(_) => {}
                None => {
                    learned.push(Learned {
                        path: d.path.clone(),
                        write: d.write,
                    });
                    new += 1;
                }
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
                        "rootfence learn: nothing more to learn from its denials; the server does not start under this policy"
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

/// `base` with the learned paths granted as `[runtime]` entries.
fn with_learned(base: &Policy, learned: &[Learned]) -> Policy {
    let mut p = base.clone();
    for l in learned {
        p.extra.push(ExtraPath {
            shown: l.path.display().to_string(),
            path: l.path.clone(),
            kind: if l.write {
                ExtraKind::Write
            } else {
                ExtraKind::Read
            },
            origin: Origin::Learned,
        });
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
    if let Err(why) = sandbox::domain_rung_here(&proxied, &sandbox::probe_with_namespaces()) {
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
    let list = |write: bool| -> String {
        learned
            .iter()
            .filter(|l| l.write == write)
            .map(|l| format!("\"{}\"", shown(&l.path, home)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let _ = writeln!(
        out,
        "# Add to the server's policy ({}):\n[runtime]",
        if started {
            "with these, it started"
        } else {
            "with these it still did not start"
        }
    );
    let read = list(false);
    if !read.is_empty() {
        let _ = writeln!(out, "read = [{read}]");
    }
    let write = list(true);
    if !write.is_empty() {
        let _ = writeln!(out, "write = [{write}]");
    }
}

/// What one launch found: how it ended, the sandbox's denials, and the
/// hosts the proxy refused because the list does not name them.
type Attempt = (Outcome, Vec<sandbox::hints::Denial>, Vec<Target>);

/// Launch the server once under `plan` and drive it to `tools/list`.
fn attempt(
    plan: &crate::plan::SandboxPlan,
    env: &HostEnv,
    timeout: Duration,
) -> Result<Attempt, String> {
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
    let mut watch = StderrWatch::new(plan.clone(), env.home.clone());
    let exists = |p: &Path| p.symlink_metadata().is_ok();
    let stderr_thread = std::thread::spawn(move || {
        let mut found = Vec::new();
        let mut tail: Vec<String> = Vec::new();
        let mut r = BufReader::new(stderr);
        let mut buf = Vec::new();
        while r.read_until(b'\n', &mut buf).is_ok_and(|n| n > 0) {
            found.extend(watch.feed(&buf, &exists));
            tail.push(String::from_utf8_lossy(&buf).trim_end().to_string());
            if tail.len() > 5 {
                tail.remove(0);
            }
            buf.clear();
        }
        found.extend(watch.finish(&exists));
        (found, tail)
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
        .map(|j| j.target)
        .collect();
    let (denials, tail) = stderr_thread.join().unwrap_or_default();
    let outcome = match outcome {
        Some(Outcome::Failed { why }) if !tail.is_empty() => Outcome::Failed {
            why: format!("{why}; its last words: {}", tail.join(" | ")),
        },
        Some(o) => o,
        None => Outcome::Failed {
            why: "no answer".into(),
        },
    };
    Ok((outcome, denials, asked))
}
