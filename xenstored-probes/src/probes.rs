//! Firing the `xenstore` USDT probes declared in `xenstore.d`, and the
//! classic trace file (`trace`, off unless -T) at the same points.
//!
//! The daemon calls these functions and nothing else; the argument packing
//! itself is xenstore-proto's, the probe sites sdt.rs's. Every argument is
//! built only after the probe's semaphore says a tracer is attached.

pub use xenstore_proto::probe::{TxOutcome, STR1_MAX, STRINGS_MAX};
use xenstore_proto::{flag, Client, CutExtra, Ident, RequestExtra, ResponseExtra};

/// Who a probe is about: one connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Who {
    pub conn: u32,
    pub domid: u16,
    /// dom0 client pid (SO_PEERCRED); 0 for domain connections.
    pub pid: u32,
}

/// One semaphore a probe, named as the probe: generated from xenstore.d
/// by build.rs.
#[cfg(feature = "probes")]
#[allow(non_upper_case_globals)]
mod semaphore {
    use crate::sdt::Semaphore;
    include!(concat!(env!("OUT_DIR"), "/semaphores.rs"));
}

/// A probe string as the tracer reads it: NUL-terminated.
#[cfg(feature = "probes")]
fn c_string(s: String) -> Vec<u8> {
    let mut bytes = s.into_bytes();
    bytes.push(0);
    bytes
}

/// Whether a tracer is attached to `reply` now.
#[inline]
fn reply_enabled() -> bool {
    #[cfg(feature = "probes")]
    return semaphore::reply.enabled();
    #[cfg(not(feature = "probes"))]
    false
}

/// arg1 (ident) and arg2 (client) of a probe about `who`.
#[inline]
fn pack_who(who: &Who, op: u32, tx_id: u32) -> (u64, u64) {
    let ident = Ident {
        conn: who.conn,
        op: Ident::op_of(op),
        dom: who.domid,
    };
    let client = Client {
        tx: tx_id,
        pid: who.pid,
    };
    (ident.pack(), client.pack())
}

/// The [`flag`] bit when `cut`.
fn cut_flag(cut: bool, bit: u16) -> u16 {
    if cut {
        bit
    } else {
        0
    }
}

/// The printable rendering of payload bytes: one trailing NUL dropped, the
/// other NULs shown as spaces, invalid UTF-8 replaced; cut at `max` bytes.
pub fn render(bytes: &[u8], max: usize) -> (String, bool) {
    let mut out = Vec::new();
    let (_, cut) = render_into(&mut out, bytes, max);
    out.pop();
    let s = String::from_utf8(out).expect("a rendering is UTF-8");
    (s, cut)
}

/// Appends [`render`]'s rendering and a NUL to `out` (a buffer kept across
/// firings: no allocation a probe); its length without the NUL, and
/// whether it was cut.
fn render_into(out: &mut Vec<u8>, bytes: &[u8], max: usize) -> (usize, bool) {
    let bytes = bytes.strip_suffix(&[0]).unwrap_or(bytes);
    let mut cut = bytes.len() > max;
    let start = out.len();
    // NUL and space are both one ASCII byte: swapped before decoding, they
    // decode alike, and valid text needs no second copy.
    out.extend(
        bytes[..bytes.len().min(max)]
            .iter()
            .map(|&b| if b == 0 { b' ' } else { b }),
    );
    if std::str::from_utf8(&out[start..]).is_err() {
        let lossy = String::from_utf8_lossy(&out[start..]).into_owned();
        out.truncate(start);
        let mut end = lossy.len();
        if end > max {
            // Replacement characters made it longer: cut too, and flagged.
            cut = true;
            end = max;
            while !lossy.is_char_boundary(end) {
                end -= 1;
            }
        }
        out.extend_from_slice(&lossy.as_bytes()[..end]);
    }
    let len = out.len() - start;
    out.push(0);
    (len, cut)
}

