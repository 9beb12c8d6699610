//! `rootfence wrap` on real-looking configs of each host (the files in
//! `tests/hostconfigs/`, with their paths pointed at a scratch tree): the
//! rewritten servers, idempotence, `--undo` round trips, `--in-place` and
//! its backup, errors; and a wrapped Claude Code server launched the way
//! the host launches it, speaking MCP under the sandbox.

use crate::common;

use common::fake_server;

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use jsonc_parser::ParseOptions;
use jsonc_parser::cst::CstRootNode;
use serde_json::{Value, json};

const ROOTFENCE: &str = "/opt/rootfence/bin/rootfence";

/// A scratch tree: a home with a repository, notes and projects
/// directories, a file, a project directory holding the config files.
struct Tree {
    _dir: tempfile::TempDir,
    base: PathBuf,
    home: PathBuf,
    notes: PathBuf,
    projects: PathBuf,
    project: PathBuf,
}

fn tree() -> Tree {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let home = base.join("home");
    let notes = base.join("notes");
    let projects = base.join("projects");
    let project = base.join("project");
    for d in [
        home.join("repo"),
        home.join(".ssh"),
        notes.clone(),
        projects.clone(),
        project.join(".vscode"),
        project.join(".cursor"),
    ] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(notes.join("test.db"), b"").unwrap();
    Tree {
        _dir: dir,
        base,
        home,
        notes,
        projects,
        project,
    }
}

impl Tree {
    /// The fixture `name` with its placeholders replaced.
    fn fixture(&self, name: &str, extra: &[(&str, &str)]) -> String {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/hostconfigs")
            .join(name);
        let mut text = std::fs::read_to_string(path).unwrap();
        let notes = self.notes.display().to_string();
        let projects = self.projects.display().to_string();
        for (k, v) in [
            ("@NOTES@", notes.as_str()),
            ("@PROJECTS@", projects.as_str()),
            ("@REPO@", "repo"),
        ]
        .iter()
        .chain(extra)
        {
            text = text.replace(k, v);
        }
        text
    }

    fn write(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.project.join(rel);
        std::fs::write(&p, text).unwrap();
        p
    }

    fn policy(&self, name: &str, text: &str) -> PathBuf {
        let p = self.base.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    fn rootfence(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_rootfence"))
            .args(args)
            .current_dir(&self.project)
            .env("HOME", &self.home)
            .output()
            .unwrap()
    }

    /// `rootfence wrap ARGS`, asserted successful: (stdout, stderr).
    fn wrap(&self, args: &[&str]) -> (String, String) {
        self.wrap_with_path(args, None)
    }

    /// `rootfence wrap ARGS` with the user's `PATH` set to `path` (when
    /// given), asserted successful: (stdout, stderr).
    fn wrap_with_path(&self, args: &[&str], path: Option<&str>) -> (String, String) {
        let mut all = vec!["wrap"];
        all.extend(args);
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_rootfence"));
        cmd.args(&all)
            .current_dir(&self.project)
            .env("HOME", &self.home);
        if let Some(p) = path {
            cmd.env("PATH", p);
        }
        let out = cmd.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{args:?}: {stderr}");
        (String::from_utf8(out.stdout).unwrap(), stderr)
    }
}

fn parse(text: &str) -> Value {
    CstRootNode::parse(text, &ParseOptions::default())
        .unwrap()
        .to_serde_value()
        .unwrap()
}

fn strs(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap().to_string())
        .collect()
}

/// Wrap `file`, check that wrapping the result changes nothing and that
/// undoing it gives the original value back; the wrapped text.
fn wrap_idempotent_and_undoable(t: &Tree, file: &Path, args: &[&str]) -> (String, String) {
    let original = std::fs::read_to_string(file).unwrap();
    let f = file.to_str().unwrap();
    let mut a = vec![f, "--rootfence", ROOTFENCE];
    a.extend(args);
    let (wrapped, stderr) = t.wrap(&a);
    assert_ne!(parse(&wrapped), parse(&original));

    let again = file.with_extension("wrapped");
    let mut again_name = again.clone().into_os_string();
    again_name.push(".json");
    let again = PathBuf::from(again_name);
    std::fs::write(&again, &wrapped).unwrap();
    // Same name rules: wrap the wrapped text through a copy in the same
    // directory, with the format forced to the detected one.
    let format = detected(&stderr);
    let g = again.to_str().unwrap();
    let (twice, twice_err) = t.wrap(&[g, "--format", format, "--rootfence", ROOTFENCE]);
    assert_eq!(twice, wrapped, "wrapping twice changes nothing");
    assert!(
        !twice_err.contains(": wrapped"),
        "nothing is wrapped twice: {twice_err}"
    );
    let (undone, _) = t.wrap(&[g, "--format", format, "--undo", "--rootfence", ROOTFENCE]);
    assert_eq!(parse(&undone), parse(&original), "undo gives the original");
    std::fs::remove_file(&again).unwrap();
    (wrapped, stderr)
}

fn detected(stderr: &str) -> &'static str {
    for (shown, flag) in [
        ("Claude Desktop config", "claude-desktop"),
        ("VS Code config", "vscode"),
        ("Cursor config", "cursor"),
        ("Claude Code config", "claude-code"),
    ] {
        if stderr.contains(shown) {
            return flag;
        }
    }
    panic!("no format reported: {stderr}");
}

