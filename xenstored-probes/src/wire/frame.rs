//! Incremental decoding of a connection's byte stream into messages.
//!
//! Bytes are read into a fixed buffer big enough for several maximal
//! messages; complete messages are handed out as borrowed slices, so
//! decoding allocates nothing per request.

use crate::wire::{Header, HEADER_LEN, PAYLOAD_MAX};
use std::io;

const CAPACITY: usize = 8 * (HEADER_LEN + PAYLOAD_MAX);

/// The longest payload `next_message_up_to` takes: a message must fit
/// the buffer whole.
pub const LARGEST_PAYLOAD: usize = CAPACITY - HEADER_LEN;

/// A header announced a payload longer than the protocol allows; upstream
/// C xenstored drops such a client, and so do we.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Oversized(pub u32);

/// Bytes read from a connection and not yet consumed as messages.
pub struct InBuf {
    data: Box<[u8]>,
    start: usize,
    end: usize,
}

impl Default for InBuf {
    fn default() -> Self {
        InBuf {
            data: vec![0; CAPACITY].into_boxed_slice(),
            start: 0,
            end: 0,
        }
    }
}

impl InBuf {
    /// A buffer with no room, which allocates nothing: it holds a
    /// connection's place while the connection's own is being executed.
    pub fn placeholder() -> InBuf {
        InBuf {
            data: Box::default(),
            start: 0,
            end: 0,
        }
    }

    /// Reads once through `read` into the free space; returns what it returned.
    pub fn fill(&mut self, read: impl FnOnce(&mut [u8]) -> io::Result<usize>) -> io::Result<usize> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if CAPACITY - self.end < HEADER_LEN + PAYLOAD_MAX {
            self.data.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        let n = read(&mut self.data[self.end..])?;
        self.end += n;
        Ok(n)
    }

    /// The next complete message, if one has arrived.
    pub fn next_message(&mut self) -> Result<Option<(Header, &[u8])>, Oversized> {
        self.next_message_up_to(PAYLOAD_MAX)
    }

    /// `next_message` for a client that takes payloads of up to `max`
    /// bytes, at most LARGEST_PAYLOAD (the buffer must hold a whole
    /// message): the bench's client of a daemon that sends replies over
    /// the protocol's limit.
    pub fn next_message_up_to(&mut self, max: usize) -> Result<Option<(Header, &[u8])>, Oversized> {
        let max = max.min(LARGEST_PAYLOAD);
        let avail = &self.data[self.start..self.end];
        if avail.len() < HEADER_LEN {
            return Ok(None);
        }
        let header = Header::decode(avail[..HEADER_LEN].try_into().unwrap());
        if header.len as usize > max {
            return Err(Oversized(header.len));
        }
        let total = HEADER_LEN + header.len as usize;
        if avail.len() < total {
            return Ok(None);
        }
        let from = self.start + HEADER_LEN;
        self.start += total;
        Ok(Some((header, &self.data[from..from + header.len as usize])))
    }

    /// Whether a whole message (or an oversized header) waits to be taken.
    pub fn has_message(&self) -> bool {
        let avail = &self.data[self.start..self.end];
        if avail.len() < HEADER_LEN {
            return false;
        }
        let header = Header::decode(avail[..HEADER_LEN].try_into().unwrap());
        header.len as usize > PAYLOAD_MAX || avail.len() >= HEADER_LEN + header.len as usize
    }

    /// The bytes received and not yet taken as messages.
    pub fn unconsumed(&self) -> &[u8] {
        &self.data[self.start..self.end]
    }

    /// Bytes of a partial message still waiting for the rest.
    pub fn pending(&self) -> usize {
        self.end - self.start
    }
}

