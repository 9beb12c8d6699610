//! What this machine lacks for a rung of the isolation ladder
//! ([`NoRung`]) or for a design of network by domain ([`NoDomainRung`]):
//! each says the layer that is missing, why, and the way out, in the
//! words `rootfence doctor`, `explain` and a refused launch print; and
//! the ladder itself: its rungs ([`Rung`]), the designs of network by
//! domain ([`DomainRung`]), and what a plan would lose ([`Loss`]). A leaf:
//! the probes, the coverage and the launch all speak of the ladder so.

use serde::Serialize;

/// Why this kernel gives no Landlock.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NoLandlock {
    /// Built without `CONFIG_SECURITY_LANDLOCK`.
    #[error("this kernel was built without Landlock (CONFIG_SECURITY_LANDLOCK)")]
    NotBuilt,
    /// Built in, not enabled at boot.
    #[error(
        "Landlock is built into this kernel but not enabled at boot (add landlock to the lsm= kernel parameter)"
    )]
    Disabled,
    /// The probe failed otherwise.
    #[error("Landlock cannot be used here ({message})")]
    Error {
        /// The OS error, as the probe read it.
        message: String,
    },
}

/// Why the server cannot get namespaces of its own here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NoNamespaces {
    /// The policy turns them off.
    #[error("[isolation] namespaces = \"off\"")]
    Off,
    /// A probe or a launch found them refused: the kernel's answer, as
    /// it recorded it (`clone3: EPERM`).
    #[error("{0}")]
    Refused(String),
    /// Not probed.
    #[error("namespaces were not probed")]
    NotProbed,
    /// Namespaces are had, but not the network namespace among them that
    /// the view + seccomp rung needs.
    #[error("a network namespace of the server's own among them, and {0}")]
    Network(NoNetns),
}

/// Why the server cannot get a network namespace of its own here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NoNetns {
    /// The rung this machine gives the plan has no namespaces.
    #[error("the server runs without namespaces here")]
    RungWithout,
    /// The launch runs the server without namespaces.
    #[error("the server runs without namespaces")]
    LaunchWithout,
    /// A probe or a launch found it refused: the kernel's answer, as it
    /// recorded it.
    #[error("{0}")]
    Refused(String),
    /// Not probed.
    #[error("network namespaces were not probed")]
    NotProbed,
}

/// Why no rung of the ladder can be had: rootfence refuses to start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NoRung {
    /// `[isolation] namespaces = "require"`, and there are none.
    #[error("[isolation] namespaces = \"require\", but {0}")]
    NamespacesRequired(NoNamespaces),
    /// No Landlock, and the policy does not accept the view + seccomp
    /// rung.
    #[error(
        "{0}; use a kernel with Landlock (Linux 5.13 or later, with landlock in lsm=), or accept the view + seccomp rung with [isolation] landlock = \"prefer\" (needs namespaces)"
    )]
    NoLandlock(NoLandlock),
    /// No Landlock, and the view + seccomp rung the policy accepts cannot
    /// be had either.
    #[error(
        "{landlock}, and the view + seccomp rung ([isolation] landlock = \"prefer\") needs namespaces: {namespaces}; use a kernel with Landlock (Linux 5.13 or later, with landlock in lsm=), or let rootfence have namespaces"
    )]
    Neither {
        /// Why there is no Landlock.
        landlock: NoLandlock,
        /// Why there are no namespaces.
        namespaces: NoNamespaces,
    },
}

