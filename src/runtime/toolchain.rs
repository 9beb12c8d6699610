//! The program and toolchain rules: the server's executable with its
//! interpreter, and the toolchains on the user's `PATH`, each granted as
//! the install tree it belongs to.
//!
//! An install tree is the directory above a `bin/`, `sbin/` or `shims/`
//! directory (`~/.pyenv/shims` → `~/.pyenv`, `~/.nvm/versions/node/v22/bin`
//! → `~/.nvm/versions/node/v22`), unless that directory is too wide
//! ([`super::wide::too_wide`]: `~/.local` holds `~/.local/share`), in which
//! case the `bin/` and its sibling `lib/` are granted instead. The links in
//! a `PATH` directory lead to more trees (`~/.local/bin/x` →
//! `~/.local/share/pipx/venvs/x/bin/x` → that virtual environment, and the
//! Python it was made from).

use std::path::{Path, PathBuf};

use super::exe::{self, base_name};
use super::wide::{in_system_tree, shared, too_wide};
use super::{Collect, Rights, Rule};

/// Most entries of one `PATH` directory looked at for links.
const MAX_ENTRIES: usize = 2048;

/// The program rule: the executable (as found and resolved), the
/// interpreter of a `#!` script (and `env` when it goes through one), the
/// ELF interpreter of each, and their install trees.
pub fn program(
    c: &mut Collect,
    found: &Path,
    program: &Path,
    interpreter: Option<&(PathBuf, Option<PathBuf>)>,
) {
    c.add(
        program,
        Rights::RX,
        Rule::Program,
        "the server executable",
        false,
    );
    // A native program's install tree: above its bin/, or its own
    // directory (libraries beside it). A script's is its project's.
    if interpreter.is_none() {
        tree_of(
            c,
            program,
            Rule::Program,
            "install tree of the server executable",
        );
    } else if let Some(dir) = program.parent() {
        above_bin(c, dir, Rule::Program, &c.shown(program));
    }
    // A virtual environment's bin/ holds links to the base interpreter: the
    // venv is where the program was found, not where it resolves.
    if let Some(venv) = exe::venv_of(found) {
        venv_tree(c, &venv, Rule::Program);
    }
    let mut exes = vec![program.to_path_buf()];
    if let Some((interp, via_env)) = interpreter {
        if let Some(e) = via_env {
            c.add(
                e,
                Rights::RX,
                Rule::Program,
                "the script runs through env",
                false,
            );
        }
        if let Some(venv) = exe::venv_of(interp) {
            venv_tree(c, &venv, Rule::Program);
        }
        let real = std::fs::canonicalize(interp).unwrap_or_else(|_| interp.clone());
        c.add(
            &real,
            Rights::RX,
            Rule::Program,
            "the script's interpreter",
            false,
        );
        tree_of(
            c,
            &real,
            Rule::Program,
            "install tree of the script's interpreter",
        );
        exes.push(real);
    }
    for e in exes {
        if let Some(ld) = exe::elf_interpreter(&e) {
            let why = format!("ELF interpreter of {}", c.shown(&e));
            c.add(ld, Rights::RX, Rule::Program, why, false);
        }
    }
}

/// The toolchain rule: every `PATH` directory with its install tree and
/// the trees its links lead to, and the managers' own settings.
pub fn collect(c: &mut Collect) {
    for dir in exe::path_dirs(c.env) {
        let Ok(real) = std::fs::canonicalize(&dir) else {
            continue;
        };
        if !real.is_dir() || in_system_tree(&real) {
            continue;
        }
        let shown = c.shown(&dir);
        if too_wide(&real, c.env) {
            c.note(format!(
                "PATH directory {shown} not granted: it is shared or holds your own data; move the tools it holds into a directory of their own (such as ~/.local/bin), or grant what a server needs with [runtime] exec"
            ));
            continue;
        }
        c.add(
            &real,
            Rights::RX,
            Rule::Toolchain,
            format!("PATH directory {shown}"),
            true,
        );
        above_bin(
            c,
            &real,
            Rule::Toolchain,
            &format!("PATH directory {shown}"),
        );
        links_in(c, &real);
    }
    managers(c);
}

/// The tree above a `bin/`, `sbin/` or `shims/` directory `dir`, or,
/// when that tree is too wide (`~/.local`), the `lib/` beside `dir`.
/// Whether the tree above was granted.
fn above_bin(c: &mut Collect, dir: &Path, rule: Rule, of: &str) -> bool {
    if !matches!(base_name(dir).as_str(), "bin" | "sbin" | "shims") {
        return false;
    }
    let Some(parent) = dir.parent() else {
        return false;
    };
    if in_system_tree(parent) {
        return false;
    }
    if !too_wide(parent, c.env) {
        c.add(
            parent,
            Rights::RX,
            rule,
            format!("install tree of {of}"),
            true,
        );
        if parent.join("pyvenv.cfg").is_file() {
            venv_tree(c, parent, rule);
        }
        return true;
    }
    if !shared(parent, c.env) {
        // ~/.local/bin: its libraries (pip --user, npm --prefix ~/.local)
        // live in ~/.local/lib; the rest of ~/.local is the user's data.
        let lib = parent.join("lib");
        if lib.is_dir() {
            c.add(
                lib,
                Rights::RX,
                rule,
                format!("libraries beside {of}"),
                true,
            );
        }
    }
    false
}

