//! [`spawn`]: start a server under the sandbox a plan describes. The
//! launch's steps in the parent, in order:
//!
//! 1. the rung: a kernel without Landlock needs namespaces (the view
//!    confines instead), the best the policy allows less what earlier
//!    launches on this machine found refused this boot ([`launch`],
//!    [`machine`]); with
//!    `[network] allow_domains`, network by domain's design on that rung
//!    (`netns::Net::prepare`);
//! 2. the scratch directory, the environment, and the directories of the
//!    private layers and of the server's own `/dev/shm` ([`Layout`]);
//! 3. the server's own cgroup where one can be had (`cgroup`), and the
//!    confinement: the Landlock ruleset, the seccomp program, the view's
//!    operations, the rules only the child can make, the capabilities to
//!    drop, the limits of `[resources]` ([`prepare`]);
//! 4. argv, the environment and the standard streams as the child needs
//!    them, the pipes of the error protocol and the namespaces;
//! 5. the clone on the launcher thread (into the cgroup v2 where `clone3`
//!    can), the id maps, the go-ahead, the supervisor of the filter's
//!    listener (started before the server's `execve`, which it may be
//!    asked about), and the child's report ([`clone_and_start`]);
//! 6. the network proxy (with `[network] allow_domains`, see `netns`), and
//!    the handle.
//!
//! The launch is the probe: a start the kernel refuses in a way a weaker
//! mode does without (no namespaces, no overlays) is retried in that mode
//! when the policy allows it, and remembered for this boot's later
//! launches (never taken where the policy requires namespaces).

use std::ffi::{OsStr, OsString};
use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::caps::{DropCaps, cap_state};
use super::cgroup::{self, Cgroup};
use super::child::{ChildRule, ChildSetup, ExecImage, LandlockChild, NsChild, Rlimit};
use super::coverage::{DomainRung, Rung, losses};
use super::handle::{CapabilityOutcome, Confinement, SandboxedChild, live_add};
use super::ids::{IdMaps, Identity, namespace_flags};
use super::init::ServerStack;
use super::inotify::{IdMapLines, InotifySetup};
use super::ladder::{Missing, NoNamespaces, NoRung};
use super::launcher::on_launcher;
use super::mount::{ViewOp, ViewSetup};
use super::netns::{self, Net};
use super::nsprobe::{kernel_release, refusal_hint};
use super::protocol::{self, Step};
use super::resources::{self, Bounds};
use super::scratch::Scratch;
use super::seccomp::observer::Observer;
use super::seccomp::{self, FilterPolicy, supervisor};
use super::stdio::{StdioConfig, Streams, above_stdio, pipe};
use super::translate::{self, Layer, OpKind, ScratchView, Target, cpath, cstring};
use super::{SandboxError, landlock, machine, observed, probe};
use super::{clone, fdpass};
use crate::plan::{LandlockMode, NamespaceMode, SandboxPlan};
use crate::runtime::Rights;

/// Start the server `plan` describes, confined.
///
/// Everything is prepared in the calling process: the Landlock ruleset
/// (every path opened, roots from their handles), the seccomp program, the
/// scratch directory, the filesystem view's mount operations, argv and the
/// environment (exactly the plan's, plus `TMPDIR`). The `clone` happens on
/// the main thread when called there, else on a dedicated long-lived
/// launcher thread, so the parent-death signal (which Linux ties to the
/// thread that cloned) does not fire when a short-lived caller thread (a
/// tokio blocking thread) exits. Between `clone` and `exec` the child runs
/// only raw system calls (see the `child` module). Safe to call from any
/// thread, including inside a multi-threaded tokio runtime; it blocks
/// until the server has been exec'd (a few milliseconds).
///
/// # Security
///
/// Fails closed: if the machine cannot enforce what the plan needs (the
/// fatal entries of `losses`, a kernel without Landlock unless the policy
/// accepts the view and seccomp instead, namespaces the policy requires),
/// or any rule cannot be built, or any step in the child fails, nothing is
/// executed and an error says what is missing. On `Ok`, the server runs in
/// a new session without a controlling terminal, with `no_new_privs`,
/// `RLIMIT_CORE` 0, the parent-death signal `SIGKILL`, the limits of
/// `[resources]`, no descriptor but 0, 1 and 2, no capabilities, under the
/// Landlock ruleset (every filesystem right of the kernel's ABI handled;
/// TCP by port; the plan's scopes) and the seccomp filter; with namespaces
/// also in its own PID namespace (nothing it starts outlives it) and a
/// filesystem view holding only the plan's grants.
pub fn spawn(plan: &SandboxPlan, stdio: StdioConfig) -> Result<SandboxedChild, SandboxError> {
    // What the server may write is remembered before it can write it:
    // later launches take nothing from there.
    if let Some(record) = &plan.written_record {
        crate::runtime::remember_written(record, &plan.server_writes());
    }
    launch(plan, stdio, true)
}

/// Start the server with no sandbox: the same environment, session,
/// descriptor hygiene and scratch directory as [`spawn`], but no Landlock,
/// no seccomp, no namespaces, no limits and no capability drop.
///
/// # Security
///
/// The server can do anything rootfence's user can. Only for
/// `--unconfined-i-know-this-is-unsafe`.
pub fn spawn_unconfined(
    plan: &SandboxPlan,
    stdio: StdioConfig,
) -> Result<SandboxedChild, SandboxError> {
    launch(plan, stdio, false)
}

/// The base directory of the view's first `pivot_root`: any existing
/// directory of the host works; the system's `/tmp` is the usual one.
const VIEW_BASE: &str = "/tmp";

/// How a launch is attempted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Mode {
    namespaces: bool,
    overlays: bool,
}

/// What earlier launches on this machine found refused (`r`, this boot's
/// record, see [`machine`]), as the mode a launch starts in: the policy's
/// best (`want`), less what was refused, and why. Where namespaces are
/// `required` a remembered refusal of them is not taken (the launch
/// tries, and a refusal is an error).
fn remembered_mode(want: bool, required: bool, r: &machine::Record) -> (Mode, Option<String>) {
    let full = Mode {
        namespaces: want,
        overlays: want,
    };
    if !want {
        return (full, None);
    }
    if let Some(n) = r.namespace_support()
        && !n.usable()
        && !required
    {
        let mode = Mode {
            namespaces: false,
            overlays: false,
        };
        return (mode, Some(n.why_not()));
    }
    let no_overlays = match (&r.launch, &r.namespaces) {
        (Some(machine::Refused::Overlays { why }), _) => Some(why.clone()),
        (_, Some(n)) if n.usable() && !n.overlay => Some("overlay mounts were refused".into()),
        _ => None,
    };
    match no_overlays {
        Some(why) => (
            Mode {
                namespaces: true,
                overlays: false,
            },
            Some(why),
        ),
        None => (full, None),
    }
}

