//! S5's and S2's tables: one column a daemon, one row a number of idle
//! connections, the last row what grows with the host.

use crate::idle_hosts::{Curve, Point, ScaleResult, FLOOR, WATCHES_PER_CONN};
use crate::scale::cell;
use crate::scale::head;
use crate::scale::GoalRow;
use crate::stats::Sample;
use crate::template::{fill, paragraphs};
use std::fmt::Write;

/// What S5 and S2 share: how their hosts were built and measured.
pub fn hosts_text(sockets: &ScaleResult, domains: &ScaleResult, section: &str) -> String {
    fill(
        include_str!("../../report/idle-hosts.md"),
        &[
            ("watches", WATCHES_PER_CONN.to_string()),
            ("idle_watches", (WATCHES_PER_CONN - 1).to_string()),
            ("rounds", sockets.rounds.to_string()),
            ("run", format!("{:.2}", sockets.run.as_secs_f64())),
            (
                "elapsed",
                format!("{:.0}", (sockets.elapsed + domains.elapsed).as_secs_f64()),
            ),
            ("section", section.to_string()),
        ],
    )
}

/// The two runs' headings.
pub const WHOM: [&str; 2] = [
    "N idle dom0 connections",
    "N idle dom0 connections and N idle domains on rings",
];

/// Why a daemon ran without the idle domains the plan asked for.
pub fn no_domains(r: &ScaleResult) -> String {
    (r.curves.iter())
        .filter_map(|c| {
            Some(format!(
                "\n{} ran without idle domains: {}\n",
                c.label,
                c.no_domains.as_ref()?
            ))
        })
        .collect()
}

pub fn table(r: &ScaleResult, pick: impl Fn(&Point) -> Sample, with_zero: bool) -> String {
    let mut s = head("N × 15 watches", r.curves.iter().map(|c| &c.label));
    for (row, &n) in r.levels.iter().enumerate() {
        if n == 0 && !with_zero {
            continue;
        }
        let _ = write!(s, "| {n} |");
        for c in &r.curves {
            let cell = match &c.points {
                Ok(points) => points.get(row).map(|p| cell(&pick(p))),
                Err(_) => None,
            };
            let _ = write!(s, " {} |", cell.unwrap_or_else(|| "–".into()));
        }
        s += "\n";
    }
    if let Some((first, last)) = ends(r) {
        let _ = write!(
            s,
            "| CPU per request, N={} ÷ N={} |",
            r.levels[last], r.levels[first]
        );
        for c in &r.curves {
            let cell = growth(c, &pick, first, last).map_or("–".into(), |g| {
                if g.rounds > 1 {
                    format!("**{:.2}×** ({:.2}–{:.2})", g.ratio, g.lowest, g.highest)
                } else {
                    format!("**{:.2}×**", g.ratio)
                }
            });
            let _ = write!(s, " {cell} |");
        }
        s += "\n";
    }
    for c in &r.curves {
        if let Err(e) = &c.points {
            let _ = writeln!(s, "\n{}: {e:#}", c.label);
        }
    }
    s
}

/// The smallest N > 0 and the largest, as level indices.
pub fn ends(r: &ScaleResult) -> Option<(usize, usize)> {
    let first = r.levels.iter().position(|&n| n > 0)?;
    let last = r.levels.len().checked_sub(1)?;
    (first < last).then_some((first, last))
}

/// How a daemon's CPU per request grew from level `first` to `last`.
pub struct Growth {
    /// Of the medians over rounds (the table's cells).
    pub ratio: f64,
    /// Of the rounds' own pairs (each round ran every level side by side)
    /// and `ratio`: with a single round, that ratio itself.
    pub lowest: f64,
    pub highest: f64,
    pub rounds: usize,
}

pub fn growth(
    c: &Curve,
    pick: &impl Fn(&Point) -> Sample,
    first: usize,
    last: usize,
) -> Option<Growth> {
    let points = c.points.as_ref().ok()?;
    let ratio = pick(points.get(last)?).daemon_cpu_us / pick(points.get(first)?).daemon_cpu_us;
    let per_round: Vec<f64> = (c.by_round.get(first)?.iter())
        .zip(c.by_round.get(last)?)
        .map(|(a, b)| pick(b).daemon_cpu_us / pick(a).daemon_cpu_us)
        .collect();
    Some(Growth {
        ratio,
        lowest: per_round.iter().fold(ratio, |lo, &x| lo.min(x)),
        highest: per_round.iter().fold(ratio, |hi, &x| hi.max(x)),
        rounds: per_round.len(),
    })
}

