//! rootfence: makes MCP roots real.
//!
//! A launcher for MCP stdio servers that turns the protocol's advisory roots
//! into an enforced Landlock sandbox. The crate is a functional core with a
//! thin imperative shell:
//!
//! - [`roots`]: root URIs and paths to canonical roots (or refusals);
//! - [`envvars`]: the `--env` flag and the variables refused to it;
//! - [`hostconfig`]: host MCP configs, rewritten to launch through rootfence;
//! - [`policy`]: the security-policy file format and its validation;
//! - [`plan`]: `(policy, roots, command) -> SandboxPlan`, pure;
//! - [`netproxy`]: the HTTP proxy that gives a server network by domain;
//! - [`runtime`]: discovering what a command needs to start (effectful);
//! - [`sandbox`]: what the kernel can enforce, and (later) applying a plan;
//! - [`fs`]: `rootfence fs`, the filesystem server on root handles;
//! - [`cli`]: the command-line interface.

pub mod cli;
pub mod envvars;
pub mod fs;
pub mod hostconfig;
pub mod netproxy;
pub mod plan;
pub mod policy;
pub mod proxy;
pub mod roots;
pub mod runtime;
pub mod sandbox;
pub mod watch;