/// Why an attempt failed.
enum AttemptError {
    /// For good.
    Fatal(SandboxError),
    /// The kernel refused something the attempt asked for that a weaker
    /// mode does without.
    Downgrade { to: Mode, why: String },
    /// The kernel refused the server's own network namespace, which
    /// network by domain's design asked for: the next attempt takes the
    /// design the rung has without it (the supervised `connect()` where
    /// Landlock rules on ports), or refuses to start.
    NoNetns { why: String },
}

impl From<SandboxError> for AttemptError {
    fn from(e: SandboxError) -> Self {
        AttemptError::Fatal(e)
    }
}

/// What a launch may not do without: namespaces the policy requires, or
/// that stand in for a kernel without Landlock (where the policy accepts
/// them instead; where it does not, the launch is refused for Landlock).
fn namespaces_required(plan: &SandboxPlan, confine: bool, caps: &probe::Capabilities) -> bool {
    confine
        && (plan.namespaces == NamespaceMode::Require
            || (caps.abi() == 0 && plan.landlock == LandlockMode::Prefer))
}

/// The refusal when namespaces are required and not to be had.
fn cannot_without_namespaces(caps: &probe::Capabilities, why: NoNamespaces) -> SandboxError {
    let missing = if caps.abi() == 0 {
        super::coverage::neither(caps, why)
    } else {
        NoRung::NamespacesRequired(why)
    };
    SandboxError::CannotEnforce {
        missing: vec![missing.into()],
    }
}

fn launch(
    plan: &SandboxPlan,
    stdio: StdioConfig,
    confine: bool,
) -> Result<SandboxedChild, SandboxError> {
    let caps = probe();
    let want = confine && plan.namespaces != NamespaceMode::Off;
    let required = namespaces_required(plan, confine, &caps);
    if required && !want {
        return Err(cannot_without_namespaces(&caps, NoNamespaces::Off));
    }
    let (mut mode, why) = remembered_mode(want, required, &machine::record());
    // A network namespace is tried only where the plan needs one (network
    // by domain), unless this boot's launches found it refused.
    let mut netns_refused = machine::record()
        .netns_support()
        .filter(|n| !n.available)
        .map(|n| n.why_not());
    if let Some(why) = why {
        if mode.namespaces {
            tracing::warn!(
                "private layers for caches are not available (remembered for this boot: {why}): the server gets empty private caches instead"
            );
        } else {
            tracing::warn!(
                "the server runs WITHOUT namespaces (remembered for this boot: {why}; `rootfence doctor` probes again): no filesystem view, and processes it starts are ended by rootfence instead of the kernel; see `rootfence doctor` for what stays open"
            );
        }
    }
    loop {
        match attempt(plan, stdio, confine, mode, netns_refused.as_deref(), &caps) {
            Ok(c) => return Ok(c),
            Err(AttemptError::Fatal(e)) => return Err(e),
            Err(AttemptError::NoNetns { why }) => {
                machine::update(|r| r.netns_refused = Some(why.clone()));
                netns_refused = Some(why);
            }
            Err(AttemptError::Downgrade { to, why }) => {
                if to.namespaces != mode.namespaces && required {
                    return Err(cannot_without_namespaces(&caps, NoNamespaces::Refused(why)));
                }
                if to.namespaces {
                    tracing::warn!(
                        "private layers for caches are not available ({why}): the server gets empty private caches instead"
                    );
                    machine::update(|r| r.launch = Some(machine::Refused::Overlays { why }));
                } else {
                    tracing::warn!(
                        "the server runs WITHOUT namespaces ({why}): no filesystem view, and processes it starts are ended by rootfence instead of the kernel; see `rootfence doctor` for what stays open"
                    );
                    machine::update(|r| r.launch = Some(machine::Refused::Namespaces { why }));
                }
                mode = to;
            }
        }
    }
}

/// The scratch directory and what the launch puts in it.
struct Layout {
    scratch: Option<Scratch>,
    /// The server's environment: the plan's, `TMPDIR`, and (without an
    /// overlay) private caches pointed at empty directories in scratch.
    env: Vec<(OsString, OsString)>,
    /// Private layers mounted as overlays.
    layers: Vec<Layer>,
    /// Directories the child makes in the sized scratch filesystem
    /// (relative, parents first).
    dirs: Vec<PathBuf>,
    /// The server's own store, made ready ([`store_for`]).
    store: Option<crate::store::Ready>,
    /// Without namespaces, the directory holding the server's `/dev/shm`
    /// (no rule names it: see [`seccomp::shm`]).
    shm: Option<Scratch>,
}

impl Layout {
    /// Create the scratch directory and decide where each private layer
    /// goes; its directories are made here on the host's disk, or by the
    /// child in the sized scratch filesystem (`size`) when it holds them.
    fn new(
        plan: &SandboxPlan,
        mode: Mode,
        size: Option<resources::ScratchSize>,
    ) -> Result<Layout, SandboxError> {
        let base = if plan.scratch {
            Some(scratch_base(plan)?)
        } else {
            None
        };
        let scratch = match &base {
            Some(b) => Some(Scratch::create_in(b)?),
            None => None,
        };
        let mut env: Vec<(OsString, OsString)> = plan
            .env
            .iter()
            .map(|(k, (v, _))| (OsString::from(k), OsString::from(v)))
            .collect();
        let mut layers = Vec::new();
        let mut dirs = Vec::new();
        let mut host_dirs = Vec::new();
        if let Some(s) = &scratch {
            env.push(("TMPDIR".into(), s.path().into()));
            for f in &plan.scratch_files {
                let path = s.path().join(&f.name);
                std::fs::write(&path, &f.content).map_err(|source| SandboxError::Scratch {
                    dir: path.clone(),
                    source,
                })?;
                env.retain(|(k, _)| k != f.env.as_str());
                env.push((f.env.clone().into(), path.into()));
            }
            for (i, layer) in plan.private_layers.iter().enumerate() {
                let rel = PathBuf::from(format!(".rootfence-layer-{i}"));
                let dir = s.path().join(&rel);
                if mode.overlays
                    && layer.path.is_dir()
                    && translate::overlay_safe(&layer.path)
                    && translate::overlay_safe(&dir)
                {
                    let made = [rel.clone(), rel.join("upper"), rel.join("work")];
                    match size {
                        Some(s) if s.holds_layers => dirs.extend(made),
                        _ => host_dirs.extend(made),
                    }
                    layers.push((layer.path.clone(), rel));
                } else if let Some(var) = &layer.env {
                    env.retain(|(k, _)| k != var.as_str());
                    env.push((var.into(), dir.into()));
                    match size {
                        Some(_) => dirs.push(rel),
                        None => host_dirs.push(rel),
                    }
                }
            }
            // The server's own /dev/shm, in its scratch space (without
            // namespaces in a directory beside it, which the supervisor
            // alone uses).
            if mode.namespaces {
                match size {
                    Some(_) => dirs.push(PathBuf::from(translate::SHM_DIR)),
                    None => host_dirs.push(PathBuf::from(translate::SHM_DIR)),
                }
            }
            for d in &host_dirs {
                let dir = s.path().join(d);
                std::fs::create_dir_all(&dir)
                    .map_err(|source| SandboxError::Scratch { dir, source })?;
            }
        }
        let shm = match &base {
            Some(b) if !mode.namespaces => Some(Scratch::create_in(b)?),
            _ => None,
        };
        Ok(Layout {
            scratch,
            env,
            layers,
            dirs,
            store: None,
            shm,
        })
    }

