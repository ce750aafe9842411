//! Section 4, per-firing cost: what each tracer costs per probe firing, on
//! the probe loop.

use super::{
    failures, firing_costs, ns_per_event, ok, part, snoopers, Budget, LOOP_PROBES, LOOP_SNOOP_ARGS,
};
use crate::affinity::Pin;
use crate::builds::Builds;
use crate::compare::{Case, Comparison};
use crate::probe_loop::ProbeLoop;
use crate::scale::Part;
use crate::stats::ops;
use crate::template::{fill, paragraphs};
use crate::tracers::{Tracer, TracerKind};
use crate::uprobe::{BareUprobes, Fetch};
use crate::workload::Workload;
use anyhow::{anyhow, Result};
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What a per-firing run attaches to the probe loop.
pub enum OnLoop {
    Nothing,
    /// Bare uprobes on its request/response sites, no reader.
    Uprobes(Fetch),
    Tracer(TracerKind),
}

/// Per-firing runs of `configs` (label, which of `loops`, what attached),
/// interleaved; samples' ops_per_s are events/s. Each loop on CPU 0; a
/// tracer's reader is left the other CPU(s). Half-`run` runs, four times
/// the rounds: a firing costs ~1 µs, so noise from the shared machine
/// weighs more here than in the op-level sections.
pub fn on_loops(
    title: &str,
    loops: &[&Path],
    configs: &[(&str, usize, Result<OnLoop>)],
    rounds: usize,
    run: Duration,
) -> Comparison {
    let start = |binary: &&Path| {
        ProbeLoop::start(binary).and_then(|lp| Pin::Cpu0.apply_to_process(lp.pid()).map(|_| lp))
    };
    let mut loops: Vec<_> = loops.iter().map(start).collect();
    let labels: Vec<&str> = configs.iter().map(|c| c.0).collect();
    let case = Case::raw(Workload::Read, 1, Pin::Cpu0);
    let secs = run.as_secs_f64() / 2.0;
    Comparison::run(title, &labels, vec![case], 4 * rounds, |_, k, counts| {
        let (_, at, on) = &configs[k];
        let lp = loops[*at].as_mut().map_err(|e| anyhow!("{e:#}"))?;
        match ok(on)? {
            OnLoop::Nothing => lp.sample(secs),
            OnLoop::Uprobes(fetch) => {
                let _probes = BareUprobes::enable(&lp.binary, &LOOP_PROBES, *fetch)?;
                lp.sample(secs)
            }
            OnLoop::Tracer(kind) => {
                let (binary, pid) = (lp.binary.clone(), lp.pid());
                let t = Tracer::attach(kind, pid, &binary, || lp.mark())?;
                let s = lp.sample(secs);
                counts.push(t.detach()?);
                s
            }
        }
    })
}

/// Section 4: Per-firing cost on the probe loop: no tracer, a bare uprobe with
/// no reader, xenstore-snoop (BPF), bpftrace, a bare uprobe fetching
/// nothing (its event still written, empty), xenstore-snoop on tracefs, a
/// BPF program that only tests a map (the floor of any BPF tracer), and
/// xenstore-snoop (BPF) with -T, whose program then reads the clock.
pub fn measure(b: &Builds, budget: &Budget, bpftrace_script: &Path) -> Comparison {
    let (snoop, snoop_tracefs) = snoopers(&b.snoop, &LOOP_SNOOP_ARGS);
    let (snoop_timed, _) = snoopers(&b.snoop, &[&LOOP_SNOOP_ARGS[..], &["-T"]].concat());
    let bpftrace = TracerKind::Bpftrace {
        script: bpftrace_script.to_path_buf(),
        // What a production capture to a file uses.
        buffering: "full",
    };
    let empty_bpf = empty_bpf_script().map(|script| TracerKind::Bpftrace {
        script,
        // It prints one line, the marker: it must not wait in a buffer.
        buffering: "line",
    });
    let tracer = |kind| Ok(OnLoop::Tracer(kind));
    let configs = [
        ("no tracer", 0, Ok(OnLoop::Nothing)),
        (
            "bare uprobe, no reader",
            0,
            Ok(OnLoop::Uprobes(Fetch::SnoopArgs)),
        ),
        ("xenstore-snoop (bpf)", 0, tracer(snoop)),
        ("bpftrace", 0, tracer(bpftrace)),
        (
            "uprobe, no fetch args, no reader (an empty ftrace event)",
            0,
            Ok(OnLoop::Uprobes(Fetch::Nothing)),
        ),
        ("xenstore-snoop (tracefs)", 0, tracer(snoop_tracefs)),
        (
            "a BPF program that only tests a map (bpftrace)",
            0,
            empty_bpf.map(OnLoop::Tracer),
        ),
        (
            "xenstore-snoop (bpf) with -T (a clock read a firing)",
            0,
            tracer(snoop_timed),
        ),
    ];
    on_loops(
        "per firing",
        &[&b.probe_loop],
        &configs,
        budget.rounds,
        budget.run,
    )
}

