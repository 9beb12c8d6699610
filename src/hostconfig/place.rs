//! Which places `wrap` makes writable roots of: data places only.
//!
//! A server's README dictates its config, so a path in its arguments or
//! `env` is the server's word, not the user's. `wrap` never makes a root,
//! from such a word, of a place that programs outside the sandbox read or
//! run: the home directory itself or an ancestor of it, a dot-directory of
//! the home (`~/.config`, `~/.local`, `~/.ssh`, ...) or anything inside
//! one, a directory on the user's `PATH` (or `~/bin`, which login shells
//! add to it), inside one or holding one, and a file that is a shell
//! start-up file (wherever it sits, as direnv's `.envrc` does). The user
//! states such a root with wrap's `--root-for NAME=DIR` or `--root DIR`.
//!
//! Pure: the filesystem is asked only through [`Probe`] (canonical forms,
//! so a symlink to `~/.config` is judged as `~/.config`).

use std::fmt;
use std::path::{Component, Path, PathBuf};

use super::probe::Probe;

/// Names of shell and session start-up files: shells, display managers
/// and direnv outside the sandbox run them.
const STARTUP_FILES: &[&str] = &[
    ".profile",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".bashrc",
    ".bash_aliases",
    ".zshenv",
    ".zprofile",
    ".zshrc",
    ".zlogin",
    ".zlogout",
    ".kshrc",
    ".mkshrc",
    ".cshrc",
    ".tcshrc",
    ".login",
    ".logout",
    ".xprofile",
    ".xsessionrc",
    ".xsession",
    ".xinitrc",
    ".envrc",
];

/// Why a place is not a data place. Paths are shown as the user knows
/// them (`~/...` under the home).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotData {
    /// A shell or session start-up file.
    StartupFile,
    /// The home directory itself.
    Home,
    /// An ancestor of the home directory.
    HoldsHome,
    /// A dot-directory of the home (`itself`), or inside one.
    DotDir {
        /// The dot-directory (`~/.config`).
        dot: String,
        /// Whether the place is the dot-directory itself.
        itself: bool,
    },
    /// A directory on `PATH` (`itself`), or inside one.
    OnPath {
        /// The `PATH` directory.
        dir: String,
        /// Whether the place is the `PATH` directory itself.
        itself: bool,
    },
    /// A directory holding a directory on `PATH`.
    HoldsPath(String),
}

impl fmt::Display for NotData {
    /// The predicate after the place's name: "is inside ~/.config, ...".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SETTINGS: &str =
            "where programs outside the sandbox read their settings, caches and commands";
        const COMMANDS: &str = "whose programs run outside the sandbox as commands";
        match self {
            NotData::StartupFile => {
                f.write_str("is a shell start-up file, which shells outside the sandbox run")
            }
            NotData::Home => f.write_str(
                "is the home directory, where shells and desktop sessions outside the sandbox read their start-up files",
            ),
            NotData::HoldsHome => f.write_str("holds the home directory"),
            NotData::DotDir { itself: true, .. } => {
                write!(f, "is a dot-directory of the home, {SETTINGS}")
            }
            NotData::DotDir { dot, itself: false } => write!(f, "is inside {dot}, {SETTINGS}"),
            NotData::OnPath { itself: true, .. } => write!(f, "is on your PATH, {COMMANDS}"),
            NotData::OnPath { dir, itself: false } => {
                write!(f, "is inside {dir}, a directory on your PATH {COMMANDS}")
            }
            NotData::HoldsPath(dir) => {
                write!(f, "holds {dir}, a directory on your PATH {COMMANDS}")
            }
        }
    }
}

/// `path` as the user knows it: `~` or `~/...` under `home`.
pub fn shown(path: &Path, home: Option<&Path>) -> String {
    match home.and_then(|h| path.strip_prefix(h).ok()) {
        Some(rest) if rest.as_os_str().is_empty() => "~".to_string(),
        Some(rest) => format!("~/{}", rest.display()),
        None => path.display().to_string(),
    }
}

