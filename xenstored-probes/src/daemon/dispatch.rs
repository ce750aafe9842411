//! From a message to its handler, as oxenstored's `function_of_type`: the
//! table says, for each message type, which handler executes it, how it
//! replies, whether only privileged connections may send it and whether it
//! runs in the header's transaction. Adding a message type means a row
//! here and a handler (with its argument parser in request.rs).

use super::{admin, domains, nodes, transactions, watches, Call, Daemon};
use crate::daemon::quota::Kind;
use crate::log::notable::{Kind as NotableKind, Notable};
use crate::probes;
use crate::wire::error::{Fail, Reason};
use crate::wire::{msg_name, Header, MsgType, XsError, HEADER_LEN, PAYLOAD_MAX};
use std::panic::{self, AssertUnwindSafe};

/// A handler taking the request's payload.
type Run = fn(&mut Daemon, &Call, &[u8]) -> Result<(), Fail>;
/// A handler taking the payload and the reply to fill.
type RunReplying = fn(&mut Daemon, &Call, &[u8], &mut Vec<u8>) -> Result<(), Fail>;

/// A handler, by how the request is answered.
enum Handler {
    /// "OK" on success.
    Ack(Run),
    /// What the handler put into the reply buffer.
    Data(RunReplying),
    /// The handler queues "OK" itself: it orders the reply among the
    /// watch events it queues.
    Own(Run),
}

/// Who may send a message type.
#[derive(PartialEq)]
enum Sender {
    Anyone,
    /// dom0 only (and whoever dom0 made privileged).
    Privileged,
}

/// Which transaction a message type runs in.
#[derive(PartialEq)]
enum Tx {
    /// The one the header's tx_id names (0: none).
    Header,
    /// None: the header's tx_id is not even looked up (upstream's
    /// XS_FLAG_NOTID).
    Ignored,
}

struct Op {
    handler: Handler,
    sender: Sender,
    tx: Tx,
}

/// How message type `ty` is executed; None for the types only the daemon
/// sends (WATCH_EVENT, ERROR).
fn op(ty: MsgType) -> Option<Op> {
    use Handler::{Ack, Data, Own};
    use MsgType as T;
    use Sender::{Anyone, Privileged};
    let op = |handler, sender, tx| {
        Some(Op {
            handler,
            sender,
            tx,
        })
    };
    match ty {
        T::Read => op(Data(nodes::read), Anyone, Tx::Header),
        T::Directory => op(Data(nodes::directory), Anyone, Tx::Header),
        T::DirectoryPart => op(Data(nodes::directory_part), Anyone, Tx::Header),
        T::GetPerms => op(Data(nodes::get_perms), Anyone, Tx::Header),
        T::Write => op(Ack(nodes::write), Anyone, Tx::Header),
        T::Mkdir => op(Ack(nodes::mkdir), Anyone, Tx::Header),
        T::Rm => op(Ack(nodes::rm), Anyone, Tx::Header),
        T::SetPerms => op(Ack(nodes::set_perms), Anyone, Tx::Header),
        T::Watch => op(Own(watches::watch), Anyone, Tx::Ignored),
        T::Unwatch => op(Ack(watches::unwatch), Anyone, Tx::Ignored),
        T::ResetWatches => op(Ack(watches::reset_watches), Anyone, Tx::Ignored),
        T::TransactionStart => op(Data(transactions::start), Anyone, Tx::Header),
        T::TransactionEnd => op(Ack(transactions::end), Anyone, Tx::Header),
        T::Introduce => op(Ack(domains::introduce), Privileged, Tx::Ignored),
        T::Release => op(Own(domains::release), Privileged, Tx::Ignored),
        T::GetDomainPath => op(Data(domains::get_domain_path), Anyone, Tx::Ignored),
        T::IsDomainIntroduced => op(Data(domains::is_introduced), Anyone, Tx::Ignored),
        T::Resume => op(Ack(domains::resume), Privileged, Tx::Ignored),
        T::SetTarget => op(Ack(domains::set_target), Privileged, Tx::Ignored),
        T::Control => op(Own(admin::control), Privileged, Tx::Header),
        T::GetFeature => op(Data(admin::get_feature), Privileged, Tx::Ignored),
        T::SetFeature => op(Ack(admin::set_feature), Privileged, Tx::Ignored),
        T::GetQuota => op(Data(admin::get_quota), Privileged, Tx::Ignored),
        T::SetQuota => op(Ack(admin::set_quota), Privileged, Tx::Ignored),
        T::WatchEvent | T::Error => None,
    }
}

