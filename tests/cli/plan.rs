//! The plan is pure: these tests build plans from hand-made inputs and
//! assert every decision without launching anything.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rootfence::plan::{self, EnvSource, GrantReason};
use rootfence::policy::Policy;
use rootfence::roots::{Access, RefusalReason, RootInput, resolve_all};
use rootfence::runtime::{CommandSpec, HostEnv, Rights, Rule, RuntimeNeed};

fn command(needs: Vec<RuntimeNeed>) -> CommandSpec {
    CommandSpec::with_needs(PathBuf::from("/usr/bin/true"), needs)
}

fn need(path: &str, rights: Rights) -> RuntimeNeed {
    RuntimeNeed::new(path, rights, Rule::System, "test")
}

fn env(home: &Path) -> HostEnv {
    let mut vars = BTreeMap::new();
    for (k, v) in [
        ("PATH", "/usr/bin:/bin"),
        ("HOME", home.to_str().unwrap()),
        ("LC_ALL", "C"),
        ("LC_CTYPE", "C.UTF-8"),
        ("LCX", "no"),
        ("LC_SECRET_TOKEN", "hunter2"),
        ("LC_TERMINAL", "iTerm2"),
        ("AWS_SECRET_ACCESS_KEY", "hunter2"),
        ("SSH_AUTH_SOCK", "/tmp/agent.sock"),
    ] {
        vars.insert(k.to_string(), v.to_string());
    }
    HostEnv {
        vars,
        home: Some(home.to_path_buf()),
        cwd: Some(home.to_path_buf()),
        host_set: None,
    }
}

struct Fixture {
    _dir: tempfile::TempDir,
    home: PathBuf,
    work: PathBuf,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let home = base.join("home");
    let work = home.join("work");
    for d in [
        work.join("sub"),
        home.join(".ssh"),
        home.join("other"),
        base.join("elsewhere"),
    ] {
        std::fs::create_dir_all(d).unwrap();
    }
    Fixture {
        _dir: dir,
        home,
        work,
    }
}

fn policy(text: &str, home: &Path) -> Policy {
    Policy::parse(text, None, Some(home)).unwrap()
}

#[test]
fn roots_become_grants_with_their_access_and_handle() {
    let fx = fixture();
    let pol = policy("", &fx.home);
    let inputs = vec![
        RootInput::command_line(fx.work.to_str().unwrap(), Access::ReadWrite),
        RootInput::command_line(fx.home.join("other").to_str().unwrap(), Access::ReadOnly),
    ];
    let (ok, refused) = resolve_all(&inputs, &pol.root_rules(None));
    assert!(refused.is_empty(), "{refused:?}");
    let plan = plan::build(&pol, ok, refused, command(vec![]), &env(&fx.home));
    let g = |p: &Path| plan.grants.iter().find(|g| g.path == p).unwrap();
    let work = g(&fx.work);
    assert_eq!(work.rights, Rights::RW);
    assert!(
        work.handle.is_some(),
        "root grants carry the resolved handle"
    );
    assert!(matches!(&work.reasons[0], GrantReason::Root { uri } if uri.ends_with("/home/work")));
    let other = g(&fx.home.join("other"));
    assert_eq!(other.rights, Rights::R);
    // Never the home directory itself, nor anything in it that wasn't asked for.
    assert!(plan.grants.iter().all(|g| g.path != fx.home));
    assert!(
        plan.grants
            .iter()
            .all(|g| !g.path.starts_with(fx.home.join(".ssh")))
    );
    assert_eq!(plan.roots.len(), 2);
}

#[test]
fn exec_in_roots_only_when_the_policy_says_so() {
    let fx = fixture();
    for (text, exec) in [("", false), ("[runtime]\nexec_in_roots = true\n", true)] {
        let pol = policy(text, &fx.home);
        let inputs = vec![RootInput::command_line(
            fx.work.to_str().unwrap(),
            Access::ReadWrite,
        )];
        let (ok, refused) = resolve_all(&inputs, &pol.root_rules(None));
        let plan = plan::build(&pol, ok, refused, command(vec![]), &env(&fx.home));
        assert_eq!(plan.grants[0].rights.exec, exec, "{text:?}");
    }
}

