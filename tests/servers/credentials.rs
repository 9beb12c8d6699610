//! No server reads a credential or a token under the default policy.
//!
//! A home directory holds what users' homes hold: git credential-store
//! files in both places git looks (`~/.git-credentials`,
//! `~/.config/git/credentials`, with `credential.helper = store`), a token
//! in the userinfo of a `url.<base>.insteadOf` in `~/.gitconfig`, `.netrc`,
//! `.npmrc` with an `_authToken`, `.pypirc`, the GitHub CLI's `hosts.yml`,
//! Docker's `config.json`, and cloud CLIs' credentials (AWS, gcloud, Azure,
//! kubectl). Each file carries a token of its own.
//!
//! Each launcher reads every file, and a file in its root (the allowed
//! twin), the way servers are launched: `node -e`, `npx -y -p <package>
//! node -e` (npx's profile), a venv's python, python3 through pyenv's shims,
//! `uvx --from <tool> python` (uvx's profile), `cat` (a native program),
//! and git's own `git config --global --list` and `git credential fill`.
//! Unfenced, every token is read (the files exist and the probe works);
//! through `rootfence exec` with the default policy, no token may appear in
//! what the program read, and the twin must have been read.
//!
//! The leaks of today are listed in [`EXPECTED_TO_FAIL_TODAY`]: each must
//! still leak (so the list shrinks as fixes land, and the test says when an
//! entry must go); anything else that leaks fails the test.

use crate::peer;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

/// (launcher, secret file as planted under `~`, why it leaks today): none
/// does. A leak found later goes here with its reason until it is fixed.
const EXPECTED_TO_FAIL_TODAY: &[(&str, &str, &str)] = &[];

/// The system PATH (node, npx, git, cat, /usr/bin/python3).
const PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The secrets, each with its token: (path under the home, content).
fn secrets() -> Vec<(&'static str, String)> {
    let t = |name: &str| format!("TOKEN-{name}-7f3a9c");
    vec![
        (
            ".git-credentials",
            format!("https://alice:{}@github.com\n", t("GIT-CREDENTIALS")),
        ),
        (
            ".config/git/credentials",
            format!("https://alice:{}@gitlab.com\n", t("XDG-GIT-CREDENTIALS")),
        ),
        (
            ".gitconfig",
            format!(
                "[user]\n\tname = Alice\n\temail = alice@example.com\n\
                 [credential]\n\thelper = store\n\
                 [url \"https://alice:{}@github.com/\"]\n\tinsteadOf = https://github.com/\n",
                t("GITCONFIG-INSTEADOF")
            ),
        ),
        (
            ".netrc",
            format!(
                "machine api.example.com login alice password {}\n",
                t("NETRC")
            ),
        ),
        (
            ".npmrc",
            format!("//registry.npmjs.org/:_authToken={}\n", t("NPMRC")),
        ),
        (
            ".pypirc",
            format!("[pypi]\nusername = __token__\npassword = {}\n", t("PYPIRC")),
        ),
        (
            ".config/gh/hosts.yml",
            format!(
                "github.com:\n    oauth_token: {}\n    user: alice\n",
                t("GH")
            ),
        ),
        (
            ".docker/config.json",
            format!(
                "{{\"auths\": {{\"https://index.docker.io/v1/\": {{\"auth\": \"{}\"}}}}}}\n",
                t("DOCKER")
            ),
        ),
        (
            ".aws/credentials",
            format!(
                "[default]\naws_access_key_id = AKIAEXAMPLE\naws_secret_access_key = {}\n",
                t("AWS")
            ),
        ),
        (
            ".config/gcloud/application_default_credentials.json",
            format!(
                "{{\"type\": \"authorized_user\", \"refresh_token\": \"{}\"}}\n",
                t("GCLOUD")
            ),
        ),
        (
            ".azure/msal_token_cache.json",
            format!("{{\"AccessToken\": {{\"secret\": \"{}\"}}}}\n", t("AZURE")),
        ),
        (
            ".kube/config",
            format!(
                "apiVersion: v1\nusers:\n- name: alice\n  user:\n    token: {}\n",
                t("KUBE")
            ),
        ),
    ]
}

fn token_of(content: &str) -> &str {
    let start = content.find("TOKEN-").unwrap();
    let end = content[start..].find("-7f3a9c").unwrap() + start + "-7f3a9c".len();
    &content[start..end]
}

/// A home with the secrets, a root with the twin, for one launcher.
struct Home {
    _dir: tempfile::TempDir,
    home: PathBuf,
    root: PathBuf,
}

const TWIN: &str = "twin: a file in the root, readable";

fn home(launcher: &str) -> Home {
    let dir = tempfile::Builder::new()
        .prefix(&format!("rootfence-cred-{launcher}-"))
        .tempdir()
        .unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let (home, root) = (base.join("home"), base.join("project"));
    std::fs::create_dir_all(&root).unwrap();
    for (rel, content) in secrets() {
        let p = home.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, content).unwrap();
    }
    std::fs::write(root.join("twin.txt"), TWIN).unwrap();
    Home {
        _dir: dir,
        home,
        root,
    }
}

