//! No request left behind (issue 43), on real sockets and rings: clients
//! with several requests in flight, their bytes cut at every boundary
//! (a message a write, mid-header, mid-payload, one byte a write, seeded
//! random cuts), hundreds of connections kept open, and guests on rings
//! publishing several requests under one doorbell and under several. The
//! same script runs against the shim, C xenstored (4.17, 4.20) and
//! oxenstored: each must answer every request, once, in the order sent.
//! (The event loop's simulation, xenstored-probes' `sim/`, covers what
//! real sockets cannot force: late and coalesced readiness, short writes.)
use crate::common::shim::{private_dir, Shim};
use crate::common::upstream::{Flavor, Peer, Release, Upstream};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};
use xenstore_guest::boot;
use xenstore_guest::client::{Guest, Link, SocketLink, Xs};
use xenstore_proto::wire::{Header, MsgType, HEADER_LEN};

/// Connections kept open at once.
const CONNECTIONS: usize = 300;
const DOMID: u16 = 7;

/// How a burst's bytes are cut into writes.
#[derive(Clone, Copy, Debug)]
enum Cut {
    /// All of it in one write.
    Whole,
    /// One message a write.
    Message,
    /// Every message split inside its header.
    MidHeader,
    /// Every message split inside its payload.
    MidPayload,
    /// One byte a write.
    Byte,
    /// Cut at seeded random points.
    Random(u64),
}

const CUTS: [Cut; 6] = [
    Cut::Whole,
    Cut::Message,
    Cut::MidHeader,
    Cut::MidPayload,
    Cut::Byte,
    Cut::Random(0x9e37_79b9_7f4a_7c15),
];

fn message(ty: MsgType, req_id: u32, payload: &[u8]) -> Vec<u8> {
    crate::common::wire::message(ty as u32, req_id, 0, payload)
}

/// Connection `c`'s burst: every message type a dom0 client sends in the
/// course of its work, some failing (a failure is an answer too), all in
/// its own subtree; request ids count from `c * 1000`.
fn burst(c: usize, in_flight: usize) -> Vec<Vec<u8>> {
    let base = format!("/pipe/{c}");
    let ops: Vec<(MsgType, String)> = vec![
        (MsgType::Write, format!("{base}/a\0value-{c}")),
        (MsgType::Read, format!("{base}/a\0")),
        (MsgType::Mkdir, format!("{base}/d\0")),
        (MsgType::Directory, format!("{base}\0")),
        (MsgType::GetPerms, format!("{base}/a\0")),
        (MsgType::SetPerms, format!("{base}/a\0n0\0r{DOMID}\0")),
        (MsgType::Watch, format!("{base}/a\0tok{c}\0")),
        (MsgType::Read, format!("{base}/missing\0")),
        (MsgType::GetDomainPath, format!("{DOMID}\0")),
        (MsgType::IsDomainIntroduced, "0\0".to_string()),
        (MsgType::DirectoryPart, format!("{base}\x000\0")),
        (MsgType::Unwatch, format!("{base}/a\0tok{c}\0")),
        (MsgType::Rm, format!("{base}/d\0")),
        (MsgType::TransactionStart, "\0".to_string()),
        // With a NUL: oxenstored never answers an empty payload
        // (tests/conformance/DIFFERENCES.md).
        (MsgType::ResetWatches, "\0".to_string()),
        (MsgType::Read, "/local\0".to_string()),
    ];
    (0..in_flight)
        .map(|i| {
            let (ty, payload) = &ops[i % ops.len()];
            message(*ty, (c * 1000 + i) as u32, payload.as_bytes())
        })
        .collect()
}

/// The writes `burst` is sent in, cut as `cut` says.
fn cut_up(burst: &[Vec<u8>], cut: Cut) -> Vec<Vec<u8>> {
    let split = |m: &Vec<u8>, at: usize| vec![m[..at].to_vec(), m[at..].to_vec()];
    match cut {
        Cut::Whole => vec![burst.concat()],
        Cut::Message => burst.to_vec(),
        Cut::MidHeader => burst.iter().flat_map(|m| split(m, 7)).collect(),
        Cut::MidPayload => burst
            .iter()
            .flat_map(|m| split(m, (HEADER_LEN + 1).min(m.len())))
            .collect(),
        Cut::Byte => burst.concat().iter().map(|&b| vec![b]).collect(),
        Cut::Random(seed) => {
            let all = burst.concat();
            let mut x = seed;
            let mut out = Vec::new();
            let mut at = 0;
            while at < all.len() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let n = 1 + (x % 40) as usize;
                let end = (at + n).min(all.len());
                out.push(all[at..end].to_vec());
                at = end;
            }
            out
        }
    }
}

