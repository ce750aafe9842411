//! The guest's end of the xenstore ring: produces requests, consumes
//! responses, over the page layout the daemon's `ring::Interface` defines.

use std::sync::atomic::{fence, Ordering};

use xenstore_proto::ring::{
    Field, Interface, Page, RingError, CONNECTED, ERROR_COMM, ERROR_NONE, FEATURE_ERROR,
    FEATURE_RECONNECTION, RECONNECT, REQUESTS, RESPONSES, RING_SIZE,
};

/// The guest's end of the ring.
pub struct Client {
    iface: Interface,
}

impl Client {
    pub fn new(page: Box<dyn Page>) -> Client {
        Client {
            iface: Interface::new(page),
        }
    }

    pub fn interface(&self) -> &Interface {
        &self.iface
    }

    fn check(&self) -> Result<(), RingError> {
        if self.iface.load(Field::ServerFeatures) & FEATURE_ERROR != 0 {
            let error = self.iface.load(Field::Error);
            if error != ERROR_NONE {
                return Err(RingError::Stopped { error });
            }
        }
        Ok(())
    }

    /// Request bytes, as many as fit; Ok(0) when the queue is full or a
    /// reconnect is in progress.
    pub fn write(&self, bytes: &[u8]) -> Result<usize, RingError> {
        self.check()?;
        if !self.connected() {
            return Ok(0);
        }
        self.iface.produce(REQUESTS, bytes)
    }

    /// Response bytes into `buf`; Ok(0) when none are queued.
    pub fn read(&self, buf: &mut [u8]) -> Result<usize, RingError> {
        self.read_responses(buf).map(|(n, _)| n)
    }

    /// Response bytes into `buf` (Ok(0) when none are queued), and whether
    /// the server must be told of the room this freed: only when the queue
    /// was full, as Linux's xenbus decides (xb_read), since only then may
    /// the server be waiting for room.
    pub fn read_responses(&self, buf: &mut [u8]) -> Result<(usize, bool), RingError> {
        self.check()?;
        if !self.connected() {
            return Ok((0, false));
        }
        let cons = self.iface.load(Field::RspCons);
        let n = self.iface.consume(RESPONSES, buf)?;
        if n == 0 {
            return Ok((0, false));
        }
        // The new consumer index is visible before the producer index is
        // read (a store then a load needs a full fence), so a server that
        // found the queue full either sees this room or is told of it.
        fence(Ordering::SeqCst);
        let was_full = self.iface.load(Field::RspProd).wrapping_sub(cons) >= RING_SIZE;
        Ok((n, was_full))
    }

    pub fn server_features(&self) -> u32 {
        self.iface.load(Field::ServerFeatures)
    }

    /// The server's `error` indicator (0 unless it stopped the ring).
    pub fn error(&self) -> u32 {
        self.iface.load(Field::Error)
    }

    /// Starts a ring close and reconnect; signal the server afterwards and
    /// wait for [`Client::connected`].
    pub fn request_reconnect(&self) -> Result<(), RingError> {
        if self.server_features() & FEATURE_RECONNECTION == 0 {
            return Err(RingError::Stopped { error: ERROR_COMM });
        }
        self.iface.store(Field::Connection, RECONNECT);
        Ok(())
    }

    /// The ring is usable: no reconnect in progress.
    pub fn connected(&self) -> bool {
        self.iface.load(Field::Connection) == CONNECTED
    }
}

#[cfg(test)]
mod tests;
