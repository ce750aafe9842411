//! Records from events: a `reply` is one whole operation; watch events
//! and connection/transaction events pass through. For a daemon binary
//! without `reply` (see attach.rs), each `request` is joined with its
//! `response` (same daemon serial) instead.

use crate::event::{Event, Probe};
use crate::record::{Cut, Kind, Record};
use std::collections::BTreeMap;
use xenstore_proto::flag;
use xenstore_proto::wire::XsError;

impl Record {
    /// Who and when, from `ev`; everything else empty.
    fn base(ev: &Event, kind: Kind) -> Record {
        Record {
            kind,
            mono_ns: ev.mono_ns,
            serial: ev.serial,
            conn: ev.conn,
            dom: ev.dom,
            pid: ev.pid,
            comm: None,
            tx: None,
            req_id: None,
            op: None,
            path: String::new(),
            value: String::new(),
            result: None,
            error: None,
            error_reason: None,
            latency_ns: None,
            fired_by: None,
            token: None,
            truncated: false,
            request_cut: Cut::Whole,
            reply_cut: Cut::Whole,
        }
    }

    fn lone(ev: Event, kind: Kind) -> Record {
        let mut r = Record::base(&ev, kind);
        match kind {
            Kind::WatchEvent => {
                r.op = Some(ev.op);
                r.fired_by = Some(ev.serial);
                r.path = ev.s1;
                r.token = Some(ev.s2);
            }
            // transport, peer
            Kind::ConnOpen => {
                r.path = ev.s1;
                r.value = ev.s2;
            }
            // reason
            Kind::ConnClose => r.result = Some(ev.s1),
            // outcome name, reason
            Kind::TxEnd => {
                r.tx = Some(ev.tx);
                r.result = Some(ev.s1);
                r.error_reason = (!ev.s2.is_empty()).then_some(ev.s2);
            }
            Kind::Op => unreachable!("ops are built by pair() and completed()"),
        }
        r
    }

    /// A `reply`: the request and its outcome, timed at the request.
    fn completed(ev: Event) -> Record {
        let errno = ev.errno();
        let flags = xenstore_proto::ResponseExtra::unpack(ev.extra).flags;
        let cut_if = |bits: u16| {
            if flags & bits != 0 {
                Cut::Unknown
            } else {
                Cut::Whole
            }
        };
        let mut r = Record {
            mono_ns: ev.mono_ns.saturating_sub(ev.latency_ns),
            tx: Some(ev.tx),
            req_id: Some(ev.req_id()),
            op: Some(ev.op),
            latency_ns: Some(ev.latency_ns),
            truncated: ev.truncated(),
            request_cut: cut_if(flag::STR1_TRUNCATED | flag::STR2_TRUNCATED),
            reply_cut: cut_if(flag::STR3_TRUNCATED),
            ..Record::base(&ev, Kind::Op)
        };
        r.path = ev.s1;
        r.value = ev.s2;
        if errno == 0 {
            r.result = Some(ev.s3);
        } else {
            let name = XsError::from_errno(errno)
                .map_or_else(|| format!("E{errno}"), |e| e.name().to_string());
            r.error = Some(name.clone());
            r.error_reason = (!ev.s3.is_empty()).then_some(ev.s3);
            r.result = Some(name);
        }
        r
    }

    fn pair(req: Event, resp: Option<Event>) -> Record {
        let mut r = Record {
            tx: Some(req.tx),
            req_id: Some(req.req_id()),
            op: Some(req.op),
            truncated: req.truncated(),
            request_cut: if req.truncated() {
                Cut::Unknown
            } else {
                Cut::Whole
            },
            ..Record::base(&req, Kind::Op)
        };
        r.path = req.s1;
        r.value = req.s2;
        if let Some(resp) = resp {
            r.latency_ns = Some(resp.mono_ns.saturating_sub(req.mono_ns));
            r.truncated |= resp.truncated();
            if resp.truncated() {
                r.reply_cut = Cut::Unknown;
            }
            if resp.errno() != 0 {
                r.error = Some(resp.s1.clone());
                r.error_reason = (!resp.s2.is_empty()).then_some(resp.s2);
            }
            r.result = Some(resp.s1);
        }
        r
    }
}

