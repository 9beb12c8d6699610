//! Security-policy files: loading, validation, and the validated [`Policy`]
//! the rest of rootfence uses.
//!
//! The format is documented in `policy/README.md`; its JSON Schema is
//! `policy/policy.schema.json` (regenerate with `rootfence schema`). Every
//! error names the file, the line and the key.

mod format;
mod locate;

pub use format::*;
use locate::key_at;
pub use locate::key_offset;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Component, Path, PathBuf};

use toml::Spanned;

use crate::roots::{Origin, PathRule, RootInput, RootRules, RootSource};

/// The policy used when none is given (`policy/default.toml`).
pub const DEFAULT_POLICY: &str = include_str!("../../policy/default.toml");

/// Paths denied by default (`[deny] builtin = true`). `~` is the home
/// directory.
pub const BUILTIN_DENY: &[&str] = &[
    "~/.ssh",
    "~/.gnupg",
    "~/.aws",
    "~/.azure",
    "~/.config/gcloud",
    "~/.config/gh",
    "~/.kube",
    "~/.docker",
    "~/.netrc",
    "~/.npmrc",
    "~/.pypirc",
    "~/.git-credentials",
    // git's configuration holds tokens (url.<x>.insteadOf) and commands
    // (core.fsmonitor); a sanitized copy reaches the server instead.
    "~/.gitconfig",
    "~/.config/git",
    "~/.cargo/credentials",
    "~/.cargo/credentials.toml",
    "~/.config/hub",
    "~/.config/rclone",
    "~/.terraform.d",
    "~/.vault-token",
    "~/.pgpass",
    "~/.my.cnf",
    "~/.m2/settings.xml",
    "~/.gradle/gradle.properties",
    "~/.config/op",
    "~/.mozilla",
    "~/.config/google-chrome",
    "~/.config/chromium",
    "~/.password-store",
    "~/.local/share/keyrings",
    // Coding agents' sign-in tokens (the hosts rootfence runs servers
    // for).
    "~/.claude/.credentials.json",
    "~/.codex/auth.json",
    "~/.bash_history",
    "~/.zsh_history",
    "~/.histfile",
    "~/.sh_history",
    "~/.python_history",
    "~/.node_repl_history",
    "~/.psql_history",
    "~/.mysql_history",
    "~/.sqlite_history",
    "~/.lesshst",
    "~/.local/share/fish/fish_history",
    // rootfence's own state: policies it loads, initialize answers it
    // replays to hosts. A server that could write them would reach every
    // later session (see also `Policy::with_state_dirs`).
    "~/.config/rootfence",
    "~/.cache/rootfence",
    "~/.local/state/rootfence",
    "/etc/shadow",
    "/etc/gshadow",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssh",
];

/// A policy file that could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The file could not be read.
    #[error("policy {file}: cannot read: {source} (check the path given to --policy)")]
    Read {
        /// The file.
        file: String,
        /// Why it cannot be read, or is not trusted.
        source: Untrusted,
    },
    /// The TOML is malformed, or a key or value is not part of the format.
    #[error("policy {file} line {line}{key}: {message}")]
    Invalid {
        /// The file.
        file: String,
        /// 1-based line.
        line: usize,
        /// ", key `a.b`" or empty.
        key: KeyNote,
        /// What is wrong and how to fix it.
        message: String,
    },
    /// The file was there and is no longer readable (a watched policy
    /// deleted or made unreadable).
    #[error("policy {file} cannot be read (deleted?)")]
    Gone {
        /// The file.
        file: String,
    },
    /// The file is not UTF-8.
    #[error("policy {file} is not UTF-8")]
    NotUtf8 {
        /// The file.
        file: String,
    },
    /// The policy refuses a `--env` flag of the launch.
    #[error(transparent)]
    EnvRefused(#[from] EnvRefused),
}

/// The key part of a [`PolicyError::Invalid`] message.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyNote(pub Option<String>);

impl fmt::Display for KeyNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Some(k) => write!(f, ", key `{k}`"),
            None => Ok(()),
        }
    }
}

