//! The watchers turn real filesystem changes into session events.

use std::time::Duration;

use rootfence::policy::PolicyError;
use rootfence::proxy::Change;
use rootfence::watch::{RootWatcher, watch_policy};
use tokio::sync::mpsc;

async fn next(rx: &mut mpsc::UnboundedReceiver<Change>) -> Change {
    tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .expect("no event within 10 s")
        .expect("channel closed")
}

#[tokio::test]
async fn policy_edits_are_loaded_or_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("p.toml");
    std::fs::write(&file, "[limits]\nmax_restarts = 1\n").unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let _w = watch_policy(&file, None, vec![], tx).unwrap();

    // An editor that writes a new file and renames it over the old one.
    let tmp = dir.path().join(".p.toml.swp");
    std::fs::write(&tmp, "[limits]\nmax_restarts = 7\n").unwrap();
    std::fs::rename(&tmp, &file).unwrap();
    match next(&mut rx).await {
        Change::Policy(Ok(p)) => assert_eq!(p.raw.limits.max_restarts, 7),
        other => panic!("{other:?}"),
    }
    // An invalid edit is reported with its line, not applied.
    std::fs::write(&file, "[limits]\nmax_restarts = 7\nbogus = 1\n").unwrap();
    match next(&mut rx).await {
        Change::Policy(Err(e @ PolicyError::Invalid { line: 3, .. })) => {
            assert!(e.to_string().contains("bogus"), "{e}")
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_root_renamed_away_is_noticed() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut w = RootWatcher::new(tx).unwrap();
    w.set(std::slice::from_ref(&root));
    std::fs::rename(&root, dir.path().join("moved")).unwrap();
    assert!(matches!(next(&mut rx).await, Change::RootsMaybeChanged));
}
