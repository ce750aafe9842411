//! The xenstore shared-memory ring (docs/misc/xenstore-ring.txt; xs_wire.h
//! `struct xenstore_domain_interface`): one 4 KiB page holding a 1024-byte
//! request queue (guest -> server), a 1024-byte response queue (server ->
//! guest), their free-running u32 indices, and three signalling words.
//! Both ends use it: the daemon's `ring::Server` and xenstore-guest's
//! `ring::Client`.
//!
//! Indices are read and written as atomics: a consumer reads the producer
//! index with Acquire before copying data out and publishes its own index
//! with Release after; a producer reads the consumer index with Acquire
//! before overwriting data and publishes with Release after copying in.
//! That is the ordering xenstored's and Linux xenbus's explicit barriers
//! give. The daemon's hot path runs through [`Interface`]: its functions
//! are `#[inline]`, compiled into the daemon as when this lived there.

use memmap2::{MmapOptions, MmapRaw};
use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::wire::PAYLOAD_MAX;

/// A shared page: PAGE_SIZE bytes, page-aligned, valid while the value
/// lives, at the one address `ptr` always returns.
pub trait Page: Send {
    fn ptr(&self) -> *mut u8;
}

/// A mapping of PAGE_SIZE bytes (memmap2's `MmapRaw`: unmapped on drop,
/// and handed out only as a raw pointer, since a peer writes it
/// concurrently).
pub struct Mapping(MmapRaw);

impl Mapping {
    /// Maps PAGE_SIZE bytes of `fd` at `offset`, read-write and shared.
    pub fn of_fd(fd: &impl AsRawFd, offset: u64) -> io::Result<Mapping> {
        MmapOptions::new()
            .len(PAGE_SIZE)
            .offset(offset)
            .map_raw(fd.as_raw_fd())
            .map(Mapping)
    }

    /// A zeroed page of this process only (unit tests and fuzzing: both
    /// ends in one process).
    pub fn anonymous() -> io::Result<Mapping> {
        let page = MmapOptions::new().len(PAGE_SIZE).map_anon()?;
        Ok(Mapping(MmapRaw::from(page)))
    }
}

impl Page for Mapping {
    fn ptr(&self) -> *mut u8 {
        self.0.as_mut_ptr()
    }
}

/// Both ends of a ring in one process (tests) share one mapping.
impl<P: Page + Sync> Page for std::sync::Arc<P> {
    fn ptr(&self) -> *mut u8 {
        (**self).ptr()
    }
}

pub const RING_SIZE: u32 = 1024;
pub const PAGE_SIZE: usize = 4096;

/// `server_features` bits.
pub const FEATURE_RECONNECTION: u32 = 1;
pub const FEATURE_ERROR: u32 = 2;

/// `connection` values.
pub const CONNECTED: u32 = 0;
pub const RECONNECT: u32 = 1;

/// `error` values.
pub const ERROR_NONE: u32 = 0;
pub const ERROR_COMM: u32 = 1;
pub const ERROR_RINGIDX: u32 = 2;
pub const ERROR_PROTO: u32 = 3;

/// Byte offsets in the page (xenstore-ring.txt's table).
const REQ_DATA: usize = 0;
const RSP_DATA: usize = 1024;
const REQ_CONS: usize = 2048;
const REQ_PROD: usize = 2052;
const RSP_CONS: usize = 2056;
const RSP_PROD: usize = 2060;
const SERVER_FEATURES: usize = 2064;
const CONNECTION: usize = 2068;
const ERROR: usize = 2072;

#[inline]
fn mask(idx: u32) -> usize {
    (idx & (RING_SIZE - 1)) as usize
}

/// What went wrong on a ring; each maps to an `error` field value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RingError {
    /// prod - cons exceeds the ring size: the peer scribbled on the indices.
    BadIndex { cons: u32, prod: u32 },
    /// A request header announced more than XENSTORE_PAYLOAD_MAX bytes.
    TooLong { len: u32 },
    /// The server flagged the ring with this `error` value and stopped.
    Stopped { error: u32 },
}

impl RingError {
    /// The `error` field value a server sets for this fault.
    pub fn code(self) -> u32 {
        match self {
            RingError::BadIndex { .. } => ERROR_RINGIDX,
            RingError::TooLong { .. } => ERROR_PROTO,
            RingError::Stopped { error } => error,
        }
    }
}

impl std::fmt::Display for RingError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RingError::BadIndex { cons, prod } => write!(
                f,
                "inconsistent ring indices (cons {cons:#x}, prod {prod:#x}: {} bytes queued, ring holds {RING_SIZE})",
                prod.wrapping_sub(*cons)
            ),
            RingError::TooLong { len } => write!(
                f,
                "protocol violation: message length {len} exceeds {PAYLOAD_MAX}"
            ),
            RingError::Stopped { error } => {
                write!(f, "ring stopped by the server: {}", error_name(*error))
            }
        }
    }
}

impl std::error::Error for RingError {}

impl From<RingError> for std::io::Error {
    fn from(e: RingError) -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::InvalidData, e)
    }
}

