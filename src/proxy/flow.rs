//! A channel bounded in bytes as well as in messages, between a reader
//! task and the session.
//!
//! A channel bounded only in messages lets a reader run ahead by that many
//! messages of any size: 64 queued messages of 4 MiB are 256 MiB. Here a
//! sender waits until the bytes in flight are back under the budget, so
//! what a reader holds ahead of the session is at most the budget plus one
//! message (a message bigger than the whole budget goes alone).

use std::sync::Arc;

use tokio::sync::{Semaphore, mpsc};

/// Bytes a reader may have queued for the session before it waits.
pub const BUDGET: usize = 1024 * 1024;

/// The sending side; cheap to clone (every server generation's reader has
/// one).
pub struct Sender<T> {
    tx: mpsc::Sender<(T, u32)>,
    room: Arc<Semaphore>,
    /// The budget: the semaphore's permits when nothing is in flight.
    budget: u32,
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        Sender {
            tx: self.tx.clone(),
            room: self.room.clone(),
            budget: self.budget,
        }
    }
}

/// The receiving side.
pub struct Receiver<T> {
    rx: mpsc::Receiver<(T, u32)>,
    room: Arc<Semaphore>,
}

/// A channel of at most `messages` messages and about `bytes` bytes.
pub fn channel<T>(messages: usize, bytes: usize) -> (Sender<T>, Receiver<T>) {
    let (tx, rx) = mpsc::channel(messages);
    let permits = u32::try_from(bytes.min(Semaphore::MAX_PERMITS))
        .unwrap_or(u32::MAX)
        .max(1);
    let room = Arc::new(Semaphore::new(permits as usize));
    (
        Sender {
            tx,
            room: room.clone(),
            budget: permits,
        },
        Receiver { rx, room },
    )
}

impl<T> Sender<T> {
    /// Wait until the bytes in flight leave room for `bytes` more (a
    /// message bigger than the budget waits until nothing is in flight),
    /// then send. Gives the message back if the receiver is gone.
    pub async fn send(&self, item: T, bytes: usize) -> Result<(), T> {
        let want = u32::try_from(bytes.min(self.budget as usize)).unwrap_or(self.budget);
        let Ok(permit) = self.room.acquire_many(want).await else {
            return Err(item);
        };
        // Handed to the receiver, which gives the room back on receipt.
        permit.forget();
        self.tx.send((item, want)).await.map_err(|e| {
            self.room.add_permits(want as usize);
            e.0.0
        })
    }

    /// Wait until some room is free, without taking it: a reader calls
    /// this before reading its next message, so it does not read one it
    /// would only have to hold.
    pub async fn ready(&self) {
        if let Ok(p) = self.room.acquire().await {
            drop(p);
        }
    }
}

impl<T> Receiver<T> {
    /// The next message, giving its room back; `None` once every sender
    /// is gone.
    pub async fn recv(&mut self) -> Option<T> {
        let (item, n) = self.rx.recv().await?;
        self.room.add_permits(n as usize);
        Some(item)
    }

    /// The next message if one is queued now, giving its room back.
    pub fn try_recv(&mut self) -> Option<T> {
        let (item, n) = self.rx.try_recv().ok()?;
        self.room.add_permits(n as usize);
        Some(item)
    }

    /// Whether nothing is queued (a message may still be on its way).
    pub fn is_empty(&self) -> bool {
        self.rx.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Let every other task run until it blocks.
    async fn settle() {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn a_sender_waits_while_the_budget_is_used() {
        let (tx, mut rx) = channel::<&str>(64, 10);
        tx.send("a", 6).await.unwrap();
        let t = tx.clone();
        let second = tokio::spawn(async move { t.send("b", 6).await });
        settle().await;
        assert!(
            !second.is_finished(),
            "12 bytes in flight on a budget of 10"
        );
        assert_eq!(rx.recv().await, Some("a"));
        second.await.unwrap().unwrap();
        assert_eq!(rx.recv().await, Some("b"));
    }

    #[tokio::test]
    async fn small_messages_share_the_budget() {
        let (tx, mut rx) = channel::<u32>(64, 10);
        for i in 0..5 {
            tx.send(i, 2).await.unwrap();
        }
        for i in 0..5 {
            assert_eq!(rx.recv().await, Some(i));
        }
    }

    #[tokio::test]
    async fn a_message_bigger_than_the_budget_goes_alone() {
        let (tx, mut rx) = channel::<&str>(64, 10);
        tx.send("small", 1).await.unwrap();
        let t = tx.clone();
        let big = tokio::spawn(async move { t.send("big", 1000).await });
        settle().await;
        assert!(!big.is_finished(), "the big one waits for the small one");
        assert_eq!(rx.recv().await, Some("small"));
        big.await.unwrap().unwrap();
        // While the big one is in flight, nothing else goes, and a reader
        // is not ready to read more.
        let t = tx.clone();
        let after = tokio::spawn(async move {
            t.ready().await;
            t.send("after", 1).await
        });
        settle().await;
        assert!(!after.is_finished());
        assert_eq!(rx.recv().await, Some("big"));
        after.await.unwrap().unwrap();
        assert_eq!(rx.recv().await, Some("after"));
    }

    #[tokio::test]
    async fn a_send_to_a_closed_channel_gives_the_message_back() {
        let (tx, rx) = channel::<&str>(4, 10);
        drop(rx);
        assert_eq!(tx.send("x", 3).await, Err("x"));
    }
}
