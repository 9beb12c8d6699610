// The cases of the `escapes_net` suites, included by tests/escapes/main.rs
// in each mode: `net` (the server in its own namespaces), `net_no_ns`
// (without), `net_user` (both, run by an unprivileged user) and
// `net_no_landlock` (the view + seccomp rung).


use std::io::ErrorKind;
use std::net::{TcpListener, UdpSocket};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener};

use common::Tree;

/// Assert nothing connected to `l`.
fn assert_no_connection(l: &TcpListener) {
    l.set_nonblocking(true).unwrap();
    match l.accept() {
        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
        Ok((_, from)) => panic!("the listener received a connection from {from}"),
        Err(e) => panic!("accept: {e}"),
    }
}

fn assert_connected(l: &TcpListener) {
    l.set_nonblocking(true).unwrap();
    l.accept()
        .expect("the allowed connection reached the listener");
}

/// On the view + seccomp rung (no Landlock) TCP cannot be ruled by port:
/// every TCP/IP socket is refused, and a policy granting a port does not
/// start, saying why.
fn refused_for_tcp_ports(p: &common::Probe) {
    let err = common::stderr(&p.out);
    assert_eq!(p.out.status.code(), Some(125), "{err}");
    assert!(
        err.contains("TCP connect and bind limited to the policy's ports")
            && err.contains("Landlock (this kernel has none)"),
        "{err}"
    );
    assert!(p.results.is_empty(), "the server ran: {:?}", p.results);
}

/// A policy turning on network by domain: on the view + seccomp rung the
/// one way a server gets TCP (to rootfence's own network proxy, within
/// its own network namespace), where no port can be granted.
fn domains_policy(t: &Tree) -> String {
    t.policy(
        "domains.toml",
        "version = 1\n[network]\nallow_domains = [\"twin.test\"]\n",
    )
}

/// The allowed twin of a refused TCP connect: `checks` (python, using
/// `host` and `port`) run where the policy grants the connection. With
/// Landlock, to a listener here on `host` granted by
/// `--allow-tcp-connect`, which must see the connection; on the view +
/// seccomp rung, to rootfence's network proxy (port from `HTTP_PROXY`).
fn granted_connect(t: &Tree, host: &str, checks: &str) -> common::Probe {
    if t.no_landlock() {
        let policy = domains_policy(t);
        return t.py(
            &["--policy", &policy],
            &format!(
                "host = '127.0.0.1'\n\
                 port = int(os.environ['HTTP_PROXY'].rsplit(':', 1)[1])\n\
                 {checks}"
            ),
        );
    }
    let l = TcpListener::bind((host, 0)).unwrap();
    let port = l.local_addr().unwrap().port();
    let p = t.py(
        &["--allow-tcp-connect", &port.to_string()],
        &format!("host = '{host}'\nport = {port}\n{checks}"),
    );
    assert_connected(&l);
    p
}

/// The allowed twin of a refused TCP bind or listen: `checks` (python,
/// using `port`) run where the policy grants binding `port`. With
/// Landlock, a free port granted by `--allow-tcp-bind`; on the view +
/// seccomp rung, which grants no port, any port (0) of the server's own
/// network namespace, where TCP is on with network by domain.
fn granted_bind(t: &Tree, checks: &str) -> common::Probe {
    if t.no_landlock() {
        let policy = domains_policy(t);
        return t.py(&["--policy", &policy], &format!("port = 0\n{checks}"));
    }
    let port = free_port();
    t.py(
        &["--allow-tcp-bind", &port.to_string()],
        &format!("port = {port}\n{checks}"),
    )
}

/// A check that a socket of a family every rung allows can be made:
/// the allowed twin of the `socket()` calls refused.
const ROUTE_SOCKET: &str =
    "check('route_socket', lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0))";

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn tcp_connect_to_a_local_listener_is_refused() {
    let t = tree();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    t.py(
        &[],
        &format!(
            "check('connect', lambda: socket.create_connection(('127.0.0.1', {port}), timeout=5))"
        ),
    )
    .refused("connect");
    assert_no_connection(&l);
    granted_connect(
        &t,
        "127.0.0.1",
        "check('granted', lambda: socket.create_connection((host, port), timeout=5))",
    )
    .allowed("granted");
}

