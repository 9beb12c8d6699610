//! The command-line interface: clap commands that wire the library
//! together. Thin by design.

mod apparmor;
mod exec;
mod explain;
mod fs;
mod learn;
mod run;
mod wrap;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::policy::Policy;
use crate::runtime::HostEnv;

/// rootfence: run MCP stdio servers inside a Landlock sandbox that enforces
/// their roots.
#[derive(Debug, Parser)]
#[command(name = "rootfence", version, about, long_about = None)]
pub struct Cli {
    /// Log verbosity on stderr (error, warn, info, debug, trace); RUST_LOG
    /// overrides it. Sampling/elicitation audit records are always logged.
    #[arg(long, global = true, default_value = "warn", value_name = "LEVEL")]
    pub log: String,
    #[command(subcommand)]
    command: Command,
}

/// Roots and policy options shared by `explain`, `exec` and `run`.
#[derive(Debug, clap::Args)]
pub struct LaunchArgs {
    /// Security policy file (TOML). Without it the built-in default applies
    /// (policy/default.toml).
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,
    /// A read-write root: a path (absolute, relative or ~/...) or a
    /// file:// URI. Repeatable.
    #[arg(long = "root", value_name = "DIR")]
    pub roots: Vec<String>,
    /// A read-only root. Repeatable.
    #[arg(long = "ro-root", value_name = "DIR")]
    pub ro_roots: Vec<String>,
    /// An environment variable for the server: NAME passes rootfence's
    /// own value (what a host config's "env" sets), NAME=VALUE sets it.
    /// Repeatable. Wins over the policy's [env] pass and the runtime
    /// profile, not over [env] set. Refused for variables that make a
    /// runtime load code (LD_PRELOAD, NODE_OPTIONS, PYTHONPATH, ...; the
    /// list is in policy/README.md) and those in [env] deny, unless the
    /// policy names them in [env] pass or [env] set.
    #[arg(long = "env", value_name = "NAME[=VALUE]")]
    pub env: Vec<crate::envvars::EnvFlag>,
    /// The server command and its arguments (`run` without one serves
    /// `rootfence fs`).
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

impl LaunchArgs {
    /// The command line's roots: `--root` read-write, then `--ro-root`.
    pub fn root_inputs(&self) -> Vec<crate::roots::RootInput> {
        use crate::roots::{Access, RootInput};
        let rw = self.roots.iter().map(|r| (r, Access::ReadWrite));
        let ro = self.ro_roots.iter().map(|r| (r, Access::ReadOnly));
        rw.chain(ro)
            .map(|(r, access)| RootInput::command_line(r.clone(), access))
            .collect()
    }

