//! The plain sections (1–7, 9): each measured result rendered as a
//! [`Part`] (its text, goal rows and limit notes), and the report around
//! every section's part: how it was measured, the goals, the limits, then
//! each part in the table's order (sections.rs).

use crate::compare::Comparison;
use crate::machine::Machine;
use crate::memory::Rss;
use crate::metrics_mode::MetricsResult;
use crate::plan::{Budget, LossStep, SitesResult, SnoopResult};
use crate::scale::{GoalRow, Part};
use crate::stats::ops;
use crate::template::{fill, paragraphs};
use anyhow::Result;
use std::fmt::Write;
use std::time::Duration;

/// How the whole run went, for the report's preamble.
pub struct Head {
    pub machine: Machine,
    pub load_after: String,
    pub budget: Budget,
    pub elapsed: Duration,
}

fn ratio(r: Option<f64>) -> String {
    r.map_or("–".into(), |r| format!("**{r:.2}**"))
}

/// Rows of a comparison: a case per row, each config's median ops/s with
/// p50/p99 and daemon CPU per op, then the named throughput ratios and CPU
/// per op ratios (config a ÷ config b).
fn table(
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

fn failures(c: &Comparison) -> String {
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

fn verdict(met: Option<bool>) -> &'static str {
    match met {
        Some(true) => "met",
        Some(false) => "**missed**",
        None => "not measured",
    }
}

/// ns per event from a per-firing sample (ops_per_s = events/s).
fn ns_per_event(c: &Comparison, k: usize) -> Option<f64> {
    c.median(0, k).map(|m| 1e9 / m.ops_per_s)
}

fn firing_costs(c: &Comparison) -> Vec<Option<f64>> {
    let idle = ns_per_event(c, 0);
    (0..c.configs.len())
        .map(|k| Some(ns_per_event(c, k)? - idle?))
        .collect()
}

/// The RSS measured for the daemon called `label`, if it was measured.
fn rss_of<'a>(mem: &'a [(String, Result<Rss>)], label: &str) -> Option<&'a Rss> {
    mem.iter()
        .find(|(l, _)| l == label)
        .and_then(|(_, r)| r.as_ref().ok())
}

fn zero_loss_rate(steps: &[LossStep]) -> Option<f64> {
    steps
        .iter()
        .filter(|s| s.counts.lost == Some(0) && s.counts.seen.is_some_and(|n| n >= s.fired))
        .map(|s| s.achieved_rate)
        .fold(None, |m, r| Some(m.map_or(r, |m: f64| m.max(r))))
}

/// The report: how it was measured, every part's goals and limits, then
/// each part.
pub fn render(head: &Head, parts: &[Part]) -> String {
    let mut s = preamble(head);
    let _ = writeln!(
        s,
        "## Goals\n\n| goal | target | measured | verdict |\n|---|---|---|---|"
    );
    for (what, target, measured, met) in parts.iter().flat_map(|p| &p.goals) {
        let _ = writeln!(s, "| {what} | {target} | {measured} | {} |", verdict(*met));
    }
    let mut limits = parts.iter().flat_map(|p| &p.limits).peekable();
    if limits.peek().is_some() {
        s += "\nWhat limits the figures:\n\n";
        for n in limits {
            let _ = writeln!(s, "- {n}");
        }
    }
    for p in parts {
        s += &p.text;
    }
    s
}

/// The title, the machine, the budget, and other tracers running.
fn preamble(r: &Head) -> String {
    let m = &r.machine;
    let b = &r.budget;
    let mut s = fill(
        include_str!("../report/0-preamble.md"),
        &[
            ("quick", (if b.quick { " --quick" } else { "" }).to_string()),
            ("date", m.date.clone()),
            ("cpus", m.cpus.to_string()),
            ("cpu_model", m.cpu_model.clone()),
            ("kernel", m.kernel.clone()),
            ("load", m.load.clone()),
            ("load_after", r.load_after.clone()),
            ("elapsed", format!("{:.0}", r.elapsed.as_secs_f64())),
            ("run", format!("{:.2}", b.run.as_secs_f64())),
            ("rounds", b.rounds.to_string()),
            ("idle_rounds", b.idle_rounds.to_string()),
        ],
    ) + "\n";
    if m.foreign_tracers.is_empty() {
        let _ = writeln!(s, "No other tracer was running when the run started.\n");
    } else {
        let _ = writeln!(
            s,
            "**Other tracers were running when the run started** (they tax every figure): {}.\n",
            m.foreign_tracers.join("; ")
        );
    }
    s
}

