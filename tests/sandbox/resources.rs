//! `[resources]`: a server cannot take the machine. Each bound is attacked
//! by a real program (a fork bomb, a thread bomb, a big allocation, shared
//! memory and a memfd beyond the memory bound, descriptors opened until
//! refused, a scratch directory and `/dev/shm` filled, inotify instances
//! opened until refused) next to its allowed twin (a modest use that
//! works), as root and as an unprivileged user, with and without
//! namespaces. What a mode cannot bound (without namespaces processes,
//! scratch space and inotify watches; without a cgroup shared memory) is what
//! `rootfence doctor` says there: those cases assert its words, and show
//! it where that harms no one. As root the tests expect a cgroup to be
//! had (a writable cgroup v2 or v1 hierarchy, as where they run); as the
//! test user they take `doctor`'s word for whether one can be (systemd's
//! delegated subtree). A server that hits a bound gets the error (or, for
//! the memory of its cgroup, the process that crossed it is killed) and
//! the session goes on.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use common::{Tree, python};

/// The bounds the tests set.
const POLICY: &str = "version = 1
[resources]
processes = 64
memory_mb = 256
open_files = 64
scratch_mb = 8
";

/// Whether `t`'s rootfence runs as root.
fn as_root(t: &Tree) -> bool {
    // SAFETY: geteuid cannot fail.
    t.user.is_none() && unsafe { libc::geteuid() } == 0
}

/// What `rootfence doctor --json` says in `t`'s mode (run as its runner,
/// with [`POLICY`]).
struct Said {
    json: serde_json::Value,
}

impl Said {
    /// Whether the server's cgroup holds `controller` (`memory`, `pids`).
    fn cgroup(&self, controller: &str) -> bool {
        self.json["cgroup"]["controllers"][controller] == true
    }

