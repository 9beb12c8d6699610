//! Policy files: the shipped examples, precise errors for bad ones, the
//! published JSON Schema.

use std::path::{Path, PathBuf};

use rootfence::policy::{Policy, PolicyError};
use rootfence::roots::Origin;

fn examples() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("policy");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    v.sort();
    v
}

#[test]
fn shipped_examples_are_valid() {
    let ex = examples();
    let names: Vec<String> = ex
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    for want in [
        "default.toml",
        "strict.toml",
        "filesystem-server.toml",
        "python-server.toml",
    ] {
        assert!(names.iter().any(|n| n == want), "policy/{want} missing");
    }
    for p in ex {
        let pol = Policy::load(&p, Some(Path::new("/home/u")))
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        // Every loaded policy file denies itself.
        assert!(
            pol.deny.iter().any(|d| d.origin == Origin::PolicyFile),
            "{} does not deny itself",
            p.display()
        );
    }
}

#[test]
fn builtin_default_matches_policy_default_toml() {
    let home = Some(Path::new("/home/u"));
    let builtin = Policy::builtin(home).unwrap();
    let file = Policy::load(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("policy/default.toml"),
        home,
    )
    .unwrap();
    assert_eq!(
        serde_json::to_value(&builtin.raw).unwrap(),
        serde_json::to_value(&file.raw).unwrap()
    );
    // The built-in deny list is in force, expanded against HOME.
    for want in [
        "/home/u/.ssh",
        "/home/u/.gnupg",
        "/home/u/.aws",
        "/home/u/.config/gcloud",
        "/home/u/.kube",
        "/home/u/.docker",
        "/home/u/.netrc",
        "/home/u/.npmrc",
        "/home/u/.pypirc",
        "/home/u/.bash_history",
        "/home/u/.zsh_history",
        "/etc/shadow",
    ] {
        assert!(
            builtin.deny.iter().any(|d| d.path == Path::new(want)),
            "{want} not denied by default"
        );
    }
    // Safe defaults: no network, no sampling.
    assert!(builtin.tcp_connect.is_empty() && builtin.tcp_bind.is_empty());
    assert!(!builtin.raw.network.udp && !builtin.raw.network.unix_sockets);
    assert!(!builtin.raw.sampling.allow);
    assert!(builtin.raw.elicitation.refuse_sensitive && !builtin.raw.elicitation.url);
}

/// (policy text, expected line, expected key, a fragment of the message)
const BAD: &[(&str, usize, &str, &str)] = &[
    (
        "[roots]\nallow_under = [\"~\"]\nfoo = 1\n",
        3,
        "roots.foo",
        "unknown field `foo`",
    ),
    ("bogus = true\n", 1, "bogus", "unknown field `bogus`"),
    ("[nope]\nx = 1\n", 1, "nope", "unknown field `nope`"),
    ("version = 2\n", 1, "version", "version 2 is not supported"),
    (
        "[roots]\nhost_access = \"rwx\"\n",
        2,
        "roots.host_access",
        "unknown variant `rwx`",
    ),
    (
        "[roots]\nsources = [\"host\", \"smoke-signals\"]\n",
        2,
        "roots.sources",
        "unknown variant",
    ),
    (
        "[roots]\nmax_roots = 0\n",
        2,
        "roots.max_roots",
        "at least 1",
    ),
    (
        "[roots]\nmax_roots = -1\n",
        2,
        "roots.max_roots",
        "invalid value",
    ),
    (
        "[roots]\nallow_under = [\n  \"~\",\n  \"rel/dir\",\n]\n",
        4,
        "roots.allow_under",
        "not absolute",
    ),
    (
        "[roots]\nallow_under = [\"~bob/x\"]\n",
        2,
        "roots.allow_under",
        "~user",
    ),
    (
        "[roots]\nallow_under = [\"$USER/x\"]\n",
        2,
        "roots.allow_under",
        "only ~ and $HOME",
    ),
    (
        "[roots]\nallow_under = [\"/a/../b\"]\n",
        2,
        "roots.allow_under",
        ". or ..",
    ),
    (
        "[[roots.static]]\npath = \"/tmp\"\nbogus = 1\n",
        3,
        "roots.static.bogus",
        "unknown field `bogus`",
    ),
    (
        "[[roots.static]]\naccess = \"read-only\"\n",
        1,
        "roots.static",
        "missing field `path`",
    ),
    (
        "[deny]\nbuiltin = false\n",
        2,
        "deny.builtin",
        "i_know = true",
    ),
    (
        "[deny]\npaths = [\"relative/x\"]\n",
        2,
        "deny.paths",
        "not absolute",
    ),
    (
        "[runtime]\nprofile = \"java\"\n",
        2,
        "runtime.profile",
        "unknown variant `java`",
    ),
    (
        "[runtime]\nread = [\"~/.ssh/config\"]\n",
        2,
        "runtime.read",
        "inside denied path ~/.ssh",
    ),
    (
        "[runtime]\nwrite = [\"~\"]\n",
        2,
        "runtime.write",
        "contains denied path",
    ),
    (
        "[network]\ntcp_connect = [\n  443,\n  70000,\n]\n",
        4,
        "network.tcp_connect",
        "70000 is not a TCP port",
    ),
    (
        "[network]\ntcp_bind = [0]\n",
        2,
        "network.tcp_bind",
        "0 is not a TCP port",
    ),
    (
        "[network]\nudp = \"yes\"\n",
        2,
        "network.udp",
        "invalid type",
    ),
    (
        "[env]\npass = [\"PATH\", \"BAD-NAME\"]\n",
        2,
        "env.pass",
        "not a variable name",
    ),
    (
        "[env]\npass = [\"*\"]\n",
        2,
        "env.pass",
        "whole environment",
    ),
    (
        "[env]\nset = { \"1X\" = \"v\" }\n",
        2,
        "env.set",
        "not a variable name",
    ),
    (
        "[limits]\nmax_message_bytes = 10\n",
        2,
        "limits.max_message_bytes",
        "between 1024",
    ),
    (
        "[limits]\nrestart = \"sometimes\"\n",
        2,
        "limits.restart",
        "unknown variant",
    ),
    (
        "# per_minute in a comment\n[sampling]\nallow = true\n\nper_minute = 0\n",
        5,
        "sampling.per_minute",
        "at least 1",
    ),
    (
        "[sampling]\nallow = true\ncontent_types = []\n",
        3,
        "sampling.content_types",
        "at least one",
    ),
    (
        "[sampling]\ncontent_types = [\"video\"]\n",
        2,
        "sampling.content_types",
        "unknown variant `video`",
    ),
    (
        "[sampling]\non_max_tokens = \"truncate\"\n",
        2,
        "sampling.on_max_tokens",
        "unknown variant",
    ),
    (
        "[elicitation]\nsensitive_terms = [\"  \"]\n",
        2,
        "elicitation.sensitive_terms",
        "must not be empty",
    ),
    (
        "[elicitation]\nallow = true\nform = false\n",
        2,
        "elicitation.allow",
        "neither form nor url",
    ),
    (
        "[audit]\nfile = \"audit.jsonl\"\n",
        2,
        "audit.file",
        "not absolute",
    ),
    ("[roots\n", 1, "roots", "unclosed table"),
];

