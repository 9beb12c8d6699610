//! The filesystem: `rootfence fs` against the reference server and against
//! escapes from its root, a real host changing its roots, and the roots
//! engine (a table-driven corpus and property tests).

#[path = "../fs_support/mod.rs"]
mod fs_support;

mod compat;
mod escapes;
mod roots;
mod roots_corpus;
mod roots_props;
