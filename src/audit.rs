//! The audit trail of sampling and elicitation decisions: one structured
//! `tracing` event per decision (target `audit`), and, when the policy sets
//! `[audit] file`, one JSON line appended to that file.
//!
//! A record says what was decided, by which rule, for which server
//! generation and method, with a short summary (counts, sizes, field names
//! and types, a URL's host). It never holds message text, prompts, form
//! values or full URLs.
//!
//! A leaf: the relay's guard and the network proxy (its requests) both
//! write through it.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The audit file could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// Creating its directory or opening it failed.
    #[error("cannot open the audit file {path}: {source}")]
    Open {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

/// What was decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Decision {
    /// Forwarded to the host as it was.
    Allowed,
    /// Forwarded with `maxTokens` lowered.
    Clamped,
    /// Answered with an error; the host never saw it.
    Refused,
    /// The host's answer was checked and forwarded to the server.
    AnswerForwarded,
    /// The host's answer did not match the form: the server got an error.
    AnswerRefused,
}

impl Decision {
    /// The name used in the log and the file.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allowed => "allowed",
            Decision::Clamped => "clamped",
            Decision::Refused => "refused",
            Decision::AnswerForwarded => "answer-forwarded",
            Decision::AnswerRefused => "answer-refused",
        }
    }
}

/// One audit record.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Record<'a> {
    /// Time, RFC 3339 UTC.
    pub ts: String,
    /// The server generation (1 for the first launch, +1 per relaunch).
    pub generation: u64,
    /// `sampling/createMessage`, `elicitation/create` or `tasks/result`.
    pub method: &'a str,
    /// The decision.
    pub decision: Decision,
    /// The rule that decided a refusal or a clamp.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<&'a str>,
    /// Counts, sizes, field names: never content.
    pub summary: &'a str,
    /// The error text sent to the server, for refusals.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'a str>,
}

/// Where audit records go.
#[derive(Debug, Default)]
pub struct AuditLog {
    file: Option<Writer>,
}

/// The audit file's writer: a thread of its own opens the file and
/// appends the lines sent to it, so a file that hangs (a FIFO nobody
/// reads, a network filesystem that stopped answering) stalls nothing but
/// that thread.
#[derive(Debug)]
struct Writer {
    path: PathBuf,
    lines: Option<std::sync::mpsc::Sender<String>>,
    /// Told when the thread has written every line and ended.
    done: std::sync::mpsc::Receiver<()>,
}

/// Longest the end of a log waits for its last lines to be written.
const DRAIN: Duration = Duration::from_secs(1);

impl Drop for Writer {
    fn drop(&mut self) {
        self.lines.take();
        let _ = self.done.recv_timeout(DRAIN);
    }
}

impl AuditLog {
    /// A log that writes to `tracing` only.
    pub fn tracing_only() -> AuditLog {
        AuditLog { file: None }
    }

    /// Also append to `path` ([`open`]), from a thread of the log's own. A
    /// file that cannot be opened is said in the log, once, as "`what` go
    /// to the log only".
    pub fn to_file(path: &Path, what: &'static str) -> AuditLog {
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        let (done_tx, done) = std::sync::mpsc::sync_channel(1);
        let at = path.to_path_buf();
        let spawned = std::thread::Builder::new()
            .name("audit".into())
            .spawn(move || {
                match open(&at) {
                    Ok(mut f) => {
                        for line in rx {
                            if let Err(e) = f.write_all(line.as_bytes()) {
                                tracing::warn!("cannot write the audit file {}: {e}", at.display());
                            }
                        }
                    }
                    Err(e) => {
                        tracing::warn!("{e}; {what} go to the log only");
                        rx.into_iter().for_each(drop);
                    }
                }
                let _ = done_tx.send(());
            });
        match spawned {
            Ok(_) => AuditLog {
                file: Some(Writer {
                    path: path.to_path_buf(),
                    lines: Some(tx),
                    done,
                }),
            },
            Err(e) => {
                tracing::warn!(
                    "cannot start the audit file's writer for {}: {e}; {what} go to the log only",
                    path.display()
                );
                AuditLog::tracing_only()
            }
        }
    }

    /// The file records are appended to, if any.
    pub fn path(&self) -> Option<&Path> {
        self.file.as_ref().map(|w| w.path.as_path())
    }

    /// Record one decision.
    pub fn record(&mut self, r: &Record<'_>) {
        let rule = r.rule.unwrap_or("-");
        match r.decision {
            Decision::Refused | Decision::AnswerRefused => tracing::warn!(
                target: "audit",
                generation = r.generation,
                method = r.method,
                decision = r.decision.as_str(),
                rule,
                summary = r.summary,
                "audit: {} {}: {}",
                r.method,
                r.decision.as_str(),
                r.reason.unwrap_or(""),
            ),
            _ => tracing::info!(
                target: "audit",
                generation = r.generation,
                method = r.method,
                decision = r.decision.as_str(),
                rule,
                summary = r.summary,
                "audit: {} {}",
                r.method,
                r.decision.as_str(),
            ),
        }
        self.append(r);
    }

