//! The simulation's clients: dom0 tools on stream sockets and guests on
//! their rings, each running a script of requests with several in flight,
//! cutting its bytes where the schedule says, reading when it says (or not
//! for a while), sometimes hanging up mid-burst. Each checks what it
//! receives as it arrives: every reply answers its next unanswered
//! request, once, in order.

use super::choice::Choice;
use super::net::Net;
use crate::conn::ring::{Field, Interface, REQUESTS, RESPONSES, RING_SIZE};
use xenstore_proto::wire::{Header, MsgType, HEADER_LEN};

/// The path under which fan-out watchers watch: every write below it is an
/// event to each of them.
pub const FAN: &str = "/sim/fan";
/// What transactions on different connections fight over.
pub const SHARED: &str = "/sim/shared";

#[derive(Clone, Debug)]
pub enum Op {
    /// A request whose reply depends only on the client's own requests
    /// (`loose`: on what others did too, so only its kind is compared).
    Plain {
        ty: MsgType,
        payload: Vec<u8>,
        loose: bool,
    },
    TxStart,
    /// A request in the open transaction (its id from TxStart's reply).
    InTx {
        ty: MsgType,
        payload: Vec<u8>,
    },
    TxEnd,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Introduces the guests (dom0).
    Setup,
    /// Watches FAN and reads (dom0).
    Watcher,
    /// Runs a script of requests (dom0).
    Worker,
    /// A guest on its ring.
    Guest { domid: u32 },
}

/// One request sent.
pub struct Sent {
    pub req_id: u32,
    pub ty: u32,
    /// Where its bytes end in `Client::outbox`.
    pub end: usize,
    pub loose: bool,
    /// The pass its last byte reached the daemon (a ring: its doorbell
    /// rang after).
    pub delivered: Option<u64>,
    /// For a write under FAN: the path its event names.
    pub fan_path: Option<Vec<u8>>,
}

pub struct Client {
    pub role: Role,
    /// Its socket or ring endpoint, once connected.
    pub endpoint: Option<usize>,
    pub ops: Vec<Op>,
    pub next_op: usize,
    /// The bytes of every request issued so far.
    pub outbox: Vec<u8>,
    /// How much of `outbox` reached the daemon.
    pub written: usize,
    pub sent: Vec<Sent>,
    /// Replies received (they answer `sent[..answered]`).
    pub answered: usize,
    /// Requests it keeps in flight at most.
    pub in_flight: usize,
    /// Bytes received, not yet a whole message.
    pub inbox: Vec<u8>,
    /// Replies and its own watches' events, in arrival order: (header,
    /// payload).
    pub received: Vec<(Header, Vec<u8>)>,
    /// Paths of FAN events received.
    pub fan_events: Vec<Vec<u8>>,
    pub reading: bool,
    pub closed: bool,
    pub tx: Option<u32>,
    /// Passes in a row the daemon owed it a reply (`check::owes_reply`).
    pub owed: u64,
    /// The most such passes a run saw.
    pub slowest: u64,
    /// FAN writes answered, for the driver's check that their events were
    /// queued first: (index in `sent`).
    pub fan_answered: Vec<usize>,
    /// A guest's end of its ring, once introduced.
    pub ring: Option<Interface>,
    /// A guest wrote requests and has not rung since.
    owes_bell: bool,
    /// A guest found its request queue full: it waits for a signal.
    ring_blocked: bool,
    /// The socket buffer its endpoint gets.
    pub capacity: usize,
    pub violations: Vec<String>,
    pub name: String,
}

impl Client {
    pub fn new(
        name: String,
        role: Role,
        ops: Vec<Op>,
        in_flight: usize,
        capacity: usize,
    ) -> Client {
        Client {
            role,
            endpoint: None,
            ops,
            next_op: 0,
            outbox: Vec::new(),
            written: 0,
            sent: Vec::new(),
            answered: 0,
            in_flight,
            inbox: Vec::new(),
            received: Vec::new(),
            fan_events: Vec::new(),
            reading: true,
            closed: false,
            tx: None,
            owed: 0,
            slowest: 0,
            fan_answered: Vec::new(),
            ring: None,
            owes_bell: false,
            ring_blocked: false,
            capacity,
            violations: Vec::new(),
            name,
        }
    }

    /// All its requests issued and answered (or it hung up).
    pub fn done(&self) -> bool {
        self.closed || (self.next_op == self.ops.len() && self.answered == self.sent.len())
    }

    /// Where it stands, for a run that did not settle.
    pub fn describe(&self, net: &Net) -> String {
        let socket = self.endpoint.map(|ep| {
            let e = &net.endpoints[ep];
            (
                e.to_daemon.len(),
                e.to_client.len(),
                e.signals,
                e.to_guest_signals,
            )
        });
        format!(
            "{}: op {} of {}, {} sent, {} answered, {} of {} bytes written, reading {}, \
             (to daemon, to client, signals, to guest) {socket:?}, ring blocked {}, owes bell {}",
            self.name,
            self.next_op,
            self.ops.len(),
            self.sent.len(),
            self.answered,
            self.written,
            self.outbox.len(),
            self.reading,
            self.ring_blocked,
            self.owes_bell
        )
    }

