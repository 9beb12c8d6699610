//! The server's environment: `--env`, the variables refused to it, `[env]
//! deny`, precedence, and the names of the variables left out (never their
//! values). Pure tests on the policy and the plan, then the built binary:
//! `exec` running a real shell with and without the refused variables, and
//! `explain`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use rootfence::envvars::EnvFlag;
use rootfence::plan::{self, EnvSource};
use rootfence::policy::Policy;
use rootfence::runtime::{CommandSpec, HostEnv};

fn flags(list: &[&str]) -> Vec<EnvFlag> {
    list.iter().map(|f| f.parse().unwrap()).collect()
}

fn policy(text: &str) -> Policy {
    Policy::parse(text, None, Some(std::path::Path::new("/home/a"))).unwrap()
}

fn host_env(vars: &[(&str, &str)]) -> HostEnv {
    HostEnv {
        vars: vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
        home: Some(PathBuf::from("/home/a")),
        cwd: None,
        host_set: None,
    }
}

/// A command whose runtime rules set `rule_env`.
fn command(rule_env: &[(&str, &str)]) -> CommandSpec {
    let mut c = CommandSpec::with_needs(PathBuf::from("/usr/bin/true"), vec![]);
    for (k, v) in rule_env {
        c.env.insert(k.to_string(), v.to_string());
    }
    c
}

#[test]
fn flags_naming_code_loading_variables_are_refused_and_others_accepted() {
    let pol = policy("");
    for name in [
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "LD_AUDIT",
        "NODE_OPTIONS",
        "PYTHONPATH",
        "PYTHONHOME",
        "BASH_ENV",
        "ENV",
        "PERL5OPT",
        "RUBYOPT",
        "JAVA_TOOL_OPTIONS",
        "GIT_CONFIG_COUNT",
        "GIT_CONFIG_PARAMETERS",
        "GIT_EXEC_PATH",
        "TMPDIR",
    ] {
        for form in [name.to_string(), format!("{name}=/x")] {
            let err = pol
                .clone()
                .with_env_flags(&flags(&[&form]))
                .expect_err(&form);
            let msg = err.to_string();
            assert!(msg.contains(&format!("--env {name} refused")), "{msg}");
            assert!(msg.contains("[env] pass or [env] set"), "{msg}");
        }
    }
    // The allowed counterparts: server settings.
    let ok = pol
        .with_env_flags(&flags(&["MEMORY_FILE_PATH", "GITHUB_TOKEN=x", "NODE_PATH"]))
        .unwrap();
    assert_eq!(ok.env_flags.len(), 3);
}

#[test]
fn a_policy_that_names_a_refused_variable_allows_it() {
    let pol =
        policy("[env]\npass = [\"PATH\", \"NODE_OPTIONS\"]\nset = { PYTHONPATH = \"/opt/lib\" }\n");
    pol.clone()
        .with_env_flags(&flags(&["NODE_OPTIONS"]))
        .unwrap();
    pol.clone()
        .with_env_flags(&flags(&["PYTHONPATH=/x"]))
        .unwrap();
    // A pattern is not naming it.
    let pol = policy("[env]\npass = [\"NODE_*\"]\n");
    assert!(pol.with_env_flags(&flags(&["NODE_OPTIONS"])).is_err());
}

#[test]
fn env_deny_extends_the_list_and_is_validated() {
    let pol = policy("[env]\ndeny = [\"MY_PLUGIN_DIR\", \"HOOK_*\"]\n");
    for f in ["MY_PLUGIN_DIR", "HOOK_X=1"] {
        let msg = pol
            .clone()
            .with_env_flags(&flags(&[f]))
            .unwrap_err()
            .to_string();
        assert!(msg.contains("[env] deny"), "{msg}");
    }
    pol.with_env_flags(&flags(&["MY_PLUGIN"])).unwrap();

    let bad = Policy::parse("[env]\ndeny = [\"A-B\"]\n", None, None).unwrap_err();
    assert!(bad.to_string().contains("env.deny"), "{bad}");
    let contradiction = Policy::parse(
        "[env]\npass = [\"PATH\", \"SECRET\"]\ndeny = [\"SEC*\"]\n",
        None,
        None,
    )
    .unwrap_err()
    .to_string();
    assert!(
        contradiction.contains("env.deny") && contradiction.contains("SECRET"),
        "{contradiction}"
    );
}