#[test]
fn tcp_connect_to_an_allowed_port_works() {
    let t = tree();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let other = TcpListener::bind("127.0.0.1:0").unwrap();
    let other_port = other.local_addr().unwrap().port();
    let p = t.py(
        &["--allow-tcp-connect", &port.to_string()],
        &format!(
            "check('allowed', lambda: socket.create_connection(('127.0.0.1', {port}), timeout=5))\n\
             check('other', lambda: socket.create_connection(('127.0.0.1', {other_port}), timeout=5))"
        ),
    );
    if t.no_landlock() {
        refused_for_tcp_ports(&p);
        assert_no_connection(&l);
        assert_no_connection(&other);
        return;
    }
    p.expect("allowed", "OK").refused("other");
    assert_connected(&l);
    assert_no_connection(&other);
}

#[test]
fn tcp_connect_over_ipv6_is_refused() {
    let t = tree();
    let l = TcpListener::bind("[::1]:0").unwrap();
    let port = l.local_addr().unwrap().port();
    t.py(
        &[],
        &format!(
            "check('connect6', lambda: socket.create_connection(('::1', {port}), timeout=5))\n\
             check('mapped', lambda: socket.socket(socket.AF_INET6).connect(('::ffff:127.0.0.1', {port})))"
        ),
    )
    .refused("connect6")
    // Refused by Landlock's connect rule, or (without Landlock) at socket().
    .expect_any("mapped", &["EACCES", "ECONNREFUSED", "EPERM"]);
    assert_no_connection(&l);
    // Where the policy grants a port, over IPv6 too (the view + seccomp
    // rung's proxy listens on IPv4 only).
    let host = if t.no_landlock() { "127.0.0.1" } else { "::1" };
    granted_connect(
        &t,
        host,
        "check('granted', lambda: socket.create_connection((host, port), timeout=5))",
    )
    .allowed("granted");
}

#[test]
fn tcp_bind_is_refused() {
    let t = tree();
    let port = free_port();
    t.py(
        &[],
        &format!(
            "check('bind', lambda: socket.socket().bind(('127.0.0.1', {port})))\n\
             check('bind6', lambda: socket.socket(socket.AF_INET6).bind(('::1', {port})))"
        ),
    )
    .refused("bind")
    .refused("bind6");
    granted_bind(
        &t,
        "check('granted', lambda: socket.socket().bind(('127.0.0.1', port)))",
    )
    .allowed("granted");
}

#[test]
fn tcp_bind_on_an_allowed_port_works() {
    let t = tree();
    let port = free_port();
    let p = t.py(
        &["--allow-tcp-bind", &port.to_string()],
        &format!(
            "s = socket.socket()\n\
             check('bind', lambda: s.bind(('127.0.0.1', {port})))\n\
             check('listen', lambda: s.listen())\n\
             check('other', lambda: socket.socket().bind(('127.0.0.1', {other})))",
            other = free_port()
        ),
    );
    if t.no_landlock() {
        return refused_for_tcp_ports(&p);
    }
    p.expect("bind", "OK")
        .expect("listen", "OK")
        .refused("other");
}

/// Python defining `fo_connect()`: a TCP socket with TCP_FASTOPEN_CONNECT
/// connects to `host`, `port` and sends.
const FASTOPEN_CONNECT: &str = "def fo_connect():\n\
     \x20   s = socket.socket()\n\
     \x20   s.setsockopt(socket.IPPROTO_TCP, 30, 1)\n\
     \x20   s.connect((host, port))\n\
     \x20   s.send(b'x')";

