//! `rootfence fs` against the reference server it is compatible with
//! (`@modelcontextprotocol/server-filesystem`, the release in
//! tests/peers): the same operations on two copies of the same tree, one
//! through each server, compared (the copies' base paths replaced by
//! `<base>` in the texts).

use crate::fs_support;

use fs_support::{Client, Fx, Reply, Server};
use serde_json::{Value, json};

/// The same tree in two places, and a server on each.
struct Pair {
    ours: (Fx, Client),
    theirs: (Fx, Client),
}

fn tree(fx: &Fx) {
    std::fs::write(fx.r.join("lines.txt"), "one\ntwo\nthree\nfour\nfive\n").expect("write");
    std::fs::write(fx.r.join("crlf.txt"), "a\r\nb\r\nc").expect("write");
    std::fs::write(
        fx.r.join("code.rs"),
        "fn main() {\n    let x = 1;\n    println!(\"{x}\");\n}\n",
    )
    .expect("write");
    std::fs::create_dir_all(fx.r.join("deep/er/est")).expect("mkdir");
    std::fs::write(fx.r.join("deep/er/est/leaf.txt"), "leaf").expect("write");
    std::fs::write(fx.r.join("deep/er/notes.md"), "# notes").expect("write");
    std::fs::create_dir_all(fx.r.join("node_modules/pkg")).expect("mkdir");
    std::fs::write(fx.r.join("node_modules/pkg/index.js"), "x").expect("write");
    std::fs::write(fx.r.join("image.png"), [0x89, b'P', b'N', b'G', 0, 1, 2]).expect("write");
    std::fs::write(fx.r.join("blob.bin"), [0u8, 1, 2, 3]).expect("write");
    std::fs::write(fx.r.join("big"), vec![b'x'; 3000]).expect("write");
}

impl Pair {
    fn new() -> Pair {
        let (a, b) = (Fx::new(), Fx::new());
        tree(&a);
        tree(&b);
        let ca = a.start(Server::RootfenceFs);
        let cb = b.start(Server::Reference);
        Pair {
            ours: (a, ca),
            theirs: (b, cb),
        }
    }

    /// The same call through both, with `<r>` in the arguments standing
    /// for each side's root; the replies with each base path replaced.
    fn both(&mut self, tool: &str, args: Value) -> (Reply, Reply) {
        let one = |fx: &Fx, c: &mut Client| {
            let text = args.to_string().replace("<r>", &fx.r.display().to_string());
            let mut r = c.call(tool, serde_json::from_str(&text).expect("json"));
            let base = fx.base.display().to_string();
            r.text = r.text.replace(&base, "<base>");
            r.result =
                serde_json::from_str(&r.result.to_string().replace(&base, "<base>")).expect("json");
            r
        };
        let ours = one(&self.ours.0, &mut self.ours.1);
        let theirs = one(&self.theirs.0, &mut self.theirs.1);
        (ours, theirs)
    }

    /// The same call gives the same result through both.
    fn same(&mut self, tool: &str, args: Value) -> Reply {
        let (o, t) = self.both(tool, args.clone());
        assert_eq!(o.result, t.result, "{tool} {args}");
        o
    }

    /// The same call fails through both.
    fn both_fail(&mut self, tool: &str, args: Value) -> (Reply, Reply) {
        let (o, t) = self.both(tool, args.clone());
        assert!(
            o.error && t.error,
            "{tool} {args}: ours {o:?}, theirs {t:?}"
        );
        (o, t)
    }

    /// The same call succeeds through both, with the same lines in any
    /// order (directory order is the filesystem's).
    fn same_lines(&mut self, tool: &str, args: Value) {
        let (o, t) = self.both(tool, args.clone());
        assert!(
            !o.error && !t.error,
            "{tool} {args}: ours {o:?}, theirs {t:?}"
        );
        let sorted = |s: &str| {
            let mut v: Vec<String> = s.lines().map(str::to_string).collect();
            v.sort();
            v
        };
        assert_eq!(sorted(&o.text), sorted(&t.text), "{tool} {args}");
    }

    /// Both sides' files, compared.
    fn same_file(&self, rel: &str) {
        let read = |fx: &Fx| std::fs::read(fx.r.join(rel)).ok();
        assert_eq!(read(&self.ours.0), read(&self.theirs.0), "{rel}");
    }
}

#[test]
fn tools_are_listed_the_same() {
    let mut p = Pair::new();
    let ours = p.ours.1.request("tools/list", json!({}));
    let theirs = p.theirs.1.request("tools/list", json!({}));
    assert_eq!(ours["result"]["tools"], theirs["result"]["tools"]);
}

#[test]
fn reads_are_the_same() {
    let mut p = Pair::new();
    p.same("read_text_file", json!({"path": "<r>/lines.txt"}));
    p.same("read_file", json!({"path": "<r>/lines.txt"}));
    for n in [1, 2, 5, 9] {
        p.same(
            "read_text_file",
            json!({"path": "<r>/lines.txt", "head": n}),
        );
        p.same(
            "read_text_file",
            json!({"path": "<r>/lines.txt", "tail": n}),
        );
    }
    p.same("read_text_file", json!({"path": "<r>/crlf.txt", "tail": 2}));
    p.same("read_text_file", json!({"path": "<r>/big", "tail": 1}));
    p.same("read_text_file", json!({"path": "lines.txt", "head": 2}));
    p.same(
        "read_multiple_files",
        json!({"paths": ["<r>/lines.txt", "<r>/deep/er/notes.md"]}),
    );
    p.same("read_media_file", json!({"path": "<r>/image.png"}));
    p.same("read_media_file", json!({"path": "<r>/blob.bin"}));
    let (o, t) = p.both_fail(
        "read_text_file",
        json!({"path": "<r>/lines.txt", "head": 1, "tail": 1}),
    );
    assert_eq!(o.text, t.text);
    p.both_fail("read_text_file", json!({"path": "<r>/missing"}));
    let (o, t) = p.both_fail("read_text_file", json!({"path": "/etc/hostname"}));
    let denied = "Access denied - path outside allowed directories: /etc/hostname";
    assert!(
        o.text.starts_with(denied) && t.text.starts_with(denied),
        "{o:?} {t:?}"
    );
    let (o, t) = p.both_fail("no_such_tool", json!({}));
    assert_eq!(o.text, t.text);
}

