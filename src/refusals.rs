//! What rootfence makes of one path the sandbox refused a server
//! ([`crate::sandbox::observed::Refusal`], seen by rootfence itself, never
//! read from the server's output): the `[runtime]` right to propose for it,
//! or why it is never proposed. `rootfence learn` grants what it proposes
//! in its next round; `rootfence run` tells the host ([`hint`]).
//!
//! Never proposed: a denied path (the built-in deny list, the policy's
//! `[deny]`, the policy file); the kernel's interfaces (`/proc`, `/sys`,
//! `/dev`); a socket, FIFO or device (another program's endpoint); a
//! symbolic link itself; what belongs to another user; a directory shared
//! by everything the user runs or holding the user's data (`~`,
//! `~/.config`, `/tmp`, ...: see [`crate::runtime::too_wide`]); a shell's or
//! session's startup files (run outside the sandbox, and where tokens are
//! exported); and a write where the plan grants execution (what is written
//! there runs outside too).
//!
//! Pure apart from resolving the shared directories
//! ([`crate::runtime::too_wide`] canonicalizes them).

use std::path::{Path, PathBuf};

use crate::plan::SandboxPlan;
use crate::policy::{deny_conflict, expand};
use crate::roots::PathRule;
use crate::runtime::HostEnv;
use crate::sandbox::observed::{Kind, Need, Refusal};

/// Startup files of shells and sessions: run by whatever the user starts
/// next, outside the sandbox, and where tokens are often exported.
const STARTUP: &[&str] = &[
    "~/.profile",
    "~/.bashrc",
    "~/.bash_profile",
    "~/.bash_login",
    "~/.bash_logout",
    "~/.zshrc",
    "~/.zshenv",
    "~/.zprofile",
    "~/.zlogin",
    "~/.xprofile",
    "~/.xinitrc",
    "~/.pam_environment",
    "~/.config/fish",
    "~/.config/autostart",
    "~/.config/systemd",
    "~/.config/environment.d",
];

/// The right a `[runtime]` line grants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Right {
    /// `read`.
    Read,
    /// `exec` (read and execute).
    Exec,
    /// `write` (read and write).
    Write,
}

/// What learn does with a refused path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Propose this right on it.
    Propose(Right),
    /// Denied by this rule (`~/.ssh`) of this origin (`built-in`).
    Denied {
        /// The rule as written.
        rule: String,
        /// Where it comes from.
        origin: String,
        /// The path is inside the denied one (else it holds it).
        inside: bool,
    },
    /// Never proposed, for this reason.
    Never(&'static str),
}

/// What the verdict depends on besides the refusal.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// The policy's deny list.
    pub deny: &'a [PathRule],
    /// The plan the server ran under.
    pub plan: &'a SandboxPlan,
    /// rootfence's environment (its home directory, the XDG directories).
    pub env: &'a HostEnv,
    /// The user rootfence runs as.
    pub uid: u32,
}

/// The verdict on `r`; see the module's documentation.
pub fn verdict(r: &Refusal, cx: &Context<'_>) -> Verdict {
    let path = r.path.as_path();
    let asked = r.asked.as_deref();
    for p in std::iter::once(path).chain(asked) {
        if let Some((rule, inside)) = deny_conflict(p, cx.deny) {
            return Verdict::Denied {
                rule: rule.shown.clone(),
                origin: rule.origin.to_string(),
                inside,
            };
        }
    }
    if ["/proc", "/sys", "/dev"]
        .iter()
        .any(|k| path.starts_with(k))
    {
        return Verdict::Never("the kernel's interfaces are not granted by path");
    }
    match r.outside.kind {
        Kind::Special => {
            return Verdict::Never("a socket, FIFO or device: another program's endpoint");
        }
        Kind::Symlink => {
            return Verdict::Never("a symbolic link: grant what it leads to, if anything");
        }
        Kind::File | Kind::Dir => {}
    }
    if r.outside.uid != cx.uid && r.outside.uid != 0 {
        return Verdict::Never("it belongs to another user");
    }
    if crate::runtime::too_wide(path, cx.env) {
        return Verdict::Never(
            "shared by everything you run, or holding your data: too wide to grant whole",
        );
    }
    let home = cx.env.home.as_deref();
    if startup(path, home) {
        return Verdict::Never(
            "a shell's or session's startup file: it runs outside the sandbox, and tokens are often exported there",
        );
    }
    match r.need {
        Need::Look | Need::Read => Verdict::Propose(Right::Read),
        Need::Exec => Verdict::Propose(Right::Exec),
        Need::Write if executable(cx.plan, path) => Verdict::Never(
            "the plan grants execution there (a program's or toolchain's tree): what is written there runs outside the sandbox too",
        ),
        Need::Write => Verdict::Propose(Right::Write),
    }
}

