//! The project rule: a script's project, up to its marker.
//!
//! A server run from a script (the command itself, as a cloned project's
//! `#!` script, or the first file argument of an interpreter or launcher:
//! `node build/index.js`, `uv run server.py`, `fastmcp run server.py`)
//! loads code from the project around it. The project is the nearest
//! directory above the script holding a project marker; its dependencies
//! are its own and every `node_modules` above it (node looks there too).
//! The project is read-only; its virtual environments are executable; its
//! `.git` is left out (a remote URL can hold a token).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::exe::{self, base_name};
use super::wide::{in_system_tree, too_wide};
use super::{Collect, HostEnv, Rights, Rule};

/// Files and directories that mark a project's top.
const MARKERS: &[&str] = &[
    "package.json",
    "pyproject.toml",
    "setup.py",
    "setup.cfg",
    "Cargo.toml",
    "go.mod",
    "deno.json",
    "deno.jsonc",
];

/// Directories of a project left out of its grant.
pub const LEFT_OUT: &[&str] = &[".git", ".hg", ".svn"];

/// Extensions of script files an interpreter or launcher runs.
const SCRIPT_EXTENSIONS: &[&str] = &["js", "mjs", "cjs", "ts", "mts", "cts", "py", "pyw"];

/// Grant the projects of the program (when it is a `#!` script) and of
/// the command's script argument. What decides them is read where the
/// script lies and where each link met on the way to it lies (see
/// [`Collect::from`]): in a place the server may write, nothing.
pub fn collect(c: &mut Collect, argv: &[OsString], found: &Path, program: &Path, script: bool) {
    // Each script, canonical, and the places its path was decided in.
    let mut scripts: Vec<(PathBuf, Vec<PathBuf>)> = Vec::new();
    let in_a_tree = c
        .needs
        .iter()
        .any(|n| n.path != program && program.starts_with(&n.path) && !n.private);
    if script && !in_system_tree(program) && !in_a_tree {
        scripts.push((program.to_path_buf(), crate::canon::link_holders(found)));
    }
    if let Some((spelled, s)) = script_argument(argv, c.env) {
        scripts.push((s, crate::canon::link_holders(&spelled)));
    }
    for (script, mut from) in scripts {
        let why = format!("project of {}", c.shown(&script));
        from.extend(script.parent().map(Path::to_path_buf));
        c.from = from;
        match project_of(&script, c.env) {
            Some(dir) => grant_project(c, &dir, &why),
            None => c.add(&script, Rights::R, Rule::Project, why, false),
        }
        c.from.clear();
    }
    for spelled in uv_projects(argv, c.env) {
        let Ok(dir) = crate::canon::canonicalize(&spelled) else {
            continue;
        };
        let why = format!("uv project {}", c.shown(&dir));
        c.from = crate::canon::link_holders(&spelled);
        c.from.push(dir.clone());
        grant_project(c, &dir, &why);
        c.from.clear();
    }
}

/// The nearest directory above `script` holding a marker, below any
/// directory too wide to grant; else the script's own directory when that
/// is not too wide.
pub fn project_of(script: &Path, env: &HostEnv) -> Option<PathBuf> {
    let dir = script.parent()?;
    for a in dir.ancestors() {
        if too_wide(a, env) {
            break;
        }
        if MARKERS.iter().any(|m| a.join(m).exists()) {
            return Some(a.to_path_buf());
        }
    }
    (!too_wide(dir, env)).then(|| dir.to_path_buf())
}