/// The files a launcher reads: every secret, then the twin.
fn targets(h: &Home) -> Vec<String> {
    secrets()
        .iter()
        .map(|(rel, _)| h.home.join(rel))
        .chain([h.root.join("twin.txt")])
        .map(|p| p.display().to_string())
        .collect()
}

const NODE_PROBE: &str = "const fs = require('fs'); \
    for (const p of process.argv.slice(1)) { \
      try { console.log(p + '=OK:' + JSON.stringify(fs.readFileSync(p, 'utf8'))); } \
      catch (e) { console.log(p + '=ERR:' + e.code); } }";

const PY_PROBE: &str = r#"
import sys, json
for p in sys.argv[1:]:
    try:
        print(p + '=OK:' + json.dumps(open(p).read()))
    except OSError as e:
        print(p + '=ERR:' + str(e.errno))
"#;

const SH_PROBE: &str = "for f; do if c=$(cat \"$f\" 2>&1); then printf '%s=OK:%s\\n' \"$f\" \"$c\" | head -c 400; echo; \
    else printf '%s=ERR:%s\\n' \"$f\" \"$c\"; fi; done";

/// What the git probes ask git: its global configuration, and the
/// credential helper's answer for two hosts.
const GIT_PROBE: &str = "git config --global --list; \
    printf 'protocol=https\\nhost=github.com\\n\\n' | git credential fill; \
    printf 'protocol=https\\nhost=gitlab.com\\n\\n' | git credential fill; \
    cat \"$1\"";

fn npm_spec() -> String {
    let name = "@modelcontextprotocol/server-memory";
    format!("{name}@{}", peer::locked_version(name))
}

fn pyenv_shims() -> PathBuf {
    let root = std::env::var_os("PYENV_ROOT")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".pyenv")))
        .unwrap();
    let shims = root.join("shims");
    assert!(
        shims.join("python3").exists(),
        "pyenv's shims/python3 is required by this test and is missing from {}: install pyenv, or set PYENV_ROOT",
        shims.display()
    );
    shims
}

/// A launcher: its argv for the files, and its environment beyond PATH and
/// HOME.
struct Launcher {
    name: &'static str,
    argv: fn(&[String]) -> Vec<String>,
    env: fn() -> Vec<(String, String)>,
    path: fn() -> String,
    /// It reads through git's own means (the answer is not per file).
    git: bool,
}

fn system_path() -> String {
    PATH.into()
}

fn no_env() -> Vec<(String, String)> {
    Vec::new()
}

fn with(first: &[&str], rest: &[String]) -> Vec<String> {
    first
        .iter()
        .map(|s| s.to_string())
        .chain(rest.iter().cloned())
        .collect()
}

const LAUNCHERS: &[Launcher] = &[
    Launcher {
        name: "node",
        argv: |f| with(&["node", "-e", NODE_PROBE], f),
        env: no_env,
        path: system_path,
        git: false,
    },
    Launcher {
        name: "npx",
        argv: |f| {
            let spec = npm_spec();
            with(&["npx", "-y", "-p", &spec, "node", "-e", NODE_PROBE], f)
        },
        env: || {
            let cache = peer::installed(".npm-cache");
            vec![("npm_config_cache".into(), cache.display().to_string())]
        },
        path: system_path,
        git: false,
    },
    Launcher {
        name: "python-venv",
        argv: |f| {
            let py = peer::installed(".venv-servers/bin/python");
            with(&[&py.display().to_string(), "-c", PY_PROBE], f)
        },
        env: no_env,
        path: system_path,
        git: false,
    },
    Launcher {
        name: "python-pyenv",
        argv: |f| with(&["python3", "-c", PY_PROBE], f),
        env: no_env,
        path: || format!("{}:{PATH}", pyenv_shims().display()),
        git: false,
    },
    Launcher {
        name: "uvx",
        argv: |f| {
            peer::installed(".uv-cache/.rootfence-uvx-stamp");
            let uvx = peer::installed(".venv/bin/uvx");
            with(
                &[
                    &uvx.display().to_string(),
                    "--from",
                    "mcp-server-time",
                    "python",
                    "-c",
                    PY_PROBE,
                ],
                f,
            )
        },
        env: || {
            let cache = peer::installed(".uv-cache");
            vec![("UV_CACHE_DIR".into(), cache.display().to_string())]
        },
        path: system_path,
        git: false,
    },
    Launcher {
        name: "cat",
        argv: |f| with(&["/bin/sh", "-c", SH_PROBE, "sh"], f),
        env: no_env,
        path: system_path,
        git: false,
    },
    Launcher {
        name: "git",
        // The twin is the last file.
        argv: |f| with(&["/bin/sh", "-c", GIT_PROBE, "sh"], &f[f.len() - 1..]),
        env: || vec![("GIT_TERMINAL_PROMPT".into(), "0".into())],
        path: system_path,
        git: true,
    },
];

