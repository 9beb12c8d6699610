//! `rootfence exec`: run one command under the sandbox, stdio inherited,
//! its exit status passed through.

use std::process::ExitCode;

use crate::runtime::HostEnv;
use crate::sandbox::{self, SandboxError, StdioConfig};

use super::{LaunchArgs, load_launch_policy};

/// Exit code when rootfence itself fails before starting the command (as
/// `env` and container runtimes do).
pub const EXIT_ROOTFENCE: u8 = 125;
/// Exit code when the command cannot be executed.
pub const EXIT_NOT_EXECUTABLE: u8 = 126;
/// Exit code when the command is not found.
pub const EXIT_NOT_FOUND: u8 = 127;

/// `rootfence exec` options.
#[derive(Debug, clap::Args)]
pub struct ExecArgs {
    /// Let the command connect to this TCP port (in addition to the
    /// policy's network.tcp_connect). Repeatable.
    #[arg(long = "allow-tcp-connect", value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
    pub tcp_connect: Vec<u16>,
    /// Let the command bind this TCP port (in addition to the policy's
    /// network.tcp_bind). Repeatable.
    #[arg(long = "allow-tcp-bind", value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
    pub tcp_bind: Vec<u16>,
    /// Run the command WITHOUT any sandbox (no Landlock, no seccomp) when
    /// this kernel cannot enforce the policy. It can then read, write and
    /// connect to everything you can.
    #[arg(long = "unconfined-i-know-this-is-unsafe")]
    pub unconfined: bool,
    /// Report every system call the sandbox refuses the command (its name
    /// and why) on stderr, and list them when it exits: what to look at
    /// when a program fails under rootfence and not outside.
    #[arg(long = "report-refused-calls")]
    pub report_refused_calls: bool,
    #[command(flatten)]
    pub launch: LaunchArgs,
}

/// The termination signals rootfence forwards to the server: it runs in
/// its own session, so a terminal's ^C reaches only rootfence.
const FORWARDED: [i32; 4] = [
    signal_hook::consts::SIGINT,
    signal_hook::consts::SIGTERM,
    signal_hook::consts::SIGHUP,
    signal_hook::consts::SIGQUIT,
];

/// Forward every signal `signals` receives (from now on, and those that
/// came before) to process `pid` while `running` holds, from a thread of
/// its own (once the server is reaped its pid may name another process).
fn forward_to(
    mut signals: signal_hook::iterator::Signals,
    pid: u32,
    running: std::sync::Arc<std::sync::atomic::AtomicBool>,
) {
    use rustix::process::{Pid, Signal, kill_process};
    let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) else {
        return;
    };
    std::thread::spawn(move || {
        for sig in signals.forever() {
            if !running.load(std::sync::atomic::Ordering::SeqCst) {
                break;
            }
            let s = match sig {
                signal_hook::consts::SIGINT => Signal::INT,
                signal_hook::consts::SIGTERM => Signal::TERM,
                signal_hook::consts::SIGHUP => Signal::HUP,
                _ => Signal::QUIT,
            };
            let _ = kill_process(pid, s);
        }
    });
}

/// The plan `exec` launches, with the command line's network flags; the
/// exit code when there is none (every root asked for must be enforced).
fn exec_plan(args: &ExecArgs, env: &HostEnv) -> Result<crate::plan::SandboxPlan, u8> {
    // The policy's rules and the plan resolve the same ancestors.
    let _memo = crate::canon::Memo::hold();
    let policy = match load_launch_policy(&args.launch, env) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("rootfence: {e}");
            return Err(EXIT_ROOTFENCE);
        }
    };
    let mut plan = match args.launch.plan(&policy, env) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("rootfence: {e}");
            return Err(match e {
                crate::runtime::RuntimeError::NotFound(_) | crate::runtime::RuntimeError::Empty => {
                    EXIT_NOT_FOUND
                }
                crate::runtime::RuntimeError::NotExecutable(_) => EXIT_NOT_EXECUTABLE,
            });
        }
    };
    if !plan.refused.is_empty() {
        for r in &plan.refused {
            eprintln!("rootfence: {r}");
        }
        eprintln!(
            "rootfence: refusing to start with fewer roots than asked for; fix or drop the refused roots"
        );
        return Err(EXIT_ROOTFENCE);
    }
    if plan.network.domains.is_some() && !(args.tcp_connect.is_empty() && args.tcp_bind.is_empty())
    {
        eprintln!(
            "rootfence: --allow-tcp-connect and --allow-tcp-bind cannot be combined with the policy's [network] allow_domains (the server's network is rootfence's proxy only); list \"host:port\" in allow_domains instead"
        );
        return Err(EXIT_ROOTFENCE);
    }
    let net = &mut plan.network;
    net.tcp_connect.extend(&args.tcp_connect);
    net.tcp_connect.sort_unstable();
    net.tcp_connect.dedup();
    net.tcp_bind.extend(&args.tcp_bind);
    net.tcp_bind.sort_unstable();
    net.tcp_bind.dedup();
    plan.report_refusals = args.report_refused_calls;
    for w in &plan.warnings {
        tracing::warn!("{w}");
    }
    Ok(plan)
}

