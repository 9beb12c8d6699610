//! One client connection of the proxy, as a state machine with no I/O:
//! events in (bytes from the client or the upstream, a name resolved, a
//! connection made or failed), actions out (resolve, connect, write,
//! splice the two sockets, close, audit). The shell ([`super::shell`])
//! carries the actions out; tests drive it with no socket.
//!
//! A connection serves one request: the head is read and judged against
//! the list; an allowed name is resolved (or taken from the policy's
//! pins), its addresses checked ([`rule::reachable`]), and the first that
//! answers is connected. A `CONNECT` then becomes a tunnel; an
//! absolute-form request is sent upstream in origin form with its body as
//! its head declares it and nothing after it ([`super::body`]), and its
//! response head rewritten to close. Every decision is audited once, a
//! malformed request too (with what it asked for, as far as it was read).

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use serde::Serialize;

use super::body::Body;
use super::http::{self, HeadError, Request};
use super::rule::{self, DomainRule, Pins, Reach, Refusal, Target, TargetHost, Verdict};

/// What the proxy enforces: the list, the pins, and the policy's name
/// for messages.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// `[network] allow_domains`, in order.
    pub rules: Vec<DomainRule>,
    /// `[network] hosts`.
    pub pins: Pins,
    /// The policy's name (a file, or the built-in default).
    pub policy: String,
}

/// Why the shell could not resolve a name or connect to an address.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Unanswered {
    /// The resolver or the kernel said no.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// Nothing came back in time.
    #[error("no answer within {} s", .0.as_secs())]
    Timeout(std::time::Duration),
}

/// Something that happened.
#[derive(Debug)]
pub enum Event<'a> {
    /// Bytes from the client.
    Client(&'a [u8]),
    /// The name of a [`Action::Resolve`] resolved (addresses in the
    /// resolver's order), or not (why).
    Resolved(Result<Vec<IpAddr>, Unanswered>),
    /// The [`Action::Connect`] succeeded.
    Connected,
    /// The [`Action::Connect`] failed (why).
    ConnectFailed(Unanswered),
    /// The [`Action::Connect`] was of a [`Reach::Global`] address that is
    /// one of this machine's own: not connected.
    OwnAddress,
    /// Bytes from the upstream (only while its response head is read).
    Upstream(&'a [u8]),
    /// The upstream closed before its response head was complete.
    UpstreamGone,
}

/// Something the shell must do, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Resolve this name; answer with [`Event::Resolved`].
    Resolve(String),
    /// Connect to this address; answer with [`Event::Connected`] or
    /// [`Event::ConnectFailed`]. With [`Reach::Global`] (the policy does
    /// not name it), first check that it is not an address of this
    /// machine's own interfaces, as they are now; if it is, answer
    /// [`Event::OwnAddress`] without connecting.
    Connect(SocketAddr, Reach),
    /// Write to the client.
    ToClient(Vec<u8>),
    /// Write to the upstream.
    ToUpstream(Vec<u8>),
    /// From now on copy what the client sends to the upstream, up to the
    /// end of the request's body as this [`Body`] finds it (the rest is
    /// dropped), while the response head is read: a client may wait for
    /// `100 Continue`, an upstream for the whole body, before the other
    /// goes on.
    StreamBody(Body),
    /// Read the upstream (its response head); answer with
    /// [`Event::Upstream`] or [`Event::UpstreamGone`].
    ReadUpstream,
    /// Copy both ways until both sides are done; then the connection is
    /// over.
    Splice,
    /// Close both sides; the connection is over.
    Close,
    /// Record a decision.
    Audit(Judged),
}

/// What was decided about a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Decision {
    /// Connected.
    Allowed,
    /// Refused by the list (403).
    Refused,
    /// Allowed by the list, but not reached (502/504).
    Failed,
}

impl Decision {
    /// The decision as the audit log writes it (as it is serialized).
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allowed => "allowed",
            Decision::Refused => "refused",
            Decision::Failed => "failed",
        }
    }
}