#[test]
fn nested_roots_merge_and_refusals_are_kept() {
    let fx = fixture();
    let pol = policy("", &fx.home);
    let inputs = vec![
        RootInput::command_line(fx.work.join("sub").to_str().unwrap(), Access::ReadOnly),
        RootInput::command_line(fx.work.to_str().unwrap(), Access::ReadWrite),
        RootInput::command_line(fx.home.join(".ssh").to_str().unwrap(), Access::ReadOnly),
    ];
    let (ok, refused) = resolve_all(&inputs, &pol.root_rules(None));
    let plan = plan::build(&pol, ok, refused, command(vec![]), &env(&fx.home));
    assert_eq!(plan.roots.len(), 1);
    assert_eq!(plan.roots[0].path, fx.work);
    assert_eq!(plan.folded.len(), 1);
    assert_eq!(plan.folded[0].1, fx.work);
    assert_eq!(plan.refused.len(), 1);
    assert!(matches!(
        plan.refused[0].reason,
        RefusalReason::InsideDenied { .. }
    ));
}

#[test]
fn roots_beyond_max_roots_are_refused() {
    let fx = fixture();
    let pol = policy("[roots]\nmax_roots = 1\n", &fx.home);
    let inputs = vec![
        RootInput::command_line(fx.work.to_str().unwrap(), Access::ReadWrite),
        RootInput::command_line(fx.home.join("other").to_str().unwrap(), Access::ReadWrite),
    ];
    let (ok, refused) = resolve_all(&inputs, &pol.root_rules(None));
    let plan = plan::build(&pol, ok, refused, command(vec![]), &env(&fx.home));
    assert_eq!(plan.roots.len(), 1);
    assert_eq!(plan.refused.len(), 1);
    assert_eq!(plan.refused[0].reason, RefusalReason::TooMany(1));
}

#[test]
fn runtime_needs_touching_denied_paths_are_dropped_with_a_warning() {
    let fx = fixture();
    let pol = policy("", &fx.home);
    let ssh = fx.home.join(".ssh");
    let needs = vec![
        need("/usr", Rights::RX),
        need(ssh.to_str().unwrap(), Rights::R),
        need(fx.home.to_str().unwrap(), Rights::R),
    ];
    let plan = plan::build(&pol, vec![], vec![], command(needs), &env(&fx.home));
    assert!(
        plan.grants
            .iter()
            .any(|g| g.path == Path::new("/usr") && g.rights == Rights::RX)
    );
    assert!(
        plan.grants
            .iter()
            .all(|g| g.path != ssh && g.path != fx.home)
    );
    assert_eq!(plan.warnings.len(), 2, "{:?}", plan.warnings);
    assert!(plan.warnings[0].contains("~/.ssh"));
}

#[test]
fn same_path_grants_combine_rights_and_reasons() {
    let fx = fixture();
    let extra = fx.home.join("other");
    let text = format!("[runtime]\nwrite = [\"{}\"]\n", extra.display());
    let pol = policy(&text, &fx.home);
    let needs = vec![need(extra.to_str().unwrap(), Rights::RX)];
    let plan = plan::build(&pol, vec![], vec![], command(needs), &env(&fx.home));
    let g: Vec<_> = plan.grants.iter().filter(|g| g.path == extra).collect();
    assert_eq!(g.len(), 1);
    assert_eq!(
        g[0].rights,
        Rights {
            read: true,
            write: true,
            exec: true
        }
    );
    assert_eq!(g[0].reasons.len(), 2);
    // Sorted by path.
    let paths: Vec<_> = plan.grants.iter().map(|g| g.path.clone()).collect();
    let mut sorted = paths.clone();
    sorted.sort();
    assert_eq!(paths, sorted);
}

#[test]
fn environment_is_the_allowlist_only() {
    let fx = fixture();
    let pol = policy(
        "[env]\npass = [\"PATH\", \"LC_*\", \"NOT_SET\"]\nset = { FOO = \"bar\", PATH = \"/x\" }\n",
        &fx.home,
    );
    let plan = plan::build(&pol, vec![], vec![], command(vec![]), &env(&fx.home));
    let keys: Vec<&str> = plan.env.keys().map(String::as_str).collect();
    // LC_* is the locale categories only: not LC_SECRET_TOKEN, LC_TERMINAL.
    assert_eq!(
        keys,
        ["FOO", "GIT_CONFIG_GLOBAL", "LC_ALL", "LC_CTYPE", "PATH"]
    );
    assert_eq!(plan.env["PATH"], ("/x".to_string(), EnvSource::Set));
    assert_eq!(plan.env["LC_ALL"], ("C".to_string(), EnvSource::Passed));
    // Secrets in rootfence's environment never reach the plan by default.
    let default = plan::build(
        &policy("", &fx.home),
        vec![],
        vec![],
        command(vec![]),
        &env(&fx.home),
    );
    assert!(!default.env.contains_key("AWS_SECRET_ACCESS_KEY"));
    assert!(!default.env.contains_key("SSH_AUTH_SOCK"));
    assert!(default.env.contains_key("PATH") && default.env.contains_key("HOME"));
}

