//! The watch on POSIX record locks the kernel runs after the supervisor's
//! check.
//!
//! A POSIX lock belongs to its process, so the supervisor cannot take it
//! on its own copy of the descriptor, as it takes `flock()` and
//! open-file-description locks (see [`super::locks`]): it lets the kernel
//! run the call, which names the descriptor by its number again. In a
//! process of one thread nothing can put another descriptor under that
//! number in between: its only thread waits on the supervisor, and no
//! other process shares its descriptor table (the filter refuses
//! `clone(CLONE_FILES)` without `CLONE_THREAD`). In a process of several
//! threads, one can `dup2()` a descriptor of a file the server may only
//! read onto the number, and the kernel takes a read lock there, which
//! makes a writer outside wait.
//!
//! So once such a call was let through, the process is watched: the
//! kernel's table of locks (`/proc/locks`) is read at once, then less and
//! less often, and each POSIX lock the process holds is judged by the
//! process's own descriptors of the file, as the supervisor judges a call.
//! A process keeps one descriptor table (the filter refuses a thread
//! without `CLONE_FILES`, and the supervisor unsharing the table in a
//! process of several threads), looked at through each of its threads
//! (its first one may have ended). A lock that none of them makes real
//! (each opened only for reading, on a file the server may not write, or
//! a device) was taken by the race: the process is killed, which releases
//! it, and rootfence says so.
//!
//! A raced lock stays on the file under the number its call was let
//! through on (closing that descriptor would release it), so each look
//! judges new locks first by the numbers let through since the look
//! before the last, and looks at all of a process's descriptors at once
//! where one of those does not make a lock real; the other processes'
//! descriptors are looked at within [`BUDGET`] a look, in turn. Beside
//! the looks, every [`FAST`], a quick look reads the locks the process
//! holds on the files under those numbers (`/proc/<pid>/fdinfo`), without
//! the kernel's table of all locks: that table takes a time quadratic in
//! its length to read, which the server's own locks can make seconds.
//!
//! # Security
//!
//! The window is bounded, not closed: from the raced call to the next
//! look (a few milliseconds after the call was let through, at most
//! [`SLOW`] for a call the racer holds back), a writer outside may find the
//! file locked. A lock the kernel takes later than two looks after its
//! call was let through (its thread starved of the processor, or an
//! `F_SETLKW` waiting for a writer outside) is judged with the other
//! processes' locks, in turn, from the kernel's table of all locks: the
//! window then grows with the work other processes of the server give the
//! watch, and with the time that table takes to read (the pause between
//! reads is at least ten times that). A process whose
//! descriptors rootfence may not read (a user running rootfence, a server
//! that made itself not dumpable) while it holds a POSIX lock is killed
//! too: its locks cannot be judged.

use std::collections::{HashMap, HashSet};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::writable::{Writable, locks_for_real};

/// The pause between looks while a call was let through in the last
/// [`FAST_FOR`].
const FAST: Duration = Duration::from_millis(2);
/// `pidfd_open()`'s flag for a thread's own pidfd (Linux 6.9).
const PIDFD_THREAD: libc::c_int = libc::O_EXCL;
/// See [`FAST`].
const FAST_FOR: Duration = Duration::from_millis(50);
/// The pause between looks within a second of the last call let through.
const MEDIUM: Duration = Duration::from_millis(20);
/// The longest pause between looks while a process is watched.
pub const SLOW: Duration = Duration::from_millis(100);

/// A watched process.
struct Watched {
    tgid: u32,
    pidfd: OwnedFd,
    own: Writable,
    /// Files (device, inode) whose lock was judged real, while it lasts.
    fine: HashSet<(u32, u32, u64)>,
    /// The descriptor numbers calls were let through on, with the look
    /// they were let through before: looked at first.
    recent: HashMap<RawFd, (u64, u64)>,
}

#[derive(Default)]
struct State {
    procs: Vec<Watched>,
    last: Option<Instant>,
    /// Looks so far.
    looks: u64,
    /// Quick looks so far (see [`quick`]).
    quicks: u64,
    /// Where the next look starts on the processes no number points at.
    next: usize,
}

