use super::*;

fn policies() -> Vec<FilterPolicy> {
    let mut out = Vec::new();
    for bits in 0..1024u32 {
        let b = |i: u32| bits & (1 << i) != 0;
        out.push(FilterPolicy {
            udp: b(0),
            deny_unix: b(1),
            deny_inet: b(2),
            listen: if b(3) {
                Listen::Supervised
            } else {
                Listen::Refused
            },
            namespaces: b(4),
            report: b(5),
            supervise_connect: b(6),
            observe: b(7),
            locks: b(8),
            observe_network: b(9),
            // Only without namespaces, as launched; with and without
            // report (its bit left free for this one).
            shm: !b(4) && b(5),
        });
    }
    out
}

#[test]
fn every_call_is_listed_once_with_a_reason() {
    for p in policies() {
        let t = entries(&p);
        let mut seen = std::collections::BTreeMap::new();
        for e in &t {
            assert!(!e.why.is_empty(), "{} has no reason", e.name);
            if let Some(other) = seen.insert(e.nr, e.name) {
                panic!("{} and {} share number {}", other, e.name, e.nr);
            }
        }
    }
}

#[test]
fn compiles_for_every_policy_within_the_kernels_limit() {
    for p in policies() {
        let prog = compile(p).unwrap();
        assert!(prog.len() < 4096, "{} instructions", prog.len());
    }
}

/// The action word the program should return for a decision.
fn expected(p: &FilterPolicy, d: Decision<'_>) -> u32 {
    word(p, d.action, d.entry)
}

/// Argument values worth trying for a table: every constant a condition
/// names, its neighbours, and each mask with and without extra bits.
fn interesting(t: &[Entry]) -> Vec<u32> {
    let mut v = vec![
        0,
        1,
        2,
        3,
        0xf,
        0x80,
        0x800,
        0x80000,
        0xffff_ffff,
        0x8000_0000,
    ];
    for e in t {
        if let Rule::Args { clauses, .. } = &e.rule {
            for c in clauses {
                for w in &c.when {
                    match w {
                        Cond::Eq(_, x) => v.extend([*x, x.wrapping_add(1)]),
                        Cond::In(_, xs) => {
                            for x in xs {
                                v.extend([*x, x.wrapping_add(1), x.wrapping_sub(1)]);
                            }
                        }
                        Cond::MaskedIn(_, m, xs) => {
                            for x in xs {
                                v.extend([*x, x | 0x800, x | 0x80000, x | !m]);
                            }
                        }
                        Cond::AnySet(_, m) | Cond::NoneSet(_, m) => {
                            v.extend([*m, m & m.wrapping_neg(), !m, m | 0x1ff])
                        }
                    }
                }
            }
        }
    }
    v.sort_unstable();
    v.dedup();
    v
}

#[test]
fn the_program_means_what_decide_says() {
    let arch = audit_arch().unwrap();
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for p in policies() {
        let t = entries(&p);
        let prog = compile_table(&p, &t).unwrap();
        let vals = interesting(&t);
        let mut nrs: Vec<i64> = t.iter().map(|e| e.nr).collect();
        nrs.extend([0x1ff, 470, 471, 500, 1000]);
        for nr in nrs {
            // Many argument draws where the arguments decide; a few where
            // they must not matter.
            let by_args = t
                .iter()
                .any(|e| e.nr == nr && matches!(e.rule, Rule::Args { .. }));
            for round in 0..if by_args { 60 } else { 6 } {
                let mut args = [0u64; 6];
                for a in &mut args {
                    let r = next();
                    let low = vals[(r as usize) % vals.len()];
                    // Sometimes garbage in the high half: only the low
                    // half may matter.
                    let high = if round % 3 == 0 { r >> 32 } else { 0 };
                    *a = (high << 32) | u64::from(low);
                }
                let want = expected(&p, decide(&t, nr, &args));
                let got = bpf::run(&prog, nr as i32, arch, args);
                assert_eq!(got, want, "{p:?} nr {nr} args {args:x?}");
            }
        }
        // x32 numbers and other architectures.
        if cfg!(target_arch = "x86_64") {
            let x32 = (X32_SYSCALL_BIT | libc::SYS_socket as u32) as i32;
            assert_eq!(
                bpf::run(&prog, x32, arch, [2, 2, 0, 0, 0, 0]),
                word(&p, Action::Errno(libc::ENOSYS), None)
            );
        }
        assert_eq!(
            bpf::run(&prog, libc::SYS_getpid as i32, 0x4000_0003, [0; 6]),
            RET_KILL_PROCESS
        );
    }
}

