//! The xenstore shared-memory ring (docs/misc/xenstore-ring.txt; xs_wire.h
//! `struct xenstore_domain_interface`): one 4 KiB page holding a 1024-byte
//! request queue (guest -> server), a 1024-byte response queue (server ->
//! guest), their free-running u32 indices, and three signalling words.
//!
//! The page's layout and its queues are xenstore-proto's `ring` (shared
//! with the guest's end, xenstore-guest's `ring::Client`); the daemon's
//! end lives here: [`Server`] consumes requests and produces responses.

pub mod conn;
pub mod sim;
pub mod transport;

use crate::wire::{Header, HEADER_LEN, PAYLOAD_MAX};
pub use xenstore_proto::ring::*;

/// Follows message boundaries in the request stream, so the ring itself
/// catches a header announcing more than XENSTORE_PAYLOAD_MAX bytes (the
/// violation xenstore-ring.txt names for XENSTORE_ERROR_PROTO).
#[derive(Default)]
struct Framing {
    header: Vec<u8>,
    payload_left: u32,
}

impl Framing {
    fn feed(&mut self, mut bytes: &[u8]) -> Result<(), RingError> {
        while !bytes.is_empty() {
            if self.payload_left > 0 {
                let n = bytes.len().min(self.payload_left as usize);
                self.payload_left -= n as u32;
                bytes = &bytes[n..];
                continue;
            }
            let n = bytes.len().min(HEADER_LEN - self.header.len());
            self.header.extend_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
            if self.header.len() == HEADER_LEN {
                let header = Header::decode(self.header.as_slice().try_into().unwrap());
                self.header.clear();
                if header.len as usize > PAYLOAD_MAX {
                    return Err(RingError::TooLong { len: header.len });
                }
                self.payload_left = header.len;
            }
        }
        Ok(())
    }
}

/// The daemon's end of a domain's ring. What writing a response reads
/// first, then the request framing (see `RingConn`).
#[repr(C)]
pub struct Server {
    iface: Interface,
    stopped: Option<RingError>,
    framing: Framing,
}

impl Server {
    /// Takes over a freshly mapped page and advertises reconnection and the
    /// error indicator before touching either queue, as the spec requires.
    /// Indices are left as the guest has them: guests need not start at 0.
    pub fn new(page: Box<dyn Page>) -> Server {
        let iface = Interface::new(page);
        let features = iface.load(Field::ServerFeatures);
        iface.store(
            Field::ServerFeatures,
            features | FEATURE_RECONNECTION | FEATURE_ERROR,
        );
        let stopped = match iface.load(Field::Error) {
            ERROR_NONE => None,
            error => Some(RingError::Stopped { error }),
        };
        Server {
            iface,
            framing: Framing::default(),
            stopped,
        }
    }

    /// The guest asked for a ring close and reconnect.
    pub fn reconnect_requested(&self) -> bool {
        self.iface.load(Field::Connection) == RECONNECT
    }

    /// Finishes a reconnect (or revives a stopped ring): both queues empty,
    /// error cleared, connection back to CONNECTED. The caller has already
    /// dropped the connection's packets, watches and transactions, and
    /// signals the event channel afterwards.
    pub fn reset(&mut self) {
        for field in [
            Field::ReqCons,
            Field::ReqProd,
            Field::RspCons,
            Field::RspProd,
        ] {
            self.iface.store(field, 0);
        }
        self.framing = Framing::default();
        self.stopped = None;
        self.iface.store(Field::Error, ERROR_NONE);
        self.iface.store(Field::Connection, CONNECTED);
    }

    /// Why the ring stopped, if it did. A stopped ring reads and writes nothing.
    pub fn stopped(&self) -> Option<RingError> {
        self.stopped
    }

    /// Marks the ring dead with `fault`'s error value (the guest sees it).
    pub fn stop(&mut self, fault: RingError) -> RingError {
        self.iface.store(Field::Error, fault.code());
        self.stopped = Some(fault);
        fault
    }

    fn check(&self) -> Result<(), RingError> {
        match self.stopped {
            Some(fault) => Err(fault),
            None => Ok(()),
        }
    }

    /// Request bytes into `buf`; Ok(0) when none are queued. A bad index or
    /// an oversized header stops the ring and is returned as the error.
    pub fn read(&mut self, buf: &mut [u8]) -> Result<usize, RingError> {
        self.check()?;
        if self.reconnect_requested() {
            // The guest ignores everything but `connection` until we reset.
            return Ok(0);
        }
        let n = self
            .iface
            .consume(REQUESTS, buf)
            .map_err(|e| self.stop(e))?;
        self.framing.feed(&buf[..n]).map_err(|e| self.stop(e))?;
        Ok(n)
    }

    /// Response bytes from `bytes`, as many as fit; Ok(0) when the queue is full.
    pub fn write(&mut self, bytes: &[u8]) -> Result<usize, RingError> {
        self.check()?;
        if self.reconnect_requested() {
            return Ok(0);
        }
        self.iface
            .produce(RESPONSES, bytes)
            .map_err(|e| self.stop(e))
    }
}
