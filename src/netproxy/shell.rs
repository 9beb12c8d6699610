//! The proxy's shell: accepts connections on a listener, runs each one's
//! [`Conn`] and carries out its actions with tokio sockets.
//!
//! Every proxy runs on one process-wide runtime (one worker thread, and
//! the blocking pool for name resolution). A [`Proxy`] handle stops its
//! listener and every connection it opened when dropped.

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use super::body::Body;
use super::conn::{Action, Config, Conn, Decision, Event, Judged, Unanswered};
use super::rule::Reach;
use crate::audit::{AuditLog, now_rfc3339};

/// How long a client has to send its request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a name may take to resolve.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(15);
/// How long one address may take to answer a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// Bytes copied at once each way through a tunnel.
const SPLICE_BUF: usize = 64 * 1024;
/// Connections one proxy serves at once (each holds two of rootfence's
/// descriptors); more wait in the listener's backlog.
const MAX_CONNECTIONS: usize = 256;

/// The runtime every proxy runs on.
fn runtime() -> std::io::Result<&'static tokio::runtime::Runtime> {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    if let Some(rt) = RT.get() {
        return Ok(rt);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("rootfence-netproxy")
        .enable_io()
        .enable_time()
        .build()?;
    // Another thread may have won the race: its runtime is kept, ours
    // dropped.
    let _ = RT.set(rt);
    RT.get()
        .ok_or_else(|| std::io::Error::other("the proxy runtime is gone"))
}

/// Most distinct refusals told to the host in one proxy's life.
const MAX_NOTES: usize = 64;

/// Where decisions go: the log (target `audit`), the audit file, the
/// list of what was asked for (for `learn`), and a note for the host per
/// refusal (once per host and reason).
#[derive(Debug)]
struct Sink {
    audit: Mutex<AuditLog>,
    judged: Mutex<Vec<Judged>>,
    notes: Mutex<Notes>,
}

/// The refusals told so far, and where notes go.
#[derive(Debug)]
struct Notes {
    tx: tokio::sync::mpsc::UnboundedSender<String>,
    said: std::collections::HashSet<(String, String)>,
}

/// One audit file line.
#[derive(serde::Serialize)]
struct Line<'a> {
    ts: String,
    kind: &'static str,
    #[serde(flatten)]
    judged: &'a Judged,
}

impl Sink {
    fn record(&self, j: Judged) {
        let target = match (&j.target, &j.asked) {
            (Some(t), _) => t.to_string(),
            (None, Some(a)) => format!("{a:?}"),
            (None, None) => "?".into(),
        };
        match j.decision {
            Decision::Allowed => tracing::info!(
                target: "audit",
                "network: {} {} allowed ({}), connected to {}",
                j.method,
                target,
                j.rule.as_deref().unwrap_or("-"),
                j.address.map(|a| a.to_string()).unwrap_or_default()
            ),
            Decision::Refused | Decision::Failed => tracing::warn!(
                target: "audit",
                "network: {} {} {}: {}",
                j.method,
                target,
                j.decision.as_str(),
                j.reason.as_deref().unwrap_or("-")
            ),
        }
        if j.decision == Decision::Refused
            && let Ok(mut n) = self.notes.lock()
        {
            let reason = j.reason.clone().unwrap_or_default();
            let host = j
                .target
                .as_ref()
                .map_or_else(|| target.clone(), |t| t.host.to_string());
            if n.said.len() < MAX_NOTES && n.said.insert((host, reason.clone())) {
                let _ = n.tx.send(format!(
                    "the network proxy refused {} {target}: {reason}",
                    j.method
                ));
            }
        }
        if let Ok(mut a) = self.audit.lock() {
            a.append(&Line {
                ts: now_rfc3339(),
                kind: "network",
                judged: &j,
            });
        }
        if let Ok(mut l) = self.judged.lock()
            && l.len() < 10_000
        {
            l.push(j);
        }
    }
}

/// A running proxy. Dropping it stops the listener and every connection.
#[derive(Debug)]
pub struct Proxy {
    task: JoinHandle<()>,
    sink: Arc<Sink>,
    local: SocketAddr,
    notes: Mutex<Option<tokio::sync::mpsc::UnboundedReceiver<String>>>,
}

