//! How many bytes the daemon cut from a record's strings. The request and
//! response probes only flag a cut; the `truncated` probe, fired just
//! before them, gives the uncut lengths, and the difference with what the
//! record shows is the count. Fed by [`Event`]s, whatever the back end.

use crate::event::{Event, Probe};
use crate::record::{Cut, Record};
use std::collections::HashMap;
use xenstore_proto::CutExtra;

/// Uncut lengths waiting for their record, at most this many.
const MAX_PENDING: usize = 1 << 12;

/// The probe a `truncated` event gives the lengths of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Cutting {
    Request,
    Response,
    Reply,
}

#[derive(Default)]
pub struct Cuts {
    /// (serial, probe) -> the uncut lengths of that probe's strings.
    pending: HashMap<(u64, Cutting), CutExtra>,
}

impl Cuts {
    pub fn new() -> Cuts {
        Cuts::default()
    }

    /// Keeps a `truncated` event's lengths for the record it precedes.
    pub fn observe(&mut self, ev: &Event) {
        if ev.probe != Probe::Truncated {
            return;
        }
        let cutting = match ev.s1.as_str() {
            "request" => Cutting::Request,
            "response" => Cutting::Response,
            "reply" => Cutting::Reply,
            _ => return,
        };
        if self.pending.len() >= MAX_PENDING {
            // Their records were lost: start over.
            self.pending.clear();
        }
        self.pending
            .insert((ev.serial, cutting), CutExtra::unpack(ev.extra));
    }

    /// Turns the record's `Unknown` cuts into byte counts where the
    /// lengths are known; forgets the lengths either way.
    pub fn measure(&mut self, r: &mut Record) {
        if self.pending.is_empty() {
            return;
        }
        if let Some(len) = self.pending.remove(&(r.serial, Cutting::Request)) {
            if r.request_cut.is_cut() {
                r.request_cut =
                    Cut::Bytes(cut(len.str1_len, &r.path) + cut(len.str2_len, &r.value));
            }
        }
        if let Some(len) = self.pending.remove(&(r.serial, Cutting::Response)) {
            if r.reply_cut.is_cut() && r.error.is_none() {
                let result = r.result.as_deref().unwrap_or("");
                r.reply_cut = Cut::Bytes(cut(len.str1_len, result));
            }
        }
        self.measure_reply(r);
    }

    /// For a record made from one `reply` firing: path, value and the
    /// result (or error reason) are its str1, str2, str3.
    fn measure_reply(&mut self, r: &mut Record) {
        let Some(len) = self.pending.remove(&(r.serial, Cutting::Reply)) else {
            return;
        };
        if r.request_cut.is_cut() {
            r.request_cut = Cut::Bytes(cut(len.str1_len, &r.path) + cut(len.str2_len, &r.value));
        }
        if r.reply_cut.is_cut() {
            let shown = match &r.error {
                None => r.result.as_deref().unwrap_or(""),
                Some(_) => r.error_reason.as_deref().unwrap_or(""),
            };
            r.reply_cut = Cut::Bytes(cut(len.str3_len, shown));
        }
    }
}

/// Bytes a string of `full` bytes lost when `shown` is what arrived.
fn cut(full: u32, shown: &str) -> u64 {
    u64::from(full).saturating_sub(shown.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pairing::tests::ev;
    use crate::pairing::Pairing;
    use xenstore_proto::{flag, RequestExtra};

    #[test]
    fn a_cut_write_counts_the_bytes_cut() {
        let mut cuts = Cuts::new();
        let mut p = Pairing::new();
        let mut t = ev(Probe::Truncated, 7, 11, "request", "");
        t.extra = CutExtra {
            str1_len: 2,
            str2_len: 4000,
            str3_len: 0,
        }
        .pack();
        cuts.observe(&t);
        let mut req = ev(Probe::Request, 7, 11, "/t", &"X".repeat(3898));
        req.extra = RequestExtra {
            flags: flag::STR2_TRUNCATED.into(),
            req_id: 1,
        }
        .pack();
        p.push(req);
        let mut r = p.push(ev(Probe::Response, 7, 11, "OK", "")).unwrap();
        assert_eq!(r.request_cut, Cut::Unknown);
        cuts.measure(&mut r);
        assert_eq!(r.request_cut, Cut::Bytes(102));
        assert_eq!(r.reply_cut, Cut::Whole);
        assert!(cuts.pending.is_empty());
        assert_eq!(r.request_cut.mark().as_deref(), Some("…[+102 bytes]"));
    }

    #[test]
    fn long_but_whole_strings_stay_whole() {
        let mut cuts = Cuts::new();
        let mut p = Pairing::new();
        let mut t = ev(Probe::Truncated, 8, 2, "response", "");
        t.extra = CutExtra {
            str1_len: 2000,
            ..Default::default()
        }
        .pack();
        cuts.observe(&t);
        p.push(ev(Probe::Request, 8, 2, "/long", ""));
        let mut r = p
            .push(ev(Probe::Response, 8, 2, &"v".repeat(2000), ""))
            .unwrap();
        cuts.measure(&mut r);
        assert_eq!((r.request_cut, r.reply_cut), (Cut::Whole, Cut::Whole));
        assert!(cuts.pending.is_empty());
    }

    #[test]
    fn a_reply_firing_is_measured_from_its_own_lengths() {
        let mut cuts = Cuts::new();
        let mut t = ev(Probe::Truncated, 9, 2, "reply", "");
        t.extra = CutExtra {
            str1_len: 2,
            str2_len: 0,
            str3_len: 5000,
        }
        .pack();
        cuts.observe(&t);
        let mut p = Pairing::new();
        p.push(ev(Probe::Request, 9, 2, "/r", ""));
        let mut r = p
            .push(ev(Probe::Response, 9, 2, &"v".repeat(3898), ""))
            .unwrap();
        r.reply_cut = Cut::Unknown;
        cuts.measure(&mut r);
        assert_eq!(r.reply_cut, Cut::Bytes(5000 - 3898), "str3's length");
    }
}
