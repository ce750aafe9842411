//! The metrics section: the shim unsnooped, under `xenstore-snoop
//! --metrics` (counting in the kernel, from the daemon's batched records)
//! and under full tracing (the BPF back end, every reply to user space),
//! side by side with two floors (an empty program on a per-op probe and on
//! the batched one); and the exporter's
//! resident memory with 1000 live domains, each of which made a request,
//! and with twice as many (past its cap on domains with series of their
//! own): what bounds it.

use super::{
    killed_note, ok, on_daemons, part, ratios, seeded, table, Attach, Budget, OnDaemon, MAX_CONNS,
};
use crate::affinity::Pin;
use crate::builds::{Before, Builds};
use crate::client::Conn;
use crate::compare::{Case, Comparison};
use crate::daemons;
use crate::daemons::{rss_kib, scratch_dir};
use crate::scale::{GoalRow, Part};
use crate::template::fill;
use crate::tracers::{Tracer, TracerKind, MARKER};
use crate::workload::Workload;
use anyhow::{Context, Result};
use std::path::Path;
use std::time::Duration;
use xenstore_proto::wire::MsgType;
use xenstore_testkit::wait::wait_until;
use xenstore_testkit::Shim;

/// Live domains for the exporter's memory figure.
pub const DOMAINS: u32 = 1000;
/// The exporter's default --metrics-max-domains (xenstore-snoop's cli.rs).
pub const CAP: u32 = 1024;

pub struct MetricsResult {
    /// unsnooped, --metrics, full tracing.
    pub comparison: Comparison,
    pub at_1000: Result<ExporterAt>,
    /// At 2 × DOMAINS live domains, past CAP.
    pub at_2000: Result<ExporterAt>,
}

/// The exporter with `domains` live domains.
pub struct ExporterAt {
    pub domains: u32,
    pub rss_kib: u64,
    /// Sample lines in the textfile, and its bytes.
    pub series: usize,
    pub bytes: usize,
}

pub const CONFIGS: [&str; 5] = [
    "shim",
    "shim + xenstore-snoop --metrics",
    "shim + xenstore-snoop (bpf)",
    "shim + a BPF program on reply_stats that only tests a map (bpftrace)",
    "shim + a BPF program on stats_batch that only tests a map (bpftrace)",
];

/// With `--shim-before`: that build unsnooped, under --metrics and under
/// full tracing (configs 5, 6 and 7, after CONFIGS).
pub const BEFORE_CONFIGS: [&str; 3] = [
    "shim (before)",
    "shim (before) + xenstore-snoop --metrics",
    "shim (before) + xenstore-snoop (bpf)",
];

