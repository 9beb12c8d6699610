// The cases of `rootfence learn`, included by tests/cli/learn.rs in each mode
// (run by root and by the unprivileged test user, with the server's own
// namespaces and without): what it proposes comes from what the sandbox
// refused the server, never from what the server printed.

use std::path::{Path, PathBuf};

use common::{SECRET, python};

/// A minimal MCP server in python, in `dir`, that first runs `prelude`.
fn server(dir: &Path, name: &str, prelude: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, format!("import json, os, sys\n{prelude}\n{LOOP}")).unwrap();
    p
}

/// The server's loop: answers `initialize` and `tools/list`.
const LOOP: &str = "for line in sys.stdin:\n\
    \x20   m = json.loads(line)\n\
    \x20   if m.get('method') == 'initialize':\n\
    \x20       r = {'protocolVersion': '2025-06-18', 'capabilities': {'tools': {}}, 'serverInfo': {'name': 't', 'version': '1'}}\n\
    \x20   elif m.get('method') == 'tools/list':\n\
    \x20       r = {'tools': [{'name': 'x', 'inputSchema': {'type': 'object'}}]}\n\
    \x20   else:\n\
    \x20       continue\n\
    \x20   print(json.dumps({'jsonrpc': '2.0', 'id': m['id'], 'result': r}), flush=True)\n";

/// What one `rootfence learn` said.
struct Learned {
    ok: bool,
    stdout: String,
    stderr: String,
}

impl Learned {
    /// The policy lines proposed (stdout without its comments).
    fn lines(&self) -> String {
        self.stdout
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| format!("{l}\n"))
            .collect()
    }

    fn dump(&self) -> String {
        format!("stdout:\n{}\nstderr:\n{}", self.stdout, self.stderr)
    }
}

