//! The MCP stdio proxy: rootfence between the host (its own stdin/stdout)
//! and the sandboxed server.
//!
//! - [`framing`]: bounded newline-delimited frames;
//! - [`message`]: the JSON-RPC envelope, id edits, error replies;
//! - [`server`]: a server generation's process and tasks;
//! - [`session`]: the state machine (roots, rebuilds, ids, faults);
//! - [`guard`]: the policy on sampling and elicitation requests.

pub mod flow;
pub mod framing;
pub mod guard;
pub mod message;
pub mod scan;
pub mod server;
pub mod session;
pub mod stdio;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;

pub use server::{Launcher, ServerProcess};
pub use session::{Ending, Event, Session, SessionConfig};

/// How long the relay keeps polling, without sleeping, after a message
/// went through: the answer (or the next message) usually comes within
/// that time, and finding it without a sleep and a wake-up saves the
/// wake-up latency of an idle CPU (tens of microseconds) twice per round
/// trip. Costs at most this much CPU time per burst of traffic, nothing
/// when idle.
pub const SPIN: std::time::Duration = std::time::Duration::from_micros(200);

/// After this long without traffic, the spare buffers of big lines are
/// given back to the system, so an idle relay returns to its idle size.
pub const IDLE_RELEASE: std::time::Duration = std::time::Duration::from_secs(1);

/// Run a session between `host_in`/`host_out` and servers launched by
/// `launcher`, until the host closes its side or the session ends.
/// `extra_events` carries watcher events (policy edits, roots on disk).
pub async fn run<L, R, W>(
    config: SessionConfig,
    launcher: L,
    host_in: R,
    host_out: W,
    mut extra_events: mpsc::UnboundedReceiver<Event>,
) -> Result<Ending, String>
where
    L: Launcher,
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let max = usize::try_from(config.policy.raw.limits.max_message_bytes).unwrap_or(usize::MAX);
    let (out_tx, mut out_rx) = framing::line_queue();
    let writer = tokio::spawn(async move {
        let mut w = host_out;
        if let Err(e) = framing::write_all_lines(&mut w, &mut out_rx).await {
            tracing::warn!("host stdout closed: {e}");
        }
    });
    // Bounded: a server that writes faster than the host reads is held
    // back by its own pipe.
    let (srv_tx, mut srv_rx) = flow::channel(16, flow::BUDGET);
    let (host_tx, mut host_rx) = flow::channel::<Event>(64, flow::BUDGET);
    let reader = tokio::spawn(async move {
        let mut r = framing::LineReader::new(host_in, max);
        loop {
            // Read no further ahead of the session than the budget.
            host_tx.ready().await;
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
            if host_tx.send(ev, held).await.is_err() || eof {
                break;
            }
        }
    });

    let mut session = Session::new(config, launcher, out_tx, srv_tx)?;
    let mut host_open = true;
    let mut extra_open = true;
    let mut last_traffic = std::time::Instant::now();
    while !session.finished() {
        let deadline = session.next_deadline();
        // While a writer is backed up, one side is not read; look again
        // shortly (writers do not wake this loop when they catch up).
        let paused = session.host_backed_up() || session.server_backed_up();
        let spinning = !paused && last_traffic.elapsed() < SPIN;
        tokio::select! {
            () = sleep(std::time::Duration::from_millis(1)), if paused => {}
            () = spin(), if spinning => {}
            () = sleep(IDLE_RELEASE), if !spinning && framing::spares_held() => {
                framing::release_spares();
            }
            ev = host_rx.recv(), if host_open && !session.server_backed_up() => {
                last_traffic = std::time::Instant::now();
                match ev {
                    Some(ev) => session.on_event(ev),
                    None => { host_open = false; session.on_event(Event::HostEof); }
                }
            }
            Some(ev) = srv_rx.recv(), if !session.host_backed_up() || session.ending().is_some() => {
                last_traffic = std::time::Instant::now();
                session.on_event(Event::Server(ev))
            }
            ev = extra_events.recv(), if extra_open => match ev {
                Some(ev) => session.on_event(ev),
                None => extra_open = false,
            },
            () = sleep_until(deadline), if deadline.is_some() => session.on_timer(tokio::time::Instant::now()),
        }
    }
    let ending = session.ending().cloned().unwrap_or(Ending::HostClosed);
    reader.abort();
    drop(session);
    let _ = writer.await;
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
