//! What the runtime profiles grant for the ways host configs launch
//! servers: virtual environments, console scripts, `fastmcp run`, `uv
//! --directory`, scripts in shared directories, git's configuration. Built
//! on fake layouts; no server is run here.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use rootfence::policy::{Policy, ProfileName};
use rootfence::runtime::{self, HostEnv, Rights};

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

fn grants(spec: &runtime::CommandSpec) -> Vec<(PathBuf, Rights)> {
    spec.needs
        .iter()
        .map(|n| (n.path.clone(), n.rights))
        .collect()
}

fn granted(spec: &runtime::CommandSpec, p: &Path) -> Option<Rights> {
    spec.needs.iter().find(|n| n.path == p).map(|n| n.rights)
}

fn write_exec(p: &Path, text: &str) {
    std::fs::write(p, text).unwrap();
    std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
}

/// A virtual environment at `dir` whose python is the system's.
fn venv(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    std::fs::create_dir_all(dir.join("lib/python3/site-packages")).unwrap();
    std::fs::write(dir.join("pyvenv.cfg"), "home = /usr/bin\n").unwrap();
    let py = dir.join("bin/python");
    std::os::unix::fs::symlink("/usr/bin/python3", &py).unwrap();
    py
}

fn tmp() -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(t.path()).unwrap();
    (t, base)
}

#[test]
fn a_venv_python_grants_its_venv() {
    let (_t, base) = tmp();
    let py = venv(&base.join("venv"));
    std::fs::create_dir_all(base.join("app")).unwrap();
    std::fs::write(base.join("app/server.py"), "").unwrap();
    let env = env_with(&base.join("home"), "/usr/bin:/bin", &base);
    let spec = runtime::discover(
        &argv(&[py.to_str().unwrap(), "app/server.py"]),
        ProfileName::Auto,
        &env,
    )
    .unwrap();
    assert_eq!(spec.profile, runtime::Profile::Python);
    assert_eq!(
        granted(&spec, &base.join("venv")),
        Some(Rights::RX),
        "{:?}",
        grants(&spec)
    );
    // The script's directory, not the base.
    assert_eq!(granted(&spec, &base.join("app")), Some(Rights::R));
    assert_eq!(granted(&spec, &base), None);
}

#[test]
fn a_console_script_of_a_venv_grants_the_venv() {
    let (_t, base) = tmp();
    let py = venv(&base.join("venv"));
    let script = base.join("venv/bin/mcp-server-time");
    write_exec(&script, &format!("#!{}\nprint('hi')\n", py.display()));
    let env = env_with(
        &base.join("home"),
        &format!("{}:/usr/bin", base.join("venv/bin").display()),
        &base,
    );
    let spec = runtime::discover(&argv(&["mcp-server-time"]), ProfileName::Auto, &env).unwrap();
    assert_eq!(spec.profile, runtime::Profile::Python);
    assert_eq!(
        granted(&spec, &base.join("venv")),
        Some(Rights::RX),
        "{:?}",
        grants(&spec)
    );
}

#[test]
fn fastmcp_run_finds_the_script_after_the_subcommand() {
    let (_t, base) = tmp();
    let py = venv(&base.join("venv"));
    write_exec(
        &base.join("venv/bin/fastmcp"),
        &format!("#!{}\n", py.display()),
    );
    std::fs::create_dir_all(base.join("proj")).unwrap();
    std::fs::write(base.join("proj/server.py"), "").unwrap();
    let env = env_with(
        &base.join("home"),
        &format!("{}:/usr/bin", base.join("venv/bin").display()),
        &base.join("proj"),
    );
    let spec = runtime::discover(
        &argv(&["fastmcp", "run", "server.py"]),
        ProfileName::Auto,
        &env,
    )
    .unwrap();
    assert_eq!(
        granted(&spec, &base.join("proj")),
        Some(Rights::R),
        "{:?}",
        grants(&spec)
    );
    assert_eq!(granted(&spec, &base.join("venv")), Some(Rights::RX));
}

