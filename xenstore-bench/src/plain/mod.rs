//! The plain sections (1–7, 9), one file each, named as in `--only`:
//! each measures its interleaved comparison or sweep and renders it as a
//! [`Part`]. What they share: the budget, a run of one case, and the
//! table of a comparison.

pub mod firing;
pub mod idle;
pub mod loss;
pub mod memory;
pub mod metrics;
pub mod sites;
pub mod snoop;
pub mod throughput;

use crate::affinity::Pin;
use crate::client::Conn;
use crate::compare::{Case, Client, Comparison};
use crate::daemons::{cpu_ns, Daemon};
use crate::scale::{GoalRow, Part};
use crate::stats::{ops, Sample};
use crate::tracers::{Counts, Tracer, TracerKind, MARKER};
use crate::uprobe::{BareUprobes, Fetch};
use crate::workload::{self, Workload};
use crate::{libxs, load};
use anyhow::{anyhow, bail, Context, Result};
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;
use xenstore_proto::Probe;

/// How long and how often.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    pub run: Duration,
    pub rounds: usize,
    /// Rounds for the idle-probe comparison, which looks for a 1% effect.
    pub idle_rounds: usize,
    pub memory_nodes: usize,
    pub quick: bool,
}

pub const MAX_CONNS: usize = 8;

/// A daemon that started (seeded for the workloads) or why it did not.
pub type Started = Result<Daemon>;

pub(crate) fn seeded(d: Result<Daemon>) -> Started {
    let d = d?;
    workload::seed(&d.socket, MAX_CONNS).with_context(|| format!("seed {}", d.label))?;
    Ok(d)
}

pub(crate) fn get(d: &Started) -> Result<&Daemon> {
    d.as_ref().map_err(|e| anyhow!("did not start: {e:#}"))
}

/// What was made, or why it could not be, for each run to say.
pub(crate) fn ok<T>(made: &Result<T>) -> Result<&T> {
    made.as_ref().map_err(|e| anyhow!("{e:#}"))
}

/// What the probe loop fires: request/response pairs.
pub(crate) const LOOP_PROBES: [Probe; 2] = [Probe::Request, Probe::Response];

/// The snooper on the probe loop attaches those, as on a daemon without
/// `reply`, so sections 4 and 5 count the same firings for every tracer.
pub const LOOP_SNOOP_ARGS: [&str; 1] = ["--paired"];

/// A tracer to attach around a run: its kind and the traced binary.
pub type TraceWith<'a> = Option<(&'a TracerKind, &'a Path)>;

/// What a run on a daemon attaches to it.
pub enum Attach<'a> {
    Nothing,
    /// Bare uprobes on `reply` in the binary, with the snooper's fetch
    /// args and no reader: what the snooper attaches per op, without it.
    Uprobes(&'a Path),
    /// A tracer of the binary.
    Tracer(&'a TracerKind, &'a Path),
}

/// A configuration of a comparison on daemons: its label, its daemon and
/// what is attached (or why that could not be made).
pub type OnDaemon<'a> = (&'a str, &'a Started, Result<Attach<'a>>);

/// `configs` on `cases`, interleaved (Comparison::run).
pub fn on_daemons(
    title: &str,
    configs: &[OnDaemon],
    cases: Vec<Case>,
    rounds: usize,
    run: Duration,
) -> Comparison {
    let labels: Vec<&str> = configs.iter().map(|c| c.0).collect();
    Comparison::run(title, &labels, cases, rounds, |case, k, counts| {
        let (_, daemon, attach) = &configs[k];
        let (daemon, attach) = (get(daemon)?, ok(attach)?);
        let _floor = match attach {
            Attach::Uprobes(binary) => Some(BareUprobes::enable(
                binary,
                &[Probe::Reply],
                Fetch::SnoopArgs,
            )?),
            _ => None,
        };
        let tracer = match attach {
            Attach::Tracer(kind, binary) => Some((*kind, *binary)),
            _ => None,
        };
        run_case(daemon, case, run, None, tracer, counts)
    })
}

/// One run of `case` against `daemon`, with `tracer` attached if any.
pub fn run_case(
    daemon: &Daemon,
    case: &Case,
    run: Duration,
    xs_load: Option<&Path>,
    tracer: TraceWith,
    counts: &mut Vec<Counts>,
) -> Result<Sample> {
    case.pin.apply_to_process(daemon.pid())?;
    let attached = match tracer {
        Some((kind, binary)) => {
            let mut marker = Conn::connect(&daemon.socket)?;
            Some(Tracer::attach(kind, daemon.pid(), binary, || {
                marker.read(MARKER.as_bytes()).map(|_| ())
            })?)
        }
        None => None,
    };
    let cpu_before = cpu_ns(daemon.pid())?;
    let sample = match case.client {
        Client::Raw => load::run(&daemon.socket, case.workload, case.conns, run, case.pin),
        Client::Libxenstore => {
            let exe = xs_load.context("libxenstore client not built")?;
            libxs::run(
                exe,
                &daemon.socket,
                case.workload == Workload::Write,
                run,
                case.pin,
            )
        }
    };
    let cpu_ns = cpu_ns(daemon.pid())? - cpu_before;
    if let Some(t) = attached {
        counts.push(t.detach()?);
    }
    Pin::Free.apply_to_process(daemon.pid())?;
    let mut sample = sample?;
    sample.daemon_cpu_us = cpu_ns as f64 / 1000.0 / sample.ops.max(1) as f64;
    Ok(sample)
}