fn strict() -> FilterPolicy {
    FilterPolicy {
        udp: false,
        deny_unix: true,
        deny_inet: false,
        listen: Listen::Refused,
        namespaces: false,
        report: false,
        supervise_connect: false,
        observe: false,
        observe_network: false,
        locks: false,
        shm: false,
    }
}

fn act(p: &FilterPolicy, nr: i64, args: [u64; 6]) -> Action {
    decide(&entries(p), nr, &args).action
}

/// What the table decides for `unshare(flags)`.
fn unshare(p: &FilterPolicy, flags: i32) -> Action {
    act(p, libc::SYS_unshare, [flags as u64, 0, 0, 0, 0, 0])
}

#[test]
fn unix_datagrams_are_refused_in_every_shape_when_unix_sockets_are() {
    let p = strict();
    let unix = libc::AF_UNIX as u64;
    for ty in [libc::SOCK_DGRAM, libc::SOCK_RAW, libc::SOCK_RDM, 11] {
        for flags in [0, libc::SOCK_CLOEXEC, libc::SOCK_NONBLOCK] {
            let ty = (ty | flags) as u64;
            assert_eq!(
                act(&p, libc::SYS_socketpair, [unix, ty, 0, 0, 0, 0]),
                Action::Errno(libc::EPERM),
                "socketpair type {ty:#x}"
            );
            assert_eq!(
                act(&p, libc::SYS_socket, [unix, ty, 0, 0, 0, 0]),
                Action::Errno(libc::EPERM)
            );
        }
    }
    let stream = (libc::SOCK_STREAM | libc::SOCK_CLOEXEC) as u64;
    assert_eq!(
        act(&p, libc::SYS_socketpair, [unix, stream, 0, 0, 0, 0]),
        Action::Allow
    );
}

#[test]
fn unknown_and_future_calls_are_refused_as_missing() {
    let p = strict();
    for nr in [file_setattr_nr(), 470, 500] {
        assert_ne!(act(&p, nr, [0; 6]), Action::Allow, "{nr}");
    }
    assert_eq!(act(&p, 500, [0; 6]), Action::Errno(libc::ENOSYS));
    assert_eq!(
        act(&p, libc::SYS_clone3, [0; 6]),
        Action::Errno(libc::ENOSYS)
    );
}

fn file_setattr_nr() -> i64 {
    469
}

#[test]
fn inode_flags_and_terminal_input_are_refused_and_queries_allowed() {
    let p = strict();
    let ioctl = |req: u64| act(&p, libc::SYS_ioctl, [0, req, 0, 0, 0, 0]);
    assert_eq!(ioctl(0x4008_6602), Action::Errno(libc::EPERM));
    assert_eq!(ioctl(0x401C_5820), Action::Errno(libc::EPERM));
    assert_eq!(ioctl(0x5412), Action::Errno(libc::EPERM));
    assert_eq!(ioctl(0x1234), Action::Errno(libc::ENOTTY));
    assert_eq!(ioctl(0x5401), Action::Allow);
    assert_eq!(ioctl(0x8008_6601), Action::Allow);
}

#[test]
fn set_id_modes_are_refused_at_creation_and_plain_ones_allowed() {
    let p = strict();
    let creat = libc::O_CREAT as u64 | libc::O_WRONLY as u64;
    let openat = |flags: u64, mode: u64| act(&p, libc::SYS_openat, [0, 0, flags, mode, 0, 0]);
    assert_eq!(openat(creat, 0o6777), Action::Errno(libc::EPERM));
    assert_eq!(openat(creat, 0o4755), Action::Errno(libc::EPERM));
    assert_eq!(openat(creat, 0o666), Action::Allow);
    // Without O_CREAT the mode is not read.
    assert_eq!(openat(libc::O_RDONLY as u64, 0o6777), Action::Allow);
    let tmpfile = (libc::O_TMPFILE | libc::O_RDWR) as u64;
    assert_eq!(openat(tmpfile, 0o2755), Action::Errno(libc::EPERM));
    assert_eq!(
        act(&p, libc::SYS_mkdirat, [0, 0, 0o3777, 0, 0, 0]),
        Action::Errno(libc::EPERM)
    );
    assert_eq!(
        act(&p, libc::SYS_mkdirat, [0, 0, 0o1777, 0, 0, 0]),
        Action::Allow
    );
    let fifo = u64::from(libc::S_IFIFO) | 0o4666;
    assert_eq!(
        act(&p, libc::SYS_mknodat, [0, 0, fifo, 0, 0, 0]),
        Action::Errno(libc::EPERM)
    );
}

