//! rootfence's own small state files (what a machine gives, `PATH`
//! directories' listings, launcher answers): read whole and bounded,
//! written whole or not at all.

use std::io::{self, Read as _};
use std::os::unix::fs::DirBuilderExt as _;
use std::path::Path;

/// The bytes of `file`; `None` when it cannot be read, or holds more than
/// `max` bytes (then it is not read whole, and not used).
pub fn read_whole(file: &Path, max: u64) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    std::fs::File::open(file)
        .ok()?
        .take(max + 1)
        .read_to_end(&mut out)
        .ok()?;
    (out.len() as u64 <= max).then_some(out)
}

/// Write `bytes` to `file` through a new name renamed into place, its
/// directory made first (mode 0700): a reader finds the old file or the
/// new one, never part of one.
pub fn write_whole(file: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = file
        .parent()
        .ok_or_else(|| io::Error::other("no directory"))?;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let tmp = dir.join(format!(".{}.tmp", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, file)
}
