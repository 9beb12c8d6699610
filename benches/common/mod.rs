//! Shared by the relay benches: a minimal MCP server (the bench binary
//! itself, in server mode), a host-side peer that drives it directly or
//! through `rootfence run`, and the measurements both benches take.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::AsFd;
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// Argument that makes a bench binary the minimal MCP server.
pub const SERVER_ARG: &str = "--rootfence-bench-server";

/// Pipe size the bench host asks for on its own pipes, in both
/// configurations (what a host that moves big messages would do).
pub const HOST_PIPE: usize = 1 << 20;

/// Run as the minimal server if asked to; true if this process was the
/// server (the caller then returns).
pub fn maybe_serve() -> bool {
    if std::env::args().any(|a| a == SERVER_ARG) {
        serve();
        return true;
    }
    false
}

/// The minimal server: answers `initialize`, `ping` and `pid`, and
/// answers `tools/call` with an image whose data is the call's
/// `arguments.data` (an echo). It reads the envelope from the head of each
/// line (id, method) and slices the payload out, as a server that does not
/// validate its input would: it is the floor against which the relay is
/// compared.
fn serve() {
    let mut out = std::io::BufWriter::with_capacity(1 << 20, std::io::stdout());
    let mut r = BufReader::with_capacity(1 << 20, std::io::stdin());
    let mut line = Vec::new();
    loop {
        line.clear();
        if r.read_until(b'\n', &mut line).unwrap_or(0) == 0 {
            return;
        }
        let (Some(id), Some(method)) = (field(&line, b"\"id\":"), field(&line, b"\"method\":"))
        else {
            continue;
        };
        let id = std::str::from_utf8(id).unwrap_or("null");
        let mut reply = Vec::new();
        match method {
            b"\"initialize\"" => write!(
                reply,
                r#"{{"jsonrpc":"2.0","id":{id},"result":{{"protocolVersion":"2025-06-18","capabilities":{{"tools":{{}}}},"serverInfo":{{"name":"bench","version":"1"}}}}}}"#
            )
            .unwrap(),
            b"\"tools/call\"" => {
                let data = data_of(&line).unwrap_or(b"\"\"");
                write!(
                    reply,
                    r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"image","mimeType":"image/png","data":"#
                )
                .unwrap();
                reply.extend_from_slice(data);
                reply.extend_from_slice(b"}]}}");
            }
            b"\"pid\"" => write!(
                reply,
                r#"{{"jsonrpc":"2.0","id":{id},"result":{{"pid":{}}}}}"#,
                std::process::id()
            )
            .unwrap(),
            _ => write!(reply, r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#).unwrap(),
        }
        reply.push(b'\n');
        let _ = out.write_all(&reply);
        let _ = out.flush();
    }
}

/// The raw value after `key` in the first 512 bytes of `line`: up to the
/// next `,` or `}` (ids and method names here hold neither).
fn field<'a>(line: &'a [u8], key: &[u8]) -> Option<&'a [u8]> {
    let head = &line[..line.len().min(512)];
    let at = head.windows(key.len()).position(|w| w == key)? + key.len();
    let rest = &head[at..];
    let end = rest.iter().position(|&c| c == b',' || c == b'}')?;
    Some(&rest[..end])
}

/// The `"data":"..."` string of a bench call (no escapes inside).
fn data_of(line: &[u8]) -> Option<&[u8]> {
    let key = b"\"data\":\"";
    let head = &line[..line.len().min(512)];
    let at = head.windows(key.len()).position(|w| w == key)? + key.len() - 1;
    let end = memchr::memchr(b'"', &line[at + 1..])? + at + 2;
    Some(&line[at..end])
}

/// The host side of one connection: the child (the server itself, or
/// rootfence running it), its stdin and its stdout.
pub struct Peer {
    pub child: Child,
    pub w: ChildStdin,
    pub r: BufReader<ChildStdout>,
    buf: Vec<u8>,
}

impl Peer {
    /// Start `cmd` as the minimal server (or as rootfence running it).
    pub fn spawn(mut cmd: Command) -> Peer {
        cmd.arg(SERVER_ARG);
        Peer::spawn_as_is(cmd)
    }

    /// Start `cmd` as it is (it starts the minimal server itself).
    pub fn spawn_as_is(mut cmd: Command) -> Peer {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        let w = child.stdin.take().unwrap();
        let r = child.stdout.take().unwrap();
        let _ = rustix::pipe::fcntl_setpipe_size(w.as_fd(), HOST_PIPE);
        let _ = rustix::pipe::fcntl_setpipe_size(r.as_fd(), HOST_PIPE);
        Peer {
            child,
            w,
            r: BufReader::with_capacity(1 << 20, r),
            buf: Vec::new(),
        }
    }

