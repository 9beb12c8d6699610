//! The `check`, `explain`, `doctor` and `schema` commands, run as a user
//! runs them.

use std::process::{Command, Output};

fn rootfence(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rootfence"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn explain_current_directory_works() {
    let out = rootfence(&["explain", "--root", ".", "--", "/bin/true"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let here = std::fs::canonicalize(env!("CARGO_MANIFEST_DIR")).unwrap();
    assert!(
        stdout.contains(&format!("file://{}", here.display())),
        "{stdout}"
    );
    assert!(stdout.contains("read-write"), "{stdout}");
    assert!(stdout.contains("tcp connect: none"), "{stdout}");
}

#[test]
fn explain_refuses_encoded_traversal_with_a_reason() {
    let out = rootfence(&[
        "explain",
        "--root",
        "file:///tmp/%2e%2e/etc",
        "--",
        "/bin/true",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("root file:///tmp/%2e%2e/etc refused: segment 2 is \"..\""),
        "{stderr}"
    );
    assert!(text(&out.stdout).contains("refused roots (1)"));
}

#[test]
fn explain_json_is_machine_readable() {
    let out = rootfence(&[
        "explain",
        "--json",
        "--root",
        ".",
        "--ro-root",
        "src",
        "--ro-root",
        "/nonexistent-root-x",
        "--",
        "/bin/true",
    ]);
    assert_eq!(out.status.code(), Some(1), "one root is refused");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // src is read-only inside a read-write root: folded into it.
    assert_eq!(v["roots"].as_array().unwrap().len(), 1);
    assert_eq!(v["folded"].as_array().unwrap().len(), 1);
    assert_eq!(v["refused"][0]["input"], "/nonexistent-root-x");
    assert!(
        v["refused"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("does not exist")
    );
    // Every runtime grant names the general rule that makes it.
    let needs = v["command"]["needs"].as_array().unwrap();
    assert!(
        needs
            .iter()
            .any(|n| n["rule"] == "system" && n["path"] == "/usr")
    );
    assert!(needs.iter().all(|n| n["rule"].is_string()));
}

#[test]
fn explain_with_bad_policy_or_command_fails_clearly() {
    let out = rootfence(&[
        "explain",
        "--policy",
        "/nonexistent.toml",
        "--",
        "/bin/true",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("/nonexistent.toml: cannot read"));
    let out = rootfence(&["explain", "--", "no-such-command-xyz"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("\"no-such-command-xyz\" not found on PATH"));
    let out = rootfence(&["explain", "--root", "."]);
    assert_eq!(out.status.code(), Some(2), "the command is required");
}

#[test]
fn explain_with_the_strict_policy_applies_its_ceiling() {
    let out = rootfence(&[
        "explain",
        "--policy",
        "policy/strict.toml",
        "--root",
        "/usr/share",
        "--",
        "/bin/true",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("outside the policy ceiling (roots.allow_under: ~/projects, /tmp)"),
        "{stderr}"
    );
}

#[test]
fn explain_refuses_a_root_containing_the_policy_file() {
    // A root beside the policy file is fine (a fresh directory under /tmp,
    // inside strict.toml's ceiling, wherever this checkout is)...
    let elsewhere = tempfile::tempdir_in("/tmp").unwrap();
    let out = rootfence(&[
        "explain",
        "--policy",
        "policy/strict.toml",
        "--root",
        elsewhere.path().to_str().unwrap(),
        "--",
        "/bin/true",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    // ...a root containing it is not.
    let dir = tempfile::tempdir().unwrap();
    let pol = dir.path().join("p.toml");
    std::fs::write(&pol, "version = 1\n").unwrap();
    let out = rootfence(&[
        "explain",
        "--policy",
        pol.to_str().unwrap(),
        "--root",
        dir.path().to_str().unwrap(),
        "--",
        "/bin/true",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("contains denied path") && stderr.contains("p.toml"),
        "{stderr}"
    );
}

#[test]
fn a_policy_linked_into_a_root_is_refused() {
    // A second hard link inside a root would let the server rewrite the
    // policy of the next session.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let pol = dir.path().join("p.toml");
    std::fs::write(&pol, "version = 1\n").unwrap();
    std::fs::hard_link(&pol, root.join("innocent.toml")).unwrap();
    for cmd in ["explain", "exec", "check"] {
        let mut args = vec![cmd];
        if cmd != "check" {
            args.extend([
                "--policy",
                pol.to_str().unwrap(),
                "--root",
                root.to_str().unwrap(),
                "--",
                "/bin/true",
            ]);
        } else {
            args.push(pol.to_str().unwrap());
        }
        let out = rootfence(&args);
        assert!(!out.status.success(), "{cmd} accepted a linked policy");
        let stderr = text(&out.stderr);
        assert!(stderr.contains("2 hard links"), "{cmd}: {stderr}");
    }
}

#[test]
fn a_policy_symlink_inside_a_root_is_refused_as_a_root() {
    // The symlink could be retargeted by the server: a root may contain
    // neither the policy nor a symlink through which it was named.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let real = dir.path().join("real.toml");
    std::fs::write(&real, "version = 1\n").unwrap();
    let link = root.join("p.toml");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let out = rootfence(&[
        "explain",
        "--policy",
        link.to_str().unwrap(),
        "--root",
        root.to_str().unwrap(),
        "--",
        "/bin/true",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("contains denied path"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_root_containing_the_audit_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let pol = dir.path().join("p.toml");
    std::fs::write(
        &pol,
        format!(
            "version = 1\n[audit]\nfile = \"{}/logs/audit.jsonl\"\n",
            root.display()
        ),
    )
    .unwrap();
    let out = rootfence(&[
        "explain",
        "--policy",
        pol.to_str().unwrap(),
        "--root",
        root.to_str().unwrap(),
        "--",
        "/bin/true",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("contains denied path") && stderr.contains("audit"),
        "{stderr}"
    );
}

#[test]
fn roots_on_kernel_interfaces_are_refused() {
    for (root, what) in [
        ("/proc", "procfs"),
        ("/proc/sys", "procfs"),
        ("/proc/self", "procfs"),
        ("/sys", "sysfs"),
        ("/dev", "device filesystem"),
        ("/dev/pts", "devpts"),
        ("/run", "/run"),
    ] {
        let out = rootfence(&["explain", "--root", root, "--", "/bin/true"]);
        assert_eq!(out.status.code(), Some(1), "{root}: {}", text(&out.stderr));
        let stderr = text(&out.stderr);
        assert!(
            stderr.contains(&format!("root {root} refused")) && stderr.contains(what),
            "{root}: {stderr}"
        );
    }
    // /proc/self is refused as itself, not silently turned into
    // rootfence's own /proc/<pid>.
    let out = rootfence(&["exec", "--root", "/proc/self", "--", "/bin/true"]);
    assert_eq!(out.status.code(), Some(125), "{}", text(&out.stderr));
}

#[test]
fn check_validates_each_file() {
    let out = rootfence(&["check", "policy/strict.toml", "policy/python-server.toml"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("policy/strict.toml: ok"));
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[network]\ntcp_connect = [99999]\n").unwrap();
    let out = rootfence(&["check", "policy/strict.toml", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "policy {} line 2, key `network.tcp_connect`",
            bad.display()
        )),
        "{stderr}"
    );
}

#[test]
fn doctor_reports_the_kernel_and_landlock() {
    let out = rootfence(&["doctor", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let abi = v["landlock"]["abi"].as_u64();
    // This project's machines run a kernel with Landlock; a kernel without it
    // must make doctor say rootfence cannot run.
    match abi {
        Some(abi) => {
            assert!(abi >= 1);
            assert_eq!(v["can_run"], true);
            assert!(out.status.success());
            let features = v["features"].as_array().unwrap();
            assert_eq!(features[0]["available"], true);
        }
        None => {
            assert_eq!(v["can_run"], false);
            assert!(!out.status.success());
        }
    }
    let out = rootfence(&["doctor"]);
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("kernel:") && stdout.contains("landlock:"),
        "{stdout}"
    );
    assert!(stdout.contains("rootfence can run here:"), "{stdout}");
}

#[test]
fn schema_command_prints_the_published_schema() {
    let out = rootfence(&["schema"]);
    assert!(out.status.success());
    let printed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let published: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/policy/policy.schema.json"
        ))
        .unwrap(),
    )
    .unwrap();
    assert_eq!(printed, published);
}

#[test]
fn logs_never_go_to_stdout() {
    let out = rootfence(&[
        "--log",
        "debug",
        "explain",
        "--json",
        "--root",
        ".",
        "--",
        "/bin/true",
    ]);
    assert!(out.status.success());
    assert!(
        text(&out.stderr).contains("roots resolved"),
        "{}",
        text(&out.stderr)
    );
    // stdout holds exactly one JSON document and nothing else.
    let _: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
}

#[test]
fn explain_says_what_the_server_is_not_told() {
    // The default policy withholds sampling: explain says so, and why.
    let out = rootfence(&["explain", "--", "/bin/true"]);
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("sampling WITHHELD (sampling.allow = false)"),
        "{stdout}"
    );
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p.toml");
    std::fs::write(&p, "version = 1\n[sampling]\nallow = true\n").unwrap();
    let out = rootfence(&[
        "explain",
        "--policy",
        p.to_str().unwrap(),
        "--",
        "/bin/true",
    ]);
    assert!(text(&out.stdout).contains("sampling allowed (through the guard)"));
}

#[test]
fn rootfence_state_is_never_a_root() {
    // Remembered initialize answers are replayed to hosts and policies are
    // loaded by later sessions: a server that could write them would reach
    // every session after it. Their directories are denied wherever the
    // XDG variables put them; a sibling directory stays a root.
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let home = base.join("home");
    let xdg = base.join("xdg-cache");
    for d in [
        home.join(".cache/rootfence"),
        home.join(".config/rootfence"),
        xdg.join("rootfence/initialize"),
        home.join("work"),
    ] {
        std::fs::create_dir_all(d).unwrap();
    }
    let explain = |root: &std::path::Path| {
        Command::new(env!("CARGO_BIN_EXE_rootfence"))
            .args(["explain", "--root"])
            .arg(root)
            .args(["--", "/bin/true"])
            .env("HOME", &home)
            .env("XDG_CACHE_HOME", &xdg)
            .current_dir(&base)
            .output()
            .unwrap()
    };
    for (root, denied) in [
        (home.join(".cache"), "~/.cache/rootfence"),
        (home.join(".config/rootfence"), "~/.config/rootfence"),
        (xdg.clone(), "$XDG_CACHE_HOME/rootfence"),
        (
            xdg.join("rootfence/initialize"),
            "$XDG_CACHE_HOME/rootfence",
        ),
    ] {
        let out = explain(&root);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{}: {stderr}", root.display());
        assert!(stderr.contains(denied), "{}: {stderr}", root.display());
    }
    let out = explain(&home.join("work"));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

#[test]
fn exec_forwards_termination_signals_to_the_command() {
    // The command runs in its own session: a SIGTERM to rootfence reaches
    // it, and its death by that signal is rootfence's exit status.
    use std::io::BufRead as _;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_rootfence"))
        .args(["exec", "--", "/bin/sh", "-c", "echo ready; exec sleep 30"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Once the command runs, rootfence catches the signal to forward it.
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "ready\n");
    // SAFETY: kill on our own child's pid.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let status = child.wait().unwrap();
    // Not 0 (the sleep ran out) nor a death of rootfence itself.
    assert_eq!(status.code(), Some(128 + libc::SIGTERM));
}

#[test]
fn the_readme_table_and_doctor_name_the_same_classes() {
    // "What the fence holds" lists, in doctor's words, every class doctor
    // reports, in the same order.
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let section = readme
        .split("## What the fence holds")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("the README's section");
    // (Markdown's code marks aside.)
    let table: Vec<String> = section
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| class"))
        .filter_map(|l| l.split(" | ").next())
        .map(|c| c.trim_start_matches("| ").replace('`', ""))
        .collect();
    let out = rootfence(&["doctor", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let doctor: Vec<&str> = v["coverage"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["class"].as_str().unwrap())
        .collect();
    assert_eq!(table, doctor);
}

#[test]
fn a_reader_that_stops_reading_ends_explain_quietly() {
    // `rootfence explain | head -1`: no panic on the closed pipe.
    use std::io::BufRead as _;
    use std::os::unix::process::ExitStatusExt as _;
    // Two hundred roots: more JSON than a pipe holds, so the write after
    // the reader is gone is certain to fail.
    let dir = tempfile::tempdir().unwrap();
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_rootfence"));
    c.args(["explain", "--json"]);
    for i in 0..200 {
        let d = dir.path().join(format!("d{i}"));
        std::fs::create_dir(&d).unwrap();
        c.arg("--root").arg(d);
    }
    let mut child = c
        .args(["--", "/bin/true"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert_eq!(first, "{\n");
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(out.status.signal(), Some(libc::SIGPIPE), "{:?}", out.status);
}
