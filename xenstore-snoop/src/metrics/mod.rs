//! `xenstore-snoop --metrics`: a long-lived Prometheus exporter. The
//! kernel counts (counters.rs); each interval the exporter reads the
//! totals, asks the daemon which domains live and what they use of their
//! quotas (daemon.rs), and encodes it all (encode.rs) into the textfile
//! and for the endpoint (serve.rs). A dead domain's series go with it.

pub mod counters;
pub mod daemon;
pub mod encode;
pub mod serve;

use crate::cli::Args;
use crate::semaphores::Semaphores;
use crate::target::Target;
use anyhow::{bail, Context, Result};
use counters::{Counters, Totals};
use daemon::DaemonSocket;
use encode::{DomainView, Snapshot};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const DEFAULT_INTERVAL: f64 = 15.0;
/// How often the loop looks at the stop flag when nothing else happens.
const TICK: Duration = Duration::from_millis(200);

pub fn run(args: &Args) -> Result<i32> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("xenstore-snoop --metrics needs root (BPF)");
    }
    let endpoint = args
        .metrics_listen
        .map(|addr| serve::Endpoint::listen(addr, args.metrics_listen_any))
        .transpose()?;
    let target = crate::target::find(args.daemon_pid, args.binary.as_deref())?;
    let socket = match &args.socket {
        Some(s) => s.clone(),
        None => crate::domains::daemon_socket(target.pid)
            .with_context(|| format!("finding daemon {}'s socket (give --socket)", target.pid))?,
    };
    let (counters, semaphores) = attach(&target, args.metrics_max_domains)?;
    if counters.is_none() {
        eprintln!(
            "xenstore-snoop: {} has no xenstore probes: domains and quotas only, no request counts",
            target.binary.display()
        );
    }
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop))
            .context("installing signal handlers")?;
    }
    let mut exporter = Exporter {
        pid: target.pid,
        counters,
        semaphores,
        carried: Totals::default(),
        exec_gaps: 0,
        max_domains_u32: args.metrics_max_domains,
        socket,
        max_domains: args.metrics_max_domains as usize,
        textfile: args.metrics_textfile.clone(),
    };
    let interval = Duration::from_secs_f64(args.interval.unwrap_or(DEFAULT_INTERVAL));
    eprintln!(
        "xenstore-snoop: metrics of daemon {} ({}, {}){}{}, every {:?}",
        target.pid,
        target.binary.display(),
        exporter
            .counters
            .as_ref()
            .map_or("no probes", |c| c.how.as_str()),
        args.metrics_textfile
            .as_ref()
            .map(|d| format!(", to {}", d.join(serve::TEXTFILE).display()))
            .unwrap_or_default(),
        endpoint
            .as_ref()
            .map(|e| format!(", on http://{}/metrics", e.addr))
            .unwrap_or_default(),
        interval
    );
    let mut next = Instant::now();
    // When the daemon was last seen running the image counted on.
    let mut last_seen = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        if Instant::now() >= next {
            exporter.refresh()?;
            next += interval;
        }
        let wait = next.saturating_duration_since(Instant::now()).min(TICK);
        match &endpoint {
            Some(e) => e.serve(wait, &mut || exporter.exposition())?,
            None => std::thread::sleep(wait),
        }
        if !crate::target::alive(target.pid) {
            bail!("daemon {} exited", target.pid);
        }
        if exporter.semaphores.as_ref().is_some_and(Semaphores::execd) {
            exporter.follow_exec(last_seen)?;
        }
        last_seen = Instant::now();
    }
    exporter.detach();
    Ok(0)
}

/// The counting program on `target`'s probes and their semaphores checked
/// (raised where the kernel left them down); none on a daemon without the
/// provider (C xenstored, oxenstored), which still has domains and quotas
/// to show. One with it but failing to attach is an error.
fn attach(target: &Target, max_domains: u32) -> Result<(Option<Counters>, Option<Semaphores>)> {
    let sites = match crate::sdt::read_probes(&target.binary) {
        Ok(sites) => sites,
        // sdt.rs's word for a binary without USDT notes at all.
        Err(e) if format!("{e:#}").contains("no .note.stapsdt") => Vec::new(),
        Err(e) => return Err(e),
    };
    if !sites.iter().any(|s| s.provider == xenstore_proto::PROVIDER) {
        return Ok((None, None));
    }
    let counters = Counters::attach(target, &sites, max_domains)?;
    let mut semaphores = Semaphores::open(target, &counters.sites)?;
    semaphores.ensure_raised()?;
    Ok((Some(counters), Some(semaphores)))
}

struct Exporter {
    pid: u32,
    counters: Option<Counters>,
    semaphores: Option<Semaphores>,
    /// What earlier images of the daemon counted (live updates).
    carried: Totals,
    exec_gaps: u64,
    max_domains_u32: u32,
    socket: PathBuf,
    max_domains: usize,
    textfile: Option<PathBuf>,
}

