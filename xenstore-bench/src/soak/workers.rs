//! The load: dom0 clients on the daemon's socket and guests on simulated
//! rings, each a thread making random requests until told to stop, with
//! random disconnects and stretches where it stops reading. Counter
//! increments in transactions conflict on purpose; each side counts its
//! commits so the store's counters can be checked at the end.

use super::rng::Rng;
use anyhow::{anyhow, bail, Context, Result};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use xenstore_guest::boot;
use xenstore_guest::client::{is_xs_error, Guest, Link, SocketLink, Xs, XsClientError};
use xenstore_proto::wire::Header;
use xenstored_probes::conn::ring::Field;
use xenstored_probes::wire::XsError;

/// Keys every dom0 client reads and writes: /soak/k/<0..KEYS>.
pub const KEYS: u64 = 256;
/// Counters dom0 clients increment in transactions: /soak/ctr/<0..COUNTERS>.
pub const COUNTERS: usize = 4;
/// Keys of each guest's own: /local/domain/<id>/data/k<0..GUEST_KEYS>.
const GUEST_KEYS: u64 = 32;
/// A request's reply may take this long on a loaded machine.
const REPLY_TIMEOUT: Duration = Duration::from_secs(60);

/// What the workers share: where the daemon is, when to stop, what they did.
pub struct Ctx {
    pub socket: PathBuf,
    pub run_dir: PathBuf,
    pub guests: u16,
    pub stop: AtomicBool,
    pub ops: AtomicU64,
    pub events: AtomicU64,
    pub conflicts: AtomicU64,
    pub disconnects: AtomicU64,
    pub stalls: AtomicU64,
    /// Commits per /soak/ctr counter.
    pub commits: [AtomicU64; COUNTERS],
    /// Commits per guest's data/ctr (index: domid - 1), by dom0 or the guest.
    pub guest_commits: Vec<AtomicU64>,
}

