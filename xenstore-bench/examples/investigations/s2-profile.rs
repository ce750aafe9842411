//! S2 spread as a fixed amount of work, for profiles that count rather
//! than time (this machine has no hardware counters): N idle watchers with
//! 15 watches each (dom0 connections on sockets, or domains on simulated
//! rings), then WRITES writes, each below a different watcher's watched
//! path (the bench's spread order), each waited for until its watcher has
//! the event. `broad` is S2's broad watch instead: the N idle connections'
//! watches see nothing, and every write (a backend state node of one of N
//! domains, spread alike) goes to one watcher on `/local/domain/0/backend`.
//!
//!   cargo run --release -p xenstore-bench --example s2-profile -- \
//!     sockets|rings|broad shim|floor BINARY N WRITES
//!
//! (floor: the scale section's `xsbench-bare-sender`.)
//!
//! Each watcher first gets one write (creating the node written), then
//! WRITES more are counted: the program prints the daemon's CPU per write
//! over those (schedstat). Under `taskset -c 0` that compares two builds
//! faster than the bench's whole scale section, if less steadily.
//!
//! To profile the counted writes alone, S2_PROFILE_BEFORE and
//! S2_PROFILE_AFTER are shell commands run just before and after them, with
//! the daemon's pid in $DAEMON_PID; BINARY may be a script that execs the
//! daemon under valgrind. E.g. with BINARY
//!   exec valgrind --tool=callgrind --instr-atstart=no --cache-sim=yes \
//!     --callgrind-out-file=/tmp/cg.%p /path/xenstored-shim "$@"
//! and
//!   S2_PROFILE_BEFORE='callgrind_control -i on $DAEMON_PID'
//!   S2_PROFILE_AFTER='callgrind_control -i off $DAEMON_PID'
//! callgrind's totals divided by WRITES are the cost of one write.

use anyhow::{bail, Context, Result};
use std::path::PathBuf;
use std::time::Duration;
use xenstore_bench::idle_hosts::{hot_path, GUEST_BASE, GUEST_HOT, WATCHES_PER_CONN};
use xenstore_bench::{client::Conn, daemons, guests};
use xenstore_guest::client::Xs;

/// Generous: the daemon may run under valgrind.
const TIMEOUT: Duration = Duration::from_secs(120);

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [mode, kind, binary, n, writes] = args.as_slice() else {
        bail!("usage: s2-profile sockets|rings|broad shim|floor BINARY N WRITES");
    };
    let mode = match mode.as_str() {
        "sockets" => Mode::Sockets,
        "rings" => Mode::Rings,
        "broad" => Mode::Broad,
        _ => bail!("MODE is sockets, rings or broad, not {mode}"),
    };
    let n: usize = n.parse().context("N")?;
    let writes: usize = writes.parse().context("WRITES")?;
    let binary = PathBuf::from(binary);
    let daemon = match kind.as_str() {
        "shim" => daemons::shim("s2-profile", &binary)?,
        "floor" => daemons::bare_sender("s2-profile", &binary)?,
        _ => bail!("the daemon is shim or floor, not {kind}"),
    };
    let room = guests::make_room(n)?;
    let result = run(daemon, mode, n, writes);
    guests::restore_room(room);
    result
}

#[derive(Clone, Copy)]
enum Mode {
    Sockets,
    Rings,
    Broad,
}

fn run(daemon: daemons::Daemon, mode: Mode, n: usize, writes: usize) -> Result<()> {
    let mut load = Conn::connect(&daemon.socket)?;
    match mode {
        Mode::Sockets => socket_writes(&daemon, &mut load, n, writes)?,
        Mode::Rings => ring_writes(&daemon, &mut load, n, writes)?,
        Mode::Broad => broad_writes(&daemon, &mut load, n, writes)?,
    }
    stop(daemon)
}

/// As the bench's S2 broad watch (s2_fan_out::broad.rs).
fn broad_writes(daemon: &daemons::Daemon, load: &mut Conn, n: usize, writes: usize) -> Result<()> {
    const BROAD: &str = "/local/domain/0/backend";
    let state = |d: usize| format!("{BROAD}/vbd/{}/51712/state", d + 1);
    let mut broad = Conn::connect(&daemon.socket)?;
    broad.watch(BROAD.as_bytes(), b"qemu")?;
    while broad.event(TIMEOUT)? != BROAD.as_bytes() {}
    // Kept open, never read: their watches see nothing.
    let _idle = (0..n)
        .map(|i| idle_connection(daemon, i, 0..WATCHES_PER_CONN))
        .collect::<Result<Vec<_>>>()?;
    eprintln!("s2-profile: {n} idle connections and a broad watcher up, {writes} writes");
    measure(daemon, n, writes, |op| {
        let path = state(op.wrapping_mul(7919) % n);
        load.write(0, path.as_bytes(), b"4")?.ok()?;
        let got = broad.event(TIMEOUT)?;
        if got != path.as_bytes() {
            bail!("the broad watcher got an event for another path");
        }
        Ok(())
    })
}

