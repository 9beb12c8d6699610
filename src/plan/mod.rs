//! The sandbox plan: `(policy, roots, command) -> SandboxPlan`.
//!
//! [`for_launch`] is the way in: it resolves the roots, discovers the
//! command's runtime and builds the plan. [`build`], the deciding part, is
//! pure: it reads no file and launches nothing. It decides
//! every path the server may touch and why, the network ports, the Landlock
//! scopes, the environment and the limits. `rootfence explain` prints the
//! plan; the sandbox applies it.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

use crate::policy::{ExtraKind, LimitsSection, Policy, deny_conflict};
use crate::roots::{Access, CanonicalRoot, Origin, Refusal, RefusalReason, RootHandle, merge};
use crate::runtime::{CommandSpec, HostEnv, Rights, Rule};

mod launch;

pub use launch::{for_launch, with_roots};

/// Why a path was granted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum GrantReason {
    /// An enforced root.
    Root {
        /// Its canonical URI.
        uri: String,
    },
    /// A general rule of the runtime discovery.
    Runtime {
        /// The rule.
        rule: Rule,
        /// What it grants this path for.
        why: String,
    },
    /// A `[runtime]` entry of the policy.
    Policy {
        /// Where it was written.
        origin: Origin,
    },
}

impl std::fmt::Display for GrantReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GrantReason::Root { uri } => write!(f, "root {uri}"),
            GrantReason::Runtime { rule, why } => write!(f, "{rule}: {why}"),
            GrantReason::Policy { origin } => write!(f, "{origin}"),
        }
    }
}

impl SandboxPlan {
    /// The places a server launched with this plan may write: its
    /// writable roots and the policy's write paths (not rootfence's own
    /// scratch, store or private layers).
    pub fn server_writes(&self) -> Vec<PathBuf> {
        self.grants
            .iter()
            .filter(|g| g.rights.write)
            .filter(|g| {
                g.reasons
                    .iter()
                    .any(|r| matches!(r, GrantReason::Root { .. } | GrantReason::Policy { .. }))
            })
            .map(|g| g.path.clone())
            .collect()
    }
}

/// One path and its rights.
#[derive(Debug, Clone, Serialize)]
pub struct Grant {
    /// Absolute path.
    pub path: PathBuf,
    /// Rights.
    pub rights: Rights,
    /// Why (several when grants were combined).
    pub reasons: Vec<GrantReason>,
    /// Whether the path may be missing (runtime paths not on every system).
    pub optional: bool,
    /// For roots: the handle opened when the root was resolved. The sandbox
    /// builds the rule from it instead of opening `path` again.
    #[serde(skip)]
    pub handle: Option<RootHandle>,
}

/// Network rights.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct NetworkPlan {
    /// TCP ports the server may connect to (Landlock ABI 4+).
    pub tcp_connect: Vec<u16>,
    /// TCP ports the server may bind (Landlock ABI 4+).
    pub tcp_bind: Vec<u16>,
    /// UDP and other non-TCP IP sockets allowed.
    pub udp: bool,
    /// Connecting to pathname unix sockets allowed.
    pub unix_sockets: bool,
    /// Network by domain: the hosts the server reaches through
    /// rootfence's HTTP proxy, the only thing it can connect to. `None`:
    /// no proxy.
    pub domains: Option<DomainPlan>,
}

/// What the network proxy lets a server reach (`[network] allow_domains`
/// and `hosts`).
#[derive(Debug, Clone, Serialize, PartialEq, Eq, Default)]
pub struct DomainPlan {
    /// The entries, in the policy's order (empty: every request refused,
    /// and recorded, as `rootfence learn` runs it).
    pub allow: Vec<crate::netproxy::DomainRule>,
    /// Names resolved to a fixed address.
    pub hosts: BTreeMap<String, std::net::IpAddr>,
    /// Where each decision is appended (the policy's `[audit] file`).
    pub audit_file: Option<PathBuf>,
}

/// Landlock scopes (ABI 6+).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ScopePlan {
    /// Signals only to processes in the sandbox.
    pub signal: bool,
    /// Abstract unix sockets only within the sandbox.
    pub abstract_unix_socket: bool,
}

