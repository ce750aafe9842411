//! Fuzz target bodies: each takes arbitrary bytes, drives one decoder that
//! hostile input reaches, and panics only on a broken invariant. `fuzz/`
//! wraps them for libFuzzer; `tests/corpus.rs` replays the corpora.

use xenstored_probes::conn::ring::{self, Mapping, Page, RingError, PAGE_SIZE, RING_SIZE};
use xenstored_probes::conn::transport::Transport;
use xenstored_probes::conn::SpareOutput;
use xenstored_probes::daemon::direct::{Idle, NoBackend};
use xenstored_probes::daemon::quota::Quotas;
use xenstored_probes::daemon::{Daemon, Effects};
use xenstored_probes::wire::frame::InBuf;
use xenstored_probes::wire::{Header, MsgType, HEADER_LEN, PAYLOAD_MAX};

/// A target body: arbitrary bytes in, a panic only on a broken invariant.
pub type Target = fn(&[u8]);

/// The targets, by name (the directory names under fuzz/corpus/).
pub const TARGETS: &[(&str, Target)] = &[
    ("wire_stream", wire_stream),
    ("ring_page", ring_page),
    ("snoop_record", snoop_record),
    ("trace_file", trace_file),
    ("daemon_sequence", daemon_sequence),
    ("state_stream", state_stream),
    ("oxenstored_dump", oxenstored_dump),
    ("event_loop", event_loop),
];

/// A client's byte stream, delivered in chunks whose sizes the input picks:
/// every complete message is framed (daemon_sequence parses and runs them);
/// an oversized header ends the stream, as the daemon drops such a client.
pub fn wire_stream(data: &[u8]) {
    let Some((&chunk_seed, mut rest)) = data.split_first() else {
        return;
    };
    let chunk = 1 + chunk_seed as usize * 37;
    let mut buf = InBuf::default();
    while !rest.is_empty() {
        let n = chunk.min(rest.len());
        let got = buf
            .fill(|dst| {
                let n = n.min(dst.len());
                dst[..n].copy_from_slice(&rest[..n]);
                Ok(n)
            })
            .unwrap();
        rest = &rest[got..];
        loop {
            match buf.next_message() {
                Ok(Some((header, payload))) => {
                    assert_eq!(payload.len(), header.len as usize);
                    assert!(payload.len() <= PAYLOAD_MAX);
                }
                Ok(None) => break,
                Err(_) => return,
            }
        }
        assert!(buf.pending() < 2 * (HEADER_LEN + PAYLOAD_MAX));
    }
}

/// The daemon's end of a shared ring page whose every byte the guest
/// controls, and may change between any two of the daemon's steps. Input:
/// the page's seven control words (28 bytes: the four indices, features,
/// connection, error), a length byte and that many 8-byte units of request
/// queue data, then ops: a daemon read or write, a guest store to any word
/// of the page, or a reset.
pub fn ring_page(data: &[u8]) {
    const WORDS: usize = 2048; // the control words start after both queues
    let page = Mapping::anonymous().expect("mmap");
    let raw = page.ptr();
    let (words, rest) = data.split_at(data.len().min(28));
    let (queue_len, mut ops) = match rest.split_first() {
        Some((&n, tail)) => ((n as usize * 8).min(tail.len()).min(1024), tail),
        None => (0, rest),
    };
    // SAFETY: the mapping is PAGE_SIZE bytes and nothing else uses it yet;
    // the words end at 2048 + 28 and the queue data within its first 1 KiB.
    unsafe {
        std::ptr::copy_nonoverlapping(words.as_ptr(), raw.add(WORDS), words.len());
        std::ptr::copy_nonoverlapping(ops.as_ptr(), raw, queue_len);
    }
    ops = &ops[queue_len..];
    let mut server = ring::Server::new(Box::new(page));
    let mut buf = [0u8; 2 * RING_SIZE as usize];
    while let Some((&op, rest)) = ops.split_first() {
        ops = rest;
        let arg = ops.first().copied().unwrap_or(0) as usize;
        match op % 4 {
            0 => {
                let want = arg * 8 + 1;
                match server.read(&mut buf[..want]) {
                    Ok(n) => assert!(n <= want && n <= RING_SIZE as usize),
                    Err(e) => assert_eq!(server.stopped(), Some(e)),
                }
            }
            1 => {
                let bytes = vec![0x5a; arg * 8];
                match server.write(&bytes) {
                    Ok(n) => assert!(n <= bytes.len()),
                    Err(e) => assert_eq!(server.stopped(), Some(e)),
                }
            }
            2 if ops.len() >= 6 => {
                // The guest stores one word anywhere in the page.
                let offset = (u16::from_le_bytes([ops[0], ops[1]]) as usize % (PAGE_SIZE / 4)) * 4;
                let value = u32::from_le_bytes([ops[2], ops[3], ops[4], ops[5]]);
                // SAFETY: offset is 4-aligned and inside the page, which
                // lives as long as `server`; a guest writes it concurrently too.
                unsafe { std::ptr::write_volatile(raw.add(offset) as *mut u32, value) };
                ops = &ops[6..];
            }
            _ => {
                if server.stopped().is_some() || server.reconnect_requested() {
                    server.reset();
                    assert!(server.stopped().is_none());
                }
            }
        }
        if let Some(RingError::TooLong { len }) = server.stopped() {
            assert!(len as usize > PAYLOAD_MAX);
        }
    }
}

