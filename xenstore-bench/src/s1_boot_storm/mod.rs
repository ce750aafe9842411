//! S1 boot storm: K idle domains, each brought up by replaying the create
//! part of a real guest's life (tests/data/xl-lifecycle.txt: its tree under
//! /local/domain/<id>, /vm/<uuid>, /libxl/<id> and dom0's backend vbd and
//! console directories, and the watches its guest, backends and xl monitor
//! hold, which stay), then P lifecycles at once (create and destroy, each
//! domain's xl, backends and guest on connections of their own, conflicts
//! retried as libxl does) while one more dom0 client READs an unrelated
//! node every 10 ms. Every daemon in turn at each K, so the columns ran
//! side by side.

pub mod lifecycle;
pub mod oxenstored;
pub mod reads;
pub mod replay;
pub mod report;
pub mod verdict;

use crate::daemons::{self, cpu_ns, Daemon};
use crate::guests;
use crate::s1_boot_storm::lifecycle::Lifecycle;
use crate::s1_boot_storm::reads::{percentile, read_every, Reads};
use crate::s1_boot_storm::replay::{dom0, Domain, GuestSide, Tally};
use crate::s1_boot_storm::verdict::Leniency;
use crate::scale::{Part, Scale, Size};
use anyhow::{anyhow, Context, Result};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::thread::ScopedJoinHandle;
use std::time::{Duration, Instant};
use xenstore_guest::client::{SocketLink, Xs};
use xenstore_testkit::upstream::Flavor;

/// Idle domains (the curve's points) and lifecycles at once.
pub const IDLE: [usize; 4] = [10, 100, 500, 1000];
pub const PARALLEL: [usize; 2] = [10, 100];
/// `--quick`: C xenstored alone takes half a minute to bring 100 up.
pub const QUICK_IDLE: [usize; 1] = [10];
/// Idle domains brought up at once (each by its own xl and backend
/// connections): a daemon that polls every connection on each pass (C
/// xenstored, oxenstored) then serves several requests a pass instead of
/// one, and 1000 idle domains take minutes instead of ~20.
const BRING_UP_AT_ONCE: u16 = 8;
const PROBE: &[u8] = b"/storm/probe";
/// Idle domains are 1.., the storm's domains count up from here.
const STORM_BASE: u16 = 10_000;

/// One storm's figures.
#[derive(Clone, Copy, Debug, Default)]
pub struct Storm {
    pub wall: Duration,
    pub lifecycle_p50: Duration,
    pub lifecycle_p99: Duration,
    pub tally: Tally,
    pub daemon_cpu: Duration,
    /// The unrelated reads.
    pub read: Reads,
}

/// One storm of a daemon's: K idle domains, P lifecycles, its figures.
pub type Row = (usize, usize, Storm);

/// A daemon's storms: (K, P, figures) in the plan's order, the storms
/// that failed, and why it stopped early, if it did.
pub struct Curve {
    pub label: String,
    pub storms: Vec<Row>,
    /// (K, P, why): a lifecycle failed (oxenstored answers EINVAL to some
    /// conflicted commits); the curve goes on with the next storm.
    pub failed: Vec<(usize, usize, String)>,
    pub error: Option<anyhow::Error>,
    /// Why its guests spoke over dom0 sockets instead of rings, if they did.
    pub no_rings: Option<String>,
    /// What its replay forgave it (its rows count what was worked around).
    pub leniency: Leniency,
}

pub struct StormResult {
    pub idle: Vec<usize>,
    pub parallel: Vec<usize>,
    pub curves: Vec<Curve>,
    pub elapsed: Duration,
}

/// An idle domain's clients (xl's, the guest's), kept open: xl's monitor
/// and the guest hold their watches as long as the domain lives.
type Idle = (Xs<SocketLink>, Option<GuestSide>);

struct Host {
    daemon: Daemon,
    leniency: Leniency,
    /// Where its domains' rings go; None: its guests speak over sockets.
    rings: Option<PathBuf>,
    /// dom0's kernel backends: the first idle domain's connection.
    backend: Xs<SocketLink>,
    /// And the others', one per bring-up thread (BRING_UP_AT_ONCE).
    backends: Vec<Xs<SocketLink>>,
    idle: Vec<Idle>,
    next_storm: u16,
}

