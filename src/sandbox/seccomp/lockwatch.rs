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
//! So once such a call was let through, its process is watched, and the
//! call's number with it. A lock the call takes stays under that number
//! for as long as it is held: the kernel takes it on the open file the
//! number names when it runs the call (and drops it if the number names
//! another by the time the lock is had), and closing or replacing any
//! descriptor of the file releases every POSIX lock the process holds on
//! it. So the locks `/proc/<pid>/task/<tid>/fdinfo/<number>` shows are
//! all the call can have taken, each through the file the number names
//! now: where the server may lock that file for real, none was raced, and
//! `fdinfo` is not read (however many locks it has); else each lock is
//! judged by its own open file, as the supervisor judges a call. A number is looked at until its
//! thread is seen to have finished the call (it made another lock call,
//! or ended), then once more: at most one number per thread of the
//! server, and no table of other processes' locks is read. A lock that is
//! not real (taken through a descriptor opened only for reading, on a
//! file the server may not write, or a device), and that no other
//! descriptor of the process makes real, was taken by the race: the
//! process is killed, which releases it, and rootfence says so.
//!
//! A process keeps one descriptor table (the filter refuses a thread
//! without `CLONE_FILES`, and unsharing the table in a process of several
//! threads), looked at through the thread that made the call, or another
//! if that one ended.
//!
//! # Security
//!
//! The window is bounded, not closed: from the moment the kernel grants a
//! raced lock to the next look, a writer outside may find the file
//! locked. Looks come every [`FAST`] while calls are let through, then
//! every [`MEDIUM`], at most [`SLOW`] apart; a look costs a few calls per
//! thread with a lock call unfinished and per number they name (at most
//! [`FDINFO_MAX`] bytes of `fdinfo`, read only where the number names a
//! file the server may not lock for real), and the pause after it is at
//! least twice its length, so only a server of thousands of threads, each
//! in a lock call, lengthens the window past [`SLOW`]. Nothing another
//! process of the machine does lengthens it. A process whose
//! descriptors rootfence may not read (a server that made itself not
//! dumpable) cannot have a POSIX lock let through while it has several
//! threads (`ENOLCK`), and is killed if it becomes so while a call of its
//! is watched: its locks cannot be judged.

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
/// See [`FAST`].
const FAST_FOR: Duration = Duration::from_millis(50);
/// The pause between looks within a second of the last call let through.
const MEDIUM: Duration = Duration::from_millis(20);
/// The longest pause between looks while a call is watched.
const SLOW: Duration = Duration::from_millis(100);
/// `pidfd_open()`'s flag for a thread's own pidfd (Linux 6.9).
const PIDFD_THREAD: libc::c_int = libc::O_EXCL;

/// A lock's file: device (major, minor) and inode.
type Key = (u32, u32, u64);

/// A watched process.
struct Watched {
    tgid: u32,
    pidfd: Arc<OwnedFd>,
    own: Arc<Writable>,
    /// Files whose lock under a watched number was judged real at the last
    /// look.
    fine: HashSet<Key>,
    /// Each thread's last call let through, not seen finished: its number.
    calls: HashMap<u32, RawFd>,
    /// Calls seen finished since the last look (thread, number): looked
    /// at once more.
    settle: Vec<(u32, RawFd)>,
}

impl Watched {
    /// Thread `tid`'s last call let through has finished (a thread makes
    /// one call at a time): its number is looked at once more.
    fn finished(&mut self, tid: u32) {
        if let Some(n) = self.calls.remove(&tid) {
            self.settle.push((tid, n));
        }
    }
}

#[derive(Default)]
struct State {
    procs: Vec<Watched>,
    /// When the last call was let through.
    last: Option<Instant>,
}

#[derive(Default)]
struct Watch {
    state: Mutex<State>,
    wake: Condvar,
}

static WATCH: OnceLock<Option<Arc<Watch>>> = OnceLock::new();

/// The thread whose lock call the supervisor judges, with its process's
/// thread count taken before the descriptor is looked at.
#[derive(Debug, Clone, Copy)]
pub(super) struct Caller {
    /// The calling thread.
    tid: u32,
    tgid: u32,
    threads: u32,
}