/// A file rootfence writes into the server's scratch directory before it
/// starts, with the variable that names it to the server.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ScratchFile {
    /// File name in the scratch directory.
    pub name: String,
    /// Content.
    #[serde(skip)]
    pub content: String,
    /// The variable set to the file's path.
    pub env: String,
    /// Also put in the server's private home under this name (for
    /// programs that read the file there and not through the variable).
    pub home: Option<String>,
    /// What it is.
    pub why: String,
}

/// Where an environment variable's value comes from.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum EnvSource {
    /// Passed from rootfence's environment (`env.pass`).
    Passed,
    /// Set by the policy (`env.set`).
    Set,
    /// Set by the runtime rules (the caches they grant, launchers kept
    /// offline, git's sanitized configuration); the policy's `env.set`
    /// overrides it.
    Rule,
    /// Given with `--env` (`NAME` passes rootfence's value, `NAME=VALUE`
    /// sets it); overrides `env.pass` and the rules, not `env.set`.
    Flag,
    /// Set by the host for this launch (a host config's `env` block: not
    /// in the host's own environment, or changed), where rootfence could
    /// read the host's; the rules, `--env` and `env.set` override it.
    Host,
}

pub use crate::modes::{LandlockMode, NamespaceMode};

/// A directory the server may write, with its writes going to a private
/// layer of its own (an overlay whose upper layer lives in the scratch
/// directory and is discarded with it): the real directory is never
/// written. For caches whose content is run later outside the sandbox.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct PrivateLayer {
    /// The directory.
    pub path: PathBuf,
    /// Without namespaces (no overlay), this variable points the runtime at
    /// an empty private directory in scratch instead.
    pub env: Option<String>,
    /// Why.
    pub why: String,
}

/// A server's own state store (see [`crate::store`]).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct HomeStore {
    /// The server's identity (the command as configured).
    pub id: crate::store::ServerId,
    /// The store's directory (its `home/` is what the server writes).
    pub dir: PathBuf,
}

impl HomeStore {
    /// The store's `home/`.
    pub fn home(&self) -> PathBuf {
        self.dir.join(crate::store::HOME)
    }
}

/// A path inside a read-write root that the server's view mounts
/// read-only (`[roots] vcs = "read-only"`): version-control and editor
/// metadata that tools outside run unasked.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Protected {
    /// The path.
    pub path: PathBuf,
    /// Mounted read-only. When false, the path is only pinned: mounted on
    /// itself, read-write, so that it cannot be renamed or removed (and a
    /// forged one put in its place).
    pub readonly: bool,
    /// Why.
    pub why: String,
    /// For a VCS directory: the (device, inode) of the directory whose
    /// entries were listed here; the view mounts nothing if another object
    /// is at the path by then.
    pub identity: Option<(u64, u64)>,
}

/// What the server may ask of the host, as the policy shapes the
/// capabilities it is told (`[sampling]`, `[elicitation]`).
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct HostCapabilities {
    /// Sampling offered (through the guard).
    pub sampling: bool,
    /// Form elicitation offered.
    pub elicitation_form: bool,
    /// URL elicitation offered.
    pub elicitation_url: bool,
}

impl HostCapabilities {
    /// What `policy` lets the server ask of the host.
    pub fn of(policy: &Policy) -> HostCapabilities {
        let e = &policy.raw.elicitation;
        HostCapabilities {
            sampling: policy.raw.sampling.allow,
            elicitation_form: e.allow && e.form,
            elicitation_url: e.allow && e.url,
        }
    }
}

