//! Shared harness of the escape tests: a scratch tree with roots, outside
//! files and a fake home, and helpers that run real programs through the
//! built `rootfence exec`.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

/// The scriptable MCP server of `examples/mcp_fake_server.rs` (built with
/// the tests: `cargo test` builds the examples).
pub fn fake_server() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let p = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps")
        .join("examples/mcp_fake_server");
    assert!(
        p.exists(),
        "{} missing: run `cargo build --examples`",
        p.display()
    );
    p
}

/// The `rootfence` binary under test: the one built with the tests, or
/// `ROOTFENCE_TEST_BIN` (to run the attacks against another build, e.g. a
/// release before a fix, and see them get through).
pub fn rootfence() -> String {
    std::env::var("ROOTFENCE_TEST_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_rootfence").to_string())
}

/// The cases of a suite file (`include!`d, as `"../suites/NAME.rs"` from
/// the file naming it), run by the unprivileged test user
/// ([`Tree::unprivileged`]) with the server's own namespaces (module
/// `with_namespaces`) and without (module `without_namespaces`). The names
/// the file uses from the module the macro is called in (`common`, and
/// `net_support` where it has it) are in scope.
#[allow(unused_macros)]
macro_rules! as_the_test_user {
    ($suite:expr) => {
        mod with_namespaces {
            #[allow(unused_imports)]
            use super::*;

            fn tree() -> common::Tree {
                common::Tree::unprivileged(true)
            }

            include!($suite);
        }

        mod without_namespaces {
            #[allow(unused_imports)]
            use super::*;

            fn tree() -> common::Tree {
                common::Tree::unprivileged(false)
            }

            include!($suite);
        }
    };
}

/// A number no other call in this process returns: for names that tests
/// running side by side in one binary (a suite in several modes) must not
/// share.
pub fn sequence() -> u32 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Digits no other call returns, in this process or in another running
/// now (the process id, then a [`sequence`] number): a marker on a command
/// line that only one test's processes carry.
pub fn unique() -> String {
    format!("{:07}{:04}", std::process::id(), sequence())
}

/// Held by the tests that give the sandbox a deadline of milliseconds
/// (a raced lock ended before a writer outside looks): one at a time in a
/// binary, so that two of them, each loading the machine on purpose, do
/// not measure each other. (A test that panicked leaves it usable.)
pub fn one_timed_test_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static TIMED: std::sync::Mutex<()> = std::sync::Mutex::new(());
    TIMED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The unprivileged user the tests run rootfence as when they run as root
/// (`tests/peers/install.sh` creates it).
pub const TEST_USER: &str = "rootfence-test";

/// The uid and gid of the user an unprivileged tree runs rootfence as:
/// [`TEST_USER`] when the tests run as root, else the tests' own user
/// (already unprivileged).
pub fn test_user() -> (u32, u32) {
    // SAFETY: geteuid and getegid cannot fail.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    if uid != 0 {
        return (uid, gid);
    }
    let passwd = std::fs::read_to_string("/etc/passwd").expect("read /etc/passwd");
    passwd
        .lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .find(|f| f.len() > 3 && f[0] == TEST_USER)
        .and_then(|f| Some((f[2].parse().ok()?, f[3].parse().ok()?)))
        .unwrap_or_else(|| {
            panic!(
                "the unprivileged test user {TEST_USER} is missing: run tests/peers/install.sh as root (it creates it)"
            )
        })
}

/// Whether every directory above `p` lets others through (so that any
/// user can run `p`).
fn reachable_by_others(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.ancestors()
        .skip(1)
        .all(|a| std::fs::metadata(a).is_ok_and(|m| m.permissions().mode() & 0o001 != 0))
}

/// `path` where the unprivileged test user can run it: itself when its
/// directories let others through, else a link (or copy) in a directory of
/// the system's temporary directory that does.
pub fn for_others(path: &Path) -> String {
    if reachable_by_others(path) {
        return path.to_string_lossy().into_owned();
    }
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let md = std::fs::metadata(path).expect("a program the test user runs");
    let dir = std::env::temp_dir().join(format!("rootfence-test-bin-{}-{}", md.ino(), md.mtime()));
    let _ = std::fs::DirBuilder::new().mode(0o755).create(&dir);
    let name = path.file_name().expect("a program's name");
    let bin = dir.join(name);
    if !bin.exists() {
        let tmp = dir.join(format!("{}.{}", name.to_string_lossy(), std::process::id()));
        std::fs::hard_link(path, &tmp)
            .or_else(|_| std::fs::copy(path, &tmp).map(|_| ()))
            .expect("put a program where the test user can run it");
        std::fs::rename(&tmp, &bin).expect("rename the test user's program");
    }
    bin.to_string_lossy().into_owned()
}