#[derive(Default)]
struct Watch {
    state: Mutex<State>,
    wake: Condvar,
}

static WATCH: OnceLock<Option<Arc<Watch>>> = OnceLock::new();

/// Before the supervisor lets the kernel run a POSIX lock call of thread
/// `tid` on descriptor `fd`: watch its process if it has more than one
/// thread. `Err` (an errno to answer instead) where it cannot be watched.
pub(super) fn letting_through(tid: u32, fd: RawFd, own: &Writable) -> Result<(), i32> {
    let (tgid, threads) = status(tid).ok_or(libc::ESRCH)?;
    if threads <= 1 {
        return Ok(());
    }
    let watch = WATCH.get_or_init(start).as_ref().ok_or(libc::ENOLCK)?;
    let mut state = watch.state.lock().map_err(|_| libc::ENOLCK)?;
    state.last = Some(Instant::now());
    state.procs.retain(|w| alive(&w.pidfd));
    if !state.procs.iter().any(|w| w.tgid == tgid) {
        // The caller waits on the supervisor: its process is alive, so the
        // pidfd opened now is of that process.
        let pidfd = pidfd_open(tgid).ok_or(libc::ESRCH)?;
        state.procs.push(Watched {
            tgid,
            pidfd,
            own: own.clone(),
            fine: HashSet::new(),
            recent: HashMap::new(),
        });
    }
    let at = (state.looks, state.quicks);
    if let Some(w) = state.procs.iter_mut().find(|w| w.tgid == tgid) {
        w.recent.insert(fd, at);
    }
    watch.wake.notify_all();
    Ok(())
}

/// `unshare(CLONE_FILES)` (or `close_range(CLOSE_RANGE_UNSHARE)`) by
/// thread `tid`: a process keeps one descriptor table, which the watch
/// looks at, so the call goes on only in a process of one thread (whose
/// table is its own already: the call leaves nothing behind, and no thread
/// can start while its only one waits here).
pub(super) fn own_table(tid: u32) -> super::notif::Answer {
    use super::notif::Answer;
    match status(tid) {
        Some((_, 1)) => Answer::Continue,
        Some(_) => Answer::Done(0, -libc::EPERM),
        None => Answer::Done(0, -libc::ESRCH),
    }
}

fn start() -> Option<Arc<Watch>> {
    let watch = Arc::new(Watch::default());
    let w = watch.clone();
    std::thread::Builder::new()
        .name("rootfence-lockwatch".into())
        .spawn(move || run(&w))
        .ok()?;
    let w = watch.clone();
    std::thread::Builder::new()
        .name("rootfence-lockwatch-quick".into())
        .spawn(move || run_quick(&w))
        .ok()?;
    Some(watch)
}

fn run(watch: &Watch) {
    let Ok(mut state) = watch.state.lock() else {
        return;
    };
    // How long the last read of the kernel's table took: the pause is
    // never shorter than ten times that (a long table costs no more than
    // a tenth of a processor).
    let mut read = Duration::ZERO;
    loop {
        if state.procs.is_empty() {
            state = match watch.wake.wait(state) {
                Ok(s) => s,
                Err(_) => return,
            };
            continue;
        }
        let since = state.last.map_or(SLOW, |t| t.elapsed());
        let pause = if since < FAST_FOR {
            FAST
        } else if since < Duration::from_secs(1) {
            MEDIUM
        } else {
            SLOW
        }
        .max(read * 10);
        state = match watch.wake.wait_timeout(state, pause) {
            Ok((s, _)) => s,
            Err(_) => return,
        };
        drop(state);
        let reading = Instant::now();
        let held = posix_locks();
        read = reading.elapsed();
        state = match watch.state.lock() {
            Ok(s) => s,
            Err(_) => return,
        };
        look(&mut state, &held);
    }
}

/// The time a look spends on the descriptors of processes that no number
/// a call was let through on points at a lock of theirs; the others wait
/// for the next look.
const BUDGET: Duration = Duration::from_millis(10);

