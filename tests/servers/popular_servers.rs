//! Seventeen popular MCP servers that nobody tuned rootfence to, each
//! installed and configured the way its own README tells users to (or, for
//! the package runners below, the way the runner's README runs a package),
//! each launched five ways and made to do real work that is checked on disk
//! (or, for fetch, on the web server's side):
//!
//! - `direct`: the server itself, unfenced, to show that the case works and
//!   that the test can tell;
//! - `root`: `rootfence run --root DIR -- <the README's command>`, the
//!   default policy (fetch: a policy granting the local web server's port);
//! - `host-roots`: `rootfence run -- <command>`, the roots from the host
//!   only (the Python SDK's `ClientSession` declaring DIR);
//! - `claude-desktop`: a `claude_desktop_config.json` with the README's
//!   entry, rewritten by `rootfence wrap`, then launched exactly as the
//!   wrapped entry says, by a host that declares no roots (as Claude Desktop);
//! - `vscode`: the same with a VS Code `mcp.json`, the host declaring DIR
//!   (the workspace folder).
//!
//! The user (its home made by `tests/peers/install.sh` outside the checkout,
//! `rootfence-tests/user` in the home of whoever runs the tests): uv from its
//! standalone installer in `~/.local/bin`, the machine's pyenv Python on the
//! PATH through its shims, `uv tool install`-ed and `uvx`-cached Python
//! servers, `npx -y` servers in `~/.npm`, a pipx-installed server, node
//! projects under `~/src` laid out as cloned, and a FastMCP script run by `uv
//! run --with fastmcp` (what `fastmcp install claude-desktop` writes). Every
//! directory a case uses lies in that home (`~/work/...`), as users' projects
//! do. The unfenced runs get uv's, npm's and pnpm's offline settings so that
//! nothing reaches for the network.
//!
//! The same user also runs a server through each other package runner,
//! each installed from the npm registry, PyPI or crates.io into the home:
//!
//! - `bunx @modelcontextprotocol/server-memory@...` (bun from the `bun`
//!   npm package in `~/.local/lib/node_modules`; bunx installs into and runs
//!   from `~/.bun/install/cache/.bunx-<uid>/<spec>`, filled from
//!   tests/peers/launchers/bunx/bun.lock), its memory file in the root;
//! - `pnpm dlx @modelcontextprotocol/server-filesystem@...` (pnpm from
//!   npm; its store `~/.local/share/pnpm/store`, its dlx installs and
//!   metadata in `~/.cache/pnpm`);
//! - `deno run -A npm:@modelcontextprotocol/server-filesystem@...` (deno
//!   from npm; the npm packages in `~/.cache/deno/npm`);
//! - `pipx run --spec mcp-server-git==... mcp-server-git` (pipx
//!   `pip install --user`-ed; the environment in
//!   `~/.local/share/pipx/.cache`), committing in a repository in the root;
//! - `npx -y mcp-server-sqlite-npx@...`, whose sqlite3 is a native addon
//!   (built by node-gyp at install, in `~/.npm/_npx`);
//! - `rust-mcp-filesystem --allow-write DIR`, `cargo install`-ed into
//!   `~/.cargo/bin`.
//!
//! The launches that fail today are listed in [`EXPECTED_TO_FAIL_TODAY`]
//! with what the user sees. Each listed launch must still fail (with the
//! symptom recorded); a launch that starts working fails the test until it
//! is taken off the list, and a launch not on the list must work. The
//! outcome of every launch is written to
//! `target/popular-servers/<server>.md`.

use crate::peer;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

/// A launch that fails today: which, the text that shows it failed that way
/// (found in the failure's description: the host's error, the server's and
/// rootfence's stderr, the checks' messages; `a|b` when it shows either,
/// as when a server dies at start or at its first call depending on when
/// it first touches what it cannot see), and what the user sees.
struct Expected {
    server: &'static str,
    launch: &'static str,
    symptom: &'static str,
    reason: &'static str,
}

/// Launches that do not work today. Fixes take entries off this list; the
/// test says when one must go.
const EXPECTED_TO_FAIL_TODAY: &[Expected] = &[];

/// Longest a session may take: servers start in seconds; a hang fails the
/// case, not the suite.
const LIMIT: Duration = Duration::from_secs(150);

/// The launchers' offline settings, given to the unfenced launches (the
/// fenced ones get rootfence's own): uv's, npm's and pnpm's. bunx, deno,
/// pipx and cargo's binary need none: they run what their caches hold
/// without asking the registry.
const OFFLINE: &[(&str, &str)] = &[
    ("UV_OFFLINE", "1"),
    ("UV_PYTHON_DOWNLOADS", "never"),
    ("UV_NO_PROGRESS", "1"),
    ("pnpm_config_prefer_offline", "true"),
    ("npm_config_prefer_offline", "true"),
    ("npm_config_update_notifier", "false"),
    ("npm_config_audit", "false"),
    ("npm_config_fund", "false"),
];

// ---- The user and a case's directories

/// The user tests/peers/install.sh made: the home and the PATH.
struct User {
    home: PathBuf,
    path: String,
}

/// The user's home is outside the checkout (`tests/peers/user-home` says
/// where), so that the cases' projects lie where users' do wherever the
/// checkout is: obsidian-mcp refuses a vault under /tmp or under a hidden
/// directory.
fn user() -> User {
    let at = std::fs::read_to_string(peer::installed("user-home")).unwrap();
    let home = PathBuf::from(at.trim());
    assert!(
        home.join(".rootfence-stamp").exists(),
        "{} is not made: run tests/peers/install.sh (scripts/test.sh does)",
        home.display()
    );
    let path = std::fs::read_to_string(home.join(".rootfence-path"))
        .unwrap()
        .trim()
        .to_string();
    User { home, path }
}

/// One launch's directories, in the user's home: the root (a project, a
/// vault), a directory beside it, and where configs go.
struct Case {
    _dir: tempfile::TempDir,
    base: PathBuf,
    root: PathBuf,
    user: User,
    web: Option<Web>,
}

