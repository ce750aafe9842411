//! S3 big store: what operations on a host's tree cost as it grows to
//! thousands of domains. At each level every daemon's store holds that
//! many domains' trees (about a hundred nodes each, shaped as `xl create`
//! leaves them: the guest's home, dom0's vbd and vif backends, `/vm`,
//! `/libxl`), and idle dom0 connections hold 15 watches per domain on its
//! nodes. Measured, one daemon after the other at each level:
//! creating and removing a child of `/local/domain`, DIRECTORY and a paged
//! DIRECTORY_PART of `/local/domain`, a walk of the whole tree (as
//! xenstore-ls: list, read each node), `rm` of one domain's 100-node home
//! while a watcher holds 15 watches in it (timed until the watcher has the
//! event for the home), and the resident memory each node costs: that one
//! in a second daemon of the same kind that is only ever written the same
//! trees (no watches, nothing removed), so the trees cannot grow into memory
//! something else freed.

pub mod bigdir;
pub mod report;
pub mod tree;

use crate::daemons::Start;
pub use tree::{domain_tree, nodes_per_domain, SUBTREE_NODES};
use tree::{victim_leaves, watched_in};

use crate::affinity::on_cpu0;
use crate::client::Conn;
use crate::daemons::{cpu_ns, rss_kib, Daemon};
use crate::idle_hosts::timed;
use crate::in_turn;
use crate::stats::Sample;
use anyhow::{bail, Context, Result};
use std::time::{Duration, Instant};
use xenstore_proto::wire::MsgType;

/// The curve's points: how many domains' trees.
pub const LEVELS: [usize; 5] = [10, 100, 500, 1000, 2000];
/// Watches per domain, held by idle dom0 connections.
pub const WATCHES_PER_DOMAIN: usize = 15;
/// Domains whose watches one idle connection holds.
const DOMAINS_PER_WATCHER: usize = 100;
const EVENT_TIMEOUT: Duration = Duration::from_secs(10);
/// The domain whose home `rm` removes and recreates: none of the levels'.
const VICTIM: usize = 30000;
/// The child of /local/domain created and removed: no domain's.
const SCRATCH: &str = "/local/domain/31000";

/// Which daemons, at which levels, how long each run.
pub struct Plan {
    /// (label, how to start it) in column order.
    pub daemons: Vec<(String, Start)>,
    pub levels: Vec<usize>,
    pub run: Duration,
    /// `rm`s of the subtree measured at each level.
    pub removals: usize,
}

/// One daemon's figures at one level.
#[derive(Clone, Debug)]
pub struct Point {
    pub domains: usize,
    /// Nodes of the domains' trees in the store.
    pub nodes: usize,
    /// A daemon written only the trees: its resident set's growth since
    /// before the first write, per node.
    pub rss_per_node: f64,
    /// A write creating a child of /local/domain, then its `rm`: each an op.
    pub create_remove: Sample,
    /// DIRECTORY /local/domain; `Err` says how the daemon answered.
    pub directory: Result<Sample, String>,
    /// /local/domain listed through DIRECTORY_PART, page after page: an op
    /// is the whole listing.
    pub directory_part: Result<Sample, String>,
    /// Replies the listing takes.
    pub directory_part_pages: usize,
    /// The whole tree listed and read: µs per node and nodes seen, or
    /// how the daemon failed it.
    pub walk: Result<(f64, usize), String>,
    /// `rm` of a domain's 100-node home until its watcher has the event.
    pub rm_subtree: Sample,
    /// Events the subtree's watcher got per `rm` (15 expected).
    pub rm_events: usize,
}

pub type Curve = in_turn::Curve<Point>;

pub struct StoreResult {
    pub curves: Vec<Curve>,
    pub run: Duration,
    pub removals: usize,
    pub elapsed: Duration,
}

/// A daemon under test and its store.
struct Host {
    label: String,
    daemon: Daemon,
    load: Conn,
    /// Holds the victim home's watches.
    victim_watcher: Conn,
    domains: usize,
    /// The same trees' memory, measured apart.
    bare: Bare,
}

/// A daemon written the trees and nothing else: it never holds a watch
/// nor frees a node, so its resident set's growth is the trees' own. In
/// the measured host, idle watchers come and go at every level and the
/// next level's nodes reuse what they freed, which flatters every daemon.
struct Bare {
    daemon: Daemon,
    load: Conn,
    /// Resident set before the first write.
    empty_kib: u64,
}

impl Bare {
    fn start(label: &str, start: &Start) -> Result<Bare> {
        let daemon = start.launch(&format!("{label} (trees only)"))?;
        let load = Conn::connect(&daemon.socket)?;
        let empty_kib = rss_kib(daemon.pid())?;
        Ok(Bare {
            daemon,
            load,
            empty_kib,
        })
    }

