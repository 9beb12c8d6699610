// The cases of the `net_domains` suites (included by tests/net/main.rs in
// each mode: `domains`, with the server's own namespaces, `domains_no_ns`,
// without, `domains_no_landlock`, on the view + seccomp rung, and
// `domains_user`, as an unprivileged user; the clients
// installed in tests/peers, which that user cannot reach, are in
// net_domains_peers.rs): network by domain, against a local site (plain HTTP and TLS on
// 127.0.0.2, names pinned by the policy) and listeners on this machine,
// judged from outside by what reached them.

use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::net::{TcpListener, UdpSocket};
use std::process::Stdio;

use common::{Probe, Tree};
use net_support::{LoopbackService, Site};

/// A site for `t` serving `names`, its CA in the read-only root.
fn site(t: &Tree, names: &[&str]) -> Site {
    Site::start(&t.p("site-files"), &t.ro, names)
}

/// Run `script` with sh, confined under `policy` (a body).
fn sh(t: &Tree, policy: &str, script: &str) -> Probe {
    let p = t.policy("net.toml", policy);
    Probe::new(t.run(&["--policy", &p], &["/bin/sh", "-c", script]))
}

#[test]
fn the_design_is_the_one_of_the_trees_rung() {
    // With namespaces (the view + seccomp rung included), the server's own
    // network namespace; without, the supervised connect().
    let t = tree();
    let p = t.policy(
        "net.toml",
        "version = 1\n[network]\nallow_domains = [\"site.test\"]\n",
    );
    let out = t.run(&["--log", "info", "--policy", &p], &["/bin/true"]);
    let err = common::stderr(&out);
    assert!(out.status.success(), "{err}");
    let design = if t.namespaces {
        "(in the server's own network namespace, which holds nothing else)"
    } else {
        "(on rootfence's loopback; the server's connect() judged by rootfence)"
    };
    assert!(err.contains(design), "not {design}:\n{err}");
    assert!(err.contains("tcp to rootfence's network proxy only"), "{err}");
}

#[test]
fn allowed_names_work_through_curl_and_urllib() {
    let t = tree();
    let s = site(&t, &["site.test"]);
    let (h, tls, ca) = (s.http, s.https, s.ca.display().to_string());
    let script = format!(
        "curl -sS -o /dev/null -w 'curl_http=%{{http_code}}\\n' http://site.test:{h}/hello/curl-http\n\
         curl -sS --cacert {ca} -o /dev/null -w 'curl_https=%{{http_code}}\\n' https://site.test:{tls}/hello/curl-https\n\
         /usr/bin/python3 -c \"\n\
import ssl, urllib.request as u\n\
c = ssl.create_default_context(cafile='{ca}')\n\
print('urllib_http=' + str(u.urlopen('http://site.test:{h}/hello/urllib-http').status))\n\
print('urllib_https=' + str(u.urlopen('https://site.test:{tls}/hello/urllib-https', context=c).status))\n\"\n"
    );
    let p = sh(&t, &s.policy(&["site.test"], &[]), &script);
    for (name, want) in [
        ("curl_http", "200"),
        ("curl_https", "200"),
        ("urllib_http", "200"),
        ("urllib_https", "200"),
    ] {
        p.expect(name, want);
    }
    // Judged at the site: each request arrived, for the name the client
    // asked for (plain HTTP forwarded with Host from the URL; TLS end to
    // end through CONNECT).
    for path in ["curl-http", "urllib-http"] {
        assert_eq!(
            s.hosts_of(&format!("/hello/{path}")),
            vec![format!("site.test:{h}")],
            "{path}: {:?}",
            s.requests()
        );
    }
    for path in ["curl-https", "urllib-https"] {
        assert_eq!(
            s.hosts_of(&format!("/hello/{path}")),
            vec![format!("site.test:{tls}")],
            "{path}: {:?}",
            s.requests()
        );
    }
}

#[test]
fn large_uploads_stream_through_the_proxy() {
    // The upstream answers once it has the whole body; the body must flow
    // while the proxy waits for that answer (plain HTTP), and through the
    // tunnel (TLS).
    let t = tree();
    let s = site(&t, &["site.test"]);
    let (h, tls, ca) = (s.http, s.https, s.ca.display().to_string());
    let big = t.p("r/big.bin");
    std::fs::write(&big, vec![b'x'; 16 << 20]).unwrap();
    let p = sh(
        &t,
        &s.policy(&["site.test"], &[]),
        &format!(
            "echo \"plain=$(curl -sS -m 60 --data-binary @{b} http://site.test:{h}/upload)\"\n\
             echo \"tls=$(curl -sS -m 60 --cacert {ca} --data-binary @{b} https://site.test:{tls}/upload)\"\n",
            b = big.display()
        ),
    );
    p.expect("plain", "posted 16777216 bytes")
        .expect("tls", "posted 16777216 bytes");
}

