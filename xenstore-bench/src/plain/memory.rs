//! Section 6, memory: each daemon's resident set after the same nodes.

use super::{part, ratio, Budget};
use crate::builds::Builds;
use crate::daemons;
use crate::memory::{self, Rss};
use crate::scale::Part;
use crate::template::fill;
use anyhow::Result;
use std::fmt::Write;

/// Section 6: RSS with `nodes` nodes in each daemon.
pub fn measure(b: &Builds, budget: &Budget) -> Vec<(String, Result<Rss>)> {
    let daemons = [
        daemons::shim("shim", &b.shim),
        daemons::c_xenstored("C xenstored", None),
        daemons::oxenstored("oxenstored"),
    ];
    let labels = ["shim", "C xenstored", "oxenstored"];
    daemons
        .into_iter()
        .zip(labels)
        .map(|(d, label)| {
            let rss = d.and_then(|d| memory::fill_and_measure(&d, budget.memory_nodes));
            if let Err(e) = &rss {
                eprintln!("bench: memory {label}: FAILED: {e:#}");
            }
            (label.to_string(), rss)
        })
        .collect()
}

/// The RSS measured for the daemon called `label`, if it was measured.
fn rss_of<'a>(mem: &'a [(String, Result<Rss>)], label: &str) -> Option<&'a Rss> {
    mem.iter()
        .find(|(l, _)| l == label)
        .and_then(|(_, r)| r.as_ref().ok())
}

/// Section 6: RSS after writing the same nodes to each daemon.
pub fn render(mem: &[(String, Result<Rss>)], b: &Budget) -> Part {
    let mut g = Vec::new();
    let rss = |label: &str| rss_of(mem, label).map(|r| r.after_kib as f64);
    let shim_vs_c = rss("shim").zip(rss("C xenstored")).map(|(a, b)| a / b);
    g.push((
        format!("shim RSS ÷ C xenstored RSS, {} nodes", b.memory_nodes),
        "≤ 1.0",
        shim_vs_c.map_or(String::new(), |x| format!("{x:.2}")),
        shim_vs_c.map(|x| x <= 1.0),
    ));
    let mut limits = Vec::new();
    let per_node = |label: &str| {
        rss_of(mem, label)
            .map(|x| (x.after_kib - x.before_kib) as f64 * 1024.0 / b.memory_nodes as f64)
    };
    let values: f64 = (0..b.memory_nodes)
        .map(crate::memory::value_len)
        .sum::<usize>() as f64
        / b.memory_nodes as f64;
    if let (Some(shim), Some(c)) = (per_node("shim"), per_node("C xenstored")) {
        limits.push(fill(
            include_str!("../../report/limits-memory.md").trim_end(),
            &[
                ("shim", format!("{shim:.0}")),
                ("c", format!("{c:.0}")),
                ("values", format!("{values:.0}")),
            ],
        ));
    }
    let mut s = String::from(
        "| daemon | RSS before (KiB) | RSS after (KiB) | ÷ C xenstored |\n|---|---|---|---|\n",
    );
    let c_after = rss_of(mem, "C xenstored").map(|r| r.after_kib as f64);
    for (label, rss) in mem {
        match rss {
            Ok(x) => {
                let _ = writeln!(
                    s,
                    "| {label} | {} | {} | {} |",
                    x.before_kib,
                    x.after_kib,
                    ratio(c_after.map(|c| x.after_kib as f64 / c))
                );
            }
            Err(e) => {
                let _ = writeln!(s, "| {label} | not measured: {e:#} | | |");
            }
        }
    }
    let intro = fill(
        include_str!("../../report/6-memory.md"),
        &[("nodes", b.memory_nodes.to_string())],
    );
    part(&intro, s, g, limits)
}