    /// Resident bytes per node of the trees of `domains` domains, written
    /// from domain `from` on.
    fn grow(&mut self, from: usize, domains: usize) -> Result<f64> {
        write_trees(&mut self.load, from, domains)?;
        let grown = rss_kib(self.daemon.pid())?.saturating_sub(self.empty_kib);
        Ok(grown as f64 * 1024.0 / (domains * nodes_per_domain()) as f64)
    }
}

impl Host {
    fn start(label: &str, start: &Start) -> Result<Host> {
        let daemon = start.launch(label)?;
        let mut load = Conn::connect(&daemon.socket)?;
        let mut victim_watcher = Conn::connect(&daemon.socket)?;
        let home = format!("/local/domain/{VICTIM}");
        for p in watched_in(&home) {
            victim_watcher.watch(p.as_bytes(), b"victim")?;
        }
        write_home(&mut load, VICTIM)?;
        Ok(Host {
            label: label.into(),
            daemon,
            load,
            victim_watcher,
            domains: 0,
            bare: Bare::start(label, start)?,
        })
    }

    /// Writes domains' trees up to `n` here and, at the same time (it
    /// is untimed: only the bare daemon's memory is read), in the bare
    /// daemon; the latter's resident bytes per node.
    fn grow(&mut self, n: usize) -> Result<f64> {
        let (from, load, bare) = (self.domains, &mut self.load, &mut self.bare);
        let (here, rss_per_node) = std::thread::scope(|s| {
            let bare = s.spawn(move || bare.grow(from, n));
            (write_trees(load, from, n), bare.join())
        });
        here?;
        let rss_per_node = rss_per_node
            .map_err(|_| anyhow::anyhow!("the trees-only daemon's writer panicked"))?
            .context("the trees-only daemon")?;
        self.domains = n;
        Ok(rss_per_node)
    }

    /// Idle dom0 connections holding 15 watches in each domain's home.
    fn watchers(&self) -> Result<Vec<Conn>> {
        let mut conns = Vec::new();
        for first in (0..self.domains).step_by(DOMAINS_PER_WATCHER) {
            let mut c = Conn::connect(&self.daemon.socket)?;
            for d in first..(first + DOMAINS_PER_WATCHER).min(self.domains) {
                for p in watched_in(&format!("/local/domain/{}", d + 1)) {
                    c.watch(p.as_bytes(), b"idle")?;
                }
            }
            conns.push(c);
        }
        Ok(conns)
    }

    fn create_remove(&mut self, run: Duration) -> Result<Sample> {
        let load = &mut self.load;
        let s = timed(self.daemon.pid(), run, |_| {
            load.write(0, SCRATCH.as_bytes(), b"1")?.ok()?;
            load.call(MsgType::Rm, 0, &[SCRATCH.as_bytes(), b"\0"])?
                .ok()?;
            Ok(())
        })?;
        Ok(s.per_request(2))
    }

    /// DIRECTORY /local/domain; an error reply (C says E2BIG past ~900
    /// domains: the listing no longer fits one reply) is the answer.
    fn directory(&mut self, run: Duration) -> Result<Result<Sample, String>> {
        let mut probe = Conn::connect(&self.daemon.socket)?;
        let refused = match probe.directory(b"/local/domain") {
            Ok(reply) => reply.ok().err(),
            Err(e) => Some(e),
        };
        if let Some(e) = refused {
            return Ok(Err(format!("{e:#}")));
        }
        let load = &mut self.load;
        let s = timed(self.daemon.pid(), run, |_| {
            load.directory(b"/local/domain")?.ok()?;
            Ok(())
        })?;
        Ok(Ok(s))
    }

    /// The paged listing's sample, and how many pages it takes.
    fn directory_part(&mut self, run: Duration) -> Result<(Result<Sample, String>, usize)> {
        let want = self.domains + 2; // and dom0's and the victim's
        let pages = match list_pages(&mut self.load, "/local/domain", 0) {
            Ok(l) if l.names.len() == want => l.pages,
            Ok(l) => bail!("DIRECTORY_PART listed {} of {want} domains", l.names.len()),
            Err(e) => return Ok((Err(format!("{e:#}")), 0)),
        };
        let load = &mut self.load;
        let s = timed(self.daemon.pid(), run, |_| {
            list_pages(load, "/local/domain", 0)?;
            Ok(())
        })?;
        Ok((Ok(s), pages))
    }

