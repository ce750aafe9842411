//! Replaying a lifecycle's requests (s1_boot_storm::lifecycle.rs) against a
//! daemon, each actor over its own connection, as the real clients do:
//! a transaction that ends in EAGAIN is run again from its start (libxl's
//! and Linux's xenbus loop), errors the real run also got (ENOENT of a
//! read, a listing or a removal) are expected, any other fails the replay
//! (s1_boot_storm::verdict.rs decides, and what oxenstored alone is forgiven).
//! The trace's removals of emptied parents (libxl's path cleanup: RM, then
//! READ and DIRECTORY of the parent, RM it if empty, and so up) are made
//! only while the listing is empty, as libxl decides: other domains share
//! `backend/vbd` and the like here.

use crate::s1_boot_storm::lifecycle::{Actor, Step, Vars};
use crate::s1_boot_storm::verdict::{judge, Answer, Leniency, Verdict};
use anyhow::{bail, Context, Result};
use std::path::Path;
use xenstore_guest::client::{Guest, Link, SocketLink, Xs};
use xenstore_proto::wire::MsgType;

/// A libxl caller gives up after this many conflicts in a row; so do we,
/// with an error rather than forever.
const MAX_RETRIES: usize = 10_000;

/// Transactions committed, conflicts met, and oxenstored's failures
/// worked around (Leniency::Oxenstored; always 0 for a strict daemon).
#[derive(Clone, Copy, Debug, Default)]
pub struct Tally {
    pub committed: u64,
    pub eagain: u64,
    /// Commits answered EINVAL and run again from their start.
    pub einval: u64,
    /// Of the transactions that met EINVAL, those that then committed.
    pub einval_then_committed: u64,
    /// DIRECTORY replies over 4096 bytes taken.
    pub oversized: u64,
}

impl Tally {
    pub fn add(&mut self, o: Tally) {
        self.committed += o.committed;
        self.eagain += o.eagain;
        self.einval += o.einval;
        self.einval_then_committed += o.einval_then_committed;
        self.oversized += o.oversized;
    }
}

/// Where the guest's own requests go.
pub enum GuestSide {
    /// Its ring: the daemon sees the domain itself.
    Ring(Guest),
    /// A dom0 socket with its relative paths made absolute (a daemon that
    /// cannot serve simulated rings here); the report says which.
    Dom0(Xs<SocketLink>),
}

/// How long any one reply may take (a daemon that stops answering fails
/// the run instead of hanging it).
pub const REPLY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

pub fn dom0(socket: &Path) -> Result<Xs<SocketLink>> {
    let mut x = Xs::connect(socket).with_context(|| format!("connect to {}", socket.display()))?;
    x.timeout = REPLY_TIMEOUT;
    Ok(x)
}

