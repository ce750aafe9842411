//! S3's part of the scale section: one table per operation, one column a
//! daemon, one row a number of domains, and the goal rows.

use crate::s3_big_store::{
    nodes_per_domain, Point, StoreResult, SUBTREE_NODES, WATCHES_PER_DOMAIN,
};
use crate::scale::{cell, growth_row, CurveTables};
use crate::template::fill;
use std::fmt::Write;

pub fn render(r: &StoreResult) -> String {
    let text = fill(
        include_str!("../../report/s3-big-store.md"),
        &[
            ("nodes", nodes_per_domain().to_string()),
            ("watches", WATCHES_PER_DOMAIN.to_string()),
            ("run", format!("{:.2}", r.run.as_secs_f64())),
            ("removals", r.removals.to_string()),
            ("elapsed", format!("{:.0}", r.elapsed.as_secs_f64())),
            ("subtree", SUBTREE_NODES.to_string()),
        ],
    );
    let key = |p: &Point| (p.domains, p.nodes);
    let (intro, mut tables) = CurveTables::new(&text, "domains (nodes)", key, &r.curves);
    let mut s = format!("{intro}\n\n");
    let goal_rss = "RSS per node ≤ 0.8 × C xenstored's";
    s += &tables.next(&|p| format!("{:.0} B", p.rss_per_node));
    s += &rss_goal(r, goal_rss);
    s += &tables.next(&|p| cell(&p.create_remove));
    s += &tables.next(&|p| match &p.directory {
        Ok(x) => cell(x),
        Err(e) => e.clone(),
    });
    s += &tables.next(&|p| match &p.directory_part {
        Ok(x) => format!(
            "{} [{} pages, {:.2} a page]",
            cell(x),
            p.directory_part_pages,
            x.daemon_cpu_us / p.directory_part_pages.max(1) as f64
        ),
        Err(e) => e.clone(),
    });
    s += &tables.next(&|p| match &p.walk {
        Ok((us, walked)) => format!("{us:.1} ({walked})"),
        Err(e) => e.clone(),
    });
    s += &tables.next(&|p| format!("{} [{} events]", cell(&p.rm_subtree), p.rm_events));
    s += &growth_row(
        "`rm` latency (p50), largest N ÷ smallest N",
        &r.curves,
        |p| p.rm_subtree.p50_us,
    );
    s += &growth_row("`rm` daemon CPU, largest N ÷ smallest N", &r.curves, |p| {
        p.rm_subtree.daemon_cpu_us
    });
    for c in &r.curves {
        if let Some(why) = &c.failed {
            let _ = writeln!(s, "\n{}: {why}", c.label);
        }
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
