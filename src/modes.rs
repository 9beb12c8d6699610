//! The isolation modes a policy asks for and a plan carries. A leaf: the
//! policy's format and the plan both use it.

use serde::Serialize;

/// Whether the server gets namespaces of its own (and with them a
/// filesystem view of its grants only and a PID namespace that ends with
/// it): `[isolation] namespaces` of the policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum NamespaceMode {
    /// Where the kernel grants them; otherwise run without and say what is
    /// lost (`doctor`, and a warning at start).
    #[default]
    Auto,
    /// Refuse to start without them.
    Require,
    /// Never (Landlock and seccomp only).
    Off,
}

/// Whether a kernel without Landlock is acceptable: `[isolation] landlock`
/// of the policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum LandlockMode {
    /// Refuse to start without Landlock (fail closed).
    #[default]
    Require,
    /// Without Landlock, confine by the server's namespaces (its
    /// filesystem view) and the seccomp filter.
    Prefer,
}