/// The `rootfence` binary under test, where the unprivileged test user can
/// run it (see [`for_others`]).
pub fn rootfence_for_others() -> String {
    static ONCE: OnceLock<String> = OnceLock::new();
    ONCE.get_or_init(|| for_others(Path::new(&rootfence())))
        .clone()
}

/// A program the tests need, or a panic saying how to get it.
pub fn need(path: &str, how: &str) -> PathBuf {
    let p = PathBuf::from(path);
    assert!(
        p.exists(),
        "{path} is required by this test and is missing: {how}"
    );
    p
}

/// The system python used as the confined probe.
pub fn python() -> PathBuf {
    need("/usr/bin/python3", "apt-get install -y python3")
}

/// Python helpers prepended to every probe: `check(name, f)` runs `f()`
/// and prints `name=OK` or `name=<ERRNO NAME>`. `check(name, f, path=P)`
/// runs `f(P)` and also prints `name.path=P`: `P` is the path outside the
/// sandbox that the operation is after (for one that creates, its
/// directory; through /proc, the file or directory it leads to), so that
/// [`Probe::refused`] may take `ENOENT` for a refusal once the test process
/// has seen `P` exist ([`CHECKED_PATH`]). The operation gets the path
/// from the check, so the path checked outside is the one it used.
pub const PRELUDE: &str = r#"
import os, sys, errno, socket, signal, stat
def _t(f):
    try:
        f()
        return "OK"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
def check(name, f, path=None):
    if path is None:
        print(name + "=" + _t(f), flush=True)
    else:
        print(name + "=" + _t(lambda: f(path)), flush=True)
        print(name + ".path=" + path, flush=True)
def read(p):
    with open(p) as f:
        return f.read()
def write(p, s="x", mode="w"):
    with open(p, mode) as f:
        f.write(s)
"#;

/// A scratch tree for one test:
///
/// ```text
/// <base>/r            read-write root (given with --root)
/// <base>/r/inside     a file in it
/// <base>/r_evil       sibling with the root's name as a prefix
/// <base>/ro           read-only root (given with --ro-root)
/// <base>/ro/file      a file in it
/// <base>/outside      not granted
/// <base>/outside/secret
/// <base>/home         HOME, with .ssh/id_rsa and .bashrc
/// ```
pub struct Tree {
    _tmp: tempfile::TempDir,
    /// The base directory.
    pub base: PathBuf,
    /// The read-write root.
    pub r: PathBuf,
    /// The read-only root.
    pub ro: PathBuf,
    /// Outside every root.
    pub outside: PathBuf,
    /// The fake home.
    pub home: PathBuf,
    /// Whether the server gets its own namespaces (the default policy on
    /// this machine), or runs with Landlock and seccomp only.
    pub namespaces: bool,
    /// The unprivileged user (uid, gid) rootfence runs as, owning the
    /// tree; `None`: the tests' own user.
    pub user: Option<(u32, u32)>,
    /// A program rootfence is run under (an environment's seccomp filter:
    /// `tests/peers/bin/rootfence-envfilter MODE --`), empty for none.
    pub wrapper: Vec<String>,
}

pub const SECRET: &str = "TOP-SECRET-CONTENT";

/// The errors that say "refused": Landlock and seccomp give `EACCES` and
/// `EPERM`, a read-only grant is a read-only mount (`EROFS`), and renames
/// and links across grants cross mounts (`EXDEV`).
///
/// `ENOENT` is not among them: in the server's own filesystem view what is
/// not granted does not exist, but neither does a mistyped path. It counts
/// as a refusal only for a check that names the path it is after
/// (`check(name, f, path=P)`) and whose path the test process sees exist
/// outside the sandbox ([`Probe::refused`]).
pub const REFUSED: &[&str] = &["EACCES", "EPERM", "EROFS", "EXDEV"];

/// The suffix of the line a probe's check prints with the path it is
/// after (`name.path=P`).
pub const CHECKED_PATH: &str = ".path";

