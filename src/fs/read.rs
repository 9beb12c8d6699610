//! Reading files: `read_text_file` (whole, first or last lines),
//! `read_media_file`, `read_multiple_files`. Every open is resolved beneath
//! the root's handle (see [`super::paths`]).

use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};

use base64::Engine;
use serde_json::{Value, json};

use super::error::FsError;
use super::paths::Target;

/// The whole file as text (invalid UTF-8 replaced, as Node's decoder does).
pub fn whole(t: &Target) -> Result<String, FsError> {
    let mut f = t.root.dir.open(t.rel_or_dot()).map_err(t.err("read"))?;
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes).map_err(t.err("read"))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// The first `n` lines, joined by `\n` (a last line without a newline
/// counts), read no further than needed.
pub fn head(t: &Target, n: usize) -> Result<String, FsError> {
    let f = t.root.dir.open(t.rel_or_dot()).map_err(t.err("read"))?;
    let mut reader = BufReader::new(f);
    let mut lines: Vec<String> = Vec::new();
    let mut line = Vec::new();
    while lines.len() < n {
        line.clear();
        let got = reader.read_until(b'\n', &mut line).map_err(t.err("read"))?;
        if got == 0 {
            break;
        }
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        lines.push(String::from_utf8_lossy(&line).into_owned());
    }
    Ok(lines.join("\n"))
}

/// The last `n` lines, read backwards from the end in 1 KiB chunks until
/// enough newlines are seen; `\r\n` read as `\n`. As the reference server
/// does, a file ending in a newline gives an empty last line.
pub fn tail(t: &Target, n: usize) -> Result<String, FsError> {
    const CHUNK: u64 = 1024;
    let mut f = t.root.dir.open(t.rel_or_dot()).map_err(t.err("read"))?;
    let size = f.metadata().map_err(t.err("read"))?.len();
    if size == 0 {
        return Ok(String::new());
    }
    let mut pos = size;
    let mut buf: Vec<u8> = Vec::new();
    let mut newlines = 0usize;
    let mut chunk = vec![0u8; CHUNK as usize];
    while pos > 0 && newlines < n {
        let len = CHUNK.min(pos);
        pos -= len;
        f.seek(SeekFrom::Start(pos)).map_err(t.err("read"))?;
        let part = &mut chunk[..len as usize];
        f.read_exact(part).map_err(t.err("read"))?;
        newlines += memchr::memchr_iter(b'\n', part).count();
        let mut joined = part.to_vec();
        joined.extend_from_slice(&buf);
        buf = joined;
    }
    let text = String::from_utf8_lossy(&buf).replace("\r\n", "\n");
    let lines: Vec<&str> = text.split('\n').collect();
    let from = lines.len().saturating_sub(n);
    Ok(lines[from..].join("\n"))
}

/// The MIME type the reference server gives an extension.
fn mime_of(ext: &str) -> &'static str {
    match ext {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "bmp" => "image/bmp",
        "svg" => "image/svg+xml",
        "mp3" => "audio/mpeg",
        "wav" => "audio/wav",
        "ogg" => "audio/ogg",
        "flac" => "audio/flac",
        _ => "application/octet-stream",
    }
}

/// The file as one content block: image or audio with its data in base64,
/// anything else as an embedded resource.
pub fn media(t: &Target) -> Result<Value, FsError> {
    let mut f = t.root.dir.open(t.rel_or_dot()).map_err(t.err("read"))?;
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes).map_err(t.err("read"))?;
    let ext = t
        .rel
        .extension()
        .map(|e| e.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    let mime = mime_of(&ext);
    let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
    Ok(
        if let Some(kind) = mime
            .split('/')
            .next()
            .filter(|k| *k == "image" || *k == "audio")
        {
            json!({"type": kind, "data": data, "mimeType": mime})
        } else {
            json!({
                "type": "resource",
                "resource": {
                    "uri": crate::roots::path_to_uri(&t.shown()),
                    "mimeType": mime,
                    "blob": data,
                }
            })
        },
    )
}

/// One entry of `read_multiple_files`: `PATH:\nCONTENT\n`, or
/// `PATH: Error - WHY`.
pub fn one_of_many(given: &str, read: Result<String, FsError>) -> String {
    match read {
        Ok(content) => format!("{given}:\n{content}\n"),
        Err(e) => format!("{given}: Error - {e}"),
    }
}
