//! The load: dom0 clients on the daemon's socket and guests on simulated
//! rings, each a thread making random requests until told to stop, with
//! random disconnects and stretches where it stops reading. Counter
//! increments in transactions conflict on purpose; each side counts its
//! commits so the store's counters can be checked at the end.

use anyhow::{bail, Context, Result};
use fastrand::Rng;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use std::time::{Duration, Instant};
use xenstore_guest::boot;
use xenstore_guest::client::{is_xs_error, Guest, Link, SocketLink, Xs};
use xenstore_proto::wire::Header;
use xenstored_probes::conn::ring::Field;
use xenstored_probes::wire::XsError;

/// Keys every dom0 client reads and writes: /soak/k/<0..KEYS>.
const KEYS: u64 = 256;
/// Counters dom0 clients increment in transactions: /soak/ctr/<0..COUNTERS>.
const COUNTERS: usize = 4;
/// Keys of each guest's own: /local/domain/<id>/data/k<0..GUEST_KEYS>.
const GUEST_KEYS: u64 = 32;
/// A request's reply may take this long on a loaded machine.
const REPLY_TIMEOUT: Duration = Duration::from_secs(60);

/// What the workers share: where the daemon is, when to stop, what they did.
#[derive(Default)]
pub struct Ctx {
    socket: PathBuf,
    run_dir: PathBuf,
    guests: u16,
    pub stop: AtomicBool,
    pub ops: AtomicU64,
    pub events: AtomicU64,
    pub conflicts: AtomicU64,
    pub disconnects: AtomicU64,
    pub stalls: AtomicU64,
    /// Commits per /soak/ctr counter.
    commits: [AtomicU64; COUNTERS],
    /// Commits per guest's data/ctr (index: domid - 1), by dom0 or the guest.
    guest_commits: Vec<AtomicU64>,
}

impl Ctx {
    pub fn new(socket: &Path, run_dir: &Path, guests: u16) -> Arc<Ctx> {
        Arc::new(Ctx {
            socket: socket.to_path_buf(),
            run_dir: run_dir.to_path_buf(),
            guests,
            guest_commits: (0..guests).map(|_| AtomicU64::new(0)).collect(),
            ..Ctx::default()
        })
    }

    fn stopped(&self) -> bool {
        self.stop.load(Relaxed)
    }

    fn count(what: &AtomicU64) {
        what.fetch_add(1, Relaxed);
    }

    pub fn dom0(&self) -> Result<Xs<SocketLink>> {
        let mut c = Xs::connect(&self.socket)?;
        c.timeout = REPLY_TIMEOUT;
        Ok(c)
    }