/// Issue 26's goal for S5 held against the first shim's curve, with the
/// floor's beside it: met only if every round's pair is within the bound,
/// missed if none is; otherwise (or with a single round) this run cannot
/// tell. The line under the table, and the goals table's row.
pub fn goal(
    r: &ScaleResult,
    pick: impl Fn(&Point) -> Sample,
    scenario: &str,
) -> Option<(String, GoalRow)> {
    const BOUND: f64 = 1.1;
    let (first, last) = ends(r)?;
    let (shim, g) = (r.curves.first())
        .filter(|c| c.label != FLOOR)
        .and_then(|c| Some((c, growth(c, &pick, first, last)?)))?;
    let (met, verdict) = if g.rounds < 2 {
        (None, "**unresolved** (one round cannot tell)")
    } else if g.highest <= BOUND {
        (Some(true), "**met**")
    } else if g.lowest > BOUND {
        (Some(false), "**missed**")
    } else {
        (None, "**unresolved** (rounds on both sides of the bound)")
    };
    let measured = format!(
        "{:.2}× ({:.2}–{:.2} over {} round(s))",
        g.ratio, g.lowest, g.highest, g.rounds
    );
    let [line, floor] = *paragraphs(include_str!("../../report/s5-goal.md")) else {
        panic!("s5-goal.md: the line, then the floor's clause");
    };
    let floor = (r.curves.iter().find(|c| c.label == FLOOR))
        .and_then(|c| growth(c, &pick, first, last))
        .map_or(String::new(), |f| {
            fill(
                floor,
                &[
                    ("floor_label", FLOOR.to_string()),
                    ("ratio", format!("{:.2}", f.ratio)),
                    ("lowest", format!("{:.2}", f.lowest)),
                    ("highest", format!("{:.2}", f.highest)),
                ],
            )
        });
    let s = fill(
        line,
        &[
            ("scenario", scenario.to_string()),
            ("label", shim.label.clone()),
            ("to", r.levels[last].to_string()),
            ("from", r.levels[first].to_string()),
            ("measured", measured.clone()),
            ("bound", BOUND.to_string()),
            ("verdict", verdict.to_string()),
            ("floor", floor),
        ],
    );
    let row = (
        format!(
            "{scenario}: CPU per request, N={} ÷ N={}",
            r.levels[last], r.levels[first]
        ),
        "≤ 1.1×",
        measured,
        met,
    );
    Some((format!("\n{s}\n"), row))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::time::Duration;

    /// S2 spread at N=10 and N=1000 costing `cpu` µs a write.
    pub(crate) fn point(cpu: f64) -> Point {
        Point {
            fan_out: Sample {
                daemon_cpu_us: cpu,
                ..Sample::default()
            },
            ..Point::default()
        }
    }

    /// A daemon's curve at N = 0, 10, 1000.
    pub(crate) fn curve(label: &str, at_10: Point, at_1000: Point) -> Curve {
        Curve {
            label: label.into(),
            points: Ok(vec![Point::default(), at_10, at_1000]),
            by_round: vec![vec![Point::default()], vec![at_10], vec![at_1000]],
            no_domains: None,
        }
    }

    /// A run at N = 0, 10, 1000 of `curves`, nothing timed.
    pub(crate) fn run_of(curves: Vec<Curve>) -> ScaleResult {
        ScaleResult {
            levels: vec![0, 10, 1000],
            curves,
            run: Duration::ZERO,
            rounds: 1,
            elapsed: Duration::ZERO,
        }
    }

    /// Three rounds at N=10 and N=1000: the shim 4.0/4.0/4.0 → 4.2/4.3/4.8
    /// (per round 1.05, 1.075, 1.20; medians 4.0 → 4.3, 1.075×), the
    /// floor 3.0 → 3.6 in every round (1.20×).
    pub(crate) fn three_rounds(shim_at_1000: [f64; 3]) -> ScaleResult {
        let rounds = |label: &str, at_10: [f64; 3], at_1000: [f64; 3]| {
            let median = |v: [f64; 3]| crate::stats::median(v.to_vec());
            Curve {
                by_round: vec![
                    vec![Point::default(); 3],
                    at_10.map(point).to_vec(),
                    at_1000.map(point).to_vec(),
                ],
                ..curve(label, point(median(at_10)), point(median(at_1000)))
            }
        };
        ScaleResult {
            rounds: 3,
            ..run_of(vec![
                rounds("shim", [4.0; 3], shim_at_1000),
                rounds(FLOOR, [3.0; 3], [3.6; 3]),
            ])
        }
    }

    #[test]
    fn the_ratio_row_gives_the_rounds_range() {
        let text = table(&three_rounds([4.2, 4.3, 4.8]), |p| p.fan_out, false);
        assert!(
            text.contains("| CPU per request, N=1000 ÷ N=10 | **1.07×** (1.05–1.20) | **1.20×** (1.20–1.20) |"),
            "{text}"
        );
    }

    #[test]
    fn the_goal_is_met_only_when_every_round_is_within_it() {
        let unresolved = goal(&three_rounds([4.2, 4.3, 4.8]), |p| p.fan_out, "S2")
            .unwrap()
            .0;
        assert!(
            unresolved.contains(
                "Goal (issue 26, S2), shim: CPU per request, N=1000 ÷ N=10, 1.07× \
                 (1.05–1.20 over 3 round(s)) (≤ 1.1×): **unresolved**"
            ),
            "{unresolved}"
        );
        assert!(
            unresolved.contains("read 1.20× (1.20–1.20)"),
            "{unresolved}"
        );
        let met = goal(&three_rounds([4.2, 4.3, 4.36]), |p| p.fan_out, "S2")
            .unwrap()
            .0;
        assert!(
            met.contains("(1.05–1.09 over 3 round(s)) (≤ 1.1×): **met**"),
            "{met}"
        );
        let missed = goal(&three_rounds([4.5, 4.6, 4.8]), |p| p.fan_out, "S2").unwrap();
        assert_eq!(missed.1 .3, Some(false));
        let missed = missed.0;
        assert!(missed.contains("**missed**"), "{missed}");
        let one = goal(
            &run_of(vec![curve("shim", point(4.0), point(4.2))]),
            |p| p.fan_out,
            "S2",
        )
        .unwrap()
        .0;
        assert!(
            one.contains("1.05× (1.05–1.05 over 1 round(s)) (≤ 1.1×): **unresolved** (one round"),
            "{one}"
        );
    }
}