impl Case {
    fn new(server: &Server, launch: &str) -> Case {
        let user = user();
        let work = user.home.join("work");
        std::fs::create_dir_all(&work).unwrap();
        let dir = tempfile::Builder::new()
            .prefix(&format!("{}-{launch}-", server.name))
            .tempdir_in(&work)
            .unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let root = base.join(server.root_name);
        std::fs::create_dir_all(&root).unwrap();
        let web = server.web.then(Web::start);
        Case {
            _dir: dir,
            base,
            root,
            user,
            web,
        }
    }

    fn r(&self, rel: &str) -> String {
        s(&self.root.join(rel))
    }

    fn home(&self, rel: &str) -> String {
        s(&self.user.home.join(rel))
    }

    fn port(&self) -> u16 {
        self.web.as_ref().unwrap().port
    }

    /// `git ARGS` in `dir` as the user (identity from ~/.gitconfig).
    fn git(&self, dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env_clear()
            .env("PATH", &self.user.path)
            .env("HOME", &self.user.home)
            .output()
            .expect("git is required by this test: apt-get install -y git");
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

fn strings(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

// ---- A web server on the loopback for mcp-server-fetch

/// A page with a token only this server serves, at /page.html (and no
/// robots.txt); every request's path is recorded.
struct Web {
    port: u16,
    token: String,
    requests: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
}

impl Web {
    fn start() -> Web {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let token = format!("fetched-through-the-fence-{port}");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (t, r, st) = (token.clone(), requests.clone(), stop.clone());
        std::thread::spawn(move || {
            while !st.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((conn, _)) => {
                        conn.set_nonblocking(false).unwrap();
                        conn.set_read_timeout(Some(Duration::from_secs(10)))
                            .unwrap();
                        let mut reader = BufReader::new(conn);
                        let mut line = String::new();
                        if reader.read_line(&mut line).is_err() {
                            continue;
                        }
                        let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
                        // The rest of the request head.
                        let mut h = String::new();
                        while reader.read_line(&mut h).is_ok_and(|n| n > 2) {
                            h.clear();
                        }
                        r.lock().unwrap().push(path.clone());
                        let (status, body) = if path == "/page.html" {
                            (
                                "200 OK",
                                format!(
                                    "<html><head><title>Fence page</title></head><body>\
                                     <article><h1>A page on the loopback</h1>\
                                     <p>The token is {t}, and this paragraph is long enough \
                                     for a readability filter to keep it as the article's \
                                     content rather than drop it as boilerplate.</p>\
                                     </article></body></html>"
                                ),
                            )
                        } else {
                            ("404 Not Found", "not here".to_string())
                        };
                        let mut conn = reader.into_inner();
                        let _ = write!(
                            conn,
                            "HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\n\
                             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                            body.len()
                        );
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        });
        Web {
            port,
            token,
            requests,
            stop,
        }
    }

    fn served_page(&self) -> bool {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .any(|p| p == "/page.html")
    }
}

impl Drop for Web {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

// ---- Servers

/// A host config's server entry: command, args, env.
struct Config {
    command: String,
    args: Vec<String>,
    env: Vec<(String, String)>,
}

fn config(command: &str, args: &[&str], env: &[(&str, String)]) -> Config {
    Config {
        command: command.into(),
        args: strings(args),
        env: env
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
    }
}

/// One server: how its README configures it, what the case starts with,
/// what the host asks, and what must be true afterwards.
struct Server {
    name: &'static str,
    /// The name of the case's root directory.
    root_name: &'static str,
    /// The server needs the loopback web server.
    web: bool,
    config: fn(&Case) -> Config,
    prepare: fn(&Case),
    steps: fn(&Case) -> Value,
    check: fn(&Case, &peer::HostRun) -> Result<(), String>,
    /// State it keeps in the home (removed before each launch, so that each
    /// is a first start).
    state: &'static [&'static str],
    /// The policy of the fenced launches, when the default does not do.
    policy: Option<fn(&Case) -> String>,
}

fn nothing(_: &Case) {}

/// The `nth` call of `tool`.
fn call<'a>(run: &'a peer::HostRun, tool: &str, nth: usize) -> Result<&'a Value, String> {
    run.steps
        .iter()
        .filter(|s| s["call"] == tool)
        .nth(nth)
        .ok_or_else(|| format!("no answer to {tool} #{nth}"))
}

/// The text of a call that must have worked.
fn ok<'a>(run: &'a peer::HostRun, tool: &str, nth: usize) -> Result<&'a str, String> {
    let c = call(run, tool, nth)?;
    if c["error"] != false {
        return Err(format!("{tool} #{nth} failed: {}", c["text"]));
    }
    Ok(c["text"].as_str().unwrap_or(""))
}

/// A call the server itself must have refused.
fn refused(run: &peer::HostRun, tool: &str, nth: usize) -> Result<(), String> {
    let c = call(run, tool, nth)?;
    if c["error"] != true {
        return Err(format!("{tool} #{nth} was not refused: {}", c["text"]));
    }
    Ok(())
}

fn contains(what: &str, text: &str, needle: &str) -> Result<(), String> {
    if text.contains(needle) {
        Ok(())
    } else {
        Err(format!("{what} lacks {needle:?}: {text}"))
    }
}

