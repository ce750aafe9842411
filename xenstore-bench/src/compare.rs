//! Interleaved comparisons: every round runs each case on every
//! configuration back to back (A B C A B C ...), so a ratio is taken
//! between runs seconds apart and the machine's drift mostly cancels.

use crate::affinity::Pin;
use crate::stats::{median, median_sample, Sample};
use crate::tracers::Counts;
use crate::workload::Workload;
use anyhow::Result;

/// Which client drives a case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Client {
    /// The raw-socket Rust client (client.rs).
    Raw,
    /// libxenstore via c/xs_load.c.
    Libxenstore,
}

#[derive(Clone, Copy, Debug)]
pub struct Case {
    pub workload: Workload,
    pub conns: usize,
    pub pin: Pin,
    pub client: Client,
}

impl Case {
    pub fn raw(workload: Workload, conns: usize, pin: Pin) -> Case {
        Case {
            workload,
            conns,
            pin,
            client: Client::Raw,
        }
    }

    pub fn describe(&self) -> String {
        let client = match self.client {
            Client::Raw => "",
            Client::Libxenstore => " (libxenstore)",
        };
        format!(
            "{}{client} | {} | {}",
            self.workload.name(),
            self.conns,
            self.pin.name()
        )
    }
}

pub struct Comparison {
    pub configs: Vec<String>,
    pub cases: Vec<Case>,
    /// samples[case][config], one per round that succeeded.
    pub samples: Vec<Vec<Vec<Sample>>>,
    /// counts[config]: what its tracer said as it stopped, run after run.
    pub counts: Vec<Vec<Counts>>,
    pub failures: Vec<String>,
}

impl Comparison {
    /// Runs `rounds` interleaved rounds; `measure(case, config, counts)`
    /// does one run (a traced one adds its tracer's counts).
    /// A configuration that fails on a case is dropped for that case and the
    /// failure is reported, never hidden.
    pub fn run(
        title: &str,
        configs: &[&str],
        cases: Vec<Case>,
        rounds: usize,
        mut measure: impl FnMut(&Case, usize, &mut Vec<Counts>) -> Result<Sample>,
    ) -> Comparison {
        let mut samples = vec![vec![Vec::new(); configs.len()]; cases.len()];
        let mut broken = vec![vec![false; configs.len()]; cases.len()];
        let mut failures = Vec::new();
        let mut counts = vec![Vec::new(); configs.len()];
        for round in 0..rounds {
            for (ci, case) in cases.iter().enumerate() {
                for (k, config) in configs.iter().enumerate() {
                    if broken[ci][k] {
                        continue;
                    }
                    match measure(case, k, &mut counts[k]) {
                        Ok(s) => {
                            eprintln!(
                                "bench: {title} r{round} {} {config}: {:.0} ops/s p50 {:.1} µs p99 {:.1} µs",
                                case.describe(),
                                s.ops_per_s,
                                s.p50_us,
                                s.p99_us
                            );
                            samples[ci][k].push(s);
                        }
                        Err(e) => {
                            let e = format!("{e:#}");
                            eprintln!("bench: {title} {} {config}: FAILED: {e}", case.describe());
                            // A daemon that did not start fails every case alike: say it once.
                            let line = format!("{config}: {e}");
                            if !failures.contains(&line) {
                                failures.push(line);
                            }
                            broken[ci][k] = true;
                            samples[ci][k].clear();
                        }
                    }
                }
            }
        }
        Comparison {
            configs: configs.iter().map(|c| c.to_string()).collect(),
            cases,
            samples,
            counts,
            failures,
        }
    }

    pub fn median(&self, case: usize, config: usize) -> Option<Sample> {
        let s = &self.samples[case][config];
        (!s.is_empty()).then(|| median_sample(s))
    }

    /// Each round's `of(a) ÷ of(b)` on one case, if both ran every round.
    fn per_round(
        &self,
        case: usize,
        a: usize,
        b: usize,
        of: fn(&Sample) -> f64,
    ) -> Option<Vec<f64>> {
        let (sa, sb) = (&self.samples[case][a], &self.samples[case][b]);
        let ratios = sa.iter().zip(sb).map(|(a, b)| of(a) / of(b));
        (!sa.is_empty() && sa.len() == sb.len()).then(|| ratios.collect())
    }

    /// Median over rounds of config a ÷ config b on one case.
    pub fn ratio(&self, case: usize, a: usize, b: usize) -> Option<f64> {
        self.per_round(case, a, b, |s| s.ops_per_s).map(median)
    }

    /// The lowest and highest per-round ratio a/b on one case: how far one
    /// round's ratio strays from the median the goals judge.
    pub fn ratio_range(&self, case: usize, a: usize, b: usize) -> Option<(f64, f64)> {
        let ratios = self.per_round(case, a, b, |s| s.ops_per_s)?;
        Some(
            ratios
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &r| {
                    (lo.min(r), hi.max(r))
                }),
        )
    }

    /// Median over rounds of config a's ÷ config b's daemon CPU per op.
    pub fn cpu_ratio(&self, case: usize, a: usize, b: usize) -> Option<f64> {
        let r = median(self.per_round(case, a, b, |s| s.daemon_cpu_us)?);
        (!r.is_nan()).then_some(r)
    }
}
