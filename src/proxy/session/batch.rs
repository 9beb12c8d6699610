//! JSON-RPC batches from the host (protocol 2025-03-26 only): which members
//! are answered, and the one array that answers them.
//!
//! A batch is counted when it arrives: every request member and every
//! member that is not a valid message (a nested array included) gets one
//! reply; notifications and responses get none. Each reply, and each
//! member that ends without one (a request cancelled while it was held),
//! counts the batch down; the array is sent when it reaches zero, and not
//! at all when no member has a reply.

use std::collections::HashMap;

use crate::proxy::message::{self, Invalid, Kind};

/// A batch's number in this session.
pub type BatchId = u64;

#[derive(Debug)]
struct Batch {
    remaining: usize,
    parts: Vec<Vec<u8>>,
}

/// The batches waiting for replies.
#[derive(Debug, Default)]
pub struct Batches {
    next: BatchId,
    open: HashMap<BatchId, Batch>,
}

/// Whether a batch member gets a reply: a request, or anything that is not
/// a valid notification or response.
pub fn answered(member: &[u8]) -> bool {
    match message::parse(member) {
        Ok(e) => e.kind == Kind::Request,
        Err(Invalid::Unreadable(u)) => u.ident.replied(),
        Err(_) => true,
    }
}

impl Batches {
    /// Open a batch expecting `expected` replies; `None` when there is
    /// nothing to answer.
    pub fn open(&mut self, expected: usize) -> Option<BatchId> {
        if expected == 0 {
            return None;
        }
        self.next += 1;
        self.open.insert(
            self.next,
            Batch {
                remaining: expected,
                parts: Vec::new(),
            },
        );
        Some(self.next)
    }

    /// Add a member's reply; returns the batch's whole reply when this was
    /// the last one.
    pub fn reply(&mut self, b: BatchId, part: Vec<u8>) -> Option<Vec<u8>> {
        self.open.get_mut(&b)?.parts.push(part);
        self.count_down(b)
    }

    /// A member ended without a reply; returns the batch's reply when this
    /// was the last one.
    pub fn skip(&mut self, b: BatchId) -> Option<Vec<u8>> {
        self.count_down(b)
    }

    fn count_down(&mut self, b: BatchId) -> Option<Vec<u8>> {
        let state = self.open.get_mut(&b)?;
        state.remaining = state.remaining.saturating_sub(1);
        if state.remaining > 0 {
            return None;
        }
        let state = self.open.remove(&b)?;
        if state.parts.is_empty() {
            return None;
        }
        let mut out =
            Vec::with_capacity(state.parts.iter().map(|p| p.len() + 1).sum::<usize>() + 2);
        out.push(b'[');
        for (i, p) in state.parts.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(p);
        }
        out.push(b']');
        Some(out)
    }

    /// Whether no batch waits for replies.
    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_is_sent_when_every_member_is_through() {
        let mut b = Batches::default();
        let id = b.open(3).unwrap();
        assert_eq!(b.reply(id, b"1".to_vec()), None);
        assert_eq!(b.skip(id), None);
        assert_eq!(b.reply(id, b"2".to_vec()), Some(b"[1,2]".to_vec()));
        assert!(b.is_empty());
        let id = b.open(1).unwrap();
        assert_eq!(b.skip(id), None, "nothing to answer: no reply at all");
        assert!(b.is_empty());
        assert_eq!(b.open(0), None);
    }

    #[test]
    fn members_that_get_a_reply() {
        assert!(answered(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#));
        assert!(answered(br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#));
        assert!(answered(br#"{"bad":1}"#));
        assert!(!answered(
            br#"{"jsonrpc":"2.0","method":"notifications/x"}"#
        ));
        assert!(!answered(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#));
        // Unreadable: a request is answered, a notification or an answer
        // is not.
        assert!(answered(
            br#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":1,"a":2}}"#
        ));
        assert!(!answered(
            br#"{"jsonrpc":"2.0","method":"m","params":{"a":1,"a":2}}"#
        ));
        assert!(!answered(
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"\xff\"}"
        ));
    }
}
