//! `rootfence explain` and `rootfence doctor`.

use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

use crate::plan::{self, SandboxPlan};
use crate::runtime::HostEnv;
use crate::sandbox;

use super::{LaunchArgs, load_launch_policy, load_policy};

pub(super) fn explain(args: &LaunchArgs, json: bool) -> ExitCode {
    // The policy's rules and the plan resolve the same ancestors.
    let _memo = crate::canon::Memo::hold();
    let env = HostEnv::current();
    let policy = match load_launch_policy(args, &env) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("rootfence: {e}");
            return ExitCode::from(2);
        }
    };
    let plan = match args.plan(&policy, &env) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("rootfence: {e}");
            return ExitCode::from(2);
        }
    };
    if json {
        match serde_json::to_string_pretty(&plan) {
            Ok(s) => println!("{s}"),
            Err(e) => {
                eprintln!("rootfence: cannot print the plan: {e}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        // One write: stdout is line-buffered, and the plan is long.
        let mut out = render(&plan);
        out.push_str("\nisolation on this machine:\n");
        let caps = sandbox::probe_remembered();
        for line in isolation_lines(&plan, &caps) {
            let _ = writeln!(out, "  {line}");
        }
        out.push_str("\nsystem calls (seccomp; a call not listed is refused with ENOSYS):\n");
        for line in syscall_lines(&plan, &caps, true) {
            let _ = writeln!(out, "  {line}");
        }
        let mut stdout = std::io::stdout().lock();
        if let Err(e) = std::io::Write::write_all(&mut stdout, out.as_bytes())
            .and_then(|()| std::io::Write::flush(&mut stdout))
        {
            eprintln!("rootfence: cannot print the plan: {e}");
            return ExitCode::FAILURE;
        }
    }
    for r in &plan.refused {
        eprintln!("rootfence: {r}");
    }
    if plan.refused.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// What the server is not told about the host, and why: one line each, for
/// `explain` and `run`'s log at start.
pub fn withheld(c: &plan::HostCapabilities) -> Vec<String> {
    vec![format!(
        "\nasking the host: sampling {}; elicitation {}",
        if c.sampling {
            "allowed (through the guard)"
        } else {
            "WITHHELD (sampling.allow = false): the server is not told the host can sample, and a sampling request is refused with -32001; tools that need it may not be offered"
        },
        match (c.elicitation_form, c.elicitation_url) {
            (false, false) =>
                "WITHHELD (elicitation.allow = false): the server is not told the host can ask the user",
            (true, false) =>
                "forms only (through the guard; URL mode withheld: elicitation.url = false)",
            (false, true) => "URL mode only (through the guard)",
            (true, true) => "forms and URL mode (through the guard)",
        }
    )]
}

/// The network proxy's part of `explain`: the list, the pins, what
/// happens to everything else.
fn render_domains(s: &mut String, d: Option<&plan::DomainPlan>) {
    use crate::netproxy::rule::HostPattern;
    let Some(d) = d else {
        let _ = writeln!(s, "  domains:     none (no network proxy)");
        return;
    };
    let _ = writeln!(
        s,
        "  domains:     through rootfence's HTTP proxy only (absolute-form http and CONNECT); every other host gets 403, and the sandbox refuses every other connection, UDP and DNS (`rootfence doctor` says how on this machine)"
    );
    if d.allow.is_empty() {
        let _ = writeln!(s, "    (none: every request is refused and recorded)");
    }
    for r in &d.allow {
        let what = match &r.host {
            HostPattern::Name(n) if n == "localhost" => "loopback (listed)".to_string(),
            HostPattern::Name(_) => "this name only".to_string(),
            HostPattern::Subdomains(b) => format!("the subdomains of {b} (not {b} itself)"),
            HostPattern::Ip(a) => format!("the address {a} itself"),
        };
        let _ = writeln!(s, "    {:<32} {what}, {}", r.text, r.ports());
    }
    for (name, addr) in &d.hosts {
        let _ = writeln!(s, "  pinned:      {name} -> {addr} (not asked of DNS)");
    }
    let _ = writeln!(
        s,
        "  loopback, link-local and unspecified addresses are reached only when listed (localhost:PORT, the address itself, or a pin)"
    );
    let _ = writeln!(
        s,
        "  decisions:   logged (target audit){}",
        d.audit_file
            .as_ref()
            .map(|f| format!(" and appended to {}", f.display()))
            .unwrap_or_default()
    );
}

/// The human-readable form of a plan.
pub fn render(plan: &SandboxPlan) -> String {
    let mut s = String::new();
    let argv: Vec<String> = plan
        .command
        .argv
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let _ = writeln!(s, "policy:   {}", plan.policy);
    let _ = writeln!(s, "command:  {}", argv.join(" "));
    let _ = writeln!(s, "program:  {}", plan.command.program.display());
    if let Some(i) = &plan.command.interpreter {
        let _ = writeln!(s, "interpreter: {}", i.display());
    }
    render_roots(&mut s, plan);
    render_paths(&mut s, plan);
    render_isolation_and_network(&mut s, plan);
    render_environment(&mut s, plan);
    for line in withheld(&plan.capabilities) {
        let _ = writeln!(s, "{line}");
    }
    let l = &plan.limits;
    let _ = writeln!(
        s,
        "\nlimits:   max message {} bytes; restart {:?} (max {}, backoff {} ms); drain {} ms; debounce {} ms; shutdown grace {} ms",
        l.max_message_bytes,
        l.restart,
        l.max_restarts,
        l.restart_backoff_ms,
        l.drain_timeout_ms,
        l.rebuild_debounce_ms,
        l.shutdown_grace_ms
    );
    for w in &plan.warnings {
        let _ = writeln!(s, "warning:  {w}");
    }
    s
}

/// The enforced, folded and refused roots.
fn render_roots(s: &mut String, plan: &SandboxPlan) {
    let _ = writeln!(s, "\nroots ({} enforced):", plan.roots.len());
    if plan.roots.is_empty() {
        let _ = writeln!(s, "  (none)");
    }
    for r in &plan.roots {
        let _ = writeln!(
            s,
            "  {:<10} {:<9} {}  name {:?}, from {} {:?}",
            r.access,
            format!("{:?}", r.kind).to_lowercase(),
            r.uri,
            r.name,
            r.source,
            r.input
        );
    }
    for (r, into) in &plan.folded {
        let _ = writeln!(
            s,
            "  folded     {} ({}) into {}",
            r.uri,
            r.access,
            into.display()
        );
    }
    if !plan.refused.is_empty() {
        let _ = writeln!(s, "\nrefused roots ({}):", plan.refused.len());
        for r in &plan.refused {
            let _ = writeln!(s, "  {} (from {}): {}", r.input, r.from, r.reason);
        }
    }
}

/// The rules, and every path with its rights and the rule that grants it.
fn render_paths(s: &mut String, plan: &SandboxPlan) {
    let _ = writeln!(
        s,
        "\nrules (what every server gets besides its roots; each path below names its rule):"
    );
    for rule in crate::runtime::Rule::ALL {
        let _ = writeln!(s, "  {}", rule.statement());
    }
    let _ = writeln!(s, "  {}", crate::runtime::NEVER_STATEMENT);
    let _ = writeln!(s, "  {}", crate::runtime::HOME_STATEMENT);
    let _ = writeln!(s, "\npaths (everything else is denied):");
    for g in &plan.grants {
        let absent = if g.handle.is_none() && !Path::new(&g.path).exists() {
            " [absent here: skipped]"
        } else {
            ""
        };
        let why: Vec<String> = g.reasons.iter().map(ToString::to_string).collect();
        let _ = writeln!(
            s,
            "  {}  {:<40} {}{}",
            g.rights,
            g.path.display(),
            why.join("; "),
            absent
        );
    }
    if plan.scratch {
        let _ = writeln!(
            s,
            "  rw-  <scratch dir>                          private TMPDIR, mode 0700, removed at exit"
        );
    }
    for l in &plan.private_layers {
        let _ = writeln!(
            s,
            "  r-x  {:<40} writes go to a private layer, discarded at exit ({})",
            l.path.display(),
            l.why
        );
    }
    match (&plan.private_home, &plan.home_store) {
        (Some(h), Some(store)) => {
            let _ = writeln!(
                s,
                "  rw-  {:<40} home: the server's own store {} (kept across sessions; with namespaces its home directory, without them its XDG directories)",
                h.display(),
                store.home().display()
            );
        }
        (Some(h), None) => {
            let _ = writeln!(
                s,
                "  rw-  {:<40} home: a private directory of the server's own (with namespaces), discarded at exit",
                h.display()
            );
        }
        (None, Some(store)) => {
            let _ = writeln!(
                s,
                "  rw-  {:<40} the server's own store: its XDG directories (kept across sessions)",
                store.home().display()
            );
        }
        (None, None) => {}
    }
    for f in &plan.scratch_files {
        let _ = writeln!(
            s,
            "  r--  <scratch dir>/{:<28} {} (as {})",
            f.name, f.why, f.env
        );
    }
    for p in &plan.protected {
        let _ = writeln!(
            s,
            "  {}  {:<40} {}: {}",
            if p.readonly { "r--" } else { "rw-" },
            p.path.display(),
            if p.readonly {
                "read-only in the view"
            } else {
                "pinned in place in the view"
            },
            p.why
        );
    }
}

/// The isolation, the network and the scopes.
fn render_isolation_and_network(s: &mut String, plan: &SandboxPlan) {
    let _ = writeln!(
        s,
        "\nisolation: namespaces {}",
        match plan.namespaces {
            plan::NamespaceMode::Auto =>
                "where the kernel grants them (own user, mount, PID, IPC namespaces; a view holding only the paths above); `rootfence doctor` tells whether it does",
            plan::NamespaceMode::Require =>
                "required (own user, mount, PID, IPC namespaces; a view holding only the paths above)",
            plan::NamespaceMode::Off => "off: Landlock and seccomp only",
        }
    );
    let n = &plan.network;
    let ports = |p: &[u16]| {
        if p.is_empty() {
            "none".to_string()
        } else {
            p.iter().map(u16::to_string).collect::<Vec<_>>().join(", ")
        }
    };
    let _ = writeln!(s, "\nnetwork:");
    let _ = writeln!(s, "  tcp connect: {}", ports(&n.tcp_connect));
    let _ = writeln!(s, "  tcp bind:    {}", ports(&n.tcp_bind));
    let _ = writeln!(
        s,
        "  udp/raw:     {}",
        if n.udp { "allowed" } else { "denied" }
    );
    let _ = writeln!(
        s,
        "  unix socket connect outside the sandbox: {}",
        if n.unix_sockets { "allowed" } else { "denied" }
    );
    render_domains(s, n.domains.as_ref());
    let _ = writeln!(
        s,
        "scopes:   signals {}, abstract unix sockets {}",
        if plan.scopes.signal { "scoped" } else { "open" },
        if plan.scopes.abstract_unix_socket {
            "scoped"
        } else {
            "open"
        }
    );
}

/// The server's environment, and what of rootfence's does not reach it.
fn render_environment(s: &mut String, plan: &SandboxPlan) {
    let n = &plan.network;
    let _ = writeln!(
        s,
        "\nenvironment ({} variables; nothing else is passed):",
        plan.env.len()
            + usize::from(plan.scratch)
            + if n.domains.is_some() {
                crate::netproxy::proxy_env("").len()
            } else {
                0
            }
    );
    for (k, (v, src)) in &plan.env {
        let _ = writeln!(
            s,
            "  {k}={v}  ({})",
            match src {
                plan::EnvSource::Passed => "passed",
                plan::EnvSource::Set => "set by policy",
                plan::EnvSource::Rule => "set by the runtime rules",
                plan::EnvSource::Flag => "--env",
                plan::EnvSource::Host => "set by the host for this launch",
            }
        );
    }
    if plan.scratch {
        let _ = writeln!(s, "  TMPDIR=<scratch dir>");
    }
    if n.domains.is_some() {
        let names: Vec<&str> = crate::netproxy::proxy_env("")
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        let _ = writeln!(
            s,
            "  {}=http://<rootfence's network proxy>",
            names.join(", ")
        );
    }
    if !plan.env_dropped.is_empty() {
        let _ = writeln!(
            s,
            "not passed ({} variables of rootfence's environment; pass one with --env NAME or [env] pass):",
            plan.env_dropped.len()
        );
        let _ = writeln!(s, "  {}", plan.env_dropped.join(" "));
    }
}

pub(super) fn doctor(policy_file: Option<&Path>, json: bool) -> ExitCode {
    let env = HostEnv::current();
    let caps = sandbox::probe_with_namespaces();
    let policy = match load_policy(policy_file, &env) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("rootfence: {e}");
            return ExitCode::from(2);
        }
    };
    // What the policy would lose is judged on a plan for a trivial command;
    // losses depend on the network, scope, isolation and resources parts,
    // not on the command.
    let args = LaunchArgs {
        policy: None,
        roots: vec![],
        ro_roots: vec![],
        env: vec![],
        command: vec!["/bin/true".into()],
    };
    let plan = match args.plan(&policy, &env) {
        Ok(plan) => plan,
        Err(e) => {
            eprintln!("rootfence: {e}");
            return ExitCode::from(2);
        }
    };
    let losses = sandbox::losses(&plan, &caps);
    let coverage = sandbox::coverage(&plan, &caps);
    let rung = sandbox::rung(&plan, &caps);
    let can_run = rung.is_ok() && !losses.iter().any(|l| l.fatal);
    if json {
        let v = serde_json::json!({
            "kernel": caps.kernel,
            "landlock": caps.landlock,
            "seccomp": caps.seccomp,
            "features": caps.features().iter().map(|(abi, name, ok)| serde_json::json!({"abi": abi, "feature": name, "available": ok})).collect::<Vec<_>>(),
            "namespaces": caps.namespaces,
            "network_namespace": caps.network_namespace,
            "network_by_domain": match sandbox::domain_rung_here(&plan, &caps) {
                Ok(design) => serde_json::json!({ "design": design }),
                Err(refused) => serde_json::json!({ "refused": refused.to_string() }),
            },
            "clone3": clone3_state(),
            "cgroup": caps.cgroup,
            "resources": sandbox::coverage::resources_here(&plan, &caps),
            "rung": rung.as_ref().ok(),
            "rung_missing": rung.as_ref().err().map(|missing| [missing.to_string()]),
            "policy": policy.name(),
            "losses": losses,
            "coverage": coverage,
            "can_run": can_run,
        });
        println!("{v:#}");
    } else {
        print_machine(&caps);
        println!("\nisolation (policy {}):", policy.name());
        for line in isolation_lines(&plan, &caps) {
            println!("  {line}");
        }
        println!("\nsystem calls (seccomp):");
        for line in syscall_lines(&plan, &caps, false) {
            println!("  {line}");
        }
        println!(
            "\nescape classes, and what closes each here (policy {}):",
            policy.name()
        );
        for c in &coverage {
            println!("  [{}] {}: {}", closed(c.closed), c.class, c.how);
        }
        println!("\nwith policy {}:", policy.name());
        if losses.is_empty() {
            println!("  nothing is lost: every rule can be enforced");
        }
        for l in &losses {
            println!(
                "  {} {}: {}",
                if l.fatal { "FATAL" } else { "note " },
                l.wants,
                l.missing
            );
        }
        println!(
            "\nrootfence can run here: {}",
            if can_run {
                "yes"
            } else {
                "no (see FATAL above)"
            }
        );
    }
    if can_run {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// How `clone3` fares here (after the namespace probe started a process).
fn clone3_state() -> &'static str {
    match sandbox::clone_call() {
        Some(sandbox::CloneCall::Clone3) => "available",
        Some(sandbox::CloneCall::Clone) => {
            "refused (ENOSYS, as in Docker's default seccomp profile): processes are started with clone"
        }
        None => "not tried",
    }
}

fn closed(c: sandbox::Closed) -> &'static str {
    match c {
        sandbox::Closed::Yes => "closed",
        sandbox::Closed::Partly => "partly",
        sandbox::Closed::No => "OPEN  ",
    }
}

/// The kernel, Landlock, seccomp, namespaces and their features.
fn print_machine(caps: &sandbox::Capabilities) {
    println!("kernel:   {}", caps.kernel);
    match &caps.landlock {
        sandbox::LandlockStatus::Available { abi } => println!("landlock: ABI {abi}"),
        sandbox::LandlockStatus::NotBuilt => {
            println!("landlock: not built into this kernel (CONFIG_SECURITY_LANDLOCK)")
        }
        sandbox::LandlockStatus::Disabled => println!(
            "landlock: built but not enabled at boot: add landlock to the lsm= kernel parameter"
        ),
        sandbox::LandlockStatus::Error { message } => {
            println!("landlock: cannot be queried: {message}")
        }
    }
    println!(
        "seccomp:  {}",
        if caps.seccomp {
            "available"
        } else {
            "not available"
        }
    );
    println!("clone3:   {}", clone3_state());
    match &caps.namespaces {
        Some(n) if n.available => println!(
            "namespaces: available (mount, PID, IPC{}){}",
            if n.own_user_namespace {
                ", and user: rootfence is not root"
            } else {
                "; no user namespace: rootfence is root"
            },
            if n.overlay {
                ", with overlay mounts"
            } else {
                "; overlay mounts are not (caches get empty private copies)"
            }
        ),
        Some(n) => println!("namespaces: NOT available: {}", n.why_not()),
        None => {}
    }
    match &caps.network_namespace {
        Some(n) if n.available => {
            println!("network namespace: available (network by domain holds there)")
        }
        Some(n) => println!("network namespace: NOT available: {}", n.why_not()),
        None => {}
    }
    if let Some(c) = &caps.cgroup {
        let mut line = if c.at.is_empty() {
            "cgroup:   none for the servers".to_string()
        } else {
            let at: Vec<String> = c.at.iter().map(ToString::to_string).collect();
            format!("cgroup:   {}", at.join("; "))
        };
        if let Some(why) = &c.why {
            line.push_str(&format!(" ({why})"));
        }
        println!("{line}");
    }
    println!("\nLandlock features:");
    for (abi, name, ok) in caps.features() {
        println!("  [{}] ABI {abi}: {name}", if ok { "x" } else { " " });
    }
}

/// The seccomp table for `plan` on this machine by named group: each
/// group with why (and, with `calls`, its calls), the calls with a rule of
/// their own, and the calls refused on purpose.
pub fn syscall_lines(plan: &SandboxPlan, caps: &sandbox::Capabilities, calls: bool) -> Vec<String> {
    use crate::sandbox::seccomp;
    let namespaces = sandbox::rung(plan, caps).is_ok_and(|r| r.namespaces());
    let g = seccomp::groups(&seccomp::FilterPolicy::for_plan(
        &plan.network,
        caps.abi(),
        namespaces,
    ));
    let mut out = Vec::new();
    for a in &g.allowed {
        out.push(if calls {
            format!(
                "@{} ({}): {}: {}",
                a.name,
                a.calls.len(),
                a.why,
                a.calls.join(" ")
            )
        } else {
            format!("@{} ({}): {}", a.name, a.calls.len(), a.why)
        });
    }
    let checked: Vec<&str> = g.checked.iter().map(|(name, _)| *name).collect();
    out.push(format!(
        "with a rule of their own (argument checks, rootfence's supervisor) ({}): {}",
        checked.len(),
        checked.join(" ")
    ));
    let refused: usize = g.refused.iter().map(|r| r.calls.len()).sum();
    if calls {
        for r in &g.refused {
            out.push(format!("refused: {} ({})", r.calls.join(" "), r.why));
        }
    } else {
        out.push(format!(
            "refused on purpose, each with why: {refused} (`rootfence explain` lists them)"
        ));
    }
    out
}

/// The rung this machine gives `plan`, and what the missing layers leave
/// open (the classes not closed, in the README's words): for `doctor` and
/// `explain`.
pub fn isolation_lines(plan: &SandboxPlan, caps: &sandbox::Capabilities) -> Vec<String> {
    let mut out = Vec::new();
    match sandbox::rung(plan, caps) {
        Ok(r) => out.push(format!("rung: {r}")),
        Err(missing) => out.push(format!(
            "rung: NONE: rootfence refuses to start here: {missing}"
        )),
    }
    out.push(
        "the ladder: full (Landlock, seccomp, namespaces with the filesystem view); Landlock + seccomp (no namespaces); view + seccomp (no Landlock, only with [isolation] landlock = \"prefer\")".into(),
    );
    out.push(match sandbox::domain_rung_here(plan, caps) {
        Ok(d) => format!("network by domain ([network] allow_domains): {d}"),
        Err(missing) => {
            format!("network by domain ([network] allow_domains): NOT POSSIBLE here: {missing}")
        }
    });
    for c in sandbox::coverage(plan, caps) {
        // What [resources] bounds here is said even when all of it is.
        if c.class == sandbox::coverage::RESOURCES && c.closed == sandbox::Closed::Yes {
            out.push(format!("closed: {}: {}", c.class, c.how));
        } else if c.closed != sandbox::Closed::Yes {
            out.push(format!(
                "leaves {}: {}: {}",
                closed(c.closed).trim().to_lowercase(),
                c.class,
                c.how
            ));
        }
    }
    out
}
