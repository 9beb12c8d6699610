//! The policy file format: the serde model of a policy TOML file.
//!
//! Every table rejects unknown keys. Fields whose values are checked after
//! parsing (paths, ports, variable names) keep their source span so that an
//! error can name the line.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toml::Spanned;

use crate::roots::{Access, RootSource};

/// A rootfence security policy.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct PolicyFile {
    /// Format version; only 1 exists.
    pub version: Option<u32>,
    /// Where roots may come from and where they may lie.
    pub roots: RootsSection,
    /// Paths that are never allowed, as roots or as runtime grants.
    pub deny: DenySection,
    /// What the server's runtime may read, execute and write.
    pub runtime: RuntimeSection,
    /// Network rights.
    pub network: NetworkSection,
    /// The server's environment.
    pub env: EnvSection,
    /// Protocol and process limits.
    pub limits: LimitsSection,
    /// What the server may take of the machine.
    pub resources: ResourcesSection,
    /// `sampling/createMessage` rules.
    pub sampling: SamplingSection,
    /// `elicitation/create` rules.
    pub elicitation: ElicitationSection,
    /// Audit log of sampling and elicitation decisions.
    pub audit: AuditSection,
    /// Namespaces around the server.
    pub isolation: IsolationSection,
}

/// `[isolation]`
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct IsolationSection {
    /// Own user (unless rootfence is root), mount, PID and IPC namespaces for
    /// the server (and a network namespace on the view + seccomp rung): a
    /// filesystem view holding only its grants (metadata of everything else
    /// out of reach), and a PID
    /// namespace whose processes all end with the server. `auto`: where the
    /// kernel grants them, else run without and say what is lost;
    /// `require`: refuse to start without them; `off`: never.
    pub namespaces: NamespaceName,
    /// Landlock, the filesystem and TCP confinement of every rung but one.
    /// `require` (the default): refuse to start on a kernel without it.
    /// `prefer`: where the kernel has no Landlock, accept the server's own
    /// namespaces with its filesystem view and the seccomp filter as the
    /// confinement (what bubblewrap gives; TCP is then refused whole, see
    /// `rootfence doctor`), and still refuse where namespaces are not
    /// granted either.
    pub landlock: LandlockName,
}

/// `[isolation] landlock`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum LandlockName {
    /// Refuse to start without Landlock.
    #[default]
    Require,
    /// Without Landlock, confine by the view and seccomp.
    Prefer,
}

impl From<LandlockName> for crate::modes::LandlockMode {
    fn from(n: LandlockName) -> Self {
        match n {
            LandlockName::Require => crate::modes::LandlockMode::Require,
            LandlockName::Prefer => crate::modes::LandlockMode::Prefer,
        }
    }
}

/// `[isolation] namespaces`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum NamespaceName {
    /// Where the kernel grants them.
    #[default]
    Auto,
    /// Refuse to start without them.
    Require,
    /// Never.
    Off,
}

impl From<NamespaceName> for crate::modes::NamespaceMode {
    fn from(n: NamespaceName) -> Self {
        match n {
            NamespaceName::Auto => crate::modes::NamespaceMode::Auto,
            NamespaceName::Require => crate::modes::NamespaceMode::Require,
            NamespaceName::Off => crate::modes::NamespaceMode::Off,
        }
    }
}

/// `[roots]`
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct RootsSection {
    /// Sources that may contribute roots.
    #[schemars(with = "Vec<RootSourceName>")]
    pub sources: Vec<Spanned<RootSourceName>>,
    /// Ceiling: every root must lie under one of these paths (`~` and
    /// `$HOME` expand). Omit for "anywhere not denied".
    #[schemars(with = "Option<Vec<String>>")]
    pub allow_under: Option<Vec<Spanned<String>>>,
    /// Whether `/` may be a root (the deny list still applies).
    pub allow_filesystem_root: bool,
    /// Access given to roots from the host.
    pub host_access: AccessName,
    /// Most roots enforced at once.
    pub max_roots: usize,
    /// Roots always present.
    #[serde(rename = "static")]
    #[schemars(with = "Vec<StaticRoot>")]
    pub static_roots: Vec<Spanned<StaticRoot>>,
    /// Version-control and editor metadata (`.git`, `.hg`, `.envrc`,
    /// `.vscode`, `.idea`) in a read-write root or its direct
    /// subdirectories: tools outside the sandbox run it unasked.
    pub vcs: VcsMode,
}

