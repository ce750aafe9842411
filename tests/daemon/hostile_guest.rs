//! Hostile guests, one test per class of upstream xenstored security
//! advisory that applies to a xenstore daemon: a real xenstored-shim,
//! simulated guests over the ring protocol, dom0 on the socket. In each, a
//! hostile guest does its worst while dom0 and a well-behaved guest keep
//! getting answers (every request has a deadline: `Xs::timeout`), and the
//! daemon's memory stays bounded: its VmRSS grows by less than
//! `RSS_GROWTH_BOUND`, and the guest's own usage (CONTROL quota <domid>)
//! stays under its hard memory quota (2.5 MiB by default).

use crate::common::shim::Shim;
use crate::common::{wait_for, xs_error};
use std::time::{Duration, Instant};
use xenstore_guest::boot;
use xenstore_guest::client::{Guest, Link, SocketLink, Xs};
use xenstore_guest::sim::SimGuest;
use xenstore_proto::wire::{Header, MsgType, PAYLOAD_MAX};
use xenstored_probes::conn::ring::{ERROR_NONE, ERROR_PROTO};

/// The default hard memory quota (quota.rs, as C xenstored 4.17).
const MEMORY_QUOTA: usize = 2 * 1024 * 1024 + 512 * 1024;
/// How much the daemon's resident memory may grow during one attack: the
/// hostile guest's memory quota, twice over for allocator slack and the
/// well-behaved clients' own use.
const RSS_GROWTH_BOUND: u64 = 2 * MEMORY_QUOTA as u64 + (4 << 20);
const HOSTILE: u16 = 6;
const GOOD: u16 = 7;

struct Host {
    shim: Shim,
    dom0: Xs<SocketLink>,
    good: Guest,
    rss_before: u64,
}

fn boot(shim: &Shim, dom0: &mut Xs<SocketLink>, domid: u16) -> Guest {
    boot::boot(dom0, &shim.run_dir, domid, Duration::from_secs(10)).unwrap()
}

/// A shim with the well-behaved guest running, and its RSS noted.
fn host(args: &[&str]) -> Host {
    let shim = Shim::start_with(args);
    let mut dom0 = Xs::connect(&shim.socket).unwrap();
    dom0.timeout = Duration::from_secs(10);
    let mut good = boot(&shim, &mut dom0, GOOD);
    good.write(0, "data/warm", "up").unwrap();
    let rss_before = status_kib(shim.pid(), "VmRSS:");
    Host {
        shim,
        dom0,
        good,
        rss_before,
    }
}

/// A field of /proc/<pid>/status, in KiB.
fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with(field)).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

impl Host {
    /// dom0 and the well-behaved guest are answered (each request within
    /// its timeout), their writes land and their watches fire.
    fn others_are_served(&mut self, round: u32) {
        let value = format!("round {round}");
        self.dom0.write(0, "/tool/service", &value).unwrap();
        assert_eq!(self.dom0.read(0, "/tool/service").unwrap(), value);
        self.good.write(0, "data/service", &value).unwrap();
        assert_eq!(self.good.read(0, "data/service").unwrap(), value);
        assert_eq!(
            self.dom0.read(0, "/local/domain/7/data/service").unwrap(),
            value
        );
    }

    /// What CONTROL quota <domid> says `domid` uses of `name`.
    fn usage(&mut self, domid: u16, name: &str) -> usize {
        let text = self
            .dom0
            .request(MsgType::Control, 0, format!("quota\0{domid}\0").as_bytes())
            .unwrap();
        let text = String::from_utf8_lossy(&text).into_owned();
        let line = text.lines().find(|l| l.starts_with(name)).unwrap();
        line.split(':').nth(1).unwrap().trim().parse().unwrap()
    }

