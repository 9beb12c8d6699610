//! The `rootfence` binary: everything lives in the library.

fn main() -> std::process::ExitCode {
    rootfence::cli_main()
}
