//! Popular MCP servers, launched the way host configs launch them, through
//! the built `rootfence run` with the default policy (no `--policy`, or a
//! policy adding only what a user would: a variable to pass), driven by the
//! Python SDK's `ClientSession` (tests/peers/host.py) declaring a project
//! root, each with a tool call that does real work in it. Each works, or is
//! refused by a documented default of the policy with the message saying
//! so.
//!
//! Every peer comes from the lockfiles in tests/peers and is installed by
//! `tests/peers/install.sh` (run by `scripts/test.sh`), which also fills the
//! npm and uv caches that `npx -y` and `uvx` run from here, offline (the
//! default policy has no network). A missing peer fails the test with the
//! command that installs it.
//!
//! Each test has a home directory of its own (a fresh `HOME`), with the
//! npm and uv caches pointed at the prefilled ones by `npm_config_cache`
//! and `UV_CACHE_DIR`, as a user with caches elsewhere would have them.

use crate::peer;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

/// The system directories the host's PATH holds (node, npx, git, python3).
const PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Longest a session may take (npx and FastMCP start in seconds; a hang
/// fails the test instead of the suite).
const LIMIT: Duration = Duration::from_secs(180);

/// One test's directories: a project root (with hello.txt), an outside
/// directory with a secret, and a home directory.
struct Case {
    _dir: tempfile::TempDir,
    root: PathBuf,
    outside: PathBuf,
    home: PathBuf,
}

const SECRET: &str = "outside the root";

fn case() -> Case {
    let dir = tempfile::Builder::new()
        .prefix("rootfence-real-")
        .tempdir()
        .unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let (root, outside, home) = (
        base.join("project"),
        base.join("outside"),
        base.join("home"),
    );
    for d in [&root, &outside, &home] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(root.join("hello.txt"), "hello from the root").unwrap();
    std::fs::write(outside.join("secret.txt"), SECRET).unwrap();
    // Who commits: git's global configuration, as users have one.
    std::fs::write(
        home.join(".gitconfig"),
        "[user]\n\tname = Root Fence\n\temail = fence@example.com\n[init]\n\tdefaultBranch = main\n",
    )
    .unwrap();
    Case {
        _dir: dir,
        root,
        outside,
        home,
    }
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

fn uri(p: &Path) -> String {
    rootfence::roots::path_to_uri(p)
}

/// `rootfence run <args> -- <server>`.
fn fenced(args: &[String], server: &[String]) -> Vec<String> {
    let mut v = vec![env!("CARGO_BIN_EXE_rootfence").to_string(), "run".into()];
    v.extend(args.iter().cloned());
    v.push("--".into());
    v.extend(server.iter().cloned());
    v
}

fn strings(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

/// The environment the host gives the command: PATH, the case's HOME, and
/// `extra`.
fn host_env(c: &Case, extra: &[(&str, String)]) -> Value {
    let mut env = json!({"PATH": PATH, "HOME": s(&c.home), "LANG": "C.UTF-8"});
    for (k, v) in extra {
        env[*k] = json!(v);
    }
    env
}

/// Run `command` from a host declaring the case's root, with `steps`.
fn session(c: &Case, command: Vec<String>, env: Value, steps: Value) -> peer::HostRun {
    let run = peer::run_host_within(
        &json!({
            "command": command,
            "roots": [[uri(&c.root), "project"]],
            "env": env,
            "steps": steps,
        }),
        LIMIT,
    );
    assert_eq!(
        run.summary["sent"], run.summary["answered"],
        "{}",
        run.summary
    );
    run
}

/// The result of the `nth` call of `tool`.
fn call<'a>(run: &'a peer::HostRun, tool: &str, nth: usize) -> &'a Value {
    run.steps
        .iter()
        .filter(|s| s["call"] == tool)
        .nth(nth)
        .unwrap_or_else(|| panic!("no call {tool} #{nth}: {:?}\n{}", run.steps, run.stderr))
}

/// The text of a call that must have succeeded.
fn ok_text<'a>(run: &'a peer::HostRun, tool: &str, nth: usize) -> &'a str {
    let c = call(run, tool, nth);
    assert_eq!(
        c["error"], false,
        "{tool} #{nth}: {c}\nstderr:\n{}",
        run.stderr
    );
    c["text"].as_str().unwrap()
}

fn json_text(run: &peer::HostRun, tool: &str, nth: usize) -> Value {
    let t = ok_text(run, tool, nth);
    serde_json::from_str(t).unwrap_or_else(|e| panic!("{tool}: not JSON ({e}): {t}"))
}

// ---- npm servers: `npx -y <package>@<locked version>` and `node .../index.js`

fn npm_cache() -> String {
    let cache = peer::installed(".npm-cache/_npx");
    s(cache.parent().unwrap())
}

