//! The commands a user runs besides `exec` and `run` (`check`, `explain`,
//! `doctor`, `schema`, `wrap`, `learn`), and what they read: policy files,
//! the plan, the rules that grant what a server may read besides its
//! roots, and the server's environment.

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

mod commands;
mod env_flags;
mod learn;
mod plan;
mod policy;
mod rules;
mod wrap;