    /// Where servers' cgroups are made: (cgroup version, directory).
    fn cgroup_dirs(&self) -> Vec<(u64, std::path::PathBuf)> {
        self.json["cgroup"]["at"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|x| Some((x["version"].as_u64()?, x["dir"].as_str()?.into())))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Whether the bound `what` is said to hold, and how.
    fn bound(&self, what: &str) -> (bool, String) {
        let row = self.json["resources"]
            .as_array()
            .and_then(|a| a.iter().find(|r| r["what"] == what))
            .unwrap_or_else(|| panic!("doctor says nothing of {what}: {:#}", self.json));
        (
            row["bounded"] == true,
            row["how"].as_str().unwrap_or_default().to_string(),
        )
    }

    /// Assert that the bound `what` is said not to hold, in words that
    /// contain `words`.
    fn open(&self, what: &str, words: &str) {
        let (bounded, how) = self.bound(what);
        assert!(!bounded && how.contains(words), "{what}: {how}");
    }
}

fn said(t: &Tree) -> Said {
    let policy = t.policy("doctor.toml", POLICY);
    let mut c = t.rootfence_command();
    c.args(["doctor", "--json", "--policy", &policy]);
    t.as_runner(&mut c);
    let out = c.output().expect("run rootfence doctor");
    let json = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "doctor --json: {e}: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let s = Said { json };
    if as_root(t) {
        // As root a cgroup is expected here: a test that took doctor's
        // word for its absence could pass by accident.
        assert!(
            s.cgroup("memory") && s.cgroup("pids"),
            "root gets no cgroup for its servers: {:#}",
            s.json["cgroup"]
        );
    }
    s
}

/// How many processes the server may have at once in `t`'s mode: its
/// cgroup's `pids.max` holds the server and 63 children (with namespaces
/// the bound counts the init too); without one, `RLIMIT_NPROC` in its own
/// user namespace counts the init too, so 63 children of the server; as
/// root the PID namespace's `kernel.pid_max` (64 + 300) leaves pids 3 to
/// 363 to them; without namespaces, no bound.
fn child_bound(t: &Tree) -> Option<std::ops::RangeInclusive<usize>> {
    if said(t).cgroup("pids") {
        return Some(63..=63);
    }
    match (t.namespaces, as_root(t)) {
        (false, _) => None,
        (true, false) => Some(63..=63),
        (true, true) => Some(64..=361),
    }
}

/// Fork `n` children that wait (holding their pid) until told to go, or
/// until the kernel refuses one.
fn forks(n: usize) -> String {
    format!(
        "r, w = os.pipe()\n\
         kids, err = [], 'OK'\n\
         for i in range({n}):\n\
         \x20   try:\n\
         \x20       pid = os.fork()\n\
         \x20   except OSError as e:\n\
         \x20       err = errno.errorcode[e.errno]\n\
         \x20       break\n\
         \x20   if pid == 0:\n\
         \x20       os.close(w); os.read(r, 1); os._exit(0)\n\
         \x20   kids.append(pid)\n\
         os.close(w)\n\
         for k in kids:\n\
         \x20   os.waitpid(k, 0)\n\
         print('forked=%d' % len(kids))\n\
         print('fork=' + err)"
    )
}

/// Start `n` threads that wait (blocked on a pipe), or until one is
/// refused. `_thread` rather than `threading`: `Thread.start` waits for the
/// new thread to start, and a thread that starts but cannot allocate dies
/// (MemoryError) without ever saying so, leaving that wait hung. Small
/// stacks, so that the process bound, not the memory bound, is the one
/// the bomb meets.
fn threads(n: usize) -> String {
    format!(
        "import _thread\n\
         _thread.stack_size(64 * 1024)\n\
         r, w = os.pipe()\n\
         count, err = 0, 'OK'\n\
         for i in range({n}):\n\
         \x20   try:\n\
         \x20       _thread.start_new_thread(os.read, (r, 1))\n\
         \x20   except RuntimeError as e:\n\
         \x20       err = 'refused'\n\
         \x20       break\n\
         \x20   count += 1\n\
         print('threads=%d' % count)\n\
         print('thread=' + err, flush=True)\n\
         os._exit(0)"
    )
}

fn run(t: &Tree, code: &str) -> common::Probe {
    let policy = t.policy("resources.toml", POLICY);
    t.py(&["--policy", &policy], code)
}

fn forked(p: &common::Probe) -> usize {
    p.value("forked").parse().expect("a count")
}

fn fork_bomb(t: &Tree) {
    // The twin: a modest number of processes works.
    run(t, &forks(20))
        .success()
        .expect("forked", "20")
        .allowed("fork");
    let p = run(t, &forks(1000));
    p.success();
    match child_bound(t) {
        Some(bound) => {
            assert!(bound.contains(&forked(&p)), "{} children", forked(&p));
            p.expect("fork", "EAGAIN");
        }
        None => {
            // Not bounded without namespaces and a cgroup: the row doctor
            // reports open.
            said(t).open("processes and threads", "not bounded without namespaces");
            let p = run(t, &forks(200));
            p.expect("forked", "200").allowed("fork");
        }
    }
}

fn thread_bomb(t: &Tree) {
    run(t, &threads(20))
        .success()
        .expect("threads", "20")
        .allowed("thread");
    let p = run(t, &threads(1000));
    p.success();
    let n: usize = p.value("threads").parse().unwrap();
    match child_bound(t) {
        Some(bound) => {
            assert!(n <= *bound.end(), "{n} threads");
            assert!(n >= 50, "{n} threads: the bound is far below the policy's");
            p.expect("thread", "refused");
        }
        None => {
            let p = run(t, &threads(200));
            p.expect("threads", "200").allowed("thread");
        }
    }
}

fn memory(t: &Tree) {
    run(
        t,
        "def alloc(mib):\n\
         \x20   try:\n\
         \x20       b = bytearray(mib << 20)\n\
         \x20       b[-1] = 1\n\
         \x20       return 'OK'\n\
         \x20   except MemoryError:\n\
         \x20       return 'MemoryError'\n\
         print('small=' + alloc(32))\n\
         print('big=' + alloc(512))\n\
         print('after=' + alloc(32))",
    )
    .success()
    .expect("small", "OK")
    .expect("big", "MemoryError")
    .expect("after", "OK");
}

/// Open `/dev/null` until refused (at most 1000), print how many and the
/// error, close one and open again.
const OPEN_UNTIL_REFUSED: &str = "fds, err = [], 'OK'\n\
     for i in range(1000):\n\
     \x20   try:\n\
     \x20       fds.append(os.open('/dev/null', os.O_RDONLY))\n\
     \x20   except OSError as e:\n\
     \x20       err = errno.errorcode[e.errno]\n\
     \x20       break\n\
     print('opened=%d' % len(fds))\n\
     print('open=' + err)\n\
     os.close(fds[0])\n\
     check('reopen', lambda: os.close(os.open('/dev/null', os.O_RDONLY)))";

/// Descriptors opened until refused, next to the twin: one closed, one
/// opened again.
fn held_to(p: &common::Probe, opened: std::ops::RangeInclusive<usize>) {
    p.success().expect("open", "EMFILE").allowed("reopen");
    let n: usize = p.value("opened").parse().unwrap();
    assert!(opened.contains(&n), "{n} descriptors opened");
}

fn descriptors(t: &Tree) {
    held_to(&run(t, OPEN_UNTIL_REFUSED), 50..=61);
}

/// A descriptor bound below the count rootfence holds while it launches
/// (its rules, pipes and filter): the bound is set last, so the server
/// still starts, and is held to it.
fn few_descriptors(t: &Tree) {
    let policy = t.policy("few.toml", "version = 1\n[resources]\nopen_files = 12\n");
    held_to(&t.py(&["--policy", &policy], OPEN_UNTIL_REFUSED), 1..=9);
}

fn scratch(t: &Tree) {
    let p = run(
        t,
        "d = os.environ['TMPDIR']\n\
         def fill(name, mib):\n\
         \x20   with open(d + '/' + name, 'wb') as f:\n\
         \x20       for i in range(mib):\n\
         \x20           f.write(b'x' * (1 << 20))\n\
         \x20       f.flush()\n\
         \x20       os.fsync(f.fileno())\n\
         check('small', lambda: fill('small', 1))\n\
         check('big', lambda: fill('big', 16))\n\
         check('remove', lambda: os.unlink(d + '/big'))\n\
         check('after', lambda: fill('after', 1))\n\
         def many():\n\
         \x20   for i in range(5000):\n\
         \x20       open(d + '/f%d' % i, 'w').close()\n\
         check('files', many)",
    );
    p.success()
        .expect("small", "OK")
        .expect("remove", "OK")
        .expect("after", "OK");
    if t.namespaces {
        p.expect("big", "ENOSPC").expect("files", "ENOSPC");
    } else {
        // Not bounded without namespaces: TMPDIR is on the host's disk.
        p.expect("big", "OK").expect("files", "OK");
    }
}

/// Touch `mib` MiB of `kind` memory (`private` or `shared` anonymous
/// mappings, or a `memfd` written), saying when it starts and when it is
/// done.
fn touch(kind: &str, mib: u64) -> String {
    format!(
        "import mmap\n\
         mib = {mib}\n\
         print('started=OK', flush=True)\n\
         if '{kind}' == 'memfd':\n\
         \x20   fd = os.memfd_create('m')\n\
         \x20   for i in range(mib):\n\
         \x20       os.write(fd, b'x' * (1 << 20))\n\
         else:\n\
         \x20   flags = mmap.MAP_SHARED if '{kind}' == 'shared' else mmap.MAP_PRIVATE\n\
         \x20   m = mmap.mmap(-1, mib << 20, flags)\n\
         \x20   for off in range(0, mib << 20, 4096):\n\
         \x20       m[off] = 1\n\
         print('done=OK', flush=True)"
    )
}

/// 320 MiB of shared memory and of a memfd under `memory_mb = 128`: the
/// process is killed where the server has a cgroup, next to 100 MiB of
/// each (and of private memory) that work under the same bound. Where it
/// has none, doctor says shared memory is not bounded, and it is not.
fn shared_memory(t: &Tree) {
    let policy = t.policy("memory.toml", "version = 1\n[resources]\nmemory_mb = 128\n");
    let run = |kind, mib| t.py(&["--policy", &policy], &touch(kind, mib));
    for kind in ["private", "shared", "memfd"] {
        run(kind, 100).success().allowed("done");
    }
    let said = said(t);
    for kind in ["shared", "memfd"] {
        let p = run(kind, 320);
        p.expect("started", "OK");
        if said.cgroup("memory") {
            // Killed by the kernel at the cgroup's limit (SIGKILL: 128 + 9).
            assert_eq!(p.out.status.code(), Some(137), "{kind}: {:?}", p.out);
            assert!(!p.results.contains_key("done"), "{kind}: {:?}", p.out);
        } else {
            said.open("memory", "shared memory (MAP_SHARED, memfds, /dev/shm)");
            p.success().expect("done", "OK");
        }
    }
}

/// The server's own `/dev/shm`, in every mode: Python's
/// `multiprocessing.Pool`, a POSIX semaphore and a named shared memory
/// block opened again by name in a child work, and a file of 1 MiB is
/// written. With namespaces it is a tmpfs of the view in the scratch
/// space: 16 MiB are refused (`ENOSPC`: it is in the 8 MiB of scratch) and
/// nothing written there runs. Without them rootfence does a name's open
/// (as `shm_open` and `sem_open` open: creating, writing or not following
/// a link; a plain read goes to the host's), link, rename and unlink in a
/// directory of its own the server has no rule for: the host's `/dev/shm`
/// is never reached (a file planted there is neither read nor changed,
/// nothing the server makes appears there, other spellings of the path
/// reach the host's and are refused), a file the
/// server may only read cannot be linked in there, and the directory's real
/// place, though the server can learn it, is neither written, linked into
/// nor run from.
fn dev_shm(t: &Tree) {
    // A file of the host's /dev/shm, the runner's own (as every file there
    // of another program of the same user is).
    let host = std::path::PathBuf::from(format!("/dev/shm/rootfence-host-{}", common::unique()));
    std::fs::write(&host, "host").unwrap();
    if let Some((uid, gid)) = t.user {
        std::os::unix::fs::chown(&host, Some(uid), Some(gid)).unwrap();
    }
    let name = host.file_name().unwrap().to_str().unwrap().to_string();
    let p = run(
        t,
        &format!(
            "import multiprocessing, subprocess\n\
             from multiprocessing import shared_memory\n\
             def sq(x):\n\
             \x20   return x * x\n\
             def pool():\n\
             \x20   with multiprocessing.Pool(2) as p:\n\
             \x20       assert p.map(sq, range(8)) == [x * x for x in range(8)]\n\
             check('pool', pool)\n\
             def sem():\n\
             \x20   s = multiprocessing.Semaphore(2)\n\
             \x20   s.acquire()\n\
             \x20   s.release()\n\
             check('sem', sem)\n\
             def peek(name, q):\n\
             \x20   m = shared_memory.SharedMemory(name=name)\n\
             \x20   q.put(bytes(m.buf[:5])); m.close()\n\
             def shared():\n\
             \x20   m = shared_memory.SharedMemory(create=True, size=4096)\n\
             \x20   m.buf[:5] = b'hello'\n\
             \x20   q = multiprocessing.Queue()\n\
             \x20   c = multiprocessing.Process(target=peek, args=(m.name, q)); c.start()\n\
             \x20   got = q.get(timeout=20); c.join()\n\
             \x20   m.close(); m.unlink()\n\
             \x20   if got != b'hello': raise OSError(5, repr(got))\n\
             check('shared', shared)\n\
             def fill(d, name, mib):\n\
             \x20   try:\n\
             \x20       with open(d + '/' + name, 'wb') as f:\n\
             \x20           for i in range(mib):\n\
             \x20               f.write(b'x' * (1 << 20))\n\
             \x20           f.flush()\n\
             \x20           os.fsync(f.fileno())\n\
             \x20   except OSError:\n\
             \x20       if os.path.exists(d + '/' + name):\n\
             \x20           os.unlink(d + '/' + name)\n\
             \x20       raise\n\
             check('small', lambda d: fill(d, 'small', 1), path='/dev/shm')\n\
             check('big', lambda: fill('/dev/shm', 'big', 16))\n\
             check('tmpdir', lambda: fill(os.environ['TMPDIR'], 'small', 1))\n\
             def run_from(d):\n\
             \x20   fd = os.open(d + '/x.sh', os.O_CREAT | os.O_WRONLY, 0o755)\n\
             \x20   os.write(fd, b'#!/bin/sh\\nexit 0\\n'); os.close(fd)\n\
             \x20   subprocess.run([d + '/x.sh'], check=True)\n\
             check('exec_twin', lambda: subprocess.run(['/bin/true'], check=True))\n\
             if {ns}:\n\
             \x20   check('exec', lambda: run_from('/dev/shm'))\n\
             else:\n\
             \x20   # The host's file: not there (its own /dev/shm holds no such\n\
             \x20   # name), and writing the name makes the server's own.\n\
             \x20   check('host_read', lambda p: read(p), path='/dev/shm/{name}')\n\
             \x20   check('host_alias', lambda p: read(p), path='/dev//shm/{name}')\n\
             \x20   check('host_dots', lambda p: read(p), path='/dev/shm/../shm/{name}')\n\
             \x20   check('host_nofollow', lambda p: os.open(p, os.O_RDONLY | os.O_NOFOLLOW), path='/dev/shm/{name}')\n\
             \x20   check('own_write', lambda: write('/dev/shm/{name}', 'mine'))\n\
             \x20   def own_read():\n\
             \x20       fd = os.open('/dev/shm/{name}', os.O_RDWR)\n\
             \x20       print('own=' + os.read(fd, 10).decode())\n\
             \x20   check('own_read', own_read)\n\
             \x20   check('link_in', lambda: os.link('{ro}/file', '/dev/shm/ro-file'))\n\
             \x20   check('link_in_then_write', lambda: write('/dev/shm/ro-file', 'x', 'r+'))\n\
             \x20   fd = os.open('/dev/shm/small2', os.O_CREAT | os.O_RDWR, 0o600)\n\
             \x20   real = os.path.dirname(os.readlink('/proc/self/fd/%d' % fd))\n\
             \x20   print('real=' + real)\n\
             \x20   check('real_write', lambda p: write(p + '/planted'), path=real)\n\
             \x20   check('real_link', lambda p: os.link('{ro}/file', p + '/ro-file'), path=real)\n\
             \x20   def exec_real():\n\
             \x20       fd = os.open('/dev/shm/x.sh', os.O_CREAT | os.O_WRONLY, 0o755)\n\
             \x20       os.write(fd, b'#!/bin/sh\\nexit 0\\n'); os.close(fd)\n\
             \x20       subprocess.run([real + '/x.sh'], check=True)\n\
             \x20   check('real_exec', exec_real)\n\
             \x20   check('rename', lambda: os.rename('/dev/shm/small2', '/dev/shm/small3'))\n\
             \x20   check('rename_out', lambda: os.rename('/dev/shm/small3', '{r}/small3'))\n\
             \x20   check('unlink', lambda: os.unlink('/dev/shm/small3'))",
            ns = if t.namespaces { "True" } else { "False" },
            ro = t.ro.display(),
            r = t.r.display(),
        ),
    );
    p.success()
        .allowed("tmpdir")
        .allowed("exec_twin")
        .allowed("pool")
        .allowed("sem")
        .allowed("shared")
        .allowed("small");
    if t.namespaces {
        p.expect("big", "ENOSPC").expect("exec", "EACCES");
    } else {
        // Not bounded without namespaces, as doctor says.
        said(t).open("scratch space", "not bounded without namespaces");
        p.allowed("big")
            .refused("host_read")
            .refused("host_nofollow")
            .refused("host_alias")
            .refused("host_dots")
            .allowed("own_write")
            .allowed("own_read")
            .expect("own", "mine")
            .expect("link_in", "EXDEV")
            .expect("link_in_then_write", "ENOENT")
            .refused("real_write")
            .refused("real_link")
            .expect("real_exec", "EACCES")
            .allowed("rename")
            .expect("rename_out", "EXDEV")
            .allowed("unlink");
        // Judged from outside: the host's file untouched, nothing of the
        // server's in the host's /dev/shm, its own directory gone with it.
        assert_eq!(std::fs::read_to_string(&host).unwrap(), "host");
        for made in ["small", "big", "small2", "small3", "x.sh", "ro-file"] {
            assert!(
                !std::path::Path::new("/dev/shm").join(made).exists(),
                "{made} in the host's /dev/shm"
            );
        }
        let real = p.value("real");
        assert!(
            real.starts_with('/') && !real.starts_with("/dev/shm"),
            "{real}"
        );
        assert!(!std::path::Path::new(&real).exists(), "{real} left behind");
    }
    let _ = std::fs::remove_file(&host);
}

/// Open inotify instances until refused: three child processes first (at
/// most 100 each, each held while the server lives), then the server
/// itself (at most 300), which parks each in a unix socket's queue (sent,
/// never received) and closes its own descriptor; say how many in all and
/// the server's last error, and hold them until stdin closes.
const INOTIFY_HOG: &str = "import ctypes, socket\n\
     libc = ctypes.CDLL(None, use_errno=True)\n\
     park, parked = socket.socketpair()\n\
     def hog(limit, in_flight=False):\n\
     \x20   fds, err = [], 'OK'\n\
     \x20   for i in range(limit):\n\
     \x20       fd = libc.inotify_init1(0)\n\
     \x20       if fd < 0:\n\
     \x20           err = errno.errorcode[ctypes.get_errno()]\n\
     \x20           break\n\
     \x20       fds.append(fd)\n\
     \x20       if in_flight:\n\
     \x20           socket.send_fds(park, [b'x'], [fd])\n\
     \x20           os.close(fd)\n\
     \x20   return fds, err\n\
     total = 0\n\
     hold_r, hold_w = os.pipe()\n\
     for k in range(3):\n\
     \x20   r, w = os.pipe()\n\
     \x20   if os.fork() == 0:\n\
     \x20       os.close(hold_w)\n\
     \x20       fds, err = hog(100)\n\
     \x20       os.write(w, b'%d' % len(fds))\n\
     \x20       os.read(hold_r, 1)\n\
     \x20       os._exit(0)\n\
     \x20   os.close(w)\n\
     \x20   total += int(os.read(r, 64))\n\
     fds, err = hog(300, in_flight=True)\n\
     print('instances=%d' % (total + len(fds)))\n\
     print('init=' + err, flush=True)\n\
     sys.stdin.read()";

/// One inotify instance, opened outside the sandbox.
const INOTIFY_ONE: &str = "import ctypes, errno\n\
     libc = ctypes.CDLL(None, use_errno=True)\n\
     fd = libc.inotify_init1(0)\n\
     print('outside=' + ('OK' if fd >= 0 else errno.errorcode[ctypes.get_errno()]))";

/// Start the server `c` (a hog that prints two `name=value` lines, then
/// holds what it took until its stdin closes); while it holds them, run
/// python with `outside` as the runner, outside the sandbox. The server's
/// values by name, and what the python outside printed.
fn while_held(
    t: &Tree,
    c: &mut Command,
    outside: &[&str],
) -> (impl Fn(&str) -> String + use<>, String) {
    let mut child = c
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start rootfence exec");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut lines = String::new();
    for _ in 0..2 {
        out.read_line(&mut lines).expect("the server's count");
    }
    let mut one = Command::new(python());
    one.args(outside);
    t.as_runner(&mut one);
    let said = String::from_utf8_lossy(&one.output().expect("python outside").stdout).into_owned();
    drop(child.stdin.take());
    let status = child.wait().expect("wait for rootfence exec");
    assert!(status.success(), "{status:?}: {lines}");
    let value = move |name: &str| {
        lines
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name}=")))
            .unwrap_or_else(|| panic!("no {name} in {lines}"))
            .to_string()
    };
    (value, said)
}