/// Appends one message (header + payload) to an output buffer.
pub fn encode(out: &mut Vec<u8>, ty: u32, req_id: u32, tx_id: u32, parts: &[&[u8]]) {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    let header = Header {
        ty,
        req_id,
        tx_id,
        len: len as u32,
    };
    out.extend_from_slice(&header.encode());
    for p in parts {
        out.extend_from_slice(p);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(buf: &mut InBuf, bytes: &[u8]) {
        buf.fill(|dst| {
            dst[..bytes.len()].copy_from_slice(bytes);
            Ok(bytes.len())
        })
        .unwrap();
    }

    #[test]
    fn decodes_byte_by_byte_and_back_to_back() {
        let mut wire = Vec::new();
        encode(&mut wire, 2, 7, 0, &[b"/a\0"]);
        encode(&mut wire, 11, 8, 3, &[b"/b\0", b"v"]);
        let mut buf = InBuf::default();
        let mut got = Vec::new();
        for b in &wire {
            feed(&mut buf, std::slice::from_ref(b));
            while let Some((h, p)) = buf.next_message().unwrap() {
                got.push((h.ty, h.req_id, h.tx_id, p.to_vec()));
            }
        }
        assert_eq!(
            got,
            vec![(2, 7, 0, b"/a\0".to_vec()), (11, 8, 3, b"/b\0v".to_vec())]
        );
        assert_eq!(buf.pending(), 0);
    }

    #[test]
    fn oversized_length_is_refused_before_the_payload_arrives() {
        let mut buf = InBuf::default();
        let h = Header {
            ty: 2,
            req_id: 1,
            tx_id: 0,
            len: PAYLOAD_MAX as u32 + 1,
        };
        feed(&mut buf, &h.encode());
        assert_eq!(buf.next_message(), Err(Oversized(4097)));
        let mut buf = InBuf::default();
        feed(&mut buf, &[0xff; HEADER_LEN]);
        assert!(buf.next_message().is_err());
    }

    #[test]
    fn maximal_messages_keep_flowing_through_compaction() {
        let mut buf = InBuf::default();
        let payload = vec![b'x'; PAYLOAD_MAX];
        let mut wire = Vec::new();
        encode(&mut wire, 11, 1, 0, &[&payload]);
        let mut seen = 0;
        for _ in 0..50 {
            // feed in odd chunks
            for chunk in wire.chunks(1000) {
                feed(&mut buf, chunk);
                while let Some((_, p)) = buf.next_message().unwrap() {
                    assert_eq!(p.len(), PAYLOAD_MAX);
                    seen += 1;
                }
            }
        }
        assert_eq!(seen, 50);
    }

    #[test]
    fn a_client_may_take_payloads_up_to_what_the_buffer_holds() {
        let mut buf = InBuf::default();
        let mut wire = Vec::new();
        // a small message first, so the big ones start off the front
        encode(&mut wire, 2, 1, 0, &[b"/a\0"]);
        for len in [PAYLOAD_MAX + 1, LARGEST_PAYLOAD, 5000] {
            encode(&mut wire, 1, 2, 0, &[&vec![b'x'; len]]);
        }
        let mut got = Vec::new();
        let mut rest = &wire[..];
        while !rest.is_empty() {
            let n = buf
                .fill(|dst| {
                    let n = dst.len().min(rest.len()).min(999);
                    dst[..n].copy_from_slice(&rest[..n]);
                    Ok(n)
                })
                .unwrap();
            assert!(n > 0, "the buffer filled up with no whole message in it");
            rest = &rest[n..];
            while let Some((_, p)) = buf.next_message_up_to(usize::MAX).unwrap() {
                got.push(p.len());
            }
        }
        assert_eq!(got, vec![3, PAYLOAD_MAX + 1, LARGEST_PAYLOAD, 5000]);

        let mut buf = InBuf::default();
        let h = Header {
            ty: 1,
            req_id: 1,
            tx_id: 0,
            len: LARGEST_PAYLOAD as u32 + 1,
        };
        feed(&mut buf, &h.encode());
        let refused = Err(Oversized(LARGEST_PAYLOAD as u32 + 1));
        assert_eq!(buf.next_message_up_to(usize::MAX), refused);
        assert_eq!(buf.next_message_up_to(5000), Err(Oversized(h.len)));
    }
}
