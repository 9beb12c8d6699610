//! The program and toolchain rules: the server's executable with its
//! interpreter and their install trees, and the programs on the user's
//! `PATH`.
//!
//! The program rule grants the server's own executable and its `#!`
//! interpreter. For a native program (the executable, or the interpreter)
//! it grants the toolchain install its `bin/` belongs to only where the
//! install's own layout shows one ([`super::layout`]), and the shared
//! libraries the program names beside itself (`$ORIGIN` in its ELF),
//! within its own install: `~/go/bin/x` runs without reading `~/go/src`.
//! A script's tree is its project's: the directory above its `bin/`,
//! unless that is too wide ([`super::wide::too_wide`]: `~/.local` holds
//! `~/.local/share`), in which case the `lib/` beside it.
//!
//! The toolchain rule reads only the user's `PATH` and what its
//! directories hold. A `PATH` directory is where the user finds programs,
//! not a statement that what lies near it may be read: it grants its
//! programs (the directory itself when it holds nothing else), where their
//! links lead, the interpreters their `#!` lines name, and an install tree
//! only where its layout shows a toolchain ([`super::layout`]): a virtual
//! environment with the Python it was made from, an interpreter's or
//! compiler's install, a version manager's installs and commands, rustup's
//! toolchains when its proxies are there. `~/go/bin` gives its programs,
//! not `~/go/src`; `~/work/proj/bin` its programs, not the project's
//! `.env`; `~/.cargo/bin` its proxies and rustup's toolchains, not cargo's
//! registry or configuration.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::exe::{self, base_name};
use super::layout::{self, Install, VersionManager};
use super::listings::{self, Listing, Program};
use super::wide::{in_system_tree, shared, too_wide};
use super::{Collect, Rights, Rule};

/// Most entries of one `PATH` directory looked at.
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
    // The executable the command names, as its links resolve: a link on
    // the way (a venv's python) is read where it lies.
    c.from = crate::canon::link_holders(found);
    c.add(
        program,
        Rights::RX,
        Rule::Program,
        "the server executable",
        false,
    );
    // What follows comes from the program's contents and what lies beside
    // it (its #! line, its ELF header, its layout): read where it lies.
    c.from.extend(program.parent().map(Path::to_path_buf));
    // A native program's toolchain install and the libraries it names
    // beside itself; a script's tree is its project's.
    if interpreter.is_none() {
        native(c, program, Rule::Program);
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
        let real = crate::canon::canonicalize(interp).unwrap_or_else(|_| interp.clone());
        c.add(
            &real,
            Rights::RX,
            Rule::Program,
            "the script's interpreter",
            false,
        );
        native(c, &real, Rule::Program);
        exes.push(real);
    }
    for e in exes {
        if let Some(ld) = exe::elf_interpreter(&e) {
            let why = format!("ELF interpreter of {}", c.shown(&e));
            c.add(ld, Rights::RX, Rule::Program, why, false);
        }
    }
    c.from.clear();
}


