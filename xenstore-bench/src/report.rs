//! BENCHMARKS.md around the sections' parts: how it was measured, every
//! part's goals and limits, then each part in the table's order
//! (sections.rs).

use crate::machine::Machine;
use crate::plain::Budget;
use crate::scale::Part;
use crate::template::fill;
use std::fmt::Write;
use std::time::Duration;

/// How the whole run went, for the report's preamble.
pub struct Head {
    pub machine: Machine,
    pub load_after: String,
    pub budget: Budget,
    pub elapsed: Duration,
}

fn verdict(met: Option<bool>) -> &'static str {
    match met {
        Some(true) => "met",
        Some(false) => "**missed**",
        None => "not measured",
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::affinity::Pin;
    use crate::compare::{Case, Comparison};
    use crate::plain::loss::LossStep;
    use crate::plain::memory::Rss;
    use crate::plain::metrics::{ExporterAt, MetricsResult};
    use crate::plain::sites::SitesResult;
    use crate::plain::{firing, idle, loss, memory, metrics, sites, snoop, throughput};
    use crate::stats::Sample;
    use crate::tracers::Counts;
    use crate::workload::Workload;
    use anyhow::Result;

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
        Comparison::run("fixture", &names, cases, 2, |case, k, _| {
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

    /// A comparison whose configurations `traced` have tracers' counts,
    /// the first `counts(1)`, the next `counts(2)`, and so on.
    fn snooped(configs: usize, traced: &[usize]) -> Comparison {
        let mut c = comparison(configs);
        for (n, &k) in traced.iter().enumerate() {
            c.counts[k] = counts(n as u64 + 1);
        }
        c
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

    fn exporter(domains: u32, rss_kib: u64) -> Result<ExporterAt> {
        Ok(ExporterAt {
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
            throughput::render(&Comparison {
                configs: ["shim", "C xenstored", "oxenstored"]
                    .map(String::from)
                    .to_vec(),
                ..comparison(3)
            }),
            idle::render(&comparison(2)),
            snoop::render(&snooped(7, &[2, 3, 6])),
            firing::render(&comparison(8)),
            loss::render(
                &Ok(vec![LossStep {
                    target_rate: 100_000.0,
                    threads: 1,
                    achieved_rate: 99_000.0,
                    fired: 25_000,
                    counts: counts(4)[0],
                }]),
                &budget(),
            ),
            memory::render(
                &[
                    ("shim".into(), rss(1000, 5000)),
                    ("C xenstored".into(), rss(900, 9000)),
                ],
                &budget(),
            ),
            metrics::render(&MetricsResult {
                comparison: comparison(5),
                at_1000: exporter(1000, 4096),
                at_2000: exporter(2000, 4100),
            }),
            sites::render(&SitesResult {
                per_op: snooped(6, &[2]),
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