    fn scratch_path(&self) -> Option<&Path> {
        self.scratch.as_ref().map(Scratch::path)
    }
}

/// Where the server's scratch directory is made: the system temporary
/// directory, or `/tmp` or `/var/tmp` where that lies in a place the server
/// may write.
///
/// # Security
///
/// rootfence goes on using the scratch directory by its path after making
/// it (its layers' directories, its rule): in a place the server may write,
/// a server already running there could put a link in its place between
/// the two and have the next launch grant what the link names.
fn scratch_base(plan: &SandboxPlan) -> Result<PathBuf, SandboxError> {
    let writable: Vec<PathBuf> = plan
        .grants
        .iter()
        .filter(|g| g.rights.write)
        .map(|g| g.path.clone())
        .chain(plan.home_store.as_ref().map(|s| s.home()))
        .flat_map(|p| {
            let real = crate::canon::canonicalize(&p).ok();
            std::iter::once(p).chain(real)
        })
        .collect();
    let first = super::scratch::temp_base();
    let candidates = [first.clone(), PathBuf::from("/tmp"), PathBuf::from("/var/tmp")];
    for c in &candidates {
        let real = crate::canon::canonicalize(c).unwrap_or_else(|_| c.clone());
        if !writable.iter().any(|w| real.starts_with(w)) {
            if c != &first {
                tracing::warn!(
                    "the scratch directory is made in {} rather than in {}, which the server may write",
                    c.display(),
                    first.display()
                );
            }
            return Ok(c.clone());
        }
    }
    Err(SandboxError::Scratch {
        dir: first,
        source: std::io::Error::other(
            "every temporary directory (TMPDIR, /tmp, /var/tmp) lies in a place the server may write",
        ),
    })
}

/// The XDG directories a server without namespaces keeps in its store.
const XDG_IN_STORE: &[(&str, &str)] = &[
    ("XDG_CONFIG_HOME", ".config"),
    ("XDG_DATA_HOME", ".local/share"),
    ("XDG_STATE_HOME", ".local/state"),
    ("XDG_CACHE_HOME", ".cache"),
];

/// The server's own store, made ready for a launch in `mode`: with
/// namespaces it is bound at the private home; without, the server's XDG
/// directories point into it (unless the policy or `--env` sets them).
/// A store that cannot be made leaves the server with a home discarded
/// at exit, said in a warning.
fn store_for(
    plan: &SandboxPlan,
    mode: Mode,
    env: &mut Vec<(OsString, OsString)>,
) -> Option<crate::store::Ready> {
    let store = plan.home_store.as_ref()?;
    if mode.namespaces && plan.private_home.is_none() {
        return None;
    }
    let ready = match crate::store::ensure(&store.dir) {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(
                "the server's store {} cannot be used ({e}): what it writes under its home is discarded at exit",
                store.dir.display()
            );
            return None;
        }
    };
    if !mode.namespaces {
        for (var, rel) in XDG_IN_STORE {
            let stated = plan.env.get(*var).is_some_and(|(_, src)| {
                matches!(
                    src,
                    crate::plan::EnvSource::Set | crate::plan::EnvSource::Flag
                )
            });
            if stated {
                continue;
            }
            let dir = ready.home.join(rel);
            if let Err(e) = std::os::unix::fs::DirBuilderExt::mode(
                std::fs::DirBuilder::new().recursive(true),
                0o700,
            )
            .create(&dir)
            {
                tracing::debug!("cannot make {} in the store: {e}", dir.display());
                continue;
            }
            env.retain(|(k, _)| k != var);
            env.push(((*var).into(), dir.into()));
        }
    }
    Some(ready)
}

/// Where the server starts: rootfence's working directory (the host's)
/// when the plan grants it; otherwise its first root, or else `home` (its
/// own home), said in the log. `None`: nowhere better than `/`.
fn working_dir(plan: &SandboxPlan, home: Option<&Path>) -> Option<PathBuf> {
    let here = std::env::current_dir().ok();
    if let Some(c) = &here
        && plan.grants.iter().any(|g| c.starts_with(&g.path))
    {
        return Some(c.clone());
    }
    let instead = plan
        .roots
        .first()
        .map(|r| r.path.clone())
        .or_else(|| home.map(Path::to_path_buf))?;
    if let Some(c) = here {
        tracing::info!(
            "the working directory {} is not granted: the server starts in {}",
            c.display(),
            instead.display()
        );
    }
    Some(instead)
}

/// The confinement of one launch, ready for the child.
struct Prepared {
    rung: Rung,
    /// Network by domain's design, with `[network] allow_domains`.
    domains: Option<DomainRung>,
    /// The ruleset (its descriptor must outlive the clone).
    ruleset: Option<landlock::PreparedRuleset>,
    landlock: Option<LandlockChild>,
    /// The paths of the rules made in the child, for naming them in errors.
    rule_paths: Vec<PathBuf>,
    filter: FilterPolicy,
    seccomp: Vec<libc::sock_filter>,
    /// The program without the supervisor, where only locks needed it:
    /// loaded where the kernel refuses a second listener (rootfence
    /// inside a rootfence sandbox, whose supervisor judges the locks).
    seccomp_unsupervised: Option<Vec<libc::sock_filter>>,
    supervised: Option<supervisor::Rules>,
    view: Option<(Vec<ViewOp>, Vec<Target>)>,
    drop_caps: Option<DropCaps>,
    capabilities: CapabilityOutcome,
}

impl Prepared {
    fn confinement(&self) -> Confinement {
        Confinement::Enforced {
            rung: self.rung,
            abi: self.ruleset.as_ref().map_or(0, |r| r.abi),
            path_rules: self.ruleset.as_ref().map_or(0, |r| r.path_rules)
                + self.landlock.as_ref().map_or(0, |l| l.rules.len()),
            filter: self.filter,
            capabilities: self.capabilities,
            domains: self.domains,
        }
    }
}