/// A path granted by the policy's `[runtime]` section.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ExtraPath {
    /// As written.
    pub shown: String,
    /// Expanded absolute path.
    pub path: PathBuf,
    /// `read`, `exec` or `write`.
    pub kind: ExtraKind,
    /// Where it was written.
    pub origin: Origin,
}

/// The list an [`ExtraPath`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExtraKind {
    /// `runtime.read`
    Read,
    /// `runtime.exec`
    Exec,
    /// `runtime.write`
    Write,
}

/// A variable `--env` may not name and `[env] pass` patterns never pass.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct EnvRule {
    /// `NAME` or `PREFIX*`.
    pub pattern: String,
    /// Why it is refused.
    pub why: String,
}

/// A `--env` flag the policy refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "--env {name} refused: {name} {why}; a policy that means it names it in [env] pass or [env] set (policy {policy})"
)]
pub struct EnvRefused {
    /// The variable.
    pub name: String,
    /// Why.
    pub why: String,
    /// The policy's name.
    pub policy: String,
}

/// A validated policy.
#[derive(Debug, Clone)]
pub struct Policy {
    /// The file it was loaded from (`None`: the built-in default).
    pub file: Option<PathBuf>,
    /// The parsed file.
    pub raw: PolicyFile,
    /// Where roots may come from; empty means every source.
    pub sources: Vec<RootSource>,
    /// The ceiling, expanded.
    pub allow_under: Option<Vec<PathRule>>,
    /// Every denied path: built-in, the file's own, and the policy file.
    pub deny: Vec<PathRule>,
    /// Static roots.
    pub static_roots: Vec<RootInput>,
    /// `[runtime]` read/exec/write paths, expanded.
    pub extra: Vec<ExtraPath>,
    /// TCP ports the server may connect to.
    pub tcp_connect: Vec<u16>,
    /// TCP ports the server may bind.
    pub tcp_bind: Vec<u16>,
    /// `[network] allow_domains`, read.
    pub allow_domains: Vec<crate::netproxy::DomainRule>,
    /// `[network] hosts`, read.
    pub pins: crate::netproxy::rule::Pins,
    /// Environment variables passed through (`NAME` or `PREFIX*`).
    pub env_pass: Vec<String>,
    /// Environment variables set.
    pub env_set: BTreeMap<String, String>,
    /// Variables refused to `--env` and to `pass` patterns: the built-in
    /// list (`crate::envvars::REFUSED`) and `[env] deny`.
    pub env_deny: Vec<EnvRule>,
    /// The launch's `--env` flags, checked against this policy (see
    /// [`Policy::with_env_flags`]); empty when loaded.
    pub env_flags: Vec<crate::envvars::EnvFlag>,
    /// Audit file, expanded.
    pub audit_file: Option<PathBuf>,
    /// Home directory used for expansion.
    pub home: Option<PathBuf>,
}

