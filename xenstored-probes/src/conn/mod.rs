//! One client connection: who it is, its transactions, its transport, the
//! bytes read from it and not yet executed, and the output queued for it.
//! The daemon owns every connection (and, in watch/'s table, their
//! watches); the event loop (server/) moves bytes through them when
//! their transports are ready.

pub(crate) mod outstanding;
pub(crate) mod poller;
pub mod ring;
pub(crate) mod table;
pub mod transport;
pub mod unix;

use crate::conn::outstanding::Ticket;
use crate::conn::poller::Readiness;
use crate::conn::transport::Transport;
use crate::probes::{self, TxOutcome, Who};
use crate::store::perms::Identity;
use crate::store::transaction::Transaction;
use crate::watch::WatchUsage;
use crate::wire::frame::{self, InBuf};
use crate::wire::{Header, HEADER_LEN};
use mio::Interest;
use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::os::fd::RawFd;
use std::rc::Rc;

/// A connection with this much unsent output is not read from until it
/// has drained to a quarter of it (it is not reading its replies).
const OUT_THROTTLE: usize = 1 << 20;
/// A connection this far behind is dropped rather than grow without bound.
const OUT_LIMIT: usize = 64 << 20;

/// Laid out by use, each group in a cache line of its own: among a
/// thousand connections the one an event goes to is cold, and the layout
/// the compiler chose spread what queueing and writing an event read over
/// three lines (callgrind, S2 spread at N=1000). The first line is what
/// queueing an event to a dom0 client, writing it to its socket and
/// polling that socket again read (who it is, the output queue, the
/// socket); the second what an event to a domain reads besides (its
/// memory quota, its ring's transport); the rest is read when the
/// connection itself sends a request.
#[repr(C, align(64))]
pub struct Connection {
    pub id: u32,
    pub pid: u32,
    pub ident: Identity,
    /// The transport's `write_fd`, or -1: written to here, without reaching
    /// the transport.
    write_fd: RawFd,
    /// Bytes of `out` written (at most a MiB and one write: see `consumed`).
    sent: u32,
    /// Output queued; no buffer at all while nothing waits (`SpareOutput`).
    out: Vec<u8>,
    /// Queued output not yet reported to the event loop.
    pub dirty: bool,
    /// Not read from until its output drains (see OUT_THROTTLE): the flush
    /// that drains it tells the event loop, which queues it again.
    throttled: bool,
    /// What the event loop polls it for now (see `interest`).
    pub polled: Option<Interest>,
    /// `charges` is not empty: kept here because `charges` is on line 3,
    /// which writing to a client without charges never reads.
    charged: bool,
    /// The transport's `readiness_names_direction`.
    names_direction: bool,

    transport: Box<dyn Transport>,
    /// Its watches' count and bytes (the watches live in `watch/`'s table).
    pub watches: WatchUsage,
    /// Open transactions by id (ordered: teardown reports them in order).
    pub transactions: BTreeMap<u32, Transaction>,
    next_tx: u32,
    /// The event loop saw the peer hang up: read until the end, because a
    /// short read no longer means a later edge will come.
    pub peer_closed: bool,
    /// Input may wait in the transport: the last read did not drain it, or
    /// readiness was reported since (`note_readiness`). The connection has
    /// more to serve once its buffered requests are done, whether or not
    /// its peer signals again.
    unread: bool,

    /// Outstanding requests (outstanding.rs) held until the stream has
    /// been written up to each end position.
    charges: VecDeque<(u64, Rc<Ticket>)>,
    /// Where `out[0]` lies in the stream of bytes queued, kept while
    /// `charges` holds positions in it.
    out_origin: u64,
    /// How many bytes at the head of `out` end a message whose start was
    /// drained (a MiB sent mid-message) or restored as a partial one: a
    /// live update hands on where the message in progress ends.
    out_head_partial: u32,
    input: InBuf,
}

// Each group above within its line.
const _: () = {
    use std::mem::offset_of;
    assert!(offset_of!(Connection, names_direction) < 64);
    assert!(offset_of!(Connection, transport) == 64);
    assert!(offset_of!(Connection, unread) < 128);
    assert!(offset_of!(Connection, charges) == 128);
};

