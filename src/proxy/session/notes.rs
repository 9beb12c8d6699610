//! What rootfence tells the host about the sandbox: warnings that decide
//! whether a server works (variables that do not reach it, what the host
//! is not offered, paths the sandbox refused it) also go to the host as
//! MCP `notifications/message` at level `warning`, which hosts show in
//! their log of the server: a desktop host hides the server's stderr.
//!
//! A note is sent once per session, after the host's handshake is through
//! (`notifications/initialized`); those that come before wait for it.
//! rootfence offers the host the `logging` capability itself when the
//! server does not (and answers the host's `logging/setLevel` then).

use std::collections::BTreeSet;

use super::Session;

/// The notes of a session.
#[derive(Debug, Default)]
pub struct Notes {
    /// Waiting for the host's handshake.
    pending: Vec<String>,
    /// Every note said (or waiting), once each.
    said: BTreeSet<String>,
}

impl Session {
    /// Tell the host `text` (a warning), once per session.
    pub(super) fn tell_host(&mut self, text: String) {
        if !self.notes.said.insert(text.clone()) {
            return;
        }
        self.notes.pending.push(text);
        self.flush_notes();
    }

    /// Send the notes waiting, once the host's handshake is through.
    pub(super) fn flush_notes(&mut self) {
        if !self.handshake.host_initialized || self.handshake.server_init.is_none() {
            return;
        }
        for text in std::mem::take(&mut self.notes.pending) {
            if let Some(line) = self.handshake.log_to_host("warning", &text) {
                self.send_host(line);
            }
        }
    }

    /// The notes a plan calls for at start: the variables of rootfence's
    /// environment that look like a host config's settings for the server
    /// and do not reach it.
    pub(super) fn plan_notes(&mut self, plan: &crate::plan::SandboxPlan) {
        let suspect: Vec<&str> = plan
            .env_dropped
            .iter()
            .map(String::as_str)
            .filter(|n| !crate::envvars::is_session_variable(n))
            .collect();
        if !suspect.is_empty() {
            self.tell_host(format!(
                "rootfence: not passed to the server: {}; if the host's config sets {} for the server, add \"--env\", \"NAME\" for each to rootfence's arguments (`rootfence wrap` does), or list {} in the policy's [env] pass",
                suspect.join(" "),
                if suspect.len() == 1 { "it" } else { "them" },
                if suspect.len() == 1 { "it" } else { "them" },
            ));
        }
    }
}