impl Ctx {
    pub fn new(socket: &Path, run_dir: &Path, guests: u16) -> Arc<Ctx> {
        Arc::new(Ctx {
            socket: socket.to_path_buf(),
            run_dir: run_dir.to_path_buf(),
            guests,
            stop: AtomicBool::new(false),
            ops: AtomicU64::new(0),
            events: AtomicU64::new(0),
            conflicts: AtomicU64::new(0),
            disconnects: AtomicU64::new(0),
            stalls: AtomicU64::new(0),
            commits: Default::default(),
            guest_commits: (0..guests).map(|_| AtomicU64::new(0)).collect(),
        })
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    fn count(&self, what: &AtomicU64, n: u64) {
        what.fetch_add(n, Ordering::Relaxed);
    }

    pub fn dom0(&self) -> Result<Xs<SocketLink>> {
        let mut c = Xs::connect(&self.socket)?;
        c.timeout = REPLY_TIMEOUT;
        Ok(c)
    }

    /// Sleeps `d`, or less once told to stop.
    fn pause(&self, d: Duration) {
        let end = Instant::now() + d;
        while !self.stopped() && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn guest_home(domid: u16) -> String {
    format!("/local/domain/{domid}")
}

/// The store the load expects: every key and counter present.
pub fn seed_store(admin: &mut Xs<SocketLink>) -> Result<()> {
    for k in 0..KEYS {
        admin.write(0, &format!("/soak/k/{k}"), "0").map_err(xs)?;
    }
    for c in 0..COUNTERS {
        admin.write(0, &format!("/soak/ctr/{c}"), "0").map_err(xs)?;
    }
    Ok(())
}

/// The toolstack's part of a domain start: its home, owned by it, with
/// its keys; its page and port; XS_INTRODUCE.
pub fn introduce(admin: &mut Xs<SocketLink>, run_dir: &Path, domid: u16) -> Result<()> {
    let home = guest_home(domid);
    for k in 0..GUEST_KEYS {
        admin
            .write(0, &format!("{home}/data/k{k}"), "0")
            .map_err(xs)?;
    }
    admin
        .write(0, &format!("{home}/data/ctr"), "0")
        .map_err(xs)?;
    for path in [home.clone(), format!("{home}/data")] {
        admin
            .set_perms(0, &path, &[&format!("n{domid}")])
            .map_err(xs)?;
    }
    for k in 0..GUEST_KEYS {
        admin
            .set_perms(0, &format!("{home}/data/k{k}"), &[&format!("n{domid}")])
            .map_err(xs)?;
    }
    admin
        .set_perms(0, &format!("{home}/data/ctr"), &[&format!("n{domid}")])
        .map_err(xs)?;
    boot::introduce(admin, run_dir, domid).map_err(xs)
}

fn xs(e: XsClientError) -> anyhow::Error {
    anyhow!("{e}")
}

/// Reads a counter, writes it plus one and commits, in one transaction:
/// true if committed, false on a conflict (EAGAIN).
fn increment<L: Link>(c: &mut Xs<L>, ctx: &Ctx, path: &str) -> Result<bool> {
    let tx = c.transaction_start().map_err(xs)?;
    let v: u64 = c
        .read(tx, path)
        .map_err(xs)?
        .parse()
        .with_context(|| format!("{path} is not a number"))?;
    c.write(tx, path, &(v + 1).to_string()).map_err(xs)?;
    ctx.count(&ctx.ops, 3);
    let end = c.transaction_end(tx, true);
    ctx.count(&ctx.ops, 1);
    match end {
        Ok(()) => Ok(true),
        Err(e) if is_xs_error(&e, XsError::Eagain) => {
            ctx.count(&ctx.conflicts, 1);
            Ok(false)
        }
        Err(e) => Err(xs(e)),
    }
}

/// Takes the watch events queued so far, without waiting.
fn drain<L: Link>(c: &mut Xs<L>, ctx: &Ctx) -> Result<()> {
    while c.next_event(Duration::ZERO).map_err(xs)?.is_some() {
        ctx.count(&ctx.events, 1);
    }
    Ok(())
}

/// One dom0 client until stopped.
pub fn dom0(ctx: &Ctx, mut rng: Rng) -> Result<()> {
    let mut c = ctx.dom0()?;
    let mut watches: Vec<(String, String)> = Vec::new();
    let mut next_token = 0u64;
    while !ctx.stopped() {
        let key = format!("/soak/k/{}", rng.below(KEYS));
        let guest = 1 + rng.below(ctx.guests as u64) as u16;
        match rng.below(10_000) {
            0..=3499 => {
                c.read(0, &key).map_err(xs)?;
                ctx.count(&ctx.ops, 1);
            }
            3500..=5999 => {
                c.write(0, &key, &rng.next().to_string()).map_err(xs)?;
                ctx.count(&ctx.ops, 1);
            }
            6000..=6299 => {
                let n = c.directory(0, "/soak/k").map_err(xs)?.len() as u64;
                if n != KEYS {
                    bail!("/soak/k lists {n} keys, not {KEYS}");
                }
                ctx.count(&ctx.ops, 1);
            }
            6300..=7799 => {
                let i = rng.below(COUNTERS as u64) as usize;
                if increment(&mut c, ctx, &format!("/soak/ctr/{i}"))? {
                    ctx.count(&ctx.commits[i], 1);
                }
            }
            7800..=8299 => {
                let path = format!("{}/data/ctr", guest_home(guest));
                if increment(&mut c, ctx, &path)? {
                    ctx.count(&ctx.guest_commits[guest as usize - 1], 1);
                }
            }
            8300..=8999 => {
                // Fires the guest's watch on its data.
                let path = format!("{}/data/k{}", guest_home(guest), rng.below(GUEST_KEYS));
                c.write(0, &path, &rng.next().to_string()).map_err(xs)?;
                ctx.count(&ctx.ops, 1);
            }
            9000..=9499 => {
                if watches.len() < 4 && (watches.is_empty() || rng.chance(50)) {
                    let path = match rng.below(4) {
                        0 => key,
                        1 => "/soak/ctr".to_string(),
                        2 => format!("{}/data", guest_home(guest)),
                        _ => "@introduceDomain".to_string(),
                    };
                    next_token += 1;
                    let token = format!("t{next_token}");
                    c.watch(&path, &token).map_err(xs)?;
                    watches.push((path, token));
                } else {
                    let (path, token) =
                        watches.swap_remove(rng.below(watches.len() as u64) as usize);
                    c.unwatch(&path, &token).map_err(xs)?;
                }
                ctx.count(&ctx.ops, 1);
            }
            9500..=9799 => {
                let home = c.get_domain_path(guest).map_err(xs)?;
                if home != guest_home(guest) {
                    bail!("GET_DOMAIN_PATH {guest} answered {home}");
                }
                ctx.count(&ctx.ops, 1);
            }
            9800..=9989 => {
                disconnect(&mut c, ctx, &mut rng)?;
                c = ctx.dom0()?;
                watches.clear();
                ctx.count(&ctx.disconnects, 1);
            }
            _ => {
                stopped_reader(ctx, &mut rng)?;
                ctx.count(&ctx.stalls, 1);
            }
        }
        drain(&mut c, ctx)?;
    }
    Ok(())
}

/// Leaves the daemon in one of the ways a client can: simply, in the middle
/// of a transaction, or halfway through sending a request.
fn disconnect(c: &mut Xs<SocketLink>, ctx: &Ctx, rng: &mut Rng) -> Result<()> {
    match rng.below(3) {
        0 => {}
        1 => {
            let tx = c.transaction_start().map_err(xs)?;
            c.write(tx, "/soak/ctr/0", "never committed").map_err(xs)?;
            ctx.count(&ctx.ops, 2);
        }
        _ => {
            let header = Header {
                ty: 2,
                req_id: 1,
                tx_id: 0,
                len: 100,
            };
            c.send_raw(&header.encode()[..8]).map_err(xs)?;
        }
    }
    Ok(())
}

/// A client that watches the busiest subtree, then stops reading its socket
/// for a while; it then either catches up or leaves with its backlog.
fn stopped_reader(ctx: &Ctx, rng: &mut Rng) -> Result<()> {
    let mut c = ctx.dom0()?;
    c.watch("/soak", "stalled").map_err(xs)?;
    ctx.count(&ctx.ops, 1);
    ctx.pause(rng.millis(300, 2000));
    if rng.chance(50) {
        drain(&mut c, ctx)?;
        c.read(0, "/soak/ctr/0").map_err(xs)?;
        ctx.count(&ctx.ops, 1);
    }
    Ok(())
}

/// Guest `domid` on its ring until stopped; a failure says where its ring
/// stood.
pub fn guest(ctx: &Ctx, domid: u16, rng: Rng) -> Result<()> {
    let mut g = Guest::open(&ctx.run_dir, domid).map_err(xs)?;
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
        e.context(format!(
            "ring of domain {domid}: {:?}",
            fields.map(|f| (f, ring.load(f)))
        ))
    })
}

fn guest_load(ctx: &Ctx, domid: u16, mut rng: Rng, g: &mut Guest) -> Result<()> {
    let mut watching = false;
    while !ctx.stopped() {
        let key = format!("data/k{}", rng.below(GUEST_KEYS));
        match rng.below(10_000) {
            0..=3999 => {
                g.read(0, &key).map_err(xs)?;
                ctx.count(&ctx.ops, 1);
            }
            4000..=6499 => {
                g.write(0, &key, &rng.next().to_string()).map_err(xs)?;
                ctx.count(&ctx.ops, 1);
            }
            6500..=6999 => {
                let n = g.directory(0, "data").map_err(xs)?.len() as u64;
                if n != GUEST_KEYS + 1 {
                    bail!(
                        "domain {domid}'s data lists {n} keys, not {}",
                        GUEST_KEYS + 1
                    );
                }
                ctx.count(&ctx.ops, 1);
            }
            7000..=8499 => {
                if increment(g, ctx, "data/ctr")? {
                    ctx.count(&ctx.guest_commits[domid as usize - 1], 1);
                }
            }
            8500..=8999 => {
                match watching {
                    false => g.watch("data", "mine").map_err(xs)?,
                    true => g.unwatch("data", "mine").map_err(xs)?,
                }
                watching = !watching;
                ctx.count(&ctx.ops, 1);
            }
            9000..=9799 => {
                let home = g.get_domain_path(domid).map_err(xs)?;
                if home != guest_home(domid) {
                    bail!("domain {domid} was told its home is {home}");
                }
                ctx.count(&ctx.ops, 1);
            }
            9800..=9979 => {
                // The ring's reconnect: watches and transactions go.
                g.reconnect()
                    .map_err(xs)
                    .with_context(|| format!("domain {domid} reconnects"))?;
                watching = false;
                ctx.count(&ctx.disconnects, 1);
            }
            _ => {
                // A consumer that stalls: events for its watch pile up in
                // the response ring and then in the daemon.
                if !watching {
                    g.watch("data", "mine").map_err(xs)?;
                    watching = true;
                    ctx.count(&ctx.ops, 1);
                }
                ctx.pause(rng.millis(300, 2000));
                ctx.count(&ctx.stalls, 1);
            }
        }
        drain(g, ctx).with_context(|| format!("domain {domid}'s events"))?;
    }
    Ok(())
}