/// `[roots] vcs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum VcsMode {
    /// Mounted read-only in the server's view (`.git/config`, `.git/hooks`,
    /// `.git/info`, `.hg/hgrc`, `.envrc`, `.vscode`, `.idea`); the rest of
    /// `.git` stays writable, so commits still work. Needs namespaces;
    /// without them, as `warn`.
    #[default]
    ReadOnly,
    /// Only warn.
    Warn,
    /// Refuse such roots read-write.
    Refuse,
}

impl Default for RootsSection {
    fn default() -> Self {
        RootsSection {
            sources: Vec::new(),
            allow_under: None,
            allow_filesystem_root: false,
            host_access: AccessName::ReadWrite,
            max_roots: 256,
            static_roots: Vec::new(),
            vcs: VcsMode::ReadOnly,
        }
    }
}

/// Name of a root source in a policy file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum RootSourceName {
    /// The MCP host's `roots/list`.
    Host,
    /// `--root` / `--ro-root`.
    CommandLine,
    /// `[[roots.static]]`.
    Policy,
}

impl From<RootSourceName> for RootSource {
    fn from(s: RootSourceName) -> Self {
        match s {
            RootSourceName::Host => RootSource::Host,
            RootSourceName::CommandLine => RootSource::CommandLine,
            RootSourceName::Policy => RootSource::Policy,
        }
    }
}

/// Access in a policy file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum AccessName {
    /// Read and write.
    #[default]
    ReadWrite,
    /// Read only.
    ReadOnly,
}

impl From<AccessName> for Access {
    fn from(a: AccessName) -> Self {
        match a {
            AccessName::ReadWrite => Access::ReadWrite,
            AccessName::ReadOnly => Access::ReadOnly,
        }
    }
}

/// `[[roots.static]]`
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StaticRoot {
    /// Path or `file://` URI (`~` and `$HOME` expand).
    pub path: String,
    /// Access (default read-write).
    #[serde(default)]
    pub access: AccessName,
    /// Name the server is told.
    #[serde(default)]
    pub name: Option<String>,
}

/// `[deny]`
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct DenySection {
    /// Include rootfence's built-in list (credentials, histories,
    /// `/etc/shadow`, ...). Turning it off needs `i_know = true`.
    pub builtin: bool,
    /// Acknowledges that `builtin = false` removes protection.
    pub i_know: bool,
    /// More paths that are never allowed.
    #[schemars(with = "Vec<String>")]
    pub paths: Vec<Spanned<String>>,
}

impl Default for DenySection {
    fn default() -> Self {
        DenySection {
            builtin: true,
            i_know: false,
            paths: Vec::new(),
        }
    }
}

/// `[runtime]`
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct RuntimeSection {
    /// Which general rules grant what the command needs to start.
    pub profile: ProfileName,
    /// Extra paths readable.
    #[schemars(with = "Vec<String>")]
    pub read: Vec<Spanned<String>>,
    /// Extra paths readable and executable.
    #[schemars(with = "Vec<String>")]
    pub exec: Vec<Spanned<String>>,
    /// Extra paths readable and writable.
    #[schemars(with = "Vec<String>")]
    pub write: Vec<Spanned<String>>,
    /// Whether roots may also be executed from (default: no).
    pub exec_in_roots: bool,
    /// A private scratch directory exported as `TMPDIR`.
    pub scratch: bool,
    /// git's identity reaches the server: a sanitized copy of the user's
    /// global configuration (identity and safe settings only, never
    /// credentials, URL rewrites or commands), as `GIT_CONFIG_GLOBAL`. The
    /// files themselves are never granted.
    pub git_config: bool,
    /// The home directory as the server sees it: `private` (with
    /// namespaces, an empty directory of its own holding only what is
    /// granted there; what the server writes is discarded at exit) or
    /// `none` (nothing there is writable).
    pub home: HomeMode,
}

