//! `rootfence doctor --apparmor`: the AppArmor profile that lets rootfence
//! make user namespaces where AppArmor restricts them (Ubuntu 24.04 and
//! later, `kernel.apparmor_restrict_unprivileged_userns = 1`), and how to
//! load it.
//!
//! The profile gives rootfence the `userns` permission and otherwise
//! leaves it unconfined by AppArmor, as it is without the profile (the
//! servers are confined by rootfence itself). Without it, rootfence runs
//! its servers on the Landlock + seccomp rung there.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Where the profile goes for AppArmor to load it at boot.
pub const INSTALLED: &str = "/etc/apparmor.d/rootfence";

/// The attachment of the profile shipped in `packaging/apparmor/rootfence`:
/// rootfence installed by a package, by hand, or by `cargo install`.
#[cfg(test)]
const SHIPPED_ATTACHMENT: &str = "/{usr/,usr/local/,@{HOME}/.cargo/}bin/rootfence";

/// The profile for a rootfence at `attachment` (an AppArmor path, quoted
/// here; a literal path must have its glob characters escaped, see
/// [`literal`]).
pub fn profile(attachment: &str) -> String {
    format!(
        "# AppArmor profile for rootfence: lets it create the user namespaces its
# servers run in where AppArmor restricts unprivileged user namespaces
# (Ubuntu 24.04 and later: kernel.apparmor_restrict_unprivileged_userns = 1).
# rootfence stays otherwise unconfined by AppArmor, as without this profile;
# its servers are confined by rootfence itself.
#
# Install and load it (as root):
#   rootfence doctor --apparmor | sudo tee {INSTALLED}
#   sudo apparmor_parser -r {INSTALLED}

abi <abi/4.0>,
include <tunables/global>

profile rootfence \"{attachment}\" flags=(unconfined) {{
  userns,

  # Site-specific additions and overrides. See local/README for details.
  include if exists <local/rootfence>
}}
"
    )
}

/// `path` as an AppArmor attachment matching it alone: glob characters,
/// quotes and backslashes escaped.
pub fn literal(path: &Path) -> String {
    let mut out = String::new();
    for c in path.to_string_lossy().chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '{' | '}' | '^' | '"' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The running rootfence's own path, symlinks resolved (AppArmor attaches
/// a profile to the file executed).
fn own_path() -> Result<PathBuf, String> {
    std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .map_err(|e| format!("cannot find rootfence's own path: {e}"))
}

/// Print the profile for this rootfence (`to` is `-`), or write it to `to`
/// and say how to load it.
pub fn apparmor(to: &Path) -> ExitCode {
    let path = match own_path() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("rootfence: {e}");
            return ExitCode::FAILURE;
        }
    };
    let text = profile(&literal(&path));
    if to == Path::new("-") {
        print!("{text}");
        return ExitCode::SUCCESS;
    }
    let written = std::fs::File::create(to).and_then(|mut f| {
        use std::os::unix::fs::PermissionsExt;
        f.write_all(text.as_bytes())?;
        f.set_permissions(std::fs::Permissions::from_mode(0o644))
    });
    if let Err(e) = written {
        eprintln!(
            "rootfence: cannot write the AppArmor profile to {}: {e}; write it where you may (sudo for {INSTALLED}), or print it with `rootfence doctor --apparmor`",
            to.display()
        );
        return ExitCode::FAILURE;
    }
    println!(
        "wrote the AppArmor profile for {} to {}; load it with:\n  sudo apparmor_parser -r {}{}",
        path.display(),
        to.display(),
        to.display(),
        if to == Path::new(INSTALLED) {
            String::new()
        } else {
            format!("\n(AppArmor loads it at boot from {INSTALLED})")
        }
    );
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_profile_is_the_one_printed_for_the_usual_places() {
        let shipped = include_str!("../../packaging/apparmor/rootfence");
        assert_eq!(shipped, profile(SHIPPED_ATTACHMENT));
    }

    #[test]
    fn a_path_is_matched_literally() {
        assert_eq!(
            literal(Path::new("/opt/a{b}/*/rootfence")),
            "/opt/a\\{b\\}/\\*/rootfence"
        );
        assert!(profile("/usr/bin/rootfence").contains("\n  userns,\n"));
    }
}
