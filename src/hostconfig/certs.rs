//! Certificate variables: one rule for every variable of a server's `env`
//! that names the certificates a program trusts (`SSL_CERT_FILE`,
//! `SSL_CERT_DIR`, `NODE_EXTRA_CA_CERTS`, `REQUESTS_CA_BUNDLE`,
//! `CURL_CA_BUNDLE`, `DENO_CERT`, `PIP_CERT`, `GIT_SSL_CAINFO`, ...).
//!
//! The server reads them, never writes them. A path the system rule lets
//! every server read already (`/etc/ssl`, `/etc/pki`, `/usr/...`, judged
//! both as written and where it leads) needs nothing, and the note says
//! so. A path elsewhere (a company's bundle under the home) becomes a
//! read-only grant of that file or directory itself (`--ro-root`), never a
//! writable root and never its directory. Pure: the filesystem is asked
//! only through [`Probe`].

use std::fmt;
use std::path::Component;

use super::values::{Probe, WrapOptions, localize, path_like};
use crate::roots::Access;

/// Parts of a variable name that say it names certificates.
const NAME_PARTS: &[&str] = &["CA_BUNDLE", "CAINFO", "CAPATH", "CAFILE", "SSL_ROOTS"];

/// Whether the variable `name` names certificates: a `_`-separated word
/// of it begins or ends with `CERT` or `CERTS` (`SSL_CERT_FILE`,
/// `NODE_EXTRA_CA_CERTS`, `PGSSLROOTCERT`), or it holds one of
/// [`NAME_PARTS`] (`CURL_CA_BUNDLE`, `GIT_SSL_CAINFO`). Case-insensitive:
/// npm reads `npm_config_cafile`.
pub fn is_cert_var(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    upper
        .split('_')
        .any(|w| w.starts_with("CERT") || w.ends_with("CERT") || w.ends_with("CERTS"))
        || NAME_PARTS.iter().any(|p| upper.contains(p))
}

/// What `wrap` does with a certificate variable's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cert {
    /// A read-only grant of the path, as written in the config.
    Grant(String),
    /// Readable already under the system rule: nothing to add.
    System(String),
    /// Not here (yet): nothing granted.
    Missing(String),
    /// Named through a host variable only the host knows.
    HostVariable(String),
    /// The policy would refuse it as a root.
    Refused {
        /// The value.
        value: String,
        /// Why.
        why: String,
    },
}

impl fmt::Display for Cert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cert::Grant(v) => write!(
                f,
                "read-only root {v}: certificates the server reads, never writes"
            ),
            Cert::System(v) => write!(
                f,
                "{v} is readable already (the system's TLS configuration is granted to every server): no root needed"
            ),
            Cert::Missing(v) => write!(
                f,
                "{v} does not exist here: nothing granted; create it, then wrap again"
            ),
            Cert::HostVariable(v) => write!(
                f,
                "{v} is only known when the host launches the server; unless it is under /etc/ssl, /etc/pki or /usr, add \"--ro-root\", \"{v}\" before \"--\" in its args"
            ),
            Cert::Refused { value, why } => {
                write!(f, "{value} not granted: it would be refused ({why})")
            }
        }
    }
}

