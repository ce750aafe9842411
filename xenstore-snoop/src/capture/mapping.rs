//! A shared mapping of a kernel object's fd (a perf event's ring, a BPF
//! ring buffer), unmapped when dropped. The kernel writes such memory
//! concurrently, so it is handed out as a raw pointer, never a reference.

use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr::NonNull;

pub struct Mapping {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: a Mapping owns its memory outright; whoever reads it through
// `as_ptr` synchronises with the kernel as the object's layout says.
unsafe impl Send for Mapping {}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: base/len are the mapping made by `new`, unmapped only here.
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

impl Mapping {
    /// Maps `len` bytes of `fd` from `offset`, shared, with protection `prot`.
    pub fn new(
        fd: BorrowedFd,
        len: usize,
        prot: libc::c_int,
        offset: usize,
    ) -> std::io::Result<Mapping> {
        // SAFETY: a fresh shared mapping of the fd; the kernel checks the
        // length and offset and fails with MAP_FAILED rather than touching
        // our memory.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                prot,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                offset as libc::off_t,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Mapping {
            base: NonNull::new(base.cast()).expect("mmap returned NULL"),
            len,
        })
    }

    pub fn as_ptr(&self) -> *mut u8 {
        self.base.as_ptr()
    }

    pub fn size(&self) -> usize {
        self.len
    }
}

/// The system's page size.
pub fn page_size() -> usize {
    // SAFETY: sysconf reads a constant; no pointers involved.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}