#[test]
fn claude_desktop_servers_are_wrapped_with_env_roots_and_policies() {
    let t = tree();
    let file = t
        .project
        .join("claude_desktop_config.json")
        .to_str()
        .map(|p| {
            std::fs::write(p, t.fixture("claude_desktop_config.json", &[])).unwrap();
            PathBuf::from(p)
        })
        .unwrap();
    let all = t.policy("all.toml", "version = 1\n");
    let mem = t.policy("memory.toml", "version = 1\n");
    let all_s = all.to_str().unwrap();
    let mem_s = mem.to_str().unwrap();
    let for_memory = format!("memory={mem_s}");
    let (wrapped, stderr) =
        wrap_idempotent_and_undoable(&t, &file, &["--policy", all_s, "--policy-for", &for_memory]);
    assert!(stderr.contains("Claude Desktop config"), "{stderr}");
    let v = parse(&wrapped);
    let s = &v["mcpServers"];
    let notes = t.notes.to_str().unwrap();
    let projects = t.projects.to_str().unwrap();

    assert_eq!(s["filesystem"]["command"], ROOTFENCE);
    assert_eq!(
        strs(&s["filesystem"]["args"]),
        [
            "run",
            "--policy",
            all_s,
            "--root",
            notes,
            "--root",
            projects,
            "--",
            "npx",
            "-y",
            "@modelcontextprotocol/server-filesystem",
            notes,
            projects
        ]
    );
    assert_eq!(
        strs(&s["memory"]["args"]),
        [
            "run",
            "--policy",
            mem_s,
            "--env",
            "MEMORY_FILE_PATH",
            "--root",
            notes,
            "--",
            "npx",
            "-y",
            "@modelcontextprotocol/server-memory"
        ]
    );
    // The host still sets the value.
    assert_eq!(
        s["memory"]["env"],
        json!({"MEMORY_FILE_PATH": format!("{notes}/memory.json")})
    );
    // A data file (the memory file in env, a database in the args, also
    // one that does not exist yet): its directory is the root.
    assert_eq!(
        strs(&s["sqlite"]["args"]),
        [
            "run",
            "--policy",
            all_s,
            "--root",
            notes,
            "--",
            "uvx",
            "mcp-server-sqlite",
            "--db-path",
            &format!("{notes}/test.db")
        ]
    );
    assert!(
        stderr.contains(&format!(
            "root from its arguments: {notes} (the directory of a file it uses)"
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "root from env MEMORY_FILE_PATH: {notes} (the directory of a file it uses)"
        )),
        "{stderr}"
    );
    // Docker: left alone.
    assert_eq!(s["github"]["command"], "docker");
    assert!(stderr.contains("runs in a container (docker)"), "{stderr}");
    // No args before: the server command alone after --.
    assert_eq!(
        strs(&s["local-binary"]["args"]),
        [
            "run",
            "--policy",
            all_s,
            "--",
            "/usr/local/bin/my-mcp-server"
        ]
    );
    assert_eq!(v["globalShortcut"], "Ctrl+Space");
}

#[test]
fn vscode_servers_are_wrapped_with_comments_kept() {
    let t = tree();
    let file = t.write(".vscode/mcp.json", &t.fixture("vscode-mcp.jsonc", &[]));
    let (wrapped, stderr) = wrap_idempotent_and_undoable(&t, &file, &[]);
    assert!(stderr.contains("VS Code config"), "{stderr}");
    for comment in [
        "// Ask for the key once; VS Code stores it.",
        "/* The workspace's files. */",
        "// from inputs above",
        "// A remote server: not launched by VS Code.",
    ] {
        assert!(wrapped.contains(comment), "{comment} lost:\n{wrapped}");
    }
    let v = parse(&wrapped);
    let s = &v["servers"];
    assert_eq!(
        strs(&s["filesystem"]["args"]),
        [
            "run",
            "--root",
            "${workspaceFolder}",
            "--",
            "npx",
            "-y",
            "@modelcontextprotocol/server-filesystem",
            "${workspaceFolder}"
        ]
    );
    assert_eq!(s["filesystem"]["type"], "stdio");
    assert_eq!(
        strs(&s["perplexity"]["args"]),
        [
            "run",
            "--env",
            "LOG_LEVEL",
            "--env",
            "PERPLEXITY_API_KEY",
            "--",
            "npx",
            "-y",
            "server-perplexity-ask"
        ]
    );
    assert_eq!(
        s["perplexity"]["env"]["PERPLEXITY_API_KEY"],
        "${input:perplexity-key}"
    );
    assert!(stderr.contains("envFile"), "{stderr}");
    // ${userHome}/repo exists in the (test) home: a root, as written.
    assert_eq!(
        strs(&s["git"]["args"])[..3],
        ["run", "--root", "${userHome}/repo"]
    );
    assert_eq!(
        s["github"],
        json!({"type":"http","url":"https://api.githubcopilot.com/mcp/"})
    );
    assert!(
        stderr.contains("remote server (url): left alone"),
        "{stderr}"
    );
    assert_eq!(v["inputs"][0]["id"], "perplexity-key");
}

