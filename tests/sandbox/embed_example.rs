//! `examples/embed.rs`, the library's surface used as a Rust host would:
//! it launches rootfence's own filesystem server fenced to one root and
//! reads a file inside the root and one outside.

use std::path::PathBuf;
use std::process::Command;

/// The example's executable (`cargo test` builds examples beside the
/// binaries).
fn example() -> PathBuf {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_rootfence"));
    let dir = bin.parent().expect("the binary is in a directory");
    let exe = dir.join("examples").join("embed");
    assert!(exe.is_file(), "{} was not built", exe.display());
    exe
}

#[test]
fn the_embedding_example_serves_inside_its_root_and_refuses_outside() {
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let out = Command::new(example())
        .arg(&root)
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_rootfence"))
        .arg("fs")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("read_text_file"), "{stdout}");
    let inside = root.join("embed-example.txt");
    assert!(
        stdout.contains(&format!("{}: served: inside the root", inside.display())),
        "{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("/etc/passwd: refused"),
        "{stdout}\n{stderr}"
    );
    assert!(!stdout.contains("root:x:0"), "{stdout}");
}