/// `[runtime] home`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum HomeMode {
    /// The server's own store, kept across sessions: its home directory
    /// with namespaces, its XDG directories without.
    #[default]
    Private,
    /// A private, writable home directory discarded at exit (with
    /// namespaces); nothing kept.
    Ephemeral,
    /// No writable home directory.
    None,
}

impl Default for RuntimeSection {
    fn default() -> Self {
        RuntimeSection {
            profile: ProfileName::Auto,
            read: Vec::new(),
            exec: Vec::new(),
            write: Vec::new(),
            exec_in_roots: false,
            scratch: true,
            git_config: true,
            home: HomeMode::Private,
        }
    }
}

/// Which general rules grant runtime paths (`[runtime] profile`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ProfileName {
    /// Every rule: system, program, toolchains on `PATH`, project, caches,
    /// state.
    #[default]
    Auto,
    /// No toolchains and no caches: system, program, project and state
    /// only (a self-contained native server).
    Native,
    /// The same as `auto` (kept so that older policies load).
    Node,
    /// The same as `auto` (kept so that older policies load).
    Python,
}

/// `[network]`
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct NetworkSection {
    /// TCP ports the server may connect to.
    #[schemars(with = "Vec<u16>")]
    pub tcp_connect: Vec<Spanned<i64>>,
    /// TCP ports the server may bind.
    #[schemars(with = "Vec<u16>")]
    pub tcp_bind: Vec<Spanned<i64>>,
    /// Allow UDP and other non-TCP IP sockets (DNS needs UDP 53).
    pub udp: bool,
    /// Allow connecting to pathname unix sockets outside the roots.
    pub unix_sockets: bool,
    /// Hosts the server may reach, through an HTTP proxy rootfence runs
    /// for it (`HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY` point at it): an
    /// exact name (`api.github.com`), the subdomains of a name
    /// (`*.githubusercontent.com`, not the name itself), an IP address
    /// (reached only when listed itself), each with an optional port
    /// (`localhost:8080`; without one, 80 and 443). Every other
    /// connection, UDP and DNS included, is refused by the sandbox.
    /// Cannot be combined with `tcp_connect`, `tcp_bind` or `udp`.
    #[schemars(with = "Vec<String>")]
    pub allow_domains: Vec<Spanned<String>>,
    /// Names the proxy resolves to a fixed address instead of asking DNS
    /// (as `/etc/hosts` would, for the proxy only): `{ "dev.internal" =
    /// "127.0.0.1" }`. Each must be a name `allow_domains` allows; a name
    /// pinned to a loopback or link-local address may reach it.
    #[schemars(with = "BTreeMap<String, String>")]
    pub hosts: BTreeMap<Spanned<String>, Spanned<String>>,
}

/// `[env]`
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct EnvSection {
    /// Variables passed from rootfence's environment (`NAME` or `PREFIX_*`).
    #[schemars(with = "Vec<String>")]
    pub pass: Vec<Spanned<String>>,
    /// Variables set to fixed values.
    #[schemars(with = "BTreeMap<String, String>")]
    pub set: BTreeMap<Spanned<String>, String>,
    /// Variables (`NAME` or `PREFIX*`) that `--env` may not name and `pass`
    /// patterns never pass, in addition to the built-in list (`LD_PRELOAD`,
    /// `NODE_OPTIONS`, `PYTHONPATH`, ...).
    #[schemars(with = "Vec<String>")]
    pub deny: Vec<Spanned<String>>,
}

