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
use crate::s1_boot_storm::lifecycle::{Lifecycle, Vars};
use crate::s1_boot_storm::reads::{percentile, read_every, Reads};
use crate::s1_boot_storm::replay::{dom0, Domain, GuestSide, Introducer, Rings, Sockets, Tally};
use crate::s1_boot_storm::verdict::Leniency;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
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

pub struct Plan {
    pub shims: Vec<(String, PathBuf)>,
    /// The upstream daemons to run beside them.
    pub upstream: Vec<Flavor>,
    pub idle: Vec<usize>,
    pub parallel: Vec<usize>,
}

/// One storm's figures.
#[derive(Clone, Copy, Debug, Default)]
pub struct Storm {
    pub wall: Duration,
    pub lifecycle_p50: Duration,
    pub lifecycle_p99: Duration,
    pub tally: Tally,
    pub daemon_cpu: Duration,
    pub reads: usize,
    pub read_p99: Duration,
    /// The unrelated reads in full (reads, read_p99: theirs).
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

/// An idle domain's clients, kept open: xl's monitor and the guest hold
/// their watches as long as the domain lives.
struct Idle {
    _xl: Xs<SocketLink>,
    _guest: Option<GuestSide>,
}

struct Host {
    daemon: Daemon,
    leniency: Leniency,
    rings: Option<PathBuf>,
    no_rings: Option<String>,
    /// dom0's kernel backends: the first idle domain's connection.
    backend: Xs<SocketLink>,
    /// And the others', one per bring-up thread (BRING_UP_AT_ONCE).
    backends: Vec<Xs<SocketLink>>,
    idle: Vec<Idle>,
    next_storm: u16,
}

impl Host {
    fn start(daemon: Daemon, leniency: Leniency, rings: Option<PathBuf>) -> Result<Host> {
        let mut backend = dom0(&daemon.socket)?;
        backend
            .write(0, &String::from_utf8_lossy(PROBE), "x")
            .context("write the unrelated reader's node")?;
        Ok(Host {
            daemon,
            leniency,
            rings,
            no_rings: None,
            backend,
            backends: Vec::new(),
            idle: Vec::new(),
            next_storm: STORM_BASE,
        })
    }

    /// Brings idle domains up to `k`; a daemon that cannot serve a ring
    /// here gets its guests' requests over dom0 sockets, and says why.
    fn grow(&mut self, life: &Lifecycle, k: usize) -> Result<()> {
        while self.idle.is_empty() && k > 0 {
            let domid = 1 + self.idle.len() as u16;
            let xl = dom0(&self.daemon.socket)?;
            let mut d = Domain::new(Vars::new(domid), self.leniency, xl, &mut self.backend);
            let mut tally = Tally::default();
            let got = match &self.rings {
                Some(r) => d.replay(&life.create, &mut Rings(r), &mut tally),
                None => d.replay(&life.create, &mut Sockets(&self.daemon.socket), &mut tally),
            };
            if let Err(e) = got {
                if self.idle.is_empty() && self.rings.is_some() {
                    self.no_rings = Some(format!("{e:#}"));
                    self.rings = None;
                    // domain 1 again, its guest on a socket, with none
                    // of the first try's watches
                    self.backend = dom0(&self.daemon.socket)?;
                    continue;
                }
                return Err(e.context(format!("bring up idle domain {domid}")));
            }
            let Domain { xl, guest, .. } = d;
            self.idle.push(Idle {
                _xl: xl,
                _guest: guest,
            });
        }
        let next = AtomicU16::new(1 + self.idle.len() as u16);
        let (socket, rings) = (&self.daemon.socket, self.rings.as_deref());
        let leniency = self.leniency;
        let grown: Vec<Result<(Vec<Idle>, Xs<SocketLink>)>> = std::thread::scope(|s| {
            let threads: Vec<_> = (0..BRING_UP_AT_ONCE)
                .map(|_| s.spawn(|| bring_up(life, leniency, socket, rings, &next, k)))
                .collect();
            threads
                .into_iter()
                .map(|t| {
                    t.join()
                        .unwrap_or_else(|_| Err(anyhow::anyhow!("panicked")))
                })
                .collect()
        });
        for g in grown {
            let (idle, backend) = g?;
            self.idle.extend(idle);
            self.backends.push(backend);
        }
        Ok(())
    }

