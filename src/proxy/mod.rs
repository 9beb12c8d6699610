//! The MCP stdio proxy: rootfence between the host (its own stdin/stdout)
//! and the sandboxed server.
//!
//! - [`framing`]: bounded newline-delimited frames;
//! - [`message`]: the JSON-RPC envelope, id edits, error replies;
//! - [`server`]: a server generation's process and tasks;
//! - [`session`]: the session core (target, lifecycle, ids, faults), with
//!   no I/O: events in, actions out;
//! - [`planner`]: the target's plans, the filesystem read off the loop;
//! - [`guard`]: the policy on sampling and elicitation requests.
//!
//! [`run`] is the loop that feeds the core its events and carries out its
//! actions (writing lines, planning and launching off the loop, stopping
//! generations).

pub mod canonical;
mod chores;
pub mod flow;
pub mod framing;
pub mod guard;
pub mod id;
pub mod init_cache;
pub mod bigwrite;
mod launcher;
mod launching;
pub mod message;
pub mod planner;
pub mod scan;
pub mod server;
pub mod session;
pub mod sniff;
pub mod stdio;

use std::collections::HashMap;
use std::time::Instant;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;

pub use launcher::SandboxLauncher;
pub use server::{LaunchError, Launcher, ServerProcess};
pub use session::{
    Action, Change, Ending, Event, Gone, LaunchFailure, ServerEnd, Session, SessionConfig,
    SessionError,
};

use server::Generation;
use session::ServerEvent;
use session::{GenId, Planned};

/// How long the relay keeps polling, without sleeping, after a message
/// went through: the answer (or the next message) usually comes within
/// that time, and finding it without a sleep and a wake-up saves the
/// wake-up latency of an idle CPU (tens of microseconds) twice per round
/// trip. Costs at most this much CPU time per burst of traffic, nothing
/// when idle.
pub const SPIN: std::time::Duration = std::time::Duration::from_micros(200);

/// At most this many more messages already queued on the same side are
/// handled in one turn of the loop after the first (one clock read, one
/// `select!`): bounded so neither side waits long behind the other.
const DRAIN: usize = 32;

/// After this long without traffic, the spare buffers of big lines are
/// given back to the system, so an idle relay returns to its idle size.
pub const IDLE_RELEASE: std::time::Duration = std::time::Duration::from_secs(1);

/// What the loop owns to carry out the core's actions.
struct Effects {
    /// The launcher, on a task of its own.
    launcher: launching::Launching,
    gens: HashMap<GenId, Generation>,
    host_out: framing::LineSender,
    /// Woken when a writer stops being backed up.
    drained: framing::Drained,
    server_events: flow::Sender<ServerEvent>,
    max_line: usize,
    /// Watching the roots and remembering handshakes, on a task of their
    /// own.
    chores: chores::Chores,
    /// Where plans made off the loop come back.
    plans: mpsc::UnboundedSender<Box<Planned>>,
}

impl Effects {
    /// Carry out every action the session has decided, including those
    /// that the reports of launches lead to.
    fn apply(&mut self, session: &mut Session, buf: &mut Vec<Action>) {
        loop {
            session.take_actions(buf);
            if buf.is_empty() {
                return;
            }
            for a in buf.drain(..) {
                match a {
                    Action::ToHost(line) => {
                        self.host_out.send(line);
                    }
                    Action::ToServer(g, line) => {
                        // A generation whose writer is gone reports its
                        // exit; the line is not needed then.
                        if let Some(h) = self.gens.get(&g) {
                            h.send(line);
                        }
                    }
                    Action::Launch(g, plan) => {
                        // Off the loop: reported by `launched`.
                        if let Err(e) = self.launcher.launch(g, plan) {
                            session.on_event(Event::Launched(g, Err(e)), Instant::now());
                        }
                    }
                    Action::Plan(request) => {
                        // Off the loop: a root that does not answer stalls
                        // this plan only. One no longer asked for when it
                        // comes is dropped by the session.
                        let plans = self.plans.clone();
                        tokio::task::spawn_blocking(move || {
                            let planned = planner::plan(&request);
                            // The session may be over: nobody waits then.
                            let _ = plans.send(Box::new(planned));
                        });
                    }
                    Action::Stop(g, how) => {
                        if let Some(h) = self.gens.get_mut(&g) {
                            h.stop(how);
                        }
                    }
                    Action::WatchRoots(paths) => self.chores.watch(paths),
                    Action::ServerStarted(_) => self.launcher.started(),
                    Action::RememberInit(init) => self.chores.remember(init),
                }
            }
        }
    }

