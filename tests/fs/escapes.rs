//! Escapes from a filesystem server's root, by class, each next to its
//! allowed twin, run against:
//!
//! - `rootfence fs` with no sandbox around it: every escape refused by the
//!   root handles alone, every twin served;
//! - the reference server's 2025.3.28 release unfenced: the classes it is
//!   known to get wrong (a prefix sibling, a write through a dangling
//!   link, a link swapped in between its check and its use) escape, which
//!   shows these tests see an escape when there is one;
//! - the same release under `rootfence run`: the sandbox holds them all.
//!
//! An escape is judged by the state outside the root (a secret's content
//! in the answer, a file created, moved or changed outside), never by the
//! error text alone.

use crate::fs_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use fs_support::{Client, Fx, SECRET, Server, content};
use serde_json::json;

/// What one case saw.
struct Outcome {
    /// The attack got something from outside the root, or changed it.
    escaped: bool,
    /// The allowed twin did what it asked.
    twin_ok: bool,
    /// What the server answered, for the failure message.
    detail: String,
}

type Case = fn(&Fx, &mut Client) -> Outcome;

/// `read_file` of `attack` and of `twin` (which must give `want`).
fn read_pair(c: &mut Client, attack: &str, twin: &str, want: &str) -> Outcome {
    let a = c.call("read_file", json!({"path": attack}));
    let t = c.call("read_file", json!({"path": twin}));
    Outcome {
        escaped: a.text.contains(SECRET),
        twin_ok: !t.error && t.text == want,
        detail: format!("attack {attack}: {a:?}\ntwin {twin}: {t:?}"),
    }
}

fn dotdot(fx: &Fx, c: &mut Client) -> Outcome {
    read_pair(
        c,
        &fx.rs("../outside/secret"),
        &fx.rs("sub/../inside"),
        "inside",
    )
}

fn absolute_outside(fx: &Fx, c: &mut Client) -> Outcome {
    let attack = fx.out.join("secret").display().to_string();
    read_pair(c, &attack, &fx.rs("inside"), "inside")
}

fn prefix_sibling_read(fx: &Fx, c: &mut Client) -> Outcome {
    let attack = fx.evil.join("secret").display().to_string();
    read_pair(c, &attack, &fx.rs("inside"), "inside")
}

fn prefix_sibling_write(fx: &Fx, c: &mut Client) -> Outcome {
    let attack = fx.evil.join("new");
    let a = c.call("write_file", json!({"path": attack, "content": "pwned"}));
    let t = c.call(
        "write_file",
        json!({"path": fx.rs("new"), "content": "fine"}),
    );
    Outcome {
        escaped: attack.exists(),
        twin_ok: !t.error && content(&fx.r.join("new")) == "fine",
        detail: format!("{a:?}\n{t:?}"),
    }
}

fn link_out_last(fx: &Fx, c: &mut Client) -> Outcome {
    fx.link(fx.out.join("secret"), "link-out");
    fx.link("inside", "link-in");
    read_pair(c, &fx.rs("link-out"), &fx.rs("link-in"), "inside")
}

fn link_out_at_depth(fx: &Fx, c: &mut Client) -> Outcome {
    fx.link("../../../outside", "a/b/up");
    fx.link("../../sub", "a/b/side");
    read_pair(
        c,
        &fx.rs("a/b/up/secret"),
        &fx.rs("a/b/side/file"),
        "sub file",
    )
}

fn absolute_link_out_at_depth(fx: &Fx, c: &mut Client) -> Outcome {
    fx.link(&fx.out, "a/abs");
    fx.link("../sub", "a/rel");
    read_pair(c, &fx.rs("a/abs/secret"), &fx.rs("a/rel/file"), "sub file")
}

fn dangling_link_write(fx: &Fx, c: &mut Client) -> Outcome {
    let planted = fx.out.join("created");
    fx.link(&planted, "dangling");
    let a = c.call(
        "write_file",
        json!({"path": fx.rs("dangling"), "content": "pwned"}),
    );
    let t = c.call(
        "write_file",
        json!({"path": fx.rs("fresh"), "content": "fine"}),
    );
    Outcome {
        escaped: planted.exists(),
        twin_ok: !t.error && content(&fx.r.join("fresh")) == "fine",
        detail: format!("{a:?}\n{t:?}"),
    }
}

