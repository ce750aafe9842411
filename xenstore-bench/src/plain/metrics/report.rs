//! The metrics section's report text and goal rows that come from its own
//! measurements: the exporter's memory at 1000 and 2000 domains, and what
//! --metrics costs the daemon per op, against full tracing.

use super::{ExporterAt, MetricsResult, CAP, DOMAINS};
use crate::scale::GoalRow;
use crate::template::fill;
use anyhow::Result;

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
            include_str!("../../../report/9-metrics-exporter.md"),
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
                include_str!("../../../report/limits-metrics-batch.md"),
                &[("floor", format!("{b:.0}")), ("counting", counting)],
            )
        });
        let per_op_floor = added_by(3).map_or(String::new(), |f| {
            text(
                include_str!("../../../report/limits-metrics-per-op.md"),
                &[
                    ("floor", format!("{f:.0}")),
                    ("share", format!("{:.0}", 100.0 * f / full_added)),
                ],
            )
        });
        let ratio = |x: Option<f64>| x.map_or("?".into(), |x| format!("{x:.3}"));
        notes.push(text(
            include_str!("../../../report/limits-metrics.md"),
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
