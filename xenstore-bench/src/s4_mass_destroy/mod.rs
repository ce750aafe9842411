//! S4 of the scale section, mass destroy: N domains on simulated rings,
//! each with its home and a dom0 connection watching `@releaseDomain` (as
//! every `xl` process's monitor does); then M = N/10 of them die at once
//! through the simulated hypervisor (xen/simulated.rs in the shim, the
//! same table and socket in the conformance stub for C xenstored and
//! oxenstored: each death marks the domain dying and raises VIRQ_DOM_EXC,
//! which names no domain). Measured: the time until every dying domain is released and
//! every watcher has read an event fired after that, the state queries
//! the daemon made and the firings it handled (the simulated hypervisor
//! counts them), the events each watcher got, and the daemon's CPU.
//! C xenstored and oxenstored run under the conformance stub, which keeps
//! the same simulated hypervisor (its domain table and VIRQ_DOM_EXC socket
//! in XENSTUB_RING_DIR/xen) and counts the same queries and firings. Then
//! the same release in a big store (store.rs).

pub mod report;
pub mod store;

use crate::client::Conn;
use crate::daemons::{cpu_ns, Start};
use crate::guests;
use anyhow::{bail, Context, Result};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use xenstore_proto::wire::MsgType;
use xenstored_probes::host::xen::simulated::SimXen;

/// The curve's points: how many domains.
pub const LEVELS: [usize; 4] = [10, 100, 500, 1000];
/// One domain in DYING_EVERY dies.
pub const DYING_EVERY: usize = 10;
/// Longest the deaths may take to be released and announced.
const DEADLINE: Duration = Duration::from_secs(30);
/// Domain i is domain FIRST_DOMID + i.
const FIRST_DOMID: u16 = 1;

/// What one mass death cost.
#[derive(Clone, Copy, Debug, Default)]
pub struct Point {
    pub domains: usize,
    pub dying: usize,
    /// First death to the last watcher having read an event fired after
    /// every dying domain was released.
    pub notified: Duration,
    /// First death to the bench seeing every dying domain released.
    pub released: Duration,
    /// The daemon's state queries (one xc_domain_getinfolist's worth each).
    pub queries: u64,
    /// VIRQ_DOM_EXC firings the daemon handled.
    pub firings: u64,
    /// @releaseDomain events the busiest watcher read.
    pub events_per_watcher: usize,
    /// The daemon's CPU from the first death to the last event read.
    pub daemon_cpu_ms: f64,
}

/// A daemon's curve, or why it has none.
pub struct Curve<P> {
    pub label: String,
    pub points: Result<Vec<P>>,
}

pub struct Deaths<P> {
    pub curves: Vec<Curve<P>>,
    pub rounds: usize,
    pub elapsed: Duration,
}

impl<P> Deaths<P> {
    fn failures(&self) -> impl Iterator<Item = String> + '_ {
        (self.curves.iter())
            .filter_map(|c| Some(format!("{}: {:#}", c.label, c.points.as_ref().err()?)))
    }
}

/// Each daemon at each level, `rounds` fresh daemons a point (a death
/// shrinks the host), the median by `order`.
pub fn curves<S, P: Copy, K: Ord>(
    daemons: &[(String, S)],
    levels: &[usize],
    rounds: usize,
    measure: impl Fn(&str, &S, usize) -> Result<P>,
    order: impl Fn(&P) -> K,
) -> Deaths<P> {
    crate::idle_hosts::raise_fd_limit();
    let started = Instant::now();
    let curves = (daemons.iter())
        .map(|(label, daemon)| Curve {
            label: label.clone(),
            points: (levels.iter())
                .map(|&n| {
                    let mut runs = (0..rounds.max(1))
                        .map(|_| measure(label, daemon, n))
                        .collect::<Result<Vec<P>>>()
                        .with_context(|| format!("{label} at N={n}"))?;
                    runs.sort_by_key(&order);
                    Ok(runs[runs.len() / 2])
                })
                .collect(),
        })
        .collect();
    Deaths {
        curves,
        rounds,
        elapsed: started.elapsed(),
    }
}