    /// Every node listed (DIRECTORY, else DIRECTORY_PART when the listing
    /// is too long for one reply, as libxenstore does) and read.
    /// On a connection of its own: a daemon that answers with more than a
    /// reply may hold (oxenstored's DIRECTORY) leaves it unusable.
    fn walk(&mut self) -> Result<(f64, usize)> {
        let mut c = Conn::connect(&self.daemon.socket)?;
        let began = Instant::now();
        let mut stack = vec!["/".to_string()];
        let mut seen = 0;
        while let Some(p) = stack.pop() {
            c.read(p.as_bytes())?.ok()?;
            seen += 1;
            for c in list(&mut c, &p).with_context(|| format!("list {p}"))? {
                stack.push(if p == "/" {
                    format!("/{c}")
                } else {
                    format!("{p}/{c}")
                });
            }
        }
        Ok((began.elapsed().as_secs_f64() * 1e6 / seen as f64, seen))
    }

    /// Removes the victim's home `removals` times, each timed until its
    /// watcher has the home's event; rewritten (untimed) after each.
    fn rm_subtree(&mut self, removals: usize) -> Result<(Sample, usize)> {
        let home = format!("/local/domain/{VICTIM}");
        let pid = self.daemon.pid();
        let (lat, secs, cpu, events) = on_cpu0(pid, || {
            let mut lat = Vec::with_capacity(removals);
            let (mut cpu, mut secs, mut events) = (0, 0.0, 0);
            for _ in 0..removals {
                self.settle_victim()?;
                let cpu_before = cpu_ns(pid)?;
                let t = Instant::now();
                self.load
                    .call(MsgType::Rm, 0, &[home.as_bytes(), b"\0"])?
                    .ok()?;
                loop {
                    events += 1;
                    if self.victim_watcher.event(EVENT_TIMEOUT)? == home.as_bytes() {
                        break;
                    }
                }
                let took = t.elapsed();
                cpu += cpu_ns(pid)? - cpu_before;
                secs += took.as_secs_f64();
                lat.push(took.as_nanos().min(u32::MAX as u128) as u32);
                write_home(&mut self.load, VICTIM)?;
            }
            Ok((lat, secs, cpu, events))
        })?;
        let mut s = Sample::from_latencies(lat, secs);
        s.daemon_cpu_us = cpu as f64 / 1000.0 / removals.max(1) as f64;
        Ok((s, events / removals.max(1)))
    }

    /// Reads the watcher's events up to the one for the home's last node
    /// written: what the rewrite fired is not counted in the next `rm`.
    fn settle_victim(&mut self) -> Result<()> {
        let leaves = victim_leaves(VICTIM);
        let last = format!(
            "/local/domain/{VICTIM}/{}",
            leaves.last().expect("leaves").0
        );
        while self.victim_watcher.event(EVENT_TIMEOUT)? != last.as_bytes() {}
        Ok(())
    }

    fn point(&mut self, plan: &Plan, rss_per_node: f64) -> Result<Point> {
        let watchers = self.watchers().context("register the idle watches")?;
        let nodes = self.domains * nodes_per_domain();
        let walk = self.walk().map_err(|e| format!("{e:#}"));
        let (rm_subtree, rm_events) = self.rm_subtree(plan.removals).context("rm")?;
        let (directory_part, directory_part_pages) =
            self.directory_part(plan.run).context("DIRECTORY_PART")?;
        let point = Point {
            domains: self.domains,
            nodes,
            rss_per_node,
            create_remove: self.create_remove(plan.run).context("create/remove")?,
            directory: self.directory(plan.run).context("DIRECTORY")?,
            directory_part,
            directory_part_pages,
            walk,
            rm_subtree,
            rm_events,
        };
        drop(watchers);
        Ok(point)
    }
}

/// Writes the trees of domains `from + 1` to `to`.
fn write_trees(c: &mut Conn, from: usize, to: usize) -> Result<()> {
    for d in from..to {
        for (path, value) in domain_tree(d + 1) {
            c.write(0, path.as_bytes(), value.as_bytes())?
                .ok()
                .with_context(|| format!("write {path}"))?;
        }
    }
    Ok(())
}

/// Writes the victim's home (its 100 nodes), its last leaf last.
fn write_home(c: &mut Conn, domid: usize) -> Result<()> {
    for (p, v) in victim_leaves(domid) {
        let path = format!("/local/domain/{domid}/{p}");
        c.write(0, path.as_bytes(), v.as_bytes())?
            .ok()
            .with_context(|| format!("write {path}"))?;
    }
    Ok(())
}

/// `path`'s children: DIRECTORY, or page by page when it is too long.
fn list(c: &mut Conn, path: &str) -> Result<Vec<String>> {
    let reply = c.directory(path.as_bytes())?;
    if reply.ty == MsgType::Error as u32 && reply.payload.starts_with(b"E2BIG") {
        return list_pages(c, path, 0).map(|l| l.names);
    }
    Ok(names(reply.ok()?))
}