    pub fn send(&mut self, s: &str) {
        self.w.write_all(s.as_bytes()).unwrap();
        self.w.write_all(b"\n").unwrap();
        self.w.flush().unwrap();
    }

    pub fn recv(&mut self) -> &[u8] {
        self.buf.clear();
        assert!(
            self.r.read_until(b'\n', &mut self.buf).unwrap() > 0,
            "peer closed"
        );
        &self.buf
    }

    pub fn recv_string(&mut self) -> String {
        String::from_utf8_lossy(self.recv()).into_owned()
    }

    /// Read until a line containing `needle`, answering roots/list with `roots`.
    pub fn recv_until(&mut self, needle: &str, roots: &str) {
        loop {
            let l = self.recv_string();
            if l.contains("\"roots/list\"") {
                let v: serde_json::Value = serde_json::from_str(&l).unwrap();
                let reply = format!(
                    r#"{{"jsonrpc":"2.0","id":{},"result":{{"roots":{roots}}}}}"#,
                    v["id"]
                );
                self.send(&reply);
                continue;
            }
            if l.contains(needle) {
                return;
            }
        }
    }

    /// The MCP handshake; with `with_roots`, the host declares roots and
    /// answers roots/list with `roots`.
    pub fn initialize(&mut self, with_roots: bool, roots: &str) {
        let caps = if with_roots {
            r#"{"roots":{"listChanged":true}}"#
        } else {
            "{}"
        };
        self.send(&format!(
            r#"{{"jsonrpc":"2.0","id":"init","method":"initialize","params":{{"protocolVersion":"2025-06-18","capabilities":{caps},"clientInfo":{{"name":"bench","version":"1"}}}}}}"#
        ));
        self.recv_until("\"init\"", roots);
        self.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    }

    pub fn close(self) {
        let Peer { mut child, w, .. } = self;
        drop(w);
        let _ = child.wait();
    }
}

/// The minimal server, started directly.
pub fn direct() -> Command {
    Command::new(std::env::current_exe().unwrap())
}

/// The rootfence binary the fenced side runs: this tree's, or the one
/// `ROOTFENCE_BENCH_BIN` names (another release's, to measure it with the
/// same bench in the same conditions).
pub fn rootfence_bin() -> std::ffi::OsString {
    std::env::var_os("ROOTFENCE_BENCH_BIN")
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_rootfence").into())
}

/// The minimal server under `rootfence run` with one root, in the small
/// environment a host gives its servers (cargo's variables would make
/// rootfence send the host a note about them, a line the pipelined
/// counts would take for an answer).
pub fn fenced(root: &Path, extra: &[&str]) -> Command {
    let mut c = Command::new(rootfence_bin());
    c.env_clear();
    for key in ["PATH", "HOME"] {
        if let Some(v) = std::env::var_os(key) {
            c.env(key, v);
        }
    }
    c.arg("run")
        .args(extra)
        .arg("--root")
        .arg(root)
        .arg("--")
        .arg(std::env::current_exe().unwrap());
    c
}

/// Argument that makes a bench binary the byte relay in front of the
/// minimal server.
pub const RELAY_ARG: &str = "--rootfence-bench-relay";

/// The minimal server behind a byte relay: a process that starts it on
/// pipes and copies bytes both ways between its own stdio and the
/// server's, parsing nothing (`std::io::copy`, which splices between
/// pipes on Linux). The floor of any stdio relay: what a relay costs
/// before it reads a single message. Start it with [`Peer::spawn_as_is`].
pub fn byte_relayed() -> Command {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.arg(RELAY_ARG);
    c
}

/// The byte relay ([`byte_relayed`]): run if asked to; true if this
/// process was the relay (the caller then returns).
pub fn maybe_relay() -> bool {
    if !std::env::args().any(|a| a == RELAY_ARG) {
        return false;
    }
    let mut server = Command::new(std::env::current_exe().unwrap())
        .arg(SERVER_ARG)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut to_server = server.stdin.take().unwrap();
    let mut from_server = server.stdout.take().unwrap();
    // The same pipe size as the host's and rootfence's pipes.
    let _ = rustix::pipe::fcntl_setpipe_size(to_server.as_fd(), HOST_PIPE);
    let _ = rustix::pipe::fcntl_setpipe_size(from_server.as_fd(), HOST_PIPE);
    let up = std::thread::spawn(move || {
        let _ = std::io::copy(&mut std::io::stdin().lock(), &mut to_server);
        // Host EOF: the server's stdin closes when `to_server` drops.
    });
    let _ = std::io::copy(&mut from_server, &mut std::io::stdout().lock());
    let _ = up.join();
    let _ = server.wait();
    true
}

/// The server processes `pid` has started and not reaped (its children).
pub fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in tasks.flatten() {
            let list = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
            out.extend(
                list.split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            );
        }
    }
    out
}

