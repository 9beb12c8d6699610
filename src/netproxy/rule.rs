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

/// IPv4 blocks that are not globally reachable unicast, from IANA's
/// IPv4 Special-Purpose Address Registry (RFC 6890 and its successors),
/// plus multicast and the reserved `240/4`: `(network, prefix length,
/// what it is)`. More specific entries come first.
const V4_SPECIAL: &[(u32, u8, &str)] = &[
    (
        0x0000_0000,
        8,
        "an unspecified address (it reaches this machine)",
    ),
    (0x0a00_0000, 8, "a private address (RFC 1918)"),
    (
        0x6440_0000,
        10,
        "a shared address (RFC 6598, carrier-grade NAT; a cloud metadata service lives there)",
    ),
    (0x7f00_0000, 8, "a loopback address"),
    (
        0xa9fe_0000,
        16,
        "a link-local address (cloud metadata services live there)",
    ),
    (0xac10_0000, 12, "a private address (RFC 1918)"),
    (0xc000_0000, 24, "an IETF protocol assignment (RFC 6890)"),
    (0xc000_0200, 24, "a documentation address"),
    (0xc058_6300, 24, "a 6to4 relay anycast address (deprecated)"),
    (0xc0a8_0000, 16, "a private address (RFC 1918)"),
    (0xc612_0000, 15, "a benchmarking address"),
    (0xc633_6400, 24, "a documentation address"),
    (0xcb00_7100, 24, "a documentation address"),
    (0xe000_0000, 4, "a multicast address"),
    (0xffff_ffff, 32, "the broadcast address"),
    (0xf000_0000, 4, "a reserved address (240/4)"),
];

/// Addresses inside [`V4_SPECIAL`] blocks that the registry marks
/// globally reachable (`192.0.0.9`, `192.0.0.10`: anycast services).
const V4_GLOBAL: &[u32] = &[0xc000_0009, 0xc000_000a];

/// IPv6 blocks inside `2000::/3` (the only global unicast space) that are
/// not globally reachable, from IANA's IPv6 Special-Purpose Address
/// Registry; outside `2000::/3` nothing is (loopback, `::/8`, `100::/64`,
/// `5f00::/16`, unique local `fc00::/7`, link-local, site-local,
/// multicast), and the forms embedding an IPv4 address are judged by that
/// address ([`embedded_v4`]).
const V6_SPECIAL: &[(u128, u8, &str)] = &[
    (
        0x2001_0000_0000_0000_0000_0000_0000_0000,
        32,
        "a Teredo address (an IPv4 address tunnelled)",
    ),
    (
        0x2001_0002_0000_0000_0000_0000_0000_0000,
        48,
        "a benchmarking address",
    ),
    (
        0x2001_0db8_0000_0000_0000_0000_0000_0000,
        32,
        "a documentation address",
    ),
    (
        0x3fff_0000_0000_0000_0000_0000_0000_0000,
        20,
        "a documentation address",
    ),
    (
        0x2001_0000_0000_0000_0000_0000_0000_0000,
        23,
        "an IETF protocol assignment (RFC 2928)",
    ),
];

/// Blocks inside `2001::/23` that the registry marks globally reachable:
/// `2001:1::1/128`, `2001:1::2/128`, `2001:3::/32` (AMT),
/// `2001:4:112::/48` (AS112), `2001:20::/28` (ORCHIDv2), `2001:30::/28`
/// (drone remote ID).
const V6_GLOBAL: &[(u128, u8)] = &[
    (0x2001_0001_0000_0000_0000_0000_0000_0001, 128),
    (0x2001_0001_0000_0000_0000_0000_0000_0002, 128),
    (0x2001_0003_0000_0000_0000_0000_0000_0000, 32),
    (0x2001_0004_0112_0000_0000_0000_0000_0000, 48),
    (0x2001_0020_0000_0000_0000_0000_0000_0000, 28),
    (0x2001_0030_0000_0000_0000_0000_0000_0000, 28),
];

fn in_v4(a: u32, net: u32, len: u8) -> bool {
    let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
    a & mask == net & mask
}

fn in_v6(a: u128, net: u128, len: u8) -> bool {
    let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
    a & mask == net & mask
}