/// Connection `i` watching `…/device/vif/<j>/state` of domain i + 1 for
/// each j of `vifs`, which nothing writes.
fn idle_connection(
    daemon: &daemons::Daemon,
    i: usize,
    vifs: std::ops::Range<usize>,
) -> Result<Conn> {
    let mut c = Conn::connect(&daemon.socket)?;
    for j in vifs {
        let path = format!("/local/domain/{}/device/vif/{j}/state", i + 1);
        c.watch(path.as_bytes(), b"idle")?;
    }
    Ok(c)
}

/// As the bench's sockets-only S2.
fn socket_writes(daemon: &daemons::Daemon, load: &mut Conn, n: usize, writes: usize) -> Result<()> {
    let mut idle = Vec::with_capacity(n);
    for i in 0..n {
        let mut c = idle_connection(daemon, i, 1..WATCHES_PER_CONN)?;
        c.watch(hot_path(i).as_bytes(), b"hot")?;
        while c.event(TIMEOUT)? != hot_path(i).as_bytes() {}
        idle.push(c);
    }
    eprintln!("s2-profile: {n} connections up, {writes} writes");
    measure(daemon, n, writes, |op| {
        let i = op.wrapping_mul(7919) % n;
        let path = format!("{}/v", hot_path(i));
        load.write(0, path.as_bytes(), b"1")?.ok()?;
        let got = idle[i].event(TIMEOUT)?;
        if got != path.as_bytes() {
            bail!("connection {i} got an event for another path");
        }
        Ok(())
    })
}

fn ring_writes(daemon: &daemons::Daemon, load: &mut Conn, n: usize, writes: usize) -> Result<()> {
    let rings = daemon.dir.join("run");
    let mut dom0 = Xs::connect(&daemon.socket)?;
    let mut domains = Vec::with_capacity(n);
    for i in 0..n {
        let mut g = guests::boot(&mut dom0, &rings, GUEST_BASE + i as u16)?;
        for j in 1..WATCHES_PER_CONN {
            g.watch(&format!("device/vif/{j}/state"), "idle")?;
        }
        g.watch(GUEST_HOT, "hot")?;
        while g.event(TIMEOUT)? != GUEST_HOT {}
        domains.push(g);
    }
    eprintln!("s2-profile: {n} domains up, {writes} writes");
    let rel = format!("{GUEST_HOT}/v");
    measure(daemon, n, writes, |op| {
        let g = &mut domains[op.wrapping_mul(7919) % n];
        let path = format!("/local/domain/{}/{rel}", g.domid);
        load.write(0, path.as_bytes(), b"1")?.ok()?;
        let got = g.event(TIMEOUT)?;
        if got != rel {
            bail!("domain {} got an event for {got} instead of {rel}", g.domid);
        }
        Ok(())
    })
}

/// A first write for each of the `n` watchers (creating the node each
/// writes), then `writes` more, counted and timed.
fn measure(
    daemon: &daemons::Daemon,
    n: usize,
    writes: usize,
    mut write: impl FnMut(usize) -> Result<()>,
) -> Result<()> {
    for op in 0..n {
        write(op)?;
    }
    hook("S2_PROFILE_BEFORE", daemon)?;
    let before = daemons::cpu_ns(daemon.pid())?;
    for op in n..n + writes {
        write(op)?;
    }
    let cpu = daemons::cpu_ns(daemon.pid())? - before;
    hook("S2_PROFILE_AFTER", daemon)?;
    println!("{:.3}", cpu as f64 / 1000.0 / writes as f64);
    Ok(())
}

fn hook(var: &str, daemon: &daemons::Daemon) -> Result<()> {
    let Ok(command) = std::env::var(var) else {
        return Ok(());
    };
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(&command)
        .env("DAEMON_PID", daemon.pid().to_string())
        .status()
        .with_context(|| format!("run {var}"))?;
    if !status.success() {
        bail!("{var} ({command}) failed: {status}");
    }
    Ok(())
}

fn stop(mut daemon: daemons::Daemon) -> Result<()> {
    // SIGTERM, then wait for it to go, so valgrind writes its output
    // before the harness's kill.
    std::process::Command::new("kill")
        .arg(daemon.pid().to_string())
        .status()?;
    let deadline = std::time::Instant::now() + TIMEOUT;
    while daemon.alive() {
        if std::time::Instant::now() >= deadline {
            bail!("the daemon did not exit in {TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}