fn npx(package: &str, args: &[String]) -> Vec<String> {
    assert!(
        PATH.split(':').any(|d| Path::new(d).join("npx").exists()),
        "npx is required by this test and is not in {PATH}: apt-get install -y nodejs npm"
    );
    let mut v = strings(&[
        "npx",
        "-y",
        &format!("{package}@{}", peer::locked_version(package)),
    ]);
    v.extend(args.iter().cloned());
    v
}

fn node(package: &str, args: &[String]) -> Vec<String> {
    let mut v = vec![s(&peer::node()), s(&peer::server_js(package))];
    v.extend(args.iter().cloned());
    v
}

const FILESYSTEM: &str = "@modelcontextprotocol/server-filesystem";

/// server-filesystem serving the root it is given, as the README's host
/// configs launch it: the directory as its argument and as `--root`.
/// (Without `--root`, rootfence starts it before the host has told its
/// roots, and the server, finding its directory missing, exits.)
fn filesystem(server: impl Fn(&[String]) -> Vec<String>) {
    let c = case();
    let root = s(&c.root);
    let run = session(
        &c,
        fenced(
            &strings(&["--root", &root]),
            &server(std::slice::from_ref(&root)),
        ),
        host_env(&c, &[("npm_config_cache", npm_cache())]),
        json!([
            {"call": "read_text_file", "args": {"path": c.root.join("hello.txt")}},
            {"call": "write_file", "args": {"path": c.root.join("new.txt"), "content": "written by the server"}},
            {"call": "read_text_file", "args": {"path": c.outside.join("secret.txt")}},
        ]),
    );
    assert_eq!(ok_text(&run, "read_text_file", 0), "hello from the root");
    ok_text(&run, "write_file", 0);
    assert_eq!(
        std::fs::read_to_string(c.root.join("new.txt")).unwrap(),
        "written by the server"
    );
    let outside = call(&run, "read_text_file", 1);
    assert_eq!(outside["error"], true, "{outside}");
    assert!(!outside["text"].as_str().unwrap().contains(SECRET));
}

#[test]
fn filesystem_server_through_npx() {
    filesystem(|args| npx(FILESYSTEM, args));
}

#[test]
fn filesystem_server_through_node() {
    filesystem(|args| node(FILESYSTEM, args));
}

const THINKING: &str = "@modelcontextprotocol/server-sequential-thinking";

fn sequential_thinking(server: Vec<String>) {
    let c = case();
    let run = session(
        &c,
        fenced(&[], &server),
        host_env(&c, &[("npm_config_cache", npm_cache())]),
        json!([{"call": "sequentialthinking", "args": {
            "thought": "The project holds one file, hello.txt.",
            "thoughtNumber": 1, "totalThoughts": 1, "nextThoughtNeeded": false}}]),
    );
    let v = json_text(&run, "sequentialthinking", 0);
    assert_eq!(
        (
            &v["thoughtNumber"],
            &v["nextThoughtNeeded"],
            &v["thoughtHistoryLength"]
        ),
        (&json!(1), &json!(false), &json!(1)),
        "{v}"
    );
}

#[test]
fn sequential_thinking_through_npx() {
    sequential_thinking(npx(THINKING, &[]));
}

#[test]
fn sequential_thinking_through_node() {
    sequential_thinking(node(THINKING, &[]));
}

const MEMORY: &str = "@modelcontextprotocol/server-memory";

/// server-memory keeping its graph where the host config's
/// MEMORY_FILE_PATH says, in the root. The variable reaches the server
/// because the policy passes it (the default passes only PATH, HOME, the
/// locale and the terminal's).
fn memory(server: Vec<String>) {
    let c = case();
    let file = c.root.join("memory.jsonl");
    let policy_dir = tempfile::tempdir().unwrap();
    let policy = policy_dir.path().join("memory.toml");
    std::fs::write(
        &policy,
        "version = 1\n[env]\npass = [\"PATH\", \"HOME\", \"LANG\", \"LC_*\", \"TZ\", \"TERM\", \"USER\", \"LOGNAME\", \"MEMORY_FILE_PATH\"]\n",
    )
    .unwrap();
    let run = session(
        &c,
        fenced(&strings(&["--policy", &s(&policy)]), &server),
        host_env(
            &c,
            &[
                ("npm_config_cache", npm_cache()),
                ("MEMORY_FILE_PATH", s(&file)),
            ],
        ),
        json!([
            {"call": "create_entities", "args": {"entities": [
                {"name": "rootfence", "entityType": "project", "observations": ["fences MCP servers"]}]}},
            {"call": "add_observations", "args": {"observations": [
                {"entityName": "rootfence", "contents": ["keeps its memory in the project"]}]}},
            {"call": "read_graph", "args": {}},
        ]),
    );
    ok_text(&run, "create_entities", 0);
    ok_text(&run, "add_observations", 0);
    let graph = json_text(&run, "read_graph", 0);
    assert_eq!(graph["entities"][0]["name"], "rootfence", "{graph}");
    assert_eq!(
        graph["entities"][0]["observations"],
        json!(["fences MCP servers", "keeps its memory in the project"]),
        "{graph}"
    );
    // The graph is in the file the host named, in the root.
    let saved = std::fs::read_to_string(&file)
        .unwrap_or_else(|e| panic!("{}: {e}\n{}", file.display(), run.stderr));
    assert!(
        saved.contains("\"name\":\"rootfence\"") && saved.contains("keeps its memory"),
        "{saved}"
    );
}

