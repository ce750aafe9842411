//! S4's part of the scale section: one row a number of domains, one
//! column a daemon; the goal row; what limits the figures.

use crate::s4_mass_destroy::{DeathResult, Point, DYING_EVERY};
use crate::scale::head;
use crate::template::fill;
use std::fmt::Write;
use std::time::Duration;

/// Issue 26's goal: 100 of 1000 dying, every watcher told within this.
const GOAL: Duration = Duration::from_secs(1);

pub fn render(r: &DeathResult) -> String {
    let mut s = fill(
        include_str!("../../report/s4-mass-destroy.md"),
        &[
            ("dying_every", DYING_EVERY.to_string()),
            ("rounds", r.rounds.to_string()),
            ("elapsed", format!("{:.0}", r.elapsed.as_secs_f64())),
        ],
    ) + "\n";
    s += &head("N (dying)", r.curves.iter().map(|c| &c.label));
    let rows = r
        .curves
        .iter()
        .filter_map(|c| c.points.as_ref().ok())
        .map(Vec::len)
        .max()
        .unwrap_or(0);
    for row in 0..rows {
        let point = |c: &crate::s4_mass_destroy::Curve| c.points.as_ref().ok()?.get(row).copied();
        let Some(first) = r.curves.iter().find_map(point) else {
            continue;
        };
        let _ = write!(s, "| {} ({}) |", first.domains, first.dying);
        for c in &r.curves {
            let _ = write!(s, " {} |", point(c).map_or("–".into(), |p| cell(&p)));
        }
        s += "\n";
    }
    for c in &r.curves {
        let goal = c.points.as_ref().ok().and_then(|p| {
            p.iter()
                .find(|p| p.domains == 1000)
                .map(|p| goal_line(&c.label, p))
        });
        if let Some(line) = goal {
            let _ = writeln!(s, "\n{line}");
        }
        if let Err(e) = &c.points {
            let _ = writeln!(s, "\n{}: {e:#}", c.label);
        }
    }
    s += "\n";
    s += include_str!("../../report/s4-limits.md");

    s
}

fn cell(p: &Point) -> String {
    format!(
        "{:.1} ms ({:.1}) · {}/{} · {} · {:.1}",
        p.notified.as_secs_f64() * 1e3,
        p.released.as_secs_f64() * 1e3,
        p.queries,
        p.firings,
        p.events_per_watcher,
        p.daemon_cpu_ms
    )
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
