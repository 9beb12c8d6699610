//! Table-driven corpus for the roots engine: root inputs, accepted and
//! refused, each with the expected canonical form or refusal reason.
//!
//! Every row runs against a real fixture tree in a temporary directory with
//! a fake home directory (holding `.ssh`, `.aws`, ...), under rules that
//! come either from `Policy::parse` of a small policy text or from
//! `RootRules` built by hand.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, symlink};
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};

use rootfence::policy::Policy;
use rootfence::roots::{
    Access, CanonicalRoot, MAX_URI_LEN, Origin, PathRule, RefusalReason, RootInput, RootKind,
    RootRules, RootSource, UriError, merge, parse_file_uri, path_to_uri, resolve,
};
use tempfile::TempDir;

/// The policy the `P` rows run under. Line numbers matter: the refusal
/// messages name them.
const POLICY_P: &str = r#"version = 1

[roots]
sources = ["host", "command-line"]
allow_under = ["~", "@B@/ceil"]

[deny]
paths = [
  "~/.ssh",
  "~/.aws",
  "~/vault_link",
]
builtin = false
i_know = true
"#;

/// The policy the `B` rows run under: the built-in deny list.
const POLICY_B: &str = r#"version = 1

[roots]
sources = ["host", "command-line", "policy"]
"#;

struct Fixture {
    _tmp: TempDir,
    /// Canonical temp directory.
    base: PathBuf,
    home: PathBuf,
    work: PathBuf,
    policy_p_file: PathBuf,
    policy_p: Policy,
    policy_b_file: PathBuf,
    policy_b: Policy,
    /// `POLICY_B` with the home directory reached through a symlink.
    policy_linked: Policy,
}

fn mkdir(p: &Path) {
    std::fs::create_dir_all(p).unwrap();
}

fn touch(p: &Path) {
    std::fs::write(p, b"x").unwrap();
}

impl Fixture {
    fn new() -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(tmp.path()).unwrap();
        // Templates below splice `base` into URIs unencoded.
        assert!(
            base.to_str()
                .unwrap()
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"/._-".contains(&b)),
            "temp dir {base:?} needs percent-encoding"
        );
        let home = base.join("home");
        let work = home.join("work");

        for d in [
            ".ssh/keys",
            ".aws",
            ".config/gcloud",
            ".config/other",
            "work/proj/src",
            "work/proj/%2e%2e",
            "work/vault/inner",
            "work/...",
            "work/with space",
            "work/ünï",
            "work/100%",
            "work/Abc",
            "work/a?b#c",
            "work/nl\n",
            "work/back\\slash",
            "work/abcdé",
        ] {
            mkdir(&home.join(d));
        }
        mkdir(&work.join(OsStr::from_bytes(b"\xff\xfe")));
        for d in [
            "ceil/in",
            "ceil_evil",
            "outside",
            "r/sub",
            "r_evil",
            "etc",
            "realhome/sub",
        ] {
            mkdir(&base.join(d));
        }
        touch(&home.join(".ssh/keys/id_ed25519"));
        touch(&home.join(".aws/credentials"));
        touch(&home.join(".netrc"));
        touch(&work.join("file.txt"));
        touch(&work.join("proj/README.md"));
        touch(&work.join("proj/%2e%2e/marker"));

        symlink(work.join("vault"), home.join("vault_link")).unwrap();
        symlink(work.join("proj"), work.join("link_to_proj")).unwrap();
        symlink("proj/src", work.join("rel_link")).unwrap();
        symlink("chain2", work.join("chain1")).unwrap();
        symlink("chain3", work.join("chain2")).unwrap();
        symlink(work.join("proj"), work.join("chain3")).unwrap();
        symlink("file.txt", work.join("file_link")).unwrap();
        symlink("loop_b", work.join("loop_a")).unwrap();
        symlink("loop_a", work.join("loop_b")).unwrap();
        symlink("self_loop", work.join("self_loop")).unwrap();
        symlink("missing", work.join("dangling")).unwrap();
        symlink("dangling", work.join("dangling_chain")).unwrap();
        symlink("../.ssh", work.join("to_ssh")).unwrap();
        symlink(home.join(".ssh/keys"), work.join("to_keys")).unwrap();
        symlink(base.join("outside"), work.join("out_link")).unwrap();
        symlink("fifo", work.join("fifo_link")).unwrap();
        symlink("realhome", base.join("homelink")).unwrap();

        rustix::fs::mknodat(
            rustix::fs::CWD,
            work.join("fifo"),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap();
        drop(std::os::unix::net::UnixListener::bind(work.join("sock")).unwrap());

        let b = base.to_str().unwrap();
        let policy_p_file = base.join("etc/p.toml");
        let text_p = POLICY_P.replace("@B@", b);
        std::fs::write(&policy_p_file, &text_p).unwrap();
        let policy_p = Policy::parse(&text_p, Some(&policy_p_file), Some(&home)).unwrap();
        let policy_b_file = base.join("etc/b.toml");
        std::fs::write(&policy_b_file, POLICY_B).unwrap();
        let policy_b = Policy::parse(POLICY_B, Some(&policy_b_file), Some(&home)).unwrap();
        // Nothing the built-in list denies exists under this home yet; `.ssh`
        // appears only after the policy is loaded.
        let linked_home = base.join("homelink");
        let policy_linked =
            Policy::parse(POLICY_B, Some(&policy_b_file), Some(&linked_home)).unwrap();
        mkdir(&base.join("realhome/.ssh"));

        Fixture {
            _tmp: tmp,
            base,
            home,
            work,
            policy_p_file,
            policy_p,
            policy_b_file,
            policy_b,
            policy_linked,
        }
    }

    /// A path under the temp dir.
    fn p(&self, rel: &str) -> PathBuf {
        self.base.join(rel)
    }

    /// A path under the temp dir, from raw bytes.
    fn pb(&self, rel: &[u8]) -> PathBuf {
        self.base.join(OsStr::from_bytes(rel))
    }

    /// `file://` + the temp dir + `/rel`, spliced as text (no encoding).
    fn u(&self, rel: &str) -> String {
        format!("file://{}/{rel}", self.base.display())
    }

    /// `rel` under the temp dir as a string (for command-line paths).
    fn s(&self, rel: &str) -> String {
        format!("{}/{rel}", self.base.display())
    }

    /// 1-based index of segment `k` of a path written under the temp dir.
    fn seg(&self, k: usize) -> usize {
        self.base.components().count() - 1 + k
    }

    /// Byte offset of the last `needle` in the path part of `uri`
    /// (`file://` + path, empty authority).
    fn off(uri: &str, needle: &str) -> usize {
        uri.rfind(needle).unwrap() - "file://".len()
    }

    /// Origin of a deny entry of `POLICY_P`, by the text written there.
    fn p_origin(&self, shown: &str) -> Origin {
        let quoted = format!("\"{shown}\"");
        let at = POLICY_P.find(&quoted).unwrap();
        Origin::Policy {
            file: self.policy_p_file.clone(),
            line: POLICY_P[..at].matches('\n').count() + 1,
        }
    }

    fn hand_origin(line: usize) -> Origin {
        Origin::Policy {
            file: PathBuf::from("/etc/rootfence/hand.toml"),
            line,
        }
    }

    fn rules(&self, r: RuleSet) -> RootRules {
        let rule = |shown: &str, path: PathBuf, line: usize| {
            PathRule::new(shown, path, Fixture::hand_origin(line))
        };
        match r {
            RuleSet::P => self.policy_p.root_rules(Some(self.work.clone())),
            RuleSet::B => self.policy_b.root_rules(Some(self.work.clone())),
            RuleSet::LinkedHome => self.policy_linked.root_rules(None),
            RuleSet::Hand => RootRules {
                deny: vec![rule("~/.ssh", self.home.join(".ssh"), 3)],
                home: Some(self.home.clone()),
                ..RootRules::default()
            },
            RuleSet::Bare => RootRules::default(),
            RuleSet::Fs => RootRules {
                allow_filesystem_root: true,
                ..RootRules::default()
            },
            RuleSet::FsDeny => RootRules {
                allow_filesystem_root: true,
                deny: vec![rule("~/.ssh", self.home.join(".ssh"), 3)],
                ..RootRules::default()
            },
            RuleSet::Ceil => RootRules {
                allow_under: Some(vec![rule(&self.s("r"), self.p("r"), 2)]),
                ..RootRules::default()
            },
            RuleSet::CeilEmpty => RootRules {
                allow_under: Some(Vec::new()),
                ..RootRules::default()
            },
            RuleSet::DenyR => RootRules {
                deny: vec![rule(&self.s("r"), self.p("r"), 4)],
                ..RootRules::default()
            },
            RuleSet::DenyREvil => RootRules {
                deny: vec![rule(&self.s("r_evil"), self.p("r_evil"), 5)],
                ..RootRules::default()
            },
        }
    }
}