impl Policy {
    /// Where this policy lets a server write (its `[runtime] write` paths
    /// and the roots it names for writing), canonical where they exist.
    pub fn server_writes(&self) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = self
            .extra
            .iter()
            .filter(|e| e.kind == ExtraKind::Write)
            .map(|e| crate::canon::canonicalize(&e.path).unwrap_or_else(|_| e.path.clone()))
            .collect();
        out.extend(crate::roots::writable_paths(&self.static_roots, None));
        out
    }

    /// The built-in default policy (`policy/default.toml`).
    pub fn builtin(home: Option<&Path>) -> Result<Policy, PolicyError> {
        Policy::parse(DEFAULT_POLICY, None, home)
    }

    /// Load and validate a policy file.
    ///
    /// # Security
    ///
    /// The file is read once, through its canonical path opened without
    /// following a symlink, and must be a regular file with a single link:
    /// a second hard link (inside a root, say) would let the server rewrite
    /// the policy of a later session. The path as given and its canonical
    /// path both join the deny list, so no root may contain either.
    pub fn load(file: &Path, home: Option<&Path>) -> Result<Policy, PolicyError> {
        let text = read_trusted(file).map_err(|source| PolicyError::Read {
            file: file.display().to_string(),
            source,
        })?;
        Policy::parse(&text, Some(file), home)
    }

    /// Parse and validate policy text; `file` names it in errors and is
    /// added to the deny list.
    pub fn parse(
        text: &str,
        file: Option<&Path>,
        home: Option<&Path>,
    ) -> Result<Policy, PolicyError> {
        let shown = file.map_or_else(
            || "(built-in default)".to_string(),
            |f| f.display().to_string(),
        );
        let raw: PolicyFile = toml::from_str(text).map_err(|e| {
            let offset = e.span().map_or(0, |s| s.start);
            PolicyError::Invalid {
                file: shown.clone(),
                line: line_of(text, offset),
                key: KeyNote(key_at(text, offset)),
                message: e.message().trim().to_string(),
            }
        })?;
        Validator {
            text,
            shown: &shown,
            file,
            home,
        }
        .validate(raw)
    }

    /// With rootfence's own state directories where the XDG variables of
    /// `env` put them (`$XDG_CONFIG_HOME/rootfence`,
    /// `$XDG_CACHE_HOME/rootfence`, `$XDG_STATE_HOME/rootfence`) denied like
    /// the built-in `~/.config/rootfence` and its siblings: a root that
    /// holds them is refused, no grant reaches them.
    pub fn with_state_dirs(mut self, env: &crate::hostenv::HostEnv) -> Policy {
        if !self.raw.deny.builtin {
            return self;
        }
        for var in ["XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"] {
            let Some(base) = env.vars.get(var).map(PathBuf::from) else {
                continue;
            };
            if !base.is_absolute() {
                continue;
            }
            let p = base.join("rootfence");
            if !self.deny.iter().any(|r| r.path == p) {
                self.deny.push(PathRule::new(
                    format!("${var}/rootfence"),
                    p,
                    Origin::Builtin,
                ));
            }
        }
        self
    }

    /// The rules the roots engine applies, with `cwd` as the base for
    /// relative command-line roots.
    pub fn root_rules(&self, cwd: Option<PathBuf>) -> RootRules {
        RootRules {
            allow_under: self.allow_under.clone(),
            deny: self.deny.clone(),
            allow_filesystem_root: self.raw.roots.allow_filesystem_root,
            sources: self.sources.clone(),
            home: self.home.clone(),
            cwd,
        }
    }

    /// The rule refusing `name` to `--env` and to `pass` patterns, if any.
    /// A variable the policy names exactly in `[env] pass` or `[env] set`
    /// is never refused: the policy means it.
    pub fn env_refusal(&self, name: &str) -> Option<&EnvRule> {
        if self.env_set.contains_key(name) || self.env_pass.iter().any(|p| p == name) {
            return None;
        }
        self.env_deny
            .iter()
            .find(|r| crate::envvars::matches(&r.pattern, name))
    }

    /// This policy with the launch's `--env` flags, each checked against
    /// [`Policy::env_refusal`].
    ///
    /// # Security
    ///
    /// A flag naming a refused variable is an error, never silently
    /// dropped or applied: the launch does not start.
    pub fn with_env_flags(
        mut self,
        flags: &[crate::envvars::EnvFlag],
    ) -> Result<Policy, EnvRefused> {
        for f in flags {
            if let Some(rule) = self.env_refusal(&f.name) {
                return Err(EnvRefused {
                    name: f.name.clone(),
                    why: rule.why.clone(),
                    policy: self.name(),
                });
            }
        }
        self.env_flags = flags.to_vec();
        Ok(self)
    }

    /// Display name of the policy (its file, or "built-in default").
    pub fn name(&self) -> String {
        self.file.as_ref().map_or_else(
            || "built-in default".to_string(),
            |f| f.display().to_string(),
        )
    }
}

/// `[env]` as validated.
struct EnvRules {
    pass: Vec<String>,
    set: BTreeMap<String, String>,
    deny: Vec<EnvRule>,
}

struct Validator<'a> {
    text: &'a str,
    shown: &'a str,
    file: Option<&'a Path>,
    home: Option<&'a Path>,
}

