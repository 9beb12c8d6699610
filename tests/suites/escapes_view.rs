// The cases of the `escapes_view` suites, included by tests/escapes/main.rs
// as `view` (run by root) and `view_user` (run by an unprivileged user):
// what only the server's own filesystem view closes.

use common::{SECRET, content, python};

#[test]
fn metadata_outside_the_roots_cannot_be_changed() {
    let t = tree();
    let key = t.home.join(".ssh/id_rsa");
    std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let secret = t.outside.join("secret");
    let before = std::fs::metadata(&secret).unwrap();
    t.py(
        &[],
        &format!(
            "check('chmod_key', lambda p: os.chmod(p, 0o644), path='{key}')\n\
             check('stat_key', lambda p: os.stat(p), path='{key}')\n\
             check('utime', lambda p: os.utime(p, (0, 0)), path='{s}')\n\
             check('chmod_outside', lambda p: os.chmod(p, 0o640), path='{s}')\n\
             check('chmod_inside', lambda: (write('{r}/tool', '#!/bin/sh'), os.chmod('{r}/tool', 0o755)))\n\
             check('utime_inside', lambda: os.utime('{r}/tool', (0, 0)))\n\
             check('stat_inside', lambda: os.stat('{r}/tool'))",
            key = key.display(),
            s = secret.display(),
            r = t.r.display()
        ),
    )
    .refused("chmod_key")
    .refused("stat_key")
    .refused("utime")
    .refused("chmod_outside")
    .allowed("chmod_inside")
    .allowed("utime_inside")
    .allowed("stat_inside");
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&key).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600, "the key's mode changed");
    let after = std::fs::metadata(&secret).unwrap();
    assert_eq!(
        (
            before.modified().unwrap(),
            std::os::unix::fs::PermissionsExt::mode(&before.permissions())
        ),
        (
            after.modified().unwrap(),
            std::os::unix::fs::PermissionsExt::mode(&after.permissions())
        )
    );
}

#[test]
fn a_read_only_root_keeps_its_modes_and_times() {
    let t = tree();
    let f = t.ro.join("file");
    let before = std::fs::metadata(&f).unwrap();
    t.py(
        &[],
        &format!(
            "check('chmod', lambda: os.chmod('{f}', 0o777))\n\
             check('utime', lambda: os.utime('{f}', (0, 0)))\n\
             check('read', lambda: read('{f}'))\n\
             check('chmod_rw', lambda: os.chmod('{r}/inside', 0o640))\n\
             check('utime_rw', lambda: os.utime('{r}/inside', (0, 0)))",
            f = f.display(),
            r = t.r.display()
        ),
    )
    .refused("chmod")
    .refused("utime")
    .allowed("read")
    // The same changes in the read-write root.
    .allowed("chmod_rw")
    .allowed("utime_rw");
    let after = std::fs::metadata(&f).unwrap();
    assert_eq!(before.permissions(), after.permissions());
    assert_eq!(before.modified().unwrap(), after.modified().unwrap());
}

#[test]
fn directories_that_are_not_granted_cannot_be_watched() {
    // inotify reports the names of files created in a watched directory;
    // Landlock does not rule on inotify_add_watch.
    let t = tree();
    t.py(
        &[],
        &format!(
            "import ctypes\n\
             libc = ctypes.CDLL(None, use_errno=True)\n\
             fd = libc.inotify_init1(0)\n\
             def watch(p):\n\
             \x20   if libc.inotify_add_watch(fd, p.encode(), 0x100) < 0:\n\
             \x20       raise OSError(ctypes.get_errno(), 'watch')\n\
             check('ssh', lambda p: watch(p), path='{ssh}')\n\
             check('outside', lambda p: watch(p), path='{o}')\n\
             check('home', lambda: watch('{h}'))\n\
             check('root', lambda: watch('{r}'))\n\
             print('home_holds=' + ','.join(sorted(os.listdir('{h}'))))",
            ssh = t.home.join(".ssh").display(),
            o = t.outside.display(),
            h = t.home.display(),
            r = t.r.display()
        ),
    )
    .refused("ssh")
    .refused("outside")
    // The home directory in the view is the server's private one: watching
    // it tells nothing of the real one.
    .expect("home", "OK")
    .expect("home_holds", "")
    .allowed("root");
}