/// Which rules a row runs under.
#[derive(Debug, Clone, Copy)]
enum RuleSet {
    /// `POLICY_P`: own deny list with line numbers, ceiling `~` and
    /// `<tmp>/ceil`, host and command-line sources, cwd = `~/work`.
    P,
    /// `POLICY_B`: the built-in deny list, every source, cwd = `~/work`.
    B,
    /// `POLICY_B` with home = `<tmp>/homelink`, a symlink to
    /// `<tmp>/realhome`, where `.ssh` did not exist when the policy loaded.
    LinkedHome,
    /// By hand: deny `~/.ssh`, home set, no cwd, no ceiling.
    Hand,
    /// `RootRules::default()`: nothing denied, no home, no cwd.
    Bare,
    /// `/` allowed, nothing denied.
    Fs,
    /// `/` allowed, `~/.ssh` denied.
    FsDeny,
    /// By hand: ceiling `<tmp>/r`.
    Ceil,
    /// By hand: an empty ceiling.
    CeilEmpty,
    /// By hand: deny `<tmp>/r`.
    DenyR,
    /// By hand: deny `<tmp>/r_evil`.
    DenyREvil,
}

#[derive(Debug)]
enum Expect {
    Ok {
        path: PathBuf,
        uri: String,
        kind: RootKind,
    },
    No(RefusalReason),
}

struct Row {
    at: u32,
    rules: RuleSet,
    input: RootInput,
    expect: Expect,
}

macro_rules! row {
    ($rules:expr, $input:expr, $expect:expr $(,)?) => {
        Row {
            at: line!(),
            rules: $rules,
            input: $input,
            expect: $expect,
        }
    };
}

fn host(raw: impl Into<String>) -> RootInput {
    RootInput::host(raw, None, Access::ReadWrite)
}

fn host_ro(raw: impl Into<String>) -> RootInput {
    RootInput::host(raw, Some("named".to_string()), Access::ReadOnly)
}

fn cli(raw: impl Into<String>) -> RootInput {
    RootInput::command_line(raw, Access::ReadWrite)
}

fn cli_ro(raw: impl Into<String>) -> RootInput {
    RootInput::command_line(raw, Access::ReadOnly)
}

fn pol(raw: impl Into<String>) -> RootInput {
    RootInput::policy(raw, None, Access::ReadOnly)
}

fn dir(path: PathBuf, uri: impl Into<String>) -> Expect {
    Expect::Ok {
        path,
        uri: uri.into(),
        kind: RootKind::Directory,
    }
}

fn file(path: PathBuf, uri: impl Into<String>) -> Expect {
    Expect::Ok {
        path,
        uri: uri.into(),
        kind: RootKind::File,
    }
}

fn uri_err(e: UriError) -> Expect {
    Expect::No(RefusalReason::Uri(e))
}

fn no(r: RefusalReason) -> Expect {
    Expect::No(r)
}

fn dot(index: usize, segment: &str) -> Expect {
    uri_err(UriError::DotSegment {
        index,
        segment: segment.to_string(),
    })
}

