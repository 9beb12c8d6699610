//! The general rules that decide what a server may read besides its roots,
//! on fake layouts of a user's machine: toolchains on PATH, a script's
//! project, caches and state behind private layers, and secrets that no
//! rule grants. No server is run here
//! (`tests/servers/popular_servers.rs` runs real ones).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use rootfence::plan::{self, SandboxPlan};
use rootfence::policy::Policy;
use rootfence::runtime::{self, CommandSpec, HostEnv, Rights, Rule};

fn env_with(home: &Path, path: &str, cwd: &Path) -> HostEnv {
    let mut env = HostEnv::default();
    env.vars.insert("PATH".into(), path.into());
    env.vars.insert("HOME".into(), home.display().to_string());
    env.home = Some(home.to_path_buf());
    env.cwd = Some(cwd.to_path_buf());
    env
}

fn argv(a: &[&str]) -> Vec<OsString> {
    a.iter().map(OsString::from).collect()
}

fn policy(home: &Path, extra: &str) -> Policy {
    Policy::parse(&format!("version = 1\n{extra}"), None, Some(home)).unwrap()
}

fn discover(args: &[&str], home: &Path, env: &HostEnv) -> CommandSpec {
    runtime::discover(&argv(args), &policy(home, ""), env).unwrap()
}

fn plan_of(spec: CommandSpec, home: &Path, env: &HostEnv) -> SandboxPlan {
    plan::build(&policy(home, ""), vec![], vec![], spec, env)
}

/// The rights the needs give `p` exactly (a grant of that very path).
fn granted(spec: &CommandSpec, p: &Path) -> Option<Rights> {
    spec.needs
        .iter()
        .filter(|n| n.path == p)
        .map(|n| n.rights)
        .reduce(Rights::union)
}

/// Whether any grant reaches `p` (itself or an ancestor).
fn reaches(spec: &CommandSpec, p: &Path) -> bool {
    spec.needs.iter().any(|n| p.starts_with(&n.path))
}

fn list(spec: &CommandSpec) -> Vec<String> {
    spec.needs
        .iter()
        .map(|n| format!("{} {} ({}: {})", n.rights, n.path.display(), n.rule, n.why))
        .collect()
}

fn write_exec(p: &Path, text: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
    std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
}

fn tmp() -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(t.path()).unwrap();
    (t, base)
}

/// A virtual environment at `dir` whose python links to `python`.
fn venv(dir: &Path, python: &Path) -> PathBuf {
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    std::fs::create_dir_all(dir.join("lib/python3/site-packages")).unwrap();
    std::fs::write(
        dir.join("pyvenv.cfg"),
        format!("home = {}\n", python.parent().unwrap().display()),
    )
    .unwrap();
    let py = dir.join("bin/python");
    std::os::unix::fs::symlink(python, &py).unwrap();
    py
}

