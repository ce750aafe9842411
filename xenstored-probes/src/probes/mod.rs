//! Firing the `xenstore` USDT probes declared in `xenstore.d`, and the
//! classic trace file (`trace`, off unless -T) at the same points.
//!
//! The daemon calls these functions and nothing else; the argument packing
//! itself is xenstore-proto's, the probe sites sdt.rs's. Every argument is
//! built only after the probe's semaphore says a tracer is attached.

// With the probes off, no site is compiled and nothing here is used.
#[cfg_attr(not(feature = "probes"), allow(dead_code))]
pub(crate) mod sdt;
pub(crate) mod stats_batch;
pub(crate) mod stopwatch;
pub mod trace_file;

use self::stats_batch::{StatsKind, StatsRecord};
use self::stopwatch::Stamp;
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

#[cfg(feature = "probes")]
use crate::probes::sdt::semaphore;

#[cfg(feature = "probes")]
thread_local! {
    /// Where the probes render their strings, kept across firings: no
    /// allocation a probe.
    static STRINGS: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Whether a tracer is attached to `reply` now.
#[inline]
fn reply_enabled() -> bool {
    #[cfg(feature = "probes")]
    return semaphore::reply.enabled();
    #[cfg(not(feature = "probes"))]
    false
}

/// Whether a tracer is attached to `reply_stats` now.
#[inline]
fn reply_stats_enabled() -> bool {
    #[cfg(feature = "probes")]
    return semaphore::reply_stats.enabled();
    #[cfg(not(feature = "probes"))]
    false
}

/// `reply_stats`'s str1: the error names as static C strings, in
/// XsError's order (a test checks them), so that probe renders nothing.
#[cfg(any(feature = "probes", test))]
const ERROR_NAMES: [&std::ffi::CStr; 16] = [
    c"EINVAL",
    c"EACCES",
    c"EEXIST",
    c"EISDIR",
    c"ENOENT",
    c"ENOMEM",
    c"ENOSPC",
    c"EIO",
    c"ENOTEMPTY",
    c"ENOSYS",
    c"EROFS",
    c"EBUSY",
    c"EAGAIN",
    c"EISCONN",
    c"E2BIG",
    c"EPERM",
];

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

/// Appends the printable rendering of payload bytes and a NUL to `out` (a
/// buffer kept across firings): one trailing NUL dropped, the other NULs
/// shown as spaces, invalid UTF-8 replaced; cut at `max` bytes. Its length
/// without the NUL, and whether it was cut.
fn render_into(out: &mut Vec<u8>, bytes: &[u8], max: usize) -> (usize, bool) {
    let bytes = bytes.strip_suffix(&[0]).unwrap_or(bytes);
    let mut cut = bytes.len() > max;
    let start = out.len();
    let kept = &bytes[..bytes.len().min(max)];
    // ASCII without NULs, nearly every string, is copied as it is: one
    // check over all bytes (no early exit, so it vectorizes) and one copy.
    if kept
        .iter()
        .fold(true, |plain, &b| plain & (b.wrapping_sub(1) < 0x7f))
    {
        out.extend_from_slice(kept);
        out.push(0);
        return (kept.len(), cut);
    }
    // NUL and space are both one ASCII byte: swapped before decoding, they
    // decode alike, and valid text needs no second copy.
    out.extend(kept.iter().map(|&b| if b == 0 { b' ' } else { b }));
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

/// The byte length of the uncut rendering: what a cut string had in full.
pub fn rendered_len(bytes: &[u8]) -> u32 {
    let bytes = bytes.strip_suffix(&[0]).unwrap_or(bytes);
    let len = match std::str::from_utf8(bytes) {
        Ok(_) => bytes.len(),
        Err(_) => String::from_utf8_lossy(bytes).len(),
    };
    len.try_into().unwrap_or(u32::MAX)
}

/// Renders `a` and `b` into `strings` as str1 and str2; their cut flags.
fn render_pair(strings: &mut Vec<u8>, a: &[u8], b: &[u8]) -> u16 {
    let (n1, t1) = render_into(strings, a, STR1_MAX);
    let (_, t2) = render_into(strings, b, STRINGS_MAX - n1);
    cut_flag(t1, flag::STR1_TRUNCATED) | cut_flag(t2, flag::STR2_TRUNCATED)
}

/// Fires one of the six-argument probes: `$body` renders str1 and then
/// str2 into `$strings` (empty, kept across firings) and gives (serial,
/// ident, client, extra). It runs only while a tracer is attached.
macro_rules! fire {
    ($probe:ident, |$strings:ident| $body:expr) => {{
        #[cfg(feature = "probes")]
        if semaphore::$probe.enabled() {
            STRINGS.with(|cell| {
                // Never nested; were it, the firing is lost, not the daemon.
                let Ok(mut $strings) = cell.try_borrow_mut() else {
                    return;
                };
                $strings.clear();
                let (serial, ident, client, extra): (u64, u64, u64, u64) = $body;
                debug_assert_eq!($strings.iter().filter(|&&b| b == 0).count(), 2);
                // Renderings hold no NUL: the first ends str1.
                let n1 = $strings.iter().position(|&b| b == 0).unwrap_or(0);
                let s1 = $strings.as_ptr();
                let s2 = $strings[n1 + 1..].as_ptr();
                crate::sdt_site!(
                    xenstore,
                    $probe,
                    semaphore::$probe,
                    [
                        "rdi" = serial,
                        "rsi" = ident,
                        "rdx" = client,
                        "rcx" = extra,
                        "r8" = s1,
                        "r9" = s2,
                    ]
                );
            });
        }
        #[cfg(not(feature = "probes"))]
        let _ = |mut $strings: std::cell::RefMut<'_, Vec<u8>>| $body;
    }};
}

/// Whether a tracer is attached to any of these probes now: all an idle
/// probe point costs (a load and a branch each). What firing takes is out
/// of line (`#[cold]`), so it changes nothing the compiler inlines around
/// the daemon's hot path: the probes-out build's code, give or take these.
macro_rules! traced {
    ($($probe:ident),+) => {{
        #[cfg(feature = "probes")]
        let on = false $(|| semaphore::$probe.enabled())+;
        #[cfg(not(feature = "probes"))]
        let on = false;
        on
    }};
}

/// Whether strings of these raw lengths may be cut (rendering can at most
/// triple a length): only then is `truncated` fired (while it is traced).
fn may_cut(str1: usize, str2: usize) -> bool {
    str1 * 3 > STR1_MAX || (str1 + str2) * 3 > STRINGS_MAX
}

/// Fires `truncated` before probe `cut_probe`, whose strings (`strs`:
/// str1, str2 and str3 as it has them) may be cut: their uncut lengths.
#[inline]
fn truncated(serial: u64, ident: u64, client: u64, cut_probe: &str, strs: [&[u8]; 3]) {
    fire!(truncated, |strings| {
        let lengths = CutExtra {
            str1_len: rendered_len(strs[0]),
            str2_len: rendered_len(strs[1]),
            str3_len: rendered_len(strs[2]),
        };
        render_pair(&mut strings, cut_probe.as_bytes(), b"");
        (serial, ident, client, lengths.pack())
    });
}

/// A request was read from a connection. `who` (as for [`response`] and
/// [`reply`]) is called only when the trace file or a probe needs it: an
/// idle probe builds nothing.
#[inline]
pub fn request(
    serial: u64,
    who: impl Fn() -> Who,
    op: u32,
    tx_id: u32,
    req_id: u32,
    payload: &[u8],
) {
    crate::probes::trace_file::message(false, who().conn, op, &[payload]);
    if traced!(request, truncated) {
        fire_request(serial, &who(), op, tx_id, req_id, payload);
    }
}

#[cold]
#[inline(never)]
fn fire_request(serial: u64, who: &Who, op: u32, tx_id: u32, req_id: u32, payload: &[u8]) {
    let (path, rest) = split_first(payload);
    if may_cut(path.len(), rest.len()) {
        let (ident, client) = pack_who(who, op, tx_id);
        truncated(serial, ident, client, "request", [path, rest, &[]]);
    }
    fire!(request, |strings| {
        let (ident, client) = pack_who(who, op, tx_id);
        let flags = render_pair(&mut strings, path, rest);
        let extra = RequestExtra {
            flags: flags.into(),
            req_id,
        };
        (serial, ident, client, extra.pack())
    });
}

/// The reply to request `serial` was queued. `Err` carries the error and
/// a reason such as "quota:nodes" or "perm" ("" when there is none).
#[inline]
pub fn response(
    serial: u64,
    who: impl Fn() -> Who,
    op: u32,
    tx_id: u32,
    req_id: u32,
    result: Result<&[u8], (crate::wire::XsError, &str)>,
) {
    match result {
        Ok(payload) => crate::probes::trace_file::message(true, who().conn, op, &[payload]),
        Err((e, _)) => crate::probes::trace_file::message(
            true,
            who().conn,
            crate::wire::MsgType::Error as u32,
            &[e.name().as_bytes(), b"\0"],
        ),
    }
    if traced!(response, truncated) {
        fire_response(serial, &who(), op, tx_id, req_id, result);
    }
}

#[cold]
#[inline(never)]
fn fire_response(
    serial: u64,
    who: &Who,
    op: u32,
    tx_id: u32,
    req_id: u32,
    result: Result<&[u8], (crate::wire::XsError, &str)>,
) {
    if let Ok(payload) = result {
        if may_cut(payload.len(), 0) {
            let (ident, client) = pack_who(who, op, tx_id);
            truncated(serial, ident, client, "response", [payload, &[], &[]]);
        }
    }
    fire!(response, |strings| {
        let (ident, client) = pack_who(who, op, tx_id);
        let (errno, flags) = match result {
            Ok(payload) => {
                let (_, t1) = render_into(&mut strings, payload, STRINGS_MAX);
                render_into(&mut strings, b"", 0);
                (0, cut_flag(t1, flag::STR1_TRUNCATED))
            }
            Err((e, reason)) => {
                let (n1, _) = render_into(&mut strings, e.name().as_bytes(), STR1_MAX);
                let reason = reason.as_bytes();
                let (_, t2) = render_into(&mut strings, reason, STRINGS_MAX - n1);
                let errno = e.errno() as u16; // Linux errnos fit 16 bits
                (errno, cut_flag(t2, flag::STR2_TRUNCATED))
            }
        };
        let extra = ResponseExtra {
            flags,
            errno,
            req_id,
        };
        (serial, ident, client, extra.pack())
    });
}

/// What `reply` needs of the request being executed, kept from its decode
/// while a tracer is attached to `reply` (and only then: idle, it costs
/// a few loads and branches a request); `reply_stats` and `stats_batch`
/// need only the time.
#[derive(Default)]
pub struct InFlight {
    /// The request kept (0: none; serials start at 1).
    serial: u64,
    /// When it was decoded.
    decoded: Stamp,
    /// Whether `payload` is the request's (`reply` was traced at its decode).
    payload_kept: bool,
    payload: Vec<u8>,
}

impl InFlight {
    /// Request `serial` was decoded with `payload`.
    #[inline]
    pub fn start(&mut self, serial: u64, payload: &[u8]) {
        if traced!(reply, reply_stats, stats_batch) {
            self.keep(serial, payload);
        }
    }

    #[cold]
    #[inline(never)]
    fn keep(&mut self, serial: u64, payload: &[u8]) {
        let full = reply_enabled();
        self.serial = serial;
        self.decoded = stopwatch::now();
        self.payload.clear();
        self.payload_kept = full;
        if full {
            self.payload.extend_from_slice(payload);
        }
    }
}

/// A `stats_batch` record of `kind` for `who`, the rest zero.
fn stats_record(who: &Who, kind: StatsKind) -> StatsRecord {
    StatsRecord {
        pid: who.pid,
        domid: who.domid,
        kind: kind as u8,
        ..Default::default()
    }
}

/// The reply to request `serial`, kept in `in_flight` at its decode, was
/// queued: the request and its outcome in one firing. `result` as for
/// [`response`]. Nothing fires for a request decoded before a tracer
/// attached: nothing of it was kept.
#[inline]
pub fn reply(
    in_flight: &InFlight,
    serial: u64,
    who: impl Fn() -> Who,
    op: u32,
    tx_id: u32,
    req_id: u32,
    result: Result<&[u8], (crate::wire::XsError, &str)>,
) {
    // Kept only while one of them was traced at the decode: one compare
    // instead of their semaphores, which fire_reply reads.
    if cfg!(feature = "probes") && in_flight.serial == serial {
        fire_reply(in_flight, serial, &who(), op, tx_id, req_id, result);
    }
}

#[cold]
#[inline(never)]
fn fire_reply(
    in_flight: &InFlight,
    serial: u64,
    who: &Who,
    op: u32,
    tx_id: u32,
    req_id: u32,
    result: Result<&[u8], (crate::wire::XsError, &str)>,
) {
    // Called only for the request `in_flight` kept (`reply` checked).
    // One reading of the time for every consumer of this reply.
    let elapsed_ns = if stats_batch::enabled() || reply_stats_enabled() || reply_enabled() {
        stopwatch::elapsed_ns(in_flight.decoded)
    } else {
        0
    };
    if stats_batch::enabled() {
        let errno = match result {
            Ok(_) => 0,
            Err((e, _)) => e.errno() as u16, // Linux errnos fit 16 bits
        };
        stats_batch::add(StatsRecord {
            elapsed_ns,
            op: Ident::op_of(op),
            errno,
            ..stats_record(who, StatsKind::Reply)
        });
    }
    #[cfg(feature = "probes")]
    if semaphore::reply_stats.enabled() {
        let latency_ns = elapsed_ns;
        let (ident, client) = pack_who(who, op, tx_id);
        let (errno, error_name) = match result {
            Ok(_) => (0, c""),
            Err((e, _)) => (e.errno() as u16, ERROR_NAMES[e as usize]),
        };
        let extra = ResponseExtra {
            flags: 0,
            errno,
            req_id,
        };
        crate::sdt_site!(
            xenstore,
            reply_stats,
            semaphore::reply_stats,
            [
                "rdi" = serial,
                "rsi" = ident,
                "rdx" = client,
                "rcx" = extra.pack(),
                "r8" = error_name.as_ptr(),
                "r9" = c"".as_ptr(),
                "r10" = latency_ns,
            ]
        );
    }
    #[cfg(feature = "probes")]
    if semaphore::reply.enabled() && in_flight.payload_kept {
        let latency_ns = elapsed_ns;
        let (ident, client) = pack_who(who, op, tx_id);
        let (errno, outcome) = match result {
            Ok(payload) => (0, payload),
            // Linux errnos fit 16 bits.
            Err((e, reason)) => (e.errno() as u16, reason.as_bytes()),
        };
        // The path first, the outcome next: a write's value is the one
        // to give way, a read's is the outcome.
        let (path, rest) = split_first(&in_flight.payload);
        if may_cut(path.len(), rest.len() + outcome.len()) {
            truncated(serial, ident, client, "reply", [path, rest, outcome]);
        }
        STRINGS.with(|cell| {
            let Ok(mut strings) = cell.try_borrow_mut() else {
                return;
            };
            strings.clear();
            let (n1, t1) = render_into(&mut strings, path, STR1_MAX);
            let (n3, t3) = render_into(&mut strings, outcome, STRINGS_MAX - n1);
            let (_, t2) = render_into(&mut strings, rest, STRINGS_MAX - n1 - n3);
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
        });
    }
    #[cfg(not(feature = "probes"))]
    let _ = (elapsed_ns, serial, tx_id, req_id);
}

/// A watch event for `who` was queued; `serial` is the request that fired
/// it (the WATCH itself for the initial event), `firer` that request's conn.
#[inline]
pub fn watch_event(serial: u64, who: &Who, firer: u32, path: &[u8], token: &[u8]) {
    let event = crate::wire::MsgType::WatchEvent as u32;
    crate::probes::trace_file::message(true, who.conn, event, &[path, b"\0", token, b"\0"]);
    if stats_batch::enabled() {
        stats_batch::add(stats_record(who, StatsKind::WatchEvent));
    }
    fire!(watch_event, |strings| {
        let (ident, client) = pack_who(who, crate::wire::MsgType::WatchEvent as u32, 0);
        render_pair(&mut strings, path, token);
        (serial, ident, client, firer as u64)
    });
}

/// A connection opened over a `transport` ("socket", "ring"); `peer`
/// describes the other end (a /proc read for a socket client), called
/// only while the probe is traced.
#[inline]
pub fn conn_open(who: &Who, transport: &str, peer: impl FnOnce() -> String) {
    crate::probes::trace_file::connection(true, who.conn);
    fire!(conn_open, |strings| {
        let (ident, client) = pack_who(who, 0, 0);
        render_pair(&mut strings, transport.as_bytes(), peer().as_bytes());
        (0, ident, client, 0)
    });
}

#[inline]
pub fn conn_close(serial: u64, who: &Who, reason: &str) {
    crate::probes::trace_file::connection(false, who.conn);
    fire!(conn_close, |strings| {
        let (ident, client) = pack_who(who, 0, 0);
        render_pair(&mut strings, reason.as_bytes(), b"");
        (serial, ident, client, 0)
    });
}

#[inline]
pub fn tx_end(serial: u64, who: &Who, tx_id: u32, outcome: TxOutcome, reason: &str) {
    if stats_batch::enabled() {
        stats_batch::add(StatsRecord {
            outcome: outcome.code() as u8,
            ..stats_record(who, StatsKind::TxEnd)
        });
    }
    fire!(tx_end, |strings| {
        let op = crate::wire::MsgType::TransactionEnd as u32;
        let (ident, client) = pack_who(who, op, tx_id);
        render_pair(&mut strings, outcome.name().as_bytes(), reason.as_bytes());
        (serial, ident, client, outcome.code())
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_names_are_the_wire_tables() {
        use crate::wire::XsError;
        for errno in 0..200 {
            if let Some(e) = XsError::from_errno(errno) {
                assert_eq!(ERROR_NAMES[e as usize].to_str(), Ok(e.name()));
            }
        }
    }

    fn render(bytes: &[u8], max: usize) -> (Vec<u8>, bool) {
        let mut out = b"kept".to_vec();
        let (len, cut) = render_into(&mut out, bytes, max);
        assert_eq!(out.len(), 4 + len + 1, "appended, with a NUL");
        assert_eq!(out.pop(), Some(0));
        (out.split_off(4), cut)
    }

    #[test]
    fn render_shows_separators_and_cuts() {
        assert_eq!(render(b"a\0b\0", 100), (b"a b".to_vec(), false));
        assert_eq!(render(b"abcdef", 3), (b"abc".to_vec(), true));
        assert_eq!(render(&[0xff, b'x'], 100).0, "\u{fffd}x".as_bytes());
        // a replacement char never gets split, and dropping it is a cut
        assert_eq!(render(&[b'x', 0xff], 2), (b"x".to_vec(), true));
        assert_eq!(rendered_len(&[b'x', 0xff, 0]), 4);
        assert_eq!(rendered_len(b"a\0b\0"), 3);
    }

    /// render_into as it was before its fast path: what the tracer saw.
    fn render_reference(bytes: &[u8], max: usize) -> (Vec<u8>, bool) {
        let bytes = bytes.strip_suffix(&[0]).unwrap_or(bytes);
        let mut cut = bytes.len() > max;
        let mut out: Vec<u8> = bytes[..bytes.len().min(max)]
            .iter()
            .map(|&b| if b == 0 { b' ' } else { b })
            .collect();
        if std::str::from_utf8(&out).is_err() {
            let lossy = String::from_utf8_lossy(&out).into_owned();
            let mut end = lossy.len();
            if end > max {
                cut = true;
                end = max;
                while !lossy.is_char_boundary(end) {
                    end -= 1;
                }
            }
            out = lossy.as_bytes()[..end].to_vec();
        }
        (out, cut)
    }

    #[test]
    fn render_matches_the_reference_on_every_short_string() {
        // NUL, ASCII up to the fast path's bounds, a two-byte character's
        // halves, invalid bytes.
        const ALPHABET: [u8; 7] = [0, 1, 0x7f, 0x80, 0xc3, 0xa9, 0xff];
        for len in 0..=5u32 {
            for n in 0..ALPHABET.len().pow(len) {
                let bytes: Vec<u8> = (0..len)
                    .map(|i| ALPHABET[n / ALPHABET.len().pow(i) % ALPHABET.len()])
                    .collect();
                for max in 0..=6 {
                    assert_eq!(
                        render(&bytes, max),
                        render_reference(&bytes, max),
                        "{bytes:?} {max}"
                    );
                }
            }
        }
    }

    #[test]
    fn split_first_argument() {
        assert_eq!(split_first(b"/a\0v"), (&b"/a"[..], &b"v"[..]));
        assert_eq!(split_first(b"T\0"), (&b"T"[..], &b""[..]));
        assert_eq!(split_first(b""), (&b""[..], &b""[..]));
    }
}
