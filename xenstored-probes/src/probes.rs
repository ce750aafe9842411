//! Firing the `xenstore` USDT probes declared in `xenstore.d`, and the
//! classic trace file (`trace`, off unless -T) at the same points.
//!
//! The daemon calls these functions and nothing else; the argument packing
//! itself is xenstore-proto's. Every string is built inside the
//! probe closure, which usdt's semaphore skips while nobody is attached.

pub use xenstore_proto::probe::{TxOutcome, STR1_MAX, STRINGS_MAX};
use xenstore_proto::{flag, Client, Ident, RequestExtra, ResponseExtra};

/// Who a probe is about: one connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Who {
    pub conn: u32,
    pub domid: u16,
    /// dom0 client pid (SO_PEERCRED); 0 for domain connections.
    pub pid: u32,
}

#[cfg(feature = "probes")]
mod provider {
    include!(concat!(env!("OUT_DIR"), "/xenstore.rs"));
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
fn truncated(cut: bool, bit: u16) -> u16 {
    if cut {
        bit
    } else {
        0
    }
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

fn render_pair(a: &[u8], b: &[u8]) -> (String, String, u16) {
    let (s1, t1) = render(a, STR1_MAX);
    let (s2, t2) = render(b, STRINGS_MAX - s1.len());
    let flags = truncated(t1, flag::STR1_TRUNCATED) | truncated(t2, flag::STR2_TRUNCATED);
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
        let (ident, client) = pack_who(who, op, tx_id);
        let (path, rest) = split_first(payload);
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
    fire!(response, {
        let (ident, client) = pack_who(who, op, tx_id);
        let (errno, s1, s2, flags) = match result {
            Ok(payload) => {
                let (s1, t1) = render(payload, STRINGS_MAX);
                (0, s1, String::new(), truncated(t1, flag::STR1_TRUNCATED))
            }
            Err((e, reason)) => {
                let (s2, t2) = render(reason.as_bytes(), STRINGS_MAX - 16);
                let errno = e.errno() as u16; // Linux errnos fit 16 bits
                let flags = truncated(t2, flag::STR2_TRUNCATED);
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

#[inline]
pub fn conn_open(who: &Who, transport: &str, peer: &str) {
    crate::trace::connection(true, who.conn);
    fire!(conn_open, {
        let (ident, client) = pack_who(who, 0, 0);
        (
            0u64,
            ident,
            client,
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
