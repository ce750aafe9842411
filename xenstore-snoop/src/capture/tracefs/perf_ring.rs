//! One perf ring buffer mapped from a perf event fd: the metadata page the
//! kernel and the reader share, then a power-of-two data area of records.
//!
//! The kernel writes records at data_head and never past data_tail, which
//! only the reader moves. So the reader loads data_head with Acquire (the
//! records before it are complete), copies records out of [tail, head)
//! through raw pointers, and stores the new data_tail with Release (done
//! with them). Nothing here makes a Rust reference into the mapping: the
//! kernel writes it concurrently.

use crate::capture::mapping::{self, page_size, Access};
use anyhow::{Context, Result};
use memmap2::MmapRaw;
use perf_event_open_sys::bindings::perf_event_mmap_page;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::ptr::addr_of_mut;
use std::sync::atomic::{AtomicU64, Ordering};

/// The size of a perf record header: type u32, misc u16, size u16.
const HEADER_LEN: usize = 8;

pub struct Ring {
    /// A dup of the fd that owns the mapping: poll it for the wake-up mark.
    fd: OwnedFd,
    /// The metadata page, then the data area.
    mapping: MmapRaw,
    data_size: usize,
}

impl Ring {
    /// Maps the ring of perf event `fd` with `data_size` bytes of data (a
    /// power of two of pages), after the metadata page.
    pub fn map(fd: &OwnedFd, data_size: usize) -> Result<Ring> {
        assert!(
            data_size.is_power_of_two(),
            "perf ring of {data_size} bytes"
        );
        let mapping = mapping::map(fd.as_fd(), data_size + page_size(), 0, Access::ReadWrite)
            .with_context(|| {
                format!(
                    "mapping a {} MB perf ring (RLIMIT_MEMLOCK / perf_event_mlock_kb?)",
                    data_size >> 20
                )
            })?;
        Ok(Ring {
            fd: fd.try_clone().context("dup of a perf fd")?,
            mapping,
            data_size,
        })
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// The data area, after the metadata page.
    fn data(&self) -> *mut u8 {
        self.mapping
            .as_mut_ptr()
            .wrapping_add(self.mapping.len() - self.data_size)
    }

    fn meta(&self) -> *mut perf_event_mmap_page {
        self.mapping.as_mut_ptr().cast()
    }

    /// Hands each record now in the ring (header included, copied out and
    /// contiguous in `scratch`) to `f`, then frees their space. At a record
    /// whose size cannot be right it skips everything up to head (the next
    /// records are past finding) and returns the bytes skipped, so one
    /// corrupt record never stops the ring for good.
    pub fn drain(&self, scratch: &mut Vec<u8>, mut f: impl FnMut(&[u8])) -> u64 {
        let meta = self.meta();
        // SAFETY: data_head and data_tail are aligned u64s in the mapped
        // metadata page, which lives as long as self; the kernel accesses
        // them atomically (READ_ONCE/WRITE_ONCE with barriers), so do we.
        let (head, tail_word) = unsafe {
            (
                AtomicU64::from_ptr(addr_of_mut!((*meta).data_head)),
                AtomicU64::from_ptr(addr_of_mut!((*meta).data_tail)),
            )
        };
        // Acquire: every record before head is fully written.
        let head = head.load(Ordering::Acquire);
        let mut tail = tail_word.load(Ordering::Relaxed); // only we write it
        let mask = self.data_size as u64 - 1;
        while tail < head {
            let at = (tail & mask) as usize;
            let size = self.record_size(at);
            // The kernel writes whole records of 8-byte multiples; anything
            // else is a corrupt ring: stop, never spin or read past head.
            if size < HEADER_LEN
                || !size.is_multiple_of(HEADER_LEN)
                || size as u64 > head - tail
                || size > self.data_size
            {
                break;
            }
            self.copy_out(at, size, scratch);
            f(scratch);
            tail += size as u64;
        }
        let skipped = head.saturating_sub(tail);
        // Release: we are done reading everything before head.
        tail_word.store(tail.max(head), Ordering::Release);
        skipped
    }

    /// The size field of the record header at `at`, an 8-byte aligned
    /// offset (every record size is a multiple of 8, checked by `drain`).
    fn record_size(&self, at: usize) -> usize {
        // Aligned in a power-of-two area of pages, a header never wraps.
        assert!(at.is_multiple_of(HEADER_LEN) && at + HEADER_LEN <= self.data_size);
        let data = self.data();
        // SAFETY: an aligned header inside the data area (checked above),
        // below head, so complete; read as a value, not through a reference.
        let header = unsafe { std::ptr::read_volatile(data.add(at).cast::<[u8; HEADER_LEN]>()) };
        u16::from_ne_bytes([header[6], header[7]]) as usize
    }

    /// Copies `len` bytes of the data area from offset `at` into `out`,
    /// wrapping at the end of the ring.
    fn copy_out(&self, at: usize, len: usize, out: &mut Vec<u8>) {
        assert!(at < self.data_size && len <= self.data_size);
        out.clear();
        out.reserve(len);
        let first = len.min(self.data_size - at);
        let data = self.data();
        // SAFETY: both source ranges lie in the data area (at < data_size,
        // first <= data_size - at, len - first <= data_size); they hold
        // records between tail and head, which the kernel does not write
        // until we move tail; `out` has room for len bytes, set just after.
        unsafe {
            let dst = out.as_mut_ptr();
            std::ptr::copy_nonoverlapping(data.add(at), dst, first);
            std::ptr::copy_nonoverlapping(data, dst.add(first), len - first);
            out.set_len(len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::FromRawFd;

    /// A ring over shared memory of our own (a memfd) rather than a perf
    /// event: the same mapping code, runnable without perf permissions.
    fn ring(data_size: usize) -> Ring {
        // SAFETY: a NUL-terminated name; the fd is checked.
        let fd = unsafe { libc::memfd_create(c"perf-ring-test".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(fd >= 0, "memfd_create: {}", std::io::Error::last_os_error());
        // SAFETY: a new fd nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let len = (data_size + page_size()) as libc::off_t;
        // SAFETY: ftruncate on our own fd.
        assert_eq!(unsafe { libc::ftruncate(fd.as_raw_fd(), len) }, 0);
        Ring::map(&fd, data_size).unwrap()
    }

    /// Writes `records` (as the kernel would) from ring offset `start`.
    fn write(ring: &Ring, start: u64, records: &[Vec<u8>]) {
        let data = ring.data();
        let mut head = start;
        for r in records {
            for (i, b) in r.iter().enumerate() {
                let at = ((head + i as u64) % ring.data_size as u64) as usize;
                // SAFETY: at < data_size, inside the data area.
                unsafe { data.add(at).write(*b) };
            }
            head += r.len() as u64;
        }
        let meta = ring.meta();
        // SAFETY: as in Ring::drain.
        unsafe {
            AtomicU64::from_ptr(addr_of_mut!((*meta).data_tail)).store(start, Ordering::Relaxed);
            AtomicU64::from_ptr(addr_of_mut!((*meta).data_head)).store(head, Ordering::Release);
        }
    }

    /// A record as the kernel writes it: padded to a multiple of 8.
    fn record(ty: u32, body: &[u8]) -> Vec<u8> {
        let size = (HEADER_LEN + body.len()).next_multiple_of(HEADER_LEN);
        let mut r = ty.to_ne_bytes().to_vec();
        r.extend_from_slice(&0u16.to_ne_bytes());
        r.extend_from_slice(&(size as u16).to_ne_bytes());
        r.extend_from_slice(body);
        r.resize(size, 0);
        r
    }

    #[test]
    fn records_come_out_whole_across_the_wrap() {
        let page = page_size();
        let ring = ring(page);
        let records = [record(9, b"first"), record(9, &[7; 24]), record(3, b"")];
        // Start 24 bytes before the end: the second record (32 bytes)
        // starts 8 bytes before it and wraps.
        write(&ring, (page - 24) as u64, &records);
        let mut seen = Vec::new();
        ring.drain(&mut Vec::new(), |r| seen.push(r.to_vec()));
        assert_eq!(seen, records);
        // The space is freed: a second drain finds nothing.
        ring.drain(&mut Vec::new(), |_| panic!("drained twice"));
    }

    #[test]
    fn a_corrupt_size_skips_to_head_and_the_ring_goes_on() {
        let ring = ring(page_size());
        let mut at = 0;
        for size in [0u16, 12, 64] {
            let mut bad = record(9, &[1; 16]);
            bad[6..8].copy_from_slice(&size.to_ne_bytes());
            // 64: a record that would end past head.
            let records = [record(9, b"ok"), bad];
            write(&ring, at, &records);
            let mut n = 0;
            let skipped = ring.drain(&mut Vec::new(), |_| n += 1);
            assert_eq!((n, skipped), (1, records[1].len() as u64), "size {size}");
            at += (records[0].len() + records[1].len()) as u64;
            // What comes next is read again.
            write(&ring, at, &[record(9, b"next")]);
            let mut seen = Vec::new();
            assert_eq!(ring.drain(&mut Vec::new(), |r| seen.push(r.to_vec())), 0);
            assert_eq!(seen, [record(9, b"next")], "size {size}");
            at += record(9, b"next").len() as u64;
        }
    }
}
