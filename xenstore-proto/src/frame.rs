//! Framing: incremental decoding of a connection's byte stream into
//! messages, and a message's encoding.
//!
//! Bytes are read into a fixed buffer big enough for several maximal
//! messages; complete messages are handed out as borrowed slices, so
//! decoding allocates nothing per request. The daemon's hot path runs
//! through here: every function is `#[inline]`, so it is compiled into the
//! daemon as it was when this lived there.

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
    #[inline]
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
    #[inline]
    pub fn placeholder() -> InBuf {
        InBuf {
            data: Box::default(),
            start: 0,
            end: 0,
        }
    }

    /// Reads once through `read` into the free space; returns what it returned.
    #[inline]
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
    #[inline]
    pub fn next_message(&mut self) -> Result<Option<(Header, &[u8])>, Oversized> {
        self.next_message_up_to(PAYLOAD_MAX)
    }

    /// `next_message` for a client that takes payloads of up to `max`
    /// bytes, at most LARGEST_PAYLOAD (the buffer must hold a whole
    /// message): the bench's client of a daemon that sends replies over
    /// the protocol's limit.
    #[inline]
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
    #[inline]
    pub fn has_message(&self) -> bool {
        let avail = &self.data[self.start..self.end];
        if avail.len() < HEADER_LEN {
            return false;
        }
        let header = Header::decode(avail[..HEADER_LEN].try_into().unwrap());
        header.len as usize > PAYLOAD_MAX || avail.len() >= HEADER_LEN + header.len as usize
    }

    /// The bytes received and not yet taken as messages.
    #[inline]
    pub fn unconsumed(&self) -> &[u8] {
        &self.data[self.start..self.end]
    }

    /// Bytes of a partial message still waiting for the rest.
    #[inline]
    pub fn pending(&self) -> usize {
        self.end - self.start
    }
}

/// Appends one message (header + payload) to an output buffer.
#[inline]
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

/// One message (header, then payload) as a buffer of its own.
pub fn message(ty: u32, req_id: u32, tx_id: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
    encode(&mut out, ty, req_id, tx_id, &[payload]);
    out
}

/// Reads one whole message from a blocking stream: its header and
/// payload. A payload announced longer than `max` is InvalidData, and
/// nothing of it is read.
pub fn read_message(r: &mut impl io::Read, max: usize) -> io::Result<(Header, Vec<u8>)> {
    let mut h = [0u8; HEADER_LEN];
    r.read_exact(&mut h)?;
    let header = Header::decode(&h);
    if header.len as usize > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a message of {} bytes (at most {max})", header.len),
        ));
    }
    let mut payload = vec![0; header.len as usize];
    r.read_exact(&mut payload)?;
    Ok((header, payload))
}

/// The complete messages at the front of `wire`, taken out of it; a
/// partial one stays for the bytes still to come.
pub fn take_messages(wire: &mut Vec<u8>) -> Vec<(Header, Vec<u8>)> {
    let mut out = Vec::new();
    let mut at = 0;
    while wire.len() - at >= HEADER_LEN {
        let header = Header::decode(wire[at..at + HEADER_LEN].try_into().unwrap());
        let end = at + HEADER_LEN + header.len as usize;
        if wire.len() < end {
            break;
        }
        out.push((header, wire[at + HEADER_LEN..end].to_vec()));
        at = end;
    }
    wire.drain(..at);
    out
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

    #[test]
    fn whole_messages_are_taken_and_a_partial_one_kept() {
        let mut wire = message(2, 7, 0, b"/a\0");
        wire.extend(message(4, 8, 3, b"/b\0x"));
        let mut third = message(1, 9, 0, b"/c\0");
        let rest = third.split_off(HEADER_LEN + 1);
        wire.extend(&third);
        let got = take_messages(&mut wire);
        let ids: Vec<_> = got
            .iter()
            .map(|(h, p)| (h.ty, h.req_id, h.tx_id, p.len()))
            .collect();
        assert_eq!(ids, [(2, 7, 0, 3), (4, 8, 3, 4)]);
        assert_eq!(wire, third);
        wire.extend(rest);
        let (h, p) = read_message(&mut wire.as_slice(), PAYLOAD_MAX).unwrap();
        assert_eq!((h.req_id, p.as_slice()), (9, &b"/c\0"[..]));
        let long = message(2, 1, 0, &[b'x'; 10]);
        let e = read_message(&mut long.as_slice(), 9).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
    }
}