/// A thread that returns the instant process `pid` exits (seen through a
/// pidfd, so a recycled pid cannot be mistaken for it).
pub fn exit_watch(pid: u32) -> std::thread::JoinHandle<Instant> {
    let raw = i32::try_from(pid).unwrap();
    let fd = rustix::process::pidfd_open(
        rustix::process::Pid::from_raw(raw).unwrap(),
        rustix::process::PidfdFlags::empty(),
    )
    .expect("pidfd_open");
    std::thread::spawn(move || {
        use std::os::fd::AsRawFd;
        let mut pfd = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, for the duration of the call.
        unsafe { libc::poll(&mut pfd, 1, -1) };
        Instant::now()
    })
}

/// The `p` quantile of `v` (sorts it).
pub fn percentile(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

/// `n` sequential ping round trips (after 200 warm-up ones).
pub fn ping_rtts(p: &mut Peer, n: usize) -> Vec<Duration> {
    let mut v = Vec::with_capacity(n);
    for i in 0..n + 200 {
        let t = Instant::now();
        p.send(&format!(r#"{{"jsonrpc":"2.0","id":{i},"method":"ping"}}"#));
        p.recv();
        if i >= 200 {
            v.push(t.elapsed());
        }
    }
    v
}

/// `tools/call` requests carrying `size` bytes of base64-like data.
pub fn calls(n: usize, size: usize) -> Vec<Vec<u8>> {
    let payload: String = "QUJD".repeat(size / 4);
    (0..n)
        .map(|i| {
            format!(
                r#"{{"jsonrpc":"2.0","id":{i},"method":"tools/call","params":{{"name":"echo","arguments":{{"data":"{payload}"}}}}}}"#
            )
            .into_bytes()
        })
        .collect()
}

/// Pipelined round trips: a writer thread sends every request while this
/// thread reads the answers (counting lines, without parsing them), as a
/// busy host does. Returns the elapsed time, the bytes moved (requests
/// plus answers) and the peer's peak RSS in KiB.
pub fn pipelined(p: Peer, msgs: &[Vec<u8>]) -> (Duration, usize, u64) {
    let n = msgs.len();
    let sent: usize = msgs.iter().map(|m| m.len() + 1).sum();
    let Peer {
        child,
        mut w,
        mut r,
        buf,
    } = p;
    let mut blob = Vec::with_capacity(sent);
    for m in msgs {
        blob.extend_from_slice(m);
        blob.push(b'\n');
    }
    let t = Instant::now();
    let (w, received) = std::thread::scope(|s| {
        let writer = s.spawn(move || {
            w.write_all(&blob).unwrap();
            w.flush().unwrap();
            w
        });
        let mut received = 0usize;
        let mut lines = 0usize;
        let mut chunk = vec![0u8; 1 << 20];
        while lines < n {
            let k = r.read(&mut chunk).unwrap();
            assert!(k > 0, "peer closed after {lines} answers");
            received += k;
            lines += memchr::memchr_iter(b'\n', &chunk[..k]).count();
        }
        (writer.join().unwrap(), received)
    });
    let el = t.elapsed();
    let peak = peak_rss_kib(child.id());
    Peer { child, w, r, buf }.close();
    (el, sent + received, peak)
}

/// The peak resident set of a process (VmHWM), in KiB.
pub fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Debian's bubblewrap, if installed.
pub fn bwrap() -> Option<&'static str> {
    ["/usr/bin/bwrap", "/bin/bwrap"]
        .into_iter()
        .find(|p| Path::new(p).exists())
}

/// The bubblewrap launch compared against: `/` read-only, a minimal
/// `/dev` and `/proc`, then `/bin/true`.
pub fn bwrap_true(bwrap: &str) -> Command {
    let mut c = Command::new(bwrap);
    c.args([
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "/bin/true",
    ]);
    c
}

/// The bubblewrap launch with every namespace of its own, as a sandbox
/// of servers would run it: `--unshare-all --die-with-parent`, `/`
/// read-only, a minimal `/dev` and `/proc`, a private `/tmp`.
pub fn bwrap_unshared_true(bwrap: &str) -> Command {
    let mut c = Command::new(bwrap);
    c.args([
        "--unshare-all",
        "--die-with-parent",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
        "/bin/true",
    ]);
    c
}

/// `n` fresh directories, as read-write command-line roots.
pub fn root_dirs(n: usize) -> (tempfile::TempDir, Vec<rootfence::roots::RootInput>) {
    use rootfence::roots::{Access, RootInput};
    let dir = tempfile::tempdir().unwrap();
    let inputs = (0..n)
        .map(|i| {
            let p = dir.path().join(format!("root-{i:04}"));
            std::fs::create_dir(&p).unwrap();
            RootInput::command_line(p.to_str().unwrap(), Access::ReadWrite)
        })
        .collect();
    (dir, inputs)
}
