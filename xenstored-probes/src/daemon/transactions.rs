//! Handlers of TRANSACTION_START and TRANSACTION_END, and the tree a
//! request sees: the store, or its transaction's view of it.

use super::{Call, Daemon};
use crate::error::Fail;
use crate::probes::{self, TxOutcome};
use crate::quota::{Kind, Quotas};
use crate::request;
use crate::tree::Tree;
use crate::wire::XsError;
use std::io::Write;

/// Why a request or commit failed on the transaction-nodes quota.
const TX_NODES_QUOTA: &str = "quota:transaction-nodes";

/// Replies with the new transaction's id.
pub(super) fn start(
    d: &mut Daemon,
    call: &Call,
    _: &[u8],
    reply: &mut Vec<u8>,
) -> Result<(), Fail> {
    if call.tx.is_some() {
        return Err(Fail(XsError::Ebusy, "tx:nested"));
    }
    let quota = d.quotas.get(Kind::Transactions, call.who.domid) as usize;
    let conn = d.caller(call)?;
    if !call.who.privileged && conn.transactions.len() >= quota {
        return Err(Fail(XsError::Enospc, "quota:transactions"));
    }
    let tx_id = conn.alloc_tx_id();
    conn.transactions.insert(tx_id, Default::default());
    // upstream stamps each transaction with a generation
    d.store.next_generation();
    write!(reply, "{tx_id}\0").expect("writing to a Vec");
    Ok(())
}

/// Commits (watches fire for what it changed) or aborts.
pub(super) fn end(d: &mut Daemon, call: &Call, p: &[u8]) -> Result<(), Fail> {
    let commit = request::transaction_end(p)?;
    let tx_id = call.tx.ok_or(Fail(XsError::Enoent, "tx:none"))?;
    let conn = d.caller(call)?;
    let who = conn.who();
    let t = conn
        .transactions
        .remove(&tx_id)
        .ok_or(Fail(XsError::Enoent, "tx:unknown"))?;
    if !commit {
        probes::tx_end(call.serial, &who, tx_id, TxOutcome::Abort, "");
        return Ok(());
    }
    if t.failed {
        probes::tx_end(
            call.serial,
            &who,
            tx_id,
            TxOutcome::Conflict,
            TX_NODES_QUOTA,
        );
        return Err(Fail(XsError::Enomem, TX_NODES_QUOTA));
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
            Err(Fail(XsError::Eagain, "tx:conflict"))
        }
    }
}

impl Daemon {
    /// Runs `f` on the tree `call` sees: the store, or its transaction's
    /// view of it.
    pub(super) fn tree<R>(
        &mut self,
        call: &Call,
        f: impl FnOnce(&mut dyn Tree, &Quotas) -> Result<R, Fail>,
    ) -> Result<R, Fail> {
        let Some(t) = call.tx else {
            return f(&mut self.store, &self.quotas);
        };
        let limit = if call.who.privileged {
            usize::MAX
        } else {
            self.quotas.get(Kind::TransactionNodes, call.who.domid) as usize
        };
        let tx = self
            .conns
            .get_mut(&call.conn)
            .and_then(|c| c.transactions.get_mut(&t))
            .ok_or(Fail(XsError::Enoent, "tx:unknown"))?;
        let mut view = tx.view_limited(&self.store, limit, call.who.domid);
        let result = f(&mut view, &self.quotas);
        if view.refused() {
            tx.failed = true;
            return Err(Fail(XsError::Enospc, TX_NODES_QUOTA));
        }
        result
    }
}