#[test]
fn precedence_is_pass_then_rules_then_flag_then_set() {
    let pol = policy(
        "[env]\npass = [\"PATH\", \"A\", \"B\", \"npm_config_cache\"]\nset = { C = \"policy\" }\n",
    )
    .with_env_flags(&flags(&["A=flag", "npm_config_cache=/flag", "C=flag", "D"]))
    .unwrap();
    let env = host_env(&[
        ("PATH", "/bin"),
        ("A", "host"),
        ("B", "host"),
        ("C", "host"),
        ("D", "host-d"),
        ("npm_config_cache", "/host"),
    ]);
    let plan = plan::build(
        &pol,
        vec![],
        vec![],
        command(&[("npm_config_cache", "/home/a/.npm")]),
        &env,
    );
    let get = |k: &str| plan.env.get(k).cloned();
    assert_eq!(get("A"), Some(("flag".into(), EnvSource::Flag)));
    assert_eq!(get("B"), Some(("host".into(), EnvSource::Passed)));
    assert_eq!(get("C"), Some(("policy".into(), EnvSource::Set)));
    assert_eq!(get("D"), Some(("host-d".into(), EnvSource::Flag)));
    assert_eq!(
        get("npm_config_cache"),
        Some(("/flag".into(), EnvSource::Flag))
    );
    assert!(
        plan.warnings
            .iter()
            .any(|w| w.contains("--env C=... has no effect")),
        "{:?}",
        plan.warnings
    );
    assert!(
        plan.warnings.iter().all(|w| !w.contains("flag")),
        "values never appear in warnings: {:?}",
        plan.warnings
    );
}

#[test]
fn variables_the_host_set_for_the_launch_pass_unless_refused() {
    let mut env = host_env(&[
        ("ALLOW_COMMANDS", "ls,cat"),
        ("GIT_USERNAME", "me"),
        ("LD_PRELOAD", "/tmp/x.so"),
        ("ROOTFENCE_LOG", "debug"),
        ("INHERITED_TOKEN", "hunter2"),
    ]);
    env.host_set = Some(
        [
            "ALLOW_COMMANDS",
            "GIT_USERNAME",
            "LD_PRELOAD",
            "ROOTFENCE_LOG",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
    );
    let pol = policy("");
    let plan = plan::build(&pol, vec![], vec![], command(&[]), &env);
    for k in ["ALLOW_COMMANDS", "GIT_USERNAME"] {
        assert!(
            matches!(plan.env.get(k), Some((_, EnvSource::Host))),
            "{k}: {:?}",
            plan.env
        );
    }
    for k in ["LD_PRELOAD", "ROOTFENCE_LOG", "INHERITED_TOKEN"] {
        assert!(!plan.env.contains_key(k), "{k}: {:?}", plan.env);
        assert!(plan.env_dropped.iter().any(|d| d == k), "{k}");
    }
    assert!(
        plan.warnings
            .iter()
            .any(|w| w.contains("LD_PRELOAD, set by the host")),
        "{:?}",
        plan.warnings
    );
    // Where the host's environment cannot be read, only the policy's
    // pass list passes, as before.
    env.host_set = None;
    let plan = plan::build(&pol, vec![], vec![], command(&[]), &env);
    assert!(!plan.env.contains_key("ALLOW_COMMANDS"));
}

#[test]
fn a_flag_naming_an_unset_variable_is_a_warning_not_a_value() {
    let pol = policy("").with_env_flags(&flags(&["MISSING"])).unwrap();
    let plan = plan::build(&pol, vec![], vec![], command(&[]), &host_env(&[]));
    assert!(!plan.env.contains_key("MISSING"));
    assert!(
        plan.warnings
            .iter()
            .any(|w| w.contains("MISSING is not set"))
    );
}

#[test]
fn pass_patterns_never_pass_refused_variables() {
    let pol =
        policy("[env]\npass = [\"GIT_*\", \"LD_*\", \"PYTHON*\"]\ndeny = [\"PYTHONWARN*\"]\n");
    let env = host_env(&[
        ("GIT_AUTHOR_NAME", "me"),
        ("GIT_CONFIG_COUNT", "1"),
        ("GIT_CONFIG_KEY_0", "core.fsmonitor"),
        ("GIT_CONFIG_VALUE_0", "/tmp/x"),
        ("LD_PRELOAD", "/tmp/x.so"),
        ("LD_BIND_NOW", "1"),
        ("PYTHONPATH", "/tmp"),
        ("PYTHONUNBUFFERED", "1"),
        ("PYTHONWARNINGS", "error"),
    ]);
    let plan = plan::build(&pol, vec![], vec![], command(&[]), &env);
    let names: Vec<&str> = plan.env.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "GIT_AUTHOR_NAME",
            "GIT_CONFIG_GLOBAL",
            "LD_BIND_NOW",
            "PYTHONUNBUFFERED"
        ]
    );
}