#[test]
fn uv_directory_grants_the_project_and_its_venv() {
    let (_t, base) = tmp();
    std::fs::create_dir_all(base.join("bin")).unwrap();
    write_exec(&base.join("bin/uv"), "#!/bin/sh\n");
    let proj = base.join("proj");
    venv(&proj.join(".venv"));
    std::fs::write(proj.join("pyproject.toml"), "[project]\nname = \"p\"\n").unwrap();
    std::fs::write(proj.join("uv.lock"), "").unwrap();
    std::fs::write(proj.join("server.py"), "").unwrap();
    let env = env_with(
        &base.join("home"),
        &format!("{}:/usr/bin", base.join("bin").display()),
        &base,
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
    ] {
        let spec = runtime::discover(&argv(&args), ProfileName::Auto, &env).unwrap();
        assert_eq!(spec.profile, runtime::Profile::Python, "{args:?}");
        assert_eq!(
            granted(&spec, &proj.join(".venv")),
            Some(Rights::RX),
            "{args:?}: {:?}",
            grants(&spec)
        );
        assert_eq!(
            granted(&spec, &proj.join("pyproject.toml")),
            Some(Rights::R)
        );
        assert_eq!(granted(&spec, &proj.join("uv.lock")), Some(Rights::R));
        // The project rule names its files, not the project as a whole
        // (it may hold anything): the project directory is read-only at
        // most, as the directory of the script `uv --directory` runs.
        let want = if args[1] == "--directory" {
            Some(Rights::R)
        } else {
            None
        };
        assert_eq!(granted(&spec, &proj), want, "{args:?}");
    }
}

#[test]
fn uv_directory_runs_the_script_found_in_that_directory() {
    // `uv --directory P run server.py` runs P/server.py, whatever the
    // current directory.
    let (_t, base) = tmp();
    std::fs::create_dir_all(base.join("uv/bin")).unwrap();
    write_exec(&base.join("uv/bin/uv"), "#!/bin/sh\n");
    let proj = base.join("proj");
    std::fs::create_dir_all(&proj).unwrap();
    std::fs::write(proj.join("pyproject.toml"), "[project]\nname = \"p\"\n").unwrap();
    std::fs::write(proj.join("server.py"), "").unwrap();
    let elsewhere = base.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let env = env_with(
        &base.join("home"),
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
        vec!["uv", "run", "--directory=../proj", "server.py"],
    ] {
        let spec = runtime::discover(&argv(&args), ProfileName::Auto, &env).unwrap();
        let script = spec.needs.iter().find(|n| n.path == proj);
        assert_eq!(
            script.map(|n| n.rights),
            Some(Rights::R),
            "{args:?}: {:?}",
            grants(&spec)
        );
        assert!(
            script.is_some_and(|n| n.why.contains("server.py")),
            "{script:?}"
        );
        assert_eq!(granted(&spec, &elsewhere), None);
    }
}

#[test]
fn a_script_in_a_shared_directory_is_granted_alone() {
    // `python /tmp/x.py` must not grant all of /tmp.
    let script = PathBuf::from(format!(
        "/tmp/rootfence-launchers-{}.py",
        std::process::id()
    ));
    std::fs::write(&script, "print('x')\n").unwrap();
    let (_t, base) = tmp();
    let home = base.join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join("tool.js"), "").unwrap();
    let env = env_with(&home, "/usr/local/bin:/usr/bin:/bin", &base);
    let py = runtime::discover(
        &argv(&["python3", script.to_str().unwrap()]),
        ProfileName::Auto,
        &env,
    )
    .unwrap();
    let node = runtime::discover(
        &argv(&["node", home.join("tool.js").to_str().unwrap()]),
        ProfileName::Auto,
        &env,
    )
    .expect("node is required: apt-get install -y nodejs");
    std::fs::remove_file(&script).unwrap();
    assert_eq!(granted(&py, Path::new("/tmp")), None, "{:?}", grants(&py));
    assert_eq!(granted(&py, &script), Some(Rights::R));
    assert_eq!(granted(&node, &home), None, "{:?}", grants(&node));
    assert_eq!(granted(&node, &home.join("tool.js")), Some(Rights::R));
}