/// Why neither design of network by domain can hold a server here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NoDomainRung {
    /// The view + seccomp rung has no Landlock to rule on ports: only a
    /// network namespace holds, and there is none.
    #[error(
        "[network] allow_domains on the view + seccomp rung (no Landlock) needs a network namespace of the server's own to keep it to rootfence's proxy, and {0}; let rootfence have network namespaces, or use a kernel with Landlock ABI 4 (Linux 6.7 or later)"
    )]
    ViewWithoutNetns(NoNetns),
    /// No network namespace, and Landlock below ABI 4.
    #[error(
        "[network] allow_domains needs a network namespace of the server's own or Landlock ABI 4 (TCP by port) to keep the server to rootfence's proxy, and this machine gives neither: {netns}, and {}; let rootfence have namespaces, or use a kernel with Landlock ABI 4 (Linux 6.7 or later)",
        landlock_at(*.abi)
    )]
    Neither {
        /// Why there is no network namespace.
        netns: NoNetns,
        /// The Landlock ABI here (0: none).
        abi: u32,
    },
    /// A network namespace could be had, but the rung has no namespaces,
    /// and Landlock is below ABI 4.
    #[error(
        "[network] allow_domains without namespaces needs Landlock ABI 4 (TCP by port) to keep the server to rootfence's proxy, and Landlock is at ABI {abi}; let rootfence have namespaces, or use a kernel with Landlock ABI 4 (Linux 6.7 or later)"
    )]
    BelowAbi4 {
        /// The Landlock ABI here.
        abi: u32,
    },
}

/// Landlock at `abi`, in a sentence's words.
fn landlock_at(abi: u32) -> String {
    if abi == 0 {
        "there is no Landlock".to_string()
    } else {
        format!("Landlock is at ABI {abi}")
    }
}

/// One thing this machine lacks for the sandbox a plan asks for: the
/// entries of [`super::SandboxError::CannotEnforce`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Missing {
    /// No rung of the ladder.
    #[error(transparent)]
    Rung(#[from] NoRung),
    /// No design of network by domain.
    #[error(transparent)]
    Domains(#[from] NoDomainRung),
    /// A fatal loss ([`super::coverage::losses`]): what the plan wants and
    /// what is missing.
    #[error("{0}")]
    Loss(Loss),
    /// The Landlock ABI here is one the crate does not know as supported.
    #[error("filesystem confinement: Landlock is not available on this kernel")]
    LandlockAbi,
    /// Creating the Landlock ruleset gave no descriptor.
    #[error("the kernel did not create a Landlock ruleset")]
    NoRuleset,
}

/// `missing`, joined as one sentence.
pub(crate) fn joined(missing: &[Missing]) -> String {
    missing
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// A rung of the isolation ladder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rung {
    /// Landlock, seccomp, and the server's own namespaces with its
    /// filesystem view.
    Full,
    /// Landlock and seccomp, without namespaces.
    LandlockSeccomp,
    /// The server's own namespaces with its filesystem view, and seccomp:
    /// no Landlock.
    ViewSeccomp,
}

impl Rung {
    /// Whether the server runs in its own namespaces.
    pub fn namespaces(self) -> bool {
        self != Rung::LandlockSeccomp
    }

    /// Whether Landlock confines the server.
    pub fn landlock(self) -> bool {
        self != Rung::ViewSeccomp
    }
}

impl std::fmt::Display for Rung {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Rung::Full => "full (Landlock, seccomp, namespaces with the filesystem view)",
            Rung::LandlockSeccomp => "Landlock + seccomp (no namespaces)",
            Rung::ViewSeccomp => {
                "view + seccomp (namespaces with the filesystem view, no Landlock)"
            }
        })
    }
}

/// How network by domain (`[network] allow_domains`) keeps a server to
/// rootfence's proxy and to nothing else (see `sandbox::netns`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DomainRung {
    /// The server's own network namespace holds only loopback and the
    /// proxy's listener.
    NetworkNamespace,
    /// The server shares rootfence's network: Landlock allows it no TCP
    /// port, and rootfence's seccomp supervisor connects its TCP sockets
    /// to the proxy's address only (Landlock ABI 4).
    SupervisedConnect,
}

impl std::fmt::Display for DomainRung {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DomainRung::NetworkNamespace => {
                "in the server's own network namespace, which holds nothing else"
            }
            DomainRung::SupervisedConnect => {
                "on rootfence's loopback; the server's connect() judged by rootfence"
            }
        })
    }
}