#[test]
fn vscode_user_settings_keep_their_other_keys() {
    let t = tree();
    let text = r#"{
  "editor.fontSize": 14, // big
  "mcp": {
    "servers": {
      "time": {"command": "uvx", "args": ["mcp-server-time"]},
    }
  },
}
"#;
    let file = t.write("settings.json", text);
    let (wrapped, _) = wrap_idempotent_and_undoable(&t, &file, &[]);
    assert!(
        wrapped.contains("\"editor.fontSize\": 14, // big"),
        "{wrapped}"
    );
    let v = parse(&wrapped);
    assert_eq!(
        strs(&v["mcp"]["servers"]["time"]["args"]),
        ["run", "--", "uvx", "mcp-server-time"]
    );
}

#[test]
fn cursor_servers_are_wrapped() {
    let t = tree();
    let file = t.write(".cursor/mcp.json", &t.fixture("cursor-mcp.json", &[]));
    let (wrapped, stderr) = wrap_idempotent_and_undoable(&t, &file, &[]);
    assert!(stderr.contains("Cursor config"), "{stderr}");
    assert!(
        wrapped.contains("// Cursor's own comment support"),
        "{wrapped}"
    );
    let v = parse(&wrapped);
    let s = &v["mcpServers"];
    assert_eq!(
        strs(&s["filesystem"]["args"])[..5],
        ["run", "--root", "${workspaceFolder}", "--root", "~/repo"]
    );
    assert_eq!(
        strs(&s["brave-search"]["args"])[..4],
        ["run", "--env", "BRAVE_API_KEY", "--"]
    );
    assert_eq!(s["remote"]["url"], "https://mcp.example.com/sse");
    assert!(s["remote"].get("command").is_none());
}

#[test]
fn claude_code_servers_are_wrapped() {
    let t = tree();
    let data = t.base.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let text = t.fixture(
        "claude-code.mcp.json",
        &[
            ("@FAKE@", "/usr/local/bin/fake"),
            ("@DATA@", data.to_str().unwrap()),
        ],
    );
    let file = t.write(".mcp.json", &text);
    let (wrapped, stderr) = wrap_idempotent_and_undoable(&t, &file, &[]);
    assert!(stderr.contains("Claude Code config"), "{stderr}");
    let v = parse(&wrapped);
    let s = &v["mcpServers"];
    // "." next to .mcp.json, and ${HOME}/repo, which exists here.
    assert_eq!(
        strs(&s["filesystem"]["args"])[..6],
        ["run", "--root", ".", "--root", "${HOME}/repo", "--"]
    );
    assert_eq!(s["filesystem"]["env"], json!({}));
    assert_eq!(
        strs(&s["fake"]["args"]),
        [
            "run",
            "--env",
            "FAKE_TOOLS",
            "--env",
            "MEMORY_FILE_PATH",
            "--root",
            data.to_str().unwrap(),
            "--",
            "/usr/local/bin/fake",
            "--data-dir",
            data.to_str().unwrap()
        ]
    );
    assert_eq!(s["api"]["type"], "http");
    assert!(s["api"].get("command").is_none());
}

#[test]
fn roots_the_policy_refuses_and_refused_env_keys_are_reported_not_written() {
    let t = tree();
    let text = json!({"mcpServers": {"s": {
        "command": "node",
        "args": ["server.js", t.home.join(".ssh"), t.notes],
        "env": {"NODE_OPTIONS": "--max-old-space-size=4096"}
    }}})
    .to_string();
    let file = t.write(".mcp.json", &text);
    let (wrapped, stderr) = t.wrap(&[file.to_str().unwrap(), "--rootfence", ROOTFENCE]);
    let args = strs(&parse(&wrapped)["mcpServers"]["s"]["args"]);
    let ssh = t.home.join(".ssh").display().to_string();
    assert!(
        !args[..args.iter().position(|a| a == "--").unwrap()].contains(&ssh),
        "{args:?}"
    );
    assert!(args.contains(&t.notes.display().to_string()));
    assert!(
        stderr.contains(&format!(
            "server \"s\": {ssh} not made a root: ~/.ssh is a dot-directory of the home"
        )) && stderr.contains("the policy refuses it as a root too (inside denied path ~/.ssh"),
        "{stderr}"
    );
    assert!(
        stderr.contains("WARNING: env NODE_OPTIONS is refused by policy built-in default"),
        "{stderr}"
    );

    // With a policy that names it, no warning.
    let p = t.policy(
        "node.toml",
        "[env]\npass = [\"PATH\", \"HOME\", \"NODE_OPTIONS\"]\n",
    );
    let (_, stderr) = t.wrap(&[
        file.to_str().unwrap(),
        "--rootfence",
        ROOTFENCE,
        "--policy-for",
        &format!("s={}", p.display()),
    ]);
    assert!(!stderr.contains("WARNING"), "{stderr}");
}

