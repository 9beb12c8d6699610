//! The general rules that decide what a server may touch besides its
//! roots, each stated in one line (`rootfence explain` prints them).

use serde::Serialize;

/// A rule that grants runtime paths. Every grant the runtime discovery
/// makes names one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rule {
    /// System libraries, tools and configuration.
    System,
    /// The server's executable, its interpreter and their install trees.
    Program,
    /// The programs on the user's `PATH` and the toolchains their layout
    /// shows.
    Toolchain,
    /// The server's project, up to its marker.
    Project,
    /// Package caches, behind a private layer.
    Cache,
    /// The server's own state store (granted by the plan, not by a path
    /// rule: see [`crate::store`]).
    State,
}

impl Rule {
    /// Every rule, in the order `explain` states them.
    pub const ALL: [Rule; 6] = [
        Rule::System,
        Rule::Program,
        Rule::Toolchain,
        Rule::Project,
        Rule::Cache,
        Rule::State,
    ];

    /// Short name.
    pub fn name(self) -> &'static str {
        match self {
            Rule::System => "system",
            Rule::Program => "program",
            Rule::Toolchain => "toolchain",
            Rule::Project => "project",
            Rule::Cache => "cache",
            Rule::State => "state",
        }
    }

    /// The rule in one line, as `explain` and the README state it.
    pub fn statement(self) -> &'static str {
        match self {
            Rule::System => {
                "system: /usr, /bin, /lib*, the /etc files of the loader, DNS, TLS, time and locale, /dev/null and randomness, CPU and memory information: read (libraries and tools also executed)"
            }
            Rule::Program => {
                "program: the server's executable and its #! interpreter; for a native program, the toolchain install its bin/ belongs to where the install's own layout shows one, and the shared libraries it names beside itself ($ORIGIN) within its own install, never the tree around it; for a script, its project (above its bin/); a virtual environment with the Python it was made from; nothing read in a place the server may write (a link there, a #! line, an ELF header, the layout around it) but the executable itself: read and execute"
            }
            Rule::Toolchain => {
                "toolchain: from your PATH and what its directories hold: the programs in each PATH directory (the directory itself when it holds nothing else), where their links lead and the interpreters their #! lines name; an install tree only where its own layout shows a toolchain (a virtual environment with the Python it was made from; a Python, node, Ruby, Rust, Go or Java install; pyenv's or rbenv's commands, versions and hooks behind their shims; rustup's toolchains and settings behind its proxies; asdf's tree), never the project, sources or data around a program, and nothing from a PATH directory the server may write (in a root it may write, or under a [runtime] write path): read and execute"
            }
            Rule::Project => {
                "project: for a script (the command itself or its first file argument), the nearest directory above it holding package.json, pyproject.toml, setup.py, Cargo.toml, go.mod or deno.json, with the node_modules above it: read and execute, .git left out; nothing for a script in a place the server may write (it could remove a marker and reach your tree above), nor what a pyvenv.cfg there names"
            }
            Rule::Cache => {
                "cache: the package caches of npm and uv and uv's tools and Pythons, and those the package runner the command runs names when asked (bun, pnpm, deno, pipx, yarn): read and execute, writes go to a private layer discarded at exit"
            }
            Rule::State => {
                "state: the server's own store, ~/.local/state/rootfence/servers/ID/home, one per configured command and kept across sessions: with namespaces it is the server's home directory, without them its XDG directories point into it (read, write). Its input is the command as configured; the server's name grants nothing: your own ~/.NAME is reached only through a policy line ([runtime] write), which explain shows"
            }
        }
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What no rule grants, in one line.
pub const NEVER: &str = "never: a denied path (the built-in list of secrets: ~/.ssh, ~/.gnupg, ~/.aws, git and npm credentials, ...; and the policy's [deny]) is granted by no rule; a grant that holds one is narrowed around it, and git's configuration reaches the server only as a sanitized copy (identity and safe settings; no credentials, URL rewrites, hooks, aliases or commands)";

/// The home directory, in one line.
pub const HOME: &str = "home: the server sees in your home directory only what the rules and roots grant; with namespaces its home directory is its own store (what it writes there is kept for its next session, never written to your home)";