/// One decision, for the audit log and `learn`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Judged {
    /// `CONNECT`, `GET`, ...
    pub method: String,
    /// The host and port asked for; `None` when a malformed request did
    /// not name one readably (see `asked`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<Target>,
    /// A malformed request's target as far as it was read (its request
    /// target, or its `Host`), printable ASCII, at most 256 bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub asked: Option<String>,
    /// What was decided.
    pub decision: Decision,
    /// The entry that decided (`allow_domains "x"`, `hosts "x"`), when one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// Why it was refused or failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The address connected to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<SocketAddr>,
    /// Refused because no entry allows this host on this port: what an
    /// `allow_domains` line would change (not a special address).
    #[serde(skip)]
    pub unlisted: bool,
}

/// Where the connection is.
#[derive(Debug)]
enum State {
    /// Reading the request head.
    Head,
    /// Waiting for the name's addresses.
    Resolving { req: Request, rule: usize },
    /// Trying the addresses in turn.
    Connecting {
        req: Request,
        rule: usize,
        left: VecDeque<(SocketAddr, Reach)>,
        trying: (SocketAddr, Reach),
        refused: Option<&'static str>,
    },
    /// Reading the upstream's response head (plain HTTP).
    Response,
    /// Tunnelling or closed: nothing more to decide.
    Done,
}

/// One client connection.
#[derive(Debug)]
pub struct Conn {
    config: Arc<Config>,
    state: State,
    /// The client's bytes so far (the head and what followed it).
    buf: Vec<u8>,
    /// The upstream's bytes so far (its response head).
    up: Vec<u8>,
}

impl Conn {
    /// A new connection, reading its head.
    pub fn new(config: Arc<Config>) -> Conn {
        Conn {
            config,
            state: State::Head,
            buf: Vec::new(),
            up: Vec::new(),
        }
    }

    /// Whether it waits for the client's bytes (its head).
    pub fn wants_client(&self) -> bool {
        matches!(self.state, State::Head)
    }

    /// Take one event; the actions to carry out, in order.
    pub fn on(&mut self, ev: Event<'_>) -> Vec<Action> {
        match (std::mem::replace(&mut self.state, State::Done), ev) {
            (State::Head, Event::Client(b)) => self.head(b),
            (State::Resolving { req, rule }, Event::Resolved(r)) => self.resolved(req, rule, r),
            (
                State::Connecting {
                    req,
                    rule,
                    left,
                    trying,
                    refused,
                },
                ev @ (Event::Connected | Event::ConnectFailed(_) | Event::OwnAddress),
            ) => self.connect_result(req, rule, left, trying, refused, ev),
            (State::Response, Event::Upstream(b)) => self.response(b),
            (State::Response, Event::UpstreamGone) => vec![
                Action::ToClient(http::answer(
                    502,
                    "Bad Gateway",
                    "rootfence: the upstream server closed the connection before answering",
                )),
                Action::Close,
            ],
            (_, _) => vec![Action::Close],
        }
    }

    fn head(&mut self, bytes: &[u8]) -> Vec<Action> {
        self.buf.extend_from_slice(bytes);
        let Some(end) = http::head_end(&self.buf) else {
            if self.buf.len() > http::MAX_HEAD {
                return self.malformed(HeadError::TooLarge);
            }
            self.state = State::Head;
            return Vec::new();
        };
        let req = match http::parse_request(&self.buf[..end]) {
            Ok(r) => r,
            Err(e) => return self.malformed(e),
        };
        self.buf.drain(..end);
        let target = req.target().clone();
        let rule = match rule::judge(&self.config.rules, &target) {
            Verdict::Allowed { rule } => rule,
            Verdict::Refused(why) => return self.refuse(&req, why),
        };
        match &target.host {
            TargetHost::Ip(a) => self.try_addresses(req, rule, vec![*a]),
            TargetHost::Name(n) if n == "localhost" => {
                self.try_addresses(req, rule, rule::localhost())
            }
            TargetHost::Name(n) => match self.config.pins.get(n) {
                Some(a) => self.try_addresses(req, rule, vec![*a]),
                None => {
                    let name = n.clone();
                    self.state = State::Resolving { req, rule };
                    vec![Action::Resolve(name)]
                }
            },
        }
    }