#[test]
fn in_place_keeps_a_backup_and_the_mode_and_refuses_a_different_backup() {
    let t = tree();
    let original = t.fixture("claude_desktop_config.json", &[]);
    let file = t.write("claude_desktop_config.json", &original);
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let f = file.to_str().unwrap();
    let backup = t
        .project
        .join("claude_desktop_config.json.rootfence-backup");

    let (stdout, stderr) = t.wrap(&[f, "--in-place", "--rootfence", ROOTFENCE]);
    assert!(stdout.is_empty(), "nothing on stdout with --in-place");
    assert!(stderr.contains("rootfence-backup"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&backup).unwrap(), original);
    let wrapped = std::fs::read_to_string(&file).unwrap();
    assert_eq!(
        parse(&wrapped)["mcpServers"]["memory"]["command"],
        ROOTFENCE
    );
    for p in [&file, &backup] {
        let mode = std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", p.display());
    }
    // No temporary file left beside it.
    let names: Vec<String> = std::fs::read_dir(&t.project)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");

    // Again: nothing to change, nothing written.
    let (_, stderr) = t.wrap(&[f, "--in-place", "--rootfence", ROOTFENCE]);
    assert!(stderr.contains("nothing to change"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), wrapped);

    // Undo in place: the original value, the backup untouched.
    t.wrap(&[f, "--in-place", "--undo", "--rootfence", ROOTFENCE]);
    assert_eq!(
        parse(&std::fs::read_to_string(&file).unwrap()),
        parse(&original)
    );
    assert_eq!(std::fs::read_to_string(&backup).unwrap(), original);

    // The user edits the file; a new wrap would overwrite the backup of
    // the earlier original: refused without --force.
    let edited = original.replace("Ctrl+Space", "Ctrl+Alt+Space");
    std::fs::write(&file, &edited).unwrap();
    let out = t.rootfence(&["wrap", f, "--in-place", "--rootfence", ROOTFENCE]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("differs from the file") && err.contains("--force"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        edited,
        "file untouched"
    );
    assert_eq!(std::fs::read_to_string(&backup).unwrap(), original);
    t.wrap(&[f, "--in-place", "--force", "--rootfence", ROOTFENCE]);
    assert_eq!(std::fs::read_to_string(&backup).unwrap(), edited);
}

#[test]
fn in_place_writes_through_a_symlink() {
    let t = tree();
    let real = t.base.join("dotfiles.mcp.json");
    std::fs::write(
        &real,
        r#"{"mcpServers": {"t": {"command": "uvx", "args": ["x"]}}}"#,
    )
    .unwrap();
    let link = t.project.join(".mcp.json");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    t.wrap(&[
        link.to_str().unwrap(),
        "--in-place",
        "--rootfence",
        ROOTFENCE,
    ]);
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(
        parse(&std::fs::read_to_string(&real).unwrap())["mcpServers"]["t"]["command"],
        ROOTFENCE
    );
}

#[test]
fn errors_name_the_file_the_reason_and_the_fix() {
    let t = tree();
    let fail = |args: &[&str], code: i32, want: &[&str]| {
        let out = t.rootfence(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
        for w in want {
            assert!(err.contains(w), "{args:?}: {w:?} not in {err}");
        }
        assert!(out.stdout.is_empty());
    };
    let ambiguous = t.write("servers.json", r#"{"mcpServers": {}}"#);
    fail(
        &["wrap", ambiguous.to_str().unwrap()],
        1,
        &[
            "servers.json",
            "Claude Desktop, Cursor and Claude Code",
            "--format",
        ],
    );
    let commented = t.write(
        "claude_desktop_config.json",
        "{\n  // a comment\n  \"mcpServers\": {}\n}\n",
    );
    fail(
        &["wrap", commented.to_str().unwrap()],
        1,
        &[
            "claude_desktop_config.json",
            "not valid JSON at line 2",
            "Claude Desktop reads JSON",
        ],
    );
    let good = t.write(".mcp.json", r#"{"mcpServers": {"a": {"command": "x"}}}"#);
    fail(
        &[
            "wrap",
            good.to_str().unwrap(),
            "--policy-for",
            "b=/nonexistent.toml",
        ],
        2,
        &["/nonexistent.toml"],
    );
    let p = t.policy("ok.toml", "version = 1\n");
    fail(
        &[
            "wrap",
            good.to_str().unwrap(),
            "--policy-for",
            &format!("b={}", p.display()),
        ],
        2,
        &[".mcp.json", "no server named b", "servers: a"],
    );
    fail(
        &["wrap", good.to_str().unwrap(), "--format", "vscode"],
        1,
        &["no servers object", "VS Code"],
    );
    fail(
        &["wrap", t.project.join("missing.json").to_str().unwrap()],
        1,
        &["missing.json", "cannot read"],
    );
}

/// What Claude Code does to a value from `.mcp.json`: `${VAR}` and
/// `${VAR:-default}` expanded from its environment.
fn expand(s: &str, env: &[(&str, &str)]) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i]);
        let end = rest[i..].find('}').unwrap() + i;
        let inner = &rest[i + 2..end];
        let (name, default) = inner.split_once(":-").unwrap_or((inner, ""));
        let v = env
            .iter()
            .find(|(k, _)| *k == name)
            .map_or(default, |(_, v)| v);
        out.push_str(v);
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out
}

/// A wrapped server launched as a host launches it: its command and args
/// from the rewritten JSON (host variables expanded from `host_env`), its
/// `env` on top of the host's own environment, MCP over stdio, initialized.
struct Hosted {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    stdout: BufReader<std::process::ChildStdout>,
    stderr: Option<std::thread::JoinHandle<String>>,
    id: u64,
}

impl Hosted {
    fn launch(server: &Value, host_env: &[(&str, &str)], cwd: &Path) -> Hosted {
        let command = server["command"].as_str().unwrap();
        let args: Vec<String> = strs(&server["args"])
            .iter()
            .map(|a| expand(a, host_env))
            .collect();
        // The host is a process of its own environment (`host_env`, a
        // shell here) that starts the entry's command with the entry's
        // `env` added, as hosts do.
        let mut cmd = Command::new("/bin/sh");
        cmd.arg("-c")
            .arg("\"$@\"; exit $?")
            .arg("sh")
            .arg("/usr/bin/env");
        if let Some(env) = server["env"].as_object() {
            for (k, v) in env {
                cmd.arg(format!("{k}={}", expand(v.as_str().unwrap(), host_env)));
            }
        }
        cmd.arg(command)
            .args(&args)
            .env_clear()
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in host_env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut stderr_pipe = child.stderr.take().unwrap();
        let stderr = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = stderr_pipe.read_to_string(&mut s);
            s
        });
        let mut h = Hosted {
            child,
            stdin,
            stdout,
            stderr: Some(stderr),
            id: 0,
        };
        h.send(
            json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"claude-code","version":"1"}}}),
        );
        assert_eq!(h.recv()["result"]["serverInfo"]["name"], "fake");
        h.send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
        h
    }

    fn send(&mut self, v: Value) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{v}").unwrap();
        stdin.flush().unwrap();
    }

    /// The next message, past rootfence's own warnings to the host.
    fn recv(&mut self) -> Value {
        loop {
            let mut line = String::new();
            assert!(
                self.stdout.read_line(&mut line).unwrap() > 0,
                "rootfence closed stdout"
            );
            let v = serde_json::from_str::<Value>(&line).unwrap();
            if v["method"] != "notifications/message" || v["params"]["logger"] != "rootfence" {
                break v;
            }
        }
    }

    /// Call a tool of the fake server: its text and whether it is an error.
    fn call(&mut self, tool: &str, args: Value) -> (String, bool) {
        self.id += 1;
        let id = self.id;
        self.send(
            json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool,"arguments":args}}),
        );
        let r = self.recv();
        (
            r["result"]["content"][0]["text"]
                .as_str()
                .unwrap_or("")
                .to_string(),
            r["result"]["isError"] == json!(true),
        )
    }

    /// Close the server's stdin as a host does: the session ends, and
    /// successfully; rootfence's stderr.
    fn end(mut self) -> String {
        drop(self.stdin.take());
        let status = self.child.wait().unwrap();
        let stderr = self.stderr.take().unwrap().join().unwrap();
        assert!(status.success(), "{status:?}: {stderr}");
        stderr
    }
}

