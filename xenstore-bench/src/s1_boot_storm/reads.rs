//! S1's unrelated reader: a READ of a node nothing else touches, one every
//! READ_EVERY, each one's latency, and how long the daemon waited for a
//! CPU meanwhile (its threads' run delay from schedstat: runnable, but
//! another task on the CPU). On a shared machine that wait is not the
//! daemon's doing; the section says how much of its slow reads it was.

use anyhow::{Context, Result};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The reader's period.
pub const READ_EVERY: Duration = Duration::from_millis(10);
/// A read slower than this is what the goal counts against.
pub const SLOW: Duration = Duration::from_millis(1);

#[derive(Clone, Copy, Debug)]
pub struct Read {
    pub latency: Duration,
    /// The daemon's run delay over the read (at most its latency).
    pub daemon_waited: Duration,
}

/// The reads of one storm, summed up.
#[derive(Clone, Copy, Debug, Default)]
pub struct Reads {
    pub count: usize,
    pub p50: Duration,
    pub p99: Duration,
    pub max: Duration,
    /// The p99 of each read's latency less the daemon's wait for a CPU
    /// in it: what the daemon's own order and work cost the read.
    pub own_p99: Duration,
    /// Reads over SLOW: how many, their latencies' sum, and the daemon's
    /// wait for a CPU within them.
    pub slow: usize,
    pub slow_total: Duration,
    pub slow_waited: Duration,
}

impl Reads {
    pub fn of(reads: &[Read]) -> Reads {
        let mut lat: Vec<Duration> = reads.iter().map(|r| r.latency).collect();
        let mut own: Vec<Duration> = reads.iter().map(|r| r.latency - r.daemon_waited).collect();
        let slow = reads.iter().filter(|r| r.latency > SLOW);
        Reads {
            count: lat.len(),
            p50: percentile(&mut lat, 0.50),
            p99: percentile(&mut lat, 0.99),
            max: lat.iter().max().copied().unwrap_or_default(),
            own_p99: percentile(&mut own, 0.99),
            slow: slow.clone().count(),
            slow_total: slow.clone().map(|r| r.latency).sum(),
            slow_waited: slow.map(|r| r.daemon_waited).sum(),
        }
    }
}

/// The project's one percentile (xenstore-proto's), zero for no values.
pub fn percentile(v: &mut [Duration], q: f64) -> Duration {
    xenstore_proto::quantile::nearest_rank(v, q).unwrap_or_default()
}

/// READs `path`, one every READ_EVERY until `stop`, at SCHED_FIFO, of
/// the daemon `pid` listening on `socket`.
pub fn read_every(socket: &Path, path: &[u8], pid: u32, stop: &AtomicBool) -> Result<Vec<Read>> {
    let mut c = crate::client::Conn::connect(socket)?;
    // SCHED_FIFO: on this shared two-CPU machine a storm's hundred client
    // threads would otherwise keep the reader itself waiting for a CPU,
    // and its latency would be the bench's, not the daemon's.
    scheduler_here(libc::SCHED_FIFO, 1).context("SCHED_FIFO for the reader")?;
    let mut reads = Vec::new();
    let mut next = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let waited = run_delay(pid)?;
        let t = Instant::now();
        c.read(path)?.ok()?;
        let latency = t.elapsed();
        let waited = Duration::from_nanos(run_delay(pid)?.saturating_sub(waited));
        reads.push(Read {
            latency,
            daemon_waited: waited.min(latency),
        });
        next += READ_EVERY;
        // the schedule, not a wait for readiness
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    Ok(reads)
}

/// Nanoseconds process `pid`'s threads have spent runnable but not
/// running (schedstat's second field, summed).
fn run_delay(pid: u32) -> Result<u64> {
    let mut total = 0;
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
        .with_context(|| format!("list threads of {pid}"))?;
    for task in tasks {
        let stat = std::fs::read_to_string(task?.path().join("schedstat"))?;
        total += stat
            .split_whitespace()
            .nth(1)
            .and_then(|v| v.parse::<u64>().ok())
            .context("bad schedstat")?;
    }
    Ok(total)
}

/// The calling thread under scheduling `policy` at `priority`.
pub fn scheduler_here(policy: libc::c_int, priority: libc::c_int) -> std::io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: a valid sched_param; 0 is the calling thread.
    if unsafe { libc::sched_setscheduler(0, policy, &param) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