    /// Requests whose bytes reached the daemon and that are not answered.
    pub fn waiting(&self) -> impl Iterator<Item = &Sent> {
        self.sent[self.answered..]
            .iter()
            .filter(|s| s.delivered.is_some())
    }

    /// Encodes the next ops its pipeline has room for.
    fn issue(&mut self) {
        while self.next_op < self.ops.len() && self.sent.len() - self.answered < self.in_flight {
            let req_id = self.sent.len() as u32 + 1;
            let (ty, tx_id, payload, loose) = match &self.ops[self.next_op] {
                Op::Plain { ty, payload, loose } => (*ty, 0, payload.clone(), *loose),
                Op::TxStart if self.tx.is_none() && self.answered == self.sent.len() => {
                    (MsgType::TransactionStart, 0, b"\0".to_vec(), true)
                }
                Op::InTx { ty, payload } if self.tx.is_some() => {
                    (*ty, self.tx.unwrap_or(0), payload.clone(), true)
                }
                Op::TxEnd if self.tx.is_some() => {
                    let tx = self.tx.take().unwrap_or(0);
                    (MsgType::TransactionEnd, tx, b"T\0".to_vec(), true)
                }
                // Waiting for TxStart's reply.
                _ => return,
            };
            let fan_path = (ty == MsgType::Write && payload.starts_with(FAN.as_bytes()))
                .then(|| path_field(&payload));
            crate::wire::frame::encode(&mut self.outbox, ty as u32, req_id, tx_id, &[&payload]);
            self.sent.push(Sent {
                req_id,
                ty: ty as u32,
                end: self.outbox.len(),
                loose,
                delivered: None,
                fan_path,
            });
            self.next_op += 1;
        }
    }

    /// One action, as the schedule picks: send some bytes, read some, stop
    /// or resume reading, hang up.
    pub fn act(&mut self, net: &mut Net, choice: &mut Choice, pass: u64) {
        let Some(ep) = self.endpoint else {
            return;
        };
        if self.closed {
            return;
        }
        self.issue();
        if let Role::Guest { .. } = self.role {
            return self.act_on_ring(net, choice, pass, ep);
        }
        match choice.below(10) {
            0..=4 => self.send(net, choice, pass, ep),
            5..=7 => self.receive(net, choice, ep),
            // Stops reading now and then (its socket fills, the daemon's
            // writes block); resumes at its next such turn.
            8 => self.reading = !self.reading || choice.percent(70),
            _ => {
                // Hang up mid-burst, now and then (never the setup's or a
                // watcher's connection: the rest of the run needs them).
                if self.role == Role::Worker && choice.percent(2) {
                    net.client_close(ep);
                    self.closed = true;
                }
            }
        }
    }

    /// Reads everything that waits for it (a guest: on a signal).
    pub fn drain(&mut self, net: &mut Net, choice: &mut Choice, pass: u64) {
        self.reading = true;
        match (self.endpoint, self.role, self.closed) {
            (Some(ep), Role::Guest { .. }, false) => self.act_on_ring(net, choice, pass, ep),
            (Some(ep), _, false) => {
                let bytes = net.client_recv(ep, usize::MAX);
                self.take(&bytes, net);
            }
            _ => {}
        }
    }

    /// Sends part of what is issued and unsent, cut where the schedule says:
    /// one byte, mid-header, mid-payload, to the end of a message, or all.
    fn send(&mut self, net: &mut Net, choice: &mut Choice, pass: u64, ep: usize) {
        let unsent = self.outbox.len() - self.written;
        if unsent == 0 {
            return;
        }
        let n = self.cut(choice, unsent);
        net.client_send(ep, &self.outbox[self.written..self.written + n]);
        self.written += n;
        self.mark_delivered(pass, self.written);
    }

    fn cut(&self, choice: &mut Choice, unsent: usize) -> usize {
        let to_message_end = self
            .sent
            .iter()
            .map(|s| s.end.saturating_sub(self.written))
            .find(|&n| n > 0 && n <= unsent)
            .unwrap_or(unsent);
        let n = match choice.below(5) {
            0 => 1,
            1 => choice.between(1, HEADER_LEN as u64 - 1) as usize,
            2 => HEADER_LEN + 1,
            3 => to_message_end,
            _ => unsent,
        };
        n.min(unsent)
    }

    fn mark_delivered(&mut self, pass: u64, upto: usize) {
        for s in &mut self.sent[self.answered..] {
            if s.end <= upto && s.delivered.is_none() {
                s.delivered = Some(pass);
            }
        }
    }

    fn receive(&mut self, net: &mut Net, choice: &mut Choice, ep: usize) {
        if !self.reading {
            return;
        }
        let most = if choice.percent(30) {
            choice.between(1, 64) as usize
        } else {
            1 << 16
        };
        let bytes = net.client_recv(ep, most);
        self.take(&bytes, net);
    }