#[test]
fn namespaces_cannot_be_made_from_inside() {
    let p = strict();
    let clone = |flags: u64| act(&p, libc::SYS_clone, [flags, 0, 0, 0, 0, 0]);
    assert_eq!(
        clone(libc::CLONE_NEWUSER as u64),
        Action::Errno(libc::EPERM)
    );
    assert_eq!(
        clone((libc::CLONE_NEWNET | libc::SIGCHLD) as u64),
        Action::Errno(libc::EPERM)
    );
    assert_eq!(clone(libc::SIGCHLD as u64), Action::Allow);
    assert_eq!(
        unshare(&p, 0x80),
        Action::Errno(libc::EPERM)
    );
    assert_eq!(unshare(&p, libc::CLONE_FILES), Action::Allow);
}

#[test]
fn listen_goes_to_the_supervisor_only_when_something_may_listen() {
    let mut p = strict();
    assert_eq!(
        act(&p, libc::SYS_listen, [3, 1, 0, 0, 0, 0]),
        Action::Errno(libc::EPERM)
    );
    p.listen = Listen::Supervised;
    assert_eq!(
        act(&p, libc::SYS_listen, [3, 1, 0, 0, 0, 0]),
        Action::Supervise
    );
    assert!(p.needs_supervisor());
}

#[test]
fn report_mode_sends_refusals_but_not_quiet_ones_to_the_supervisor() {
    let mut p = strict();
    p.report = true;
    let t = entries(&p);
    let prog = compile_table(&p, &t).unwrap();
    let arch = audit_arch().unwrap();
    assert_eq!(bpf::run(&prog, 500, arch, [0; 6]), RET_USER_NOTIF);
    assert_eq!(
        bpf::run(&prog, libc::SYS_clone3 as i32, arch, [0; 6]),
        RET_ERRNO | libc::ENOSYS as u32
    );
    assert_eq!(
        bpf::run(&prog, libc::SYS_getpid as i32, arch, [0; 6]),
        RET_ALLOW
    );
}

/// What the filter compiled from `p` returns for call `nr` with `args`
/// on this machine's architecture.
fn run(p: &FilterPolicy, nr: i64, args: [u64; 6]) -> u32 {
    let t = entries(p);
    let arch = audit_arch().unwrap();
    bpf::run(&compile_table(p, &t).unwrap(), nr as i32, arch, args)
}

/// The arguments of `openat(AT_FDCWD, path, flags, mode)`.
fn openat_args(flags: i32, mode: u64) -> [u64; 6] {
    [libc::AT_FDCWD as u64, 0x1000, flags as u64, mode, 0, 0]
}

#[test]
fn observing_sends_the_path_calls_and_only_them_to_the_supervisor() {
    let mut p = strict();
    let open = openat_args(libc::O_RDONLY, 0);
    assert_eq!(run(&p, libc::SYS_openat, open), RET_ALLOW);
    assert_eq!(run(&p, libc::SYS_execve, [0; 6]), RET_ALLOW);
    assert!(!p.needs_supervisor());
    p.observe = true;
    assert!(p.needs_supervisor());
    // Without a view nothing refuses a look: not handed over.
    for nr in [libc::SYS_newfstatat, libc::SYS_statx, libc::SYS_faccessat2] {
        assert_eq!(run(&p, nr, open), RET_ALLOW, "{nr}");
    }
    for nr in [libc::SYS_openat, libc::SYS_execve, libc::SYS_mkdirat] {
        assert_eq!(run(&p, nr, open), RET_USER_NOTIF, "{nr}");
    }
    p.namespaces = true;
    for nr in [
        libc::SYS_openat,
        libc::SYS_newfstatat,
        libc::SYS_statx,
        libc::SYS_faccessat2,
        libc::SYS_readlinkat,
        libc::SYS_execve,
        libc::SYS_mkdirat,
    ] {
        assert_eq!(run(&p, nr, open), RET_USER_NOTIF, "{nr}");
    }
    // What the filter refuses is still refused by the filter itself.
    let setuid = openat_args(libc::O_CREAT, 0o4755);
    assert_eq!(
        run(&p, libc::SYS_openat, setuid),
        RET_ERRNO | libc::EPERM as u32
    );
    assert_eq!(
        run(&p, libc::SYS_openat2, [0; 6]),
        RET_ERRNO | libc::ENOSYS as u32
    );
    // Calls that name no path are not observed.
    assert_eq!(run(&p, libc::SYS_read, [0; 6]), RET_ALLOW);
    assert_eq!(run(&p, libc::SYS_getpid, [0; 6]), RET_ALLOW);
}

