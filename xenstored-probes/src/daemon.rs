//! The daemon's state and request execution, with no I/O: the event loop
//! (server.rs) feeds it decoded messages and writes out what it queues.
//! Every request fires `request` when read and `response` when its reply
//! is queued; watch events, transaction ends and connection changes fire
//! their probes where they happen.

use crate::connection::Connection;
use crate::control;
use crate::domain::{Domain, Domains, DOMID_FIRST_RESERVED};
use crate::error::Fail;
use crate::node::NodeRef;
use crate::path;
use crate::perms::{Identity, Perm, PermList, Perms, READ};
use crate::probes::{self, TxOutcome};
use crate::quota::{Kind, Quotas};
use crate::request::{self, Request};
use crate::store::Store;
use crate::transport::{Attachment, DomainBackend};
use crate::tree::{self, Change, Limits, Tree};
use crate::watch::Watch;
use crate::wire::{Header, MsgType, XsError};
use rustc_hash::FxHashSet;
use std::collections::BTreeMap;
use std::io::Write;
use std::time::Instant;

/// Features the daemon supports (GET_FEATURE without a domid): none of
/// the ring-level ones over sockets.
pub const FEATURES: u32 = 0;

/// Work for the event loop that only it can do.
#[derive(Default)]
pub struct Effects {
    /// Connections with newly queued output.
    pub dirty: Vec<u32>,
    /// Connections the daemon closed (drop their transports).
    pub closed: Vec<u32>,
    /// Transports/listeners of newly introduced domains.
    pub attached: Vec<(u32, Attachment)>,
    /// Released domains (drop their listeners).
    pub released: Vec<u32>,
}

pub struct Daemon {
    pub store: Store,
    pub quotas: Quotas,
    pub domains: Domains,
    conns: BTreeMap<u32, Connection>,
    next_conn: u32,
    serial: u64,
    backend: Box<dyn DomainBackend>,
    reply: Vec<u8>,
    pub effects: Effects,
    log: RateLimitedLog,
    /// CONTROL logfile: where memreport writes without a file argument.
    pub logfile: Option<String>,
    /// CONTROL log on|off.
    pub logging: bool,
    /// Events (connection, path, token) queued by the current request:
    /// upstream never queues one identical to one still queued, so one
    /// request's fan-out sends each at most once.
    queued_events: FxHashSet<(u32, String, Vec<u8>)>,
}

/// What executing a request leaves to do.
enum Done {
    /// Queue `self.reply` as the reply.
    Reply,
    /// Queue "OK".
    Ack,
    /// The reply is already queued.
    Replied,
}

const PRIVILEGED: &[MsgType] = &[
    MsgType::Control,
    MsgType::Introduce,
    MsgType::Release,
    MsgType::Resume,
    MsgType::SetTarget,
    MsgType::GetFeature,
    MsgType::SetFeature,
    MsgType::GetQuota,
    MsgType::SetQuota,
];

/// Types upstream executes outside any transaction (XS_FLAG_NOTID): the
/// header's tx_id is not even looked up.
const NO_TX: &[MsgType] = &[
    MsgType::Watch,
    MsgType::Unwatch,
    MsgType::Introduce,
    MsgType::Release,
    MsgType::GetDomainPath,
    MsgType::IsDomainIntroduced,
    MsgType::Resume,
    MsgType::SetTarget,
    MsgType::ResetWatches,
    MsgType::GetFeature,
    MsgType::SetFeature,
    MsgType::GetQuota,
    MsgType::SetQuota,
];

impl Daemon {
    pub fn new(quotas: Quotas, backend: Box<dyn DomainBackend>) -> Daemon {
        Daemon {
            store: Store::new(),
            quotas,
            domains: Domains::default(),
            conns: BTreeMap::new(),
            next_conn: 1,
            serial: 0,
            backend,
            reply: Vec::new(),
            effects: Effects::default(),
            log: RateLimitedLog::default(),
            logfile: None,
            logging: false,
            queued_events: FxHashSet::default(),
        }
    }

    /// A new connection of `domid` (0: a privileged dom0 client).
    pub fn open(&mut self, domid: u32, pid: u32, kind: &str, peer: &str) -> u32 {
        let id = self.reserve_conn_id();
        let target = self.domains.get(domid).and_then(|d| d.target);
        let conn = Connection::new(id, domid, pid, domid == 0, target);
        probes::conn_open(&conn.who(), kind, peer);
        self.conns.insert(id, conn);
        id
    }

    /// Closes a connection: its transactions are dropped, its watches go.
    pub fn close(&mut self, id: u32, serial: u64, reason: &str) {
        let Some(mut conn) = self.conns.remove(&id) else {
            return;
        };
        conn.drop_transactions(serial, reason);
        probes::conn_close(serial, &conn.who(), reason);
        self.effects.closed.push(id);
    }

    /// Connection `id` was its domain's ring and the domain died without
    /// a RELEASE (its page vanished): released as if dom0 had asked.
    pub fn domain_gone(&mut self, id: u32) {
        let Some(domid) = self.conns.get(&id).map(|c| c.domid) else {
            return;
        };
        self.queued_events.clear();
        self.close(id, 0, "domain gone");
        if domid != 0 && self.domains.get(domid).is_some() {
            self.release(domid, 0, id);
        }
    }

    pub fn conn_mut(&mut self, id: u32) -> Option<&mut Connection> {
        self.conns.get_mut(&id)
    }

    pub fn conn(&self, id: u32) -> Option<&Connection> {
        self.conns.get(&id)
    }

    pub fn connections(&self) -> impl Iterator<Item = &Connection> {
        self.conns.values()
    }

    /// Logs bad input to stderr, at most a few lines a second.
    pub fn log_bad(&mut self, id: u32, what: std::fmt::Arguments) {
        self.log.log(id, what);
    }

    fn mark_dirty(effects: &mut Effects, conn: &mut Connection) {
        if !conn.dirty {
            conn.dirty = true;
            effects.dirty.push(conn.id);
        }
    }