/// What the probes of the running test (its thread) have asserted: the
/// refusals, and the allowed operations seen to work. A refusal counts
/// only beside its allowed twin: when the test's last [`Tree`] is dropped,
/// a test that asserted refusals and no allowed operation fails.
#[derive(Default)]
struct Ledger {
    /// Trees of this test alive.
    trees: usize,
    /// The checks asserted refused.
    refused: Vec<String>,
    /// How many allowed operations were asserted to work.
    allowed: usize,
}

thread_local! {
    static LEDGER: std::cell::RefCell<Ledger> = std::cell::RefCell::default();
}

/// Whether `v` is the name of an errno (`EPERM`, `ENOENT`, ...).
fn is_errno(v: &str) -> bool {
    v.len() > 1
        && v.starts_with('E')
        && v.bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
}

/// Record that the running test asserted `name` refused.
fn note_refused(name: &str) {
    LEDGER.with(|l| l.borrow_mut().refused.push(name.to_string()));
}

/// Record that the running test asserted an allowed operation to work.
fn note_allowed() {
    LEDGER.with(|l| l.borrow_mut().allowed += 1);
}

impl Tree {
    pub fn new() -> Tree {
        let tmp = tempfile::Builder::new()
            .prefix("rootfence-test-")
            .tempdir()
            .expect("create a temporary directory");
        LEDGER.with(|l| {
            let mut l = l.borrow_mut();
            if l.trees == 0 {
                *l = Ledger::default();
            }
            l.trees += 1;
        });
        let base = std::fs::canonicalize(tmp.path()).expect("canonical temp dir");
        let t = Tree {
            r: base.join("r"),
            ro: base.join("ro"),
            outside: base.join("outside"),
            home: base.join("home"),
            base,
            _tmp: tmp,
            namespaces: true,
            user: None,
            wrapper: Vec::new(),
        };
        for d in [&t.r, &t.ro, &t.outside, &t.home.join(".ssh")] {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        std::fs::create_dir_all(t.base.join("r_evil")).expect("mkdir");
        std::fs::write(t.r.join("inside"), "inside").expect("write");
        std::fs::write(t.ro.join("file"), "read-only content").expect("write");
        std::fs::write(t.outside.join("secret"), SECRET).expect("write");
        std::fs::write(t.base.join("r_evil/secret"), SECRET).expect("write");
        std::fs::write(t.home.join(".ssh/id_rsa"), SECRET).expect("write");
        std::fs::write(t.home.join(".bashrc"), SECRET).expect("write");
        t
    }

    /// A tree whose servers run without namespaces (`[isolation]
    /// namespaces = "off"`): Landlock and seccomp only.
    pub fn without_namespaces() -> Tree {
        let mut t = Tree::new();
        t.namespaces = false;
        t
    }

    /// A tree run by the unprivileged test user ([`test_user`]), which owns
    /// it, with or without namespaces.
    pub fn unprivileged(namespaces: bool) -> Tree {
        let mut t = Tree::new();
        t.namespaces = namespaces;
        t.user = Some(test_user());
        t
    }

    /// A tree whose rootfence runs on a kernel without Landlock (a filter
    /// makes `landlock_create_ruleset` answer `ENOSYS`), on the view +
    /// seccomp rung its policies accept (`[isolation] landlock = "prefer"`).
    pub fn without_landlock() -> Tree {
        let mut t = Tree::new();
        t.wrapper = vec![envfilter(), "no-landlock".into(), "--".into()];
        t
    }

    /// Whether this tree's rootfence has no Landlock (the view + seccomp
    /// rung).
    pub fn no_landlock(&self) -> bool {
        self.wrapper
            .iter()
            .any(|w| w.split(',').any(|m| m == "no-landlock"))
    }

    /// The uid and gid rootfence runs as in this tree's tests (and that own
    /// its files once a test has run).
    pub fn runner(&self) -> (u32, u32) {
        // SAFETY: geteuid and getegid cannot fail.
        self.user
            .unwrap_or_else(|| unsafe { (libc::geteuid(), libc::getegid()) })
    }

    /// The `rootfence` binary this tree's runner can run.
    pub fn rootfence(&self) -> String {
        match self.user {
            Some(_) => rootfence_for_others(),
            None => rootfence(),
        }
    }

    /// The command line that starts this tree's rootfence: the binary
    /// its runner can run, under its wrapper.
    pub fn rootfence_argv(&self) -> Vec<String> {
        let mut v = self.wrapper.clone();
        v.push(self.rootfence());
        v
    }

    /// A command starting this tree's rootfence ([`Tree::rootfence_argv`]),
    /// its arguments to add. Run it through [`Tree::as_runner`].
    pub fn rootfence_command(&self) -> Command {
        let argv = self.rootfence_argv();
        let mut c = Command::new(&argv[0]);
        c.args(&argv[1..]);
        c
    }

    /// Make `c` run as this tree's user, giving it the tree first (its
    /// files were made by the test).
    pub fn as_runner<'a>(&self, c: &'a mut Command) -> &'a mut Command {
        if let Some((uid, gid)) = self.user {
            self.hand_over(uid, gid);
            c.uid(uid).gid(gid);
        }
        c
    }

    /// Give every file of the tree to `uid`:`gid` (symlinks themselves,
    /// never what they point at).
    fn hand_over(&self, uid: u32, gid: u32) {
        fn walk(p: &Path, uid: u32, gid: u32) {
            let _ = std::os::unix::fs::lchown(p, Some(uid), Some(gid));
            let is_dir = std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir());
            if is_dir {
                for e in std::fs::read_dir(p).into_iter().flatten().flatten() {
                    walk(&e.path(), uid, gid);
                }
            }
        }
        walk(&self.base, uid, gid);
    }

    /// Write a policy file `name` with `body` (plus, for a tree without
    /// namespaces, the `[isolation]` section saying so) and return its path.
    pub fn policy(&self, name: &str, body: &str) -> String {
        let p = self.p(name);
        let mut text = body.to_string();
        if !self.namespaces {
            text.push_str("\n[isolation]\nnamespaces = \"off\"\n");
        } else if self.no_landlock() {
            text.push_str("\n[isolation]\nlandlock = \"prefer\"\n");
        }
        std::fs::write(&p, text).expect("write the policy");
        p.to_string_lossy().into_owned()
    }

    /// The arguments of `rootfence exec` for this tree's mode (the policy
    /// turning namespaces off, for a tree without them), for tests that
    /// launch rootfence themselves.
    pub fn exec_args(&self) -> Vec<String> {
        let mut a = vec!["exec".to_string()];
        if !self.namespaces || self.no_landlock() {
            a.push("--policy".into());
            a.push(self.policy("no-namespaces.toml", "version = 1\n"));
        }
        a
    }

    /// A path under the base directory.
    pub fn p(&self, rel: &str) -> PathBuf {
        self.base.join(rel)
    }

    /// A path under the base directory, as a string.
    pub fn s(&self, rel: &str) -> String {
        self.p(rel).to_string_lossy().into_owned()
    }

    /// `rootfence exec --root r --ro-root ro <extra> -- <argv>`, with a
    /// small fixed environment (HOME is the fake home) and the base as the
    /// working directory. Not run yet.
    pub fn command(&self, extra: &[&str], argv: &[&str]) -> Command {
        let mut c = self.rootfence_command();
        c.arg("exec")
            .arg("--root")
            .arg(&self.r)
            .arg("--ro-root")
            .arg(&self.ro);
        if (!self.namespaces || self.no_landlock()) && !extra.contains(&"--policy") {
            c.arg("--policy")
                .arg(self.policy("no-namespaces.toml", "version = 1\n"));
        }
        c.args(extra)
            .arg("--")
            .args(argv)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", &self.home)
            .env("LANG", "C.UTF-8")
            .current_dir(&self.base)
            .stdin(Stdio::null());
        self.as_runner(&mut c);
        c
    }

    /// [`Tree::command`] started by a shell holding the same environment,
    /// as a host's own environment is inherited: variables it sets are the
    /// host's own, not set for this launch (which would pass).
    pub fn command_inherited(&self, extra: &[&str], argv: &[&str]) -> Command {
        self.command_hosted(extra, argv, &[])
    }

    /// [`Tree::command_inherited`], the host adding `set` to rootfence's
    /// environment for this launch (a host config's `env` block).
    pub fn command_hosted(&self, extra: &[&str], argv: &[&str], set: &[(&str, &str)]) -> Command {
        let direct = self.command(extra, argv);
        let mut c = Command::new("/bin/sh");
        c.arg("-c")
            .arg("\"$@\"; exit $?")
            .arg("sh")
            .arg("/usr/bin/env");
        for (k, v) in set {
            c.arg(format!("{k}={v}"));
        }
        c.arg(direct.get_program())
            .args(direct.get_args())
            .env_clear()
            .stdin(Stdio::null());
        for (k, v) in direct.get_envs() {
            if let Some(v) = v {
                c.env(k, v);
            }
        }
        if let Some(d) = direct.get_current_dir() {
            c.current_dir(d);
        }
        self.as_runner(&mut c);
        c
    }

    /// Run `argv` confined and collect its output.
    pub fn run(&self, extra: &[&str], argv: &[&str]) -> Output {
        self.command(extra, argv)
            .output()
            .expect("run rootfence exec")
    }

    /// Run [`twin_checks`] of `ops` on `refused` and `allowed` confined,
    /// with `extra`, and assert their results ([`Probe::twins`]).
    pub fn twins(
        &self,
        extra: &[&str],
        ops: &[(&str, &str)],
        refused: &Path,
        allowed: &Path,
    ) -> Probe {
        let p = self.py(extra, &twin_checks(ops, refused, allowed));
        p.twins(ops);
        p
    }

    /// `git` with a fixed identity and no global or system configuration,
    /// in `dir`, run by the tree's runner (whose repository it is).
    pub fn git(&self, dir: &Path, args: &[&str]) -> Output {
        self.as_runner(
            Command::new("git")
                .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
                .args(args)
                .current_dir(dir)
                .env("HOME", dir)
                .env("GIT_CONFIG_NOSYSTEM", "1"),
        )
        .output()
        .expect("git is required: apt-get install -y git")
    }

    /// Run the python probe `code` (after [`PRELUDE`]) confined.
    pub fn py(&self, extra: &[&str], code: &str) -> Probe {
        let py = python();
        let code = format!("{PRELUDE}\n{code}");
        let out = self.run(extra, &[py.to_str().unwrap_or("python3"), "-c", &code]);
        Probe::new(out)
    }
}