#[rustfmt::skip]
fn rows(fx: &Fixture) -> Vec<Row> {
    use RuleSet::*;
    use RefusalReason as RR;
    let u = |rel: &str| fx.u(rel);
    let p = |rel: &str| fx.p(rel);
    let s = |rel: &str| fx.s(rel);
    let proj = || dir(p("home/work/proj"), u("home/work/proj"));
    let inside = |shown: &str, origin: Origin| {
        no(RR::InsideDenied {
            shown: shown.to_string(),
            origin,
        })
    };
    let contains = |shown: &str, origin: Origin| {
        no(RR::ContainsDenied {
            shown: shown.to_string(),
            origin,
        })
    };
    let ssh_p = || fx.p_origin("~/.ssh");
    let p_ceiling = format!("~, {}/ceil", fx.base.display());
    let long = format!("file:///{}", "a".repeat(MAX_URI_LEN));
    let long_len = long.len();
    let traversal = u("home/work/proj/../../.ssh");
    let bad_zz = u("home/work/%zz");
    let bad_2 = u("home/work/ab%2");
    let bad_trailing = u("home/work/ab%");
    let bad_g = u("home/work/%G0/x");
    let raw_pct = u("home/work/100%");

    vec![
        // --- plain accepted forms -------------------------------------
        row!(P, host(u("home/work/proj")), proj()),
        row!(P, host(u("home/work/proj/")), proj()),
        row!(P, host(u("home/work/proj/src")), dir(p("home/work/proj/src"), u("home/work/proj/src"))),
        row!(P, host_ro(u("home/work/proj")), proj()),
        row!(P, host(format!("file://localhost{}", s("home/work/proj"))), proj()),
        row!(P, host(format!("file://LOCALHOST{}", s("home/work/proj"))), proj()),
        row!(P, host(format!("file://LocalHost{}/", s("home/work/proj"))), proj()),
        row!(P, host(format!("file:{}", s("home/work/proj"))), proj()),
        row!(P, host(format!("FILE://{}", s("home/work/proj"))), proj()),
        row!(P, host(format!("FiLe://{}", s("home/work/proj"))), proj()),
        row!(P, host(u("home/work/%41bc")), dir(p("home/work/Abc"), u("home/work/Abc"))),
        row!(P, host(u("home/work/...")), dir(p("home/work/..."), u("home/work/..."))),
        // --- files and directories --------------------------------------
        row!(P, host(u("home/work/file.txt")), file(p("home/work/file.txt"), u("home/work/file.txt"))),
        row!(P, host(u("home/work/file.txt/")), file(p("home/work/file.txt"), u("home/work/file.txt"))),
        row!(P, host(u("home/work/proj/README.md")), file(p("home/work/proj/README.md"), u("home/work/proj/README.md"))),
        row!(P, host(u("home/work/fifo")), no(RR::BadKind(p("home/work/fifo")))),
        row!(P, host(u("home/work/fifo_link")), no(RR::BadKind(p("home/work/fifo_link")))),
        row!(P, host(u("home/work/sock")), no(RR::BadKind(p("home/work/sock")))),
        row!(Bare, cli("/dev/null"), no(RR::BadKind(PathBuf::from("/dev/null")))),
        // --- traversal, raw and encoded --------------------------------
        row!(P, host(traversal.clone()), dot(fx.seg(4), "..")),
        row!(P, host(u("home/work/%2e%2e/.ssh")), dot(fx.seg(3), "..")),
        row!(P, host(u("home/work/%2E%2e/.ssh")), dot(fx.seg(3), "..")),
        row!(P, host(u("home/work/.%2e/.ssh")), dot(fx.seg(3), "..")),
        row!(P, host(u("home/work/%2e./.ssh")), dot(fx.seg(3), "..")),
        row!(P, host(u("home/work/./proj")), dot(fx.seg(3), ".")),
        row!(P, host(u("home/work/%2E/proj")), dot(fx.seg(3), ".")),
        row!(P, host(u("home/work/proj/..")), dot(fx.seg(4), "..")),
        row!(P, host(u("home/work/proj/../")), dot(fx.seg(4), "..")),
        row!(Bare, host("file:///%2e%2e/etc"), dot(1, "..")),
        row!(Bare, host("file:///.."), dot(1, "..")),
        row!(P, host(u("home/work/%2e%2e%2f.ssh")), uri_err(UriError::EncodedSlash(fx.seg(3)))),
        // --- double encoding decodes once ------------------------------
        row!(P, host(u("home/work/proj/%252e%252e")), dir(p("home/work/proj/%2e%2e"), u("home/work/proj/%252e%252e"))),
        row!(P, host(u("home/work/%252e%252e")), no(RR::NotFound(p("home/work/%2e%2e")))),
        row!(P, host(u("home/work/%252F")), no(RR::NotFound(p("home/work/%2F")))),
        // --- encoded slash, NUL, malformed percent ---------------------
        row!(P, host(u("home/work%2Fproj")), uri_err(UriError::EncodedSlash(fx.seg(2)))),
        row!(P, host(u("home/work%2fproj")), uri_err(UriError::EncodedSlash(fx.seg(2)))),
        row!(P, host(u("home/work/proj%00")), uri_err(UriError::Nul(fx.seg(3)))),
        row!(P, host(u("home/%00/work")), uri_err(UriError::Nul(fx.seg(2)))),
        row!(P, host(bad_zz.clone()), uri_err(UriError::BadPercent(Fixture::off(&bad_zz, "%")))),
        row!(P, host(bad_2.clone()), uri_err(UriError::BadPercent(Fixture::off(&bad_2, "%")))),
        row!(P, host(bad_trailing.clone()), uri_err(UriError::BadPercent(Fixture::off(&bad_trailing, "%")))),
        row!(P, host(bad_g.clone()), uri_err(UriError::BadPercent(Fixture::off(&bad_g, "%")))),
        row!(P, host(raw_pct.clone()), uri_err(UriError::BadPercent(Fixture::off(&raw_pct, "%")))),
        row!(Bare, host("file:///%C3%A"), uri_err(UriError::BadPercent(4))),
        row!(Bare, host("file:///a/%é1"), uri_err(UriError::BadPercent(3))),
        // --- authority -------------------------------------------------
        row!(P, host("file://evil.com/x"), uri_err(UriError::ForeignHost("evil.com".into()))),
        row!(P, host(format!("file://evil.com{}", s("home/work/proj"))), uri_err(UriError::ForeignHost("evil.com".into()))),
        row!(P, host("file://127.0.0.1/x"), uri_err(UriError::ForeignHost("127.0.0.1".into()))),
        row!(P, host("file://[::1]/x"), uri_err(UriError::ForeignHost("[::1]".into()))),
        row!(P, host("file://localhost./x"), uri_err(UriError::ForeignHost("localhost.".into()))),
        row!(P, host("file://~/x"), uri_err(UriError::ForeignHost("~".into()))),
        row!(P, host("file://~"), uri_err(UriError::ForeignHost("~".into()))),
        row!(P, host("file://user@localhost/x"), uri_err(UriError::UserInfo)),
        row!(P, host("file://user:pw@/x"), uri_err(UriError::UserInfo)),
        row!(P, host("file://@/x"), uri_err(UriError::UserInfo)),
        row!(P, host("file://localhost:8080/x"), uri_err(UriError::Port)),
        row!(P, host("file://localhost:/x"), uri_err(UriError::Port)),
        row!(P, host("file://[::1]:22/x"), uri_err(UriError::Port)),
        row!(P, host("file:///~/x"), no(RR::NotFound(PathBuf::from("/~/x")))),
        // --- scheme ----------------------------------------------------
        row!(P, host("file:x"), uri_err(UriError::Relative)),
        row!(P, host("file:proj"), uri_err(UriError::Relative)),
        row!(P, host("file:"), uri_err(UriError::Relative)),
        row!(P, host("file://"), uri_err(UriError::Relative)),
        row!(P, host("file://localhost"), uri_err(UriError::Relative)),
        row!(P, host("http://example.com/x"), uri_err(UriError::Scheme("http".into()))),
        row!(P, host(format!("https://localhost{}", s("home/work/proj"))), uri_err(UriError::Scheme("https".into()))),
        row!(P, host("data:text/plain,hello"), uri_err(UriError::Scheme("data".into()))),
        row!(P, host("files:///x"), uri_err(UriError::Scheme("files".into()))),
        row!(P, host(s("home/work/proj")), uri_err(UriError::NoScheme)),
        row!(P, host("proj"), uri_err(UriError::NoScheme)),
        row!(P, host("~/work"), uri_err(UriError::NoScheme)),
        row!(P, host(":///x"), uri_err(UriError::NoScheme)),
        row!(P, host(""), uri_err(UriError::Empty)),
        row!(P, cli(""), uri_err(UriError::Empty)),
        row!(Bare, host(long), uri_err(UriError::TooLong(long_len))),
        row!(Bare, host(format!("file:///{}", vec!["é".repeat(120); 20].join("/"))), uri_err(UriError::PathTooLong(20 * 241))),
        row!(Bare, cli(format!("file:///{}", "%41".repeat(4095))), uri_err(UriError::PathTooLong(4096))),
        // --- query, fragment ------------------------------------------
        row!(P, host(format!("{}?x=1", u("home/work/proj"))), uri_err(UriError::Query)),
        row!(P, host(format!("{}?", u("home/work/proj"))), uri_err(UriError::Query)),
        row!(P, host(format!("{}#top", u("home/work/proj"))), uri_err(UriError::Fragment)),
        row!(P, host(format!("{}?a#b", u("home/work/proj"))), uri_err(UriError::Fragment)),
        // --- empty segments, trailing slash ----------------------------
        row!(P, host(u("home//work/proj")), uri_err(UriError::EmptySegment(fx.seg(2)))),
        row!(P, host(u("home/work/proj//")), uri_err(UriError::EmptySegment(fx.seg(4)))),
        row!(P, host(format!("file:///{}", s("home/work/proj"))), uri_err(UriError::EmptySegment(1))),
        row!(Bare, host("file:////"), uri_err(UriError::EmptySegment(1))),
        // --- raw characters -------------------------------------------
        row!(P, host(u("home/work\\proj")), uri_err(UriError::BadChar('\\'))),
        row!(P, host(u("home/work/nl\n")), uri_err(UriError::BadChar('\n'))),
        row!(P, host(u("home/work/\tproj")), uri_err(UriError::BadChar('\t'))),
        row!(P, host(u("home/work/\u{7f}")), uri_err(UriError::BadChar('\u{7f}'))),
        row!(P, host(u("home/work/\u{85}")), uri_err(UriError::BadChar('\u{85}'))),
        // --- names that need encoding ----------------------------------
        row!(P, host(u("home/work/%FF%FE")), dir(fx.pb(b"home/work/\xff\xfe"), u("home/work/%FF%FE"))),
        row!(P, host(u("home/work/%ff%fe")), dir(fx.pb(b"home/work/\xff\xfe"), u("home/work/%FF%FE"))),
        row!(P, host(u("home/work/with%20space")), dir(p("home/work/with space"), u("home/work/with%20space"))),
        row!(P, host(u("home/work/with space")), dir(p("home/work/with space"), u("home/work/with%20space"))),
        row!(P, host(u("home/work/ünï")), dir(p("home/work/ünï"), u("home/work/%C3%BCn%C3%AF"))),
        row!(P, host(u("home/work/%C3%BCn%C3%AF")), dir(p("home/work/ünï"), u("home/work/%C3%BCn%C3%AF"))),
        row!(P, host(u("home/work/100%25")), dir(p("home/work/100%"), u("home/work/100%25"))),
        row!(P, host(u("home/work/a%3Fb%23c")), dir(p("home/work/a?b#c"), u("home/work/a%3Fb%23c"))),
        row!(P, host(u("home/work/nl%0A")), dir(p("home/work/nl\n"), u("home/work/nl%0A"))),
        row!(P, host(u("home/work/back%5Cslash")), dir(p("home/work/back\\slash"), u("home/work/back%5Cslash"))),
        // --- command line: paths, relative, ~ ---------------------------
        row!(P, cli(s("home/work/proj")), proj()),
        row!(P, cli(format!("{}/", s("home/work/proj"))), proj()),
        row!(P, cli_ro(u("home/work/proj")), proj()),
        row!(P, cli(format!("FILE://{}", s("home/work/proj"))), proj()),
        row!(P, cli("file:proj"), uri_err(UriError::Relative)),
        row!(P, cli(format!("{}/%2e%2e", u("home/work"))), dot(fx.seg(3), "..")),
        row!(P, cli("proj"), proj()),
        row!(P, cli("./proj/src"), dir(p("home/work/proj/src"), u("home/work/proj/src"))),
        row!(P, cli("../work/proj"), proj()),
        row!(P, cli("../.ssh"), inside("~/.ssh", ssh_p())),
        row!(P, cli("abcdé"), dir(p("home/work/abcdé"), u("home/work/abcd%C3%A9"))),
        row!(P, cli("ünï"), dir(p("home/work/ünï"), u("home/work/%C3%BCn%C3%AF"))),
        row!(P, cli("%2e%2e"), no(RR::NotFound(p("home/work/%2e%2e")))),
        row!(P, cli("~/work/proj"), proj()),
        row!(P, cli("~/work/with space"), dir(p("home/work/with space"), u("home/work/with%20space"))),
        row!(P, cli(format!("{}/file.txt/", s("home/work"))), no(RR::NotADirectoryComponent(p("home/work/file.txt/")))),
        row!(Hand, cli("proj"), no(RR::Relative)),
        row!(Hand, cli("~/work/proj"), proj()),
        row!(Hand, cli("~/"), contains("~/.ssh", Fixture::hand_origin(3))),
        row!(Bare, cli("~"), no(RR::NoHome)),
        row!(Bare, cli("~/work/proj"), no(RR::NoHome)),
        row!(Bare, cli("proj"), no(RR::Relative)),
        // --- symlinks ----------------------------------------------------
        row!(P, host(u("home/work/link_to_proj")), proj()),
        row!(P, host(u("home/work/link_to_proj/src")), dir(p("home/work/proj/src"), u("home/work/proj/src"))),
        row!(P, host(u("home/work/rel_link")), dir(p("home/work/proj/src"), u("home/work/proj/src"))),
        row!(P, host(u("home/work/chain1")), proj()),
        row!(P, cli("chain2"), proj()),
        row!(P, host(u("home/work/file_link")), file(p("home/work/file.txt"), u("home/work/file.txt"))),
        row!(P, host(u("home/work/loop_a")), no(RR::SymlinkLoop(p("home/work/loop_a")))),
        row!(P, host(u("home/work/self_loop")), no(RR::SymlinkLoop(p("home/work/self_loop")))),
        row!(P, host(u("home/work/loop_b/x")), no(RR::SymlinkLoop(p("home/work/loop_b/x")))),
        row!(P, host(u("home/work/dangling")), no(RR::Dangling(p("home/work/dangling")))),
        row!(P, host(u("home/work/dangling_chain")), no(RR::Dangling(p("home/work/dangling_chain")))),
        row!(P, host(u("home/work/out_link")), no(RR::OutsideCeiling { path: p("outside"), ceiling: p_ceiling.clone() })),
        // --- missing paths, non-directory components ---------------------
        row!(P, host(u("home/work/nope")), no(RR::NotFound(p("home/work/nope")))),
        row!(P, host(u("home/work/nope/deeper")), no(RR::NotFound(p("home/work/nope/deeper")))),
        row!(P, host(u("home/work/dangling/x")), no(RR::NotFound(p("home/work/dangling/x")))),
        row!(P, host(u("home/work/file.txt/child")), no(RR::NotADirectoryComponent(p("home/work/file.txt/child")))),
        row!(P, host(u("home/work/file_link/child")), no(RR::NotADirectoryComponent(p("home/work/file_link/child")))),
        // --- deny list from a policy file (with line numbers) -----------
        row!(P, host(u("home/.ssh")), inside("~/.ssh", ssh_p())),
        row!(P, host(u("home/.ssh/keys")), inside("~/.ssh", ssh_p())),
        row!(P, cli("~/.ssh/keys/id_ed25519"), inside("~/.ssh", ssh_p())),
        row!(P, host(u("home/.aws")), inside("~/.aws", fx.p_origin("~/.aws"))),
        row!(P, host(u("home")), contains("~/.ssh", ssh_p())),
        row!(P, cli("~"), contains("~/.ssh", ssh_p())),
        row!(P, host(u("home/work/to_ssh")), inside("~/.ssh", ssh_p())),
        row!(P, host(u("home/work/to_keys")), inside("~/.ssh", ssh_p())),
        row!(P, host(u("home/work/vault")), inside("~/vault_link", fx.p_origin("~/vault_link"))),
        row!(P, host(u("home/work/vault/inner")), inside("~/vault_link", fx.p_origin("~/vault_link"))),
        row!(P, host(u("home/vault_link")), inside("~/vault_link", fx.p_origin("~/vault_link"))),
        row!(P, cli("~/vault_link/inner"), inside("~/vault_link", fx.p_origin("~/vault_link"))),
        row!(P, host(u("home/work")), contains("~/vault_link", fx.p_origin("~/vault_link"))),
        row!(P, host(u("home/.config")), dir(p("home/.config"), u("home/.config"))),
        row!(P, host(u("etc/p.toml")), inside(&fx.policy_p_file.display().to_string(), Origin::PolicyFile)),
        row!(P, host(u("etc")), contains(&fx.policy_p_file.display().to_string(), Origin::PolicyFile)),
        // --- the built-in deny list --------------------------------------
        row!(B, host(u("home/.ssh")), inside("~/.ssh", Origin::Builtin)),
        row!(B, host(u("home/.aws/credentials")), inside("~/.aws", Origin::Builtin)),
        row!(B, cli("~/.netrc"), inside("~/.netrc", Origin::Builtin)),
        row!(B, cli("~/.config"), contains("~/.config/gcloud", Origin::Builtin)),
        row!(B, cli("~/.config/other"), dir(p("home/.config/other"), u("home/.config/other"))),
        row!(B, cli("/etc"), contains("/etc/shadow", Origin::Builtin)),
        row!(B, host(u("home/work/vault")), dir(p("home/work/vault"), u("home/work/vault"))),
        row!(B, host(u("etc")), contains(&fx.policy_b_file.display().to_string(), Origin::PolicyFile)),
        // --- deny entries under a symlinked home --------------------------
        row!(LinkedHome, host(u("homelink")), contains("~/.ssh", Origin::Builtin)),
        row!(LinkedHome, host(u("realhome")), contains("~/.ssh", Origin::Builtin)),
        row!(LinkedHome, cli("~"), contains("~/.ssh", Origin::Builtin)),
        row!(LinkedHome, host(u("realhome/.ssh")), inside("~/.ssh", Origin::Builtin)),
        row!(LinkedHome, cli("~/.ssh"), inside("~/.ssh", Origin::Builtin)),
        row!(LinkedHome, host(u("homelink/sub")), dir(p("realhome/sub"), u("realhome/sub"))),
        row!(LinkedHome, cli("~/sub"), dir(p("realhome/sub"), u("realhome/sub"))),
        // --- hand-built deny list ---------------------------------------
        row!(Hand, host(u("home/.ssh/keys")), inside("~/.ssh", Fixture::hand_origin(3))),
        row!(Hand, host(u("home/work/to_ssh")), inside("~/.ssh", Fixture::hand_origin(3))),
        row!(Hand, host(u("home/.aws")), dir(p("home/.aws"), u("home/.aws"))),
        // --- the filesystem root ----------------------------------------
        row!(P, host("file:///"), no(RR::FilesystemRoot)),
        row!(P, host("FILE://localhost/"), no(RR::FilesystemRoot)),
        row!(P, host("file:/"), no(RR::FilesystemRoot)),
        row!(P, cli("/"), no(RR::FilesystemRoot)),
        row!(Fs, host("file:///"), dir(PathBuf::from("/"), "file:///")),
        row!(Fs, cli("/"), dir(PathBuf::from("/"), "file:///")),
        row!(FsDeny, host("file:///"), contains("~/.ssh", Fixture::hand_origin(3))),
        // --- the ceiling -------------------------------------------------
        row!(P, host(u("ceil")), dir(p("ceil"), u("ceil"))),
        row!(P, host(u("ceil/in")), dir(p("ceil/in"), u("ceil/in"))),
        row!(P, host(u("ceil_evil")), no(RR::OutsideCeiling { path: p("ceil_evil"), ceiling: p_ceiling.clone() })),
        row!(P, host(u("outside")), no(RR::OutsideCeiling { path: p("outside"), ceiling: p_ceiling.clone() })),
        row!(Ceil, host(u("r")), dir(p("r"), u("r"))),
        row!(Ceil, cli(s("r/sub")), dir(p("r/sub"), u("r/sub"))),
        row!(Ceil, host(u("r_evil")), no(RR::OutsideCeiling { path: p("r_evil"), ceiling: s("r") })),
        row!(Ceil, host(u("")), no(RR::OutsideCeiling { path: fx.base.clone(), ceiling: s("r") })),
        row!(CeilEmpty, host(u("r")), no(RR::OutsideCeiling { path: p("r"), ceiling: "empty: no roots allowed".into() })),
        // --- sibling prefixes against deny entries ----------------------
        row!(DenyR, host(u("r")), inside(&s("r"), Fixture::hand_origin(4))),
        row!(DenyR, host(u("r/sub")), inside(&s("r"), Fixture::hand_origin(4))),
        row!(DenyR, host(u("r_evil")), dir(p("r_evil"), u("r_evil"))),
        row!(DenyR, host(u("")), contains(&s("r"), Fixture::hand_origin(4))),
        row!(DenyREvil, host(u("r")), dir(p("r"), u("r"))),
        row!(DenyREvil, host(u("r/sub")), dir(p("r/sub"), u("r/sub"))),
        row!(DenyREvil, host(u("r_evil")), inside(&s("r_evil"), Fixture::hand_origin(5))),
        // --- sources ------------------------------------------------------
        row!(P, pol(s("home/work/proj")), no(RR::SourceNotAllowed(RootSource::Policy))),
        row!(P, pol(u("home/.ssh")), no(RR::SourceNotAllowed(RootSource::Policy))),
        row!(B, pol(s("home/work/proj")), proj()),
        row!(B, pol("file:proj"), uri_err(UriError::Relative)),
    ]
}

