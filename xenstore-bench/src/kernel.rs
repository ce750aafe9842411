//! `xenstore-bench kernel`: the snooping and per-firing comparisons
//! (sections 3 and 4) cut to what runs on a bare kernel with nothing but the
//! shim, the snooper and the probe loop: no bpftrace, no C xenstored, no
//! cargo. tests/kernels/run --bench runs it in QEMU on Debian's 6.1 and
//! 6.12, where TCG makes absolute figures meaningless: the ratios, each
//! between runs interleaved in one process, are the result.

use crate::affinity::Pin;
use crate::cli::KernelArgs;
use crate::compare::{Case, Comparison};
use crate::daemons;
use crate::plain::firing::{on_loops, OnLoop};
use crate::plain::{self, on_daemons, Attach, Budget, OnDaemon, LOOP_SNOOP_ARGS};
use crate::uprobe::Fetch;
use crate::workload::Workload;
use anyhow::Result;
use std::fmt::Write;
use std::time::Duration;

/// The heading of BENCHMARKS.md's section that this command's runs fill.
pub const SECTION: &str = "## 8. Dom0 kernels (6.1, 6.12) in QEMU";

/// That section of a report, to its end, with the blank line before it (or
/// nothing): `all` rewrites the rest of the report and keeps it.
pub fn section_of(report: &str) -> &str {
    report
        .find(&format!("\n{SECTION}\n"))
        .map_or("", |at| &report[at..])
}

const SNOOP_CONFIGS: [&str; 4] = [
    "shim",
    "shim + bare uprobe",
    "shim + xenstore-snoop (bpf)",
    "shim + xenstore-snoop (tracefs)",
];
const FIRING_CONFIGS: [&str; 5] = [
    "no tracer",
    "bare uprobe, no reader",
    "xenstore-snoop (bpf)",
    "xenstore-snoop (tracefs)",
    "--baseline's xenstore-snoop (bpf)",
];

pub fn run(args: &KernelArgs) -> Result<()> {
    let budget = Budget {
        run: Duration::from_secs_f64(args.seconds),
        rounds: args.rounds,
        idle_rounds: args.rounds,
        memory_nodes: 0,
        quick: false,
    };
    let snooping = snooping(args, &budget);
    let firing = per_firing(args, &budget);
    println!("{}", render(&snooping, &firing));
    Ok(())
}

/// Section 3's shim rows: unsnooped, with a bare uprobe on `reply` (the
/// snooper's floor), under the snooper on each back end, asked for by name.
fn snooping(args: &KernelArgs, budget: &Budget) -> Comparison {
    let shim = plain::seeded(daemons::shim("shim", &args.shim));
    let (snoop, snoop_tracefs) = plain::snoopers(&args.snoop, &[]);
    let cases = vec![
        Case::raw(Workload::Read, 1, Pin::Cpu0),
        Case::raw(Workload::Write, 1, Pin::Cpu0),
    ];
    let on_shim = |tracer| Ok(Attach::Tracer(tracer, &args.shim));
    let attached = [
        Ok(Attach::Nothing),
        Ok(Attach::Uprobes(&args.shim)),
        on_shim(&snoop),
        on_shim(&snoop_tracefs),
    ];
    let configs: Vec<OnDaemon> = (SNOOP_CONFIGS.into_iter().zip(attached))
        .map(|(label, attach)| (label, &shim, attach))
        .collect();
    on_daemons("snooping", &configs, cases, budget.rounds, budget.run)
}

/// Section 4's rows that need neither bpftrace nor a second build.
fn per_firing(args: &KernelArgs, budget: &Budget) -> Comparison {
    let (snoop, snoop_tracefs) = plain::snoopers(&args.snoop, &LOOP_SNOOP_ARGS);
    let baseline = (args.baseline.as_deref()).map(|b| plain::snoopers(b, &LOOP_SNOOP_ARGS).0);
    let attached = [
        OnLoop::Nothing,
        OnLoop::Uprobes(Fetch::SnoopArgs),
        OnLoop::Tracer(snoop),
        OnLoop::Tracer(snoop_tracefs),
    ]
    .into_iter()
    .chain(baseline.map(OnLoop::Tracer));
    let configs: Vec<_> = (FIRING_CONFIGS.iter().zip(attached))
        .map(|(label, on)| (*label, 0, Ok(on)))
        .collect();
    let loops = [args.probe_loop.as_path()];
    on_loops("per firing", &loops, &configs, budget.rounds, budget.run)
}

/// The ratios as markdown, with what the snooper said it saw and lost.
fn render(snooping: &Comparison, firing: &Comparison) -> String {
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut s = format!("kernel {}\n\n", kernel.trim());
    s += "| workload | snoop (bpf) ÷ none | snoop (tracefs) ÷ none | bare uprobe ÷ none | \
          cpu/op snoop (bpf) ÷ none | cpu/op bare ÷ none |\n|---|---|---|---|---|---|\n";
    for (ci, case) in snooping.cases.iter().enumerate() {
        let r = |a, b| fmt_ratio(snooping.ratio(ci, a, b));
        let cpu = |a, b| fmt_ratio(snooping.cpu_ratio(ci, a, b));
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} |",
            case.describe(),
            r(2, 0),
            r(3, 0),
            r(1, 0),
            cpu(2, 0),
            cpu(1, 0)
        );
    }
    let cost = plain::firing_costs(firing);
    // The nanoseconds mean something on real hardware only, not under TCG.
    s += "\n| tracer | cost per firing (ns) | ÷ bare uprobe's |\n|---|---|---|\n";
    for (k, name) in firing.configs.iter().enumerate().skip(1) {
        let ratio = cost[k].zip(cost[1]).map(|(c, bare)| c / bare);
        let ns = cost[k].map_or("–".into(), |c| format!("{c:.0}"));
        let _ = writeln!(s, "| {name} | {ns} | {} |", fmt_ratio(ratio));
    }
    let counts = [snooping, firing].map(|c| c.counts.concat()).concat();
    let seen: u64 = counts.iter().filter_map(|c| c.seen).sum();
    let lost: u64 = counts.iter().filter_map(|c| c.lost).sum();
    let _ = writeln!(
        s,
        "\nxenstore-snoop over these runs: {seen} events seen, {lost} lost."
    );
    s + &plain::failures(snooping) + &plain::failures(firing)
}

fn fmt_ratio(r: Option<f64>) -> String {
    r.map_or("–".into(), |r| format!("{r:.2}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernels_section_is_kept_to_the_end() {
        let report = format!("# Benchmarks\n\n## 7. Sites\n\nx\n\n{SECTION}\n\nratios\n");
        assert_eq!(section_of(&report), format!("\n{SECTION}\n\nratios\n"));
        assert_eq!(section_of("# Benchmarks\n\n## 7. Sites\n"), "");
    }
}
