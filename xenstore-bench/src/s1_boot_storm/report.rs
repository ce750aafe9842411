//! The S1 boot-storm section of BENCHMARKS.md: one table per number of
//! lifecycles at once, a row per idle-domain count and daemon, then the
//! goal at K=1000, P=100 as ratios between columns of the same run.

use crate::s1_boot_storm::reads::{READ_EVERY, SLOW};
use crate::s1_boot_storm::verdict::{Leniency, OVERSIZED_MAX};
use crate::s1_boot_storm::{Curve, Row, Storm, StormResult};
use crate::template::fill;
use std::fmt::Write;
use std::time::Duration;

pub fn render(r: &StormResult) -> String {
    let mut s = fill(
        include_str!("../../report/s1-boot-storm.md"),
        &[
            ("read_every", READ_EVERY.as_millis().to_string()),
            ("elapsed", format!("{:.0}", r.elapsed.as_secs_f64())),
        ],
    ) + "\n";
    for &p in &r.parallel {
        s += &fill(TABLE, &[("p", p.to_string())]);
        for &k in &r.idle {
            for c in &r.curves {
                if c.failed.iter().any(|f| (f.0, f.1) == (k, p)) {
                    let _ = writeln!(
                        s,
                        "| {k} | {} | failed (below) | – | – | – | – | – |",
                        c.label
                    );
                }
                let Some(x) = find(&c.storms, k, p) else {
                    continue;
                };
                let _ = writeln!(
                    s,
                    "| {k} | {} | {:.2} | {:.2} / {:.2} | {:.3} ({} / {}) | {:.2} | {:.2} | {} |",
                    c.label,
                    x.wall.as_secs_f64(),
                    x.lifecycle_p50.as_secs_f64(),
                    x.lifecycle_p99.as_secs_f64(),
                    eagain_per_commit(x),
                    x.tally.eagain,
                    x.tally.committed,
                    x.daemon_cpu.as_secs_f64(),
                    x.read.p99.as_secs_f64() * 1e3,
                    worked_around(c, x),
                );
            }
        }
        s += "\n";
    }
    s += &goal(r);
    s += &read_limits(r);
    for c in &r.curves {
        if let Some(why) = &c.no_rings {
            let _ = writeln!(
                s,
                "\n{}: its guests spoke over dom0 sockets (paths made absolute), as it \
                 served no simulated ring: {why}",
                c.label
            );
        }
        for (k, p, why) in &c.failed {
            let _ = writeln!(s, "\n{} at K={k}, P={p} failed: {why}", c.label);
        }
        if c.leniency == Leniency::Oxenstored && !c.storms.is_empty() {
            s += &lenient(c);
        }
        let retried = c.storms.iter().any(|(_, _, x)| x.tally.einval > 0);
        if retried || c.failed.iter().any(|f| is_replay_einval(&f.2)) {
            s += "\n";
            s += OXENSTORED_EINVAL;
        }
        if let Some(e) = &c.error {
            let _ = writeln!(s, "\n{} stopped: {e:#}", c.label);
        }
    }
    s
}

const TABLE: &str = include_str!("../../report/s1-storm-table.md");

/// oxenstored's answer to some conflicted commits, found in its debug log
/// (`xenstored-log-level = debug`) of a K=10, P=100 storm.
const OXENSTORED_EINVAL: &str = include_str!("../../report/s1-oxenstored-einval.md");

/// A lifecycle ended by EINVAL to its commit (see OXENSTORED_EINVAL).
fn is_replay_einval(why: &str) -> bool {
    why.contains("XS_TRANSACTION_END") && why.contains("EINVAL")
}

/// A row's count of what its daemon's replay forgave: EINVAL commits
/// retried / oversized listings taken; "–" for a strict daemon (to which
/// either is a failure).
fn worked_around(c: &Curve, x: &Storm) -> String {
    match c.leniency {
        Leniency::Strict => "–".into(),
        Leniency::Oxenstored => format!("{} / {}", x.tally.einval, x.tally.oversized),
    }
}

/// What a lenient daemon's rows mean: not what libxl would get.
fn lenient(c: &Curve) -> String {
    let transactions: u64 = c
        .storms
        .iter()
        .map(|(_, _, x)| x.tally.einval_then_committed)
        .sum();
    let text = fill(
        include_str!("../../report/s1-lenient.md"),
        &[
            ("label", c.label.clone()),
            ("max", (OVERSIZED_MAX / 1024).to_string()),
            ("transactions", transactions.to_string()),
        ],
    );
    format!("\n{text}")
}
fn curve<'a>(r: &'a StormResult, label: &str) -> Option<&'a Curve> {
    r.curves.iter().find(|c| c.label == label)
}