/// One domain's clients: xl's and the backends' dom0 connections, and
/// the guest's once it is introduced: over its ring under `rings`, or else
/// over a dom0 socket with its relative paths made absolute (a daemon that
/// cannot serve simulated rings here; the report says so).
pub struct Domain<'a> {
    pub vars: Vars,
    leniency: Leniency,
    socket: &'a Path,
    rings: Option<&'a Path>,
    pub xl: Xs<SocketLink>,
    pub backend: &'a mut Xs<SocketLink>,
    pub guest: Option<GuestSide>,
    /// Each actor's open transaction: its id and its requests so far.
    open: [Option<(u32, Vec<&'a Step>)>; 3],
    /// Per actor: a directory found not empty, whose path cleanup (READ,
    /// DIRECTORY, RM of it and its parents) stops there.
    kept: [Option<String>; 3],
}

impl<'a> Domain<'a> {
    /// Domain `domid` of the daemon on `socket`, its backends' requests
    /// sent on `backend`.
    pub fn new(
        domid: u16,
        leniency: Leniency,
        socket: &'a Path,
        rings: Option<&'a Path>,
        backend: &'a mut Xs<SocketLink>,
    ) -> Result<Domain<'a>> {
        let mut xl = dom0(socket)?;
        xl.reply_max = leniency.reply_max();
        backend.reply_max = leniency.reply_max();
        Ok(Domain {
            vars: Vars::new(domid),
            leniency,
            socket,
            rings,
            xl,
            backend,
            guest: None,
            open: [None, None, None],
            kept: [None, None, None],
        })
    }

    /// Replays `steps` in order; conflicts and commits go to `tally`.
    pub fn replay(&mut self, steps: &'a [Step], tally: &mut Tally) -> Result<()> {
        for (i, step) in steps.iter().enumerate() {
            self.step(step, tally).with_context(|| {
                format!(
                    "domain {}: request {} ({:?} {})",
                    self.vars.domid,
                    i + 1,
                    step.actor,
                    step.ty.name()
                )
            })?;
        }
        Ok(())
    }

    fn step(&mut self, step: &'a Step, tally: &mut Tally) -> Result<()> {
        let a = step.actor as usize;
        match step.ty {
            MsgType::Introduce => {
                self.guest = Some(self.introduce()?);
                return Ok(());
            }
            MsgType::TransactionStart => {
                if self.open[a].is_some() {
                    bail!("a second transaction on one connection");
                }
                self.open[a] = Some((self.start(step.actor)?, Vec::new()));
                return Ok(());
            }
            MsgType::TransactionEnd => {
                let (mut id, steps) = self.open[a].take().context("no transaction to end")?;
                self.kept[a] = None;
                if !step.commits() {
                    return self.send(step, id, tally).map(drop);
                }
                let mut met_einval = false;
                for _ in 0..MAX_RETRIES {
                    match self.send(step, id, tally)? {
                        Sent::Reply(_) => {
                            tally.committed += 1;
                            tally.einval_then_committed += u64::from(met_einval);
                            return Ok(());
                        }
                        Sent::Conflict => tally.eagain += 1,
                        Sent::ConflictEinval => {
                            tally.einval += 1;
                            met_einval = true;
                        }
                    }
                    id = self.start(step.actor)?;
                    self.kept[a] = None;
                    for s in &steps {
                        self.exec(s, id, tally)?;
                    }
                }
                bail!("{MAX_RETRIES} conflicts in a row");
            }
            _ => {}
        }
        let tx = match (&mut self.open[a], step.transactional()) {
            (Some((id, steps)), true) => {
                steps.push(step);
                *id
            }
            _ => 0,
        };
        self.exec(step, tx, tally)
    }

    /// The guest's side, as the trace's INTRODUCE makes it.
    fn introduce(&mut self) -> Result<GuestSide> {
        let (domid, reply_max) = (self.vars.domid, self.leniency.reply_max());
        let Some(rings) = self.rings else {
            let mut x = dom0(self.socket)?;
            x.reply_max = reply_max;
            return Ok(GuestSide::Dom0(x));
        };
        xenstore_guest::boot::introduce(&mut self.xl, rings, domid)
            .with_context(|| format!("introduce domain {domid} on a simulated ring"))?;
        let mut g = Guest::open(rings, domid)
            .with_context(|| format!("attach domain {domid}'s guest to its ring"))?;
        (g.timeout, g.reply_max) = (REPLY_TIMEOUT, reply_max);
        Ok(GuestSide::Ring(g))
    }

    /// Sends a request unless it belongs to a path cleanup that a
    /// non-empty listing stopped.
    fn exec(&mut self, step: &Step, tx: u32, tally: &mut Tally) -> Result<()> {
        let a = step.actor as usize;
        let path = step.path(&self.vars);
        let cleanup = matches!(step.ty, MsgType::Read | MsgType::Directory | MsgType::Rm);
        match &self.kept[a] {
            Some(kept) if cleanup && is_within(kept, &path) => return Ok(()),
            Some(_) if !cleanup => self.kept[a] = None,
            _ => {}
        }
        let listed = match self.send(step, tx, tally)? {
            Sent::Reply(r) => !r.is_empty(),
            _ => false,
        };
        if step.ty == MsgType::Directory && listed {
            self.kept[a] = Some(path);
        }
        Ok(())
    }

    fn start(&mut self, actor: Actor) -> Result<u32> {
        Ok(match actor {
            Actor::Xl => self.xl.transaction_start()?,
            Actor::Backend => self.backend.transaction_start()?,
            Actor::Guest => match self.guest.as_mut().context("guest before INTRODUCE")? {
                GuestSide::Ring(g) => g.transaction_start()?,
                GuestSide::Dom0(x) => x.transaction_start()?,
            },
        })
    }

    /// Sends one request in transaction `tx`: what it came to.
    fn send(&mut self, step: &Step, tx: u32, tally: &mut Tally) -> Result<Sent> {
        let payload = step.payload(&self.vars);
        let (l, ty) = (self.leniency, step.ty);
        match step.actor {
            Actor::Xl => request(&mut self.xl, l, ty, tx, &payload, tally),
            Actor::Backend => request(self.backend, l, ty, tx, &payload, tally),
            Actor::Guest => match self.guest.as_mut().context("guest before INTRODUCE")? {
                GuestSide::Ring(g) => request(g, l, ty, tx, &payload, tally),
                GuestSide::Dom0(x) => {
                    let home = format!("/local/domain/{}/", self.vars.domid);
                    request(x, l, ty, tx, &absolute(&payload, &home), tally)
                }
            },
        }
    }
}