impl Caller {
    /// Thread `tid` as it waits on the supervisor, before its descriptor
    /// is looked at. `None` if it is gone.
    ///
    /// # Security
    ///
    /// A process of one thread then has no other thread to race the call:
    /// none can start while its only one waits on the supervisor. Counted
    /// after the look, a second thread that put another file under the
    /// number and ended would not count.
    pub(super) fn of(tid: u32) -> Option<Caller> {
        let (tgid, threads) = status(tid)?;
        Some(Caller { tid, tgid, threads })
    }
}

/// Before the supervisor lets the kernel run a POSIX lock call of
/// `caller` on descriptor `fd`: watch the call if its process had more
/// than one thread. `Err` (an errno to answer instead) where it cannot be
/// watched.
pub(super) fn letting_through(caller: &Caller, fd: RawFd, own: &Writable) -> Result<(), i32> {
    let Caller { tid, tgid, threads } = *caller;
    if threads <= 1 {
        // Nothing can race this call; it tells that the thread's last one
        // has finished.
        if let Some(Some(watch)) = WATCH.get()
            && let Ok(mut state) = watch.state.lock()
            && let Some(w) = state.procs.iter_mut().find(|w| w.tgid == tgid)
        {
            w.finished(tid);
        }
        return Ok(());
    }
    // The locks under the number must be readable to be judged.
    if let Err(e) = std::fs::File::open(fdinfo(tgid, tid, fd))
        && e.kind() == io::ErrorKind::PermissionDenied
    {
        return Err(libc::ENOLCK);
    }
    let watch = WATCH.get_or_init(start).as_ref().ok_or(libc::ENOLCK)?;
    let mut state = watch.state.lock().map_err(|_| libc::ENOLCK)?;
    state.last = Some(Instant::now());
    state.procs.retain(|w| alive(&w.pidfd));
    let i = match state.procs.iter().position(|w| w.tgid == tgid) {
        Some(i) => i,
        None => {
            // The caller waits on the supervisor: its process is alive, so
            // the pidfd opened now is of that process.
            let pidfd = pidfd_open(tgid).ok_or(libc::ESRCH)?;
            state.procs.push(Watched {
                tgid,
                pidfd: Arc::new(pidfd),
                own: Arc::new(own.clone()),
                fine: HashSet::new(),
                calls: HashMap::new(),
                settle: Vec::new(),
            });
            state.procs.len() - 1
        }
    };
    let w = &mut state.procs[i];
    w.finished(tid);
    w.calls.insert(tid, fd);
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
    Some(watch)
}

fn run(watch: &Watch) {
    let Ok(mut state) = watch.state.lock() else {
        return;
    };
    // How long the last look took: the pause after it is never shorter
    // than twice that (the watch costs at most a third of a processor).
    let mut took = Duration::ZERO;
    let mut looked = Instant::now();
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
        .max(took * 2);
        let due = looked + pause;
        let now = Instant::now();
        if now < due {
            state = match watch.wake.wait_timeout(state, due - now) {
                Ok((s, _)) => s,
                Err(_) => return,
            };
            continue;
        }
        looked = now;
        let jobs = jobs(&mut state);
        drop(state);
        let seen: Vec<Seen> = jobs.iter().map(look).collect();
        state = match watch.state.lock() {
            Ok(s) => s,
            Err(_) => return,
        };
        apply(&mut state, &jobs, seen);
        took = looked.elapsed();
    }
}

/// A look's work on one process, taken from the state so that calls are
/// let through while it is done.
struct Job {
    tgid: u32,
    pidfd: Arc<OwnedFd>,
    own: Arc<Writable>,
    fine: HashSet<Key>,
    /// (thread, number) of the calls watched.
    numbers: Vec<(u32, RawFd)>,
}

/// What a look found in one process.
#[derive(Default)]
struct Seen {
    /// Files whose lock under a watched number is real.
    fine: HashSet<Key>,
    /// Threads seen ended: their calls have finished.
    ended: Vec<u32>,
    /// Killed: it held a lock that is not real.
    killed: bool,
}