fn dangling_link_at_depth(fx: &Fx, c: &mut Client) -> Outcome {
    let planted = fx.out.join("newdir");
    fx.link(&planted, "dangdir");
    let a = c.call("create_directory", json!({"path": fx.rs("dangdir/x")}));
    let t = c.call("create_directory", json!({"path": fx.rs("sub/made")}));
    Outcome {
        escaped: planted.exists(),
        twin_ok: !t.error && fx.r.join("sub/made").is_dir(),
        detail: format!("{a:?}\n{t:?}"),
    }
}

fn write_through_link(fx: &Fx, c: &mut Client) -> Outcome {
    fx.link(fx.out.join("secret"), "link-out");
    fx.link("inside", "link-in");
    let a = c.call(
        "write_file",
        json!({"path": fx.rs("link-out"), "content": "pwned"}),
    );
    let t = c.call(
        "write_file",
        json!({"path": fx.rs("link-in"), "content": "changed"}),
    );
    Outcome {
        escaped: content(&fx.out.join("secret")) != SECRET,
        twin_ok: !t.error && content(&fx.r.join("inside")) == "changed",
        detail: format!("{a:?}\n{t:?}"),
    }
}

fn edit_through_link(fx: &Fx, c: &mut Client) -> Outcome {
    fx.link(fx.out.join("secret"), "link-out");
    let edit = |from: &str, to: &str| json!([{"oldText": from, "newText": to}]);
    let a = c.call(
        "edit_file",
        json!({"path": fx.rs("link-out"), "edits": edit("SECRET", "pwned")}),
    );
    let t = c.call(
        "edit_file",
        json!({"path": fx.rs("inside"), "edits": edit("inside", "edited")}),
    );
    Outcome {
        escaped: content(&fx.out.join("secret")) != SECRET || a.text.contains(SECRET),
        twin_ok: !t.error && content(&fx.r.join("inside")) == "edited",
        detail: format!("{a:?}\n{t:?}"),
    }
}

fn move_into_link(fx: &Fx, c: &mut Client) -> Outcome {
    fx.link(&fx.out, "dirlink");
    let a = c.call(
        "move_file",
        json!({"source": fx.rs("inside"), "destination": fx.rs("dirlink/stolen")}),
    );
    let t = c.call(
        "move_file",
        json!({"source": fx.rs("sub/file"), "destination": fx.rs("moved")}),
    );
    Outcome {
        escaped: fx.out.join("stolen").exists(),
        twin_ok: !t.error && content(&fx.r.join("moved")) == "sub file",
        detail: format!("{a:?}\n{t:?}"),
    }
}

fn move_out_of_link(fx: &Fx, c: &mut Client) -> Outcome {
    fx.link(&fx.out, "dirlink");
    let a = c.call(
        "move_file",
        json!({"source": fx.rs("dirlink/secret"), "destination": fx.rs("got")}),
    );
    let t = c.call(
        "move_file",
        json!({"source": fx.rs("sub/file"), "destination": fx.rs("moved")}),
    );
    Outcome {
        escaped: fx.r.join("got").exists() || !fx.out.join("secret").exists(),
        twin_ok: !t.error && content(&fx.r.join("moved")) == "sub file",
        detail: format!("{a:?}\n{t:?}"),
    }
}

fn move_from_prefix_sibling(fx: &Fx, c: &mut Client) -> Outcome {
    let a = c.call(
        "move_file",
        json!({"source": fx.evil.join("secret"), "destination": fx.rs("got")}),
    );
    let t = c.call(
        "move_file",
        json!({"source": fx.rs("sub/file"), "destination": fx.rs("moved")}),
    );
    Outcome {
        escaped: fx.r.join("got").exists() || !fx.evil.join("secret").exists(),
        twin_ok: !t.error && content(&fx.r.join("moved")) == "sub file",
        detail: format!("{a:?}\n{t:?}"),
    }
}