/// What executing a request left to do.
enum Done {
    /// Queue the reply buffer as the reply.
    Reply,
    /// Queue "OK".
    Ack,
    /// The reply is already queued.
    Replied,
}

impl Daemon {
    /// Executes up to `most` of the complete messages connection `id` has
    /// received, in order; false when that closed it.
    pub fn execute_input(&mut self, id: u32, most: usize) -> bool {
        let Some(conn) = self.conns.get_mut(&id) else {
            return false;
        };
        let mut input = conn.take_input();
        for _ in 0..most {
            // As C xenstored, a domain over a quota is not read from: its
            // next request waits until replies and events drain.
            if !self.may_read(id) {
                break;
            }
            match input.next_message() {
                Ok(Some((header, payload))) => self.handle(id, header, payload),
                Ok(None) => break,
                Err(big) => {
                    let n = big.0;
                    let why = format!("conn {id}: message length {n} > 4096: dropping the client");
                    let domid = self.conns.get(&id).map_or(0, |c| c.domid());
                    let event = Notable::new(NotableKind::ConnectionDropped, why)
                        .domid(domid)
                        .reason("oversized message");
                    self.log.notable(event);
                    self.close(id, 0, "oversized message");
                    return false;
                }
            }
            if !self.conns.contains_key(&id) {
                return false;
            }
        }
        let Some(conn) = self.conns.get_mut(&id) else {
            return false;
        };
        conn.restore_input(input);
        true
    }

    /// Executes one request read from connection `id`.
    pub fn handle(&mut self, id: u32, header: Header, payload: &[u8]) {
        self.serial += 1;
        self.queued_events.clear();
        let Some(conn) = self.conns.get(&id) else {
            return;
        };
        let mut call = Call {
            conn: id,
            serial: self.serial,
            header,
            tx: None,
            who: conn.ident,
        };
        let h = &call.header;
        self.in_flight.start(call.serial, payload);
        probes::request(call.serial, || conn.who(), h.ty, h.tx_id, h.req_id, payload);
        let tx_open = h.tx_id != 0 && conn.transactions.contains_key(&h.tx_id);
        let unprivileged = (!conn.ident.privileged).then_some(conn.domid());
        self.ticket = unprivileged.map(|domid| self.outstanding.ticket(domid));
        let mut reply = std::mem::take(&mut self.reply);
        reply.clear();
        // No bug reachable from one client's request may stop the host's
        // xenstore: a panicking handler is answered EIO, as oxenstored
        // answers any exception, and the store is checked.
        let executed = panic::catch_unwind(AssertUnwindSafe(|| {
            self.execute(&mut call, tx_open, payload, &mut reply)
        }));
        let mut result = executed.unwrap_or_else(|_| {
            self.contained_panic(id, call.header.ty);
            Err(Fail::new(XsError::Eio, Reason::InternalPanic))
        });
        if matches!(result, Ok(Done::Reply)) && reply.len() > PAYLOAD_MAX {
            // upstream's send_reply refuses to send more
            result = Err(Fail::new(XsError::E2big, Reason::ReplyTooLong));
        }
        if let (Ok(Done::Reply), Some(domid)) = (&result, unprivileged) {
            // C xenstored charges a reply longer than its 16-byte default
            // buffer to the memory quota, and answers ENOMEM past it.
            let cost = reply.len() + HEADER_LEN;
            if reply.len() > 16
                && self.memory(domid) + cost >= self.quotas.get(Kind::Memory, domid) as usize
            {
                result = Err(Fail::new(XsError::Enomem, Reason::QuotaMemory));
            }
        }
        let (serial, h) = (call.serial, &call.header);
        match result {
            Ok(Done::Reply) => self.respond(id, serial, h, Ok(&reply)),
            Ok(Done::Ack) => self.respond(id, serial, h, Ok(b"OK\0")),
            Ok(Done::Replied) => {}
            Err(Fail(e, reason)) => {
                if let (Some(quota), Some(domid)) = (reason.and_then(Reason::quota), unprivileged) {
                    self.quota_refused(domid, h.ty, quota, e);
                }
                if e == XsError::Enosys || matches!(reason, Some(Reason::Args | Reason::TxUnknown))
                {
                    let reason = reason.map_or("", Reason::name);
                    let name = msg_name(h.ty).unwrap_or("unknown type");
                    self.log
                        .log(id, format_args!("{name} ({}) refused: {e} {reason}", h.ty));
                }
                self.respond(id, serial, h, Err((e, reason.map_or("", Reason::name))))
            }
        }
        self.reply = reply;
        self.ticket = None;
        if let Some(domid) = unprivileged {
            self.note_soft_quota(id, domid);
        }
    }