impl Drop for Tree {
    /// The end of the test (its last tree): a refusal asserted with no
    /// allowed twin fails it.
    fn drop(&mut self) {
        let orphans = LEDGER.with(|l| {
            let mut l = l.borrow_mut();
            l.trees = l.trees.saturating_sub(1);
            (l.trees == 0 && l.allowed == 0 && !l.refused.is_empty())
                .then(|| std::mem::take(&mut l.refused))
        });
        if let Some(refused) = orphans
            && !std::thread::panicking()
        {
            panic!(
                "this test asserts refusals ({}) and no allowed operation: a refusal counts \
                 only beside its allowed twin, the same operation shown to work where it is \
                 allowed (Probe::allowed, or expect(name, \"OK\"))",
                refused.join(", ")
            );
        }
    }
}

/// Python checks doing each of `ops` (a check's name, python of the path
/// `p`) on `refused` (check `name`) and then on `allowed` (check
/// `name_twin`): the same operation where it is refused and where it is
/// allowed. [`Probe::twins`] asserts their results.
pub fn twin_checks(ops: &[(&str, &str)], refused: &Path, allowed: &Path) -> String {
    let (refused, allowed) = (refused.display(), allowed.display());
    ops.iter()
        .map(|(name, op)| {
            format!(
                "check('{name}', lambda p: {op}, path='{refused}')\n\
                 check('{name}_twin', lambda p: {op}, path='{allowed}')\n"
            )
        })
        .collect()
}

