//! The soak: a real xenstored-shim under minutes of mixed load from dom0
//! socket clients and guests on simulated rings (reads, writes, watches,
//! conflicting transactions, random disconnects, stopped readers), while
//! xenstore-snoop instances are killed (SIGKILL) and stopped (SIGINT) and
//! started again. Then: no descriptor growth, bounded memory growth, the
//! store's check passes and its counters match the commits, no uprobe left,
//! and every request a stopped snooper saw go by was printed or counted
//! lost. Every random choice follows the printed seed.

mod health;
mod snoopers;
mod workers;

use crate::cli::SoakArgs;
use anyhow::{anyhow, bail, Context, Result};
use fastrand::Rng;
use snoopers::{Accounting, Snooper};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::thread::{spawn, JoinHandle};
use std::time::{Duration, Instant};
use workers::Ctx;
use xenstore_testkit::daemon::private_copy_of;
use xenstore_testkit::{scratch_dir, wait_until, Shim};

pub fn run(args: &SoakArgs) -> Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("run as root: the soak attaches xenstore-snoop (tracefs, uprobes)");
    }
    let seed = args.seed.unwrap_or_else(|| fastrand::u64(..));
    println!(
        "soak: seed {seed} (replay: xenstore-bench soak --seed {seed} --secs {})",
        args.secs
    );
    let result = soak(args, seed);
    if let Err(e) = &result {
        eprintln!("soak: FAILED (seed {seed}): {e:#}");
    }
    result
}

/// Thread `stream`'s own random choices under `seed`.
fn stream(seed: u64, stream: u64) -> Rng {
    Rng::with_seed(seed ^ stream.wrapping_mul(0xa076_1d64_78bd_642f))
}

/// A binary of the workspace, next to this one.
fn sibling(name: &str) -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let dir = exe.parent().context("the bench binary has no directory")?;
    // Under `cargo test` this runs from target/<profile>/deps.
    [dir, dir.parent().unwrap_or(dir)]
        .map(|d| d.join(name))
        .into_iter()
        .find(|p| p.exists())
        .with_context(|| format!("{name} not built next to {}", exe.display()))
}

/// A thread's result, named for the report.
fn joined<T>(name: &str, h: JoinHandle<Result<T>>) -> Result<T> {
    let got = h.join().map_err(|_| anyhow!("{name} panicked"))?;
    got.with_context(|| name.to_string())
}