/// A server opening inotify instances until refused gets its share (a
/// quarter of the user's: with namespaces its user namespace's limit,
/// without them rootfence's supervisor's count), and the user, outside,
/// can still open one while the server holds them all.
fn inotify(t: &Tree) {
    let (bounded, how) = said(t).bound("inotify");
    assert!(bounded, "{how}");
    if !t.namespaces {
        assert!(how.contains("counted by rootfence's supervisor"), "{how}");
    }
    let user_limit: usize = std::fs::read_to_string("/proc/sys/user/max_inotify_instances")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(128);
    // More descriptors than instances: the inotify bound is the one met.
    let policy = t.policy(
        "inotify.toml",
        "version = 1\n[resources]\nopen_files = 1024\n",
    );
    let code = format!("{}\n{INOTIFY_HOG}", common::PRELUDE);
    let mut c = t.command(
        &["--policy", &policy],
        &[python().to_str().unwrap_or("python3"), "-c", &code],
    );
    // While the server holds all it could open: one more, outside.
    let (value, outside) = while_held(t, &mut c, &["-c", INOTIFY_ONE]);
    let n: usize = value("instances").parse().expect("a count");
    // The twin: instances opened inside, a few at least.
    assert!(n >= 4, "{n} instances");
    assert!(
        n <= user_limit / 4,
        "{n} of the user's {user_limit} instances"
    );
    assert_eq!(value("init"), "EMFILE");
    assert_eq!(outside.trim(), "outside=OK", "with {n} held inside");
}