#[test]
fn tcp_fast_open_does_not_slip_past_the_connect_rule() {
    let t = tree();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    t.py(
        &[],
        &format!(
            "check('sendto', lambda: socket.socket().sendto(b'x', socket.MSG_FASTOPEN, ('127.0.0.1', {port})))\n\
             check('sendmsg', lambda: socket.socket().sendmsg([b'x'], [], socket.MSG_FASTOPEN, ('127.0.0.1', {port})))\n\
             host, port = '127.0.0.1', {port}\n\
             {FASTOPEN_CONNECT}\n\
             check('fastopen_connect', fo_connect)"
        ),
    )
    .expect("sendto", "EPERM")
    .expect("sendmsg", "EPERM")
    .refused("fastopen_connect");
    assert_no_connection(&l);
    // TCP_FASTOPEN_CONNECT to a port the policy grants goes through the
    // connect rule, and works.
    granted_connect(
        &t,
        "127.0.0.1",
        &format!("{FASTOPEN_CONNECT}\ncheck('granted', fo_connect)"),
    )
    .allowed("granted");
}

#[test]
fn udp_send_is_refused() {
    let t = tree();
    let u = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = u.local_addr().unwrap().port();
    t.py(
        &[],
        &format!(
            "check('udp', lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'leak', ('127.0.0.1', {port})))\n\
             check('udp_flags', lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM | socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC))\n\
             check('udp6', lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM))\n\
             {ROUTE_SOCKET}"
        ),
    )
    .expect("udp", "EPERM")
    .expect("udp_flags", "EPERM")
    .expect("udp6", "EPERM")
    .allowed("route_socket");
    u.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 16];
    match u.recv_from(&mut buf) {
        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
        other => panic!("the UDP listener received something: {other:?}"),
    }
}

#[test]
fn raw_and_packet_sockets_are_refused() {
    let t = tree();
    t.py(
        &[],
        &format!(
            "check('raw_icmp', lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))\n\
             check('raw6', lambda: socket.socket(socket.AF_INET6, socket.SOCK_RAW, 58))\n\
             check('packet', lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0))\n\
             check('packet_dgram', lambda: socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, 0))\n\
             {ROUTE_SOCKET}"
        ),
    )
    .expect("raw_icmp", "EPERM")
    .expect("raw6", "EPERM")
    .expect("packet", "EPERM")
    .expect("packet_dgram", "EPERM")
    // A raw socket of the one netlink family allowed.
    .allowed("route_socket");
}

#[test]
fn non_tcp_stream_protocols_are_refused() {
    let t = tree();
    t.py(
        &[],
        "check('sctp', lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM, 132))\n\
         check('sctp_seqpacket', lambda: socket.socket(socket.AF_INET, socket.SOCK_SEQPACKET, 132))\n\
         check('mptcp', lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262))\n\
         check('tcp', lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP))\n\
         check('tcp_default', lambda: socket.socket(socket.AF_INET6, socket.SOCK_STREAM | socket.SOCK_CLOEXEC))\n\
         check('unix_pair', lambda: socket.socketpair())",
    )
    .expect("sctp", "EPERM")
    .expect("sctp_seqpacket", "EPERM")
    .expect("mptcp", "EPERM")
    // TCP is ruled by port where Landlock is; without it, refused whole.
    .expect("tcp", if t.no_landlock() { "EPERM" } else { "OK" })
    .expect("tcp_default", if t.no_landlock() { "EPERM" } else { "OK" })
    .expect("unix_pair", "OK");
}

#[test]
fn netlink_other_than_route_is_refused() {
    let t = tree();
    t.py(
        &[],
        "check('sock_diag', lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 4))\n\
         check('audit', lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 9))\n\
         check('uevent', lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, 15))\n\
         check('route', lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0))",
    )
    .expect("sock_diag", "EPERM")
    .expect("audit", "EPERM")
    .expect("uevent", "EPERM")
    .expect("route", "OK");
}

#[test]
fn other_socket_families_are_refused() {
    let t = tree();
    t.py(
        &[],
        &format!(
            "check('vsock', lambda: socket.socket(40, socket.SOCK_STREAM, 0))\n\
             check('alg', lambda: socket.socket(38, socket.SOCK_SEQPACKET, 0))\n\
             check('bluetooth', lambda: socket.socket(31, socket.SOCK_STREAM, 0))\n\
             check('key', lambda: socket.socket(15, socket.SOCK_RAW, 2))\n\
             {ROUTE_SOCKET}"
        ),
    )
    .expect("vsock", "EPERM")
    .expect("alg", "EPERM")
    .expect("bluetooth", "EPERM")
    .expect("key", "EPERM")
    .allowed("route_socket");
}