fn list_through_link(fx: &Fx, c: &mut Client) -> Outcome {
    fx.link(&fx.out, "dirlink");
    let a = c.call("list_directory", json!({"path": fx.rs("dirlink")}));
    let t = c.call("list_directory", json!({"path": fx.rs("sub")}));
    Outcome {
        escaped: a.text.contains("secret"),
        twin_ok: !t.error && t.text.contains("[FILE] file"),
        detail: format!("{a:?}\n{t:?}"),
    }
}

fn stat_through_link(fx: &Fx, c: &mut Client) -> Outcome {
    fx.link(fx.out.join("secret"), "link-out");
    let a = c.call("get_file_info", json!({"path": fx.rs("link-out")}));
    let t = c.call("get_file_info", json!({"path": fx.rs("inside")}));
    Outcome {
        escaped: !a.error && a.text.contains(&format!("size: {}", SECRET.len())),
        twin_ok: !t.error && t.text.contains("size: 6"),
        detail: format!("{a:?}\n{t:?}"),
    }
}

/// Swap `<r>/swap` between a directory and a link to the outside
/// directory (one `renameat2(RENAME_EXCHANGE)` at a time) until `stop`,
/// then leave the directory at `swap`.
fn swapper(fx: &Fx, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    let r = fx.r.clone();
    std::fs::create_dir_all(r.join("swap")).expect("mkdir");
    std::fs::write(r.join("swap/f"), "swap inside").expect("write");
    std::fs::write(fx.out.join("f"), SECRET).expect("write");
    std::os::unix::fs::symlink(&fx.out, r.join("swap-alt")).expect("symlink");
    std::thread::spawn(move || {
        let dir = std::fs::File::open(&r).expect("open root");
        while !stop.load(Ordering::Relaxed) {
            let _ = rustix::fs::renameat_with(
                &dir,
                "swap",
                &dir,
                "swap-alt",
                rustix::fs::RenameFlags::EXCHANGE,
            );
        }
        if r.join("swap").is_symlink() {
            rustix::fs::renameat_with(
                &dir,
                "swap",
                &dir,
                "swap-alt",
                rustix::fs::RenameFlags::EXCHANGE,
            )
            .expect("swap back");
        }
    })
}

/// How many calls a race case makes at most, and for how long.
const RACE_CALLS: usize = 4000;
const RACE_TIME: Duration = Duration::from_secs(30);

/// Race a link swapped in during the operation: reads of `<r>/swap/f`
/// while `swap` flips between a directory and a link out. The twin: the
/// same read once `swap` stays a directory.
fn swapped_link_read(fx: &Fx, c: &mut Client) -> Outcome {
    let stop = Arc::new(AtomicBool::new(false));
    let t = swapper(fx, stop.clone());
    let started = Instant::now();
    let (mut escaped, mut inside, mut calls) = (false, 0, 0);
    while calls < RACE_CALLS && !escaped && started.elapsed() < RACE_TIME {
        let batch: Vec<(&str, serde_json::Value)> = (0..200)
            .map(|_| ("read_file", json!({"path": fx.rs("swap/f")})))
            .collect();
        for r in c.calls(&batch) {
            escaped |= r.text.contains(SECRET);
            inside += usize::from(!r.error && r.text == "swap inside");
        }
        calls += batch.len();
    }
    stop.store(true, Ordering::Relaxed);
    t.join().expect("swapper");
    let twin = c.call("read_file", json!({"path": fx.rs("swap/f")}));
    Outcome {
        escaped,
        twin_ok: !twin.error && twin.text == "swap inside",
        detail: format!("{calls} reads, {inside} served inside, escaped: {escaped}; twin {twin:?}"),
    }
}

