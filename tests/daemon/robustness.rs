//! A client's bytes never stall or crash the shim: stalled readers, partial
//! messages, oversized lengths and garbage affect only their own connection.
use crate::common::shim::Shim;
use crate::common::wire;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;
use xenstore_proto::wire::{Header, PAYLOAD_MAX};

const READ: u32 = 2;
const WATCH: u32 = 4;
const WRITE: u32 = 11;
const WATCH_EVENT: u32 = 15;

/// A raw client; a generous read timeout turns a stall into a failure.
fn connect(shim: &Shim) -> UnixStream {
    let s = UnixStream::connect(&shim.socket).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s
}

fn send(s: &mut UnixStream, ty: u32, req_id: u32, payload: &[u8]) {
    s.write_all(&wire::message(ty, req_id, 0, payload)).unwrap();
}

/// The next message that is not a watch event: (type, req_id, payload).
fn reply(s: &mut UnixStream) -> (u32, u32, Vec<u8>) {
    let (header, body) = wire::reply(s);
    (header.ty, header.req_id, body)
}

fn alive(shim: &Shim) {
    let mut c = connect(shim);
    send(&mut c, READ, 77, b"/tool/xenstored\0");
    assert_eq!(reply(&mut c), (READ, 77, vec![]));
}

#[test]
fn a_watcher_that_never_reads_stalls_nobody() {
    let shim = Shim::start();
    let mut stalled = connect(&shim);
    send(
        &mut stalled,
        WATCH,
        1,
        b"/s\0a-token-that-makes-events-longer\0",
    );
    // Never read again: its socket buffer fills with events.
    let mut writer = connect(&shim);
    let value = [b'v'; 200];
    for i in 0..20_000u32 {
        let payload = [format!("/s/k{}\0", i % 50).as_bytes(), &value].concat();
        send(&mut writer, WRITE, i, &payload);
        assert_eq!(reply(&mut writer), (WRITE, i, b"OK\0".to_vec()));
    }
    alive(&shim);
    drop(stalled);
    alive(&shim);
}

/// The next message of any type, watch events included: (type, payload).
fn next_message(s: &mut UnixStream) -> (u32, Vec<u8>) {
    let (header, body) = xenstore_proto::frame::read_message(s, PAYLOAD_MAX)
        .expect("a message before the read timeout");
    (header.ty, body)
}

/// A socket is polled for room to write only while output waits: one that
/// backs up (more events than its socket buffer holds) and is read later
/// still gets every event, in order.
#[test]
fn a_watcher_that_reads_late_gets_every_event_in_order() {
    let shim = Shim::start();
    let mut late = connect(&shim);
    send(&mut late, WATCH, 1, b"/late\0t\0");
    assert_eq!(next_message(&mut late), (WATCH, b"OK\0".to_vec()));
    assert_eq!(
        next_message(&mut late),
        (WATCH_EVENT, b"/late\0t\0".to_vec())
    );
    let mut writer = connect(&shim);
    let writes = 20_000u32;
    for i in 0..writes {
        let payload = format!("/late/k{i}\0v");
        send(&mut writer, WRITE, i, payload.as_bytes());
        assert_eq!(reply(&mut writer), (WRITE, i, b"OK\0".to_vec()));
    }
    // ~20 bytes an event: far more than a Unix socket's buffer took.
    for i in 0..writes {
        let expected = format!("/late/k{i}\0t\0");
        assert_eq!(
            next_message(&mut late),
            (WATCH_EVENT, expected.into_bytes()),
            "event {i}"
        );
    }
    alive(&shim);
}

#[test]
fn a_partial_message_blocks_only_its_sender() {
    let shim = Shim::start();
    let mut partial = connect(&shim);
    partial.write_all(&READ.to_ne_bytes()).unwrap();
    partial.write_all(&[0u8; 6]).unwrap();
    alive(&shim);
    // The rest arrives later and is answered.
    let mut rest = Vec::new();
    rest.extend_from_slice(&[0u8; 2]);
    rest.extend_from_slice(&0u32.to_ne_bytes());
    rest.extend_from_slice(&3u32.to_ne_bytes());
    rest.extend_from_slice(b"/x\0");
    partial.write_all(&rest).unwrap();
    // Its header says len 0: a READ without a path, EINVAL (as 4.20).
    assert_eq!(reply(&mut partial), (16, 0, b"EINVAL\0".to_vec()));
}