#[test]
fn a_name_not_listed_gets_403_naming_the_rule() {
    let t = tree();
    let s = site(&t, &["site.test"]);
    let (h, ca) = (s.http, s.ca.display().to_string());
    let p = sh(
        &t,
        &s.policy(&["site.test"], &[]),
        &format!(
            "curl -sS -o body.txt -w 'plain=%{{http_code}}\\n' http://other.test/hello/other; echo \"body=$(head -c 400 body.txt)\"\n\
             curl -sS --cacert {ca} https://other.test/hello/other-tls; echo \"tunnel=$?\"\n\
             curl -sS -o port.txt -w 'port=%{{http_code}}\\n' http://site.test:1/hello/port; echo \"port_body=$(head -c 400 port.txt)\"\n\
             curl -sS -o /dev/null -w 'allowed=%{{http_code}}\\n' http://site.test:{h}/hello/allowed\n\
             /usr/bin/python3 -c \"\n\
import urllib.request as u\n\
try:\n    u.urlopen('https://other.test/')\n    print('urllib=OK')\n\
except OSError as e:\n    print('urllib=' + ('403' if '403' in str(e) else str(e)))\n\"\n"
        )
        .replace("body.txt", &t.s("r/body.txt"))
        .replace("port.txt", &t.s("r/port.txt")),
    );
    let policy = t.p("net.toml");
    p.expect("plain", "403")
        .expect(
            "body",
            &format!(
                "rootfence refused other.test:80: not in [network] allow_domains (policy {}); to allow it, add \"other.test\" to [network] allow_domains",
                policy.display()
            ),
        )
        // curl: the proxy refused the CONNECT (exit 56).
        .expect("tunnel", "56")
        .expect("port", "403")
        .expect("urllib", "403")
        .expect("allowed", "200");
    assert!(
        p.value("port_body")
            .contains(&format!("\"site.test:{h}\" allows port {h} only")),
        "{}",
        p.value("port_body")
    );
    assert!(s.saw("/hello/allowed"));
    assert!(!s.saw("/hello/port") && !s.saw("/hello/other"), "{:?}", s.requests());
}

#[test]
fn a_wildcard_allows_its_subdomains_not_its_apex() {
    let t = tree();
    let s = site(&t, &["a.wild.test", "b.a.wild.test"]);
    let (h, tls, ca) = (s.http, s.https, s.ca.display().to_string());
    let policy = format!(
        "version = 1\n[network]\nallow_domains = [\"*.wild.test:{h}\", \"*.wild.test:{tls}\"]\nhosts = {{ \"a.wild.test\" = \"127.0.0.2\", \"b.a.wild.test\" = \"127.0.0.2\" }}\n"
    );
    let p = sh(
        &t,
        &policy,
        &format!(
            "curl -sS -o /dev/null -w 'sub=%{{http_code}}\\n' http://a.wild.test:{h}/hello/sub\n\
             curl -sS -o /dev/null -w 'deep=%{{http_code}}\\n' --cacert {ca} https://b.a.wild.test:{tls}/hello/deep\n\
             curl -sS -o apex.txt -w 'apex=%{{http_code}}\\n' http://wild.test:{h}/hello/apex; echo \"apex_body=$(cat apex.txt)\"\n\
             curl -sS --cacert {ca} https://wild.test:{tls}/hello/apex-tls; echo \"apex_tls=$?\"\n\
             curl -sS -o /dev/null -w 'suffix=%{{http_code}}\\n' http://evilwild.test:{h}/hello/suffix\n"
        )
        .replace("apex.txt", &t.s("r/apex.txt")),
    );
    p.expect("sub", "200")
        .expect("deep", "200")
        .expect("apex", "403")
        .expect("apex_tls", "56")
        .expect("suffix", "403");
    assert!(
        p.value("apex_body")
            .contains("allows the subdomains of wild.test, not wild.test itself"),
        "{}",
        p.value("apex_body")
    );
    assert!(s.saw("/hello/sub") && s.saw("/hello/deep"));
    assert!(!s.saw("/hello/apex") && !s.saw("/hello/suffix"));
}

