//! Executables: finding a command on `PATH`, reading its `#!` line and its
//! ELF interpreter, and the install tree a file belongs to.
//!
//! Effectful (it reads the filesystem), but reads only headers and names:
//! never a whole file.

use std::io::Read;
use std::path::{Path, PathBuf};

use super::HostEnv;

/// Find `name` the way `execvp` would, using `PATH` from `env`.
pub fn which(name: &str, env: &HostEnv) -> Option<PathBuf> {
    if name.contains('/') {
        let p = PathBuf::from(name);
        let p = if p.is_absolute() {
            p
        } else {
            env.cwd.as_ref()?.join(p)
        };
        return is_executable(&p).then_some(p);
    }
    path_dirs(env)
        .into_iter()
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
}

/// The absolute directories of `PATH` (the default search path when it is
/// unset), in order, each once.
pub fn path_dirs(env: &HostEnv) -> Vec<PathBuf> {
    let path = env
        .vars
        .get("PATH")
        .map_or("/usr/local/bin:/usr/bin:/bin", String::as_str);
    let mut out: Vec<PathBuf> = Vec::new();
    for d in path.split(':').filter(|d| d.starts_with('/')) {
        let d = PathBuf::from(d);
        if !out.contains(&d) {
            out.push(d);
        }
    }
    out
}

/// A regular file with an execute bit.
pub fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// A `#!` line: the interpreter and its first argument.
pub fn shebang(p: &Path) -> Option<(String, Option<String>)> {
    let mut buf = [0u8; 256];
    let mut f = std::fs::File::open(p).ok()?;
    let n = f.read(&mut buf).ok()?;
    let head = buf.get(..n)?;
    let rest = head.strip_prefix(b"#!")?;
    let line = rest.split(|&b| b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?.trim();
    let mut parts = line.splitn(2, char::is_whitespace);
    let interp = parts.next()?.to_string();
    let arg = parts
        .next()
        .map(|a| a.trim().to_string())
        .filter(|a| !a.is_empty());
    Some((interp, arg))
}

/// The interpreter a `#!` script runs, as found (`#!/usr/bin/env node`
/// searches `PATH`), with the `env` program when it goes through one.
pub fn script_interpreter(script: &Path, env: &HostEnv) -> Option<(PathBuf, Option<PathBuf>)> {
    let (interp, arg) = shebang(script)?;
    if base_name(Path::new(&interp)) == "env" {
        let target = arg
            .as_deref()
            .and_then(|a| a.split_whitespace().find(|w| !w.starts_with('-')))?;
        Some((which(target, env)?, Some(PathBuf::from(interp))))
    } else {
        Some((PathBuf::from(interp), None))
    }
}

/// The ELF `PT_INTERP` of a 64-bit little-endian executable, if any.
///
/// Reads only the headers and the interpreter string (a few hundred bytes),
/// never the whole file: interpreters such as node are tens of megabytes.
pub fn elf_interpreter(p: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::FileExt;
    let elf = Elf::open(p)?;
    let (off, _, size) = elf.segments(PT_INTERP).next()?;
    let size = usize::try_from(size).ok()?;
    if size > 4096 {
        return None;
    }
    let mut raw = vec![0u8; size];
    elf.file.read_exact_at(&mut raw, off).ok()?;
    let raw = raw.split(|&b| b == 0).next()?;
    Some(PathBuf::from(std::str::from_utf8(raw).ok()?))
}

/// `PT_LOAD`, `PT_DYNAMIC` and `PT_INTERP`.
const PT_LOAD: u32 = 1;
const PT_DYNAMIC: u32 = 2;
const PT_INTERP: u32 = 3;

/// A 64-bit little-endian ELF file and its program headers.
struct Elf {
    file: std::fs::File,
    /// (type, file offset, address, size in the file) of each segment.
    segments: Vec<(u32, u64, u64, u64)>,
}

impl Elf {
    fn open(p: &Path) -> Option<Elf> {
        use std::os::unix::fs::FileExt;
        let file = std::fs::File::open(p).ok()?;
        let mut hdr = [0u8; 64];
        file.read_exact_at(&mut hdr, 0).ok()?;
        if hdr.get(..4)? != b"\x7fELF" || *hdr.get(4)? != 2 || *hdr.get(5)? != 1 {
            return None;
        }
        let phoff = u64_at(&hdr, 0x20)?;
        let phentsize = usize::from(u16::from_le_bytes(hdr.get(0x36..0x38)?.try_into().ok()?));
        let phnum = usize::from(u16::from_le_bytes(hdr.get(0x38..0x3a)?.try_into().ok()?));
        if phentsize < 56 || phnum > 256 {
            return None;
        }
        let mut phdrs = vec![0u8; phentsize.checked_mul(phnum)?];
        file.read_exact_at(&mut phdrs, phoff).ok()?;
        let segments = phdrs
            .chunks_exact(phentsize)
            .map(|ph| {
                let p_type = u32::from_le_bytes(ph.get(..4)?.try_into().ok()?);
                Some((p_type, u64_at(ph, 8)?, u64_at(ph, 16)?, u64_at(ph, 32)?))
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Elf { file, segments })
    }

    /// (file offset, address, size in the file) of the segments of a type.
    fn segments(&self, kind: u32) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
        self.segments
            .iter()
            .filter(move |s| s.0 == kind)
            .map(|&(_, off, addr, size)| (off, addr, size))
    }
}

/// Whether `p` is a regular file holding a 64-bit little-endian ELF
/// shared object (`ET_DYN`: a library, or a position-independent program).
pub fn is_shared_object(p: &Path) -> bool {
    use std::os::unix::fs::FileExt;
    const ET_DYN: u16 = 3;
    let Ok(file) = std::fs::File::open(p) else {
        return false;
    };
    let mut hdr = [0u8; 18];
    file.metadata().is_ok_and(|m| m.is_file())
        && file.read_exact_at(&mut hdr, 0).is_ok()
        && hdr.starts_with(b"\x7fELF\x02\x01")
        && u16::from_le_bytes([hdr[16], hdr[17]]) == ET_DYN
}

/// The little-endian `u64` at `o` in `b`.
fn u64_at(b: &[u8], o: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(o..o + 8)?.try_into().ok()?))
}