impl Validator<'_> {
    fn err(&self, offset: usize, key: &str, message: impl Into<String>) -> PolicyError {
        PolicyError::Invalid {
            file: self.shown.to_string(),
            line: line_of(self.text, offset),
            key: KeyNote(Some(key.to_string())),
            message: message.into(),
        }
    }

    /// Byte offset of `key` in `[table]` ("" for the top level), or of the
    /// table header, for errors about values checked after parsing.
    fn at(&self, table: &str, key: &str) -> usize {
        key_offset(self.text, table, key)
    }

    /// `[network] allow_domains` and `hosts`, read and checked.
    fn domains(
        &self,
        n: &format::NetworkSection,
    ) -> Result<
        (
            Vec<crate::netproxy::DomainRule>,
            crate::netproxy::rule::Pins,
        ),
        PolicyError,
    > {
        use crate::netproxy::{DomainRule, TargetHost, rule};
        let mut rules = Vec::new();
        for e in &n.allow_domains {
            let r = DomainRule::parse(e.get_ref()).map_err(|why| {
                self.err(
                    e.span().start,
                    "network.allow_domains",
                    format!("{:?}: {why}", e.get_ref()),
                )
            })?;
            rules.push(r);
        }
        if let Some(first) = n.allow_domains.first() {
            let at = first.span().start;
            let clash = |what: &str| {
                self.err(
                    at,
                    "network.allow_domains",
                    format!(
                        "allow_domains gives the server the network through rootfence's proxy only, and {what}; drop it, and list \"host:port\" entries instead"
                    ),
                )
            };
            if !n.tcp_connect.is_empty() {
                return Err(clash(
                    "tcp_connect would open its ports to every host (the list exists to close that)",
                ));
            }
            if !n.tcp_bind.is_empty() {
                return Err(clash(
                    "tcp_bind would give it listeners nobody outside can reach (it runs in a network of its own)",
                ));
            }
            if n.udp {
                return Err(clash("udp = true would open UDP (and DNS) to every host"));
            }
        }
        let mut pins = rule::Pins::new();
        for (name, addr) in &n.hosts {
            let Some(host) = rule::pin_name(name.get_ref()) else {
                return Err(self.err(
                    name.span().start,
                    "network.hosts",
                    format!("{:?} is not a host name", name.get_ref()),
                ));
            };
            let Ok(ip) = addr.get_ref().trim().parse::<std::net::IpAddr>() else {
                return Err(self.err(
                    addr.span().start,
                    "network.hosts",
                    format!(
                        "{:?} is not an IP address (write \"127.0.0.1\" or \"::1\")",
                        addr.get_ref()
                    ),
                ));
            };
            let named = TargetHost::Name(host.clone());
            if !rules.iter().any(|r| r.names(&named)) {
                return Err(self.err(
                    name.span().start,
                    "network.hosts",
                    format!(
                        "{host} is pinned, but no allow_domains entry allows it; add \"{host}\" (or \"{host}:PORT\") to allow_domains, or drop the pin"
                    ),
                ));
            }
            pins.insert(host, ip);
        }
        Ok((rules, pins))
    }

    fn origin(&self, offset: usize) -> Origin {
        match self.file {
            Some(f) => Origin::Policy {
                file: f.to_path_buf(),
                line: line_of(self.text, offset),
            },
            None => Origin::Builtin,
        }
    }

    fn path(&self, s: &Spanned<String>, key: &str) -> Result<PathBuf, PolicyError> {
        expand(s.get_ref(), self.home).map_err(|m| self.err(s.span().start, key, m.to_string()))
    }

    fn validate(&self, raw: PolicyFile) -> Result<Policy, PolicyError> {
        if let Some(v) = raw.version
            && v != 1
        {
            let at = self.at("", "version");
            return Err(self.err(
                at,
                "version",
                format!("version {v} is not supported (only 1)"),
            ));
        }
        let sources: Vec<RootSource> = raw
            .roots
            .sources
            .iter()
            .map(|s| (*s.get_ref()).into())
            .collect();
        let allow_under = self.allow_under(&raw.roots)?;
        if raw.roots.max_roots == 0 {
            let at = self.at("roots", "max_roots");
            return Err(self.err(at, "roots.max_roots", "must be at least 1"));
        }
        let mut deny = self.deny_list(&raw.deny)?;
        let static_roots = self.static_roots(&raw.roots)?;
        let extra = self.extra_paths(&raw.runtime, &deny)?;
        let tcp_connect = self.ports(&raw.network.tcp_connect, "network.tcp_connect")?;
        let tcp_bind = self.ports(&raw.network.tcp_bind, "network.tcp_bind")?;
        let (allow_domains, pins) = self.domains(&raw.network)?;
        let EnvRules {
            pass: env_pass,
            set: env_set,
            deny: env_deny,
        } = self.environment(&raw.env)?;
        self.check_limits(&raw)?;
        let audit_file = match &raw.audit.file {
            Some(f) => Some(self.path(f, "audit.file")?),
            None => None,
        };
        if let Some(a) = &audit_file {
            // rootfence appends to it: no root may contain it.
            deny.push(PathRule::new(
                a.display().to_string(),
                a.clone(),
                Origin::AuditFile,
            ));
        }
        Ok(Policy {
            file: self.file.map(Path::to_path_buf),
            sources,
            allow_under,
            deny,
            static_roots,
            extra,
            tcp_connect,
            tcp_bind,
            allow_domains,
            pins,
            env_pass,
            env_set,
            env_deny,
            env_flags: Vec::new(),
            audit_file,
            home: self.home.map(Path::to_path_buf),
            raw,
        })
    }

    /// `[roots] allow_under`, expanded.
    fn allow_under(&self, roots: &RootsSection) -> Result<Option<Vec<PathRule>>, PolicyError> {
        let Some(list) = &roots.allow_under else {
            return Ok(None);
        };
        list.iter()
            .map(|s| {
                let p = self.path(s, "roots.allow_under")?;
                Ok(PathRule::new(
                    s.get_ref().clone(),
                    p,
                    self.origin(s.span().start),
                ))
            })
            .collect::<Result<Vec<_>, PolicyError>>()
            .map(Some)
    }

    /// The deny list: the built-in one (unless turned off knowingly), the
    /// file's own paths, and the policy file itself.
    fn deny_list(&self, d: &DenySection) -> Result<Vec<PathRule>, PolicyError> {
        let mut deny = Vec::new();
        if d.builtin {
            for b in BUILTIN_DENY {
                // No home directory: the `~` entries name nothing.
                if let Ok(p) = expand(b, self.home) {
                    deny.push(PathRule::new(*b, p, Origin::Builtin));
                }
            }
        } else if !d.i_know {
            let at = self.at("deny", "builtin");
            return Err(self.err(
                at,
                "deny.builtin",
                "turning off the built-in deny list (~/.ssh, ~/.aws, ...) also needs `i_know = true` in [deny]",
            ));
        }
        for s in &d.paths {
            let p = self.path(s, "deny.paths")?;
            deny.push(PathRule::new(
                s.get_ref().clone(),
                p,
                self.origin(s.span().start),
            ));
        }
        if let Some(f) = self.file {
            // The path as given (a symlink in a root could be retargeted)
            // and, through the rule, its canonical target.
            deny.push(PathRule::new(
                f.display().to_string(),
                absolute(f),
                Origin::PolicyFile,
            ));
        }
        Ok(deny)
    }

    /// `[[roots.static]]`, paths expanded (URIs as written).
    fn static_roots(&self, roots: &RootsSection) -> Result<Vec<RootInput>, PolicyError> {
        let mut out = Vec::new();
        for s in &roots.static_roots {
            let r = s.get_ref();
            let text = if crate::roots::looks_like_uri(&r.path) {
                r.path.clone()
            } else {
                let p = expand(&r.path, self.home)
                    .map_err(|m| self.err(s.span().start, "roots.static.path", m.to_string()))?;
                p.to_string_lossy().into_owned()
            };
            out.push(RootInput::policy(text, r.name.clone(), r.access.into()));
        }
        Ok(out)
    }

    /// `[runtime] read`, `exec`, `write`: none may touch a denied path.
    fn extra_paths(
        &self,
        runtime: &RuntimeSection,
        deny: &[PathRule],
    ) -> Result<Vec<ExtraPath>, PolicyError> {
        let mut extra = Vec::new();
        for (list, kind, key) in [
            (&runtime.read, ExtraKind::Read, "runtime.read"),
            (&runtime.exec, ExtraKind::Exec, "runtime.exec"),
            (&runtime.write, ExtraKind::Write, "runtime.write"),
        ] {
            for s in list {
                let path = self.path(s, key)?;
                if let Some((rule, inside)) = deny_conflict(&path, deny) {
                    let how = if inside { "is inside" } else { "contains" };
                    return Err(self.err(
                        s.span().start,
                        key,
                        format!(
                            "{} {how} denied path {} ({}); grant a narrower path",
                            s.get_ref(),
                            rule.shown,
                            rule.origin
                        ),
                    ));
                }
                extra.push(ExtraPath {
                    shown: s.get_ref().clone(),
                    path,
                    kind,
                    origin: self.origin(s.span().start),
                });
            }
        }
        Ok(extra)
    }

    /// A list of TCP ports, sorted, each once.
    fn ports(&self, list: &[Spanned<i64>], key: &str) -> Result<Vec<u16>, PolicyError> {
        let mut out = Vec::new();
        for p in list {
            let v = *p.get_ref();
            match u16::try_from(v) {
                Ok(port) if port != 0 => out.push(port),
                _ => {
                    return Err(self.err(
                        p.span().start,
                        key,
                        format!("port {v} is not a TCP port (1-65535)"),
                    ));
                }
            }
        }
        out.sort_unstable();
        out.dedup();
        Ok(out)
    }

    /// `[env]`: what is passed, what is set, and what is refused (the
    /// built-in list and the file's own).
    fn environment(&self, env: &EnvSection) -> Result<EnvRules, PolicyError> {
        let mut env_pass = Vec::new();
        for s in &env.pass {
            let v = s.get_ref();
            let name = v.strip_suffix('*').unwrap_or(v);
            if v == "*" {
                return Err(self.err(
                    s.span().start,
                    "env.pass",
                    "\"*\" would pass the whole environment; list the variables the server needs",
                ));
            }
            if !crate::envvars::valid_name(name) {
                return Err(self.err(
                    s.span().start,
                    "env.pass",
                    format!("{v:?} is not a variable name (NAME or PREFIX*)"),
                ));
            }
            env_pass.push(v.clone());
        }
        let mut env_set = BTreeMap::new();
        for (k, v) in &env.set {
            if !crate::envvars::valid_name(k.get_ref()) {
                return Err(self.err(
                    k.span().start,
                    "env.set",
                    format!("{:?} is not a variable name", k.get_ref()),
                ));
            }
            env_set.insert(k.get_ref().clone(), v.clone());
        }
        Ok(EnvRules {
            pass: env_pass,
            set: env_set,
            deny: self.env_deny(env)?,
        })
    }

    /// The variables refused to `--env` and to `pass` patterns.
    fn env_deny(&self, env: &EnvSection) -> Result<Vec<EnvRule>, PolicyError> {
        let mut env_deny: Vec<EnvRule> = crate::envvars::REFUSED
            .iter()
            .map(|(pattern, why)| EnvRule {
                pattern: (*pattern).to_string(),
                why: format!("{why} (built-in)"),
            })
            .collect();
        for s in &env.deny {
            let v = s.get_ref();
            let name = v.strip_suffix('*').unwrap_or(v);
            if !crate::envvars::valid_name(name) {
                return Err(self.err(
                    s.span().start,
                    "env.deny",
                    format!("{v:?} is not a variable name (NAME or PREFIX*)"),
                ));
            }
            let named = env
                .pass
                .iter()
                .map(|p| p.get_ref().as_str())
                .chain(env.set.keys().map(|k| k.get_ref().as_str()))
                .find(|n| !n.ends_with('*') && crate::envvars::matches(v, n));
            if let Some(n) = named {
                return Err(self.err(
                    s.span().start,
                    "env.deny",
                    format!(
                        "{v:?} denies {n}, which [env] pass or [env] set names: drop one of the two"
                    ),
                ));
            }
            env_deny.push(EnvRule {
                pattern: v.clone(),
                why: format!("is denied by [env] deny ({})", self.origin(s.span().start)),
            });
        }
        Ok(env_deny)
    }

    /// `[limits]`, `[sampling]` and `[elicitation]` values that would make
    /// no sense.
    fn check_limits(&self, raw: &PolicyFile) -> Result<(), PolicyError> {
        if !(1024..=(1 << 30)).contains(&raw.limits.max_message_bytes) {
            let at = self.at("limits", "max_message_bytes");
            return Err(self.err(
                at,
                "limits.max_message_bytes",
                "must be between 1024 and 1073741824",
            ));
        }
        let s = &raw.sampling;
        if s.allow {
            if s.per_minute == 0 {
                let at = self.at("sampling", "per_minute");
                return Err(self.err(
                    at,
                    "sampling.per_minute",
                    "must be at least 1 when sampling is allowed (or set allow = false)",
                ));
            }
            if s.max_tokens == 0 {
                let at = self.at("sampling", "max_tokens");
                return Err(self.err(at, "sampling.max_tokens", "must be at least 1"));
            }
            if s.content_types.is_empty() {
                let at = self.at("sampling", "content_types");
                return Err(self.err(
                    at,
                    "sampling.content_types",
                    "must list at least one of text, image, audio",
                ));
            }
        }
        let e = &raw.elicitation;
        if e.sensitive_terms.iter().any(|t| t.trim().is_empty()) {
            let at = self.at("elicitation", "sensitive_terms");
            return Err(self.err(at, "elicitation.sensitive_terms", "terms must not be empty"));
        }
        if e.allow && !e.form && !e.url {
            let at = self.at("elicitation", "allow");
            return Err(self.err(
                at,
                "elicitation.allow",
                "allow = true but neither form nor url mode is enabled",
            ));
        }
        Ok(())
    }
}

