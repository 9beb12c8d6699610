//! `rootfence run`: the MCP stdio proxy. What a host's config launches.

use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;

use crate::proxy::{self, Ending, SandboxLauncher, SessionConfig};
use crate::runtime::HostEnv;
use crate::sandbox;
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

/// The policy file's watcher (kept alive by the caller) and the roots
/// observer, unless `--no-watch`. A watcher that cannot start is a
/// warning: the session runs without it.
fn watchers(
    args: &RunArgs,
    env: &HostEnv,
    tx: &mpsc::UnboundedSender<proxy::Change>,
) -> (
    Option<watch::PolicyWatcher>,
    Option<proxy::session::RootsObserver>,
) {
    if args.no_watch {
        return (None, None);
    }
    let policy_watch = args.launch.policy.as_ref().and_then(|file| {
        watch::watch_policy(file, env.home.clone(), args.launch.env.clone(), tx.clone())
            .inspect_err(|e| tracing::warn!("cannot watch {} for changes: {e}", file.display()))
            .ok()
    });
    let observer = match watch::RootWatcher::new(tx.clone()) {
        Ok(w) => {
            let w = Arc::new(Mutex::new(w));
            Some(Box::new(move |paths: &[std::path::PathBuf]| {
                if let Ok(mut w) = w.lock() {
                    w.set(paths);
                }
            }) as proxy::session::RootsObserver)
        }
        Err(e) => {
            tracing::warn!("cannot watch the root directories: {e}");
            None
        }
    };
    (policy_watch, observer)
}

/// Remembered `initialize` answers: one server start instead of two when
/// the roots come from the host.
fn remembered(
    env: &HostEnv,
    command: &[std::ffi::OsString],
) -> (
    Option<proxy::init_cache::RememberedInit>,
    Option<proxy::session::RememberFn>,
) {
    let cache = proxy::init_cache::InitCache::for_command(env, command);
    let remembered_init = cache.as_ref().and_then(|c| c.load());
    let remember: Option<proxy::session::RememberFn> = cache.map(|c| {
        Box::new(move |init: &proxy::init_cache::RememberedInit| {
            if let Err(e) = c.store(init) {
                tracing::debug!("cannot remember initialize in {}: {e}", c.path().display());
            }
        }) as proxy::session::RememberFn
    });
    (remembered_init, remember)
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
    let cli_roots = args.launch.root_inputs();

    sandbox::enable_subreaper();
    let caps = crate::plan::HostCapabilities::of(&policy);
    if !(caps.sampling && caps.elicitation_form) {
        for line in super::explain::withheld(&caps) {
            tracing::warn!("{}", line.trim());
        }
    }
    // One thread: every message crosses several tasks (host reader,
    // session, server writer and reader, host writer), and waking a task on
    // the same thread is far cheaper than waking another thread. Only big
    // lines are written from the blocking pool (`proxy::bigwrite`), where
    // the copy is worth a hand-off.
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
        let (_policy_watch, observer) = watchers(&args, &env, &tx);
        let (remembered_init, remember) = remembered(&env, &args.launch.command);
        let launcher = SandboxLauncher::new(env.home.clone());
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
        let session = tokio::spawn(proxy::run_big_writes(
            config,
            launcher,
            stdin,
            proxy::stdio::stdout(),
            proxy::stdio::stdout_big_writer(),
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