pub fn measure(b: &Builds, budget: &Budget, before: Option<&Before>) -> MetricsResult {
    let shim = seeded(daemons::shim("shim", &b.shim));
    let shim_before = before.map(|x| seeded(daemons::shim("shim (before)", &x.shim)));
    let (metrics_before, full_before) = match before {
        Some(x) => (
            Some(TracerKind::Metrics {
                binary: x.snoop.clone(),
            }),
            Some(TracerKind::Snoop {
                binary: x.snoop.clone(),
                args: vec!["--backend".into(), "bpf".into()],
            }),
        ),
        None => (None, None),
    };
    let metrics = TracerKind::Metrics {
        binary: b.snoop.clone(),
    };
    let full = TracerKind::Snoop {
        binary: b.snoop.clone(),
        args: vec!["--backend".into(), "bpf".into()],
    };
    // The floor of any per-op BPF counter: the trap and the kernel's entry
    // into a program on reply_stats, a probe firing once per op. Then the
    // floor of --metrics itself: the daemon's records and one trap per
    // batch, counting nothing. Line-buffered: each prints once, the attach
    // marker, which must reach the file.
    let empty_on = |probe: &str| {
        empty_program(probe).map(|script| TracerKind::Bpftrace {
            script,
            buffering: "line",
        })
    };
    let (per_op_floor, batch_floor) = (empty_on("reply_stats"), empty_on("stats_batch"));
    let cases = vec![
        Case::raw(Workload::Read, 1, Pin::Cpu0),
        Case::raw(Workload::Write, 1, Pin::Cpu0),
        Case::raw(Workload::Read, MAX_CONNS, Pin::Free),
        Case::raw(Workload::Write, MAX_CONNS, Pin::Free),
    ];
    let on = |tracer, shim| Ok(Attach::Tracer(tracer, shim));
    let floor = |f| ok(f).map(|t| Attach::Tracer(t, &b.shim));
    let mut configs: Vec<OnDaemon> = vec![
        (CONFIGS[0], &shim, Ok(Attach::Nothing)),
        (CONFIGS[1], &shim, on(&metrics, &b.shim)),
        (CONFIGS[2], &shim, on(&full, &b.shim)),
        (CONFIGS[3], &shim, floor(&per_op_floor)),
        (CONFIGS[4], &shim, floor(&batch_floor)),
    ];
    if let (Some(x), Some(d), Some(metrics), Some(full)) =
        (before, &shim_before, &metrics_before, &full_before)
    {
        configs.push((BEFORE_CONFIGS[0], d, Ok(Attach::Nothing)));
        configs.push((BEFORE_CONFIGS[1], d, on(metrics, &x.shim)));
        configs.push((BEFORE_CONFIGS[2], d, on(full, &x.shim)));
    }
    let comparison = on_daemons("metrics", &configs, cases, budget.rounds, budget.run);
    MetricsResult {
        comparison,
        at_1000: exporter_at(b, DOMAINS),
        at_2000: exporter_at(b, 2 * DOMAINS),
    }
}

/// bpftrace on `probe` testing one map a firing; it prints the attach
/// marker once, on its first firing, for Tracer::attach.
fn empty_program(probe: &str) -> Result<std::path::PathBuf> {
    let script = scratch_dir(&format!("metrics-floor-{probe}"))?.join("floor.bt");
    std::fs::write(
        &script,
        format!(
            "usdt:$1:xenstore:{probe} /@shown == 0/ {{ @shown = 1; printf(\"{}\\n\"); }}\n",
            crate::tracers::MARKER
        ),
    )?;
    Ok(script)
}

/// The exporter's RSS once its textfile shows `domains` live domains, each
/// of which made a request, counted (domain DOMAINS's series is there).
fn exporter_at(b: &Builds, domains: u32) -> Result<ExporterAt> {
    let dir = scratch_dir(&format!("metrics-{domains}"))?;
    let shim = Shim::launch(
        &format!("shim {domains} domains"),
        &b.shim,
        dir.clone(),
        &[],
    )?;
    let mut dom0 = Conn::connect(&shim.socket)?;
    for domid in 1..=domains {
        let id = format!("{domid}\0");
        dom0.call(MsgType::Introduce, 0, &[id.as_bytes(), b"4242\0", b"7\0"])?
            .ok()
            .with_context(|| format!("INTRODUCE {domid}"))?;
        let name = format!("/local/domain/{domid}/name\0");
        dom0.write(0, name.as_bytes(), format!("guest-{domid}").as_bytes())?
            .ok()?;
    }
    let metrics = TracerKind::Metrics {
        binary: b.snoop.clone(),
    };
    let mark = || dom0.read(MARKER.as_bytes()).map(|_| ());
    let exporter = Tracer::attach(&metrics, shim.pid(), &b.shim, mark)?;
    // Each domain asks once over its own socket, so each has counts.
    ask_from_every_domain(&shim.run_dir, domains)?;
    let want = format!("xenstore_domain_requests_total{{domid=\"{DOMAINS}\"}}");
    let prom = exporter.dir().join("xenstore.prom");
    let mut text = String::new();
    wait_until(
        &format!("the textfile to show {want}"),
        Duration::from_secs(60),
        || {
            text = std::fs::read_to_string(&prom).unwrap_or_default();
            text.contains(&want)
        },
    )?;
    Ok(ExporterAt {
        domains,
        rss_kib: rss_kib(exporter.pid())?,
        series: text.lines().filter(|l| !l.starts_with('#')).count(),
        bytes: text.len(),
    })
}