#[test]
fn memory_through_npx_keeps_its_graph_in_the_root() {
    memory(npx(MEMORY, &[]));
}

#[test]
fn memory_through_node_keeps_its_graph_in_the_root() {
    memory(node(MEMORY, &[]));
}

/// server-everything offers `trigger-sampling-request` only to a host that
/// can sample. The default policy withholds sampling: the tool is not
/// offered, and rootfence says why when it starts, as `explain` does.
#[test]
fn everything_through_npx_lacks_only_what_the_policy_withholds() {
    const EVERYTHING: &str = "@modelcontextprotocol/server-everything";
    const WITHHELD: &str = "sampling WITHHELD (sampling.allow = false)";
    let c = case();
    let scenario = |command: Vec<String>| {
        json!({
            "command": command,
            "roots": [[uri(&c.root), "project"]],
            "env": host_env(&c, &[("npm_config_cache", npm_cache())]),
            "sampling": {"text": "Paris"},
            "elicitation": {"action": "decline"},
            "steps": [{"list_tools": true}, {"call": "get-roots-list", "args": {}}],
        })
    };
    let tools = |run: &peer::HostRun| -> Vec<String> {
        run.steps
            .iter()
            .find_map(|s| s.get("tools"))
            .and_then(Value::as_array)
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap().to_string())
            .collect()
    };
    // Unfenced, to this host, the server offers sampling.
    let direct = peer::run_host_within(&scenario(node(EVERYTHING, &strings(&["stdio"]))), LIMIT);
    assert!(
        tools(&direct).contains(&"trigger-sampling-request".to_string()),
        "{:?}",
        direct.steps
    );
    // Through rootfence, with the default policy.
    let server = npx(EVERYTHING, &[]);
    let run = peer::run_host_within(&scenario(fenced(&[], &server)), LIMIT);
    let offered = tools(&run);
    assert!(
        !offered.contains(&"trigger-sampling-request".to_string()),
        "{offered:?}"
    );
    // Form elicitation is allowed by default: its tool stays.
    assert!(
        offered.contains(&"trigger-elicitation-request".to_string()),
        "{offered:?}"
    );
    assert!(run.stderr.contains(WITHHELD), "{}", run.stderr);
    // The server works, and sees the root the host declared.
    assert!(
        ok_text(&run, "get-roots-list", 0).contains(&uri(&c.root)),
        "{:?}",
        run.steps
    );
    // `explain` says the same before anything runs.
    let explain = Command::new(env!("CARGO_BIN_EXE_rootfence"))
        .arg("explain")
        .arg("--")
        .args(&server)
        .env_clear()
        .env("PATH", PATH)
        .env("HOME", &c.home)
        .env("npm_config_cache", npm_cache())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&explain.stdout);
    assert!(
        text.contains(WITHHELD),
        "{text}\n{}",
        String::from_utf8_lossy(&explain.stderr)
    );
}

// ---- Python servers: a venv's console script, and `uvx` from the uv cache

fn venv_script(name: &str) -> Vec<String> {
    vec![s(&peer::installed(&format!(".venv-servers/bin/{name}")))]
}

fn uvx(tool: &str) -> Vec<String> {
    peer::installed(".uv-cache/.rootfence-uvx-stamp");
    vec![s(&peer::installed(".venv/bin/uvx")), tool.to_string()]
}

fn uv_cache() -> String {
    s(&peer::installed(".uv-cache"))
}

fn time(server: Vec<String>) {
    let c = case();
    let run = session(
        &c,
        fenced(&[], &server),
        host_env(&c, &[("UV_CACHE_DIR", uv_cache())]),
        json!([
            {"call": "get_current_time", "args": {"timezone": "UTC"}},
            {"call": "convert_time", "args": {"source_timezone": "Europe/Paris", "time": "12:00", "target_timezone": "Asia/Tokyo"}},
        ]),
    );
    let now = json_text(&run, "get_current_time", 0);
    assert_eq!(now["timezone"], "UTC", "{now}");
    assert!(
        now["datetime"]
            .as_str()
            .is_some_and(|d| d.ends_with("+00:00") && d.len() == 25),
        "{now}"
    );
    // The time zone database is readable.
    let converted = json_text(&run, "convert_time", 0);
    assert_eq!(converted["target"]["timezone"], "Asia/Tokyo", "{converted}");
}