#[test]
fn bad_policies_name_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    for (i, (text, line, key, fragment)) in BAD.iter().enumerate() {
        let f = dir.path().join(format!("bad{i}.toml"));
        std::fs::write(&f, text).unwrap();
        let err = Policy::load(&f, Some(Path::new("/home/u"))).expect_err(text);
        let msg = err.to_string();
        match &err {
            PolicyError::Invalid {
                file,
                line: l,
                key: k,
                ..
            } => {
                assert_eq!(file, &f.display().to_string(), "{text}");
                assert_eq!(l, line, "line for {text:?}: {msg}");
                assert_eq!(k.0.as_deref(), Some(*key), "key for {text:?}: {msg}");
            }
            other => panic!("{text:?}: unexpected {other:?}"),
        }
        assert!(msg.contains(fragment), "{text:?}: {msg}");
        assert!(
            msg.starts_with(&format!(
                "policy {} line {line}, key `{key}`: ",
                f.display()
            )),
            "{msg}"
        );
    }
}

#[test]
fn missing_file_is_a_clear_error() {
    let err = Policy::load(Path::new("/nonexistent/p.toml"), None).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("/nonexistent/p.toml") && msg.contains("cannot read"),
        "{msg}"
    );
}

#[test]
fn deny_entries_carry_their_line() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("p.toml");
    std::fs::write(&f, "# c\n[deny]\npaths = [\n  \"/srv/a\",\n  \"~/b\",\n]\n").unwrap();
    let p = Policy::load(&f, Some(Path::new("/home/u"))).unwrap();
    let find = |path: &str| {
        p.deny
            .iter()
            .find(|d| d.path == Path::new(path))
            .unwrap_or_else(|| panic!("{path} not denied"))
            .origin
            .clone()
    };
    assert_eq!(
        find("/srv/a"),
        Origin::Policy {
            file: f.clone(),
            line: 4
        }
    );
    assert_eq!(
        find("/home/u/b"),
        Origin::Policy {
            file: f.clone(),
            line: 5
        }
    );
}

#[test]
fn published_schema_is_current_and_describes_the_examples() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let published: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("policy/policy.schema.json")).unwrap(),
    )
    .unwrap();
    let current =
        serde_json::to_value(schemars::schema_for!(rootfence::policy::PolicyFile)).unwrap();
    assert_eq!(
        published, current,
        "policy/policy.schema.json is stale: run `cargo run -- schema > policy/policy.schema.json`"
    );
    let validator = jsonschema::validator_for(&published).unwrap();
    for p in examples() {
        let text = std::fs::read_to_string(&p).unwrap();
        let value: toml::Value = toml::from_str(&text).unwrap();
        let json = serde_json::to_value(value).unwrap();
        let errors: Vec<String> = validator
            .iter_errors(&json)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{}: {errors:?}", p.display());
    }
    // And the schema refuses what the loader refuses: unknown keys.
    let bad = serde_json::json!({"roots": {"allow_under": ["/x"], "surprise": 1}});
    assert!(!validator.is_valid(&bad));
}