/// A plain section's part: its template, its text, goals and limits.
fn part(template: &str, text: String, goals: Vec<GoalRow>, limits: Vec<String>) -> Part {
    Part {
        text: format!("\n{template}\n{text}"),
        failures: Vec::new(),
        goals,
        limits,
    }
}

/// Section 1: each daemon under the same client workload.
pub fn throughput(t: &Comparison) -> Part {
    use crate::affinity::Pin;
    use crate::compare::Client;
    let mut g = Vec::new();
    let vs: Vec<(&str, usize, usize)> = [
        ("C xenstored", "shim ÷ C"),
        ("oxenstored", "shim ÷ oxenstored"),
    ]
    .into_iter()
    .filter_map(|(config, name)| Some((name, 0, t.configs.iter().position(|c| c == config)?)))
    .collect();
    if vs.first().is_some_and(|v| v.0 == "shim ÷ C") {
        for (what, target, conns, want) in [
            (
                "shim ÷ C xenstored ops/s, 1 connection (pinned)",
                "≥ 1.2",
                1,
                1.2,
            ),
            ("shim ÷ C xenstored ops/s, 8 connections", "≥ 1.5", 8, 1.5),
        ] {
            let (measured, min) = ratios(
                t,
                0,
                1,
                |c| {
                    c.conns == conns && c.client == Client::Raw && (conns > 1 || c.pin == Pin::Cpu0)
                },
                false,
            );
            g.push((what.to_string(), target, measured, min.map(|m| m >= want)));
        }
    }
    let mut p = part(
        include_str!("../report/1-throughput.md"),
        table(t, &vs, &[]),
        g,
        Vec::new(),
    );
    p.failures = t.failures.clone();
    p
}

/// Section 2: the shim with its probes, untraced, against without them.
pub fn idle(c: &Comparison) -> Part {
    let mut g = Vec::new();
    let mut costs = Vec::new();
    let mut cpu_costs = Vec::new();
    let mut parts = Vec::new();
    for (ci, case) in c.cases.iter().enumerate() {
        if let Some(x) = c.ratio(ci, 0, 1) {
            let cost = (1.0 - x) * 100.0;
            let cpu = c.cpu_ratio(ci, 0, 1).map(|r| (r - 1.0) * 100.0);
            parts.push(format!(
                "{} {}: {cost:+.1}% (cpu/op {})",
                case.workload.name(),
                case.conns,
                cpu.map_or("?".into(), |c| format!("{c:+.1}%"))
            ));
            costs.push(cost);
            cpu_costs.extend(cpu);
        }
    }
    let mean = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
    let (mean_cost, mean_cpu) = (mean(&costs), mean(&cpu_costs));
    parts.push(format!(
        "mean {} (cpu/op {})",
        mean_cost.map_or("?".into(), |c| format!("{c:+.1}%")),
        mean_cpu.map_or("?".into(), |c| format!("{c:+.1}%"))
    ));
    g.push((
        "idle probes: throughput cost (mean over cases)".to_string(),
        "≤ 1%",
        parts.join(", "),
        mean_cost.map(|w| w <= 1.0),
    ));
    let text = table(c, &[("in ÷ out", 0, 1)], &[("in ÷ out", 0, 1)]);
    part(
        include_str!("../report/2-idle-probes.md"),
        text,
        g,
        Vec::new(),
    )
}