#[test]
fn dev_shm_names_send_their_calls_and_only_them_to_the_supervisor() {
    let mut p = strict();
    let open = openat_args(libc::O_RDWR | libc::O_CREAT, 0o600);
    let calls = [
        libc::SYS_openat,
        libc::SYS_unlinkat,
        libc::SYS_linkat,
        libc::SYS_renameat2,
    ];
    for nr in calls {
        assert_eq!(run(&p, nr, open), RET_ALLOW, "{nr}");
    }
    assert!(!p.needs_supervisor());
    p.shm = true;
    assert!(p.needs_supervisor());
    for nr in calls {
        assert_eq!(run(&p, nr, open), RET_USER_NOTIF, "{nr}");
    }
    // A plain read never names a semaphore or shared memory (shm_open and
    // sem_open open with O_NOFOLLOW): it goes on, as most opens do.
    let read = |flags: i32| openat_args(flags, 0);
    for flags in [libc::O_RDONLY, libc::O_RDONLY | libc::O_CLOEXEC | libc::O_DIRECTORY] {
        assert_eq!(run(&p, libc::SYS_openat, read(flags)), RET_ALLOW, "{flags:#x}");
    }
    for flags in [
        libc::O_RDONLY | libc::O_NOFOLLOW,
        libc::O_WRONLY,
        libc::O_RDWR,
        libc::O_RDONLY | libc::O_CREAT,
    ] {
        assert_eq!(
            run(&p, libc::SYS_openat, read(flags)),
            RET_USER_NOTIF,
            "{flags:#x}"
        );
    }
    // What the filter refuses is still refused by the filter itself, and
    // what names no file runs.
    let setuid = openat_args(libc::O_CREAT, 0o4755);
    assert_eq!(
        run(&p, libc::SYS_openat, setuid),
        RET_ERRNO | libc::EPERM as u32
    );
    for nr in [libc::SYS_read, libc::SYS_newfstatat, libc::SYS_execve] {
        assert_eq!(run(&p, nr, open), RET_ALLOW, "{nr}");
    }
}

#[test]
fn locks_go_to_the_supervisor_and_unlocks_do_not() {
    let mut p = strict();
    let flock = |p: &FilterPolicy, op: i32| act(p, libc::SYS_flock, [3, op as u64, 0, 0, 0, 0]);
    let fcntl = |p: &FilterPolicy, cmd: i32| act(p, libc::SYS_fcntl, [3, cmd as u64, 0, 0, 0, 0]);
    assert_eq!(flock(&p, libc::LOCK_EX), Action::Allow);
    assert_eq!(fcntl(&p, libc::F_SETLK), Action::Allow);
    p.locks = true;
    assert!(p.needs_supervisor());
    for op in [libc::LOCK_EX, libc::LOCK_SH, libc::LOCK_EX | libc::LOCK_NB] {
        assert_eq!(flock(&p, op), Action::Supervise, "{op}");
    }
    assert_eq!(flock(&p, libc::LOCK_UN), Action::Allow);
    for cmd in [
        libc::F_SETLK,
        libc::F_SETLKW,
        libc::F_OFD_SETLK,
        libc::F_OFD_SETLKW,
    ] {
        assert_eq!(fcntl(&p, cmd), Action::Supervise, "{cmd}");
    }
    // Queries and descriptor flags stay with the kernel.
    for cmd in [
        libc::F_GETLK,
        libc::F_OFD_GETLK,
        libc::F_GETFL,
        libc::F_SETFD,
        libc::F_DUPFD_CLOEXEC,
    ] {
        assert_eq!(fcntl(&p, cmd), Action::Allow, "{cmd}");
    }
    assert_eq!(fcntl(&p, libc::F_SETLEASE), Action::Errno(libc::EPERM));
}