/// Grant a project: itself read-only (without its VCS directory), every
/// `node_modules` at or above it, its virtual environments executable.
fn grant_project(c: &mut Collect, dir: &Path, why: &str) {
    if in_system_tree(dir) {
        return;
    }
    c.add(dir, Rights::RX, Rule::Project, why.to_string(), false);
    for a in dir.ancestors() {
        if too_wide(a, c.env) {
            break;
        }
        if base_name(a) == "node_modules" {
            c.add(
                a,
                Rights::RX,
                Rule::Project,
                format!("{why}: its dependencies"),
                true,
            );
        }
        let modules = a.join("node_modules");
        if a != dir && modules.is_dir() {
            c.add(
                modules,
                Rights::RX,
                Rule::Project,
                format!("{why}: its dependencies"),
                true,
            );
        }
    }
    for name in [".venv", "venv", ".env"] {
        let venv = dir.join(name);
        if venv.join("pyvenv.cfg").is_file() {
            // What it holds and names: read in it.
            let sources = c.from.len();
            c.from.push(venv.clone());
            let shown = c.shown(&venv);
            c.add(
                &venv,
                Rights::RX,
                Rule::Project,
                format!("{why}: virtual environment {shown}"),
                true,
            );
            if let Some(bin) = exe::venv_home(&venv)
                && let Some(prefix) = bin.parent()
                && !in_system_tree(prefix)
            {
                let target = if too_wide(prefix, c.env) {
                    bin.clone()
                } else {
                    prefix.to_path_buf()
                };
                c.add(
                    target,
                    Rights::RX,
                    Rule::Project,
                    format!("the Python {shown} was made from"),
                    true,
                );
            }
            c.from.truncate(sources);
        }
    }
}

/// The first argument that is not an option and names an existing script
/// file (by extension, or an executable file), relative ones taken from
/// the directory the command runs in (`uv --directory P` runs in P): as
/// spelled (absolute), and canonical.
fn script_argument(argv: &[OsString], env: &HostEnv) -> Option<(PathBuf, PathBuf)> {
    let cwd = uv_flag_dirs(argv, "--directory", env)
        .pop()
        .or_else(|| env.cwd.clone());
    argv.iter()
        .skip(1)
        .map(Path::new)
        .filter(|a| !a.as_os_str().to_string_lossy().starts_with('-'))
        .filter_map(|a| {
            let a = if a.is_absolute() {
                a.to_path_buf()
            } else {
                cwd.as_ref()?.join(a)
            };
            let real = crate::canon::canonicalize(&a).ok().filter(|p| p.is_file())?;
            Some((a, real))
        })
        .find(|(_, p)| {
            p.extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| SCRIPT_EXTENSIONS.contains(&e))
                || exe::is_executable(p)
        })
}

/// The directories a `uv` command names with `flag` (`--directory P`,
/// `--project=P`, before or after `run`), canonical, relative ones taken
/// from the current directory. Nothing for other commands. As spelled:
/// where each leads is the caller's to resolve (and the links met, its to
/// weigh).
fn uv_flag_dirs(argv: &[OsString], flag: &str, env: &HostEnv) -> Vec<PathBuf> {
    let Some(first) = argv.first() else {
        return Vec::new();
    };
    if base_name(Path::new(first)) != "uv" {
        return Vec::new();
    }
    let args: Vec<String> = argv
        .iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let abs = |p: &str| {
        let p = Path::new(p);
        let p = if p.is_absolute() {
            p.to_path_buf()
        } else {
            env.cwd.clone().unwrap_or_default().join(p)
        };
        p.is_dir().then_some(p)
    };
    let mut out = Vec::new();
    for (i, a) in args.iter().enumerate() {
        if a == flag {
            out.extend(args.get(i + 1).and_then(|v| abs(v)));
        } else if let Some(v) = a.strip_prefix(flag).and_then(|r| r.strip_prefix('=')) {
            out.extend(abs(v));
        }
    }
    out
}

/// The projects a `uv` command runs in: `--directory P` / `--project P`
/// (before or after `run`), else, for `uv run`, the current directory
/// when it holds a `pyproject.toml`; as spelled.
fn uv_projects(argv: &[OsString], env: &HostEnv) -> Vec<PathBuf> {
    if argv
        .first()
        .is_none_or(|first| base_name(Path::new(first)) != "uv")
    {
        return Vec::new();
    }
    let mut out = uv_flag_dirs(argv, "--directory", env);
    out.extend(uv_flag_dirs(argv, "--project", env));
    if out.is_empty()
        && argv.iter().skip(1).any(|a| a == "run")
        && let Some(cwd) = &env.cwd
        && cwd.join("pyproject.toml").is_file()
        && !too_wide(cwd, env)
    {
        out.push(cwd.clone());
    }
    out
}
