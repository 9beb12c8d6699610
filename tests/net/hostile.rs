//! rootfence's network proxy against a hostile client and hostile name
//! answers, judged by what an upstream recorded. The addresses a listed
//! name may reach, names resolved by the system resolver (`/etc/hosts`,
//! not the policy's pins); one request per connection, read strictly.
//! Each case runs in a network and mount namespace of its
//! own (`unshare`, as root): its loopback interface also holds this
//! machine's "own" addresses (a global one, a cloud metadata address over IPv4 and
//! IPv6, a private one), an upstream on every one of them records every
//! byte it receives, and `/etc/hosts` names them. A real client, confined
//! by `rootfence exec`, asks the proxy for each name; a refusal counts
//! only next to its allowed twin (the same address named by the policy
//! reaches the upstream).

use crate::common;

use std::path::Path;
use std::process::Command;

/// The port every upstream listens on.
const PORT: u16 = 18_080;

/// Names and the addresses `/etc/hosts` gives them; every address but the
/// embedded forms is on the namespace's interface.
const NAMES: &[(&str, &str)] = &[
    ("own.test", "93.184.216.1"),
    ("meta4.test", "100.100.100.200"),
    ("meta6.test", "fd00:ec2::254"),
    ("private.test", "10.9.9.9"),
    ("compat.test", "::127.0.0.1"),
    ("nat64.test", "64:ff9b::7f00:1"),
    ("sixtofour.test", "2002:7f00:1::1"),
    ("mapped.test", "::ffff:100.100.100.200"),
];

/// The upstream: listens on every address (IPv4 and IPv6), appends every
/// byte it receives to `log`, answers 200, and says it is ready.
const UPSTREAM: &str = r#"
import socket, sys, threading
log, ready = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
s.bind(('::', int(sys.argv[3])))
s.listen(64)
open(ready, 'w').write('ready')
def serve(c):
    # Everything the connection brings within half a second, recorded.
    c.settimeout(0.5)
    data = b''
    try:
        while True:
            b = c.recv(65536)
            if not b:
                break
            data += b
    except OSError:
        pass
    with open(log, 'ab') as f:
        f.write(data)
    try:
        c.sendall(b'HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok')
    except OSError:
        pass
    c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"#;

/// The confined client: each argument is `label=HEX`, bytes sent as
/// they are on a connection of their own to the proxy; prints
/// `label=STATUS` (or `label=error ...`). An argument `host:port` with no
/// `=` is the request `GET http://host:port/probe-host:port`.
const CLIENT: &str = r#"
import os, socket, sys
port = int(os.environ['HTTP_PROXY'].rsplit(':', 1)[1])
for arg in sys.argv[1:]:
    if '=' in arg:
        label, hexed = arg.split('=', 1)
        data = bytes.fromhex(hexed)
    else:
        label = arg
        data = ('GET http://%s/probe-%s HTTP/1.0\r\nHost: %s\r\n\r\n' % (arg, arg, arg)).encode()
    try:
        s = socket.create_connection(('127.0.0.1', port), timeout=30)
        s.sendall(data)
        head = s.recv(100).split(b' ')
        print('%s=%s' % (label, head[1].decode() if len(head) > 1 else 'empty'))
    except OSError as e:
        print('%s=error %s' % (label, e))
"#;

struct Outcome {
    /// `target=status` lines the client printed.
    stdout: String,
    /// Every byte the upstreams received.
    received: String,
}