fn soak(args: &SoakArgs, seed: u64) -> Result<()> {
    let shim_bin = args
        .shim
        .clone()
        .map_or_else(|| sibling("xenstored-shim"), Ok)?;
    let snoop_bin = args
        .snoop
        .clone()
        .map_or_else(|| sibling("xenstore-snoop"), Ok)?;
    // A private copy: uprobes attach to the file, so what is left on it at
    // the end is this soak's.
    let dir = scratch_dir("soak")?;
    let binary = private_copy_of(&shim_bin, &dir)?;
    let mut shim = Shim::launch("xenstored-shim (soak)", &binary, dir, &[])?;
    let pid = shim.pid();

    let ctx = Ctx::new(&shim.socket, &shim.run_dir, args.guests);
    let mut admin = ctx.dom0()?;
    workers::seed_store(&mut admin)?;
    for domid in 1..=args.guests {
        workers::introduce(&mut admin, &shim.run_dir, domid)?;
    }
    // With only `admin` connected: what every client's leaving returns to.
    let fds_idle = health::fds(pid)?;
    println!(
        "soak: daemon pid {pid}, {fds_idle} fds idle: {:?}",
        health::fd_kinds(pid)?
    );
    let rss_start = health::rss_kib(pid)?;

    let mut workers: Vec<(String, JoinHandle<Result<()>>)> = Vec::new();
    for i in 0..args.dom0 {
        let (ctx, rng) = (Arc::clone(&ctx), stream(seed, i as u64));
        let h = spawn(move || workers::dom0(&ctx, rng));
        workers.push((format!("dom0 client {i}"), h));
    }
    for domid in 1..=args.guests {
        let (ctx, rng) = (Arc::clone(&ctx), stream(seed, 1000 + domid as u64));
        let h = spawn(move || workers::guest(&ctx, domid, rng));
        workers.push((format!("guest {domid}"), h));
    }
    let churn = {
        let (ctx, bin, ring_mb) = (Arc::clone(&ctx), snoop_bin.clone(), args.snoop_ring_mb);
        let rng = stream(seed, 2000);
        spawn(move || snoopers::churn(&bin, pid, ring_mb, rng, &ctx.stop))
    };
    let secs = Duration::from_secs_f64(args.secs);
    let warmup = (secs / 5).min(Duration::from_secs(30));
    let started = Instant::now();
    let stretch = {
        let (ctx, bin, ring_mb) = (Arc::clone(&ctx), snoop_bin.clone(), args.snoop_ring_mb);
        // Requests in flight when it starts or stops: an increment counts
        // its four requests at once.
        let slack = 4 * (args.dom0 as u64 + args.guests as u64);
        let until = [started + warmup, started + secs.mul_f64(0.8)];
        spawn(move || stretch_snooper(&bin, pid, ring_mb, &ctx, until, slack))
    };

    // Watch the load: the daemon alive, no worker failed, the fds' peak.
    let mut fds_peak = fds_idle;
    let mut last_report = started;
    while started.elapsed() < secs && !churn.is_finished() {
        std::thread::sleep(Duration::from_millis(200));
        if !shim.alive() {
            bail!("the daemon died under load:\n{}", shim.log());
        }
        if let Some(i) = workers.iter().position(|(_, h)| h.is_finished()) {
            ctx.stop.store(true, Relaxed);
            let (name, h) = workers.swap_remove(i);
            return Err(joined(&name, h)
                .err()
                .unwrap_or_else(|| anyhow!("{name} stopped early")));
        }
        fds_peak = fds_peak.max(health::fds(pid)?);
        if last_report.elapsed() >= Duration::from_secs(30) {
            last_report = Instant::now();
            println!(
                "soak: {:>4.0} s, {} ops, daemon {} fds, {} KiB",
                started.elapsed().as_secs_f64(),
                ctx.ops.load(Relaxed),
                health::fds(pid)?,
                health::rss_kib(pid)?
            );
        }
    }
    if churn.is_finished() && started.elapsed() < secs {
        ctx.stop.store(true, Relaxed);
        joined("the snooper churn", churn)?;
        bail!("the snooper churn ended early");
    }
    // Still under load, if attaching took the rest of the run.
    let (stretch, rss_warm) = joined("the stretch snooper", stretch)?;
    let elapsed = started.elapsed();
    ctx.stop.store(true, Relaxed);
    let churned = joined("the snooper churn", churn);
    for (name, h) in workers {
        joined(&name, h)?;
    }
    let churned = churned?;
    let ops = ctx.ops.load(Relaxed);

    // Every load client has gone: the daemon must be back to its descriptors.
    let mut fds_end = 0;
    let back = wait_until(
        "the daemon's descriptors to return",
        Duration::from_secs(30),
        || {
            fds_end = health::fds(pid).unwrap_or(usize::MAX);
            fds_end <= fds_idle
        },
    );
    let rss_end = health::rss_kib(pid)?;
    health::store_check(&mut admin)?;
    workers::check_counters(&mut admin, &ctx)?;
    let left = health::uprobes_on(&binary)?;

    println!(
        "soak: {:.0} s, {} dom0 clients, {} guests: {ops} ops ({:.0}/s), {} watch events, \
         {} conflicts, {} disconnects, {} stalled readers",
        elapsed.as_secs_f64(),
        args.dom0,
        args.guests,
        per_sec(ops, elapsed),
        ctx.events.load(Relaxed),
        ctx.conflicts.load(Relaxed),
        ctx.disconnects.load(Relaxed),
        ctx.stalls.load(Relaxed),
    );
    let interrupted = &churned.interrupted;
    println!(
        "soak: snoopers: {} started, {} killed (SIGKILL), {} stopped (SIGINT), {} uprobes left",
        churned.started + 1,
        churned.killed,
        interrupted.len() + 1,
        left.len()
    );
    let a = &stretch.accounting;
    println!(
        "soak: stretch snooper: {:.0} s, {} lines, {} requests printed of serials {} ({:.0}/s), \
         {} lost; the load completed {} ops meanwhile; SIGINT to exit: {:.1} s; \
         the churned ones: {} printed, {} lost",
        stretch.lived.as_secs_f64(),
        a.lines,
        a.requests,
        a.span,
        per_sec(a.span, stretch.lived),
        a.lost,
        stretch.ops,
        stretch.stopping.as_secs_f64(),
        interrupted.iter().map(|a| a.requests).sum::<u64>(),
        interrupted.iter().map(|a| a.lost).sum::<u64>(),
    );
    println!(
        "soak: daemon fds: {fds_idle} idle before, {fds_peak} peak, {fds_end} after; \
         VmRSS: {rss_start} KiB at start, {rss_warm} KiB after warm-up ({:.0} s), \
         {rss_end} KiB at the end (bound: warm-up + {} MiB)",
        warmup.as_secs_f64(),
        args.rss_bound_mib
    );

    if back.is_err() {
        bail!(
            "descriptors grew: {fds_idle} with no client before, {fds_end} after every client \
             left: {:?}",
            health::fd_kinds(pid)?
        );
    }
    if rss_end > rss_warm + args.rss_bound_mib * 1024 {
        bail!(
            "memory grew: VmRSS {rss_warm} KiB after warm-up, {rss_end} KiB at the end \
             (bound {} MiB)",
            args.rss_bound_mib
        );
    }
    if !left.is_empty() {
        bail!(
            "uprobes left on {} after every snooper ended:\n{}",
            binary.display(),
            left.join("\n")
        );
    }
    if a.requests == 0 {
        bail!("the stretch snooper printed no request");
    }
    println!("soak: OK");
    Ok(())
}