/// The toolchain rule: the programs in each `PATH` directory, where they
/// lead, and the toolchain installs their layout shows.
pub fn collect(c: &mut Collect) {
    let state = listings::state_dir(c.env);
    let mut seen = Vec::new();
    let mut interps = std::collections::HashSet::new();
    let mut managers = Vec::new();
    // Where rustup and asdf were found (the first PATH directory naming
    // each).
    let mut rustup = None;
    let mut asdf_used = None;
    for dir in exe::path_dirs(c.env) {
        let Ok(real) = crate::canon::canonicalize(&dir) else {
            continue;
        };
        // What follows comes from this directory's contents, and from
        // where each link on the way to it lies.
        c.from = crate::canon::link_holders(&dir);
        c.from.push(real.clone());
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
        // The install the directory itself belongs to (a venv's bin/, a
        // node install's bin/), and a version manager's shims.
        installed(c, &real, &mut seen, Rule::Toolchain);
        let manager = VersionManager::of_path_dir(&real);
        let shims = manager.is_some() && base_name(&real) == "shims";
        if let Some(m) = manager
            && !managers.contains(&m.root)
        {
            managers.push(m.root.clone());
            let of = c.shown(&m.root);
            for (p, exec, why) in m.needs() {
                let rights = if exec { Rights::RX } else { Rights::R };
                c.add(p, rights, Rule::Toolchain, format!("{of}: {why}"), true);
            }
        }
        let listing = listings::listing(&real, state.as_deref(), programs_in);
        if listing.truncated {
            c.note(format!(
                "PATH directory {shown}: only its first {MAX_ENTRIES} entries looked at; programs past them not granted"
            ));
        }
        if !c.covered(&real, Rights::RX) {
            if listing.only_programs {
                c.add(
                    &real,
                    Rights::RX,
                    Rule::Toolchain,
                    format!("PATH directory {shown} (programs only)"),
                    true,
                );
            } else {
                for p in &listing.programs {
                    if !c.covered(&p.path, Rights::RX) {
                        let why = format!("program in PATH directory {shown}");
                        c.add(&p.path, Rights::RX, Rule::Toolchain, why, true);
                    }
                }
            }
        }
        // Programs that are files of a directory granted (whole, or as
        // part of an install) need no look at the grants one by one.
        let dir_granted = c.covered(&real, Rights::RX);
        for p in &listing.programs {
            let named = |n: &str| base_name(&p.path) == n || base_name(&p.target) == n;
            if named("rustup") {
                rustup.get_or_insert_with(|| real.clone());
            }
            if named("asdf") {
                asdf_used.get_or_insert_with(|| real.clone());
            }
            let granted = dir_granted && p.target.parent() == Some(real.as_path());
            // A version manager's shims are each the same script, which
            // runs the manager its needs above grant: none is opened.
            if shims && granted {
                continue;
            }
            leads_to(c, p, granted, &mut seen, &mut interps);
        }
    }
    c.from = rustup.into_iter().collect();
    if !c.from.is_empty()
        && let Some(home) = layout::rustup_home(c.env)
    {
        for (p, exec, why) in layout::rustup_needs(&home) {
            let rights = if exec { Rights::RX } else { Rights::R };
            c.add(
                p,
                rights,
                Rule::Toolchain,
                format!("{why} (rustup is on PATH)"),
                true,
            );
        }
    }
    c.from = asdf_used.into_iter().collect();
    if !c.from.is_empty() {
        asdf(c);
    }
    c.from.clear();
}

/// The programs of a `PATH` directory: one listing, a `stat` of each
/// entry (through its links; a file's relative to the directory), and the
/// `#!` line of each program.
fn programs_in(dir: &Path) -> Listing {
    let mut out = Listing {
        programs: Vec::new(),
        only_programs: true,
        truncated: false,
    };
    let Ok(rd) = std::fs::read_dir(dir) else {
        out.only_programs = false;
        return out;
    };
    for (i, entry) in rd.flatten().enumerate() {
        if i >= MAX_ENTRIES {
            out.truncated = true;
            out.only_programs = false;
            break;
        }
        let path = entry.path();
        let Ok(ft) = entry.file_type() else {
            out.only_programs = false;
            continue;
        };
        if ft.is_symlink() {
            // A link grants nothing by itself (what it leads to is granted
            // only when it is a program), so it may lie in a directory
            // granted whole.
            if let Ok(t) = crate::canon::canonicalize(&path)
                && exe::is_executable(&t)
            {
                out.programs.push(Program {
                    interp: exe::shebang(&t).map(|(i, _)| i),
                    path,
                    target: t,
                });
            }
        } else if ft.is_file()
            && entry
                .metadata()
                .is_ok_and(|m| m.permissions().mode() & 0o111 != 0)
        {
            out.programs.push(Program {
                interp: exe::shebang(&path).map(|(i, _)| i),
                target: path.clone(),
                path,
            });
        } else {
            out.only_programs = false;
        }
    }
    out
}

