//! The 4 KiB page a ring lives in, however it was mapped.

use memmap2::{MmapOptions, MmapRaw};
use std::io;
use std::os::fd::AsRawFd;

use super::PAGE_SIZE;

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
