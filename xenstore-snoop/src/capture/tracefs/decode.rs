//! Decoding a tracefs uprobe event's raw record into an [`Event`], by the
//! field offsets its format (`format.rs`) gives.

use super::format::{Field, Format};
use crate::event::{Event, Probe};
use anyhow::{bail, Result};
use xenstore_proto::{Client, Ident};

/// An integer in a record: a field of its own, or bits of a packed one.
struct Part {
    field: Field,
    shift: u32,
    mask: u64,
}

impl Part {
    /// A field of its own named as `part` if the format has one (older
    /// layouts split every packed arg in the kernel; `dom` is split out for
    /// the kernel filter), else `part`'s bits of the field `packed`.
    fn find(format: &Format, part: xenstore_proto::Field, packed: &str) -> Result<Part> {
        let mask = part.mask();
        Ok(match format.field(part.name) {
            Ok(f) => Part {
                field: f.clone(),
                shift: 0,
                mask,
            },
            Err(_) => Part {
                field: format.field(packed)?.clone(),
                shift: part.shift,
                mask,
            },
        })
    }

    fn get(&self, raw: &[u8]) -> Result<u64> {
        Ok((self.field.uint(raw)? >> self.shift) & self.mask)
    }
}

/// Field offsets of one event's format, looked up once.
pub struct Decoder {
    pub probe: Probe,
    pub id: u16,
    serial: Field,
    dom: Part,
    op: Part,
    conn: Part,
    pid: Part,
    tx: Part,
    extra: Field,
    s1: Field,
    s2: Field,
    /// `reply`'s appended fields; None for the other probes.
    s3: Option<Field>,
    latency_ns: Option<Field>,
}

impl Decoder {
    pub fn new(probe: Probe, format: &Format) -> Result<Decoder> {
        let f = |n: &str| format.field(n).cloned();
        let s1 = f("s1")?;
        if !s1.data_loc {
            bail!("field s1 of {} is not a string", format.name);
        }
        Ok(Decoder {
            probe,
            id: format.id,
            serial: f("serial")?,
            dom: Part::find(format, Ident::DOM, "ident")?,
            op: Part::find(format, Ident::OP, "ident")?,
            conn: Part::find(format, Ident::CONN, "ident")?,
            pid: Part::find(format, Client::PID, "client")?,
            tx: Part::find(format, Client::TX, "client")?,
            extra: f("extra")?,
            s1,
            s2: f("s2")?,
            s3: f("s3").ok(),
            latency_ns: f("latency_ns").ok(),
        })
    }

