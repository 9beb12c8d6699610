//! A local web site for the network-by-domain tests: `tests/peers/site.py`
//! serving plain HTTP and TLS on 127.0.0.2, with a certificate for the
//! names a test gives it (its CA written where the confined clients can
//! read it), and a log of every request it received, to judge from
//! outside what reached it.
//!
//! Names reach the site through the policy's `[network] hosts` pins
//! (`site.test = "127.0.0.2"`): rootfence's proxy resolves pinned names
//! itself, so no DNS or `/etc/hosts` entry is involved, and the tests run
//! the same as root and as any user.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};

use serde_json::Value;

/// The address the site listens on.
pub const ADDR: &str = "127.0.0.2";

/// tests/peers.
pub fn peers() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers")
}

/// A file `tests/peers/install.sh` makes, or a failure saying to run it.
pub fn installed(rel: &str) -> PathBuf {
    let p = peers().join(rel);
    assert!(
        p.exists(),
        "{} is missing: run tests/peers/install.sh (scripts/test.sh does)",
        p.display()
    );
    p
}

/// A running site.
pub struct Site {
    child: Child,
    _stdin: ChildStdin,
    /// Its plain HTTP port.
    pub http: u16,
    /// Its TLS port.
    pub https: u16,
    /// The CA certificate the clients trust.
    pub ca: PathBuf,
    /// The directory it serves.
    pub dir: PathBuf,
    log: PathBuf,
}

impl Site {
    /// Start a site serving `dir` (created), with its CA written into
    /// `certdir` and a certificate for `names`.
    pub fn start(dir: &Path, certdir: &Path, names: &[&str]) -> Site {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::create_dir_all(certdir).unwrap();
        let log = certdir.join("site-requests.jsonl");
        std::fs::write(&log, "").unwrap();
        let mut child = Command::new(installed(".venv/bin/python"))
            .arg(peers().join("site.py"))
            .arg(ADDR)
            .arg(dir)
            .arg(certdir)
            .arg(&log)
            .args(names)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start tests/peers/site.py");
        let stdin = child.stdin.take().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let v: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("site.py did not start ({e}): {line:?}"));
        Site {
            child,
            _stdin: stdin,
            http: v["http"].as_u64().unwrap() as u16,
            https: v["https"].as_u64().unwrap() as u16,
            ca: PathBuf::from(v["ca"].as_str().unwrap()),
            dir: dir.to_path_buf(),
            log,
        }
    }

    /// Every request it received so far.
    pub fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Whether a request for `path` reached it.
    pub fn saw(&self, path: &str) -> bool {
        self.requests().iter().any(|r| r["path"] == path)
    }

    /// The `Host` headers of the requests for `path`.
    pub fn hosts_of(&self, path: &str) -> Vec<String> {
        self.requests()
            .iter()
            .filter(|r| r["path"] == path)
            .filter_map(|r| r["host"].as_str().map(str::to_string))
            .collect()
    }

    /// Python lines (after the probes' prelude) making the check `check`:
    /// a socket connected to rootfence's network proxy (its port from
    /// `HTTP_PROXY`) asks it for `path` on `name` over plain HTTP, and gets
    /// 200. Neither a backslash nor a double quote, so that the lines stand
    /// as they are in a shell's double quotes too.
    pub fn via_proxy_check(&self, check: &str, name: &str, path: &str) -> String {
        format!(
            "def {check}():\n\
             \x20   port = int(os.environ['HTTP_PROXY'].rsplit(':', 1)[1])\n\
             \x20   s = socket.create_connection(('127.0.0.1', port), timeout=5)\n\
             \x20   crlf = bytes([13, 10])\n\
             \x20   s.sendall(b'GET http://{name}:{h}{path} HTTP/1.0' + crlf + b'Host: {name}:{h}' + crlf + crlf)\n\
             \x20   if b' 200 ' not in s.recv(100):\n\
             \x20       raise OSError(errno.EPROTO, 'not answered 200')\n\
             check('{check}', {check})\n",
            h = self.http
        )
    }

    /// A policy body allowing `names` (each pinned to the site) on both
    /// of its ports, plus `extra` entries.
    pub fn policy(&self, names: &[&str], extra: &[&str]) -> String {
        let mut entries: Vec<String> = names
            .iter()
            .flat_map(|n| [format!("{n}:{}", self.http), format!("{n}:{}", self.https)])
            .collect();
        entries.extend(extra.iter().map(|e| e.to_string()));
        let list = entries
            .iter()
            .map(|e| format!("{e:?}"))
            .collect::<Vec<_>>()
            .join(", ");
        let pins = names
            .iter()
            .map(|n| format!("{n:?} = {ADDR:?}"))
            .collect::<Vec<_>>()
            .join(", ");
        format!("version = 1\n[network]\nallow_domains = [{list}]\nhosts = {{ {pins} }}\n")
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A plain TCP service on this machine's loopback (outside every
/// sandbox): it answers every connection with a small HTTP response and
/// counts them.
pub struct LoopbackService {
    /// Its port on 127.0.0.1.
    pub port: u16,
    count: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl LoopbackService {
    /// Start one on `127.0.0.1:0`.
    pub fn start() -> LoopbackService {
        use std::io::{Read, Write};
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let count = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let c = count.clone();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { continue };
                c.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf);
                let _ =
                    s.write_all(b"HTTP/1.0 200 OK\r\nContent-Length: 17\r\n\r\nhost loopback ok\n");
            }
        });
        LoopbackService { port, count }
    }

    /// Connections it accepted so far.
    pub fn connections(&self) -> usize {
        self.count.load(std::sync::atomic::Ordering::SeqCst)
    }
}