/// `p` without `.` components or a trailing slash.
pub fn normal(p: &Path) -> PathBuf {
    p.components().filter(|c| *c != Component::CurDir).collect()
}

/// The forms a path is judged in: as written, and canonical.
fn forms(p: &Path, probe: &dyn Probe) -> Vec<PathBuf> {
    let mut out = vec![normal(p)];
    if let Some(c) = probe.canonical(p)
        && !out.contains(&c)
    {
        out.push(c);
    }
    out
}

/// Why `dir`, the root `wrap` would make for the value naming `path` (the
/// directory itself, or a file's directory), is not a data place; `None`
/// when it is one.
pub fn not_data(path: &Path, dir: &Path, probe: &dyn Probe) -> Option<NotData> {
    if path
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| STARTUP_FILES.contains(&n))
    {
        return Some(NotData::StartupFile);
    }
    let dirs = forms(dir, probe);
    let homes = probe.home().map(|h| forms(&h, probe)).unwrap_or_default();
    for h in &homes {
        let show = |p: &Path| shown(p, Some(h));
        for d in &dirs {
            if d == h {
                return Some(NotData::Home);
            }
            if h.starts_with(d) {
                return Some(NotData::HoldsHome);
            }
            if let Ok(rest) = d.strip_prefix(h)
                && let Some(Component::Normal(first)) = rest.components().next()
                && first.as_encoded_bytes().starts_with(b".")
            {
                return Some(NotData::DotDir {
                    dot: show(&h.join(first)),
                    itself: rest.components().count() == 1,
                });
            }
        }
    }
    let home = probe.home();
    // Debian's and Ubuntu's ~/.profile put ~/bin on PATH when it exists.
    let login_bin = home.as_ref().map(|h| h.join("bin"));
    let path_dirs: Vec<PathBuf> = probe
        .path_dirs()
        .into_iter()
        .chain(login_bin)
        .filter(|p| p.is_absolute())
        .flat_map(|p| forms(&p, probe))
        .collect();
    for p in &path_dirs {
        for d in &dirs {
            if d.starts_with(p) {
                return Some(NotData::OnPath {
                    dir: shown(p, home.as_deref()),
                    itself: d == p,
                });
            }
            if p.starts_with(d) {
                return Some(NotData::HoldsPath(shown(p, home.as_deref())));
            }
        }
    }
    None
}

/// A place `wrap` did not make a root of, for the line that says so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Declined {
    /// The argument as the config writes it (`--cache-dir ~/.local/bin`,
    /// `DATA_DIR=~/.config/autostart`).
    pub argument: String,
    /// The root it would have been, as the user knows it (`~/...`).
    pub dir: String,
    /// The file it names, when the root would have been its directory.
    pub file: Option<String>,
    /// Why not.
    pub why: NotData,
    /// Why the policy would refuse it as a root too, if it would: then no
    /// flag of `wrap` makes it one.
    pub refused: Option<String>,
}

impl Declined {
    /// The line for stderr: the server, the argument, why, and the flag
    /// of `wrap` that states the root.
    pub fn line(&self, server: &str) -> String {
        let subject = match (&self.why, &self.file) {
            (NotData::StartupFile, Some(f)) => f.clone(),
            (_, Some(_)) => format!("its directory {}", self.dir),
            (_, None) => self.dir.clone(),
        };
        let head = format!(
            "wrap: server \"{server}\": {} not made a root: {subject} {}",
            self.argument, self.why
        );
        match &self.refused {
            Some(why) => format!("{head}; the policy refuses it as a root too ({why})"),
            None => format!(
                "{head}; if the server should write there, pass --root-for {}",
                shell_word(&format!("{server}={}", self.dir))
            ),
        }
    }
}