/// A Python install tree at `prefix` (its bin/python3.11 a link to the
/// system's, as pyenv's and uv's trees hold a real one).
fn python_tree(prefix: &Path) -> PathBuf {
    std::fs::create_dir_all(prefix.join("lib/python3.11")).unwrap();
    let py = prefix.join("bin/python3.11");
    std::fs::create_dir_all(py.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink("/usr/bin/python3", &py).unwrap();
    py
}

#[test]
fn uv_from_its_standalone_installer_runs_the_uv_beside_it() {
    // ~/.local/bin/{uv,uvx} as uv's installer puts them: uvx execs the uv
    // next to it. ~/.local as a whole holds the user's data (keyrings): it
    // is not granted, ~/.local/bin and ~/.local/lib are.
    let (_t, base) = tmp();
    let home = base.join("home");
    write_exec(&home.join(".local/bin/uv"), "#!/bin/sh\n");
    write_exec(&home.join(".local/bin/uvx"), "#!/bin/sh\n");
    std::fs::create_dir_all(home.join(".local/lib/python3.11/site-packages")).unwrap();
    std::fs::create_dir_all(home.join(".local/share/keyrings")).unwrap();
    let env = env_with(
        &home,
        &format!("{}/.local/bin:/usr/bin:/bin", home.display()),
        &base,
    );
    let spec = discover(
        &["uvx", "mcp-server-sqlite", "--db-path", "x.db"],
        &home,
        &env,
    );
    assert_eq!(
        granted(&spec, &home.join(".local/bin")),
        Some(Rights::RX),
        "{:#?}",
        list(&spec)
    );
    assert!(reaches(&spec, &home.join(".local/bin/uv")));
    assert_eq!(
        granted(&spec, &home.join(".local/lib")),
        Some(Rights::RX),
        "{:#?}",
        list(&spec)
    );
    assert!(!reaches(&spec, &home.join(".local")), "{:#?}", list(&spec));
    assert!(!reaches(&spec, &home.join(".local/share/keyrings")));
    assert!(!reaches(&spec, &home));
}

#[test]
fn a_path_directory_grants_its_programs_and_the_toolchains_they_belong_to() {
    let (_t, base) = tmp();
    let home = base.join("home");
    // pyenv: shims on PATH, its commands and versions beside them, its
    // sources and checkout not needed to run a shim.
    let pyenv = home.join(".pyenv");
    write_exec(
        &pyenv.join("shims/python3"),
        "#!/usr/bin/env bash\nexec pyenv exec python3\n",
    );
    write_exec(&pyenv.join("libexec/pyenv"), "#!/usr/bin/env bash\n");
    python_tree(&pyenv.join("versions/3.11.7"));
    std::fs::create_dir_all(pyenv.join(".git")).unwrap();
    std::fs::write(pyenv.join(".git/config"), "[remote]\n").unwrap();
    // nvm: a version's bin on PATH, a node install (npm in its lib/).
    let nvm = home.join(".nvm/versions/node/v22.1.0");
    write_exec(&nvm.join("bin/node"), "#!/bin/sh\n");
    write_exec(
        &nvm.join("lib/node_modules/npm/bin/npm-cli.js"),
        "#!/usr/bin/env node\n",
    );
    // pipx: ~/.local/bin/x links into a venv made from pyenv's Python.
    let pipx_venv = home.join(".local/share/pipx/venvs/markitdown-mcp");
    venv(&pipx_venv, &pyenv.join("versions/3.11.7/bin/python3.11"));
    write_exec(
        &pipx_venv.join("bin/markitdown-mcp"),
        &format!("#!{}\n", pipx_venv.join("bin/python").display()),
    );
    std::fs::create_dir_all(home.join(".local/bin")).unwrap();
    std::os::unix::fs::symlink(
        pipx_venv.join("bin/markitdown-mcp"),
        home.join(".local/bin/markitdown-mcp"),
    )
    .unwrap();
    let path = format!(
        "{}/shims:{}/bin:{}/.local/bin:/usr/bin:/bin",
        pyenv.display(),
        nvm.display(),
        home.display()
    );
    let env = env_with(&home, &path, &base);
    // Whatever the command: the rule is about the machine, not the launcher.
    for cmd in [
        &["true"][..],
        &["markitdown-mcp"][..],
        &["node", "-e", "1"][..],
    ] {
        let spec = discover(cmd, &home, &env);
        for tree in [
            &pyenv.join("shims"),
            &pyenv.join("libexec"),
            &pyenv.join("versions"),
            &nvm,
            &pipx_venv,
            &home.join(".local/bin"),
        ] {
            assert_eq!(
                granted(&spec, tree),
                Some(Rights::RX),
                "{cmd:?} {tree:?}: {:#?}",
                list(&spec)
            );
        }
        assert!(reaches(
            &spec,
            &pyenv.join("versions/3.11.7/lib/python3.11")
        ));
        for not in [
            home.join(".nvm/alias"),
            pyenv.join(".git/config"),
            home.join(".local/share/pipx/logs"),
        ] {
            assert!(!reaches(&spec, &not), "{cmd:?} {not:?}: {:#?}", list(&spec));
        }
        // Nothing of it is writable.
        assert!(
            spec.needs
                .iter()
                .filter(|n| n.rule != Rule::System)
                .all(|n| !n.rights.write)
        );
    }
}

#[test]
fn path_directories_that_are_shared_or_hold_the_users_data_are_not_granted() {
    let (_t, base) = tmp();
    let home = base.join("home");
    write_exec(&home.join("tool"), "#!/bin/sh\n");
    std::fs::create_dir_all(home.join(".config/app")).unwrap();
    let path = format!(
        "{}:{}/.config:/tmp:/usr/bin:/bin",
        home.display(),
        home.display()
    );
    let env = env_with(&home, &path, &base);
    let spec = discover(&["true"], &home, &env);
    for p in [home.clone(), home.join(".config"), PathBuf::from("/tmp")] {
        assert!(!reaches(&spec, &p), "{p:?}: {:#?}", list(&spec));
    }
    assert!(
        spec.notes
            .iter()
            .any(|n| n.contains("PATH directory ~ not granted")),
        "{:?}",
        spec.notes
    );
}

#[test]
fn a_cloned_projects_script_gets_its_project_and_dependencies_but_not_its_git() {
    // mcp-server-commands: `#!/usr/bin/env node` in build/index.js of a
    // cloned project; its packages in the project's node_modules.
    let (_t, base) = tmp();
    let home = base.join("home");
    let proj = home.join("src/mcp-server-commands");
    std::fs::create_dir_all(proj.join("node_modules/zod")).unwrap();
    std::fs::create_dir_all(proj.join(".git")).unwrap();
    std::fs::write(
        proj.join(".git/config"),
        "[remote \"o\"]\nurl = https://tok@h/x\n",
    )
    .unwrap();
    std::fs::write(
        proj.join("package.json"),
        "{\"name\":\"mcp-server-commands\"}",
    )
    .unwrap();
    write_exec(&proj.join("build/index.js"), "#!/usr/bin/env node\n");
    let env = env_with(&home, "/usr/bin:/bin", &base);
    let spec = discover(
        &[proj.join("build/index.js").to_str().unwrap()],
        &home,
        &env,
    );
    assert!(
        reaches(&spec, &proj.join("node_modules/zod")),
        "{:#?}",
        list(&spec)
    );
    assert!(
        reaches(&spec, &proj.join("package.json")),
        "{:#?}",
        list(&spec)
    );
    assert!(
        !reaches(&spec, &proj.join(".git/config")),
        "{:#?}",
        list(&spec)
    );
    assert!(
        spec.needs
            .iter()
            .all(|n| n.rule == Rule::System || !n.rights.write)
    );
    assert!(!reaches(&spec, &home.join("src")));
}

#[test]
fn a_script_in_a_package_gets_the_node_modules_above_it() {
    // A workspace: the script's package has its own package.json, its
    // dependencies are hoisted to the workspace's node_modules.
    let (_t, base) = tmp();
    let home = base.join("home");
    let ws = home.join("ws");
    std::fs::create_dir_all(ws.join("node_modules/@modelcontextprotocol/sdk")).unwrap();
    std::fs::write(ws.join("package.json"), "{}").unwrap();
    let pkg = ws.join("packages/server");
    std::fs::write(
        {
            std::fs::create_dir_all(pkg.join("dist")).unwrap();
            pkg.join("package.json")
        },
        "{}",
    )
    .unwrap();
    std::fs::write(pkg.join("dist/index.js"), "").unwrap();
    let env = env_with(&home, "/usr/bin:/bin", &base);
    let spec = discover(
        &["node", pkg.join("dist/index.js").to_str().unwrap()],
        &home,
        &env,
    );
    assert_eq!(granted(&spec, &pkg), Some(Rights::RX), "{:#?}", list(&spec));
    assert_eq!(granted(&spec, &ws.join("node_modules")), Some(Rights::RX));
    assert!(!reaches(&spec, &ws.join("packages/other")));
}

#[test]
fn a_script_in_a_shared_directory_is_granted_alone() {
    // `python /tmp/x.py` must not grant all of /tmp, `node ~/tool.js` not
    // the home directory.
    let (_t, base) = tmp();
    let script = base.join("x.py");
    std::fs::write(&script, "print('x')\n").unwrap();
    let home = base.join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join("tool.js"), "").unwrap();
    let env = env_with(&home, "/usr/local/bin:/usr/bin:/bin", &base);
    let in_tmp = PathBuf::from(format!("/tmp/rootfence-rules-{}.py", std::process::id()));
    std::fs::write(&in_tmp, "").unwrap();
    let py = discover(&["python3", in_tmp.to_str().unwrap()], &home, &env);
    let node = discover(
        &["node", home.join("tool.js").to_str().unwrap()],
        &home,
        &env,
    );
    std::fs::remove_file(&in_tmp).unwrap();
    assert!(!reaches(&py, Path::new("/tmp/other")), "{:#?}", list(&py));
    assert_eq!(granted(&py, &in_tmp), Some(Rights::R));
    assert!(!reaches(&node, &home.join("other")), "{:#?}", list(&node));
    assert_eq!(granted(&node, &home.join("tool.js")), Some(Rights::R));
}