/// Where a program on `PATH` leads: the file its link resolves to, the
/// interpreter its `#!` line names by absolute path, and the toolchain
/// install of each (`~/.local/bin/x` → `~/.local/share/pipx/venvs/x/bin/x`
/// → that virtual environment, and the Python it was made from).
/// `granted`: the program is a file of a directory already granted.
fn leads_to(
    c: &mut Collect,
    p: &Program,
    granted: bool,
    seen: &mut Vec<PathBuf>,
    interps: &mut std::collections::HashSet<String>,
) {
    // What follows comes from the file the link leads to (its `#!`
    // line, the layout around it) as well as from the PATH directory.
    let sources = c.from.len();
    c.from.extend(crate::canon::link_holders(&p.path));
    c.from.extend(p.target.parent().map(Path::to_path_buf));
    leads_to_from(c, p, granted, seen, interps);
    c.from.truncate(sources);
}

/// [`leads_to`], its sources noted.
fn leads_to_from(
    c: &mut Collect,
    p: &Program,
    granted: bool,
    seen: &mut Vec<PathBuf>,
    interps: &mut std::collections::HashSet<String>,
) {
    if !granted && !in_system_tree(&p.target) {
        if let Some(dir) = p.target.parent() {
            installed(c, dir, seen, Rule::Toolchain);
        }
        if !c.covered(&p.target, Rights::RX) {
            let why = format!("{} is on PATH", c.shown(&p.path));
            c.add(&p.target, Rights::RX, Rule::Toolchain, why, true);
        }
    }
    // `#!/usr/bin/env x` finds x on PATH, granted there. An interpreter
    // many programs name is looked at once (what it grants is the same).
    // Only an executable file can be one (the kernel runs it): a `#!`
    // line naming any other file grants nothing.
    if let Some(interp) = &p.interp
        && interp.starts_with('/')
        && interps.insert(interp.clone())
        && let Ok(real) = crate::canon::canonicalize(interp)
        && exe::is_executable(&real)
        && !in_system_tree(&real)
    {
        // The layout around the interpreter is read too.
        c.from.extend(crate::canon::link_holders(Path::new(interp)));
        c.from.extend(Path::new(interp).parent().map(Path::to_path_buf));
        c.from.extend(real.parent().map(Path::to_path_buf));
        // A venv's python links to the Python it was made from: the venv
        // is where the `#!` line names it, not where it resolves.
        if let Some(bin) = Path::new(interp).parent() {
            installed(c, bin, seen, Rule::Toolchain);
        }
        if !c.covered(&real, Rights::RX) {
            let why = format!("the interpreter of {}", c.shown(&p.path));
            c.add(&real, Rights::RX, Rule::Toolchain, why, true);
        }
        if let Some(dir) = real.parent() {
            installed(c, dir, seen, Rule::Toolchain);
        }
    }
}