#[test]
fn git_configuration_is_readable_unless_the_policy_says_no() {
    let (_t, base) = tmp();
    let home = base.join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join(".gitconfig"), "[user]\nname = me\n").unwrap();
    let env = env_with(&home, "/usr/bin:/bin", &base);
    let on = Policy::parse("version = 1\n", None, Some(&home)).unwrap();
    let spec = runtime::discover_for(&argv(&["/bin/true"]), &on, &env).unwrap();
    assert_eq!(granted(&spec, &home.join(".gitconfig")), Some(Rights::R));
    let off = Policy::parse(
        "version = 1\n[runtime]\ngit_config = false\n",
        None,
        Some(&home),
    )
    .unwrap();
    let spec = runtime::discover_for(&argv(&["/bin/true"]), &off, &env).unwrap();
    assert_eq!(granted(&spec, &home.join(".gitconfig")), None);
}

#[test]
fn uv_runs_offline_with_a_private_cache() {
    let (_t, base) = tmp();
    let home = base.join("home");
    std::fs::create_dir_all(home.join(".cache/uv")).unwrap();
    let env = env_with(&home, "/usr/bin:/bin", &base);
    let policy = Policy::parse("version = 1\n", None, Some(&home)).unwrap();
    let spec = runtime::discover_for(&argv(&["python3", "-c", "pass"]), &policy, &env).unwrap();
    let plan = rootfence::plan::build(&policy, vec![], vec![], spec, &env);
    assert_eq!(plan.env.get("UV_OFFLINE").map(|v| v.0.as_str()), Some("1"));
    assert!(
        plan.private_layers
            .iter()
            .any(|l| l.path == home.join(".cache/uv")),
        "{:?}",
        plan.private_layers
    );
    // Never writable for real.
    let g = plan
        .grants
        .iter()
        .find(|g| g.path == home.join(".cache/uv"))
        .unwrap();
    assert!(!g.rights.write);
}

#[test]
fn uv_cache_named_by_uv_cache_dir_is_the_private_layer_the_server_is_pointed_at() {
    // A host whose uv cache is elsewhere (UV_CACHE_DIR): uvx under the
    // sandbox must find that cache (offline), written only through a
    // private layer, and be told where it is (the variable is not passed).
    let (_t, base) = tmp();
    let home = base.join("home");
    let cache = base.join("elsewhere/uv-cache");
    std::fs::create_dir_all(&cache).unwrap();
    let mut env = env_with(&home, "/usr/bin:/bin", &base);
    env.vars
        .insert("UV_CACHE_DIR".into(), cache.display().to_string());
    let policy = Policy::parse("version = 1\n", None, Some(&home)).unwrap();
    let spec = runtime::discover_for(&argv(&["python3", "-c", "pass"]), &policy, &env).unwrap();
    let plan = rootfence::plan::build(&policy, vec![], vec![], spec, &env);
    assert!(
        plan.private_layers.iter().any(|l| l.path == cache),
        "{:?}",
        plan.private_layers
    );
    assert!(
        !plan
            .private_layers
            .iter()
            .any(|l| l.path == home.join(".cache/uv")),
        "{:?}",
        plan.private_layers
    );
    let cache_s = cache.display().to_string();
    assert_eq!(
        plan.env.get("UV_CACHE_DIR").map(|v| v.0.as_str()),
        Some(cache_s.as_str())
    );
    let g = plan.grants.iter().find(|g| g.path == cache).unwrap();
    assert!(!g.rights.write && g.rights.exec, "{}", g.rights);
}