/// Asks until none of `dying` is introduced any more, `between` each
/// round of questions; fails past the deadline.
fn wait_released(
    ask: &mut Conn,
    dying: &[u16],
    began: Instant,
    deadline: Duration,
    mut between: impl FnMut() -> Result<()>,
) -> Result<()> {
    let mut left = dying.to_vec();
    while !left.is_empty() {
        if began.elapsed() > deadline {
            bail!(
                "{} of {} dying domains still introduced",
                left.len(),
                dying.len()
            );
        }
        between()?;
        let mut still = Vec::with_capacity(left.len());
        for &domid in &left {
            let id = format!("{domid}\0");
            if ask
                .call(MsgType::IsDomainIntroduced, 0, &[id.as_bytes()])?
                .ok()?
                == b"T\0"
            {
                still.push(domid);
            }
        }
        left = still;
    }
    Ok(())
}

/// One fresh daemon with `n` domains and watchers; a tenth of them die.
fn mass_destroy(label: &str, start: &Start, n: usize) -> Result<Point> {
    let (daemon, rings) = start.launch_with_rings(label)?;
    let mut dom0 = xenstore_guest::client::Xs::connect(&daemon.socket)?;
    let domids: Vec<u16> = (0..n).map(|i| FIRST_DOMID + i as u16).collect();
    for &domid in &domids {
        guests::introduce_with_home(&mut dom0, &rings, domid)?;
    }
    let mut watchers = (0..n)
        .map(|i| {
            let mut w = Conn::connect(&daemon.socket)?;
            w.watch(b"@releaseDomain", format!("xl{i}").as_bytes())?;
            w.event(DEADLINE)?; // the watch's first event
            Ok(w)
        })
        .collect::<Result<Vec<Conn>>>()?;
    let mut ask = Conn::connect(&daemon.socket)?;
    let dying: Vec<u16> = domids.iter().copied().step_by(DYING_EVERY).collect();
    let xen = SimXen::open(&rings).context("the simulated hypervisor")?;
    let before = xen.counters()?;
    let cpu_before = cpu_ns(daemon.pid())?;
    let began = Instant::now();
    for &domid in &dying {
        guests::die(&rings, domid)?;
    }
    // The first release's event, waited for rather than polled: asking
    // the daemon while it works would slow what is measured.
    let mut first_seen = 0;
    while first_seen == 0 || watchers[0].has_unread()? {
        let path = watchers[0].event(DEADLINE).context("watcher 0")?;
        if path != b"@releaseDomain" {
            bail!("watcher 0 got {}", String::from_utf8_lossy(path));
        }
        first_seen += 1;
    }
    // Released: every event of the releases was queued before this answer.
    wait_released(&mut ask, &dying, began, DEADLINE, || Ok(()))?;
    let released = began.elapsed();
    // Every event of the releases was queued before that answer, so each
    // watcher has it once it has read what was queued before a request of
    // its own (C xenstored queues an event a release and sends them as its
    // loop gets round to each socket; reading only what has arrived would
    // stop early).
    let mut busiest = 0;
    for (i, w) in watchers.iter_mut().enumerate() {
        let before = if i == 0 { first_seen } else { 0 };
        let seen = before + w.events_queued().with_context(|| format!("watcher {i}"))?;
        if seen == 0 {
            bail!("watcher {i} heard of no release");
        }
        busiest = busiest.max(seen);
    }
    let notified = began.elapsed();
    let cpu = cpu_ns(daemon.pid())? - cpu_before;
    let after = xen.counters()?;
    eprintln!("bench: S4 {label} N={n}: {notified:?}");
    Ok(Point {
        domains: n,
        dying: dying.len(),
        notified,
        released,
        queries: after.queries - before.queries,
        firings: after.firings - before.firings,
        events_per_watcher: busiest,
        daemon_cpu_ms: cpu as f64 / 1e6,
    })
}

/// S4 on every daemon, then S4 in a big store on the shims.
pub fn section(s: &crate::scale::Scale) -> crate::scale::Part {
    let levels = s.pick(vec![10, 40], LEVELS.to_vec(), LEVELS.to_vec());
    let deaths = curves(&s.shim_starts(), &levels, s.rounds, mass_destroy, |p| {
        p.notified
    });
    let levels = s.pick(vec![5], store::LEVELS.to_vec(), store::LEVELS.to_vec());
    let release = |label: &str, binary: &PathBuf, n| store::release_in_store(label, binary, n);
    // (A positive f64's bits sort as the number does.)
    let big = curves(&s.shims, &levels, s.rounds, release, |p| {
        p.daemon_cpu_ms.to_bits()
    });
    let failures = deaths.failures().chain(big.failures()).collect();
    crate::scale::Part {
        text: report::render(&deaths) + &report::render_store(&big),
        failures,
        ..Default::default()
    }
}
