//! S5's and S2's hosts: what a request costs as the host grows. N idle dom0
//! connections and N idle domains on simulated rings each hold 15 watches
//! (14 on paths nothing writes, one on a path of their own the fan-out load
//! writes below). Each daemon has a host per N, and every round measures
//! every N and daemon in turn, so a curve's points and the daemons'
//! figures come from runs side by side.
//!
//! S5 (idle tax): one client pinned with the daemon on CPU 0 sends
//! write+read pairs on a path no watch covers. S2 (watch fan-out): the
//! same client writes below one idle connection's or domain's own watched
//! path and waits until it has the event: write-to-event latency and the
//! daemon's CPU per write, with 2×N×15 watches registered. Beside the
//! daemons, the floor (src/bin/bare-sender.rs) does only what these
//! requests need.

pub mod report;

use crate::affinity::on_cpu0;
use crate::client::Conn;
use crate::daemons::{self, cpu_ns, Daemon};
use crate::guests::{self, RingGuest};
use crate::scale::{Scale, Size};
use crate::stats::{median, median_sample, Sample};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use xenstore_testkit::upstream::Flavor;

pub const WATCHES_PER_CONN: usize = 15;
/// The curves' points: how many idle connections.
pub const LEVELS: [usize; 5] = [0, 10, 100, 500, 1000];
/// Longest a watcher may wait for the event a write fires.
const EVENT_TIMEOUT: Duration = Duration::from_secs(5);
const LOAD_PATH: &[u8] = b"/scale/load/x";
/// The floor's column.
pub const FLOOR: &str = "floor";
/// Idle domain i is domain GUEST_BASE + i.
pub const GUEST_BASE: u16 = 2001;

/// S5's or S2's run on every daemon of a Scale (its shims, the floor,
/// C xenstored and oxenstored if it has upstream daemons).
pub struct Plan<'a> {
    pub scale: &'a Scale,
    /// Also N idle domains on simulated rings.
    pub domains: bool,
    /// Which of the two scenarios the rounds measure.
    pub scenario: Scenario,
}

/// S5 or S2 (each section measures its own on hosts of its own).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    IdleTax,
    FanOut,
}

/// One daemon's figures at one N.
#[derive(Clone, Copy, Debug, Default)]
pub struct Point {
    /// S5: write+read pairs, each request an op.
    pub idle_tax: Sample,
    /// S2: writes, each firing one event; latency is write to event.
    pub fan_out: Sample,
    /// S2 with every write for the same watcher: the daemon's own cost
    /// of finding and sending the event, without a different connection
    /// (socket, ring, output buffer) to touch each time.
    pub fan_out_one: Sample,
    /// The share of the daemon's CPU in S2 (spread) spent in the kernel
    /// (/proc's system time over user plus system, sampled at the tick).
    pub fan_out_kernel: f64,
}

/// A daemon's curve (one point per level), or why it has none.
pub struct Curve {
    pub label: String,
    /// The medians over rounds, one point per level.
    pub points: Result<Vec<Point>>,
    /// Each level's points round by round (rounds ran every level side by
    /// side, so one round's points at two levels pair up).
    pub by_round: Vec<Vec<Point>>,
    /// Why it ran without idle domains, if it did.
    pub no_domains: Option<String>,
}

pub struct ScaleResult {
    pub levels: Vec<usize>,
    pub curves: Vec<Curve>,
    pub run: Duration,
    pub rounds: usize,
    pub elapsed: Duration,
}

impl Scale {
    /// S5's or S2's plan: sockets only or with domains too.
    pub fn idle_plan(&self, domains: bool, scenario: Scenario) -> Plan<'_> {
        Plan {
            scale: self,
            domains,
            scenario,
        }
    }
}

impl ScaleResult {
    /// What failed: a daemon's curve, or the domains a shim or the floor
    /// should have served (the upstream daemons may lack the stub's rings).
    pub fn failures(&self) -> Vec<String> {
        let mut f = Vec::new();
        for c in &self.curves {
            if let Err(e) = &c.points {
                f.push(format!("{}: {e:#}", c.label));
            }
            let ours = c.label.starts_with("shim") || c.label == FLOOR;
            if let (true, Some(why)) = (ours, &c.no_domains) {
                f.push(format!("{} served no ring domains: {why}", c.label));
            }
        }
        f
    }
}

