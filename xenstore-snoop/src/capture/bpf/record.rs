//! The records xssnoop.bpf.c writes into the ring buffer, decoded.
//!
//! `struct record`: mono_ns, serial, ident, client, extra, latency_ns
//! (u64 each), kind (u32), three string lengths with their NULs (u16 each;
//! the third only for `reply`), where each string starts in the string
//! area (u16 each), then the string area.

use crate::event::{Event, Probe};
use xenstore_proto::{Client, Ident};

/// Bytes before the strings.
pub const HEADER_LEN: usize = 64;

/// The probe whose firings carry `cookie` (the BPF program's `enum kind`,
/// which follows `Probe::ALL`).
pub fn probe_of(cookie: u32) -> Option<Probe> {
    Probe::ALL.get(cookie as usize).copied()
}

/// The cookie the BPF program is attached with for `probe`.
pub fn cookie_of(probe: Probe) -> u64 {
    Probe::ALL
        .iter()
        .position(|&p| p == probe)
        .expect("every probe is in Probe::ALL") as u64
}

/// One record as the ring holds it; None if it is malformed.
pub fn decode(raw: &[u8]) -> Option<Event> {
    let u64_at = |o: usize| Some(u64::from_ne_bytes(raw.get(o..o + 8)?.try_into().ok()?));
    let u16_at = |o: usize| Some(u16::from_ne_bytes(raw.get(o..o + 2)?.try_into().ok()?));
    let kind = u32::from_ne_bytes(raw.get(48..52)?.try_into().ok()?);
    let probe = probe_of(kind)?;
    let ident = Ident::unpack(u64_at(16)?);
    let client = Client::unpack(u64_at(24)?);
    let text = |i: usize| -> Option<String> {
        let len = usize::from(u16_at(52 + 2 * i)?);
        let at = HEADER_LEN + usize::from(u16_at(58 + 2 * i)?);
        let bytes = raw.get(at..at + len)?;
        // The length counts the NUL. The string ends at the first NUL, as a
        // string copy would have ended it (a window copy takes a string to
        // the byte before the next one).
        let bytes = std::ffi::CStr::from_bytes_until_nul(bytes).map_or(bytes, |s| s.to_bytes());
        // Valid UTF-8 (nearly always) checks faster than the lossy walk.
        Some(match std::str::from_utf8(bytes) {
            Ok(s) => s.to_owned(),
            Err(_) => String::from_utf8_lossy(bytes).into_owned(),
        })
    };
    let s1 = text(0)?;
    let s2 = text(1)?;
    let s3 = text(2)?;
    Some(Event {
        probe,
        mono_ns: u64_at(0)?,
        serial: u64_at(8)?,
        dom: ident.dom,
        op: ident.op,
        conn: ident.conn,
        pid: client.pid,
        tx: client.tx,
        extra: u64_at(32)?,
        s1,
        s2,
        s3,
        latency_ns: u64_at(40)?,
    })
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// A record laid out as the BPF program writes it.
    pub fn record(kind: u32, words: [u64; 6], strings: &[&[u8]]) -> Vec<u8> {
        let mut r = Vec::new();
        for w in words {
            r.extend_from_slice(&w.to_ne_bytes());
        }
        r.extend_from_slice(&kind.to_ne_bytes());
        for i in 0..3 {
            let len = strings.get(i).map_or(0, |s| s.len() as u16);
            r.extend_from_slice(&len.to_ne_bytes());
        }
        let mut at = 0u16;
        for i in 0..3 {
            r.extend_from_slice(&at.to_ne_bytes());
            at += strings.get(i).map_or(0, |s| s.len() as u16);
        }
        assert_eq!(r.len(), HEADER_LEN);
        for s in strings {
            r.extend_from_slice(s);
        }
        r
    }

    #[test]
    fn decodes_every_field() {
        let ident = Ident {
            conn: 3,
            op: 2,
            dom: 6,
        }
        .pack();
        let client = Client { tx: 5, pid: 100 }.pack();
        let raw = record(
            cookie_of(Probe::Request) as u32,
            [1000, 9, ident, client, 8, 0],
            &[b"device/vbd/0/state\0", b"\0"],
        );
        let e = decode(&raw).unwrap();
        assert_eq!(e.probe, Probe::Request);
        assert_eq!(
            (e.mono_ns, e.serial, e.dom, e.op, e.conn, e.pid, e.tx),
            (1000, 9, 6, 2, 3, 100, 5)
        );
        assert_eq!(
            (e.req_id(), e.s1.as_str(), e.s2.as_str()),
            (8, "device/vbd/0/state", "")
        );
    }

    #[test]
    fn unreadable_strings_are_empty_and_bad_records_rejected() {
        let raw = record(cookie_of(Probe::ConnClose) as u32, [0; 6], &[b"", b""]);
        let e = decode(&raw).unwrap();
        assert_eq!((e.probe, e.s1.as_str()), (Probe::ConnClose, ""));
        // Invalid UTF-8 is shown, not dropped.
        let raw = record(0, [0; 6], &[b"a\xffb\0", b"\0"]);
        assert_eq!(decode(&raw).unwrap().s1, "a\u{fffd}b");
        // Lengths past the end, an unknown kind, a short header.
        let mut raw = record(0, [0; 6], &[b"abc\0", b"\0"]);
        raw.truncate(raw.len() - 2);
        assert!(decode(&raw).is_none());
        assert!(decode(&record(99, [0; 6], &[])).is_none());
        assert!(decode(&[0; 20]).is_none());
    }

    #[test]
    fn decodes_a_reply_with_its_result_and_latency() {
        let ident = Ident {
            conn: 3,
            op: 2,
            dom: 0,
        }
        .pack();
        let extra = xenstore_proto::ResponseExtra {
            flags: 0,
            errno: 2,
            req_id: 8,
        }
        .pack();
        let raw = record(
            cookie_of(Probe::Reply) as u32,
            [5000, 9, ident, 0, extra, 1234],
            &[b"/a\0", b"\0", b"no such node\0"],
        );
        let e = decode(&raw).unwrap();
        assert_eq!(e.probe, Probe::Reply);
        assert_eq!((e.errno(), e.req_id(), e.latency_ns), (2, 8, 1234));
        assert_eq!(
            (e.s1.as_str(), e.s2.as_str(), e.s3.as_str()),
            ("/a", "", "no such node")
        );
    }

    #[test]
    fn strings_are_found_where_their_offsets_say() {
        // As a window copy of reply leaves them: str1, str3, str2.
        let mut raw = record(
            cookie_of(Probe::Reply) as u32,
            [0; 6],
            &[b"/p\0", b"result\0", b"args\0"],
        );
        let field = |raw: &mut Vec<u8>, at: usize, v: u16| {
            raw[at..at + 2].copy_from_slice(&v.to_ne_bytes());
        };
        // Lengths then offsets of str1, str2, str3.
        for (i, (len, at)) in [(3, 0), (5, 10), (7, 3)].into_iter().enumerate() {
            field(&mut raw, 52 + 2 * i, len);
            field(&mut raw, 58 + 2 * i, at);
        }
        let e = decode(&raw).unwrap();
        assert_eq!(
            (e.s1.as_str(), e.s2.as_str(), e.s3.as_str()),
            ("/p", "args", "result")
        );
        // An offset past the end.
        field(&mut raw, 60, 11);
        assert!(decode(&raw).is_none());
    }

    #[test]
    fn cookies_round_trip() {
        for p in Probe::ALL {
            assert_eq!(probe_of(cookie_of(p) as u32), Some(p));
        }
    }
}