    /// A launch came back: the generation's tasks are started and the
    /// session told.
    fn launched(&mut self, session: &mut Session, (g, outcome): launching::Launched) {
        let report = outcome
            .and_then(|p| {
                Generation::start(
                    g,
                    p,
                    self.max_line,
                    self.server_events.clone(),
                    self.drained.clone(),
                )
            })
            .map(|h| {
                let pid = h.pid.unwrap_or(0);
                self.gens.insert(g, h);
                pid
            });
        session.on_event(Event::Launched(g, report), Instant::now());
    }

    fn server_backed_up(&self) -> bool {
        self.gens.values().any(Generation::backed_up)
    }
}

/// The task writing the session's lines to the host (big ones through
/// `big`, a second handle on the same pipe, when there is one).
fn spawn_host_writer<W>(
    host_out: W,
    big: Option<bigwrite::BigWriter>,
    mut lines: framing::LineQueue,
) -> tokio::task::JoinHandle<()>
where
    W: AsyncWrite + Unpin + Send + 'static,
{
    tokio::spawn(async move {
        let mut w = host_out;
        if let Err(e) = framing::write_all_lines(&mut w, &mut lines, big.as_ref()).await {
            tracing::warn!("host stdout closed: {e}");
        }
    })
}

/// The task reading the host's lines (lines over `max` refused without
/// being kept) into `events`, no further ahead of the session than the
/// channel's budget.
fn spawn_host_reader<R>(
    host_in: R,
    max: usize,
    events: flow::Sender<Event>,
) -> tokio::task::JoinHandle<()>
where
    R: AsyncRead + Unpin + Send + 'static,
{
    tokio::spawn(async move {
        let mut r = framing::LineReader::new(host_in, max);
        loop {
            events.ready().await;
            let ev = match r.next().await {
                Ok(Some(frame)) => Event::Host(frame),
                Ok(None) => Event::HostEof,
                Err(e) => {
                    tracing::warn!("reading the host's stdin: {e}");
                    Event::HostEof
                }
            };
            let eof = matches!(ev, Event::HostEof);
            let held = match &ev {
                Event::Host(f) => f.held(),
                _ => 0,
            };
            if events.send(ev, held).await.is_err() || eof {
                break;
            }
        }
    })
}

/// Run a session between `host_in`/`host_out` and servers launched by
/// `launcher`, until the host closes its side or the session ends.
/// `changes` carries what the embedder (or a watcher) says changed: a
/// policy edit, roots on disk.
pub async fn run<L, R, W>(
    config: SessionConfig,
    launcher: L,
    host_in: R,
    host_out: W,
    changes: mpsc::UnboundedReceiver<Change>,
) -> Result<Ending, SessionError>
where
    L: Launcher,
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    run_big_writes(config, launcher, host_in, host_out, None, changes).await
}