/// Everything the sandbox will enforce for one launch.
#[derive(Debug, Clone, Serialize)]
pub struct SandboxPlan {
    /// The policy's name.
    pub policy: String,
    /// The command.
    pub command: CommandSpec,
    /// The enforced roots, merged, sorted by path.
    #[serde(serialize_with = "ser_roots")]
    pub roots: Vec<CanonicalRoot>,
    /// Roots folded into an enclosing root.
    #[serde(serialize_with = "ser_folded")]
    pub folded: Vec<(CanonicalRoot, PathBuf)>,
    /// Roots refused, with reasons.
    #[serde(serialize_with = "ser_refused")]
    pub refused: Vec<Refusal>,
    /// Every path and its rights, sorted by path.
    pub grants: Vec<Grant>,
    /// Network rights.
    pub network: NetworkPlan,
    /// Scopes.
    pub scopes: ScopePlan,
    /// The server's environment (`TMPDIR` is added at launch when
    /// `scratch` is on).
    pub env: BTreeMap<String, (String, EnvSource)>,
    /// Names (never values) of rootfence's environment variables that do
    /// not reach the server, sorted. `TMPDIR` is left out when `scratch`
    /// replaces it.
    pub env_dropped: Vec<String>,
    /// A private scratch directory exported as `TMPDIR`.
    pub scratch: bool,
    /// Directories written through a private layer (never for real).
    pub private_layers: Vec<PrivateLayer>,
    /// The home directory as the server sees it with namespaces: an empty
    /// private directory of its own (holding only what the plan grants
    /// there), where what it writes is discarded at exit
    /// (`[runtime] home = "private"`). `None`: not writable.
    pub private_home: Option<PathBuf>,
    /// The server's own state store, kept across sessions (see
    /// `crate::store`): with namespaces, the private home is bound to
    /// its `home/`; without them, the server's XDG directories point into
    /// it. `None`: the private home is discarded at exit (`[runtime] home
    /// = "ephemeral"`), or there is none.
    pub home_store: Option<HomeStore>,
    /// rootfence's record of the places it let a server write
    /// (`$XDG_STATE_HOME/rootfence/written`): a launch of this plan adds
    /// its writable roots and write paths to it.
    pub written_record: Option<PathBuf>,
    /// Files written into the scratch directory (git's sanitized
    /// configuration).
    pub scratch_files: Vec<ScratchFile>,
    /// Whether the server may execute files from its roots
    /// (`[runtime] exec_in_roots`); without it the roots are also mounted
    /// `noexec` in the server's view.
    pub exec_in_roots: bool,
    /// Namespaces (see `NamespaceMode`).
    pub namespaces: NamespaceMode,
    /// Whether a kernel without Landlock is acceptable (see
    /// `LandlockMode`).
    pub landlock: LandlockMode,
    /// Control files inside read-write roots, read-only in the view.
    pub protected: Vec<Protected>,
    /// What the server may ask of the host.
    pub capabilities: HostCapabilities,
    /// Limits.
    pub limits: LimitsSection,
    /// What the server may take of the machine (`[resources]`).
    pub resources: crate::policy::ResourcesSection,
    /// Things the reader should know (runtime paths dropped, ...).
    pub warnings: Vec<String>,
    /// Report every system call the sandbox refuses (the call and why), as
    /// a warning and in [`crate::sandbox::SandboxedChild::refused_calls`]:
    /// `--report-refused-calls`. Off by default (a refusal is then answered
    /// by the kernel alone, without a round trip through rootfence).
    pub report_refusals: bool,
    /// Observe the server: every call naming a path goes through
    /// rootfence's supervisor, which records the paths the sandbox refuses
    /// it ([`crate::sandbox::SandboxedChild::observed`]); `rootfence learn`
    /// proposes policy lines from them; `rootfence run` observes a server's
    /// starts until one has gone through. Off by default (each such call
    /// then costs nothing).
    pub observe_paths: bool,
    /// Observe the server's network: a TCP connection to a port the plan
    /// does not grant and a refused UDP socket are recorded
    /// ([`crate::sandbox::SandboxedChild::watch_refusals`]). Cheap: `rootfence
    /// run` sets it on every launch.
    #[serde(skip)]
    pub observe_network: bool,
    /// The deny list the plan was made under: what an observed refusal is
    /// judged against (`crate::refusals`).
    #[serde(skip)]
    pub deny: Vec<crate::roots::PathRule>,
}

/// JSON form of a root.
#[derive(Serialize)]
struct RootView<'a> {
    uri: &'a str,
    path: &'a std::path::Path,
    name: &'a str,
    access: Access,
    kind: crate::roots::RootKind,
    source: crate::roots::RootSource,
    input: &'a str,
}

fn view(r: &CanonicalRoot) -> RootView<'_> {
    RootView {
        uri: &r.uri,
        path: &r.path,
        name: &r.name,
        access: r.access,
        kind: r.kind,
        source: r.source,
        input: &r.input,
    }
}

fn ser_roots<S: serde::Serializer>(v: &[CanonicalRoot], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(v.iter().map(view))
}

fn ser_folded<S: serde::Serializer>(
    v: &[(CanonicalRoot, PathBuf)],
    s: S,
) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct Folded<'a> {
        root: RootView<'a>,
        into: &'a std::path::Path,
    }
    s.collect_seq(v.iter().map(|(r, into)| Folded {
        root: view(r),
        into,
    }))
}