#[test]
fn a_file_argument_that_is_data_is_not_taken_for_a_script() {
    // `--db-path ~/data/x.db`: the database is the server's data (a root's
    // business), not code to grant with its directory.
    let (_t, base) = tmp();
    let home = base.join("home");
    std::fs::create_dir_all(home.join("data")).unwrap();
    std::fs::write(home.join("data/x.db"), "").unwrap();
    let env = env_with(&home, "/usr/bin:/bin", &base);
    let spec = discover(
        &[
            "python3",
            "-m",
            "mcp_server_sqlite",
            "--db-path",
            home.join("data/x.db").to_str().unwrap(),
        ],
        &home,
        &env,
    );
    assert!(
        !reaches(&spec, &home.join("data/x.db")),
        "{:#?}",
        list(&spec)
    );
}

#[test]
fn uv_projects_and_their_venvs() {
    let (_t, base) = tmp();
    let home = base.join("home");
    write_exec(&base.join("uv/bin/uv"), "#!/bin/sh\n");
    let prefix = base.join("pythons/3.11");
    let py = python_tree(&prefix);
    let proj = base.join("proj");
    venv(&proj.join(".venv"), &py);
    std::fs::write(proj.join("pyproject.toml"), "[project]\nname = \"p\"\n").unwrap();
    std::fs::write(proj.join("server.py"), "").unwrap();
    let elsewhere = base.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let env = env_with(
        &home,
        &format!("{}:/usr/bin", base.join("uv/bin").display()),
        &elsewhere,
    );
    for args in [
        vec![
            "uv",
            "--directory",
            proj.to_str().unwrap(),
            "run",
            "server.py",
        ],
        vec![
            "uv",
            "run",
            "--project",
            proj.to_str().unwrap(),
            "server.py",
        ],
        vec!["uv", "run", "--directory=../proj", "server.py"],
    ] {
        let spec = discover(&args, &home, &env);
        assert_eq!(
            granted(&spec, &proj.join(".venv")),
            Some(Rights::RX),
            "{args:?}: {:#?}",
            list(&spec)
        );
        assert!(reaches(&spec, &proj.join("pyproject.toml")), "{args:?}");
        assert!(reaches(&spec, &proj.join("server.py")), "{args:?}");
        // The Python the venv was made from: its prefix, not above it.
        assert_eq!(
            granted(&spec, &prefix),
            Some(Rights::RX),
            "{args:?}: {:#?}",
            list(&spec)
        );
        assert!(!reaches(&spec, &base.join("pythons/other")));
        assert!(!reaches(&spec, &elsewhere));
    }
}