#[test]
fn network_scopes_and_limits_follow_the_policy() {
    let fx = fixture();
    let pol = policy(
        "[network]\ntcp_connect = [443, 80, 443]\ntcp_bind = [8080]\nudp = true\n[limits]\nmax_message_bytes = 2048\n",
        &fx.home,
    );
    let plan = plan::build(&pol, vec![], vec![], command(vec![]), &env(&fx.home));
    assert_eq!(plan.network.tcp_connect, vec![80, 443]);
    assert_eq!(plan.network.tcp_bind, vec![8080]);
    assert!(plan.network.udp && !plan.network.unix_sockets);
    assert!(plan.scopes.signal && plan.scopes.abstract_unix_socket);
    assert_eq!(plan.limits.max_message_bytes, 2048);
    let default = plan::build(
        &policy("", &fx.home),
        vec![],
        vec![],
        command(vec![]),
        &env(&fx.home),
    );
    assert!(default.network.tcp_connect.is_empty() && default.network.tcp_bind.is_empty());
    assert!(!default.network.udp);
    assert!(default.scratch);
}

#[test]
fn plan_serializes_to_json_without_handles() {
    let fx = fixture();
    let pol = policy("", &fx.home);
    let inputs = vec![RootInput::command_line(
        fx.work.to_str().unwrap(),
        Access::ReadWrite,
    )];
    let (ok, refused) = resolve_all(&inputs, &pol.root_rules(None));
    let plan = plan::build(&pol, ok, refused, command(vec![]), &env(&fx.home));
    let v = serde_json::to_value(&plan).unwrap();
    assert_eq!(v["roots"][0]["access"], "read-write");
    assert_eq!(v["roots"][0]["kind"], "directory");
    assert!(
        v["roots"][0]["uri"]
            .as_str()
            .unwrap()
            .starts_with("file:///")
    );
    assert_eq!(v["grants"][0]["rights"]["write"], true);
    assert!(v["grants"][0].get("handle").is_none());
}

#[test]
fn needs_found_in_a_directory_the_server_may_write_are_not_granted() {
    // A PATH directory's links and #! lines, where that directory lies in
    // a root the server may write or under a [runtime] write path, are
    // what the server put there: what they name is not granted. The same
    // found in a read-only root's directory, or outside, is.
    let fx = fixture();
    let writable = fx.home.join("other");
    let pol = policy(
        &format!("[runtime]\nwrite = [\"{}\"]\n", writable.display()),
        &fx.home,
    );
    let inputs = vec![RootInput::command_line(
        fx.work.to_str().unwrap(),
        Access::ReadWrite,
    )];
    let (ok, refused) = resolve_all(&inputs, &pol.root_rules(None));
    let elsewhere = fx.home.parent().unwrap().join("elsewhere");
    let from = |dir: PathBuf, target: &Path| RuntimeNeed {
        from: vec![dir],
        ..RuntimeNeed::new(target, Rights::RX, Rule::Toolchain, "on PATH")
    };
    let (a, b, c) = (
        elsewhere.join("a"),
        elsewhere.join("b"),
        elsewhere.join("c"),
    );
    let needs = vec![
        from(fx.work.join("sub"), &a),
        from(writable.join("bin"), &b),
        from(elsewhere.clone(), &c),
    ];
    let plan = plan::build(&pol, ok, refused, command(needs), &env(&fx.home));
    let granted = |p: &Path| plan.grants.iter().any(|g| g.path == p);
    assert!(!granted(&a), "a need found in a writable root was granted");
    assert!(!granted(&b), "a need found under a write path was granted");
    assert!(granted(&c), "a need found elsewhere was not granted");
    let said = plan.warnings.join("\n");
    assert!(
        said.contains("~/work/sub grants nothing") && said.contains("root file://"),
        "{said}"
    );
    assert!(
        said.contains("~/other/bin grants nothing") && said.contains("[runtime] write"),
        "{said}"
    );
}
