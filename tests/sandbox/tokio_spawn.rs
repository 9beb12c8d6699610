//! The library's launch API from inside a busy multi-threaded tokio
//! runtime: the exec'd process is confined, the caller is not.

use std::ffi::OsString;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rootfence::{Access, Confinement, HostEnv, Policy, RootInput, SandboxPlan, Stdio, StdioConfig};
use rootfence::{plan, sandbox};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn plan_for(root: &Path, home: &Path, argv: &[&str]) -> SandboxPlan {
    let mut env = HostEnv::current();
    env.home = Some(home.to_path_buf());
    env.vars
        .insert("HOME".into(), home.to_string_lossy().into_owned());
    env.vars.insert("PATH".into(), "/usr/bin:/bin".into());
    let policy = Policy::builtin(Some(home)).expect("built-in policy");
    let inputs = vec![RootInput::command_line(
        root.to_string_lossy().into_owned(),
        Access::ReadWrite,
    )];
    let argv: Vec<OsString> = argv.iter().map(OsString::from).collect();
    let plan = rootfence::plan_for_launch(&policy, &inputs, &argv, &env).expect("discover");
    assert!(plan.refused.is_empty(), "{:?}", plan.refused);
    plan
}

const PROBE: &str = r#"
import errno, sys
sys.stdin.readline()
def t(p):
    try:
        open(p).read()
        return "OK"
    except OSError as e:
        return errno.errorcode[e.errno]
print("allowed=" + t(sys.argv[1]))
print("forbidden=" + t(sys.argv[2]))
"#;

struct Dirs {
    _tmp: tempfile::TempDir,
    root: std::path::PathBuf,
    home: std::path::PathBuf,
    allowed: std::path::PathBuf,
    forbidden: std::path::PathBuf,
}

fn dirs() -> Dirs {
    let tmp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    let root = base.join("root");
    let home = base.join("home");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let allowed = root.join("allowed");
    let forbidden = base.join("forbidden");
    std::fs::write(&allowed, "a").unwrap();
    std::fs::write(&forbidden, "f").unwrap();
    Dirs {
        _tmp: tmp,
        root,
        home,
        allowed,
        forbidden,
    }
}

async fn launch_and_check(d: Arc<Dirs>) {
    assert!(
        Path::new("/usr/bin/python3").exists(),
        "/usr/bin/python3 is required"
    );
    let plan = plan_for(
        &d.root,
        &d.home,
        &[
            "/usr/bin/python3",
            "-c",
            PROBE,
            d.allowed.to_str().unwrap(),
            d.forbidden.to_str().unwrap(),
        ],
    );
    let mut child = rootfence::spawn(
        &plan,
        StdioConfig {
            stdin: Stdio::Piped,
            stdout: Stdio::Piped,
            stderr: Stdio::Inherit,
        },
    )
    .expect("spawn");
    assert!(
        matches!(child.confinement(), Confinement::Enforced { .. }),
        "{:?}",
        child.confinement()
    );
    // spawn returns once the server has been exec'd: this is python's
    // status, not a half-set-up child's.
    let server = child.server_pid().expect("the server runs");
    let status = std::fs::read_to_string(format!("/proc/{server}/status")).unwrap();
    assert!(status.contains("NoNewPrivs:\t1"), "{status}");
    assert!(status.contains("Seccomp:\t2"), "{status}");
    assert!(status.contains("CapEff:\t0000000000000000"), "{status}");

    let mut stdin = tokio::process::ChildStdin::from_std(child.take_stdin().unwrap()).unwrap();
    let mut stdout = tokio::process::ChildStdout::from_std(child.take_stdout().unwrap()).unwrap();
    stdin.write_all(b"go\n").await.unwrap();
    drop(stdin);
    let mut out = String::new();
    tokio::time::timeout(Duration::from_secs(30), stdout.read_to_string(&mut out))
        .await
        .expect("the probe answered in time")
        .unwrap();
    assert!(out.contains("allowed=OK"), "{out}");
    // Refused by Landlock, or not even there in the server's own view.
    assert!(
        out.contains("forbidden=EACCES") || out.contains("forbidden=ENOENT"),
        "{out}"
    );
    let st = tokio::task::spawn_blocking(move || child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(st.success());
    // The caller was not restricted by mistake.
    assert_eq!(std::fs::read_to_string(&d.forbidden).unwrap(), "f");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn spawn_from_a_busy_multi_threaded_runtime_confines_the_exec_d_process() {
    let stop = Arc::new(AtomicBool::new(false));
    // Keep every worker and two extra threads allocating and locking, so
    // that forks happen while other threads hold allocator and other locks.
    let mut busy = Vec::new();
    for _ in 0..6 {
        let stop = stop.clone();
        busy.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let v: Vec<u8> = vec![7; 8192];
                std::hint::black_box(v);
                tokio::task::yield_now().await;
            }
        }));
    }
    let lock = Arc::new(std::sync::Mutex::new(Vec::<u64>::new()));
    let mut threads = Vec::new();
    for _ in 0..2 {
        let stop = stop.clone();
        let lock = lock.clone();
        threads.push(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let mut g = lock.lock().unwrap();
                g.push(1);
                if g.len() > 1000 {
                    g.clear();
                }
                std::hint::black_box(format!("{}", g.len()));
            }
        }));
    }
    let d = Arc::new(dirs());
    let mut launches = Vec::new();
    for _ in 0..12 {
        launches.push(tokio::spawn(launch_and_check(d.clone())));
    }
    for l in launches {
        l.await.unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    for b in busy {
        b.await.unwrap();
    }
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn server_started_from_a_short_lived_blocking_thread_survives_it() {
    // The parent-death signal follows the thread that forked; rootfence
    // forks on its own long-lived launcher thread, so a server started
    // from a tokio blocking thread outlives that thread.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_keep_alive(Duration::from_millis(20))
        .enable_all()
        .build()
        .unwrap();
    let d = dirs();
    let plan = plan_for(&d.root, &d.home, &["/bin/sleep", "30"]);
    let mut child = rt.block_on(async move {
        tokio::task::spawn_blocking(move || sandbox::spawn(&plan, StdioConfig::default()))
            .await
            .unwrap()
            .unwrap()
    });
    // Let the blocking thread idle out and exit.
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        child.try_wait().unwrap().is_none(),
        "the server died with the thread that asked for it"
    );
    child.kill().unwrap();
    let st = child.wait().unwrap();
    assert!(!st.success());
    drop(rt);
}