    /// P whole lifecycles at once, and the unrelated reader meanwhile.
    fn storm(&mut self, life: &Lifecycle, p: usize) -> Result<Storm> {
        let first = self.next_storm;
        self.next_storm += p as u16;
        let socket = self.daemon.socket.clone();
        let rings = self.rings.clone();
        let leniency = self.leniency;
        let pid = self.daemon.pid();
        let stop = AtomicBool::new(false);
        let cpu_before = cpu_ns(pid)?;
        let began = Instant::now();
        let (lives, reads) = std::thread::scope(|s| {
            let reader = s.spawn(|| read_every(&socket, PROBE, pid, &stop));
            let workers: Vec<_> = (0..p as u16)
                .map(|i| {
                    let (socket, rings) = (&socket, rings.as_deref());
                    s.spawn(move || one_life(life, leniency, socket, rings, first + i))
                })
                .collect();
            let lives: Vec<Result<(Duration, Tally)>> = workers
                .into_iter()
                .map(|w| {
                    w.join()
                        .unwrap_or_else(|_| Err(anyhow::anyhow!("panicked")))
                })
                .collect();
            stop.store(true, Ordering::Relaxed);
            let reads = reader
                .join()
                .unwrap_or_else(|_| Err(anyhow::anyhow!("reader panicked")));
            (lives, reads)
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
        let read = Reads::of(&reads.context("the unrelated reader")?);
        same_work(life, p, &tally)?;
        Ok(Storm {
            wall,
            lifecycle_p50: percentile(&mut times, 0.50),
            lifecycle_p99: percentile(&mut times, 0.99),
            tally,
            daemon_cpu: Duration::from_nanos(cpu),
            reads: read.count,
            read_p99: read.p99,
            read,
        })
    }
}

/// Brings up idle domains, taking their ids from `next` up to `k`, with
/// one backend connection for all of them: the domains' clients, and it.
fn bring_up(
    life: &Lifecycle,
    leniency: Leniency,
    socket: &Path,
    rings: Option<&Path>,
    next: &AtomicU16,
    k: usize,
) -> Result<(Vec<Idle>, Xs<SocketLink>)> {
    let mut backend = dom0(socket)?;
    let mut idle = Vec::new();
    loop {
        let domid = next.fetch_add(1, Ordering::Relaxed);
        if usize::from(domid) > k {
            return Ok((idle, backend));
        }
        let mut d = Domain::new(Vars::new(domid), leniency, dom0(socket)?, &mut backend);
        let mut tally = Tally::default();
        match rings {
            Some(r) => d.replay(&life.create, &mut Rings(r), &mut tally),
            None => d.replay(&life.create, &mut Sockets(socket), &mut tally),
        }
        .with_context(|| format!("bring up idle domain {domid}"))?;
        let Domain { xl, guest, .. } = d;
        idle.push(Idle {
            _xl: xl,
            _guest: guest,
        });
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
    lowest_priority_here()?;
    let began = Instant::now();
    let mut tally = Tally::default();
    let mut backend = dom0(socket)?;
    let mut d = Domain::new(Vars::new(domid), leniency, dom0(socket)?, &mut backend);
    let mut intro: Box<dyn Introducer> = match rings {
        Some(r) => Box::new(Rings(r)),
        None => Box::new(Sockets(socket)),
    };
    d.replay(&life.create, intro.as_mut(), &mut tally)?;
    d.replay(&life.destroy, intro.as_mut(), &mut tally)?;
    if matches!(d.guest, Some(GuestSide::Ring(_))) {
        d.guest = None;
        d.xl.release(domid)
            .with_context(|| format!("release domain {domid}"))?;
    }
    Ok((began.elapsed(), tally))
}

/// Whether a storm did the work it should: each lifecycle's every commit,
/// once (a daemon whose failures were worked around must still do it all).
fn same_work(life: &Lifecycle, p: usize, tally: &Tally) -> Result<()> {
    let want = (p * life.commits()) as u64;
    if tally.committed != want {
        anyhow::bail!(
            "{} commits, not {want} ({} a lifecycle)",
            tally.committed,
            life.commits()
        );
    }
    Ok(())
}

/// The calling thread at SCHED_IDLE: it runs only when no ordinary task
/// (the daemon) wants its CPU and never preempts one. At nice 19 a hundred
/// lifecycle threads still preempted the daemon on each reply that woke
/// one and outweighed it (100 × 15 against 1024) on its CPU, so every
/// daemon's unrelated READ waited for the bench's own clients. The clients
/// still get every cycle the daemon leaves, so the storm's wall time stays
/// the daemon's; C xenstored and oxenstored get the same clients.
fn lowest_priority_here() -> Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: a valid sched_param; 0 is the calling thread.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) } != 0 {
        return Err(std::io::Error::last_os_error()).context("SCHED_IDLE for a lifecycle thread");
    }
    Ok(())
}

/// Runs the plan: at each K every daemon grows its idle domains, then
/// runs a storm of each P.
pub fn run(plan: &Plan) -> StormResult {
    let started = Instant::now();
    let life = match lifecycle::load() {
        Ok(l) => l,
        Err(e) => {
            let why = format!("{e:#}");
            return StormResult {
                idle: plan.idle.clone(),
                parallel: plan.parallel.clone(),
                curves: vec![Curve {
                    label: "all".into(),
                    storms: Vec::new(),
                    failed: Vec::new(),
                    error: Some(anyhow::anyhow!(why)),
                    no_rings: None,
                    leniency: Leniency::Strict,
                }],
                elapsed: started.elapsed(),
            };
        }
    };
    let most = plan.idle.iter().max().copied().unwrap_or(0)
        + plan.idle.len() * plan.parallel.iter().sum::<usize>();
    let room = guests::make_room(2 * most).unwrap_or_else(|e| {
        eprintln!("bench: {e:#}: the shim may run out of simulated domains");
        None
    });
    let mut hosts: Vec<(String, Leniency, Result<Host>)> = Vec::new();
    for (label, binary) in &plan.shims {
        let host = daemons::shim(label, binary).and_then(|d| {
            let rings = d.dir.join("run");
            Host::start(d, Leniency::Strict, Some(rings))
        });
        hosts.push((label.clone(), Leniency::Strict, host));
    }
    for &flavor in &plan.upstream {
        let (label, leniency) = match flavor {
            Flavor::C => ("C xenstored", Leniency::Strict),
            Flavor::Ocaml => ("oxenstored", Leniency::Oxenstored),
        };
        let host = daemons::upstream_with_rings(flavor, label)
            .and_then(|(d, rings)| Host::start(d, leniency, Some(rings)));
        hosts.push((label.to_string(), leniency, host));
    }
    type Storms = (Vec<Row>, Vec<(usize, usize, String)>, Option<anyhow::Error>);
    let mut storms: Vec<Storms> = hosts
        .iter()
        .map(|(_, _, h)| match h {
            Ok(_) => (Vec::new(), Vec::new(), None),
            Err(e) => (
                Vec::new(),
                Vec::new(),
                Some(anyhow::anyhow!("did not start: {e:#}")),
            ),
        })
        .collect();
    for &k in &plan.idle {
        for ((label, _, host), (list, failed, error)) in hosts.iter_mut().zip(storms.iter_mut()) {
            let (Ok(h), None) = (host.as_mut(), &error) else {
                continue;
            };
            let got = (|| -> Result<()> {
                h.grow(&life, k)
                    .with_context(|| format!("bring up {k} idle domains"))?;
                for &p in &plan.parallel {
                    let s = match h.storm(&life, p) {
                        Ok(s) => s,
                        Err(e) => {
                            eprintln!("bench: S1 {label} K={k} P={p} failed: {e:#}");
                            failed.push((k, p, format!("{e:#}")));
                            continue;
                        }
                    };
                    eprintln!(
                        "bench: S1 {label} K={k} P={p}: wall {:.2} s, {} EAGAIN, {} EINVAL \
                         retried ({} transactions), {} oversized listings / {} commits",
                        s.wall.as_secs_f64(),
                        s.tally.eagain,
                        s.tally.einval,
                        s.tally.einval_then_committed,
                        s.tally.oversized,
                        s.tally.committed
                    );
                    list.push((k, p, s));
                }
                Ok(())
            })();
            if let Err(e) = got {
                *error = Some(e.context(format!("{label} at K={k}")));
            }
        }
        eprintln!(
            "bench: S1 K={k} done ({:.0} s)",
            started.elapsed().as_secs_f64()
        );
    }
    let curves = hosts
        .into_iter()
        .zip(storms)
        .map(|((label, leniency, host), (storms, failed, error))| Curve {
            no_rings: host.as_ref().ok().and_then(|h| h.no_rings.clone()),
            label,
            leniency,
            storms,
            failed,
            error,
        })
        .collect();
    guests::restore_room(room);
    StormResult {
        idle: plan.idle.clone(),
        parallel: plan.parallel.clone(),
        curves,
        elapsed: started.elapsed(),
    }
}

/// S1 on the shims and the upstream daemons: K idle domains, then P
/// lifecycles at once.
pub fn section(s: &crate::scale::Scale) -> crate::scale::Part {
    let oxenstored = s.upstream.contains(&Flavor::Ocaml);
    // oxenstored answers EINVAL (retried, counted) mostly at P=100.
    let smoke_parallel = vec![if oxenstored { 100 } else { 10 }];
    let idle = (s.storm_idle.clone())
        .unwrap_or_else(|| s.pick(vec![10], QUICK_IDLE.to_vec(), IDLE.to_vec()));
    let r = run(&Plan {
        shims: s.shims.clone(),
        upstream: s.upstream.clone(),
        idle,
        parallel: s.pick(smoke_parallel, PARALLEL.to_vec(), PARALLEL.to_vec()),
    });
    let mut failures: Vec<String> = (r.curves.iter())
        .flat_map(|c| {
            c.failed
                .iter()
                .map(move |(k, p, why)| format!("{} at K={k}, P={p}: {why}", c.label))
        })
        .collect();
    if s.size == crate::scale::Size::Smoke && oxenstored {
        // What its lenient rows rest on, checked on the real daemon.
        failures.extend(
            oxenstored::oversized_listing()
                .err()
                .map(|e| format!("{e:#}")),
        );
    }
    crate::scale::Part {
        text: report::render(&r),
        failures,
        ..Default::default()
    }
}