/// The design network by domain takes on `rung`, where a network namespace
/// of the server's own can be had (`Ok`) or not (`Err`, why), on a kernel
/// with Landlock ABI `abi`; or, when neither design holds here, the
/// refusal (what is missing and the way out).
///
/// # Security
///
/// The view + seccomp rung has no Landlock to rule on ports: only the
/// network namespace keeps its server to the proxy there. The supervised
/// design needs Landlock to refuse every TCP port (ABI 4), since the
/// supervisor hands `connect()` on other families back to the kernel.
pub fn domain_rung(
    rung: Rung,
    netns: Result<(), NoNetns>,
    abi: u32,
) -> Result<DomainRung, NoDomainRung> {
    match (rung, netns) {
        (Rung::Full | Rung::ViewSeccomp, Ok(())) => Ok(DomainRung::NetworkNamespace),
        (Rung::ViewSeccomp, Err(why)) => Err(NoDomainRung::ViewWithoutNetns(why)),
        (_, _) if abi >= 4 => Ok(DomainRung::SupervisedConnect),
        (_, Err(netns)) => Err(NoDomainRung::Neither { netns, abi }),
        (_, Ok(())) => Err(NoDomainRung::BelowAbi4 { abi }),
    }
}

/// Something a plan asks for that this machine cannot enforce.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Loss {
    /// What the plan wants.
    pub wants: String,
    /// What is missing, and the way out.
    pub missing: String,
    /// Whether rootfence refuses to start because of it (fail closed).
    pub fatal: bool,
}

impl std::fmt::Display for Loss {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.wants, self.missing)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The words doctor, explain and a refused launch print: a change of
    /// shape or wording fails here first.
    #[test]
    fn each_refusal_reads_as_printed() {
        let refused = || NoNetns::Refused("clone3: EPERM".into());
        let cases: Vec<(String, &str)> = vec![
            (
                NoRung::NamespacesRequired(NoNamespaces::Off).to_string(),
                "[isolation] namespaces = \"require\", but [isolation] namespaces = \"off\"",
            ),
            (
                NoRung::NoLandlock(NoLandlock::Disabled).to_string(),
                "Landlock is built into this kernel but not enabled at boot (add landlock to the lsm= kernel parameter); use a kernel with Landlock (Linux 5.13 or later, with landlock in lsm=), or accept the view + seccomp rung with [isolation] landlock = \"prefer\" (needs namespaces)",
            ),
            (
                NoRung::Neither {
                    landlock: NoLandlock::NotBuilt,
                    namespaces: NoNamespaces::Network(refused()),
                }
                .to_string(),
                "this kernel was built without Landlock (CONFIG_SECURITY_LANDLOCK), and the view + seccomp rung ([isolation] landlock = \"prefer\") needs namespaces: a network namespace of the server's own among them, and clone3: EPERM; use a kernel with Landlock (Linux 5.13 or later, with landlock in lsm=), or let rootfence have namespaces",
            ),
            (
                NoDomainRung::Neither {
                    netns: NoNetns::RungWithout,
                    abi: 0,
                }
                .to_string(),
                "[network] allow_domains needs a network namespace of the server's own or Landlock ABI 4 (TCP by port) to keep the server to rootfence's proxy, and this machine gives neither: the server runs without namespaces here, and there is no Landlock; let rootfence have namespaces, or use a kernel with Landlock ABI 4 (Linux 6.7 or later)",
            ),
            (
                NoDomainRung::BelowAbi4 { abi: 3 }.to_string(),
                "[network] allow_domains without namespaces needs Landlock ABI 4 (TCP by port) to keep the server to rootfence's proxy, and Landlock is at ABI 3; let rootfence have namespaces, or use a kernel with Landlock ABI 4 (Linux 6.7 or later)",
            ),
            (
                joined(&[
                    Missing::LandlockAbi,
                    Missing::Domains(NoDomainRung::ViewWithoutNetns(NoNetns::NotProbed)),
                ]),
                "filesystem confinement: Landlock is not available on this kernel; [network] allow_domains on the view + seccomp rung (no Landlock) needs a network namespace of the server's own to keep it to rootfence's proxy, and network namespaces were not probed; let rootfence have network namespaces, or use a kernel with Landlock ABI 4 (Linux 6.7 or later)",
            ),
        ];
        for (said, want) in cases {
            assert_eq!(said, want);
        }
    }
}
