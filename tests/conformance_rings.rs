//! The quotas that apply only to unprivileged domains, compared with C
//! xenstored 4.17 over real guest rings: tests/peer/xenstub.c maps a
//! simulated guest's page (ring/sim.rs) into C xenstored as its grant and
//! carries the guest's doorbell as its event channel (XENSTUB_RING_DIR), so
//! the same guest code drives both daemons. Each scenario is run on both
//! and what the guest and dom0 observe must be the same, CONTROL quota
//! <domid>'s usage lines (nodes, watches, transactions, outstanding,
//! memory) included.
mod common;

use common::shim::{private_dir, Shim};
use common::upstream::{Flavor, Upstream};
use std::path::Path;
use std::time::{Duration, Instant};
use xenstore_guest::boot;
use xenstore_guest::client::{Guest, Link, SocketLink, Xs};
use xenstore_proto::wire::{Header, MsgType, HEADER_LEN};

const DOMID: u16 = 6;

/// dom0's socket and the directory simulated rings live in.
struct Target<'a> {
    socket: &'a Path,
    rings: &'a Path,
}

fn dom0(t: &Target) -> Xs<SocketLink> {
    let mut x = Xs::connect(t.socket).unwrap();
    x.timeout = Duration::from_secs(10);
    x
}

fn boot(t: &Target, dom0: &mut Xs<SocketLink>) -> Guest {
    boot::boot(dom0, t.rings, DOMID, Duration::from_secs(10)).unwrap()
}

/// CONTROL quota <domid>: the domain's usage, one line per quota.
fn usage(dom0: &mut Xs<SocketLink>) -> String {
    let body = dom0
        .request(MsgType::Control, 0, format!("quota\0{DOMID}\0").as_bytes())
        .unwrap();
    String::from_utf8_lossy(&body)
        .trim_end_matches('\0')
        .to_string()
}

fn outcome<T>(r: xenstore_guest::client::Result<T>) -> String {
    match r {
        Ok(_) => "OK".to_string(),
        Err(e) => e.xs_error().map_or_else(|| e.to_string(), str::to_string),
    }
}

/// The guest sends READs of a node whose reply is 128 bytes (eight fill
/// the ring's 1 KiB exactly) and reads nothing: both daemons stop reading
/// it with 20 replies outstanding, and answer every request once it reads.
fn outstanding(t: &Target) -> Vec<String> {
    let mut dom0 = dom0(t);
    let mut guest = boot(t, &mut dom0);
    guest
        .write(0, "big", &"b".repeat(128 - HEADER_LEN))
        .unwrap();
    let one = |i: u32| {
        let mut m = Header {
            ty: MsgType::Read as u32,
            req_id: 100 + i,
            tx_id: 0,
            len: 4,
        }
        .encode()
        .to_vec();
        m.extend_from_slice(b"big\0");
        m
    };
    let stream: Vec<u8> = (0..200).flat_map(one).collect();
    let mut off = 0;
    let deadline = Instant::now() + common::TIMEOUT;
    let stalled = loop {
        assert!(Instant::now() < deadline, "never stalled");
        let n = guest.link().send(&stream[off..]).unwrap();
        off += n;
        if n == 0 {
            let u = usage(&mut dom0);
            if u.contains("outstanding     :       20") {
                break u;
            }
        }
    };
    let sent = off / one(0).len();
    let mut seen = Vec::new();
    let mut wire = Vec::new();
    while seen.len() < sent {
        assert!(
            Instant::now() < deadline,
            "{} of {sent} replies",
            seen.len()
        );
        let mut buf = [0u8; 1024];
        let n = guest.link().recv(&mut buf).unwrap();
        if n == 0 {
            guest.link().wait(Duration::from_millis(20)).unwrap();
            continue;
        }
        wire.extend_from_slice(&buf[..n]);
        while wire.len() >= HEADER_LEN {
            let h = Header::decode(wire[..HEADER_LEN].try_into().unwrap());
            let end = HEADER_LEN + h.len as usize;
            if wire.len() < end {
                break;
            }
            seen.push((h.ty, h.req_id, h.len));
            wire.drain(..end);
        }
    }
    let in_order = seen
        .iter()
        .enumerate()
        .all(|(i, r)| *r == (MsgType::Read as u32, 100 + i as u32, 112));
    let deadline = Instant::now() + common::TIMEOUT;
    let mut after = usage(&mut dom0);
    while !after.contains("outstanding     :        0") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
        after = usage(&mut dom0);
    }
    vec![
        format!("stalled:\n{stalled}"),
        format!("every request answered in order: {in_order}"),
        format!("after:\n{after}"),
    ]
}