fn find(storms: &[Row], k: usize, p: usize) -> Option<&Storm> {
    storms
        .iter()
        .find(|(kk, pp, _)| *kk == k && *pp == p)
        .map(|(_, _, x)| x)
}

fn eagain_per_commit(x: &Storm) -> f64 {
    x.tally.eagain as f64 / x.tally.committed.max(1) as f64
}

/// Issue 26's S1 goal, from the largest K and P measured.
fn goal(r: &StormResult) -> String {
    let (Some(&k), Some(&p)) = (r.idle.iter().max(), r.parallel.iter().max()) else {
        return String::new();
    };
    let get = |label: &str| curve(r, label).and_then(|c| find(&c.storms, k, p));
    let Some(shim) = get("shim") else {
        return String::new();
    };
    let quick = match (k, p) {
        (1000, 100) => "",
        _ => " (a quick run: the goal is stated for K=1000, P=100)",
    };
    let mut s = fill(
        include_str!("../../report/s1-goal.md"),
        &[
            ("k", k.to_string()),
            ("p", p.to_string()),
            ("quick", quick.into()),
        ],
    );
    let mut row = |what: &str, measured: String, met: bool| {
        let _ = writeln!(
            s,
            "| {what} | {measured} | {} |",
            if met { "yes" } else { "**no**" }
        );
    };
    for (label, want) in [("C xenstored", 10.0), ("oxenstored", 3.0)] {
        let what = format!("wall ≥ {want}× faster than {label}");
        match (get(label), curve(r, label)) {
            (Some(o), Some(c)) => {
                let x = o.wall.as_secs_f64() / shim.wall.as_secs_f64();
                let against = match c.leniency {
                    Leniency::Strict => String::new(),
                    Leniency::Oxenstored => format!(
                        " (against {label} with {} EINVAL commits retried and {} oversized \
                         listings accepted)",
                        o.tally.einval, o.tally.oversized
                    ),
                };
                row(&what, format!("{x:.1}×{against}"), x >= want);
            }
            _ => match fewer_at_once(r, label, k, p) {
                // not the goal's P, so not met, but the nearest measure
                Some((q, x)) => row(&what, format!("– at P={p}; {x:.1}× at P={q}"), false),
                None => row(&what, "–".into(), false),
            },
        }
    }
    match get("C xenstored") {
        Some(c) => {
            let (a, b) = (eagain_per_commit(shim), eagain_per_commit(c));
            row(
                "EAGAIN per commit ≤ 1/10 of C's",
                format!("{a:.3} against {b:.3}"),
                a <= b / 10.0,
            );
        }
        None => row("EAGAIN per commit ≤ 1/10 of C's", "–".into(), false),
    }
    let ms = shim.read.p99.as_secs_f64() * 1e3;
    row(
        "unrelated READ p99 ≤ 1 ms",
        format!("{ms:.2} ms ({} reads)", shim.read.count),
        ms <= 1.0,
    );
    s
}

/// What held the unrelated READs up at the goal's K and P, each daemon's:
/// of its reads over 1 ms, how much was the daemon waiting for a CPU.
fn read_limits(r: &StormResult) -> String {
    let (Some(&k), Some(&p)) = (r.idle.iter().max(), r.parallel.iter().max()) else {
        return String::new();
    };
    let mut s = "\n".to_string()
        + &fill(
            include_str!("../../report/s1-unrelated-read.md"),
            &[
                ("k", k.to_string()),
                ("p", p.to_string()),
                ("slow", SLOW.as_millis().to_string()),
            ],
        );
    for c in &r.curves {
        let Some(x) = find(&c.storms, k, p) else {
            continue;
        };
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let r = &x.read;
        let share = ms(r.slow_waited) / ms(r.slow_total).max(f64::MIN_POSITIVE);
        let _ = writeln!(
            s,
            "| {} | {} | {:.2} / {:.2} / {:.2} | {} | {:.1} of {:.1} ms ({:.0} %) | {:.2} |",
            c.label,
            r.count,
            ms(r.p50),
            ms(r.p99),
            ms(r.max),
            r.slow,
            ms(r.slow_waited),
            ms(r.slow_total),
            share * 100.0,
            ms(r.own_p99)
        );
    }
    s
}

/// The shim's speed-up over `label` at K=`k` with the most lifecycles at
/// once below `p` that both ran: (that P, the ratio of wall times).
fn fewer_at_once(r: &StormResult, label: &str, k: usize, p: usize) -> Option<(usize, f64)> {
    let (shim, other) = (curve(r, "shim")?, curve(r, label)?);
    r.parallel
        .iter()
        .filter(|&&q| q < p)
        .filter_map(|&q| {
            let (a, b) = (find(&shim.storms, k, q)?, find(&other.storms, k, q)?);
            Some((q, b.wall.as_secs_f64() / a.wall.as_secs_f64()))
        })
        .max_by_key(|&(q, _)| q)
}