/// Run the client for `targets` under `policy` (a body) in a namespace of
/// its own, as the module says.
fn attempt(dir: &Path, policy: &str, targets: &[String]) -> Outcome {
    assert!(
        rustix::process::geteuid().is_root(),
        "these tests make network and mount namespaces: run them as root"
    );
    let hosts = dir.join("hosts");
    let mut h = String::from("127.0.0.1 localhost\n::1 localhost\n");
    for (n, a) in NAMES {
        h.push_str(&format!("{a} {n}\n"));
    }
    std::fs::write(&hosts, h).unwrap();
    let p = dir.join("policy.toml");
    std::fs::write(&p, policy).unwrap();
    let log = dir.join("received");
    let ready = dir.join("ready");
    let _ = std::fs::remove_file(&ready);
    std::fs::write(&log, "").unwrap();
    std::fs::write(dir.join("upstream.py"), UPSTREAM).unwrap();
    std::fs::write(dir.join("client.py"), CLIENT).unwrap();
    let script = format!(
        "set -e\n\
         ip link set lo up\n\
         for a in 93.184.216.1/32 100.100.100.200/32 10.9.9.9/32; do ip addr add $a dev lo; done\n\
         ip addr add fd00:ec2::254/128 dev lo nodad\n\
         mount --bind {hosts} /etc/hosts\n\
         python3 {dir}/upstream.py {log} {ready} {PORT} &\n\
         up=$!\n\
         for i in $(seq 100); do [ -e {ready} ] && break; sleep 0.05; done\n\
         set +e\n\
         {bin} exec --policy {p} -- /usr/bin/python3 {dir}/client.py \"$@\"\n\
         kill $up\n",
        hosts = hosts.display(),
        dir = dir.display(),
        log = log.display(),
        ready = ready.display(),
        bin = common::rootfence(),
        p = p.display(),
    );
    let out = Command::new("unshare")
        .args(["--net", "--mount", "--propagation", "private", "sh", "-c"])
        .arg(&script)
        .arg("sh")
        .args(targets)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Outcome {
        stdout,
        received: String::from_utf8_lossy(&std::fs::read(&log).unwrap()).into_owned(),
    }
}