/// A daemon under test and its idle population.
struct Host {
    label: String,
    daemon: Daemon,
    idle: Vec<Conn>,
    load: Conn,
    /// Where its domains' rings go; None: no idle domains.
    rings: Option<PathBuf>,
    guests: Vec<RingGuest>,
    /// Why it has no idle domains although the plan wanted them.
    no_domains: Option<String>,
}

/// Which daemon a column is.
enum Which<'a> {
    Shim(&'a Path),
    Floor(&'a Path),
    Upstream(Flavor),
}

impl Host {
    /// Daemon `which`, with no idle population yet; its domains' rings
    /// (if `domains`) where it maps them.
    fn start(label: &str, which: &Which, domains: bool) -> Result<Host> {
        let (daemon, rings) = match *which {
            Which::Shim(binary) => with_run_dir(daemons::shim(label, binary)?),
            Which::Floor(binary) => with_run_dir(daemons::bare_sender(label, binary)?),
            Which::Upstream(flavor) => daemons::upstream_with_rings(flavor, label)?,
        };
        let mut load = Conn::connect(&daemon.socket)?;
        load.write(0, LOAD_PATH, b"0")?.ok()?;
        Ok(Host {
            label: label.into(),
            daemon,
            idle: Vec::new(),
            load,
            rings: domains.then_some(rings),
            guests: Vec::new(),
            no_domains: None,
        })
    }

    /// Opens idle connections up to `n`, and boots as many idle domains,
    /// each with its watches (a domain's relative to its home, as guests
    /// register them); a daemon that cannot serve rings here goes on
    /// without them, and the report says so.
    fn grow(&mut self, n: usize) -> Result<()> {
        let mut dom0 = xenstore_guest::client::Xs::connect(&self.daemon.socket)?;
        while let (Some(rings), true) = (&self.rings, self.guests.len() < n) {
            let domid = GUEST_BASE + self.guests.len() as u16;
            let mut g = match guests::boot(&mut dom0, rings, domid) {
                Err(e) if self.guests.is_empty() => {
                    self.no_domains = Some(format!("{e:#}"));
                    self.rings = None;
                    break;
                }
                g => g?,
            };
            for j in 1..WATCHES_PER_CONN {
                g.watch(&format!("device/vif/{j}/state"), "idle")?;
            }
            g.watch(GUEST_HOT, "hot")?;
            while g.event(EVENT_TIMEOUT)? != GUEST_HOT {}
            self.guests.push(g);
        }
        while self.idle.len() < n {
            let i = self.idle.len();
            let mut c = Conn::connect(&self.daemon.socket)?;
            for j in 1..WATCHES_PER_CONN {
                let path = format!("/local/domain/{}/device/vif/{j}/state", i + 1);
                c.watch(path.as_bytes(), b"idle")?;
            }
            c.watch(hot_path(i).as_bytes(), b"hot")?;
            // Its initial event, so the fan-out load finds only its own.
            while c.event(EVENT_TIMEOUT)? != hot_path(i).as_bytes() {}
            self.idle.push(c);
        }
        Ok(())
    }

    /// Fails if an idle connection has unread output: every event the
    /// fan-out fired was read by the watcher it was for.
    fn quiet(&mut self) -> Result<()> {
        for (i, c) in self.idle.iter_mut().enumerate() {
            if c.has_unread()? {
                bail!("idle connection {i} was sent something nobody asked for");
            }
        }
        for g in &mut self.guests {
            if g.has_event()? {
                bail!("idle domain {} was sent an event nobody asked for", g.domid);
            }
        }
        Ok(())
    }

    fn idle_tax(&mut self, run: Duration) -> Result<Sample> {
        let load = &mut self.load;
        let s = timed(self.daemon.pid(), run, |_| {
            load.write(0, LOAD_PATH, b"1")?.ok()?;
            load.read(LOAD_PATH)?.ok()?;
            Ok(())
        })?;
        Ok(s.per_request(2))
    }

    /// Writes below the watched path of an idle connection or domain
    /// (alternately when it has domains; each spread over all of them, or
    /// the first of each when `one`); each write is timed until its
    /// watcher has the event. Also returns the kernel's share of the
    /// daemon's CPU in that run.
    fn fan_out(&mut self, run: Duration, one: bool) -> Result<(Sample, f64)> {
        let (load, idle, guests) = (&mut self.load, &mut self.idle, &mut self.guests);
        let n = idle.len();
        if n == 0 {
            return Ok((Sample::default(), f64::NAN));
        }
        let pid = self.daemon.pid();
        let before = user_and_system_ticks(pid)?;
        let sample = timed(pid, run, |op| {
            let i = if one { 0 } else { op.wrapping_mul(7919) % n };
            let (path, got) = if op % 2 == 1 && !guests.is_empty() {
                let count = guests.len();
                let g = &mut guests[i % count];
                let home = format!("/local/domain/{}", g.domid);
                let path = format!("{home}/{GUEST_HOT}/v");
                load.write(0, path.as_bytes(), b"1")?.ok()?;
                let got = format!("{home}/{}", g.event(EVENT_TIMEOUT)?);
                (path, got)
            } else {
                let path = format!("{}/v", hot_path(i));
                load.write(0, path.as_bytes(), b"1")?.ok()?;
                (
                    path,
                    String::from_utf8_lossy(idle[i].event(EVENT_TIMEOUT)?).into(),
                )
            };
            if got != path {
                bail!("the watcher of {path} got an event for {got}");
            }
            Ok(())
        })?;
        let after = user_and_system_ticks(pid)?;
        let (user, system) = (after.0 - before.0, after.1 - before.1);
        Ok((sample, system as f64 / (user + system).max(1) as f64))
    }
}

fn with_run_dir(d: Daemon) -> (Daemon, PathBuf) {
    let rings = d.dir.join("run");
    (d, rings)
}

/// The user and system CPU time of process `pid` so far, in clock ticks
/// (/proc/PID/stat's utime and stime, fields 14 and 15, all threads).
fn user_and_system_ticks(pid: u32) -> Result<(u64, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The fields after the command name, which is in parentheses: from 3.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let mut f = rest.split_whitespace().skip(11).map(str::parse);
    match (f.next(), f.next()) {
        (Some(Ok(user)), Some(Ok(system))) => Ok((user, system)),
        _ => bail!("/proc/{pid}/stat has no utime and stime: {stat}"),
    }
}

/// Runs `op` (given its call number) for `run`, daemon `pid` pinned with
/// this thread on CPU 0: each call's latency, and the daemon's CPU per call.
pub(crate) fn timed(
    pid: u32,
    run: Duration,
    mut op: impl FnMut(usize) -> Result<()>,
) -> Result<Sample> {
    let (lat, secs, cpu) = on_cpu0(pid, || {
        op(0)?; // warm
        let cpu_before = cpu_ns(pid)?;
        let began = Instant::now();
        let end = began + run;
        let mut lat = Vec::with_capacity(1 << 16);
        for i in 1.. {
            let t = Instant::now();
            if t >= end {
                break;
            }
            op(i)?;
            lat.push(t.elapsed().as_nanos().min(u32::MAX as u128) as u32);
        }
        let secs = began.elapsed().as_secs_f64();
        Ok((lat, secs, cpu_ns(pid)? - cpu_before))
    })?;
    let mut s = Sample::from_latencies(lat, secs);
    s.daemon_cpu_us = cpu as f64 / 1000.0 / s.ops.max(1) as f64;
    Ok(s)
}

/// The path below which S2 writes, for a domain (relative to its home).
pub const GUEST_HOT: &str = "device/vbd/51768/state";

/// The path below which S2 writes, for idle connection `i` (in domain
/// i+1's home, which no domain owns).
pub fn hot_path(i: usize) -> String {
    format!("/local/domain/{}/device/vbd/51712/state", i + 1)
}

/// Runs the plan. Every daemon gets a host of its own for each level,
/// grown once; then each round measures every level, each daemon in
/// turn, the levels in the opposite order every other round. So a curve's
/// points ran interleaved, seconds apart, not one level minutes after the
/// other: a machine whose load drifts moves every level alike, and the
/// ratio of two levels measures the host's size, not the hour.
pub fn run(plan: &Plan) -> ScaleResult {
    raise_fd_limit();
    let s = plan.scale;
    let levels = s.pick(vec![0, 10, 40], LEVELS.to_vec(), LEVELS.to_vec());
    let run = s.pick(Duration::from_millis(100), s.run / 2, s.run / 2);
    // S2's goal is a difference of two growths, each as wide as the noise
    // of one round on a shared machine: more rounds.
    let rounds = match (plan.scenario, s.size) {
        (Scenario::FanOut, Size::Full) => s.rounds * 3,
        _ => s.rounds,
    };
    // The shims, then the floor, then C xenstored and oxenstored.
    let shims = (s.shims.iter()).map(|(l, b)| (l.clone(), Which::Shim(b)));
    let floor = (FLOOR.to_string(), Which::Floor(&s.floor));
    let upstream = [(Flavor::C, "C xenstored"), (Flavor::Ocaml, "oxenstored")]
        .map(|(f, l)| (l.to_string(), Which::Upstream(f)));
    let upstream = upstream.into_iter().filter(|_| !s.upstream.is_empty());
    let daemons: Vec<(String, Which)> = shims.chain([floor]).chain(upstream).collect();
    let all_levels: usize = levels.iter().sum();
    let room = plan.domains.then(|| {
        guests::make_room(daemons.len() * all_levels).unwrap_or_else(|e| {
            eprintln!("bench: {e:#}: the daemons may run out of simulated domains");
            None
        })
    });
    let started = Instant::now();
    // hosts[level][daemon]
    let mut hosts: Vec<Vec<Result<Host>>> = (levels.iter())
        .map(|&n| {
            let grown = |(label, which): &(String, Which)| {
                let mut h = Host::start(label, which, plan.domains)?;
                h.grow(n)
                    .with_context(|| format!("open {n} idle connections"))?;
                Ok(h)
            };
            let row = (daemons.iter())
                .map(|d| {
                    grown(d).map_err(|e: anyhow::Error| e.context(format!("{} at N={n}", d.0)))
                })
                .collect();
            let secs = started.elapsed().as_secs_f64();
            eprintln!("bench: scale N={n} hosts up ({secs:.0} s)");
            row
        })
        .collect();
    // samples[level][daemon]
    let samples = crate::in_turn::rounds(
        &mut hosts,
        rounds,
        |h, l| {
            let point = measure(h, plan.scenario, run, s.size == Size::Smoke);
            point.map_err(|e| e.context(format!("{} at N={}", h.label, levels[l])))
        },
        |round| {
            eprintln!(
                "bench: scale round {} of {} done ({:.0} s)",
                round + 1,
                rounds,
                started.elapsed().as_secs_f64()
            )
        },
    );
    let curves = (daemons.iter().enumerate())
        .map(|(k, (label, _))| {
            let failed = hosts.iter().find_map(|row| row[k].as_ref().err());
            let by_round: Vec<Vec<Point>> = samples.iter().map(|s| s[k].clone()).collect();
            Curve {
                label: label.clone(),
                points: match failed {
                    Some(e) => Err(anyhow::anyhow!("{e:#}")),
                    None => Ok(by_round.iter().map(|s| median_point(s)).collect()),
                },
                by_round,
                no_domains: (hosts.iter())
                    .find_map(|row| row[k].as_ref().ok().and_then(|h| h.no_domains.clone())),
            }
        })
        .collect();
    drop(hosts); // the daemons go, and their domains
    guests::restore_room(room.flatten());
    ScaleResult {
        levels,
        curves,
        run,
        rounds,
        elapsed: started.elapsed(),
    }
}

/// One round's figures of a host: S5, or S2 spread and S2 one watcher;
/// with `check_quiet` (a syscall per connection: where the run is short),
/// no idle connection was sent an event it should not have been.
fn measure(h: &mut Host, scenario: Scenario, run: Duration, check_quiet: bool) -> Result<Point> {
    let point = match scenario {
        Scenario::IdleTax => Point {
            idle_tax: h.idle_tax(run).context("S5")?,
            ..Point::default()
        },
        Scenario::FanOut => {
            let (fan_out, fan_out_kernel) = h.fan_out(run, false).context("S2")?;
            Point {
                fan_out,
                fan_out_one: h.fan_out(run, true).context("S2, one watcher")?.0,
                fan_out_kernel,
                ..Point::default()
            }
        }
    };
    if check_quiet {
        h.quiet()?;
    }
    Ok(point)
}

/// The per-figure medians of one level's rounds.
fn median_point(s: &[Point]) -> Point {
    let of = |f: fn(&Point) -> Sample| median_sample(&s.iter().map(f).collect::<Vec<_>>());
    Point {
        idle_tax: of(|p| p.idle_tax),
        fan_out: of(|p| p.fan_out),
        fan_out_one: of(|p| p.fan_out_one),
        fan_out_kernel: median(s.iter().map(|p| p.fan_out_kernel).collect()),
    }
}

/// A thousand connections need more descriptors than a login shell's
/// 1024; the daemons inherit the limit.
pub fn raise_fd_limit() {
    // SAFETY: getrlimit/setrlimit with a valid pointer to a plain struct.
    unsafe {
        let mut l: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) == 0 && l.rlim_cur < l.rlim_max {
            l.rlim_cur = l.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &l);
        }
    }
}
