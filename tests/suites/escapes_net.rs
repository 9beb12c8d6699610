// The cases of the `escapes_net` suites (included by tests/escapes_net.rs, with the
// server's own namespaces, and tests/escapes_net_no_ns.rs, without).


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
}

#[test]
fn tcp_connect_to_an_allowed_port_works() {
    let t = tree();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let other = TcpListener::bind("127.0.0.1:0").unwrap();
    let other_port = other.local_addr().unwrap().port();
    t.py(
        &["--allow-tcp-connect", &port.to_string()],
        &format!(
            "check('allowed', lambda: socket.create_connection(('127.0.0.1', {port}), timeout=5))\n\
             check('other', lambda: socket.create_connection(('127.0.0.1', {other_port}), timeout=5))"
        ),
    )
    .expect("allowed", "OK")
    .refused("other");
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
    .expect_any("mapped", &["EACCES", "ECONNREFUSED"]);
    assert_no_connection(&l);
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
}

#[test]
fn tcp_bind_on_an_allowed_port_works() {
    let t = tree();
    let port = free_port();
    t.py(
        &["--allow-tcp-bind", &port.to_string()],
        &format!(
            "s = socket.socket()\n\
             check('bind', lambda: s.bind(('127.0.0.1', {port})))\n\
             check('listen', lambda: s.listen())\n\
             check('other', lambda: socket.socket().bind(('127.0.0.1', {other})))",
            other = free_port()
        ),
    )
    .expect("bind", "OK")
    .expect("listen", "OK")
    .refused("other");
}

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
             def fo_connect():\n\
             \x20   s = socket.socket()\n\
             \x20   s.setsockopt(socket.IPPROTO_TCP, 30, 1)\n\
             \x20   s.connect(('127.0.0.1', {port}))\n\
             \x20   s.send(b'x')\n\
             check('fastopen_connect', fo_connect)"
        ),
    )
    .expect("sendto", "EPERM")
    .expect("sendmsg", "EPERM")
    .refused("fastopen_connect");
    assert_no_connection(&l);
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
             check('udp6', lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM))"
        ),
    )
    .expect("udp", "EPERM")
    .expect("udp_flags", "EPERM")
    .expect("udp6", "EPERM");
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
        "check('raw_icmp', lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))\n\
         check('raw6', lambda: socket.socket(socket.AF_INET6, socket.SOCK_RAW, 58))\n\
         check('packet', lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0))\n\
         check('packet_dgram', lambda: socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, 0))",
    )
    .expect("raw_icmp", "EPERM")
    .expect("raw6", "EPERM")
    .expect("packet", "EPERM")
    .expect("packet_dgram", "EPERM");
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
         check('tcp_default', lambda: socket.socket(socket.AF_INET6, socket.SOCK_STREAM | socket.SOCK_CLOEXEC))",
    )
    .expect("sctp", "EPERM")
    .expect("sctp_seqpacket", "EPERM")
    .expect("mptcp", "EPERM")
    .expect("tcp", "OK")
    .expect("tcp_default", "OK");
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
        "check('vsock', lambda: socket.socket(40, socket.SOCK_STREAM, 0))\n\
         check('alg', lambda: socket.socket(38, socket.SOCK_SEQPACKET, 0))\n\
         check('bluetooth', lambda: socket.socket(31, socket.SOCK_STREAM, 0))\n\
         check('key', lambda: socket.socket(15, socket.SOCK_RAW, 2))",
    )
    .expect("vsock", "EPERM")
    .expect("alg", "EPERM")
    .expect("bluetooth", "EPERM")
    .expect("key", "EPERM");
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
         check('x32_socket_udp', lambda: sc(0x40000000 | 41, 2, 2, 0))",
    )
    .expect("io_uring_setup", "EPERM")
    .expect("keyctl_session", "EPERM")
    .expect("add_key", "EPERM")
    .expect("x32_socket_udp", "EPERM");
}
