//! S3's big directory: what a child costs as one directory grows to tens
//! of thousands of children (`/local/domain`, `backend/vbd` and `/vm` on a
//! host with that many guests), made cheaply with plain writes of empty
//! leaves below `/bigdir`. At each number of children every daemon in
//! turn: the operations of [`OPS`], one table each, one column a daemon,
//! one row a number of children, and how much each daemon's cost grew
//! from the fewest children to the most.

use crate::client::Conn;
use crate::daemons::Start;
use crate::idle_hosts::timed;
use crate::in_turn;
use crate::s3_big_store::list_pages;
use crate::scale::{cell, CurveTables};
use crate::stats::Sample;
use crate::template::fill;
use anyhow::{bail, Context, Result};
use std::fmt::Write;
use std::time::{Duration, Instant};
use xenstore_proto::wire::MsgType;

/// The curve's points: children of the directory (30000 decimal names
/// are 170 kB of listing, 42 DIRECTORY_PART pages).
pub const LEVELS: [usize; 4] = [10, 1000, 10000, 30000];
pub const QUICK_LEVELS: [usize; 3] = [10, 1000, 10000];
const DIR: &str = "/bigdir";
/// The child created and removed: none of the numbered ones.
const SCRATCH: &str = "/bigdir/scratch";
/// The child a transaction adds and the next removes.
const TX_SCRATCH: &str = "/bigdir/tx-scratch";
/// A daemon whose writes make the next level take longer stops there.
const GROW_BUDGET: Duration = Duration::from_secs(120);

/// What is measured at each level, in the template's order of tables:
/// what, and the requests an op makes (0: a page of the listing each).
const OPS: [(&str, usize); 7] = [
    // A write creating a new child, then its `rm`.
    ("create/remove", 2),
    // `rm` of the oldest child, then its write (it goes to the end).
    ("rm the oldest", 2),
    // DIRECTORY_PART, every page of the listing.
    ("DIRECTORY_PART", 0),
    // The same in a transaction of its own, started and ended with the
    // pages: the transaction's cost shared among them.
    ("DIRECTORY_PART in a transaction", 0),
    // The same in a transaction that first removed a child in the middle
    // of the list (then aborted).
    ("DIRECTORY_PART in a transaction that removed a child", 0),
    // A write of the directory's own value.
    ("write the directory's value", 1),
    // A transaction writing a new child and committing, then one
    // removing it and committing: 3 requests a transaction.
    ("a child added and removed in transactions", 6),
];

pub struct Plan {
    /// (label, how to start it) in column order.
    pub daemons: Vec<(String, Start)>,
    pub levels: Vec<usize>,
    pub run: Duration,
}

#[derive(Clone, Debug)]
pub struct Point {
    pub children: usize,
    /// Bytes of the listing (names and their NULs).
    pub listing_bytes: usize,
    /// Pages the listing takes.
    pub pages: usize,
    /// Each of [`OPS`], per request, or how the daemon failed it.
    pub ops: Vec<Result<Sample, String>>,
}

pub type Curve = in_turn::Curve<Point>;

pub struct BigDirResult {
    pub curves: Vec<Curve>,
    pub run: Duration,
    pub elapsed: Duration,
}

struct Host {
    daemon: crate::daemons::Daemon,
    load: Conn,
    children: usize,
}

impl Host {
    fn start(label: &str, start: &Start) -> Result<Host> {
        let daemon = start.launch(label)?;
        let load = Conn::connect(&daemon.socket)?;
        Ok(Host {
            daemon,
            load,
            children: 0,
        })
    }

    fn grow(&mut self, n: usize) -> Result<()> {
        let began = Instant::now();
        for i in self.children..n {
            let path = format!("{DIR}/{i}");
            self.load
                .write(0, path.as_bytes(), b"")?
                .ok()
                .with_context(|| format!("write {path}"))?;
            if began.elapsed() > GROW_BUDGET {
                bail!(
                    "writing children {}..{n} took over {} s (at {i})",
                    self.children,
                    GROW_BUDGET.as_secs()
                );
            }
        }
        self.children = n;
        Ok(())
    }

