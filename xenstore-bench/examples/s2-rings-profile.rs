//! S2 spread with ring domains as a fixed amount of work, for profiles that
//! count rather than time (this machine has no hardware counters): N idle
//! domains on simulated rings with 15 watches each, then WRITES writes, each
//! below a different domain's watched path (the bench's spread order), each
//! waited for until its domain has the event.
//!
//!   cargo run --release -p xenstore-bench --example s2-rings-profile -- \
//!     SHIM N WRITES
//!
//! SHIM may be a script that execs the shim under valgrind, e.g.
//!   exec valgrind --tool=callgrind --cache-sim=yes \
//!     --callgrind-out-file=/tmp/cg.%p /path/xenstored-shim "$@"
//! Two runs with different WRITES at one N give the cost per write, setup
//! subtracted: (cost(W2) - cost(W1)) / (W2 - W1).

use anyhow::{bail, Context, Result};
use std::path::PathBuf;
use std::time::Duration;
use xenstore_bench::{client::Conn, daemons, guests};
use xenstore_guest::client::Xs;

const GUEST_HOT: &str = "device/vbd/51768/state";
const GUEST_BASE: u16 = 2001;
const WATCHES: usize = 15;
/// Generous: the daemon may run under valgrind.
const TIMEOUT: Duration = Duration::from_secs(120);

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [shim, n, writes] = args.as_slice() else {
        bail!("usage: s2-rings-profile SHIM N WRITES");
    };
    let n: usize = n.parse().context("N")?;
    let writes: usize = writes.parse().context("WRITES")?;
    let room = guests::make_room(n)?;
    let result = run(PathBuf::from(shim), n, writes);
    guests::restore_room(room);
    result
}

fn run(shim: PathBuf, n: usize, writes: usize) -> Result<()> {
    let daemon = daemons::shim("s2-rings-profile", &shim)?;
    let rings = daemon.dir.join("run");
    let mut dom0 = Xs::connect(&daemon.socket)?;
    let mut load = Conn::connect(&daemon.socket)?;
    let mut domains = Vec::with_capacity(n);
    for i in 0..n {
        let mut g = guests::boot(&mut dom0, &rings, GUEST_BASE + i as u16)?;
        for j in 1..WATCHES {
            g.watch(&format!("device/vif/{j}/state"), "idle")?;
        }
        g.watch(GUEST_HOT, "hot")?;
        while g.event(TIMEOUT)? != GUEST_HOT {}
        domains.push(g);
    }
    eprintln!("s2-rings-profile: {n} domains up, {writes} writes");
    let rel = format!("{GUEST_HOT}/v");
    for op in 0..writes {
        let g = &mut domains[op.wrapping_mul(7919) % n];
        let path = format!("/local/domain/{}/{rel}", g.domid);
        load.write(0, path.as_bytes(), b"1")?.ok()?;
        let got = g.event(TIMEOUT)?;
        if got != rel {
            bail!("domain {} got an event for {got} instead of {rel}", g.domid);
        }
    }
    // SIGTERM, then wait for it to go, so valgrind writes its output
    // before the harness's kill.
    let pid = daemon.pid();
    std::process::Command::new("kill")
        .arg(pid.to_string())
        .status()?;
    let deadline = std::time::Instant::now() + TIMEOUT;
    while std::path::Path::new(&format!("/proc/{pid}/status")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/status"))?.contains("State:\tZ")
    {
        if std::time::Instant::now() >= deadline {
            bail!("the daemon did not exit in {TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(daemon);
    Ok(())
}
