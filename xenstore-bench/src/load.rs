//! Driving a daemon: N connections on N threads, each with one request
//! outstanding (a pipelined workload: several), for a fixed time; every
//! op's latency recorded.

use crate::affinity::Pin;
use crate::client::Conn;
use crate::stats::Sample;
use crate::workload::{Worker, Workload};
use anyhow::{Context, Result};
use std::path::Path;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// One client run against the daemon listening on `socket` (already seeded
/// for at least `conns` connections).
pub fn run(
    socket: &Path,
    workload: Workload,
    conns: usize,
    duration: Duration,
    pin: Pin,
) -> Result<Sample> {
    let mut opened = Vec::with_capacity(conns);
    for _ in 0..conns {
        opened.push(Conn::connect(socket)?);
    }
    let start_line = Arc::new(Barrier::new(conns + 1));
    let threads: Vec<_> = opened
        .into_iter()
        .enumerate()
        .map(|(i, mut conn)| {
            let start_line = start_line.clone();
            std::thread::spawn(move || -> Result<Vec<u32>> {
                let mut worker = Worker::new(workload, i);
                // One op before the clock starts: connection set up, caches warm.
                let mut lat = Vec::with_capacity(1 << 16);
                let ready = pin
                    .apply_here()
                    .and_then(|_| worker.op(&mut conn, &mut lat));
                lat.clear();
                start_line.wait();
                ready?;
                let end = Instant::now() + duration;
                while Instant::now() < end {
                    worker.op(&mut conn, &mut lat)?;
                }
                Ok(lat)
            })
        })
        .collect();
    start_line.wait();
    let began = Instant::now();
    let mut all = Vec::new();
    for t in threads {
        all.extend(
            t.join()
                .expect("client thread panicked")
                .context("client")?,
        );
    }
    Ok(Sample::from_latencies(all, began.elapsed().as_secs_f64()))
}