fn abstract_listener(t: &Tree) -> (UnixListener, String) {
    let name = format!(
        "rootfence-test-{}-{}",
        std::process::id(),
        t.base.file_name().unwrap().to_string_lossy()
    );
    let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    (UnixListener::bind_addr(&addr).unwrap(), name)
}

fn assert_no_unix_connection(l: &UnixListener) {
    l.set_nonblocking(true).unwrap();
    match l.accept() {
        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
        Ok(_) => panic!("the unix listener received a connection"),
        Err(e) => panic!("accept: {e}"),
    }
}

#[test]
fn abstract_unix_socket_outside_is_unreachable() {
    let t = tree();
    let (l, name) = abstract_listener(&t);
    t.py(
        &[],
        &format!(
            "check('connect', lambda: socket.socket(socket.AF_UNIX).connect('\\0{name}'))\n\
             check('socketpair', lambda: socket.socketpair())"
        ),
    )
    .expect("connect", "EPERM")
    .expect("socketpair", "OK");
    assert_no_unix_connection(&l);
}

/// A policy file allowing unix sockets (so only Landlock's scope is left
/// to stop abstract sockets), and granting the pathname sockets `granted`
/// (in the server's own filesystem view a socket must be there to be
/// connected to).
fn unix_policy(t: &Tree, granted: &[&std::path::Path]) -> String {
    let list: Vec<String> = granted
        .iter()
        .map(|p| format!("\"{}\"", p.display()))
        .collect();
    t.policy(
        "unix.toml",
        &format!(
            "version = 1\n[network]\nunix_sockets = true\n[runtime]\nwrite = [{}]\n",
            list.join(", ")
        ),
    )
}

#[test]
fn abstract_unix_socket_is_scoped_even_when_unix_sockets_are_allowed() {
    let t = tree();
    let (l, name) = abstract_listener(&t);
    let policy = unix_policy(&t, &[]);
    t.py(
        &["--policy", &policy],
        &format!(
            "check('socket', lambda: socket.socket(socket.AF_UNIX))\n\
             check('connect', lambda: socket.socket(socket.AF_UNIX).connect('\\0{name}'))\n\
             srv = socket.socket(socket.AF_UNIX)\n\
             srv.bind('\\0{name}-inner')\n\
             srv.listen()\n\
             check('inside', lambda: socket.socket(socket.AF_UNIX).connect('\\0{name}-inner'))"
        ),
    )
    .expect("socket", "OK")
    // Landlock's scope refuses it; in the server's own network namespace
    // the host's abstract names do not exist.
    .expect_any("connect", &["EPERM", "ECONNREFUSED"])
    .expect("inside", "OK");
    assert_no_unix_connection(&l);
}

#[test]
fn pathname_unix_socket_outside_is_unreachable() {
    let t = tree();
    let path = t.outside.join("agent.sock");
    let l = UnixListener::bind(&path).unwrap();
    t.py(
        &[],
        &format!(
            "check('connect', lambda: socket.socket(socket.AF_UNIX).connect('{p}'))\n\
             check('dgram', lambda: socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b'x', '{p}'))",
            p = path.display()
        ),
    )
    .expect("connect", "EPERM")
    .expect("dgram", "EPERM");
    assert_no_unix_connection(&l);
    // The same connect to a socket the policy grants.
    let granted = t.outside.join("granted.sock");
    let g = UnixListener::bind(&granted).unwrap();
    let policy = unix_policy(&t, &[&granted]);
    t.py(
        &["--policy", &policy],
        &format!(
            "check('granted', lambda: socket.socket(socket.AF_UNIX).connect('{}'))",
            granted.display()
        ),
    )
    .allowed("granted");
    g.set_nonblocking(true).unwrap();
    g.accept().expect("the granted unix connection arrived");
    assert_no_unix_connection(&l);
}