/// The rung a launch in `mode` takes on a kernel with `caps`.
fn launch_rung(caps: &probe::Capabilities, mode: Mode) -> Rung {
    match (caps.abi() > 0, mode.namespaces) {
        (true, true) => Rung::Full,
        (true, false) => Rung::LandlockSeccomp,
        (false, _) => Rung::ViewSeccomp,
    }
}

/// Prepare the confinement of `plan` in `mode` on a kernel with `caps`
/// (with `net`, network by domain's part of the filter).
fn prepare(
    plan: &SandboxPlan,
    caps: &probe::Capabilities,
    mode: Mode,
    layout: &Layout,
    bounds: &Bounds,
    net: Option<&Net>,
) -> Result<Prepared, SandboxError> {
    let fatal: Vec<Missing> = losses(plan, caps)
        .into_iter()
        .filter(|l| l.fatal)
        .map(Missing::Loss)
        .collect();
    if !fatal.is_empty() {
        return Err(SandboxError::CannotEnforce { missing: fatal });
    }
    let namespaces = mode.namespaces;
    let rung = launch_rung(caps, mode);
    let sized = bounds.scratch.is_some();
    let ruleset = if rung.landlock() {
        // A sized scratch is a filesystem of the view's own: its rule is
        // made in the child.
        let host_scratch = layout.scratch_path().filter(|_| !sized);
        // Without namespaces the store is granted where it is; with them
        // it is the private home, whose rule the child makes.
        let store = layout
            .store
            .as_ref()
            .filter(|_| !namespaces)
            .map(|s| s.home.as_path());
        Some(landlock::prepare(
            plan,
            host_scratch,
            store,
            caps.abi(),
            namespaces,
        )?)
    } else {
        None
    };
    let abi = ruleset.as_ref().map_or(0, |r| r.abi);
    let mut filter = FilterPolicy::for_plan(&plan.network, abi, namespaces);
    filter.report = plan.report_refusals;
    filter.observe = plan.observe_paths;
    filter.observe_network = plan.observe_network;
    let shm = match &layout.shm {
        Some(dir) => {
            let handle = dir.handle().map_err(|source| SandboxError::Scratch {
                dir: dir.path().to_path_buf(),
                source,
            })?;
            Some(Arc::new(seccomp::shm::Shm::new(handle)))
        }
        None => None,
    };
    filter.shm = shm.is_some();
    if let Some(n) = net {
        n.adjust_filter(&mut filter);
    }
    let seccomp = seccomp::compiled(filter)?;
    // Under a seccomp listener already (rootfence inside a rootfence
    // sandbox, a container's supervisor), the kernel refuses a second: the
    // calls supervised only for locks and the server's own /dev/shm then
    // go to the kernel as they would without rootfence.
    let unsupervised = FilterPolicy {
        locks: false,
        shm: false,
        ..filter
    };
    let seccomp_unsupervised = if (filter.locks || filter.shm)
        && !unsupervised.needs_supervisor()
        && filtered()
    {
        Some(seccomp::compiled(unsupervised)?)
    } else {
        None
    };
    let supervised = filter.needs_supervisor().then(|| supervisor::Rules {
        report: filter.report,
        table: seccomp::entries(&filter),
        tcp_bind: plan.network.tcp_bind.clone(),
        proxy: net.and_then(Net::supervised_address),
        observe: (filter.observe || filter.observe_network).then(|| {
            Arc::new(Observer::new(observed_sandbox(
                plan,
                namespaces,
                ruleset.is_some(),
                layout,
            )))
        }),
        writable: if namespaces {
            seccomp::writable::Writable::View
        } else {
            let mut under: Vec<PathBuf> = observed_sandbox(plan, false, true, layout)
                .grants
                .into_iter()
                .filter(|(_, r)| r.write)
                .map(|(p, _)| p)
                .collect();
            under.extend(plan.home_store.as_ref().map(|s| s.home()));
            under.extend(layout.shm.as_ref().map(|s| s.path().to_path_buf()));
            seccomp::writable::Writable::Under(under)
        },
        shm,
    });
    let view = if namespaces {
        let no_fds = std::collections::HashMap::new();
        let opened = ruleset.as_ref().map_or(&no_fds, |r| &r.opened);
        let scratch = layout.scratch_path().map(|path| ScratchView {
            path,
            size: bounds.scratch,
            dirs: &layout.dirs,
        });
        Some(translate::view_ops(
            plan,
            scratch,
            &layout.layers,
            opened,
            layout.store.as_ref(),
        )?)
    } else {
        None
    };
    let (landlock, rule_paths) = match &ruleset {
        Some(r) => {
            let rules = child_rules(r, namespaces, layout, sized, view.as_ref())?;
            let paths = rules
                .iter()
                .map(|r| PathBuf::from(OsStr::from_bytes(r.path.as_bytes())))
                .collect();
            (
                Some(LandlockChild {
                    ruleset: r.fd.as_raw_fd(),
                    rules,
                }),
                paths,
            )
        }
        None => (None, Vec::new()),
    };
    let (drop_caps, capabilities) = capabilities_to_drop(namespaces);
    Ok(Prepared {
        rung,
        domains: net.map(Net::rung),
        ruleset,
        landlock,
        rule_paths,
        filter,
        seccomp,
        seccomp_unsupervised,
        supervised,
        view,
        drop_caps,
        capabilities,
    })
}

/// Whether rootfence itself runs under a seccomp filter (inside a
/// rootfence sandbox, a container): only there may the kernel refuse the
/// server's filter a listener of its own.
fn filtered() -> bool {
    static FILTERED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *FILTERED.get_or_init(|| {
        std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Seccomp:"))
                .is_some_and(|v| v.trim() != "0")
        })
    })
}

/// What the observer of a launch knows of its sandbox: whether the server
/// has a view of its own, whether Landlock confines it, and the paths of
/// the ruleset with their rights (the plan's grants, the scratch
/// directory, the private layers, with namespaces the private home and
/// `/proc`).
fn observed_sandbox(
    plan: &SandboxPlan,
    namespaces: bool,
    landlock: bool,
    layout: &Layout,
) -> observed::Sandbox {
    let mut grants: Vec<(PathBuf, Rights)> = plan
        .grants
        .iter()
        .map(|g| (g.path.clone(), g.rights))
        .collect();
    if let Some(s) = layout.scratch_path() {
        grants.push((s.to_path_buf(), Rights::RW));
    }
    let all = Rights {
        exec: true,
        ..Rights::RW
    };
    grants.extend(layout.layers.iter().map(|(p, _)| (p.clone(), all)));
    if namespaces {
        if let Some(h) = &plan.private_home {
            grants.push((h.clone(), Rights::RW));
        }
        grants.push((PathBuf::from("/proc"), Rights::R));
    }
    observed::Sandbox {
        view: namespaces,
        landlock,
        grants,
        tcp_connect: plan
            .network
            .domains
            .is_none()
            .then(|| plan.network.tcp_connect.clone()),
    }
}