fn run(l: &Launcher, h: &Home, fenced: bool) -> Output {
    let argv = (l.argv)(&targets(h));
    let mut cmd = if fenced {
        let mut c = Command::new(env!("CARGO_BIN_EXE_rootfence"));
        c.arg("exec").arg("--root").arg(&h.root).arg("--");
        c.args(&argv);
        c
    } else {
        let mut c = Command::new(&argv[0]);
        c.args(&argv[1..]);
        c
    };
    cmd.env_clear()
        .env("PATH", (l.path)())
        .env("HOME", &h.home)
        .env("LANG", "C.UTF-8")
        .current_dir(&h.root)
        .stdin(Stdio::null());
    for (k, v) in (l.env)() {
        cmd.env(k, v);
    }
    if !fenced {
        // Both sides read the caches offline, as rootfence's profiles do.
        cmd.env("UV_OFFLINE", "1")
            .env("npm_config_prefer_offline", "true")
            .env("npm_config_update_notifier", "false");
    }
    cmd.output().unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Which secrets' tokens appear in what the program printed.
fn leaked(out: &Output) -> BTreeMap<&'static str, bool> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    secrets()
        .into_iter()
        .map(|(rel, content)| (rel, stdout.contains(token_of(&content))))
        .collect()
}

/// Read every file with `launcher`, unfenced and fenced, and compare the
/// leaks with [`EXPECTED_TO_FAIL_TODAY`].
fn no_token_read_by(name: &str) {
    let l = LAUNCHERS.iter().find(|l| l.name == name).unwrap();
    let h = home(name);

    // Unfenced: the files exist, and the probe reads them.
    let direct = run(l, &h, false);
    let seen = leaked(&direct);
    // git reads only its configuration and its credential stores.
    const GIT_FILES: [&str; 3] = [".git-credentials", ".config/git/credentials", ".gitconfig"];
    let missing: Vec<&str> = seen
        .iter()
        .filter(|(k, v)| !**v && (!l.git || GIT_FILES.contains(k)))
        .map(|(k, _)| *k)
        .collect();
    assert!(
        missing.is_empty(),
        "{name}: unfenced, the probe did not read {missing:?}\n{}",
        text(&direct)
    );
    assert!(
        String::from_utf8_lossy(&direct.stdout).contains(TWIN),
        "{name}: unfenced, the twin was not read\n{}",
        text(&direct)
    );

    // Fenced, with the default policy.
    let fenced = run(l, &h, true);
    let out = String::from_utf8_lossy(&fenced.stdout).into_owned();
    let mut problems = Vec::new();
    if !out.contains(TWIN) {
        let expected = EXPECTED_TO_FAIL_TODAY
            .iter()
            .any(|(n, f, _)| *n == name && *f == "twin");
        if !expected {
            problems.push("the allowed twin (a file in the root) was not read".to_string());
        }
    } else if EXPECTED_TO_FAIL_TODAY
        .iter()
        .any(|(n, f, _)| *n == name && *f == "twin")
    {
        problems
            .push("the twin is read now: take (\"twin\") off EXPECTED_TO_FAIL_TODAY".to_string());
    }
    for (rel, leak) in leaked(&fenced) {
        let expected = EXPECTED_TO_FAIL_TODAY
            .iter()
            .find(|(n, f, _)| *n == name && *f == rel);
        match (leak, expected) {
            (false, None) | (true, Some(_)) => {}
            (true, None) => problems.push(format!("~/{rel}: its token was read")),
            (false, Some((_, _, why))) => problems.push(format!(
                "~/{rel} no longer leaks: take it off EXPECTED_TO_FAIL_TODAY (it was: {why})"
            )),
        }
    }
    assert!(
        problems.is_empty(),
        "{name}, fenced:\n  {}\n{}",
        problems.join("\n  "),
        text(&fenced)
    );
}

#[test]
fn expected_failures_name_real_cases() {
    let files: Vec<&str> = secrets().iter().map(|(r, _)| *r).collect();
    for (launcher, file, why) in EXPECTED_TO_FAIL_TODAY {
        assert!(LAUNCHERS.iter().any(|l| l.name == *launcher), "{launcher}");
        assert!(*file == "twin" || files.contains(file), "{file}");
        assert!(!why.is_empty());
    }
}

#[test]
fn node_reads_no_token() {
    no_token_read_by("node");
}

#[test]
fn npx_reads_no_token() {
    no_token_read_by("npx");
}

#[test]
fn venv_python_reads_no_token() {
    no_token_read_by("python-venv");
}

#[test]
fn pyenv_python_reads_no_token() {
    no_token_read_by("python-pyenv");
}

#[test]
fn uvx_reads_no_token() {
    no_token_read_by("uvx");
}

#[test]
fn cat_reads_no_token() {
    no_token_read_by("cat");
}

#[test]
fn git_reads_no_token() {
    no_token_read_by("git");
}