#[test]
fn pathname_unix_socket_connects_when_the_policy_allows_it() {
    let t = tree();
    let path = t.outside.join("allowed.sock");
    let l = UnixListener::bind(&path).unwrap();
    let policy = unix_policy(&t, &[&path]);
    t.py(
        &["--policy", &policy],
        &format!(
            "check('connect', lambda: socket.socket(socket.AF_UNIX).connect('{}'))",
            path.display()
        ),
    )
    .expect("connect", "OK");
    l.set_nonblocking(true).unwrap();
    l.accept().expect("the allowed unix connection arrived");
}

#[test]
fn io_uring_keyrings_and_x32_calls_are_refused() {
    let t = tree();
    t.py(
        &[],
        "import ctypes\n\
         libc = ctypes.CDLL(None, use_errno=True)\n\
         def sc(*a):\n\
         \x20   if libc.syscall(*a) < 0:\n\
         \x20       raise OSError(ctypes.get_errno(), 'syscall')\n\
         params = ctypes.create_string_buffer(120)\n\
         check('io_uring_setup', lambda: sc(425, 8, params))\n\
         check('keyctl_session', lambda: sc(250, 1, 0))\n\
         check('add_key', lambda: sc(248, b'user', b'k', b'v', 1, -3))\n\
         check('x32_socket_udp', lambda: sc(0x40000000 | 41, 2, 2, 0))\n\
         check('x32_socket_route', lambda: sc(0x40000000 | 41, 16, 3, 0))\n\
         check('socket_route', lambda: sc(41, 16, 3, 0))\n\
         check('getpid', lambda: sc(39))",
    )
    .expect("io_uring_setup", "EPERM")
    .expect("keyctl_session", "EPERM")
    .expect("add_key", "EPERM")
    .expect("x32_socket_udp", "ENOSYS")
    // The x32 call is missing whatever it asks; the same call by its
    // x86-64 number, for a socket every rung allows, works, as does any
    // allowed call made the same way.
    .expect("x32_socket_route", "ENOSYS")
    .allowed("socket_route")
    .allowed("getpid");
}

#[test]
fn listen_on_a_socket_never_bound_takes_no_port() {
    // listen() on an unbound TCP socket binds an ephemeral port itself
    // (Landlock's bind rule does not see it) and would accept connections.
    let t = tree();
    let p = t.py(
        &[],
        "try:\n\
         \x20   s = socket.socket()\n\
         \x20   s6 = socket.socket(socket.AF_INET6)\n\
         except OSError as e:\n\
         \x20   print('socket=' + errno.errorcode[e.errno])\n\
         \x20   sys.exit(0)\n\
         check('listen', lambda: s.listen())\n\
         print('port=' + str(s.getsockname()[1]))\n\
         check('listen6', lambda: s6.listen())",
    );
    p.success();
    if t.no_landlock() {
        // Without Landlock every TCP/IP socket is refused at socket();
        // the same socket() works where the policy turns TCP on (network
        // by domain), though listen() stays refused on this rung, which
        // cannot rule ports.
        p.expect("socket", "EPERM");
        let policy = domains_policy(&t);
        t.py(&["--policy", &policy], "check('granted', lambda: socket.socket())")
            .allowed("granted");
        return;
    }
    p.refused("listen").refused("listen6").expect("port", "0");
    // Bound first to a port the policy grants, the socket listens.
    granted_bind(
        &t,
        "s = socket.socket()\n\
         s.bind(('127.0.0.1', port))\n\
         check('granted', lambda: s.listen())",
    )
    .allowed("granted");
}

/// A connected socket asked to reach another address: already connected,
/// or the address refused or not there.
const CONNECTED_ALREADY: &[&str] = &[
    "EISCONN",
    "EOPNOTSUPP",
    "EINVAL",
    "EPROTOTYPE",
    "EPERM",
    "EACCES",
    "ENOENT",
];