    /// Executes one request read from connection `id`.
    pub fn handle(&mut self, id: u32, h: Header, payload: &[u8]) {
        self.serial += 1;
        let serial = self.serial;
        self.queued_events.clear();
        let Some(conn) = self.conns.get(&id) else {
            return;
        };
        probes::request(serial, &conn.who(), h.ty, h.tx_id, h.req_id, payload);
        let mut reply = std::mem::take(&mut self.reply);
        reply.clear();
        let mut result = self.execute(id, serial, &h, payload, &mut reply);
        if matches!(result, Ok(Done::Reply)) && reply.len() > crate::wire::PAYLOAD_MAX {
            // upstream's send_reply refuses to send more
            result = Err(Fail(XsError::E2big, "reply too long"));
        }
        match result {
            Ok(Done::Reply) => self.respond(id, serial, &h, Ok(&reply)),
            Ok(Done::Ack) => self.respond(id, serial, &h, Ok(b"OK\0")),
            Ok(Done::Replied) => {}
            Err(Fail(e, reason)) => {
                if e == XsError::Enosys || reason == "args" || reason == "tx:unknown" {
                    let name = crate::wire::msg_name(h.ty).unwrap_or("unknown type");
                    self.log
                        .log(id, format_args!("{name} ({}) refused: {e} {reason}", h.ty));
                }
                self.respond(id, serial, &h, Err((e, reason)))
            }
        }
        self.reply = reply;
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
        match result {
            Ok(payload) => conn.queue(h.ty, h.req_id, h.tx_id, &[payload]),
            Err((e, _)) => conn.queue(
                MsgType::Error as u32,
                h.req_id,
                h.tx_id,
                &[e.name().as_bytes(), b"\0"],
            ),
        }
        probes::response(serial, &conn.who(), h.ty, h.tx_id, h.req_id, result);
        Self::mark_dirty(&mut self.effects, conn);
    }

    fn limits(&self, domid: u32) -> Limits {
        Limits {
            nodes: self.quotas.get(Kind::Nodes, domid) as usize,
            node_size: self.quotas.get(Kind::NodeSize, domid) as usize,
        }
    }

    /// Runs `f` on the store, or on transaction `tx` of connection `id`.
    fn tree<R>(&mut self, id: u32, tx: Option<u32>, f: impl FnOnce(&mut dyn Tree) -> R) -> R {
        match tx {
            None => f(&mut self.store),
            Some(t) => {
                let conn = self.conns.get_mut(&id).expect("live connection");
                let tx = conn
                    .transactions
                    .get_mut(&t)
                    .expect("looked-up transaction");
                f(&mut tx.view(&self.store))
            }
        }
    }