/// The results of scoped threads, a panic as an error.
fn joined<T>(threads: Vec<ScopedJoinHandle<Result<T>>>) -> Vec<Result<T>> {
    let join =
        |t: ScopedJoinHandle<Result<T>>| t.join().unwrap_or_else(|_| Err(anyhow!("panicked")));
    threads.into_iter().map(join).collect()
}

/// Idle domain `domid` brought up by replaying the lifecycle's create part,
/// its backends' requests on `backend`.
fn idle_domain(
    life: &Lifecycle,
    leniency: Leniency,
    socket: &Path,
    rings: Option<&Path>,
    backend: &mut Xs<SocketLink>,
    domid: u16,
) -> Result<Idle> {
    let mut d = Domain::new(domid, leniency, socket, rings, backend)?;
    d.replay(&life.create, &mut Tally::default())
        .with_context(|| format!("bring up idle domain {domid}"))?;
    Ok((d.xl, d.guest))
}

impl Host {
    fn start(daemon: Daemon, leniency: Leniency, rings: PathBuf) -> Result<Host> {
        let mut backend = dom0(&daemon.socket)?;
        backend
            .write(0, &String::from_utf8_lossy(PROBE), "x")
            .context("write the unrelated reader's node")?;
        Ok(Host {
            daemon,
            leniency,
            rings: Some(rings),
            backend,
            backends: Vec::new(),
            idle: Vec::new(),
            next_storm: STORM_BASE,
        })
    }

    /// Brings idle domains up to `k`; a daemon that cannot serve a ring
    /// here gets its guests' requests over dom0 sockets: why, if so.
    fn grow(&mut self, life: &Lifecycle, k: usize) -> Result<Option<String>> {
        let (socket, leniency) = (&self.daemon.socket, self.leniency);
        let mut no_rings = None;
        if self.idle.is_empty() && k > 0 {
            let rings = self.rings.as_deref();
            let first = match idle_domain(life, leniency, socket, rings, &mut self.backend, 1) {
                Err(e) if rings.is_some() => {
                    no_rings = Some(format!("{e:#}"));
                    self.rings = None;
                    // domain 1 again, its guest on a socket, with none of
                    // the first try's watches
                    self.backend = dom0(socket)?;
                    idle_domain(life, leniency, socket, None, &mut self.backend, 1)
                }
                got => got,
            };
            self.idle.push(first?);
        }
        let next = AtomicU16::new(1 + self.idle.len() as u16);
        let rings = self.rings.as_deref();
        // Each thread takes domain ids from `next` up to `k`, with one
        // backend connection for all of its domains.
        let bring_up = || -> Result<(Vec<Idle>, Xs<SocketLink>)> {
            let mut backend = dom0(socket)?;
            let mut idle = Vec::new();
            loop {
                let domid = next.fetch_add(1, Ordering::Relaxed);
                if usize::from(domid) > k {
                    return Ok((idle, backend));
                }
                idle.push(idle_domain(
                    life,
                    leniency,
                    socket,
                    rings,
                    &mut backend,
                    domid,
                )?);
            }
        };
        let grown = std::thread::scope(|s| {
            joined((0..BRING_UP_AT_ONCE).map(|_| s.spawn(bring_up)).collect())
        });
        for g in grown {
            let (idle, backend) = g?;
            self.idle.extend(idle);
            self.backends.push(backend);
        }
        Ok(no_rings)
    }

