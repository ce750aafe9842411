//! S4 in a big store's part of the report: a subsection of S4's (a
//! `####` heading, so S4's splice keeps it), one row a store size, one
//! column a shim, and each shim's growth from the smallest store to the
//! biggest.

use crate::s4_mass_destroy::store::{Curve, Point, StoreDeathResult, DYING};
use crate::scale::head;
use crate::template::fill;
use std::fmt::Write;

pub fn render(r: &StoreDeathResult) -> String {
    let mut s = fill(
        include_str!("../../report/s4-big-store.md"),
        &[
            ("dying", DYING.to_string()),
            ("rounds", r.rounds.to_string()),
            ("elapsed", format!("{:.0}", r.elapsed.as_secs_f64())),
        ],
    ) + "\n";
    s += &head("B (nodes)", r.curves.iter().map(|c| &c.label));
    let point = |c: &Curve, row: usize| c.points.as_ref().ok()?.get(row).copied();
    let rows = r
        .curves
        .iter()
        .filter_map(|c| c.points.as_ref().ok().map(Vec::len))
        .max()
        .unwrap_or(0);
    for row in 0..rows {
        let Some(first) = r.curves.iter().find_map(|c| point(c, row)) else {
            continue;
        };
        let _ = write!(s, "| {} ({}) |", first.background, first.nodes);
        for c in &r.curves {
            let cell = point(c, row).map_or("–".into(), |p| {
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
            });
            let _ = write!(s, " {cell} |");
        }
        s += "\n";
    }
    for c in &r.curves {
        match &c.points {
            Ok(points) => {
                if let Some(line) = growth(&c.label, points) {
                    let _ = writeln!(s, "\n{line}");
                }
            }
            Err(e) => {
                let _ = writeln!(s, "\n{}: {e:#}", c.label);
            }
        }
    }
    s
}

/// The release's CPU in the biggest store over the smallest.
fn growth(label: &str, points: &[Point]) -> Option<String> {
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
