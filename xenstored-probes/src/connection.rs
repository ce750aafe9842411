//! One client connection, all of its state in one place: who it is, its
//! watches and transactions, its transport, the bytes read from it and not
//! yet executed, and the output queued for it. The daemon owns every
//! connection; the event loop (server.rs) moves bytes through them when
//! their transports are ready.

use crate::frame::{self, InBuf};
use crate::perms::Identity;
use crate::probes::{self, TxOutcome, Who};
use crate::transaction::Transaction;
use crate::transport::Transport;
use crate::watch::{Watch, Watches};
use std::collections::BTreeMap;
use std::io;

/// A connection with this much unsent output is not read from until it
/// has drained to a quarter of it (it is not reading its replies).
const OUT_THROTTLE: usize = 1 << 20;
/// A connection this far behind is dropped rather than grow without bound.
const OUT_LIMIT: usize = 64 << 20;

pub struct Connection {
    pub id: u32,
    pub domid: u32,
    pub pid: u32,
    pub ident: Identity,
    pub watches: Watches,
    /// Open transactions by id (ordered: teardown reports them in order).
    pub transactions: BTreeMap<u32, Transaction>,
    next_tx: u32,
    transport: Box<dyn Transport>,
    input: InBuf,
    out: Vec<u8>,
    sent: usize,
    /// Not read from until its output drains (see OUT_THROTTLE).
    throttled: bool,
    /// Queued output not yet reported to the event loop.
    pub dirty: bool,
}

/// What one read from the transport brought.
pub enum Received {
    /// Bytes; `drained`: nothing more is waiting (see
    /// `Transport::short_read_drains`).
    Bytes { drained: bool },
    /// The peer is gone.
    End,
}

impl Connection {
    pub fn new(
        id: u32,
        domid: u32,
        privileged: bool,
        target: Option<u32>,
        transport: Box<dyn Transport>,
    ) -> Connection {
        Connection {
            id,
            domid,
            pid: transport.pid(),
            ident: Identity {
                domid,
                privileged,
                target,
            },
            watches: Watches::default(),
            transactions: BTreeMap::new(),
            next_tx: 1,
            transport,
            input: InBuf::default(),
            out: Vec::new(),
            sent: 0,
            throttled: false,
            dirty: false,
        }
    }

    /// The transport, to describe (its kind and peer).
    pub fn transport(&self) -> &dyn Transport {
        self.transport.as_ref()
    }

    pub fn who(&self) -> Who {
        Who {
            conn: self.id,
            domid: xenstore_proto::Ident::dom_of(self.domid),
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
    pub fn watches_and_output(&mut self) -> (&[Watch], &mut Vec<u8>) {
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

    /// What the event loop polls.
    pub fn source(&mut self) -> &mut dyn mio::event::Source {
        self.transport.source()
    }

    /// The transport, the connection's state gone (closed, or to serve a
    /// fresh connection after a ring reset).
    pub fn into_transport(self) -> Box<dyn Transport> {
        self.transport
    }

    /// True when the end of this connection's input means its domain died
    /// unreleased (see `Transport::eof_means_domain_gone`).
    pub fn end_means_domain_gone(&self) -> bool {
        self.transport.eof_means_domain_gone()
    }

    /// Reads once from the transport into the input buffer.
    pub fn receive(&mut self) -> io::Result<Received> {
        let transport = &mut self.transport;
        let mut offered = 0;
        let n = self.input.fill(|buf| {
            offered = buf.len();
            transport.read(buf)
        })?;
        if n == 0 {
            return Ok(Received::End);
        }
        let drained = n < offered && transport.short_read_drains();
        Ok(Received::Bytes { drained })
    }

    /// The input buffer, to execute its messages while the daemon is
    /// borrowed whole; a placeholder (no allocation) holds its place until
    /// `restore_input`.
    pub fn take_input(&mut self) -> InBuf {
        std::mem::replace(&mut self.input, InBuf::placeholder())
    }

    pub fn restore_input(&mut self, input: InBuf) {
        self.input = input;
    }

    /// True while it is not read from (its output is backed up).
    pub fn throttled(&self) -> bool {
        self.throttled
    }

    /// Stops reading from it when its output is backed up; true if so.
    pub fn throttle_if_backed_up(&mut self) -> bool {
        self.throttled = self.pending().len() >= OUT_THROTTLE;
        self.throttled
    }

    /// Writes queued output as far as the transport takes it now. Ok(true)
    /// when it was throttled and may be read from again; Err(reason) when
    /// it must be closed (a write failed, or it is too far behind).
    pub fn flush(&mut self) -> Result<bool, String> {
        while !self.pending().is_empty() {
            match self.transport.write(&self.out[self.sent..]) {
                Ok(0) => return Err("write returned 0".to_string()),
                Ok(n) => self.consumed(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(format!("write error: {e}")),
            }
        }
        let backlog = self.pending().len();
        if backlog > OUT_LIMIT {
            return Err("output backlog over limit".to_string());
        }
        if self.throttled && backlog <= OUT_THROTTLE / 4 {
            self.throttled = false;
            return Ok(true);
        }
        Ok(false)
    }
}