/// `p` made absolute against the current directory (not resolved).
fn absolute(p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|c| c.join(p))
            .unwrap_or_else(|_| p.to_path_buf())
    }
}

/// Why a file rootfence would trust (a policy) cannot be read as one.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Untrusted {
    /// Resolving, opening or reading it failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// Not a regular file.
    #[error("{} is not a regular file", .0.display())]
    NotRegular(PathBuf),
    /// More than one hard link.
    #[error(
        "it has {0} hard links; another link (inside a root, say) would let a server rewrite it. Give it a single link: cp it to a new file and mv that over it"
    )]
    HardLinks(u64),
}

/// Read a file rootfence trusts (a policy): resolve the path once, open the
/// result without following a symlink, and require a regular file with one
/// link.
pub fn read_trusted(file: &Path) -> Result<String, Untrusted> {
    use std::io::Read;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let canonical = std::fs::canonicalize(file)?;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&canonical)?;
    let md = f.metadata()?;
    if !md.is_file() {
        return Err(Untrusted::NotRegular(canonical));
    }
    if md.nlink() > 1 {
        return Err(Untrusted::HardLinks(md.nlink()));
    }
    let mut text = String::new();
    f.read_to_string(&mut text)?;
    Ok(text)
}

/// If `path` is inside or contains a denied path, the rule and whether it is
/// inside.
pub fn deny_conflict<'a>(path: &Path, deny: &'a [PathRule]) -> Option<(&'a PathRule, bool)> {
    use crate::roots::{Known, within_known};
    let path = Known::new(path);
    for rule in deny {
        for d in rule.names().map(Known::new) {
            if within_known(path, d) {
                return Some((rule, true));
            }
            if within_known(d, path) {
                return Some((rule, false));
            }
        }
    }
    None
}