#[test]
fn a_venv_naming_a_shared_directory_as_its_home_grants_nothing_more() {
    // pyvenv.cfg is as writable as the venv: a `home` whose prefix is the
    // home directory, or that is not a bin/ directory, widens nothing.
    let (_t, base) = tmp();
    let home = base.join("home");
    std::fs::create_dir_all(home.join("bin")).unwrap();
    std::os::unix::fs::symlink("/usr/bin/python3", home.join("bin/python3")).unwrap();
    write_exec(&base.join("uv/bin/uv"), "#!/bin/sh\n");
    let proj = base.join("proj");
    std::fs::create_dir_all(proj.join(".venv/bin")).unwrap();
    std::fs::write(proj.join("pyproject.toml"), "[project]\nname = \"p\"\n").unwrap();
    std::fs::write(proj.join("server.py"), "").unwrap();
    let env = env_with(
        &home,
        &format!("{}:/usr/bin", base.join("uv/bin").display()),
        &base,
    );
    for cfg_home in [home.join("bin"), home.clone(), PathBuf::from("/")] {
        std::fs::write(
            proj.join(".venv/pyvenv.cfg"),
            format!("home = {}\n", cfg_home.display()),
        )
        .unwrap();
        let spec = discover(
            &[
                "uv",
                "--directory",
                proj.to_str().unwrap(),
                "run",
                "server.py",
            ],
            &home,
            &env,
        );
        for p in [
            home.join("other"),
            base.join("other"),
            PathBuf::from("/root"),
        ] {
            assert!(
                !reaches(&spec, &p),
                "{cfg_home:?}: {p:?} {:#?}",
                list(&spec)
            );
        }
    }
}