#[test]
fn an_oversized_length_disconnects_only_that_client() {
    let shim = Shim::start();
    let mut other = connect(&shim);
    send(&mut other, WRITE, 1, b"/keep\0me");
    assert_eq!(reply(&mut other).0, WRITE);
    let mut bad = connect(&shim);
    let h = Header {
        ty: WRITE,
        req_id: 1,
        tx_id: 0,
        len: 4097,
    };
    bad.write_all(&h.encode()).unwrap();
    let mut buf = [0u8; 16];
    assert_eq!(bad.read(&mut buf).unwrap(), 0, "the daemon hung up");
    send(&mut other, READ, 2, b"/keep\0");
    assert_eq!(reply(&mut other), (READ, 2, b"me".to_vec()));
}

#[test]
fn garbage_and_unknown_types_get_errors_and_the_store_stays_whole() {
    let shim = Shim::start();
    let mut c = connect(&shim);
    for (ty, payload, expect) in [
        (99u32, &b"junk"[..], &b"ENOSYS\0"[..]),
        (20, b"", b"ENOSYS\0"),
        (WATCH_EVENT, b"/a\0t\0", b"ENOSYS\0"),
        (WRITE, b"no-nul", b"EINVAL\0"),
        (WRITE, b"/bad path\0v", b"EINVAL\0"),
        (14, b"/tool\0x9\0", b"EINVAL\0"),
    ] {
        send(&mut c, ty, 5, payload);
        assert_eq!(reply(&mut c), (16, 5, expect.to_vec()), "type {ty}");
    }
    let out = shim.run("/usr/lib/xen-4.17/bin/xenstore-control", &["check"]);
    assert_eq!(out, "OK\n");
    assert_eq!(
        shim.run("xenstore-ls", &["-f", "-p"]),
        "/tool = \"\"   (n0)\n/tool/xenstored = \"\"   (n0)\n"
    );
}

#[test]
fn concurrent_hostile_clients_leave_a_consistent_daemon() {
    let shim = Shim::start();
    let words: [&[u8]; 10] = [
        b"/",
        b"/f",
        b"/f/g",
        b"f",
        b"@releaseDomain",
        b"T",
        b"n0",
        b"b1",
        b"7",
        b"\xff",
    ];
    let threads: Vec<_> = (0..8u64)
        .map(|t| {
            let mut c = connect(&shim);
            std::thread::spawn(move || {
                let mut seed = 0x2545f4914f6cdd1d_u64 ^ (t + 1);
                let mut rnd = move || {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    seed
                };
                for i in 0..300u32 {
                    // RELEASE/RESET_WATCHES/INTRODUCE change domains: left out
                    let ty = [
                        0u32, 1, 2, 3, 4, 5, 6, 7, 10, 11, 12, 13, 14, 15, 16, 17, 20, 22, 23, 25,
                        99,
                    ][(rnd() % 21) as usize];
                    let mut payload = Vec::new();
                    for _ in 0..rnd() % 4 {
                        payload.extend_from_slice(words[(rnd() % 10) as usize]);
                        if rnd() % 4 != 0 {
                            payload.push(0);
                        }
                    }
                    let msg = wire::message(ty, i, (rnd() % 3) as u32, &payload);
                    c.write_all(&msg).unwrap();
                    let (_, req_id, _) = reply(&mut c);
                    assert_eq!(req_id, i, "replies come back in order");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    alive(&shim);
    // Walking the whole tree fails on any child listed but missing.
    let tree = shim.run("xenstore-ls", &["-f"]);
    assert!(tree.starts_with("/tool = \"\"\n"), "{tree}");
}

#[test]
fn a_client_that_hangs_up_mid_message_is_closed() {
    let shim = Shim::start();
    let sockets = || {
        std::fs::read_dir(format!("/proc/{}/fd", shim.pid()))
            .unwrap()
            .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
            .filter(|target| target.to_string_lossy().starts_with("socket:"))
            .count()
    };
    let mut clients: Vec<UnixStream> = (0..5).map(|_| connect(&shim)).collect();
    // A round trip each: the daemon has accepted all five. (Counting its
    // descriptors against an idle count raced the start: the start-up
    // probe's connection may not be closed yet.)
    for c in &mut clients {
        send(c, READ, 1, b"/tool/xenstored\0");
        assert_eq!(reply(c), (READ, 1, vec![]));
    }
    let open = sockets();
    // Stopped, the daemon sees half a header and the hang-up in one edge.
    crate::common::signal(shim.pid(), 19); // SIGSTOP
    for mut c in clients {
        c.write_all(&wire::message(READ, 1, 0, b"/x\0")[..8])
            .unwrap();
    }
    crate::common::signal(shim.pid(), 18); // SIGCONT

    // At most: the start-up probe's connection may close meanwhile too.
    crate::common::wait_for(
        "the daemon to close all five",
        crate::common::TIMEOUT,
        || sockets() <= open - 5,
    );
    alive(&shim);
}