/// The install tree of an executable file: the tree above its `bin/`, or
/// its directory when that is not too wide.
fn tree_of(c: &mut Collect, file: &Path, rule: Rule, why: &str) {
    let Some(dir) = file.parent() else { return };
    if in_system_tree(dir) {
        return;
    }
    let of = c.shown(file);
    if above_bin(c, dir, rule, &of) {
        return;
    }
    if !too_wide(dir, c.env) {
        c.add(dir, Rights::RX, rule, why.to_string(), true);
    }
}

/// A virtual environment and the Python it was made from.
fn venv_tree(c: &mut Collect, venv: &Path, rule: Rule) {
    let shown = c.shown(venv);
    if !too_wide(venv, c.env) {
        c.add(
            venv,
            Rights::RX,
            rule,
            format!("virtual environment {shown}"),
            false,
        );
    }
    if let Some(bin) = exe::venv_home(venv)
        && let Some(prefix) = bin.parent()
        && !in_system_tree(prefix)
    {
        let why = format!("the Python {shown} was made from");
        if too_wide(prefix, c.env) {
            c.add(&bin, Rights::RX, rule, why, true);
        } else {
            c.add(prefix, Rights::RX, rule, why, true);
        }
    }
}

/// The trees the entries of a `PATH` directory lead to: where its links
/// point, and the interpreters its scripts name.
fn links_in(c: &mut Collect, dir: &Path) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in rd.flatten().take(MAX_ENTRIES) {
        let path = entry.path();
        let Ok(ft) = entry.file_type() else { continue };
        let target = if ft.is_symlink() {
            match std::fs::canonicalize(&path) {
                Ok(t) if t.is_file() => t,
                _ => continue,
            }
        } else if ft.is_file() {
            path.clone()
        } else {
            continue;
        };
        let why = format!("{} is on PATH", c.shown(&path));
        if !in_system_tree(&target) && !c.covered(&target, Rights::RX) {
            tree_of(c, &target, Rule::Toolchain, &why);
        }
        // A script naming its interpreter by absolute path (a `pip
        // install --user` console script, a pipx shim): that interpreter's
        // tree. `#!/usr/bin/env x` finds x on PATH, granted above.
        if let Some((interp, _)) = exe::shebang(&target)
            && interp.starts_with('/')
            && let Ok(real) = std::fs::canonicalize(&interp)
            && real.is_file()
            && !in_system_tree(&real)
            && !c.covered(&real, Rights::RX)
        {
            if let Some(venv) = exe::venv_of(Path::new(&interp)) {
                venv_tree(c, &venv, Rule::Toolchain);
            }
            tree_of(c, &real, Rule::Toolchain, &why);
        }
    }
}

/// A toolchain manager that reads a tree of its own outside its `bin/`.
struct Manager {
    /// Any of these on `PATH` (outside the system trees) means it is used.
    commands: &'static [&'static str],
    /// The variable naming its tree, and the tree's default under `~`.
    var: &'static str,
    default: &'static str,
    /// Files under `~` it reads (version pins), read-only.
    files: &'static [&'static str],
    why: &'static str,
}

/// rustup's proxies in `~/.cargo/bin` run the toolchains of
/// `RUSTUP_HOME`; asdf's shims run what `ASDF_DATA_DIR` holds, at the
/// versions `~/.tool-versions` pins.
const MANAGERS: &[Manager] = &[
    Manager {
        commands: &["rustup", "cargo"],
        var: "RUSTUP_HOME",
        default: ".rustup",
        files: &[],
        why: "rustup's toolchains (rustup is on PATH)",
    },
    Manager {
        commands: &["asdf"],
        var: "ASDF_DATA_DIR",
        default: ".asdf",
        files: &[".tool-versions"],
        why: "asdf's installs and version pins (asdf is on PATH)",
    },
];

/// The trees of the toolchain managers found on `PATH`.
fn managers(c: &mut Collect) {
    let home = c.env.home.clone();
    for m in MANAGERS {
        if !m
            .commands
            .iter()
            .any(|n| which_outside_system(n, c).is_some())
        {
            continue;
        }
        if let Some(dir) = c
            .env
            .abs_var(m.var)
            .or_else(|| home.as_ref().map(|h| h.join(m.default)))
            && !too_wide(&dir, c.env)
        {
            c.add(dir, Rights::RX, Rule::Toolchain, m.why, true);
        }
        for f in m.files {
            if let Some(h) = &home {
                c.add(h.join(f), Rights::R, Rule::Toolchain, m.why, true);
            }
        }
    }
}

/// `name` on `PATH`, outside the system trees.
fn which_outside_system(name: &str, c: &Collect) -> Option<PathBuf> {
    exe::which(name, c.env).filter(|p| !in_system_tree(p))
}