    /// A READ-type request: `emit` puts into the reply what it takes of
    /// the node at `path`.
    fn reply_from(
        &mut self,
        id: u32,
        tx: Option<u32>,
        path: &str,
        who: &Identity,
        emit: impl FnOnce(NodeRef<'_>),
    ) -> Result<Done, Fail> {
        self.tree(id, tx, |t| tree::read(t, path, who).map(emit))?;
        Ok(Done::Reply)
    }

    /// Fires now, or records for the transaction's commit.
    fn changed(
        &mut self,
        id: u32,
        tx: Option<u32>,
        serial: u64,
        changes: impl IntoIterator<Item = Change>,
    ) {
        match tx {
            Some(t) => {
                if let Some(tx) = self
                    .conns
                    .get_mut(&id)
                    .and_then(|c| c.transactions.get_mut(&t))
                {
                    tx.changes.extend(changes);
                }
            }
            None => {
                for c in changes {
                    self.fire(serial, id, &c);
                }
            }
        }
    }

    /// Queues a watch event for every watch `change` matches whose
    /// connection may read the node (or its parent, or the node as it was).
    pub fn fire(&mut self, serial: u64, firer: u32, change: &Change) {
        // Looked up once, and only when an unprivileged watcher matches.
        let store = &self.store;
        let perms = std::cell::OnceCell::new();
        let allowed = |who: &Identity| {
            if who.privileged {
                return true;
            }
            let &(node_perms, parent_perms) = perms.get_or_init(|| {
                let node = store.node(&change.path).map(|n| n.perms);
                let parent = if change.path.starts_with('/') && change.path != "/" {
                    store.node(path::parent(&change.path)).map(|n| n.perms)
                } else {
                    None
                };
                (node, parent)
            });
            let can_read = |p: Option<&[Perm]>| p.is_some_and(|p| p.for_identity(who) & READ != 0);
            if can_read(change.old_perms.as_deref()) || can_read(node_perms) {
                return true;
            }
            (node_perms.is_some() || change.old_perms.is_some()) && can_read(parent_perms)
        };
        for conn in self.conns.values_mut() {
            let (who, domid, ident) = (conn.who(), conn.domid, conn.ident);
            let mut permitted = None;
            let mut queued = false;
            let (watches, out) = conn.watches_and_output();
            for w in watches.iter().filter(|w| w.matches(change)) {
                if !*permitted.get_or_insert_with(|| allowed(&ident)) {
                    break;
                }
                let event_path = w.event_path(&change.path, domid);
                if !self
                    .queued_events
                    .insert((who.conn, event_path.to_string(), w.token.clone()))
                {
                    continue;
                }
                encode_event(out, &who, serial, firer, event_path, &w.token);
                queued = true;
            }
            if queued {
                Self::mark_dirty(&mut self.effects, conn);
            }
        }
    }

    fn execute(
        &mut self,
        id: u32,
        serial: u64,
        h: &Header,
        payload: &[u8],
        reply: &mut Vec<u8>,
    ) -> Result<Done, Fail> {
        let ty = MsgType::from_u32(h.ty)
            .filter(|t| !matches!(t, MsgType::WatchEvent | MsgType::Error))
            .ok_or(Fail(XsError::Enosys, "type"))?;
        let conn = self.conns.get(&id).expect("live connection");
        let who = conn.ident;
        let domid = conn.domid;
        let limited = !who.privileged;
        if PRIVILEGED.contains(&ty) && !who.privileged {
            return Err(Fail(XsError::Eacces, "perm:privileged"));
        }
        let tx = if NO_TX.contains(&ty) || h.tx_id == 0 {
            None
        } else if conn.transactions.contains_key(&h.tx_id) {
            Some(h.tx_id)
        } else {
            return Err(Fail(XsError::Enoent, "tx:unknown"));
        };
        let req = request::parse(ty, payload)?;
        let path_max = self.quotas.get(Kind::PathMax, domid) as usize;
        let resolve = |raw| node_path(raw, domid, path_max);
        match req {
            Request::Read(p) => self.reply_from(id, tx, &resolve(p)?, &who, |n| {
                reply.extend_from_slice(n.value)
            }),
            // handle() refuses a listing too long for one reply
            Request::Directory(p) => self.reply_from(id, tx, &resolve(p)?, &who, |n| {
                reply.extend_from_slice(n.children)
            }),
            Request::DirectoryPart { path: p, offset } => {
                self.reply_from(id, tx, &resolve(p)?, &who, |n| {
                    directory_part(n, offset, reply)
                })
            }
            Request::GetPerms(p) => {
                self.reply_from(id, tx, &resolve(p)?, &who, |n| n.perms.write_to(reply))
            }
            Request::Write { path: p, value } => {
                let p = resolve(p)?;
                let limits = self.limits(domid);
                let change =
                    self.tree(id, tx, |t| tree::write(t, &p, Some(value), &who, &limits))?;
                self.changed(id, tx, serial, change);
                Ok(Done::Ack)
            }
            Request::Mkdir(p) => {
                let p = resolve(p)?;
                let limits = self.limits(domid);
                let change = self.tree(id, tx, |t| tree::write(t, &p, None, &who, &limits))?;
                self.changed(id, tx, serial, change);
                Ok(Done::Ack)
            }
            Request::Rm(p) => {
                let p = resolve(p)?;
                let changes = self.tree(id, tx, |t| tree::remove(t, &p, &who))?;
                self.changed(id, tx, serial, changes);
                Ok(Done::Ack)
            }
            Request::SetPerms {
                path: p,
                perms,
                count,
            } => {
                if limited && count > self.quotas.get(Kind::Permissions, domid) as usize {
                    return Err(Fail(XsError::Enospc, "quota:permissions"));
                }
                let perms = Perms::parse(perms, count).map_err(|e| Fail(e, "perms"))?;
                if p.first() == Some(&b'@') {
                    self.set_special_perms(p, perms, &who)?;
                    return Ok(Done::Ack);
                }
                let p = resolve(p)?;
                // Xen has no such domain (we cannot ask it about others).
                if perms.0.iter().any(|e| e.domid >= DOMID_FIRST_RESERVED) {
                    return Err(Fail(XsError::Enoent, "perms:no such domain"));
                }
                let change = self.tree(id, tx, |t| tree::set_perms(t, &p, perms, &who))?;
                self.changed(id, tx, serial, [change]);
                Ok(Done::Ack)
            }
            Request::Watch { path: p, token } => {
                let (abs, relative) =
                    path::resolve_watch(p, domid, path_max).map_err(|e| Fail(e, "path"))?;
                if limited {
                    let used: usize = self
                        .conns
                        .values()
                        .filter(|c| c.domid == domid)
                        .map(|c| c.watches.len())
                        .sum();
                    if used >= self.quotas.get(Kind::Watches, domid) as usize {
                        return Err(Fail(XsError::E2big, "quota:watches"));
                    }
                }
                let w = Watch {
                    path: abs,
                    token: token.to_vec(),
                    relative,
                };
                let conn = self.conns.get_mut(&id).unwrap();
                if !conn.watches.add(w) {
                    return Err(Fail(XsError::Eexist, "watch exists"));
                }
                self.respond(id, serial, h, Ok(b"OK\0"));
                // The initial event, after the reply, as upstream.
                let conn = self.conns.get_mut(&id).unwrap();
                let who = conn.who();
                let (watches, out) = conn.watches_and_output();
                let w = watches.last().expect("the watch just added");
                encode_event(
                    out,
                    &who,
                    serial,
                    id,
                    w.event_path(&w.path, domid),
                    &w.token,
                );
                Self::mark_dirty(&mut self.effects, conn);
                Ok(Done::Replied)
            }
            Request::Unwatch { path: p, token } => {
                let abs = path::canonical(p, domid);
                let conn = self.conns.get_mut(&id).unwrap();
                if !conn.watches.remove(&abs, token) {
                    return Err(Fail(XsError::Enoent, "no such watch"));
                }
                Ok(Done::Ack)
            }
            Request::TransactionStart => {
                if tx.is_some() {
                    return Err(Fail(XsError::Ebusy, "tx:nested"));
                }
                let quota = self.quotas.get(Kind::Transactions, domid) as usize;
                let conn = self.conns.get_mut(&id).unwrap();
                if limited && conn.transactions.len() >= quota {
                    return Err(Fail(XsError::Enospc, "quota:transactions"));
                }
                let tx_id = conn.alloc_tx_id();
                conn.transactions.insert(tx_id, Default::default());
                // upstream stamps each transaction with a generation
                self.store.next_generation();
                write!(reply, "{tx_id}\0").expect("writing to a Vec");
                Ok(Done::Reply)
            }
            Request::TransactionEnd { commit } => {
                let tx_id = tx.ok_or(Fail(XsError::Enoent, "tx:none"))?;
                let conn = self.conns.get_mut(&id).unwrap();
                let who = conn.who();
                let t = conn.transactions.remove(&tx_id).unwrap();
                if !commit {
                    probes::tx_end(serial, &who, tx_id, TxOutcome::Abort, "");
                    return Ok(Done::Ack);
                }
                if limited && t.accessed() > self.quotas.get(Kind::TransactionNodes, domid) as usize
                {
                    probes::tx_end(
                        serial,
                        &who,
                        tx_id,
                        TxOutcome::Conflict,
                        "quota:transaction-nodes",
                    );
                    return Err(Fail(XsError::Enospc, "quota:transaction-nodes"));
                }
                match t.commit(&mut self.store) {
                    Ok(changes) => {
                        probes::tx_end(serial, &who, tx_id, TxOutcome::Commit, "");
                        for c in &changes {
                            self.fire(serial, id, c);
                        }
                        Ok(Done::Ack)
                    }
                    Err(conflict) => {
                        probes::tx_end(serial, &who, tx_id, TxOutcome::Conflict, &conflict.0);
                        Err(Fail(XsError::Eagain, "tx:conflict"))
                    }
                }
            }
            Request::Introduce {
                domid: d,
                gfn,
                port,
            } => {
                if self.domains.get(d).is_some() {
                    return Ok(Done::Ack);
                }
                let attachment = self.backend.introduce(d, gfn, port).map_err(|e| {
                    self.log.log(id, format_args!("INTRODUCE {d}: {e}"));
                    Fail(XsError::Einval, "backend")
                })?;
                self.effects.attached.push((d, attachment));
                let conn_slot = self.reserve_conn_id();
                self.domains.insert(
                    d,
                    Domain {
                        gfn,
                        port,
                        conn_slot,
                        ..Domain::default()
                    },
                );
                self.fire(serial, id, &special(path::INTRODUCE_DOMAIN));
                Ok(Done::Ack)
            }
            Request::Release(d) => {
                if d == 0 {
                    return Err(Fail(XsError::Einval, "domid"));
                }
                self.domains.get(d).ok_or(Fail(XsError::Enoent, "domain"))?;
                if !self.release_waits_for_reply(id, d) {
                    self.release(d, serial, id);
                    return Ok(Done::Ack);
                }
                self.respond(id, serial, h, Ok(b"OK\0"));
                self.release(d, serial, id);
                Ok(Done::Replied)
            }
            Request::GetDomainPath(d) => {
                reply.extend_from_slice(path::domain_path(d).as_bytes());
                reply.push(0);
                Ok(Done::Reply)
            }
            Request::IsDomainIntroduced(d) => {
                reply.extend_from_slice(if self.domains.is_introduced(d) {
                    b"T\0"
                } else {
                    b"F\0"
                });
                Ok(Done::Reply)
            }
            Request::Resume(d) => {
                if d == 0 {
                    return Err(Fail(XsError::Einval, "domid"));
                }
                self.domains.get(d).ok_or(Fail(XsError::Enoent, "domain"))?;
                Ok(Done::Ack)
            }
            Request::SetTarget { domid: d, target } => {
                if self.domains.get(target).is_none() {
                    return Err(Fail(XsError::Enoent, "target"));
                }
                let dom = self
                    .domains
                    .get_mut(d)
                    .ok_or(Fail(XsError::Enoent, "domain"))?;
                dom.target = Some(target);
                for c in self.conns.values_mut().filter(|c| c.domid == d) {
                    c.ident.target = Some(target);
                }
                Ok(Done::Ack)
            }
            Request::ResetWatches => {
                let conn = self.conns.get_mut(&id).unwrap();
                conn.watches.clear();
                conn.drop_transactions(serial, "reset");
                Ok(Done::Ack)
            }
            Request::Control(args) => {
                control::run(self, &args, reply)?;
                Ok(Done::Reply)
            }
            Request::GetFeature(d) => {
                let v = match d {
                    None => FEATURES,
                    Some(d) => {
                        self.domains
                            .get(d)
                            .ok_or(Fail(XsError::Enoent, "domain"))?
                            .features
                    }
                };
                write!(reply, "{v}\0").expect("writing to a Vec");
                Ok(Done::Reply)
            }
            Request::SetFeature { domid: d, value } => {
                let dom = self
                    .domains
                    .get_mut(d)
                    .ok_or(Fail(XsError::Enoent, "domain"))?;
                if value & !FEATURES != 0 {
                    return Err(Fail(XsError::Einval, "feature unsupported"));
                }
                dom.features = value;
                Ok(Done::Ack)
            }
            Request::GetQuota { domid: d, name } => {
                let Some(name) = name else {
                    let names: Vec<&str> = Quotas::names().collect();
                    reply.extend_from_slice(names.join(" ").as_bytes());
                    reply.push(0);
                    return Ok(Done::Reply);
                };
                let kind = Quotas::kind_by_name(name).ok_or(Fail(XsError::Einval, "quota name"))?;
                let v = match d {
                    None => self.quotas.global(kind),
                    Some(d) => {
                        self.domains.get(d).ok_or(Fail(XsError::Enoent, "domain"))?;
                        self.quotas.get(kind, d)
                    }
                };
                write!(reply, "{v}\0").expect("writing to a Vec");
                Ok(Done::Reply)
            }
            Request::SetQuota {
                domid: d,
                name,
                value,
            } => {
                let kind = Quotas::kind_by_name(name).ok_or(Fail(XsError::Einval, "quota name"))?;
                match d {
                    None => {
                        self.quotas.set_global(name, value);
                    }
                    Some(d) => {
                        self.domains.get(d).ok_or(Fail(XsError::Enoent, "domain"))?;
                        self.quotas.set_domain(d, kind, value);
                    }
                }
                Ok(Done::Ack)
            }
        }
    }

    /// SET_PERMS on @introduceDomain/@releaseDomain: not nodes of the tree
    /// (GET_PERMS cannot read them), outside transactions, no watch fires.
    fn set_special_perms(&mut self, name: &[u8], perms: Perms, who: &Identity) -> Result<(), Fail> {
        let name = std::str::from_utf8(name).map_err(|_| Fail(XsError::Enoent, "special"))?;
        let node = self
            .store
            .special(name)
            .ok_or(Fail(XsError::Enoent, "special"))?;
        let need = crate::perms::WRITE | crate::perms::OWNER;
        if node.perms.for_identity(who) & need != need {
            return Err(Fail(XsError::Eacces, "perm"));
        }
        self.store.set_special_perms(name, perms);
        Ok(())
    }

    /// Whether upstream tears domain `d` down only after answering the
    /// RELEASE from connection `id`. Its event loop holds a reference on the
    /// connection it serves and on the next one in creation order, so
    /// freeing the domain's connection is deferred past the reply when that
    /// connection is the releaser's own or the very next one; otherwise
    /// @releaseDomain fires before the reply.
    fn release_waits_for_reply(&self, id: u32, d: u32) -> bool {
        let slot_of = |domid: u32| self.domains.get(domid).map(|dom| dom.conn_slot);
        let Some(target) = slot_of(d) else {
            return false;
        };
        let releaser = match self.conns.get(&id) {
            Some(c) if c.domid != 0 => slot_of(c.domid).unwrap_or(id),
            _ => id,
        };
        if releaser == target {
            return true;
        }
        // dom0 clients are connections of their own; a guest's ring
        // connection is its domain's slot
        let sockets = self.conns.values().filter(|c| c.domid == 0).map(|c| c.id);
        let rings = self.domains.ids().filter(|&x| x != 0).filter_map(slot_of);
        sockets.chain(rings).filter(|&s| s > releaser).min() == Some(target)
    }

    /// The next connection id. INTRODUCE takes one for the domain's ring
    /// connection, so the domain has its place in the order connections
    /// were created.
    fn reserve_conn_id(&mut self) -> u32 {
        let id = self.next_conn;
        self.next_conn += 1;
        id
    }

    /// RELEASE: the domain's connections close (their transactions dropped,
    /// their watches gone, so its own nodes' removal fires nothing at it),
    /// the nodes it owns are removed as upstream does for a dead domain,
    /// and @releaseDomain fires.
    fn release(&mut self, domid: u32, serial: u64, firer: u32) {
        let ids: Vec<u32> = self
            .conns
            .values()
            .filter(|c| c.domid == domid)
            .map(|c| c.id)
            .collect();
        for c in ids {
            self.close(c, serial, "domain released");
        }
        self.domains.remove(domid);
        self.quotas.forget_domain(domid);
        self.backend.release(domid);
        self.effects.released.push(domid);
        for c in self.conns.values_mut() {
            if c.ident.target == Some(domid) {
                c.ident.target = None;
            }
        }
        for p in self.store.owned_paths(domid) {
            if p == "/" || self.store.node(&p).is_none() {
                continue;
            }
            if let Ok(changes) = tree::remove(&mut self.store, &p, &Identity::dom0()) {
                for c in &changes {
                    self.fire(serial, firer, c);
                }
            }
        }
        self.store.ignore_domain_in_perms(domid);
        self.fire(serial, firer, &special(path::RELEASE_DOMAIN));
    }
}

fn node_path(raw: &[u8], domid: u32, path_max: usize) -> Result<std::borrow::Cow<'_, str>, Fail> {
    path::resolve(raw, domid, path_max).map_err(|e| Fail(e, "path"))
}