    /// The daemon is alive, its store consistent, and its RSS grew by less
    /// than the bound.
    fn bounded(&mut self, what: &str) {
        assert!(self.shim.alive(), "{what}: the shim died");
        let check = self.dom0.request(MsgType::Control, 0, b"check\0").unwrap();
        assert_eq!(check, b"OK\0");
        let rss = status_kib(self.shim.pid(), "VmRSS:");
        let grown = rss.saturating_sub(self.rss_before) * 1024;
        eprintln!(
            "{what}: VmRSS {} KiB -> {rss} KiB (+{} KiB, bound {} KiB)",
            self.rss_before,
            grown / 1024,
            RSS_GROWTH_BOUND / 1024
        );
        assert!(grown < RSS_GROWTH_BOUND, "{what}: RSS grew {grown} bytes");
    }
}

fn message(ty: MsgType, req_id: u32, payload: &[u8]) -> Vec<u8> {
    xenstore_proto::frame::message(ty as u32, req_id, 0, payload)
}

/// XSA-326 class (a guest that never reads its ring): the hostile guest
/// sends requests for a 2 KiB node and never reads a reply. As in C
/// xenstored, once 20 of its requests are outstanding it is not read from
/// (its ring fills and stays full); the replies queued for it stay at 20.
/// When it finally reads, every request is answered, none lost.
#[test]
fn a_guest_that_never_reads_its_ring_is_stalled_at_its_outstanding_quota() {
    let mut host = host(&[]);
    let mut hostile = boot(&host.shim, &mut host.dom0, HOSTILE);
    hostile.write(0, "big", &"x".repeat(2000)).unwrap();
    let stream: Vec<u8> = (0..500)
        .flat_map(|i| message(MsgType::Read, 1000 + i, b"big\0"))
        .collect();
    let mut off = 0;
    let deadline = Instant::now() + crate::common::TIMEOUT;
    loop {
        assert!(Instant::now() < deadline, "never stalled: {off} bytes sent");
        let n = hostile.link().send(&stream[off..]).unwrap();
        off += n;
        // The ring is full: stalled once its quota is outstanding.
        if n == 0 && host.usage(HOSTILE, "outstanding") == 20 {
            break;
        }
    }
    let sent = (off / message(MsgType::Read, 0, b"big\0").len()) as u32;
    assert!(sent > 20, "{sent}");
    for round in 0..20 {
        host.others_are_served(round);
        assert_eq!(host.usage(HOSTILE, "outstanding"), 20);
    }
    let memory = host.usage(HOSTILE, "memory");
    assert!(memory < MEMORY_QUOTA, "{memory}");
    host.bounded("stalled reader");

    // It reads at last: everything it sent is answered, in order.
    let mut got = 0u32;
    let mut wire = Vec::new();
    let deadline = Instant::now() + crate::common::TIMEOUT;
    while got < sent {
        assert!(Instant::now() < deadline, "{got} of {sent} replies");
        let mut buf = [0u8; 4096];
        let n = hostile.link().recv(&mut buf).unwrap();
        if n == 0 {
            hostile.link().wait(Duration::from_millis(50)).unwrap();
            continue;
        }
        wire.extend_from_slice(&buf[..n]);
        while wire.len() >= 16 {
            let h = Header::decode(wire[..16].try_into().unwrap());
            let end = 16 + h.len as usize;
            if wire.len() < end {
                break;
            }
            assert_eq!((h.ty, h.req_id), (MsgType::Read as u32, 1000 + got));
            assert_eq!(end - 16, 2000);
            wire.drain(..end);
            got += 1;
        }
    }
    wait_for("outstanding back to 0", crate::common::TIMEOUT, || {
        host.usage(HOSTILE, "outstanding") == 0
    });
    host.others_are_served(99);
}

