//! S4 in a big store: what releasing a few dying domains costs as the store
//! around them grows. At each level a fresh daemon holds that many
//! background domains' trees (S3's xl-shaped ~100 nodes each, with the
//! permissions libxl gives them: the home owned by the domain, its
//! backends, `/vm/<uuid>` and `/libxl/<domid>` readable by it), plus
//! DYING introduced domains with the same trees on simulated rings; then
//! those die at once. Measured: the daemon's CPU and the time from the
//! first death until a `@releaseDomain` watcher has heard of the last
//! release. Release that walks the whole store grows with the level;
//! release through the store's index of where each domain is mentioned
//! should not.

use super::wait_released;
use crate::client::Conn;
use crate::daemons::{self, cpu_ns, rss_kib, Daemon};
use crate::guests;
use crate::s3_big_store::{domain_tree, nodes_per_domain};
use anyhow::{bail, Context, Result};
use std::path::Path;
use std::time::{Duration, Instant};
use xenstore_guest::client::{SocketLink, Xs};

/// Background domains at each point (2000: S3's ~212 000 nodes).
pub const LEVELS: [usize; 4] = [10, 100, 500, 2000];
/// Domains dying at once at every level.
pub const DYING: u16 = 10;
/// The dying domains' ids start here, above every level's background.
const FIRST_DYING: u16 = 20001;
const DEADLINE: Duration = Duration::from_secs(60);

/// One release at one level.
#[derive(Clone, Copy, Debug)]
pub struct Point {
    pub background: usize,
    /// Nodes of all the trees, the dying domains' included.
    pub nodes: usize,
    /// First death until the watcher heard of the last release.
    pub released: Duration,
    /// The daemon's CPU over the same span.
    pub daemon_cpu_ms: f64,
    /// Growth of the resident set while the background trees were
    /// written, per node (the index's cost included).
    pub rss_per_node: f64,
    /// The daemon's CPU per request writing the background trees (MKDIR,
    /// SET_PERMS, WRITE; one client, one request at a time).
    pub setup_cpu_us_per_request: f64,
}

/// A domain's tree as libxl leaves it, permissions included: the
/// directories that carry the domain's permissions first, so the nodes
/// written below inherit them. Returns the requests it made.
fn write_tree(dom0: &mut Xs<SocketLink>, domid: usize) -> Result<usize> {
    let home = format!("/local/domain/{domid}");
    dom0.mkdir(0, &home)?;
    dom0.set_perms(0, &home, &[&format!("n{domid}")])?;
    let readable = [
        format!("/local/domain/0/backend/vbd/{domid}/51712"),
        format!("/local/domain/0/backend/vif/{domid}/0"),
        format!("/vm/00000000-0000-4000-8000-{domid:012}"),
        format!("/libxl/{domid}"),
    ];
    for dir in &readable {
        dom0.mkdir(0, dir)?;
        dom0.set_perms(0, dir, &["n0", &format!("r{domid}")])?;
    }
    let leaves = domain_tree(domid);
    for (path, value) in &leaves {
        dom0.write(0, path, value)
            .with_context(|| format!("write {path}"))?;
    }
    Ok(2 + 2 * readable.len() + leaves.len())
}

pub fn release_in_store(label: &str, binary: &Path, background: usize) -> Result<Point> {
    let daemon = daemons::shim(label, binary)?;
    // Client and daemon share CPU 0, as in the rest of the scale section:
    // unpinned, a cross-CPU wake-up on this kind of VM costs the daemon
    // tens of µs a request, more than the request itself.
    crate::affinity::on_cpu0(daemon.pid(), || measure_release(&daemon, background))
}

fn measure_release(daemon: &Daemon, background: usize) -> Result<Point> {
    let rings = daemon.dir.join("run");
    let mut dom0 = Xs::connect(&daemon.socket)?;
    let rss_before = rss_kib(daemon.pid())?;
    let setup_cpu = cpu_ns(daemon.pid())?;
    let mut requests = 0;
    for d in 1..=background {
        requests += write_tree(&mut dom0, d)?;
    }
    let setup_cpu = cpu_ns(daemon.pid())? - setup_cpu;
    let rss_grown = rss_kib(daemon.pid())?.saturating_sub(rss_before);
    let dying: Vec<u16> = (FIRST_DYING..FIRST_DYING + DYING).collect();
    for &d in &dying {
        write_tree(&mut dom0, d.into())?;
        xenstore_guest::boot::introduce(&mut dom0, &rings, d)
            .with_context(|| format!("introduce domain {d}"))?;
    }
    let mut watcher = Conn::connect(&daemon.socket)?;
    watcher.watch(b"@releaseDomain", b"xl")?;
    watcher.event(DEADLINE)?; // the watch's first event
    let mut ask = Conn::connect(&daemon.socket)?;
    let cpu_before = cpu_ns(daemon.pid())?;
    let began = Instant::now();
    for &d in &dying {
        guests::die(&rings, d)?;
    }
    wait_released(&mut ask, &dying, began, DEADLINE, || {
        watcher.event(DEADLINE).context("@releaseDomain")?;
        Ok(())
    })?;
    let released = began.elapsed();
    let cpu = cpu_ns(daemon.pid())? - cpu_before;
    for &d in &dying {
        let home = format!("/local/domain/{d}/name");
        if dom0.read(0, &home).is_ok() {
            bail!("{home} outlived its domain");
        }
    }
    Ok(Point {
        background,
        nodes: (background + usize::from(DYING)) * nodes_per_domain(),
        released,
        daemon_cpu_ms: cpu as f64 / 1e6,
        rss_per_node: (rss_grown * 1024) as f64 / (background * nodes_per_domain()) as f64,
        setup_cpu_us_per_request: setup_cpu as f64 / 1e3 / requests as f64,
    })
}