#[test]
fn dropping_the_handle_kills_the_server_and_removes_its_scratch_dir() {
    let d = dirs();
    let plan = plan_for(&d.root, &d.home, &["/bin/sleep", "30"]);
    let child = sandbox::spawn(&plan, StdioConfig::default()).unwrap();
    let pid = child.pid();
    let scratch = child.scratch_dir().unwrap().to_path_buf();
    assert!(scratch.is_dir());
    drop(child);
    assert!(!scratch.exists());
    assert!(!Path::new(&format!("/proc/{pid}")).exists());
}

#[test]
fn unconfined_launch_says_so_and_keeps_only_the_hygiene() {
    let d = dirs();
    let plan = plan_for(
        &d.root,
        &d.home,
        &[
            "/usr/bin/python3",
            "-c",
            "import sys; print(open(sys.argv[1]).read()); print(open('/proc/self/status').read())",
            d.forbidden.to_str().unwrap(),
        ],
    );
    let mut child = sandbox::spawn_unconfined(
        &plan,
        StdioConfig {
            stdout: sandbox::Stdio::Piped,
            ..StdioConfig::default()
        },
    )
    .unwrap();
    assert_eq!(child.confinement(), &Confinement::Unconfined);
    assert_eq!(child.confinement().to_string(), "UNCONFINED: no sandbox");
    let mut out = String::new();
    std::io::Read::read_to_string(&mut child.take_stdout().unwrap(), &mut out).unwrap();
    assert!(child.wait().unwrap().success());
    // No sandbox: the forbidden file is readable, no seccomp filter.
    assert!(out.starts_with("f\n"), "{out}");
    assert!(out.contains("Seccomp:\t0"), "{out}");
    // The hygiene stays: no_new_privs.
    assert!(out.contains("NoNewPrivs:\t1"), "{out}");
}

/// Resolve the root, then swap the path for a symlink to a secret
/// directory before launching. Returns the plan (resolved before the swap),
/// the secret directory and where the original root went.
fn swapped_root(d: &Dirs) -> (SandboxPlan, std::path::PathBuf) {
    let secret_dir = d.root.parent().unwrap().join("secret-dir");
    std::fs::create_dir(&secret_dir).unwrap();
    std::fs::write(secret_dir.join("key"), "SECRET").unwrap();
    let plan = plan_for(
        &d.root,
        &d.home,
        &[
            "/usr/bin/python3",
            "-c",
            "import sys\n\
             def t(p):\n\
             \x20   try:\n\
             \x20       open(p).read(); return 'OK'\n\
             \x20   except OSError:\n\
             \x20       return 'REFUSED'\n\
             print('via_path=' + t(sys.argv[1] + '/key'))\n\
             print('moved=' + t(sys.argv[2] + '/allowed'))",
            d.root.to_str().unwrap(),
            &format!("{}-moved", d.root.display()),
        ],
    );
    let moved = std::path::PathBuf::from(format!("{}-moved", d.root.display()));
    std::fs::rename(&d.root, &moved).unwrap();
    std::os::unix::fs::symlink(&secret_dir, &d.root).unwrap();
    (plan, moved)
}

#[test]
fn root_rule_follows_the_resolved_handle_not_the_path() {
    // Without namespaces the Landlock rule is built from the handle opened
    // at resolution: the secret stays closed and the original directory
    // (now under another name) stays open.
    let d = dirs();
    let (mut plan, _moved) = swapped_root(&d);
    plan.namespaces = plan::NamespaceMode::Off;
    let mut child = rootfence::spawn(
        &plan,
        StdioConfig {
            stdout: sandbox::Stdio::Piped,
            ..StdioConfig::default()
        },
    )
    .unwrap();
    let mut out = String::new();
    std::io::Read::read_to_string(&mut child.take_stdout().unwrap(), &mut out).unwrap();
    assert!(child.wait().unwrap().success());
    assert!(out.contains("via_path=REFUSED"), "{out}");
    assert!(out.contains("moved=OK"), "{out}");
}

#[test]
fn a_root_swapped_before_launch_is_not_mounted_in_the_view() {
    // With namespaces the root is mounted at its path in the server's view:
    // the mounted directory must be the one the handle holds, else nothing
    // is run.
    let d = dirs();
    let (plan, _moved) = swapped_root(&d);
    assert_eq!(plan.namespaces, plan::NamespaceMode::Auto);
    let err = sandbox::spawn(&plan, StdioConfig::default())
        .map(|_| ())
        .expect_err("a swapped root must not be mounted");
    let text = err.to_string();
    assert!(
        text.contains("while the sandbox was being built") && text.contains("nothing was run"),
        "{text}"
    );
}