/// What to tell the user of `r`: the path, what the sandbox refused, and
/// the policy line that allows it, or why no line is proposed. `None` for a
/// refusal not worth a word to the user: the kernel's interfaces, another
/// program's endpoint, a link itself, another user's file.
pub fn hint(r: &Refusal, cx: &Context<'_>) -> Option<String> {
    let home = cx.env.home.as_deref();
    let name = crate::runtime::shown_quoted(&r.path, home);
    let what = if r.in_dir {
        format!("the sandbox refused the server a change in {name} ({r})")
    } else {
        format!("the sandbox refused the server {name} ({r})")
    };
    match verdict(r, cx) {
        Verdict::Propose(right) => {
            let key = match right {
                Right::Read => "read",
                Right::Exec => "exec",
                Right::Write => "write",
            };
            Some(format!(
                "{what}; to allow it, add to the policy: [runtime] {key} = [{}]",
                crate::runtime::shown_toml(&r.path, home)
            ))
        }
        Verdict::Denied {
            rule,
            origin,
            inside,
        } => Some(format!(
            "{what}: {} ({rule}, {origin}); no policy line grants it",
            if inside {
                "it is a denied path"
            } else {
                "it holds a denied path"
            }
        )),
        Verdict::Never(_)
            if ["/proc", "/sys", "/dev"]
                .iter()
                .any(|k| r.path.starts_with(k))
                || matches!(r.outside.kind, Kind::Special | Kind::Symlink)
                || (r.outside.uid != cx.uid && r.outside.uid != 0) =>
        {
            None
        }
        Verdict::Never(why) => Some(format!("{what}; no policy line is proposed: {why}")),
    }
}

/// What to tell the user of a TCP connection to `addr` the sandbox
/// refused the server (its port not granted).
pub fn connect_hint(addr: std::net::SocketAddr) -> String {
    let port = addr.port();
    if addr.ip().is_loopback() {
        format!(
            "the sandbox refused the server a TCP connection to {addr} (this machine); to allow it, add to the policy: [network] tcp_connect = [{port}]"
        )
    } else {
        format!(
            "the sandbox refused the server a TCP connection to {addr}; to allow a host by name, add to the policy: [network] allow_domains = [\"NAME\"] (through rootfence's proxy); tcp_connect = [{port}] would allow every host on that port"
        )
    }
}

/// What to tell the user of a UDP socket the sandbox refused the server:
/// the first step of a name lookup, where the policy gives no network.
pub const UDP_HINT: &str = "the sandbox refused the server a UDP socket (a name lookup opens one first): this policy gives it no UDP, so it looks up no name; if it needs a host, add to the policy: [network] allow_domains = [\"NAME\"] (names are looked up by rootfence's proxy)";

/// Whether `path` is (or is in) a shell's or session's startup file or
/// directory.
fn startup(path: &Path, home: Option<&Path>) -> bool {
    STARTUP
        .iter()
        .filter_map(|s| expand(s, home).ok())
        .any(|s: PathBuf| path.starts_with(&s))
}