/// A policy path that cannot be expanded to an absolute path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ExpandError {
    /// It starts with the home directory, and `HOME` is not set.
    #[error("{0:?} uses the home directory, but HOME is not set")]
    NoHome(String),
    /// `~user`.
    #[error("{0:?}: only ~ (the current user's home) expands, not ~user")]
    OtherUser(String),
    /// A `$` other than a leading `$HOME`.
    #[error("{0:?}: only ~ and $HOME expand, at the start of a path")]
    Variable(String),
    /// Relative.
    #[error("{0:?} is not absolute (start it with /, ~ or $HOME)")]
    Relative(String),
    /// With `.` or `..` components.
    #[error("{0:?} contains . or .. components; write the path out")]
    Dots(String),
    /// With a NUL byte.
    #[error("{0:?} contains a NUL byte")]
    Nul(String),
}

/// Expand `~`, `~/...`, `$HOME`, `${HOME}` at the start of a policy path.
/// The result must be absolute, without `.` or `..` components.
pub fn expand(s: &str, home: Option<&Path>) -> Result<PathBuf, ExpandError> {
    let given = || s.to_string();
    let rest = if s == "~" || s == "$HOME" || s == "${HOME}" {
        Some("")
    } else {
        ["~/", "$HOME/", "${HOME}/"]
            .iter()
            .find_map(|p| s.strip_prefix(p))
    };
    let path = match rest {
        Some(rest) => {
            let home = home.ok_or_else(|| ExpandError::NoHome(given()))?;
            if rest.is_empty() {
                home.to_path_buf()
            } else {
                home.join(rest)
            }
        }
        None => {
            if s.starts_with('~') {
                return Err(ExpandError::OtherUser(given()));
            }
            if s.contains('$') {
                return Err(ExpandError::Variable(given()));
            }
            PathBuf::from(s)
        }
    };
    if !path.is_absolute() {
        return Err(ExpandError::Relative(given()));
    }
    if path
        .components()
        .any(|c| matches!(c, Component::CurDir | Component::ParentDir))
    {
        return Err(ExpandError::Dots(given()));
    }
    if s.contains('\0') {
        return Err(ExpandError::Nul(given()));
    }
    Ok(path)
}

