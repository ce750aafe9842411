//! The daemon: the store, the domains, the quotas and every connection,
//! and the execution of requests, with no event loop: server/ has it
//! execute what a connection received and carries out its [`Effects`].
//! Every request fires
//! `request` when read, `response` and `reply` when its reply is queued; watch
//! events, transaction ends and connection changes fire their probes where
//! they happen.
//!
//! This file holds the daemon's state and connection lifecycle;
//! dispatch.rs takes received messages to their handlers, checking the
//! rules that apply before each runs; the handlers live by concern in
//! nodes.rs, watches.rs, transactions.rs, domains.rs and admin.rs.

pub mod direct;
pub(crate) mod domain_registry;
pub mod quota;

mod admin;
mod dispatch;
mod domains;
mod live_update;
mod log;
mod nodes;
mod queued_events;
mod restore;
#[cfg(test)]
mod tests;
mod transactions;
mod watches;

use crate::conn::outstanding::{Outstanding, Ticket};
use crate::conn::table::ConnTable;
use crate::conn::transport::{Attachment, DomainBackend, Transport};
use crate::conn::{Connection, SpareOutput};
use crate::daemon::domain_registry::Domains;
use crate::daemon::quota::{Kind, Quotas};
use crate::probes;
use crate::store::perms::Identity;
use crate::store::Store;
use crate::watch::{Hit, WatchTable};
use crate::wire::error::{Fail, Reason};
use crate::wire::{Header, MsgType, XsError};
pub use live_update::Ready as LiveUpdate;
pub use live_update::Target as LiveUpdateTarget;
use log::RateLimitedLog;
use queued_events::QueuedEvents;
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;
use std::rc::Rc;

/// Work for the event loop that only it can do.
#[derive(Default)]
pub struct Effects {
    /// Connections with newly queued output.
    pub dirty: Vec<u32>,
    /// Transports of connections the daemon closed (deregister, drop).
    pub closed: Vec<Box<dyn Transport>>,
    /// Transports/listeners of newly introduced domains.
    pub attached: Vec<(u32, Attachment)>,
    /// Released domains (drop their listeners).
    pub released: Vec<u32>,
}

pub struct Daemon {
    store: Store,
    quotas: Quotas,
    domains: Domains,
    /// By id through a hash: every request and every watch hit looks one
    /// up, and a tree's search grew with the host. Walked in id order
    /// (`conn_ids`) where the order shows.
    conns: ConnTable,
    /// Each domain's connections, so per-domain work never scans them all.
    conns_of: FxHashMap<u32, Vec<u32>>,
    /// Every connection's watches.
    watches: WatchTable,
    /// The watches a change fires (kept: its capacity is reused).
    watch_hits: Vec<Hit>,
    next_conn: u32,
    serial: u64,
    backend: Box<dyn DomainBackend>,
    /// The reply being built (kept: its capacity is reused).
    reply: Vec<u8>,
    /// Output buffers between connections (see `SpareOutput`).
    spare_output: SpareOutput,
    effects: Effects,
    log: RateLimitedLog,
    /// Quota refusals, logged within a budget per introduced domain (and
    /// one for the rest); a domain's goes when it does.
    quota_log: BTreeMap<u32, RateLimitedLog>,
    /// CONTROL logfile: where memreport writes without a file argument.
    logfile: Option<String>,
    /// CONTROL log on|off.
    logging: bool,
    /// Events queued by the current request (see `QueuedEvents`).
    queued_events: QueuedEvents,
    /// What the `reply` probe needs of the request being executed.
    in_flight: probes::InFlight,
    /// Unprivileged domains' requests not yet delivered (outstanding quota).
    outstanding: Outstanding,
    /// The current request's, when an unprivileged domain sent it: its
    /// reply and the watch events it fires hold it.
    ticket: Option<Rc<Ticket>>,
    /// Watch events dropped on their receiver's memory quota.
    dropped_events: u64,
    /// The live-update session CONTROL live-update -f opened.
    live: Option<live_update::Session>,
    /// The update -s made ready, for the binary to carry out.
    ready_update: Option<live_update::Ready>,
    /// Took over from oxenstored: the next -s is answered "OK".
    live_completed: bool,
}

/// The request being executed, as its handler sees it.
struct Call {
    /// The connection it came from.
    conn: u32,
    /// Its number, shared by every probe it fires.
    serial: u64,
    header: Header,
    /// The transaction it runs in (None: the store itself).
    tx: Option<u32>,
    /// The connection's identity.
    who: Identity,
}

