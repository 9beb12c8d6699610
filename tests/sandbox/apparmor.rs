//! The AppArmor profile that lets rootfence make user namespaces where
//! AppArmor restricts them (Ubuntu 24.04 and later): the one `rootfence
//! doctor --apparmor` prints for this binary, the one it writes where asked,
//! and the one shipped in `packaging/apparmor/`, each parsed by AppArmor's
//! own parser (`tests/peers/bin/apparmor_parser`, an AppArmor 4 parser that
//! knows `userns`; `tests/peers/install.sh` provides it).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn parser() -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/bin/apparmor_parser");
    assert!(
        p.exists(),
        "{} is missing: run tests/peers/install.sh",
        p.display()
    );
    p
}

/// Parse the profile in `file` without loading it into a kernel.
fn parses(file: &Path) -> Result<(), String> {
    let out = Command::new(parser())
        .args(["--skip-kernel-load", "--skip-cache"])
        .arg(file)
        .output()
        .expect("run apparmor_parser");
    if out.status.success() {
        Ok(())
    } else {
        Err(common::stderr(&out))
    }
}

#[test]
fn the_printed_profile_parses_and_names_this_binary() {
    let out = Command::new(common::rootfence())
        .args(["doctor", "--apparmor"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::stderr(&out));
    let text = common::stdout(&out);
    let me = std::fs::canonicalize(common::rootfence()).unwrap();
    assert!(
        text.contains(&format!("profile rootfence \"{}\"", me.display())),
        "{text}"
    );
    assert!(text.contains("\n  userns,\n"), "{text}");
    assert!(text.contains("sudo apparmor_parser -r /etc/apparmor.d/rootfence"));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rootfence");
    std::fs::write(&file, &text).unwrap();
    parses(&file).unwrap();
    // The twin that must fail: the parser is not a no-op.
    std::fs::write(&file, text.replace("userns,", "usernss,")).unwrap();
    assert!(parses(&file).is_err(), "a misspelled rule was accepted");
}

#[test]
fn the_profile_is_written_where_asked_with_the_command_to_load_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rootfence.apparmor");
    let out = Command::new(common::rootfence())
        .args(["doctor", "--apparmor"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::stderr(&out));
    assert!(
        common::stdout(&out).contains(&format!("sudo apparmor_parser -r {}", file.display())),
        "{}",
        common::stdout(&out)
    );
    let printed = Command::new(common::rootfence())
        .args(["doctor", "--apparmor"])
        .output()
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        common::stdout(&printed)
    );
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&file).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o644);
    parses(&file).unwrap();
}

#[test]
fn the_shipped_profile_parses() {
    parses(&Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/apparmor/rootfence")).unwrap();
}