    /// One op of [`OPS`] (`i`), its `n`th time.
    fn op(&mut self, i: usize, n: usize) -> Result<()> {
        let (load, children) = (&mut self.load, self.children);
        let rm = |load: &mut Conn, tx, path: &str| -> Result<()> {
            load.call(MsgType::Rm, tx, &[path.as_bytes(), b"\0"])?
                .ok()?;
            Ok(())
        };
        match i {
            0 => {
                load.write(0, SCRATCH.as_bytes(), b"")?.ok()?;
                rm(load, 0, SCRATCH)?;
            }
            1 => {
                // The children in creation order: each taken from the front
                // of the list and written back at its end, so the next is first.
                let path = format!("{DIR}/{}", n % children);
                rm(load, 0, &path)?;
                load.write(0, path.as_bytes(), b"")?.ok()?;
            }
            2 => {
                list_pages(load, DIR, 0)?;
            }
            3 => {
                let tx = load.tx_start()?;
                list_pages(load, DIR, tx)?;
                load.tx_commit(tx)?;
            }
            4 => {
                let tx = load.tx_start()?;
                rm(load, tx, &format!("{DIR}/{}", children / 2))?;
                let listed = list_pages(load, DIR, tx)?;
                if listed.names.len() + 1 != children {
                    bail!(
                        "DIRECTORY_PART after an rm listed {} of {children}",
                        listed.names.len()
                    );
                }
                load.call(MsgType::TransactionEnd, tx, &[b"F\0"])?.ok()?;
            }
            5 => {
                let value: &[u8] = if n.is_multiple_of(2) { b"a" } else { b"b" };
                load.write(0, DIR.as_bytes(), value)?.ok()?;
            }
            _ => {
                for remove in [false, true] {
                    let tx = load.tx_start()?;
                    if remove {
                        rm(load, tx, TX_SCRATCH)?;
                    } else {
                        load.write(tx, TX_SCRATCH.as_bytes(), b"")?.ok()?;
                    }
                    if !load.tx_commit(tx)? {
                        bail!("a lone transaction on {TX_SCRATCH} conflicted");
                    }
                }
            }
        }
        Ok(())
    }

    fn point(&mut self, run: Duration) -> Result<Point> {
        let children = self.children;
        let listed = match list_pages(&mut self.load, DIR, 0) {
            Ok(l) if l.names.len() == children => Ok((l.pages, l.bytes)),
            Ok(l) => bail!("DIRECTORY_PART listed {} of {children}", l.names.len()),
            Err(e) => Err(format!("{e:#}")),
        };
        let (pages, listing_bytes) = *listed.as_ref().unwrap_or(&(0, 0));
        let mut ops = Vec::new();
        for (i, (what, per)) in OPS.into_iter().enumerate() {
            if per == 0 {
                if let Err(e) = &listed {
                    ops.push(Err(e.clone()));
                    continue;
                }
            }
            let pid = self.daemon.pid();
            let s = timed(pid, run, |n| self.op(i, n)).context(what)?;
            ops.push(Ok(s.per_request(if per == 0 { pages } else { per })));
        }
        Ok(Point {
            children,
            listing_bytes,
            pages,
            ops,
        })
    }
}

/// Runs the plan: at each level every daemon grows its directory, then is
/// measured, one after the other.
pub fn run(plan: &Plan) -> BigDirResult {
    let started = Instant::now();
    let curves = in_turn::run(
        &plan.daemons,
        &plan.levels,
        Host::start,
        |h, n| {
            h.grow(n)
                .and_then(|()| h.point(plan.run))
                .map_err(|e| format!("at {n} children: {e:#}"))
        },
        |n, secs| eprintln!("bench: S3 big directory, {n} children done ({secs:.0} s)"),
    );
    BigDirResult {
        curves,
        run: plan.run,
        elapsed: started.elapsed(),
    }
}

pub fn render(r: &BigDirResult) -> String {
    let text = fill(
        include_str!("../../report/s3-big-directory.md"),
        &[
            ("run", format!("{:.2}", r.run.as_secs_f64())),
            ("elapsed", format!("{:.0}", r.elapsed.as_secs_f64())),
        ],
    );
    let key = |p: &Point| (p.children, p.listing_bytes);
    let (intro, mut tables) = CurveTables::new(&text, "children (listing bytes)", key, &r.curves);
    let mut s = format!("{intro}\n");
    for (i, (_, per)) in OPS.into_iter().enumerate() {
        s += &tables.next(&|p| match &p.ops[i] {
            Ok(x) if per == 0 => format!("{} [{} pages]", cell(x), p.pages),
            Ok(x) => cell(x),
            Err(e) => e.clone(),
        });
        s += &ratio_row(r, |p| {
            p.ops[i].as_ref().map_or(f64::NAN, |x| x.daemon_cpu_us)
        });
    }
    for c in &r.curves {
        if let Some(why) = &c.failed {
            let _ = writeln!(s, "\n{} stops {why}", c.label);
        }
    }
    s
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