#[test]
fn time_from_a_venv_console_script() {
    time(venv_script("mcp-server-time"));
}

#[test]
fn time_through_uvx_offline() {
    time(uvx("mcp-server-time"));
}

/// A repository with one commit and an untracked file.
fn repo(c: &Case) {
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .args(args)
            .current_dir(&c.root)
            .env_clear()
            .env("PATH", PATH)
            .env("HOME", &c.home)
            .output()
            .expect("git is required by this test: apt-get install -y git");
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    git(&["init", "-q"]);
    git(&["add", "hello.txt"]);
    git(&["commit", "-qm", "first commit"]);
    std::fs::write(c.root.join("notes.txt"), "untracked").unwrap();
}

/// mcp-server-git on a repository in the root: status and log, then a
/// commit made by the server under the identity of the user's
/// `~/.gitconfig`.
fn git(server: Vec<String>) {
    let c = case();
    repo(&c);
    let r = s(&c.root);
    let run = session(
        &c,
        fenced(&[], &server),
        host_env(&c, &[("UV_CACHE_DIR", uv_cache())]),
        json!([
            {"call": "git_status", "args": {"repo_path": r}},
            {"call": "git_log", "args": {"repo_path": r}},
            {"call": "git_add", "args": {"repo_path": r, "files": ["notes.txt"]}},
            {"call": "git_commit", "args": {"repo_path": r, "message": "notes, by the server"}},
        ]),
    );
    let status = ok_text(&run, "git_status", 0);
    assert!(
        status.contains("On branch main") && status.contains("notes.txt"),
        "{status}"
    );
    let log = ok_text(&run, "git_log", 0);
    assert!(
        log.contains("first commit") && log.contains("Root Fence"),
        "{log}"
    );
    ok_text(&run, "git_add", 0);
    ok_text(&run, "git_commit", 0);
    let out = Command::new("git")
        .args(["log", "-1", "--format=%an <%ae> %s"])
        .current_dir(&c.root)
        .env_clear()
        .env("PATH", PATH)
        .env("HOME", &c.home)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "Root Fence <fence@example.com> notes, by the server"
    );
}

#[test]
fn git_from_a_venv_console_script() {
    git(venv_script("mcp-server-git"));
}

#[test]
fn git_through_uvx_offline() {
    git(uvx("mcp-server-git"));
}

// ---- A FastMCP server project (tests/peers/fastmcp, its .venv from uv.lock)

fn fastmcp_dir() -> PathBuf {
    peer::installed("fastmcp/.venv/bin/fastmcp");
    peer::peers().join("fastmcp")
}

/// The project's `add_note` writes in the root, and nowhere else.
fn fastmcp(server: Vec<String>) {
    let c = case();
    let notes = c.root.join("notes.txt");
    let astray = c.outside.join("notes.txt");
    let run = session(
        &c,
        fenced(&[], &server),
        host_env(&c, &[("UV_CACHE_DIR", uv_cache())]),
        json!([
            {"call": "add_note", "args": {"path": notes, "text": "first note"}},
            {"call": "add_note", "args": {"path": notes, "text": "second note"}},
            {"call": "add_note", "args": {"path": astray, "text": "astray"}},
        ]),
    );
    assert_eq!(ok_text(&run, "add_note", 0), "first note\n");
    assert_eq!(ok_text(&run, "add_note", 1), "first note\nsecond note\n");
    assert_eq!(
        std::fs::read_to_string(&notes).unwrap(),
        "first note\nsecond note\n"
    );
    let refused = call(&run, "add_note", 2);
    assert_eq!(refused["error"], true, "{refused}");
    assert!(!astray.exists());
}

#[test]
fn fastmcp_from_the_venv_python() {
    let p = fastmcp_dir();
    fastmcp(vec![
        s(&p.join(".venv/bin/python")),
        s(&p.join("server.py")),
    ]);
}

#[test]
fn fastmcp_run() {
    let p = fastmcp_dir();
    fastmcp(vec![
        s(&p.join(".venv/bin/fastmcp")),
        "run".into(),
        s(&p.join("server.py")),
    ]);
}

#[test]
fn fastmcp_through_uv_directory_run() {
    let p = fastmcp_dir();
    fastmcp(vec![
        s(&peer::installed(".venv/bin/uv")),
        "--directory".into(),
        s(&p),
        "run".into(),
        "server.py".into(),
    ]);
}