/// Section 3: what each tracer costs the shim per op.
pub fn snoop(sn: &SnoopResult) -> Part {
    let mut g = Vec::new();
    let c = &sn.comparison;
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
    let c = &sn.comparison;
    // The pinned single-connection case: the daemon alone on its CPU.
    if let Some(ci) = c.cases.iter().position(|k| k.conns == 1) {
        let cpu = |k| c.median(ci, k).map(|m| m.daemon_cpu_us);
        if let (Some(none), Some(bare), Some(snoop), Some(bpf)) = (cpu(0), cpu(1), cpu(2), cpu(3)) {
            let ratio = |a, b| c.ratio(ci, a, b).map_or("?".into(), |x| format!("{x:.2}"));
            limits.push(fill(
                include_str!("../report/limits-snooping.md").trim_end(),
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
    let c = &sn.comparison;
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
    let seen: u64 = sn.snoop_counts.iter().filter_map(|c| c.seen).sum();
    let lost: u64 = sn.snoop_counts.iter().filter_map(|c| c.lost).sum();
    let cpu_per_op = |counts: &[crate::tracers::Counts], k: usize| {
        let cpu: u64 = counts.iter().filter_map(|c| c.cpu_ns).sum();
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
        include_str!("../report/3-snooping-tracers.md"),
        &[
            ("seen", seen.to_string()),
            ("lost", lost.to_string()),
            ("bpf", format!("{:.1}", cpu_per_op(&sn.snoop_counts, 2))),
            (
                "tracefs",
                format!("{:.1}", cpu_per_op(&sn.snoop_tracefs_counts, 6)),
            ),
            (
                "bpftrace",
                format!("{:.1}", cpu_per_op(&sn.bpftrace_counts, 3)),
            ),
        ],
    );
    let killed = [
        &sn.snoop_counts,
        &sn.bpftrace_counts,
        &sn.snoop_tracefs_counts,
    ]
    .iter()
    .flat_map(|c| c.iter())
    .filter(|c| c.killed)
    .count();
    if killed > 0 {
        let _ = writeln!(
            s,
            "\n{killed} tracer stop(s) took longer than {} s after SIGINT: killed, their runs kept              (measured before the signal), their own counts missing.",
            crate::tracers::STOP_BOUND.as_secs()
        );
    }
    part(include_str!("../report/3-snooping-cost.md"), s, g, limits)
}

/// Section 4: what each tracer costs per probe firing.
pub fn firing(c: &Comparison) -> Part {
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
            include_str!("../report/limits-firing-floors.md").trim_end(),
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
        let parts = paragraphs(include_str!("../report/limits-firing.md"));
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
    let mut s = String::new();
    let _ = writeln!(s, "\n{}\n| tracer | events/s | ns per event | cost per firing (ns) | ÷ bare uprobe |\n|---|---|---|---|---|", fill(include_str!("../report/4-per-firing-cost.md"), &[("rounds", c.samples[0][0].len().to_string())]));
    let costs = firing_costs(c);
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
    Part {
        text: s,
        failures: c.failures.clone(),
        goals: g,
        limits,
    }
}

/// Section 5: the event rates the snooper keeps up with.
pub fn loss(loss: &Result<Vec<LossStep>>, b: &Budget) -> Part {
    let mut g = Vec::new();
    if let Ok(steps) = loss {
        let best = zero_loss_rate(steps);
        g.push((
            "highest event rate with zero loss".to_string(),
            "≥ 1M events/s",
            best.map_or("none without loss".into(), |b| {
                format!("{} events/s", ops(b))
            }),
            Some(best.is_some_and(|b| b >= 1e6)),
        ));
    }
    let mut s = String::new();
    let _ = write!(
        s,
        "\n{}\n",
        fill(
            include_str!("../report/5-event-rate.md"),
            &[("run", format!("{:.2}", b.run.as_secs_f64()))]
        )
    );
    match loss {
        Ok(steps) => {
            let _ = writeln!(
                s,
                "| target events/s | firing threads | achieved events/s | fired | seen | lost | snooper CPU ns/event |\n|---|---|---|---|---|---|---|"
            );
            for st in steps {
                let opt = |x: Option<u64>| x.map_or("?".into(), |v| v.to_string());
                let target = if st.target_rate == 0.0 {
                    "unpaced".into()
                } else {
                    ops(st.target_rate)
                };
                let cpu = st.counts.cpu_ns.zip(st.counts.seen);
                let cpu = cpu.map_or("?".into(), |(c, n)| {
                    format!("{:.0}", c as f64 / n.max(1) as f64)
                });
                let _ = writeln!(
                    s,
                    "| {target} | {} | {} | {} | {} | {} | {cpu} |",
                    st.threads,
                    ops(st.achieved_rate),
                    st.fired,
                    opt(st.counts.seen),
                    opt(st.counts.lost),
                );
            }
        }
        Err(e) => {
            let _ = writeln!(s, "not measured: {e:#}");
        }
    }
    Part {
        text: s,
        failures: loss
            .as_ref()
            .err()
            .map(|e| format!("{e:#}"))
            .into_iter()
            .collect(),
        goals: g,
        limits: Vec::new(),
    }
}

/// Section 6: RSS after writing the same nodes to each daemon.
pub fn memory(mem: &[(String, Result<Rss>)], b: &Budget) -> Part {
    let mut g = Vec::new();
    let rss = |label: &str| rss_of(mem, label).map(|r| r.after_kib as f64);
    let shim_vs_c = rss("shim").zip(rss("C xenstored")).map(|(a, b)| a / b);
    g.push((
        format!("shim RSS ÷ C xenstored RSS, {} nodes", b.memory_nodes),
        "≤ 1.0",
        shim_vs_c.map_or(String::new(), |x| format!("{x:.2}")),
        shim_vs_c.map(|x| x <= 1.0),
    ));
    let mut limits = Vec::new();
    let per_node = |label: &str| {
        rss_of(mem, label)
            .map(|x| (x.after_kib - x.before_kib) as f64 * 1024.0 / b.memory_nodes as f64)
    };
    let values: f64 = (0..b.memory_nodes)
        .map(crate::memory::value_len)
        .sum::<usize>() as f64
        / b.memory_nodes as f64;
    if let (Some(shim), Some(c)) = (per_node("shim"), per_node("C xenstored")) {
        limits.push(fill(
            include_str!("../report/limits-memory.md").trim_end(),
            &[
                ("shim", format!("{shim:.0}")),
                ("c", format!("{c:.0}")),
                ("values", format!("{values:.0}")),
            ],
        ));
    }
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\n{}\n| daemon | RSS before (KiB) | RSS after (KiB) | ÷ C xenstored |\n|---|---|---|---|",
        fill(
            include_str!("../report/6-memory.md"),
            &[("nodes", b.memory_nodes.to_string())]
        )
    );
    let c_after = rss_of(mem, "C xenstored").map(|r| r.after_kib as f64);
    for (label, rss) in mem {
        match rss {
            Ok(x) => {
                let _ = writeln!(
                    s,
                    "| {label} | {} | {} | {} |",
                    x.before_kib,
                    x.after_kib,
                    ratio(c_after.map(|c| x.after_kib as f64 / c))
                );
            }
            Err(e) => {
                let _ = writeln!(s, "| {label} | not measured: {e:#} | | |");
            }
        }
    }
    Part {
        text: s,
        failures: Vec::new(),
        goals: g,
        limits,
    }
}

/// Section 9: `--metrics` against unsnooped and full tracing.
pub fn metrics(m: &MetricsResult) -> Part {
    let mut g = Vec::new();
    let c = &m.comparison;
    let (measured, min) = ratios(c, 1, 0, |case| case.conns == 1, true);
    g.push((
        "--metrics ÷ unsnooped ops/s, 1 connection (pinned)".to_string(),
        "≥ 0.95",
        measured,
        min.map(|x| x >= 0.95),
    ));
    g.extend(crate::metrics_report::goals(m));
    let mut s = String::new();
    let mut ratios = vec![("metrics ÷ shim", 1, 0), ("tracing ÷ shim", 2, 0)];
    if m.comparison.configs.len() > crate::metrics_mode::CONFIGS.len() {
        // --shim-before's build (configs 5, 6, 7) in the same run.
        ratios.extend([
            ("before: metrics ÷ shim", 6, 5),
            ("before: tracing ÷ shim", 7, 5),
            ("shim ÷ shim (before)", 0, 5),
        ]);
    }
    s += &table(&m.comparison, &ratios, &ratios);
    if m.killed > 0 {
        let _ = writeln!(
            s,
            "\n{} tracer stop(s) took longer than {} s after SIGINT: killed, their runs kept \
             (measured before the signal).",
            m.killed,
            crate::tracers::STOP_BOUND.as_secs()
        );
    }
    s += &crate::metrics_report::exporter_memory(m);
    let mut p = part(
        include_str!("../report/9-metrics-mode.md"),
        s,
        g,
        crate::metrics_report::limits(m),
    );
    p.failures = m.comparison.failures.clone();
    p
}

/// Section 7: 5-byte against 1-byte nop sites, one firing per op against two.
pub fn sites(sites: &SitesResult) -> Part {
    let mut s = String::new();
    s += &table(
        &sites.per_op.comparison,
        &[
            ("nop5 reply ÷ none", 1, 0),
            ("nop5 paired ÷ none", 2, 0),
            ("nop1 reply ÷ none", 4, 3),
            ("nop1 paired ÷ none", 5, 3),
        ],
        &[
            ("nop5 reply ÷ none", 1, 0),
            ("nop5 paired ÷ none", 2, 0),
            ("nop1 reply ÷ none", 4, 3),
            ("nop1 paired ÷ none", 5, 3),
        ],
    );
    let (seen, lost) = sites.per_op.snoop_counts.iter().fold((0, 0), |(s, l), c| {
        (s + c.seen.unwrap_or(0), l + c.lost.unwrap_or(0))
    });
    let _ = writeln!(
        s,
        "\nxenstore-snoop over these runs reported {seen} events seen, {lost} lost.\n"
    );
    let c = &sites.per_firing;
    s += &fill(
        include_str!("../report/7-probe-sites-firing.md"),
        &[("rounds", c.samples[0][0].len().to_string())],
    );
    let cost = |k: usize, none: usize| Some(ns_per_event(c, k)? - ns_per_event(c, none)?);
    for (k, what) in [(1, "bare uprobe, no reader"), (2, "uprobe, no fetch args")] {
        let (nop5, nop1) = (cost(k, 0), cost(k + 3, 3));
        let per = |x: Option<f64>| x.map_or("–".into(), |v| format!("{v:.0}"));
        let _ = writeln!(
            s,
            "| {what} | {} | {} | {} |",
            per(nop5),
            per(nop1),
            ratio(nop5.zip(nop1).map(|(a, b)| a / b))
        );
    }
    s += &failures(c);
    part(
        include_str!("../report/7-probe-sites.md"),
        s,
        Vec::new(),
        Vec::new(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::affinity::Pin;
    use crate::compare::Case;
    use crate::stats::Sample;
    use crate::tracers::Counts;
    use crate::workload::Workload;

    /// A comparison of `configs` configurations whose figures differ per
    /// case, configuration and round, so every cell and ratio is distinct.
    fn comparison(configs: usize) -> Comparison {
        let names: Vec<String> = (0..configs).map(|k| format!("config {k}")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let cases = vec![
            Case::raw(Workload::Read, 1, Pin::Cpu0),
            Case::raw(Workload::Write, 8, Pin::Free),
        ];
        let mut round = 0u64;
        Comparison::run("fixture", &names, cases, 2, |case, k| {
            round += 1;
            let x = (case.conns as f64) * 1000.0 + (k as f64) * 37.0 + (round % 3) as f64;
            Ok(Sample {
                ops: 1000 + round,
                ops_per_s: 50_000.0 - x,
                p50_us: 10.0 + x / 1000.0,
                p99_us: 40.0 + x / 500.0,
                daemon_cpu_us: 5.0 + x / 2000.0,
            })
        })
    }

    fn counts(n: u64) -> Vec<Counts> {
        vec![Counts {
            seen: Some(1000 * n),
            lost: Some(n),
            cpu_ns: Some(77_000 * n),
            killed: false,
        }]
    }

    fn snoop_result(configs: usize) -> SnoopResult {
        SnoopResult {
            comparison: comparison(configs),
            snoop_counts: counts(1),
            bpftrace_counts: counts(2),
            snoop_tracefs_counts: counts(3),
        }
    }

    fn head() -> Head {
        Head {
            machine: Machine {
                cpus: 2,
                cpu_model: "a CPU".into(),
                kernel: "6.18".into(),
                date: "today".into(),
                load: "0.10".into(),
                foreign_tracers: vec![],
            },
            load_after: "0.20".into(),
            budget: budget(),
            elapsed: Duration::from_secs(60),
        }
    }

    fn budget() -> Budget {
        Budget {
            run: Duration::from_millis(250),
            rounds: 2,
            idle_rounds: 2,
            memory_nodes: 1000,
            quick: true,
        }
    }

    fn exporter(domains: u32, rss_kib: u64) -> Result<crate::metrics_mode::ExporterAt> {
        Ok(crate::metrics_mode::ExporterAt {
            domains,
            rss_kib,
            series: 3000,
            bytes: 100_000,
        })
    }

    /// Every plain section measured, with made-up figures, in the table's
    /// order (sections.rs).
    pub fn every_section() -> Vec<Part> {
        let rss = |before_kib, after_kib| {
            Ok(Rss {
                before_kib,
                after_kib,
            })
        };
        vec![
            throughput(&Comparison {
                configs: ["shim", "C xenstored", "oxenstored"]
                    .map(String::from)
                    .to_vec(),
                ..comparison(3)
            }),
            idle(&comparison(2)),
            snoop(&snoop_result(7)),
            firing(&comparison(8)),
            loss(
                &Ok(vec![LossStep {
                    target_rate: 100_000.0,
                    threads: 1,
                    achieved_rate: 99_000.0,
                    fired: 25_000,
                    counts: counts(4)[0],
                }]),
                &budget(),
            ),
            memory(
                &[
                    ("shim".into(), rss(1000, 5000)),
                    ("C xenstored".into(), rss(900, 9000)),
                ],
                &budget(),
            ),
            metrics(&MetricsResult {
                comparison: comparison(5),
                killed: 0,
                at_1000: exporter(1000, 4096),
                at_2000: exporter(2000, 4100),
            }),
            sites(&SitesResult {
                per_op: snoop_result(6),
                per_firing: comparison(6),
            }),
        ]
    }

    /// Each section measured is rendered once, in the report's order,
    /// after the goals; one not measured is left out.
    #[test]
    fn every_section_measured_is_rendered_once_in_order() {
        let headings = [
            "## Goals",
            "## 1. Throughput and latency",
            "## 2. Idle probes",
            "## 3. Snooping cost",
            "## 4. Per-firing cost",
            "## 5. Event rate without loss",
            "## 6. Memory",
            "## 9. Metrics mode",
            "## 7. Probe sites and probes attached",
        ];
        let text = render(&head(), &every_section());
        let at: Vec<usize> = headings
            .iter()
            .map(|h| {
                assert_eq!(text.matches(h).count(), 1, "{h} once in:\n{text}");
                text.find(h).unwrap()
            })
            .collect();
        assert!(at.windows(2).all(|w| w[0] < w[1]), "out of order:\n{text}");
        assert!(text.contains("What limits the figures:"), "{text}");

        let mut some = every_section();
        some.remove(5);
        some.remove(2);
        let text = render(&head(), &some);
        assert!(!text.contains("## 3. Snooping cost"), "{text}");
        assert!(!text.contains("## 6. Memory"), "{text}");
        assert!(text.contains("## 4. Per-firing cost"), "{text}");
    }
}
