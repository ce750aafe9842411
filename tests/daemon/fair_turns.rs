//! The event loop's turns (xenstored-probes/src/server/fair_turns.rs) on the real
//! daemon: a client that sent one request is served before another
//! client's queued backlog drains, and each client's requests still run in
//! the order it sent them. The order is read from a watcher, which hears
//! every write in the order the daemon executed it.
use crate::common::shim::Shim;
use crate::common::wire;
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::time::Duration;
use xenstore_proto::wire::{Header, PAYLOAD_MAX};

const READ: u32 = 2;
const WATCH: u32 = 4;
const WRITE: u32 = 11;
const WATCH_EVENT: u32 = 15;
const SIGSTOP: i32 = 19;
const SIGCONT: i32 = 18;
/// The busy client's queued requests: ~36 KiB, more than the daemon reads
/// at once, less than a socket buffer holds (the writes never block).
const BACKLOG: u32 = 1000;

fn connect(shim: &Shim) -> UnixStream {
    let s = UnixStream::connect(&shim.socket).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s
}

fn write(path: &str, value: &str) -> Vec<u8> {
    wire::message(WRITE, 0, 0, format!("{path}\0{value}").as_bytes())
}

/// The next message: its header and payload.
fn next(s: &mut UnixStream) -> (Header, Vec<u8>) {
    xenstore_proto::frame::read_message(s, PAYLOAD_MAX).expect("a message within 30 s")
}

/// The path of the next watch event.
fn event(s: &mut UnixStream) -> String {
    let (h, body) = next(s);
    assert_eq!(h.ty, WATCH_EVENT, "{:?}", String::from_utf8_lossy(&body));
    let path = body.split(|&b| b == 0).next().unwrap();
    String::from_utf8(path.to_vec()).unwrap()
}

/// Registers a watch on `path` on `s`: its reply, then its first event.
fn watch(s: &mut UnixStream, path: &str) {
    s.write_all(&wire::message(
        WATCH,
        1,
        0,
        format!("{path}\0t\0").as_bytes(),
    ))
    .unwrap();
    assert_eq!(next(s).0.ty, WATCH);
    assert_eq!(event(s), path);
}

/// Stops the daemon and waits until it is stopped: whatever clients send
/// now arrives before its next poll.
fn stop(shim: &Shim) {
    crate::common::signal(shim.pid(), SIGSTOP);
    crate::common::wait_for("the daemon to stop", crate::common::TIMEOUT, || {
        stopped(shim.pid())
    });
}

fn stopped(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // the state follows the parenthesised command name
    stat.rsplit(')')
        .next()
        .unwrap()
        .trim_start()
        .starts_with('T')
}

#[test]
fn a_light_request_is_served_before_a_busy_backlog_drains() {
    let shim = Shim::start();
    let mut watcher = connect(&shim);
    watch(&mut watcher, "/order");
    let (mut busy, mut light) = (connect(&shim), connect(&shim));
    // A round trip each: both are accepted and idle.
    for (c, name) in [(&mut busy, "busy"), (&mut light, "light")] {
        c.write_all(&write(&format!("/order/{name}-ready"), ""))
            .unwrap();
        assert_eq!(next(c).0.ty, WRITE);
        assert_eq!(event(&mut watcher), format!("/order/{name}-ready"));
    }
    // And one more on the watcher: the daemon has taken every readiness
    // the two had raised (their clients reading the replies), so the next
    // poll reports them in the order their requests arrive.
    watcher
        .write_all(&wire::message(READ, 2, 0, b"/order\0"))
        .unwrap();
    assert_eq!(next(&mut watcher).0.ty, READ);

    // Both arrive while the daemon is stopped, the backlog first: busy is
    // first among the connections the next poll reports.
    stop(&shim);
    let backlog: Vec<u8> = (0..BACKLOG)
        .flat_map(|i| write(&format!("/order/busy/{i}"), "v"))
        .collect();
    busy.write_all(&backlog).unwrap();
    light.write_all(&write("/order/light", "v")).unwrap();
    crate::common::signal(shim.pid(), SIGCONT);

    let mut busy_before_light = None;
    let mut next_busy = 0;
    while next_busy < BACKLOG || busy_before_light.is_none() {
        let path = event(&mut watcher);
        if path == "/order/light" {
            busy_before_light = Some(next_busy);
            continue;
        }
        assert_eq!(path, format!("/order/busy/{next_busy}"), "busy's order");
        next_busy += 1;
    }
    let before = busy_before_light.unwrap();
    assert!(
        before < BACKLOG,
        "the light client's write ran after all {BACKLOG} of the busy client's"
    );
    // Its reply came too, and every one of the backlog's.
    assert_eq!(next(&mut light).0.ty, WRITE);
    for _ in 0..BACKLOG {
        assert_eq!(next(&mut busy).0.ty, WRITE);
    }
    eprintln!("the light write ran after {before} of {BACKLOG} queued busy writes");
}

