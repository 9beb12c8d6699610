//! `[network] allow_domains`: what an entry means, and which entry (if
//! any) lets a request reach a host and port.
//!
//! An entry is a host with an optional port:
//!
//! - `api.github.com`: that name exactly;
//! - `*.githubusercontent.com`: any name under it, never the name itself;
//! - `localhost:8080`, `api.example.com:8443`: that port only (without a
//!   port, 80 and 443: the ports of `http` and `https`);
//! - `127.0.0.1:5432`, `[::1]:8080`, `10.0.0.5`: an IP address, which is
//!   reached only when it is listed itself (a listed name never allows
//!   its addresses to be asked for directly).
//!
//! Names are compared in their ASCII form (lower case, IDNA), without a
//! trailing dot. Everything here is pure: no resolution, no socket.

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde::Serialize;

/// The ports an entry without one allows: `http` and `https`.
pub const DEFAULT_PORTS: [u16; 2] = [80, 443];

/// The host part of an entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", content = "value", rename_all = "kebab-case")]
pub enum HostPattern {
    /// Exactly this name (ASCII form).
    Name(String),
    /// Names under this one (`*.x`: `a.x`, `a.b.x`), not the name itself.
    Subdomains(String),
    /// Exactly this address, asked for as an address.
    Ip(IpAddr),
}

/// One `allow_domains` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DomainRule {
    /// The entry as written in the policy.
    pub text: String,
    /// Its host part.
    pub host: HostPattern,
    /// Its port; `None` for [`DEFAULT_PORTS`].
    pub port: Option<u16>,
}

/// Why an entry cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    /// Nothing in it.
    #[error("the entry is empty; write a host name such as \"api.github.com\"")]
    Empty,
    /// A URL instead of a host.
    #[error("write the host only (\"api.github.com\"), not a URL")]
    Url,
    /// A path, query or user part.
    #[error("a host name cannot hold {0:?}; write the host only, with an optional :port")]
    Stray(char),
    /// `*` anywhere but as a whole first label.
    #[error(
        "a wildcard is \"*.\" before a domain (\"*.example.com\": its subdomains); \"*\" alone or inside a label is not allowed"
    )]
    Wildcard,
    /// `*.x` with `x` a single label (`*.com`).
    #[error(
        "\"*.{0}\" would allow every name under a top-level domain; name the domain (\"*.example.{0}\")"
    )]
    WildcardTooWide(String),
    /// A wildcard over an address.
    #[error("a wildcard cannot stand before an IP address")]
    WildcardAddress,
    /// A port that is not 1-65535.
    #[error("{0:?} is not a TCP port (1-65535)")]
    Port(String),
    /// Not a host name or address.
    #[error("{0:?} is not a host name or an IP address")]
    Host(String),
}

/// A host a request asks for: a name (ASCII form, no trailing dot) or an
/// address.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(untagged)]
pub enum TargetHost {
    /// A name.
    Name(String),
    /// An address, however it was written (`127.1`, `0x7f000001` and
    /// `2130706433` are all 127.0.0.1).
    Ip(IpAddr),
}

impl TargetHost {
    /// Read a host as a URL parser does (WHATWG): names to their ASCII
    /// form, every IPv4 notation to its address, `[...]` to an IPv6
    /// address. `None` when it is neither.
    pub fn parse(s: &str) -> Option<TargetHost> {
        if s.is_empty() {
            return None;
        }
        Some(match url::Host::parse(s).ok()? {
            url::Host::Domain(d) => {
                let d = d.strip_suffix('.').unwrap_or(&d);
                if d.is_empty() || d.split('.').any(str::is_empty) {
                    return None;
                }
                TargetHost::Name(d.to_string())
            }
            url::Host::Ipv4(a) => TargetHost::Ip(IpAddr::V4(a)),
            url::Host::Ipv6(a) => TargetHost::Ip(IpAddr::V6(a)),
        })
    }
}