fn special(name: &str) -> Change {
    Change {
        path: name.to_string(),
        exact: true,
        old_perms: None,
    }
}

/// A watch event for `who`, fired by request `serial` of connection `firer`.
fn encode_event(
    out: &mut Vec<u8>,
    who: &probes::Who,
    serial: u64,
    firer: u32,
    path: &str,
    token: &[u8],
) {
    let parts: [&[u8]; 4] = [path.as_bytes(), b"\0", token, b"\0"];
    crate::frame::encode(out, MsgType::WatchEvent as u32, 0, 0, &parts);
    probes::watch_event(serial, who, firer, path.as_bytes(), token);
}

/// DIRECTORY_PART as C xenstored: the node's generation, then as many
/// whole children from byte `offset` as fit, and an empty string once the
/// list is complete.
fn directory_part(n: NodeRef<'_>, offset: usize, reply: &mut Vec<u8>) {
    write!(reply, "{}\0", n.generation).expect("writing to a Vec");
    let gen_len = reply.len();
    if offset >= n.children.len() {
        reply.push(0);
        return;
    }
    let max = crate::wire::PAYLOAD_MAX - gen_len - 1;
    let mut len = 0;
    let rest = &n.children[offset..];
    for child in rest.split_inclusive(|&b| b == 0) {
        if len + child.len() > max {
            break;
        }
        len += child.len();
    }
    reply.extend_from_slice(&rest[..len]);
    if offset + len == n.children.len() {
        reply.push(0);
    }
}