    /// P whole lifecycles at once, and the unrelated reader meanwhile.
    fn storm(&mut self, life: &Lifecycle, p: usize) -> Result<Storm> {
        let first = self.next_storm;
        self.next_storm += p as u16;
        let (socket, rings) = (&self.daemon.socket, self.rings.as_deref());
        let (leniency, pid) = (self.leniency, self.daemon.pid());
        let stop = AtomicBool::new(false);
        let cpu_before = cpu_ns(pid)?;
        let began = Instant::now();
        let (lives, reads) = std::thread::scope(|s| {
            let reader = s.spawn(|| read_every(socket, PROBE, pid, &stop));
            let lives = (first..first + p as u16)
                .map(|domid| s.spawn(move || one_life(life, leniency, socket, rings, domid)))
                .collect();
            let lives = joined(lives);
            stop.store(true, Ordering::Relaxed);
            (lives, joined(vec![reader]).remove(0))
        });
        let wall = began.elapsed();
        let cpu = cpu_ns(pid)? - cpu_before;
        let mut tally = Tally::default();
        let mut times = Vec::with_capacity(p);
        for l in lives {
            let (t, c) = l?;
            times.push(t);
            tally.add(c);
        }
        // Each lifecycle's every commit, once (a daemon whose failures
        // were worked around must still do it all).
        let want = (p * life.commits()) as u64;
        if tally.committed != want {
            anyhow::bail!(
                "{} commits, not {want} ({} a lifecycle)",
                tally.committed,
                life.commits()
            );
        }
        Ok(Storm {
            wall,
            lifecycle_p50: percentile(&mut times, 0.50),
            lifecycle_p99: percentile(&mut times, 0.99),
            tally,
            daemon_cpu: Duration::from_nanos(cpu),
            read: Reads::of(&reads.context("the unrelated reader")?),
        })
    }
}

/// A guest's whole life on fresh connections: create, destroy, then the
/// RELEASE that the hypervisor's death notice stands for here.
fn one_life(
    life: &Lifecycle,
    leniency: Leniency,
    socket: &Path,
    rings: Option<&Path>,
    domid: u16,
) -> Result<(Duration, Tally)> {
    // SCHED_IDLE: it runs only when no ordinary task (the daemon) wants
    // its CPU and never preempts one. At nice 19 a hundred lifecycle
    // threads still preempted the daemon on each reply that woke one and
    // outweighed it (100 × 15 against 1024) on its CPU, so every daemon's
    // unrelated READ waited for the bench's own clients. The clients still
    // get every cycle the daemon leaves, so the storm's wall time stays
    // the daemon's; C xenstored and oxenstored get the same clients.
    reads::scheduler_here(libc::SCHED_IDLE, 0).context("SCHED_IDLE for a lifecycle")?;
    let began = Instant::now();
    let mut tally = Tally::default();
    let mut backend = dom0(socket)?;
    let mut d = Domain::new(domid, leniency, socket, rings, &mut backend)?;
    d.replay(&life.create, &mut tally)?;
    d.replay(&life.destroy, &mut tally)?;
    if matches!(d.guest, Some(GuestSide::Ring(_))) {
        d.guest = None;
        d.xl.release(domid)
            .with_context(|| format!("release domain {domid}"))?;
    }
    Ok((began.elapsed(), tally))
}

impl Curve {
    fn new(label: &str, leniency: Leniency) -> Curve {
        Curve {
            label: label.to_string(),
            storms: Vec::new(),
            failed: Vec::new(),
            error: None,
            no_rings: None,
            leniency,
        }
    }

    /// Grows `h` to `k` idle domains, then a storm of each P; a storm that
    /// fails is noted and the next one runs.
    fn at(&mut self, h: &mut Host, life: &Lifecycle, k: usize, parallel: &[usize]) -> Result<()> {
        let grown = h.grow(life, k);
        let grown = grown.with_context(|| format!("bring up {k} idle domains"))?;
        self.no_rings = self.no_rings.take().or(grown);
        for &p in parallel {
            let label = &self.label;
            match h.storm(life, p) {
                Ok(s) => {
                    let t = &s.tally;
                    eprintln!(
                        "bench: S1 {label} K={k} P={p}: wall {:.2} s, {} EAGAIN, {} EINVAL \
                         retried ({} transactions), {} oversized listings / {} commits",
                        s.wall.as_secs_f64(),
                        t.eagain,
                        t.einval,
                        t.einval_then_committed,
                        t.oversized,
                        t.committed
                    );
                    self.storms.push((k, p, s));
                }
                Err(e) => {
                    eprintln!("bench: S1 {label} K={k} P={p} failed: {e:#}");
                    self.failed.push((k, p, format!("{e:#}")));
                }
            }
        }
        Ok(())
    }
}

