//! Entitlements: the one comparison of sandbox plans, what a plan grants
//! that another does not.
//!
//! Every decision of the session that asks "may this server keep running,
//! serve, or be left alone" asks it here: a generation whose rights are not
//! [`Entitlements::within`] the target is revoked; one whose rights are not the
//! [`Entitlements::same`] as the target's is never promoted; a target whose rights
//! are the same as the serving generation's needs no relaunch (a change of
//! root names only is a notification).
//!
//! Entitlements are everything a plan grants that matters for security: each
//! path with its read, write and execute rights (and, for roots, the very
//! directory the sandbox opened, so a directory replaced under the same
//! name is another right), TCP ports, UDP and unix sockets, the hosts the
//! network proxy reaches (and the names pinned to an address), the
//! Landlock scopes, the environment and the scratch directory.

use std::collections::{BTreeMap, BTreeSet};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use crate::plan::SandboxPlan;
use crate::runtime;

/// One path and its rights, with the identity (device, inode) of the object
/// the sandbox grants when it was opened by the roots engine.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PathRight {
    path: PathBuf,
    rights: runtime::Rights,
    object: Option<(u64, u64)>,
}

/// What a plan grants, in a form that compares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entitlements {
    /// Sorted by the paths' bytes (looked up by bytes, see
    /// [`Entitlements::reach`]).
    paths: Vec<PathRight>,
    tcp_connect: BTreeSet<u16>,
    tcp_bind: BTreeSet<u16>,
    udp: bool,
    unix_sockets: bool,
    /// Network by domain: each entry as host and ports.
    domains: BTreeSet<String>,
    /// Names pinned to an address (`name=address`).
    pins: BTreeSet<String>,
    /// Signals to processes outside the sandbox allowed (not scoped).
    signals_out: bool,
    /// Abstract unix sockets outside the sandbox allowed (not scoped).
    abstract_out: bool,
    env: BTreeMap<String, String>,
    scratch: bool,
}

/// One thing a plan grants that another does not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Excess {
    /// Rights on a path.
    Path {
        /// The path.
        path: PathBuf,
        /// The rights not granted by the other plan.
        rights: runtime::Rights,
    },
    /// The same path, but the directory there was replaced: the running
    /// sandbox still grants the old one, wherever it is now.
    Replaced(PathBuf),
    /// TCP connect to this port.
    TcpConnect(u16),
    /// TCP bind on this port.
    TcpBind(u16),
    /// UDP and other non-TCP IP sockets.
    Udp,
    /// Pathname unix sockets outside the sandbox.
    UnixSockets,
    /// A host (and its ports) through the network proxy.
    Domain(String),
    /// A name the proxy resolves to a fixed address.
    Pin(String),
    /// Signals to processes outside the sandbox.
    Signals,
    /// Abstract unix sockets outside the sandbox.
    AbstractSockets,
    /// An environment variable (absent or with another value).
    Env(String),
    /// A private scratch directory.
    Scratch,
}

impl std::fmt::Display for Excess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Excess::Path { path, rights } => {
                let names: Vec<&str> = [
                    (rights.read, "read"),
                    (rights.write, "write"),
                    (rights.exec, "execute"),
                ]
                .into_iter()
                .filter_map(|(has, n)| has.then_some(n))
                .collect();
                write!(f, "{} access to {}", names.join("-"), path.display())
            }
            Excess::Replaced(p) => write!(f, "{} (the directory there was replaced)", p.display()),
            Excess::TcpConnect(p) => write!(f, "TCP connect to port {p}"),
            Excess::TcpBind(p) => write!(f, "TCP bind on port {p}"),
            Excess::Udp => f.write_str("UDP sockets"),
            Excess::UnixSockets => f.write_str("unix sockets"),
            Excess::Domain(d) => write!(f, "network access to {d}"),
            Excess::Pin(p) => write!(f, "the name {p}"),
            Excess::Signals => f.write_str("signals outside the sandbox"),
            Excess::AbstractSockets => f.write_str("abstract unix sockets outside the sandbox"),
            Excess::Env(k) => write!(f, "environment variable {k}"),
            Excess::Scratch => f.write_str("a scratch directory"),
        }
    }
}

/// `excess` as one line for a user: the first few items.
pub fn describe(excess: &[Excess]) -> String {
    const SHOWN: usize = 3;
    let mut s = excess
        .iter()
        .take(SHOWN)
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    if excess.len() > SHOWN {
        s.push_str(&format!(" and {} more", excess.len() - SHOWN));
    }
    s
}