    /// Sleeps until `end`, or less once told to stop.
    pub fn pause_until(&self, end: Instant) {
        while !self.stopped() && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn pause(&self, rng: &mut Rng) {
        self.pause_until(Instant::now() + Duration::from_millis(rng.u64(300..2000)));
    }
}

fn guest_home(domid: u16) -> String {
    format!("/local/domain/{domid}")
}

/// The store the load expects: every key and counter present.
pub fn seed_store(admin: &mut Xs<SocketLink>) -> Result<()> {
    let keys = (0..KEYS).map(|k| format!("/soak/k/{k}"));
    for path in keys.chain((0..COUNTERS).map(|c| format!("/soak/ctr/{c}"))) {
        admin.write(0, &path, "0")?;
    }
    Ok(())
}

/// The toolstack's part of a domain start: its home, owned by it, with
/// its keys; its page and port; XS_INTRODUCE.
pub fn introduce(admin: &mut Xs<SocketLink>, run_dir: &Path, domid: u16) -> Result<()> {
    let home = guest_home(domid);
    let keys: Vec<String> = (0..GUEST_KEYS)
        .map(|k| format!("{home}/data/k{k}"))
        .chain([format!("{home}/data/ctr")])
        .collect();
    for key in &keys {
        admin.write(0, key, "0")?;
    }
    for path in [home.clone(), format!("{home}/data")].iter().chain(&keys) {
        admin.set_perms(0, path, &[&format!("n{domid}")])?;
    }
    Ok(boot::introduce(admin, run_dir, domid)?)
}

/// Each counter's value is the number of increments that committed.
pub fn check_counters(admin: &mut Xs<SocketLink>, ctx: &Ctx) -> Result<()> {
    let dom0 = (ctx.commits.iter().enumerate()).map(|(i, n)| (format!("/soak/ctr/{i}"), n));
    let guests = (ctx.guest_commits.iter().enumerate())
        .map(|(i, n)| (format!("{}/data/ctr", guest_home(i as u16 + 1)), n));
    for (path, commits) in dom0.chain(guests) {
        let v = admin.read(0, &path)?;
        let value: u64 = v.parse().with_context(|| format!("{path} = {v:?}"))?;
        let commits = commits.load(Relaxed);
        if value != commits {
            bail!("{path} is {value} after {commits} committed increments");
        }
    }
    Ok(())
}

/// Reads a counter, writes it plus one and commits, in one transaction,
/// and counts the commit in `commits` (nothing on a conflict: EAGAIN).
/// Its four requests.
fn increment<L: Link>(c: &mut Xs<L>, ctx: &Ctx, path: &str, commits: &AtomicU64) -> Result<u64> {
    let tx = c.transaction_start()?;
    let v = c.read(tx, path)?;
    let v: u64 = v.parse().with_context(|| format!("{path} is {v:?}"))?;
    c.write(tx, path, &(v + 1).to_string())?;
    match c.transaction_end(tx, true) {
        Ok(()) => Ctx::count(commits),
        Err(e) if is_xs_error(&e, XsError::Eagain) => Ctx::count(&ctx.conflicts),
        Err(e) => return Err(e.into()),
    }
    Ok(4)
}

/// Takes the watch events queued so far, without waiting.
fn drain<L: Link>(c: &mut Xs<L>, ctx: &Ctx) -> Result<()> {
    while c.next_event(Duration::ZERO)?.is_some() {
        Ctx::count(&ctx.events);
    }
    Ok(())
}

/// One dom0 client until stopped.
pub fn dom0(ctx: &Ctx, mut rng: Rng) -> Result<()> {
    let mut c = ctx.dom0()?;
    let mut watches: Vec<(String, String)> = Vec::new();
    let mut next_token = 0u64;
    while !ctx.stopped() {
        let key = format!("/soak/k/{}", rng.u64(..KEYS));
        let guest = rng.u16(1..=ctx.guests);
        let guest_data = format!("{}/data", guest_home(guest));
        let requests = match rng.u32(..10_000) {
            0..=3499 => c.read(0, &key).map(|_| 1)?,
            3500..=5999 => c.write(0, &key, &rng.u64(..).to_string()).map(|()| 1)?,
            6000..=6299 => c.directory(0, "/soak/k").map(|_| 1)?,
            6300..=7799 => {
                let i = rng.usize(..COUNTERS);
                increment(&mut c, ctx, &format!("/soak/ctr/{i}"), &ctx.commits[i])?
            }
            7800..=8299 => {
                let commits = &ctx.guest_commits[guest as usize - 1];
                increment(&mut c, ctx, &format!("{guest_data}/ctr"), commits)?
            }
            // Fires the guest's watch on its data.
            8300..=8999 => {
                let path = format!("{guest_data}/k{}", rng.u64(..GUEST_KEYS));
                c.write(0, &path, &rng.u64(..).to_string()).map(|()| 1)?
            }
            9000..=9499 if watches.len() < 4 && (watches.is_empty() || rng.bool()) => {
                let path = match rng.u8(..4) {
                    0 => key,
                    1 => "/soak/ctr".to_string(),
                    2 => guest_data,
                    _ => "@introduceDomain".to_string(),
                };
                next_token += 1;
                let token = format!("t{next_token}");
                c.watch(&path, &token)?;
                watches.push((path, token));
                1
            }
            9000..=9499 => {
                let (path, token) = watches.swap_remove(rng.usize(..watches.len()));
                c.unwatch(&path, &token).map(|()| 1)?
            }
            9500..=9799 => c.get_domain_path(guest).map(|_| 1)?,
            9800..=9989 => {
                let requests = disconnect(&mut c, &mut rng)?;
                c = ctx.dom0()?;
                watches.clear();
                Ctx::count(&ctx.disconnects);
                requests
            }
            _ => {
                Ctx::count(&ctx.stalls);
                stopped_reader(ctx, &mut rng)?
            }
        };
        ctx.ops.fetch_add(requests, Relaxed);
        drain(&mut c, ctx)?;
    }
    Ok(())
}

/// Leaves the daemon in one of the ways a client can: simply, in the middle
/// of a transaction, or halfway through sending a request. Its requests.
fn disconnect(c: &mut Xs<SocketLink>, rng: &mut Rng) -> Result<u64> {
    Ok(match rng.u8(..3) {
        0 => 0,
        1 => {
            let tx = c.transaction_start()?;
            c.write(tx, "/soak/ctr/0", "never committed")?;
            2
        }
        _ => {
            let (ty, req_id, tx_id, len) = (2, 1, 0, 100);
            let header = Header {
                ty,
                req_id,
                tx_id,
                len,
            };
            c.send_raw(&header.encode()[..8])?;
            0
        }
    })
}

/// A client that watches the busiest subtree, then stops reading its socket
/// for a while; it then either catches up or leaves with its backlog. Its
/// requests.
fn stopped_reader(ctx: &Ctx, rng: &mut Rng) -> Result<u64> {
    let mut c = ctx.dom0()?;
    c.watch("/soak", "stalled")?;
    ctx.pause(rng);
    if !rng.bool() {
        return Ok(1);
    }
    drain(&mut c, ctx)?;
    c.read(0, "/soak/ctr/0")?;
    Ok(2)
}

/// Guest `domid` on its ring until stopped; a failure says where its ring
/// stood.
pub fn guest(ctx: &Ctx, domid: u16, rng: Rng) -> Result<()> {
    let mut g = Guest::open(&ctx.run_dir, domid)?;
    g.timeout = REPLY_TIMEOUT;
    guest_load(ctx, domid, rng, &mut g).map_err(|e| {
        let ring = g.link().ring().interface();
        let fields = [
            Field::ReqCons,
            Field::ReqProd,
            Field::RspCons,
            Field::RspProd,
            Field::Connection,
            Field::Error,
        ];
        let fields = fields.map(|f| (f, ring.load(f)));
        e.context(format!("ring of domain {domid}: {fields:?}"))
    })
}

fn guest_load(ctx: &Ctx, domid: u16, mut rng: Rng, g: &mut Guest) -> Result<()> {
    let mut watching = false;
    while !ctx.stopped() {
        let key = format!("data/k{}", rng.u64(..GUEST_KEYS));
        let requests = match rng.u32(..10_000) {
            0..=3999 => g.read(0, &key).map(|_| 1)?,
            4000..=6499 => g.write(0, &key, &rng.u64(..).to_string()).map(|()| 1)?,
            6500..=6999 => g.directory(0, "data").map(|_| 1)?,
            7000..=8499 => {
                let commits = &ctx.guest_commits[domid as usize - 1];
                increment(g, ctx, "data/ctr", commits)?
            }
            8500..=8999 => {
                match watching {
                    false => g.watch("data", "mine")?,
                    true => g.unwatch("data", "mine")?,
                }
                watching = !watching;
                1
            }
            9000..=9799 => g.get_domain_path(domid).map(|_| 1)?,
            9800..=9979 => {
                // The ring's reconnect: watches and transactions go.
                g.reconnect()
                    .with_context(|| format!("domain {domid} reconnects"))?;
                watching = false;
                Ctx::count(&ctx.disconnects);
                0
            }
            _ => {
                // A consumer that stalls: events for its watch pile up in
                // the response ring and then in the daemon.
                let watched = !watching;
                if watched {
                    g.watch("data", "mine")?;
                    watching = true;
                }
                ctx.pause(&mut rng);
                Ctx::count(&ctx.stalls);
                u64::from(watched)
            }
        };
        ctx.ops.fetch_add(requests, Relaxed);
        drain(g, ctx).with_context(|| format!("domain {domid}'s events"))?;
    }
    Ok(())
}