/// [`run`], with big lines to the host written from another thread through
/// `host_big` (a second handle on the pipe `host_out` writes to, which must
/// not buffer: see [`bigwrite`]).
pub async fn run_big_writes<L, R, W>(
    mut config: SessionConfig,
    launcher: L,
    host_in: R,
    host_out: W,
    host_big: Option<bigwrite::BigWriter>,
    mut changes: mpsc::UnboundedReceiver<Change>,
) -> Result<Ending, SessionError>
where
    L: Launcher,
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let max = usize::try_from(config.policy.raw.limits.max_message_bytes).unwrap_or(usize::MAX);
    let grace = std::time::Duration::from_millis(config.policy.raw.limits.shutdown_grace_ms);
    let chores = chores::Chores::start(config.roots_observer.take(), config.remember.take());
    let drained = framing::Drained::default();
    let (out_tx, out_rx) = framing::line_queue(drained.clone());
    let writer = spawn_host_writer(host_out, host_big, out_rx);
    // Bounded: a server that writes faster than the host reads is held
    // back by its own pipe.
    let (srv_tx, mut srv_rx) = flow::channel(16, flow::BUDGET);
    let (host_tx, mut host_rx) = flow::channel::<Event>(64, flow::BUDGET);
    let reader = spawn_host_reader(host_in, max, host_tx);

    // The first plan, off the loop's thread like every other.
    let (spec, first) = planner::first_off_loop(&config).await?;
    let mut session = Session::new(config, spec, first);
    let (plans_tx, mut plans_rx) = mpsc::unbounded_channel();
    let (launcher, mut launched_rx) = launching::Launching::start(launcher);
    let mut fx = Effects {
        launcher,
        gens: HashMap::new(),
        host_out: out_tx,
        drained: drained.clone(),
        server_events: srv_tx,
        max_line: max,
        chores,
        plans: plans_tx,
    };
    let mut actions = Vec::new();
    let mut host_open = true;
    let mut extra_open = true;
    let mut last_traffic = Instant::now();
    while !session.finished() {
        let deadline = session.next_deadline().map(tokio::time::Instant::from_std);
        // While a writer is backed up, one side is not read until the
        // writer catches up (it wakes `drained`; the short sleep is only a
        // safety net).
        let host_backed_up = fx.host_out.backed_up();
        let server_backed_up = fx.server_backed_up();
        let paused = host_backed_up || server_backed_up;
        // Spin only when nothing is queued: a turn that has an event to
        // handle does not yield the CPU (a system call and maybe a switch
        // to another process) first.
        let queued = (host_open && !host_rx.is_empty()) || !srv_rx.is_empty();
        let spinning = !paused && !queued && last_traffic.elapsed() < SPIN;
        tokio::select! {
            () = drained.notified(), if paused => {}
            () = sleep(std::time::Duration::from_millis(10)), if paused => {}
            () = spin(), if spinning => {}
            () = sleep(IDLE_RELEASE), if !spinning && framing::spares_held() => {
                framing::release_spares();
            }
            ev = host_rx.recv(), if host_open && !server_backed_up => {
                last_traffic = Instant::now();
                match ev {
                    Some(ev) => {
                        session.on_event(ev, last_traffic);
                        // What else the host has sent, while the server's
                        // side is not backed up.
                        for _ in 0..DRAIN {
                            fx.apply(&mut session, &mut actions);
                            if fx.server_backed_up() || session.finished() {
                                break;
                            }
                            let Some(ev) = host_rx.try_recv() else { break };
                            session.on_event(ev, last_traffic);
                        }
                    }
                    None => { host_open = false; session.on_event(Event::HostEof, last_traffic); }
                }
            }
            Some(ev) = srv_rx.recv(), if !host_backed_up || session.ending().is_some() => {
                last_traffic = Instant::now();
                // What else the servers have sent, while the host's side is
                // not backed up: each event taken is handled (one taken
                // and then left would be lost).
                let mut next = Some(ev);
                let mut handled = 0;
                while let Some(ev) = next.take() {
                    if let ServerEvent::Exited(g, _) = &ev {
                        fx.gens.remove(g);
                    }
                    session.on_event(Event::Server(ev), last_traffic);
                    fx.apply(&mut session, &mut actions);
                    handled += 1;
                    if handled > DRAIN
                        || (fx.host_out.backed_up() && session.ending().is_none())
                        || session.finished()
                    {
                        break;
                    }
                    next = srv_rx.try_recv();
                }
            }
            Some(planned) = plans_rx.recv() => session.on_event(Event::Planned(planned), Instant::now()),
            Some(launched) = launched_rx.recv() => fx.launched(&mut session, launched),
            change = changes.recv(), if extra_open => match change {
                Some(change) => session.on_event(change.into(), Instant::now()),
                None => extra_open = false,
            },
            () = sleep_until(deadline), if deadline.is_some() => session.on_timer(Instant::now()),
        }
        fx.apply(&mut session, &mut actions);
    }
    let ending = session.ending().cloned().unwrap_or(Ending::HostClosed);
    reader.abort();
    drop(session);
    let Effects { chores, .. } = fx;
    chores.finish(grace).await;
    // What is left for the host gets the shutdown grace to be read: a
    // host that closed its side and waits for rootfence's exit without
    // reading would otherwise wait forever.
    if tokio::time::timeout(grace, writer).await.is_err() {
        tracing::warn!(
            "the host did not read what was left for it within limits.shutdown_grace_ms = {} ms: exiting without it",
            grace.as_millis()
        );
    }
    Ok(ending)
}

/// One turn of the spin: let another process on this CPU run (the peer
/// this relay waits for may be one), then let the runtime poll its
/// descriptors without blocking.
async fn spin() {
    std::thread::yield_now();
    tokio::task::yield_now().await;
}

/// `tokio::time::sleep`, but the timer (and its clock read) is made only
/// when first polled: `select!` builds every branch's future on every turn,
/// and polls only the enabled ones.
async fn sleep(d: std::time::Duration) {
    tokio::time::sleep(d).await;
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}