fn check_row(fx: &Fixture, row: &Row) -> Result<(), String> {
    let rules = fx.rules(row.rules);
    let got = std::panic::catch_unwind(AssertUnwindSafe(|| resolve(&row.input, &rules)))
        .map_err(|_| "resolve panicked".to_string())?;
    match (&row.expect, got) {
        (Expect::Ok { path, uri, kind }, Ok(root)) => {
            let want_name = match &row.input.name {
                Some(n) => n.clone(),
                None => path
                    .file_name()
                    .map_or("/".to_string(), |n| n.to_string_lossy().into_owned()),
            };
            let checks = [
                (root.path == *path, "path"),
                (root.uri == *uri, "uri"),
                (root.kind == *kind, "kind"),
                (root.access == row.input.access, "access"),
                (root.source == row.input.source, "source"),
                (root.input == row.input.raw, "input"),
                (root.name == want_name, "name"),
                (
                    root.handle.still_at(path),
                    "handle is at the canonical path",
                ),
                (
                    parse_file_uri(&root.uri).as_ref() == Ok(path),
                    "canonical URI parses back to the canonical path",
                ),
            ];
            if let Some((_, what)) = checks.iter().find(|(ok, _)| !ok) {
                return Err(format!(
                    "{what} differs: got {:?} {:?} {:?}",
                    root.path, root.uri, root.kind
                ));
            }
            // Canonical forms are fixed points.
            let again = resolve(
                &RootInput::host(root.uri.clone(), None, root.access),
                &rules,
            )
            .map_err(|e| format!("canonical URI refused: {e}"))?;
            if again.path != root.path || again.uri != root.uri {
                return Err(format!("not idempotent: {:?} -> {:?}", root.uri, again.uri));
            }
            Ok(())
        }
        (Expect::No(reason), Err(refusal)) => {
            if refusal.reason != *reason {
                return Err(format!("refused for {:?}", refusal.reason));
            }
            if refusal.input != row.input.raw || refusal.from != row.input.source {
                return Err(format!("refusal names {:?}", refusal));
            }
            let msg = refusal.to_string();
            let want = format!("root {} refused: {}", row.input.raw, reason);
            if msg != want {
                return Err(format!("message {msg:?}, expected {want:?}"));
            }
            Ok(())
        }
        (_, Ok(root)) => Err(format!("accepted as {:?} {:?}", root.path, root.uri)),
        (_, Err(refusal)) => Err(format!("refused: {refusal}")),
    }
}