fn ser_refused<S: serde::Serializer>(v: &[Refusal], s: S) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct R<'a> {
        input: &'a str,
        source: crate::roots::RootSource,
        reason: String,
    }
    s.collect_seq(v.iter().map(|r| R {
        input: &r.input,
        source: r.from,
        reason: r.reason.to_string(),
    }))
}

/// What `LC_*` in `[env] pass` passes: the POSIX and glibc locale
/// categories.
pub const LOCALE_CATEGORIES: &[&str] = &[
    "LC_ALL",
    "LC_ADDRESS",
    "LC_COLLATE",
    "LC_CTYPE",
    "LC_IDENTIFICATION",
    "LC_MEASUREMENT",
    "LC_MESSAGES",
    "LC_MONETARY",
    "LC_NAME",
    "LC_NUMERIC",
    "LC_PAPER",
    "LC_TELEPHONE",
    "LC_TIME",
];

/// The server's private home and its store, under `[runtime] home`; a
/// note for each directory of the user's named like the server (granted
/// only by a policy line).
fn home(
    policy: &Policy,
    command: &CommandSpec,
    env: &HostEnv,
    warnings: &mut Vec<String>,
) -> (Option<PathBuf>, Option<HomeStore>) {
    use crate::policy::HomeMode;
    let private_home = match policy.raw.runtime.home {
        HomeMode::Private | HomeMode::Ephemeral => env.home.clone().filter(|h| {
            h.is_absolute()
                && h.parent().is_some()
                && deny_conflict(h, &policy.deny).is_none_or(|(_, inside)| !inside)
        }),
        HomeMode::None => None,
    };
    let store = match policy.raw.runtime.home {
        HomeMode::Private => {
            let id = crate::store::ServerId::of(&command.argv, command.name.as_deref());
            crate::store::location(env, &id).map(|dir| HomeStore { id, dir })
        }
        HomeMode::Ephemeral | HomeMode::None => None,
    };
    for own in &command.own_state {
        let shown = crate::runtime::shown(own, env.home.as_deref());
        let keep = match &store {
            Some(s) => format!(
                "this server keeps its own state in its store {}",
                crate::runtime::shown(&s.home(), env.home.as_deref())
            ),
            None => "this server's home is its own".to_string(),
        };
        warnings.push(format!(
            "{shown} exists and is not granted: a name is the server's to choose, so rootfence cannot tell this server's state from another program's, and {keep}. If {shown} is this server's, add to the policy: [runtime] write = [\"{shown}\"] (or give the server a copy in its store: rootfence wrap --import-state on the host's config)"
        ));
    }
    (private_home, store)
}