#[test]
fn uv_tool_directory_is_written_only_through_a_private_layer() {
    // `uvx` locks (and may install into) uv's tool directory: it must be
    // writable for uvx to start, and is run later outside, so never
    // writable for real. Also when named by UV_TOOL_DIR.
    let (_t, base) = tmp();
    let home = base.join("home");
    let policy = Policy::parse("version = 1\n", None, Some(&home)).unwrap();
    std::fs::create_dir_all(base.join("bin")).unwrap();
    write_exec(&base.join("bin/uvx"), "#!/bin/sh\n");
    let path = format!("{}:/usr/bin:/bin", base.join("bin").display());
    let default_env = env_with(&home, &path, &base);
    let mut named_env = default_env.clone();
    let named = base.join("tools");
    named_env
        .vars
        .insert("UV_TOOL_DIR".into(), named.display().to_string());
    for (env, dir) in [
        (default_env, home.join(".local/share/uv/tools")),
        (named_env, named),
    ] {
        let spec =
            runtime::discover_for(&argv(&["uvx", "mcp-server-time"]), &policy, &env).unwrap();
        assert_eq!(spec.profile, runtime::Profile::Python);
        let plan = rootfence::plan::build(&policy, vec![], vec![], spec, &env);
        let layer = plan.private_layers.iter().find(|l| l.path == dir);
        assert_eq!(
            layer.and_then(|l| l.env.as_deref()),
            Some("UV_TOOL_DIR"),
            "{:?}",
            plan.private_layers
        );
        let dir_s = dir.display().to_string();
        assert_eq!(
            plan.env.get("UV_TOOL_DIR").map(|v| v.0.as_str()),
            Some(dir_s.as_str())
        );
        assert!(
            plan.grants
                .iter()
                .filter(|g| dir.starts_with(&g.path))
                .all(|g| !g.rights.write),
            "{:?}",
            plan.grants
        );
    }
}

#[test]
fn a_venv_run_by_uv_grants_the_interpreter_it_was_made_from() {
    // `uv --directory P run server.py`: uv runs P/.venv/bin/python, a link
    // to the Python the venv was made from (here outside /usr, as pyenv's
    // and uv's own pythons are). Without it in the view, uv takes the venv
    // for broken and tries to recreate it.
    let (_t, base) = tmp();
    let prefix = base.join("pythons/3.11");
    std::fs::create_dir_all(prefix.join("bin")).unwrap();
    std::fs::create_dir_all(prefix.join("lib/python3.11")).unwrap();
    std::os::unix::fs::symlink("/usr/bin/python3", prefix.join("bin/python3.11")).unwrap();
    // uv installed in a tree of its own.
    std::fs::create_dir_all(base.join("uv/bin")).unwrap();
    write_exec(&base.join("uv/bin/uv"), "#!/bin/sh\n");
    let proj = base.join("proj");
    let venv_dir = proj.join(".venv");
    std::fs::create_dir_all(venv_dir.join("bin")).unwrap();
    std::fs::write(
        venv_dir.join("pyvenv.cfg"),
        format!("home = {}\n", prefix.join("bin").display()),
    )
    .unwrap();
    // The venv's python links to the base's bin/python3.11 (itself a link
    // further on, as distributions' are): the prefix granted is the one
    // the venv names, where its standard library is.
    std::os::unix::fs::symlink(prefix.join("bin/python3.11"), venv_dir.join("bin/python")).unwrap();
    std::fs::write(proj.join("pyproject.toml"), "[project]\nname = \"p\"\n").unwrap();
    std::fs::write(proj.join("server.py"), "").unwrap();
    let env = env_with(
        &base.join("home"),
        &format!("{}:/usr/bin", base.join("uv/bin").display()),
        &base,
    );
    let spec = runtime::discover(
        &argv(&[
            "uv",
            "--directory",
            proj.to_str().unwrap(),
            "run",
            "server.py",
        ]),
        ProfileName::Auto,
        &env,
    )
    .unwrap();
    assert_eq!(
        granted(&spec, &prefix),
        Some(Rights::RX),
        "{:?}",
        grants(&spec)
    );
    assert_eq!(granted(&spec, &base.join("pythons")), None);
}

