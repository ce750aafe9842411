//! The soak: a real xenstored-shim under minutes of mixed load from dom0
//! socket clients and guests on simulated rings (reads, writes, watches,
//! conflicting transactions, random disconnects, stopped readers), while
//! xenstore-snoop instances are killed (SIGKILL) and stopped (SIGINT) and
//! started again. Then: no descriptor growth, bounded memory growth, the
//! store's check passes and its counters match the commits, no uprobe left,
//! and every request a stopped snooper saw go by was printed or counted
//! lost. Every random choice follows the printed seed.

mod health;
mod rng;
mod snoopers;
mod workers;

use crate::cli::SoakArgs;
use anyhow::{bail, Context, Result};
use rng::Rng;
use snoopers::{Accounting, Churn, Snooper};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use workers::Ctx;
use xenstore_testkit::daemon::private_copy_of;
use xenstore_testkit::{scratch_dir, wait_until, Shim};

pub fn run(args: &SoakArgs) -> Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("run as root: the soak attaches xenstore-snoop (tracefs, uprobes)");
    }
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
    });
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

/// A binary of the workspace, next to this one.
fn sibling(name: &str) -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let dir = exe.parent().context("the bench binary has no directory")?;
    // Under `cargo test` this runs from target/<profile>/deps.
    for d in [dir, dir.parent().unwrap_or(dir)] {
        if d.join(name).exists() {
            return Ok(d.join(name));
        }
    }
    bail!(
        "{name} not built next to {}: cargo build --workspace",
        exe.display()
    )
}

/// Things running until told to stop, each reporting how it ended.
struct Running {
    workers: Vec<(String, JoinHandle<Result<()>>)>,
}

impl Running {
    /// The first that ended before being told to stop, with its error.
    fn failed(&mut self) -> Option<anyhow::Error> {
        let i = self.workers.iter().position(|(_, h)| h.is_finished())?;
        let (name, h) = self.workers.swap_remove(i);
        Some(match h.join() {
            Ok(Err(e)) => e.context(name),
            Ok(Ok(())) => anyhow::anyhow!("{name} stopped early"),
            Err(_) => anyhow::anyhow!("{name} panicked"),
        })
    }