/// Whether the plan grants execution on `path` or above it.
fn executable(plan: &SandboxPlan, path: &Path) -> bool {
    plan.grants
        .iter()
        .any(|g| g.rights.exec && path.starts_with(&g.path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Policy;
    use crate::runtime::{CommandSpec, Rights, Rule, RuntimeNeed};
    use crate::sandbox::observed::Outside;

    fn env() -> HostEnv {
        HostEnv {
            home: Some("/home/u".into()),
            ..HostEnv::default()
        }
    }

    fn plan(policy: &Policy) -> SandboxPlan {
        let need = |p: &str, rights| RuntimeNeed::new(p, rights, Rule::Program, "t");
        let command = CommandSpec::with_needs(
            "/opt/tool/bin/tool",
            vec![need("/usr", Rights::RX), need("/opt/tool", Rights::RX)],
        );
        crate::plan::build(policy, vec![], vec![], command, &env())
    }

    fn refusal(path: &str, need: Need, kind: Kind, uid: u32) -> Refusal {
        Refusal::not_in_view(path, need, Outside { kind, uid }, 1)
    }

    /// `judge` on the refusal, under the built-in policy, for uid 1000.
    fn with<T>(
        path: &str,
        need: Need,
        kind: Kind,
        uid: u32,
        judge: impl Fn(&Refusal, &Context<'_>) -> T,
    ) -> T {
        let policy = Policy::builtin(Some(Path::new("/home/u"))).unwrap();
        let plan = plan(&policy);
        let env = env();
        let cx = Context {
            deny: &policy.deny,
            plan: &plan,
            env: &env,
            uid: 1000,
        };
        judge(&refusal(path, need, kind, uid), &cx)
    }

    fn v(path: &str, need: Need, kind: Kind, uid: u32) -> Verdict {
        with(path, need, kind, uid, verdict)
    }

    fn h(path: &str, need: Need, kind: Kind, uid: u32) -> Option<String> {
        with(path, need, kind, uid, hint)
    }

    #[test]
    fn hints_name_the_path_and_the_line_or_why_there_is_none() {
        let cache = h("/home/u/.bun/install/cache", Need::Write, Kind::Dir, 1000).unwrap();
        assert!(cache.contains("~/.bun/install/cache"), "{cache}");
        assert!(
            cache.ends_with("[runtime] write = [\"~/.bun/install/cache\"]"),
            "{cache}"
        );
        let key = h("/home/u/.ssh/id_rsa", Need::Read, Kind::File, 1000).unwrap();
        assert!(key.contains("denied path (~/.ssh, built-in)"), "{key}");
        assert!(!key.contains("[runtime]"), "{key}");
        let wide = h("/home/u/.config", Need::Write, Kind::Dir, 1000).unwrap();
        assert!(!wide.contains("[runtime]"), "{wide}");
        for (path, kind, uid) in [
            ("/proc/1/environ", Kind::File, 0),
            ("/run/user/1000/bus", Kind::Special, 1000),
            ("/home/other/notes", Kind::File, 1001),
        ] {
            assert_eq!(h(path, Need::Read, kind, uid), None, "{path}");
        }
    }

    #[test]
    fn a_name_is_quoted_in_prose_and_one_toml_string_in_the_line() {
        let odd = "/home/u/x\", \"~/Documents\", \"y\n\u{1b}[2K/p";
        let line = h(odd, Need::Exec, Kind::File, 1000).unwrap();
        assert!(!line.contains('\n') && !line.contains('\u{1b}'), "{line:?}");
        let toml_line = &line[line.rfind("[runtime] ").unwrap() + "[runtime] ".len()..];
        let t: toml::Table = toml::from_str(toml_line).unwrap();
        let granted = t["exec"].as_array().unwrap();
        assert_eq!(granted.len(), 1, "{toml_line}");
        assert_eq!(
            granted[0].as_str().unwrap(),
            "~/x\", \"~/Documents\", \"y\n\u{1b}[2K/p"
        );
        // Ordinary names are shown as they are.
        let plain = h("/home/u/.fakepm/cache-1.2", Need::Read, Kind::Dir, 1000).unwrap();
        assert!(
            plain.contains("refused the server ~/.fakepm/cache-1.2 ("),
            "{plain}"
        );
    }

    #[test]
    fn what_the_server_needed_is_proposed_as_it_needed_it() {
        for (path, need, kind, uid, right) in [
            (
                "/home/u/.fakepm/cache",
                Need::Read,
                Kind::Dir,
                1000,
                Right::Read,
            ),
            (
                "/home/u/.fakepm/cache",
                Need::Look,
                Kind::Dir,
                1000,
                Right::Read,
            ),
            (
                "/home/u/.fakepm/cache",
                Need::Write,
                Kind::Dir,
                1000,
                Right::Write,
            ),
            ("/srv/tools/bin/x", Need::Exec, Kind::File, 0, Right::Exec),
        ] {
            assert_eq!(
                v(path, need, kind, uid),
                Verdict::Propose(right),
                "{path} {need:?}"
            );
        }
    }

    #[test]
    fn secrets_and_what_is_not_the_servers_are_never_proposed() {
        assert!(matches!(
            v("/home/u/.ssh/id_rsa", Need::Read, Kind::File, 1000),
            Verdict::Denied { rule, .. } if rule == "~/.ssh"
        ));
        // A directory that holds a secret is denied too.
        assert!(matches!(
            v("/home/u/.claude", Need::Read, Kind::Dir, 1000),
            Verdict::Denied { .. }
        ));
        for (path, kind, uid) in [
            ("/sys/fs/cgroup/cpu.max", Kind::File, 0),
            ("/dev/sda", Kind::Special, 0),
            ("/run/user/1000/bus", Kind::Special, 1000),
            ("/home/u/.link", Kind::Symlink, 1000),
            ("/home/other/notes", Kind::File, 1001),
            ("/tmp", Kind::Dir, 0),
            ("/opt", Kind::Dir, 0),
            ("/home/u/.bashrc", Kind::File, 1000),
            ("/home/u/.config/fish/config.fish", Kind::File, 1000),
        ] {
            assert!(
                matches!(v(path, Need::Read, kind, uid), Verdict::Never(_)),
                "{path}"
            );
        }
        // The home and the user's data directories hold denied paths.
        for path in ["/home/u", "/home/u/.config", "/home/u/.cache"] {
            assert!(
                matches!(
                    v(path, Need::Read, Kind::Dir, 1000),
                    Verdict::Denied { inside: false, .. }
                ),
                "{path}"
            );
        }
        // Writing where the plan grants execution: it would run outside.
        assert!(matches!(
            v("/opt/tool/lib", Need::Write, Kind::Dir, 0),
            Verdict::Never(_)
        ));
    }
}