/// Requests waiting for their reply, and replies seen before their request
/// (per-CPU rings are drained one after the other). Keyed by serial, so
/// when lost events leave halves unmatched, the oldest go first.
#[derive(Default)]
pub struct Pairing {
    /// The latest request, kept out of `requests`: its reply nearly always
    /// comes next, and pairing it here saves a map insert and remove.
    latest: Option<Event>,
    requests: BTreeMap<u64, Event>,
    early_replies: BTreeMap<u64, Event>,
    /// Halves dropped to bound memory.
    pub dropped: u64,
}

/// Unmatched halves kept at most (each side).
const MAX_UNMATCHED: usize = 1 << 18;

impl Pairing {
    pub fn new() -> Pairing {
        Pairing::default()
    }

    /// Feeds one event; returns the record it completes, if any.
    pub fn push(&mut self, ev: Event) -> Option<Record> {
        match ev.probe {
            Probe::Request => match self.early_replies.remove(&ev.serial) {
                Some(resp) => Some(Record::pair(ev, Some(resp))),
                None => {
                    if let Some(older) = self.latest.replace(ev) {
                        // `latest` counts against the bound too.
                        let max = MAX_UNMATCHED - 1;
                        park(&mut self.requests, older, max, &mut self.dropped);
                    }
                    None
                }
            },
            Probe::Response => {
                let req = match &self.latest {
                    Some(latest) if latest.serial == ev.serial => self.latest.take(),
                    _ => self.requests.remove(&ev.serial),
                };
                match req {
                    Some(req) => Some(Record::pair(req, Some(ev))),
                    None => {
                        park(
                            &mut self.early_replies,
                            ev,
                            MAX_UNMATCHED,
                            &mut self.dropped,
                        );
                        None
                    }
                }
            }
            Probe::WatchEvent => Some(Record::lone(ev, Kind::WatchEvent)),
            Probe::ConnOpen => Some(Record::lone(ev, Kind::ConnOpen)),
            Probe::ConnClose => Some(Record::lone(ev, Kind::ConnClose)),
            Probe::TxEnd => Some(Record::lone(ev, Kind::TxEnd)),
            Probe::Reply => Some(Record::completed(ev)),
            // Lengths for the record to come (cuts.rs).
            Probe::Truncated => None,
            // For counting tracers (--metrics); the snooper never attaches it.
            Probe::ReplyStats => None,
            Probe::StatsBatch => None,
        }
    }

    /// At exit: the requests that never got a reply, oldest first.
    pub fn unanswered(&mut self) -> Vec<Record> {
        self.early_replies.clear();
        if let Some(latest) = self.latest.take() {
            self.requests.insert(latest.serial, latest);
        }
        std::mem::take(&mut self.requests)
            .into_values()
            .map(|e| Record::pair(e, None))
            .collect()
    }
}