fn jobs(state: &mut State) -> Vec<Job> {
    state.procs.retain(|w| alive(&w.pidfd));
    state
        .procs
        .iter_mut()
        .map(|w| {
            let mut numbers: Vec<(u32, RawFd)> = w.calls.iter().map(|(&t, &n)| (t, n)).collect();
            numbers.append(&mut w.settle);
            Job {
                tgid: w.tgid,
                pidfd: w.pidfd.clone(),
                own: w.own.clone(),
                fine: w.fine.clone(),
                numbers,
            }
        })
        .collect()
}

fn apply(state: &mut State, jobs: &[Job], seen: Vec<Seen>) {
    for (job, seen) in jobs.iter().zip(seen) {
        let Some(i) = state.procs.iter().position(|w| w.tgid == job.tgid) else {
            continue;
        };
        if seen.killed {
            state.procs.remove(i);
            continue;
        }
        let w = &mut state.procs[i];
        w.fine = seen.fine;
        for tid in seen.ended {
            w.finished(tid);
        }
    }
    // A process with no call watched needs no look (its next call let
    // through watches it again).
    state
        .procs
        .retain(|w| !w.calls.is_empty() || !w.settle.is_empty());
}

/// One look at a process: the locks under each watched number, each
/// judged by the open file it was taken through, and where that does not
/// make it real, by all the process's descriptors of the file.
fn look(job: &Job) -> Seen {
    let mut seen = Seen::default();
    let mut all: Option<Result<Found, Closed>> = None;
    let mut looked = HashSet::new();
    for &(tid, n) in &job.numbers {
        let live = !ended(job.tgid, tid);
        if !live {
            // Its call has finished; the number is in the table the
            // process's other threads share.
            seen.ended.push(tid);
        }
        // One look per number (one table per process).
        if !looked.insert(n) {
            continue;
        }
        let view = if live {
            tid
        } else {
            match a_live_thread(job.tgid) {
                Some(other) => other,
                None => continue,
            }
        };
        // Every lock `fdinfo` shows under the number was taken through
        // the file it names now: a file the server may lock for real holds
        // no raced lock, however many it has.
        if let Some((file, flags)) = current(job.tgid, &job.pidfd, view, n)
            && locks_for_real(&file, flags, &job.own)
        {
            continue;
        }
        let text = match read_through_a_live_thread(job.tgid, view, n) {
            Ok(Some(text)) => text,
            // The number is closed: no lock stays under it.
            Ok(None) => continue,
            Err(closed) => {
                end(job, &closed.to_string());
                seen.killed = true;
                return seen;
            }
        };
        for h in fdinfo_locks(&text) {
            let key = (h.major, h.minor, h.ino);
            if job.fine.contains(&key) || seen.fine.contains(&key) {
                seen.fine.insert(key);
                continue;
            }
            let verdict = match copy(job.tgid, &job.pidfd, view, n, h.ino) {
                Some((file, flags)) if locks_for_real(&file, flags, &job.own) => Verdict::Real,
                _ => match all.get_or_insert_with(|| descriptors(job.tgid)) {
                    Ok(found) => judge(job, &h, found),
                    Err(closed) => Verdict::Raced(closed.to_string()),
                },
            };
            match verdict {
                Verdict::Real => {
                    seen.fine.insert(key);
                }
                Verdict::Unknown => {}
                Verdict::Raced(what) => {
                    end(job, &what);
                    seen.killed = true;
                    return seen;
                }
            }
        }
    }
    seen
}

/// Kill the process of `job`, which held a lock on `what` it may only
/// read, and say so (first: rootfence may end as soon as the server does).
fn end(job: &Job, what: &str) {
    tracing::warn!(
        "rootfence killed process {} of the server: it held a lock on {what}, \
         which it may only read, taken by putting that file under a descriptor \
         number after the sandbox had checked the lock call",
        job.tgid
    );
    kill(&job.pidfd);
}

fn fdinfo(tgid: u32, tid: u32, n: RawFd) -> String {
    format!("/proc/{tgid}/task/{tid}/fdinfo/{n}")
}

