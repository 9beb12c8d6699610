//! `rootfence run`: the MCP stdio proxy. What a host's config launches.

use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;

use crate::plan::SandboxPlan;
use crate::proxy::session::ExitInfo;
use crate::proxy::{self, Ending, LaunchError, Launcher, ServerProcess, SessionConfig};
use crate::roots::{Access, RootInput};
use crate::runtime::HostEnv;
use crate::sandbox::{self, StdioConfig};
use crate::watch;

use super::{LaunchArgs, load_launch_policy};

/// `rootfence run` options.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Ignore the roots the host announces: enforce only the policy's and
    /// the command line's.
    #[arg(long)]
    pub no_host_roots: bool,
    /// Do not watch the policy file and the root directories for changes.
    #[arg(long)]
    pub no_watch: bool,
    #[command(flatten)]
    pub launch: LaunchArgs,
}

/// Size asked for the pipes to and from the server.
const PIPE_SIZE: usize = 1 << 20;

/// Launches each server generation under the Landlock sandbox.
pub struct SandboxLauncher {
    /// The user's home directory, to name paths in denial hints (`~/x`).
    pub home: Option<std::path::PathBuf>,
    /// Whether the variables left out of the server's environment were
    /// logged (once per session).
    env_logged: bool,
}

/// How long the reaper waits for the rest of a dead server's stderr (a
/// descendant outside its PID namespace may still hold the pipe).
const STDERR_TAIL: std::time::Duration = std::time::Duration::from_millis(200);

/// What a server's stderr tells: the last denial's hint once it exited,
/// and each denial as it comes.
type Diagnosis = (
    Box<dyn FnOnce() -> Option<String> + Send>,
    tokio::sync::mpsc::UnboundedReceiver<String>,
);

