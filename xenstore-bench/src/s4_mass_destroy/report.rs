//! S4's part of the scale section, and its big store's (a `####`
//! subsection): one row a level, one column a daemon, then each daemon's
//! goal or growth line.

use super::store::{self, DYING};
use super::{Curve, Deaths, Point, DYING_EVERY};
use crate::scale::head;
use crate::template::fill;
use std::fmt::Write;
use std::time::Duration;

/// Issue 26's goal: 100 of 1000 dying, every watcher told within this.
const GOAL: Duration = Duration::from_secs(1);

/// A table of `curves` under `intro`: a row a level (`key`), a cell a
/// point, then each curve's `note` or why it has none.
fn table<P: Copy>(
    intro: String,
    first: &str,
    curves: &[Curve<P>],
    key: impl Fn(&P) -> String,
    cell: impl Fn(&P) -> String,
    note: impl Fn(&str, &[P]) -> Option<String>,
) -> String {
    let mut s = intro + "\n" + &head(first, curves.iter().map(|c| &c.label));
    let point = |c: &Curve<P>, row: usize| c.points.as_ref().ok()?.get(row).copied();
    let rows = (curves.iter())
        .filter_map(|c| c.points.as_ref().ok().map(Vec::len))
        .max()
        .unwrap_or(0);
    for row in 0..rows {
        let Some(first) = curves.iter().find_map(|c| point(c, row)) else {
            continue;
        };
        let _ = write!(s, "| {} |", key(&first));
        for c in curves {
            let _ = write!(s, " {} |", point(c, row).map_or("–".into(), |p| cell(&p)));
        }
        s += "\n";
    }
    for c in curves {
        let line = match &c.points {
            Ok(points) => note(&c.label, points),
            Err(e) => Some(format!("{}: {e:#}", c.label)),
        };
        if let Some(line) = line {
            let _ = writeln!(s, "\n{line}");
        }
    }
    s
}

pub fn render(r: &Deaths<Point>) -> String {
    let intro = fill(
        include_str!("../../report/s4-mass-destroy.md"),
        &[
            ("dying_every", DYING_EVERY.to_string()),
            ("rounds", r.rounds.to_string()),
            ("elapsed", format!("{:.0}", r.elapsed.as_secs_f64())),
        ],
    );
    let cell = |p: &Point| {
        format!(
            "{:.1} ms ({:.1}) · {}/{} · {} · {:.1}",
            p.notified.as_secs_f64() * 1e3,
            p.released.as_secs_f64() * 1e3,
            p.queries,
            p.firings,
            p.events_per_watcher,
            p.daemon_cpu_ms
        )
    };
    let goal = |label: &str, points: &[Point]| {
        let p = points.iter().find(|p| p.domains == 1000)?;
        Some(goal_line(label, p))
    };
    let key = |p: &Point| format!("{} ({})", p.domains, p.dying);
    table(intro, "N (dying)", &r.curves, key, cell, goal)
        + "\n"
        + include_str!("../../report/s4-limits.md")
}

/// Issue 26's S4 goal at N=1000: told within a second, queries O(dying).
fn goal_line(label: &str, p: &Point) -> String {
    let fast = p.notified <= GOAL;
    let few = p.queries <= p.dying as u64;
    let verdict = |met: bool| if met { "met" } else { "not met" }.to_string();
    fill(
        include_str!("../../report/s4-goal.md").trim_end(),
        &[
            ("label", label.to_string()),
            ("dying", p.dying.to_string()),
            ("domains", p.domains.to_string()),
            ("told_ms", format!("{:.0}", p.notified.as_secs_f64() * 1e3)),
            ("goal_ms", GOAL.as_millis().to_string()),
            ("fast", verdict(fast)),
            ("queries", p.queries.to_string()),
            ("worst", (p.domains * p.dying).to_string()),
            ("few", verdict(few)),
        ],
    )
}

/// S4 in a big store, and each shim's growth from the smallest store to
/// the biggest.
pub fn render_store(r: &Deaths<store::Point>) -> String {
    let intro = fill(
        include_str!("../../report/s4-big-store.md"),
        &[
            ("dying", DYING.to_string()),
            ("rounds", r.rounds.to_string()),
            ("elapsed", format!("{:.0}", r.elapsed.as_secs_f64())),
        ],
    );
    let cell = |p: &store::Point| {
        let rss = if p.background >= 500 {
            format!("{:.0} B", p.rss_per_node)
        } else {
            "–".into()
        };
        format!(
            "{:.2} · {:.1} · {rss} · {:.1} µs",
            p.daemon_cpu_ms,
            p.released.as_secs_f64() * 1e3,
            p.setup_cpu_us_per_request
        )
    };
    let key = |p: &store::Point| format!("{} ({})", p.background, p.nodes);
    table(intro, "B (nodes)", &r.curves, key, cell, growth)
}

/// The release's CPU in the biggest store over the smallest.
fn growth(label: &str, points: &[store::Point]) -> Option<String> {
    let (small, big) = (points.first()?, points.last()?);
    if points.len() < 2 || small.daemon_cpu_ms <= 0.0 {
        return None;
    }
    Some(fill(
        include_str!("../../report/s4-big-store-growth.md").trim_end(),
        &[
            ("label", label.to_string()),
            ("dying", DYING.to_string()),
            (
                "times",
                format!("{:.2}", big.daemon_cpu_ms / small.daemon_cpu_ms),
            ),
            ("big", big.nodes.to_string()),
            ("small", small.nodes.to_string()),
            (
                "walk",
                format!("{:.0}", big.nodes as f64 / small.nodes as f64),
            ),
        ],
    ))
}