#[test]
fn observing_sends_connections_and_refused_udp_sockets_to_the_supervisor() {
    let mut p = strict();
    let udp = [libc::AF_INET as u64, libc::SOCK_DGRAM as u64, 0, 0, 0, 0];
    let tcp = [libc::AF_INET as u64, libc::SOCK_STREAM as u64, 0, 0, 0, 0];
    assert_eq!(run(&p, libc::SYS_connect, [3, 0, 16, 0, 0, 0]), RET_ALLOW);
    assert_eq!(
        run(&p, libc::SYS_socket, udp),
        RET_ERRNO | libc::EPERM as u32
    );
    p.observe_network = true;
    assert_eq!(
        run(&p, libc::SYS_connect, [3, 0, 16, 0, 0, 0]),
        RET_USER_NOTIF
    );
    assert_eq!(run(&p, libc::SYS_socket, udp), RET_USER_NOTIF);
    // An allowed socket() is not handed over, nor a path call.
    assert_eq!(run(&p, libc::SYS_socket, tcp), RET_ALLOW);
    assert_eq!(run(&p, libc::SYS_openat, [0; 6]), RET_ALLOW);
}

#[test]
fn every_call_is_in_one_named_group_or_listed_with_its_rule() {
    for p in policies() {
        let table = entries(&p);
        let g = groups(&p);
        let mut seen: Vec<&str> = g
            .allowed
            .iter()
            .flat_map(|a| a.calls.iter().copied())
            .chain(g.checked.iter().map(|(name, _)| *name))
            .chain(g.refused.iter().flat_map(|r| r.calls.iter().copied()))
            .collect();
        assert_eq!(seen.len(), table.len(), "{p:?}");
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), table.len(), "a call in two places: {p:?}");
        let group_of = |call: &str| {
            g.allowed
                .iter()
                .find(|a| a.calls.contains(&call))
                .map(|a| a.name)
        };
        assert_eq!(group_of("read"), Some("descriptors"));
        assert_eq!(group_of("futex"), Some("threads"));
        assert!(
            g.allowed
                .iter()
                .all(|a| !a.name.is_empty() && !a.why.is_empty())
        );
        assert!(g.checked.iter().any(|(name, _)| *name == "flock"));
        assert!(g.checked.iter().any(|(name, _)| *name == "clone"));
        assert!(
            g.refused
                .iter()
                .any(|r| r.calls.contains(&"bpf") && r.why == "kernel programs")
        );
    }
}

#[test]
fn a_process_keeps_one_descriptor_table_where_locks_are_supervised() {
    let mut p = strict();
    p.locks = true;
    let clone = |flags: i32| act(&p, libc::SYS_clone, [flags as u64, 0, 0, 0, 0, 0]);
    let thread = libc::CLONE_VM | libc::CLONE_SIGHAND | libc::CLONE_THREAD;
    assert_eq!(clone(thread | libc::CLONE_FILES), Action::Allow);
    assert_eq!(clone(thread), Action::Errno(libc::EPERM));
    assert_eq!(
        clone(libc::CLONE_FILES | libc::SIGCHLD),
        Action::Errno(libc::EPERM)
    );
    assert_eq!(clone(libc::SIGCHLD), Action::Allow);
    // Unsharing the table: the supervisor looks at the process's threads.
    assert_eq!(unshare(&p, libc::CLONE_FILES), Action::Supervise);
    assert_eq!(unshare(&p, libc::CLONE_FS), Action::Allow);
    let close_range = |flags: u64| act(&p, libc::SYS_close_range, [3, 10, flags, 0, 0, 0]);
    assert_eq!(close_range(2), Action::Supervise);
    assert_eq!(close_range(0), Action::Allow);
    assert_eq!(close_range(4), Action::Allow);
    // Without the lock supervision, nothing to look at.
    p.locks = false;
    assert_eq!(unshare(&p, libc::CLONE_FILES), Action::Allow);
}