/// Build the plan.
///
/// `roots` are the roots the engine accepted (any order, duplicates
/// allowed), `refused` those it refused. Roots beyond the policy's
/// `max_roots` are refused here.
///
/// # Security
///
/// The only paths granted are the enforced roots (with their access), the
/// runtime needs of `command` and the policy's `[runtime]` paths; a runtime
/// need that touches a denied path is dropped with a warning, never
/// granted. The home directory itself is never granted by this function.
pub fn build(
    policy: &Policy,
    roots: Vec<CanonicalRoot>,
    mut refused: Vec<Refusal>,
    command: CommandSpec,
    env: &HostEnv,
) -> SandboxPlan {
    let _memo = crate::canon::Memo::hold();
    let mut warnings = Vec::new();
    let merged = merge(roots);
    let mut enforced = merged.roots;
    let max = policy.raw.roots.max_roots;
    if enforced.len() > max {
        for r in enforced.split_off(max) {
            refused.push(Refusal {
                input: r.input.clone(),
                from: r.source,
                reason: RefusalReason::TooMany(max),
            });
        }
    }

    let (enforced, protected) = control_files(policy, enforced, &mut refused, &mut warnings);
    let exec_in_roots = policy.raw.runtime.exec_in_roots;
    let mut grants = root_grants(&enforced, exec_in_roots);
    let private_layers = runtime_grants(policy, &command, env, &mut grants, &mut warnings);
    grants.extend(policy_grants(policy));
    let grants = combine(grants);

    warnings.extend(command.notes.iter().cloned());
    let (mut out_env, env_dropped) = environment(policy, &command, env, &mut warnings);
    let scratch_files = git_config(policy, &command, &mut out_env);
    let domains = (!policy.allow_domains.is_empty()).then(|| DomainPlan {
        allow: policy.allow_domains.clone(),
        hosts: policy.pins.clone(),
        audit_file: policy.audit_file.clone(),
    });
    if domains.is_some() {
        proxied_env(&mut out_env, &mut warnings);
        if policy.raw.network.unix_sockets {
            warnings.push("unix_sockets = true lets the server reach local services outside its network (systemd-resolved, which answers DNS, D-Bus, ...) that allow_domains does not cover".into());
        }
    }
    let (private_home, home_store) = home(policy, &command, env, &mut warnings);

    SandboxPlan {
        policy: policy.name(),
        command,
        roots: enforced,
        folded: merged.folded,
        refused,
        grants,
        network: NetworkPlan {
            tcp_connect: policy.tcp_connect.clone(),
            tcp_bind: policy.tcp_bind.clone(),
            udp: policy.raw.network.udp,
            unix_sockets: policy.raw.network.unix_sockets,
            domains,
        },
        scopes: ScopePlan {
            signal: true,
            abstract_unix_socket: true,
        },
        env: out_env,
        env_dropped,
        scratch: policy.raw.runtime.scratch,
        private_layers,
        private_home,
        home_store,
        written_record: crate::runtime::written_record(env),
        scratch_files,
        exec_in_roots,
        namespaces: policy.raw.isolation.namespaces.into(),
        landlock: policy.raw.isolation.landlock.into(),
        protected,
        capabilities: HostCapabilities::of(policy),
        limits: policy.raw.limits.clone(),
        resources: policy.raw.resources.clone(),
        report_refusals: false,
        observe_paths: false,
        observe_network: false,
        deny: policy.deny.clone(),
        warnings,
    }
}

/// The environment of a server whose network goes through the proxy:
/// nothing that sends requests around it (`NO_PROXY`), node told to use
/// it (`NODE_USE_ENV_PROXY`, node 24 and later); the proxy variables
/// themselves are set at launch, to the proxy's address.
pub fn proxied_env(env: &mut BTreeMap<String, (String, EnvSource)>, warnings: &mut Vec<String>) {
    for k in crate::netproxy::BYPASS_ENV {
        if env.remove(*k).is_some() {
            warnings.push(format!(
                "{k} is not passed: it would send requests around rootfence's network proxy, where the sandbox refuses them"
            ));
        }
    }
    for (k, _) in crate::netproxy::proxy_env("") {
        if env.remove(k).is_some() {
            warnings.push(format!(
                "{k} is replaced by the address of rootfence's network proxy (an upstream proxy is not used)"
            ));
        }
    }
    env.entry("NODE_USE_ENV_PROXY".into())
        .or_insert_with(|| ("1".into(), EnvSource::Rule));
}

/// The grants of the enforced roots, each from its handle.
pub(crate) fn root_grants(enforced: &[CanonicalRoot], exec_in_roots: bool) -> Vec<Grant> {
    enforced
        .iter()
        .map(|r| {
            let mut rights = match r.access {
                Access::ReadWrite => Rights::RW,
                Access::ReadOnly => Rights::R,
            };
            rights.exec = exec_in_roots;
            Grant {
                path: r.path.clone(),
                rights,
                reasons: vec![GrantReason::Root { uri: r.uri.clone() }],
                optional: false,
                handle: Some(r.handle.clone()),
            }
        })
        .collect()
}