/// The Landlock rules only the child can make: with namespaces, the fresh
/// `/proc`, each private layer's overlay, the sized scratch, the private
/// home, `/dev/shm`, and the directories of files copied into the view
/// (new inodes); without, the server's own `/proc/self`.
fn child_rules(
    r: &landlock::PreparedRuleset,
    namespaces: bool,
    layout: &Layout,
    sized: bool,
    view: Option<&(Vec<ViewOp>, Vec<Target>)>,
) -> Result<Vec<ChildRule>, SandboxError> {
    let mut rules = Vec::new();
    if !namespaces {
        if r.proc_access != 0 {
            rules.push(ChildRule {
                path: c"/proc/self".to_owned(),
                access: r.proc_access,
            });
        }
        return Ok(rules);
    }
    rules.push(ChildRule {
        path: c"/proc".to_owned(),
        access: r.proc_access,
    });
    for (path, _) in &layout.layers {
        rules.push(ChildRule {
            path: cpath("", path)?,
            access: r.private_access,
        });
    }
    if sized && let Some(s) = layout.scratch_path() {
        rules.push(ChildRule {
            path: cpath("", s)?,
            access: r.scratch_access,
        });
    }
    // The private home is a new inode of the view's own: read and write,
    // never execute.
    for (target, kind) in view.map(|v| v.1.as_slice()).unwrap_or_default() {
        if *kind == OpKind::Home {
            rules.push(ChildRule {
                path: cpath("", target)?,
                access: r.scratch_access,
            });
        }
    }
    // So is /dev/shm, a directory of the scratch space mounted there.
    for (target, kind) in view.map(|v| v.1.as_slice()).unwrap_or_default() {
        if *kind == OpKind::Shm {
            rules.push(ChildRule {
                path: cpath("", target)?,
                access: r.scratch_access,
            });
        }
    }
    // Files copied into the view are new inodes: their directories (which
    // hold only what the plan grants) are readable.
    let mut copy_dirs: Vec<&Path> = Vec::new();
    for (target, kind) in view.map(|v| v.1.as_slice()).unwrap_or_default() {
        if *kind == OpKind::Copy
            && let Some(d) = target.parent()
            && !copy_dirs.contains(&d)
        {
            copy_dirs.push(d);
        }
    }
    for dir in copy_dirs {
        rules.push(ChildRule {
            path: cpath("", dir)?,
            access: r.read_access,
        });
    }
    Ok(rules)
}

/// What the server drops of rootfence's capabilities, and what that comes
/// to.
fn capabilities_to_drop(namespaces: bool) -> (Option<DropCaps>, CapabilityOutcome) {
    let held = cap_state();
    let outcome = match (
        held.must_drop || namespaces,
        held.root,
        held.can_drop_bounding || namespaces,
    ) {
        (false, _, _) => CapabilityOutcome::NoneHeld,
        (true, true, false) => CapabilityOutcome::BoundingSetKept,
        (true, _, _) => CapabilityOutcome::Dropped,
    };
    if !(held.must_drop || namespaces) {
        return (None, outcome);
    }
    if held.root && !held.can_drop_bounding && !namespaces {
        tracing::warn!(
            "rootfence runs as root without CAP_SETPCAP: the capability bounding set cannot be emptied, so the server gets the bounding set's capabilities back at exec; run rootfence as an unprivileged user"
        );
    }
    let drop = DropCaps {
        // The kernel's CAP_LAST_CAP is lower (40 on Linux 6.18); the child
        // stops at the first unknown capability. In its own user
        // namespace the server holds CAP_SETPCAP there.
        last_cap: 63,
        bounding: held.can_drop_bounding || namespaces,
    };
    (Some(drop), outcome)
}

/// The limits of `[resources]` for a server in `mode`, its cgroup made in
/// `place`.
fn bounds_for(plan: &SandboxPlan, mode: Mode, place: &cgroup::Place) -> Bounds {
    let at = resources::Where::new(
        mode.namespaces,
        Identity::current(),
        &kernel_release(),
        (place.controllers(), place.why()),
        resources::user_inotify(),
    );
    resources::bounds(&plan.resources, &at, |res| {
        let mut l = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes into the local.
        if unsafe { libc::getrlimit(res, &mut l) } == 0 {
            l.rlim_max
        } else {
            0
        }
    })
}

/// argv and the environment as C arrays.
fn exec_image(plan: &SandboxPlan, env: &[(OsString, OsString)]) -> Result<ExecImage, SandboxError> {
    Ok(ExecImage::new(
        cstring(plan.command.program.as_os_str(), "the program path")?,
        plan.command
            .argv
            .iter()
            .map(|a| cstring(a, "an argument"))
            .collect::<Result<_, _>>()?,
        env.iter()
            .map(|(k, v)| {
                let mut kv = k.clone().into_vec();
                kv.push(b'=');
                kv.extend_from_slice(v.as_bytes());
                cstring(OsStr::from_bytes(&kv), "an environment variable")
            })
            .collect::<Result<_, _>>()?,
    ))
}

/// What the parent keeps of a launch until it is over.
struct Parent {
    child_ends: Vec<OwnedFd>,
    sync_w: Option<OwnedFd>,
    err_r: OwnedFd,
    /// rootfence's end of the pair the filter's listener comes back over,
    /// and what its supervisor knows.
    supervise: Option<(OwnedFd, supervisor::Rules)>,
    /// The child may start without sending the listener: the kernel
    /// refused a second one, and only locks and the server's own
    /// `/dev/shm` wanted it (see `Prepared::seccomp_unsupervised`).
    listener_optional: bool,
}