impl Daemon {
    pub fn new(quotas: Quotas, backend: Box<dyn DomainBackend>) -> Daemon {
        Daemon {
            store: Store::new(),
            quotas,
            domains: Domains::default(),
            conns: ConnTable::default(),
            conns_of: FxHashMap::default(),
            watches: WatchTable::default(),
            watch_hits: Vec::new(),
            spare_output: SpareOutput::default(),
            next_conn: 1,
            serial: 0,
            backend,
            reply: Vec::new(),
            effects: Effects::default(),
            log: RateLimitedLog::default(),
            quota_log: BTreeMap::new(),
            logfile: None,
            logging: false,
            queued_events: QueuedEvents::default(),
            in_flight: probes::InFlight::default(),
            outstanding: Outstanding::default(),
            ticket: None,
            dropped_events: 0,
            live: None,
            ready_update: None,
            live_completed: false,
        }
    }

    /// A new connection of `domid` (0: a privileged dom0 client) over
    /// `transport`; returns its id.
    pub fn open(&mut self, domid: u32, transport: Box<dyn Transport>) -> u32 {
        let id = self.reserve_conn_id();
        let target = self.domains.get(domid).and_then(|d| d.target);
        let conn = Connection::new(id, domid, domid == 0, target, transport);
        let transport = conn.transport();
        probes::conn_open(&conn.who(), transport.kind(), || transport.peer());
        self.conns.insert(conn);
        self.conns_of.entry(domid).or_default().push(id);
        id
    }

    /// Closes a connection: its transactions are dropped, its watches go,
    /// its transport is left to the event loop to drop.
    pub fn close(&mut self, id: u32, serial: u64, reason: &str) {
        if let Some(transport) = self.detach(id, serial, reason) {
            self.effects.closed.push(transport);
        }
    }

    /// Closes a connection but hands its transport back, to serve a fresh
    /// connection (a ring reset).
    pub fn detach(&mut self, id: u32, serial: u64, reason: &str) -> Option<Box<dyn Transport>> {
        let mut conn = self.conns.remove(&id)?;
        if let Some(ids) = self.conns_of.get_mut(&conn.domid()) {
            ids.retain(|&c| c != id);
            if ids.is_empty() {
                self.conns_of.remove(&conn.domid());
            }
        }
        self.watches.clear(id, &mut conn.watches);
        conn.drop_transactions(serial, reason);
        probes::conn_close(serial, &conn.who(), reason);
        Some(conn.into_transport())
    }

    /// The next connection id. INTRODUCE takes one for the domain's ring
    /// connection, so the domain has its place in the order connections
    /// were created.
    fn reserve_conn_id(&mut self) -> u32 {
        let id = self.next_conn;
        self.next_conn += 1;
        id
    }

    pub fn conn_mut(&mut self, id: u32) -> Option<&mut Connection> {
        self.conns.get_mut(&id)
    }

    /// Writes what connection `id` has queued, as far as its transport
    /// takes it now (`Connection::flush`); None when there is no such
    /// connection.
    pub fn flush(&mut self, id: u32) -> Option<Result<bool, String>> {
        let conn = self.conns.get_mut(&id)?;
        Some(conn.flush(&mut self.spare_output))
    }

    pub fn conn(&self, id: u32) -> Option<&Connection> {
        self.conns.get(&id)
    }

    /// How many connections are open.
    pub fn conn_count(&self) -> usize {
        self.conns.len()
    }

    /// Every connection's id, in the order they were opened.
    fn conn_ids(&self) -> Vec<u32> {
        let mut ids: Vec<u32> = self.conns.ids().collect();
        ids.sort_unstable();
        ids
    }

    /// The connection a request came from.
    fn caller(&mut self, call: &Call) -> Result<&mut Connection, Fail> {
        caller_in(&mut self.conns, call)
    }

    /// Trades the effects gathered so far for `spare` (emptied, its
    /// capacity kept) in one move, so none are allocated per request.
    pub fn swap_effects(&mut self, spare: &mut Effects) {
        std::mem::swap(spare, &mut self.effects);
    }

    fn mark_dirty(effects: &mut Effects, conn: &mut Connection) {
        if !conn.dirty {
            conn.dirty = true;
            effects.dirty.push(conn.id);
        }
    }