/// At most BURST lines per second to stderr; the rest are counted.
#[derive(Default)]
struct RateLimitedLog {
    window: Option<Instant>,
    lines: u32,
    suppressed: u64,
}

impl RateLimitedLog {
    const BURST: u32 = 10;

    fn log(&mut self, conn: u32, what: std::fmt::Arguments) {
        let now = Instant::now();
        if self
            .window
            .is_none_or(|w| now.duration_since(w).as_secs() >= 1)
        {
            if self.suppressed > 0 {
                eprintln!(
                    "xenstored-shim: {} more bad-input messages suppressed",
                    self.suppressed
                );
            }
            self.window = Some(now);
            self.lines = 0;
            self.suppressed = 0;
        }
        if self.lines < Self::BURST {
            self.lines += 1;
            eprintln!("xenstored-shim: conn {conn}: {what}");
        } else {
            self.suppressed += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::Listener;
    use crate::wire::HEADER_LEN;

    struct NoBackend;
    struct NoListener;

    impl Listener for NoListener {
        fn source(&mut self) -> &mut dyn mio::event::Source {
            unreachable!("daemon tests run no event loop")
        }
        fn accept(&mut self) -> std::io::Result<Option<Box<dyn crate::transport::Transport>>> {
            Ok(None)
        }
    }

    impl DomainBackend for NoBackend {
        fn introduce(&mut self, _: u32, _: u64, _: u32) -> std::io::Result<Attachment> {
            Ok(Attachment::Listener(Box::new(NoListener)))
        }
        fn release(&mut self, _: u32) {}
    }

    fn daemon() -> Daemon {
        Daemon::new(Quotas::default(), Box::new(NoBackend))
    }

    /// Everything queued for `id` since the last call: (type, tx_id, payload).
    fn drain(d: &mut Daemon, id: u32) -> Vec<(u32, u32, Vec<u8>)> {
        let Some(c) = d.conn_mut(id) else {
            return vec![];
        };
        let mut out = Vec::new();
        let mut b = c.pending();
        while b.len() >= HEADER_LEN {
            let h = Header::decode(b[..HEADER_LEN].try_into().unwrap());
            let end = HEADER_LEN + h.len as usize;
            out.push((h.ty, h.tx_id, b[HEADER_LEN..end].to_vec()));
            b = &b[end..];
        }
        let n = c.pending().len();
        c.consumed(n);
        out
    }

    fn call(d: &mut Daemon, id: u32, ty: MsgType, tx: u32, payload: &[u8]) -> (u32, Vec<u8>) {
        let h = Header {
            ty: ty as u32,
            req_id: 9,
            tx_id: tx,
            len: payload.len() as u32,
        };
        d.handle(id, h, payload);
        let (evs, replies): (Vec<_>, Vec<_>) = drain(d, id)
            .into_iter()
            .partition(|m| m.0 == MsgType::WatchEvent as u32);
        STASH.with(|s| s.borrow_mut().entry(id).or_default().extend(evs));
        assert_eq!(replies.len(), 1, "{replies:?}");
        let (t, _, p) = replies.into_iter().next().unwrap();
        (t, p)
    }

    fn ok(d: &mut Daemon, id: u32, ty: MsgType, payload: &[u8]) -> Vec<u8> {
        let (t, p) = call(d, id, ty, 0, payload);
        assert_eq!(t, ty as u32, "{}", String::from_utf8_lossy(&p));
        p
    }

    fn err(d: &mut Daemon, id: u32, ty: MsgType, tx: u32, payload: &[u8]) -> String {
        let (t, p) = call(d, id, ty, tx, payload);
        assert_eq!(t, MsgType::Error as u32, "{}", String::from_utf8_lossy(&p));
        String::from_utf8(p)
            .unwrap()
            .trim_end_matches('\0')
            .to_string()
    }

    type Message = (u32, u32, Vec<u8>);

    thread_local! {
        /// Watch events `call` read past, per connection.
        static STASH: std::cell::RefCell<std::collections::HashMap<u32, Vec<Message>>> =
            Default::default();
    }

    fn events(d: &mut Daemon, id: u32) -> Vec<String> {
        let mut all = STASH.with(|s| s.borrow_mut().remove(&id).unwrap_or_default());
        all.extend(drain(d, id));
        all.into_iter()
            .filter(|m| m.0 == MsgType::WatchEvent as u32)
            .map(|m| {
                String::from_utf8_lossy(&m.2)
                    .replace('\0', " ")
                    .trim_end()
                    .to_string()
            })
            .collect()
    }

    /// dom0 connection, domain 6 introduced with /local/domain/6 owned by it,
    /// and a connection of domain 6.
    fn with_guest() -> (Daemon, u32, u32) {
        let mut d = daemon();
        let dom0 = d.open(0, 100, "socket", "test");
        ok(&mut d, dom0, MsgType::Introduce, b"6\x001\x001\x00");
        ok(&mut d, dom0, MsgType::Mkdir, b"/local/domain/6\0");
        ok(&mut d, dom0, MsgType::SetPerms, b"/local/domain/6\0n6\0");
        let guest = d.open(6, 0, "socket", "guest");
        (d, dom0, guest)
    }

    #[test]
    fn unknown_types_privileged_ops_and_unknown_transactions() {
        let (mut d, dom0, guest) = with_guest();
        assert_eq!(err(&mut d, dom0, MsgType::Read, 0, b"/nope\0"), "ENOENT");
        let h = Header {
            ty: 20,
            req_id: 1,
            tx_id: 0,
            len: 0,
        };
        d.handle(dom0, h, b"");
        assert_eq!(drain(&mut d, dom0)[0].2, b"ENOSYS\0");
        assert_eq!(
            err(&mut d, guest, MsgType::Introduce, 0, b"7\x001\x001\x00"),
            "EACCES"
        );
        assert_eq!(
            err(&mut d, guest, MsgType::Control, 0, b"check\0"),
            "EACCES"
        );
        assert_eq!(err(&mut d, dom0, MsgType::Read, 42, b"/tool\0"), "ENOENT");
        // WATCH ignores the tx id as upstream (XS_FLAG_NOTID)
        let (t, _) = call(&mut d, dom0, MsgType::Watch, 42, b"/tool\0t\0");
        assert_eq!(t, MsgType::Watch as u32);
    }

    #[test]
    fn guests_use_relative_paths_and_meet_permissions() {
        let (mut d, dom0, guest) = with_guest();
        ok(&mut d, guest, MsgType::Write, b"data/x\0v");
        assert_eq!(
            ok(&mut d, dom0, MsgType::Read, b"/local/domain/6/data/x\0"),
            b"v"
        );
        assert_eq!(ok(&mut d, guest, MsgType::GetPerms, b"data/x\0"), b"n6\0");
        assert_eq!(err(&mut d, guest, MsgType::Read, 0, b"/tool\0"), "EACCES");
        assert_eq!(err(&mut d, guest, MsgType::Write, 0, b"/x\0v"), "EACCES");
        // a guest cannot give its node away, dom0 can
        assert_eq!(
            err(&mut d, guest, MsgType::SetPerms, 0, b"data/x\0n0\0"),
            "EPERM"
        );
        ok(&mut d, guest, MsgType::SetPerms, b"data/x\0n6\0r7\0");
        assert_eq!(
            ok(&mut d, guest, MsgType::GetDomainPath, b"6\0"),
            b"/local/domain/6\0"
        );
    }

    #[test]
    fn watches_fire_only_for_readers_with_relative_paths_for_relative_watches() {
        let (mut d, dom0, guest) = with_guest();
        ok(&mut d, guest, MsgType::Watch, b"data\0rel\0");
        ok(&mut d, guest, MsgType::Watch, b"/tool\0abs\0");
        assert_eq!(
            events(&mut d, guest),
            ["data rel", "/tool abs"],
            "initial events"
        );
        ok(&mut d, dom0, MsgType::Write, b"/local/domain/6/data/y\0z");
        assert_eq!(events(&mut d, guest), ["data/y rel"]);
        ok(&mut d, dom0, MsgType::Write, b"/tool/secret\0z");
        assert_eq!(
            events(&mut d, guest),
            Vec::<String>::new(),
            "unreadable for domain 6"
        );
        ok(&mut d, dom0, MsgType::SetPerms, b"/tool/secret\0n0\0r6\0");
        assert_eq!(events(&mut d, guest), ["/tool/secret abs"]);
        // RM: the removed node and each descendant's exact watchers
        ok(&mut d, dom0, MsgType::Watch, b"/a/b/c\0deep\0");
        ok(&mut d, dom0, MsgType::Write, b"/a/b/c\0v");
        ok(&mut d, dom0, MsgType::Watch, b"/a\0top\0");
        events(&mut d, dom0);
        ok(&mut d, dom0, MsgType::Rm, b"/a/b\0");
        assert_eq!(events(&mut d, dom0), ["/a/b/c deep", "/a/b top"]);
        assert_eq!(err(&mut d, dom0, MsgType::Watch, 0, b"/a\0top\0"), "EEXIST");
        ok(&mut d, dom0, MsgType::Unwatch, b"/a\0top\0");
        assert_eq!(
            err(&mut d, dom0, MsgType::Unwatch, 0, b"/a\0top\0"),
            "ENOENT"
        );
    }

    #[test]
    fn transactions_see_own_writes_fire_on_commit_and_conflict() {
        let mut d = daemon();
        let a = d.open(0, 1, "socket", "a");
        let b = d.open(0, 2, "socket", "b");
        ok(&mut d, b, MsgType::Watch, b"/t\0w\0");
        events(&mut d, b);
        let tx = ok(&mut d, a, MsgType::TransactionStart, b"\0");
        assert_eq!(tx, b"1\0");
        assert_eq!(
            call(&mut d, a, MsgType::Write, 1, b"/t/x\0in-tx").0,
            MsgType::Write as u32
        );
        assert_eq!(call(&mut d, a, MsgType::Read, 1, b"/t/x\0").1, b"in-tx");
        assert_eq!(err(&mut d, b, MsgType::Read, 0, b"/t/x\0"), "ENOENT");
        assert_eq!(
            events(&mut d, b),
            Vec::<String>::new(),
            "nothing before commit"
        );
        assert_eq!(err(&mut d, a, MsgType::TransactionStart, 1, b"\0"), "EBUSY");
        assert_eq!(
            call(&mut d, a, MsgType::TransactionEnd, 1, b"T\0").1,
            b"OK\0"
        );
        assert_eq!(events(&mut d, b), ["/t/x w"]);
        // conflict: b changes what a's transaction read
        assert_eq!(ok(&mut d, a, MsgType::TransactionStart, b"\0"), b"2\0");
        call(&mut d, a, MsgType::Read, 2, b"/t/x\0");
        call(&mut d, a, MsgType::Write, 2, b"/t/y\x001");
        ok(&mut d, b, MsgType::Write, b"/t/x\0changed");
        assert_eq!(err(&mut d, a, MsgType::TransactionEnd, 2, b"T\0"), "EAGAIN");
        assert_eq!(err(&mut d, a, MsgType::Read, 0, b"/t/y\0"), "ENOENT");
        assert_eq!(err(&mut d, a, MsgType::TransactionEnd, 2, b"T\0"), "ENOENT");
        // abort discards
        ok(&mut d, a, MsgType::TransactionStart, b"\0");
        call(&mut d, a, MsgType::Write, 3, b"/t/z\0");
        assert_eq!(
            call(&mut d, a, MsgType::TransactionEnd, 3, b"F\0").1,
            b"OK\0"
        );
        assert_eq!(err(&mut d, a, MsgType::Read, 0, b"/t/z\0"), "ENOENT");
        assert!(d.store.check().is_empty());
    }

    #[test]
    fn guest_quotas_apply_and_dom0_is_exempt() {
        let (mut d, dom0, guest) = with_guest();
        ok(&mut d, dom0, MsgType::Control, b"quota\0set\0nodes\x003\0");
        ok(
            &mut d,
            dom0,
            MsgType::Control,
            b"quota\0set\0watches\x001\0",
        );
        ok(
            &mut d,
            dom0,
            MsgType::Control,
            b"quota\0set\0transactions\x001\0",
        );
        // /local/domain/6 is the first of its 3 nodes
        ok(&mut d, guest, MsgType::Write, b"a/b\0");
        assert_eq!(err(&mut d, guest, MsgType::Write, 0, b"c\0"), "ENOSPC");
        ok(&mut d, dom0, MsgType::Write, b"/local/domain/6/c\0");
        ok(&mut d, guest, MsgType::Watch, b"a\0t\0");
        assert_eq!(err(&mut d, guest, MsgType::Watch, 0, b"c\0t\0"), "E2BIG");
        ok(&mut d, guest, MsgType::TransactionStart, b"\0");
        assert_eq!(
            err(&mut d, guest, MsgType::TransactionStart, 0, b"\0"),
            "ENOSPC"
        );
        let perms = b"a\0n6\0r1\0r2\0r3\0r4\0r5\0";
        assert_eq!(err(&mut d, guest, MsgType::SetPerms, 0, perms), "ENOSPC");
        let big = [b"a\0".as_slice(), &[b'x'; 2048]].concat();
        assert_eq!(err(&mut d, guest, MsgType::Write, 0, &big), "ENOSPC");
        let big = [b"/big\0".as_slice(), &[b'x'; 4000]].concat();
        ok(&mut d, dom0, MsgType::Write, &big);
    }

    #[test]
    fn one_request_sends_an_identical_event_once() {
        let mut d = daemon();
        let a = d.open(0, 1, "socket", "a");
        ok(&mut d, a, MsgType::Watch, b"/x\0t\0");
        ok(&mut d, a, MsgType::Watch, b"/x/y\0t\0");
        ok(&mut d, a, MsgType::Watch, b"/x/y\0u\0");
        events(&mut d, a);
        ok(&mut d, a, MsgType::Write, b"/x/y\0v");
        assert_eq!(events(&mut d, a), ["/x/y t", "/x/y u"]);
        ok(&mut d, a, MsgType::Write, b"/x/y\0w");
        assert_eq!(events(&mut d, a), ["/x/y t", "/x/y u"], "per request");
    }

    /// Message types `id` gets for its RELEASE of `domid`, in order.
    fn release_order(d: &mut Daemon, id: u32, domid: &[u8]) -> Vec<u32> {
        let h = Header {
            ty: MsgType::Release as u32,
            req_id: 1,
            tx_id: 0,
            len: domid.len() as u32,
        };
        d.handle(id, h, domid);
        drain(d, id).into_iter().map(|m| m.0).collect()
    }

    #[test]
    fn release_event_precedes_the_reply_unless_the_ring_is_next() {
        let (ev, rel) = (MsgType::WatchEvent as u32, MsgType::Release as u32);
        let mut d = daemon();
        let a = d.open(0, 1, "socket", "a");
        ok(&mut d, a, MsgType::Introduce, b"4\x001\x001\0");
        let b = d.open(0, 2, "socket", "b");
        for c in [a, b] {
            ok(&mut d, c, MsgType::Watch, b"@releaseDomain\0r\0");
            events(&mut d, c);
        }
        // domain 4's ring connection comes right after a
        assert_eq!(release_order(&mut d, a, b"4\0"), [rel, ev]);
        // now b comes between a and the ring
        ok(&mut d, a, MsgType::Introduce, b"4\x001\x001\0");
        assert_eq!(release_order(&mut d, a, b"4\0"), [ev, rel]);
        events(&mut d, b);
        ok(&mut d, b, MsgType::Introduce, b"4\x001\x001\0");
        assert_eq!(release_order(&mut d, b, b"4\0"), [rel, ev]);
        ok(&mut d, b, MsgType::Introduce, b"4\x001\x001\0");
        events(&mut d, a);
        assert_eq!(release_order(&mut d, a, b"4\0"), [ev, rel]);
    }

    #[test]
    fn release_closes_the_domain_and_removes_what_it_owned() {
        let (mut d, dom0, guest) = with_guest();
        ok(&mut d, guest, MsgType::Write, b"x\0");
        ok(&mut d, guest, MsgType::TransactionStart, b"\0");
        ok(&mut d, dom0, MsgType::Watch, b"@releaseDomain\0r\0");
        ok(&mut d, dom0, MsgType::Watch, b"/local\0l\0");
        events(&mut d, dom0);
        assert_eq!(
            ok(&mut d, dom0, MsgType::IsDomainIntroduced, b"6\0"),
            b"T\0"
        );
        ok(&mut d, dom0, MsgType::Release, b"6\0");
        assert!(d.conn(guest).is_none());
        assert!(d.effects.closed.contains(&guest));
        assert_eq!(d.effects.released, [6]);
        assert_eq!(
            events(&mut d, dom0),
            // descendants of a removed node only fire exact watches
            ["/local/domain/6 l", "@releaseDomain r"]
        );
        assert_eq!(
            err(&mut d, dom0, MsgType::Read, 0, b"/local/domain/6\0"),
            "ENOENT"
        );
        assert_eq!(
            ok(&mut d, dom0, MsgType::IsDomainIntroduced, b"6\0"),
            b"F\0"
        );
        assert_eq!(err(&mut d, dom0, MsgType::Release, 0, b"6\0"), "ENOENT");
        assert_eq!(err(&mut d, dom0, MsgType::Release, 0, b"0\0"), "EINVAL");
        assert!(d.store.check().is_empty());
    }

    #[test]
    fn set_target_gives_a_device_model_its_targets_rights() {
        let (mut d, dom0, guest) = with_guest();
        ok(&mut d, guest, MsgType::Write, b"private\0secret");
        ok(&mut d, dom0, MsgType::Introduce, b"7\x001\x001\x00");
        let dm = d.open(7, 0, "socket", "device model");
        assert_eq!(
            err(&mut d, dm, MsgType::Read, 0, b"/local/domain/6/private\0"),
            "EACCES"
        );
        assert_eq!(
            err(&mut d, dm, MsgType::SetTarget, 0, b"7\x006\x00"),
            "EACCES"
        );
        assert_eq!(
            err(&mut d, dom0, MsgType::SetTarget, 0, b"7\x009\x00"),
            "ENOENT"
        );
        ok(&mut d, dom0, MsgType::SetTarget, b"7\x006\x00");
        assert_eq!(
            ok(&mut d, dm, MsgType::Read, b"/local/domain/6/private\0"),
            b"secret"
        );
        ok(
            &mut d,
            dm,
            MsgType::Write,
            b"/local/domain/6/private\0changed",
        );
        // and connections opened later inherit it
        let dm2 = d.open(7, 0, "socket", "device model 2");
        assert_eq!(
            ok(&mut d, dm2, MsgType::Read, b"/local/domain/6/private\0"),
            b"changed"
        );
    }

    #[test]
    fn a_reused_domid_inherits_no_rights() {
        let (mut d, dom0, guest) = with_guest();
        ok(&mut d, dom0, MsgType::Write, b"/shared\0v");
        ok(&mut d, dom0, MsgType::SetPerms, b"/shared\0n0\0r6\0");
        assert_eq!(ok(&mut d, guest, MsgType::Read, b"/shared\0"), b"v");
        ok(&mut d, dom0, MsgType::Release, b"6\0");
        ok(&mut d, dom0, MsgType::Introduce, b"6\x001\x001\x00");
        let again = d.open(6, 0, "socket", "new guest");
        assert_eq!(err(&mut d, again, MsgType::Read, 0, b"/shared\0"), "EACCES");
        assert_eq!(
            ok(&mut d, dom0, MsgType::GetPerms, b"/shared\0"),
            b"n0\0r6\0"
        );
    }

    #[test]
    fn hostile_requests_never_panic_nor_corrupt_the_store() {
        let (mut d, dom0, guest) = with_guest();
        let mut seed = 0x9e3779b97f4a7c15u64;
        let mut rnd = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let words: [&[u8]; 12] = [
            b"/",
            b"/a",
            b"a",
            b"@releaseDomain",
            b"\0",
            b"T",
            b"n0",
            b"r6",
            b"6",
            b"-1",
            b"//",
            b"\xff",
        ];
        for _ in 0..20000 {
            let ty = (rnd() % 30) as u32;
            let mut payload = Vec::new();
            for _ in 0..rnd() % 5 {
                payload.extend_from_slice(words[(rnd() % 12) as usize]);
                if rnd() % 3 != 0 {
                    payload.push(0);
                }
            }
            let conn = if rnd() % 2 == 0 { dom0 } else { guest };
            let h = Header {
                ty,
                req_id: 1,
                tx_id: (rnd() % 4) as u32,
                len: payload.len() as u32,
            };
            if ty == MsgType::Release as u32 || ty == MsgType::ResetWatches as u32 {
                continue;
            }
            d.handle(conn, h, &payload);
            drain(&mut d, dom0);
            drain(&mut d, guest);
        }
        assert!(d.store.check().is_empty(), "{:?}", d.store.check());
    }
}
