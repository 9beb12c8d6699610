//! Property tests for the roots engine: URI parsing and printing, and
//! canonicalization through the filesystem.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use proptest::collection::vec;
use proptest::prelude::*;
use rootfence::roots::{Access, RootInput, RootRules, parse_file_uri, path_to_uri, resolve};

const CASES: u32 = 256;

fn config() -> ProptestConfig {
    ProptestConfig::with_cases(CASES)
}

/// One byte of a path segment: anything but `/` and NUL, biased towards
/// bytes that need care (`%`, `.`, space, URI delimiters, non-UTF-8).
fn segment_byte() -> impl Strategy<Value = u8> {
    prop_oneof![
        6 => b'a'..=b'z',
        1 => Just(b'%'),
        2 => Just(b'.'),
        1 => Just(b' '),
        1 => prop::sample::select(b"#?\\:@~+&=;,'!$()*[]".to_vec()),
        2 => 0x80u8..=0xff,
        2 => any::<u8>().prop_filter("no '/' or NUL", |b| *b != b'/' && *b != 0),
    ]
}

/// A piece of a segment: a byte, or a run of bytes that looks like an
/// escape or a dot segment (so that names such as `%2e%2e`, `..%41` and
/// `%25` come up often).
fn segment_piece() -> impl Strategy<Value = Vec<u8>> {
    let snippets: Vec<&[u8]> = vec![
        b"%2e",
        b"%2E",
        b"%41",
        b"%25",
        b"%2F",
        b"%00",
        b"%zz",
        b"..",
        b".",
        b"\xff\xfe",
        b"\xc3\xa9",
    ];
    prop_oneof![
        4 => segment_byte().prop_map(|b| vec![b]),
        1 => prop::sample::select(snippets).prop_map(<[u8]>::to_vec),
    ]
}

/// A path segment as bytes: raw bytes (often not UTF-8) or a unicode
/// string; never empty, `.` or `..`, never containing `/` or NUL.
fn segment() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => vec(segment_piece(), 1..6).prop_map(|p| p.concat()),
        1 => "[^/\u{0}]{1,6}".prop_map(String::into_bytes),
    ]
    .prop_filter("dot segment", |s| s != b"." && s != b"..")
}

fn join(base: &Path, segs: &[Vec<u8>]) -> PathBuf {
    segs.iter()
        .fold(base.to_path_buf(), |p, s| p.join(OsStr::from_bytes(s)))
}

fn bytes(p: &Path) -> &[u8] {
    p.as_os_str().as_bytes()
}

/// Absolute, no trailing slash (except `/`), no `.`, `..` or empty segments.
fn is_clean_absolute(p: &Path) -> bool {
    let b = bytes(p);
    if b == b"/" {
        return true;
    }
    b.starts_with(b"/")
        && b[1..]
            .split(|&c| c == b'/')
            .all(|s| !s.is_empty() && s != b"." && s != b"..")
}

fn host(uri: String) -> RootInput {
    RootInput::host(uri, None, Access::ReadWrite)
}

/// Directories with arbitrary names: the URI printed for them parses back
/// to the same bytes, resolves to the same directory (through a symlink
/// too), and the canonical URI is a fixed point of resolving.
#[test]
fn uri_root_uri_round_trips_through_the_filesystem() {
    let rules = RootRules::default();
    proptest!(config(), |(segs in vec(segment(), 1..4), via_link in any::<bool>())| {
        let tmp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(tmp.path()).unwrap();
        let target = join(&base.join("t"), &segs);
        std::fs::create_dir_all(&target).unwrap();
        let asked = if via_link {
            let link = base.join("link");
            symlink(&target, &link).unwrap();
            link
        } else {
            target.clone()
        };

        let uri = path_to_uri(&asked);
        let parsed = parse_file_uri(&uri).unwrap();
        prop_assert_eq!(bytes(&parsed), bytes(&asked));

        let root = resolve(&host(uri.clone()), &rules).unwrap();
        prop_assert_eq!(bytes(&root.path), bytes(&target));
        prop_assert_eq!(&root.uri, &path_to_uri(&target));
        prop_assert!(is_clean_absolute(&root.path));
        prop_assert!(root.handle.still_at(&target));

        let again = resolve(&host(root.uri.clone()), &rules).unwrap();
        prop_assert_eq!(bytes(&again.path), bytes(&root.path));
        prop_assert_eq!(&again.uri, &root.uri);
    });
}

/// Command-line paths made of names, symlinks, `.`, `..` and empty
/// components: whatever is accepted comes out canonical (no dot or empty
/// segments, the real directory), and resolving its URI is a fixed point.
#[test]
fn canonical_roots_are_clean_and_idempotent() {
    let tmp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    for d in ["a/b/c", "a/d", "e"] {
        std::fs::create_dir_all(base.join(d)).unwrap();
    }
    symlink("a/b", base.join("l")).unwrap();
    symlink("../../e", base.join("a/b/up")).unwrap();
    symlink(".", base.join("a/dot")).unwrap();
    std::fs::write(base.join("a/f"), b"x").unwrap();
    let rules = RootRules {
        cwd: Some(base.join("a/b")),
        ..RootRules::default()
    };
    let part = prop::sample::select(vec![
        "a", "b", "c", "d", "e", "f", "l", "up", "dot", ".", "..", "", "nope",
    ]);
    proptest!(config(), |(parts in vec(part, 1..8), absolute in any::<bool>())| {
        let rel = parts.join("/");
        let raw = if absolute {
            format!("{}/{rel}", base.display())
        } else {
            rel
        };
        let Ok(root) = resolve(&RootInput::command_line(raw.clone(), Access::ReadOnly), &rules)
        else {
            return Ok(());
        };
        prop_assert!(is_clean_absolute(&root.path), "{raw:?} -> {:?}", root.path);
        prop_assert_eq!(
            std::fs::canonicalize(&root.path).unwrap(),
            root.path.clone()
        );
        prop_assert!(root.handle.still_at(&root.path));
        let again = resolve(&host(root.uri.clone()), &rules).unwrap();
        prop_assert_eq!(bytes(&again.path), bytes(&root.path));
        prop_assert_eq!(&again.uri, &root.uri);
    });
}