    fn join(self) -> Result<()> {
        for (name, h) in self.workers {
            match h.join() {
                Ok(r) => r.context(name)?,
                Err(_) => bail!("{name} panicked"),
            }
        }
        Ok(())
    }
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
        "soak: daemon pid {pid}, {fds_idle} fds idle: {}",
        health::fd_kinds(pid)
    );
    let rss_start = health::rss_kib(pid)?;

    let mut load = Load::start(args, seed, &ctx, &snoop_bin, pid);
    let observed = observe(args, &mut shim, &ctx, &mut load, &snoop_bin, fds_idle)?;
    let churn = load.stop(&ctx)?;
    let ops = ctx.ops.load(Ordering::Relaxed);

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
    check_counters(&mut admin, &ctx)?;
    let left = health::uprobes_on(&binary)?;
    let Observed {
        stretch,
        rss_warm,
        fds_peak,
        elapsed,
        warmup,
    } = observed;
    let stretch = stretch.context("the load ended before the stretch snooper started")?;
    let rss_warm = rss_warm.unwrap_or(rss_start);

    report_load(args, &ctx, ops, elapsed);
    report_snoopers(&churn, &stretch, left.len());
    println!(
        "soak: daemon fds: {fds_idle} idle before, {fds_peak} peak, {fds_end} after; \
         VmRSS: {rss_start} KiB at start, {rss_warm} KiB after warm-up ({:.0} s), {rss_end} KiB at the end \
         (bound: warm-up + {} MiB)",
        warmup.as_secs_f64(),
        args.rss_bound_mib
    );

    if back.is_err() {
        bail!(
            "descriptors grew: {fds_idle} with no client before, {fds_end} after every client left: {}",
            health::fd_kinds(pid)
        );
    }
    if rss_end > rss_warm + args.rss_bound_mib * 1024 {
        bail!(
            "memory grew: VmRSS {rss_warm} KiB after warm-up, {rss_end} KiB at the end (bound {} MiB)",
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
    if stretch.accounting.requests == 0 {
        bail!("the stretch snooper printed no request");
    }
    println!("soak: OK");
    Ok(())
}

/// The load: dom0 clients and guests, and the snooper churn beside them.
struct Load {
    running: Running,
    churn: JoinHandle<Result<Churn>>,
    churn_stop: Arc<AtomicBool>,
}

impl Load {
    fn start(args: &SoakArgs, seed: u64, ctx: &Arc<Ctx>, snoop_bin: &Path, pid: u32) -> Load {
        let mut running = Running {
            workers: Vec::new(),
        };
        for i in 0..args.dom0 {
            let (ctx, rng) = (Arc::clone(ctx), Rng::new(seed, i as u64));
            running.workers.push((
                format!("dom0 client {i}"),
                std::thread::spawn(move || workers::dom0(&ctx, rng)),
            ));
        }
        for domid in 1..=args.guests {
            let (ctx, rng) = (Arc::clone(ctx), Rng::new(seed, 1000 + domid as u64));
            running.workers.push((
                format!("guest {domid}"),
                std::thread::spawn(move || workers::guest(&ctx, domid, rng)),
            ));
        }
        let churn_stop = Arc::new(AtomicBool::new(false));
        let churn = {
            let (bin, rng, stop) = (
                snoop_bin.to_path_buf(),
                Rng::new(seed, 2000),
                Arc::clone(&churn_stop),
            );
            let ring_mb = args.snoop_ring_mb;
            std::thread::spawn(move || snoopers::churn(bin, pid, ring_mb, rng, stop))
        };
        Load {
            running,
            churn,
            churn_stop,
        }
    }

    /// Tells everything to stop and waits for it; what the churn did.
    fn stop(self, ctx: &Ctx) -> Result<Churn> {
        ctx.stop.store(true, Ordering::Relaxed);
        self.churn_stop.store(true, Ordering::Relaxed);
        let joined = self.running.join();
        let churn = self
            .churn
            .join()
            .map_err(|_| anyhow::anyhow!("the snooper churn panicked"))??;
        joined?;
        Ok(churn)
    }
}

/// What watching the load for its duration found.
struct Observed {
    stretch: Option<Stretch>,
    /// VmRSS after the warm-up.
    rss_warm: Option<u64>,
    fds_peak: usize,
    elapsed: Duration,
    warmup: Duration,
}

/// Watches the load for `args.secs`: the daemon alive, no worker failed,
/// the descriptors' peak, memory after the warm-up, and the stretch
/// snooper attached from the warm-up to 80% of the run.
fn observe(
    args: &SoakArgs,
    shim: &mut Shim,
    ctx: &Ctx,
    load: &mut Load,
    snoop_bin: &Path,
    fds_idle: usize,
) -> Result<Observed> {
    let pid = shim.pid();
    let secs = Duration::from_secs_f64(args.secs);
    let warmup = (secs / 5).min(Duration::from_secs(30));
    // Requests in flight when the stretch snooper starts or stops: an
    // increment counts its three requests at once.
    let slack = 4 * (args.dom0 as u64 + args.guests as u64);
    let started = Instant::now();
    let mut stretch: Option<(Snooper, (Instant, u64))> = None;
    let mut stretch_result: Option<Stretch> = None;
    let mut rss_warm = None;
    let mut fds_peak = fds_idle;
    let mut last_report = Instant::now();
    while started.elapsed() < secs {
        std::thread::sleep(Duration::from_millis(200));
        if !shim.alive() {
            bail!("the daemon died under load:\n{}", shim.log());
        }
        if let Some(e) = load.running.failed() {
            ctx.stop.store(true, Ordering::Relaxed);
            return Err(e);
        }
        if load.churn.is_finished() {
            break;
        }
        fds_peak = fds_peak.max(health::fds(pid)?);
        let t = started.elapsed();
        if rss_warm.is_none() && t >= warmup {
            rss_warm = Some(health::rss_kib(pid)?);
            // The stretch: one snooper through the middle of the load.
            let attaching = Instant::now();
            let mut s = Snooper::start(snoop_bin, pid, args.snoop_ring_mb)?;
            s.wait_attached()?;
            println!(
                "soak: the stretch snooper attached in {:.1} s",
                attaching.elapsed().as_secs_f64()
            );
            stretch = Some((s, (Instant::now(), ctx.ops.load(Ordering::Relaxed))));
        }
        if t >= secs.mul_f64(0.8) {
            if let Some((s, ops_before)) = stretch.take() {
                stretch_result = Some(stop_stretch(s, ctx, ops_before, slack)?);
            }
        }
        if last_report.elapsed() >= Duration::from_secs(30) {
            last_report = Instant::now();
            println!(
                "soak: {:>4.0} s, {} ops, daemon {} fds, {} KiB",
                started.elapsed().as_secs_f64(),
                ctx.ops.load(Ordering::Relaxed),
                health::fds(pid)?,
                health::rss_kib(pid)?
            );
        }
    }
    if let Some((s, ops_before)) = stretch.take() {
        // Attaching took the rest of the run: stop it, still under load.
        stretch_result = Some(stop_stretch(s, ctx, ops_before, slack)?);
    }
    Ok(Observed {
        stretch: stretch_result,
        rss_warm,
        fds_peak,
        elapsed: started.elapsed(),
        warmup,
    })
}

fn per_sec(n: u64, t: Duration) -> f64 {
    n as f64 / t.as_secs_f64()
}

/// The load's line: clients, ops and what they ran into.
fn report_load(args: &SoakArgs, ctx: &Ctx, ops: u64, elapsed: Duration) {
    println!(
        "soak: {:.0} s, {} dom0 clients, {} guests: {ops} ops ({:.0}/s), {} watch events, \
         {} conflicts, {} disconnects, {} stalled readers",
        elapsed.as_secs_f64(),
        args.dom0,
        args.guests,
        per_sec(ops, elapsed),
        ctx.events.load(Ordering::Relaxed),
        ctx.conflicts.load(Ordering::Relaxed),
        ctx.disconnects.load(Ordering::Relaxed),
        ctx.stalls.load(Ordering::Relaxed),
    );
}

/// The snoopers' lines: the churn, and what the stretch snooper accounted for.
fn report_snoopers(churn: &Churn, stretch: &Stretch, uprobes_left: usize) {
    println!(
        "soak: snoopers: {} started, {} killed (SIGKILL), {} stopped (SIGINT), {} uprobes left",
        churn.started + 1,
        churn.killed,
        churn.interrupted.len() + 1,
        uprobes_left
    );
    let (requests, lost) = churn
        .interrupted
        .iter()
        .fold((0, 0), |(r, l), a| (r + a.requests, l + a.lost));
    let a = &stretch.accounting;
    println!(
        "soak: stretch snooper: {:.0} s, {} lines, {} requests printed of serials {} ({:.0}/s), {} lost; \
         the load completed {} ops meanwhile; SIGINT to exit: {:.1} s; \
         the churned ones: {requests} printed, {lost} lost",
        stretch.lived.as_secs_f64(),
        a.lines,
        a.requests,
        a.span,
        per_sec(a.span, stretch.lived),
        a.lost,
        stretch.ops,
        stretch.stopping.as_secs_f64(),
    );
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

/// Stops the stretch snooper: every request the load completed while it
/// was attached was printed or is among the events it counted lost (each
/// request fires at least one event), give or take `slack` in flight.
fn stop_stretch(
    s: Snooper,
    ctx: &Ctx,
    (since, ops_before): (Instant, u64),
    slack: u64,
) -> Result<Stretch> {
    let ops = ctx.ops.load(Ordering::Relaxed) - ops_before;
    let lived = since.elapsed();
    let stopping = Instant::now();
    let accounting = s.interrupt().context("the stretch snooper")?;
    if accounting.requests + accounting.lost + slack < ops {
        bail!(
            "the load completed {ops} requests while the stretch snooper was attached, \
             but it printed {} and counted {} events lost",
            accounting.requests,
            accounting.lost
        );
    }
    Ok(Stretch {
        accounting,
        ops,
        lived,
        stopping: stopping.elapsed(),
    })
}

/// Each counter's value is the number of increments that committed.
fn check_counters(
    admin: &mut xenstore_guest::client::Xs<xenstore_guest::client::SocketLink>,
    ctx: &Ctx,
) -> Result<()> {
    let read = |admin: &mut xenstore_guest::client::Xs<_>, path: &str| -> Result<u64> {
        let v = admin.read(0, path).map_err(|e| anyhow::anyhow!("{e}"))?;
        v.parse().with_context(|| format!("{path} = {v:?}"))
    };
    for (i, commits) in ctx.commits.iter().enumerate() {
        let path = format!("/soak/ctr/{i}");
        let (value, commits) = (read(admin, &path)?, commits.load(Ordering::Relaxed));
        if value != commits {
            bail!("{path} is {value} after {commits} committed increments");
        }
    }
    for (i, commits) in ctx.guest_commits.iter().enumerate() {
        let path = format!("/local/domain/{}/data/ctr", i + 1);
        let (value, commits) = (read(admin, &path)?, commits.load(Ordering::Relaxed));
        if value != commits {
            bail!("{path} is {value} after {commits} committed increments");
        }
    }
    Ok(())
}
