//! Section 3, snooping cost: what each tracer costs the shim per op.

use super::{
    killed_note, on_daemons, part, ratios, seeded, snoopers, table, Attach, Budget, OnDaemon,
    MAX_CONNS,
};
use crate::affinity::Pin;
use crate::builds::{Before, Builds};
use crate::compare::{Case, Comparison};
use crate::daemons;
use crate::scale::Part;
use crate::template::fill;
use crate::tracers::TracerKind;
use crate::workload::Workload;
use std::path::Path;

/// Section 3: The shim unsnooped, with bare uprobes (the kernel's floor),
/// under xenstore-snoop (BPF back end), under bpftrace; C xenstored without
/// and with its own -T trace file; last, xenstore-snoop on its tracefs back end.
pub fn measure(
    b: &Builds,
    budget: &Budget,
    bpftrace_script: &Path,
    before: Option<&Before>,
) -> Comparison {
    let shim = seeded(daemons::shim("shim", &b.shim));
    // The build before a change, unsnooped and snooped (configs 7 and 8).
    let shim_before = before.map(|x| seeded(daemons::shim("shim (before)", &x.shim)));
    let snoop_before = before.map(|x| snoopers(&x.snoop, &[]).0);
    let c = seeded(daemons::c_xenstored("C xenstored", None));
    let c_trace = (|| {
        let trace = crate::daemons::scratch_dir("c-trace")?.join("trace");
        seeded(daemons::c_xenstored("C xenstored -T", Some(&trace)))
    })();
    let (snoop, snoop_tracefs) = snoopers(&b.snoop, &[]);
    let bpftrace = TracerKind::Bpftrace {
        script: bpftrace_script.to_path_buf(),
        // What a production capture to a file uses.
        buffering: "full",
    };
    let cases = vec![
        Case::raw(Workload::Read, 1, Pin::Cpu0),
        Case::raw(Workload::Write, 1, Pin::Cpu0),
        Case::raw(Workload::Read, MAX_CONNS, Pin::Free),
        Case::raw(Workload::Write, MAX_CONNS, Pin::Free),
    ];
    let on_shim = |tracer| Ok(Attach::Tracer(tracer, &b.shim));
    let mut configs: Vec<OnDaemon> = vec![
        ("shim", &shim, Ok(Attach::Nothing)),
        ("shim + bare uprobes", &shim, Ok(Attach::Uprobes(&b.shim))),
        ("shim + xenstore-snoop (bpf)", &shim, on_shim(&snoop)),
        ("shim + bpftrace", &shim, on_shim(&bpftrace)),
        ("C xenstored", &c, Ok(Attach::Nothing)),
        ("C xenstored -T", &c_trace, Ok(Attach::Nothing)),
        (
            "shim + xenstore-snoop (tracefs)",
            &shim,
            on_shim(&snoop_tracefs),
        ),
    ];
    if let (Some(x), Some(d), Some(snoop)) = (before, &shim_before, &snoop_before) {
        configs.push(("shim (before)", d, Ok(Attach::Nothing)));
        let snooped = Ok(Attach::Tracer(snoop, &x.shim));
        configs.push(("shim (before) + xenstore-snoop (bpf)", d, snooped));
    }
    on_daemons("snooping", &configs, cases, budget.rounds, budget.run)
}

/// Section 3: what each tracer costs the shim per op.
pub fn render(c: &Comparison) -> Part {
    let mut g = Vec::new();
    for (what, target, conns, want) in [
        ("1 connection (pinned)", "≥ 0.85", 1, 0.85),
        ("8 connections", "≥ 0.80", 8, 0.80),
    ] {
        let (m, min) = ratios(c, 2, 0, |case| case.conns == conns, true);
        g.push((
            format!("snooped by xenstore-snoop ÷ unsnooped ops/s, {what}"),
            target,
            m,
            min.map(|x| x >= want),
        ));
    }
    let (m, min) = ratios(c, 2, 3, |_| true, false);
    g.push((
        "snooped by xenstore-snoop ÷ snooped by bpftrace ops/s".to_string(),
        "≥ 2.5",
        m,
        min.map(|x| x >= 2.5),
    ));
    let mut limits = Vec::new();
    // The pinned single-connection case: the daemon alone on its CPU.
    if let Some(ci) = c.cases.iter().position(|k| k.conns == 1) {
        let cpu = |k| c.median(ci, k).map(|m| m.daemon_cpu_us);
        if let (Some(none), Some(bare), Some(snoop), Some(bpf)) = (cpu(0), cpu(1), cpu(2), cpu(3)) {
            let ratio = |a, b| c.ratio(ci, a, b).map_or("?".into(), |x| format!("{x:.2}"));
            limits.push(fill(
                include_str!("../../report/limits-snooping.md").trim_end(),
                &[
                    ("case", c.cases[ci].describe().replace(" | ", ", ")),
                    ("none", format!("{none:.1}")),
                    ("bare", format!("{bare:.1}")),
                    ("snoop", format!("{snoop:.1}")),
                    ("bpf", format!("{bpf:.1}")),
                    ("bare_ratio", ratio(1, 0)),
                    ("snoop_adds", format!("{:.1}", snoop - none)),
                    ("bpf_adds", format!("{:.1}", bpf - none)),
                    ("ceiling", ratio(0, 3)),
                ],
            ));
        }
    }
    let mut s = String::new();
    let mut ratios = vec![
        ("bare ÷ none", 1, 0),
        ("snoop ÷ none", 2, 0),
        ("snoop ÷ bpftrace", 2, 3),
        ("bpftrace ÷ none", 3, 0),
        ("C -T ÷ C", 5, 4),
        ("snoop tracefs ÷ none", 6, 0),
    ];
    let mut cpu_ratios = vec![
        ("bare ÷ none", 1, 0),
        ("snoop ÷ none", 2, 0),
        ("snoop tracefs ÷ none", 6, 0),
    ];
    if c.configs.len() > 7 {
        // --shim-before's build (configs 7 and 8) in the same run.
        let before = [
            ("before: snoop ÷ none", 8, 7),
            ("shim ÷ shim (before)", 0, 7),
        ];
        ratios.extend(before);
        cpu_ratios.extend(before);
    }
    s += &table(c, &ratios, &cpu_ratios);
    let seen: u64 = c.counts[2].iter().filter_map(|c| c.seen).sum();
    let lost: u64 = c.counts[2].iter().filter_map(|c| c.lost).sum();
    let cpu_per_op = |k: usize| {
        let cpu: u64 = c.counts[k].iter().filter_map(|c| c.cpu_ns).sum();
        let ops: u64 = c
            .samples
            .iter()
            .flat_map(|per| &per[k])
            .map(|x| x.ops)
            .sum();
        cpu as f64 / 1000.0 / ops.max(1) as f64
    };
    s += "\n";
    s += &fill(
        include_str!("../../report/3-snooping-tracers.md"),
        &[
            ("seen", seen.to_string()),
            ("lost", lost.to_string()),
            ("bpf", format!("{:.1}", cpu_per_op(2))),
            ("tracefs", format!("{:.1}", cpu_per_op(6))),
            ("bpftrace", format!("{:.1}", cpu_per_op(3))),
        ],
    );
    let killed = c.counts.iter().flatten().filter(|c| c.killed).count();
    s += &killed_note(killed, ", their own counts missing");
    part(
        include_str!("../../report/3-snooping-cost.md"),
        s,
        g,
        limits,
    )
}