#[test]
fn a_datagram_socketpair_reaches_no_pathname_socket() {
    // socket(AF_UNIX) is refused, but a datagram socketpair could sendto()
    // any pathname socket, and pass descriptors to it.
    let t = tree();
    let path = t.outside.join("dgram.sock");
    let outside = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
    outside.set_nonblocking(true).unwrap();
    t.py(
        &[],
        &format!(
            "check('dgram_pair', lambda: socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM))\n\
             def raw_pair_sendto():\n\
             \x20   r1, r2 = socket.socketpair(socket.AF_UNIX, socket.SOCK_RAW)\n\
             \x20   r1.sendto(b'raw', '{p}')\n\
             check('raw_pair', raw_pair_sendto)\n\
             check('raw_socket', lambda: socket.socket(socket.AF_UNIX, socket.SOCK_RAW))\n\
             a, b = socket.socketpair()\n\
             check('stream_sendto', lambda: a.sendto(b'x', '{p}'))\n\
             check('stream_pair', lambda: (a.send(b'ok'), b.recv(2)))\n\
             sq, sq2 = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)\n\
             check('seqpacket_connect', lambda p: sq.connect(p), path='{p}')",
            p = path.display()
        ),
    )
    .refused("dgram_pair")
    .refused("raw_pair")
    .refused("raw_socket")
    .expect_any("stream_sendto", CONNECTED_ALREADY)
    .expect_any("seqpacket_connect", CONNECTED_ALREADY)
    .expect("stream_pair", "OK");
    let mut buf = [0u8; 16];
    assert!(
        outside.recv(&mut buf).is_err(),
        "the outside datagram socket received something"
    );
}

/// A System V shared memory segment, message queue and semaphore set of
/// this process, with a known content.
struct HostIpc {
    shm: i32,
    msg: i32,
    sem: i32,
    key: i32,
}

impl HostIpc {
    fn new() -> HostIpc {
        // Keys of its own (three in a row): the same case runs side by
        // side in other modes of this binary, and in other processes.
        let pid = std::process::id() as i32 & 0xffff;
        let n = common::sequence() as i32 & 0x3f;
        let key = 0x5f00_0000 | pid << 8 | n << 2;
        // SAFETY: System V calls with valid arguments; the segment is
        // attached, written and detached here.
        unsafe {
            let shm = libc::shmget(key, 4096, libc::IPC_CREAT | 0o666);
            assert!(shm >= 0, "shmget: {}", std::io::Error::last_os_error());
            let p = libc::shmat(shm, std::ptr::null(), 0) as *mut u8;
            std::ptr::copy_nonoverlapping(b"HOST".as_ptr(), p, 4);
            libc::shmdt(p.cast());
            let msg = libc::msgget(key + 1, libc::IPC_CREAT | 0o666);
            let sem = libc::semget(key + 2, 1, libc::IPC_CREAT | 0o666);
            assert!(msg >= 0 && sem >= 0);
            HostIpc { shm, msg, sem, key }
        }
    }

    fn intact(&self) -> bool {
        // SAFETY: as above.
        unsafe {
            let p = libc::shmat(self.shm, std::ptr::null(), libc::SHM_RDONLY) as *const u8;
            if p as isize == -1 {
                return false;
            }
            let ok = std::slice::from_raw_parts(p, 4) == b"HOST";
            libc::shmdt(p.cast());
            ok && libc::msgget(self.key + 1, 0) == self.msg && libc::semget(self.key + 2, 1, 0) == self.sem
        }
    }
}

impl Drop for HostIpc {
    fn drop(&mut self) {
        // SAFETY: removing our own objects.
        unsafe {
            libc::shmctl(self.shm, libc::IPC_RMID, std::ptr::null_mut());
            libc::msgctl(self.msg, libc::IPC_RMID, std::ptr::null_mut());
            libc::semctl(self.sem, 0, libc::IPC_RMID);
        }
    }
}