/// At each K of `idle` every daemon of `s` (its shims and upstream
/// daemons) grows its idle domains, then runs a storm of each P.
pub fn run(s: &Scale, idle: Vec<usize>, parallel: Vec<usize>) -> StormResult {
    let started = Instant::now();
    let result = |curves| StormResult {
        idle: idle.clone(),
        parallel: parallel.clone(),
        curves,
        elapsed: started.elapsed(),
    };
    let life = match lifecycle::load() {
        Ok(l) => l,
        Err(e) => {
            let mut all = Curve::new("all", Leniency::Strict);
            all.error = Some(e);
            return result(vec![all]);
        }
    };
    let most =
        idle.iter().max().copied().unwrap_or(0) + idle.len() * parallel.iter().sum::<usize>();
    let room = guests::make_room(2 * most).unwrap_or_else(|e| {
        eprintln!("bench: {e:#}: the shim may run out of simulated domains");
        None
    });
    let shims = s.shims.iter().map(|(label, binary)| {
        let host = daemons::shim(label, binary).and_then(|d| {
            let rings = d.dir.join("run");
            Host::start(d, Leniency::Strict, rings)
        });
        (Curve::new(label, Leniency::Strict), host)
    });
    let upstream = s.upstream.iter().map(|&flavor| {
        let (label, leniency) = match flavor {
            Flavor::C => ("C xenstored", Leniency::Strict),
            Flavor::Ocaml => ("oxenstored", Leniency::Oxenstored),
        };
        let host = daemons::upstream_with_rings(flavor, label)
            .and_then(|(d, rings)| Host::start(d, leniency, rings));
        (Curve::new(label, leniency), host)
    });
    let mut runs: Vec<(Curve, Option<Host>)> = (shims.chain(upstream))
        .map(|(mut c, host)| {
            let host = host.map_err(|e| c.error = Some(anyhow!("did not start: {e:#}")));
            (c, host.ok())
        })
        .collect();
    for &k in &idle {
        for (c, host) in &mut runs {
            let Some(h) = host.as_mut().filter(|_| c.error.is_none()) else {
                continue;
            };
            if let Err(e) = c.at(h, &life, k, &parallel) {
                c.error = Some(e.context(format!("{} at K={k}", c.label)));
            }
        }
        let secs = started.elapsed().as_secs_f64();
        eprintln!("bench: S1 K={k} done ({secs:.0} s)");
    }
    let curves = runs.into_iter().map(|(c, _)| c).collect();
    guests::restore_room(room);
    result(curves)
}

/// S1 on the shims and the upstream daemons: K idle domains, then P
/// lifecycles at once.
pub fn section(s: &Scale) -> Part {
    let oxenstored = s.upstream.contains(&Flavor::Ocaml);
    // oxenstored answers EINVAL (retried, counted) mostly at P=100.
    let smoke_parallel = vec![if oxenstored { 100 } else { 10 }];
    let idle = (s.storm_idle.clone())
        .unwrap_or_else(|| s.pick(vec![10], QUICK_IDLE.to_vec(), IDLE.to_vec()));
    let parallel = s.pick(smoke_parallel, PARALLEL.to_vec(), PARALLEL.to_vec());
    let r = run(s, idle, parallel);
    let mut failures: Vec<String> = (r.curves.iter())
        .flat_map(|c| {
            c.failed
                .iter()
                .map(move |(k, p, why)| format!("{} at K={k}, P={p}: {why}", c.label))
        })
        .collect();
    if s.size == Size::Smoke && oxenstored {
        // What its lenient rows rest on, checked on the real daemon.
        let checked = oxenstored::oversized_listing();
        failures.extend(checked.err().map(|e| format!("{e:#}")));
    }
    Part {
        text: report::render(&r),
        failures,
        ..Default::default()
    }
}