#[test]
fn corpus() {
    let fx = Fixture::new();
    let rows = rows(&fx);
    let accepted = rows
        .iter()
        .filter(|r| matches!(r.expect, Expect::Ok { .. }))
        .count();
    let refused = rows.len() - accepted;
    eprintln!(
        "roots corpus: {} rows, {accepted} accepted, {refused} refused",
        rows.len()
    );
    assert!(rows.len() >= 80, "only {} rows", rows.len());
    assert!(accepted >= 30 && refused >= 50);
    let failures: Vec<String> = rows
        .iter()
        .filter_map(|row| {
            check_row(&fx, row).err().map(|e| {
                format!(
                    "  line {} ({:?}, {:?} {:?}): {e}\n      expected {:?}",
                    row.at, row.rules, row.input.source, row.input.raw, row.expect
                )
            })
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} rows failed:\n{}",
        failures.len(),
        rows.len(),
        failures.join("\n")
    );
}

/// The fixture must not sit inside a path the built-in list denies (for the
/// real home directory too), or every row would be refused for that.
#[test]
fn fixture_is_not_inside_a_denied_path() {
    let fx = Fixture::new();
    let real_home = std::env::var_os("HOME").map(PathBuf::from);
    let real = Policy::builtin(real_home.as_deref()).unwrap();
    for rule in real.deny.iter().chain(&fx.policy_b.deny) {
        for name in rule.names() {
            assert!(
                !fx.base.starts_with(name),
                "{:?} is inside denied {name:?}",
                fx.base
            );
        }
    }
}