/// The replies (type, request id) read from `s` until `want` came, watch
/// events left out; fails on a silence past the deadline.
fn replies(s: &mut UnixStream, want: usize, deadline: Instant, what: &str) -> Vec<(u32, u32)> {
    let mut got = Vec::new();
    let mut wire = Vec::new();
    let mut buf = [0u8; 65536];
    while got.len() < want {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(
            !left.is_zero(),
            "{what}: {} of {want} replies, then nothing: {got:?}",
            got.len()
        );
        s.set_read_timeout(Some(left)).unwrap();
        let n = match s.read(&mut buf) {
            Ok(0) => panic!("{what}: the daemon closed the connection"),
            Ok(n) => n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => continue,
            Err(e) => panic!("{what}: {e}"),
        };
        wire.extend_from_slice(&buf[..n]);
        got.extend(take_messages(&mut wire));
    }
    got
}

/// The complete messages at the front of `wire` (removed), watch events
/// left out: (type, request id).
fn take_messages(wire: &mut Vec<u8>) -> Vec<(u32, u32)> {
    xenstore_proto::frame::take_messages(wire)
        .into_iter()
        .filter(|(h, _)| h.ty != MsgType::WatchEvent as u32)
        .map(|(h, _)| (h.ty, h.req_id))
        .collect()
}

/// Each request answered once, in order, with its own type or an error.
fn check_answers(what: &str, sent: &[Vec<u8>], got: &[(u32, u32)]) {
    assert_eq!(got.len(), sent.len(), "{what}: {got:?}");
    for (m, &(ty, req_id)) in sent.iter().zip(got) {
        let h = Header::decode(m[..HEADER_LEN].try_into().unwrap());
        assert_eq!(req_id, h.req_id, "{what}: replies out of order: {got:?}");
        assert!(
            ty == h.ty || ty == MsgType::Error as u32,
            "{what}: request {} (type {}) answered with type {ty}",
            h.req_id,
            h.ty
        );
    }
}

/// Hundreds of dom0 connections kept open, each with `in_flight` requests
/// cut as `cut` says. The connections write in turns (every connection's
/// first write, then every second one, ...), so their bytes interleave at
/// the daemon, and every reply is awaited only after every byte was sent.
fn dom0_burst(socket: &Path, cut: Cut, in_flight: usize, name: &str) {
    let what = format!("{name}, {cut:?}, {in_flight} in flight");
    let mut conns: Vec<UnixStream> = (0..CONNECTIONS)
        .map(|_| UnixStream::connect(socket).unwrap())
        .collect();
    let bursts: Vec<Vec<Vec<u8>>> = (0..CONNECTIONS).map(|c| burst(c, in_flight)).collect();
    let writes: Vec<Vec<Vec<u8>>> = bursts.iter().map(|b| cut_up(b, cut)).collect();
    let most = writes.iter().map(Vec::len).max().unwrap();
    for i in 0..most {
        for (s, w) in conns.iter_mut().zip(&writes) {
            if let Some(bytes) = w.get(i) {
                s.write_all(bytes).unwrap();
            }
        }
    }
    let deadline = Instant::now() + crate::common::TIMEOUT;
    for (c, s) in conns.iter_mut().enumerate() {
        let what = format!("{what}, connection {c}");
        let got = replies(s, bursts[c].len(), deadline, &what);
        check_answers(&what, &bursts[c], &got);
    }
}

/// The scenario: connections opened one after another and kept
/// open, each sending `in_flight` requests a message a write, then waiting
/// for their replies before the next connection starts.
fn one_after_another(socket: &Path, in_flight: usize, name: &str) {
    let mut kept = Vec::new();
    for c in 0..CONNECTIONS {
        let mut s = UnixStream::connect(socket).unwrap();
        let burst = burst(c, in_flight);
        for m in &burst {
            s.write_all(m).unwrap();
        }
        let what = format!("{name}, one after another, connection {c}");
        let got = replies(
            &mut s,
            burst.len(),
            Instant::now() + crate::common::TIMEOUT,
            &what,
        );
        check_answers(&what, &burst, &got);
        kept.push(s);
    }
}

