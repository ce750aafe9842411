//! Section 5, event rate without loss: the snooper against the probe loop
//! at rising rates.

use super::{part, Budget, LOOP_SNOOP_ARGS};
use crate::probe_loop::ProbeLoop;
use crate::scale::Part;
use crate::stats::ops;
use crate::template::fill;
use crate::tracers::{Counts, Tracer, TracerKind};
use anyhow::Result;
use std::fmt::Write;
use std::path::Path;

pub struct LossStep {
    pub target_rate: f64,
    pub threads: usize,
    pub achieved_rate: f64,
    pub fired: u64,
    pub counts: Counts,
}

/// Section 5: The snooper against the probe loop at rising event rates.
pub fn measure(probe_loop: &Path, snoop: &Path, budget: &Budget) -> Result<Vec<LossStep>> {
    let mut lp = ProbeLoop::start(probe_loop)?;
    let snoop = TracerKind::Snoop {
        binary: snoop.to_path_buf(),
        args: LOOP_SNOOP_ARGS.map(String::from).to_vec(),
    };
    // (events/s, firing threads); 0 = as fast as the threads go.
    let rates: &[(f64, usize)] = if budget.quick {
        &[(500e3, 1), (0.0, 2)]
    } else {
        &[
            (250e3, 1),
            (500e3, 1),
            (1e6, 1),
            (0.0, 1),
            (1e6, 2),
            (0.0, 2),
        ]
    };
    let mut steps = Vec::new();
    for &(rate, threads) in rates {
        let binary = lp.binary.clone();
        let pid = lp.pid();
        let t = Tracer::attach(&snoop, pid, &binary, || lp.mark())?;
        let (fired, ns) = lp.run(budget.run.as_secs_f64(), rate, threads)?;
        let counts = t.detach()?;
        let achieved_rate = fired as f64 * 1e9 / ns as f64;
        eprintln!(
            "bench: loss target {rate:.0}/s achieved {achieved_rate:.0}/s fired {fired} {counts:?}"
        );
        steps.push(LossStep {
            target_rate: rate,
            threads,
            achieved_rate,
            fired,
            counts,
        });
    }
    Ok(steps)
}

fn zero_loss_rate(steps: &[LossStep]) -> Option<f64> {
    steps
        .iter()
        .filter(|s| s.counts.lost == Some(0) && s.counts.seen.is_some_and(|n| n >= s.fired))
        .map(|s| s.achieved_rate)
        .fold(None, |m, r| Some(m.map_or(r, |m: f64| m.max(r))))
}

/// Section 5: the event rates the snooper keeps up with.
pub fn render(loss: &Result<Vec<LossStep>>, b: &Budget) -> Part {
    let mut g = Vec::new();
    if let Ok(steps) = loss {
        let best = zero_loss_rate(steps);
        g.push((
            "highest event rate with zero loss".to_string(),
            "≥ 1M events/s",
            best.map_or("none without loss".into(), |b| {
                format!("{} events/s", ops(b))
            }),
            Some(best.is_some_and(|b| b >= 1e6)),
        ));
    }
    let mut s = String::new();
    match loss {
        Ok(steps) => {
            let _ = writeln!(
                s,
                "| target events/s | firing threads | achieved events/s | fired | seen | lost | snooper CPU ns/event |\n|---|---|---|---|---|---|---|"
            );
            for st in steps {
                let opt = |x: Option<u64>| x.map_or("?".into(), |v| v.to_string());
                let target = if st.target_rate == 0.0 {
                    "unpaced".into()
                } else {
                    ops(st.target_rate)
                };
                let cpu = st.counts.cpu_ns.zip(st.counts.seen);
                let cpu = cpu.map_or("?".into(), |(c, n)| {
                    format!("{:.0}", c as f64 / n.max(1) as f64)
                });
                let _ = writeln!(
                    s,
                    "| {target} | {} | {} | {} | {} | {} | {cpu} |",
                    st.threads,
                    ops(st.achieved_rate),
                    st.fired,
                    opt(st.counts.seen),
                    opt(st.counts.lost),
                );
            }
        }
        Err(e) => {
            let _ = writeln!(s, "not measured: {e:#}");
        }
    }
    let intro = fill(
        include_str!("../../report/5-event-rate.md"),
        &[("run", format!("{:.2}", b.run.as_secs_f64()))],
    );
    let mut p = part(&intro, s, g, Vec::new());
    p.failures = loss
        .as_ref()
        .err()
        .map(|e| format!("{e:#}"))
        .into_iter()
        .collect();
    p
}