#[test]
fn caches_are_read_through_private_layers_and_launchers_pointed_at_them() {
    let (_t, base) = tmp();
    let home = base.join("home");
    std::fs::create_dir_all(home.join(".cache/uv")).unwrap();
    std::fs::create_dir_all(home.join(".npm/_npx")).unwrap();
    std::fs::create_dir_all(home.join(".local/share/uv/tools")).unwrap();
    let env = env_with(&home, "/usr/bin:/bin", &base);
    let spec = discover(&["true"], &home, &env);
    let plan = plan_of(spec, &home, &env);
    for (dir, var) in [
        (home.join(".cache/uv"), "UV_CACHE_DIR"),
        (home.join(".npm"), "npm_config_cache"),
        (home.join(".local/share/uv/tools"), "UV_TOOL_DIR"),
    ] {
        let layer = plan.private_layers.iter().find(|l| l.path == dir);
        assert_eq!(
            layer.and_then(|l| l.env.as_deref()),
            Some(var),
            "{:?}",
            plan.private_layers
        );
        let dir_s = dir.display().to_string();
        assert_eq!(
            plan.env.get(var).map(|v| v.0.as_str()),
            Some(dir_s.as_str())
        );
        // Never writable for real.
        assert!(
            plan.grants
                .iter()
                .filter(|g| dir.starts_with(&g.path))
                .all(|g| !g.rights.write)
        );
    }
    assert_eq!(plan.env.get("UV_OFFLINE").map(|v| v.0.as_str()), Some("1"));
}