/// XSA-115 class (watch and watch-event floods): the hostile guest sets as
/// many watches as its quota allows (128; the 129th is refused E2BIG), each
/// with a long token, and never reads; dom0 changes the watched node 300
/// times, each change worth 128 events of about 1 KiB. The events queued
/// for the guest stop at its memory quota (the rest are dropped, as C
/// xenstored drops them), and dom0 is never held up.
#[test]
fn a_watch_event_flood_stops_at_the_receivers_memory_quota() {
    let mut host = host(&[]);
    let mut hostile = boot(&host.shim, &mut host.dom0, HOSTILE);
    hostile.write(0, "flood", "0").unwrap();
    let token = |i: usize| format!("{i:04}{}", "t".repeat(1000));
    for i in 0..128 {
        hostile.watch("flood", &token(i)).unwrap();
    }
    assert_eq!(xs_error(hostile.watch("flood", &token(128))), "E2BIG");
    // the initial events of its watches: it reads those, then stops
    let mut initial = 0;
    while hostile
        .next_event(Duration::from_millis(200))
        .unwrap()
        .is_some()
    {
        initial += 1;
    }
    assert_eq!(initial, 128);
    for i in 0..300 {
        host.dom0
            .write(0, "/local/domain/6/flood", &i.to_string())
            .unwrap();
        if i % 50 == 0 {
            host.others_are_served(i);
        }
    }
    let memory = host.usage(HOSTILE, "memory");
    assert!(memory < MEMORY_QUOTA, "{memory}");
    assert!(
        memory > MEMORY_QUOTA - 64 * 1024,
        "events filled it: {memory}"
    );
    host.others_are_served(1000);
    host.bounded("event flood");
    // It is served again once it reads: what fitted, then new events.
    let mut queued = 0;
    while hostile
        .next_event(Duration::from_millis(500))
        .unwrap()
        .is_some()
    {
        queued += 1;
    }
    let left = host.usage(HOSTILE, "memory");
    assert!(
        (2000..38400).contains(&queued),
        "{queued} events, {left} bytes left"
    );
    host.dom0.write(0, "/local/domain/6/flood", "last").unwrap();
    let ev = hostile.next_event(Duration::from_secs(5)).unwrap().unwrap();
    assert_eq!(ev.path, "flood");
}

/// XSA-326 class (node and memory quota exhaustion): the hostile guest
/// writes 2 KiB nodes until it is refused. With the node quota raised
/// above what fits, its memory quota stops it (EIO, reason quota:memory,
/// as C xenstored answers); the other guest still writes its own nodes.
#[test]
fn node_and_memory_exhaustion_leave_others_their_share() {
    let mut host = host(&["--quota", "nodes=5000"]);
    let mut hostile = boot(&host.shim, &mut host.dom0, HOSTILE);
    hostile.write(0, "small", "s").unwrap();
    let value = "v".repeat(1900);
    let mut written = 0;
    let refusal = loop {
        // a hundred to a directory: its child list stays under node-size
        let path = format!("n{}/{}", written / 100, written % 100);
        match hostile.write(0, &path, &value) {
            Ok(()) => written += 1,
            Err(e) => break e.xs_error().expect("an XS_ERROR").to_string(),
        }
        assert!(written < 5000, "never refused");
    };
    assert_eq!(refusal, "EIO");
    assert!((1000..1400).contains(&written), "{written} nodes");
    let memory = host.usage(HOSTILE, "memory");
    assert!(memory < MEMORY_QUOTA, "{memory}");
    // still served, but a reply that would pass its quota is refused
    assert_eq!(xs_error(hostile.read(0, "n0/0")), "ENOMEM");
    assert_eq!(hostile.read(0, "small").unwrap(), "s");
    for i in 0..100 {
        host.good
            .write(0, &format!("data/mine{i}"), &value)
            .unwrap();
    }
    host.others_are_served(0);
    host.bounded("memory exhaustion");
    // freeing some lets it write again
    hostile.rm(0, "n0/0").unwrap();
    hostile.write(0, "n0/again", &value).unwrap();
}