/// Watches on the files of a directory, from 32 instances at most (the
/// instance bound of every mode), until refused: how many, and the last
/// error; held while stdin is open.
const WATCH_HOG: &str = "import ctypes, errno\n\
     libc = ctypes.CDLL(None, use_errno=True)\n\
     d, per = sys.argv[1], int(sys.argv[2])\n\
     names = [os.path.join(d, n).encode() for n in sorted(os.listdir(d))][:per]\n\
     count, err = 0, 'OK'\n\
     for i in range(32):\n\
     \x20   fd = libc.inotify_init1(0)\n\
     \x20   if fd < 0:\n\
     \x20       break\n\
     \x20   for n in names:\n\
     \x20       if libc.inotify_add_watch(fd, n, 0x2) < 0:\n\
     \x20           err = errno.errorcode[ctypes.get_errno()]\n\
     \x20           break\n\
     \x20       count += 1\n\
     \x20   if err != 'OK':\n\
     \x20       break\n\
     print('watches=%d' % count)\n\
     print('watch=' + err, flush=True)\n\
     sys.stdin.read()";

/// One inotify watch, added outside the sandbox on `argv[1]`.
const WATCH_ONE: &str = "import ctypes, errno, sys\n\
     libc = ctypes.CDLL(None, use_errno=True)\n\
     fd = libc.inotify_init1(0)\n\
     w = libc.inotify_add_watch(fd, sys.argv[1].encode(), 0x2)\n\
     print('outside=' + ('OK' if w >= 0 else errno.errorcode[ctypes.get_errno()]))";