#[test]
fn caches_named_as_shared_directories_are_not_granted() {
    let (_t, base) = tmp();
    let home = base.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let link = base.join("cache-link");
    std::os::unix::fs::symlink("/tmp", &link).unwrap();
    let link = link.to_str().unwrap();
    for named in [
        [
            ("UV_CACHE_DIR", "/tmp"),
            ("UV_TOOL_DIR", "/dev/shm"),
            ("npm_config_cache", "/var/tmp"),
        ],
        [
            ("UV_CACHE_DIR", link),
            ("UV_TOOL_DIR", link),
            ("npm_config_cache", link),
        ],
    ] {
        let mut env = env_with(&home, "/usr/bin:/bin", &base);
        for (k, v) in named {
            env.vars.insert(k.into(), v.into());
        }
        let plan = plan_of(discover(&["true"], &home, &env), &home, &env);
        for var in ["UV_CACHE_DIR", "UV_TOOL_DIR", "npm_config_cache"] {
            assert!(
                plan.warnings.iter().any(|w| w
                    .contains(&format!("({var}) not granted: it is a shared directory"))
                    && w.contains(&format!("set {var} to a directory of its own"))),
                "{named:?}: {:?}",
                plan.warnings
            );
        }
        for shared in ["/tmp", "/dev/shm", "/var/tmp", link] {
            let shared = Path::new(shared);
            assert!(
                !plan.grants.iter().any(|g| g.path == shared),
                "{named:?}: {shared:?}"
            );
            assert!(
                !plan.env.values().any(|(v, _)| Path::new(v) == shared),
                "{:?}",
                plan.env
            );
        }
    }
}

#[test]
fn uv_flags_that_need_the_network_are_not_broken_by_offline_mode() {
    let (_t, base) = tmp();
    let home = base.join("home");
    std::fs::create_dir_all(home.join(".cache/uv")).unwrap();
    write_exec(&base.join("uv/bin/uvx"), "#!/bin/sh\n");
    let env = env_with(
        &home,
        &format!("{}:/usr/bin:/bin", base.join("uv/bin").display()),
        &base,
    );
    let spec = discover(
        &[
            "uvx",
            "--refresh-package",
            "mcp-server-fetch",
            "mcp-server-fetch",
        ],
        &home,
        &env,
    );
    assert!(!spec.env.contains_key("UV_OFFLINE"), "{:?}", spec.env);
    assert!(
        spec.notes.iter().any(|n| n.contains("--refresh-package")),
        "{:?}",
        spec.notes
    );
    // With the network granted, by port or by domain, uv is not held
    // offline at all.
    for network in [
        "[network]\ntcp_connect = [443]\n",
        "[network]\nallow_domains = [\"pypi.org\", \"files.pythonhosted.org\"]\n",
        "[network]\nallow_domains = [\"index.internal:8443\"]\n",
    ] {
        let pol = policy(&home, network);
        let spec = runtime::discover(&argv(&["uvx", "mcp-server-fetch"]), &pol, &env).unwrap();
        assert!(!spec.env.contains_key("UV_OFFLINE"), "{network}");
    }
    // A local service's port is not the network.
    let pol = policy(&home, "[network]\ntcp_connect = [8080]\n");
    let spec = runtime::discover(&argv(&["uvx", "mcp-server-fetch"]), &pol, &env).unwrap();
    assert_eq!(spec.env.get("UV_OFFLINE").map(String::as_str), Some("1"));
    // Without, and with no such flag, it is.
    let spec = discover(&["uvx", "mcp-server-fetch"], &home, &env);
    assert_eq!(spec.env.get("UV_OFFLINE").map(String::as_str), Some("1"));
}