/// The guest fills its memory quota (lowered to 1500 bytes) with nodes,
/// then meets it with a watch and a transaction's write;
/// dom0 creating a node the guest would own meets it too.
fn memory(t: &Target) -> Vec<String> {
    let mut dom0 = dom0(t);
    let mut guest = boot(t, &mut dom0);
    let mut seen = Vec::new();
    dom0.request(MsgType::Control, 0, b"quota\0set\0memory\x001500\0")
        .unwrap();
    let value = "v".repeat(100);
    let mut written = 0;
    let refused = loop {
        match guest.write(0, &format!("n{written}"), &value) {
            Ok(()) => written += 1,
            Err(e) => break outcome::<()>(Err(e)),
        }
        assert!(written < 100, "never refused");
    };
    seen.push(format!("{written} nodes written, then {refused}"));
    seen.push(usage(&mut dom0));
    guest.rm(0, "n0").unwrap();
    seen.push(format!("read n1: {}", outcome(guest.read(0, "n1"))));
    seen.push(format!(
        "watch, long token: {}",
        outcome(guest.watch("n1", &"t".repeat(200)))
    ));
    seen.push(format!("watch: {}", outcome(guest.watch("n1", "t"))));
    seen.push(usage(&mut dom0));
    // (A rewrite of an existing node past the quota is not compared: C
    // answers it with a stale errno, see DIFFERENCES.md.)
    let tx = guest.transaction_start().unwrap();
    seen.push(format!(
        "create in a transaction: {}",
        outcome(guest.write(tx, "t", &"w".repeat(300)))
    ));
    // Its copies now keep it at its quota: neither daemon reads it (its
    // commit would wait) until dom0 lifts the quota.
    seen.push(usage(&mut dom0));
    seen.push(format!(
        "dom0 creates the guest's node: {}",
        outcome(dom0.write(0, "/local/domain/6/n0", &value))
    ));
    seen.push(format!(
        "dom0 creates its own node: {}",
        outcome(dom0.write(0, "/dom0/n0", &value))
    ));
    dom0.request(MsgType::Control, 0, b"quota\0set\0memory\x00100000\0")
        .unwrap();
    seen.push(format!(
        "its commit: {}",
        outcome(guest.transaction_end(tx, true))
    ));
    seen.push(format!("raised: {}", outcome(guest.write(0, "n0", &value))));
    seen
}

/// Runs `scenario` on C xenstored and on the shim; they must agree.
fn compare(name: &str, scenario: fn(&Target) -> Vec<String>) {
    if !common::upstream::available(Flavor::C, name) {
        return;
    }
    let c_rings = private_dir("c-rings");
    let ring_env = c_rings.to_str().unwrap();
    let mut c = Upstream::start_with_env(Flavor::C, &[], &[("XENSTUB_RING_DIR", ring_env)]);
    let from_c = scenario(&Target {
        socket: &c.socket,
        rings: &c_rings,
    });
    assert!(c.alive(), "{name}: C xenstored died");
    let mut shim = Shim::start();
    let from_shim = scenario(&Target {
        socket: &shim.socket,
        rings: &shim.run_dir,
    });
    assert!(shim.alive(), "{name}: the shim died");
    for (c, s) in from_c.iter().zip(&from_shim) {
        eprintln!("{name}:\n  C:    {c:?}\n  shim: {s:?}");
    }
    assert_eq!(from_shim, from_c, "{name}: the shim differs from C");
}

#[test]
fn outstanding_quota_stalls_a_guest_as_c_xenstored_does() {
    compare("outstanding", outstanding);
}

#[test]
fn memory_quota_refuses_as_c_xenstored_does() {
    compare("memory", memory);
}