/// Watchers of one node, more than the daemon writes to at once (the
/// event loop's FAN_OUT_AT_ONCE, 16): the rest are written over later passes.
const FAN_OUT: usize = 300;

#[test]
fn a_big_fan_out_reaches_every_watcher_in_order_with_requests_served_between() {
    let shim = Shim::start();
    let mut watchers: Vec<UnixStream> = (0..FAN_OUT).map(|_| connect(&shim)).collect();
    for w in &mut watchers {
        watch(w, "/fan");
    }
    let (mut writer, mut reader) = (connect(&shim), connect(&shim));
    reader.write_all(&write("/unrelated", "u")).unwrap();
    assert_eq!(next(&mut reader).0.ty, WRITE);
    // Two fan-outs and a read arrive in one poll: the second fan-out's
    // events queue behind the first's unwritten ones.
    stop(&shim);
    writer
        .write_all(&[write("/fan", "1"), write("/fan/child", "2")].concat())
        .unwrap();
    reader
        .write_all(&wire::message(READ, 7, 0, b"/unrelated\0"))
        .unwrap();
    crate::common::signal(shim.pid(), SIGCONT);

    let (h, value) = next(&mut reader);
    assert_eq!((h.ty, h.req_id), (READ, 7));
    assert_eq!(value, b"u");
    for _ in 0..2 {
        assert_eq!(next(&mut writer).0.ty, WRITE);
    }
    for (i, w) in watchers.iter_mut().enumerate() {
        assert_eq!(
            [event(w), event(w)],
            ["/fan", "/fan/child"],
            "watcher {i} of {FAN_OUT}"
        );
    }
    // And nothing more: one more write's event is the next message each reads.
    writer.write_all(&write("/fan", "3")).unwrap();
    assert_eq!(next(&mut writer).0.ty, WRITE);
    for (i, w) in watchers.iter_mut().enumerate() {
        assert_eq!(event(w), "/fan", "watcher {i}: no event twice");
    }
}

/// Connections busy in request-reply loops, as a boot storm's clients.
const CROWD: usize = 200;

#[test]
fn a_long_silent_client_is_served_ahead_of_a_busy_crowd() {
    let shim = Shim::start();
    let mut watcher = connect(&shim);
    watch(&mut watcher, "/crowd");
    // The quiet client has been served more turns than any of the crowd
    // ever will: it is long-lived, as a monitor reading every 10 ms.
    let mut quiet = connect(&shim);
    for i in 0..50 {
        quiet.write_all(&wire::message(READ, i, 0, b"/\0")).unwrap();
        assert_eq!(next(&mut quiet).0.ty, READ);
    }
    // Then the crowd's rounds, while it is silent.
    let mut crowd: Vec<UnixStream> = (0..CROWD).map(|_| connect(&shim)).collect();
    for round in 0..3 {
        for (i, c) in crowd.iter_mut().enumerate() {
            c.write_all(&write(&format!("/crowd/{i}/{round}"), ""))
                .unwrap();
            assert_eq!(next(c).0.ty, WRITE);
            assert_eq!(event(&mut watcher), format!("/crowd/{i}/{round}"));
        }
    }
    watcher
        .write_all(&wire::message(READ, 2, 0, b"/\0"))
        .unwrap();
    assert_eq!(next(&mut watcher).0.ty, READ);

    // Every one of the crowd asks again, and the quiet one last, in one
    // poll: it still goes first.
    stop(&shim);
    for (i, c) in crowd.iter_mut().enumerate() {
        c.write_all(&write(&format!("/crowd/{i}/again"), ""))
            .unwrap();
    }
    quiet.write_all(&write("/crowd/quiet", "")).unwrap();
    crate::common::signal(shim.pid(), SIGCONT);

    let ahead = (0..=CROWD)
        .map(|_| event(&mut watcher))
        .position(|path| path == "/crowd/quiet")
        .expect("the quiet client's write ran");
    assert_eq!(next(&mut quiet).0.ty, WRITE);
    for c in &mut crowd {
        assert_eq!(next(c).0.ty, WRITE);
    }
    eprintln!("the quiet client's write ran after {ahead} of the crowd's {CROWD}");
    assert!(
        ahead <= 8,
        "the quiet client waited for {ahead} of the crowd's {CROWD} requests"
    );
}