/// An `allow_domains` entry as what it reaches: its host pattern on each
/// of its ports (`*.example.com:80`, `*.example.com:443`), so that two
/// spellings of one reach are one right, and a narrower entry is within a
/// wider one.
fn domain_keys(r: &crate::netproxy::DomainRule) -> Vec<String> {
    use crate::netproxy::rule::{DEFAULT_PORTS, HostPattern};
    let host = match &r.host {
        HostPattern::Name(n) => n.clone(),
        HostPattern::Subdomains(b) => format!("*.{b}"),
        HostPattern::Ip(std::net::IpAddr::V6(a)) => format!("[{a}]"),
        HostPattern::Ip(a) => a.to_string(),
    };
    match r.port {
        Some(p) => vec![format!("{host}:{p}")],
        None => DEFAULT_PORTS
            .iter()
            .map(|p| format!("{host}:{p}"))
            .collect(),
    }
}

fn object_of(h: &impl AsFd) -> Option<(u64, u64)> {
    rustix::fs::fstat(h).ok().map(|st| (st.st_dev, st.st_ino))
}

impl Entitlements {
    /// The rights `plan` grants. Reads the identity of each root's open
    /// handle (one `fstat` each): the shell's planner calls it, off the
    /// loop (see `proxy/planner.rs`); everything else is taken from the
    /// plan.
    pub fn of(plan: &SandboxPlan) -> Entitlements {
        let mut paths: Vec<PathRight> = plan
            .grants
            .iter()
            .map(|g| PathRight {
                path: g.path.clone(),
                rights: g.rights,
                object: g.handle.as_ref().and_then(object_of),
            })
            .collect();
        paths.sort_by(|a, b| bytes(&a.path).cmp(bytes(&b.path)));
        Entitlements {
            paths,
            tcp_connect: plan.network.tcp_connect.iter().copied().collect(),
            tcp_bind: plan.network.tcp_bind.iter().copied().collect(),
            udp: plan.network.udp,
            unix_sockets: plan.network.unix_sockets,
            domains: plan
                .network
                .domains
                .iter()
                .flat_map(|d| d.allow.iter().flat_map(domain_keys))
                .collect(),
            pins: plan
                .network
                .domains
                .iter()
                .flat_map(|d| d.hosts.iter().map(|(n, a)| format!("{n}={a}")))
                .collect(),
            signals_out: !plan.scopes.signal,
            abstract_out: !plan.scopes.abstract_unix_socket,
            env: plan
                .env
                .iter()
                .map(|(k, (v, _))| (k.clone(), v.clone()))
                .collect(),
            scratch: plan.scratch,
        }
    }

    /// Everything `self` grants that `ceiling` does not, in a stable order.
    ///
    /// # Security
    ///
    /// A right on a path is covered when some path of `ceiling` that is the
    /// same path or one of its ancestors (component-wise) has that right,
    /// which is how Landlock combines rules. A root granted on both sides
    /// at the same path must be the same directory (device and inode).
    pub fn excess(&self, ceiling: &Entitlements) -> Vec<Excess> {
        let mut out = Vec::new();
        for p in &self.paths {
            let covered = ceiling.reach(&p.path);
            let missing = runtime::Rights {
                read: p.rights.read && !covered.read,
                write: p.rights.write && !covered.write,
                exec: p.rights.exec && !covered.exec,
            };
            if missing != runtime::Rights::default() {
                out.push(Excess::Path {
                    path: p.path.clone(),
                    rights: missing,
                });
            }
            if let Some(obj) = p.object
                && let Some(other) = ceiling.exact(&p.path).and_then(|c| c.object)
                && other != obj
            {
                out.push(Excess::Replaced(p.path.clone()));
            }
        }
        out.extend(
            self.tcp_connect
                .difference(&ceiling.tcp_connect)
                .map(|p| Excess::TcpConnect(*p)),
        );
        out.extend(
            self.tcp_bind
                .difference(&ceiling.tcp_bind)
                .map(|p| Excess::TcpBind(*p)),
        );
        out.extend(
            self.domains
                .difference(&ceiling.domains)
                .map(|d| Excess::Domain(d.clone())),
        );
        out.extend(
            self.pins
                .difference(&ceiling.pins)
                .map(|p| Excess::Pin(p.clone())),
        );
        for (mine, theirs, e) in [
            (self.udp, ceiling.udp, Excess::Udp),
            (self.unix_sockets, ceiling.unix_sockets, Excess::UnixSockets),
            (self.signals_out, ceiling.signals_out, Excess::Signals),
            (
                self.abstract_out,
                ceiling.abstract_out,
                Excess::AbstractSockets,
            ),
            (self.scratch, ceiling.scratch, Excess::Scratch),
        ] {
            if mine && !theirs {
                out.push(e);
            }
        }
        for (k, v) in &self.env {
            if ceiling.env.get(k) != Some(v) {
                out.push(Excess::Env(k.clone()));
            }
        }
        out
    }