#[test]
fn refusal_messages_name_input_reason_and_policy_line() {
    let fx = Fixture::new();
    let p = fx.rules(RuleSet::P);
    let b = fx.rules(RuleSet::B);
    let pf = fx.policy_p_file.display().to_string();
    let base = fx.base.display().to_string();
    let msg = |input: RootInput, rules: &RootRules| match resolve(&input, rules) {
        Ok(root) => panic!("{} accepted as {:?}", input.raw, root.path),
        Err(r) => r.to_string(),
    };

    // "~/.ssh" is on line 9 of POLICY_P.
    assert_eq!(
        msg(host(fx.u("home/.ssh")), &p),
        format!(
            "root file://{base}/home/.ssh refused: inside denied path ~/.ssh (policy {pf} line 9)"
        )
    );
    assert_eq!(
        msg(cli("~/.aws"), &p),
        format!("root ~/.aws refused: inside denied path ~/.aws (policy {pf} line 10)")
    );
    assert_eq!(
        msg(cli("~"), &p),
        format!(
            "root ~ refused: contains denied path ~/.ssh (policy {pf} line 9); \
             Landlock cannot carve a hole in a root, so choose a narrower root"
        )
    );
    assert_eq!(
        msg(host(fx.u("home/work/vault")), &p),
        format!(
            "root file://{base}/home/work/vault refused: inside denied path ~/vault_link (policy {pf} line 11)"
        )
    );
    assert_eq!(
        msg(host(fx.u("etc/p.toml")), &p),
        format!(
            "root file://{base}/etc/p.toml refused: inside denied path {pf} (policy files are never exposed)"
        )
    );
    assert_eq!(
        msg(cli("~/.aws/credentials"), &b),
        "root ~/.aws/credentials refused: inside denied path ~/.aws (built-in)"
    );
    assert_eq!(
        msg(host(fx.u("outside")), &p),
        format!(
            "root file://{base}/outside refused: {base}/outside is outside the policy ceiling \
             (roots.allow_under: ~, {base}/ceil)"
        )
    );
    assert_eq!(
        msg(host("file://evil.com/x"), &p),
        "root file://evil.com/x refused: host \"evil.com\" is not allowed: a root must be on this machine (use file:///path)"
    );
    let dotted = fx.u("home/work/%2e%2e/.ssh");
    assert_eq!(
        msg(host(dotted.clone()), &p),
        format!(
            "root {dotted} refused: segment {} is \"..\": dot segments are refused, not normalized",
            fx.seg(3)
        )
    );
    assert_eq!(
        msg(host(fx.u("home/work/nope")), &p),
        format!("root file://{base}/home/work/nope refused: {base}/home/work/nope does not exist")
    );
    assert_eq!(
        msg(host("file:///"), &p),
        "root file:/// refused: the filesystem root / is not allowed as a root \
         (set roots.allow_filesystem_root = true in a policy to allow it)"
    );
    assert_eq!(
        msg(pol(fx.s("ceil")), &p),
        format!(
            "root {base}/ceil refused: roots from the policy are not accepted by the policy (roots.sources)"
        )
    );
}

