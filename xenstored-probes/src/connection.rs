//! One client connection as the daemon sees it: who it is, its watches and
//! transactions, and the output queued for it.

use crate::frame;
use crate::perms::Identity;
use crate::probes::{self, TxOutcome, Who};
use crate::transaction::Transaction;
use crate::watch::Watches;
use std::collections::BTreeMap;

pub struct Connection {
    pub id: u32,
    pub domid: u32,
    pub pid: u32,
    pub ident: Identity,
    pub watches: Watches,
    /// Open transactions by id (ordered: teardown reports them in order).
    pub transactions: BTreeMap<u32, Transaction>,
    next_tx: u32,
    out: Vec<u8>,
    sent: usize,
    /// Queued output not yet reported to the event loop.
    pub dirty: bool,
}

impl Connection {
    pub fn new(id: u32, domid: u32, pid: u32, privileged: bool, target: Option<u32>) -> Connection {
        Connection {
            id,
            domid,
            pid,
            ident: Identity {
                domid,
                privileged,
                target,
            },
            watches: Watches::default(),
            transactions: BTreeMap::new(),
            next_tx: 1,
            out: Vec::new(),
            sent: 0,
            dirty: false,
        }
    }

    pub fn who(&self) -> Who {
        Who {
            conn: self.id,
            domid: self.domid as u16,
            pid: self.pid,
        }
    }

    /// C xenstored's per-connection ids: counting up from 1, skipping 0
    /// and ids still in use.
    pub fn alloc_tx_id(&mut self) -> u32 {
        let id = self.next_tx;
        loop {
            self.next_tx = self.next_tx.wrapping_add(1);
            if self.next_tx != 0 && !self.transactions.contains_key(&self.next_tx) {
                break;
            }
        }
        id
    }

    /// Ends every open transaction (tx_end "dropped", in id order):
    /// the connection closed, or reset its watches and transactions.
    pub fn drop_transactions(&mut self, serial: u64, reason: &str) {
        let who = self.who();
        for tx_id in std::mem::take(&mut self.transactions).into_keys() {
            probes::tx_end(serial, &who, tx_id, TxOutcome::Dropped, reason);
        }
    }

    /// The watches and the output queue at once, to queue their events.
    pub fn watches_and_output(&mut self) -> (&[crate::watch::Watch], &mut Vec<u8>) {
        (&self.watches.0, &mut self.out)
    }

    pub fn queue(&mut self, ty: u32, req_id: u32, tx_id: u32, parts: &[&[u8]]) {
        frame::encode(&mut self.out, ty, req_id, tx_id, parts);
    }

    /// Output waiting to be written.
    pub fn pending(&self) -> &[u8] {
        &self.out[self.sent..]
    }

    /// `n` bytes of `pending()` were written.
    pub fn consumed(&mut self, n: usize) {
        self.sent += n;
        if self.sent == self.out.len() {
            self.out.clear();
            self.sent = 0;
        } else if self.sent > 1 << 20 {
            self.out.drain(..self.sent);
            self.sent = 0;
        }
    }
}