/// Output buffers no connection holds: a connection has one only while
/// output waits in it and gives it back once that is written, so the next
/// connection to queue output takes one just written from, still in the
/// cache. A buffer of its own was as cold as the connection: at a thousand
/// watchers one more line missed for each event, and half the misses that
/// went past the last level (callgrind, S2 spread). Idle connections hold
/// no buffer either.
#[derive(Default)]
pub struct SpareOutput(Vec<Vec<u8>>);

impl SpareOutput {
    /// More than one request's replies and events usually hold at once.
    const BUFFERS: usize = 8;
    /// A bigger buffer (a backlog's) goes back to malloc.
    const CAPACITY_MAX: usize = 64 << 10;

    fn take(&mut self) -> Vec<u8> {
        self.0.pop().unwrap_or_default()
    }

    fn give(&mut self, mut buf: Vec<u8>) {
        if self.0.len() < Self::BUFFERS && (1..=Self::CAPACITY_MAX).contains(&buf.capacity()) {
            buf.clear();
            self.0.push(buf);
        }
    }
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
            pid: transport.pid(),
            write_fd: transport.write_fd().unwrap_or(-1),
            names_direction: transport.readiness_names_direction(),
            ident: Identity {
                domid,
                privileged,
                target,
            },
            transactions: BTreeMap::new(),
            watches: WatchUsage::default(),
            next_tx: 1,
            transport,
            input: InBuf::default(),
            out: Vec::new(),
            sent: 0,
            out_origin: 0,
            out_head_partial: 0,
            charges: VecDeque::new(),
            charged: false,
            throttled: false,
            dirty: false,
            peer_closed: false,
            polled: None,
            unread: false,
        }
    }

    /// The transport, to describe (its kind and peer).
    pub fn transport(&self) -> &dyn Transport {
        self.transport.as_ref()
    }

    /// The transport, for a live update to move its event channel.
    pub fn transport_mut(&mut self) -> &mut dyn Transport {
        self.transport.as_mut()
    }

    pub fn domid(&self) -> u32 {
        self.ident.domid
    }

    pub fn who(&self) -> Who {
        Who {
            conn: self.id,
            domid: xenstore_proto::Ident::dom_of(self.ident.domid),
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

    /// The output queue, to queue watch events on.
    pub fn output(&mut self, spare: &mut SpareOutput) -> &mut Vec<u8> {
        if self.out.capacity() == 0 {
            self.out = spare.take();
        }
        &mut self.out
    }

    pub fn queue(
        &mut self,
        spare: &mut SpareOutput,
        ty: u32,
        req_id: u32,
        tx_id: u32,
        parts: &[&[u8]],
    ) {
        frame::encode(self.output(spare), ty, req_id, tx_id, parts);
    }

    /// Keeps `ticket` until everything queued so far has been written.
    pub fn charge(&mut self, ticket: &Rc<Ticket>) {
        let end = self.out_origin + self.out.len() as u64;
        self.charges.push_back((end, ticket.clone()));
        self.charged = true;
    }

    /// What it costs its domain's memory quota besides the nodes and its
    /// watches: its transactions' node copies and its queued output, as C
    /// xenstored 4.17 accounts them.
    pub fn memory(&self) -> usize {
        let transactions: usize = self.transactions.values().map(|t| t.memory()).sum();
        transactions + self.pending().len()
    }

    /// Input received and not yet executed.
    pub fn unexecuted(&self) -> &[u8] {
        self.input.unconsumed()
    }

    /// Output waiting to be written.
    pub fn pending(&self) -> &[u8] {
        &self.out[self.sent as usize..]
    }

    /// How many bytes at the head of `pending()` end a message partly
    /// written already (0 when it starts with a whole message): what a live
    /// update's stream calls the partial response.
    pub fn pending_partial(&self) -> usize {
        self.rest_of_message(self.sent as usize)
    }

    /// The bytes from `at` in `out` to the end of the message holding it
    /// (0 at a message boundary), walking the headers queued before it.
    fn rest_of_message(&self, at: usize) -> usize {
        let mut boundary = self.out_head_partial as usize;
        while boundary < at {
            let Some(header) = self.out.get(boundary..boundary + HEADER_LEN) else {
                return 0; // never: only whole messages are queued
            };
            let header = Header::decode(header.try_into().expect("HEADER_LEN bytes"));
            boundary += HEADER_LEN + header.len as usize;
        }
        boundary - at
    }

    /// `n` bytes of `pending()` were written; a buffer left empty goes back
    /// to `spare`.
    pub fn consumed(&mut self, n: usize, spare: &mut SpareOutput) {
        self.sent += n as u32;
        let sent = self.sent as usize;
        // Without charges the origin is not needed (`charge` starts from
        // any origin): writing to a dom0 client reads no more than line 1.
        if self.charged {
            let written = self.out_origin + sent as u64;
            while self.charges.front().is_some_and(|c| c.0 <= written) {
                self.charges.pop_front();
            }
            self.charged = !self.charges.is_empty();
        }
        let moved = if sent == self.out.len() {
            spare.give(std::mem::take(&mut self.out));
            self.out_head_partial = 0;
            sent
        } else if sent > 1 << 20 {
            self.out_head_partial = self.rest_of_message(sent) as u32;
            self.out.drain(..sent);
            sent
        } else {
            return;
        };
        self.sent = 0;
        if self.charged {
            self.out_origin += moved as u64;
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

    /// What to poll it for now. A socket is polled for room to write only
    /// while output waits: otherwise every event a watcher reads would
    /// wake the daemon to poll that watcher's (at a thousand connections,
    /// cold) socket for nothing. Other transports signal both directions
    /// through one source, and are always polled for both.
    pub fn interest(&self) -> Interest {
        if self.names_direction && self.pending().is_empty() {
            Interest::READABLE
        } else {
            Interest::READABLE | Interest::WRITABLE
        }
    }

    /// Records that `event` may have brought input (see
    /// `Transport::readiness_names_direction`); true if so. The mark stays
    /// until a read drains the transport: the connection may already be
    /// queued with requests buffered, and its turns read again only once
    /// those are done, with no edge left to tell them to.
    pub fn note_readiness(&mut self, event: &Readiness) -> bool {
        let input = !self.names_direction || event.readable || event.read_closed || event.error;
        self.unread |= input;
        input
    }

    /// True when the end of this connection's input means its domain died
    /// unreleased (see `Transport::eof_means_domain_gone`).
    pub fn end_means_domain_gone(&self) -> bool {
        self.transport.eof_means_domain_gone()
    }

    /// Reads once from the transport into the input buffer.
    pub fn receive(&mut self) -> io::Result<Received> {
        self.unread = false;
        let transport = &mut self.transport;
        let mut offered = 0;
        let n = self.input.fill(|buf| {
            offered = buf.len();
            transport.read(buf)
        })?;
        if n == 0 {
            return Ok(Received::End);
        }
        // Data and the hang-up may come in one edge: after a short read the
        // end is still to be read, and no edge will announce it again.
        let drained = n < offered && transport.short_read_drains() && !self.peer_closed;
        self.unread = !drained;
        Ok(Received::Bytes { drained })
    }

    /// Whether a whole request was read and not yet executed.
    pub fn has_request(&self) -> bool {
        self.input.has_message()
    }

    /// Whether it may have more to serve: a request read and not yet
    /// executed, or input the last read left in the transport.
    pub fn may_have_more(&self) -> bool {
        self.has_request() || self.unread
    }

    /// Takes the transport's signals only (see `Transport::read_signals`).
    pub fn receive_signals(&mut self) -> io::Result<Received> {
        match self.transport.read_signals()? {
            0 => Ok(Received::End),
            _ => Ok(Received::Bytes { drained: true }),
        }
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

    /// Live update: what the previous daemon had read from this peer and
    /// not executed, and had queued for it and not sent (its first
    /// `partial` bytes the end of a message begun).
    pub fn restore_buffers(
        &mut self,
        input: &[u8],
        output: &[u8],
        partial: usize,
    ) -> Result<(), String> {
        let mut rest = input;
        while !rest.is_empty() {
            let n = self
                .input
                .fill(|buf| {
                    let n = buf.len().min(rest.len());
                    buf[..n].copy_from_slice(&rest[..n]);
                    Ok(n)
                })
                .map_err(|e| e.to_string())?;
            if n == 0 {
                return Err(format!("{} bytes of buffered input do not fit", rest.len()));
            }
            rest = &rest[n..];
        }
        if self.out.is_empty() {
            self.out_head_partial = partial as u32;
        }
        self.out.extend_from_slice(output);
        Ok(())
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
    pub fn flush(&mut self, spare: &mut SpareOutput) -> Result<bool, String> {
        while !self.pending().is_empty() {
            match self.write_pending() {
                Ok(0) => return Err("write returned 0".to_string()),
                Ok(n) => self.consumed(n, spare),
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

    /// One write of `pending()`: straight to `write_fd` when there is one.
    fn write_pending(&mut self) -> io::Result<usize> {
        let pending = &self.out[self.sent as usize..];
        if self.write_fd < 0 {
            return self.transport.write(pending);
        }
        // SAFETY: the transport owns `write_fd` and lives as long as the
        // connection; the buffer is valid for its length. MSG_NOSIGNAL: a
        // client gone is an error here, never a SIGPIPE.
        let n = unsafe {
            let buf = pending.as_ptr().cast();
            libc::send(self.write_fd, buf, pending.len(), libc::MSG_NOSIGNAL)
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::{Connection, SpareOutput};
    use crate::conn::transport::Transport;
    use crate::wire::{frame, HEADER_LEN};
    use std::io;

    /// A peer the tests write for by hand (conn/table.rs's tests too).
    pub(super) struct Quiet;

    impl Transport for Quiet {
        fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
            Err(io::ErrorKind::WouldBlock.into())
        }
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::ErrorKind::WouldBlock.into())
        }
        fn source(&mut self) -> &mut dyn mio::event::Source {
            unreachable!("no event loop here")
        }
        fn kind(&self) -> &'static str {
            "socket"
        }
        fn peer(&self) -> String {
            "test".into()
        }
        fn pid(&self) -> u32 {
            0
        }
    }

    fn queue(c: &mut Connection, spare: &mut SpareOutput, payload_len: usize) {
        frame::encode(c.output(spare), 2, 1, 0, &[&vec![b'x'; payload_len]]);
    }

    /// A live update hands on where the message a peer has part of ends:
    /// mid-message after a partial write, after a MiB sent was dropped from
    /// the buffer's head, and after a restore that began with a partial one.
    #[test]
    fn the_partial_message_is_known_wherever_writing_stopped() {
        let mut spare = SpareOutput::default();
        let mut c = Connection::new(1, 0, true, None, Box::new(Quiet));
        queue(&mut c, &mut spare, 10);
        queue(&mut c, &mut spare, 3000);
        assert_eq!(c.pending_partial(), 0);
        c.consumed(5, &mut spare);
        assert_eq!(c.pending_partial(), HEADER_LEN + 10 - 5);
        c.consumed(HEADER_LEN + 10 - 5, &mut spare);
        assert_eq!(c.pending_partial(), 0);
        c.consumed(100, &mut spare);
        assert_eq!(c.pending_partial(), HEADER_LEN + 3000 - 100);

        // Past a MiB sent, the sent part leaves the buffer mid-message.
        let mut c = Connection::new(2, 0, true, None, Box::new(Quiet));
        for _ in 0..300 {
            queue(&mut c, &mut spare, 4000);
        }
        let message = HEADER_LEN + 4000;
        let sent = (1 << 20) + 7;
        c.consumed(sent, &mut spare);
        assert!(c.pending().len() < 300 * message - sent + 1, "not drained");
        assert_eq!(c.pending_partial(), message - sent % message);
        c.consumed(message - sent % message + 3, &mut spare);
        assert_eq!(c.pending_partial(), message - 3);

        // Restored with the end of a message first.
        let mut c = Connection::new(3, 0, true, None, Box::new(Quiet));
        let mut output = vec![b'y'; 9];
        frame::encode(&mut output, 2, 1, 0, &[b"ok\0"]);
        c.restore_buffers(&[], &output, 9).unwrap();
        assert_eq!(c.pending_partial(), 9);
        c.consumed(4, &mut spare);
        assert_eq!(c.pending_partial(), 5);
        c.consumed(5, &mut spare);
        assert_eq!(c.pending_partial(), 0);
    }

    /// What waits between connections is bounded: an empty buffer or a
    /// backlog's big one is not kept, nor more than `BUFFERS`; what is
    /// kept comes back empty, its capacity with it.
    #[test]
    fn spare_output_keeps_a_few_small_buffers() {
        let mut spare = SpareOutput::default();
        spare.give(Vec::new());
        spare.give(Vec::with_capacity(SpareOutput::CAPACITY_MAX + 1));
        assert!(spare.0.is_empty());
        for _ in 0..2 * SpareOutput::BUFFERS {
            spare.give(vec![7; 100]);
        }
        assert_eq!(spare.0.len(), SpareOutput::BUFFERS);
        let taken = spare.take();
        assert!(taken.is_empty() && taken.capacity() >= 100);
    }
}