/// The floor of any BPF tracer of the probe loop: on each firing a program
/// that tests one map (so that the first firing, the attach marker, can be
/// printed) and does nothing else.
fn empty_bpf_script() -> Result<PathBuf> {
    let script = crate::daemons::scratch_dir("empty-bpf")?.join("empty.bt");
    std::fs::write(
        &script,
        "usdt:$1:xenstore:request /@shown == 0/ { @shown = 1; printf(\"%s\\n\", str(arg4)); }\n\
         usdt:$1:xenstore:response /@shown == 0/ { }\n",
    )?;
    Ok(script)
}

/// Section 4: what each tracer costs per probe firing.
pub fn render(c: &Comparison) -> Part {
    let mut g = Vec::new();
    let costs = firing_costs(c);
    let (bare, snoop) = (costs[1], costs[2]);
    let share = bare.zip(snoop).map(|(b, s)| s / b);
    g.push((
        "xenstore-snoop ÷ bare tracefs uprobe, ns per firing".to_string(),
        "≤ 0.75",
        match (bare, snoop, share) {
            (Some(b), Some(s), Some(x)) => format!("{s:.0} ns ÷ {b:.0} ns = {x:.2}"),
            _ => String::new(),
        },
        share.map(|x| x <= 0.75),
    ));
    let mut limits = Vec::new();
    let at = |k: usize| costs.get(k).copied().flatten();
    if let (Some(bare), Some(empty_event), Some(floor)) = (at(1), at(4), at(6)) {
        limits.push(fill(
            include_str!("../../report/limits-firing-floors.md").trim_end(),
            &[
                ("bare", format!("{bare:.0}")),
                ("floor", format!("{floor:.0}")),
                ("floor_share", format!("{:.0}", 100.0 * floor / bare)),
                ("empty", format!("{empty_event:.0}")),
                ("empty_share", format!("{:.0}", 100.0 * empty_event / bare)),
            ],
        ));
    }
    if let (Some(bare), Some(snoop), Some(bpf)) = (at(1), at(2), at(3)) {
        // The note, then its clauses, each said when its figure was measured.
        let parts = paragraphs(include_str!("../../report/limits-firing.md"));
        let clause = |part: usize, ns: Option<f64>| {
            ns.map_or(String::new(), |ns| {
                fill(
                    parts[part],
                    &[
                        ("ns", format!("{ns:.0}")),
                        ("share", format!("{:.2}", ns / bare)),
                    ],
                )
            })
        };
        limits.push(fill(
            parts[0],
            &[
                ("snoop", format!("{snoop:.0}")),
                ("share", format!("{:.2}", snoop / bare)),
                ("bare", format!("{bare:.0}")),
                ("over_floor", clause(1, at(6).map(|floor| snoop - floor))),
                ("clocked", clause(2, at(7))),
                ("tracefs", clause(3, at(5))),
                ("bpf", format!("{bpf:.0}")),
                ("times", format!("{:.1}", bpf / snoop)),
            ],
        ));
    }
    let mut s = String::from(
        "| tracer | events/s | ns per event | cost per firing (ns) | ÷ bare uprobe |\n\
         |---|---|---|---|---|\n",
    );
    for (k, cfg) in c.configs.iter().enumerate() {
        let m = c.median(0, k);
        let per = |x: Option<f64>| x.map_or("–".into(), |v| format!("{v:.0}"));
        let vs_bare = match (costs[k], costs[1]) {
            (Some(x), Some(b)) if k > 0 => format!("**{:.2}**", x / b),
            _ => "–".into(),
        };
        let _ = writeln!(
            s,
            "| {cfg} | {} | {} | {} | {vs_bare} |",
            m.map_or("not measured".into(), |m| ops(m.ops_per_s)),
            per(ns_per_event(c, k)),
            if k == 0 { "–".into() } else { per(costs[k]) },
        );
    }
    s += &failures(c);
    let rounds = c.samples[0][0].len().to_string();
    let intro = fill(
        include_str!("../../report/4-per-firing-cost.md"),
        &[("rounds", rounds)],
    );
    let mut p = part(&intro, s, g, limits);
    p.failures = c.failures.clone();
    p
}
