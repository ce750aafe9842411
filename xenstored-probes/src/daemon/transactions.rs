//! Handlers of TRANSACTION_START and TRANSACTION_END, and the tree a
//! request sees: the store, or its transaction's view of it.

use super::{conns_memory, Call, Daemon};
use crate::daemon::quota::{Kind, Quotas};
use crate::probes::{self, TxOutcome};
use crate::store::transaction::Transaction;
use crate::store::tree::{Tree, MEMORY_QUOTA};
use crate::wire::error::{Fail, Reason};
use crate::wire::request;
use crate::wire::XsError;
use std::io::Write;

/// Replies with the new transaction's id.
pub(super) fn start(
    d: &mut Daemon,
    call: &Call,
    _: &[u8],
    reply: &mut Vec<u8>,
) -> Result<(), Fail> {
    if call.tx.is_some() {
        return Err(Fail::new(XsError::Ebusy, Reason::TxNested));
    }
    let quota = d.quotas.get(Kind::Transactions, call.who.domid) as usize;
    if !call.who.privileged && d.caller(call)?.transactions.len() >= quota {
        return Err(Fail::new(XsError::Enospc, Reason::QuotaTransactions));
    }
    // upstream stamps each transaction with a generation
    let generation = d.store.next_generation();
    let conn = d.caller(call)?;
    let tx_id = conn.alloc_tx_id();
    conn.transactions
        .insert(tx_id, Transaction::stamped(generation));
    write!(reply, "{tx_id}\0").expect("writing to a Vec");
    Ok(())
}

/// Commits (watches fire for what it changed) or aborts.
pub(super) fn end(d: &mut Daemon, call: &Call, p: &[u8]) -> Result<(), Fail> {
    let commit = request::transaction_end(p)?;
    let tx_id = call.tx.ok_or(Fail::new(XsError::Enoent, Reason::TxNone))?;
    let conn = d.caller(call)?;
    let who = conn.who();
    let t = conn
        .transactions
        .remove(&tx_id)
        .ok_or(Fail::new(XsError::Enoent, Reason::TxUnknown))?;
    if !commit {
        probes::tx_end(call.serial, &who, tx_id, TxOutcome::Abort, "");
        return Ok(());
    }
    if let Some(reason) = t.failed {
        probes::tx_end(call.serial, &who, tx_id, TxOutcome::Conflict, reason.name());
        return Err(Fail::new(XsError::Enomem, reason));
    }
    match t.commit(&mut d.store) {
        Ok(changes) => {
            probes::tx_end(call.serial, &who, tx_id, TxOutcome::Commit, "");
            for c in &changes {
                d.fire(call.serial, call.conn, c);
            }
            Ok(())
        }
        Err(conflict) => {
            probes::tx_end(call.serial, &who, tx_id, TxOutcome::Conflict, &conflict.0);
            Err(Fail::new(XsError::Eagain, Reason::TxConflict))
        }
    }
}

impl Daemon {
    /// Runs `f` on the tree `call` sees: the store, or its transaction's
    /// view of it. `f` also gets the quotas and, for the memory quota, how
    /// many bytes of nodes a domain may reach (`Limits::memory`).
    pub(super) fn tree<R>(
        &mut self,
        call: &Call,
        f: impl FnOnce(&mut dyn Tree, &Quotas, &dyn Fn(u32) -> Option<usize>) -> Result<R, Fail>,
    ) -> Result<R, Fail> {
        let Some(t) = call.tx else {
            let (conns, conns_of) = (&self.conns, &self.conns_of);
            let besides = |domid| conns_memory(conns, conns_of, domid);
            let allowance = |domid| memory_allowance(&self.quotas, domid, besides);
            return f(&mut self.store, &self.quotas, &allowance);
        };
        let limit = if call.who.privileged {
            usize::MAX
        } else {
            self.quotas.get(Kind::TransactionNodes, call.who.domid) as usize
        };
        // A transaction's copies are charged to its owner, the caller.
        // dom0 has no memory quota: its use is not summed (that would be
        // a walk over all of dom0's connections for every request).
        let caller = call.who.domid;
        let outside = if caller == 0 {
            0
        } else {
            self.memory_outside(call)
        };
        let besides = |domid: u32| if domid == caller { outside } else { 0 };
        let allowance = |domid| memory_allowance(&self.quotas, domid, besides);
        let tx = self
            .conns
            .get_mut(&call.conn)
            .and_then(|c| c.transactions.get_mut(&t))
            .ok_or(Fail::new(XsError::Enoent, Reason::TxUnknown))?;
        let mut view = tx.view_limited(&self.store, limit, caller);
        let result = f(&mut view, &self.quotas, &allowance);
        if view.refused() {
            tx.failed = Some(Reason::QuotaTransactionNodes);
            return Err(Fail::new(XsError::Enospc, Reason::QuotaTransactionNodes));
        }
        if result.as_ref().is_err_and(|e| *e == MEMORY_QUOTA) {
            // C xenstored fails the transaction it cannot revert
            tx.failed = MEMORY_QUOTA.1;
        }
        result
    }
}

/// How many bytes of nodes `domid` may reach: its memory quota less what
/// it uses `besides` them; None for dom0, which has no quota.
fn memory_allowance(q: &Quotas, domid: u32, besides: impl Fn(u32) -> usize) -> Option<usize> {
    if domid == 0 {
        return None;
    }
    Some((q.get(Kind::Memory, domid) as usize).saturating_sub(besides(domid)))
}