pub fn error_name(error: u32) -> String {
    match error {
        ERROR_NONE => "XENSTORE_ERROR_NONE".into(),
        ERROR_COMM => "XENSTORE_ERROR_COMM".into(),
        ERROR_RINGIDX => "XENSTORE_ERROR_RINGIDX".into(),
        ERROR_PROTO => "XENSTORE_ERROR_PROTO".into(),
        other => format!("error {other}"),
    }
}

/// One direction of the ring: where its bytes and indices sit.
#[derive(Clone, Copy)]
pub struct Queue {
    data: usize,
    cons: usize,
    prod: usize,
}

pub const REQUESTS: Queue = Queue {
    data: REQ_DATA,
    cons: REQ_CONS,
    prod: REQ_PROD,
};
pub const RESPONSES: Queue = Queue {
    data: RSP_DATA,
    cons: RSP_CONS,
    prod: RSP_PROD,
};

/// `struct xenstore_domain_interface` over a shared page.
pub struct Interface {
    /// The page's address, kept here: asking the page (a boxed mapping)
    /// each time read one more cache line per event to a cold domain.
    base: *mut u8,
    /// Owned so that `base` stays mapped.
    _page: Box<dyn Page>,
}

// SAFETY: `base` is only the address of the page this value owns, which is
// Send; it is used exactly as the page's own ptr() was before.
unsafe impl Send for Interface {}

impl Interface {
    #[inline]
    pub fn new(page: Box<dyn Page>) -> Interface {
        Interface {
            base: page.ptr(),
            _page: page,
        }
    }

    #[inline]
    fn word(&self, offset: usize) -> &AtomicU32 {
        // SAFETY: Page guarantees PAGE_SIZE valid bytes, page-aligned, at
        // one address for as long as it lives (and it lives as long as
        // self); every offset here is 4-aligned and in range.
        unsafe { &*(self.base.add(offset) as *const AtomicU32) }
    }

    #[inline]
    pub fn load(&self, field: Field) -> u32 {
        self.word(field.offset()).load(Ordering::Acquire)
    }

    #[inline]
    pub fn store(&self, field: Field, value: u32) {
        self.word(field.offset()).store(value, Ordering::Release)
    }

    /// Copies as much of `bytes` as fits into `q`; returns how much did.
    #[inline]
    pub fn produce(&self, q: Queue, bytes: &[u8]) -> Result<usize, RingError> {
        let cons = self.word(q.cons).load(Ordering::Acquire);
        let prod = self.word(q.prod).load(Ordering::Relaxed);
        let queued = prod.wrapping_sub(cons);
        if queued > RING_SIZE {
            return Err(RingError::BadIndex { cons, prod });
        }
        let n = bytes.len().min((RING_SIZE - queued) as usize);
        let start = mask(prod);
        let first = n.min(RING_SIZE as usize - start);
        // SAFETY: both ranges lie inside the queue's 1024 bytes; the peer
        // does not touch bytes between cons and cons + RING_SIZE it has not
        // been handed (a hostile peer can only corrupt its own stream).
        unsafe {
            let base = self.base.add(q.data);
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), base.add(start), first);
            std::ptr::copy_nonoverlapping(bytes[first..].as_ptr(), base, n - first);
        }
        self.word(q.prod)
            .store(prod.wrapping_add(n as u32), Ordering::Release);
        if queued + n as u32 == RING_SIZE {
            // Full: the producer waits for a notification, which a consumer
            // gives only when it finds the queue was full (Linux's xenbus).
            // The next look at the consumer index must follow this store
            // (a store then a load needs a full fence), or both could miss
            // the other's update and wait.
            std::sync::atomic::fence(Ordering::SeqCst);
        }
        Ok(n)
    }

    /// Copies as much of `q`'s queued bytes as fit into `buf`.
    #[inline]
    pub fn consume(&self, q: Queue, buf: &mut [u8]) -> Result<usize, RingError> {
        let prod = self.word(q.prod).load(Ordering::Acquire);
        let cons = self.word(q.cons).load(Ordering::Relaxed);
        let queued = prod.wrapping_sub(cons);
        if queued > RING_SIZE {
            return Err(RingError::BadIndex { cons, prod });
        }
        let n = buf.len().min(queued as usize);
        let start = mask(cons);
        let first = n.min(RING_SIZE as usize - start);
        // SAFETY: as in produce.
        unsafe {
            let base = self.base.add(q.data);
            std::ptr::copy_nonoverlapping(base.add(start), buf.as_mut_ptr(), first);
            std::ptr::copy_nonoverlapping(base, buf[first..].as_mut_ptr(), n - first);
        }
        self.word(q.cons)
            .store(cons.wrapping_add(n as u32), Ordering::Release);
        Ok(n)
    }
}

/// The page's fields, for callers that inspect them (tests, diagnostics).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    ReqCons,
    ReqProd,
    RspCons,
    RspProd,
    ServerFeatures,
    Connection,
    Error,
}

impl Field {
    #[inline]
    fn offset(self) -> usize {
        match self {
            Field::ReqCons => REQ_CONS,
            Field::ReqProd => REQ_PROD,
            Field::RspCons => RSP_CONS,
            Field::RspProd => RSP_PROD,
            Field::ServerFeatures => SERVER_FEATURES,
            Field::Connection => CONNECTION,
            Field::Error => ERROR,
        }
    }
}