/// One look: judge each POSIX lock a watched process holds.
///
/// A raced lock is on the file under the number its call was let through
/// on (closing that descriptor would release it): the locks of the
/// numbers let through lately are judged first, by those descriptors. A
/// lock none of them makes real has its process's descriptors looked at
/// at once; other locks (taken while no one watched, or whose number was
/// let through before) within [`BUDGET`], so that no process of the
/// server, however many descriptors it has, keeps the look from a racer.
fn look(state: &mut State, held: &[Held]) {
    let started = Instant::now();
    state.looks += 1;
    let looks = state.looks;
    state.procs.retain(|w| alive(&w.pidfd));
    let count = state.procs.len();
    // Processes with locks not judged yet: those a number points at first.
    let mut urgent = Vec::new();
    let mut other = Vec::new();
    for (i, w) in state.procs.iter_mut().enumerate() {
        let mine: Vec<&Held> = held.iter().filter(|h| h.pid == w.tgid).collect();
        w.fine
            .retain(|f| mine.iter().any(|h| (h.major, h.minor, h.ino) == *f));
        let pending: Vec<&Held> = mine
            .into_iter()
            .filter(|h| !w.fine.contains(&(h.major, h.minor, h.ino)))
            .collect();
        // Numbers let through before the look before the last are judged
        // (a lock taken after the kernel's table was read is seen by the
        // next look).
        w.recent.retain(|_, (at, _)| looks.saturating_sub(*at) <= 2);
        if pending.is_empty() {
            continue;
        }
        let found = by_numbers(w);
        let mut left = false;
        let mut suspect = false;
        for h in pending {
            match judge(w, h, &found) {
                Verdict::Real => {
                    w.fine.insert((h.major, h.minor, h.ino));
                }
                Verdict::Raced(_) => suspect = true,
                Verdict::Unknown => left = true,
            }
        }
        if suspect {
            urgent.push(i);
        } else if left {
            other.push(i);
        }
    }
    // The others in turn, from where the last look stopped.
    let from = state.next.min(count);
    other.sort_by_key(|&i| (i < from, i));
    let mut dead = Vec::new();
    for (k, &i) in urgent.iter().chain(other.iter()).enumerate() {
        if k >= urgent.len() && started.elapsed() > BUDGET {
            state.next = i;
            break;
        }
        let w = &mut state.procs[i];
        let mine: Vec<&Held> = held
            .iter()
            .filter(|h| h.pid == w.tgid && !w.fine.contains(&(h.major, h.minor, h.ino)))
            .collect();
        let found = descriptors(w.tgid);
        for h in mine {
            let verdict = match &found {
                Ok(found) => judge(w, h, found),
                Err(closed) => Verdict::Raced(closed.to_string()),
            };
            match verdict {
                Verdict::Real => {
                    w.fine.insert((h.major, h.minor, h.ino));
                }
                Verdict::Unknown => {}
                Verdict::Raced(what) => {
                    end(w, &what);
                    dead.push(i);
                    break;
                }
            }
        }
    }
    let mut i = 0;
    state.procs.retain(|_| {
        i += 1;
        !dead.contains(&(i - 1))
    });
}

/// The quick looks that judge a number let through (the kernel runs the
/// call once the caller's thread runs again: some milliseconds).
const QUICKS: u64 = 5;

/// Every [`FAST`] while a process is watched, without the kernel's table
/// of all locks (whose read takes a time quadratic in its length, which
/// the server's own locks can make seconds): [`quick`].
fn run_quick(watch: &Watch) {
    let Ok(mut state) = watch.state.lock() else {
        return;
    };
    loop {
        // Nothing let through lately: nothing to look at until a call is.
        let idle = state.procs.iter().all(|w| {
            w.recent
                .values()
                .all(|(_, q)| state.quicks.saturating_sub(*q) >= QUICKS)
        });
        state = if idle {
            match watch.wake.wait(state) {
                Ok(s) => s,
                Err(_) => return,
            }
        } else {
            match watch.wake.wait_timeout(state, FAST) {
                Ok((s, _)) => s,
                Err(_) => return,
            }
        };
        quick(&mut state);
    }
}

