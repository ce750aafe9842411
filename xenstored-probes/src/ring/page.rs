//! The 4 KiB page a ring lives in, however it was mapped.

use std::io;
use std::os::fd::AsRawFd;

use super::PAGE_SIZE;

/// A shared page: PAGE_SIZE bytes, page-aligned, valid while the value lives.
pub trait Page: Send {
    fn ptr(&self) -> *mut u8;
}

/// A MAP_SHARED mapping of PAGE_SIZE bytes, unmapped on drop.
pub struct Mapping {
    ptr: *mut u8,
}

// SAFETY: the mapping is plain shared memory; all access goes through
// atomics or raw copies that tolerate a concurrent peer.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps PAGE_SIZE bytes of `fd` at `offset`, read-write and shared.
    pub fn of_fd(fd: &impl AsRawFd, offset: u64) -> io::Result<Mapping> {
        // SAFETY: a fresh mapping; the kernel validates fd and offset.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                PAGE_SIZE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                offset as libc::off_t,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping {
            ptr: ptr as *mut u8,
        })
    }

    /// A zeroed page shared by nobody yet (unit tests; forked peers).
    pub fn anonymous() -> io::Result<Mapping> {
        // SAFETY: as above, with no file.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                PAGE_SIZE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping {
            ptr: ptr as *mut u8,
        })
    }
}

impl Page for Mapping {
    fn ptr(&self) -> *mut u8 {
        self.ptr
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: ptr came from mmap of PAGE_SIZE and is unmapped once.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, PAGE_SIZE) };
    }
}

/// Both ends of a ring in one process (tests) share one mapping.
impl<P: Page + Sync> Page for std::sync::Arc<P> {
    fn ptr(&self) -> *mut u8 {
        (**self).ptr()
    }
}