#[test]
fn a_venv_naming_a_shared_directory_as_its_home_grants_nothing_more() {
    // pyvenv.cfg is as writable as the venv: a `home` whose prefix is the
    // home directory, or that is not a bin/ directory, widens nothing.
    let (_t, base) = tmp();
    let home = base.join("home");
    std::fs::create_dir_all(home.join("bin")).unwrap();
    // ~/bin holds a python: its prefix would be the home directory itself.
    std::os::unix::fs::symlink("/usr/bin/python3", home.join("bin/python3")).unwrap();
    // uv installed in a tree of its own.
    std::fs::create_dir_all(base.join("uv/bin")).unwrap();
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
        let spec = runtime::discover(
            &argv(&[
                "uv",
                "--directory",
                proj.to_str().unwrap(),
                "run",
                "server.py",
            ]),
            ProfileName::Auto,
            &env,
        )
        .unwrap();
        for p in [&home, &base, Path::new("/")] {
            assert_eq!(granted(&spec, p), None, "{cfg_home:?}: {:?}", grants(&spec));
        }
    }
}

#[test]
fn caches_named_as_shared_directories_are_not_granted() {
    // UV_CACHE_DIR=/tmp (or npm_config_cache=/var/tmp, or a link to /tmp)
    // must not hand the server the whole shared directory, not even
    // through a private layer. (The home directory is elsewhere: the
    // built-in deny list, under it, does not already keep /tmp out.)
    let (_t, base) = tmp();
    let home = PathBuf::from("/nonexistent-rootfence-home");
    std::fs::create_dir_all(base.join("uv/bin")).unwrap();
    write_exec(&base.join("uv/bin/uvx"), "#!/bin/sh\n");
    let link = base.join("cache-link");
    std::os::unix::fs::symlink("/tmp", &link).unwrap();
    let link = link.to_str().unwrap();
    let policy = Policy::parse("version = 1\n", None, Some(&home)).unwrap();
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
        let mut env = env_with(
            &home,
            &format!("{}:/usr/bin:/bin", base.join("uv/bin").display()),
            &base,
        );
        for (k, v) in named {
            env.vars.insert(k.into(), v.into());
        }
        for cmd in [["uvx", "mcp-server-time"], ["node", "-e"]] {
            let spec = runtime::discover_for(&argv(&cmd), &policy, &env)
                .expect("node is required: apt-get install -y nodejs");
            let plan = rootfence::plan::build(&policy, vec![], vec![], spec, &env);
            // The plan says why, and what to do.
            let vars: &[&str] = if cmd[0] == "node" {
                &["npm_config_cache"]
            } else {
                &["UV_CACHE_DIR", "UV_TOOL_DIR"]
            };
            for var in vars {
                assert!(
                    plan.warnings.iter().any(|w| w
                        .contains(&format!("({var}) not granted: it is a shared directory"))
                        && w.contains(&format!("set {var} to a directory of its own"))),
                    "{cmd:?} {named:?}: {:?}",
                    plan.warnings
                );
            }
            for shared in ["/tmp", "/dev/shm", "/var/tmp", link] {
                let shared = Path::new(shared);
                assert!(
                    !plan.grants.iter().any(|g| g.path == shared),
                    "{cmd:?} {named:?}: {shared:?} granted: {:?}",
                    plan.grants.iter().map(|g| &g.path).collect::<Vec<_>>()
                );
                assert!(
                    !plan.private_layers.iter().any(|l| l.path == shared),
                    "{cmd:?} {named:?}: {:?}",
                    plan.private_layers
                );
                assert!(
                    !plan.env.values().any(|(v, _)| Path::new(v) == shared),
                    "{cmd:?} {named:?}: {:?}",
                    plan.env
                );
            }
        }
    }
}
