//! Firing the `xenstore` USDT probes declared in `xenstore.d`, and the
//! classic trace file (`trace`, off unless -T) at the same points.
//!
//! This module is the only code that knows the argument packing; the daemon
//! calls these functions and nothing else. Every string is built inside the
//! probe closure, which usdt's semaphore skips while nobody is attached.

/// Who a probe is about: one connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Who {
    pub conn: u32,
    pub domid: u16,
    /// dom0 client pid (SO_PEERCRED); 0 for domain connections.
    pub pid: u32,
}

/// How a transaction ended, as `tx_end`'s `extra` argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxOutcome {
    Commit = 0,
    Abort = 1,
    Conflict = 2,
    /// The connection or domain went away with the transaction open.
    Dropped = 3,
}

impl TxOutcome {
    pub fn name(self) -> &'static str {
        match self {
            TxOutcome::Commit => "commit",
            TxOutcome::Abort => "abort",
            TxOutcome::Conflict => "conflict",
            TxOutcome::Dropped => "dropped",
        }
    }
}

/// str1 + str2 stay under this, so one event fits the kernel's per-event
/// page along with the fixed fields.
pub const STRINGS_MAX: usize = 3900;
pub const STR1_MAX: usize = 3072;
pub const FLAG_STR1_TRUNCATED: u64 = 1;
pub const FLAG_STR2_TRUNCATED: u64 = 2;

#[cfg(feature = "probes")]
mod provider {
    include!(concat!(env!("OUT_DIR"), "/xenstore.rs"));
}

/// Packs arg1 (ident) and the pid half of arg2 (see xenstore.d).
#[inline]
pub fn pack_ident(who: &Who, op: u32) -> (u64, u64) {
    let ident = (who.conn as u64) << 32 | ((op & 0xffff) as u64) << 16 | who.domid as u64;
    (ident, who.pid as u64)
}

/// The printable rendering of payload bytes: one trailing NUL dropped, the
/// other NULs shown as spaces, invalid UTF-8 replaced; cut at `max` bytes.
pub fn render(bytes: &[u8], max: usize) -> (String, bool) {
    let bytes = bytes.strip_suffix(&[0]).unwrap_or(bytes);
    let cut = bytes.len() > max;
    // NUL and space are both one ASCII byte: swapped before decoding, they
    // decode alike, and valid text needs no second copy.
    let spaced: Vec<u8> = bytes[..bytes.len().min(max)]
        .iter()
        .map(|&b| if b == 0 { b' ' } else { b })
        .collect();
    let mut s = String::from_utf8(spaced)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    (s, cut)
}

/// Splits a request payload into its first argument and the rest.
pub fn split_first(payload: &[u8]) -> (&[u8], &[u8]) {
    match payload.iter().position(|&b| b == 0) {
        Some(i) => (&payload[..i], &payload[i + 1..]),
        None => (payload, &[]),
    }
}

fn render_pair(a: &[u8], b: &[u8]) -> (String, String, u64) {
    let (s1, t1) = render(a, STR1_MAX);
    let (s2, t2) = render(b, STRINGS_MAX - s1.len());
    let flags = ((t1 as u64) * FLAG_STR1_TRUNCATED) | ((t2 as u64) * FLAG_STR2_TRUNCATED);
    (s1, s2, flags)
}

macro_rules! fire {
    ($probe:ident, $body:expr) => {{
        #[cfg(feature = "probes")]
        provider::xenstore::$probe!(|| $body);
        #[cfg(not(feature = "probes"))]
        let _ = || $body;
    }};
}

/// A request was read from a connection.
#[inline]
pub fn request(serial: u64, who: &Who, op: u32, tx_id: u32, req_id: u32, payload: &[u8]) {
    crate::trace::message(false, who.conn, op, &[payload]);
    fire!(request, {
        let (ident, pid) = pack_ident(who, op);
        let (path, rest) = split_first(payload);
        let (s1, s2, flags) = render_pair(path, rest);
        (
            serial,
            ident,
            (tx_id as u64) << 32 | pid,
            flags << 32 | req_id as u64,
            s1,
            s2,
        )
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
    fire!(response, {
        let (ident, pid) = pack_ident(who, op);
        let (errno, s1, s2, flags) = match result {
            Ok(payload) => {
                let (s1, t1) = render(payload, STRINGS_MAX);
                (0, s1, String::new(), t1 as u64)
            }
            Err((e, reason)) => {
                let (s2, t2) = render(reason.as_bytes(), STRINGS_MAX - 16);
                (
                    e.errno() as u64,
                    e.name().to_string(),
                    s2,
                    (t2 as u64) * FLAG_STR2_TRUNCATED,
                )
            }
        };
        let extra = flags << 48 | errno << 32 | req_id as u64;
        (serial, ident, (tx_id as u64) << 32 | pid, extra, s1, s2)
    });
}

/// A watch event for `who` was queued; `serial` is the request that fired
/// it (the WATCH itself for the initial event), `firer` that request's conn.
#[inline]
pub fn watch_event(serial: u64, who: &Who, firer: u32, path: &[u8], token: &[u8]) {
    let event = crate::wire::MsgType::WatchEvent as u32;
    crate::trace::message(true, who.conn, event, &[path, b"\0", token, b"\0"]);
    fire!(watch_event, {
        let (ident, pid) = pack_ident(who, crate::wire::MsgType::WatchEvent as u32);
        let (s1, s2, _) = render_pair(path, token);
        (serial, ident, pid, firer as u64, s1, s2)
    });
}

#[inline]
pub fn conn_open(who: &Who, transport: &str, peer: &str) {
    crate::trace::connection(true, who.conn);
    fire!(conn_open, {
        let (ident, pid) = pack_ident(who, 0);
        (
            0u64,
            ident,
            pid,
            0u64,
            transport.to_string(),
            peer.to_string(),
        )
    });
}

#[inline]
pub fn conn_close(serial: u64, who: &Who, reason: &str) {
    crate::trace::connection(false, who.conn);
    fire!(conn_close, {
        let (ident, pid) = pack_ident(who, 0);
        (serial, ident, pid, 0u64, reason.to_string(), String::new())
    });
}

#[inline]
pub fn tx_end(serial: u64, who: &Who, tx_id: u32, outcome: TxOutcome, reason: &str) {
    fire!(tx_end, {
        let op = crate::wire::MsgType::TransactionEnd as u32;
        let (ident, pid) = pack_ident(who, op);
        let client = (tx_id as u64) << 32 | pid;
        (
            serial,
            ident,
            client,
            outcome as u64,
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
        // a replacement char never gets split
        assert_eq!(render(&[b'x', 0xff], 2), ("x".to_string(), false));
    }

    #[test]
    fn split_first_argument() {
        assert_eq!(split_first(b"/a\0v"), (&b"/a"[..], &b"v"[..]));
        assert_eq!(split_first(b"T\0"), (&b"T"[..], &b""[..]));
        assert_eq!(split_first(b""), (&b""[..], &b""[..]));
    }
}