impl std::fmt::Display for TargetHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TargetHost::Name(n) => f.write_str(n),
            TargetHost::Ip(IpAddr::V6(a)) => write!(f, "[{a}]"),
            TargetHost::Ip(a) => write!(f, "{a}"),
        }
    }
}

/// A host and port a request asks for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct Target {
    /// The host.
    pub host: TargetHost,
    /// The port.
    pub port: u16,
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

impl DomainRule {
    /// Read an entry.
    pub fn parse(text: &str) -> Result<DomainRule, RuleError> {
        let s = text.trim();
        if s.is_empty() {
            return Err(RuleError::Empty);
        }
        if s.contains("://") {
            return Err(RuleError::Url);
        }
        if let Some(c) = s
            .chars()
            .find(|c| matches!(c, '/' | '?' | '#' | '@' | '\\'))
        {
            return Err(RuleError::Stray(c));
        }
        let (host, port) = split_port(s)?;
        let (wild, host) = match host.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, host),
        };
        if host.contains('*') {
            return Err(RuleError::Wildcard);
        }
        let parsed = match host.parse::<std::net::Ipv6Addr>() {
            // A bare IPv6 address (no port).
            Ok(a) => TargetHost::Ip(IpAddr::V6(a)),
            Err(_) => TargetHost::parse(host).ok_or_else(|| RuleError::Host(host.to_string()))?,
        };
        let host = match (wild, parsed) {
            (false, TargetHost::Name(n)) => HostPattern::Name(n),
            (false, TargetHost::Ip(a)) => HostPattern::Ip(a),
            (true, TargetHost::Ip(_)) => return Err(RuleError::WildcardAddress),
            (true, TargetHost::Name(n)) => {
                if !n.contains('.') {
                    return Err(RuleError::WildcardTooWide(n));
                }
                HostPattern::Subdomains(n)
            }
        };
        Ok(DomainRule {
            text: text.to_string(),
            host,
            port,
        })
    }

    /// Whether the entry names `host` (whatever the port).
    pub fn names(&self, host: &TargetHost) -> bool {
        match (&self.host, host) {
            (HostPattern::Name(n), TargetHost::Name(h)) => n == h,
            (HostPattern::Subdomains(base), TargetHost::Name(h)) => h
                .strip_suffix(base.as_str())
                .is_some_and(|pre| pre.len() > 1 && pre.ends_with('.')),
            (HostPattern::Ip(a), TargetHost::Ip(b)) => a == b,
            _ => false,
        }
    }

    /// Whether the entry allows `port`.
    pub fn allows_port(&self, port: u16) -> bool {
        match self.port {
            Some(p) => p == port,
            None => DEFAULT_PORTS.contains(&port),
        }
    }

    /// The ports it allows, for a reader.
    pub fn ports(&self) -> String {
        match self.port {
            Some(p) => format!("port {p}"),
            None => "ports 80 and 443".into(),
        }
    }

    /// Whether it names loopback itself: `localhost`, or a loopback
    /// address.
    pub fn is_loopback(&self) -> bool {
        match &self.host {
            HostPattern::Name(n) => n == "localhost",
            HostPattern::Ip(a) => a.to_canonical().is_loopback(),
            HostPattern::Subdomains(_) => false,
        }
    }
}

/// Split an optional `:port` off an entry (`[v6]:port`, `name:port`; a
/// bare IPv6 address has no port).
fn split_port(s: &str) -> Result<(&str, Option<u16>), RuleError> {
    let port = |p: &str| -> Result<u16, RuleError> {
        match p.parse::<u16>() {
            Ok(n) if n != 0 && p.bytes().all(|b| b.is_ascii_digit()) => Ok(n),
            _ => Err(RuleError::Port(p.to_string())),
        }
    };
    if let Some(rest) = s.strip_prefix('[') {
        let Some(end) = rest.find(']') else {
            return Err(RuleError::Host(s.to_string()));
        };
        let host = &s[..end + 2];
        return match &rest[end + 1..] {
            "" => Ok((host, None)),
            tail => match tail.strip_prefix(':') {
                Some(p) => Ok((host, Some(port(p)?))),
                None => Err(RuleError::Host(s.to_string())),
            },
        };
    }
    match s.matches(':').count() {
        0 => Ok((s, None)),
        1 => {
            let (h, p) = s.split_once(':').unwrap_or((s, ""));
            Ok((h, Some(port(p)?)))
        }
        // A bare IPv6 address.
        _ => Ok((s, None)),
    }
}