#[test]
fn direct_connections_and_noproxy_are_refused() {
    let t = tree();
    let s = site(&t, &["site.test"]);
    let h = s.http;
    let p = sh(
        &t,
        &s.policy(&["site.test"], &[]),
        &format!(
            "curl -sS -m 10 --noproxy '*' http://site.test:{h}/hello/noproxy; echo \"noproxy=$?\"\n\
             curl -sS -m 10 --noproxy '*' --resolve site.test:{h}:127.0.0.2 http://site.test:{h}/hello/noproxy-resolved; echo \"noproxy_resolved=$?\"\n\
             curl -sS -m 10 -x '' http://127.0.0.2:{h}/hello/no-proxy-option; echo \"empty_proxy=$?\"\n\
             curl -sS -o /dev/null -w 'proxied=%{{http_code}}\\n' http://site.test:{h}/hello/proxied\n\
             /usr/bin/python3 -c \"\n{prelude}\n\
def direct(addr):\n\
\x20   s = socket.create_connection(addr, timeout=5)\n\
\x20   s.sendall(b'GET /hello/direct HTTP/1.0\\\\r\\\\nHost: site.test\\\\r\\\\n\\\\r\\\\n')\n\
\x20   s.recv(100)\n\
check('site_address', lambda: direct(('127.0.0.2', {h})))\n\
check('site_address_mapped', lambda: direct(('::ffff:127.0.0.2', {h})))\n\
check('any_address', lambda: socket.create_connection(('93.184.216.34', 443), timeout=5))\n\
check('any_v6', lambda: socket.create_connection(('2606:2800:220:1::1', 443), timeout=5))\n\
{via}\"\n",
            prelude = common::PRELUDE.replace('"', "\\\""),
            via = s.via_proxy_check("via_proxy", "site.test", "/hello/via-proxy")
        ),
    );
    // curl without the proxy: the name does not resolve in the sandbox
    // (6), and the address is not reachable (7).
    p.expect("noproxy", "6")
        .expect("noproxy_resolved", "7")
        .allowed_with("proxied", "200");
    for name in ["site_address", "site_address_mapped", "any_address", "any_v6"] {
        p.expect_any(name, &["EACCES", "EPERM", "ENETUNREACH", "ECONNREFUSED"]);
    }
    // The same connection and request, to rootfence's proxy.
    p.allowed("via_proxy");
    // Judged at the site: only the proxied requests reached it.
    assert!(s.saw("/hello/proxied") && s.saw("/hello/via-proxy"));
    for path in [
        "/hello/noproxy",
        "/hello/noproxy-resolved",
        "/hello/no-proxy-option",
        "/hello/direct",
    ] {
        assert!(!s.saw(path), "{path} reached the site: {:?}", s.requests());
    }
}

#[test]
fn the_proxy_port_on_another_address_reaches_nothing() {
    // Landlock rules TCP by port: a server that knows the proxy's port
    // tries it on another address, where a listener waits.
    let t = tree();
    let s = site(&t, &["site.test"]);
    let p = t.policy("net.toml", &s.policy(&["site.test"], &[]));
    let code = format!(
        "{}\nport = int(os.environ['HTTP_PROXY'].rsplit(':', 1)[1])\n\
         print('port=%d' % port, flush=True)\n\
         sys.stdin.readline()\n\
         check('other_address', lambda: socket.create_connection(('127.0.0.2', port), timeout=5))\n\
         check('other_v6', lambda: socket.create_connection(('::ffff:127.0.0.2', port), timeout=5))\n\
         check('proxy', lambda: socket.create_connection(('127.0.0.1', port), timeout=5))\n",
        common::PRELUDE
    );
    let py = common::python();
    let mut c = t.command(&["--policy", &p], &[py.to_str().unwrap(), "-c", &code]);
    c.stdin(Stdio::piped()).stdout(Stdio::piped());
    let mut child = c.spawn().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    let port: u16 = first
        .trim()
        .strip_prefix("port=")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port line: {first:?}"));
    let l = TcpListener::bind(("127.0.0.2", port))
        .unwrap_or_else(|e| panic!("cannot listen on 127.0.0.2:{port} for the test: {e}"));
    l.set_nonblocking(true).unwrap();
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    child.wait().unwrap();
    let results: std::collections::BTreeMap<&str, &str> =
        rest.lines().filter_map(|l| l.split_once('=')).collect();
    assert!(
        matches!(results.get("other_address"), Some(&("EACCES" | "EPERM" | "ECONNREFUSED"))),
        "{rest}"
    );
    assert!(
        matches!(results.get("other_v6"), Some(&("EACCES" | "EPERM" | "ECONNREFUSED"))),
        "{rest}"
    );
    assert_eq!(results.get("proxy"), Some(&"OK"), "{rest}");
    match l.accept() {
        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
        other => panic!("the listener on the proxy's port at another address was reached: {other:?}"),
    }
}

