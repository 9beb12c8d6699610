//! What a tool call can fail with. Each variant's text is the tool error a
//! host and its model read: the path as the caller gave it, the reason,
//! and where it helps, what would work instead.

use std::io;
use std::path::PathBuf;

/// A refused or failed filesystem tool call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FsError {
    /// The path, read lexically, lies in no root.
    #[error(
        "Access denied - path outside allowed directories: {given} (read as {resolved}) is not in {roots}"
    )]
    Outside {
        /// The path as the caller gave it.
        given: String,
        /// The absolute path it reads as (`~`, `.` and `..` applied
        /// lexically).
        resolved: PathBuf,
        /// The allowed directories, comma-separated.
        roots: String,
    },
    /// A symbolic link (or `..` through one) on the way leads outside the
    /// root; the kernel refused to follow it beneath the root's handle.
    #[error(
        "Access denied - {given}: a symbolic link in the path leads outside {root} (links are followed only while they stay inside their root)"
    )]
    Escape {
        /// The path as the caller gave it.
        given: String,
        /// The root the path was read against.
        root: PathBuf,
    },
    /// A write into a read-only root.
    #[error(
        "Access denied - {given} is in the read-only root {root}: writes, moves and new directories are refused there"
    )]
    ReadOnly {
        /// The path as the caller gave it.
        given: String,
        /// The read-only root.
        root: PathBuf,
    },
    /// No roots at all: neither the command line nor the host gave any.
    #[error(
        "No allowed directories: start rootfence fs with --root DIR, or connect a host that declares roots"
    )]
    NoRoots,
    /// A path with a NUL byte, or otherwise unusable as given.
    #[error("Invalid path {given:?}: {why}")]
    BadPath {
        /// The path as the caller gave it.
        given: String,
        /// Why it cannot be used.
        why: &'static str,
    },
    /// The operation is not meaningful on a root itself (moving it away).
    #[error("Access denied - {given} is an allowed directory itself: {what} is refused")]
    IsRoot {
        /// The path as the caller gave it.
        given: String,
        /// The refused operation.
        what: &'static str,
    },
    /// The last component is a symbolic link whose target does not exist:
    /// writing would create a file wherever it points, so it is refused.
    #[error(
        "Access denied - {given} is a symbolic link to a missing target: writes through dangling links are refused"
    )]
    DanglingLink {
        /// The path as the caller gave it.
        given: String,
    },
    /// `move_file` onto something that exists.
    #[error("Destination already exists: {given}")]
    DestinationExists {
        /// The destination as the caller gave it.
        given: String,
    },
    /// `edit_file` could not find an edit's text.
    #[error("Could not find exact match for edit:\n{old_text}")]
    NoMatch {
        /// The edit's `oldText`.
        old_text: String,
    },
    /// `head` and `tail` together.
    #[error("Cannot specify both head and tail parameters simultaneously")]
    HeadAndTail,
    /// A pattern that is not a glob.
    #[error("Invalid glob pattern {pattern:?}: {source}")]
    Glob {
        /// The pattern as given.
        pattern: String,
        /// The glob parser's error.
        source: globset::Error,
    },
    /// The operating system refused or failed the operation.
    #[error("{op} {given}: {source}")]
    Io {
        /// What was being done ("read", "write", ...).
        op: &'static str,
        /// The path as the caller gave it.
        given: String,
        /// The error.
        source: io::Error,
    },
}

/// A `tools/call` that fails: its text is the error result the host
/// reads (the reference server's wording where it has one).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// The arguments do not fit the tool's schema.
    #[error("MCP error -32602: Input validation error: Invalid arguments for tool {tool}: {why}")]
    Arguments {
        /// The tool.
        tool: String,
        /// What does not fit.
        why: BadArgument,
    },
    /// No tool of that name.
    #[error("MCP error -32602: Tool {0} not found")]
    UnknownTool(String),
    /// The filesystem operation was refused or failed.
    #[error(transparent)]
    Fs(#[from] FsError),
}

/// What does not fit in a tool's arguments.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BadArgument {
    /// Missing, or of the wrong type (the deserializer's words).
    #[error(transparent)]
    Shape(serde_json::Error),
    /// A line count (`head`, `tail`) that is not a positive number.
    #[error("{name} must be a positive number (got {value})")]
    NotPositive {
        /// The argument.
        name: &'static str,
        /// Its value.
        value: f64,
    },
    /// `read_multiple_files` with no path.
    #[error("At least one file path must be provided")]
    NoPaths,
}

/// Whether `e` is cap-std's refusal of a path that would leave the
/// directory handle it was resolved beneath (an absolute symlink, a `..`
/// above the start, or the kernel's `EXDEV` from `RESOLVE_BENEATH`): an
/// error without an OS error code and of kind `PermissionDenied`.
pub fn is_escape(e: &io::Error) -> bool {
    e.raw_os_error().is_none() && e.kind() == io::ErrorKind::PermissionDenied
}

impl FsError {
    /// The error for an I/O failure of `op` on `given` in `root`: an escape
    /// attempt becomes [`FsError::Escape`].
    pub fn io(op: &'static str, given: &str, root: &std::path::Path, e: io::Error) -> FsError {
        if is_escape(&e) {
            FsError::Escape {
                given: given.to_string(),
                root: root.to_path_buf(),
            }
        } else {
            FsError::Io {
                op,
                given: given.to_string(),
                source: e,
            }
        }
    }
}