/// The IPv4 address an IPv6 address stands for or carries, with the form:
/// IPv4-mapped `::ffff:a.b.c.d`, IPv4-compatible `::a.b.c.d`
/// (deprecated, still routed by some stacks), NAT64 `64:ff9b::a.b.c.d`
/// (RFC 6052) and the local-use `64:ff9b:1::/48` (RFC 8215, the address in
/// its last 32 bits), and 6to4 `2002:AABB:CCDD::/48` (RFC 3056).
pub fn embedded_v4(a: std::net::Ipv6Addr) -> Option<(std::net::Ipv4Addr, &'static str)> {
    let n = u128::from(a);
    let low = std::net::Ipv4Addr::from((n & 0xffff_ffff) as u32);
    if in_v6(n, 0xffff_0000_0000, 96) {
        Some((low, "IPv4-mapped"))
    } else if in_v6(n, 0, 96) && n > 1 {
        Some((low, "IPv4-compatible"))
    } else if in_v6(n, 0x0064_ff9b_0000_0000_0000_0000_0000_0000, 96)
        || in_v6(n, 0x0064_ff9b_0001_0000_0000_0000_0000_0000, 48)
    {
        Some((low, "NAT64"))
    } else if in_v6(n, 0x2002_0000_0000_0000_0000_0000_0000_0000, 16) {
        Some((std::net::Ipv4Addr::from((n >> 80) as u32), "6to4"))
    } else {
        None
    }
}

/// What kind of address `addr` is when it is not a globally reachable
/// unicast address (IANA's special-purpose registries, RFC 6890 and its
/// successors, for IPv4 and IPv6; an IPv6 form embedding an IPv4 address
/// is judged by that address); `None` for a globally reachable unicast
/// address. A name reaches the others only when the list names them
/// explicitly (see [`reachable`]).
pub fn special(addr: IpAddr) -> Option<&'static str> {
    match addr {
        IpAddr::V4(a) => {
            let n = u32::from(a);
            if V4_GLOBAL.contains(&n) {
                return None;
            }
            V4_SPECIAL
                .iter()
                .find(|(net, len, _)| in_v4(n, *net, *len))
                .map(|(_, _, kind)| *kind)
        }
        IpAddr::V6(a) => {
            let n = u128::from(a);
            if a.is_loopback() {
                return Some("a loopback address");
            }
            if a.is_unspecified() {
                return Some("an unspecified address (it reaches this machine)");
            }
            if let Some((v4, form)) = embedded_v4(a) {
                if form == "IPv4-compatible" {
                    return Some("an IPv4-compatible address (deprecated, RFC 4291)");
                }
                return special(IpAddr::V4(v4))
                    .map(|_| "an IPv6 form (mapped, compatible, NAT64 or 6to4) of an IPv4 address that is not global");
            }
            if !in_v6(n, 0x2000 << 112, 3) {
                let s0 = a.segments()[0];
                return Some(if s0 & 0xfe00 == 0xfc00 {
                    "a unique local address (fc00::/7; a cloud metadata service lives there)"
                } else if s0 & 0xffc0 == 0xfe80 || s0 & 0xffc0 == 0xfec0 {
                    "a link-local address"
                } else if s0 & 0xff00 == 0xff00 {
                    "a multicast address"
                } else {
                    "not a global unicast address (outside 2000::/3)"
                });
            }
            if V6_GLOBAL.iter().any(|(net, len)| in_v6(n, *net, *len)) {
                return None;
            }
            V6_SPECIAL
                .iter()
                .find(|(net, len, _)| in_v6(n, *net, *len))
                .map(|(_, _, kind)| *kind)
        }
    }
}

/// Why an address may be connected to (see [`reachable`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// A globally reachable unicast address the name resolved to: still
    /// refused at connect time when it is one of this machine's own
    /// addresses.
    Global,
    /// The policy names it: the entry is that very address, the entry is
    /// `localhost` and the address is loopback, or `[network] hosts` pins
    /// the name.
    Named,
}