    fn resolved(
        &mut self,
        req: Request,
        rule: usize,
        r: Result<Vec<IpAddr>, Unanswered>,
    ) -> Vec<Action> {
        match r {
            Ok(addrs) if !addrs.is_empty() => self.try_addresses(req, rule, addrs),
            Ok(_) => self.fail(
                &req,
                rule,
                502,
                "Bad Gateway",
                "the name has no address".into(),
            ),
            Err(e) => self.fail(
                &req,
                rule,
                502,
                "Bad Gateway",
                format!("cannot resolve the name: {e}"),
            ),
        }
    }

    /// Keep the addresses the entry may reach; connect to the first.
    fn try_addresses(&mut self, req: Request, rule: usize, addrs: Vec<IpAddr>) -> Vec<Action> {
        let r = &self.config.rules[rule];
        let pinned =
            matches!(&req.target().host, TargetHost::Name(n) if self.config.pins.contains_key(n));
        let port = req.target().port;
        let mut refused = None;
        let mut left: VecDeque<(SocketAddr, Reach)> = VecDeque::new();
        for a in addrs {
            match rule::reachable(r, pinned, a) {
                Ok(reach) => {
                    let s = SocketAddr::new(a, port);
                    if !left.iter().any(|(x, _)| *x == s) {
                        left.push_back((s, reach));
                    }
                }
                Err(kind) => refused = refused.or(Some(kind)),
            }
        }
        let Some(first) = left.pop_front() else {
            return self.refuse_addresses(&req, rule, refused.unwrap_or("not an address"));
        };
        self.state = State::Connecting {
            req,
            rule,
            left,
            trying: first,
            refused,
        };
        vec![Action::Connect(first.0, first.1)]
    }

    /// Every address of an allowed name is one it may not reach: 403
    /// naming the kind of address and the fix.
    fn refuse_addresses(&mut self, req: &Request, rule: usize, kind: &str) -> Vec<Action> {
        let r = &self.config.rules[rule];
        let port = req.target().port;
        let text = format!(
            "rootfence refused {}: {} resolves to {kind}, which a name reaches only when the policy names it ({} of policy {}): list the address itself (\"127.0.0.1:{port}\"), \"localhost:{port}\", or pin the name in [network] hosts",
            req.target(),
            req.target().host,
            r.text,
            self.config.policy
        );
        let audit = Judged {
            method: req.method().to_string(),
            target: Some(req.target().clone()),
            asked: None,
            decision: Decision::Refused,
            rule: Some(format!("allow_domains {:?}", r.text)),
            reason: Some(format!("resolves to {kind}")),
            address: None,
            unlisted: false,
        };
        vec![
            Action::Audit(audit),
            Action::ToClient(http::answer(403, "Forbidden", &text)),
            Action::Close,
        ]
    }

    /// Connect to the next address `left`, if any remains; else answer
    /// `req` with `none`.
    fn try_next(
        &mut self,
        req: Request,
        rule: usize,
        mut left: VecDeque<(SocketAddr, Reach)>,
        refused: Option<&'static str>,
        none: impl FnOnce(&mut Self, &Request) -> Vec<Action>,
    ) -> Vec<Action> {
        let Some(next) = left.pop_front() else {
            return none(self, &req);
        };
        self.state = State::Connecting {
            req,
            rule,
            left,
            trying: next,
            refused,
        };
        vec![Action::Connect(next.0, next.1)]
    }