/// A quick look: the POSIX locks the process's table holds on the files
/// under the numbers calls were let through on in the last [`QUICKS`]
/// quick looks (`/proc/<pid>/fdinfo` shows them), judged by that
/// descriptor, and where it does not make the lock real by all the
/// process's descriptors.
fn quick(state: &mut State) {
    state.quicks += 1;
    let quicks = state.quicks;
    let mut dead = Vec::new();
    for (i, w) in state.procs.iter_mut().enumerate() {
        let numbers: Vec<RawFd> = w
            .recent
            .iter()
            .filter(|(_, (_, q))| quicks.saturating_sub(*q) <= QUICKS)
            .map(|(&n, _)| n)
            .collect();
        if numbers.is_empty() {
            continue;
        }
        'tables: for tid in tables(w.tgid) {
            for &n in &numbers {
                let Ok(info) =
                    std::fs::read_to_string(format!("/proc/{}/task/{tid}/fdinfo/{n}", w.tgid))
                else {
                    continue;
                };
                let lines: Vec<&str> = info
                    .lines()
                    .filter_map(|l| l.strip_prefix("lock:"))
                    .collect();
                for h in parse_locks(&lines.join("\n")) {
                    let key = (h.major, h.minor, h.ino);
                    if w.fine.contains(&key) {
                        continue;
                    }
                    let verdict = match copy(w, tid, n, h.ino) {
                        Some((file, flags)) if locks_for_real(&file, flags, &w.own) => {
                            Verdict::Real
                        }
                        _ => match descriptors(w.tgid) {
                            Ok(found) => judge(w, &h, &found),
                            Err(closed) => Verdict::Raced(closed.to_string()),
                        },
                    };
                    match verdict {
                        Verdict::Real => {
                            w.fine.insert(key);
                        }
                        Verdict::Unknown => {}
                        Verdict::Raced(what) => {
                            end(w, &what);
                            dead.push(i);
                            break 'tables;
                        }
                    }
                }
            }
        }
    }
    let mut i = 0;
    state.procs.retain(|_| {
        i += 1;
        !dead.contains(&(i - 1))
    });
}

/// Kill process `w`, which held a lock on `what` it may only read, and say
/// so (first: rootfence may end as soon as the server does).
fn end(w: &Watched, what: &str) {
    tracing::warn!(
        "rootfence killed process {} of the server: it held a lock on {what}, \
         which it may only read, taken by putting that file under a descriptor \
         number after the sandbox had checked the lock call",
        w.tgid
    );
    kill(&w.pidfd);
}

/// The descriptors under the numbers calls of `w` were let through on
/// lately, in each of its threads' tables.
fn by_numbers(w: &Watched) -> Found {
    let mut found = Found::new();
    if w.recent.is_empty() {
        return found;
    }
    for tid in tables(w.tgid) {
        for &n in w.recent.keys() {
            if let Ok(m) = std::fs::metadata(format!("/proc/{}/task/{tid}/fd/{n}", w.tgid)) {
                found.entry(m.ino()).or_default().push((tid, n, m.dev()));
            }
        }
    }
    found
}

/// A thread of each descriptor table of process `tgid`.
fn tables(tgid: u32) -> Vec<u32> {
    let mut tables: Vec<u32> = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{tgid}/task")) else {
        return tables;
    };
    for t in tasks.flatten() {
        let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if !ended(tgid, tid) && !tables.iter().any(|&other| same_table(other, tid)) {
            tables.push(tid);
        }
    }
    tables
}

/// A POSIX lock in the kernel's table.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Held {
    pid: u32,
    major: u32,
    minor: u32,
    ino: u64,
}

/// The POSIX locks held now (`/proc/locks`; waiters are left out).
fn posix_locks() -> Vec<Held> {
    std::fs::read_to_string("/proc/locks")
        .map(|s| parse_locks(&s))
        .unwrap_or_default()
}

/// Lines such as `1: POSIX  ADVISORY  READ 1234 fd:01:5678 0 EOF`.
fn parse_locks(text: &str) -> Vec<Held> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.get(1) != Some(&"POSIX") {
                return None;
            }
            let pid = f.get(4)?.parse().ok()?;
            let mut id = f.get(5)?.split(':');
            let major = u32::from_str_radix(id.next()?, 16).ok()?;
            let minor = u32::from_str_radix(id.next()?, 16).ok()?;
            let ino = id.next()?.parse().ok()?;
            Some(Held {
                pid,
                major,
                minor,
                ino,
            })
        })
        .collect()
}

