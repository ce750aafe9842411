//! What the scale sections (S1-S5) share: what they measure and for how
//! long, and what each hands back.

use crate::daemons::{self, Start};
use crate::stats::Sample;
use std::path::PathBuf;
use std::time::Duration;
use xenstore_testkit::upstream::Flavor;

/// How big a scale section's run is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Size {
    /// A few small N, shims and floor only, a tenth of a second a run: CI.
    Smoke,
    Quick,
    Full,
}

/// What the scale sections (S1–S5) measure, and for how long.
pub struct Scale {
    /// (label, binary): the workspace's shim, then `--shim-before`'s.
    pub shims: Vec<(String, PathBuf)>,
    /// The floor, `xsbench-bare-sender`.
    pub floor: PathBuf,
    /// The upstream daemons beside them.
    pub upstream: Vec<Flavor>,
    pub size: Size,
    /// One measured run.
    pub run: Duration,
    pub rounds: usize,
    /// S1's idle-domain levels, if not its defaults.
    pub storm_idle: Option<Vec<usize>>,
}

impl Scale {
    /// `full` at full size, `quick` quick, `smoke` in smoke runs.
    pub fn pick<T>(&self, smoke: T, quick: T, full: T) -> T {
        match self.size {
            Size::Smoke => smoke,
            Size::Quick => quick,
            Size::Full => full,
        }
    }

    /// The shims, then the upstream daemons, labelled.
    pub fn shim_starts(&self) -> Vec<(String, Start)> {
        let shims = (self.shims.iter()).map(|(l, b)| (l.clone(), Start::Shim(b.clone())));
        let upstream =
            (self.upstream.iter()).map(|&f| (daemons::label(f).into(), Start::Upstream(f)));
        shims.chain(upstream).collect()
    }
}

/// A goal row: (what, target, measured, met).
pub type GoalRow = (String, &'static str, String, Option<bool>);

/// A section's text (from its `## ` heading) and what failed in it: the
/// report shows failures, a smoke run fails on them.
#[derive(Default)]
pub struct Part {
    pub text: String,
    pub failures: Vec<String>,
    /// Its rows of the report's goals table.
    pub goals: Vec<GoalRow>,
    /// Its notes under the report's "What limits the figures".
    pub limits: Vec<String>,
}

/// A sample's table cell: ops/s (p50/p99 µs) daemon CPU per op in µs.
pub fn cell(x: &Sample) -> String {
    format!(
        "{} ({:.1}/{:.1}) {:.2}",
        crate::stats::ops(x.ops_per_s),
        x.p50_us,
        x.p99_us,
        x.daemon_cpu_us
    )
}

/// A table's heading and rule: `first` over the key column, then a column
/// a label.
pub fn head<L: std::fmt::Display>(first: &str, labels: impl IntoIterator<Item = L>) -> String {
    let mut s = format!("| {first} |");
    let mut rule = String::from("|---|");
    for l in labels {
        s += &format!(" {l} |");
        rule += "---|";
    }
    format!("{s}\n{rule}\n")
}

/// A row of each curve's `pick` at its last point ÷ at its first ("–"
/// for a curve of fewer than two points).
pub fn growth_row<P>(
    what: &str,
    curves: &[crate::in_turn::Curve<P>],
    pick: impl Fn(&P) -> f64,
) -> String {
    let mut s = format!("| {what} |");
    for c in curves {
        let ratio = match (c.points.first(), c.points.last()) {
            (Some(a), Some(b)) if c.points.len() > 1 => Some(pick(b) / pick(a)),
            _ => None,
        };
        s += &format!(
            " {} |",
            ratio.map_or("–".into(), |x| format!("**{x:.2}×**"))
        );
    }
    s + "\n"
}

/// Tables of curves measured in turn, one under each caption of a
/// template (template::tables): a row a level ("key (size)"), a column a
/// curve, each cell its point at that level shown, "–" for none.
pub struct CurveTables<'a, P> {
    captions: std::vec::IntoIter<(&'a str, &'a str)>,
    /// Over the key column.
    first: &'a str,
    curves: &'a [crate::in_turn::Curve<P>],
    /// A point's (key, size).
    level: fn(&P) -> (usize, usize),
    /// (key, size) of every level any curve reached with a size.
    levels: Vec<(usize, usize)>,
}

impl<'a, P> CurveTables<'a, P> {
    /// The filled template's text before its first caption, and its tables.
    pub fn new(
        text: &'a str,
        first: &'a str,
        level: fn(&P) -> (usize, usize),
        curves: &'a [crate::in_turn::Curve<P>],
    ) -> (&'a str, Self) {
        let (intro, captions) = crate::template::tables(text);
        let mut levels: Vec<(usize, usize)> = (curves.iter())
            .flat_map(|c| c.points.iter().map(level))
            .filter(|l| l.1 > 0)
            .collect();
        levels.sort_unstable();
        levels.dedup_by_key(|l| l.0);
        let captions = captions.into_iter();
        let tables = CurveTables {
            captions,
            first,
            curves,
            level,
            levels,
        };
        (intro, tables)
    }

    /// The next caption, its heading first, and its table of `show`.
    pub fn next(&mut self, show: &dyn Fn(&P) -> String) -> String {
        let (heading, what) = self.captions.next().expect("a caption a table");
        let mut s = format!("\n{heading}\n\n{what}\n\n");
        s += &head(self.first, self.curves.iter().map(|c| &c.label));
        for &(level, size) in &self.levels {
            s += &format!("| {level} ({size}) |");
            for c in self.curves {
                let got = c.points.iter().find(|p| (self.level)(p).0 == level);
                s += &format!(" {} |", got.map_or("–".into(), show));
            }
            s += "\n";
        }
        s
    }
}
