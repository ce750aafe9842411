//! The records xssnoop.bpf.c writes into the ring buffer, decoded: a
//! [`SnoopRecord`] cut after its strings, at the offsets Rust gives the
//! struct the program's C declaration is generated from.

use crate::event::Event;
use std::mem::offset_of;
use xenstore_proto::bpf::{probe_of, SnoopRecord, SNOOP_HEADER_LEN};
use xenstore_proto::{Client, Ident};

/// Where string `i`'s length and start are.
fn len_at(i: usize) -> usize {
    offset_of!(SnoopRecord, len) + 2 * i
}

fn start_at(i: usize) -> usize {
    offset_of!(SnoopRecord, at) + 2 * i
}

/// One record as the ring holds it; None if it is malformed.
pub fn decode(raw: &[u8]) -> Option<Event> {
    let u64_at = |o: usize| Some(u64::from_ne_bytes(raw.get(o..o + 8)?.try_into().ok()?));
    let u16_at = |o: usize| Some(u16::from_ne_bytes(raw.get(o..o + 2)?.try_into().ok()?));
    let kind_at = offset_of!(SnoopRecord, kind);
    let kind = u32::from_ne_bytes(raw.get(kind_at..kind_at + 4)?.try_into().ok()?);
    let probe = probe_of(kind)?;
    let ident = Ident::unpack(u64_at(offset_of!(SnoopRecord, ident))?);
    let client = Client::unpack(u64_at(offset_of!(SnoopRecord, client))?);
    let text = |i: usize| -> Option<String> {
        let len = usize::from(u16_at(len_at(i))?);
        let at = SNOOP_HEADER_LEN + usize::from(u16_at(start_at(i))?);
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
        mono_ns: u64_at(offset_of!(SnoopRecord, mono_ns))?,
        serial: u64_at(offset_of!(SnoopRecord, serial))?,
        dom: ident.dom,
        op: ident.op,
        conn: ident.conn,
        pid: client.pid,
        tx: client.tx,
        extra: u64_at(offset_of!(SnoopRecord, extra))?,
        s1,
        s2,
        s3,
        latency_ns: u64_at(offset_of!(SnoopRecord, latency_ns))?,
    })
}

#[cfg(test)]
pub mod tests {
    use super::*;
    use crate::event::Probe;
    use xenstore_proto::bpf::cookie_of;

    /// A record laid out as the BPF program writes it: `words` are
    /// mono_ns, serial, ident, client, extra, latency_ns.
    pub fn record(kind: u32, words: [u64; 6], strings: &[&[u8]]) -> Vec<u8> {
        let mut r = vec![0; SNOOP_HEADER_LEN];
        let mut put = |at: usize, bytes: &[u8]| r[at..at + bytes.len()].copy_from_slice(bytes);
        let word_at = [
            offset_of!(SnoopRecord, mono_ns),
            offset_of!(SnoopRecord, serial),
            offset_of!(SnoopRecord, ident),
            offset_of!(SnoopRecord, client),
            offset_of!(SnoopRecord, extra),
            offset_of!(SnoopRecord, latency_ns),
        ];
        for (at, w) in word_at.into_iter().zip(words) {
            put(at, &w.to_ne_bytes());
        }
        put(offset_of!(SnoopRecord, kind), &kind.to_ne_bytes());
        let mut start = 0u16;
        for (i, s) in strings.iter().enumerate() {
            put(len_at(i), &(s.len() as u16).to_ne_bytes());
            put(start_at(i), &start.to_ne_bytes());
            start += s.len() as u16;
        }
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
            cookie_of(Probe::Request),
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
        let raw = record(cookie_of(Probe::ConnClose), [0; 6], &[b"", b""]);
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
            cookie_of(Probe::Reply),
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
            cookie_of(Probe::Reply),
            [0; 6],
            &[b"/p\0", b"result\0", b"args\0"],
        );
        let field = |raw: &mut Vec<u8>, at: usize, v: u16| {
            raw[at..at + 2].copy_from_slice(&v.to_ne_bytes());
        };
        // Lengths then offsets of str1, str2, str3.
        for (i, (len, at)) in [(3, 0), (5, 10), (7, 3)].into_iter().enumerate() {
            field(&mut raw, len_at(i), len);
            field(&mut raw, start_at(i), at);
        }
        let e = decode(&raw).unwrap();
        assert_eq!(
            (e.s1.as_str(), e.s2.as_str(), e.s3.as_str()),
            ("/p", "args", "result")
        );
        // An offset past the end.
        field(&mut raw, start_at(1), 11);
        assert!(decode(&raw).is_none());
    }

    /// The compiled program's record (its BTF, as the skeleton has it) is
    /// SnoopRecord, field for field.
    #[test]
    fn the_compiled_record_is_the_rust_struct() {
        use super::super::skel::types::record as Compiled;
        let compiled = [
            ("mono_ns", offset_of!(Compiled, mono_ns)),
            ("serial", offset_of!(Compiled, serial)),
            ("ident", offset_of!(Compiled, ident)),
            ("client", offset_of!(Compiled, client)),
            ("extra", offset_of!(Compiled, extra)),
            ("latency_ns", offset_of!(Compiled, latency_ns)),
            ("kind", offset_of!(Compiled, kind)),
            ("len", offset_of!(Compiled, len)),
            ("at", offset_of!(Compiled, at)),
            ("str", offset_of!(Compiled, str)),
        ];
        let rust: Vec<_> = SnoopRecord::C_FIELDS
            .iter()
            .map(|f| (f.name, f.offset))
            .collect();
        assert_eq!(compiled.to_vec(), rust);
        assert_eq!(
            std::mem::size_of::<Compiled>(),
            std::mem::size_of::<SnoopRecord>()
        );
    }
}