/// Keeps one half of a pair until the other arrives; past the bound the
/// oldest is given up (and counted), so a lost half can't grow memory.
fn park(waiting: &mut BTreeMap<u64, Event>, ev: Event, max: usize, dropped: &mut u64) {
    waiting.insert(ev.serial, ev);
    if waiting.len() > max {
        waiting.pop_first();
        *dropped += 1;
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub fn ev(probe: Probe, serial: u64, op: u16, s1: &str, s2: &str) -> Event {
        Event {
            probe,
            mono_ns: serial * 1000,
            serial,
            dom: 0,
            op,
            conn: 3,
            pid: 100,
            tx: 0,
            extra: 0,
            s1: s1.into(),
            s2: s2.into(),
            s3: String::new(),
            latency_ns: 0,
        }
    }

    /// A response's extra: `errno` (0: success) for request `req_id`.
    pub fn response_extra(errno: u16, req_id: u32) -> u64 {
        xenstore_proto::ResponseExtra {
            flags: 0,
            errno,
            req_id,
        }
        .pack()
    }

    #[test]
    fn request_and_reply_make_one_record() {
        let mut p = Pairing::new();
        assert_eq!(p.push(ev(Probe::Request, 1, 2, "/a", "")), None);
        let mut resp = ev(Probe::Response, 1, 2, "ENOENT", "no node");
        resp.extra = response_extra(2, 5);
        resp.mono_ns = 4500;
        let r = p.push(resp).unwrap();
        assert_eq!(r.kind, Kind::Op);
        assert_eq!(r.op_name(), "XS_READ");
        assert_eq!(r.path, "/a");
        assert_eq!(r.error.as_deref(), Some("ENOENT"));
        assert_eq!(r.error_reason.as_deref(), Some("no node"));
        assert_eq!(r.latency_ns, Some(3500));
        assert!(p.unanswered().is_empty());
    }

    #[test]
    fn a_reply_is_a_whole_record_timed_at_its_request() {
        let mut p = Pairing::new();
        let mut ok = ev(Probe::Reply, 7, 11, "/a", "v");
        (ok.s3, ok.latency_ns, ok.mono_ns) = ("OK".into(), 300, 9000);
        ok.extra = response_extra(0, 5);
        let r = p.push(ok).unwrap();
        assert_eq!(r.kind, Kind::Op);
        assert_eq!((r.path.as_str(), r.value.as_str()), ("/a", "v"));
        assert_eq!((r.result.as_deref(), r.error), (Some("OK"), None));
        assert_eq!(
            (r.mono_ns, r.latency_ns, r.req_id),
            (8700, Some(300), Some(5))
        );
        let mut failed = ev(Probe::Reply, 8, 2, "/b", "");
        (failed.s3, failed.latency_ns) = ("quota:nodes".into(), 10);
        failed.extra = response_extra(2, 6);
        let r = p.push(failed).unwrap();
        assert_eq!(r.error.as_deref(), Some("ENOENT"));
        assert_eq!(r.result.as_deref(), Some("ENOENT"));
        assert_eq!(r.error_reason.as_deref(), Some("quota:nodes"));
        let mut bare = ev(Probe::Reply, 9, 2, "/c", "");
        bare.extra = response_extra(2, 7);
        assert_eq!(p.push(bare).unwrap().error_reason, None);
        assert!(p.unanswered().is_empty());
    }

    #[test]
    fn early_reply_waits_for_its_request() {
        let mut p = Pairing::new();
        assert_eq!(p.push(ev(Probe::Response, 7, 11, "OK", "")), None);
        let r = p.push(ev(Probe::Request, 7, 11, "/a", "v")).unwrap();
        assert_eq!((r.result.as_deref(), r.error), (Some("OK"), None));
        assert_eq!(r.value, "v");
    }

    #[test]
    fn unanswered_requests_have_no_result() {
        let mut p = Pairing::new();
        p.push(ev(Probe::Request, 9, 2, "/b", ""));
        p.push(ev(Probe::Request, 8, 2, "/a", ""));
        let left = p.unanswered();
        assert_eq!(left.iter().map(|r| r.serial).collect::<Vec<_>>(), [8, 9]);
        assert_eq!(left[0].result, None);
    }

    #[test]
    fn unmatched_halves_are_bounded() {
        let mut p = Pairing::new();
        for serial in 1..=(MAX_UNMATCHED as u64 + 2) {
            p.push(ev(Probe::Request, serial, 2, "/a", ""));
        }
        assert_eq!(p.dropped, 2);
        // the oldest went
        assert!(p.push(ev(Probe::Response, 2, 2, "x", "")).is_none());
        assert!(p.push(ev(Probe::Response, 3, 2, "x", "")).is_some());
    }

    #[test]
    fn watch_events_carry_their_firer() {
        let mut p = Pairing::new();
        let r = p
            .push(ev(Probe::WatchEvent, 4, 15, "/local/domain/6/x", "tok"))
            .unwrap();
        assert_eq!(r.kind, Kind::WatchEvent);
        assert_eq!(
            (r.fired_by, r.tx, r.token.as_deref()),
            (Some(4), None, Some("tok"))
        );
    }
}