/// Most of an `fdinfo` file read: its flags, and locks enough to judge
/// (a descriptor whose file may not be locked for real shows none, but
/// the race's).
const FDINFO_MAX: u64 = 64 * 1024;

/// What `/proc` shows of descriptor `n` in thread `tid`'s table (its first
/// [`FDINFO_MAX`] bytes: a file of thousands of locks, or an inotify
/// instance of thousands of watches, costs no more).
fn read(tgid: u32, tid: u32, n: RawFd) -> io::Result<String> {
    use std::io::Read as _;
    let mut text = String::new();
    std::fs::File::open(fdinfo(tgid, tid, n))?
        .take(FDINFO_MAX)
        .read_to_string(&mut text)
        .or_else(|e| {
            // Cut inside a character: what came before is whole lines.
            if e.kind() == io::ErrorKind::InvalidData {
                Ok(0)
            } else {
                Err(e)
            }
        })?;
    Ok(text)
}

/// [`read`] through thread `tid`, or, where it ended meanwhile (`/proc`
/// then refuses as it refuses a closed process), through another thread
/// of the process. `None`: the number is closed, or the process has no
/// thread left; `Err`: rootfence may not look.
fn read_through_a_live_thread(tgid: u32, tid: u32, n: RawFd) -> Result<Option<String>, Closed> {
    let mut view = tid;
    for _ in 0..3 {
        match read(tgid, view, n) {
            Ok(text) => return Ok(Some(text)),
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied && ended(tgid, view) => {
                match a_live_thread(tgid) {
                    Some(other) => view = other,
                    None => return Ok(None),
                }
            }
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => return Err(Closed { tgid }),
            Err(_) => return Ok(None),
        }
    }
    Ok(None)
}

/// A thread of process `tgid` that has not ended.
fn a_live_thread(tgid: u32) -> Option<u32> {
    std::fs::read_dir(format!("/proc/{tgid}/task"))
        .ok()?
        .flatten()
        .filter_map(|t| t.file_name().to_str().and_then(|s| s.parse::<u32>().ok()))
        .find(|&tid| !ended(tgid, tid))
}

/// A lock `/proc` shows on a descriptor.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Held {
    major: u32,
    minor: u32,
    ino: u64,
}

/// The locks an `fdinfo` file shows (`lock:` lines such as
/// `lock:\t1: POSIX  ADVISORY  READ 1234 fd:01:5678 0 EOF`): POSIX locks,
/// and open-file-description locks and `flock()`s (let through where the
/// supervisor judged the call by `/proc`); waiters are left out.
fn fdinfo_locks(text: &str) -> Vec<Held> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.strip_prefix("lock:")?.split_whitespace().collect();
            if !matches!(f.get(1), Some(&("POSIX" | "OFDLCK" | "FLOCK"))) {
                return None;
            }
            let mut id = f.get(5)?.split(':');
            let major = u32::from_str_radix(id.next()?, 16).ok()?;
            let minor = u32::from_str_radix(id.next()?, 16).ok()?;
            let ino = id.next()?.parse().ok()?;
            Some(Held { major, minor, ino })
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