    /// Parses what arrived and checks each reply against its request.
    fn take(&mut self, bytes: &[u8], net: &mut Net) {
        self.inbox.extend_from_slice(bytes);
        let mut at = 0;
        while self.inbox.len() - at >= HEADER_LEN {
            let header = Header::decode(self.inbox[at..at + HEADER_LEN].try_into().unwrap());
            let end = at + HEADER_LEN + header.len as usize;
            if self.inbox.len() < end {
                break;
            }
            let payload = self.inbox[at + HEADER_LEN..end].to_vec();
            at = end;
            self.take_message(header, payload, net);
        }
        self.inbox.drain(..at);
    }

    fn take_message(&mut self, header: Header, payload: Vec<u8>, net: &mut Net) {
        if header.ty == MsgType::WatchEvent as u32 {
            if payload.starts_with(FAN.as_bytes()) {
                self.fan_events.push(path_field(&payload));
            } else {
                self.received.push((header, payload));
            }
            return;
        }
        let Some(s) = self.sent.get(self.answered) else {
            self.violations.push(format!(
                "{}: a reply (type {}, req_id {}) to no request",
                self.name, header.ty, header.req_id
            ));
            return;
        };
        if header.req_id != s.req_id {
            self.violations.push(format!(
                "{}: reply to req_id {} when {} was next (replies out of order or twice)",
                self.name, header.req_id, s.req_id
            ));
            return;
        }
        if header.ty != s.ty && header.ty != MsgType::Error as u32 {
            self.violations.push(format!(
                "{}: request {} (type {}) answered with type {}",
                self.name, s.req_id, s.ty, header.ty
            ));
        }
        // (A ring is read whenever the daemon looks, doorbell or not.)
        let on_ring = matches!(self.role, Role::Guest { .. });
        if s.delivered.is_none() && !on_ring {
            self.violations.push(format!(
                "{}: request {} answered before all its bytes were sent",
                self.name, s.req_id
            ));
        }
        self.owed = 0;
        if s.ty == MsgType::TransactionEnd as u32 && payload.starts_with(b"EAGAIN") {
            net.tally.conflicts += 1;
        }
        if header.ty == MsgType::TransactionStart as u32 {
            let id = String::from_utf8_lossy(&payload);
            self.tx = id.trim_end_matches('\0').parse().ok();
        }
        if s.fan_path.is_some() && header.ty == MsgType::Write as u32 {
            self.fan_answered.push(self.answered);
        }
        self.answered += 1;
        self.received.push((header, payload));
    }

    /// A guest: wakes on the daemon's signals (never reads without one, as
    /// a guest waiting in its event channel), writes requests into its ring
    /// and rings now or later: several requests a doorbell.
    fn act_on_ring(&mut self, net: &mut Net, choice: &mut Choice, pass: u64, ep: usize) {
        let Some(ring) = self.ring.as_ref() else {
            return;
        };
        let signalled = std::mem::take(&mut net.endpoints[ep].to_guest_signals) > 0;
        if signalled {
            self.ring_blocked = false;
            // Responses: a full queue read from is rung (Linux's xenbus).
            let full = ring
                .load(Field::RspProd)
                .wrapping_sub(ring.load(Field::RspCons))
                == RING_SIZE;
            let mut buf = vec![0u8; choice.between(1, RING_SIZE as u64) as usize];
            let n = ring.consume(RESPONSES, &mut buf).unwrap_or_else(|e| {
                self.violations
                    .push(format!("{}: its ring broke: {e}", self.name));
                0
            });
            if full && n > 0 {
                net.ring_daemon(ep);
            }
            self.take(&buf[..n], net);
            // Whatever it did not read it reads on its next wake-up, which
            // it owes itself: the daemon rings only for new responses.
            if n > 0 && self.ring.as_ref().is_some_and(responses_wait) {
                net.endpoints[ep].to_guest_signals += 1;
            }
        }
        let Some(ring) = self.ring.as_ref() else {
            return;
        };
        let unsent = self.outbox.len() - self.written;
        if unsent > 0 && !self.ring_blocked {
            let n = self.cut(choice, unsent);
            let put = ring
                .produce(REQUESTS, &self.outbox[self.written..self.written + n])
                .unwrap_or_else(|e| {
                    self.violations
                        .push(format!("{}: its ring broke: {e}", self.name));
                    0
                });
            self.written += put;
            self.owes_bell |= put > 0;
            if put < n {
                // Full: it rings, then waits for the daemon's signal.
                self.ring_blocked = true;
                net.tally.full_rings += 1;
            }
        }
        let idle = self.outbox.len() == self.written || self.ring_blocked;
        if self.owes_bell && (idle || choice.percent(40)) {
            net.ring_daemon(ep);
            self.owes_bell = false;
            self.mark_delivered(pass, self.written);
        }
    }
}

fn responses_wait(ring: &Interface) -> bool {
    ring.load(Field::RspProd) != ring.load(Field::RspCons)
}

/// A payload's first field with its NUL: a write's path, an event's path.
fn path_field(payload: &[u8]) -> Vec<u8> {
    let end = payload
        .iter()
        .position(|&b| b == 0)
        .map_or(payload.len(), |i| i + 1);
    payload[..end].to_vec()
}
