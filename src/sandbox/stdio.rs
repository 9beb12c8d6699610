//! The server's standard streams: inherited, piped to rootfence, or
//! `/dev/null`, and the descriptors the child installs as 0, 1 and 2.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use super::SandboxError;

/// Where one of the server's standard streams goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Stdio {
    /// rootfence's own descriptor.
    #[default]
    Inherit,
    /// A new pipe; rootfence keeps the other end.
    Piped,
    /// `/dev/null`.
    Null,
}

/// Where the server's standard streams go. Defaults to inheriting
/// rootfence's.
#[derive(Debug, Clone, Copy, Default)]
pub struct StdioConfig {
    /// Standard input.
    pub stdin: Stdio,
    /// Standard output.
    pub stdout: Stdio,
    /// Standard error.
    pub stderr: Stdio,
}

impl StdioConfig {
    /// stdin and stdout piped (the MCP stream), stderr inherited.
    pub fn piped() -> Self {
        StdioConfig {
            stdin: Stdio::Piped,
            stdout: Stdio::Piped,
            stderr: Stdio::Inherit,
        }
    }

    /// All three piped.
    pub fn all_piped() -> Self {
        StdioConfig {
            stdin: Stdio::Piped,
            stdout: Stdio::Piped,
            stderr: Stdio::Piped,
        }
    }
}

/// The descriptors of a launch's standard streams.
#[derive(Debug, Default)]
pub(super) struct Streams {
    /// What the child installs as 0, 1 and 2 (`None`: rootfence's own).
    pub child: [Option<RawFd>; 3],
    /// The child's ends, which the parent closes once it has started.
    pub child_ends: Vec<OwnedFd>,
    /// rootfence's ends of the pipes.
    pub parent: [Option<OwnedFd>; 3],
}

impl Streams {
    /// Open what `config` asks for.
    pub fn open(config: StdioConfig) -> Result<Streams, SandboxError> {
        let mut s = Streams::default();
        for (i, which) in [config.stdin, config.stdout, config.stderr]
            .into_iter()
            .enumerate()
        {
            match which {
                Stdio::Inherit => {}
                Stdio::Null => {
                    let f = std::fs::OpenOptions::new()
                        .read(i == 0)
                        .write(i != 0)
                        .open("/dev/null")
                        .map_err(SandboxError::Launcher)?;
                    let fd = above_stdio(OwnedFd::from(f))?;
                    s.child[i] = Some(fd.as_raw_fd());
                    s.child_ends.push(fd);
                }
                Stdio::Piped => {
                    let (r, w) = pipe()?;
                    let (mine, theirs) = if i == 0 { (w, r) } else { (r, w) };
                    let theirs = above_stdio(theirs)?;
                    s.child[i] = Some(theirs.as_raw_fd());
                    s.child_ends.push(theirs);
                    s.parent[i] = Some(mine);
                }
            }
        }
        Ok(s)
    }
}

/// A pipe, both ends close-on-exec.
pub(super) fn pipe() -> Result<(OwnedFd, OwnedFd), SandboxError> {
    rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        .map_err(|e| SandboxError::Launcher(e.into()))
}

/// `fd` duplicated to a number above 2 (close-on-exec), so installing the
/// standard streams in the child never overwrites a source.
pub(super) fn above_stdio(fd: OwnedFd) -> Result<OwnedFd, SandboxError> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    rustix::io::fcntl_dupfd_cloexec(&fd, 3).map_err(|e| SandboxError::Launcher(e.into()))
}