/// The wrapped Claude Code config's server, launched as the host launches
/// it: its command and args from the rewritten JSON, its env on top of the
/// host's, MCP over stdio. The `--env` variables reach the server, others
/// do not; the root inferred from its arguments is writable, and a
/// directory beside it is not.
#[test]
fn a_wrapped_claude_code_server_runs_as_the_host_launches_it() {
    let t = tree();
    let data = t.base.join("data");
    let outside = t.base.join("outside");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let text = t.fixture(
        "claude-code.mcp.json",
        &[
            ("@FAKE@", fake_server().to_str().unwrap()),
            ("@DATA@", data.to_str().unwrap()),
        ],
    );
    let file = t.write(".mcp.json", &text);
    // The default --rootfence: this very binary.
    let (wrapped, _) = t.wrap(&[file.to_str().unwrap()]);
    let server = parse(&wrapped)["mcpServers"]["fake"].clone();
    let command = server["command"].as_str().unwrap().to_string();
    assert_eq!(
        Path::new(&command),
        std::fs::canonicalize(env!("CARGO_BIN_EXE_rootfence")).unwrap()
    );
    // The host's own environment (Claude Code was started from a shell).
    let host_env = [
        ("PATH", "/usr/bin:/bin"),
        ("HOME", t.home.to_str().unwrap()),
        ("SHELL", "/bin/bash"),
        ("ANTHROPIC_API_KEY", "host-secret"),
    ];
    let mut h = Hosted::launch(&server, &host_env, &t.project);
    let memory = data.join("memory.json");
    assert_eq!(
        h.call("env", json!({"name": "MEMORY_FILE_PATH"})),
        (memory.display().to_string(), false)
    );
    assert_eq!(
        h.call("env", json!({"name": "FAKE_TOOLS"})),
        ("extra".into(), false)
    );
    // Not in the server's env block: stays with the host.
    assert_eq!(
        h.call("env", json!({"name": "ANTHROPIC_API_KEY"})),
        ("(unset)".into(), false)
    );
    // The root from --data-dir is enforced: writable, its sibling is not.
    let m = memory.display().to_string();
    assert_eq!(
        h.call("write", json!({"path": m, "text": "{}"})),
        ("ok".into(), false)
    );
    assert_eq!(std::fs::read_to_string(&memory).unwrap(), "{}");
    let o = outside.join("x.json");
    let (text, is_error) = h.call(
        "write",
        json!({"path": o.display().to_string(), "text": "{}"}),
    );
    assert!(is_error, "{text}");
    assert!(!o.exists());
    // The host closes the server's stdin: the session ends.
    let stderr = h.end();
    // run's one warning about what did not reach the server: the host's
    // setting, not the shell's.
    let warning = stderr
        .lines()
        .find(|l| l.contains("not passed to the server"))
        .unwrap_or_else(|| panic!("no warning: {stderr}"));
    assert!(warning.contains("ANTHROPIC_API_KEY"), "{warning}");
    assert!(!warning.contains("SHELL"), "{warning}");
    assert!(!warning.contains("host-secret"), "{warning}");
    assert_eq!(
        stderr.matches("not passed to the server").count(),
        1,
        "{stderr}"
    );
}