#[test]
fn listings_are_the_same() {
    let mut p = Pair::new();
    p.same_lines("list_directory", json!({"path": "<r>"}));
    p.same_lines("list_directory", json!({"path": "<r>/deep/er"}));
    p.same("list_directory_with_sizes", json!({"path": "<r>/deep/er"}));
    p.same(
        "list_directory_with_sizes",
        json!({"path": "<r>/deep/er/est", "sortBy": "size"}),
    );
    p.same("list_allowed_directories", json!({}));
    let (o, t) = p.both("get_file_info", json!({"path": "<r>/lines.txt"}));
    let keys = |r: &Reply| -> Vec<String> {
        r.text
            .lines()
            .filter(|l| {
                !["created", "modified", "accessed"]
                    .iter()
                    .any(|k| l.starts_with(k))
            })
            .map(str::to_string)
            .collect()
    };
    assert_eq!(keys(&o), keys(&t));
    let date_shape = |r: &Reply| -> Vec<usize> {
        r.text
            .lines()
            .filter(|l| l.contains("GMT"))
            .map(str::len)
            .collect()
    };
    assert_eq!(date_shape(&o), date_shape(&t), "{o:?} {t:?}");
}

/// `directory_tree`'s JSON with every children array sorted by name.
fn sorted_tree(text: &str) -> Value {
    fn sort(v: &mut Value) {
        if let Some(a) = v.as_array_mut() {
            a.sort_by(|x, y| x["name"].as_str().cmp(&y["name"].as_str()));
            for e in a.iter_mut() {
                if let Some(c) = e.get_mut("children") {
                    sort(c);
                }
            }
        }
    }
    let mut v: Value = serde_json::from_str(text).expect("directory_tree gives JSON");
    sort(&mut v);
    v
}

#[test]
fn walks_are_the_same() {
    let mut p = Pair::new();
    for args in [
        json!({"path": "<r>"}),
        json!({"path": "<r>", "excludePatterns": ["node_modules"]}),
        json!({"path": "<r>", "excludePatterns": ["**/*.txt"]}),
        json!({"path": "<r>/deep"}),
    ] {
        let (o, t) = p.both("directory_tree", args.clone());
        assert!(!o.error && !t.error, "{args}");
        assert_eq!(sorted_tree(&o.text), sorted_tree(&t.text), "{args}");
    }
    for args in [
        json!({"path": "<r>", "pattern": "**/*.txt"}),
        json!({"path": "<r>", "pattern": "*.txt"}),
        json!({"path": "<r>", "pattern": "**/*.{md,rs}"}),
        json!({"path": "<r>", "pattern": "**/*", "excludePatterns": ["node_modules/**"]}),
    ] {
        p.same_lines("search_files", args);
    }
    p.same(
        "search_files",
        json!({"path": "<r>", "pattern": "*.nothing"}),
    );
}

#[test]
fn writes_are_the_same() {
    let mut p = Pair::new();
    p.same(
        "write_file",
        json!({"path": "<r>/new.txt", "content": "new\n"}),
    );
    p.same_file("new.txt");
    p.same(
        "write_file",
        json!({"path": "<r>/lines.txt", "content": "replaced"}),
    );
    p.same_file("lines.txt");
    p.same("create_directory", json!({"path": "<r>/made/deeper"}));
    p.same("create_directory", json!({"path": "<r>/made"}));
    let edit = |old: &str, new: &str| json!([{"oldText": old, "newText": new}]);
    p.same(
        "edit_file",
        json!({"path": "<r>/code.rs", "edits": edit("let x = 1;", "let x = 2;"), "dryRun": true}),
    );
    p.same_file("code.rs");
    p.same(
        "edit_file",
        json!({"path": "<r>/code.rs", "edits": edit("let x = 1;\nprintln!(\"{x}\");", "let y = 1;\nprintln!(\"{y}\");")}),
    );
    p.same_file("code.rs");
    p.same(
        "edit_file",
        json!({"path": "<r>/crlf.txt", "edits": edit("b", "B")}),
    );
    p.same_file("crlf.txt");
    let (o, t) = p.both_fail(
        "edit_file",
        json!({"path": "<r>/code.rs", "edits": edit("absent", "x")}),
    );
    assert_eq!(o.text, t.text);
    p.same(
        "move_file",
        json!({"source": "<r>/new.txt", "destination": "<r>/made/moved.txt"}),
    );
    p.same_file("made/moved.txt");
    let (o, t) = p.both_fail(
        "move_file",
        json!({"source": "<r>/made/moved.txt", "destination": "<r>/code.rs"}),
    );
    assert_eq!(o.text, t.text);
    p.same_file("code.rs");
}
