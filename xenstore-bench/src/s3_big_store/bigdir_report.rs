//! S3's big-directory part of the scale section: one table per operation,
//! one column a daemon, one row a number of children, and how much each
//! daemon's cost grew from the fewest children to the most.

use crate::s3_big_store::bigdir::{BigDirResult, Point};
use crate::scale::cell;
use crate::template::fill;
use std::fmt::Write;

pub fn render(r: &BigDirResult) -> String {
    let mut s = fill(
        include_str!("../../report/s3-big-directory.md"),
        &[
            ("run", format!("{:.2}", r.run.as_secs_f64())),
            ("elapsed", format!("{:.0}", r.elapsed.as_secs_f64())),
        ],
    );
    s += &section(
        r,
        "Create and remove a new child",
        "A write creating `/bigdir/scratch`, then its `rm`: the list grows and shrinks at \
         its end.",
        |p| cell(&p.create_remove),
    );
    s += &ratio_row(r, |p| p.create_remove.daemon_cpu_us);
    s += &section(
        r,
        "Remove the oldest child and write it back",
        "`rm` of the first child in the list, then a write making it again (at the end): \
         everything after it moves (in the shim, the rest of its chunk).",
        |p| cell(&p.oldest),
    );
    s += &ratio_row(r, |p| p.oldest.daemon_cpu_us);
    s += &section(
        r,
        "DIRECTORY_PART, every page",
        "The whole listing read page by page from offset 0; each page (one request, up to \
         4096 bytes) an op; in brackets the pages a listing takes. A page copies its own \
         bytes, so its cost should not grow with the listing.",
        |p| match &p.page {
            Ok(x) => format!("{} [{} pages]", cell(x), p.pages),
            Err(e) => e.clone(),
        },
    );
    s += &ratio_row(r, |p| p.page.as_ref().map_or(f64::NAN, |x| x.daemon_cpu_us));
    s += &section(
        r,
        "DIRECTORY_PART, every page, in a transaction",
        "The same listing in a transaction of its own (TRANSACTION_START, the pages, \
         TRANSACTION_END), the transaction's requests shared among the pages. C xenstored \
         copies the node's record into the transaction at its first look; the shim's copy \
         shares the store's list.",
        |p| match &p.page_in_tx {
            Ok(x) => format!("{} [{} pages]", cell(x), p.pages),
            Err(e) => e.clone(),
        },
    );
    s += &ratio_row(r, |p| {
        p.page_in_tx.as_ref().map_or(f64::NAN, |x| x.daemon_cpu_us)
    });
    s += &section(
        r,
        "DIRECTORY_PART, every page, in a transaction that removed a child",
        "The same, the transaction first removing a child in the middle of the list (and then \
         aborted): its copy of the list now differs from the store's. The shim finds where the \
         removed entries lie in the store's list once, and a page maps its offset past them.",
        |p| match &p.page_after_rm {
            Ok(x) => format!("{} [{} pages]", cell(x), p.pages),
            Err(e) => e.clone(),
        },
    );
    s += &ratio_row(r, |p| {
        p.page_after_rm
            .as_ref()
            .map_or(f64::NAN, |x| x.daemon_cpu_us)
    });
    s += &section(
        r,
        "Write the directory's own value",
        "A WRITE of `/bigdir` itself, its value alternating between two bytes: its children \
         are not what changes.",
        |p| cell(&p.own_value),
    );
    s += &ratio_row(r, |p| p.own_value.daemon_cpu_us);
    s += &section(
        r,
        "A transaction adds a child, the next removes it",
        "TRANSACTION_START, a write creating `/bigdir/tx-scratch`, TRANSACTION_END; then the \
         same with its `rm`: each of the six requests an op. The transaction reads the \
         directory (creating or removing a child rewrites its parent) and its commit \
         changes the list.",
        |p| cell(&p.tx_child),
    );
    s += &ratio_row(r, |p| p.tx_child.daemon_cpu_us);
    for c in &r.curves {
        if let Some(why) = &c.failed {
            let _ = writeln!(s, "\n{} stops {why}", c.label);
        }
    }
    s
}

fn section(r: &BigDirResult, title: &str, what: &str, show: impl Fn(&Point) -> String) -> String {
    let mut s = format!("\n#### {title}\n\n{what}\n\n| children (listing bytes) |");
    let mut rule = String::from("|---|");
    for c in &r.curves {
        let _ = write!(s, " {} |", c.label);
        rule += "---|";
    }
    let _ = writeln!(s, "\n{rule}");
    for (children, bytes) in levels(r) {
        let _ = write!(s, "| {children} ({bytes}) |");
        for c in &r.curves {
            let got = c.points.iter().find(|p| p.children == children);
            let _ = write!(s, " {} |", got.map_or("–".into(), &show));
        }
        s += "\n";
    }
    s
}

/// (children, listing bytes) of every level any daemon reached.
fn levels(r: &BigDirResult) -> Vec<(usize, usize)> {
    let mut v: Vec<(usize, usize)> = r
        .curves
        .iter()
        .flat_map(|c| c.points.iter().map(|p| (p.children, p.listing_bytes)))
        .filter(|l| l.1 > 0)
        .collect();
    v.sort_unstable();
    v.dedup_by_key(|l| l.0);
    v
}

/// Daemon CPU per request at each curve's most children ÷ at its fewest.
fn ratio_row(r: &BigDirResult, pick: impl Fn(&Point) -> f64) -> String {
    let mut s = String::from("| daemon CPU, most children ÷ fewest |");
    for c in &r.curves {
        let ratio = match (c.points.first(), c.points.last()) {
            (Some(a), Some(b)) if c.points.len() > 1 => Some((pick(b) / pick(a), b.children)),
            _ => None,
        };
        let _ = write!(
            s,
            " {} |",
            ratio
                .filter(|x| x.0.is_finite())
                .map_or("–".into(), |(x, n)| format!("**{x:.2}×** (to {n})"))
        );
    }
    s + "\n"
}