#[test]
fn dropped_names_are_listed_sorted_without_values() {
    let pol = policy("");
    let env = host_env(&[
        ("PATH", "/bin"),
        ("ZED", "1"),
        ("MEMORY_FILE_PATH", "/data/m.json"),
        ("API_KEY", "hunter2"),
        ("TMPDIR", "/var/tmp"),
    ]);
    let plan = plan::build(&pol, vec![], vec![], command(&[]), &env);
    // TMPDIR is replaced by the scratch directory, not dropped.
    assert_eq!(plan.env_dropped, ["API_KEY", "MEMORY_FILE_PATH", "ZED"]);
    let json = serde_json::to_string(&plan).unwrap();
    assert!(!json.contains("hunter2") && !json.contains("/data/m.json"));
}

fn rootfence() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rootfence"))
}

/// A real shell under `rootfence exec` sees the variables `--env` gives
/// it, and a refused one stops the launch before anything runs.
#[test]
fn exec_gives_flagged_variables_and_refuses_ld_preload_for_real() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let marker = root.join("ran");
    let script = format!(
        "echo \"MEM=${{MEMORY_FILE_PATH-unset}} MODE=${{MODE-unset}} OTHER=${{OTHER-unset}}\"; touch {}",
        marker.display()
    );
    let out = rootfence()
        .args(["exec", "--root"])
        .arg(&root)
        .args(["--env", "MEMORY_FILE_PATH", "--env", "MODE=fast", "--"])
        .args(["/bin/sh", "-c", &script])
        .env("MEMORY_FILE_PATH", "/data/memory.json")
        .env("OTHER", "set by the host")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    // OTHER is not in the host's (this test's) own environment: the host
    // set it for this launch, as a config's `env` block does.
    assert_eq!(
        stdout.trim(),
        "MEM=/data/memory.json MODE=fast OTHER=set by the host",
        "{out:?}"
    );
    assert!(marker.exists());
    std::fs::remove_file(&marker).unwrap();

    // Inherited, it does not pass: started by a shell whose own
    // environment holds OTHER, rootfence's OTHER is the host's own.
    let out = Command::new("/bin/sh")
        .arg("-c")
        .arg("\"$0\" exec --root \"$1\" --env MEMORY_FILE_PATH --env MODE=fast -- /bin/sh -c \"$2\"; exit $?")
        .arg(env!("CARGO_BIN_EXE_rootfence"))
        .arg(&root)
        .arg(&script)
        .env("MEMORY_FILE_PATH", "/data/memory.json")
        .env("OTHER", "the host's own")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "MEM=/data/memory.json MODE=fast OTHER=unset",
        "{out:?}"
    );
    std::fs::remove_file(&marker).unwrap();

    // The forbidden counterpart: the command never runs.
    let lib = root.join("inject.so");
    std::fs::write(&lib, b"not a library").unwrap();
    let out = rootfence()
        .args(["exec", "--root"])
        .arg(&root)
        .arg("--env")
        .arg(format!("LD_PRELOAD={}", lib.display()))
        .args(["--", "/bin/sh", "-c", &script])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--env LD_PRELOAD refused"), "{stderr}");
    assert!(!marker.exists(), "the command must not have run");

    // And a policy pattern does not let it through from the environment.
    let pol = root.join("p.toml");
    std::fs::write(&pol, "[env]\npass = [\"PATH\", \"LD_*\"]\n").unwrap();
    let out = rootfence()
        .args(["exec", "--policy"])
        .arg(&pol)
        .args([
            "--",
            "/bin/sh",
            "-c",
            "echo \"P=${LD_PRELOAD-unset} B=${LD_BIND_NOW-unset}\"",
        ])
        .env("LD_PRELOAD", &lib)
        .env("LD_BIND_NOW", "1")
        .output()
        .unwrap();
    // LD_PRELOAD in rootfence's own environment would break rootfence
    // itself, not the test, if the file were loaded: it is not a library,
    // so the dynamic loader only warns.
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "P=unset B=1",
        "{out:?}"
    );
}

#[test]
fn explain_lists_dropped_names_never_values_and_marks_flags() {
    let out = rootfence()
        .args(["explain", "--env", "MEMORY_FILE_PATH", "--", "/bin/true"])
        .env("MEMORY_FILE_PATH", "/data/memory.json")
        .env("ROOTFENCE_TEST_SECRET", "hunter2")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(
        s.contains("MEMORY_FILE_PATH=/data/memory.json  (--env)"),
        "{s}"
    );
    let dropped = s
        .lines()
        .skip_while(|l| !l.starts_with("not passed ("))
        .nth(1)
        .unwrap_or_default();
    assert!(dropped.contains("ROOTFENCE_TEST_SECRET"), "{s}");
    assert!(!s.contains("hunter2"), "{s}");
    let names: Vec<&str> = dropped.split_whitespace().collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted);
}
