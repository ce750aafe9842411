//! S3's part of the scale section: one table per operation, one column a
//! daemon, one row a number of domains, and the goal rows.

use crate::s3_big_store::{
    nodes_per_domain, Point, StoreResult, SUBTREE_NODES, WATCHES_PER_DOMAIN,
};
use crate::scale::cell;
use crate::template::fill;
use std::fmt::Write;

pub fn render(r: &StoreResult) -> String {
    let mut s = fill(
        include_str!("../../report/s3-big-store.md"),
        &[
            ("nodes", nodes_per_domain().to_string()),
            ("watches", WATCHES_PER_DOMAIN.to_string()),
            ("run", format!("{:.2}", r.run.as_secs_f64())),
            ("removals", r.removals.to_string()),
            ("elapsed", format!("{:.0}", r.elapsed.as_secs_f64())),
        ],
    ) + "\n";
    let goal_rss = "RSS per node ≤ 0.8 × C xenstored's";
    s += &section(
        r,
        "Resident memory per node",
        "Measured in a second daemon of each kind, started beside the first and written \
         the same trees by one client, and nothing else: no watch ever registered, no node \
         removed, so nothing freed that the trees could reuse (in the measured daemon idle \
         watchers come and go at each N). Its resident set (VmRSS) at N, less the one it \
         had before the first write, divided by the nodes: B per node, everything the \
         trees cost at that size included (the records, their index's spare room, the \
         allocator's rounding and holes).",
        |p| format!("{:.0} B", p.rss_per_node),
    );
    s += &rss_goal(r, goal_rss);
    s += &section(
        r,
        "Create and remove a child of `/local/domain`",
        "A write creating `/local/domain/31000`, then its `rm`; each request an op.",
        |p| cell(&p.create_remove),
    );
    s += &section(
        r,
        "DIRECTORY `/local/domain`",
        "Past about 900 domains the listing no longer fits one reply (4096 bytes): the shim \
         and C xenstored answer E2BIG and clients page with DIRECTORY_PART; oxenstored sends \
         the oversized reply, which a client's 4096-byte buffer refuses (and it has no \
         DIRECTORY_PART: its walk stops at the first such listing).",
        |p| match &p.directory {
            Ok(x) => cell(x),
            Err(e) => e.clone(),
        },
    );
    s += &section(
        r,
        "DIRECTORY_PART `/local/domain`, every page",
        "The whole listing read page by page from offset 0; an op is the whole listing; in \
         brackets its pages (up to 4096 bytes each) and the daemon's CPU per page. A page \
         copies only its own bytes: the listing costs its pages, each about a full reply's \
         write.",
        |p| match &p.directory_part {
            Ok(x) => format!(
                "{} [{} pages, {:.2} a page]",
                cell(x),
                p.directory_part_pages,
                x.daemon_cpu_us / p.directory_part_pages.max(1) as f64
            ),
            Err(e) => e.clone(),
        },
    );
    s += &section(
        r,
        "A walk of the whole tree",
        "From `/`, each node read and listed (DIRECTORY, else DIRECTORY_PART), one request \
         at a time, unpinned: µs per node (nodes walked).",
        |p| match &p.walk {
            Ok((us, walked)) => format!("{us:.1} ({walked})"),
            Err(e) => e.clone(),
        },
    );
    s += &section(
        r,
        &format!("`rm` of a domain's {SUBTREE_NODES}-node home with watchers"),
        "A watcher holds 15 watches in the home (on it and on 14 nodes inside, so one `rm` \
         sends it 15 events; oxenstored sends only the home's); the time is from sending \
         `rm` to the watcher reading the home's event. The home is written again, untimed, \
         after each.",
        |p| format!("{} [{} events]", cell(&p.rm_subtree), p.rm_events),
    );
    s += &ratio_row(r, "`rm` latency (p50), largest N ÷ smallest N", |p| {
        p.rm_subtree.p50_us
    });
    s += &ratio_row(r, "`rm` daemon CPU, largest N ÷ smallest N", |p| {
        p.rm_subtree.daemon_cpu_us
    });
    for c in &r.curves {
        if let Some(why) = &c.failed {
            let _ = writeln!(s, "\n{}: {why}", c.label);
        }
    }
    s + "\n"
}

fn section(r: &StoreResult, title: &str, what: &str, show: impl Fn(&Point) -> String) -> String {
    let mut s = format!("\n### {title}\n\n{what}\n\n| domains (nodes) |");
    let mut rule = String::from("|---|");
    for c in &r.curves {
        let _ = write!(s, " {} |", c.label);
        rule += "---|";
    }
    let _ = writeln!(s, "\n{rule}");
    for row in levels(r) {
        let _ = write!(s, "| {} ({}) |", row.0, row.1);
        for c in &r.curves {
            let got = c.points.iter().find(|p| p.domains == row.0);
            let _ = write!(s, " {} |", got.map_or("–".into(), &show));
        }
        s += "\n";
    }
    s
}

/// (domains, nodes) of every level any daemon reached.
fn levels(r: &StoreResult) -> Vec<(usize, usize)> {
    let mut v: Vec<(usize, usize)> = r
        .curves
        .iter()
        .flat_map(|c| c.points.iter().map(|p| (p.domains, p.nodes)))
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

fn ratio_row(r: &StoreResult, what: &str, pick: impl Fn(&Point) -> f64) -> String {
    let mut s = format!("| {what} |");
    for c in &r.curves {
        let ratio = match (c.points.first(), c.points.last()) {
            (Some(a), Some(b)) if c.points.len() > 1 => Some(pick(b) / pick(a)),
            _ => None,
        };
        let _ = write!(
            s,
            " {} |",
            ratio.map_or("–".into(), |x| format!("**{x:.2}×**"))
        );
    }
    s + "\n"
}

/// Each daemon's RSS per node at the largest N against C xenstored's.
fn rss_goal(r: &StoreResult, goal: &str) -> String {
    let last = |label: &str| {
        r.curves
            .iter()
            .find(|c| c.label == label)
            .and_then(|c| c.points.last())
            .map(|p| p.rss_per_node)
    };
    let mut s = format!("| ÷ C xenstored's, largest N (goal: {goal}) |");
    for c in &r.curves {
        let ratio = match (c.points.last(), last("C xenstored")) {
            (Some(p), Some(base)) if base > 0.0 => Some(p.rss_per_node / base),
            _ => None,
        };
        let _ = write!(
            s,
            " {} |",
            ratio.map_or("–".into(), |x| format!("**{x:.2}×**"))
        );
    }
    s + "\n"
}