/// A raw tracepoint record, as the kernel hands the snooper, decoded with
/// the real `request` event format, and as a BPF ring-buffer record: lengths and offsets inside the record
/// are attacker-shaped in the worst case (a corrupt ring), so every one is
/// checked, never trusted.
pub fn snoop_record(data: &[u8]) {
    use std::sync::OnceLock;
    use xenstore_snoop::capture::tracefs::decode::Decoder;
    use xenstore_snoop::capture::tracefs::format::Format;
    use xenstore_snoop::event::Probe;
    static DECODER: OnceLock<Decoder> = OnceLock::new();
    let decoder = DECODER.get_or_init(|| {
        let format = Format::parse(include_str!("../../xenstore-snoop/testdata/request.format"))
            .expect("the recorded request format parses");
        Decoder::new(Probe::Request, &format).expect("decoder")
    });
    if let Ok(event) = decoder.decode(data, 0) {
        assert!(event.s1.len() <= data.len() * 3 && event.s2.len() <= data.len() * 3);
    }
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = Format::parse(text);
    }
    // The same bytes as a BPF ring-buffer record (its lengths checked too).
    if let Some(event) = xenstore_snoop::capture::bpf::decode::decode(data) {
        assert!(event.s1.len() <= data.len() * 3 && event.s2.len() <= data.len() * 3);
    }
}

/// A trace file for `xenstore-snoop -r`, replayed as text with every
/// column, as JSON, and as interval summaries of failures: any bytes are
/// replayed or refused with an error, and no more records are shown than
/// were read.
pub fn trace_file(data: &[u8]) {
    use clap::Parser;
    use std::sync::OnceLock;
    use xenstore_snoop::cli::Args;
    static ARGS: OnceLock<Vec<Args>> = OnceLock::new();
    let all = ARGS.get_or_init(|| {
        let flags: [&[&str]; 4] = [
            &["-v", "-T", "-L"],
            &["--json", "--op", "READ,WATCH_EVENT"],
            &["--summary", "--interval", "0.5", "-x"],
            &["--relative", "--duration", "1", "-c", "3", "-d", "6"],
        ];
        flags
            .iter()
            .map(|f| Args::try_parse_from([&["xenstore-snoop", "-r", "-"][..], f].concat()))
            .collect::<Result<_, _>>()
            .expect("the flags parse")
    });
    for (args, boxes) in all.iter().zip([false, true, true, false]) {
        if let Ok(done) = xenstore_snoop::replay::replay(args, data, "fuzz", std::io::sink(), boxes)
        {
            assert!(done.shown <= done.records, "{done:?}");
        }
    }
}