impl Default for EnvSection {
    fn default() -> Self {
        let pass = [
            "PATH", "HOME", "LANG", "LC_*", "TZ", "TERM", "USER", "LOGNAME",
        ];
        EnvSection {
            pass: pass
                .iter()
                .map(|p| Spanned::new(0..0, p.to_string()))
                .collect(),
            set: BTreeMap::new(),
            deny: Vec::new(),
        }
    }
}

/// `[limits]`
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsSection {
    /// Longest accepted JSON-RPC line, in bytes.
    pub max_message_bytes: u64,
    /// What to do when the server exits unexpectedly.
    pub restart: RestartName,
    /// Most restarts in one session.
    pub max_restarts: u32,
    /// First restart delay; doubles per restart.
    pub restart_backoff_ms: u64,
    /// How long requests in flight to a replaced server may take to finish.
    pub drain_timeout_ms: u64,
    /// Changes of roots closer together than this make one rebuild.
    pub rebuild_debounce_ms: u64,
    /// Wait after closing the server's stdin before SIGTERM, and again
    /// before SIGKILL.
    pub shutdown_grace_ms: u64,
    /// How long the server has to answer `initialize`.
    pub initialize_timeout_ms: u64,
    /// How long the host has to answer rootfence's `roots/list`: past it,
    /// the host's roots are dropped (the server keeps only the roots of
    /// the command line and the policy) until an answer comes.
    pub roots_timeout_ms: u64,
}

impl Default for LimitsSection {
    fn default() -> Self {
        LimitsSection {
            max_message_bytes: 64 * 1024 * 1024,
            restart: RestartName::OnFailure,
            max_restarts: 3,
            restart_backoff_ms: 250,
            drain_timeout_ms: 5_000,
            rebuild_debounce_ms: 100,
            shutdown_grace_ms: 2_000,
            initialize_timeout_ms: 30_000,
            roots_timeout_ms: 5_000,
        }
    }
}

/// `[resources]`: what the server may take of the machine. Hitting a
/// bound fails the call that would cross it (`EAGAIN` for a new process or
/// thread, `ENOMEM`, `EMFILE`, `ENOSPC`), or, for the memory of the
/// server's cgroup, ends the process that crossed it: the server can
/// report it, and the session goes on. Where a cgroup can be had (cgroup
/// v2 as root or in a subtree systemd delegates to the user, cgroup v1 as
/// root), the server and everything it starts share one. `rootfence
/// doctor` says which bounds apply on this machine.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ResourcesSection {
    /// Processes and threads the server may have at once, all of them
    /// together: its cgroup's `pids.max` where one can be had. Else, with
    /// namespaces, `RLIMIT_NPROC` counted in the server's own user
    /// namespace (rootfence not root), or, when rootfence is root, its PID
    /// namespace's `kernel.pid_max` (Linux 6.14 and later; the kernel does
    /// not reuse a namespace's lowest 300 pids, so between this many and
    /// 299 more); without namespaces not bounded (`RLIMIT_NPROC` would
    /// count every process of the user). 0: no bound.
    pub processes: u64,
    /// Memory of the server, in MiB: its cgroup's memory limit, where one
    /// can be had, counting everything it and what it starts use together
    /// (shared memory, memfds and the pages of its scratch filesystem
    /// included); and each process's data (heap and private writable
    /// mappings, `RLIMIT_DATA`), which alone is the bound where no cgroup
    /// can be had. 0: no bound.
    pub memory_mb: u64,
    /// Open descriptors of each process (`RLIMIT_NOFILE`; never above
    /// rootfence's own hard limit). 0: rootfence's own limit.
    pub open_files: u64,
    /// Size of the server's scratch directory (its `TMPDIR`), its
    /// `/dev/shm` and its private layers together, in MiB: with namespaces
    /// a memory-backed filesystem of this size (and 64 files per MiB) in
    /// its view, holding the private layers' upper directories from Linux
    /// 6.6 on; without namespaces the scratch directory is on the host's
    /// disk and not bounded (and so is its own `/dev/shm`). 0: no
    /// bound (the scratch directory on the host's disk).
    pub scratch_mb: u64,
}