/// Splits a request payload into its first argument and the rest.
pub fn split_first(payload: &[u8]) -> (&[u8], &[u8]) {
    match payload.iter().position(|&b| b == 0) {
        Some(i) => (&payload[..i], &payload[i + 1..]),
        None => (payload, &[]),
    }
}

/// The byte length of `render(bytes, ∞)`: what a cut string had in full.
pub fn rendered_len(bytes: &[u8]) -> u32 {
    let bytes = bytes.strip_suffix(&[0]).unwrap_or(bytes);
    let len = match std::str::from_utf8(bytes) {
        Ok(_) => bytes.len(),
        Err(_) => String::from_utf8_lossy(bytes).len(),
    };
    len.try_into().unwrap_or(u32::MAX)
}

fn render_pair(a: &[u8], b: &[u8]) -> (String, String, u16) {
    let (s1, t1) = render(a, STR1_MAX);
    let (s2, t2) = render(b, STRINGS_MAX - s1.len());
    let flags = cut_flag(t1, flag::STR1_TRUNCATED) | cut_flag(t2, flag::STR2_TRUNCATED);
    (s1, s2, flags)
}

/// Fires one of the six-argument probes: `$body` gives (serial, ident,
/// client, extra, str1, str2) and runs only while a tracer is attached.
macro_rules! fire {
    ($probe:ident, $body:expr) => {{
        #[cfg(feature = "probes")]
        if semaphore::$probe.enabled() {
            let (serial, ident, client, extra, s1, s2): (u64, u64, u64, u64, String, String) =
                $body;
            let (s1, s2) = (c_string(s1), c_string(s2));
            crate::sdt_site!(
                xenstore,
                $probe,
                semaphore::$probe,
                [
                    "rdi" = serial,
                    "rsi" = ident,
                    "rdx" = client,
                    "rcx" = extra,
                    "r8" = s1.as_ptr(),
                    "r9" = s2.as_ptr(),
                ]
            );
        }
        #[cfg(not(feature = "probes"))]
        let _ = || $body;
    }};
}

/// Whether strings of these raw lengths may be cut (rendering can at most
/// triple a length): only then is `truncated` fired, at a compare's cost.
fn may_cut(str1: usize, str2: usize) -> bool {
    str1 * 3 > STR1_MAX || (str1 + str2) * 3 > STRINGS_MAX
}

/// Fires `truncated` before probe `cut_probe`, whose strings (`strs`:
/// str1, str2 and str3 as it has them) may be cut: their uncut lengths.
#[inline]
fn truncated(serial: u64, ident: u64, client: u64, cut_probe: &str, strs: [&[u8]; 3]) {
    fire!(truncated, {
        let lengths = CutExtra {
            str1_len: rendered_len(strs[0]),
            str2_len: rendered_len(strs[1]),
            str3_len: rendered_len(strs[2]),
        };
        (
            serial,
            ident,
            client,
            lengths.pack(),
            cut_probe.to_string(),
            String::new(),
        )
    });
}

/// A request was read from a connection.
#[inline]
pub fn request(serial: u64, who: &Who, op: u32, tx_id: u32, req_id: u32, payload: &[u8]) {
    crate::trace::message(false, who.conn, op, &[payload]);
    let (path, rest) = split_first(payload);
    if may_cut(path.len(), rest.len()) {
        let (ident, client) = pack_who(who, op, tx_id);
        truncated(serial, ident, client, "request", [path, rest, &[]]);
    }
    fire!(request, {
        let (ident, client) = pack_who(who, op, tx_id);
        let (s1, s2, flags) = render_pair(path, rest);
        let extra = RequestExtra {
            flags: flags.into(),
            req_id,
        };
        (serial, ident, client, extra.pack(), s1, s2)
    });
}