fn per_sec(n: u64, t: Duration) -> f64 {
    n as f64 / t.as_secs_f64()
}

/// What the stretch snooper accounted for while the load ran.
struct Stretch {
    accounting: Accounting,
    /// Requests the load completed while it was attached.
    ops: u64,
    lived: Duration,
    /// From SIGINT to its exit.
    stopping: Duration,
}

/// One snooper through the middle of the load: from the end of the
/// warm-up (`until[0]`, when VmRSS is also taken) to `until[1]`. Every
/// request the load completed while it was attached was printed or is
/// among the events it counted lost (each request fires at least one
/// event), give or take `slack` in flight. Also VmRSS after the warm-up.
fn stretch_snooper(
    binary: &Path,
    pid: u32,
    ring_mb: u32,
    ctx: &Ctx,
    until: [Instant; 2],
    slack: u64,
) -> Result<(Stretch, u64)> {
    ctx.pause_until(until[0]);
    let rss_warm = health::rss_kib(pid)?;
    let attaching = Instant::now();
    let mut s = Snooper::start(binary, pid, ring_mb)?;
    s.wait_attached()?;
    println!(
        "soak: the stretch snooper attached in {:.1} s",
        attaching.elapsed().as_secs_f64()
    );
    let (since, ops_before) = (Instant::now(), ctx.ops.load(Relaxed));
    ctx.pause_until(until[1]);
    let ops = ctx.ops.load(Relaxed) - ops_before;
    let lived = since.elapsed();
    let stopping = Instant::now();
    let accounting = s.interrupt()?;
    if accounting.requests + accounting.lost + slack < ops {
        bail!(
            "the load completed {ops} requests while the stretch snooper was attached, \
             but it printed {} and counted {} events lost",
            accounting.requests,
            accounting.lost
        );
    }
    let stopping = stopping.elapsed();
    let stretch = Stretch {
        accounting,
        ops,
        lived,
        stopping,
    };
    Ok((stretch, rss_warm))
}
