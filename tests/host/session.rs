//! An in-process session for protocol tests: the proxy running on a tokio
//! task between a scripted [`Host`] and the fake server, launched without
//! the sandbox (these tests exercise the relay, not the confinement).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rootfence::plan::SandboxPlan;
use rootfence::policy::Policy;
use rootfence::proxy::session::ExitInfo;
use rootfence::proxy::{
    self, Ending, LaunchError, Launcher, ServerProcess, SessionConfig, SessionError,
};
use rootfence::roots::RootInput;
use rootfence::runtime::HostEnv;
use tokio::sync::mpsc;

use super::{Host, fake_server};

/// What the launcher saw: one entry per server launch.
#[derive(Clone, Default)]
pub struct Launches {
    /// The pid of each launch.
    pub pids: Arc<Mutex<Vec<u32>>>,
    /// The enforced root paths of each launch.
    pub roots: Arc<Mutex<Vec<Vec<PathBuf>>>>,
    /// `FAKE_TOOLS` for the next launches (extra tool names).
    pub tools: Arc<Mutex<String>>,
    /// While true, launches wait (a launch that hangs).
    pub hold: Arc<(Mutex<bool>, std::sync::Condvar)>,
}

impl Launches {
    /// Make the next launches wait ([`Launches::release`] lets them go).
    pub fn hold(&self) {
        *self.hold.0.lock().unwrap() = true;
    }

    /// Let the launches waiting go.
    pub fn release(&self) {
        *self.hold.0.lock().unwrap() = false;
        self.hold.1.notify_all();
    }
}

/// Launches the fake server unconfined.
pub struct TestLauncher {
    exe: PathBuf,
    log: Launches,
}

impl Launcher for TestLauncher {
    fn launch(&mut self, plan: &SandboxPlan) -> Result<ServerProcess, LaunchError> {
        let (held, released) = &*self.log.hold;
        drop(released.wait_while(held.lock().unwrap(), |h| *h).unwrap());
        self.log
            .roots
            .lock()
            .unwrap()
            .push(plan.roots.iter().map(|r| r.path.clone()).collect());
        let mut child = std::process::Command::new(&self.exe)
            .env("FAKE_TOOLS", self.log.tools.lock().unwrap().clone())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .map_err(|source| LaunchError::Io {
                what: "cannot start the fake server",
                source,
            })?;
        let pid = child.id();
        self.log.pids.lock().unwrap().push(pid);
        let stdin = tokio::process::ChildStdin::from_std(child.stdin.take().unwrap()).unwrap();
        let stdout = tokio::process::ChildStdout::from_std(child.stdout.take().unwrap()).unwrap();
        Ok(ServerProcess {
            stdin: Box::new(stdin),
            stdin_pipe: None,
            stdout: Box::new(stdout),
            pid,
            reap: Box::new(move || Ok(ExitInfo::from_status(child.wait()?))),
            diagnose: None,
            denials: None,
        })
    }
}

/// A running session.
pub struct Running {
    pub host: Host,
    pub log: Launches,
    pub task: tokio::task::JoinHandle<Result<Ending, SessionError>>,
    pub events: mpsc::UnboundedSender<rootfence::proxy::Change>,
    pub dir: tempfile::TempDir,
}

/// Start a session whose policy is `policy` (TOML) plus short limits for
/// tests, in a fresh temporary directory (its path replaces `{dir}` in
/// `policy`), which is also the home and current directory.
pub fn start(policy: &str) -> Running {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let text = format!(
        "[limits]\nrebuild_debounce_ms = 50\ndrain_timeout_ms = 2000\nshutdown_grace_ms = 300\nrestart_backoff_ms = 50\n{}",
        policy.replace("{dir}", &base.display().to_string())
    );
    start_with(&text, &base, &base, Vec::new(), dir)
}

/// Start a session with exactly this policy text, home and current
/// directory, and command-line roots; `dir` is kept alive with it.
pub fn start_with(
    policy: &str,
    home: &Path,
    cwd: &Path,
    cli_roots: Vec<RootInput>,
    dir: tempfile::TempDir,
) -> Running {
    let policy = Policy::parse(policy, None, Some(home)).unwrap();
    let env = HostEnv {
        vars: [("PATH".to_string(), "/usr/bin:/bin".to_string())]
            .into_iter()
            .collect(),
        home: Some(home.to_path_buf()),
        cwd: Some(cwd.to_path_buf()),
        host_set: None,
    };
    let config = SessionConfig {
        policy,
        cli_roots,
        no_host_roots: false,
        command: vec![fake_server().into()],
        env,
        roots_observer: None,
        remembered_init: None,
        remember: None,
    };
    let log = Launches::default();
    let launcher = TestLauncher {
        exe: fake_server(),
        log: log.clone(),
    };
    let (ours, theirs) = tokio::io::duplex(1 << 20);
    let (r, w) = tokio::io::split(theirs);
    let (events, rx) = mpsc::unbounded_channel();
    let task = tokio::spawn(proxy::run(
        config,
        launcher,
        tokio::io::BufReader::new(r),
        w,
        rx,
    ));
    Running {
        host: Host::new(ours),
        log,
        task,
        events,
        dir,
    }
}