/// The reply to request `serial` was queued. `Err` carries the error and
/// a reason such as "quota:nodes" or "perm" ("" when there is none).
#[inline]
pub fn response(
    serial: u64,
    who: &Who,
    op: u32,
    tx_id: u32,
    req_id: u32,
    result: Result<&[u8], (crate::wire::XsError, &str)>,
) {
    match result {
        Ok(payload) => crate::trace::message(true, who.conn, op, &[payload]),
        Err((e, _)) => crate::trace::message(
            true,
            who.conn,
            crate::wire::MsgType::Error as u32,
            &[e.name().as_bytes(), b"\0"],
        ),
    }
    if let Ok(payload) = result {
        if may_cut(payload.len(), 0) {
            let (ident, client) = pack_who(who, op, tx_id);
            truncated(serial, ident, client, "response", [payload, &[], &[]]);
        }
    }
    fire!(response, {
        let (ident, client) = pack_who(who, op, tx_id);
        let (errno, s1, s2, flags) = match result {
            Ok(payload) => {
                let (s1, t1) = render(payload, STRINGS_MAX);
                (0, s1, String::new(), cut_flag(t1, flag::STR1_TRUNCATED))
            }
            Err((e, reason)) => {
                let (s2, t2) = render(reason.as_bytes(), STRINGS_MAX - 16);
                let errno = e.errno() as u16; // Linux errnos fit 16 bits
                let flags = cut_flag(t2, flag::STR2_TRUNCATED);
                (errno, e.name().to_string(), s2, flags)
            }
        };
        let extra = ResponseExtra {
            flags,
            errno,
            req_id,
        };
        (serial, ident, client, extra.pack(), s1, s2)
    });
}

/// What `reply` needs of the request being executed, kept from its decode
/// while a tracer is attached to `reply` (and only then: idle, it costs
/// one load and one branch a request).
#[derive(Default)]
pub struct InFlight {
    /// The request kept (0: none; serials start at 1).
    serial: u64,
    /// CLOCK_MONOTONIC ns at its decode.
    decoded_ns: u64,
    payload: Vec<u8>,
    /// Where `reply` renders its strings, kept to spare an allocation each.
    strings: Vec<u8>,
}