    fn connect_result(
        &mut self,
        req: Request,
        rule: usize,
        left: VecDeque<(SocketAddr, Reach)>,
        trying: (SocketAddr, Reach),
        mut refused: Option<&'static str>,
        ev: Event<'_>,
    ) -> Vec<Action> {
        if let Event::OwnAddress = ev {
            const OWN: &str = "an address of this machine's own interfaces";
            refused = refused.or(Some(OWN));
            return self.try_next(req, rule, left, refused, |c, req| {
                c.refuse_addresses(req, rule, OWN)
            });
        }
        let trying = trying.0;
        if let Event::ConnectFailed(why) = ev {
            return self.try_next(req, rule, left, refused, |c, req| {
                c.fail(
                    req,
                    rule,
                    502,
                    "Bad Gateway",
                    format!("cannot connect to {trying}: {why}"),
                )
            });
        }
        let r = &self.config.rules[rule];
        let pinned =
            matches!(&req.target().host, TargetHost::Name(n) if self.config.pins.contains_key(n));
        let mut out = vec![Action::Audit(Judged {
            method: req.method().to_string(),
            target: Some(req.target().clone()),
            asked: None,
            decision: Decision::Allowed,
            rule: Some(if pinned {
                format!(
                    "allow_domains {:?}, hosts {:?}",
                    r.text,
                    req.target().host.to_string()
                )
            } else {
                format!("allow_domains {:?}", r.text)
            }),
            reason: None,
            address: Some(trying),
            unlisted: false,
        })];
        let rest = std::mem::take(&mut self.buf);
        match req {
            Request::Connect { .. } => {
                out.push(Action::ToClient(http::TUNNEL_OPEN.to_vec()));
                if !rest.is_empty() {
                    out.push(Action::ToUpstream(rest));
                }
                out.push(Action::Splice);
            }
            Request::Forward(f) => {
                // One request per connection: what follows its body is
                // dropped, never forwarded.
                let mut body = Body::new(f.body);
                let mut head = http::forward_head(&f);
                let n = match body.take(&rest) {
                    Ok(n) => n,
                    Err(e) => return self.malformed(e.into()),
                };
                head.extend_from_slice(&rest[..n]);
                out.push(Action::ToUpstream(head));
                // Even when the body is all there: from now on the client
                // is read only for its body, never spliced to the upstream.
                out.push(Action::StreamBody(body));
                out.push(Action::ReadUpstream);
                self.state = State::Response;
            }
        }
        out
    }

    fn response(&mut self, bytes: &[u8]) -> Vec<Action> {
        self.up.extend_from_slice(bytes);
        let mut out = Vec::new();
        loop {
            let Some(end) = http::head_end(&self.up) else {
                if self.up.len() > http::MAX_HEAD {
                    out.push(Action::ToClient(http::answer(
                        502,
                        "Bad Gateway",
                        "rootfence: the upstream's response head is too long",
                    )));
                    out.push(Action::Close);
                    return out;
                }
                self.state = State::Response;
                out.push(Action::ReadUpstream);
                return out;
            };
            match http::rewrite_response(&self.up[..end]) {
                Ok(h) => {
                    self.up.drain(..end);
                    out.push(Action::ToClient(h.bytes));
                    // 101 (an upgrade) cannot happen: Upgrade is never
                    // forwarded. Other informational heads come before
                    // the final one.
                    if (100..200).contains(&h.status) {
                        continue;
                    }
                    let rest = std::mem::take(&mut self.up);
                    if !rest.is_empty() {
                        out.push(Action::ToClient(rest));
                    }
                    out.push(Action::Splice);
                    return out;
                }
                Err(e) => {
                    out.push(Action::ToClient(http::answer(
                        502,
                        "Bad Gateway",
                        &format!("rootfence: the upstream's response head cannot be read: {e}"),
                    )));
                    out.push(Action::Close);
                    return out;
                }
            }
        }
    }

    /// A refusal by the list: 403 naming the rule, and the fix.
    fn refuse(&mut self, req: &Request, why: Refusal) -> Vec<Action> {
        let t = req.target();
        let c = &self.config;
        let (reason, rule, fix) = match &why {
            Refusal::NotListed => (
                "not in [network] allow_domains".to_string(),
                None,
                match &t.host {
                    TargetHost::Name(n) if rule::DEFAULT_PORTS.contains(&t.port) => {
                        format!("add \"{n}\" to [network] allow_domains")
                    }
                    TargetHost::Name(_) => format!("add \"{t}\" to [network] allow_domains"),
                    TargetHost::Ip(_) => format!(
                        "an IP address is reached only when it is listed itself: add \"{t}\" to [network] allow_domains"
                    ),
                },
            ),
            Refusal::Port { rule } => {
                let r = &c.rules[*rule];
                (
                    format!("{:?} allows {} only", r.text, r.ports()),
                    Some(*rule),
                    format!("add \"{t}\" to [network] allow_domains"),
                )
            }
            Refusal::Apex { rule } => {
                let r = &c.rules[*rule];
                (
                    format!(
                        "{:?} allows the subdomains of {}, not {} itself",
                        r.text, t.host, t.host
                    ),
                    Some(*rule),
                    format!("add \"{}\" to [network] allow_domains", t.host),
                )
            }
        };
        let text = format!(
            "rootfence refused {t}: {reason} (policy {}); to allow it, {fix}",
            c.policy
        );
        vec![
            Action::Audit(Judged {
                method: req.method().to_string(),
                target: Some(t.clone()),
                asked: None,
                decision: Decision::Refused,
                rule: rule.map(|i| format!("allow_domains {:?}", c.rules[i].text)),
                reason: Some(reason),
                address: None,
                unlisted: true,
            }),
            Action::ToClient(http::answer(403, "Forbidden", &text)),
            Action::Close,
        ]
    }