#[test]
fn a_name_grants_nothing_and_the_plan_says_the_line_that_would() {
    // A server's name is its own choice: one named after another tool
    // reaches none of that tool's directories, however it is launched.
    let (_t, base) = tmp();
    let home = base.join("home");
    let tools = [
        "claude",
        "codex",
        "github-copilot",
        "huggingface",
        "pulumi",
        "doctl",
        "atuin",
        "configstore",
        "subversion",
        "containers",
        "desktop-commander",
    ];
    for t in tools {
        std::fs::create_dir_all(home.join(format!(".{t}"))).unwrap();
        std::fs::write(home.join(format!(".{t}/token")), "secret").unwrap();
        std::fs::create_dir_all(home.join(format!(".config/{t}"))).unwrap();
        std::fs::create_dir_all(home.join(format!(".local/share/{t}"))).unwrap();
        std::fs::create_dir_all(home.join(format!(".cache/{t}"))).unwrap();
    }
    let env = env_with(&home, "/usr/bin:/bin", &base);
    let bin = base.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for t in tools {
        let exe = bin.join(t);
        std::fs::write(&exe, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&exe, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let by_command = [exe.to_string_lossy().into_owned()];
        let npx = ["npx".to_string(), "-y".into(), format!("@evil/{t}@1.0.0")];
        let uvx = ["uvx".to_string(), format!("{t}==1.0")];
        for line in [&by_command[..], &npx[..], &uvx[..]] {
            let args: Vec<&str> = line.iter().map(String::as_str).collect();
            let Ok(spec) = runtime::discover(&argv(&args), &policy(&home, ""), &env) else {
                // npx or uvx not on this PATH: the command form is enough.
                continue;
            };
            for dir in [
                home.join(format!(".{t}")),
                home.join(format!(".config/{t}")),
                home.join(format!(".local/share/{t}")),
                home.join(format!(".cache/{t}")),
            ] {
                assert!(!reaches(&spec, &dir), "{args:?} reaches {dir:?}");
            }
            let plan = plan_of(spec, &home, &env);
            // Its own store instead, labelled with the name, in
            // rootfence's state directory.
            let store = plan.home_store.as_ref().expect("a store");
            assert!(
                store
                    .dir
                    .starts_with(home.join(".local/state/rootfence/servers")),
                "{:?}",
                store.dir
            );
            // The line that would grant the user's own, shown, not applied
            // (~/.claude holds a denied token: no line can grant it whole).
            let line = format!("[runtime] write = [\"~/.config/{t}\"]");
            assert!(
                plan.warnings.iter().any(|w| w.contains(&line)),
                "{args:?}: {:#?}",
                plan.warnings
            );
        }
    }
}

#[test]
fn the_private_home_is_a_store_kept_unless_the_policy_says_otherwise() {
    let (_t, base) = tmp();
    let home = base.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let env = env_with(&home, "/usr/bin:/bin", &base);
    let plan = plan_of(discover(&["true"], &home, &env), &home, &env);
    assert_eq!(plan.private_home.as_deref(), Some(home.as_path()));
    assert!(plan.home_store.is_some());
    // The same command has the same store; another command another.
    let again = plan_of(discover(&["true"], &home, &env), &home, &env);
    let other = plan_of(discover(&["false"], &home, &env), &home, &env);
    assert_eq!(plan.home_store, again.home_store);
    assert_ne!(plan.home_store, other.home_store);
    let pol = policy(&home, "[runtime]\nhome = \"ephemeral\"\n");
    let spec = runtime::discover(&argv(&["true"]), &pol, &env).unwrap();
    let plan = plan::build(&pol, vec![], vec![], spec, &env);
    assert_eq!(plan.private_home.as_deref(), Some(home.as_path()));
    assert_eq!(plan.home_store, None);
    let pol = policy(&home, "[runtime]\nhome = \"none\"\n");
    let spec = runtime::discover(&argv(&["true"]), &pol, &env).unwrap();
    let plan = plan::build(&pol, vec![], vec![], spec, &env);
    assert_eq!(plan.private_home, None);
    assert_eq!(plan.home_store, None);
}

#[test]
fn no_rule_grants_a_secret_inside_a_tree_it_grants() {
    // A toolchain tree holding a denied file (cargo's registry token) is
    // narrowed around it; a link in a PATH directory pointing at a secret
    // grants nothing; git's configuration is never granted.
    let (_t, base) = tmp();
    let home = base.join("home");
    let cargo = home.join(".cargo");
    write_exec(&cargo.join("bin/cargo"), "#!/bin/sh\n");
    std::fs::create_dir_all(cargo.join("registry/index")).unwrap();
    std::fs::write(
        cargo.join("credentials.toml"),
        "[registry]\ntoken = \"cio_secret\"\n",
    )
    .unwrap();
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_ed25519"), "KEY").unwrap();
    std::os::unix::fs::symlink(home.join(".ssh"), cargo.join("bin/keys")).unwrap();
    std::fs::write(home.join(".gitconfig"), "[user]\nname = Ada\n[url \"https://x:ghp_tok@github.com/\"]\ninsteadOf = https://github.com/\n").unwrap();
    std::fs::create_dir_all(home.join(".config/git")).unwrap();
    std::fs::write(home.join(".config/git/credentials"), "https://u:p@h\n").unwrap();
    let env = env_with(
        &home,
        &format!("{}/bin:/usr/bin:/bin", cargo.display()),
        &base,
    );
    let spec = discover(&["cargo"], &home, &env);
    assert!(
        reaches(&spec, &cargo.join("registry/index")),
        "{:#?}",
        list(&spec)
    );
    assert!(
        reaches(&spec, &cargo.join("bin/cargo")),
        "{:#?}",
        list(&spec)
    );
    for secret in [
        cargo.join("credentials.toml"),
        home.join(".ssh/id_ed25519"),
        home.join(".gitconfig"),
        home.join(".config/git/credentials"),
    ] {
        assert!(!reaches(&spec, &secret), "{secret:?}: {:#?}", list(&spec));
    }
    // The link itself lies in a granted directory; its target is not granted.
    assert!(
        !spec.needs.iter().any(|n| n.path == cargo.join("bin/keys")),
        "{:#?}",
        list(&spec)
    );
    let plan = plan_of(spec, &home, &env);
    let git = plan
        .scratch_files
        .iter()
        .find(|f| f.env == "GIT_CONFIG_GLOBAL")
        .unwrap();
    assert!(git.content.contains("name = \"Ada\""), "{}", git.content);
    assert!(
        !git.content.contains("ghp_tok") && !git.content.contains("insteadof"),
        "{}",
        git.content
    );
    assert!(
        plan.warnings.iter().any(|w| w.contains("credentials.toml")),
        "{:?}",
        plan.warnings
    );
}

#[test]
fn git_identity_reaches_the_server_only_when_the_policy_says_so() {
    let (_t, base) = tmp();
    let home = base.join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join(".gitconfig"), "[user]\nname = me\n").unwrap();
    let env = env_with(&home, "/usr/bin:/bin", &base);
    let off = policy(&home, "[runtime]\ngit_config = false\n");
    let spec = runtime::discover(&argv(&["true"]), &off, &env).unwrap();
    assert_eq!(spec.git_config, None);
    let plan = plan::build(&off, vec![], vec![], spec, &env);
    assert!(plan.scratch_files.is_empty());
    // git is pointed at an empty configuration (an unreadable one is fatal).
    assert_eq!(
        plan.env.get("GIT_CONFIG_GLOBAL").map(|v| v.0.as_str()),
        Some("/dev/null")
    );
}

#[test]
fn the_native_profile_grants_no_toolchains_or_caches() {
    let (_t, base) = tmp();
    let home = base.join("home");
    write_exec(&home.join(".local/bin/tool"), "#!/bin/sh\n");
    std::fs::create_dir_all(home.join(".npm")).unwrap();
    let env = env_with(
        &home,
        &format!("{}/.local/bin:/usr/bin:/bin", home.display()),
        &base,
    );
    let pol = policy(&home, "[runtime]\nprofile = \"native\"\n");
    let spec = runtime::discover(&argv(&["/bin/true"]), &pol, &env).unwrap();
    assert!(
        !reaches(&spec, &home.join(".local/bin/tool")),
        "{:#?}",
        list(&spec)
    );
    assert!(!reaches(&spec, &home.join(".npm")));
    assert!(reaches(&spec, Path::new("/usr/lib")));
}