/// What a lock a watched process holds is.
#[derive(Debug)]
enum Verdict {
    /// One of its descriptors of the file makes the lock real.
    Real,
    /// None does: the file (as its descriptor names it).
    Raced(String),
    /// Not known yet (the file's descriptors are gone: so is the lock).
    Unknown,
}

/// The descriptors of a process, by inode: (thread, number, device).
type Found = std::collections::HashMap<u64, Vec<(u32, RawFd, u64)>>;

/// The descriptors of process `tgid`, in every thread's table (a lock
/// belongs to the table it was taken in, which need not be the first
/// thread's: that thread may have unshared its own, or ended), each table
/// looked at once. `Err` where rootfence may not look.
fn descriptors(tgid: u32) -> Result<Found, Closed> {
    let mut found = Found::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{tgid}/task")) else {
        return Ok(found);
    };
    // A thread of each table looked at.
    let mut tables: Vec<u32> = Vec::new();
    for t in tasks.flatten() {
        let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if tables.iter().any(|&other| same_table(other, tid)) {
            continue;
        }
        let entries = match std::fs::read_dir(format!("/proc/{tgid}/task/{tid}/fd")) {
            Ok(e) => e,
            // A thread ended, not yet reaped (the first one, whose
            // process goes on), shows no descriptors.
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied && ended(tgid, tid) => continue,
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                return Err(Closed { tgid });
            }
            // Ended since.
            Err(_) => continue,
        };
        tables.push(tid);
        for e in entries.flatten() {
            let Some(n) = e.file_name().to_str().and_then(|s| s.parse::<RawFd>().ok()) else {
                continue;
            };
            if let Ok(m) = std::fs::metadata(e.path()) {
                found.entry(m.ino()).or_default().push((tid, n, m.dev()));
            }
        }
    }
    Ok(found)
}

/// The descriptors of a process are closed to rootfence (a user running
/// rootfence, a server that made itself not dumpable).
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("a file rootfence may not look at (the descriptors of process {tgid})")]
struct Closed {
    tgid: u32,
}

/// Whether thread `tid` of `tgid` has ended (a zombie, or dead).
fn ended(tgid: u32, tid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{tgid}/task/{tid}/stat")).map_or(true, |s| {
        // After the command's closing parenthesis: the state.
        s.rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next())
            .is_none_or(|c| c == 'Z' || c == 'X')
    })
}

/// Whether threads `a` and `b` share one descriptor table (kcmp); not
/// known (no kcmp) is not.
fn same_table(a: u32, b: u32) -> bool {
    const KCMP_FILES: libc::c_long = 2;
    // SAFETY: kcmp with integer arguments; the result is checked.
    unsafe {
        libc::syscall(
            libc::SYS_kcmp,
            a as libc::pid_t,
            b as libc::pid_t,
            KCMP_FILES,
            0,
            0,
        ) == 0
    }
}

fn judge(w: &Watched, h: &Held, found: &Found) -> Verdict {
    // Its descriptors of the lock's file: by device and inode, or by inode
    // where the file's device is shown otherwise (a file of an overlay).
    let (mut same, mut by_ino) = (Vec::new(), Vec::new());
    for &(tid, n, dev) in found.get(&h.ino).into_iter().flatten() {
        if libc::major(dev) == h.major && libc::minor(dev) == h.minor {
            same.push((tid, n));
        } else {
            by_ino.push((tid, n));
        }
    }
    let candidates = if same.is_empty() { by_ino } else { same };
    let mut what = None;
    for (tid, n) in candidates {
        let Some((file, flags)) = copy(w, tid, n, h.ino) else {
            continue;
        };
        if locks_for_real(&file, flags, &w.own) {
            return Verdict::Real;
        }
        what = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
            .ok()
            .map(|p| p.display().to_string());
    }
    match what {
        Some(w) => Verdict::Raced(w),
        None => Verdict::Unknown,
    }
}