/// The same race for writes: `<r>/swap/w` written while `swap` flips; an
/// escape creates `<outside>/w`.
fn swapped_link_write(fx: &Fx, c: &mut Client) -> Outcome {
    let stop = Arc::new(AtomicBool::new(false));
    let t = swapper(fx, stop.clone());
    let planted = fx.out.join("w");
    let started = Instant::now();
    let (mut inside, mut calls) = (0, 0);
    while calls < RACE_CALLS && !planted.exists() && started.elapsed() < RACE_TIME {
        let batch: Vec<(&str, serde_json::Value)> = (0..200)
            .map(|_| {
                (
                    "write_file",
                    json!({"path": fx.rs("swap/w"), "content": "w"}),
                )
            })
            .collect();
        inside += c.calls(&batch).iter().filter(|r| !r.error).count();
        calls += batch.len();
    }
    stop.store(true, Ordering::Relaxed);
    t.join().expect("swapper");
    let twin = c.call(
        "write_file",
        json!({"path": fx.rs("swap/w2"), "content": "w2"}),
    );
    Outcome {
        escaped: planted.exists(),
        twin_ok: !twin.error && content(&fx.r.join("swap/w2")) == "w2",
        detail: format!("{calls} writes, {inside} succeeded; twin {twin:?}"),
    }
}

/// Every class, by name.
const CASES: &[(&str, Case)] = &[
    ("dotdot", dotdot),
    ("absolute path outside", absolute_outside),
    ("prefix sibling read", prefix_sibling_read),
    ("prefix sibling write", prefix_sibling_write),
    ("symlink out, last component", link_out_last),
    ("symlink out at depth (relative)", link_out_at_depth),
    (
        "symlink out at depth (absolute)",
        absolute_link_out_at_depth,
    ),
    ("dangling symlink, write", dangling_link_write),
    (
        "dangling symlink at depth, create_directory",
        dangling_link_at_depth,
    ),
    ("write through a link", write_through_link),
    ("edit through a link", edit_through_link),
    ("move into a link out", move_into_link),
    ("move out through a link", move_out_of_link),
    ("move from a prefix sibling", move_from_prefix_sibling),
    ("list through a link", list_through_link),
    ("stat through a link", stat_through_link),
    ("link swapped in during a read", swapped_link_read),
    ("link swapped in during a write", swapped_link_write),
];

/// The classes the 2025.3.28 release gets wrong: its path check compares
/// string prefixes, and when a path's real location is refused it falls
/// back to checking the parent directory, then operates on the path as
/// given (following the link).
const REFERENCE_2025_ESCAPES: &[&str] = &[
    "prefix sibling read",
    "prefix sibling write",
    "symlink out, last component",
    "dangling symlink, write",
    "write through a link",
    "edit through a link",
    "list through a link",
    "stat through a link",
    "move from a prefix sibling",
    "link swapped in during a read",
    "link swapped in during a write",
];

/// Run every case against a fresh tree and server.
fn run_all(server: Server) -> Vec<(&'static str, Outcome)> {
    CASES
        .iter()
        .map(|(name, case)| {
            let fx = Fx::new();
            let mut c = fx.start(server);
            (*name, case(&fx, &mut c))
        })
        .collect()
}