/// What a request came to, for the replay.
enum Sent {
    /// Its reply (empty for an expected ENOENT, not empty for a listing
    /// too long to send: libxl's cleanup keeps such a directory).
    Reply(Vec<u8>),
    /// A commit that conflicted.
    Conflict,
    /// A commit oxenstored answered EINVAL (Leniency::Oxenstored).
    ConflictEinval,
}

fn request<L: Link>(
    xs: &mut Xs<L>,
    leniency: Leniency,
    ty: MsgType,
    tx: u32,
    payload: &[u8],
    tally: &mut Tally,
) -> Result<Sent> {
    let got = xs.request(ty, tx, payload);
    // the events its watches fired: nobody waits for them here
    while let Some(_ev) = xs.next_event(std::time::Duration::ZERO)? {}
    let answer = match &got {
        Ok(reply) => Answer::Reply(reply.len()),
        Err(e) => match e.xs_error() {
            Some(name) => Answer::Error(name),
            None => return Err(got.unwrap_err().into()),
        },
    };
    Ok(match judge(leniency, ty, answer) {
        Verdict::Take => Sent::Reply(got?),
        Verdict::TakeOversized => {
            tally.oversized += 1;
            Sent::Reply(got?)
        }
        Verdict::Missing => Sent::Reply(Vec::new()),
        Verdict::NotEmpty => Sent::Reply(b"E2BIG".to_vec()),
        Verdict::Conflict => Sent::Conflict,
        Verdict::ConflictEinval => Sent::ConflictEinval,
        Verdict::Fail => match got {
            Ok(r) => bail!("a {}-byte reply", r.len()),
            Err(e) => return Err(e.into()),
        },
    })
}

/// Whether `path` is `dir` or one of its ancestors (a cleanup step).
fn is_within(dir: &str, path: &str) -> bool {
    dir == path || (dir.starts_with(path) && dir.as_bytes().get(path.len()) == Some(&b'/'))
}

/// A guest's relative path (the payload's first field) made absolute.
fn absolute(payload: &[u8], home: &str) -> Vec<u8> {
    if payload
        .first()
        .is_some_and(|&b| b == b'/' || b == b'@' || b == 0)
    {
        return payload.to_vec();
    }
    let mut p = home.as_bytes().to_vec();
    p.extend_from_slice(payload);
    p
}