/// The namespace part of the child's setup, and the parent's ends of its
/// pipes (the go-ahead's write end, the status's read end).
fn namespace_setup(
    plan: &SandboxPlan,
    ops: Vec<ViewOp>,
    bounds: &Bounds,
    net: Option<&Net>,
    cgroup: Option<&Cgroup>,
    child_ends: &mut Vec<OwnedFd>,
) -> Result<(NsChild, OwnedFd, OwnedFd), SandboxError> {
    let (sync_r, sync_w) = pipe()?;
    let (status_r, status_w) = pipe()?;
    let cwd = working_dir(plan, translate::private_home(plan).as_deref())
        .map(|c| cpath("", &c))
        .transpose()?;
    let n_ops = ops.len();
    let ns = NsChild {
        sync_r: sync_r.as_raw_fd(),
        status_w: status_w.as_raw_fd(),
        view: ViewSetup {
            base: cpath("", Path::new(VIEW_BASE))?,
            ops,
            cwd,
            // Writing the PID namespace's memfd sysctl needs the machine's
            // root; without it memfd files stay executable (see `doctor`).
            memfd_noexec: !plan.exec_in_roots && Identity::current() == Identity::MachineRoot,
            pid_max: bounds
                .pid_max
                .map(|n| cstring(OsStr::new(&n.to_string()), "pid_max"))
                .transpose()?,
            inotify: bounds.inotify.map(inotify_setup).transpose()?,
            tree_fds: (0..n_ops).map(|_| std::cell::Cell::new(-1)).collect(),
        },
        server_stack: ServerStack::new().map_err(SandboxError::Launcher)?,
        net: net.and_then(Net::child),
        cgroup_leave: cgroup.map(Cgroup::leave_fds).unwrap_or_default(),
    };
    child_ends.push(sync_r);
    child_ends.push(status_w);
    Ok((ns, sync_w, status_r))
}

/// The server's inotify limits as the child writes them (as root, in a
/// user namespace made for the server, with its own ids mapped).
fn inotify_setup(i: resources::Inotify) -> Result<InotifySetup, SandboxError> {
    let text = |n: u64| cstring(OsStr::new(&n.to_string()), "an inotify limit");
    Ok(InotifySetup {
        instances: text(i.instances)?,
        watches: text(i.watches)?,
        new_user_namespace: Identity::current().is_root().then(IdMapLines::own),
        proc: std::cell::Cell::new(-1),
    })
}

/// The server's own cgroup, where the bounds need one. Where the place this boot's record remembers is refused, the bounds
/// are those of the place probed instead (`bounds` is rewritten;
/// `confine`: the launch is confined, else it has no bounds).
fn make_cgroup(
    plan: &SandboxPlan,
    bounds: &mut Bounds,
    mode: Mode,
    confine: bool,
) -> Result<Option<Cgroup>, SandboxError> {
    let mut asked = false;
    let (made, place) = cgroup::create_in_place(
        |place| {
            if std::mem::replace(&mut asked, true) && confine {
                *bounds = bounds_for(plan, mode, place);
            }
            bounds.cgroup
        },
        mode.namespaces,
    )
    .map_err(SandboxError::Cgroup)?;
    if made.is_some() {
        cgroup::sweep_stale(place);
    }
    Ok(made)
}

/// One try at starting the server in `mode` (`netns_refused`: why the
/// server's own network namespace is not to be had, when a launch found
/// it refused).
fn attempt(
    plan: &SandboxPlan,
    stdio: StdioConfig,
    confine: bool,
    mode: Mode,
    netns_refused: Option<&str>,
    caps: &probe::Capabilities,
) -> Result<SandboxedChild, AttemptError> {
    // Network by domain: its design on this rung, its variables, and the
    // network Landlock and seccomp apply.
    let rung = confine.then(|| launch_rung(caps, mode));
    let net = Net::prepare(plan, rung, caps.abi(), netns_refused)?;
    // A refusal of the network namespace the design asks for is retried
    // without it (the design the rung has then, or a refusal).
    let netns_asked = net
        .as_ref()
        .is_some_and(|n| n.rung() == DomainRung::NetworkNamespace);
    let launched = netns::launch_plan(net.as_ref(), plan, caps.abi());
    let plan: &SandboxPlan = &launched;
    let mut bounds = if confine {
        bounds_for(plan, mode, cgroup::place())
    } else {
        Bounds::default()
    };
    let mut layout = Layout::new(plan, mode, bounds.scratch)?;
    if confine {
        layout.store = store_for(plan, mode, &mut layout.env);
    }
    // File times come from the kernel's coarse clock (a tick behind).
    let since = std::time::SystemTime::now() - std::time::Duration::from_millis(20);
    let cgroup = make_cgroup(plan, &mut bounds, mode, confine)?;
    if let Some(n) = &net {
        n.set_env(&mut layout.env);
    }
    let mut prepared = match confine {
        true => Some(prepare(plan, caps, mode, &layout, &bounds, net.as_ref())?),
        false => None,
    };
    let confinement = prepared
        .as_ref()
        .map_or(Confinement::Unconfined, Prepared::confinement);
    let exec = exec_image(plan, &layout.env)?;
    let streams = Streams::open(stdio)?;
    let mut child_ends = streams.child_ends;
    let (err_r, err_w) = pipe()?;
    let notify = match prepared.as_ref().and_then(|p| p.supervised.as_ref()) {
        Some(_) => Some(notify_pair()?),
        None => None,
    };
    let (ops, targets) = prepared
        .as_mut()
        .and_then(|p| p.view.take())
        .unwrap_or_default();
    let mut ns = None;
    let mut sync_w = None;
    let mut status_r = None;
    if mode.namespaces && confine {
        let (n, w, r) = namespace_setup(
            plan,
            ops,
            &bounds,
            net.as_ref(),
            cgroup.as_ref(),
            &mut child_ends,
        )?;
        ns = Some(n);
        sync_w = Some(w);
        status_r = Some(r);
    }
    // Without namespaces the server starts where rootfence is, unless
    // that is not granted.
    let cwd = match (mode.namespaces, confine) {
        (false, true) => working_dir(plan, layout.store.as_ref().map(|s| s.home.as_path()))
            .map(|c| cpath("", &c))
            .transpose()?,
        _ => None,
    };
    let setup = ChildSetup {
        cwd,
        // SAFETY: getpid cannot fail.
        parent_pid: unsafe { libc::getpid() },
        err_w: err_w.as_raw_fd(),
        cgroup_join: cgroup.as_ref().map(Cgroup::joins).unwrap_or_default(),
        stdio: streams.child,
        ns,
        landlock: prepared.as_mut().and_then(|p| p.landlock.take()),
        seccomp: prepared.as_ref().map(|p| p.seccomp.clone()),
        seccomp_unsupervised: prepared
            .as_ref()
            .and_then(|p| p.seccomp_unsupervised.clone()),
        notify_sock: notify.as_ref().map(|(_, t)| t.as_raw_fd()),
        drop_caps: prepared.as_ref().and_then(|p| p.drop_caps),
        rlimits: rlimits(&bounds),
        exec,
    };
    child_ends.push(err_w);
    let notify_r = notify.map(|(mine, theirs)| {
        child_ends.push(theirs);
        mine
    });
    let parent = Parent {
        child_ends,
        sync_w,
        err_r,
        supervise: notify_r.zip(prepared.as_mut().and_then(|p| p.supervised.take())),
        listener_optional: prepared
            .as_ref()
            .is_some_and(|p| p.seccomp_unsupervised.is_some()),
    };
    let flags = clone_flags(setup.ns.is_some(), prepared.as_ref().map(|p| p.rung))
        | net.as_ref().map_or(0, Net::clone_flags);
    let ruleset = prepared.as_mut().and_then(|p| p.ruleset.take());
    let into = cgroup.as_ref().and_then(Cgroup::clone_into);
    let started = on_launcher(move || {
        let r = clone_and_start(&setup, flags, into, parent);
        // The ruleset descriptor must outlive the clone; close it now.
        drop(ruleset);
        drop(setup);
        r
    })?;
    let rule_paths = prepared
        .as_ref()
        .map(|p| p.rule_paths.as_slice())
        .unwrap_or_default();
    let (started, supervisor) = started.map_err(|e| {
        classify(
            e,
            mode,
            netns_asked,
            &plan.command.program,
            &targets,
            rule_paths,
        )
    })?;
    live_add(started.pid);
    let child = SandboxedChild {
        pid: started.pid,
        pidfd: started.pidfd,
        status_r,
        stdin: None,
        stdout: None,
        stderr: None,
        scratch: layout.scratch,
        shm: layout.shm,
        cgroup,
        confinement,
        namespaces: mode.namespaces && confine,
        status: None,
        supervisor,
        watch: if confine {
            crate::roots::planted::Watch::of(&plan.roots)
        } else {
            crate::roots::planted::Watch::default()
        },
        planted: Vec::new(),
        net: None,
        kept: layout.store.map(|s| crate::store::Kept {
            home: s.home,
            since,
            // The files rootfence made there: copies and mount points.
            skip: translate::private_home(plan)
                .map(|h| {
                    targets
                        .iter()
                        .filter_map(|(t, _)| t.strip_prefix(&h).ok())
                        .map(Path::to_path_buf)
                        .collect()
                })
                .unwrap_or_default(),
            user_home: plan.private_home.clone(),
        }),
    };
    Ok(finish(child, net, streams.parent)?)
}