/// Whether a request allowed by `rule` may be connected to `addr`: a
/// globally reachable unicast address, or a special one ([`special`]:
/// loopback, private, shared, link-local, unique local, documentation,
/// reserved, multicast, or an IPv6 form of one of them) that the list
/// names explicitly: the entry is that very address, the entry is
/// `localhost` and the address is loopback, or the policy pins the name
/// (`pinned`). Otherwise the kind of address, as the reason.
///
/// # Security
///
/// This is what keeps the proxy from reaching the host's own services,
/// its network's and the cloud's metadata services: a listed name whose
/// resolution points at any of them (a rebinding DNS answer, a hosts
/// file entry) is refused unless the policy said so. A [`Reach::Global`]
/// address must still be checked against this machine's own interfaces
/// when it is connected (the shell does).
pub fn reachable(rule: &DomainRule, pinned: bool, addr: IpAddr) -> Result<Reach, &'static str> {
    let listed = match &rule.host {
        HostPattern::Ip(a) => a.to_canonical() == addr.to_canonical(),
        HostPattern::Name(n) => n == "localhost" && addr.to_canonical().is_loopback(),
        HostPattern::Subdomains(_) => false,
    };
    if listed || pinned {
        return Ok(Reach::Named);
    }
    match special(addr) {
        None => Ok(Reach::Global),
        Some(kind) => Err(kind),
    }
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
        assert_eq!(reachable(&name, false, public), Ok(Reach::Global));
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
        assert_eq!(reachable(&name, true, lo), Ok(Reach::Named));
        assert_eq!(
            reachable(&rule("localhost:8080"), false, lo),
            Ok(Reach::Named)
        );
        assert_eq!(
            reachable(&rule("localhost:8080"), false, "::1".parse().unwrap()),
            Ok(Reach::Named)
        );
        assert!(
            reachable(
                &rule("localhost:8080"),
                false,
                "169.254.169.254".parse().unwrap()
            )
            .is_err()
        );
        assert_eq!(
            reachable(&rule("127.0.0.1:5432"), false, lo),
            Ok(Reach::Named)
        );
        assert!(reachable(&rule("*.example.com"), false, lo).is_err());
        // A private address named by the policy is its own words too.
        let private: IpAddr = "10.1.2.3".parse().unwrap();
        assert_eq!(
            reachable(&rule("10.1.2.3"), false, private),
            Ok(Reach::Named)
        );
        assert_eq!(reachable(&name, true, private), Ok(Reach::Named));
    }

    #[test]
    fn a_name_reaches_only_globally_reachable_unicast() {
        let name = rule("api.example.com");
        for a in [
            // Cloud metadata, IPv4 and IPv6.
            "169.254.169.254",
            "100.100.100.200",
            "fd00:ec2::254",
            // Private, shared (CGNAT), IETF, documentation, benchmarking, reserved.
            "10.0.0.1",
            "172.16.5.4",
            "172.31.255.255",
            "192.168.1.1",
            "100.64.0.1",
            "100.127.255.254",
            "192.0.0.8",
            "192.0.2.1",
            "198.18.0.1",
            "198.51.100.7",
            "203.0.113.9",
            "240.0.0.1",
            "192.88.99.1",
            // IPv4 forms of loopback and metadata inside IPv6.
            "::127.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b:1::a00:1",
            "2002:7f00:1::",
            "2002:a9fe:a9fe::1",
            "::8.8.8.8",
            // IPv6 blocks that are not global unicast.
            "fc00::1",
            "fec0::1",
            "100::1",
            "5f00::1",
            "2001:db8::1",
            "3fff::1",
            "2001::1",
            "2001:2::1",
            "ff0e::1",
        ] {
            let ip: IpAddr = a.parse().unwrap();
            assert!(reachable(&name, false, ip).is_err(), "{a}");
        }
        // The allowed twins: global unicast, and the global embedded forms.
        for a in [
            "93.184.216.34",
            "8.8.8.8",
            "100.63.255.255",
            "100.128.0.1",
            "172.32.0.1",
            "192.0.0.9",
            "2606:4700::1111",
            "2001:4860:4860::8888",
            "2001:4:112::1",
            "64:ff9b::808:808",
            "2002:808:808::1",
            "::ffff:8.8.8.8",
        ] {
            let ip: IpAddr = a.parse().unwrap();
            assert_eq!(reachable(&name, false, ip), Ok(Reach::Global), "{a}");
        }
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
