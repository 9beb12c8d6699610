//! Listing and describing: `list_directory`, `list_directory_with_sizes`,
//! `get_file_info`, in the reference server's text formats.

use std::time::{SystemTime, UNIX_EPOCH};

use cap_std::fs::MetadataExt;

use super::error::FsError;
use super::paths::Target;

/// One entry of a directory, as its `d_type` says (a symlink is not a
/// directory here, whatever it points to).
struct Entry {
    name: String,
    is_dir: bool,
}

fn entries(t: &Target) -> Result<Vec<(Entry, cap_std::fs::DirEntry)>, FsError> {
    let read = t.root.dir.read_dir(t.rel_or_dot()).map_err(t.err("list"))?;
    let mut out = Vec::new();
    for e in read {
        let e = e.map_err(t.err("list"))?;
        let is_dir = e.file_type().map(|ft| ft.is_dir()).unwrap_or(false);
        out.push((
            Entry {
                name: e.file_name().to_string_lossy().into_owned(),
                is_dir,
            },
            e,
        ));
    }
    Ok(out)
}

/// `[DIR] name` / `[FILE] name` lines, in the directory's order.
pub fn list(t: &Target) -> Result<String, FsError> {
    Ok(entries(t)?
        .iter()
        .map(|(e, _)| format!("{} {}", if e.is_dir { "[DIR]" } else { "[FILE]" }, e.name))
        .collect::<Vec<_>>()
        .join("\n"))
}

/// Lines with sizes, sorted by name or by size (largest first), and a
/// summary.
pub fn list_with_sizes(t: &Target, by_size: bool) -> Result<String, FsError> {
    let mut rows: Vec<(Entry, u64)> = entries(t)?
        .into_iter()
        .map(|(e, d)| {
            // The size of what the entry names, links followed beneath the
            // root (a link out counts 0, as an unreadable entry does).
            let size = t
                .root
                .dir
                .metadata(t.rel.join(d.file_name()))
                .map(|m| m.len())
                .unwrap_or(0);
            (e, size)
        })
        .collect();
    if by_size {
        rows.sort_by_key(|r| std::cmp::Reverse(r.1));
    } else {
        rows.sort_by(|a, b| {
            a.0.name
                .to_lowercase()
                .cmp(&b.0.name.to_lowercase())
                .then_with(|| a.0.name.cmp(&b.0.name))
        });
    }
    let mut lines: Vec<String> = rows
        .iter()
        .map(|(e, size)| {
            let kind = if e.is_dir { "[DIR]" } else { "[FILE]" };
            let size = if e.is_dir {
                String::new()
            } else {
                format!("{:>10}", format_size(*size))
            };
            format!("{kind} {:<30} {size}", e.name)
        })
        .collect();
    let files = rows.iter().filter(|(e, _)| !e.is_dir).count();
    let dirs = rows.len() - files;
    let total: u64 = rows.iter().filter(|(e, _)| !e.is_dir).map(|(_, s)| s).sum();
    lines.push(String::new());
    lines.push(format!("Total: {files} files, {dirs} directories"));
    lines.push(format!("Combined size: {}", format_size(total)));
    Ok(lines.join("\n"))
}

/// `size`, the three times, type and permission bits, one `key: value` a
/// line (links followed beneath the root).
pub fn info(t: &Target) -> Result<String, FsError> {
    let m = t.root.dir.metadata(t.rel_or_dot()).map_err(t.err("stat"))?;
    let time = |r: std::io::Result<cap_std::time::SystemTime>| {
        js_date(r.map(|s| s.into_std()).unwrap_or(UNIX_EPOCH))
    };
    Ok([
        format!("size: {}", m.len()),
        format!("created: {}", time(m.created())),
        format!("modified: {}", time(m.modified())),
        format!("accessed: {}", time(m.accessed())),
        format!("isDirectory: {}", m.is_dir()),
        format!("isFile: {}", m.is_file()),
        format!("permissions: {:03o}", m.mode() & 0o777),
    ]
    .join("\n"))
}

/// Sizes as the reference server prints them: `0 B`, `512 B`, `1.50 KB`.
pub fn format_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
    if bytes == 0 {
        return "0 B".into();
    }
    let i = ((bytes as f64).ln() / 1024f64.ln()).floor() as usize;
    if i == 0 {
        return format!("{bytes} B");
    }
    let i = i.min(UNITS.len() - 1);
    format!("{:.2} {}", bytes as f64 / 1024f64.powi(i as i32), UNITS[i])
}

/// A time as JavaScript's `Date.prototype.toString` prints it, in the
/// local time zone: `Wed Nov 25 2026 10:20:03 GMT+0000 (Coordinated
/// Universal Time)`.
pub fn js_date(t: SystemTime) -> String {
    let secs = match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_secs() as libc::time_t,
        Err(e) => -(e.duration().as_secs() as libc::time_t),
    };
    // SAFETY: `tm` is plain old data for which all-zero is a valid value;
    // localtime_r writes only into it and reads only `secs`.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are valid for the call; localtime_r is
    // thread-safe.
    let ok = unsafe { !libc::localtime_r(&secs, &mut tm).is_null() };
    if !ok {
        return format!("@{secs}");
    }
    const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let off = tm.tm_gmtoff / 60;
    let sign = if off < 0 { '-' } else { '+' };
    let zone = if tm.tm_zone.is_null() {
        String::new()
    } else {
        // SAFETY: a non-null tm_zone from localtime_r points to a
        // NUL-terminated string owned by the C library's time zone state.
        unsafe { std::ffi::CStr::from_ptr(tm.tm_zone) }
            .to_string_lossy()
            .into_owned()
    };
    let zone = match zone.as_str() {
        "UTC" | "GMT" | "" if off == 0 => "Coordinated Universal Time".to_string(),
        _ => zone,
    };
    format!(
        "{} {} {:02} {} {:02}:{:02}:{:02} GMT{sign}{:02}{:02} ({zone})",
        DAYS[tm.tm_wday.clamp(0, 6) as usize],
        MONTHS[tm.tm_mon.clamp(0, 11) as usize],
        tm.tm_mday,
        tm.tm_year + 1900,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec,
        off.abs() / 60,
        off.abs() % 60,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_as_the_reference_prints_them() {
        assert_eq!(format_size(0), "0 B");
        assert_eq!(format_size(3), "3 B");
        assert_eq!(format_size(1023), "1023 B");
        assert_eq!(format_size(1536), "1.50 KB");
        assert_eq!(format_size(5 << 20), "5.00 MB");
    }
}