/// The started server's handle, with its standard streams and its network
/// proxy.
fn finish(
    mut child: SandboxedChild,
    net: Option<Net>,
    [stdin, stdout, stderr]: [Option<OwnedFd>; 3],
) -> Result<SandboxedChild, SandboxError> {
    // Network by domain: the proxy starts on its listener; if it cannot,
    // the server is ended (its handle dropped).
    if let Some(n) = net {
        match n.start() {
            Ok(p) => child.net = Some(p),
            Err(e) => {
                let _ = child.kill();
                drop(child);
                return Err(SandboxError::NetworkProxy(e));
            }
        }
    }
    if let Some(base) = child.scratch.as_ref().and_then(|s| s.path().parent()) {
        // Scratch directories of rootfences killed before they could clean
        // up: removed once per process, in the background.
        super::scratch::sweep_stale(base);
    }
    child.stdin = stdin;
    child.stdout = stdout;
    child.stderr = stderr;
    Ok(child)
}

/// The `CLONE_NEW*` flags of a launch: none without namespaces; on the
/// view + seccomp rung also a network namespace, which keeps the host's
/// abstract unix sockets out of reach without Landlock's scopes (TCP is
/// refused whole there).
fn clone_flags(namespaces: bool, rung: Option<Rung>) -> u64 {
    match (namespaces, rung) {
        (false, _) => 0,
        (true, Some(Rung::ViewSeccomp)) => {
            namespace_flags(Identity::current()) | libc::CLONE_NEWNET as u64
        }
        (true, _) => namespace_flags(Identity::current()),
    }
}

/// The pair the filter's listener comes back over (sequenced packets, so
/// the descriptor arrives with its one byte or not at all): rootfence's
/// end, and the child's (above the standard streams).
fn notify_pair() -> Result<(OwnedFd, OwnedFd), SandboxError> {
    let (mine, theirs) = rustix::net::socketpair(
        rustix::net::AddressFamily::UNIX,
        rustix::net::SocketType::SEQPACKET,
        rustix::net::SocketFlags::CLOEXEC,
        None,
    )
    .map_err(|e| SandboxError::Launcher(e.into()))?;
    Ok((mine, above_stdio(theirs)?))
}

/// The bounds' limits as the child sets them.
fn rlimits(bounds: &Bounds) -> Vec<Rlimit> {
    bounds
        .rlimits
        .iter()
        .map(|&(res, v)| {
            (
                res,
                libc::rlimit {
                    rlim_cur: v,
                    rlim_max: v,
                },
            )
        })
        .collect()
}

