//! The table of sections: each has one name, the same in `--only`, in its
//! report heading and in its file or folder. `all` runs the wanted ones in
//! this order, `--update` merges them by heading, and `smoke` runs the
//! scale ones at a few small N through the very same functions.

use crate::cli::Section;
use crate::stats::Sample;
use std::path::PathBuf;
use std::time::Duration;
use xenstore_testkit::upstream::Flavor;

/// Every section, in report order; `kernels` is measured in VMs
/// (`xenstore-bench kernel`) and kept from the old report.
pub const ALL: [Section; 13] = [
    Section::Throughput,
    Section::Idle,
    Section::Snoop,
    Section::Firing,
    Section::Loss,
    Section::Memory,
    Section::Sites,
    Section::Metrics,
    Section::S1BootStorm,
    Section::S2FanOut,
    Section::S3BigStore,
    Section::S4MassDestroy,
    Section::S5IdleTax,
];

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

    /// The shims, labelled, as the store scenarios start them.
    pub fn shim_starts(&self) -> Vec<(String, crate::s3_big_store::Start)> {
        use crate::s3_big_store::Start;
        let mut d: Vec<(String, Start)> = (self.shims.iter())
            .map(|(l, b)| (l.clone(), Start::Shim(b.clone())))
            .collect();
        for flavor in &self.upstream {
            d.push(match flavor {
                Flavor::C => ("C xenstored".into(), Start::CXenstored),
                Flavor::Ocaml => ("oxenstored".into(), Start::Oxenstored),
            });
        }
        d
    }
}

/// A scale section's text (from its `## ` heading) and what failed in it:
/// the report shows failures, a smoke run fails on them.
pub struct Part {
    pub text: String,
    pub failures: Vec<String>,
    /// Its rows of the report's goals table.
    pub goals: Vec<crate::metrics_report::GoalRow>,
}

/// A scale section measured and rendered; None for the plain ones, which
/// report::render renders from their results.
pub fn scale_part(section: Section, s: &Scale) -> Option<Part> {
    Some(match section {
        Section::S1BootStorm => crate::s1_boot_storm::section(s),
        Section::S2FanOut => crate::s2_fan_out::section(s),
        Section::S3BigStore => crate::s3_big_store::section(s),
        Section::S4MassDestroy => crate::s4_mass_destroy::section(s),
        Section::S5IdleTax => crate::s5_idle_tax::section(s),
        _ => return None,
    })
}

/// A sample's table cell: ops/s (p50/p99 µs) daemon CPU per op in µs.
pub fn cell(x: &Sample) -> String {
    format!(
        "{} ({:.1}/{:.1}) {:.2}",
        crate::report::ops(x.ops_per_s),
        x.p50_us,
        x.p99_us,
        x.daemon_cpu_us
    )
}