/// A copy of descriptor `n` of thread `tid`, with its open mode: the
/// descriptor itself (pidfd_getfd, by the thread's pidfd), or where the
/// kernel gives none (before Linux 6.9, a thread not the first), an
/// `O_PATH` descriptor of its file with the open mode `/proc` shows, both
/// of the inode `ino`. `None` if it is gone.
fn copy(w: &Watched, tid: u32, n: RawFd, ino: u64) -> Option<(OwnedFd, i32)> {
    let thread = if tid == w.tgid {
        None
    } else {
        // SAFETY: pidfd_open with integer arguments; the result is checked.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, tid as libc::pid_t, PIDFD_THREAD) };
        // SAFETY: a new descriptor we own.
        let fd = (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as RawFd) });
        // Still a thread of the process: the pidfd is not of a thread
        // that reused the number.
        fd.filter(|_| status(tid).is_some_and(|(tgid, _)| tgid == w.tgid))
    };
    if tid == w.tgid || thread.is_some() {
        let pidfd = thread.as_ref().unwrap_or(&w.pidfd);
        // SAFETY: pidfd_getfd with integer arguments; the result is checked.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), n, 0) };
        if fd >= 0 {
            // SAFETY: a new descriptor we own.
            let file = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
            let flags = rustix::fs::fcntl_getfl(&file).ok()?.bits() as i32;
            return (rustix::fs::fstat(&file).ok()?.st_ino == ino).then_some((file, flags));
        }
    }
    let link = format!("/proc/{}/task/{tid}/fd/{n}", w.tgid);
    let file = rustix::fs::open(
        link.as_str(),
        rustix::fs::OFlags::PATH | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .ok()?;
    if rustix::fs::fstat(&file).ok()?.st_ino != ino {
        return None;
    }
    let flags = fdinfo_flags(w.tgid, tid, n, ino)?;
    Some((file, flags))
}

/// The open mode `/proc` shows for descriptor `fd` of thread `tid` of
/// `pid`, if the descriptor is still of the inode `ino`.
fn fdinfo_flags(pid: u32, tid: u32, fd: RawFd, ino: u64) -> Option<i32> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/fdinfo/{fd}")).ok()?;
    let field = |name: &str| s.lines().find_map(|l| l.strip_prefix(name)).map(str::trim);
    if field("ino:")?.parse::<u64>().ok()? != ino {
        return None;
    }
    i32::from_str_radix(field("flags:")?, 8).ok()
}

/// The process of thread `tid`, and how many threads it has.
fn status(tid: u32) -> Option<(u32, u32)> {
    let s = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    let field = |name: &str| {
        s.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse::<u32>().ok())
    };
    Some((field("Tgid:")?, field("Threads:")?))
}

fn pidfd_open(pid: u32) -> Option<OwnedFd> {
    // SAFETY: pidfd_open with integer arguments; the result is checked.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        return None;
    }
    // SAFETY: a new descriptor we own.
    Some(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Whether the process has not been reaped (a zombie holds no lock, and
/// keeps its pid from another process).
fn alive(pidfd: &OwnedFd) -> bool {
    // SAFETY: signal 0 through a pidfd we hold: a check, nothing sent.
    unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            0,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        ) == 0
    }
}

fn kill(pidfd: &OwnedFd) {
    // SAFETY: SIGKILL through a pidfd we hold (never another process's
    // pid, even if the number was reused).
    unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            libc::SIGKILL,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernels_table_is_read_for_posix_holders_only() {
        let text = "1: POSIX  ADVISORY  READ 1234 fd:01:5678 0 EOF\n\
                    1: -> POSIX  ADVISORY  WRITE 99 fd:01:5678 0 EOF\n\
                    2: FLOCK  ADVISORY  WRITE 77 00:2f:12 0 EOF\n\
                    3: OFDLCK ADVISORY  READ -1 08:02:9 0 EOF\n\
                    4: POSIX  ADVISORY  WRITE 42 00:2f:123456789 10 20\n";
        assert_eq!(
            parse_locks(text),
            vec![
                Held {
                    pid: 1234,
                    major: 0xfd,
                    minor: 1,
                    ino: 5678
                },
                Held {
                    pid: 42,
                    major: 0,
                    minor: 0x2f,
                    ino: 123_456_789
                },
            ]
        );
    }
}