/// The result of a python probe: its `name=RESULT` lines.
pub struct Probe {
    pub out: Output,
    pub results: BTreeMap<String, String>,
}

impl Probe {
    pub fn new(out: Output) -> Probe {
        let stdout = String::from_utf8_lossy(&out.stdout);
        let results = stdout
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Probe { out, results }
    }

    fn dump(&self) -> String {
        format!(
            "status {:?}\nstdout:\n{}\nstderr:\n{}",
            self.out.status,
            String::from_utf8_lossy(&self.out.stdout),
            String::from_utf8_lossy(&self.out.stderr)
        )
    }

    /// Assert that check `name` gave `want`. An errno counts as a refusal
    /// and `OK` as an allowed operation, for the rule that a test's
    /// refusals stand beside an allowed twin (see [`Tree`]'s `Drop`).
    pub fn expect(&self, name: &str, want: &str) -> &Self {
        let got = self.results.get(name);
        assert_eq!(
            got.map(String::as_str),
            Some(want),
            "check {name}: wanted {want}\n{}",
            self.dump()
        );
        if want == "OK" {
            note_allowed();
        } else if is_errno(want) {
            note_refused(name);
        }
        self
    }

    /// Assert that check `name` worked: the allowed twin of the refusals
    /// beside it.
    pub fn allowed(&self, name: &str) -> &Self {
        self.expect(name, "OK")
    }

