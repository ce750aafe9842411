//! Section 7, probe sites and probes attached: 5-byte against 1-byte nop
//! sites, one firing per op against two.

use super::firing::{on_loops, OnLoop};
use super::{
    failures, ns_per_event, on_daemons, part, ratio, seeded, snoopers, table, Attach, Budget,
    OnDaemon,
};
use crate::affinity::Pin;
use crate::builds::{Builds, Nop1};
use crate::compare::{Case, Comparison};
use crate::daemons;
use crate::scale::Part;
use crate::template::fill;
use crate::uprobe::Fetch;
use crate::workload::Workload;
use std::fmt::Write;
use std::path::Path;

/// Section 7's configurations: the daemon (nop5: the shim as built,
/// nop1: with 1-byte nop sites), unsnooped, under the tracefs snooper
/// (reply and watch_event), under the snooper with --paired (request,
/// response and watch_event).
pub const SITES: [&str; 6] = [
    "nop5",
    "nop5 + snoop",
    "nop5 + snoop --paired",
    "nop1",
    "nop1 + snoop",
    "nop1 + snoop --paired",
];

pub struct SitesResult {
    /// Ops on the shim: [`SITES`].
    pub per_op: Comparison,
    /// Firings of each probe loop, nop5's then nop1's.
    pub per_firing: Comparison,
}

/// Section 7: 5-byte against 1-byte nop probe sites, per op on the shim
/// and per firing on the probe loop.
pub fn measure(b: &Builds, nop1: &Nop1, budget: &Budget) -> SitesResult {
    SitesResult {
        per_op: sites_per_op(b, &nop1.shim, budget),
        per_firing: sites_per_firing(b, &nop1.probe_loop, budget),
    }
}

/// Per-firing cost of each site, as section 4 measures it, on the probe
/// loop built with each nop: without a tracer, with bare uprobes (the
/// snooper's fetch args, no reader), with no fetch args (an empty event
/// written).
fn sites_per_firing(b: &Builds, nop1_loop: &Path, budget: &Budget) -> Comparison {
    let attached = [
        ("no tracer", None),
        ("bare uprobe", Some(Fetch::SnoopArgs)),
        ("uprobe, no fetch args", Some(Fetch::Nothing)),
    ];
    let labels: Vec<String> = (["nop5", "nop1"].iter())
        .flat_map(|nop| attached.map(|(what, _)| format!("{nop}, {what}")))
        .collect();
    let configs: Vec<_> = (labels.iter().enumerate())
        .map(|(k, label)| {
            let on = attached[k % 3].1.map_or(OnLoop::Nothing, OnLoop::Uprobes);
            (label.as_str(), k / 3, Ok(on))
        })
        .collect();
    let loops = [b.probe_loop.as_path(), nop1_loop];
    on_loops(
        "nop per firing",
        &loops,
        &configs,
        budget.rounds,
        budget.run,
    )
}

/// Probe sites (5-byte against 1-byte nops) by what the tracefs snooper
/// attaches (reply alone against request + response), one pinned
/// connection. Samples as in section 3.
fn sites_per_op(b: &Builds, nop1: &Path, budget: &Budget) -> Comparison {
    let daemons = [
        seeded(daemons::shim("shim nop5", &b.shim)),
        seeded(daemons::shim("shim nop1", nop1)),
    ];
    // The tracefs back end, which these rows were first measured on.
    let reply = snoopers(&b.snoop, &[]).1;
    let paired = snoopers(&b.snoop, &["--paired"]).1;
    let binaries = [b.shim.as_path(), nop1];
    let configs: Vec<OnDaemon> = (SITES.iter().enumerate())
        .map(|(k, label)| {
            let (daemon, binary) = (&daemons[k / 3], binaries[k / 3]);
            let attach = match k % 3 {
                0 => Attach::Nothing,
                1 => Attach::Tracer(&reply, binary),
                _ => Attach::Tracer(&paired, binary),
            };
            (*label, daemon, Ok(attach))
        })
        .collect();
    let cases = vec![
        Case::raw(Workload::Read, 1, Pin::Cpu0),
        Case::raw(Workload::Write, 1, Pin::Cpu0),
    ];
    on_daemons("probe sites", &configs, cases, budget.rounds, budget.run)
}

/// Section 7: 5-byte against 1-byte nop sites, one firing per op against two.
pub fn render(sites: &SitesResult) -> Part {
    let mut s = String::new();
    // The same pairs in ops/s and in daemon CPU per op.
    let ratios = [
        ("nop5 reply ÷ none", 1, 0),
        ("nop5 paired ÷ none", 2, 0),
        ("nop1 reply ÷ none", 4, 3),
        ("nop1 paired ÷ none", 5, 3),
    ];
    s += &table(&sites.per_op, &ratios, &ratios);
    let (seen, lost) = sites
        .per_op
        .counts
        .iter()
        .flatten()
        .fold((0, 0), |(s, l), c| {
            (s + c.seen.unwrap_or(0), l + c.lost.unwrap_or(0))
        });
    let _ = writeln!(
        s,
        "\nxenstore-snoop over these runs reported {seen} events seen, {lost} lost.\n"
    );
    let c = &sites.per_firing;
    s += &fill(
        include_str!("../../report/7-probe-sites-firing.md"),
        &[("rounds", c.samples[0][0].len().to_string())],
    );
    let cost = |k: usize, none: usize| Some(ns_per_event(c, k)? - ns_per_event(c, none)?);
    for (k, what) in [(1, "bare uprobe, no reader"), (2, "uprobe, no fetch args")] {
        let (nop5, nop1) = (cost(k, 0), cost(k + 3, 3));
        let per = |x: Option<f64>| x.map_or("–".into(), |v| format!("{v:.0}"));
        let _ = writeln!(
            s,
            "| {what} | {} | {} | {} |",
            per(nop5),
            per(nop1),
            ratio(nop5.zip(nop1).map(|(a, b)| a / b))
        );
    }
    s += &failures(c);
    part(
        include_str!("../../report/7-probe-sites.md"),
        s,
        Vec::new(),
        Vec::new(),
    )
}
