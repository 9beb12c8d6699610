//! `rootfence fs`: the filesystem server on stdin/stdout.

use std::process::ExitCode;
use std::time::Duration;

use crate::fs::{Config, Limits};
use crate::runtime::HostEnv;

/// `rootfence fs` options.
#[derive(Debug, Clone, clap::Args)]
pub struct FsArgs {
    /// A read-write root (a path: absolute, relative or ~/...). Repeatable.
    /// Replaced by the host's roots when the host declares roots.
    #[arg(long = "root", value_name = "DIR")]
    pub roots: Vec<String>,
    /// A read-only root: every write under it is refused. A host root at
    /// or under it is read-only too. Repeatable.
    #[arg(long = "ro-root", value_name = "DIR")]
    pub ro_roots: Vec<String>,
    /// Most entries directory_tree and search_files visit before they stop
    /// with a note.
    #[arg(long, value_name = "N", default_value_t = Limits::default().entries)]
    pub max_entries: usize,
    /// Deepest directory level directory_tree and search_files expand.
    #[arg(long, value_name = "N", default_value_t = Limits::default().depth)]
    pub max_depth: usize,
    /// Largest result of directory_tree and search_files, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = Limits::default().bytes)]
    pub max_bytes: usize,
    /// Longest walk of directory_tree and search_files, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = Limits::default().time.as_secs_f64())]
    pub max_seconds: f64,
}

impl FsArgs {
    /// The server's configuration.
    pub fn config(&self, home: Option<std::path::PathBuf>) -> Config {
        let mut roots: Vec<(String, bool)> =
            self.roots.iter().map(|r| (r.clone(), false)).collect();
        roots.extend(self.ro_roots.iter().map(|r| (r.clone(), true)));
        Config {
            roots,
            limits: Limits {
                entries: self.max_entries,
                depth: self.max_depth,
                bytes: self.max_bytes,
                time: Duration::try_from_secs_f64(self.max_seconds)
                    .unwrap_or(Limits::default().time),
            },
            home,
        }
    }
}

pub(super) fn fs(args: &FsArgs) -> ExitCode {
    let env = HostEnv::current();
    let stdin = std::io::BufReader::new(std::io::stdin());
    let stdout = std::io::stdout().lock();
    match crate::fs::serve(args.config(env.home.clone()), stdin, stdout) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rootfence fs: {e}");
            ExitCode::FAILURE
        }
    }
}