fn policy(entries: &[String], pins: &[(&str, &str)]) -> String {
    let list = entries
        .iter()
        .map(|e| format!("{e:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    let pins = pins
        .iter()
        .map(|(n, a)| format!("{n:?} = {a:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    format!("version = 1\n[network]\nallow_domains = [{list}]\nhosts = {{ {pins} }}\n")
}

#[test]
fn a_listed_name_reaches_no_special_address_and_none_of_this_machine() {
    let dir = tempfile::tempdir().unwrap();
    let names: Vec<String> = NAMES.iter().map(|(n, _)| format!("{n}:{PORT}")).collect();
    let o = attempt(dir.path(), &policy(&names, &[]), &names);
    for n in &names {
        assert!(
            o.stdout.contains(&format!("{n}=403")),
            "{n} not refused:\n{}",
            o.stdout
        );
    }
    assert_eq!(o.received, "", "an upstream was reached:\n{}", o.stdout);
}

#[test]
fn the_same_addresses_named_by_the_policy_are_reached() {
    // The allowed twin: each address the policy names itself, or a name
    // the policy pins to it, reaches its upstream.
    let dir = tempfile::tempdir().unwrap();
    let targets: Vec<String> = [
        "93.184.216.1".to_string(),
        "[fd00:ec2::254]".to_string(),
        "meta4.test".to_string(),
        "private.test".to_string(),
    ]
    .into_iter()
    .map(|h| format!("{h}:{PORT}"))
    .collect();
    let o = attempt(
        dir.path(),
        &policy(
            &targets,
            &[
                ("meta4.test", "100.100.100.200"),
                ("private.test", "10.9.9.9"),
            ],
        ),
        &targets,
    );
    for t in &targets {
        assert!(
            o.stdout.contains(&format!("{t}=200")),
            "{t} not reached:\n{}",
            o.stdout
        );
        assert!(
            o.received.contains(&format!("GET /probe-{t} ")),
            "{t} not received:\n{}",
            o.received
        );
    }
}

/// `label=HEX` of `bytes`, for the client.
fn raw(label: &str, bytes: &str) -> String {
    let hex: String = bytes.bytes().map(|b| format!("{b:02x}")).collect();
    format!("{label}={hex}")
}

#[test]
fn one_request_per_connection_and_only_its_declared_body() {
    let dir = tempfile::tempdir().unwrap();
    let site = format!("site.test:{PORT}");
    let attacks = [
        raw(
            "pipelined",
            &format!(
                "GET http://{site}/first HTTP/1.1\r\nHost: {site}\r\n\r\nGET http://evil.test:{PORT}/pipelined HTTP/1.1\r\nHost: evil.test\r\n\r\n"
            ),
        ),
        raw(
            "after_body",
            &format!(
                "POST http://{site}/second HTTP/1.1\r\nContent-Length: 5\r\n\r\nhelloGET /smuggled-after-body HTTP/1.1\r\nHost: evil.test\r\n\r\n"
            ),
        ),
        raw(
            "after_chunks",
            &format!(
                "POST http://{site}/third HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\nGET /smuggled-after-chunks HTTP/1.1\r\nHost: evil.test\r\n\r\n"
            ),
        ),
        raw(
            "both_lengths",
            &format!(
                "POST http://{site}/both-lengths HTTP/1.1\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled-te HTTP/1.1\r\n\r\n"
            ),
        ),
        raw(
            "two_lengths",
            &format!(
                "POST http://{site}/two-lengths HTTP/1.1\r\nContent-Length: 0\r\nContent-Length: 40\r\n\r\nGET /smuggled-cl HTTP/1.1\r\n\r\n"
            ),
        ),
        raw(
            "bad_length",
            &format!("POST http://{site}/bad-length HTTP/1.1\r\nContent-Length: +5\r\n\r\nhello"),
        ),
        raw(
            "connection_names_length",
            &format!(
                "POST http://{site}/connection-cl HTTP/1.1\r\nContent-Length: 5\r\nConnection: Content-Length\r\n\r\nhello"
            ),
        ),
    ];
    let o = attempt(
        dir.path(),
        &policy(std::slice::from_ref(&site), &[("site.test", "10.9.9.9")]),
        &attacks,
    );
    for ok in ["pipelined", "after_body", "after_chunks"] {
        assert!(
            o.stdout.contains(&format!("{ok}=200")),
            "{ok}:\n{}",
            o.stdout
        );
    }
    for refused in [
        "both_lengths",
        "two_lengths",
        "bad_length",
        "connection_names_length",
    ] {
        assert!(
            o.stdout.contains(&format!("{refused}=400")),
            "{refused}:\n{}",
            o.stdout
        );
    }
    // The twins: each first request and its body reached the upstream.
    for seen in [
        "GET /first ",
        "POST /second ",
        "hello",
        "POST /third ",
        "0\r\n\r\n",
    ] {
        assert!(
            o.received.contains(seen),
            "{seen:?} missing:\n{}",
            o.received
        );
    }
    // Nothing after a body, nothing of an ambiguous request.
    for never in [
        "pipelined",
        "smuggled",
        "evil.test",
        "both-lengths",
        "two-lengths",
        "bad-length",
        "connection-cl",
    ] {
        assert!(
            !o.received.contains(never),
            "{never:?} reached the upstream:\n{}",
            o.received
        );
    }
}

#[test]
fn every_refusal_is_audited_with_what_was_asked() {
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let site = format!("site.test:{PORT}");
    let attacks = [
        raw(
            "https_absolute",
            "GET https://secret.test/x HTTP/1.1\r\nHost: secret.test\r\n\r\n",
        ),
        raw(
            "userinfo",
            "GET http://me:pw@userinfo.test/ HTTP/1.1\r\n\r\n",
        ),
        raw("http12", "GET http://http12.test/ HTTP/1.2\r\n\r\n"),
        raw("http09", "GET http://http09.test/\r\n\r\n"),
        raw("lower_connect", "connect lower.test:443 HTTP/1.1\r\n\r\n"),
        raw(
            "origin_form",
            "GET /x HTTP/1.1\r\nHost: originform.test\r\n\r\n",
        ),
        // The allowed twin.
        raw(
            "allowed",
            &format!("GET http://{site}/allowed HTTP/1.1\r\nHost: {site}\r\n\r\n"),
        ),
    ];
    let body = format!(
        "{}[audit]\nfile = {:?}\n",
        policy(std::slice::from_ref(&site), &[("site.test", "10.9.9.9")]),
        audit.display().to_string()
    );
    let o = attempt(dir.path(), &body, &attacks);
    assert!(o.stdout.contains("allowed=200"), "{}", o.stdout);
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&audit)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for (asked, host) in [
        ("https://secret.test/x", "secret.test"),
        ("http://me:pw@userinfo.test/", "userinfo.test"),
        ("http://http12.test/", "http12.test"),
        ("http://http09.test/", "http09.test"),
        ("lower.test:443", "lower.test"),
        ("originform.test", "originform.test"),
    ] {
        let l = lines
            .iter()
            .find(|l| l["asked"] == asked)
            .unwrap_or_else(|| panic!("{asked} not audited: {lines:?}"));
        assert_eq!(l["decision"], "refused", "{l}");
        assert_eq!(l["target"]["host"], host, "{l}");
        assert!(l["reason"].as_str().is_some_and(|r| !r.is_empty()), "{l}");
    }
    assert!(
        lines
            .iter()
            .any(|l| l["decision"] == "allowed" && l["target"]["host"] == "site.test"),
        "{lines:?}"
    );
    assert_eq!(lines.len(), 7, "{lines:?}");
}