/// A listing read through DIRECTORY_PART.
pub struct Listed {
    pub names: Vec<String>,
    /// Replies it took.
    pub pages: usize,
    /// Bytes of the listing (each name and its NUL).
    pub bytes: usize,
}

/// `path`'s children through DIRECTORY_PART, from offset 0 until the
/// page that ends the list, in transaction `tx` (0: none); fails if the
/// node changed between pages.
pub fn list_pages(c: &mut Conn, path: &str, tx: u32) -> Result<Listed> {
    let mut all = Vec::new();
    let mut pages = 0;
    let mut offset = 0usize;
    let mut generation: Option<Vec<u8>> = None;
    loop {
        let off = offset.to_string();
        let reply = c.call(
            MsgType::DirectoryPart,
            tx,
            &[path.as_bytes(), b"\0", off.as_bytes(), b"\0"],
        )?;
        let payload = reply.ok()?;
        pages += 1;
        let Some(cut) = payload.iter().position(|&b| b == 0) else {
            bail!("DIRECTORY_PART {path}: no generation in the reply");
        };
        let (gen, rest) = (&payload[..cut], &payload[cut + 1..]);
        if generation.as_deref().is_some_and(|g| g != gen) {
            bail!("DIRECTORY_PART {path}: the node changed between pages");
        }
        generation = Some(gen.to_vec());
        // The last page ends with an empty name (an extra NUL).
        let done = rest.is_empty() || rest.ends_with(b"\0\0");
        let page = rest.strip_suffix(b"\0").unwrap_or(rest);
        offset += page.len() + usize::from(!page.is_empty());
        all.extend(names(page));
        if done {
            let bytes = all.iter().map(|n| n.len() + 1).sum();
            return Ok(Listed {
                names: all,
                pages,
                bytes,
            });
        }
    }
}

fn names(listing: &[u8]) -> Vec<String> {
    listing
        .split(|&b| b == 0)
        .filter(|n| !n.is_empty())
        .map(|n| String::from_utf8_lossy(n).into_owned())
        .collect()
}

/// Runs the plan: at each level every daemon grows its store, then is
/// measured; one daemon at a time holds its idle watchers.
pub fn run(plan: &Plan) -> StoreResult {
    let started = Instant::now();
    let curves = in_turn::run(
        &plan.daemons,
        &plan.levels,
        Host::start,
        |h, n| {
            h.grow(n)
                .with_context(|| format!("write {n} domains' trees"))
                .and_then(|rss_per_node| h.point(plan, rss_per_node))
                .map_err(|e| format!("{} at {n} domains: {e:#}", h.label))
        },
        |n, secs| eprintln!("bench: S3 big store, {n} domains done ({secs:.0} s)"),
    );
    StoreResult {
        curves,
        run: plan.run,
        removals: plan.removals,
        elapsed: started.elapsed(),
    }
}

/// S3: the big store, then the big directory, on every daemon.
pub fn section(s: &crate::scale::Scale) -> crate::scale::Part {
    crate::idle_hosts::raise_fd_limit();
    let plan = Plan {
        daemons: s.shim_starts(),
        levels: s.pick(vec![2, 12], vec![10, 500, 2000], LEVELS.to_vec()),
        run: s.pick(Duration::from_millis(100), s.run / 2, s.run / 2),
        removals: s.pick(3, 5, 20),
    };
    let store = run(&plan);
    let big = bigdir::run(&bigdir::Plan {
        daemons: plan.daemons.clone(),
        levels: s.pick(
            vec![10, 2500],
            bigdir::QUICK_LEVELS.to_vec(),
            bigdir::LEVELS.to_vec(),
        ),
        run: plan.run,
    });
    let mut failures = Vec::new();
    for c in &store.curves {
        failures.extend(c.failed.iter().map(|f| format!("{}: {f}", c.label)));
        for p in &c.points {
            let errors = [
                p.walk.as_ref().err(),
                p.directory.as_ref().err(),
                p.directory_part.as_ref().err(),
            ];
            failures.extend(
                errors
                    .into_iter()
                    .flatten()
                    .map(|e| format!("{} at {} domains: {e}", c.label, p.domains)),
            );
        }
    }
    for c in &big.curves {
        failures.extend(
            c.failed
                .iter()
                .map(|f| format!("big directory, {}: {f}", c.label)),
        );
        for p in &c.points {
            failures.extend(p.ops.iter().filter_map(|op| {
                let e = op.as_ref().err()?;
                Some(format!(
                    "big directory, {} at {} children: {e}",
                    c.label, p.children
                ))
            }));
        }
    }
    crate::scale::Part {
        text: report::render(&store) + &bigdir::render(&big) + "\n",
        failures,
        ..Default::default()
    }
}
