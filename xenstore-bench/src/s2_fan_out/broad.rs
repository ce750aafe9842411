//! S2's broad watch (xen-devel, September 2020): one watcher on
//! `/local/domain/0/backend` (qemu's) while the backends write their
//! domains' state below it. At each N the store holds N domains' vbd
//! backend directories and N idle dom0 connections hold 15 watches each on
//! paths nothing writes; one client writes a backend node of a domain
//! (spread over all N) and waits until the broad watcher has the event.

use crate::client::Conn;
use crate::daemons::Start;
use crate::idle_hosts::timed;
use crate::scale::{growth_row, head};
use crate::stats::{median_sample, Sample};
use crate::template::fill;
use anyhow::{bail, Result};
use std::time::{Duration, Instant};

pub const LEVELS: [usize; 4] = [10, 100, 500, 1000];
const BROAD: &str = "/local/domain/0/backend";
const IDLE_WATCHES: usize = 15;
const EVENT_TIMEOUT: Duration = Duration::from_secs(10);

pub struct Plan {
    pub daemons: Vec<(String, Start)>,
    pub levels: Vec<usize>,
    pub run: Duration,
    /// Rounds, of which the cells are the medians: with one run each, two
    /// builds that callgrind counts doing the same work per write read 1.35×
    /// and 1.03× from N=10 to N=1000 on a 2-vCPU VM.
    pub runs: usize,
}

/// Points: (N, backend writes each seen by the broad watcher).
pub type Curve = crate::in_turn::Curve<(usize, Sample)>;

pub struct BroadResult {
    pub curves: Vec<Curve>,
    pub run: Duration,
    pub runs: usize,
    pub elapsed: Duration,
}

fn state_path(domid: usize) -> String {
    format!("{BROAD}/vbd/{domid}/51712/state")
}

struct Host {
    daemon: crate::daemons::Daemon,
    load: Conn,
    broad: Conn,
    idle: Vec<Conn>,
}

impl Host {
    fn start(label: &str, start: &Start) -> Result<Host> {
        let daemon = start.launch(label)?;
        let load = Conn::connect(&daemon.socket)?;
        let mut broad = Conn::connect(&daemon.socket)?;
        broad.watch(BROAD.as_bytes(), b"qemu")?;
        while broad.event(EVENT_TIMEOUT)? != BROAD.as_bytes() {}
        Ok(Host {
            daemon,
            load,
            broad,
            idle: Vec::new(),
        })
    }

    /// Domains' backend state nodes and idle connections up to `n`.
    fn grow(&mut self, n: usize) -> Result<()> {
        for d in self.idle.len()..n {
            let path = state_path(d + 1);
            self.load.write(0, path.as_bytes(), b"4")?.ok()?;
            // the broad watcher's event for it, read now
            while self.broad.event(EVENT_TIMEOUT)? != path.as_bytes() {}
            let mut c = Conn::connect(&self.daemon.socket)?;
            for j in 0..IDLE_WATCHES {
                let p = format!("/local/domain/{}/device/vif/{j}/state", d + 1);
                c.watch(p.as_bytes(), b"idle")?;
            }
            self.idle.push(c);
        }
        Ok(())
    }

    fn measure(&mut self, run: Duration) -> Result<Sample> {
        let (load, broad, n) = (&mut self.load, &mut self.broad, self.idle.len());
        timed(self.daemon.pid(), run, |op| {
            let path = state_path(op.wrapping_mul(7919) % n + 1);
            load.write(0, path.as_bytes(), b"4")?.ok()?;
            let got = broad.event(EVENT_TIMEOUT)?;
            if got != path.as_bytes() {
                bail!("the broad watcher got {:?}", String::from_utf8_lossy(got));
            }
            Ok(())
        })
    }
}

/// Every daemon's hosts for every N up at once, then each round measures
/// every N side by side (the N in the opposite order every other round),
/// as the S5 and S2 tables do: a drifting machine moves every N alike,
/// where measured one N after the other it moved them apart.
pub fn run(plan: &Plan) -> BroadResult {
    let started = Instant::now();
    let runs = plan.runs.max(1);
    // hosts[level][daemon]
    let mut hosts: Vec<Vec<Result<Host, String>>> = (plan.levels.iter())
        .map(|&n| {
            (plan.daemons.iter())
                .map(|(label, start)| {
                    Host::start(label, start)
                        .and_then(|mut h| h.grow(n).map(|()| h))
                        .map_err(|e| format!("at N={n}: {e:#}"))
                })
                .collect()
        })
        .collect();
    eprintln!(
        "bench: S2 broad watch, hosts up ({:.0} s)",
        started.elapsed().as_secs_f64()
    );
    let samples = crate::in_turn::rounds(
        &mut hosts,
        runs,
        |h, l| (h.measure(plan.run)).map_err(|e| format!("at N={}: {e:#}", plan.levels[l])),
        |round| {
            eprintln!(
                "bench: S2 broad watch, round {} of {runs} done ({:.0} s)",
                round + 1,
                started.elapsed().as_secs_f64()
            )
        },
    );
    let curves = (plan.daemons.iter().enumerate())
        .map(|(d, (label, _))| {
            // the curve up to its first failed level
            let failed = hosts.iter().position(|row| row[d].is_err());
            let upto = failed.unwrap_or(hosts.len());
            Curve {
                label: label.clone(),
                points: (plan.levels[..upto].iter().zip(&samples))
                    .map(|(&n, s)| (n, median_sample(&s[d])))
                    .collect(),
                failed: failed.and_then(|l| hosts[l][d].as_ref().err().cloned()),
            }
        })
        .collect();
    BroadResult {
        curves,
        run: plan.run,
        runs,
        elapsed: started.elapsed(),
    }
}

/// Its table for the scale section.
pub fn render(r: &BroadResult) -> String {
    use std::fmt::Write;
    let mut s = fill(
        include_str!("../../report/s2-broad-watch.md"),
        &[
            ("broad", BROAD.to_string()),
            ("idle_watches", IDLE_WATCHES.to_string()),
            ("runs", r.runs.to_string()),
            ("run", format!("{:.2}", r.run.as_secs_f64())),
            ("elapsed", format!("{:.0}", r.elapsed.as_secs_f64())),
        ],
    ) + "\n"
        + &head("N", r.curves.iter().map(|c| &c.label));
    let mut levels: Vec<usize> = r
        .curves
        .iter()
        .flat_map(|c| c.points.iter().map(|p| p.0))
        .collect();
    levels.sort_unstable();
    levels.dedup();
    for n in levels {
        let _ = write!(s, "| {n} |");
        for c in &r.curves {
            let cell = (c.points.iter().find(|p| p.0 == n)).map(|(_, x)| crate::scale::cell(x));
            let _ = write!(s, " {} |", cell.unwrap_or_else(|| "–".into()));
        }
        s += "\n";
    }
    s += &growth_row("CPU per write, largest N ÷ smallest N", &r.curves, |p| {
        p.1.daemon_cpu_us
    });
    for c in &r.curves {
        if let Some(why) = &c.failed {
            let _ = writeln!(s, "\n{}: {why}", c.label);
        }
    }
    s + "\n"
}