/// Whether thread `tid` of `tgid` has ended or is ending (a zombie, dead,
/// or exiting: its locks are released as it goes, and once its memory is
/// gone `/proc` shows its descriptors to root only, as a closed
/// process's).
fn ended(tgid: u32, tid: u32) -> bool {
    /// `PF_EXITING`, in the flags `stat` shows.
    const EXITING: u64 = 0x4;
    std::fs::read_to_string(format!("/proc/{tgid}/task/{tid}/stat")).map_or(true, |s| {
        // After the command's closing parenthesis: the state, then the
        // parent, group, session, terminal, its group, and the flags.
        let Some((_, rest)) = s.rsplit_once(')') else {
            return true;
        };
        let mut fields = rest.split_whitespace();
        let state = fields.next().and_then(|f| f.chars().next());
        let flags = fields.nth(5).and_then(|f| f.parse::<u64>().ok());
        state.is_none_or(|c| c == 'Z' || c == 'X') || flags.is_none_or(|f| f & EXITING != 0)
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

fn judge(job: &Job, h: &Held, found: &Found) -> Verdict {
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
        let Some((file, flags)) = copy(job.tgid, &job.pidfd, tid, n, h.ino) else {
            continue;
        };
        if locks_for_real(&file, flags, &job.own) {
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

/// A copy of descriptor `n` of thread `tid`, with its open mode, of the
/// inode `ino` ([`current`]). `None` if it is gone, or of another file.
fn copy(tgid: u32, pidfd: &OwnedFd, tid: u32, n: RawFd, ino: u64) -> Option<(OwnedFd, i32)> {
    let (file, flags) = current(tgid, pidfd, tid, n)?;
    (rustix::fs::fstat(&file).ok()?.st_ino == ino).then_some((file, flags))
}

/// What descriptor `n` of thread `tid` names now, with its open mode: the
/// descriptor itself (pidfd_getfd, by the thread's pidfd), or where the
/// kernel gives none (before Linux 6.9, a thread not the first), an
/// `O_PATH` descriptor of its file with the open mode `/proc` shows for
/// that same file. `None` if it is gone.
fn current(tgid: u32, pidfd: &OwnedFd, tid: u32, n: RawFd) -> Option<(OwnedFd, i32)> {
    let thread = if tid == tgid {
        None
    } else {
        // SAFETY: pidfd_open with integer arguments; the result is checked.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, tid as libc::pid_t, PIDFD_THREAD) };
        // SAFETY: a new descriptor we own.
        let fd = (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as RawFd) });
        // Still a thread of the process: the pidfd is not of a thread
        // that reused the number.
        fd.filter(|_| status(tid).is_some_and(|(of, _)| of == tgid))
    };
    if tid == tgid || thread.is_some() {
        let pidfd = thread.as_ref().unwrap_or(pidfd);
        // SAFETY: pidfd_getfd with integer arguments; the result is checked.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), n, 0) };
        if fd >= 0 {
            // SAFETY: a new descriptor we own.
            let file = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
            let flags = rustix::fs::fcntl_getfl(&file).ok()?.bits() as i32;
            return Some((file, flags));
        }
    }
    let link = format!("/proc/{tgid}/task/{tid}/fd/{n}");
    let file = rustix::fs::open(
        link.as_str(),
        rustix::fs::OFlags::PATH | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .ok()?;
    let ino = rustix::fs::fstat(&file).ok()?.st_ino;
    let flags = fdinfo_flags(tgid, tid, n, ino)?;
    Some((file, flags))
}

/// The open mode `/proc` shows for descriptor `fd` of thread `tid` of
/// `pid`, if the descriptor is still of the inode `ino`.
fn fdinfo_flags(pid: u32, tid: u32, fd: RawFd, ino: u64) -> Option<i32> {
    let s = read(pid, tid, fd).ok()?;
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
    crate::sandbox::pidfd::signal(pidfd, 0).is_ok()
}

fn kill(pidfd: &OwnedFd) {
    let _ = crate::sandbox::pidfd::signal(pidfd, libc::SIGKILL);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fdinfo_shows_the_locks_taken_through_the_descriptor() {
        let text = "pos:\t0\nflags:\t0100000\nmnt_id:\t29\nino:\t5678\n\
                    lock:\t1: POSIX  ADVISORY  READ 1234 fd:01:5678 0 EOF\n\
                    lock:\t1: -> POSIX  ADVISORY  WRITE 99 fd:01:5678 0 EOF\n\
                    lock:\t2: FLOCK  ADVISORY  WRITE 77 00:2f:12 0 EOF\n\
                    lock:\t3: OFDLCK ADVISORY  READ -1 08:02:9 0 EOF\n\
                    lock:\t4: LEASE  ACTIVE    READ 42 00:2f:123456789 0 EOF\n\
                    1: POSIX  ADVISORY  WRITE 42 00:2f:7 10 20\n";
        let key = |major, minor, ino| Held { major, minor, ino };
        assert_eq!(
            fdinfo_locks(text),
            vec![key(0xfd, 1, 5678), key(0, 0x2f, 12), key(8, 2, 9)]
        );
    }
}
