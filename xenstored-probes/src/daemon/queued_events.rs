//! The watch events one request has queued (connection, path, token):
//! upstream never queues one identical to one still queued, so a request's
//! fan-out sends each at most once. Their bytes go in one buffer kept
//! between requests, not in a string and a vector allocated per event
//! (two mallocs and two frees, ~900 instructions an event, callgrind, S2).

use hashbrown::HashTable;
use std::hash::{BuildHasher, Hash, Hasher};
use std::ops::Range;

#[derive(Default)]
pub struct QueuedEvents {
    events: HashTable<Queued>,
    /// Each event's path then its token, back to back.
    bytes: Vec<u8>,
}

struct Queued {
    conn: u32,
    path: Range<usize>,
    token: Range<usize>,
}

fn hash(conn: u32, path: &[u8], token: &[u8]) -> u64 {
    let mut h = rustc_hash::FxBuildHasher.build_hasher();
    conn.hash(&mut h);
    path.hash(&mut h);
    token.hash(&mut h);
    h.finish()
}

impl QueuedEvents {
    /// A new request: none queued yet (the capacity is kept).
    pub fn clear(&mut self) {
        self.events.clear();
        self.bytes.clear();
    }

    /// Records the event; false if the same one was queued already.
    pub fn insert(&mut self, conn: u32, path: &str, token: &[u8]) -> bool {
        let path = path.as_bytes();
        let bytes = &self.bytes;
        let h = hash(conn, path, token);
        let same = |q: &Queued| {
            q.conn == conn && bytes[q.path.clone()] == *path && bytes[q.token.clone()] == *token
        };
        if self.events.find(h, same).is_some() {
            return false;
        }
        let start = self.bytes.len();
        self.bytes.extend_from_slice(path);
        self.bytes.extend_from_slice(token);
        let path = start..start + path.len();
        let token = path.end..self.bytes.len();
        let bytes = &self.bytes;
        let rehash = |q: &Queued| hash(q.conn, &bytes[q.path.clone()], &bytes[q.token.clone()]);
        self.events
            .insert_unique(h, Queued { conn, path, token }, rehash);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::QueuedEvents;

    #[test]
    fn each_event_once_per_request() {
        let mut q = QueuedEvents::default();
        for round in 0..2 {
            for i in 0..100u32 {
                let path = format!("/a/{i}");
                assert!(q.insert(i % 3, &path, b"t"), "{round} {i}");
                assert!(!q.insert(i % 3, &path, b"t"));
                assert!(q.insert(i % 3 + 3, &path, b"t"));
                assert!(q.insert(i % 3, &path, b"u"));
            }
            // the same bytes split differently between path and token
            assert!(q.insert(1, "/a/1", b"0t"));
            assert!(!q.insert(1, "/a/10", b"t"));
            assert!(q.insert(1, "/a/1", b"t0"));
            q.clear();
        }
    }
}