/// The grants of the runtime's general rules (added to `grants`, which
/// hold the roots' own), and the private layers among them.
///
/// # Security
///
/// A need found in a directory's contents (a `PATH` directory's links and
/// `#!` lines) is not granted where the server may write that directory
/// (in a root it may write, or under a `[runtime] write` path): what it
/// holds there is the server's word, put there at an earlier launch.
fn runtime_grants(
    policy: &Policy,
    command: &CommandSpec,
    env: &HostEnv,
    grants: &mut Vec<Grant>,
    warnings: &mut Vec<String>,
) -> Vec<PrivateLayer> {
    let mut private_layers = Vec::new();
    // Where the server may write, and what says so; and whether a grant
    // inside the same place may still come from it (a place a server was
    // let write before: what lies there may be the server's, but leads
    // nowhere outside it; a place it may write now is its own already).
    let mut writable: Vec<(PathBuf, String, bool)> = grants
        .iter()
        .filter(|g| g.rights.write)
        .flat_map(|g| {
            g.reasons.iter().filter_map(|r| match r {
                GrantReason::Root { uri } => Some((g.path.clone(), format!("root {uri}"), false)),
                _ => None,
            })
        })
        .collect();
    for e in policy.extra.iter().filter(|e| e.kind == ExtraKind::Write) {
        let path = crate::canon::canonicalize(&e.path).unwrap_or_else(|_| e.path.clone());
        writable.push((path, format!("a [runtime] write path ({})", e.origin), false));
    }
    for p in &command.written_before {
        writable.push((
            p.clone(),
            "a place a server was let write before (remembered in ~/.local/state/rootfence/written)"
                .to_string(),
            true,
        ));
    }
    for n in &command.needs {
        if let Some((from, (what, remembered))) = n.from.iter().find_map(|f| {
            writable
                .iter()
                .find(|(w, _, inside)| {
                    // Inside, as the path leads: a link there (planted by
                    // the server) may lead anywhere.
                    let within = || {
                        crate::canon::canonicalize(&n.path).is_ok_and(|c| c.starts_with(w))
                    };
                    f.starts_with(w) && !(*inside && within())
                })
                .map(|(_, what, remembered)| (f, (what, *remembered)))
        }) {
            let shown = crate::runtime::shown(from, env.home.as_deref());
            let note = if remembered {
                format!(
                    "{shown} grants nothing outside itself: it lies in {what}, so the links, #! lines and files there may be a server's word; if they are yours, grant what they lead to in the policy's [runtime] read, or delete that record"
                )
            } else {
                format!(
                    "{shown} grants nothing: it lies in {what}, which the server may write, so the links, #! lines and files there are the server's word"
                )
            };
            if !warnings.contains(&note) {
                warnings.push(note);
            }
            continue;
        }
        if let Some((rule, _)) = deny_conflict(&n.path, &policy.deny) {
            // Discovery narrows grants around denied paths; this is the
            // last line, never expected to be reached.
            warnings.push(format!(
                "runtime path {} ({}) not granted: it touches denied path {} ({})",
                n.path.display(),
                n.why,
                rule.shown,
                rule.origin
            ));
            continue;
        }
        if n.private {
            private_layers.push(PrivateLayer {
                path: n.path.clone(),
                env: n.private_env.clone(),
                why: n.why.clone(),
            });
        }
        grants.push(Grant {
            path: n.path.clone(),
            rights: n.rights,
            reasons: vec![GrantReason::Runtime {
                rule: n.rule,
                why: n.why.clone(),
            }],
            optional: n.optional,
            handle: None,
        });
    }
    private_layers
}

/// The grants of the policy's `[runtime] read`, `exec` and `write`.
fn policy_grants(policy: &Policy) -> impl Iterator<Item = Grant> + '_ {
    policy.extra.iter().map(|e| Grant {
        path: e.path.clone(),
        rights: match e.kind {
            ExtraKind::Read => Rights::R,
            ExtraKind::Exec => Rights::RX,
            ExtraKind::Write => Rights::RW,
        },
        reasons: vec![GrantReason::Policy {
            origin: e.origin.clone(),
        }],
        optional: false,
        handle: None,
    })
}

/// git's global configuration for the server: the sanitized copy (a file
/// in its scratch directory, and in its private home), or an empty one
/// (git fails on a global configuration it may not read); a value the
/// policy or a `--env` flag gives wins.
fn git_config(
    policy: &Policy,
    command: &CommandSpec,
    env: &mut BTreeMap<String, (String, EnvSource)>,
) -> Vec<ScratchFile> {
    let given = env
        .get("GIT_CONFIG_GLOBAL")
        .is_some_and(|(_, src)| matches!(src, EnvSource::Set | EnvSource::Flag));
    if given {
        return Vec::new();
    }
    match (&command.git_config, policy.raw.runtime.scratch) {
        (Some(content), true) => {
            env.remove("GIT_CONFIG_GLOBAL");
            vec![ScratchFile {
                name: "gitconfig".into(),
                content: content.clone(),
                env: "GIT_CONFIG_GLOBAL".into(),
                // GitPython reads ~/.gitconfig whatever the variable.
                home: Some(".gitconfig".into()),
                why: "git's global configuration, sanitized (identity and safe settings only)"
                    .into(),
            }]
        }
        _ => {
            env.insert(
                "GIT_CONFIG_GLOBAL".into(),
                ("/dev/null".into(), EnvSource::Rule),
            );
            Vec::new()
        }
    }
}