    /// Decodes the raw tracepoint record of one sample.
    pub fn decode(&self, raw: &[u8], mono_ns: u64) -> Result<Event> {
        let text = |f: &Field| -> Result<String> {
            let bytes = f.str(raw)?;
            // Valid UTF-8 (nearly always) checks faster than the lossy walk.
            Ok(match std::str::from_utf8(bytes) {
                Ok(s) => s.to_owned(),
                Err(_) => String::from_utf8_lossy(bytes).into_owned(),
            })
        };
        Ok(Event {
            probe: self.probe,
            mono_ns,
            serial: self.serial.uint(raw)?,
            dom: self.dom.get(raw)? as u16,
            op: self.op.get(raw)? as u16,
            conn: self.conn.get(raw)? as u32,
            pid: self.pid.get(raw)? as u32,
            tx: self.tx.get(raw)? as u32,
            extra: self.extra.uint(raw)?,
            s1: text(&self.s1)?,
            s2: text(&self.s2)?,
            s3: match &self.s3 {
                Some(f) => text(f)?,
                None => String::new(),
            },
            latency_ns: match &self.latency_ns {
                Some(f) => f.uint(raw)?,
                None => 0,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xenstore_proto::{flag, RequestExtra, ResponseExtra};

    #[test]
    fn decodes_a_record_laid_out_by_the_captured_format() {
        let format = Format::parse(include_str!("../../../testdata/request.format")).unwrap();
        let d = Decoder::new(Probe::Request, &format).unwrap();
        let mut rec = vec![0u8; 80];
        let put = |rec: &mut Vec<u8>, off: usize, v: u64| {
            rec[off..off + 8].copy_from_slice(&v.to_ne_bytes())
        };
        put(&mut rec, 16, 9);
        put(&mut rec, 24, 6);
        put(&mut rec, 32, 2);
        put(&mut rec, 40, 3);
        put(&mut rec, 48, 100);
        put(&mut rec, 56, 5);
        let extra = RequestExtra {
            flags: flag::STR1_TRUNCATED.into(),
            req_id: 8,
        };
        put(&mut rec, 64, extra.pack());
        let s1 = b"device/vbd/0/state\0";
        rec[72..76].copy_from_slice(&(((s1.len() as u32) << 16) | 80).to_ne_bytes());
        rec.extend_from_slice(s1);
        let s2_at = rec.len() as u32;
        rec[76..80].copy_from_slice(&((1u32 << 16) | s2_at).to_ne_bytes());
        rec.push(0);
        let e = d.decode(&rec, 1000).unwrap();
        assert_eq!(
            (e.serial, e.dom, e.op, e.conn, e.pid, e.tx, e.req_id()),
            (9, 6, 2, 3, 100, 5, 8)
        );
        assert!(e.truncated());
        assert_eq!(e.s1, "device/vbd/0/state");
        assert_eq!(e.s2, "");
    }

    /// The layout the snooper defines now: ident and client fetched whole.
    #[test]
    fn splits_packed_ident_and_client() {
        let field = |name: &str, offset, size, data_loc| Field {
            name: name.into(),
            offset,
            size,
            signed: false,
            data_loc,
        };
        let format = Format {
            name: "response".into(),
            id: 7,
            fields: vec![
                field("serial", 16, 8, false),
                field("ident", 24, 8, false),
                field("client", 32, 8, false),
                field("extra", 40, 8, false),
                field("s1", 48, 4, true),
                field("s2", 52, 4, true),
            ],
        };
        let d = Decoder::new(Probe::Response, &format).unwrap();
        let mut rec = vec![0u8; 56];
        let put = |rec: &mut Vec<u8>, off: usize, v: u64| {
            rec[off..off + 8].copy_from_slice(&v.to_ne_bytes())
        };
        put(&mut rec, 16, 9);
        let ident = Ident {
            conn: 0x8000_0003,
            op: 2,
            dom: 0xfff6,
        };
        let client = Client {
            tx: 0x8000_0005,
            pid: 0xffff_fffe,
        };
        let extra = ResponseExtra {
            flags: 0,
            errno: 2,
            req_id: 8,
        };
        put(&mut rec, 24, ident.pack());
        put(&mut rec, 32, client.pack());
        put(&mut rec, 40, extra.pack());
        rec[48..52].copy_from_slice(&((7u32 << 16) | 56).to_ne_bytes());
        rec.extend_from_slice(b"ENOENT\0");
        rec[52..56].copy_from_slice(&((1u32 << 16) | 63).to_ne_bytes());
        rec.push(0);
        let e = d.decode(&rec, 1000).unwrap();
        assert_eq!(
            (e.serial, e.dom, e.op, e.conn, e.pid, e.tx),
            (9, 0xfff6, 2, 0x8000_0003, 0xffff_fffe, 0x8000_0005)
        );
        assert_eq!((e.req_id(), e.errno(), e.s1.as_str()), (8, 2, "ENOENT"));
    }
}

#[cfg(test)]
mod captured {
    //! A real failed read, from perf's raw records to the output line.
    use super::Decoder;
    use crate::capture::tracefs::format::Format;
    use crate::event::Probe;
    use crate::output::{Clock, TextStyle};
    use crate::pairing::Pairing;

    /// Raw records perf delivered on this machine for
    /// `xenstore-read /nonexistent/node` against the shim, with the formats
    /// tracefs gave the snooper's uprobes then.
    #[test]
    fn real_records_of_a_failed_read() {
        let request = Format::parse(include_str!("../../../testdata/request.format")).unwrap();
        let response = Format::parse(include_str!("../../../testdata/response.format")).unwrap();
        let decoders = [
            Decoder::new(Probe::Request, &request).unwrap(),
            Decoder::new(Probe::Response, &response).unwrap(),
        ];
        let mut pairing = Pairing::new();
        let mut records = Vec::new();
        for (i, hex) in include_str!("../../../testdata/read-enoent.raw.hex")
            .lines()
            .enumerate()
        {
            let raw: Vec<u8> = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
                .collect();
            let id = u16::from_ne_bytes([raw[0], raw[1]]);
            let d = decoders.iter().find(|d| d.id == id).unwrap();
            let ev = d.decode(&raw, 1000 + i as u64 * 25_000).unwrap();
            records.extend(pairing.push(ev));
        }
        assert_eq!(records.len(), 1);
        let r = &records[0];
        assert_eq!(
            (r.serial, r.conn, r.dom, r.pid, r.tx),
            (1, 1, 0, 26137, Some(0))
        );
        assert_eq!(r.req_id, Some(0));
        assert_eq!(r.error.as_deref(), Some("ENOENT"));
        assert_eq!(r.latency_ns, Some(25_000));
        let clock = Clock {
            offset_ns: 0,
            start_mono_ns: 0,
        };
        assert_eq!(
            TextStyle::default().line(r, &clock),
            "0   26137  -               0   [ERROR] XS_READ: /nonexistent/node -> ENOENT"
        );
    }
}