    /// Whether `self` grants nothing outside `ceiling`.
    pub fn within(&self, ceiling: &Entitlements) -> bool {
        self.excess(ceiling).is_empty()
    }

    /// Whether both grant exactly as much.
    pub fn same(&self, other: &Entitlements) -> bool {
        self.within(other) && other.within(self)
    }

    /// The entry for `path` itself: by bytes for a path in normal form,
    /// else component-wise (as [`Entitlements::reach`] looks them up).
    fn exact(&self, path: &Path) -> Option<&PathRight> {
        let key = bytes(path);
        if !crate::roots::is_normal(key) {
            return self.paths.iter().find(|g| g.path == path);
        }
        self.paths
            .binary_search_by(|p| bytes(&p.path).cmp(key))
            .ok()
            .map(|i| &self.paths[i])
    }

    /// The rights `self` grants on `path` through the path itself or any
    /// of its ancestors (how Landlock combines rules).
    ///
    /// Paths in normal form (every path of a plan) are looked up by bytes,
    /// one binary search per ancestor; any other is compared component by
    /// component with every path. Either way a path of `self` that is not
    /// in normal form is found only by an equal path: a miss counts as not
    /// covered, the cautious side (a relaunch, never a right kept).
    fn reach(&self, path: &Path) -> runtime::Rights {
        let mut got = runtime::Rights::default();
        let mut add = |g: &PathRight| {
            got.read |= g.rights.read;
            got.write |= g.rights.write;
            got.exec |= g.rights.exec;
        };
        let b = bytes(path);
        if crate::roots::is_normal(b) {
            let mut end = b.len();
            loop {
                let ancestor = &b[..end.max(1)];
                if let Ok(i) = self
                    .paths
                    .binary_search_by(|p| bytes(&p.path).cmp(ancestor))
                {
                    add(&self.paths[i]);
                }
                if end <= 1 {
                    break;
                }
                end = b[..end].iter().rposition(|&c| c == b'/').unwrap_or(0);
            }
        } else {
            for a in path.ancestors() {
                self.paths.iter().filter(|g| g.path == a).for_each(&mut add);
            }
        }
        got
    }
}