/// The server's environment and the names of rootfence's variables that
/// do not reach it. Precedence, lowest first: `env.pass`, the runtime
/// rules' settings, `--env` flags, `env.set` (see [`crate::envvars`]).
///
/// # Security
///
/// Only `env.pass` entries, the rules' settings, the policy's `--env` flags (checked
/// by [`Policy::with_env_flags`]) and `env.set` put a variable in the
/// result; a `PREFIX*` pattern never passes a variable the policy refuses
/// ([`Policy::env_refusal`]).
fn environment(
    policy: &Policy,
    command: &CommandSpec,
    env: &HostEnv,
    warnings: &mut Vec<String>,
) -> (BTreeMap<String, (String, EnvSource)>, Vec<String>) {
    let mut out = BTreeMap::new();
    for pattern in &policy.env_pass {
        if pattern == "LC_*" {
            // The locale categories, not whatever else a name beginning
            // with LC_ holds in rootfence's environment.
            for name in LOCALE_CATEGORIES {
                if let Some(v) = env.vars.get(*name) {
                    out.insert((*name).to_string(), (v.clone(), EnvSource::Passed));
                }
            }
            continue;
        }
        match pattern.strip_suffix('*') {
            Some(prefix) => {
                for (k, v) in env.vars.range(prefix.to_string()..) {
                    if !k.starts_with(prefix) {
                        break;
                    }
                    if policy.env_refusal(k).is_some() {
                        continue;
                    }
                    out.insert(k.clone(), (v.clone(), EnvSource::Passed));
                }
            }
            None => {
                if let Some(v) = env.vars.get(pattern) {
                    out.insert(pattern.clone(), (v.clone(), EnvSource::Passed));
                }
            }
        }
    }
    host_set(policy, env, &mut out, warnings);
    for (k, v) in &command.env {
        out.insert(k.clone(), (v.clone(), EnvSource::Rule));
    }
    for f in &policy.env_flags {
        if policy.env_set.contains_key(&f.name) {
            warnings.push(format!(
                "{f} has no effect: the policy sets {} ([env] set), which wins",
                f.name
            ));
            continue;
        }
        let value = match &f.value {
            Some(v) => Some(v.clone()),
            None => env.vars.get(&f.name).cloned(),
        };
        match value {
            Some(v) => {
                out.insert(f.name.clone(), (v, EnvSource::Flag));
            }
            None => warnings.push(format!(
                "{f}: {} is not set in rootfence's environment; the server does not get it",
                f.name
            )),
        }
    }
    for (k, v) in &policy.env_set {
        out.insert(k.clone(), (v.clone(), EnvSource::Set));
    }
    let scratch = policy.raw.runtime.scratch;
    let dropped = env
        .vars
        .keys()
        .filter(|k| {
            let replaced = scratch && *k == "TMPDIR";
            !replaced && !out.contains_key(*k)
        })
        .cloned()
        .collect();
    (out, dropped)
}

/// The variables the host set for this launch (`env.host_set`), unless
/// refused like a flag naming them would be (they make a runtime load
/// code) or rootfence's own; what passes already is left as it is.
///
/// # Security
///
/// The input is the host's configuration (what it added to its own
/// environment for this command), never the server's.
fn host_set(
    policy: &Policy,
    env: &HostEnv,
    out: &mut BTreeMap<String, (String, EnvSource)>,
    warnings: &mut Vec<String>,
) {
    let Some(set) = &env.host_set else {
        return;
    };
    for k in set {
        let ours = k.starts_with("ROOTFENCE_") || (policy.raw.runtime.scratch && k == "TMPDIR");
        if ours || out.contains_key(k) {
            continue;
        }
        let Some(v) = env.vars.get(k) else { continue };
        if let Some(rule) = policy.env_refusal(k) {
            warnings.push(format!(
                "{k}, set by the host for this server, is not passed: {k} {}; to allow it, name it in the policy's [env] pass", rule.why
            ));
            continue;
        }
        out.insert(k.clone(), (v.clone(), EnvSource::Host));
    }
}