/// Text that looks like root URIs: pieces of schemes, authorities, escapes
/// and separators.
fn uri_soup() -> impl Strategy<Value = String> {
    let token = prop::sample::select(vec![
        "file:",
        "FILE:",
        "file://",
        "//",
        "/",
        "localhost",
        "LocalHost",
        "evil",
        "@",
        ":",
        "[",
        "]",
        "?",
        "#",
        "%",
        "%2",
        "%2e",
        "%2E",
        "%2f",
        "%2F",
        "%00",
        "%25",
        "%ff",
        "%FF",
        ".",
        "..",
        "a",
        "b",
        "~",
        "\\",
        " ",
        "é",
        "\n",
        "\u{85}",
        "http:",
        "",
    ]);
    vec(token, 0..12).prop_map(|t| t.concat())
}

/// Well-formed-looking root URIs: a `file` prefix, segments that are often
/// dot segments, escapes or empty, and sometimes a trailing slash, query or
/// fragment.
fn file_uri() -> impl Strategy<Value = String> {
    let prefix = prop::sample::select(vec![
        "file://",
        "file:///",
        "FILE:///",
        "file:/",
        "file:",
        "file://localhost/",
        "file://LOCALHOST/",
        "file://evil/",
        "file://u@/",
        "file://:1/",
    ]);
    let seg = prop::sample::select(vec![
        "a", "b", "..", ".", "%2e", "%2e%2e", "%2E%2e", ".%2e", "%2e.", "...", "", "%2f", "a%2Fb",
        "%00", "%", "%2", "%zz", "%252e", "%41", "%ff%FE", "%C3%A9", "é", " ", "~",
    ]);
    let tail = prop::sample::select(vec!["", "", "", "/", "//", "?", "#x", "?a#b"]);
    (prefix, vec(seg, 0..6), tail).prop_map(|(p, s, t)| format!("{p}{}{t}", s.join("/")))
}

fn check_accepted(input: &str) -> Result<(), TestCaseError> {
    if let Ok(path) = parse_file_uri(input) {
        prop_assert!(is_clean_absolute(&path), "{input:?} -> {path:?}");
        prop_assert!(!bytes(&path).contains(&0));
        let uri = path_to_uri(&path);
        let back = parse_file_uri(&uri);
        prop_assert_eq!(back.as_ref().map(|p| bytes(p)), Ok(bytes(&path)));
    }
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    /// The parser never panics, and whatever it accepts is a clean
    /// absolute path that prints and parses back to itself.
    #[test]
    fn parser_never_panics_and_accepts_only_clean_paths(input in any::<String>()) {
        check_accepted(&input)?;
    }

    #[test]
    fn parser_on_uri_like_text(input in uri_soup()) {
        check_accepted(&input)?;
    }

    #[test]
    fn parser_on_file_uri_shapes(input in file_uri()) {
        check_accepted(&input)?;
    }

    #[test]
    fn parser_on_file_uris_with_arbitrary_paths(path in "[^?#]{0,40}") {
        check_accepted(&format!("file://{path}"))?;
        check_accepted(&format!("file:///{path}"))?;
    }

    /// Long URIs made of raw multi-byte characters decode to more bytes than
    /// their length suggests: whatever is accepted still prints to a URI
    /// that parses back.
    #[test]
    fn parser_on_long_multibyte_uris(segs in vec("[a\u{e9}\u{20ac}\u{1d11e}]{1,200}", 1..40)) {
        check_accepted(&format!("file:///{}", segs.join("/")))?;
    }

    /// `parse_file_uri(path_to_uri(p)) == p`, byte for byte, for absolute
    /// paths without dot or empty segments (including `/`).
    #[test]
    fn printing_then_parsing_is_identity(segs in vec(segment(), 0..6)) {
        let path = join(Path::new("/"), &segs);
        let uri = path_to_uri(&path);
        prop_assert!(uri.starts_with("file:///"));
        prop_assert!(
            uri.bytes().all(|b| b.is_ascii_graphic() && !b"?#\\".contains(&b)),
            "{uri:?}"
        );
        // Escapes are printed with upper-case hex.
        prop_assert!(
            uri.split('%').skip(1).all(|e| e.bytes().take(2).all(|b| !b.is_ascii_lowercase())),
            "{uri:?}"
        );
        let back = parse_file_uri(&uri);
        prop_assert_eq!(back.as_ref().map(|p| bytes(p)), Ok(bytes(&path)));
    }
}