impl InFlight {
    /// Request `serial` was decoded with `payload`.
    #[inline]
    pub fn start(&mut self, serial: u64, payload: &[u8]) {
        if reply_enabled() {
            self.serial = serial;
            self.decoded_ns = monotonic_ns();
            self.payload.clear();
            self.payload.extend_from_slice(payload);
        }
    }
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The reply to request `serial`, kept in `in_flight` at its decode, was
/// queued: the request and its outcome in one firing. `result` as for
/// [`response`]. Nothing fires for a request decoded before a tracer
/// attached: nothing of it was kept.
#[inline]
pub fn reply(
    in_flight: &mut InFlight,
    serial: u64,
    who: &Who,
    op: u32,
    tx_id: u32,
    req_id: u32,
    result: Result<&[u8], (crate::wire::XsError, &str)>,
) {
    #[cfg(feature = "probes")]
    if semaphore::reply.enabled() && in_flight.serial == serial {
        let latency_ns = monotonic_ns().saturating_sub(in_flight.decoded_ns);
        let (ident, client) = pack_who(who, op, tx_id);
        let (errno, outcome) = match result {
            Ok(payload) => (0, payload),
            // Linux errnos fit 16 bits.
            Err((e, reason)) => (e.errno() as u16, reason.as_bytes()),
        };
        // The path first, the outcome next: a write's value is the one
        // to give way, a read's is the outcome.
        let InFlight {
            payload, strings, ..
        } = in_flight;
        let (path, rest) = split_first(payload);
        if may_cut(path.len(), rest.len() + outcome.len()) {
            truncated(serial, ident, client, "reply", [path, rest, outcome]);
        }
        strings.clear();
        let (n1, t1) = render_into(strings, path, STR1_MAX);
        let (n3, t3) = render_into(strings, outcome, STRINGS_MAX - n1);
        let (_, t2) = render_into(strings, rest, STRINGS_MAX - n1 - n3);
        let flags = cut_flag(t1, flag::STR1_TRUNCATED)
            | cut_flag(t2, flag::STR2_TRUNCATED)
            | cut_flag(t3, flag::STR3_TRUNCATED);
        let extra = ResponseExtra {
            flags,
            errno,
            req_id,
        };
        // str1, str3 and str2, each with its NUL, in that order.
        let s1 = strings.as_ptr();
        let s3 = strings[n1 + 1..].as_ptr();
        let s2 = strings[n1 + 1 + n3 + 1..].as_ptr();
        crate::sdt_site!(
            xenstore,
            reply,
            semaphore::reply,
            [
                "rdi" = serial,
                "rsi" = ident,
                "rdx" = client,
                "rcx" = extra.pack(),
                "r8" = s1,
                "r9" = s2,
                "r10" = s3,
                "r11" = latency_ns,
            ]
        );
    }
    #[cfg(not(feature = "probes"))]
    let _ = (in_flight, serial, who, op, tx_id, req_id, result);
}

/// A watch event for `who` was queued; `serial` is the request that fired
/// it (the WATCH itself for the initial event), `firer` that request's conn.
#[inline]
pub fn watch_event(serial: u64, who: &Who, firer: u32, path: &[u8], token: &[u8]) {
    let event = crate::wire::MsgType::WatchEvent as u32;
    crate::trace::message(true, who.conn, event, &[path, b"\0", token, b"\0"]);
    fire!(watch_event, {
        let (ident, client) = pack_who(who, crate::wire::MsgType::WatchEvent as u32, 0);
        let (s1, s2, _) = render_pair(path, token);
        (serial, ident, client, firer as u64, s1, s2)
    });
}

/// A connection opened over a `transport` ("socket", "ring"); `peer`
/// describes the other end (a /proc read for a socket client), called
/// only while the probe is traced.
#[inline]
pub fn conn_open(who: &Who, transport: &str, peer: impl FnOnce() -> String) {
    crate::trace::connection(true, who.conn);
    fire!(conn_open, {
        let (ident, client) = pack_who(who, 0, 0);
        (0u64, ident, client, 0u64, transport.to_string(), peer())
    });
}

#[inline]
pub fn conn_close(serial: u64, who: &Who, reason: &str) {
    crate::trace::connection(false, who.conn);
    fire!(conn_close, {
        let (ident, client) = pack_who(who, 0, 0);
        (
            serial,
            ident,
            client,
            0u64,
            reason.to_string(),
            String::new(),
        )
    });
}

#[inline]
pub fn tx_end(serial: u64, who: &Who, tx_id: u32, outcome: TxOutcome, reason: &str) {
    fire!(tx_end, {
        let op = crate::wire::MsgType::TransactionEnd as u32;
        let (ident, client) = pack_who(who, op, tx_id);
        (
            serial,
            ident,
            client,
            outcome.code(),
            outcome.name().to_string(),
            reason.to_string(),
        )
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_shows_separators_and_cuts() {
        assert_eq!(render(b"a\0b\0", 100), ("a b".to_string(), false));
        assert_eq!(render(b"abcdef", 3), ("abc".to_string(), true));
        assert_eq!(render(&[0xff, b'x'], 100).0, "\u{fffd}x");
        // a replacement char never gets split, and dropping it is a cut
        assert_eq!(render(&[b'x', 0xff], 2), ("x".to_string(), true));
        assert_eq!(rendered_len(&[b'x', 0xff, 0]), 4);
        assert_eq!(rendered_len(b"a\0b\0"), 3);
    }

    #[test]
    fn split_first_argument() {
        assert_eq!(split_first(b"/a\0v"), (&b"/a"[..], &b"v"[..]));
        assert_eq!(split_first(b"T\0"), (&b"T"[..], &b""[..]));
        assert_eq!(split_first(b""), (&b""[..], &b""[..]));
    }
}