#[test]
fn code_in_a_root_cannot_be_run_through_the_loader_or_a_memfd() {
    // exec_in_roots = false (the default): execve of a file in a root is
    // refused by Landlock; the dynamic loader mapping it, and a memfd
    // executed with execveat, are refused by the view (noexec mounts and
    // vm.memfd_noexec).
    let t = tree();
    std::fs::copy("/bin/true", t.r.join("prog")).unwrap();
    std::fs::set_permissions(
        t.r.join("prog"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let ld = ["/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .expect("the dynamic loader of this machine");
    let p = t.py(
        &[],
        &format!(
            "import subprocess\n\
             def run(argv):\n\
             \x20   r = subprocess.run(argv, capture_output=True)\n\
             \x20   if r.returncode != 0:\n\
             \x20       raise OSError(13, r.stderr.decode())\n\
             check('exec', lambda: run(['{r}/prog']))\n\
             check('ld_so', lambda: run(['{ld}', '{r}/prog']))\n\
             def memfd():\n\
             \x20   fd = os.memfd_create('x', 0)\n\
             \x20   os.write(fd, open('/bin/true', 'rb').read())\n\
             \x20   pid = os.fork()\n\
             \x20   if pid == 0:\n\
             \x20       try:\n\
             \x20           os.execve(fd, ['x'], {{}})\n\
             \x20       except OSError as e:\n\
             \x20           os._exit(e.errno)\n\
             \x20   _, st = os.waitpid(pid, 0)\n\
             \x20   if os.waitstatus_to_exitcode(st) != 0:\n\
             \x20       raise OSError(os.waitstatus_to_exitcode(st), 'memfd exec')\n\
             check('memfd', memfd)\n\
             check('system', lambda: run(['/bin/true']))",
            r = t.r.display()
        ),
    );
    p.refused("exec").expect("system", "OK");
    assert_ne!(p.value("ld_so"), "OK", "the loader mapped code from a root");
    // vm.memfd_noexec needs the machine's root; as another user the memfd
    // stays executable (doctor says so).
    if t.runner().0 == 0 {
        assert_ne!(p.value("memfd"), "OK", "a memfd was executed");
    }
}

#[test]
fn the_view_shows_the_grants_and_nothing_else() {
    let t = tree();
    let out = t.run(
        &[],
        &[
            python().to_str().unwrap(),
            "-c",
            &format!(
                "import os\n\
                 print('root_in_view=' + str(os.path.isdir('{r}')))\n\
                 print('outside_in_view=' + str(os.path.exists('{o}')))\n\
                 print('home_holds=' + ','.join(sorted(os.listdir('{h}'))))\n\
                 print('etc_shadow=' + str(os.path.exists('/etc/shadow')))\n\
                 print('usr=' + str(os.path.isdir('/usr/bin')))",
                r = t.r.display(),
                o = t.outside.display(),
                h = t.home.display()
            ),
        ],
    );
    let p = common::Probe::new(out);
    p.expect("root_in_view", "True")
        .expect("outside_in_view", "False")
        // The home directory is a private one, holding nothing of the
        // real one (.ssh, .bashrc).
        .expect("home_holds", "")
        .expect("etc_shadow", "False")
        .expect("usr", "True");
    assert_eq!(content(&t.outside.join("secret")), SECRET);
}

#[test]
fn version_control_and_editor_metadata_in_a_root_stays_the_users() {
    // A writable root holding a git repository: `git status` outside runs
    // .git/config's core.fsmonitor; hooks run on commit; editors run
    // .vscode tasks; direnv loads .envrc. The server may still commit.
    let t = tree();
    assert!(t.git(&t.r, &["init", "-q"]).status.success());
    std::fs::create_dir_all(t.r.join(".vscode")).unwrap();
    std::fs::write(t.r.join(".vscode/settings.json"), "{}").unwrap();
    std::fs::write(t.r.join(".envrc"), "").unwrap();
    std::fs::write(t.r.join("tracked"), "v1").unwrap();
    assert!(t.git(&t.r, &["add", "tracked"]).status.success());
    let marker = t.outside.join("fsmonitor-ran");
    let config_before = std::fs::read_to_string(t.r.join(".git/config")).unwrap();
    let r = t.r.display().to_string();
    let p = t.py(
        &[],
        &format!(
            "import subprocess\n\
             check('config', lambda: write('{r}/.git/config', '[core]\\n\\tfsmonitor = touch {m}\\n', 'a'))\n\
             check('hook', lambda: write('{r}/.git/hooks/post-checkout', '#!/bin/sh\\ntouch {m}\\n'))\n\
             check('rename_git', lambda: os.rename('{r}/.git', '{r}/.git-old'))\n\
             check('vscode', lambda: write('{r}/.vscode/settings.json', '{{\"x\": 1}}'))\n\
             check('envrc', lambda: write('{r}/.envrc', 'touch {m}'))\n\
             def commit():\n\
             \x20   r = subprocess.run(['git', '-c', 'user.name=s', '-c', 'user.email=s@example.com', 'commit', '-qm', 'by the server'], cwd='{r}', capture_output=True, env={{'PATH': '/usr/bin:/bin', 'HOME': '{r}', 'GIT_CONFIG_NOSYSTEM': '1'}})\n\
             \x20   if r.returncode != 0:\n\
             \x20       raise OSError(1, r.stderr.decode())\n\
             check('commit', commit)\n\
             check('work', lambda: write('{r}/tracked', 'v2'))",
            m = marker.display()
        ),
    );
    p.refused("config")
        .refused("hook")
        .expect_any("rename_git", &["EBUSY", "EACCES", "EPERM", "EROFS"])
        .refused("vscode")
        .refused("envrc")
        .expect("commit", "OK")
        .expect("work", "OK");
    assert_eq!(
        std::fs::read_to_string(t.r.join(".git/config")).unwrap(),
        config_before
    );
    assert!(t.git(&t.r, &["status", "--short"]).status.success());
    assert!(
        !marker.exists(),
        "a command planted by the server ran outside"
    );
    let log = t.git(&t.r, &["log", "--oneline"]);
    assert!(String::from_utf8_lossy(&log.stdout).contains("by the server"));
}

#[test]
fn a_protected_path_swapped_while_the_view_is_built_mounts_nothing_outside() {
    // Another server of the same root (here one without namespaces, where
    // nothing pins .git) swaps R/sub/.git with a symlink to a directory
    // outside, over and over (RENAME_EXCHANGE), while new servers of the
    // root are launched. Each launch must either be refused or show the
    // real .git read-only: never the outside directory, never a writable
    // .git.
    let t = tree();
    let sub = t.r.join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    assert!(t.git(&sub, &["init", "-q"]).status.success());
    let target = t.outside.join("target");
    std::fs::create_dir_all(&target).unwrap();
    std::fs::write(target.join("config"), SECRET).unwrap();
    std::os::unix::fs::symlink("../../outside/target", sub.join("evil")).unwrap();
    let stop = t.r.join("stop-swapping");
    let swapper_policy = t.p("swapper.toml");
    std::fs::write(
        &swapper_policy,
        "version = 1\n[roots]\nvcs = \"warn\"\n[isolation]\nnamespaces = \"off\"\n",
    )
    .unwrap();
    let swapper = t
        .as_runner(t.rootfence_command().args(["exec", "--policy"]))
        .arg(&swapper_policy)
        .arg("--root")
        .arg(&t.r)
        .args(["--", python().to_str().unwrap(), "-c"])
        .arg(format!(
            "import ctypes, os\n\
             libc = ctypes.CDLL(None, use_errno=True)\n\
             a, b = b'{s}/.git', b'{s}/evil'\n\
             n = 0\n\
             import random, time\n\
             while not os.path.exists('{stop}'):\n\
             \x20   libc.renameat2(-100, a, -100, b, 2)\n\
             \x20   n += 1\n\
             \x20   # Each state held a moment, so that launches meet both,\n\
             \x20   # and the changes between their checks.\n\
             \x20   time.sleep(random.random() * 0.001)\n\
             # Leave the real .git in place.\n\
             if os.path.islink(a):\n\
             \x20   libc.renameat2(-100, a, -100, b, 2)\n\
             print('swaps', n)",
            s = sub.display(),
            stop = stop.display()
        ))
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let launches: usize = std::env::var("ROOTFENCE_RACE_LAUNCHES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(150);
    let (mut refused, mut protected) = (0, 0);
    for _ in 0..launches {
        let p = t.py(
            &[],
            &format!(
                "check('read', lambda: read('{s}/.git/config'))\n\
                 print('outside=' + str(read('{s}/.git/config') == '{SECRET}') if os.path.exists('{s}/.git/config') else 'outside=False')\n\
                 check('write', lambda: write('{s}/.git/config', 'planted', 'a'))",
                s = sub.display()
            ),
        );
        if !p.out.status.success() {
            // The launch saw the swap and refused to start.
            refused += 1;
            continue;
        }
        assert_eq!(
            p.value("outside"),
            "False",
            "the outside directory was mounted at .git"
        );
        assert_ne!(
            p.value("write"),
            "OK",
            "a protected .git/config was writable"
        );
        protected += 1;
    }
    std::fs::write(&stop, "").unwrap();
    let out = swapper.wait_with_output().unwrap();
    let swaps = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        swaps.starts_with("swaps "),
        "the swapper did not run: {swaps} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        content(&target.join("config")),
        SECRET,
        "the outside directory was written"
    );
    assert!(protected > 0, "no launch got through ({refused} refused)");
    eprintln!("{launches} launches: {protected} protected, {refused} refused; {swaps}");
}

#[test]
fn a_git_directory_is_read_only_but_for_what_git_writes_in_normal_work() {
    // The allow-list: objects, refs, logs, index, HEAD and the like stay
    // writable (the server can commit, fetch, merge); every other entry
    // that exists (configuration, redirects, hooks, info, alternates) is
    // read-only, whatever its name.
    let t = tree();
    assert!(t.git(&t.r, &["init", "-q"]).status.success());
    std::fs::create_dir_all(t.r.join(".git/modules/sub")).unwrap();
    std::fs::write(t.r.join(".git/modules/sub/config"), "[core]\n").unwrap();
    std::fs::create_dir_all(t.r.join(".git/worktrees/w")).unwrap();
    std::fs::write(t.r.join(".git/objects/info/alternates"), "").unwrap();
    std::fs::write(t.r.join(".git/some-future-file"), "").unwrap();
    let r = t.r.display().to_string();
    t.py(
        &[],
        &format!(
            "check('modules_config', lambda: write('{r}/.git/modules/sub/config', '[core]\\n\\tfsmonitor = x\\n', 'a'))\n\
             check('worktree', lambda: write('{r}/.git/worktrees/w/commondir', '../..'))\n\
             check('alternates', lambda: write('{r}/.git/objects/info/alternates', '/tmp/x'))\n\
             check('description', lambda: write('{r}/.git/description', 'x'))\n\
             check('info_exclude', lambda: write('{r}/.git/info/exclude', 'x', 'a'))\n\
             check('unknown', lambda: write('{r}/.git/some-future-file', 'x'))\n\
             check('head', lambda: write('{r}/.git/HEAD', read('{r}/.git/HEAD')))\n\
             check('object', lambda: write('{r}/.git/objects/info/commit-graph-test', 'x'))\n\
             check('ref', lambda: write('{r}/.git/refs/heads/by-server', '0' * 40))\n\
             check('lock', lambda: (write('{r}/.git/index.lock', ''), os.unlink('{r}/.git/index.lock')))"
        ),
    )
    .refused("modules_config")
    .refused("worktree")
    .refused("alternates")
    .refused("description")
    .refused("info_exclude")
    .refused("unknown")
    .expect("head", "OK")
    .expect("object", "OK")
    .expect("ref", "OK")
    .expect("lock", "OK");
    assert_eq!(content(&t.r.join(".git/modules/sub/config")), "[core]\n");
    assert_eq!(content(&t.r.join(".git/objects/info/alternates")), "");
}