/// Apply `[roots] vcs` to the control files found in read-write roots:
/// the roots kept, and the paths the view mounts read-only.
fn control_files(
    policy: &Policy,
    roots: Vec<CanonicalRoot>,
    refused: &mut Vec<Refusal>,
    warnings: &mut Vec<String>,
) -> (Vec<CanonicalRoot>, Vec<Protected>) {
    use crate::policy::VcsMode;
    use crate::roots::control::ControlKind;
    let mode = policy.raw.roots.vcs;
    let mut kept = Vec::with_capacity(roots.len());
    let mut protected = Vec::new();
    for r in roots {
        let (found, truncated) = &r.control;
        if r.access != Access::ReadWrite || (found.is_empty() && !truncated) {
            kept.push(r);
            continue;
        }
        let names: Vec<String> = found
            .iter()
            .map(|c| {
                c.path.strip_prefix(&r.path).map_or_else(
                    |_| c.path.display().to_string(),
                    |p| p.display().to_string(),
                )
            })
            .collect();
        let list = names.join(", ");
        if *truncated {
            warnings.push(format!(
                "root {} has more than {} subdirectories: only the first were looked into for version-control and editor metadata",
                r.uri,
                crate::roots::control::MAX_SCANNED_DIRS
            ));
        }
        if found.is_empty() {
            kept.push(r);
            continue;
        }
        match mode {
            VcsMode::Refuse => refused.push(Refusal {
                input: r.input.clone(),
                from: r.source,
                reason: RefusalReason::ControlFiles {
                    found: list,
                    origin: policy.name(),
                },
            }),
            VcsMode::Warn => {
                warnings.push(format!(
                    "root {} is writable and holds {list}: the server can change what tools outside run unasked (git status runs .git/config's core.fsmonitor, editors run workspace tasks); set [roots] vcs = \"read-only\" or \"refuse\", or give the root read-only",
                    r.uri
                ));
                kept.push(r);
            }
            VcsMode::ReadOnly if found.iter().any(|c| c.symlink) => {
                let link = found
                    .iter()
                    .find(|c| c.symlink)
                    .map(|c| c.path.clone())
                    .unwrap_or_default();
                refused.push(Refusal {
                    input: r.input.clone(),
                    from: r.source,
                    reason: RefusalReason::ControlSymlink {
                        link,
                        origin: policy.name(),
                    },
                });
            }
            VcsMode::ReadOnly => {
                for c in found {
                    let why = format!("{} in root {}", c.kind.name(), r.uri);
                    let mut add = |path: PathBuf, readonly: bool, identity| {
                        protected.push(Protected {
                            path,
                            readonly,
                            why: why.clone(),
                            identity,
                        })
                    };
                    match c.kind {
                        // The directory pinned (it cannot be renamed away
                        // and a forged one put in its place); everything in
                        // it git (or hg) does not write in normal work,
                        // read-only.
                        ControlKind::GitDir | ControlKind::Hg => {
                            add(c.path.clone(), false, c.identity);
                            let writes = if c.kind == ControlKind::GitDir {
                                crate::roots::control::git_writes
                            } else {
                                crate::roots::control::hg_writes
                            };
                            for name in c.inner.iter().filter(|n| !writes(n)) {
                                add(c.path.join(name), true, None);
                            }
                        }
                        ControlKind::GitFile
                        | ControlKind::Envrc
                        | ControlKind::Vscode
                        | ControlKind::Idea => add(c.path.clone(), true, None),
                    }
                }
                warnings.push(format!(
                    "root {} holds {list}: mounted read-only in the server's view (with namespaces); metadata the server creates where there was none is not protected",
                    r.uri
                ));
                kept.push(r);
            }
        }
    }
    (kept, protected)
}

/// Combine grants for the same path (union of rights, all reasons kept),
/// sorted by path. A root's handle is kept.
fn combine(mut grants: Vec<Grant>) -> Vec<Grant> {
    grants.sort_by(|a, b| a.path.cmp(&b.path));
    let mut out: Vec<Grant> = Vec::with_capacity(grants.len());
    for g in grants {
        match out.last_mut() {
            Some(last) if last.path == g.path => {
                last.rights = last.rights.union(g.rights);
                last.reasons.extend(g.reasons);
                last.optional &= g.optional;
                if last.handle.is_none() {
                    last.handle = g.handle;
                }
            }
            _ => out.push(g),
        }
    }
    out
}