/// `%252e%252e` decodes once, to a directory literally named `%2e%2e`,
/// which is not the parent.
#[test]
fn double_encoding_names_a_literal_directory_not_the_parent() {
    let fx = Fixture::new();
    let rules = fx.rules(RuleSet::P);
    let root = resolve(&host(fx.u("home/work/proj/%252e%252e")), &rules).unwrap();
    assert_eq!(root.path, fx.p("home/work/proj/%2e%2e"));
    assert!(!root.handle.still_at(&fx.work));
    let names: Vec<String> = root
        .handle
        .dir()
        .unwrap()
        .entries()
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["marker".to_string()]);
    let meta = std::fs::metadata(&root.path).unwrap();
    let parent = std::fs::metadata(fx.p("home/work")).unwrap();
    assert_ne!((meta.dev(), meta.ino()), (parent.dev(), parent.ino()));
}

/// The handle, not the path, is what the root is: renaming the directory
/// and planting a symlink at the old name does not move the root.
#[test]
fn the_handle_is_what_is_ruled_on() {
    let fx = Fixture::new();
    let rules = fx.rules(RuleSet::P);
    let old = fx.work.join("moving");
    mkdir(&old);
    touch(&old.join("original"));
    let elsewhere = fx.work.join("elsewhere");
    mkdir(&elsewhere);
    touch(&elsewhere.join("impostor"));

    let root = resolve(&host(path_to_uri(&old)), &rules).unwrap();
    assert!(root.handle.still_at(&old));

    let moved = fx.work.join("moved");
    std::fs::rename(&old, &moved).unwrap();
    symlink(&elsewhere, &old).unwrap();

    assert!(!root.handle.still_at(&old));
    assert!(root.handle.still_at(&moved));
    let names: Vec<String> = root
        .handle
        .dir()
        .unwrap()
        .entries()
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["original".to_string()]);
    // The path recorded is the one that was checked, not re-resolved.
    assert_eq!(root.path, old);
    // Resolving the old name again now finds the other directory.
    let again = resolve(&host(path_to_uri(&old)), &rules).unwrap();
    assert_eq!(again.path, elsewhere);
}

#[test]
fn a_file_root_has_no_directory_handle() {
    let fx = Fixture::new();
    let root = resolve(&host(fx.u("home/work/file.txt")), &fx.rules(RuleSet::P)).unwrap();
    assert_eq!(root.kind, RootKind::File);
    let err = root.handle.dir().unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOTDIR));
}

/// Static roots come out of policy parsing as inputs from the policy
/// source, with `~` expanded, and resolve like any other root.
#[test]
fn policy_static_roots() {
    let fx = Fixture::new();
    let text = format!(
        "{POLICY_B}\n[[roots.static]]\npath = \"~/work/abcdé\"\naccess = \"read-only\"\nname = \"docs\"\n\
         \n[[roots.static]]\npath = \"~/abé\"\n\
         \n[[roots.static]]\npath = \"FILE:///{}\"\n",
        fx.s("home/work/proj").trim_start_matches('/')
    );
    let policy = Policy::parse(&text, Some(&fx.policy_b_file), Some(&fx.home)).unwrap();
    let raws: Vec<&str> = policy.static_roots.iter().map(|r| r.raw.as_str()).collect();
    let abe = fx.s("home/abé");
    let proj_uri = format!("FILE://{}", fx.s("home/work/proj"));
    assert_eq!(
        raws,
        vec![
            fx.s("home/work/abcdé").as_str(),
            abe.as_str(),
            proj_uri.as_str()
        ]
    );
    let rules = policy.root_rules(None);
    let docs = resolve(&policy.static_roots[0], &rules).unwrap();
    assert_eq!(docs.path, fx.p("home/work/abcdé"));
    assert_eq!(docs.name, "docs");
    assert_eq!(docs.access, Access::ReadOnly);
    assert_eq!(docs.source, RootSource::Policy);
    let missing = resolve(&policy.static_roots[1], &rules).unwrap_err();
    assert_eq!(missing.reason, RefusalReason::NotFound(fx.p("home/abé")));
    let proj = resolve(&policy.static_roots[2], &rules).unwrap();
    assert_eq!(proj.uri, fx.u("home/work/proj"));
}

// ---------------------------------------------------------------------
// merge()

fn root_at(fx: &Fixture, rel: &str, access: Access, name: &str) -> CanonicalRoot {
    let input = RootInput::host(fx.u(rel), Some(name.to_string()), access);
    resolve(&input, &RootRules::default()).unwrap()
}

fn summary(roots: &[CanonicalRoot]) -> Vec<(PathBuf, Access, String)> {
    roots
        .iter()
        .map(|r| (r.path.clone(), r.access, r.name.clone()))
        .collect()
}

