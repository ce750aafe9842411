//! The BPF ring buffer read through a mapping of our own, as the kernel
//! lays it out (kernel/bpf/ringbuf.c): a consumer page we write, then,
//! read-only, a producer page and the data area mapped twice in a row, so
//! a record that wraps at the end still reads as one slice.
//!
//! libbpf's reader publishes the consumer position after every record, and
//! the kernel loads that position on every reservation: with the reader
//! busy, each firing took a cache miss on the line the reader had just
//! written. This one publishes it once a drain, and every sixteenth of the
//! ring on the way through a long one, so a slow drain still frees space.
//!
//! Records start with an 8-byte header: the length (with a busy bit while
//! the program writes it, a discard bit if it gave it up) and the page
//! offset; each takes its length plus the header rounded up to 8 bytes.
//! The kernel never writes a record between the two positions, so the
//! records there are read in place.

use crate::capture::mapping::{self, page_size, Access};
use anyhow::{Context, Result};
use memmap2::MmapRaw;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

const HEADER_LEN: u64 = 8;
const BUSY: u32 = 1 << 31;
const DISCARDED: u32 = 1 << 30;

pub struct Ring {
    /// An epoll instance with the map's fd, edge-triggered: it reports
    /// the program's wake-ups, not the data (which is nearly always there).
    wakeups: OwnedFd,
    /// The consumer page, read and written.
    consumer: MmapRaw,
    /// The producer page and the data area twice, read only.
    producer: MmapRaw,
    data_size: usize,
}

/// An epoll instance watching `fd` for wake-ups, edge-triggered.
fn edge_triggered(fd: BorrowedFd) -> Result<OwnedFd> {
    // SAFETY: no pointers; the result is checked.
    let epoll = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if epoll < 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    // SAFETY: a new fd nothing else owns.
    let epoll = unsafe { OwnedFd::from_raw_fd(epoll) };
    let mut event = libc::epoll_event {
        events: (libc::EPOLLIN | libc::EPOLLET) as u32,
        u64: 0,
    };
    // SAFETY: both fds are open; the event is read during the call only.
    let added = unsafe {
        libc::epoll_ctl(
            epoll.as_raw_fd(),
            libc::EPOLL_CTL_ADD,
            fd.as_raw_fd(),
            &mut event,
        )
    };
    if added < 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    Ok(epoll)
}

impl Ring {
    /// Maps the ring buffer map `fd` of `data_size` bytes (a power of two
    /// of pages, as the kernel requires of the map). The mappings keep the
    /// map alive; `fd` itself may close.
    pub fn map(fd: BorrowedFd, data_size: usize) -> Result<Ring> {
        assert!(data_size.is_power_of_two(), "ring of {data_size} bytes");
        let page = page_size();
        let wakeups = edge_triggered(fd).context("waiting on the BPF ring buffer")?;
        let consumer = mapping::map(fd, page, 0, Access::ReadWrite)
            .context("mapping the ring buffer's consumer page")?;
        let producer = mapping::map(fd, page + 2 * data_size, page, Access::ReadOnly)
            .with_context(|| format!("mapping a {} MB BPF ring buffer", data_size >> 20))?;
        Ok(Ring {
            wakeups,
            consumer,
            producer,
            data_size,
        })
    }

    /// Waits up to `timeout_ms` for the program's next wake-up (one may
    /// have come since the last wait). Waking on data alone would have the
    /// reader chase the program record by record, each of them a cache
    /// line both CPUs write.
    pub fn wait(&self, timeout_ms: i32) -> Result<()> {
        let mut event = libc::epoll_event { events: 0, u64: 0 };
        // SAFETY: room for one event, ours, for the length of the call.
        if unsafe { libc::epoll_wait(self.wakeups.as_raw_fd(), &mut event, 1, timeout_ms) } < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e).context("polling the BPF ring buffer");
            }
        }
        Ok(())
    }

    fn positions(&self) -> (&AtomicU64, &AtomicU64) {
        // SAFETY: each position is the first, aligned u64 of its page,
        // mapped for as long as self; the kernel accesses them atomically
        // (smp_load_acquire / smp_store_release), and so do we.
        unsafe {
            (
                AtomicU64::from_ptr(self.producer.as_mut_ptr().cast()),
                AtomicU64::from_ptr(self.consumer.as_mut_ptr().cast()),
            )
        }
    }

    /// Hands each complete record now in the ring (its bytes after the
    /// header) to `f`, then frees their space. Stops at a record still
    /// being written (the next drain goes on from there). At a length that
    /// cannot be right it skips everything up to the producer position and
    /// returns the bytes skipped, so one corrupt record never stops the
    /// ring for good.
    pub fn drain(&self, mut f: impl FnMut(&[u8])) -> u64 {
        let (producer, consumer) = self.positions();
        // Acquire: every record reserved before it has its header written.
        let head = producer.load(Ordering::Acquire);
        let mut tail = consumer.load(Ordering::Relaxed); // only we write it
        let mask = self.data_size as u64 - 1;
        let page = self.producer.len() - 2 * self.data_size;
        let data = self.producer.as_mut_ptr().wrapping_add(page);
        let mut skipped = 0;
        let mut published = tail;
        while tail < head {
            let at = (tail & mask) as usize;
            // SAFETY: an 8-byte aligned header (every record is a multiple
            // of 8) inside the first copy of the data area.
            let word = unsafe { AtomicU32::from_ptr(data.add(at).cast()) };
            // Acquire: a committed record's bytes are all written.
            let len = word.load(Ordering::Acquire);
            if len & BUSY != 0 {
                break;
            }
            let body = u64::from(len & !(BUSY | DISCARDED));
            let size = (body + HEADER_LEN).next_multiple_of(HEADER_LEN);
            if size > head - tail || size as usize > self.data_size {
                skipped = head - tail;
                tail = head;
                break;
            }
            if len & DISCARDED == 0 {
                // SAFETY: the body lies between the positions, so the
                // kernel leaves it alone until we move ours; it starts in
                // the first copy of the data area and, being no longer
                // than it, ends inside the second.
                let record = unsafe {
                    std::slice::from_raw_parts(data.add(at + HEADER_LEN as usize), body as usize)
                };
                f(record);
            }
            tail += size;
            if tail - published >= self.data_size as u64 / 16 {
                // Release: done reading everything before tail.
                consumer.store(tail, Ordering::Release);
                published = tail;
            }
        }
        // Release: done reading everything before tail.
        consumer.store(tail, Ordering::Release);
        skipped
    }
}