fn ask_from_every_domain(run_dir: &Path, domains: u32) -> Result<()> {
    for domid in 1..=domains {
        let socket = run_dir.join("domain").join(domid.to_string());
        let mut c = Conn::connect(&socket).with_context(|| format!("{}", socket.display()))?;
        c.read(b"name\0")?;
    }
    Ok(())
}

/// Section 9: `--metrics` against unsnooped and full tracing.
pub fn render(m: &MetricsResult) -> Part {
    let mut g = Vec::new();
    let c = &m.comparison;
    let (measured, min) = ratios(c, 1, 0, |case| case.conns == 1, true);
    g.push((
        "--metrics ÷ unsnooped ops/s, 1 connection (pinned)".to_string(),
        "≥ 0.95",
        measured,
        min.map(|x| x >= 0.95),
    ));
    g.extend(goals(m));
    let mut s = String::new();
    let mut ratios = vec![("metrics ÷ shim", 1, 0), ("tracing ÷ shim", 2, 0)];
    if m.comparison.configs.len() > CONFIGS.len() {
        // --shim-before's build (configs 5, 6, 7) in the same run.
        ratios.extend([
            ("before: metrics ÷ shim", 6, 5),
            ("before: tracing ÷ shim", 7, 5),
            ("shim ÷ shim (before)", 0, 5),
        ]);
    }
    s += &table(&m.comparison, &ratios, &ratios);
    s += &killed_note(c.counts.iter().flatten().filter(|c| c.killed).count(), "");
    s += &exporter_memory(m);
    let mut p = part(
        include_str!("../../report/9-metrics-mode.md"),
        s,
        g,
        limits(m),
    );
    p.failures = m.comparison.failures.clone();
    p
}

/// At 2 × DOMAINS live domains the exporter may hold this much more than
/// at DOMAINS: past CAP nothing more is kept per domain.
const BOUND: f64 = 1.2;

fn one(x: &Result<ExporterAt>) -> String {
    match x {
        Ok(x) => format!(
            "{} live domains, each of which made a request: {} KiB resident, {} series, a {} KiB \
             textfile",
            x.domains,
            x.rss_kib,
            x.series,
            x.bytes / 1024
        ),
        Err(e) => format!("not measured: {e:#}"),
    }
}

/// The exporter's memory, as the section states it.
pub fn exporter_memory(m: &MetricsResult) -> String {
    "\n".to_string()
        + &fill(
            include_str!("../../report/9-metrics-exporter.md"),
            &[
                ("cap", CAP.to_string()),
                ("at_1000", one(&m.at_1000)),
                ("at_2000", one(&m.at_2000)),
            ],
        )
}

/// The section's goal rows beside its ops/s one.
pub fn goals(m: &MetricsResult) -> Vec<GoalRow> {
    vec![cpu_goal(m), rss_goal(m)]
}

/// "At least half of full tracing's cost removed", in the daemon's CPU per
/// op (the trap and the program run on its thread): unlike ops/s, it does
/// not move with what else the machine runs.
fn cpu_goal(m: &MetricsResult) -> GoalRow {
    let c = &m.comparison;
    let mut parts = Vec::new();
    let mut worst: Option<f64> = None;
    for (ci, case) in c.cases.iter().enumerate().filter(|(_, k)| k.conns == 1) {
        let cpu = |k| c.median(ci, k).map(|s| s.daemon_cpu_us);
        if let (Some(none), Some(metrics), Some(full)) = (cpu(0), cpu(1), cpu(2)) {
            let share = (metrics - none) / (full - none);
            let of_full = |k| cpu(k).map(|f| (f - none) / (full - none));
            let floor = match (of_full(4), of_full(3)) {
                (Some(batch), Some(per_op)) => format!(
                    " (an empty program on stats_batch: {batch:.2}; on reply_stats, per op: \
                     {per_op:.2})"
                ),
                _ => String::new(),
            };
            parts.push(format!("{} {share:.2}{floor}", case.workload.name()));
            worst = Some(worst.map_or(share, |w: f64| w.max(share)));
        }
    }
    (
        "--metrics' added daemon CPU per op ÷ full tracing's, 1 connection (pinned)".to_string(),
        "≤ 0.5",
        parts.join(", "),
        worst.map(|w| w <= 0.5),
    )
}