/// `s` as one shell word: as it is when it needs no quoting, else in
/// single quotes.
fn shell_word(s: &str) -> String {
    let plain = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_@%+=:,./~-".contains(&b));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hostconfig::fake::FakeProbe;

    fn judge(p: &str) -> Option<NotData> {
        let probe = FakeProbe::new();
        let path = Path::new(p);
        not_data(path, path, &probe)
    }

    #[test]
    fn the_home_its_ancestors_and_dot_directories_are_not_data() {
        assert_eq!(judge("/home/u"), Some(NotData::Home));
        assert_eq!(judge("/home/u/"), Some(NotData::Home));
        assert_eq!(judge("/home"), Some(NotData::HoldsHome));
        assert_eq!(
            judge("/home/u/.config/autostart"),
            Some(NotData::DotDir {
                dot: "~/.config".into(),
                itself: false
            })
        );
        assert_eq!(
            judge("/home/u/.local"),
            Some(NotData::DotDir {
                dot: "~/.local".into(),
                itself: true
            })
        );
        assert_eq!(judge("/home/u/mcp-data"), None);
        assert_eq!(judge("/home/u/data/.cache"), None);
    }

    #[test]
    fn path_directories_inside_and_around_are_not_data() {
        assert_eq!(
            judge("/srv/tools/bin"),
            Some(NotData::OnPath {
                dir: "/srv/tools/bin".into(),
                itself: true
            })
        );
        assert_eq!(
            judge("/srv/tools/bin/sub"),
            Some(NotData::OnPath {
                dir: "/srv/tools/bin".into(),
                itself: false
            })
        );
        assert_eq!(
            judge("/srv/tools"),
            Some(NotData::HoldsPath("/srv/tools/bin".into()))
        );
        // ~/bin, which login shells add, even when PATH lacks it.
        assert_eq!(
            judge("/home/u/bin"),
            Some(NotData::OnPath {
                dir: "~/bin".into(),
                itself: true
            })
        );
        assert_eq!(judge("/srv/data"), None);
    }

    #[test]
    fn a_symlink_is_judged_where_it_leads() {
        let mut probe = FakeProbe::new();
        probe
            .links
            .insert("/home/u/notes".into(), "/home/u/.config/autostart".into());
        let p = Path::new("/home/u/notes");
        assert!(matches!(
            not_data(p, p, &probe),
            Some(NotData::DotDir { .. })
        ));
    }

    #[test]
    fn the_line_names_the_server_the_argument_why_and_the_flag() {
        let d = Declined {
            argument: "DATA_DIR=~/.config/autostart".into(),
            dir: "~/.config/autostart".into(),
            file: None,
            why: judge("/home/u/.config/autostart").unwrap_or(NotData::Home),
            refused: None,
        };
        assert_eq!(
            d.line("x"),
            "wrap: server \"x\": DATA_DIR=~/.config/autostart not made a root: ~/.config/autostart is inside ~/.config, where programs outside the sandbox read their settings, caches and commands; if the server should write there, pass --root-for x=~/.config/autostart"
        );
        let d = Declined {
            argument: "--db ~/x.db".into(),
            dir: "~".into(),
            file: Some("~/x.db".into()),
            why: NotData::Home,
            refused: None,
        };
        assert!(
            d.line("my server")
                .contains(": its directory ~ is the home directory")
        );
        assert!(
            d.line("my server")
                .ends_with("pass --root-for 'my server=~'")
        );
        let d = Declined {
            refused: Some("holds the denied ~/.ssh".into()),
            ..d
        };
        assert!(
            d.line("x")
                .ends_with("; the policy refuses it as a root too (holds the denied ~/.ssh)")
        );
    }

    #[test]
    fn start_up_files_are_not_data_wherever_they_are() {
        let probe = FakeProbe::new();
        for f in ["/home/u/.bashrc", "/srv/project/.envrc", "/srv/x/.zshrc"] {
            let p = Path::new(f);
            let dir = p.parent().unwrap_or(p);
            assert_eq!(not_data(p, dir, &probe), Some(NotData::StartupFile), "{f}");
        }
        let p = Path::new("/srv/project/notes.db");
        assert_eq!(not_data(p, Path::new("/srv/project"), &probe), None);
    }
}