#[test]
fn system_v_ipc_of_the_host_is_out_of_reach() {
    let t = tree();
    let host = HostIpc::new();
    t.py(
        &[],
        &format!(
            "import ctypes\n\
             libc = ctypes.CDLL(None, use_errno=True)\n\
             libc.shmat.restype = ctypes.c_void_p\n\
             def sc(r):\n\
             \x20   if r == -1 or r is None or r == ctypes.c_void_p(-1).value:\n\
             \x20       raise OSError(ctypes.get_errno(), 'call')\n\
             \x20   return r\n\
             check('shmget', lambda: sc(libc.shmget({k}, 0, 0)))\n\
             check('shmat', lambda: sc(libc.shmat({shm}, None, 0)))\n\
             check('shm_rmid', lambda: sc(libc.shmctl({shm}, 0, None)))\n\
             check('msgget', lambda: sc(libc.msgget({k1}, 0)))\n\
             check('msg_rmid', lambda: sc(libc.msgctl({msg}, 0, None)))\n\
             check('semget', lambda: sc(libc.semget({k2}, 1, 0)))\n\
             check('sem_rmid', lambda: sc(libc.semctl({sem}, 0, 0)))\n\
             check('own_shm', lambda: sc(libc.shmget(0, 4096, 0o1600)))\n\
             check('mq_open', lambda: sc(libc.syscall(240, b'rootfence-q', 0o100 | 2, 0o600, None)))\n\
             import mmap\n\
             def memfd_shared():\n\
             \x20   fd = os.memfd_create('shared')\n\
             \x20   os.ftruncate(fd, 4096)\n\
             \x20   m = mmap.mmap(fd, 4096, mmap.MAP_SHARED)\n\
             \x20   m[:4] = b'MINE'\n\
             check('memfd_shared', memfd_shared)",
            k = host.key,
            k1 = host.key + 1,
            k2 = host.key + 2,
            shm = host.shm,
            msg = host.msg,
            sem = host.sem,
        ),
    )
    .refused("shmget")
    .refused("shmat")
    .refused("shm_rmid")
    .refused("msgget")
    .refused("msg_rmid")
    .refused("semget")
    .refused("sem_rmid")
    .refused("own_shm")
    .refused("mq_open")
    // System V and POSIX message queues are refused whole; memory is
    // shared the way every rung allows, a memfd mapped shared.
    .allowed("memfd_shared");
    assert!(host.intact(), "a System V object of the host was changed or removed");
}

#[test]
fn listen_binds_no_port_of_its_own_when_a_bind_port_is_granted() {
    // With tcp_bind = [P] listen() must be allowed, but listen() on a
    // socket never bound binds an ephemeral port on every address, where
    // anyone could connect.
    let t = tree();
    let granted = free_port();
    if t.no_landlock() {
        let p = t.py(&["--allow-tcp-bind", &granted.to_string()], "print('ran=yes')");
        return refused_for_tcp_ports(&p);
    }
    let client = std::thread::spawn(move || {
        for _ in 0..200 {
            if let Ok(mut c) = std::net::TcpStream::connect(("127.0.0.1", granted)) {
                let mut got = String::new();
                let _ = std::io::Read::read_to_string(&mut c, &mut got);
                return got;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        String::new()
    });
    let p = t.py(
        &["--allow-tcp-bind", &granted.to_string()],
        &format!(
            "s = socket.socket()\n\
             check('unbound', lambda: s.listen())\n\
             print('unbound_port=' + str(s.getsockname()[1]), flush=True)\n\
             s6 = socket.socket(socket.AF_INET6)\n\
             check('unbound6', lambda: s6.listen())\n\
             g = socket.socket()\n\
             g.bind(('127.0.0.1', {granted}))\n\
             check('granted', lambda: g.listen())\n\
             g.settimeout(10)\n\
             conn, _ = g.accept()\n\
             conn.sendall(b'hello')\n\
             conn.close()",
        ),
    );
    p.expect("unbound", "EPERM")
        .expect("unbound6", "EPERM")
        .expect("unbound_port", "0")
        .expect("granted", "OK");
    assert_eq!(client.join().unwrap(), "hello", "the granted listener was not reachable");
}