    fn fail(
        &mut self,
        req: &Request,
        rule: usize,
        status: u16,
        phrase: &str,
        why: String,
    ) -> Vec<Action> {
        let text = format!("rootfence could not reach {}: {why}", req.target());
        vec![
            Action::Audit(Judged {
                method: req.method().to_string(),
                target: Some(req.target().clone()),
                asked: None,
                decision: Decision::Failed,
                rule: Some(format!("allow_domains {:?}", self.config.rules[rule].text)),
                reason: Some(why),
                address: None,
                unlisted: false,
            }),
            Action::ToClient(http::answer(status, phrase, &text)),
            Action::Close,
        ]
    }
}

impl Conn {
    /// A head that cannot be served (malformed, or not what this proxy
    /// serves): 400 (431 when too large), audited with its target as far
    /// as it was read, and counted as asked for (`learn`) when no entry
    /// allows that host.
    fn malformed(&mut self, e: HeadError) -> Vec<Action> {
        let (status, phrase) = match e {
            HeadError::TooLarge => (431, "Request Header Fields Too Large"),
            _ => (400, "Bad Request"),
        };
        let head = match http::head_end(&self.buf) {
            Some(end) => &self.buf[..end],
            None => &self.buf[..self.buf.len().min(http::MAX_HEAD)],
        };
        let p = http::partial(head);
        let unlisted = p.target.as_ref().is_some_and(|t| {
            !matches!(rule::judge(&self.config.rules, t), Verdict::Allowed { .. })
        });
        vec![
            Action::Audit(Judged {
                method: p.method,
                target: p.target,
                asked: Some(p.asked),
                decision: Decision::Refused,
                rule: None,
                reason: Some(e.to_string()),
                address: None,
                unlisted,
            }),
            Action::ToClient(http::answer(status, phrase, &format!("rootfence: {e}"))),
            Action::Close,
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netproxy::body::Framing;

    fn config(rules: &[&str], pins: &[(&str, &str)]) -> Arc<Config> {
        Arc::new(Config {
            rules: rules
                .iter()
                .map(|r| DomainRule::parse(r).unwrap())
                .collect(),
            pins: pins
                .iter()
                .map(|(n, a)| (n.to_string(), a.parse().unwrap()))
                .collect(),
            policy: "test.toml".into(),
        })
    }

    fn body(actions: &[Action]) -> String {
        actions
            .iter()
            .filter_map(|a| match a {
                Action::ToClient(b) => Some(String::from_utf8_lossy(b).into_owned()),
                _ => None,
            })
            .collect()
    }

    fn text_of(actions: &[Action]) -> String {
        body(actions)
    }

    /// The one action connecting to `addr` as `reach`.
    fn connect(addr: &str, reach: Reach) -> Vec<Action> {
        vec![Action::Connect(addr.parse().unwrap(), reach)]
    }

    /// The resolver's answer: `addrs`.
    fn resolved(addrs: &[&str]) -> Event<'static> {
        Event::Resolved(Ok(addrs.iter().map(|a| a.parse().unwrap()).collect()))
    }

    /// A connection allowed to api.example.com that sent its `CONNECT`
    /// and waits for the name to be resolved.
    fn connecting_to_api_example_com() -> Conn {
        let mut c = Conn::new(config(&["api.example.com"], &[]));
        c.on(Event::Client(
            b"CONNECT api.example.com:443 HTTP/1.1\r\n\r\n",
        ));
        c
    }

    /// A connection allowed to site.test:8080 (pinned to 10.0.0.1) that
    /// sent `request`, and what it did once connected.
    fn connected_to_site_test(request: &[u8]) -> (Conn, Vec<Action>) {
        let mut c = Conn::new(config(&["site.test:8080"], &[("site.test", "10.0.0.1")]));
        c.on(Event::Client(request));
        let a = c.on(Event::Connected);
        (c, a)
    }

    /// After the audit record: `POST /p` with its two-byte body sent
    /// upstream whole, then the answer read.
    fn forwarded_whole() -> [Action; 3] {
        [
            Action::ToUpstream(b"POST /p HTTP/1.1\r\nHost: site.test:8080\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi".to_vec()),
            Action::StreamBody(Body::new(Framing::None)),
            Action::ReadUpstream,
        ]
    }

    fn audit(actions: &[Action]) -> &Judged {
        actions
            .iter()
            .find_map(|a| match a {
                Action::Audit(j) => Some(j),
                _ => None,
            })
            .expect("an audit record")
    }

    #[test]
    fn a_decision_is_logged_as_it_is_serialized() {
        for d in [Decision::Allowed, Decision::Refused, Decision::Failed] {
            assert_eq!(serde_json::to_value(d).unwrap(), d.as_str());
        }
    }

    #[test]
    fn an_allowed_connect_resolves_connects_and_tunnels() {
        let mut c = Conn::new(config(&["api.github.com"], &[]));
        assert!(
            c.on(Event::Client(b"CONNECT api.github.com:443 HTTP/1.1\r\n"))
                .is_empty()
        );
        assert!(c.wants_client());
        let a = c.on(Event::Client(b"\r\n\x16\x03\x01"));
        assert_eq!(a, vec![Action::Resolve("api.github.com".into())]);
        let a = c.on(resolved(&["140.82.112.5", "140.82.112.6"]));
        assert_eq!(a, connect("140.82.112.5:443", Reach::Global));
        let a = c.on(Event::ConnectFailed(Unanswered::Timeout(
            std::time::Duration::from_secs(10),
        )));
        assert_eq!(a, connect("140.82.112.6:443", Reach::Global));
        let a = c.on(Event::Connected);
        assert_eq!(audit(&a).decision, Decision::Allowed);
        assert_eq!(audit(&a).address, Some("140.82.112.6:443".parse().unwrap()));
        assert_eq!(
            &a[1..],
            &[
                Action::ToClient(http::TUNNEL_OPEN.to_vec()),
                // The bytes sent right after the head are not lost.
                Action::ToUpstream(b"\x16\x03\x01".to_vec()),
                Action::Splice
            ]
        );
    }

    #[test]
    fn a_refused_name_gets_403_naming_the_rule_and_the_fix() {
        let mut c = Conn::new(config(&["api.github.com", "*.example.org"], &[]));
        let a = c.on(Event::Client(b"CONNECT evil.com:443 HTTP/1.1\r\n\r\n"));
        let text = body(&a);
        assert!(text.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{text}");
        assert!(text.contains("rootfence refused evil.com:443: not in [network] allow_domains (policy test.toml); to allow it, add \"evil.com\""), "{text}");
        assert_eq!(audit(&a).decision, Decision::Refused);
        assert!(audit(&a).unlisted);
        assert_eq!(a.last(), Some(&Action::Close));

        let mut c = Conn::new(config(&["api.github.com", "*.example.org"], &[]));
        let a = c.on(Event::Client(b"GET http://example.org/ HTTP/1.1\r\n\r\n"));
        assert!(
            body(&a).contains(
                "\"*.example.org\" allows the subdomains of example.org, not example.org itself"
            ),
            "{}",
            body(&a)
        );
        assert_eq!(
            audit(&a).rule.as_deref(),
            Some("allow_domains \"*.example.org\"")
        );

        let mut c = Conn::new(config(&["api.github.com"], &[]));
        let a = c.on(Event::Client(b"CONNECT api.github.com:22 HTTP/1.1\r\n\r\n"));
        assert!(
            body(&a).contains("\"api.github.com\" allows ports 80 and 443 only"),
            "{}",
            body(&a)
        );
        assert!(audit(&a).unlisted);
    }

    #[test]
    fn loopback_answers_are_refused_unless_named() {
        // A listed name resolving to loopback (rebinding): refused, no connect.
        let mut c = connecting_to_api_example_com();
        let a = c.on(resolved(&["127.0.0.1", "::1"]));
        assert!(!a.iter().any(|x| matches!(x, Action::Connect(..))), "{a:?}");
        assert!(
            body(&a).contains("resolves to a loopback address"),
            "{}",
            body(&a)
        );
        // Mixed answers: only the public address is tried.
        let mut c = connecting_to_api_example_com();
        let a = c.on(resolved(&["127.0.0.1", "93.184.216.34"]));
        assert_eq!(a, connect("93.184.216.34:443", Reach::Global));
        let a = c.on(Event::ConnectFailed(Unanswered::Io(
            std::io::ErrorKind::ConnectionRefused.into(),
        )));
        assert_eq!(audit(&a).decision, Decision::Failed);
        assert!(body(&a).starts_with("HTTP/1.1 502"));
        // Pinned by the policy, or localhost listed: connected, never resolved.
        for (req, addr) in [
            (&b"GET http://site.test:8080/x HTTP/1.1\r\n\r\n"[..], "127.0.0.2:8080"),
            (b"GET http://localhost:9000/ HTTP/1.1\r\n\r\n", "127.0.0.1:9000"),
        ] {
            let mut c = Conn::new(config(
                &["site.test:8080", "localhost:9000"],
                &[("site.test", "127.0.0.2")],
            ));
            let a = c.on(Event::Client(req));
            assert_eq!(a, connect(addr, Reach::Named), "{addr}");
        }
        // A loopback address or localhost not listed: refused before anything.
        for req in [
            &b"GET http://127.0.0.1:8080/ HTTP/1.1\r\n\r\n"[..],
            b"GET http://localhost:8080/ HTTP/1.1\r\n\r\n",
            b"GET http://[::1]:8080/ HTTP/1.1\r\n\r\n",
            b"GET http://0.0.0.0:8080/ HTTP/1.1\r\n\r\n",
            b"CONNECT 2130706433:8080 HTTP/1.1\r\n\r\n",
        ] {
            let mut c = Conn::new(config(&["site.test:8080"], &[("site.test", "127.0.0.2")]));
            let a = c.on(Event::Client(req));
            assert!(body(&a).starts_with("HTTP/1.1 403"), "{}", body(&a));
        }
    }

    #[test]
    fn this_machines_own_addresses_are_refused_unless_named() {
        // A listed name resolving to one of this machine's addresses: the
        // shell answers OwnAddress; the next address is tried, and with
        // none left the request is refused (403), never connected.
        let mut c = connecting_to_api_example_com();
        let a = c.on(resolved(&["93.184.216.34", "93.184.216.35"]));
        assert_eq!(a, connect("93.184.216.34:443", Reach::Global));
        let a = c.on(Event::OwnAddress);
        assert_eq!(a, connect("93.184.216.35:443", Reach::Global));
        let a = c.on(Event::OwnAddress);
        assert_eq!(audit(&a).decision, Decision::Refused);
        assert!(body(&a).starts_with("HTTP/1.1 403"), "{}", body(&a));
        assert!(
            body(&a).contains("an address of this machine's own interfaces"),
            "{}",
            body(&a)
        );
        // Named by the policy: connected as named, never checked.
        let mut c = Conn::new(config(&["93.184.216.34:443"], &[]));
        let a = c.on(Event::Client(b"CONNECT 93.184.216.34:443 HTTP/1.1\r\n\r\n"));
        assert_eq!(a, connect("93.184.216.34:443", Reach::Named));
    }

    #[test]
    fn what_follows_the_body_is_never_forwarded() {
        // A pipelined second request after a complete body: dropped.
        let (_, a) = connected_to_site_test(b"POST http://site.test:8080/p HTTP/1.1\r\nContent-Length: 2\r\n\r\nhiGET http://evil.test/ HTTP/1.1\r\nHost: evil.test\r\n\r\n");
        assert_eq!(a[1..], forwarded_whole());
        // A body still coming: streamed, up to its end only.
        let (_, a) = connected_to_site_test(
            b"POST http://site.test:8080/p HTTP/1.1\r\nContent-Length: 5\r\n\r\nhi",
        );
        let Action::StreamBody(mut body) = a[2].clone() else {
            panic!("{a:?}")
        };
        assert_eq!(body.take(b"!!!GET /x HTTP/1.1\r\n\r\n"), Ok(3));
        assert!(body.done());
        // Ambiguous framing: 400 before anything is resolved or connected.
        let mut c = Conn::new(config(&["site.test:8080"], &[("site.test", "10.0.0.1")]));
        let a = c.on(Event::Client(b"POST http://site.test:8080/p HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"));
        assert!(text_of(&a).starts_with("HTTP/1.1 400"), "{a:?}");
        assert!(!a.iter().any(|x| matches!(x, Action::Connect(..))));
    }

    #[test]
    fn malformed_requests_are_audited_and_counted_as_asked() {
        let mut c = Conn::new(config(&["api.github.com"], &[]));
        let a = c.on(Event::Client(b"GET https://evil.test/x HTTP/1.1\r\n\r\n"));
        assert!(text_of(&a).starts_with("HTTP/1.1 400"), "{a:?}");
        let j = audit(&a);
        assert_eq!(j.decision, Decision::Refused);
        assert_eq!(j.asked.as_deref(), Some("https://evil.test/x"));
        assert_eq!(
            j.target.as_ref().map(|t| t.to_string()),
            Some("evil.test:443".into())
        );
        assert!(j.unlisted);
        // A listed host in a malformed request: audited, not proposed.
        let mut c = Conn::new(config(&["api.github.com"], &[]));
        let a = c.on(Event::Client(
            b"connect api.github.com:443 HTTP/1.1\r\n\r\n",
        ));
        assert!(!audit(&a).unlisted);
        assert_eq!(audit(&a).method, "connect");
    }

    #[test]
    fn plain_http_is_forwarded_once_and_closed() {
        let (mut c, a) = connected_to_site_test(b"POST http://site.test:8080/p HTTP/1.1\r\nHost: elsewhere\r\nContent-Length: 2\r\n\r\nhi");
        assert_eq!(a[1..], forwarded_whole());
        assert_eq!(
            c.on(Event::Upstream(
                b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nKeep"
            )),
            vec![
                Action::ToClient(b"HTTP/1.1 100 Continue\r\n\r\n".to_vec()),
                Action::ReadUpstream
            ]
        );
        let a = c.on(Event::Upstream(b"-Alive: 5\r\nContent-Length: 2\r\n\r\nok"));
        assert_eq!(
            a,
            vec![
                Action::ToClient(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n".to_vec()
                ),
                Action::ToClient(b"ok".to_vec()),
                Action::Splice
            ]
        );
    }

    #[test]
    fn malformed_heads_are_answered_and_closed() {
        let mut c = Conn::new(config(&["x.test"], &[]));
        let a = c.on(Event::Client(b"GET / HTTP/1.1\r\nHost: x.test\r\n\r\n"));
        assert!(body(&a).starts_with("HTTP/1.1 400"), "{}", body(&a));
        // Audited too, with what it named.
        assert_eq!(audit(&a).asked.as_deref(), Some("x.test"));
        assert_eq!(audit(&a).decision, Decision::Refused);
        let mut c = Conn::new(config(&["x.test"], &[]));
        let a = c.on(Event::Client(&vec![b'a'; http::MAX_HEAD + 1]));
        assert!(body(&a).starts_with("HTTP/1.1 431"));
        assert_eq!(audit(&a).asked.as_deref(), Some(""));
        // Events out of order end the connection.
        let mut c = Conn::new(config(&["x.test"], &[]));
        assert_eq!(c.on(Event::Connected), vec![Action::Close]);
    }
}