/// What to do with `value`, the value of a certificate variable; `None`
/// when it names no path.
pub fn judge(value: &str, opts: &WrapOptions, probe: &dyn Probe) -> Option<Cert> {
    if !path_like(value) {
        return None;
    }
    let Some((text, local)) = localize(value, opts, probe) else {
        return Some(Cert::HostVariable(value.to_string()));
    };
    if local.components().any(|c| c == Component::ParentDir) {
        return Some(Cert::Refused {
            value: value.to_string(),
            why: "it has a .. component".into(),
        });
    }
    if !probe.exists(&local) {
        return Some(Cert::Missing(value.to_string()));
    }
    let canonical = probe.canonical(&local).unwrap_or_else(|| local.clone());
    if crate::runtime::system_reads(&local) && crate::runtime::system_reads(&canonical) {
        return Some(Cert::System(value.to_string()));
    }
    match probe.root_refusal(&local, opts.policy.as_deref(), Access::ReadOnly) {
        Some(why) => Some(Cert::Refused {
            value: value.to_string(),
            why: why.to_string(),
        }),
        None => Some(Cert::Grant(text)),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::hostconfig::fake::FakeProbe;
    use crate::hostconfig::server::{Action, Decision, WrapOptions, wrap};
    use crate::hostconfig::{Format, Probe};

    fn wrapped(var: &str, value: &str, probe: &dyn Probe) -> (Vec<String>, Decision) {
        let entry = json!({"command": "srv", "env": {var: value}});
        let opts = WrapOptions {
            rootfence: "/opt/rootfence".into(),
            policy: None,
            format: Format::ClaudeCode,
            base: None,
            create_roots: false,
            roots: vec![],
        };
        let d = wrap(&entry, &opts, probe);
        let Action::Rewrite(l) = &d.action else {
            panic!("not wrapped: {d:?}");
        };
        let args = l.args.clone().unwrap_or_default();
        let end = args.iter().position(|a| a == "--").unwrap_or(args.len());
        (args[..end].to_vec(), d)
    }

    /// The variable's system value needs no root and gets no advice of
    /// one; its value under the home is a read-only grant of itself.
    fn one_rule(var: &str, dir: bool) {
        let mut probe = FakeProbe::new();
        probe.file("/home/u/certs/corp.pem");
        let (system, home) = if dir {
            ("/etc/ssl/certs", "~/certs")
        } else {
            ("/etc/ssl/certs/ca-certificates.crt", "~/certs/corp.pem")
        };

        let (args, d) = wrapped(var, system, &probe);
        assert!(
            !args.iter().any(|a| a == "--root" || a == "--ro-root"),
            "{var}: {args:?}"
        );
        assert!(
            d.notes.iter().all(|n| !n.contains("--root")),
            "{var}: {:?}",
            d.notes
        );
        assert!(
            d.notes
                .iter()
                .any(|n| n.contains(&format!("env {var}: {system} is readable already"))),
            "{var}: {:?}",
            d.notes
        );

        let (args, d) = wrapped(var, home, &probe);
        assert_eq!(
            args,
            ["run", "--env", var, "--ro-root", home],
            "{var}: {d:?}"
        );
        assert!(d.roots.is_empty(), "{var}: never a writable root");
        assert!(d.declined.is_empty(), "{var}: {:?}", d.declined);

        // A symlink out of the system's certificates leads to the home:
        // granted where it leads is not readable, so the file is granted.
        probe.links.insert(
            "/etc/ssl/certs/corp.pem".into(),
            "/home/u/certs/corp.pem".into(),
        );
        if !dir {
            let (args, _) = wrapped(var, "/etc/ssl/certs/corp.pem", &probe);
            assert_eq!(
                args,
                ["run", "--env", var, "--ro-root", "/etc/ssl/certs/corp.pem"]
            );
        }

        // Missing: nothing granted, said.
        let (args, d) = wrapped(var, "~/certs/none.pem", &probe);
        assert_eq!(args, ["run", "--env", var]);
        assert!(
            d.notes.iter().any(|n| n.contains("does not exist here")),
            "{:?}",
            d.notes
        );
    }

    macro_rules! cert_vars {
        ($($test:ident: $var:literal, $dir:literal;)*) => {$(
            #[test]
            fn $test() {
                assert!(super::is_cert_var($var));
                one_rule($var, $dir);
            }
        )*};
    }

    cert_vars! {
        ssl_cert_file: "SSL_CERT_FILE", false;
        ssl_cert_dir: "SSL_CERT_DIR", true;
        node_extra_ca_certs: "NODE_EXTRA_CA_CERTS", false;
        requests_ca_bundle: "REQUESTS_CA_BUNDLE", false;
        curl_ca_bundle: "CURL_CA_BUNDLE", false;
        deno_cert: "DENO_CERT", false;
        pip_cert: "PIP_CERT", false;
        git_ssl_cainfo: "GIT_SSL_CAINFO", false;
        git_ssl_capath: "GIT_SSL_CAPATH", true;
        aws_ca_bundle: "AWS_CA_BUNDLE", false;
        cargo_http_cainfo: "CARGO_HTTP_CAINFO", false;
        npm_config_cafile: "npm_config_cafile", false;
        nix_ssl_cert_file: "NIX_SSL_CERT_FILE", false;
        grpc_default_ssl_roots_file_path: "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH", false;
    }

    #[test]
    fn other_variables_are_not_certificate_variables() {
        for v in [
            "DATA_DIR",
            "DB_PATH",
            "MEMORY_FILE_PATH",
            "HOME",
            "CONCERTO_DIR",
        ] {
            assert!(!super::is_cert_var(v), "{v}");
        }
        for v in ["PGSSLROOTCERT", "HEX_CACERTS_PATH", "CERTIFICATE_FILE"] {
            assert!(super::is_cert_var(v), "{v}");
        }
    }
}