/// The `--root`s a wrapped server got (the args before `--`).
fn roots_of(args: &[String]) -> Vec<String> {
    let end = args.iter().position(|a| a == "--").unwrap();
    args[..end]
        .windows(2)
        .filter(|w| w[0] == "--root")
        .map(|w| w[1].clone())
        .collect()
}

#[test]
fn data_files_and_env_paths_become_roots_never_code_or_system_directories() {
    let t = tree();
    let data = t.base.join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("app.db"), b"").unwrap();
    let code = t.base.join("srv");
    std::fs::create_dir_all(&code).unwrap();
    std::fs::write(code.join("index.js"), "#!/usr/bin/env node\n").unwrap();
    let vault = t.base.join("vault-to-be");
    let text = json!({"mcpServers": {
        // mcp-alchemy: the database in a URL of its environment.
        "alchemy": {"command": "uvx", "args": ["mcp-alchemy"],
                    "env": {"DB_URL": format!("sqlite:///{}/app.db", data.display())}},
        // duckdb: a database that does not exist yet, in a missing directory.
        "duck": {"command": "uvx", "args": ["mcp-server-duckdb", "--db-path",
                 t.base.join("newdir/x.duckdb").display().to_string()]},
        // A cloned server's own script: code, never a writable root.
        "cloned": {"command": "node", "args": [code.join("index.js").display().to_string()]},
        // System directories are never roots.
        "sys": {"command": "srv", "args": ["/usr/share/dict/words", "/etc"],
                "env": {"CONFIG_DIR": "/etc/srv"}},
        // A vault that does not exist yet.
        "obsidian": {"command": "npx", "args": ["-y", "obsidian-mcp", vault.display().to_string()]},
        // A path in env whose name says nothing is noted, not rooted.
        "git": {"command": "node", "args": ["dist/index.js"],
                "env": {"GIT_BASE_DIR": t.notes.display().to_string(),
                        "SOMETHING": t.projects.display().to_string()}}
    }})
    .to_string();
    let file = t.write("claude_desktop_config.json", &text);
    let (wrapped, stderr) = t.wrap(&[file.to_str().unwrap(), "--rootfence", ROOTFENCE]);
    let v = parse(&wrapped);
    let s = &v["mcpServers"];
    let roots = |name: &str| roots_of(&strs(&s[name]["args"]));
    assert_eq!(roots("alchemy"), [data.display().to_string()], "{stderr}");
    assert!(roots("duck").is_empty(), "{stderr}");
    assert!(stderr.contains("does not exist yet"), "{stderr}");
    assert!(roots("cloned").is_empty(), "{stderr}");
    assert!(stderr.contains("is code the server runs"), "{stderr}");
    assert!(roots("sys").is_empty(), "{stderr}");
    assert!(stderr.contains("is a system directory"), "{stderr}");
    assert!(roots("obsidian").is_empty(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "not a root: {} (its arguments) does not exist yet",
            vault.display()
        )),
        "{stderr}"
    );
    assert_eq!(roots("git"), [t.notes.display().to_string()], "{stderr}");
    assert!(stderr.contains("env SOMETHING names a path"), "{stderr}");
    assert!(!vault.exists() && !t.base.join("newdir").exists());

    // With --create-roots the missing directories are created and rooted.
    let (wrapped, stderr) = t.wrap(&[
        file.to_str().unwrap(),
        "--rootfence",
        ROOTFENCE,
        "--create-roots",
    ]);
    let v = parse(&wrapped);
    let s = &v["mcpServers"];
    let roots = |name: &str| roots_of(&strs(&s[name]["args"]));
    assert_eq!(
        roots("duck"),
        [t.base.join("newdir").display().to_string()],
        "{stderr}"
    );
    assert_eq!(roots("obsidian"), [vault.display().to_string()], "{stderr}");
    assert!(vault.is_dir() && t.base.join("newdir").is_dir());
    // Still never code or a system directory.
    assert!(roots("cloned").is_empty() && roots("sys").is_empty());
}