/// Why a start failed: a system call of the parent's, or a step of the
/// child's.
enum StartError {
    Child(Step, u32, io::Error),
    Os(&'static str, io::Error),
}

/// What a failed start means: a mode the kernel refuses (try a weaker one)
/// or an error.
fn classify(
    e: StartError,
    mode: Mode,
    netns_asked: bool,
    program: &Path,
    targets: &[Target],
    rule_paths: &[PathBuf],
) -> AttemptError {
    let no_ns = |why: String| AttemptError::Downgrade {
        to: Mode {
            namespaces: false,
            overlays: false,
        },
        why,
    };
    match e {
        StartError::Os(what, source)
            if mode.namespaces && netns_asked && what != "read the child's report" =>
        {
            AttemptError::NoNetns {
                why: format!(
                    "the kernel refused a new network namespace with the server's other namespaces ({what}: {source}){}",
                    refusal_hint(source.raw_os_error(), true)
                ),
            }
        }
        StartError::Child(Step::Network, _, source) if netns_asked => AttemptError::NoNetns {
            why: format!(
                "in its own network namespace, the sandbox could not {}: {source}{}",
                Step::Network,
                refusal_hint(source.raw_os_error(), false)
            ),
        },
        StartError::Os(what, source) if mode.namespaces && what != "read the child's report" => {
            no_ns(format!(
                "new namespaces were refused ({what}: {source}){}",
                refusal_hint(source.raw_os_error(), true)
            ))
        }
        StartError::Os(what, source) => AttemptError::Fatal(SandboxError::Spawn {
            program: program.to_path_buf(),
            source: io::Error::new(source.kind(), format!("{what}: {source}")),
        }),
        StartError::Child(step, detail, source) => {
            let target = targets.get(detail as usize);
            if mode.namespaces {
                match (step, target) {
                    (Step::MountPrivate | Step::ViewBase, _)
                    | (Step::ViewOp, Some((_, OpKind::Proc))) => {
                        return no_ns(format!(
                            "in new namespaces, the sandbox could not {step}: {source}{}",
                            refusal_hint(source.raw_os_error(), false)
                        ));
                    }
                    (Step::ViewOp, Some((p, OpKind::Overlay))) if mode.overlays => {
                        return AttemptError::Downgrade {
                            to: Mode {
                                namespaces: true,
                                overlays: false,
                            },
                            why: format!("overlay on {}: {source}", p.display()),
                        };
                    }
                    _ => {}
                }
            }
            AttemptError::Fatal(SandboxError::ChildSetup {
                program: program.to_path_buf(),
                step,
                detail: match (step, target) {
                    (Step::ViewOp | Step::RootChanged, Some((p, _))) => {
                        format!(" ({})", p.display())
                    }
                    (Step::OpenChildRule | Step::ChildRule, _) => rule_paths
                        .get(detail as usize)
                        .map(|p| format!(" ({})", p.display()))
                        .unwrap_or_default(),
                    _ => String::new(),
                },
                source,
            })
        }
    }
}

/// The filter's listener, once the child sends it; `None` when the child
/// reports (a failure before its filter) or ends first.
fn await_listener(sock: &OwnedFd, err_r: &OwnedFd) -> io::Result<Option<OwnedFd>> {
    loop {
        let mut fds = [
            libc::pollfd {
                fd: sock.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: err_r.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: two pollfds on the stack.
        if unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) } < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if fds[0].revents & libc::POLLIN != 0
            && let Ok(l) = fdpass::receive(sock, "the seccomp filter's listener")
        {
            return Ok(Some(l));
        }
        if fds[0].revents != 0 || fds[1].revents != 0 {
            return Ok(None);
        }
    }
}

/// Clone the child (see [`clone::start_into`], into the cgroup v2 `into`
/// where it can), finish its set-up from the parent side, supervise its
/// filter once it sends the listener (before its `execve`, which the
/// filter may hand to the supervisor), and wait until it has exec'd the
/// server or failed.
fn clone_and_start(
    setup: &ChildSetup,
    flags: u64,
    into: Option<std::os::fd::RawFd>,
    parent: Parent,
) -> Result<(clone::Started, Option<supervisor::Supervisor>), StartError> {
    // SAFETY: the child runs only `setup.run()` (raw system calls on
    // memory prepared before, no allocation, no lock), which never
    // returns.
    let started = unsafe { clone::start_into(flags, into, |in_cgroup| setup.run(in_cgroup)) }
        .map_err(|e| StartError::Os("clone", e))?;
    let Parent {
        child_ends,
        sync_w,
        err_r,
        supervise,
        listener_optional,
    } = parent;
    drop(child_ends);
    let abort = |what: &'static str, e: io::Error| {
        let _ = super::pidfd::signal(&started.pidfd, libc::SIGKILL);
        // SAFETY: reaping our own child.
        unsafe {
            libc::waitpid(started.pid, std::ptr::null_mut(), 0);
        }
        StartError::Os(what, e)
    };
    if let Some(w) = &sync_w {
        if flags & libc::CLONE_NEWUSER as u64 != 0
            && let Err(e) = IdMaps::current().write(started.pid)
        {
            return Err(abort("write the user namespace's uid and gid maps", e));
        }
        if let Err(e) = rustix::io::write(w.as_fd(), &[1u8]) {
            return Err(abort("start the child", e.into()));
        }
    }
    let want_listener = supervise.is_some();
    let mut supervisor = None;
    if let Some((sock, rules)) = supervise {
        match await_listener(&sock, &err_r) {
            Ok(Some(l)) => match supervisor::Supervisor::start(l, rules) {
                Ok(s) => supervisor = Some(s),
                Err(e) => return Err(abort("supervise the server's seccomp filter", e)),
            },
            // The child failed before its filter: its report says how.
            Ok(None) => {}
            Err(e) => return Err(abort("receive the seccomp filter's listener", e)),
        }
    }
    let mut report = Vec::with_capacity(12);
    let mut f = std::fs::File::from(err_r);
    if let Err(e) = f.read_to_end(&mut report) {
        return Err(abort("read the child's report", e));
    }
    drop(sync_w);
    if report.is_empty() {
        if want_listener && supervisor.is_none() {
            if !listener_optional {
                return Err(abort(
                    "receive the seccomp filter's listener",
                    io::Error::other("the server started without sending it"),
                ));
            }
            tracing::info!(
                "a seccomp supervisor around rootfence already (rootfence inside a rootfence sandbox, or a container's): this server's locks on files it may only read are judged by that one, if at all"
            );
        }
        return Ok((started, supervisor));
    }
    // SAFETY: reaping our own child, which exits after reporting.
    unsafe {
        libc::waitpid(started.pid, std::ptr::null_mut(), 0);
    }
    match protocol::decode(&report) {
        Some((step, detail, e)) => Err(StartError::Child(step, detail, e)),
        None => Err(StartError::Os(
            "the child's report",
            io::Error::other("unreadable report"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::nsprobe::NamespaceSupport;

    fn mode(namespaces: bool, overlays: bool) -> Mode {
        Mode {
            namespaces,
            overlays,
        }
    }

    #[test]
    fn a_remembered_refusal_lowers_the_start_only_where_the_policy_allows_it() {
        let none = machine::Record::default();
        assert_eq!(
            remembered_mode(true, false, &none),
            (mode(true, true), None)
        );
        assert_eq!(
            remembered_mode(false, false, &none),
            (mode(false, false), None)
        );
        let refused = machine::Record {
            launch: Some(machine::Refused::Namespaces {
                why: "EPERM".into(),
            }),
            ..machine::Record::default()
        };
        assert_eq!(
            remembered_mode(true, false, &refused),
            (mode(false, false), Some("EPERM".into()))
        );
        // Required: tried again (a refusal then is an error).
        assert_eq!(
            remembered_mode(true, true, &refused),
            (mode(true, true), None)
        );
        let probed = machine::Record {
            namespaces: Some(NamespaceSupport::refused("no userns".into())),
            ..machine::Record::default()
        };
        assert_eq!(remembered_mode(true, false, &probed).0, mode(false, false));
        assert_eq!(remembered_mode(true, true, &probed).0, mode(true, true));
    }

    #[test]
    fn a_remembered_overlay_refusal_keeps_the_namespaces() {
        let r = machine::Record {
            launch: Some(machine::Refused::Overlays {
                why: "overlay: EPERM".into(),
            }),
            ..machine::Record::default()
        };
        assert_eq!(
            remembered_mode(true, true, &r),
            (mode(true, false), Some("overlay: EPERM".into()))
        );
        assert_eq!(
            remembered_mode(false, false, &r),
            (mode(false, false), None)
        );
    }
}