/// What the list says about a target, before any name is resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Entry `rule` allows it.
    Allowed {
        /// Index in the list.
        rule: usize,
    },
    /// Refused.
    Refused(Refusal),
}

/// Why the list refuses a target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// No entry names the host.
    NotListed,
    /// An entry names the host, on other ports.
    Port {
        /// Index of the entry.
        rule: usize,
    },
    /// The host is the domain of a `*.x` entry, which allows only its
    /// subdomains.
    Apex {
        /// Index of the entry.
        rule: usize,
    },
}

/// Judge `target` against `rules`: the first entry that names the host on
/// the target's port allows it.
pub fn judge(rules: &[DomainRule], target: &Target) -> Verdict {
    if let Some(i) = rules
        .iter()
        .position(|r| r.names(&target.host) && r.allows_port(target.port))
    {
        return Verdict::Allowed { rule: i };
    }
    if let Some(i) = rules.iter().position(|r| r.names(&target.host)) {
        return Verdict::Refused(Refusal::Port { rule: i });
    }
    if let TargetHost::Name(h) = &target.host
        && let Some(i) = rules
            .iter()
            .position(|r| matches!(&r.host, HostPattern::Subdomains(b) if b == h))
    {
        return Verdict::Refused(Refusal::Apex { rule: i });
    }
    Verdict::Refused(Refusal::NotListed)
}

/// The kind of a host-local or non-unicast address, which a name reaches
/// only when the list names it explicitly (see [`reachable`]); `None` for
/// an ordinary unicast address.
pub fn special(addr: IpAddr) -> Option<&'static str> {
    match addr.to_canonical() {
        IpAddr::V4(a) => {
            let o = a.octets();
            if a.is_loopback() {
                Some("a loopback address")
            } else if o[0] == 0 {
                Some("an unspecified address (it reaches this machine)")
            } else if a.is_link_local() {
                Some("a link-local address (cloud metadata services live there)")
            } else if a.is_multicast() || a.is_broadcast() {
                Some("a multicast or broadcast address")
            } else {
                None
            }
        }
        IpAddr::V6(a) => {
            let s = a.segments();
            if a.is_loopback() {
                Some("a loopback address")
            } else if a.is_unspecified() {
                Some("an unspecified address (it reaches this machine)")
            } else if s[0] & 0xffc0 == 0xfe80 {
                Some("a link-local address")
            } else if a.is_multicast() {
                Some("a multicast address")
            } else {
                None
            }
        }
    }
}

/// Whether a request allowed by `rule` may be connected to `addr`: an
/// ordinary address, or a special one ([`special`]) that the list names
/// explicitly: the entry is that very address, the entry is `localhost`
/// and the address is loopback, or the policy pins the name to it
/// (`pinned`). Otherwise the kind of address, as the reason.
///
/// # Security
///
/// This is what keeps the proxy from reaching the host's own services:
/// a listed name whose resolution points at loopback (a rebinding DNS
/// answer, a hosts file entry) is refused unless the policy said so.
pub fn reachable(rule: &DomainRule, pinned: bool, addr: IpAddr) -> Result<(), &'static str> {
    let Some(kind) = special(addr) else {
        return Ok(());
    };
    let listed = match &rule.host {
        HostPattern::Ip(a) => a.to_canonical() == addr.to_canonical(),
        HostPattern::Name(n) => n == "localhost" && addr.to_canonical().is_loopback(),
        HostPattern::Subdomains(_) => false,
    };
    if listed || pinned { Ok(()) } else { Err(kind) }
}