#[test]
fn a_server_naming_no_directory_under_claude_desktop_is_told_how_to_get_a_root() {
    let t = tree();
    let text = json!({"mcpServers": {
        "commander": {"command": "npx", "args": ["-y", "@wonderwhy-er/desktop-commander"]},
        "other": {"command": "npx", "args": ["-y", "other"]}
    }})
    .to_string();
    let file = t.write("claude_desktop_config.json", &text);
    let (wrapped, stderr) = t.wrap(&[file.to_str().unwrap(), "--rootfence", ROOTFENCE]);
    assert!(roots_of(&strs(&parse(&wrapped)["mcpServers"]["commander"]["args"])).is_empty());
    assert!(
        stderr.contains("no root: nothing in its arguments or env names a directory, and Claude Desktop declares no roots")
            && stderr.contains("--root-for NAME=DIR"),
        "{stderr}"
    );
    // Doing as it says gives that server, and only it, the root.
    let spec = format!("commander={}", t.projects.display());
    let (wrapped, stderr) = t.wrap(&[
        file.to_str().unwrap(),
        "--rootfence",
        ROOTFENCE,
        "--root-for",
        &spec,
    ]);
    let v = parse(&wrapped);
    assert_eq!(
        roots_of(&strs(&v["mcpServers"]["commander"]["args"])),
        [t.projects.display().to_string()],
        "{stderr}"
    );
    assert!(roots_of(&strs(&v["mcpServers"]["other"]["args"])).is_empty());
    // --root gives every server one; a system directory never.
    let (wrapped, stderr) = t.wrap(&[
        file.to_str().unwrap(),
        "--rootfence",
        ROOTFENCE,
        "--root",
        t.notes.to_str().unwrap(),
        "--root",
        "/etc",
    ]);
    let v = parse(&wrapped);
    for name in ["commander", "other"] {
        assert_eq!(
            roots_of(&strs(&v["mcpServers"][name]["args"])),
            [t.notes.display().to_string()],
            "{stderr}"
        );
    }
    assert!(
        stderr.contains("not a root: /etc (given) is a system directory"),
        "{stderr}"
    );
    // A name the config does not have is an error naming the servers.
    let out = t.rootfence(&["wrap", file.to_str().unwrap(), "--root-for", "nope=/tmp"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--root-for nope: no server named nope (servers: commander, other)"),
        "{err}"
    );
}

/// The places in a temporary home that programs outside the sandbox read
/// or run: what a server's README may name as its data directory.
struct Home {
    t: Tree,
    /// A directory on the user's PATH outside the home.
    tools_bin: PathBuf,
    /// The PATH wrap runs with.
    path: String,
}

fn home() -> Home {
    let t = tree();
    for d in [
        ".config/autostart",
        ".config/systemd/user",
        ".local/bin",
        "data",
        "mcp-data",
    ] {
        std::fs::create_dir_all(t.home.join(d)).unwrap();
    }
    for f in [".bashrc", ".profile"] {
        std::fs::write(t.home.join(f), "# start-up file\n").unwrap();
    }
    let tools_bin = t.base.join("tools/bin");
    std::fs::create_dir_all(&tools_bin).unwrap();
    let path = format!("{}:/usr/bin:/bin", tools_bin.display());
    Home { t, tools_bin, path }
}

/// Every argument a README may dictate that names a place programs outside
/// the sandbox read or run (the home, its dot-directories, a PATH
/// directory, a shell start-up file) is declined with one line naming the
/// server, the argument, why and the flag; the data places beside them
/// still become roots; the same places given with wrap's --root-for or
/// --root become roots.
#[test]
fn wrap_makes_roots_only_of_data_places() {
    let h = home();
    let t = &h.t;
    let tools_bin = h.tools_bin.display().to_string();
    let text = json!({"mcpServers": {
        "autostart": {"command": "uvx", "args": ["srv"],
                      "env": {"DATA_DIR": "~/.config/autostart"}},
        "bin": {"command": "uvx", "args": ["srv", "--cache-dir", "~/.local/bin"]},
        "systemd": {"command": "uvx", "args": ["srv"],
                    "env": {"DB_URL": "sqlite:///~/.config/systemd/user/x.db"}},
        "home": {"command": "npx", "args": ["-y", "srv", "~"]},
        "homeabs": {"command": "npx", "args": ["-y", "srv", t.home.display().to_string()]},
        "pathdir": {"command": "npx", "args": ["-y", "srv", tools_bin]},
        "bashrc": {"command": "npx", "args": ["-y", "srv", "--rc", "~/.bashrc"]},
        "profile": {"command": "npx", "args": ["-y", "srv", "--init=~/.profile"]},
        "newapp": {"command": "uvx", "args": ["srv"],
                   "env": {"APP_DIR": "~/.config/newapp"}},
        // The allowed twins: data places in the home.
        "data": {"command": "uvx", "args": ["srv", "--db-path", "~/data/x.db"]},
        "mcpdata": {"command": "uvx", "args": ["srv"], "env": {"DATA_DIR": "~/mcp-data"}}
    }})
    .to_string();
    let file = t.write("claude_desktop_config.json", &text);
    let f = file.to_str().unwrap();
    let home_abs = t.home.display().to_string();
    // (server, argument, the root it would have been, why); the home
    // holds ~/.ssh, so the policy refuses it too and no flag is offered.
    let declined = [
        (
            "autostart",
            "DATA_DIR=~/.config/autostart",
            "~/.config/autostart",
            "inside ~/.config",
        ),
        (
            "bin",
            "--cache-dir ~/.local/bin",
            "~/.local/bin",
            "inside ~/.local",
        ),
        (
            "systemd",
            "DB_URL=sqlite:///~/.config/systemd/user/x.db",
            "~/.config/systemd/user",
            "inside ~/.config",
        ),
        ("home", "~", "~", "the home directory"),
        ("homeabs", home_abs.as_str(), "~", "the home directory"),
        (
            "pathdir",
            tools_bin.as_str(),
            tools_bin.as_str(),
            "on your PATH",
        ),
        ("bashrc", "--rc ~/.bashrc", "~", "shell start-up file"),
        ("profile", "--init=~/.profile", "~", "shell start-up file"),
        (
            "newapp",
            "APP_DIR=~/.config/newapp",
            "~/.config/newapp",
            "inside ~/.config",
        ),
    ];
    let check = |create: bool| {
        let mut args = vec![f, "--rootfence", ROOTFENCE];
        if create {
            args.push("--create-roots");
        }
        let (wrapped, stderr) = t.wrap_with_path(&args, Some(&h.path));
        let v = parse(&wrapped);
        let roots = |name: &str| roots_of(&strs(&v["mcpServers"][name]["args"]));
        for (name, arg, place, why) in declined {
            assert!(
                roots(name).is_empty(),
                "{name}: {:?}\n{stderr}",
                roots(name)
            );
            let line = stderr
                .lines()
                .find(|l| l.contains(&format!("server \"{name}\": {arg} not made a root: ")))
                .unwrap_or_else(|| panic!("{name}: no line for {arg}:\n{stderr}"));
            assert!(line.contains(why), "{line}");
            if place == "~" {
                assert!(
                    line.contains("; the policy refuses it as a root too ("),
                    "{line}"
                );
            } else {
                assert!(
                    line.ends_with(&format!("pass --root-for {name}={place}")),
                    "{line}"
                );
            }
        }
        assert_eq!(roots("data"), ["~/data"], "{stderr}");
        assert_eq!(roots("mcpdata"), ["~/mcp-data"], "{stderr}");
        assert!(!stderr.contains("\"data\": ") && !stderr.contains("\"mcpdata\": "));
    };
    check(false);
    // --create-roots creates no declined place.
    check(true);
    assert!(!t.home.join(".config/newapp").exists());

    // The user states it: the place becomes a root, without a line.
    let autostart = t.home.join(".config/autostart").display().to_string();
    let local_bin = t.home.join(".local/bin").display().to_string();
    let (wrapped, stderr) = t.wrap_with_path(
        &[
            f,
            "--rootfence",
            ROOTFENCE,
            "--root-for",
            "autostart=~/.config/autostart",
            "--root",
            &local_bin,
        ],
        Some(&h.path),
    );
    let v = parse(&wrapped);
    let roots = |name: &str| roots_of(&strs(&v["mcpServers"][name]["args"]));
    assert!(roots("autostart").contains(&autostart), "{stderr}");
    assert!(roots("bin").contains(&local_bin), "{stderr}");
    assert!(
        !stderr.contains("DATA_DIR=~/.config/autostart not made a root")
            && !stderr.contains("--cache-dir ~/.local/bin not made a root"),
        "{stderr}"
    );
    assert!(
        stderr.contains("server \"home\": ~ not made a root"),
        "{stderr}"
    );
}

/// A wrapped server whose README names an autostart directory, the
/// directory of the user's own commands (~/.local/bin) and a data
/// directory, launched as the host launches it: it writes its data, and
/// the autostart entry and the command it tries to plant are not created
/// in the real home.
#[test]
fn a_wrapped_server_cannot_plant_an_autostart_entry_or_a_command() {
    let h = home();
    let t = &h.t;
    let text = json!({"mcpServers": {"fake": {
        "command": fake_server().display().to_string(),
        "args": ["--cache-dir", "~/.local/bin", "--data-dir", "~/mcp-data"],
        "env": {"DATA_DIR": "~/.config/autostart"}
    }}})
    .to_string();
    let file = t.write(".mcp.json", &text);
    let (wrapped, stderr) = t.wrap_with_path(&[file.to_str().unwrap()], Some(&h.path));
    let server = parse(&wrapped)["mcpServers"]["fake"].clone();
    assert_eq!(roots_of(&strs(&server["args"])), ["~/mcp-data"], "{stderr}");
    let host_env = [
        ("PATH", h.path.as_str()),
        ("HOME", t.home.to_str().unwrap()),
    ];
    let mut s = Hosted::launch(&server, &host_env, &t.project);
    let data = t.home.join("mcp-data/memory.json");
    assert_eq!(
        s.call(
            "write",
            json!({"path": data.display().to_string(), "text": "{}"})
        ),
        ("ok".into(), false)
    );
    assert_eq!(std::fs::read_to_string(&data).unwrap(), "{}");
    for planted in [".config/autostart/x.desktop", ".local/bin/ls"] {
        let p = t.home.join(planted);
        let (text, is_error) = s.call(
            "write",
            json!({"path": p.display().to_string(), "text": "#!/bin/sh\nexec evil\n"}),
        );
        assert!(is_error, "{planted}: {text}");
        assert!(!p.exists(), "{planted} was created in the real home");
    }
    s.end();
}
