//! The sandbox: what this kernel can enforce.
//!
//! This module is the only place that talks to Landlock.

mod probe;

pub use probe::{Capabilities, LandlockStatus, Loss, losses, probe};