fn assert_all_held(server: Server) {
    let mut failures = Vec::new();
    for (name, o) in run_all(server) {
        if o.escaped || !o.twin_ok {
            failures.push(format!(
                "{name}: escaped {}, twin ok {}\n{}",
                o.escaped, o.twin_ok, o.detail
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{server:?}:\n{}",
        failures.join("\n\n")
    );
}

#[test]
fn rootfence_fs_holds_every_class_without_a_sandbox() {
    assert_all_held(Server::RootfenceFs);
}

#[test]
fn reference_2025_escapes_unfenced_so_the_cases_can_fail() {
    let mut wrong = Vec::new();
    for (name, o) in run_all(Server::Reference2025) {
        let known = REFERENCE_2025_ESCAPES.contains(&name);
        if o.escaped != known || !o.twin_ok {
            wrong.push(format!(
                "{name} (known escape: {known}): escaped {}, twin ok {}\n{}",
                o.escaped, o.twin_ok, o.detail
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}

#[test]
fn reference_2025_is_held_by_rootfence_run() {
    assert_all_held(Server::Reference2025Fenced);
}

#[test]
fn rootfence_run_without_a_command_holds_every_class() {
    assert_all_held(Server::RunFs);
}

/// Refusals name the path as it was given and why.
#[test]
fn refusals_name_the_path_and_the_reason() {
    let fx = Fx::new();
    fx.link(fx.out.join("secret"), "link-out");
    let mut c = fx.start(Server::RootfenceFs);
    let evil = fx.evil.join("secret").display().to_string();
    let a = c.call("read_text_file", json!({"path": evil}));
    assert!(
        a.error
            && a.text.starts_with(&format!(
                "Access denied - path outside allowed directories: {evil}"
            )),
        "{a:?}"
    );
    let rel = c.call("read_text_file", json!({"path": "../outside/secret"}));
    assert!(
        rel.error && rel.text.contains("../outside/secret") && rel.text.contains("is not in"),
        "{rel:?}"
    );
    let l = c.call("read_text_file", json!({"path": "link-out"}));
    assert!(
        l.error
            && l.text
                .contains("link-out: a symbolic link in the path leads outside"),
        "{l:?}"
    );
    let ok = c.call("read_text_file", json!({"path": "inside"}));
    assert_eq!((ok.error, ok.text.as_str()), (false, "inside"));
}

/// A read-only root: every write refused with a tool error naming the
/// root; reads served.
#[test]
fn read_only_root_refuses_every_write() {
    let fx = Fx::new();
    let argv = vec![
        fs_support::rootfence(),
        "fs".into(),
        "--ro-root".into(),
        fx.r.display().to_string(),
        "--root".into(),
        fx.out.display().to_string(),
    ];
    let mut c = Client::start(&argv);
    let before = std::fs::read_dir(&fx.r).expect("list").count();
    let edits = json!([{"oldText": "inside", "newText": "x"}]);
    let writes = [
        (
            "write_file",
            json!({"path": fx.rs("inside"), "content": "x"}),
        ),
        ("write_file", json!({"path": fx.rs("new"), "content": "x"})),
        (
            "edit_file",
            json!({"path": fx.rs("inside"), "edits": edits}),
        ),
        ("create_directory", json!({"path": fx.rs("d")})),
        (
            "move_file",
            json!({"source": fx.rs("inside"), "destination": fx.rs("moved")}),
        ),
        (
            "move_file",
            json!({"source": fx.rs("inside"), "destination": fx.out.join("moved")}),
        ),
        (
            "move_file",
            json!({"source": fx.out.join("secret"), "destination": fx.rs("moved")}),
        ),
    ];
    for (tool, args) in writes {
        let r = c.call(tool, args.clone());
        assert!(
            r.error
                && r.text
                    .contains(&format!("is in the read-only root {}", fx.r.display())),
            "{tool} {args}: {r:?}"
        );
    }
    assert_eq!(content(&fx.r.join("inside")), "inside");
    assert_eq!(std::fs::read_dir(&fx.r).expect("list").count(), before);
    assert!(fx.out.join("secret").exists() && !fx.out.join("moved").exists());
    // The twins: reads in the read-only root, writes in the other.
    let read = c.call("read_text_file", json!({"path": fx.rs("inside")}));
    assert_eq!((read.error, read.text.as_str()), (false, "inside"));
    let dry = c.call(
        "edit_file",
        json!({"path": fx.rs("inside"), "edits": edits, "dryRun": true}),
    );
    assert!(!dry.error && dry.text.contains("+x"), "{dry:?}");
    let w = c.call(
        "write_file",
        json!({"path": fx.out.join("w"), "content": "ok"}),
    );
    assert!(!w.error && content(&fx.out.join("w")) == "ok", "{w:?}");
    let list = c.call("list_allowed_directories", json!({}));
    assert!(
        list.text
            .contains(&format!("{} (read-only)", fx.r.display())),
        "{list:?}"
    );
}