impl Proxy {
    /// Serve `listener` (already listening; any network namespace) under
    /// `config`, appending decisions to `audit` when set.
    pub fn start(
        listener: std::net::TcpListener,
        config: Config,
        audit: Option<PathBuf>,
    ) -> std::io::Result<Proxy> {
        let rt = runtime()?;
        listener.set_nonblocking(true)?;
        let local = listener.local_addr()?;
        let log = match &audit {
            None => AuditLog::tracing_only(),
            Some(p) => AuditLog::to_file(p, "network decisions"),
        };
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let sink = Arc::new(Sink {
            audit: Mutex::new(log),
            judged: Mutex::new(Vec::new()),
            notes: Mutex::new(Notes {
                tx,
                said: std::collections::HashSet::new(),
            }),
        });
        let config = Arc::new(config);
        let s = sink.clone();
        let task = {
            let _guard = rt.enter();
            let listener = TcpListener::from_std(listener)?;
            rt.spawn(accept(listener, config, s))
        };
        Ok(Proxy {
            task,
            sink,
            local,
            notes: Mutex::new(Some(rx)),
        })
    }

    /// The address it listens on (in its network namespace).
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The refusals to tell the host, each once per host and reason (at
    /// most 64 in all), as sentences (`the network proxy refused GET
    /// example.com:80: not in [network] allow_domains`); `None` once taken.
    pub fn take_notes(&self) -> Option<tokio::sync::mpsc::UnboundedReceiver<String>> {
        self.notes.lock().ok()?.take()
    }

    /// Every decision so far.
    pub fn judged(&self) -> Vec<Judged> {
        self.sink
            .judged
            .lock()
            .map(|l| l.clone())
            .unwrap_or_default()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        // The accept task owns the connections' set: aborting it aborts
        // them all.
        self.task.abort();
    }
}

async fn accept(listener: TcpListener, config: Arc<Config>, sink: Arc<Sink>) {
    let mut conns = tokio::task::JoinSet::new();
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        tokio::select! {
            r = listener.accept() => match r {
                Ok((s, _)) => {
                    let _ = s.set_nodelay(true);
                    let (config, sink) = (config.clone(), sink.clone());
                    conns.spawn(async move {
                        serve(s, config, sink).await;
                        drop(slot);
                    });
                }
                Err(e) => {
                    // Out of descriptors, or the namespace torn down:
                    // wait a moment rather than spin.
                    tracing::debug!("the network proxy cannot accept: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}

async fn resolve(name: String) -> Result<Vec<IpAddr>, Unanswered> {
    let lookup = tokio::net::lookup_host((name.as_str(), 0));
    match tokio::time::timeout(RESOLVE_TIMEOUT, lookup).await {
        Ok(Ok(addrs)) => Ok(addrs.map(|a| a.ip()).collect()),
        Ok(Err(e)) => Err(e.into()),
        Err(_) => Err(Unanswered::Timeout(RESOLVE_TIMEOUT)),
    }
}

async fn connect(addr: SocketAddr) -> Result<TcpStream, Unanswered> {
    match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
        Ok(Ok(s)) => {
            let _ = s.set_nodelay(true);
            Ok(s)
        }
        Ok(Err(e)) => Err(e.into()),
        Err(_) => Err(Unanswered::Timeout(CONNECT_TIMEOUT)),
    }
}

/// The two sockets of a connection: whole, or (once the client's request
/// body streams to the upstream on its own) the halves still in use.
enum Sockets {
    Whole {
        client: TcpStream,
        upstream: Option<TcpStream>,
    },
    Streaming {
        client: OwnedWriteHalf,
        upstream: OwnedReadHalf,
        /// The body's copy; aborted when dropped.
        _body: tokio::task::JoinSet<()>,
    },
}

impl Sockets {
    async fn write_client(&mut self, b: &[u8]) -> std::io::Result<()> {
        match self {
            Sockets::Whole { client, .. } => client.write_all(b).await,
            Sockets::Streaming { client, .. } => client.write_all(b).await,
        }
    }

    /// Write to the upstream (connected, body not streaming); `None`:
    /// there is none to write to.
    async fn write_upstream(&mut self, b: &[u8]) -> Option<std::io::Result<()>> {
        match self {
            Sockets::Whole {
                upstream: Some(up), ..
            } => Some(up.write_all(b).await),
            _ => None,
        }
    }

    /// From now on the client's bytes go to the upstream as they come,
    /// up to the end of the request's body as `body` finds it (then the
    /// client is no longer read: what follows is dropped), while the
    /// response is read here.
    fn stream_body(self, mut body: Body) -> Option<Sockets> {
        let Sockets::Whole {
            client,
            upstream: Some(up),
        } = self
        else {
            return None;
        };
        let (mut from, to) = client.into_split();
        let (up_r, mut up_w) = up.into_split();
        let mut task = tokio::task::JoinSet::new();
        task.spawn(async move {
            let mut buf = vec![0u8; SPLICE_BUF];
            while !body.done() {
                let n = match from.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                let Ok(keep) = body.take(&buf[..n]) else {
                    // A broken chunked body: nothing more is forwarded.
                    break;
                };
                if up_w.write_all(&buf[..keep]).await.is_err() {
                    break;
                }
            }
            // The upstream's side stays open (a half-close can end the
            // response early) until the connection is over.
            std::future::pending::<()>().await;
            drop(up_w);
        });
        Some(Sockets::Streaming {
            client: to,
            upstream: up_r,
            _body: task,
        })
    }

    /// Read from the upstream; `None`: there is no upstream.
    async fn read_upstream(&mut self, buf: &mut [u8]) -> Option<std::io::Result<usize>> {
        match self {
            Sockets::Whole {
                upstream: Some(up), ..
            } => Some(up.read(buf).await),
            Sockets::Streaming { upstream, .. } => Some(upstream.read(buf).await),
            Sockets::Whole { upstream: None, .. } => None,
        }
    }

    /// Copy both ways until either side closes.
    async fn splice(&mut self) {
        match self {
            Sockets::Whole {
                client,
                upstream: Some(up),
            } => {
                let _ =
                    tokio::io::copy_bidirectional_with_sizes(client, up, SPLICE_BUF, SPLICE_BUF)
                        .await;
            }
            Sockets::Streaming {
                client, upstream, ..
            } => {
                // The response, until the upstream closes (it was asked
                // to); then the body's copy ends too.
                let mut r = tokio::io::BufReader::with_capacity(SPLICE_BUF, upstream);
                let _ = tokio::io::copy_buf(&mut r, client).await;
                let _ = client.shutdown().await;
            }
            Sockets::Whole { upstream: None, .. } => {}
        }
    }

    async fn close(&mut self) {
        let _ = match self {
            Sockets::Whole { client, .. } => client.shutdown().await,
            Sockets::Streaming { client, .. } => client.shutdown().await,
        };
    }
}

/// Run one connection: feed its [`Conn`] and carry out what it asks.
async fn serve(client: TcpStream, config: Arc<Config>, sink: Arc<Sink>) {
    let mut conn = Conn::new(config);
    let mut socks = Sockets::Whole {
        client,
        upstream: None,
    };
    let mut todo: VecDeque<Action> = VecDeque::new();
    let mut buf = vec![0u8; 16 * 1024];
    let deadline = tokio::time::Instant::now() + HEAD_TIMEOUT;
    loop {
        while let Some(a) = todo.pop_front() {
            match a {
                Action::Resolve(name) => {
                    let r = resolve(name).await;
                    todo.extend(conn.on(Event::Resolved(r)));
                }
                Action::Connect(addr, Reach::Global) if super::local::is_own(addr.ip()) => {
                    todo.extend(conn.on(Event::OwnAddress));
                }
                Action::Connect(addr, _) => match connect(addr).await {
                    Ok(s) => {
                        if let Sockets::Whole { upstream, .. } = &mut socks {
                            *upstream = Some(s);
                        }
                        todo.extend(conn.on(Event::Connected));
                    }
                    Err(e) => todo.extend(conn.on(Event::ConnectFailed(e))),
                },
                Action::ToClient(b) => {
                    if socks.write_client(&b).await.is_err() {
                        return;
                    }
                }
                Action::ToUpstream(b) => match socks.write_upstream(&b).await {
                    None => return,
                    Some(Err(_)) => todo.extend(conn.on(Event::UpstreamGone)),
                    Some(Ok(())) => {}
                },
                Action::StreamBody(body) => match socks.stream_body(body) {
                    Some(streaming) => socks = streaming,
                    None => return,
                },
                Action::ReadUpstream => match socks.read_upstream(&mut buf).await {
                    None => return,
                    Some(Ok(0) | Err(_)) => todo.extend(conn.on(Event::UpstreamGone)),
                    Some(Ok(n)) => todo.extend(conn.on(Event::Upstream(&buf[..n]))),
                },
                Action::Splice => return socks.splice().await,
                Action::Close => return socks.close().await,
                Action::Audit(j) => sink.record(j),
            }
        }
        if !conn.wants_client() {
            return;
        }
        let Sockets::Whole { client, .. } = &mut socks else {
            return;
        };
        match tokio::time::timeout_at(deadline, client.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => return,
            Ok(Ok(n)) => todo.extend(conn.on(Event::Client(&buf[..n]))),
        }
    }
}