    /// Queues a reply (or error) echoing the request's req_id and tx_id.
    fn respond(
        &mut self,
        id: u32,
        serial: u64,
        h: &Header,
        result: Result<&[u8], (XsError, &str)>,
    ) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        let spare = &mut self.spare_output;
        match result {
            Ok(payload) => conn.queue(spare, h.ty, h.req_id, h.tx_id, &[payload]),
            Err((e, _)) => conn.queue(
                spare,
                MsgType::Error as u32,
                h.req_id,
                h.tx_id,
                &[e.name().as_bytes(), b"\0"],
            ),
        }
        if let Some(ticket) = &self.ticket {
            conn.charge(ticket);
        }
        // Built only if a probe fires: an idle one needs its conn id alone.
        let who = || conn.who();
        probes::response(serial, who, h.ty, h.tx_id, h.req_id, result);
        probes::reply(
            &self.in_flight,
            serial,
            who,
            h.ty,
            h.tx_id,
            h.req_id,
            result,
        );
        Self::mark_dirty(&mut self.effects, conn);
    }

    /// What domain `domid` costs in bytes, as C xenstored 4.17's memory
    /// quota counts it: the nodes it owns, and its connections' watches,
    /// transaction copies and queued output.
    pub fn memory(&self, domid: u32) -> usize {
        self.store.memory(domid) + self.conns_memory(domid)
    }

    /// What `domid`'s connections cost its memory quota: their watches,
    /// transaction copies and queued output.
    fn conns_memory(&self, domid: u32) -> usize {
        conns_memory(&self.conns, &self.conns_of, domid)
    }

    /// The ids of `domid`'s connections, in creation order.
    fn domain_conns(&self, domid: u32) -> &[u32] {
        self.conns_of.get(&domid).map_or(&[], Vec::as_slice)
    }

    /// Unprivileged domains' requests whose replies or events are not yet
    /// written out.
    pub fn outstanding(&self, domid: u32) -> u32 {
        self.outstanding.count(domid)
    }

    /// Whether connection `id` may be read from: an unprivileged domain at
    /// its outstanding quota, or at its hard memory quota, is not (C
    /// xenstored's domain_can_read) until deliveries bring it under.
    pub fn may_read(&mut self, id: u32) -> bool {
        let Some(conn) = self.conns.get(&id) else {
            return false;
        };
        if conn.ident.privileged {
            return true;
        }
        let domid = conn.domid();
        if self.outstanding.count(domid) >= self.quotas.get(Kind::Outstanding, domid) {
            return false;
        }
        let used = self.memory(domid);
        let over = used >= self.quotas.get(Kind::Memory, domid) as usize;
        if let Some(dom) = self.domains.get_mut(domid) {
            if over && !dom.hard_quota_reported {
                let why = format_args!(
                    "domain {domid} exceeds hard memory quota ({used} bytes), \
                     Xenstore interface to domain stalled"
                );
                self.log.log(id, why);
            }
            dom.hard_quota_reported = over;
        }
        !over
    }

    /// Logs, once a crossing, that `domid` went over its soft memory
    /// quota or back under (C xenstored's warning level).
    fn note_soft_quota(&mut self, id: u32, domid: u32) {
        let used = self.memory(domid);
        let over = used >= self.quotas.soft_memory() as usize;
        let Some(dom) = self.domains.get_mut(domid) else {
            return;
        };
        if over != dom.soft_quota_reported {
            dom.soft_quota_reported = over;
            let state = if over { "exceeds" } else { "is below" };
            let why = format_args!("domain {domid} {state} soft memory quota ({used} bytes)");
            self.log.log(id, why);
        }
    }

    /// The bytes the caller's domain uses outside the tree its request
    /// sees (the transaction it runs in counts as part of that tree).
    fn memory_outside(&self, call: &Call) -> usize {
        let domid = call.who.domid;
        let mut used = 0;
        for c in self
            .domain_conns(domid)
            .iter()
            .filter_map(|id| self.conns.get(id))
        {
            used += c.memory() + c.watches.bytes;
            if let Some(t) = call.tx.filter(|_| c.id == call.conn) {
                used -= c.transactions.get(&t).map_or(0, |t| t.memory());
            }
        }
        used
    }

    /// Queues "OK" for a handler that orders its reply itself.
    fn ack(&mut self, call: &Call) {
        self.respond(call.conn, call.serial, &call.header, Ok(b"OK\0"));
    }
}

/// The connection `call` came from, in `conns` (`Daemon::caller` where
/// another of the daemon's fields is borrowed beside it).
fn caller_in<'c>(conns: &'c mut ConnTable, call: &Call) -> Result<&'c mut Connection, Fail> {
    // handle() found it; only a handler that closed it could miss it
    conns
        .get_mut(&call.conn)
        .ok_or(Fail::new(XsError::Eio, Reason::ConnectionGone))
}

/// What `domid`'s connections cost its memory quota (see
/// `Daemon::conns_memory`), from the fields a caller may have split.
fn conns_memory(conns: &ConnTable, conns_of: &FxHashMap<u32, Vec<u32>>, domid: u32) -> usize {
    let ids = conns_of.get(&domid).map_or(&[][..], Vec::as_slice);
    let mine = ids.iter().filter_map(|id| conns.get(id));
    mine.map(|c| c.memory() + c.watches.bytes).sum()
}