/// Relay a server's stderr to rootfence's, reading it for sandbox denials
/// (each logged once, with the rule that would allow the path, and sent
/// on the returned channel). The returned function, called once the server
/// has exited, gives the last denial's hint.
fn relay_stderr(
    mut from: std::process::ChildStderr,
    plan: &SandboxPlan,
    home: Option<std::path::PathBuf>,
) -> Diagnosis {
    use std::io::{Read, Write};
    let mut watch = sandbox::hints::StderrWatch::new(plan.clone(), home);
    let (done_tx, done_rx) = std::sync::mpsc::sync_channel::<Option<String>>(1);
    let exists = |p: &std::path::Path| p.exists();
    let (hints_tx, hints_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let spawned = std::thread::Builder::new()
        .name("rootfence-server-stderr".into())
        .spawn(move || {
            let mut buf = vec![0u8; 8 << 10];
            loop {
                let n = match from.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                let _ = std::io::stderr().write_all(&buf[..n]);
                for d in watch.feed(&buf[..n], &exists) {
                    tracing::warn!("sandbox denial: {}", d.hint);
                    let _ = hints_tx.send(d.hint);
                }
            }
            for d in watch.finish(&exists) {
                tracing::warn!("sandbox denial: {}", d.hint);
                let _ = hints_tx.send(d.hint);
            }
            let _ = done_tx.send(watch.last_hint().map(str::to_string));
        });
    if let Err(e) = spawned {
        tracing::warn!("cannot read the server's stderr for sandbox denials: {e}");
    }
    (
        Box::new(move || done_rx.recv_timeout(STDERR_TAIL).ok().flatten()),
        hints_rx,
    )
}

impl Launcher for SandboxLauncher {
    fn launch(&mut self, plan: &SandboxPlan) -> Result<ServerProcess, LaunchError> {
        for w in &plan.warnings {
            tracing::warn!("{w}");
        }
        if !self.env_logged {
            self.env_logged = true;
            log_dropped_env(&plan.env_dropped);
        }
        // stderr too: the server never holds rootfence's own (which may be
        // a terminal); its lines are relayed to rootfence's stderr.
        let mut child = sandbox::spawn(plan, StdioConfig::all_piped())?;
        tracing::info!("server pid {}: {}", child.pid(), child.confinement());
        let stdin = child.take_stdin().ok_or(LaunchError::NotPiped("stdin"))?;
        let stdout = child.take_stdout().ok_or(LaunchError::NotPiped("stdout"))?;
        let (diagnose, denials) = match child.take_stderr() {
            Some(stderr) => {
                let (d, rx) = relay_stderr(stderr, plan, self.home.clone());
                (Some(d), Some(rx))
            }
            None => (None, None),
        };
        // Larger pipes: a big message crosses in fewer wake-ups. Best
        // effort; the default size works too.
        let _ = rustix::pipe::fcntl_setpipe_size(&stdin, PIPE_SIZE);
        let _ = rustix::pipe::fcntl_setpipe_size(&stdout, PIPE_SIZE);
        let io = |what| move |source| LaunchError::Io { what, source };
        let stdin = tokio::process::ChildStdin::from_std(stdin)
            .map_err(io("cannot register the server's stdin"))?;
        let stdout = tokio::process::ChildStdout::from_std(stdout)
            .map_err(io("cannot register the server's stdout"))?;
        Ok(ServerProcess {
            stdin: Box::new(stdin),
            stdout: Box::new(stdout),
            pid: child.pid(),
            // Reaps the server and removes its scratch directory.
            reap: Box::new(move || child.wait().map(ExitInfo::from_status)),
            diagnose,
            denials,
        })
    }
}

/// Log, once, the names of rootfence's variables that do not reach the
/// server: all of them at info, and at warn those that look like a host
/// config's settings for the server (not a shell's or a session's, see
/// [`crate::envvars::SESSION`]). Names only: values may be secrets.
fn log_dropped_env(dropped: &[String]) {
    if dropped.is_empty() {
        return;
    }
    tracing::info!(
        "{} variables of rootfence's environment do not reach the server: {} (pass one with --env NAME, or [env] pass in the policy)",
        dropped.len(),
        dropped.join(" ")
    );
    let suspect: Vec<&str> = dropped
        .iter()
        .map(String::as_str)
        .filter(|n| !crate::envvars::is_session_variable(n))
        .collect();
    if !suspect.is_empty() {
        tracing::warn!(
            "not passed to the server: {}; if the host's config sets {} for the server, add --env NAME for each to rootfence's arguments (`rootfence wrap` does), or list {} in the policy's [env] pass",
            suspect.join(" "),
            if suspect.len() == 1 { "it" } else { "them" },
            if suspect.len() == 1 { "it" } else { "them" },
        );
    }
}

/// The server `run` launches when given no command: this executable
/// (`/proc/self/exe`, resolved) as `fs`, with the same roots made absolute
/// (the server resolves them itself; the host's roots reach it through
/// `roots/list`, answered by the proxy with the enforced roots).
fn fs_command(launch: &LaunchArgs, env: &HostEnv) -> Result<Vec<std::ffi::OsString>, String> {
    let exe = std::env::current_exe().map_err(|e| {
        format!("cannot find rootfence's own executable to serve `rootfence fs`: {e}")
    })?;
    let absolute = |r: &str| -> Result<std::ffi::OsString, String> {
        let path = if crate::roots::looks_like_uri(r) {
            crate::roots::parse_file_uri(r).map_err(|e| format!("root {r}: {e}"))?
        } else if let (Some(rest), Some(home)) = (r.strip_prefix("~/"), env.home.as_ref()) {
            home.join(rest)
        } else {
            std::path::absolute(r).map_err(|e| format!("root {r}: {e}"))?
        };
        Ok(path.into_os_string())
    };
    let mut argv = vec![exe.into_os_string(), "fs".into()];
    for r in &launch.roots {
        argv.push("--root".into());
        argv.push(absolute(r)?);
    }
    for r in &launch.ro_roots {
        argv.push("--ro-root".into());
        argv.push(absolute(r)?);
    }
    Ok(argv)
}

pub(super) fn run(mut args: RunArgs) -> ExitCode {
    let env = HostEnv::current();
    let serve_fs = args.launch.command.is_empty();
    if serve_fs {
        match fs_command(&args.launch, &env) {
            Ok(argv) => args.launch.command = argv,
            Err(e) => {
                eprintln!("rootfence: {e}");
                return ExitCode::from(2);
            }
        }
    }
    let mut policy = match load_launch_policy(&args.launch, &env) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("rootfence: {e}");
            return ExitCode::from(2);
        }
    };
    if serve_fs {
        // rootfence's own filesystem server is one self-contained
        // executable: it needs no toolchain and no package cache.
        policy.raw.runtime.profile = crate::policy::ProfileName::Native;
    }
    // Refuse at once what this kernel cannot enforce, before talking MCP.
    // Without Landlock only the view + seccomp rung is left, which the
    // policy must accept (and which needs namespaces: the launch says).
    let caps = sandbox::probe();
    if caps.abi() == 0 && policy.raw.isolation.landlock != crate::policy::LandlockName::Prefer {
        eprintln!(
            "rootfence: refusing to start: filesystem confinement: {}; run `rootfence doctor` for details",
            sandbox::coverage::no_landlock(&caps)
        );
        return ExitCode::from(2);
    }
    let mut cli_roots: Vec<RootInput> = args
        .launch
        .roots
        .iter()
        .map(|r| RootInput::command_line(r.clone(), Access::ReadWrite))
        .collect();
    cli_roots.extend(
        args.launch
            .ro_roots
            .iter()
            .map(|r| RootInput::command_line(r.clone(), Access::ReadOnly)),
    );

    sandbox::enable_subreaper();
    let caps = crate::plan::HostCapabilities::of(&policy);
    if !(caps.sampling && caps.elicitation_form) {
        for line in super::explain::withheld(&caps) {
            tracing::warn!("{}", line.trim());
        }
    }
    // One thread: every message crosses several tasks (host reader,
    // session, server writer and reader, host writer), and waking a task on
    // the same thread is far cheaper than waking another thread.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("rootfence: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let ending = runtime.block_on(async {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut _policy_watch = None;
        let mut observer: Option<proxy::session::RootsObserver> = None;
        if !args.no_watch {
            if let Some(file) = &args.launch.policy {
                match watch::watch_policy(
                    file,
                    env.home.clone(),
                    args.launch.env.clone(),
                    tx.clone(),
                ) {
                    Ok(w) => _policy_watch = Some(w),
                    Err(e) => tracing::warn!("cannot watch {} for changes: {e}", file.display()),
                }
            }
            match watch::RootWatcher::new(tx.clone()) {
                Ok(w) => {
                    let w = Arc::new(Mutex::new(w));
                    observer = Some(Box::new(move |paths| {
                        if let Ok(mut w) = w.lock() {
                            w.set(paths);
                        }
                    }));
                }
                Err(e) => tracing::warn!("cannot watch the root directories: {e}"),
            }
        }
        // Remembered `initialize` answers: one server start instead of two
        // when the roots come from the host.
        let cache = proxy::init_cache::InitCache::for_command(&env, &args.launch.command);
        let remembered_init = cache.as_ref().and_then(|c| c.load());
        let remember: Option<proxy::session::RememberFn> = cache.map(|c| {
            Box::new(move |init: &proxy::init_cache::RememberedInit| {
                if let Err(e) = c.store(init) {
                    tracing::debug!("cannot remember initialize in {}: {e}", c.path().display());
                }
            }) as proxy::session::RememberFn
        });
        let launcher = SandboxLauncher {
            home: env.home.clone(),
            env_logged: false,
        };
        let config = SessionConfig {
            policy,
            cli_roots,
            no_host_roots: args.no_host_roots,
            command: args.launch.command.clone(),
            env,
            roots_observer: observer,
            remembered_init,
            remember,
        };
        let stdin = proxy::stdio::stdin();
        // Run the session as a task, not as the `block_on` future itself:
        // waking a task is a local queue push, waking `block_on` is a
        // futex wake-up.
        let session = tokio::spawn(proxy::run(
            config,
            launcher,
            stdin,
            proxy::stdio::stdout(),
            rx,
        ));
        match session.await {
            Ok(r) => r.map_err(|e| e.to_string()),
            Err(e) => Err(format!("the session task failed: {e}")),
        }
    });
    // The stdin reader may still be blocked in a read: do not wait for it.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    match ending {
        Ok(Ending::HostClosed) => ExitCode::SUCCESS,
        Ok(Ending::ServerEnded(why)) => {
            eprintln!("rootfence: session ended: {why}");
            ExitCode::FAILURE
        }
        Ok(Ending::LaunchFailed(why)) => {
            eprintln!("rootfence: session ended: cannot launch the server: {why}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("rootfence: {e}");
            ExitCode::from(2)
        }
    }
}