/// xenstore-snoop with `args` on its BPF back end and on its tracefs one,
/// each asked for by name (no silent fallback).
pub(crate) fn snoopers(snoop: &Path, args: &[&str]) -> (TracerKind, TracerKind) {
    let on = |backend: &str| TracerKind::Snoop {
        binary: snoop.to_path_buf(),
        args: args
            .iter()
            .copied()
            .chain(["--backend", backend])
            .map(String::from)
            .collect(),
    };
    (on("bpf"), on("tracefs"))
}

/// The project's bpftrace snoop script, scripts/xenstore-snoop.bt.
pub fn bpftrace_script() -> Result<PathBuf> {
    let script = crate::builds::workspace_root().join("scripts/xenstore-snoop.bt");
    if !script.exists() {
        bail!("{} is missing", script.display());
    }
    Ok(script)
}

pub(crate) fn ratio(r: Option<f64>) -> String {
    r.map_or("–".into(), |r| format!("**{r:.2}**"))
}

/// Rows of a comparison: a case per row, each config's median ops/s with
/// p50/p99 and daemon CPU per op, then the named throughput ratios and CPU
/// per op ratios (config a ÷ config b).
pub(crate) fn table(
    c: &Comparison,
    ratios: &[(&str, usize, usize)],
    cpu_ratios: &[(&str, usize, usize)],
) -> String {
    let mut s = String::from("| workload | conns | CPUs |");
    for cfg in &c.configs {
        let _ = write!(s, " {cfg}: ops/s (p50/p99 µs) cpu |");
    }
    for (name, _, _) in ratios {
        let _ = write!(s, " {name} |");
    }
    for (name, _, _) in cpu_ratios {
        let _ = write!(s, " cpu/op {name} |");
    }
    s.push_str("\n|---|---|---|");
    for _ in 0..c.configs.len() + ratios.len() + cpu_ratios.len() {
        s.push_str("---|");
    }
    s.push('\n');
    for (ci, case) in c.cases.iter().enumerate() {
        let _ = write!(s, "| {} |", case.describe());
        for k in 0..c.configs.len() {
            match c.median(ci, k) {
                Some(m) => {
                    let _ = write!(
                        s,
                        " {} ({:.1}/{:.1}) {:.1} |",
                        ops(m.ops_per_s),
                        m.p50_us,
                        m.p99_us,
                        m.daemon_cpu_us
                    );
                }
                None => s.push_str(" not measured |"),
            }
        }
        for &(_, a, b) in ratios {
            let _ = write!(s, " {} |", ratio(c.ratio(ci, a, b)));
        }
        for &(_, a, b) in cpu_ratios {
            let _ = write!(s, " {} |", ratio(c.cpu_ratio(ci, a, b)));
        }
        s.push('\n');
    }
    s + &failures(c)
}

pub(crate) fn failures(c: &Comparison) -> String {
    let mut s = String::new();
    for f in &c.failures {
        let _ = writeln!(s, "\n- not measured: {f}");
    }
    s
}

/// Ratios a÷b over the cases `pick` selects, as "case ratio, ..." and the
/// minimum; `with_range` adds each one's range over rounds ("read 0.93
/// (0.91–0.96 over 7 rounds)"), for goals near their target.
pub fn ratios(
    c: &Comparison,
    a: usize,
    b: usize,
    pick: impl Fn(&crate::compare::Case) -> bool,
    with_range: bool,
) -> (String, Option<f64>) {
    let mut parts = Vec::new();
    let mut min: Option<f64> = None;
    for (ci, case) in c.cases.iter().enumerate() {
        if !pick(case) {
            continue;
        }
        let Some(r) = c.ratio(ci, a, b) else { continue };
        let name = case.workload.name();
        if !with_range {
            parts.push(format!("{name} {r:.2}"));
        } else if let Some((lo, hi)) = c.ratio_range(ci, a, b) {
            let rounds = c.samples[ci][a].len();
            parts.push(format!(
                "{name} {r:.2} ({lo:.2}–{hi:.2} over {rounds} rounds)"
            ));
        } else {
            continue;
        }
        min = Some(min.map_or(r, |m: f64| m.min(r)));
    }
    (parts.join(", "), min)
}

/// ns per event from a per-firing sample (ops_per_s = events/s).
pub(crate) fn ns_per_event(c: &Comparison, k: usize) -> Option<f64> {
    c.median(0, k).map(|m| 1e9 / m.ops_per_s)
}

pub(crate) fn firing_costs(c: &Comparison) -> Vec<Option<f64>> {
    let idle = ns_per_event(c, 0);
    (0..c.configs.len())
        .map(|k| Some(ns_per_event(c, k)? - idle?))
        .collect()
}

/// Said when tracers ignored SIGINT: their runs are kept.
pub(crate) fn killed_note(killed: usize, counts_missing: &str) -> String {
    if killed == 0 {
        return String::new();
    }
    format!(
        "\n{killed} tracer stop(s) took longer than {} s after SIGINT: killed, their runs kept \
         (measured before the signal){counts_missing}.\n",
        crate::tracers::STOP_BOUND.as_secs()
    )
}

/// A plain section's part: its template, its text, goals and limits.
pub(crate) fn part(template: &str, text: String, goals: Vec<GoalRow>, limits: Vec<String>) -> Part {
    Part {
        text: format!("\n{template}\n{text}"),
        failures: Vec::new(),
        goals,
        limits,
    }
}