fn bytes(p: &Path) -> &[u8] {
    use std::os::unix::ffi::OsStrExt;
    p.as_os_str().as_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rights(paths: &[(&str, runtime::Rights)]) -> Entitlements {
        let mut paths: Vec<PathRight> = paths
            .iter()
            .map(|(p, r)| PathRight {
                path: PathBuf::from(p),
                rights: *r,
                object: None,
            })
            .collect();
        paths.sort_by(|a, b| bytes(&a.path).cmp(bytes(&b.path)));
        Entitlements {
            paths,
            tcp_connect: BTreeSet::new(),
            tcp_bind: BTreeSet::new(),
            udp: false,
            unix_sockets: false,
            domains: BTreeSet::new(),
            pins: BTreeSet::new(),
            signals_out: false,
            abstract_out: false,
            env: BTreeMap::new(),
            scratch: true,
        }
    }

    /// The rights a path gets through `rights`, as Landlock combines rules:
    /// every path of `rights` equal (component-wise) to the path or one of
    /// its ancestors.
    fn reach_reference(rights: &Entitlements, path: &Path) -> runtime::Rights {
        let mut got = runtime::Rights::default();
        for g in &rights.paths {
            if path.ancestors().any(|a| a == g.path) {
                got.read |= g.rights.read;
                got.write |= g.rights.write;
                got.exec |= g.rights.exec;
            }
        }
        got
    }

    fn component() -> impl proptest::strategy::Strategy<Value = &'static str> {
        proptest::sample::select(vec!["a", "a-b", "a.b", "b", "ab", "a b", "é", "..a"])
    }

    fn normal_path() -> impl proptest::strategy::Strategy<Value = PathBuf> {
        use proptest::prelude::*;
        proptest::collection::vec(component(), 0..4)
            .prop_map(|c| PathBuf::from(format!("/{}", c.join("/"))))
    }

    proptest::proptest! {
        /// Byte-keyed lookups agree with the component-wise definition for
        /// plans' paths (normal form), whatever the query: `/a-b` sorts
        /// before `/a/b` by bytes and after it by components, `/ab` is not
        /// below `/a`; a query not in normal form (`//`, `.`, a trailing
        /// slash) is never given more than the definition gives.
        #[test]
        fn reach_agrees_with_the_component_wise_definition(
            grants in proptest::collection::vec((normal_path(), 0u8..8), 0..12),
            query in normal_path(),
            odd in 0u8..5,
        ) {
            let list: Vec<(String, runtime::Rights)> = grants
                .iter()
                .map(|(p, r)| {
                    (
                        p.to_string_lossy().into_owned(),
                        runtime::Rights { read: r & 1 != 0, write: r & 2 != 0, exec: r & 4 != 0 },
                    )
                })
                .collect();
            let mut seen = std::collections::BTreeSet::new();
            let list: Vec<(&str, runtime::Rights)> = list
                .iter()
                .filter(|(p, _)| seen.insert(p.clone()))
                .map(|(p, r)| (p.as_str(), *r))
                .collect();
            let r = rights(&list);
            let q = query.to_string_lossy().into_owned();
            let q = match odd {
                0 => format!("{q}/"),
                1 => q.replacen('/', "//", 1),
                2 => format!("{q}/."),
                _ => q,
            };
            let q = Path::new(&q);
            let got = r.reach(q);
            let want = reach_reference(&r, q);
            if odd > 2 {
                proptest::prop_assert_eq!(got, want);
            } else {
                proptest::prop_assert!(
                    (!got.read || want.read) && (!got.write || want.write) && (!got.exec || want.exec)
                );
            }
        }
    }

    #[test]
    fn paths_are_covered_by_ancestors_right_by_right() {
        use runtime::Rights as R;
        let ceiling = rights(&[("/a", R::RW), ("/usr", R::RX)]);
        assert!(rights(&[("/a/b", R::RW)]).within(&ceiling));
        assert!(rights(&[("/usr/lib", R::R)]).within(&ceiling));
        assert_eq!(
            rights(&[("/a/b", R::RX)]).excess(&ceiling),
            vec![Excess::Path {
                path: "/a/b".into(),
                rights: runtime::Rights {
                    exec: true,
                    ..Default::default()
                }
            }]
        );
        // Component-wise: /ab is not beneath /a.
        assert!(!rights(&[("/ab", R::R)]).within(&ceiling));
        assert!(!rights(&[("/b", R::R)]).within(&ceiling));
        assert!(rights(&[]).within(&ceiling));
        assert_eq!(
            describe(&rights(&[("/b", R::RW)]).excess(&ceiling)),
            "read-write access to /b"
        );
        assert!(ceiling.same(&ceiling.clone()));
        assert!(!rights(&[("/a", R::RW)]).same(&ceiling));
    }

    #[test]
    fn a_replaced_directory_is_another_right() {
        use runtime::Rights as R;
        let mut old = rights(&[("/a", R::RW)]);
        let mut new = old.clone();
        old.paths[0].object = Some((1, 10));
        new.paths[0].object = Some((1, 11));
        assert_eq!(old.excess(&new), vec![Excess::Replaced("/a".into())]);
        new.paths[0].object = Some((1, 10));
        assert!(old.same(&new));
    }

    #[test]
    fn network_env_and_scopes_are_rights() {
        let base = rights(&[]);
        let mut more = base.clone();
        more.tcp_connect.insert(443);
        more.env.insert("TOKEN".into(), "x".into());
        more.signals_out = true;
        assert_eq!(
            more.excess(&base),
            vec![
                Excess::TcpConnect(443),
                Excess::Signals,
                Excess::Env("TOKEN".into())
            ]
        );
        assert!(base.within(&more));
        let mut changed = base.clone();
        changed.env.insert("TOKEN".into(), "y".into());
        assert!(!more.within(&changed) && !changed.within(&more));
        assert_eq!(
            describe(&more.excess(&base)),
            "TCP connect to port 443, signals outside the sandbox, environment variable TOKEN"
        );
    }

    #[test]
    fn domains_and_pins_are_rights_whatever_their_spelling() {
        let rule = |s: &str| crate::netproxy::DomainRule::parse(s).unwrap();
        let with = |entries: &[&str]| {
            let mut r = rights(&[]);
            r.domains = entries.iter().flat_map(|e| domain_keys(&rule(e))).collect();
            r
        };
        let base = rights(&[]);
        assert!(with(&["api.github.com"]).same(&with(&["API.GitHub.com."])));
        assert!(with(&["api.github.com:443"]).within(&with(&["api.github.com"])));
        assert_eq!(
            with(&["api.github.com:8443"]).excess(&with(&["api.github.com"])),
            vec![Excess::Domain("api.github.com:8443".into())]
        );
        let mut pinned = with(&["*.example.com"]);
        pinned.pins.insert("site.test=127.0.0.2".into());
        assert_eq!(
            describe(&pinned.excess(&base)),
            "network access to *.example.com:443, network access to *.example.com:80, the name site.test=127.0.0.2"
        );
        assert!(base.within(&pinned));
    }
}