    /// Logs a request refused for a quota, within the domain's budget.
    fn quota_refused(&mut self, domid: u32, ty: u32, quota: &str, e: XsError) {
        let op = msg_name(ty).unwrap_or("unknown type");
        // Only introduced domains get a budget of their own, so the map
        // stays as small as the domain registry.
        let key = if self.domains.get(domid).is_some() {
            domid
        } else {
            u32::MAX
        };
        let event = Notable::new(
            NotableKind::QuotaRefused,
            format!("domain {domid}: {op} refused {e}: over its {quota} quota"),
        )
        .domid(domid)
        .op(op)
        .quota(quota)
        .reason(e.name());
        self.quota_log.entry(key).or_default().notable(event);
    }

    /// After a handler panicked (the panic hook logged where): says which
    /// request, and whether the store is still consistent.
    fn contained_panic(&mut self, id: u32, ty: u32) {
        let name = msg_name(ty).unwrap_or("unknown type");
        let problems = self.store.check();
        let store = if problems.is_empty() {
            "OK".to_string()
        } else {
            problems.join("; ")
        };
        let mut event = Notable::new(
            NotableKind::Panic,
            format!("conn {id}: {name} ({ty}) panicked, answered EIO; store check: {store}"),
        )
        .op(name)
        .reason("panic");
        if let Some(conn) = self.conns.get(&id) {
            event = event.domid(conn.domid());
        }
        self.log.notable(event);
    }

    /// Checks the table's rules, settles the transaction `call` runs in
    /// (`tx_open`: the header's tx_id names one of the connection's), then
    /// runs the handler.
    fn execute(
        &mut self,
        call: &mut Call,
        tx_open: bool,
        payload: &[u8],
        reply: &mut Vec<u8>,
    ) -> Result<Done, Fail> {
        #[cfg(test)]
        if payload == super::tests::INJECT_PANIC {
            panic!("injected by a test");
        }
        let op = MsgType::from_u32(call.header.ty)
            .and_then(op)
            .ok_or(Fail::new(XsError::Enosys, Reason::Type))?;
        if op.sender == Sender::Privileged && !call.who.privileged {
            return Err(Fail::new(XsError::Eacces, Reason::PermPrivileged));
        }
        call.tx = if op.tx == Tx::Ignored || call.header.tx_id == 0 {
            None
        } else if tx_open {
            Some(call.header.tx_id)
        } else {
            return Err(Fail::new(XsError::Enoent, Reason::TxUnknown));
        };
        let call = &*call;
        match op.handler {
            Handler::Ack(run) => run(self, call, payload).map(|()| Done::Ack),
            Handler::Data(run) => run(self, call, payload, reply).map(|()| Done::Reply),
            Handler::Own(run) => run(self, call, payload).map(|()| Done::Replied),
        }
    }
}