/// XSA-326 class (transactions holding memory): the hostile guest opens
/// as many transactions as allowed (10; the 11th is refused ENOSPC) and
/// fills each with 2 KiB writes it never commits. Their copies count
/// against its memory quota, so together they stop under it.
#[test]
fn transactions_cannot_hold_more_than_the_memory_quota() {
    let mut host = host(&[]);
    let mut hostile = boot(&host.shim, &mut host.dom0, HOSTILE);
    let value = "t".repeat(1900);
    let mut held = 0;
    for t in 0..10 {
        let tx = hostile.transaction_start().unwrap();
        for i in 0..200 {
            match hostile.write(tx, &format!("tx{t}/{i}"), &value) {
                Ok(()) => held += 1,
                Err(e) => {
                    assert_eq!(e.xs_error(), Some("EIO"), "{e}");
                    break;
                }
            }
        }
    }
    assert_eq!(
        xs_error(hostile.transaction_start()),
        "ENOSPC",
        "the transactions quota"
    );
    assert!((1000..1400).contains(&held), "{held} writes held");
    assert_eq!(host.usage(HOSTILE, "transactions"), 10);
    let memory = host.usage(HOSTILE, "memory");
    assert!(memory < MEMORY_QUOTA, "{memory}");
    host.others_are_served(0);
    host.bounded("transactions");
}

/// XSA-322 (permissions inherited by a reused domid): dom0 lets domain 6
/// read a node; domain 6 is released and a new domain gets domid 6. The
/// newcomer may not read the node, and nothing the old domain owned is
/// left for it.
#[test]
fn a_reused_domid_inherits_no_permissions() {
    let mut host = host(&[]);
    let mut old = boot(&host.shim, &mut host.dom0, HOSTILE);
    host.dom0.write(0, "/vm/secret", "for 6 only").unwrap();
    host.dom0.set_perms(0, "/vm/secret", &["n0", "r6"]).unwrap();
    assert_eq!(old.read(0, "/vm/secret").unwrap(), "for 6 only");
    old.write(0, "data/mine", "old 6's").unwrap();
    drop(old);
    host.dom0.release(HOSTILE).unwrap();
    SimGuest::destroy(&host.shim.run_dir, HOSTILE).unwrap();
    host.dom0.rm(0, "/local/domain/6").unwrap_or(());

    let mut new = boot(&host.shim, &mut host.dom0, HOSTILE);
    assert_eq!(xs_error(new.read(0, "/vm/secret")), "EACCES");
    assert_eq!(xs_error(new.read(0, "data/mine")), "ENOENT");
    host.others_are_served(0);
    host.bounded("domid reuse");
}

/// Oversized and garbage messages (the class of XSA-326's input checks):
/// the hostile guest sends unknown types, paths without their NUL, huge
/// and bogus arguments, then a header announcing more than 4096 bytes.
/// Each garbage request is answered with an error; the oversized one
/// stops its ring (ERROR_PROTO) and nobody else's.
#[test]
fn garbage_and_oversized_messages_cost_only_their_sender() {
    let mut host = host(&[]);
    let mut hostile = boot(&host.shim, &mut host.dom0, HOSTILE);
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut random = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for i in 0..300u32 {
        let len = (random() % 600) as usize;
        let payload: Vec<u8> = (0..len).map(|_| random() as u8).collect();
        let ty = match i % 4 {
            0 => 1000 + (random() % 100_000) as u32,
            1 => MsgType::Write as u32,
            2 => MsgType::SetPerms as u32,
            _ => (random() % 32) as u32,
        };
        let r = hostile.request_raw(ty, 0, &payload);
        assert!(
            r.is_ok() || r.as_ref().unwrap_err().xs_error().is_some(),
            "{r:?}"
        );
    }
    assert_eq!(hostile.link().ring().error(), ERROR_NONE);
    host.others_are_served(0);
    let header = Header {
        ty: MsgType::Write as u32,
        req_id: 1,
        tx_id: 0,
        len: PAYLOAD_MAX as u32 + 1,
    };
    hostile.send_raw(&header.encode()).unwrap();
    wait_for("the error field", crate::common::TIMEOUT, || {
        hostile.link().ring().error() == ERROR_PROTO
    });
    host.others_are_served(1);
    host.bounded("garbage");
}