/// The addresses `localhost` stands for (RFC 6761): never asked of the
/// resolver.
pub fn localhost() -> Vec<IpAddr> {
    vec![
        IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
        IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
    ]
}

/// Names the policy pins to an address (`[network] hosts`), ASCII form.
pub type Pins = BTreeMap<String, IpAddr>;

/// Read a `[network] hosts` name.
pub fn pin_name(s: &str) -> Option<String> {
    match TargetHost::parse(s)? {
        TargetHost::Name(n) => Some(n),
        TargetHost::Ip(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(s: &str) -> DomainRule {
        DomainRule::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn target(s: &str, port: u16) -> Target {
        Target {
            host: TargetHost::parse(s).unwrap(),
            port,
        }
    }

    #[test]
    fn entries_read() {
        assert_eq!(
            rule("api.github.com").host,
            HostPattern::Name("api.github.com".into())
        );
        assert_eq!(rule("API.GitHub.com.").host, rule("api.github.com").host);
        assert_eq!(
            rule("*.githubusercontent.com").host,
            HostPattern::Subdomains("githubusercontent.com".into())
        );
        let l = rule("localhost:8080");
        assert_eq!(l.port, Some(8080));
        assert!(l.is_loopback());
        assert_eq!(
            rule("[::1]:8080").host,
            HostPattern::Ip("::1".parse().unwrap())
        );
        assert_eq!(rule("::1").host, HostPattern::Ip("::1".parse().unwrap()));
        assert_eq!(rule("10.0.0.5").port, None);
        assert_eq!(
            rule("bücher.example").host,
            HostPattern::Name("xn--bcher-kva.example".into())
        );
        // Every IPv4 notation is an address, not a name.
        assert_eq!(
            rule("2130706433:80").host,
            HostPattern::Ip("127.0.0.1".parse().unwrap())
        );
    }

    #[test]
    fn bad_entries_say_why() {
        for (s, e) in [
            ("", RuleError::Empty),
            ("https://api.github.com", RuleError::Url),
            ("api.github.com/x", RuleError::Stray('/')),
            ("user@host.com", RuleError::Stray('@')),
            ("*", RuleError::Wildcard),
            ("a*.x.com", RuleError::Wildcard),
            ("*.*.x.com", RuleError::Wildcard),
            ("*.com", RuleError::WildcardTooWide("com".into())),
            ("*.10.0.0.1", RuleError::WildcardAddress),
            ("x.com:0", RuleError::Port("0".into())),
            ("x.com:70000", RuleError::Port("70000".into())),
            ("x.com:+80", RuleError::Port("+80".into())),
            ("a..b", RuleError::Host("a..b".into())),
            ("[::1", RuleError::Host("[::1".into())),
        ] {
            assert_eq!(DomainRule::parse(s), Err(e), "{s}");
        }
    }

    #[test]
    fn exact_names_wildcards_and_ports() {
        let rules = vec![
            rule("api.github.com"),
            rule("*.githubusercontent.com"),
            rule("localhost:8080"),
        ];
        let j = |h: &str, p| judge(&rules, &target(h, p));
        assert_eq!(j("api.github.com", 443), Verdict::Allowed { rule: 0 });
        assert_eq!(j("API.GITHUB.COM.", 80), Verdict::Allowed { rule: 0 });
        assert_eq!(
            j("api.github.com", 22),
            Verdict::Refused(Refusal::Port { rule: 0 })
        );
        assert_eq!(j("github.com", 443), Verdict::Refused(Refusal::NotListed));
        assert_eq!(
            j("x.api.github.com", 443),
            Verdict::Refused(Refusal::NotListed)
        );
        assert_eq!(
            j("raw.githubusercontent.com", 443),
            Verdict::Allowed { rule: 1 }
        );
        assert_eq!(
            j("a.b.githubusercontent.com", 443),
            Verdict::Allowed { rule: 1 }
        );
        assert_eq!(
            j("githubusercontent.com", 443),
            Verdict::Refused(Refusal::Apex { rule: 1 })
        );
        // A suffix that is not a label boundary is another domain.
        assert_eq!(
            j("evilgithubusercontent.com", 443),
            Verdict::Refused(Refusal::NotListed)
        );
        assert_eq!(j("localhost", 8080), Verdict::Allowed { rule: 2 });
        assert_eq!(
            j("localhost", 80),
            Verdict::Refused(Refusal::Port { rule: 2 })
        );
    }

    #[test]
    fn addresses_only_when_listed_themselves() {
        let rules = vec![
            rule("api.github.com"),
            rule("127.0.0.1:5432"),
            rule("[::1]:8080"),
        ];
        let j = |h: &str, p| judge(&rules, &target(h, p));
        assert_eq!(j("140.82.112.5", 443), Verdict::Refused(Refusal::NotListed));
        assert_eq!(j("127.0.0.1", 5432), Verdict::Allowed { rule: 1 });
        // The same address in any notation.
        assert_eq!(j("2130706433", 5432), Verdict::Allowed { rule: 1 });
        assert_eq!(j("0x7f.1", 5432), Verdict::Allowed { rule: 1 });
        assert_eq!(
            j("127.0.0.1", 5433),
            Verdict::Refused(Refusal::Port { rule: 1 })
        );
        assert_eq!(j("[::1]", 8080), Verdict::Allowed { rule: 2 });
        assert_eq!(j("localhost", 5432), Verdict::Refused(Refusal::NotListed));
        assert_eq!(j("0.0.0.0", 5432), Verdict::Refused(Refusal::NotListed));
    }

    #[test]
    fn special_addresses_need_an_explicit_entry() {
        let name = rule("api.example.com");
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        let public: IpAddr = "93.184.216.34".parse().unwrap();
        assert_eq!(reachable(&name, false, public), Ok(()));
        // A listed name answered with loopback (rebinding) is refused.
        for a in [
            "127.0.0.1",
            "127.1.2.3",
            "::1",
            "::ffff:127.0.0.1",
            "0.0.0.0",
            "::",
            "169.254.169.254",
            "fe80::1",
            "224.0.0.1",
            "255.255.255.255",
            "ff02::1",
        ] {
            let a: IpAddr = a.parse().unwrap();
            assert!(reachable(&name, false, a).is_err(), "{a}");
        }
        // Pinned by the policy: its own words.
        assert_eq!(reachable(&name, true, lo), Ok(()));
        assert_eq!(reachable(&rule("localhost:8080"), false, lo), Ok(()));
        assert_eq!(
            reachable(&rule("localhost:8080"), false, "::1".parse().unwrap()),
            Ok(())
        );
        assert!(
            reachable(
                &rule("localhost:8080"),
                false,
                "169.254.169.254".parse().unwrap()
            )
            .is_err()
        );
        assert_eq!(reachable(&rule("127.0.0.1:5432"), false, lo), Ok(()));
        assert!(reachable(&rule("*.example.com"), false, lo).is_err());
        // Private networks are ordinary unicast: the name's owner put them there.
        assert_eq!(reachable(&name, false, "10.1.2.3".parse().unwrap()), Ok(()));
    }

    #[test]
    fn hosts_read_as_url_parsers_do() {
        assert_eq!(
            TargetHost::parse("[::1]"),
            Some(TargetHost::Ip("::1".parse().unwrap()))
        );
        assert_eq!(
            TargetHost::parse("127.1"),
            Some(TargetHost::Ip("127.0.0.1".parse().unwrap()))
        );
        assert_eq!(
            TargetHost::parse("Example.COM"),
            Some(TargetHost::Name("example.com".into()))
        );
        assert_eq!(TargetHost::parse(""), None);
        assert_eq!(TargetHost::parse("a b"), None);
        assert_eq!(TargetHost::parse("."), None);
        assert_eq!(pin_name("site.test"), Some("site.test".into()));
        assert_eq!(pin_name("1.2.3.4"), None);
    }
}