#[test]
fn merge_duplicates_keep_widest_access_and_first_name() {
    use Access::*;
    let fx = Fixture::new();
    let proj = fx.p("home/work/proj");
    // The first given is read-only; a later duplicate is read-write.
    let m = merge(vec![
        root_at(&fx, "home/work/proj", ReadOnly, "first"),
        root_at(&fx, "home/work/link_to_proj", ReadWrite, "second"),
        root_at(&fx, "home/work/proj/", ReadWrite, "third"),
    ]);
    assert_eq!(
        summary(&m.roots),
        vec![(proj.clone(), ReadWrite, "first".into())]
    );
    assert_eq!(m.folded.len(), 2);
    assert!(m.folded.iter().all(|(_, into)| *into == proj));

    // Same access everywhere: the first given is kept whole.
    let m = merge(vec![
        root_at(&fx, "home/work/proj", ReadOnly, "a"),
        root_at(&fx, "home/work/chain1", ReadOnly, "b"),
    ]);
    assert_eq!(
        summary(&m.roots),
        vec![(proj.clone(), ReadOnly, "a".into())]
    );
    assert_eq!(m.roots[0].input, fx.u("home/work/proj"));
    assert_eq!(m.folded[0].0.name, "b");

    let m = merge(vec![
        root_at(&fx, "home/work/chain1", ReadWrite, "b"),
        root_at(&fx, "home/work/proj", ReadWrite, "a"),
    ]);
    assert_eq!(summary(&m.roots), vec![(proj, ReadWrite, "b".into())]);
}

#[test]
fn merge_nested_roots() {
    use Access::*;
    let fx = Fixture::new();
    let p = |rel: &str| fx.p(rel);

    // Read-only inside read-write adds nothing.
    let m = merge(vec![
        root_at(&fx, "home/work/proj/src", ReadOnly, "src"),
        root_at(&fx, "home/work/proj", ReadWrite, "proj"),
    ]);
    assert_eq!(
        summary(&m.roots),
        vec![(p("home/work/proj"), ReadWrite, "proj".into())]
    );
    assert_eq!(m.folded.len(), 1);
    assert_eq!(m.folded[0].0.path, p("home/work/proj/src"));
    assert_eq!(m.folded[0].1, p("home/work/proj"));

    // Read-only inside read-only, and a file inside a directory.
    let m = merge(vec![
        root_at(&fx, "home/work/proj", ReadOnly, "proj"),
        root_at(&fx, "home/work/proj/src", ReadOnly, "src"),
        root_at(&fx, "home/work/proj/README.md", ReadOnly, "readme"),
    ]);
    assert_eq!(
        summary(&m.roots),
        vec![(p("home/work/proj"), ReadOnly, "proj".into())]
    );
    assert_eq!(m.folded.len(), 2);

    // Read-write inside read-only is kept, and what lies inside it is
    // merged into the nearest enclosing root.
    let m = merge(vec![
        root_at(&fx, "home/work", ReadOnly, "work"),
        root_at(&fx, "home/work/proj/src", ReadOnly, "src"),
        root_at(&fx, "home/work/proj", ReadWrite, "proj"),
        root_at(&fx, "home/work/proj/README.md", ReadWrite, "readme"),
        root_at(&fx, "home/work/file.txt", ReadWrite, "file"),
    ]);
    assert_eq!(
        summary(&m.roots),
        vec![
            (p("home/work"), ReadOnly, "work".into()),
            (p("home/work/file.txt"), ReadWrite, "file".into()),
            (p("home/work/proj"), ReadWrite, "proj".into()),
        ]
    );
    let mut folded: Vec<(PathBuf, PathBuf)> = m
        .folded
        .iter()
        .map(|(r, into)| (r.path.clone(), into.clone()))
        .collect();
    folded.sort();
    assert_eq!(
        folded,
        vec![
            (p("home/work/proj/README.md"), p("home/work/proj")),
            (p("home/work/proj/src"), p("home/work/proj")),
        ]
    );
}

#[test]
fn merge_keeps_sibling_prefixes_apart() {
    use Access::*;
    let fx = Fixture::new();
    for (outer, sibling) in [("r", "r_evil"), ("ceil", "ceil_evil")] {
        let m = merge(vec![
            root_at(&fx, sibling, ReadOnly, "sibling"),
            root_at(&fx, outer, ReadWrite, "outer"),
        ]);
        assert_eq!(
            summary(&m.roots),
            vec![
                (fx.p(outer), ReadWrite, "outer".into()),
                (fx.p(sibling), ReadOnly, "sibling".into()),
            ]
        );
        assert!(m.folded.is_empty());
    }
}

/// Every permutation of the same roots merges to the same result (paths,
/// access and what was folded where). Names are left out: among exact
/// duplicates the first given wins by design.
#[test]
fn merge_is_deterministic() {
    use Access::*;
    let fx = Fixture::new();
    let base = vec![
        root_at(&fx, "home/work", ReadOnly, "work"),
        root_at(&fx, "home/work/proj", ReadWrite, "proj"),
        root_at(&fx, "home/work/proj/src", ReadOnly, "src"),
        root_at(&fx, "home/work/link_to_proj", ReadOnly, "link"),
        root_at(&fx, "r", ReadOnly, "r"),
        root_at(&fx, "r_evil", ReadWrite, "r_evil"),
    ];
    type Shape = (Vec<(PathBuf, Access)>, Vec<(PathBuf, Access, PathBuf)>);
    let shape = |roots: Vec<CanonicalRoot>| -> Shape {
        let m = merge(roots);
        let kept = m.roots.iter().map(|r| (r.path.clone(), r.access)).collect();
        let mut folded: Vec<_> = m
            .folded
            .iter()
            .map(|(r, into)| (r.path.clone(), r.access, into.clone()))
            .collect();
        folded.sort();
        (kept, folded)
    };
    let expected = shape(base.clone());
    assert_eq!(
        expected.0,
        vec![
            (fx.p("home/work"), ReadOnly),
            (fx.p("home/work/proj"), ReadWrite),
            (fx.p("r"), ReadOnly),
            (fx.p("r_evil"), ReadWrite),
        ]
    );
    assert_eq!(expected.1.len(), 2);

    // Heap's algorithm: all 720 orders.
    let mut items = base;
    let n = items.len();
    let mut c = vec![0usize; n];
    let mut seen = 1;
    let mut i = 0;
    while i < n {
        if c[i] < i {
            if i % 2 == 0 {
                items.swap(0, i);
            } else {
                items.swap(c[i], i);
            }
            assert_eq!(shape(items.clone()), expected);
            seen += 1;
            c[i] += 1;
            i = 0;
        } else {
            c[i] = 0;
            i += 1;
        }
    }
    assert_eq!(seen, 720);
}