    /// Append `record` to the file as one JSON line, when there is a file
    /// (no log event: for records of other kinds, such as the network
    /// proxy's, which log their own).
    pub fn append(&mut self, record: &impl serde::Serialize) {
        let Some(tx) = self.file.as_ref().and_then(|w| w.lines.as_ref()) else {
            return;
        };
        match serde_json::to_string(record) {
            Ok(mut line) => {
                line.push('\n');
                // The writer is gone only once the log is dropped.
                let _ = tx.send(line);
            }
            Err(e) => tracing::warn!("audit record not serializable: {e}"),
        }
    }
}

/// Open `path` for appending audit records: created with its parent
/// directories, mode 0600 when new.
///
/// # Security
///
/// Never through a symlink (a link planted where the audit file goes would
/// make rootfence append to its target), and only to a regular file with a
/// single link; a FIFO is refused without waiting for a reader.
pub fn open(path: &Path) -> Result<File, AuditError> {
    let err = |source| AuditError::Open {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    let mut o = OpenOptions::new();
    o.create(true).append(true);
    std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut o, libc::O_NOFOLLOW | libc::O_NONBLOCK);
    let f = o.open(path).map_err(|e| match e.raw_os_error() {
        Some(libc::ELOOP) => err(std::io::Error::other(
            "it is a symlink; name the file itself in [audit] file",
        )),
        Some(libc::ENXIO) => err(std::io::Error::other(
            "it must be a regular file with a single link",
        )),
        _ => err(e),
    })?;
    let md = f.metadata().map_err(err)?;
    if !md.is_file() || std::os::unix::fs::MetadataExt::nlink(&md) > 1 {
        return Err(err(std::io::Error::other(
            "it must be a regular file with a single link",
        )));
    }
    Ok(f)
}

/// Now, as RFC 3339 UTC with milliseconds.
pub fn now_rfc3339() -> String {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    rfc3339(d.as_secs(), d.subsec_millis())
}

/// `secs` since the epoch as `YYYY-MM-DDThh:mm:ss.mmmZ` (RFC 3339, UTC,
/// milliseconds).
pub fn rfc3339(secs: u64, millis: u32) -> String {
    let nanos = i32::try_from(millis.min(999) * 1_000_000).unwrap_or(0);
    match jiff::Timestamp::new(i64::try_from(secs).unwrap_or(i64::MAX), nanos) {
        Ok(t) => format!("{t:.3}"),
        // Past the year 9999: not a time an audit record is written at.
        Err(_) => "9999-12-31T23:59:59.999Z".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_dates() {
        assert_eq!(rfc3339(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400, 5), "2000-02-29T00:00:00.005Z");
        assert_eq!(rfc3339(1_767_225_599, 999), "2025-12-31T23:59:59.999Z");
        assert_eq!(rfc3339(4_107_542_400, 0), "2100-03-01T00:00:00.000Z");
    }

    #[test]
    fn file_records_are_json_lines_in_a_created_directory() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nested/deeper/audit.jsonl");
        let mut log = AuditLog::to_file(&path, "records");
        for decision in [Decision::Allowed, Decision::Refused] {
            log.record(&Record {
                ts: now_rfc3339(),
                generation: 2,
                method: "sampling/createMessage",
                decision,
                rule: (decision == Decision::Refused).then_some("sampling.max_tokens"),
                summary: "messages=1",
                reason: None,
            });
        }
        // Reopening appends.
        drop(log);
        let mut log = AuditLog::to_file(&path, "records");
        log.record(&Record {
            ts: now_rfc3339(),
            generation: 3,
            method: "elicitation/create",
            decision: Decision::AnswerRefused,
            rule: Some("elicitation.validate_response"),
            summary: "action=accept fields=1",
            reason: Some("x"),
        });
        // Dropped, the log has written what it was given.
        drop(log);
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0]["decision"], "allowed");
        assert!(lines[0].get("rule").is_none());
        assert_eq!(lines[1]["rule"], "sampling.max_tokens");
        assert_eq!(lines[2]["decision"], "answer-refused");
        assert_eq!(lines[2]["generation"], 3);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn an_unopenable_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let blocker = dir.path().join("file");
        std::fs::write(&blocker, "").unwrap();
        let e = open(&blocker.join("audit.jsonl")).unwrap_err();
        assert!(e.to_string().contains("cannot open the audit file"), "{e}");
    }

    #[test]
    fn a_fifo_is_refused_without_waiting_for_a_reader() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("audit.jsonl");
        rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, rustix::fs::Mode::from_raw_mode(0o600))
            .unwrap();
        let e = open(&fifo).unwrap_err();
        assert!(e.to_string().contains("regular file"), "{e}");
    }

    #[test]
    fn a_symlink_or_a_linked_file_is_never_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "untouched").unwrap();
        let link = dir.path().join("audit.jsonl");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let e = open(&link).unwrap_err();
        assert!(e.to_string().contains("symlink"), "{e}");
        let hard = dir.path().join("hard.jsonl");
        std::fs::hard_link(&victim, &hard).unwrap();
        let e = open(&hard).unwrap_err();
        assert!(e.to_string().contains("single link"), "{e}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "untouched");
    }
}
