//! Section 1, throughput and latency: the shim against C xenstored and
//! oxenstored under the same client workloads.

use super::{get, part, ratios, run_case, seeded, table, Budget, Started, MAX_CONNS};
use crate::affinity::Pin;
use crate::client::Conn;
use crate::compare::{Case, Client, Comparison};
use crate::daemons::{self, Start};
use crate::scale::{Part, Scale, Size};
use crate::workload::Workload;
use anyhow::{bail, ensure, Result};
use std::path::Path;
use xenstore_testkit::upstream::Flavor;

/// Section 1: the shim against C xenstored and oxenstored, raw and
/// libxenstore clients; at smoke size every workload at 1 and 2
/// connections on the shim (and `--upstream`'s daemons). Every run must
/// complete ops and connection 0's transactions all commit (its counter
/// read back), or the section reports a failure.
pub fn measure(s: &Scale, budget: &Budget, xs_load: Option<&Path>) -> Comparison {
    let smoke = s.size == Size::Smoke;
    let upstream = if smoke {
        s.upstream.clone()
    } else {
        vec![Flavor::C, Flavor::Ocaml]
    };
    let upstream = upstream
        .into_iter()
        .map(|f| (daemons::label(f), Start::Upstream(f)));
    let daemons: Vec<(&str, Started)> = [("shim", Start::Shim(s.shims[0].1.clone()))]
        .into_iter()
        .chain(upstream)
        .map(|(label, start)| (label, seeded(start.launch(label))))
        .collect();
    let mut cases = Vec::new();
    if smoke {
        for w in Workload::ALL {
            cases.extend([1, 2].map(|conns| Case::raw(w, conns, Pin::Free)));
        }
    } else {
        let workloads: &[Workload] = if budget.quick {
            &[Workload::Read, Workload::Write]
        } else {
            &Workload::ALL
        };
        for &w in workloads {
            cases.push(Case::raw(w, 1, Pin::Cpu0));
            cases.push(Case::raw(w, 1, Pin::Free));
            cases.push(Case::raw(w, MAX_CONNS, Pin::Free));
        }
        for w in [Workload::Read, Workload::Write] {
            cases.push(Case {
                client: Client::Libxenstore,
                ..Case::raw(w, 1, Pin::Cpu0)
            });
        }
    }
    let labels: Vec<&str> = daemons.iter().map(|d| d.0).collect();
    let mut c = Comparison::run("throughput", &labels, cases, budget.rounds, |case, k, n| {
        run_case(get(&daemons[k].1)?, case, budget.run, xs_load, None, n)
    });
    for (k, (label, d)) in daemons.iter().enumerate() {
        if let Err(e) = check_commits(&c, k, d) {
            c.failures.push(format!("{label}: {e:#}"));
        }
    }
    c
}

/// Config `k`'s runs each completed ops, and connection 0's counter holds
/// at least two commits a transaction run (its warm-up and one measured).
fn check_commits(c: &Comparison, k: usize, d: &Started) -> Result<()> {
    let Ok(d) = d else { return Ok(()) };
    let mut txn_runs = 0;
    for (ci, case) in c.cases.iter().enumerate() {
        if c.samples[ci][k].iter().any(|s| s.ops == 0) {
            bail!("{}: no operation completed", case.describe());
        }
        if case.workload == Workload::Txn {
            txn_runs += c.samples[ci][k].len() as u64;
        }
    }
    let mut conn = Conn::connect(&d.socket)?;
    let counter: u64 = std::str::from_utf8(conn.read(b"/bench/c0/counter")?.ok()?)?.parse()?;
    ensure!(
        counter >= 2 * txn_runs,
        "transactions did not commit: counter {counter} after {txn_runs} runs"
    );
    Ok(())
}

/// Section 1: each daemon under the same client workload.
pub fn render(t: &Comparison) -> Part {
    let mut g = Vec::new();
    let vs: Vec<(&str, usize, usize)> = [
        ("C xenstored", "shim ÷ C"),
        ("oxenstored", "shim ÷ oxenstored"),
    ]
    .into_iter()
    .filter_map(|(config, name)| Some((name, 0, t.configs.iter().position(|c| c == config)?)))
    .collect();
    if vs.first().is_some_and(|v| v.0 == "shim ÷ C") {
        for (what, target, conns, want) in [
            (
                "shim ÷ C xenstored ops/s, 1 connection (pinned)",
                "≥ 1.2",
                1,
                1.2,
            ),
            ("shim ÷ C xenstored ops/s, 8 connections", "≥ 1.5", 8, 1.5),
        ] {
            let (measured, min) = ratios(
                t,
                0,
                1,
                |c| {
                    c.conns == conns && c.client == Client::Raw && (conns > 1 || c.pin == Pin::Cpu0)
                },
                false,
            );
            g.push((what.to_string(), target, measured, min.map(|m| m >= want)));
        }
    }
    let mut p = part(
        include_str!("../../report/1-throughput.md"),
        table(t, &vs, &[]),
        g,
        Vec::new(),
    );
    p.failures = t.failures.clone();
    p
}