/// Requests of any type, well-formed or not, from two dom0 clients and
/// three guests, INTRODUCE, RELEASE and RESET_WATCHES included, run as the
/// event loop runs them. After each one the store passes CONTROL check
/// (so a commit that merged its changes into nodes others changed meanwhile
/// left every parent listing exactly its children).
///
/// Input: a series of `[conn, type, tx, len, payload…]`. conn picks one of
/// the connections (values past the last reconnect a guest, as after a
/// RELEASE and re-INTRODUCE), type is taken as is (unknown types too).
pub fn daemon_sequence(data: &[u8]) {
    let mut d = Daemon::new(Quotas::default(), Box::new(NoBackend));
    let mut conns = vec![d.open(0, idle(100)), d.open(0, idle(101))];
    for domid in 1..=3u32 {
        let id = conns[0];
        call(
            &mut d,
            id,
            MsgType::Introduce as u32,
            0,
            format!("{domid}\01\01\0").as_bytes(),
        );
        conns.push(d.open(domid, idle(0)));
    }
    let mut spare = Effects::default();
    let mut rest = data;
    while rest.len() >= 4 {
        let (&[who, ty, tx, len], tail) = rest.split_first_chunk::<4>().unwrap();
        let len = (len as usize).min(tail.len());
        let (payload, tail) = tail.split_at(len);
        rest = tail;
        let slot = who as usize % (conns.len() + 3);
        if slot >= conns.len() {
            // A guest reconnects (its old connection may be gone).
            let domid = slot as u32 - conns.len() as u32 + 1;
            conns[1 + domid as usize] = d.open(domid, idle(0));
            continue;
        }
        call(&mut d, conns[slot], ty as u32, tx as u32 % 4, payload);
        store_check(&mut d, conns[0]);
        // What the event loop would do with the effects: nothing here.
        d.swap_effects(&mut spare);
        spare.dirty.clear();
        spare.closed.clear();
        spare.attached.clear();
        spare.released.clear();
    }
}

/// CONTROL check from dom0 must answer OK: the store is consistent.
fn store_check(d: &mut Daemon, dom0: u32) {
    let (ty, reply) = call(d, dom0, MsgType::Control as u32, 0, b"check\0");
    assert_ne!(
        ty,
        MsgType::Error as u32,
        "store check failed: {}",
        String::from_utf8_lossy(&reply)
    );
}

/// Runs one request and returns the last reply queued on `id` (type and
/// payload), discarding everything else queued there.
fn call(d: &mut Daemon, id: u32, ty: u32, tx: u32, payload: &[u8]) -> (u32, Vec<u8>) {
    let header = Header {
        ty,
        req_id: 7,
        tx_id: tx,
        len: payload.len() as u32,
    };
    d.handle(id, header, payload);
    let Some(conn) = d.conn_mut(id) else {
        return (MsgType::Error as u32, Vec::new());
    };
    let mut last = (MsgType::Error as u32, Vec::new());
    let mut queued = conn.pending();
    while queued.len() >= HEADER_LEN {
        let h = Header::decode(queued[..HEADER_LEN].try_into().unwrap());
        let end = HEADER_LEN + h.len as usize;
        assert!(
            h.len as usize <= PAYLOAD_MAX,
            "reply over the payload limit"
        );
        if h.ty != MsgType::WatchEvent as u32 {
            last = (h.ty, queued[HEADER_LEN..end].to_vec());
        }
        queued = &queued[end..];
    }
    let n = conn.pending().len();
    conn.consumed(n, &mut SpareOutput::default());
    last
}

/// A client of the target's: the daemon's queues are read directly.
fn idle(pid: u32) -> Box<dyn Transport> {
    Box::new(Idle { pid, peer: "fuzz" })
}

/// A live update's state file (C xenstored's migration stream, read by the
/// shim when it is exec'd with -U): reading never panics, and what it read
/// writes out to a stream that reads back to the same records.
pub fn state_stream(data: &[u8]) {
    use xenstored_probes::migration::stream;
    let Ok(state) = stream::read(data) else {
        return;
    };
    let bytes = stream::write(&state);
    let again = stream::read(&bytes).expect("a written stream reads back");
    assert_eq!(stream::write(&again), bytes, "writing is not stable");
}

/// oxenstored's live-update dump (read by the shim exec'd with --live
/// --restart): reading never panics, and what it read writes out as a
/// migration stream that reads back.
pub fn oxenstored_dump(data: &[u8]) {
    use xenstored_probes::migration::{oxenstored, stream};
    let Ok(state) = oxenstored::read(&String::from_utf8_lossy(data)) else {
        return;
    };
    let bytes = stream::write(&state);
    stream::read(&bytes).expect("a written stream reads back");
}

/// The event loop's deterministic simulation (xenstored-probes' `sim/`)
/// with the input as its schedule: which client acts, how its bytes are
/// cut, when readiness is reported. Every request must be answered once,
/// in order, as one at a time would answer it (`sim/check.rs`).
pub fn event_loop(data: &[u8]) {
    if let Err(violation) =
        xenstored_probes::server::sim::run(xenstored_probes::server::sim::Choice::from_bytes(data))
    {
        panic!("{violation}");
    }
}
