//! S2's broad watch (xen-devel, September 2020): one watcher on
//! `/local/domain/0/backend` (qemu's) while the backends write their
//! domains' state below it. At each N the store holds N domains' vbd
//! backend directories and N idle dom0 connections hold 15 watches each on
//! paths nothing writes; one client writes a backend node of a domain
//! (spread over all N) and waits until the broad watcher has the event.

use crate::client::Conn;
use crate::scale::timed;
use crate::scale_store::Start;
use crate::stats::Sample;
use anyhow::{bail, Context, Result};
use std::time::{Duration, Instant};

pub const LEVELS: [usize; 4] = [10, 100, 500, 1000];
const BROAD: &str = "/local/domain/0/backend";
const IDLE_WATCHES: usize = 15;
const EVENT_TIMEOUT: Duration = Duration::from_secs(10);

pub struct Plan {
    pub daemons: Vec<(String, Start)>,
    pub levels: Vec<usize>,
    pub run: Duration,
}

pub struct Curve {
    pub label: String,
    /// (N, backend writes each seen by the broad watcher).
    pub points: Vec<(usize, Sample)>,
    pub failed: Option<String>,
}

pub struct BroadResult {
    pub curves: Vec<Curve>,
    pub run: Duration,
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

pub fn run(plan: &Plan) -> BroadResult {
    let started = Instant::now();
    let mut hosts: Vec<(Result<Host>, Curve)> = plan
        .daemons
        .iter()
        .map(|(label, start)| {
            let host = Host::start(label, start);
            let failed = host.as_ref().err().map(|e| format!("did not start: {e:#}"));
            let curve = Curve {
                label: label.clone(),
                points: Vec::new(),
                failed,
            };
            (host, curve)
        })
        .collect();
    for &n in &plan.levels {
        for (host, curve) in &mut hosts {
            let Ok(h) = host else { continue };
            if curve.failed.is_some() {
                continue;
            }
            let got = h
                .grow(n)
                .with_context(|| format!("grow to {n} domains"))
                .and_then(|()| h.measure(plan.run));
            match got {
                Ok(s) => curve.points.push((n, s)),
                Err(e) => curve.failed = Some(format!("at N={n}: {e:#}")),
            }
        }
        eprintln!(
            "bench: S2 broad watch, N={n} done ({:.0} s)",
            started.elapsed().as_secs_f64()
        );
    }
    BroadResult {
        curves: hosts.into_iter().map(|(_, c)| c).collect(),
        run: plan.run,
        elapsed: started.elapsed(),
    }
}

/// Its table for the scale section.
pub fn render(r: &BroadResult) -> String {
    use std::fmt::Write;
    let mut s = format!(
        "### S2 broad watch\n\nThe 2020 case: one dom0 watcher on `{BROAD}` (qemu's) while \
         backend state writes for N domains (spread over all of them) fan out to it; N idle \
         connections hold {IDLE_WATCHES} watches each on paths nothing writes. Timed from the \
         write to the broad watcher reading its event (runs of {:.2} s; {:.0} s in all). \
         Cells: writes/s (p50/p99 µs) daemon CPU per write in µs.\n\n| N |",
        r.run.as_secs_f64(),
        r.elapsed.as_secs_f64()
    );
    let mut rule = String::from("|---|");
    for c in &r.curves {
        let _ = write!(s, " {} |", c.label);
        rule += "---|";
    }
    let _ = writeln!(s, "\n{rule}");
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
            let cell = c.points.iter().find(|p| p.0 == n).map(|(_, x)| {
                format!(
                    "{} ({:.1}/{:.1}) {:.2}",
                    crate::report::ops(x.ops_per_s),
                    x.p50_us,
                    x.p99_us,
                    x.daemon_cpu_us
                )
            });
            let _ = write!(s, " {} |", cell.unwrap_or_else(|| "–".into()));
        }
        s += "\n";
    }
    s += "| CPU per write, largest N ÷ smallest N |";
    for c in &r.curves {
        let ratio = match (c.points.first(), c.points.last()) {
            (Some(a), Some(b)) if c.points.len() > 1 => Some(b.1.daemon_cpu_us / a.1.daemon_cpu_us),
            _ => None,
        };
        let _ = write!(
            s,
            " {} |",
            ratio.map_or("–".into(), |x| format!("**{x:.2}×**"))
        );
    }
    s += "\n";
    for c in &r.curves {
        if let Some(why) = &c.failed {
            let _ = writeln!(s, "\n{}: {why}", c.label);
        }
    }
    s + "\n"
}