impl Default for ResourcesSection {
    fn default() -> Self {
        ResourcesSection {
            processes: 512,
            memory_mb: 4096,
            open_files: 8192,
            scratch_mb: 1024,
        }
    }
}

/// Restart policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum RestartName {
    /// End the session when the server exits.
    Never,
    /// Restart with backoff after a crash (non-zero exit or signal).
    OnFailure,
    /// Restart whenever it exits.
    Always,
}

/// `[sampling]`
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct SamplingSection {
    /// Whether the server may ask the host's model at all. When false the
    /// server is not told the host can sample.
    pub allow: bool,
    /// Sustained requests per minute (the rate the bucket refills at).
    pub per_minute: u32,
    /// Requests that may come back to back: the size of the token bucket,
    /// full at start (0 counts as 1). The budget lives in the session: a
    /// relaunched server does not get a fresh one.
    pub burst: u32,
    /// Ceiling on `maxTokens`.
    pub max_tokens: u64,
    /// What to do when `maxTokens` exceeds the ceiling.
    pub on_max_tokens: OverLimit,
    /// Largest request (the whole JSON-RPC line), in bytes.
    pub max_request_bytes: u64,
    /// Content types the messages may carry (every block of every message,
    /// and the blocks inside tool results).
    pub content_types: Vec<ContentType>,
    /// Allow `includeContext` other than `none` (and advertise
    /// `sampling.context`).
    pub allow_include_context: bool,
    /// Allow sampling with `tools`/`toolChoice` and tool blocks
    /// (2025-11-25; the host must also declare `sampling.tools`).
    pub allow_tools: bool,
}

impl Default for SamplingSection {
    fn default() -> Self {
        SamplingSection {
            allow: false,
            per_minute: 10,
            burst: 3,
            max_tokens: 4096,
            on_max_tokens: OverLimit::Refuse,
            max_request_bytes: 1024 * 1024,
            content_types: vec![ContentType::Text],
            allow_include_context: false,
            allow_tools: false,
        }
    }
}

/// What to do with a value over its limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum OverLimit {
    /// Refuse the request.
    Refuse,
    /// Lower the value to the limit and forward.
    Clamp,
}

/// A sampling content type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ContentType {
    /// Text blocks.
    Text,
    /// Base64 image blocks.
    Image,
    /// Base64 audio blocks.
    Audio,
}

/// `[elicitation]`
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ElicitationSection {
    /// Whether the server may ask the user for input at all. When false
    /// the server is not told the host can elicit.
    pub allow: bool,
    /// Form mode (a flat schema of primitive fields the host renders).
    pub form: bool,
    /// URL mode (2025-11-25): the host opens an https URL.
    pub url: bool,
    /// Refuse forms whose message, field names, titles or descriptions ask
    /// for passwords, keys, tokens, card numbers and the like.
    pub refuse_sensitive: bool,
    /// More words or phrases that mark a form as sensitive.
    pub sensitive_terms: Vec<String>,
    /// URL mode: allow IP-literal hosts.
    pub url_allow_ip: bool,
    /// URL mode: allow `localhost` and `*.localhost`.
    pub url_allow_localhost: bool,
    /// Check the host's `accept` content against the form before the
    /// server sees it.
    pub validate_response: bool,
}

impl Default for ElicitationSection {
    fn default() -> Self {
        ElicitationSection {
            allow: true,
            form: true,
            url: false,
            refuse_sensitive: true,
            sensitive_terms: Vec::new(),
            url_allow_ip: false,
            url_allow_localhost: false,
            validate_response: true,
        }
    }
}

/// `[audit]`
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct AuditSection {
    /// Also append every sampling/elicitation decision as a JSON line here
    /// (parent directories are created; rootfence writes it, not the
    /// server).
    #[schemars(with = "Option<String>")]
    pub file: Option<Spanned<String>>,
}
