//! A tight loop over the shim's probes, for the per-firing cost and the
//! zero-loss event rate. Commands on stdin, one a line, answers on stdout:
//!   every                fires each probe once (and keeps every probe's
//!                        site live, so tracers that attach them all find
//!                        them all)
//!   mark                 fires one request/response pair on path
//!                        /bench/attach-marker (tells a tracer is attached)
//!   run SECONDS RATE [THREADS]
//!                        fires request/response pairs for SECONDS at RATE
//!                        events/s in all (0 = as fast as possible) from
//!                        THREADS threads (default 1), then answers
//!                        `done EVENTS ELAPSED_NS`
use std::io::{BufRead, Write};
use std::time::{Duration, Instant};
use xenstore_proto::wire::MsgType;
use xenstored_probes::probes::{self, Who};

const READ: u32 = MsgType::Read as u32;

fn pair(serial: u64, who: &Who, path: &[u8]) {
    probes::request(serial, || *who, READ, 0, serial as u32, path);
    probes::response(serial, || *who, READ, 0, serial as u32, Ok(b"3\0"));
}

/// Fires pairs for `secs` at `rate` events/s (0: unpaced); events fired and ns taken.
fn run(who: &Who, serial: &mut u64, secs: f64, rate: f64) -> (u64, u128) {
    let path = b"/local/domain/7/device/vbd/51712/state\0";
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(secs);
    let mut events = 0u64;
    loop {
        for _ in 0..32 {
            *serial += 1;
            pair(*serial, who, path);
        }
        events += 64;
        let now = Instant::now();
        if now >= end {
            return (events, (now - start).as_nanos());
        }
        if rate > 0.0 {
            // Pace: wait until the clock catches up with the events fired.
            let due = start + Duration::from_secs_f64(events as f64 / rate);
            while Instant::now() < due.min(end) {
                std::hint::spin_loop();
            }
        }
    }
}

fn main() {
    let who = Who {
        conn: 1,
        domid: 7,
        pid: std::process::id(),
    };
    let mut serial = 0u64;
    let stdout = std::io::stdout();
    for line in std::io::stdin().lock().lines() {
        let line = line.expect("read stdin");
        let words: Vec<&str> = line.split_whitespace().collect();
        let mut out = stdout.lock();
        match words.as_slice() {
            ["every"] => {
                serial += 1;
                pair(serial, &who, b"/bench/every\0");
                probes::watch_event(serial, &who, who.conn, b"/bench/every", b"token");
                probes::conn_open(&who, "socket", || "probe-loop".to_string());
                probes::tx_end(serial, &who, 1, probes::TxOutcome::Abort, "");
                probes::conn_close(serial, &who, "probe-loop");
                let mut in_flight = probes::InFlight::default();
                in_flight.start(serial, b"/bench/every\0");
                probes::reply(&in_flight, serial, || who, READ, 0, 0, Ok(b"3\0"));
                writeln!(out, "ok").unwrap();
            }
            ["mark"] => {
                serial += 1;
                pair(serial, &who, b"/bench/attach-marker\0");
                writeln!(out, "ok").unwrap();
            }
            ["run", secs, rate, rest @ ..] => {
                let secs: f64 = secs.parse().expect("SECONDS");
                let rate: f64 = rate.parse().expect("RATE");
                let threads: u64 = rest.first().map_or(1, |t| t.parse().expect("THREADS"));
                let (events, ns) = std::thread::scope(|scope| {
                    let runs: Vec<_> = (0..threads)
                        .map(|t| {
                            // Each thread its own serial range, as the daemon's would be unique.
                            let mut serial = serial + (t << 40);
                            scope.spawn(move || run(&who, &mut serial, secs, rate / threads as f64))
                        })
                        .collect();
                    runs.into_iter()
                        .map(|r| r.join().unwrap())
                        .fold((0, 0), |(e, n), (e1, n1)| (e + e1, n.max(n1)))
                });
                serial += events;
                writeln!(out, "done {events} {ns}").unwrap();
            }
            _ => writeln!(out, "error: unknown command {line:?}").unwrap(),
        }
        out.flush().unwrap();
    }
}