/// The library directories an ELF executable names relative to itself
/// (`$ORIGIN` in its `DT_RUNPATH` or `DT_RPATH`), joined to its directory;
/// empty for a file that is not a 64-bit little-endian ELF, or names none.
/// Entries not relative to `$ORIGIN` are left out: a system directory is
/// the system rule's, any other is the program's word, not the user's.
pub fn elf_origin_dirs(p: &Path) -> Vec<PathBuf> {
    let Some(dir) = p.parent() else {
        return Vec::new();
    };
    elf_search_paths(p)
        .unwrap_or_default()
        .iter()
        .flat_map(|list| list.split(':'))
        .filter_map(|entry| {
            let rest = entry
                .strip_prefix("$ORIGIN")
                .or_else(|| entry.strip_prefix("${ORIGIN}"))?;
            Some(dir.join(rest.trim_start_matches('/')))
        })
        .collect()
}

/// The `DT_RUNPATH` and `DT_RPATH` strings of an ELF file.
fn elf_search_paths(p: &Path) -> Option<Vec<String>> {
    use std::os::unix::fs::FileExt;
    const DT_STRTAB: u64 = 5;
    const DT_RPATH: u64 = 15;
    const DT_RUNPATH: u64 = 29;
    let elf = Elf::open(p)?;
    let (off, _, size) = elf.segments(PT_DYNAMIC).next()?;
    let size = usize::try_from(size).ok()?.min(64 * 1024);
    let mut raw = vec![0u8; size];
    elf.file.read_exact_at(&mut raw, off).ok()?;
    let (mut strtab, mut wanted) = (None, Vec::new());
    for entry in raw.chunks_exact(16) {
        let (tag, val) = (u64_at(entry, 0)?, u64_at(entry, 8)?);
        match tag {
            0 => break,
            DT_STRTAB => strtab = Some(val),
            DT_RPATH | DT_RUNPATH => wanted.push(val),
            _ => {}
        }
    }
    // The string table by its address, where a loaded segment holds it.
    let strtab = strtab?;
    let base = elf.segments(PT_LOAD).find_map(|(off, addr, size)| {
        (strtab >= addr && strtab - addr < size).then(|| off + (strtab - addr))
    })?;
    let mut found = Vec::new();
    for at in wanted {
        let mut s = vec![0u8; 4096];
        let n = elf.file.read_at(&mut s, base.checked_add(at)?).ok()?;
        let s = s.get(..n)?.split(|&b| b == 0).next()?;
        found.push(String::from_utf8_lossy(s).into_owned());
    }
    Some(found)
}

/// The last component of a path, lossily as text.
pub fn base_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The virtual environment `bin` lives in: `<venv>/bin/<name>` where
/// `<venv>/pyvenv.cfg` exists.
pub fn venv_of(program: &Path) -> Option<PathBuf> {
    let bin = program.parent()?;
    if base_name(bin) != "bin" {
        return None;
    }
    let root = bin.parent()?;
    root.join("pyvenv.cfg")
        .is_file()
        .then(|| root.to_path_buf())
}

/// The `bin` directory of the Python a virtual environment was made from:
/// `home = <prefix>/bin` in its `pyvenv.cfg`, canonical, when that
/// directory holds a Python (`uv run` and the venv's own `bin/python` link
/// run it; uv takes a venv whose Python it cannot see for broken and
/// recreates it).
///
/// # Security
///
/// `pyvenv.cfg` is as writable as the venv: a `home` that is not a `bin`
/// directory with a Python in it grants nothing. The caller still applies
/// its own width rule to the prefix.
pub fn venv_home(venv: &Path) -> Option<PathBuf> {
    let cfg = std::fs::read_to_string(venv.join("pyvenv.cfg")).ok()?;
    let home = cfg.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == "home").then(|| v.trim().to_string())
    })?;
    let bin = crate::canon::canonicalize(&home).ok()?;
    (base_name(&bin) == "bin" && holds_python(&bin)).then_some(bin)
}

/// Whether `bin` holds an executable `python`, `python3` or `python3.X`.
fn holds_python(bin: &Path) -> bool {
    std::fs::read_dir(bin).is_ok_and(|rd| {
        rd.flatten().any(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_prefix("python"))
                .is_some_and(|v| v.is_empty() || v.starts_with(|c: char| c.is_ascii_digit()))
                && is_executable(&e.path())
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_names_no_library_directory_beside_itself_unless_its_elf_says_origin() {
        // The system's programs name none; a file that is not ELF neither.
        assert_eq!(
            elf_origin_dirs(Path::new("/bin/cat")),
            Vec::<PathBuf>::new()
        );
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("x");
        std::fs::write(&script, "#!/bin/sh\n").unwrap();
        assert_eq!(elf_origin_dirs(&script), Vec::<PathBuf>::new());
    }
}
