//! Section 2, idle probes: the shim with its probes compiled in, untraced,
//! against compiled out.

use super::{get, part, run_case, seeded, table, Budget, MAX_CONNS};
use crate::affinity::Pin;
use crate::builds::Builds;
use crate::compare::{Case, Comparison};
use crate::daemons;
use crate::scale::Part;
use crate::workload::Workload;

/// Section 2: The shim with its probes compiled in (idle) and compiled out.
pub fn measure(b: &Builds, budget: &Budget) -> Comparison {
    let daemons = [
        seeded(daemons::shim("shim probes", &b.shim)),
        seeded(daemons::shim("shim no probes", &b.shim_noprobes)),
    ];
    let mut cases = Vec::new();
    for w in [Workload::Read, Workload::Write] {
        cases.push(Case::raw(w, 1, Pin::Cpu0));
        cases.push(Case::raw(w, MAX_CONNS, Pin::Free));
    }
    Comparison::run(
        "idle probes",
        &["probes compiled in, idle", "probes compiled out"],
        cases,
        budget.idle_rounds,
        |case, k, n| run_case(get(&daemons[k])?, case, budget.run, None, None, n),
    )
}

/// Section 2: the shim with its probes, untraced, against without them.
pub fn render(c: &Comparison) -> Part {
    let mut g = Vec::new();
    let mut costs = Vec::new();
    let mut cpu_costs = Vec::new();
    let mut parts = Vec::new();
    for (ci, case) in c.cases.iter().enumerate() {
        if let Some(x) = c.ratio(ci, 0, 1) {
            let cost = (1.0 - x) * 100.0;
            let cpu = c.cpu_ratio(ci, 0, 1).map(|r| (r - 1.0) * 100.0);
            parts.push(format!(
                "{} {}: {cost:+.1}% (cpu/op {})",
                case.workload.name(),
                case.conns,
                cpu.map_or("?".into(), |c| format!("{c:+.1}%"))
            ));
            costs.push(cost);
            cpu_costs.extend(cpu);
        }
    }
    let mean = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
    let (mean_cost, mean_cpu) = (mean(&costs), mean(&cpu_costs));
    parts.push(format!(
        "mean {} (cpu/op {})",
        mean_cost.map_or("?".into(), |c| format!("{c:+.1}%")),
        mean_cpu.map_or("?".into(), |c| format!("{c:+.1}%"))
    ));
    g.push((
        "idle probes: throughput cost (mean over cases)".to_string(),
        "≤ 1%",
        parts.join(", "),
        mean_cost.map(|w| w <= 1.0),
    ));
    let text = table(c, &[("in ÷ out", 0, 1)], &[("in ÷ out", 0, 1)]);
    part(
        include_str!("../../report/2-idle-probes.md"),
        text,
        g,
        Vec::new(),
    )
}
