//! `rootfence fs`: an MCP filesystem server whose every operation is
//! resolved beneath an open handle of its root.
//!
//! Tool-compatible with `@modelcontextprotocol/server-filesystem` (the
//! same tool names, argument schemas and result texts), with read-only
//! roots. Where the reference server checks path strings and then
//! operates on them from `/`, this one maps a path onto a root lexically
//! ([`paths`]) and hands the rest to the kernel beneath the root's
//! directory handle (cap-std, `openat2` with `RESOLVE_BENEATH`): `..`,
//! absolute paths outside, prefix siblings, symlinks out at any depth and
//! links swapped in during an operation all stay inside by construction,
//! with no sandbox around the process. Under `rootfence run` the sandbox
//! is a second layer around the same handles.
//!
//! One concept a file: [`paths`] (the model's view of paths), [`tools`]
//! (the tool table and dispatch), [`read`], [`list`], [`write`](mod@write), [`edit`],
//! [`walk`] (the operations), [`roots_client`] (which roots a call is
//! served with), [`session`] (the stdio loop), [`error`].

pub mod edit;
pub mod error;
pub mod list;
pub mod paths;
pub mod read;
pub mod roots_client;
pub mod session;
pub mod tools;
pub mod walk;
pub mod write;

pub use session::{Config, serve};
pub use walk::Limits;