/// 1-based line number of byte `offset` in `text`.
pub fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expansion() {
        let h = Path::new("/home/a");
        assert_eq!(expand("~", Some(h)).unwrap(), PathBuf::from("/home/a"));
        assert_eq!(
            expand("$HOME/x", Some(h)).unwrap(),
            PathBuf::from("/home/a/x")
        );
        assert_eq!(
            expand("${HOME}/x", Some(h)).unwrap(),
            PathBuf::from("/home/a/x")
        );
        // Each refused, naming the path as given.
        let refused = [
            ("~bob/x", ExpandError::OtherUser as fn(String) -> ExpandError),
            ("$USER/x", ExpandError::Variable),
            ("x/y", ExpandError::Relative),
            ("/a/../b", ExpandError::Dots),
        ];
        for (given, error) in refused {
            assert_eq!(expand(given, Some(h)), Err(error(given.to_string())));
        }
        assert_eq!(
            expand("~/x", None).unwrap_err().to_string(),
            "\"~/x\" uses the home directory, but HOME is not set"
        );
    }

    #[test]
    fn key_lookup() {
        let t = "[roots]\nallow_under = [\n  \"~\",\n  \"rel\",\n]\n[network]\nudp = 3\n";
        let off = t.find("\"rel\"").unwrap();
        assert_eq!(line_of(t, off), 4);
        assert_eq!(key_at(t, off).as_deref(), Some("roots.allow_under"));
        let udp = t.find('3').unwrap();
        assert_eq!(key_at(t, udp).as_deref(), Some("network.udp"));
        assert_eq!(key_at(t, 2).as_deref(), Some("roots"));
        assert_eq!(key_offset(t, "network", "udp"), t.find("udp").unwrap());
        assert_eq!(key_offset(t, "network", "tcp"), t.find("network").unwrap());
        assert_eq!(key_offset(t, "limits", "x"), 0);
    }
}
