//! Shared mappings of a kernel object's fd (a perf event's ring, a BPF
//! ring buffer), through memmap2's `MmapRaw`: unmapped when dropped, and
//! handed out only as a raw pointer, never a reference, since the kernel
//! writes such memory concurrently.

use memmap2::{MmapOptions, MmapRaw};
use std::os::fd::{AsRawFd, BorrowedFd};

/// Whether a mapping may be written (the kernel refuses PROT_WRITE on the
/// pages only it writes, such as a BPF ring buffer's data).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Access {
    ReadOnly,
    ReadWrite,
}

/// Maps `len` bytes of `fd` from `offset` (a multiple of the page size),
/// shared.
pub fn map(fd: BorrowedFd, len: usize, offset: usize, access: Access) -> std::io::Result<MmapRaw> {
    let mut options = MmapOptions::new();
    options.len(len).offset(offset as u64);
    match access {
        Access::ReadOnly => options.map_raw_read_only(fd.as_raw_fd()),
        Access::ReadWrite => options.map_raw(fd.as_raw_fd()),
    }
}

/// The system's page size.
pub fn page_size() -> usize {
    // SAFETY: sysconf reads a constant; no pointers involved.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}