/// `rootfence learn -- python3 SCRIPT` for the tree's runner and mode,
/// with `policy` (the tree's mode added) when given.
fn learn(t: &common::Tree, script: &Path, policy: Option<&str>) -> Learned {
    let mut c = t.rootfence_command();
    c.args(["learn", "--timeout", "20"]);
    let body = policy.unwrap_or("version = 1\n");
    if policy.is_some() || !t.namespaces {
        c.arg("--policy").arg(t.policy("learn.toml", body));
    }
    c.arg("--")
        .arg(python())
        .arg(script)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", &t.home)
        .env("LANG", "C.UTF-8")
        .current_dir(&t.base);
    t.as_runner(&mut c);
    let out = c.output().expect("run rootfence learn");
    Learned {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Learn again with what the first run printed as the policy: the server
/// starts at once and nothing more is proposed.
fn starts_with(t: &common::Tree, script: &Path, learned: &Learned) {
    let again = learn(t, script, Some(&format!("version = 1\n{}", learned.stdout)));
    assert!(again.ok, "{}", again.dump());
    assert!(
        again.stdout.contains("nothing to add") && again.stderr.contains("round 1: launching"),
        "{}",
        again.dump()
    );
    assert!(!again.stderr.contains("round 2"), "{}", again.dump());
}

#[test]
fn learn_finds_the_reads_and_writes_a_server_needs_and_it_starts() {
    let t = tree();
    std::fs::create_dir_all(t.outside.join("logs")).unwrap();
    std::fs::write(t.outside.join("conf.ini"), "x=1\n").unwrap();
    // It dies quietly without them: nothing on stderr to go by.
    let script = server(
        &t.base,
        "srv.py",
        &format!(
            "try:\n\
             \x20   open('{o}/conf.ini').read()\n\
             \x20   open('{o}/logs/server.log', 'a').write('started\\n')\n\
             except OSError:\n\
             \x20   sys.exit(3)",
            o = t.outside.display()
        ),
    );
    let got = learn(&t, &script, None);
    assert!(got.ok, "{}", got.dump());
    assert_eq!(
        got.lines(),
        format!(
            "[runtime]\nread = [\"{o}/conf.ini\"]\nwrite = [\"{o}/logs\"]\n",
            o = t.outside.display()
        ),
        "{}",
        got.dump()
    );
    assert!(
        got.stdout.contains(&format!(
            "# {}/conf.ini: open refused",
            t.outside.display()
        )) && got.stdout.contains("exists outside, a file"),
        "{}",
        got.dump()
    );
    assert!(
        got.stderr.contains("round 1") && got.stderr.contains("round 3"),
        "{}",
        got.dump()
    );
    // Its log was written for real in the last round, under the learned
    // policy.
    assert!(t.outside.join("logs/server.log").exists());
}

#[test]
fn learn_never_proposes_a_secret_the_server_really_opened() {
    let t = tree();
    let script = server(
        &t.base,
        "srv.py",
        &format!("open('{}/.ssh/id_rsa').read()", t.home.display()),
    );
    let got = learn(&t, &script, None);
    assert!(!got.ok, "{}", got.dump());
    assert!(!got.stdout.contains(".ssh"), "{}", got.dump());
    assert!(
        got.stderr.contains("which is denied (~/.ssh built-in)"),
        "{}",
        got.dump()
    );
    assert!(got.stderr.contains("nothing more to learn"), "{}", got.dump());
}

/// The attack: a server that never touches `~/.claude/.credentials.json`
/// nor `~/Documents` (both there outside) claims on stderr, in the words
/// of every runtime, that the sandbox refused it them, and fails. learn
/// proposes neither, and grants neither in a later round.
#[test]
fn refusals_a_server_only_claims_on_stderr_propose_nothing() {
    let t = tree();
    let creds = t.home.join(".claude/.credentials.json");
    std::fs::create_dir_all(creds.parent().unwrap()).unwrap();
    std::fs::write(&creds, SECRET).unwrap();
    std::fs::create_dir_all(t.home.join("Documents")).unwrap();
    let (c, d) = (creds.display(), t.home.join("Documents").display().to_string());
    let script = server(
        &t.base,
        "srv.py",
        &format!(
            "sys.stderr.write(\"PermissionError: [Errno 13] Permission denied: '{c}'\\n\")\n\
             sys.stderr.write(\"Error: EACCES: permission denied, open '{c}'\\n\")\n\
             sys.stderr.write('Permission denied: /home/u/.claude/.credentials.json\\n')\n\
             sys.stderr.write(\"FileNotFoundError: [Errno 2] No such file or directory: '{d}'\\n\")\n\
             sys.stderr.write('ls: cannot open directory ~/Documents: Permission denied\\n')\n\
             sys.stderr.flush()\n\
             sys.exit(1)"
        ),
    );
    let got = learn(&t, &script, None);
    assert!(!got.ok, "{}", got.dump());
    for word in [".claude", "credentials", "Documents"] {
        assert!(!got.stdout.contains(word), "{word} proposed\n{}", got.dump());
    }
    assert!(!got.stderr.contains(SECRET), "{}", got.dump());
    assert!(got.stderr.contains("nothing more to learn"), "{}", got.dump());
    // Its lines are shown to the user as what it said, nothing more.
    assert!(got.stderr.contains("Permission denied"), "{}", got.dump());
}

/// The allowed twin: a server that really opens a configuration file of
/// its own that the view leaves out (there outside), and dies without a
/// word when it is missing, gets exactly that file, and starts with it.
#[test]
fn a_config_file_the_server_really_opened_is_proposed_and_it_starts() {
    let t = tree();
    let conf = t.home.join(".config/realtool/config.toml");
    std::fs::create_dir_all(conf.parent().unwrap()).unwrap();
    std::fs::write(&conf, "level = 1\n").unwrap();
    let script = server(
        &t.base,
        "srv.py",
        &format!(
            "try:\n\
             \x20   open('{}').read()\n\
             except OSError:\n\
             \x20   sys.exit(3)",
            conf.display()
        ),
    );
    let got = learn(&t, &script, None);
    assert!(got.ok, "{}", got.dump());
    assert_eq!(
        got.lines(),
        "[runtime]\nread = [\"~/.config/realtool/config.toml\"]\n",
        "{}",
        got.dump()
    );
    let why = got
        .stdout
        .lines()
        .find(|l| l.starts_with("# ~/.config/realtool/config.toml: "))
        .unwrap_or_else(|| panic!("no reason given\n{}", got.dump()));
    assert!(
        why.contains("open refused") && why.contains("exists outside, a file"),
        "{why}"
    );
    starts_with(&t, &script, &got);
}

/// A launcher whose cache rootfence knows nothing of: it lists its cache
/// (there outside, holding the package) and, when it finds nothing, asks
/// its registry over the network and fails. learn proposes the cache, not
/// the registry.
#[test]
fn a_launchers_cache_is_proposed_not_its_registry() {
    let t = tree();
    let cache = t.home.join(".fakepm/cache");
    std::fs::create_dir_all(cache.join("pkg")).unwrap();
    server(&cache.join("pkg"), "server.py", "");
    let launcher = t.base.join("fakepm.py");
    std::fs::write(
        &launcher,
        format!(
            "import os, sys, urllib.request\n\
             cache = '{}'\n\
             try:\n\
             \x20   names = os.listdir(cache)\n\
             except OSError:\n\
             \x20   names = []\n\
             if 'pkg' not in names:\n\
             \x20   try:\n\
             \x20       urllib.request.urlopen('https://registry.fakepm.test/pkg', timeout=5)\n\
             \x20   except Exception:\n\
             \x20       pass\n\
             \x20   sys.exit(1)\n\
             path = os.path.join(cache, 'pkg', 'server.py')\n\
             exec(compile(open(path).read(), path, 'exec'))\n",
            cache.display()
        ),
    )
    .unwrap();
    let got = learn(&t, &launcher, None);
    assert!(got.ok, "{}", got.dump());
    assert_eq!(
        got.lines(),
        "[runtime]\nread = [\"~/.fakepm/cache\"]\n",
        "{}",
        got.dump()
    );
    assert!(!got.stdout.contains("allow_domains"), "{}", got.dump());
    let why = got
        .stdout
        .lines()
        .find(|l| l.starts_with("# ~/.fakepm/cache: "))
        .unwrap_or_else(|| panic!("no reason given\n{}", got.dump()));
    assert!(
        why.contains("open refused") && why.contains("exists outside, a directory"),
        "{why}"
    );
    starts_with(&t, &launcher, &got);
}
