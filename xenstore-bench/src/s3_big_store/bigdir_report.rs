//! S3's big-directory part of the scale section: one table per operation,
//! one column a daemon, one row a number of children, and how much each
//! daemon's cost grew from the fewest children to the most.

use crate::s3_big_store::bigdir::{BigDirResult, Point};
use crate::scale::cell;
use crate::scale::CurveTables;
use crate::template::fill;
use std::fmt::Write;

pub fn render(r: &BigDirResult) -> String {
    let text = fill(
        include_str!("../../report/s3-big-directory.md"),
        &[
            ("run", format!("{:.2}", r.run.as_secs_f64())),
            ("elapsed", format!("{:.0}", r.elapsed.as_secs_f64())),
        ],
    );
    let key = (
        "children (listing bytes)",
        (|p| p.children) as fn(&Point) -> usize,
    );
    let (intro, mut tables) = CurveTables::new(&text, key, &r.curves, levels(r));
    let mut s = format!("{intro}\n");
    s += &tables.next(&|p| cell(&p.create_remove));
    s += &ratio_row(r, |p| p.create_remove.daemon_cpu_us);
    s += &tables.next(&|p| cell(&p.oldest));
    s += &ratio_row(r, |p| p.oldest.daemon_cpu_us);
    s += &tables.next(&|p| match &p.page {
        Ok(x) => format!("{} [{} pages]", cell(x), p.pages),
        Err(e) => e.clone(),
    });
    s += &ratio_row(r, |p| p.page.as_ref().map_or(f64::NAN, |x| x.daemon_cpu_us));
    s += &tables.next(&|p| match &p.page_in_tx {
        Ok(x) => format!("{} [{} pages]", cell(x), p.pages),
        Err(e) => e.clone(),
    });
    s += &ratio_row(r, |p| {
        p.page_in_tx.as_ref().map_or(f64::NAN, |x| x.daemon_cpu_us)
    });
    s += &tables.next(&|p| match &p.page_after_rm {
        Ok(x) => format!("{} [{} pages]", cell(x), p.pages),
        Err(e) => e.clone(),
    });
    s += &ratio_row(r, |p| {
        p.page_after_rm
            .as_ref()
            .map_or(f64::NAN, |x| x.daemon_cpu_us)
    });
    s += &tables.next(&|p| cell(&p.own_value));
    s += &ratio_row(r, |p| p.own_value.daemon_cpu_us);
    s += &tables.next(&|p| cell(&p.tx_child));
    s += &ratio_row(r, |p| p.tx_child.daemon_cpu_us);
    for c in &r.curves {
        if let Some(why) = &c.failed {
            let _ = writeln!(s, "\n{} stops {why}", c.label);
        }
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