    /// The plan for this launch under `policy` (see [`crate::plan::for_launch`]).
    pub fn plan(
        &self,
        policy: &crate::policy::Policy,
        env: &crate::runtime::HostEnv,
    ) -> Result<crate::plan::SandboxPlan, crate::runtime::RuntimeError> {
        crate::plan::for_launch(policy, &self.root_inputs(), &self.command, env)
    }
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run an MCP stdio server under the sandbox and relay MCP between the
    /// host (this process's stdin/stdout) and the server. The server's
    /// roots are the enforced ones: the host's (validated, within the
    /// policy), the policy's and the command line's. Root changes rebuild
    /// the sandbox. This is what a host's config launches. Without a
    /// command (no `-- CMD`), the server is `rootfence fs` (this
    /// executable) with the same --root and --ro-root: the filesystem
    /// server on root handles, inside the sandbox.
    #[command(mut_arg("command", |a| a.required(false)))]
    Run(run::RunArgs),
    /// Serve MCP filesystem tools on stdin/stdout (the tools of
    /// @modelcontextprotocol/server-filesystem), every operation resolved
    /// beneath an open handle of its root: paths outside, `..`, and
    /// symbolic links out of a root are refused without any sandbox. The
    /// host's roots, when it declares them, replace the command line's.
    Fs(fs::FsArgs),
    /// Validate policy files; exits non-zero with the file, line and key of
    /// every error.
    Check {
        /// Policy files.
        #[arg(required = true, value_name = "POLICY")]
        files: Vec<PathBuf>,
    },
    /// Print the sandbox plan for a command: every path and its rights with
    /// the reason, network, scopes, environment, limits, and every refused
    /// root. Exits non-zero if any given root was refused.
    Explain {
        #[command(flatten)]
        launch: LaunchArgs,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Run a command under the sandbox the plan describes: stdin, stdout
    /// and stderr inherited, its exit status passed through (death by
    /// signal N exits 128+N). Refuses to start if the kernel cannot enforce
    /// the policy.
    Exec(exec::ExecArgs),
    /// Report the kernel, the Landlock ABI and what it can enforce, what a
    /// policy would lose here, and whether rootfence can run on this machine.
    Doctor {
        /// Also report what this policy would lose on this kernel.
        #[arg(long, value_name = "FILE")]
        policy: Option<PathBuf>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Print the AppArmor profile that lets rootfence make user
        /// namespaces where AppArmor restricts them (Ubuntu 24.04 and
        /// later), with the commands to load it; with FILE, write it there.
        #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "-")]
        apparmor: Option<PathBuf>,
    },
    /// Find the policy a server needs: run it under the sandbox, drive
    /// `initialize` and `tools/list`, and turn the paths the sandbox
    /// refused it (as rootfence's own supervisor saw them, never what the
    /// server printed) into `[runtime] read` and `write` lines for the next
    /// launch, until it starts or nothing new is refused. Prints the lines to add to its policy on stdout; never
    /// proposes a denied path (a secret). Exit 0 when the server started.
    Learn(learn::LearnArgs),
    /// Print the JSON Schema of the policy file format.
    Schema,
    /// Rewrite a host's MCP config (Claude Desktop, VS Code, Cursor, Claude
    /// Code) so that every stdio server is launched through `rootfence
    /// run`, with its env keys passed and the directories in its arguments
    /// as roots; or back with --undo. Prints the result, or rewrites the
    /// file with --in-place (keeping a backup).
    Wrap(wrap::WrapArgs),
}

/// Parse the command line and run. Returns the process exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(&cli.log);
    if matches!(
        cli.command,
        Command::Check { .. }
            | Command::Explain { .. }
            | Command::Doctor { .. }
            | Command::Schema
            | Command::Wrap(_)
    ) {
        // Commands that only print: a reader that stops reading
        // (`rootfence explain | head`) ends them quietly, as it ends other
        // tools, instead of a panic on the failed write.
        // SAFETY: restoring the default disposition of SIGPIPE, before any
        // other thread exists; no handler is installed.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    match cli.command {
        Command::Check { files } => check(&files),
        Command::Explain { launch, json } => explain::explain(&launch, json),
        Command::Exec(args) => exec::exec(&args),
        Command::Run(args) => run::run(args),
        Command::Fs(args) => fs::fs(&args),
        Command::Wrap(args) => wrap::wrap(&args),
        Command::Learn(args) => learn::learn(&args),
        Command::Doctor {
            apparmor: Some(to), ..
        } => apparmor::apparmor(&to),
        Command::Doctor { policy, json, .. } => explain::doctor(policy.as_deref(), json),
        Command::Schema => {
            let schema = schemars::schema_for!(crate::policy::PolicyFile);
            match serde_json::to_string_pretty(&schema) {
                Ok(s) => {
                    println!("{s}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("rootfence: cannot print the schema: {e}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}

fn init_logging(level: &str) {
    // Sampling/elicitation audit records (target "audit") are logged at
    // info whatever --log says; RUST_LOG overrides everything.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .or_else(|_| tracing_subscriber::EnvFilter::try_new(format!("{level},audit=info")))
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,audit=info"));
    // stdout is the protocol: logs only ever go to stderr.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}

fn check(files: &[PathBuf]) -> ExitCode {
    let env = HostEnv::current();
    let mut failed = false;
    for f in files {
        match Policy::load(f, env.home.as_deref()) {
            Ok(_) => println!("{}: ok", f.display()),
            Err(e) => {
                failed = true;
                eprintln!("{e}");
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// Load the policy of a launch (see [`load_policy`]) with its `--env`
/// flags checked and applied; the error is ready to print.
pub fn load_launch_policy(args: &LaunchArgs, env: &HostEnv) -> Result<Policy, String> {
    load_policy(args.policy.as_deref(), env)
        .map_err(|e| e.to_string())?
        .with_env_flags(&args.env)
        .map_err(|e| e.to_string())
}

/// Load the policy named on the command line, or the built-in default.
pub fn load_policy(
    file: Option<&std::path::Path>,
    env: &HostEnv,
) -> Result<Policy, crate::policy::PolicyError> {
    match file {
        Some(f) => Policy::load(f, env.home.as_deref()),
        None => Policy::builtin(env.home.as_deref()),
    }
    .map(|p| p.with_state_dirs(env))
}