/// The toolchain install `bin` belongs to, when its layout shows one
/// ([`layout::install_of`]), each prefix looked at once: the install, or
/// where it is too wide (`~/.local`) or holds a project, the library
/// directories that make it one; for a virtual environment, also the
/// Python it was made from, when that is an install too.
fn installed(c: &mut Collect, bin: &Path, seen: &mut Vec<PathBuf>, rule: Rule) {
    let Some(prefix) = bin.parent() else { return };
    if in_system_tree(prefix) || seen.iter().any(|s| s == prefix) {
        return;
    }
    seen.push(prefix.to_path_buf());
    match layout::install_of(bin) {
        Some(Install::Venv(venv)) => {
            if !too_wide(&venv, c.env) && !c.covered(&venv, Rights::RX) {
                let why = format!("virtual environment {}", c.shown(&venv));
                c.add(&venv, Rights::RX, rule, why, true);
            }
            // The Python it was made from, when that is an install too.
            if let Some(home) = exe::venv_home(&venv) {
                installed(c, &home, seen, rule);
            }
        }
        Some(Install::Prefix {
            dir,
            kind,
            parts,
            project,
        }) => {
            if c.covered(&dir, Rights::RX) {
                // Granted already (pyenv's versions/).
                return;
            }
            let shown = c.shown(&dir);
            if !project && !too_wide(&dir, c.env) {
                c.add(&dir, Rights::RX, rule, format!("{kind} {shown}"), true);
            } else if !shared(&dir, c.env) {
                for part in parts {
                    let why = format!("libraries of the {kind} {shown}");
                    c.add(part, Rights::RX, rule, why, true);
                }
            }
        }
        None => {}
    }
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

/// What a native program (the server's, or a script's interpreter)
/// brings: the toolchain install its `bin/` belongs to, where the
/// install's own layout shows one ([`layout::install_of`]), and the
/// shared libraries its ELF names beside itself (`$ORIGIN`, as
/// relocatable releases ship them), within its own install. Never the
/// tree around it: `~/go/bin/x` does not read GOPATH's sources.
fn native(c: &mut Collect, file: &Path, rule: Rule) {
    let Some(dir) = file.parent() else { return };
    if in_system_tree(dir) {
        return;
    }
    installed(c, dir, &mut Vec::new(), rule);
    // Its own install: above its bin/, or its directory.
    let home = if matches!(base_name(dir).as_str(), "bin" | "sbin") {
        dir.parent()
    } else {
        Some(dir)
    };
    // Never a tree that holds the user's data (a program in ~/bin): then
    // its own directory, if that is not too wide either.
    let home = home
        .filter(|h| !too_wide(h, c.env))
        .or_else(|| Some(dir).filter(|d| !too_wide(d, c.env)));
    let Some(home) = home.and_then(|h| crate::canon::canonicalize(h).ok()) else {
        return;
    };
    let of = c.shown(file);
    for lib in exe::elf_origin_dirs(file) {
        let Ok(lib) = crate::canon::canonicalize(&lib) else {
            continue;
        };
        if lib.starts_with(&home) && !in_system_tree(&lib) && !too_wide(&lib, c.env) {
            // What is granted comes from what the directory holds.
            let sources = c.from.len();
            c.from.push(lib.clone());
            libraries_in(c, &lib, rule, &of);
            c.from.truncate(sources);
        }
    }
}

/// The shared objects in `dir` (named `*.so` or `*.so.*`, and ELF shared
/// objects by their header), each granted alone: the directory may hold
/// more than its program's libraries. A link is followed only to a file
/// of the same directory (`libx.so -> libx.so.1`).
fn libraries_in(c: &mut Collect, dir: &Path, rule: Rule, of: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten().take(MAX_ENTRIES) {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if !(name.ends_with(".so") || name.contains(".so.")) {
            continue;
        }
        let Ok(real) = crate::canon::canonicalize(e.path()) else {
            continue;
        };
        if real.parent() == Some(dir) && exe::is_shared_object(&real) {
            c.add(
                real,
                Rights::RX,
                rule,
                format!("a library {of} names beside itself"),
                true,
            );
        }
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

/// asdf's tree (`ASDF_DATA_DIR`, else `~/.asdf`: its installs, plugins
/// and shims, which run what it installed) and the versions it pins in
/// `~/.tool-versions`, when asdf is on `PATH`.
fn asdf(c: &mut Collect) {
    let why = "asdf's installs and version pins (asdf is on PATH)";
    let home = c.env.home.clone();
    if let Some(dir) = c
        .env
        .abs_var("ASDF_DATA_DIR")
        .or_else(|| home.as_ref().map(|h| h.join(".asdf")))
        && !too_wide(&dir, c.env)
    {
        c.add(dir, Rights::RX, Rule::Toolchain, why, true);
    }
    if let Some(h) = &home {
        c.add(
            h.join(".tool-versions"),
            Rights::R,
            Rule::Toolchain,
            why,
            true,
        );
    }
}

#[cfg(test)]
mod tests {
    //! The toolchain rule on fake layouts of a user's home: what each
    //! `PATH` layout gives, and what lies beside it that it does not.

    use super::*;
    use crate::runtime::{HostEnv, RuntimeNeed};

    fn tmp() -> (tempfile::TempDir, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let home = std::fs::canonicalize(t.path()).unwrap().join("home");
        std::fs::create_dir_all(&home).unwrap();
        (t, home)
    }

    fn env(home: &Path, path: &[PathBuf]) -> HostEnv {
        let mut path: Vec<String> = path.iter().map(|p| p.display().to_string()).collect();
        path.extend(["/usr/bin".to_string(), "/bin".to_string()]);
        let mut env = HostEnv::default();
        env.vars.insert("PATH".into(), path.join(":"));
        env.vars.insert("HOME".into(), home.display().to_string());
        env.home = Some(home.to_path_buf());
        env
    }

    /// What the toolchain rule alone grants.
    fn toolchain(env: &HostEnv) -> Vec<RuntimeNeed> {
        let mut c = Collect {
            env,
            needs: Vec::new(),
            notes: Vec::new(),
            from: Vec::new(),
            writable: Vec::new(),
        };
        collect(&mut c);
        c.needs
    }

    fn file(p: &Path, text: &str, mode: u32) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    fn exec(p: &Path, text: &str) {
        file(p, text, 0o755);
    }

    fn link(target: impl AsRef<Path>, at: &Path) {
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(target, at).unwrap();
    }

    fn mkdir(p: &Path) {
        std::fs::create_dir_all(p).unwrap();
    }

    /// A Python install at `prefix` (its python a link to the system's).
    fn python_tree(prefix: &Path) {
        mkdir(&prefix.join("lib/python3.12/site-packages"));
        link("/usr/bin/python3", &prefix.join("bin/python3.12"));
    }

    /// A virtual environment at `venv` made from the Python at `prefix`.
    fn venv(venv: &Path, prefix: &Path) {
        mkdir(&venv.join("lib/python3.12/site-packages"));
        file(
            &venv.join("pyvenv.cfg"),
            &format!("home = {}\n", prefix.join("bin").display()),
            0o644,
        );
        link(prefix.join("bin/python3.12"), &venv.join("bin/python"));
        file(&venv.join("bin/activate"), "# sourced\n", 0o644);
    }

    /// A tool installed as pipx and `uv tool install` do: a Python at
    /// `prefix`, a virtual environment at `venv` made from it, and the
    /// tool's script `name` run by that environment's python, linked in
    /// `local`/bin.
    fn venv_tool(prefix: &Path, venv_dir: &Path, name: &str, local: &Path) {
        python_tree(prefix);
        venv(venv_dir, prefix);
        let script = venv_dir.join("bin").join(name);
        exec(
            &script,
            &format!("#!{}\n", venv_dir.join("bin/python").display()),
        );
        link(&script, &local.join("bin").join(name));
    }

    /// The rights of grants of exactly `p`.
    fn granted(needs: &[RuntimeNeed], p: &Path) -> Option<Rights> {
        needs
            .iter()
            .filter(|n| n.path == p)
            .map(|n| n.rights)
            .reduce(Rights::union)
    }

    /// Whether a grant reaches `p` (itself or an ancestor).
    fn reaches(needs: &[RuntimeNeed], p: &Path) -> bool {
        needs.iter().any(|n| p.starts_with(&n.path))
    }

    fn list(needs: &[RuntimeNeed]) -> Vec<String> {
        needs
            .iter()
            .map(|n| format!("{} {} ({})", n.rights, n.path.display(), n.why))
            .collect()
    }

    #[test]
    fn a_hash_bang_line_naming_a_data_file_grants_nothing() {
        // A program in a PATH directory whose #! line names a file that is
        // no interpreter (a document, not executable): that file is not
        // granted. An executable interpreter named so is.
        let (_t, home) = tmp();
        let bin = home.join("work/bin");
        file(&home.join("Documents/taxes.txt"), "private\n", 0o644);
        exec(
            &bin.join("reads-taxes"),
            &format!("#!{}\n", home.join("Documents/taxes.txt").display()),
        );
        exec(&home.join("tools/interp"), "#!/bin/sh\n");
        exec(
            &bin.join("runs-interp"),
            &format!("#!{}\n", home.join("tools/interp").display()),
        );
        let needs = toolchain(&env(&home, std::slice::from_ref(&bin)));
        let l = list(&needs);
        assert!(!reaches(&needs, &home.join("Documents/taxes.txt")), "{l:?}");
        assert_eq!(
            granted(&needs, &home.join("tools/interp")),
            Some(Rights::RX),
            "{l:?}"
        );
    }

    #[test]
    fn pyenv_shims_get_its_commands_installs_and_version_not_its_root() {
        let (_t, home) = tmp();
        let root = home.join(".pyenv");
        exec(
            &root.join("shims/python3"),
            &format!(
                "#!/usr/bin/env bash\nexec \"{}/libexec/pyenv\" exec \"$program\" \"$@\"\n",
                root.display()
            ),
        );
        exec(&root.join("libexec/pyenv"), "#!/usr/bin/env bash\n");
        exec(&root.join("libexec/pyenv-exec"), "#!/usr/bin/env bash\n");
        link("../libexec/pyenv", &root.join("bin/pyenv"));
        python_tree(&root.join("versions/3.12.1"));
        file(&root.join("version"), "3.12.1\n", 0o644);
        file(&root.join("pyenv.d/exec/pip-rehash.bash"), "", 0o644);
        let plugin = root.join("plugins/pyenv-virtualenv");
        exec(
            &plugin.join("bin/pyenv-virtualenv"),
            "#!/usr/bin/env bash\n",
        );
        file(&plugin.join("etc/pyenv.d/which/x.bash"), "", 0o644);
        exec(&plugin.join("shims/activate"), "#!/usr/bin/env bash\n");
        file(&plugin.join(".git/config"), "[remote]\n", 0o644);
        file(&root.join(".git/config"), "[remote]\n", 0o644);
        file(&root.join("src/realpath.c"), "", 0o644);
        let e = env(
            &home,
            &[plugin.join("shims"), root.join("shims"), root.join("bin")],
        );
        let needs = toolchain(&e);
        let l = list(&needs);
        for (p, rights) in [
            (root.join("shims"), Rights::RX),
            (root.join("libexec"), Rights::RX),
            (root.join("versions"), Rights::RX),
            (root.join("version"), Rights::R),
            (root.join("pyenv.d"), Rights::RX),
            (root.join("plugins"), Rights::RX),
            (plugin.join("shims"), Rights::RX),
        ] {
            assert_eq!(granted(&needs, &p), Some(rights), "{p:?}: {l:#?}");
        }
        for p in [root.join(".git/config"), root.join("src")] {
            assert!(!reaches(&needs, &p), "{p:?}: {l:#?}");
        }
        assert_eq!(granted(&needs, &root), None, "{l:#?}");
    }

    #[test]
    fn nvm_a_node_version_is_a_node_install_the_rest_of_nvm_is_not() {
        let (_t, home) = tmp();
        let v = home.join(".nvm/versions/node/v22.1.0");
        exec(&v.join("bin/node"), "#!/bin/sh\n");
        exec(
            &v.join("lib/node_modules/npm/bin/npm-cli.js"),
            "#!/usr/bin/env node\n",
        );
        link("../lib/node_modules/npm/bin/npm-cli.js", &v.join("bin/npm"));
        file(&home.join(".nvm/alias/default"), "22\n", 0o644);
        file(&home.join(".nvm/nvm.sh"), "", 0o644);
        let needs = toolchain(&env(&home, &[v.join("bin")]));
        let l = list(&needs);
        assert_eq!(granted(&needs, &v), Some(Rights::RX), "{l:#?}");
        assert!(!reaches(&needs, &home.join(".nvm/alias")), "{l:#?}");
        assert!(!reaches(&needs, &home.join(".nvm/nvm.sh")), "{l:#?}");
    }

    #[test]
    fn an_activated_venv_gets_the_python_it_was_made_from_not_its_project() {
        let (_t, home) = tmp();
        let python = home.join(".local/share/uv/python/cpython-3.12.1-linux-x86_64-gnu");
        python_tree(&python);
        let proj = home.join("work/proj");
        let v = proj.join(".venv");
        venv(&v, &python);
        exec(
            &v.join("bin/tool"),
            &format!("#!{}\n", v.join("bin/python").display()),
        );
        file(&proj.join(".env"), "TOKEN=x\n", 0o644);
        file(&proj.join("src/main.py"), "", 0o644);
        let needs = toolchain(&env(&home, &[v.join("bin")]));
        let l = list(&needs);
        assert_eq!(granted(&needs, &v), Some(Rights::RX), "{l:#?}");
        assert_eq!(granted(&needs, &python), Some(Rights::RX), "{l:#?}");
        for p in [
            proj.join(".env"),
            proj.join("src"),
            home.join(".local/share"),
        ] {
            assert!(!reaches(&needs, &p), "{p:?}: {l:#?}");
        }
        // Covered by the venv: its activate scripts add no grant of their own.
        assert!(
            !needs.iter().any(|n| n.path.starts_with(v.join("bin"))),
            "{l:#?}"
        );
    }

    #[test]
    fn cargo_bin_gets_its_proxies_and_rustups_toolchains_not_cargos_home() {
        let (_t, home) = tmp();
        let cargo = home.join(".cargo");
        exec(&cargo.join("bin/rustup"), "\x7fELF");
        for proxy in ["cargo", "rustc", "rustfmt"] {
            link("rustup", &cargo.join("bin").join(proxy));
        }
        file(&cargo.join("registry/index/x/config.json"), "{}", 0o644);
        file(&cargo.join("registry/cache/x/y.crate"), "", 0o644);
        file(&cargo.join("config.toml"), "[alias]\n", 0o644);
        file(&cargo.join("credentials.toml"), "token = \"x\"\n", 0o600);
        file(&cargo.join(".package-cache"), "", 0o644);
        file(&cargo.join("env"), "", 0o644);
        let rustup = home.join(".rustup");
        file(
            &rustup.join("settings.toml"),
            "default_toolchain = \"stable\"\n",
            0o644,
        );
        let stable = rustup.join("toolchains/stable-x86_64-unknown-linux-gnu");
        exec(&stable.join("bin/cargo"), "\x7fELF");
        mkdir(&stable.join("lib/rustlib"));
        file(&rustup.join("downloads/x.tar.xz"), "", 0o644);
        let needs = toolchain(&env(&home, &[cargo.join("bin")]));
        let l = list(&needs);
        assert_eq!(
            granted(&needs, &cargo.join("bin")),
            Some(Rights::RX),
            "{l:#?}"
        );
        assert_eq!(
            granted(&needs, &rustup.join("toolchains")),
            Some(Rights::RX),
            "{l:#?}"
        );
        assert_eq!(
            granted(&needs, &rustup.join("settings.toml")),
            Some(Rights::R),
            "{l:#?}"
        );
        for p in [
            cargo.join("registry"),
            cargo.join("config.toml"),
            cargo.join("credentials.toml"),
            cargo.join(".package-cache"),
            cargo.join("env"),
            rustup.join("downloads"),
        ] {
            assert!(!reaches(&needs, &p), "{p:?}: {l:#?}");
        }
        // RUSTUP_HOME names rustup's home.
        let other = home.join("rustup-elsewhere");
        let mut e = env(&home, &[cargo.join("bin")]);
        e.vars
            .insert("RUSTUP_HOME".into(), other.display().to_string());
        let needs = toolchain(&e);
        assert!(granted(&needs, &other.join("toolchains")).is_some());
        assert!(!reaches(&needs, &rustup.join("toolchains")));
        // Without rustup's proxies, nothing of rustup's.
        let needs = toolchain(&env(&home, &[home.join("bin")]));
        assert!(!reaches(&needs, &rustup.join("toolchains")));
    }

    #[test]
    fn local_bin_gets_pipx_and_uv_tool_venvs_through_its_links_not_local_share() {
        let (_t, home) = tmp();
        let local = home.join(".local");
        exec(&local.join("bin/uv"), "\x7fELF");
        exec(&local.join("bin/uvx"), "\x7fELF");
        // pip install --user: a console script for the system Python, its
        // package in the user site.
        exec(&local.join("bin/httpie"), "#!/usr/bin/python3\n");
        mkdir(&local.join("lib/python3.11/site-packages/httpie"));
        // pipx: a venv made from pyenv's Python.
        let pyenv_python = home.join(".pyenv/versions/3.12.1");
        let pipx = local.join("share/pipx/venvs/markitdown-mcp");
        venv_tool(&pyenv_python, &pipx, "markitdown-mcp", &local);
        // uv tool install: a venv made from uv's own Python.
        let uv_python = local.join("share/uv/python/cpython-3.12.1-linux-x86_64-gnu");
        let tool = local.join("share/uv/tools/mcp-server-sqlite");
        venv_tool(&uv_python, &tool, "mcp-server-sqlite", &local);
        file(&local.join("share/keyrings/login.keyring"), "", 0o600);
        file(&local.join("share/app/data.db"), "", 0o644);
        let needs = toolchain(&env(&home, &[local.join("bin")]));
        let l = list(&needs);
        for p in [
            local.join("bin"),
            pipx.clone(),
            pyenv_python.clone(),
            tool.clone(),
            uv_python.clone(),
            local.join("lib/python3.11"),
        ] {
            assert_eq!(granted(&needs, &p), Some(Rights::RX), "{p:?}: {l:#?}");
        }
        for p in [
            local.clone(),
            local.join("share/keyrings"),
            local.join("share/app"),
            local.join("share/pipx/venvs"),
            home.join(".pyenv/versions"),
        ] {
            assert_eq!(granted(&needs, &p), None, "{p:?}: {l:#?}");
        }
        assert!(!reaches(
            &needs,
            &local.join("share/keyrings/login.keyring")
        ));
        assert!(!reaches(&needs, &local.join("share/app/data.db")));
    }

    #[test]
    fn a_directory_holding_more_than_programs_gets_its_programs_one_by_one() {
        let (_t, home) = tmp();
        let bin = home.join("bin");
        exec(&bin.join("tool"), "#!/bin/sh\n");
        file(&bin.join("notes.txt"), "secret\n", 0o644);
        file(&bin.join("lib/helper.sh"), "", 0o755);
        exec(&home.join("go/bin/y"), "\x7fELF");
        link(home.join("go/bin/y"), &bin.join("y"));
        link(home.join("notes.md"), &bin.join("dangling"));
        let needs = toolchain(&env(&home, std::slice::from_ref(&bin)));
        let l = list(&needs);
        assert_eq!(granted(&needs, &bin), None, "{l:#?}");
        assert_eq!(
            granted(&needs, &bin.join("tool")),
            Some(Rights::RX),
            "{l:#?}"
        );
        assert_eq!(granted(&needs, &bin.join("y")), Some(Rights::RX), "{l:#?}");
        assert_eq!(
            granted(&needs, &home.join("go/bin/y")),
            Some(Rights::RX),
            "{l:#?}"
        );
        for p in [
            bin.join("notes.txt"),
            bin.join("lib"),
            bin.join("dangling"),
            home.join("go"),
        ] {
            assert!(!reaches(&needs, &p), "{p:?}: {l:#?}");
        }
    }

    #[test]
    fn gopath_and_a_projects_bin_give_their_programs_not_their_sources() {
        let (_t, home) = tmp();
        let go = home.join("go");
        exec(&go.join("bin/gopls"), "\x7fELF");
        file(&go.join("src/x/secret.go"), "", 0o644);
        file(&go.join("pkg/mod/x@v1/x.go"), "", 0o644);
        let proj = home.join("work/proj");
        exec(&proj.join("bin/x"), "#!/bin/sh\n");
        file(&proj.join(".env"), "TOKEN=x\n", 0o644);
        file(&proj.join("package.json"), "{}", 0o644);
        // A Go install (GOROOT) is a toolchain.
        let goroot = home.join("sdk/go1.22.0");
        exec(&goroot.join("bin/go"), "\x7fELF");
        mkdir(&goroot.join("pkg/tool/linux_amd64"));
        mkdir(&goroot.join("src/runtime"));
        let needs = toolchain(&env(
            &home,
            &[go.join("bin"), proj.join("bin"), goroot.join("bin")],
        ));
        let l = list(&needs);
        assert_eq!(granted(&needs, &go.join("bin")), Some(Rights::RX), "{l:#?}");
        assert_eq!(
            granted(&needs, &proj.join("bin")),
            Some(Rights::RX),
            "{l:#?}"
        );
        assert_eq!(granted(&needs, &goroot), Some(Rights::RX), "{l:#?}");
        for p in [
            go.join("src"),
            go.join("pkg"),
            proj.join(".env"),
            proj.join("package.json"),
        ] {
            assert!(!reaches(&needs, &p), "{p:?}: {l:#?}");
        }
    }
}