/// A server adding inotify watches until refused gets its share (a
/// quarter of the user's: with namespaces its user namespace's limit,
/// without them rootfence's supervisor's count), and the user, outside,
/// can still add one while the server holds them all.
fn inotify_watches(t: &Tree) {
    let (bounded, how) = said(t).bound("inotify");
    assert!(bounded, "{how}");
    let user_limit: usize = std::fs::read_to_string("/proc/sys/user/max_inotify_watches")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(8192);
    // Enough files that 32 instances watching each pass a quarter.
    let per = user_limit / 4 / 32 + 64;
    let dir = t.r.join("watched");
    std::fs::create_dir_all(&dir).unwrap();
    for i in 0..per {
        std::fs::write(dir.join(format!("f{i:06}")), "").unwrap();
    }
    let policy = t.policy(
        "inotify.toml",
        "version = 1\n[resources]\nopen_files = 1024\n",
    );
    let code = format!("{}\n{WATCH_HOG}", common::PRELUDE);
    let per_s = per.to_string();
    let mut c = t.command(
        &["--policy", &policy],
        &[
            python().to_str().unwrap_or("python3"),
            "-c",
            &code,
            dir.to_str().unwrap(),
            &per_s,
        ],
    );
    // While the server holds all it could add: one more, outside.
    let (value, outside) = while_held(t, &mut c, &["-c", WATCH_ONE, t.r.to_str().unwrap()]);
    let n: usize = value("watches").parse().expect("a count");
    // The twin: many watches added inside.
    assert!(n >= per, "{n} watches");
    assert!(
        n <= user_limit / 4,
        "{n} of the user's {user_limit} watches"
    );
    assert_eq!(value("watch"), "ENOSPC");
    assert_eq!(outside.trim(), "outside=OK", "with {n} held inside");
    // A watch needs the server's own right to read what it watches (the
    // supervisor adding it without namespaces holds more): a directory of
    // another user's, mode 0700, is refused; the server's root is not.
    let private = std::env::temp_dir().join(format!("rootfence-watch-{}", common::unique()));
    std::fs::create_dir_all(&private).unwrap();
    std::os::unix::fs::chown(&private, Some(65534), Some(65534)).unwrap();
    std::fs::set_permissions(
        &private,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let code = format!(
        "import ctypes\n\
         libc = ctypes.CDLL(None, use_errno=True)\n\
         def watch(p, mask=0x100):\n\
         \x20   fd = libc.inotify_init1(0)\n\
         \x20   if libc.inotify_add_watch(fd, p.encode(), mask) < 0:\n\
         \x20       raise OSError(ctypes.get_errno(), p)\n\
         check('private', watch, path='{}')\n\
         check('own', watch, path='{r}')\n\
         check('own_nofollow', lambda: watch('{r}', 0x100 | 0x02000000))\n\
         check('proc', lambda: watch('/proc/self/cwd'))",
        private.display(),
        r = t.r.display(),
    );
    let p = t.py(&[], &code);
    p.refused("private").allowed("own").allowed("own_nofollow");
    // Without namespaces /proc/self would be rootfence's, the watch its.
    if !t.namespaces {
        p.expect("proc", "EACCES");
    }
    std::fs::remove_dir(&private).unwrap();
}

/// The server runs in a cgroup of its own holding the bounds, which is
/// gone once the server has ended (where doctor says one can be had).
fn own_cgroup(t: &Tree) {
    let said = said(t);
    let dirs = said.cgroup_dirs();
    if dirs.is_empty() {
        said.open("memory", "no cgroup can be had here");
        return;
    }
    let code = format!(
        "{}\nprint(open('/proc/self/cgroup').read(), flush=True)\nsys.stdin.read()",
        common::PRELUDE
    );
    let policy = t.policy("cgroup.toml", POLICY);
    let mut child = t
        .command(
            &["--policy", &policy],
            &[python().to_str().unwrap_or("python3"), "-c", &code],
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start rootfence exec");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut text = String::new();
    while out.read_line(&mut text).expect("the server's cgroups") > 1 {}
    // Its cgroup, the same name in each hierarchy: a child of where doctor
    // says they are made, holding the limits.
    let name = text
        .lines()
        .filter_map(|l| l.rsplit('/').next())
        .find(|n| n.starts_with("rootfence-"))
        .unwrap_or_else(|| panic!("the server is in no cgroup of its own: {text}"))
        .to_string();
    let mut leaves = Vec::new();
    for (_, dir) in &dirs {
        let leaf = dir.join(&name);
        assert!(leaf.is_dir(), "{} missing", leaf.display());
        for (file, want) in [
            ("memory.max", "268435456"),
            ("memory.limit_in_bytes", "268435456"),
            ("pids.max", if t.namespaces { "65" } else { "64" }),
        ] {
            if let Ok(v) = std::fs::read_to_string(leaf.join(file)) {
                assert_eq!(v.trim(), want, "{}", leaf.join(file).display());
            }
        }
        leaves.push(leaf);
    }
    drop(child.stdin.take());
    assert!(child.wait().expect("wait").success());
    for leaf in leaves {
        assert!(!leaf.exists(), "{} is left", leaf.display());
    }
}

/// A stdio JSON-RPC server whose `exhaust` call runs a fork bomb and
/// answers what it got, and whose `alive` call answers a token it drew at
/// start (another server would answer another).
const SERVER: &str = r#"
import errno, json, os, sys
token = os.urandom(8).hex()
def bomb():
    r, w = os.pipe()
    kids = []
    try:
        for i in range(1000):
            pid = os.fork()
            if pid == 0:
                os.close(w); os.read(r, 1); os._exit(0)
            kids.append(pid)
        out = 'none'
    except OSError as e:
        out = errno.errorcode[e.errno]
    os.close(w)
    for k in kids:
        os.waitpid(k, 0)
    return '%s after %d' % (out, len(kids))
for line in sys.stdin:
    req = json.loads(line)
    if 'id' not in req:
        continue
    if req['method'] == 'initialize':
        result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                  "serverInfo": {"name": "exhausting", "version": "1"}}
    elif req['params']['name'] == 'exhaust':
        result = {"content": [{"type": "text", "text": bomb()}]}
    else:
        result = {"content": [{"type": "text", "text": "alive " + token}]}
    print(json.dumps({"jsonrpc": "2.0", "id": req["id"], "result": result}), flush=True)
"#;

fn session_goes_on(t: &Tree) {
    let policy = t.policy("resources.toml", POLICY);
    let mut c = t.rootfence_command();
    c.args(["run", "--policy", &policy, "--root"])
        .arg(&t.r)
        .arg("--")
        .arg(python())
        .arg("-c")
        .arg(SERVER)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", &t.home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    t.as_runner(&mut c);
    let mut child = c.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut ask = |line: &str| {
        writeln!(stdin, "{line}").unwrap();
        let mut answer = String::new();
        stdout.read_line(&mut answer).unwrap();
        answer
    };
    let init = ask(
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
    );
    assert!(init.contains("exhausting"), "{init}");
    let call = |id: u32, name: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{name}","arguments":{{}}}}}}"#
        )
    };
    let text = |line: String| -> String {
        let v: serde_json::Value = serde_json::from_str(&line).expect("a JSON-RPC line");
        v["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("no text in {line}"))
            .to_string()
    };
    let before = text(ask(&call(2, "alive")));
    assert!(before.starts_with("alive "), "{before}");
    let bomb = text(ask(&call(3, "exhaust")));
    assert!(bomb.starts_with("EAGAIN after"), "{bomb}");
    // The same server answers after hitting the bound: the session goes
    // on, and it was not restarted.
    let after = text(ask(&call(4, "alive")));
    assert_eq!(after, before, "the server changed or stopped");
    drop(stdin);
    assert!(child.wait().unwrap().success());
}