/// How a guest puts a burst's messages on its ring.
type SendBurst = fn(&mut Guest, &[Vec<u8>]);

/// A guest on its ring with requests in flight: all of a burst's bytes
/// under one doorbell, then a doorbell a message, then a message cut over
/// two doorbells. The ring holds 1 KiB a direction and an unprivileged
/// domain may have 20 requests outstanding, so each round stays under both.
fn ring_bursts(dom0: &mut Xs<SocketLink>, guest: &mut Guest, name: &str) {
    dom0.write(0, &format!("/local/domain/{DOMID}/big"), "x")
        .unwrap();
    let read = |i: u32| message(MsgType::Read, i, b"big\0");
    let rounds: [(&str, SendBurst); 3] = [
        ("one doorbell", |g, msgs| send_silently(g, &msgs.concat())),
        ("a doorbell a message", |g, msgs| {
            for m in msgs {
                send_silently(g, m);
            }
        }),
        ("a message over two doorbells", |g, msgs| {
            for m in msgs {
                send_silently(g, &m[..9]);
                send_silently(g, &m[9..]);
            }
        }),
    ];
    let mut next_id = 1;
    for (how, send) in rounds {
        for _ in 0..20 {
            let msgs: Vec<Vec<u8>> = (0..16).map(|i| read(next_id + i)).collect();
            next_id += 16;
            send(guest, &msgs);
            let what = format!("{name}, ring, {how}");
            let got = ring_replies(guest, msgs.len(), &what);
            check_answers(&what, &msgs, &got);
        }
    }
}

/// Puts `bytes` on the guest's ring without ringing, then rings once, as
/// a guest that queues several requests before its doorbell.
fn send_silently(guest: &mut Guest, bytes: &[u8]) {
    let deadline = Instant::now() + crate::common::TIMEOUT;
    let mut off = 0;
    while off < bytes.len() {
        assert!(Instant::now() < deadline, "the ring never had room");
        let n = guest.link().ring().write(&bytes[off..]).unwrap();
        off += n;
        if n == 0 {
            guest.link().notify().unwrap();
            guest.link().wait(Duration::from_millis(20)).unwrap();
        }
    }
    guest.link().notify().unwrap();
}

fn ring_replies(guest: &mut Guest, want: usize, what: &str) -> Vec<(u32, u32)> {
    let got = crate::common::wire::ring_replies(guest, want, what);
    got.iter().map(|h| (h.ty, h.req_id)).collect()
}

/// The whole script against one daemon.
fn torture(socket: &Path, rings: &Path, name: &str) {
    for cut in CUTS {
        dom0_burst(socket, cut, 15, name);
    }
    dom0_burst(socket, Cut::Random(7), 20, name);
    dom0_burst(socket, Cut::Message, 2, name);
    one_after_another(socket, 15, name);
    let mut dom0 = Xs::connect(socket).unwrap();
    dom0.timeout = crate::common::TIMEOUT;
    let mut guest = boot::boot(&mut dom0, rings, DOMID, crate::common::TIMEOUT).unwrap();
    ring_bursts(&mut dom0, &mut guest, name);
}

#[test]
fn the_shim_answers_every_pipelined_request() {
    let mut shim = Shim::start();
    torture(&shim.socket, &shim.run_dir, "the shim");
    assert!(shim.alive(), "the shim died");
}

fn upstream(peer: Peer, test: &str) {
    if !crate::common::upstream::available(peer, test) {
        return;
    }
    let rings = private_dir("pipelining-rings");
    let ring_env = rings.to_str().unwrap();
    let mut daemon = Upstream::start_with_env(peer, &[], &[("XENSTUB_RING_DIR", ring_env)]);
    torture(&daemon.socket, &rings, peer.name());
    assert!(daemon.alive(), "{} died", peer.name());
}

#[test]
fn c_xenstored_answers_every_pipelined_request() {
    upstream(
        Peer::c(Release::Xen417),
        "c_xenstored_answers_every_pipelined_request",
    );
}

#[test]
fn c_xenstored_4_20_answers_every_pipelined_request() {
    upstream(
        Peer::c(Release::Xen420),
        "c_xenstored_4_20_answers_every_pipelined_request",
    );
}

#[test]
fn oxenstored_answers_every_pipelined_request() {
    upstream(
        Flavor::Ocaml.into(),
        "oxenstored_answers_every_pipelined_request",
    );
}