fn file(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

fn uvx_python_tool(tool: &str) -> impl Fn(&Case) -> Config {
    let tool = tool.to_string();
    move |c: &Case| config("uvx", &[&tool, "--db-path", &c.r("data.db")], &[])
}

/// Rows of `select body from notes` in an SQLite file, read outside.
fn sqlite_rows(db: &Path) -> Result<String, String> {
    let out = Command::new(peer::python())
        .arg("-c")
        .arg("import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute('select body from notes').fetchall())")
        .arg(db)
        .output()
        .unwrap();
    if !out.status.success() {
        return Err(format!(
            "{}: {}",
            db.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

const SQLITE: Server = Server {
    name: "mcp-server-sqlite",
    root_name: "project",
    web: false,
    config: |c| uvx_python_tool("mcp-server-sqlite")(c),
    prepare: nothing,
    steps: |_| {
        json!([
            {"call": "create_table", "args": {"query": "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)"}},
            {"call": "write_query", "args": {"query": "INSERT INTO notes (body) VALUES ('written by mcp-server-sqlite')"}},
            {"call": "read_query", "args": {"query": "SELECT body FROM notes"}},
        ])
    },
    check: |c, run| {
        ok(run, "create_table", 0)?;
        ok(run, "write_query", 0)?;
        contains(
            "read_query",
            ok(run, "read_query", 0)?,
            "written by mcp-server-sqlite",
        )?;
        let rows = sqlite_rows(&c.root.join("data.db"))?;
        contains("the database file", &rows, "written by mcp-server-sqlite")
    },
    state: &[],
    policy: None,
};

const DUCKDB: Server = Server {
    name: "mcp-server-duckdb",
    root_name: "project",
    web: false,
    config: |c| uvx_python_tool("mcp-server-duckdb")(c),
    prepare: nothing,
    steps: |_| {
        json!([
            {"call": "query", "args": {"query": "CREATE TABLE notes (body VARCHAR)"}},
            {"call": "query", "args": {"query": "INSERT INTO notes VALUES ('written by mcp-server-duckdb')"}},
            {"call": "query", "args": {"query": "SELECT body FROM notes"}},
        ])
    },
    check: |c, run| {
        ok(run, "query", 0)?;
        ok(run, "query", 1)?;
        contains(
            "select",
            ok(run, "query", 2)?,
            "written by mcp-server-duckdb",
        )?;
        // Read the file outside, with the duckdb the tool installed.
        let python = c.home(".local/share/uv/tools/mcp-server-duckdb/bin/python");
        let out = Command::new(python)
            .arg("-c")
            .arg("import duckdb, sys; print(duckdb.connect(sys.argv[1], read_only=True).sql('select body from notes').fetchall())")
            .arg(c.root.join("data.db"))
            .output()
            .unwrap();
        contains(
            "the database file",
            &format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
            "written by mcp-server-duckdb",
        )
    },
    state: &[],
    policy: None,
};

fn fetch_policy(c: &Case) -> String {
    format!("version = 1\n[network]\ntcp_connect = [{}]\n", c.port())
}

const FETCH: Server = Server {
    name: "mcp-server-fetch",
    root_name: "project",
    web: true,
    // `--allow-private-ips`: the server refuses loopback addresses without it.
    config: |_| config("uvx", &["mcp-server-fetch", "--allow-private-ips"], &[]),
    prepare: nothing,
    steps: |c| json!([{"call": "fetch", "args": {"url": format!("http://127.0.0.1:{}/page.html", c.port())}}]),
    check: |c, run| {
        let web = c.web.as_ref().unwrap();
        contains("fetch", ok(run, "fetch", 0)?, &web.token)?;
        if !web.served_page() {
            return Err("the web server never served /page.html".into());
        }
        Ok(())
    },
    state: &[],
    policy: Some(fetch_policy),
};

const SHELL: Server = Server {
    name: "mcp-shell-server",
    root_name: "project",
    web: false,
    config: |_| {
        config(
            "uvx",
            &["mcp-shell-server"],
            &[("ALLOW_COMMANDS", "ls,cat,pwd,grep,wc,touch,find".into())],
        )
    },
    prepare: nothing,
    steps: |c| {
        json!([
            {"call": "shell_execute", "args": {"command": ["touch", "made-by-shell.txt"], "directory": s(&c.root)}},
            {"call": "shell_execute", "args": {"command": ["cat", ">", "shell.txt"], "stdin": "written by mcp-shell-server", "directory": s(&c.root)}},
        ])
    },
    check: |c, run| {
        ok(run, "shell_execute", 0)?;
        ok(run, "shell_execute", 1)?;
        if !c.root.join("made-by-shell.txt").exists() {
            return Err("touch made no made-by-shell.txt in the root".into());
        }
        contains(
            "shell.txt",
            &file(&c.root.join("shell.txt"))?,
            "written by mcp-shell-server",
        )
    },
    state: &[],
    policy: None,
};

const ALCHEMY_VERSION: &str = "mcp-alchemy==2026.10.15.202659";

const ALCHEMY: Server = Server {
    name: "mcp-alchemy",
    root_name: "project",
    web: false,
    // The README's args also have `--refresh-package mcp-alchemy`, which
    // makes uv ask the index at every start: no launch can work offline
    // with it (see `alchemy_as_written_is_not_broken_by_rootfences_settings`).
    config: |c| {
        config(
            "uvx",
            &["--from", ALCHEMY_VERSION, "mcp-alchemy"],
            &[("DB_URL", format!("sqlite:///{}", c.r("alchemy.db")))],
        )
    },
    prepare: nothing,
    steps: |_| {
        json!([
            {"call": "execute_query", "args": {"query": "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)"}},
            {"call": "execute_query", "args": {"query": "INSERT INTO notes (body) VALUES ('written by mcp-alchemy')"}},
            {"call": "all_table_names", "args": {}},
        ])
    },
    check: |c, run| {
        ok(run, "execute_query", 0)?;
        ok(run, "execute_query", 1)?;
        contains("all_table_names", ok(run, "all_table_names", 0)?, "notes")?;
        let rows = sqlite_rows(&c.root.join("alchemy.db"))?;
        contains("the database file", &rows, "written by mcp-alchemy")
    },
    state: &[],
    policy: None,
};

const DESKTOP_COMMANDER: Server = Server {
    name: "desktop-commander",
    root_name: "project",
    web: false,
    config: |_| {
        config(
            "npx",
            &["-y", "@wonderwhy-er/desktop-commander@0.2.52"],
            &[],
        )
    },
    prepare: nothing,
    steps: |c| {
        json!([
            {"call": "write_file", "args": {"path": c.r("commander.txt"), "content": "written by desktop commander"}},
            {"call": "read_file", "args": {"path": c.r("commander.txt")}},
        ])
    },
    check: |c, run| {
        ok(run, "write_file", 0)?;
        contains(
            "read_file",
            ok(run, "read_file", 0)?,
            "written by desktop commander",
        )?;
        contains(
            "commander.txt",
            &file(&c.root.join("commander.txt"))?,
            "written by desktop commander",
        )
    },
    state: &[".claude-server-commander"],
    policy: None,
};

const COMMANDS: Server = Server {
    name: "mcp-server-commands",
    root_name: "project",
    web: false,
    config: |c| config(&c.home("src/mcp-server-commands/build/index.js"), &[], &[]),
    prepare: nothing,
    steps: |c| {
        json!([{"call": "run_command", "args": {
            "command": "echo written by mcp-server-commands > commands.txt",
            "workdir": s(&c.root)}}])
    },
    check: |c, run| {
        ok(run, "run_command", 0)?;
        contains(
            "commands.txt",
            &file(&c.root.join("commands.txt"))?,
            "written by mcp-server-commands",
        )
    },
    state: &[],
    policy: None,
};

const OBSIDIAN: Server = Server {
    name: "obsidian-mcp",
    root_name: "vault",
    web: false,
    config: |c| config("npx", &["-y", "obsidian-mcp@1.0.6", &s(&c.root)], &[]),
    // A vault as Obsidian makes it.
    prepare: |c| {
        std::fs::create_dir_all(c.root.join(".obsidian")).unwrap();
        std::fs::write(c.root.join(".obsidian/app.json"), "{}").unwrap();
        std::fs::write(c.root.join("Welcome.md"), "# Welcome\n").unwrap();
    },
    steps: |_| {
        json!([
            {"call": "list-available-vaults", "args": {}},
            {"call": "create-note", "args": {"vault": "vault", "filename": "fenced.md", "content": "# Fenced\n\nwritten by obsidian-mcp\n"}},
        ])
    },
    check: |c, run| {
        contains(
            "list-available-vaults",
            ok(run, "list-available-vaults", 0)?,
            "vault",
        )?;
        ok(run, "create-note", 0)?;
        contains(
            "fenced.md",
            &file(&c.root.join("fenced.md"))?,
            "written by obsidian-mcp",
        )
    },
    state: &[],
    policy: None,
};

/// The identity the host config gives git-mcp-server (not ~/.gitconfig's).
const GIT_AUTHOR: &str = "Configured Committer <configured@example.com>";

fn git_mcp_env(c: &Case) -> Vec<(&'static str, String)> {
    vec![
        ("MCP_TRANSPORT_TYPE", "stdio".into()),
        ("MCP_LOG_LEVEL", "info".into()),
        ("GIT_BASE_DIR", c.r("repos")),
        ("LOGS_DIR", c.r("repos/logs/git-mcp-server")),
        ("GIT_USERNAME", "Configured Committer".into()),
        ("GIT_EMAIL", "configured@example.com".into()),
        ("GIT_SIGN_COMMITS", "false".into()),
    ]
}

const GIT_MCP: Server = Server {
    name: "git-mcp-server",
    root_name: "project",
    web: false,
    config: |c| {
        config(
            "node",
            &[&c.home("src/git-mcp-server/dist/index.js")],
            &git_mcp_env(c),
        )
    },
    // A repository under GIT_BASE_DIR with a new file, and one in the root
    // but outside GIT_BASE_DIR.
    prepare: |c| {
        for rel in ["repos/app", "other"] {
            let d = c.root.join(rel);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("README.md"), "# app\n").unwrap();
            c.git(&d, &["init", "-q"]);
            c.git(&d, &["add", "README.md"]);
            c.git(&d, &["commit", "-qm", "first commit"]);
        }
        std::fs::write(c.root.join("repos/app/notes.txt"), "notes\n").unwrap();
    },
    steps: |c| {
        json!([
            {"call": "git_set_working_dir", "args": {"path": c.r("repos/app")}},
            {"call": "git_add", "args": {"paths": ["notes.txt"]}},
            {"call": "git_commit", "args": {"message": "notes, by git-mcp-server"}},
            {"call": "git_status", "args": {"path": c.r("other")}},
        ])
    },
    check: |c, run| {
        ok(run, "git_set_working_dir", 0)?;
        ok(run, "git_add", 0)?;
        ok(run, "git_commit", 0)?;
        let last = c.git(
            &c.root.join("repos/app"),
            &["log", "-1", "--format=%an <%ae> %s"],
        );
        if last != format!("{GIT_AUTHOR} notes, by git-mcp-server") {
            return Err(format!(
                "the last commit is {last:?}, not by the configured GIT_USERNAME/GIT_EMAIL"
            ));
        }
        // GIT_BASE_DIR confines it (the server's own refusal: the
        // repository is in the root).
        refused(run, "git_status", 0).map_err(|e| format!("GIT_BASE_DIR not honoured: {e}"))?;
        contains(
            "git_status outside GIT_BASE_DIR",
            call(run, "git_status", 0)?["text"].as_str().unwrap_or(""),
            "escape the defined root directory",
        )
    },
    state: &[],
    policy: None,
};

const MARKITDOWN: Server = Server {
    name: "markitdown-mcp",
    root_name: "project",
    web: false,
    config: |_| config("markitdown-mcp", &[], &[]),
    prepare: |c| {
        std::fs::write(
            c.root.join("report.html"),
            "<html><body><h1>Quarterly report</h1><p>Converted by markitdown from the root.</p></body></html>",
        )
        .unwrap();
    },
    steps: |c| {
        json!([{"call": "convert_to_markdown", "args": {
            "uri": rootfence::roots::path_to_uri(&c.root.join("report.html"))}}])
    },
    check: |_, run| {
        let md = ok(run, "convert_to_markdown", 0)?;
        contains("the markdown", md, "# Quarterly report")?;
        contains("the markdown", md, "Converted by markitdown from the root.")
    },
    state: &[],
    policy: None,
};

const FASTMCP: Server = Server {
    name: "fastmcp-uv-run-with",
    root_name: "project",
    web: false,
    config: |c| {
        config(
            "uv",
            &[
                "run",
                "--with",
                "fastmcp",
                "fastmcp",
                "run",
                &c.home("mcp/notes/server.py"),
            ],
            &[],
        )
    },
    prepare: nothing,
    steps: |c| {
        json!([
            {"call": "add_note", "args": {"path": c.r("notes.txt"), "text": "first note"}},
            {"call": "add_note", "args": {"path": c.r("notes.txt"), "text": "second note"}},
        ])
    },
    check: |c, run| {
        ok(run, "add_note", 1)?;
        let notes = file(&c.root.join("notes.txt"))?;
        if notes != "first note\nsecond note\n" {
            return Err(format!("notes.txt is {notes:?}"));
        }
        Ok(())
    },
    state: &[],
    policy: None,
};

// ---- Servers run by the other package runners, and a Rust binary

/// Tools of the reference filesystem server (and of rust-mcp-filesystem,
/// which keeps its contract): write a file in the root, list the root.
fn fs_steps(c: &Case, name: &str, by: &str) -> Value {
    json!([
        {"call": "write_file", "args": {"path": c.r(name), "content": format!("written by {by}")}},
        {"call": "list_directory", "args": {"path": s(&c.root)}},
    ])
}

fn fs_check(c: &Case, run: &peer::HostRun, name: &str, by: &str) -> Result<(), String> {
    ok(run, "write_file", 0)?;
    contains("list_directory", ok(run, "list_directory", 0)?, name)?;
    contains(
        name,
        &file(&c.root.join(name))?,
        &format!("written by {by}"),
    )
}

const MEMORY_SPEC: &str = "@modelcontextprotocol/server-memory@2026.8.31";
const FILESYSTEM_SPEC: &str = "@modelcontextprotocol/server-filesystem@2026.8.31";

const BUNX_MEMORY: Server = Server {
    name: "server-memory-bunx",
    root_name: "project",
    web: false,
    config: |c| {
        config(
            "bunx",
            &[MEMORY_SPEC],
            &[("MEMORY_FILE_PATH", c.r("memory.jsonl"))],
        )
    },
    prepare: nothing,
    steps: |_| {
        json!([
            {"call": "create_entities", "args": {"entities": [{"name": "rootfence", "entityType": "project", "observations": ["remembered through bunx"]}]}},
            {"call": "read_graph", "args": {}},
        ])
    },
    check: |c, run| {
        ok(run, "create_entities", 0)?;
        contains(
            "read_graph",
            ok(run, "read_graph", 0)?,
            "remembered through bunx",
        )?;
        contains(
            "memory.jsonl",
            &file(&c.root.join("memory.jsonl"))?,
            "remembered through bunx",
        )
    },
    state: &[],
    policy: None,
};

const PNPM_FILESYSTEM: Server = Server {
    name: "server-filesystem-pnpm-dlx",
    root_name: "project",
    web: false,
    config: |c| config("pnpm", &["dlx", FILESYSTEM_SPEC, &s(&c.root)], &[]),
    prepare: nothing,
    steps: |c| fs_steps(c, "pnpm.txt", "pnpm dlx"),
    check: |c, run| fs_check(c, run, "pnpm.txt", "pnpm dlx"),
    state: &[],
    policy: None,
};

const DENO_FILESYSTEM: Server = Server {
    name: "server-filesystem-deno",
    root_name: "project",
    web: false,
    config: |c| {
        config(
            "deno",
            &["run", "-A", &format!("npm:{FILESYSTEM_SPEC}"), &s(&c.root)],
            &[],
        )
    },
    prepare: nothing,
    steps: |c| fs_steps(c, "deno.txt", "deno run"),
    check: |c, run| fs_check(c, run, "deno.txt", "deno run"),
    state: &[],
    policy: None,
};

const PIPX_GIT: Server = Server {
    name: "mcp-server-git-pipx-run",
    root_name: "project",
    web: false,
    config: |c| {
        config(
            "pipx",
            &[
                "run",
                "--spec",
                "mcp-server-git==2026.10.19",
                "mcp-server-git",
                "--repository",
                &s(&c.root),
            ],
            &[],
        )
    },
    // A repository with one commit and a new file.
    prepare: |c| {
        std::fs::write(c.root.join("README.md"), "# project\n").unwrap();
        c.git(&c.root, &["init", "-q"]);
        c.git(&c.root, &["add", "README.md"]);
        c.git(&c.root, &["commit", "-qm", "first commit"]);
        std::fs::write(c.root.join("notes.txt"), "notes\n").unwrap();
    },
    steps: |c| {
        let r = s(&c.root);
        json!([
            {"call": "git_add", "args": {"repo_path": r, "files": ["notes.txt"]}},
            {"call": "git_commit", "args": {"repo_path": r, "message": "notes, by mcp-server-git"}},
        ])
    },
    check: |c, run| {
        ok(run, "git_add", 0)?;
        ok(run, "git_commit", 0)?;
        let last = c.git(&c.root, &["log", "-1", "--format=%an %s"]);
        if last != "Home User notes, by mcp-server-git" {
            return Err(format!("the last commit is {last:?}"));
        }
        Ok(())
    },
    state: &[],
    policy: None,
};

const NPX_SQLITE: Server = Server {
    name: "mcp-server-sqlite-npx",
    root_name: "project",
    web: false,
    config: |c| {
        config(
            "npx",
            &["-y", "mcp-server-sqlite-npx@0.8.0", &c.r("data.db")],
            &[],
        )
    },
    prepare: nothing,
    steps: |_| {
        json!([
            {"call": "create_table", "args": {"query": "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)"}},
            {"call": "write_query", "args": {"query": "INSERT INTO notes (body) VALUES ('written through a native addon')"}},
            {"call": "read_query", "args": {"query": "SELECT body FROM notes"}},
        ])
    },
    check: |c, run| {
        ok(run, "create_table", 0)?;
        ok(run, "write_query", 0)?;
        contains(
            "read_query",
            ok(run, "read_query", 0)?,
            "written through a native addon",
        )?;
        let rows = sqlite_rows(&c.root.join("data.db"))?;
        contains("the database file", &rows, "written through a native addon")
    },
    state: &[],
    policy: None,
};

const CARGO_FILESYSTEM: Server = Server {
    name: "rust-mcp-filesystem",
    root_name: "project",
    web: false,
    config: |c| config("rust-mcp-filesystem", &["--allow-write", &s(&c.root)], &[]),
    prepare: nothing,
    steps: |c| fs_steps(c, "rust.txt", "rust-mcp-filesystem"),
    check: |c, run| fs_check(c, run, "rust.txt", "rust-mcp-filesystem"),
    state: &[],
    policy: None,
};

// ---- Launches

#[derive(Clone, Copy, PartialEq)]
enum Launch {
    Direct,
    Root,
    HostRoots,
    ClaudeDesktop,
    VsCode,
}

const LAUNCHES: [Launch; 5] = [
    Launch::Direct,
    Launch::Root,
    Launch::HostRoots,
    Launch::ClaudeDesktop,
    Launch::VsCode,
];

impl Launch {
    fn name(self) -> &'static str {
        match self {
            Launch::Direct => "direct",
            Launch::Root => "root",
            Launch::HostRoots => "host-roots",
            Launch::ClaudeDesktop => "claude-desktop",
            Launch::VsCode => "vscode",
        }
    }
}

/// What a launch gave: the host's run, or why there is none.
struct Outcome {
    result: Result<(), String>,
    /// rootfence's and the server's stderr.
    stderr: String,
}

fn rootfence() -> String {
    env!("CARGO_BIN_EXE_rootfence").to_string()
}

/// `rootfence run ARGS -- CONFIG`: `--env` for each of the config's
/// variables (what `wrap` writes, and how rootfence's README says to pass a
/// host config's env), `--policy`, then `extra`.
fn fenced(server: &Server, c: &Case, cfg: &Config, extra: &[String]) -> Vec<String> {
    let mut v = vec![rootfence(), "run".into()];
    for (k, _) in &cfg.env {
        v.push("--env".into());
        v.push(k.clone());
    }
    if let Some(policy) = server.policy {
        let p = c.base.join("policy.toml");
        std::fs::write(&p, policy(c)).unwrap();
        v.push("--policy".into());
        v.push(s(&p));
    }
    v.extend(extra.iter().cloned());
    v.push("--".into());
    v.push(cfg.command.clone());
    v.extend(cfg.args.iter().cloned());
    v
}

/// `rootfence wrap FILE` (with the server's policy, if any): the wrapped
/// entry's command, args and env.
fn wrapped(server: &Server, c: &Case, file: &Path, format: &str, key: &str) -> Config {
    let run = |extra: &[String]| {
        let mut cmd = Command::new(rootfence());
        cmd.arg("wrap").arg(file).arg("--format").arg(format);
        if let Some(policy) = server.policy {
            let p = c.base.join("policy.toml");
            std::fs::write(&p, policy(c)).unwrap();
            cmd.arg("--policy").arg(&p);
        }
        let out = cmd
            .args(extra)
            .env_clear()
            .env("PATH", &c.user.path)
            .env("HOME", &c.user.home)
            .current_dir(&c.base)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "wrap {}: {}",
            file.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    };
    let mut out = run(&[]);
    // A server whose configuration names no directory, under a host that
    // declares no roots: wrap says so and how to give it one; the user
    // does as it says.
    if String::from_utf8_lossy(&out.stderr).contains("no root: nothing in its arguments") {
        out = run(&[
            "--root-for".into(),
            format!("{}={}", server.name, c.root.display()),
        ]);
    }
    let text = String::from_utf8(out.stdout).unwrap();
    let v: Value = jsonc_parser::cst::CstRootNode::parse(&text, &Default::default())
        .unwrap()
        .to_serde_value()
        .unwrap();
    let entry = &v[key][server.name];
    let strs = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| a.iter().map(|x| x.as_str().unwrap().to_string()).collect())
            .unwrap_or_default()
    };
    Config {
        command: entry["command"].as_str().unwrap().to_string(),
        args: strs(&entry["args"]),
        env: entry["env"]
            .as_object()
            .map(|o| {
                o.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// The README's entry in a host config file.
fn entry(cfg: &Config, vscode: bool) -> Value {
    let mut e = json!({"command": cfg.command, "args": cfg.args});
    if vscode {
        e["type"] = json!("stdio");
    }
    if !cfg.env.is_empty() {
        e["env"] = cfg
            .env
            .iter()
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect::<serde_json::Map<_, _>>()
            .into();
    }
    e
}

/// Launch `server` one way, in a fresh case: the host runs its steps, and
/// the server's check says whether it did its work.
fn launch(server: &Server, how: Launch) -> Outcome {
    let c = Case::new(server, how.name());
    (server.prepare)(&c);
    for d in server.state {
        let _ = std::fs::remove_dir_all(c.user.home.join(d));
    }
    let cfg = (server.config)(&c);
    let root = rootfence::roots::path_to_uri(&c.root);
    let mut env = json!({"PATH": c.user.path, "HOME": s(&c.user.home), "LANG": "C.UTF-8"});
    let mut roots = json!([[root, "project"]]);
    let (command, extra_env) = match how {
        Launch::Direct => {
            for (k, v) in OFFLINE {
                env[*k] = json!(v);
            }
            let mut v = vec![cfg.command.clone()];
            v.extend(cfg.args.iter().cloned());
            (v, cfg.env.clone())
        }
        Launch::Root => (
            fenced(server, &c, &cfg, &["--root".into(), s(&c.root)]),
            cfg.env.clone(),
        ),
        Launch::HostRoots => (fenced(server, &c, &cfg, &[]), cfg.env.clone()),
        Launch::ClaudeDesktop | Launch::VsCode => {
            let vscode = how == Launch::VsCode;
            let (name, key, format) = if vscode {
                ("mcp.json", "servers", "vscode")
            } else {
                ("claude_desktop_config.json", "mcpServers", "claude-desktop")
            };
            let file = c.base.join(name);
            std::fs::write(
                &file,
                serde_json::to_string_pretty(&json!({key: {server.name: entry(&cfg, vscode)}}))
                    .unwrap(),
            )
            .unwrap();
            let w = wrapped(server, &c, &file, format, key);
            if !vscode {
                // Claude Desktop declares no roots.
                roots = Value::Null;
            }
            let mut v = vec![w.command];
            v.extend(w.args);
            (v, w.env)
        }
    };
    for (k, v) in &extra_env {
        env[k.as_str()] = json!(v);
    }
    let run = peer::try_run_host_within(
        &json!({"command": command, "roots": roots, "env": env, "steps": (server.steps)(&c)}),
        LIMIT,
    );
    match run {
        Err(e) => Outcome {
            result: Err(host_error(&e)),
            stderr: e,
        },
        Ok(run) => {
            let mut result = (server.check)(&c, &run);
            if result.is_ok() && run.summary["sent"] != run.summary["answered"] {
                result = Err(format!("not every request was answered: {}", run.summary));
            }
            Outcome {
                result,
                stderr: run.stderr,
            }
        }
    }
}

/// What a failed host run says in one line: the SDK's error (the last
/// `MCPError`), else the first line.
fn host_error(text: &str) -> String {
    text.lines()
        .rev()
        .find_map(|l| {
            l.split_once("MCPError: ")
                .map(|(_, e)| e.trim().to_string())
        })
        .unwrap_or_else(|| text.lines().next().unwrap_or("").to_string())
}

/// The lines of stderr that say why: rootfence's warnings and errors, and
/// the server's (with the indented lines that continue them), without the
/// host's traceback and the sampling notice every session has.
fn why(stderr: &str) -> String {
    const KEYS: &[&str] = &[
        "rootfence",
        "error",
        "warn",
        "denied",
        "not found",
        "refused",
        "permission",
        "cannot",
        "could not",
    ];
    let noise = |l: &str| {
        let t = l.trim_start();
        l.contains("sampling WITHHELD")
            || t.starts_with('|')
            || t.starts_with('+')
            || t.starts_with("Traceback")
            || t.starts_with("File \"")
            || l.contains("ExceptionGroup")
    };
    let mut kept: Vec<&str> = Vec::new();
    let mut continuation = 0;
    for l in stderr.lines() {
        if noise(l) {
            continuation = 0;
            continue;
        }
        let lower = l.to_ascii_lowercase();
        if KEYS.iter().any(|k| lower.contains(k)) {
            kept.push(l);
            continuation = 4;
        } else if continuation > 0 && (l.starts_with(' ') || l.starts_with('\t')) {
            kept.push(l);
            continuation -= 1;
        } else {
            continuation = 0;
        }
    }
    kept.dedup();
    let n = kept.len();
    kept.into_iter()
        .skip(n.saturating_sub(12))
        .map(|l| l.chars().take(500).collect::<String>())
        .collect::<Vec<_>>()
        .join("\n    ")
}

/// Launch `server` every way; fail with every launch that does not do what
/// [`EXPECTED_TO_FAIL_TODAY`] says.
fn every_launch(server: &Server) {
    let outcomes: Vec<(Launch, Outcome)> =
        LAUNCHES.iter().map(|&l| (l, launch(server, l))).collect();
    judge(
        server.name,
        outcomes
            .into_iter()
            .map(|(l, o)| (l.name().to_string(), o))
            .collect(),
    );
}

/// Compare outcomes with the expectations; write the report; fail with
/// every mismatch.
fn judge(server: &str, outcomes: Vec<(String, Outcome)>) {
    let mut problems = Vec::new();
    let mut report = format!("# {server}\n\n");
    for (launch, o) in &outcomes {
        let expected = EXPECTED_TO_FAIL_TODAY
            .iter()
            .find(|e| e.server == server && e.launch == *launch);
        let status = match &o.result {
            Ok(()) => "works".to_string(),
            Err(e) => format!("FAILS: {e}\n    {}", why(&o.stderr)),
        };
        report.push_str(&format!("- {launch}: {status}\n"));
        match (&o.result, expected) {
            (Ok(()), None) => {}
            (Ok(()), Some(e)) => problems.push(format!(
                "{server} / {launch} works now: take it off EXPECTED_TO_FAIL_TODAY (it was: {})",
                e.reason
            )),
            (Err(err), None) => problems.push(format!(
                "{server} / {launch} fails: {err}\n    {}",
                why(&o.stderr)
            )),
            (Err(err), Some(e)) => {
                if launch == "direct" {
                    problems.push(format!("{server} / direct must work: {err}"));
                } else if !shows(e.symptom, err, &o.stderr) {
                    problems.push(format!(
                        "{server} / {launch} fails, but not as recorded ({:?} not found): {err}\n    {}",
                        e.symptom,
                        why(&o.stderr)
                    ));
                }
            }
        }
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .unwrap()
        .join("popular-servers");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("{server}.md")), &report).unwrap();
    assert!(problems.is_empty(), "{}\n\n{report}", problems.join("\n"));
}

#[test]
fn expected_failures_name_real_cases() {
    let names = [
        SQLITE.name,
        DUCKDB.name,
        FETCH.name,
        SHELL.name,
        ALCHEMY.name,
        DESKTOP_COMMANDER.name,
        COMMANDS.name,
        OBSIDIAN.name,
        GIT_MCP.name,
        MARKITDOWN.name,
        FASTMCP.name,
        BUNX_MEMORY.name,
        PNPM_FILESYSTEM.name,
        DENO_FILESYSTEM.name,
        PIPX_GIT.name,
        NPX_SQLITE.name,
        CARGO_FILESYSTEM.name,
    ];
    for e in EXPECTED_TO_FAIL_TODAY {
        assert!(names.contains(&e.server), "{}", e.server);
        assert!(
            LAUNCHES.iter().any(|l| l.name() == e.launch) || EXTRA_LAUNCHES.contains(&e.launch),
            "{}",
            e.launch
        );
        assert!(e.launch != "direct", "direct launches must work");
        assert!(!e.symptom.is_empty() && !e.reason.is_empty());
    }
}

/// Launches beyond the five, tested by their own functions below.
const EXTRA_LAUNCHES: &[&str] = &["root-without-network", "as-written", "hand-written"];

#[test]
fn sqlite_through_uvx_of_an_installed_tool() {
    every_launch(&SQLITE);
}

#[test]
fn duckdb_through_uvx_of_an_installed_tool() {
    every_launch(&DUCKDB);
}

#[test]
fn fetch_through_uvx() {
    every_launch(&FETCH);
}

/// Under the default policy the server has no network: the fetch is
/// refused, and the web server sees no request for the page; the server
/// itself works (it answers the call).
#[test]
fn fetch_without_network_is_refused() {
    let server = Server {
        policy: None,
        ..FETCH
    };
    let outcome = launch(
        &Server {
            check: |c, run| {
                refused(run, "fetch", 0)?;
                if c.web.as_ref().unwrap().served_page() {
                    return Err("the page was served to a server with no network".into());
                }
                Ok(())
            },
            ..server
        },
        Launch::Root,
    );
    judge_one(FETCH.name, "root-without-network", outcome);
}

/// Whether a failure shows the `symptom` (one of its `|` alternatives).
fn shows(symptom: &str, err: &str, stderr: &str) -> bool {
    symptom
        .split('|')
        .any(|s| err.contains(s) || stderr.contains(s))
}

fn judge_one(server: &str, launch: &str, o: Outcome) {
    let expected = EXPECTED_TO_FAIL_TODAY
        .iter()
        .find(|e| e.server == server && e.launch == launch);
    match (&o.result, expected) {
        (Ok(()), None) => {}
        (Ok(()), Some(e)) => panic!(
            "{server} / {launch} works now: take it off EXPECTED_TO_FAIL_TODAY (it was: {})",
            e.reason
        ),
        (Err(err), None) => panic!("{server} / {launch} fails: {err}\n{}", o.stderr),
        (Err(err), Some(e)) => assert!(
            shows(e.symptom, err, &o.stderr),
            "{server} / {launch} fails, but not as recorded ({:?} not found): {err}\n{}",
            e.symptom,
            o.stderr
        ),
    }
}

#[test]
fn shell_through_uvx() {
    every_launch(&SHELL);
}

#[test]
fn alchemy_through_uvx() {
    every_launch(&ALCHEMY);
}

/// mcp-alchemy's README launches it with `--refresh-package mcp-alchemy`,
/// which asks the package index at every start: with no network it cannot
/// start, fenced or not. What rootfence adds must not make it worse: its
/// `UV_OFFLINE` must not turn the documented flag into a usage error; uv
/// tries the index and is refused (the reason a user can act on).
#[test]
fn alchemy_as_written_is_not_broken_by_rootfences_settings() {
    let server = Server {
        config: |c| {
            config(
                "uvx",
                &[
                    "--from",
                    ALCHEMY_VERSION,
                    "--refresh-package",
                    "mcp-alchemy",
                    "mcp-alchemy",
                ],
                &[("DB_URL", format!("sqlite:///{}", c.r("alchemy.db")))],
            )
        },
        ..ALCHEMY
    };
    let mut o = launch(&server, Launch::Root);
    // It cannot work offline (its tool calls fail: the host may still have
    // been answered initialize, while rootfence waited for its roots): uv
    // must have tried the index for mcp-alchemy (and been refused), not
    // stopped on rootfence's variable.
    let tried_the_index = o.stderr.contains("/simple/mcp-alchemy");
    o.result = match o.result {
        Ok(()) => Err("it started: with no network, uv cannot refresh mcp-alchemy".into()),
        Err(e) if !tried_the_index => Err(format!("uv did not try the index for mcp-alchemy: {e}")),
        Err(_) => Ok(()),
    };
    judge_one(ALCHEMY.name, "as-written", o);
}

#[test]
fn desktop_commander_through_npx() {
    every_launch(&DESKTOP_COMMANDER);
}

#[test]
fn commands_from_a_cloned_projects_script() {
    every_launch(&COMMANDS);
}

#[test]
fn obsidian_through_npx_with_its_vault() {
    every_launch(&OBSIDIAN);
}

#[test]
fn git_mcp_server_from_a_cloned_project() {
    every_launch(&GIT_MCP);
}

/// A hand-written config puts rootfence in front of the server's command
/// and keeps the server's `env` block (GIT_USERNAME, GIT_BASE_DIR, ...),
/// without `--env` flags: the host set those variables for this launch
/// (they are not in its own environment), so they reach the server, which
/// commits as configured.
#[test]
fn git_mcp_server_gets_the_variables_a_hand_written_config_sets() {
    let c = Case::new(&GIT_MCP, "hand-written");
    (GIT_MCP.prepare)(&c);
    let mut env = json!({"PATH": c.user.path, "HOME": s(&c.user.home), "LANG": "C.UTF-8"});
    for (k, v) in git_mcp_env(&c) {
        env[k] = json!(v);
    }
    let command = vec![
        rootfence(),
        "run".into(),
        "--root".into(),
        s(&c.root),
        "--".into(),
        "node".into(),
        c.home("src/git-mcp-server/dist/index.js"),
    ];
    let run = peer::try_run_host_within(
        &json!({"command": command, "roots": [[rootfence::roots::path_to_uri(&c.root), "project"]],
                "env": env, "steps": (GIT_MCP.steps)(&c)}),
        LIMIT,
    );
    let o = match run {
        Err(e) => Outcome {
            result: Err(host_error(&e)),
            stderr: e,
        },
        Ok(run) => Outcome {
            result: (GIT_MCP.check)(&c, &run),
            stderr: run.stderr,
        },
    };
    judge_one(GIT_MCP.name, "hand-written", o);
}

#[test]
fn markitdown_from_pipx() {
    every_launch(&MARKITDOWN);
}

#[test]
fn fastmcp_script_through_uv_run_with() {
    every_launch(&FASTMCP);
}

#[test]
fn memory_through_bunx() {
    every_launch(&BUNX_MEMORY);
}

#[test]
fn filesystem_through_pnpm_dlx() {
    every_launch(&PNPM_FILESYSTEM);
}

#[test]
fn filesystem_through_deno_run_npm() {
    every_launch(&DENO_FILESYSTEM);
}

#[test]
fn git_through_pipx_run() {
    every_launch(&PIPX_GIT);
}

#[test]
fn sqlite_with_a_native_addon_through_npx() {
    every_launch(&NPX_SQLITE);
}

#[test]
fn filesystem_from_cargo_install() {
    every_launch(&CARGO_FILESYSTEM);
}