/// The goal "exporter RSS bounded and stated at 1000 domains".
fn rss_goal(m: &MetricsResult) -> GoalRow {
    let what = format!(
        "--metrics exporter RSS at {DOMAINS} domains, and at {} (cap {CAP})",
        2 * DOMAINS
    );
    match (&m.at_1000, &m.at_2000) {
        (Ok(a), Ok(b)) => {
            let growth = b.rss_kib as f64 / a.rss_kib as f64;
            (
                what,
                "stated; ≤ 1.2× at twice the domains",
                format!(
                    "{} KiB ({} series); {} KiB ({} series): {growth:.2}×",
                    a.rss_kib, a.series, b.rss_kib, b.series
                ),
                Some(growth <= BOUND),
            )
        }
        _ => (
            what,
            "stated; ≤ 1.2× at twice the domains",
            String::new(),
            None,
        ),
    }
}

/// Where --metrics' cost goes, from the pinned one-connection cases'
/// daemon CPU per op (schedstat: the uprobe's trap and the BPF program run
/// on the daemon's thread, so they are in it).
pub fn limits(m: &MetricsResult) -> Vec<String> {
    let c = &m.comparison;
    let mut notes = Vec::new();
    for (ci, case) in c.cases.iter().enumerate().filter(|(_, k)| k.conns == 1) {
        let cpu = |k| c.median(ci, k).map(|s| s.daemon_cpu_us);
        let (Some(none), Some(metrics), Some(full)) = (cpu(0), cpu(1), cpu(2)) else {
            continue;
        };
        let (added, full_added) = ((metrics - none) * 1e3, (full - none) * 1e3);
        let added_by = |k| cpu(k).map(|f| (f - none) * 1e3);
        // A template's text, its trailing newline dropped: these join into one note.
        let text = |t: &str, values: &[(&str, String)]| fill(t.trim_end_matches('\n'), values);
        let batch_floor = added_by(4).map_or(String::new(), |b| {
            let counting = if added > b {
                format!(
                    "counting the records in maps adds the other {:.0} ns",
                    added - b
                )
            } else {
                "counting the records in maps adds nothing this run could tell apart".to_string()
            };
            text(
                include_str!("../../report/limits-metrics-batch.md"),
                &[("floor", format!("{b:.0}")), ("counting", counting)],
            )
        });
        let per_op_floor = added_by(3).map_or(String::new(), |f| {
            text(
                include_str!("../../report/limits-metrics-per-op.md"),
                &[
                    ("floor", format!("{f:.0}")),
                    ("share", format!("{:.0}", 100.0 * f / full_added)),
                ],
            )
        });
        let ratio = |x: Option<f64>| x.map_or("?".into(), |x| format!("{x:.3}"));
        notes.push(text(
            include_str!("../../report/limits-metrics.md"),
            &[
                ("case", case.describe().replace(" | ", ", ")),
                ("none", format!("{none:.2}")),
                ("metrics", format!("{metrics:.2}")),
                ("full", format!("{full:.2}")),
                ("added", format!("{added:.0}")),
                ("share", format!("{:.0}", 100.0 * added / full_added)),
                ("full_added", format!("{full_added:.0}")),
                ("cpu_ratio", ratio(c.cpu_ratio(ci, 1, 0))),
                ("ops_ratio", ratio(c.ratio(ci, 1, 0))),
                ("batch", xenstore_proto::stats::BATCH_RECORDS.to_string()),
                (
                    "flush_ms",
                    xenstore_proto::stats::FLUSH_AFTER_MS.to_string(),
                ),
                ("batch_floor", batch_floor),
                ("per_op_floor", per_op_floor),
            ],
        ));
    }
    notes
}