#[test]
fn udp_dns_and_raw_sockets_are_refused() {
    let t = tree();
    let s = site(&t, &["site.test"]);
    let u = UdpSocket::bind("127.0.0.1:0").unwrap();
    let q = u.local_addr().unwrap().port();
    let h = s.http;
    let p = sh(
        &t,
        &s.policy(&["site.test"], &[]),
        &format!(
            "/usr/bin/python3 -c \"\n{prelude}\n\
import urllib.request\n\
check('udp', lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'leak', ('127.0.0.1', {q})))\n\
check('udp6', lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM))\n\
check('icmp', lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP))\n\
check('raw', lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))\n\
check('packet', lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0))\n\
check('dns_tcp', lambda: socket.create_connection(('127.0.0.53', 53), timeout=5))\n\
check('tcp_socket', lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM))\n\
try:\n    socket.getaddrinfo('example.com', 443)\n    print('resolve=OK')\n\
except socket.gaierror:\n    print('resolve=refused')\n\
print('proxied=' + str(urllib.request.urlopen('http://site.test:{h}/hello/proxied').status))\n\
\"\n",
            prelude = common::PRELUDE.replace('"', "\\\"")
        ),
    );
    p.expect("udp", "EPERM")
        .expect("udp6", "EPERM")
        .expect("icmp", "EPERM")
        .expect("raw", "EPERM")
        .expect("packet", "EPERM")
        .expect_any("dns_tcp", &["EACCES", "EPERM", "ECONNREFUSED"])
        .expect("resolve", "refused")
        // A TCP socket, and through the proxy the name resolves and the
        // site answers.
        .allowed("tcp_socket")
        .allowed_with("proxied", "200");
    u.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 16];
    match u.recv_from(&mut buf) {
        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
        other => panic!("the UDP listener received something: {other:?}"),
    }
    assert!(s.saw("/hello/proxied"));
}

#[test]
fn loopback_services_are_reached_through_the_proxy_only_when_listed() {
    let t = tree();
    let s = site(&t, &["site.test"]);
    let svc = LoopbackService::start();
    let q = svc.port;
    let attempts = format!(
        "for u in http://127.0.0.1:{q}/ http://localhost:{q}/ 'http://[::1]:{q}/' http://2130706433:{q}/ http://127.1:{q}/ http://0.0.0.0:{q}/ http://0x7f000001:{q}/; do\n\
           curl -sS -o /dev/null -w \"%{{http_code}}\\n\" \"$u\"\n\
         done | sort -u | tr '\\n' ' ' | sed 's/^/through_proxy=/'; echo\n\
         curl -sS -p http://127.0.0.1:{q}/; echo \"tunnel=$?\"\n"
    );
    let p = sh(&t, &s.policy(&["site.test"], &[]), &attempts);
    p.expect("through_proxy", "403 ").expect("tunnel", "56");
    assert_eq!(svc.connections(), 0, "the host's loopback service was reached");
    // Its twin: listed as localhost:PORT, the same service is reached.
    let p = sh(
        &t,
        &s.policy(&["site.test"], &[&format!("localhost:{q}")]),
        &format!("echo \"listed=$(curl -sS http://localhost:{q}/)\"\n"),
    );
    p.expect("listed", "host loopback ok");
    assert_eq!(svc.connections(), 1);
}

#[test]
fn every_decision_is_audited() {
    let t = tree();
    let s = site(&t, &["site.test"]);
    let audit = t.p("audit.jsonl");
    let h = s.http;
    let body = format!(
        "{}[audit]\nfile = \"{}\"\n",
        s.policy(&["site.test"], &[]),
        audit.display()
    );
    sh(
        &t,
        &body,
        &format!(
            "curl -sS -o /dev/null -w 'allowed=%{{http_code}}\\n' http://site.test:{h}/hello/a\n\
             curl -sS -o /dev/null -w 'refused=%{{http_code}}\\n' http://other.test/\n"
        ),
    )
    .expect("allowed", "200")
    .expect("refused", "403");
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&audit)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0]["kind"], "network");
    assert_eq!(lines[0]["method"], "GET");
    assert_eq!(lines[0]["decision"], "allowed");
    assert_eq!(lines[0]["target"]["port"], h);
    assert_eq!(lines[0]["address"], format!("127.0.0.2:{h}"));
    assert_eq!(
        lines[0]["rule"],
        format!("allow_domains \"site.test:{h}\", hosts \"site.test\"")
    );
    assert_eq!(lines[1]["decision"], "refused");
    assert_eq!(lines[1]["target"]["host"], "other.test");
    assert_eq!(lines[1]["reason"], "not in [network] allow_domains");
}