/// Start the sandboxed server (unconfined only when asked and the kernel
/// cannot enforce the sandbox); the exit code when it cannot start.
fn start(
    args: &ExecArgs,
    plan: &crate::plan::SandboxPlan,
    stdio: StdioConfig,
) -> Result<sandbox::SandboxedChild, u8> {
    let started = sandbox::spawn(plan, stdio);
    let started = match started {
        Err(SandboxError::CannotEnforce { missing }) if args.unconfined => {
            eprintln!(
                "rootfence: WARNING: RUNNING {} UNCONFINED, WITHOUT ANY SANDBOX (--unconfined-i-know-this-is-unsafe): it can read, write and connect to everything this user can. The kernel cannot enforce: {}",
                plan.command.program.display(),
                sandbox::ladder::joined(&missing)
            );
            sandbox::spawn_unconfined(plan, stdio)
        }
        other => other,
    };
    started.map_err(|e| {
        eprintln!("rootfence: {e}");
        match &e {
            SandboxError::Spawn { source, .. } => match source.raw_os_error() {
                Some(libc::ENOENT) => EXIT_NOT_FOUND,
                Some(libc::EACCES) | Some(libc::ENOEXEC) => EXIT_NOT_EXECUTABLE,
                _ => EXIT_ROOTFENCE,
            },
            _ => EXIT_ROOTFENCE,
        }
    })
}

pub(super) fn exec(args: &ExecArgs) -> ExitCode {
    let env = HostEnv::current();
    let plan = match exec_plan(args, &env) {
        Ok(plan) => plan,
        Err(code) => return ExitCode::from(code),
    };

    // Caught from now on (queued until the server's pid is known).
    let signals = match signal_hook::iterator::Signals::new(FORWARDED) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("rootfence: cannot catch termination signals to forward them: {e}");
            return ExitCode::from(EXIT_ROOTFENCE);
        }
    };
    sandbox::enable_subreaper();
    // A terminal is never handed to the server: it could keep reading and
    // writing it after rootfence returned, or change its modes. Streams that
    // are terminals go through pipes that rootfence relays while the server
    // runs.
    let stdio = StdioConfig {
        stdin: relayed_if_tty(0),
        stdout: relayed_if_tty(1),
        stderr: relayed_if_tty(2),
    };
    let mut child = match start(args, &plan, stdio) {
        Ok(c) => c,
        Err(code) => return ExitCode::from(code),
    };
    let relays = relay(&mut child);
    let running = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    forward_to(signals, child.pid(), running.clone());
    tracing::info!("started pid {}: {}", child.pid(), child.confinement());
    let status = child.wait();
    running.store(false, std::sync::atomic::Ordering::SeqCst);
    // Everything the server wrote reaches the terminal before rootfence
    // returns (its pipes are at end of file: nothing of it is left).
    for r in relays {
        let _ = r.join();
    }
    if args.report_refused_calls {
        report_refused(&child);
    }
    match status {
        Ok(st) => ExitCode::from(exit_code(st)),
        Err(e) => {
            eprintln!("rootfence: cannot wait for the command: {e}");
            ExitCode::from(EXIT_ROOTFENCE)
        }
    }
}

/// What the seccomp filter refused the server, on stderr.
fn report_refused(child: &sandbox::SandboxedChild) {
    let refused = child.refused_calls();
    if refused.is_empty() {
        eprintln!("rootfence: no system call was refused");
    }
    for r in refused {
        eprintln!(
            "rootfence: refused system call: {} ({}x, {}): {}",
            r.call,
            r.count,
            std::io::Error::from_raw_os_error(r.errno),
            r.why
        );
    }
}

/// Pipe standard stream `fd` when it is a terminal, else inherit it.
fn relayed_if_tty(fd: i32) -> sandbox::Stdio {
    // SAFETY: isatty has no memory arguments.
    if unsafe { libc::isatty(fd) } == 1 {
        sandbox::Stdio::Piped
    } else {
        sandbox::Stdio::Inherit
    }
}

/// Copy between rootfence's terminal and the server's pipes. The output
/// copies end when the server's side is closed (every process of it gone);
/// the input copy ends with rootfence.
fn relay(child: &mut sandbox::SandboxedChild) -> Vec<std::thread::JoinHandle<()>> {
    use std::io::{Read, Write};
    fn copy(mut from: impl Read, mut to: impl Write) {
        let mut buf = [0u8; 8192];
        loop {
            match from.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    if to.write_all(&buf[..n]).and_then(|()| to.flush()).is_err() {
                        break;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
    }
    let mut out = Vec::new();
    if let Some(stdin) = child.take_stdin() {
        // Not joined: it may wait on the terminal until rootfence exits.
        let _ = std::thread::Builder::new()
            .name("rootfence-stdin".into())
            .spawn(move || copy(std::io::stdin(), stdin));
    }
    if let Some(stdout) = child.take_stdout()
        && let Ok(h) = std::thread::Builder::new()
            .name("rootfence-stdout".into())
            .spawn(move || copy(stdout, std::io::stdout()))
    {
        out.push(h);
    }
    if let Some(stderr) = child.take_stderr()
        && let Ok(h) = std::thread::Builder::new()
            .name("rootfence-stderr".into())
            .spawn(move || copy(stderr, std::io::stderr()))
    {
        out.push(h);
    }
    out
}

/// A shell's exit code for `status`: the exit code, or 128 + the signal.
pub fn exit_code(status: std::process::ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => u8::try_from(c & 0xff).unwrap_or(1),
        (None, Some(sig)) => u8::try_from(128 + (sig & 0x7f)).unwrap_or(255),
        (None, None) => 1,
    }
}