    /// Assert that check `name` gave `want`, a value only an allowed
    /// operation gives (an HTTP status, what was read): the allowed twin
    /// of the refusals beside it.
    pub fn allowed_with(&self, name: &str, want: &str) -> &Self {
        self.expect(name, want);
        note_allowed();
        self
    }

    /// Assert that check `name` was refused: an errno saying so (permission
    /// denied, operation not permitted, read-only, not across mounts),
    /// never success; `ENOENT` only where the check named a path that
    /// exists outside ([`Probe::absent_inside`]).
    pub fn refused(&self, name: &str) -> &Self {
        self.expect_any(name, &[REFUSED, &["ENOENT"]].concat())
    }

    /// Assert that check `name` gave one of `wants` (`ENOENT` among them
    /// only for a path seen to exist outside: [`Probe::absent_inside`]).
    /// A list of errnos counts as a refusal.
    pub fn expect_any(&self, name: &str, wants: &[&str]) -> &Self {
        let got = self.results.get(name).map(String::as_str);
        assert!(
            got.is_some_and(|g| wants.contains(&g)),
            "check {name}: wanted one of {wants:?}, got {got:?}\n{}",
            self.dump()
        );
        if got == Some("ENOENT") {
            self.absent_inside(name);
        }
        if wants.iter().all(|w| is_errno(w)) {
            note_refused(name);
        }
        self
    }

    /// `ENOENT` from check `name` is a refusal only if the path it is after
    /// exists: the check named it (`check(name, f, path=P)`) and the test
    /// process, outside the sandbox, finds it, through symlinks as the
    /// operation would go (a link whose target is missing does not count;
    /// one it may not look through, like pid 1's `/proc/1/root`, does).
    fn absent_inside(&self, name: &str) {
        let Some(path) = self.results.get(&format!("{name}{CHECKED_PATH}")) else {
            panic!(
                "check {name}: ENOENT, and the check names no path shown to exist outside: \
                 not a refusal (a mistyped path gives it too); give the check the path it is \
                 after, check(name, f, path=P) calling f(P), for a create its directory\n{}",
                self.dump()
            )
        };
        let missing =
            std::fs::metadata(path).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound);
        assert!(
            !missing,
            "check {name}: ENOENT inside, and {path} does not exist outside either: \
             the check proves nothing (a mistyped path, or one this machine lacks)\n{}",
            self.dump()
        );
    }

    /// Assert that each of `ops` ([`twin_checks`]) was refused and its
    /// twin worked.
    pub fn twins(&self, ops: &[(&str, &str)]) -> &Self {
        for (name, _) in ops {
            self.refused(name).allowed(&format!("{name}_twin"));
        }
        self
    }

    /// A value printed as `name=value`.
    pub fn value(&self, name: &str) -> String {
        self.results
            .get(name)
            .cloned()
            .unwrap_or_else(|| panic!("no {name}= line\n{}", self.dump()))
    }

    /// Assert the probe exited 0.
    pub fn success(&self) -> &Self {
        assert!(self.out.status.success(), "probe failed\n{}", self.dump());
        self
    }
}

/// The environment filter helper (`tests/peers/bin/rootfence-envfilter`,
/// built from `tests/peers/envfilter.c` by `tests/peers/install.sh`): runs a
/// command under a seccomp filter reproducing an environment's rules.
pub fn envfilter() -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/bin/rootfence-envfilter");
    assert!(
        p.exists(),
        "{} is missing: run tests/peers/install.sh (it builds it with gcc)",
        p.display()
    );
    p.to_string_lossy().into_owned()
}

/// Processes of this machine whose command line contains `marker` (for
/// finding what a server left running: its processes may live in a PID
/// namespace of their own, where their pids mean nothing out here).
pub fn processes_with(marker: &str) -> Vec<u32> {
    let me = std::process::id();
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        // rootfence's own PID-namespace init is a clone of rootfence (its
        // command line, with the marker in the server's arguments) that
        // exits just after reporting the server's status, having killed
        // and reaped everything in the namespace: not the server's.
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok();
        if exe.is_some_and(|e| std::fs::canonicalize(rootfence()).is_ok_and(|r| r == e)) {
            continue;
        }
        if cmd.contains(marker) {
            let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let zombie = state
                .rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
            if !zombie {
                out.push(pid);
            }
        }
    }
    out
}

/// The content of `p`, or a note that it is missing.
pub fn content(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| format!("<{e}>"))
}

/// stderr of an output, as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// stdout of an output, as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}
