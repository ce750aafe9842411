//! S3's big directory: what a child costs as one directory grows to tens
//! of thousands of children (`/local/domain`, `backend/vbd` and `/vm` on a
//! host with that many guests), made cheaply with plain writes of empty
//! leaves below `/bigdir`. At each number of children every daemon in
//! turn: creating and removing a new child (at the list's end), removing
//! the oldest child and writing it back (the whole list after it moves),
//! DIRECTORY_PART of the directory, page by page (alone, in a
//! transaction, and in one that removed a child), a write of the
//! directory's own value, and transactions that add a child and remove it.

use crate::client::Conn;
use crate::daemons::Start;
use crate::idle_hosts::timed;
use crate::in_turn;
use crate::s3_big_store::list_pages;
use crate::stats::Sample;
use anyhow::{bail, Context, Result};
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
    /// A write creating a new child, then its `rm`: each request an op.
    pub create_remove: Sample,
    /// `rm` of the oldest child, then its write (it goes to the end): each
    /// request an op.
    pub oldest: Sample,
    /// DIRECTORY_PART, every page of the listing: an op is a page.
    pub page: Result<Sample, String>,
    /// The same in a transaction of its own, started and ended with the
    /// pages: an op is a page, the transaction's cost shared among them.
    pub page_in_tx: Result<Sample, String>,
    /// The same in a transaction that first removed a child in the middle
    /// of the list (then aborted): an op is a page.
    pub page_after_rm: Result<Sample, String>,
    pub pages: usize,
    /// A write of the directory's own value: each request an op.
    pub own_value: Sample,
    /// A transaction writing a new child and committing, then one removing
    /// it and committing: each request (3 a transaction) an op.
    pub tx_child: Sample,
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

    fn point(&mut self, run: Duration) -> Result<Point> {
        let pid = self.daemon.pid();
        let load = &mut self.load;
        let mut create_remove = timed(pid, run, |_| {
            load.write(0, SCRATCH.as_bytes(), b"")?.ok()?;
            load.call(MsgType::Rm, 0, &[SCRATCH.as_bytes(), b"\0"])?
                .ok()?;
            Ok(())
        })
        .context("create/remove")?;
        create_remove = create_remove.per_request(2);
        // The children in creation order: each taken from the front of
        // the list and written back at its end, so the next is first.
        let (children, mut next) = (self.children, 0);
        let mut oldest = timed(pid, run, |_| {
            let path = format!("{DIR}/{}", next % children);
            next += 1;
            load.call(MsgType::Rm, 0, &[path.as_bytes(), b"\0"])?.ok()?;
            load.write(0, path.as_bytes(), b"")?.ok()?;
            Ok(())
        })
        .context("rm the oldest")?;
        oldest = oldest.per_request(2);
        let mut own_value = timed(pid, run, |i| {
            let value: &[u8] = if i % 2 == 0 { b"a" } else { b"b" };
            load.write(0, DIR.as_bytes(), value)?.ok()?;
            Ok(())
        })
        .context("write the directory's value")?;
        own_value = own_value.per_request(1);
        let mut tx_child = timed(pid, run, |_| {
            for remove in [false, true] {
                let tx = load.tx_start()?;
                if remove {
                    load.call(MsgType::Rm, tx, &[TX_SCRATCH.as_bytes(), b"\0"])?
                        .ok()?;
                } else {
                    load.write(tx, TX_SCRATCH.as_bytes(), b"")?.ok()?;
                }
                if !load.tx_commit(tx)? {
                    bail!("a lone transaction on {TX_SCRATCH} conflicted");
                }
            }
            Ok(())
        })
        .context("a child added and removed in transactions")?;
        tx_child = tx_child.per_request(6);
        let (pages, listing_bytes) = match list_pages(load, DIR, 0) {
            Ok(l) if l.names.len() == children => (l.pages, l.bytes),
            Ok(l) => bail!("DIRECTORY_PART listed {} of {children}", l.names.len()),
            Err(e) => {
                return Ok(Point {
                    children,
                    listing_bytes: 0,
                    create_remove,
                    oldest,
                    page: Err(format!("{e:#}")),
                    page_in_tx: Err(format!("{e:#}")),
                    page_after_rm: Err(format!("{e:#}")),
                    pages: 0,
                    own_value,
                    tx_child,
                })
            }
        };
        let mut page = timed(pid, run, |_| {
            list_pages(load, DIR, 0)?;
            Ok(())
        })
        .context("DIRECTORY_PART")?;
        page = page.per_request(pages);
        let mut page_in_tx = timed(pid, run, |_| {
            let tx = load.tx_start()?;
            list_pages(load, DIR, tx)?;
            load.tx_commit(tx)?;
            Ok(())
        })
        .context("DIRECTORY_PART in a transaction")?;
        page_in_tx = page_in_tx.per_request(pages);
        let middle = format!("{DIR}/{}", children / 2);
        let mut page_after_rm = timed(pid, run, |_| {
            let tx = load.tx_start()?;
            load.call(MsgType::Rm, tx, &[middle.as_bytes(), b"\0"])?
                .ok()?;
            let listed = list_pages(load, DIR, tx)?;
            if listed.names.len() + 1 != children {
                bail!(
                    "DIRECTORY_PART after an rm listed {} of {children}",
                    listed.names.len()
                );
            }
            load.call(MsgType::TransactionEnd, tx, &[b"F\0"])?.ok()?;
            Ok(())
        })
        .context("DIRECTORY_PART in a transaction that removed a child")?;
        page_after_rm = page_after_rm.per_request(pages);
        Ok(Point {
            children,
            listing_bytes,
            create_remove,
            oldest,
            page: Ok(page),
            page_in_tx: Ok(page_in_tx),
            page_after_rm: Ok(page_after_rm),
            pages,
            own_value,
            tx_child,
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