impl Exporter {
    /// The daemon exec'd a new image (a live update; the probes of the
    /// old one fire no more): keeps what was counted, and counts on the
    /// new image once it is mapped.
    fn follow_exec(&mut self, last_seen: Instant) -> Result<()> {
        if let Some(c) = self.counters.take() {
            self.carried.add(&c.read()?);
        }
        self.semaphores = None; // the memory it held is gone
        let target = crate::target::find(Some(self.pid), None)?;
        let attached = attach(&target, self.max_domains_u32).with_context(|| {
            format!(
                "attaching to daemon {}'s new image after its exec",
                self.pid
            )
        })?;
        (self.counters, self.semaphores) = attached;
        self.exec_gaps += 1;
        eprintln!(
            "xenstore-snoop: metrics: daemon {} exec'd a new image ({}); counting on it after a gap \
             of at most {:.3} s",
            self.pid,
            target.binary.display(),
            last_seen.elapsed().as_secs_f64()
        );
        Ok(())
    }

    /// Detaches, then lowers what we raised (after the kernel's own
    /// decrements, which may take ours).
    fn detach(&mut self) {
        self.counters = None;
        if let Some(s) = self.semaphores.take() {
            s.release();
        }
    }

    /// One interval: the textfile rewritten. An unanswering daemon is
    /// reported and tried again next interval.
    fn refresh(&mut self) -> Result<()> {
        let Some(dir) = self.textfile.clone() else {
            return Ok(());
        };
        match self.snapshot() {
            Ok(s) => {
                let text = encode::prometheus_text(&encode::openmetrics(s));
                serve::write_textfile(&dir, &text)?;
            }
            Err(e) => eprintln!("xenstore-snoop: metrics: {e:#}"),
        }
        Ok(())
    }

    /// For a scrape of the endpoint.
    fn exposition(&mut self) -> String {
        match self.snapshot() {
            Ok(s) => encode::openmetrics(s),
            Err(e) => {
                eprintln!("xenstore-snoop: metrics: {e:#}");
                // Prometheus then marks the scrape failed.
                String::new()
            }
        }
    }

    fn snapshot(&mut self) -> Result<Snapshot> {
        let mut daemon = DaemonSocket::connect(&self.socket)?;
        // Asked before the totals are read: the shim fires the records it
        // holds for stats_batch before it answers a CONTROL, so the totals
        // count every event before this snapshot, not up to 100 ms less.
        let limits = daemon.quota_limits()?;
        if let Some(s) = &mut self.semaphores {
            // Another tracer may have lowered what it raised for both.
            s.ensure_raised()?;
        }
        let mut totals = match &self.counters {
            Some(c) => c.read()?,
            None => Default::default(),
        };
        totals.add(&self.carried);
        let seen = totals.domains.keys().copied();
        let mut snapshot = ask(&mut daemon, limits, seen, self.max_domains)?;
        for dead in totals.domains.keys() {
            if !snapshot.domains.contains_key(dead) && !snapshot.over_cap.contains(dead) {
                if let Some(c) = &self.counters {
                    c.forget_domain(*dead);
                }
                self.carried.domains.remove(dead);
            }
        }
        snapshot.totals = totals;
        snapshot.exec_gaps = self.exec_gaps;
        Ok(snapshot)
    }
}

/// The daemon's side of a snapshot (no counts): the live domains among
/// /local/domain's and `seen`, the first `max_domains` with their names and
/// quota use, the rest over the cap, and the quota limits. Asks only what C
/// xenstored answers too.
pub fn ask_daemon(
    socket: &Path,
    seen: impl Iterator<Item = u32>,
    max_domains: usize,
) -> Result<Snapshot> {
    let mut daemon = DaemonSocket::connect(socket)?;
    let limits = daemon.quota_limits()?;
    ask(&mut daemon, limits, seen, max_domains)
}

/// [`ask_daemon`] on a connected `daemon` whose global quota `limits` are
/// known.
fn ask(
    daemon: &mut DaemonSocket,
    limits: daemon::Quotas,
    seen: impl Iterator<Item = u32>,
    max_domains: usize,
) -> Result<Snapshot> {
    let live = daemon.live_domains(seen)?;
    let per_domain = daemon.per_domain_quotas()?.unwrap_or_default();
    let mut snapshot = Snapshot {
        over_cap: live.iter().skip(max_domains).copied().collect(),
        ..Snapshot::default()
    };
    for &domid in live.iter().take(max_domains) {
        let (used, limits) = if domid == 0 {
            Default::default()
        } else {
            // None: it died since the list; gone next interval.
            let Some(used) = daemon.quota_used(domid)? else {
                continue;
            };
            let Some(limits) = domain_limits(daemon, domid, &limits, &per_domain)? else {
                continue;
            };
            (used, limits)
        };
        let name = daemon.name(domid)?;
        snapshot
            .domains
            .insert(domid, DomainView { name, used, limits });
    }
    snapshot.limits = limits;
    Ok(snapshot)
}

/// `domid`'s limits: the global ones, each replaced by the domain's own
/// where the daemon keeps that quota per domain. None: the domain died.
fn domain_limits(
    daemon: &mut DaemonSocket,
    domid: u32,
    global: &daemon::Quotas,
    per_domain: &[String],
) -> Result<Option<daemon::Quotas>> {
    let mut limits = global.clone();
    for (name, limit) in limits.iter_mut() {
        if per_domain.contains(name) {
            match daemon.quota_limit(domid, name)? {
                Some(v) => *limit = v,
                None => return Ok(None),
            }
        }
    }
    Ok(Some(limits))
}