macro_rules! modes {
    ($($case:ident),*) => {
        mod as_root {
            use super::*;
            $(#[test] fn $case() { super::$case(&Tree::new()); })*
        }
        mod as_root_without_namespaces {
            use super::*;
            $(#[test] fn $case() { super::$case(&Tree::without_namespaces()); })*
        }
        mod unprivileged {
            use super::*;
            $(#[test] fn $case() { super::$case(&Tree::unprivileged(true)); })*
        }
        mod unprivileged_without_namespaces {
            use super::*;
            $(#[test] fn $case() { super::$case(&Tree::unprivileged(false)); })*
        }
    };
}

modes!(
    fork_bomb,
    thread_bomb,
    memory,
    shared_memory,
    descriptors,
    few_descriptors,
    scratch,
    dev_shm,
    inotify,
    inotify_watches,
    own_cgroup
);

#[test]
fn a_server_that_hits_the_process_bound_goes_on_answering() {
    session_goes_on(&Tree::new());
}

#[test]
fn a_server_that_hits_the_process_bound_goes_on_answering_unprivileged() {
    session_goes_on(&Tree::unprivileged(true));
}

/// `doctor` says which bounds apply here, in the words of the README.
#[test]
fn doctor_says_which_bounds_apply() {
    let out = Command::new(common::rootfence())
        .args(["doctor", "--json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let row = v["coverage"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| {
            r["class"]
                .as_str()
                .is_some_and(|c| c.starts_with("the machine's resources"))
        })
        .expect("a resources row")
        .clone();
    let how = row["how"].as_str().unwrap();
    for what in [
        "processes and threads:",
        "memory:",
        "open files:",
        "scratch space:",
        "inotify:",
    ] {
        assert!(how.contains(what), "{how}");
    }
}
