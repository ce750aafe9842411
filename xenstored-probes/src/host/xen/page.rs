//! A domain's xenstore page mapped into dom0: through its reserved grant
//! (/dev/xen/gntdev, as xenstored does), else as a foreign frame
//! (/dev/xen/privcmd, for a guest that never set the grant up), or for
//! dom0 itself the kernel's page at /proc/xen/xsd_kva.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;

use super::sys::{self, GrantRef, MapGrantRef, MmapBatchV2, UnmapGrantRef};
use crate::conn::ring::{Mapping, Page};

/// The page of `domid`: its reserved grant, else frame `gfn` mapped
/// foreign; the error names both attempts.
pub fn map_guest(domid: u16, gfn: u64) -> io::Result<Box<dyn Page>> {
    match GrantPage::map(domid) {
        Ok(page) => Ok(Box::new(page)),
        Err(grant) => match ForeignPage::map(domid, gfn) {
            Ok(page) => Ok(Box::new(page)),
            Err(foreign) => Err(io::Error::new(
                foreign.kind(),
                format!("{grant}; foreign frame {gfn:#x}: {foreign}"),
            )),
        },
    }
}

/// dom0's own page: the kernel allocated it for its xenbus before any
/// xenstored ran and shows it at /proc/xen/xsd_kva.
pub fn map_dom0(kva: &Path) -> io::Result<Mapping> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(kva)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", kva.display())))?;
    Mapping::of_fd(&file, 0)
        .map_err(|e| io::Error::new(e.kind(), format!("mmap {}: {e}", kva.display())))
}

/// Mapped through gntdev; unmapped, then ungranted, on drop.
struct GrantPage {
    mapping: Option<Mapping>,
    gntdev: File,
    index: u64,
}

impl GrantPage {
    fn map(domid: u16) -> io::Result<GrantPage> {
        let gntdev = sys::open_dev("/dev/xen/gntdev")?;
        let mut req = MapGrantRef {
            count: 1,
            pad: 0,
            index: 0,
            refs: [GrantRef {
                domid: domid as u32,
                gref: sys::GNTTAB_RESERVED_XENSTORE,
            }],
        };
        sys::ioctl(
            gntdev.as_raw_fd(),
            sys::IOCTL_GNTDEV_MAP_GRANT_REF,
            &mut req,
            "IOCTL_GNTDEV_MAP_GRANT_REF",
        )?;
        let mut page = GrantPage {
            mapping: None,
            gntdev,
            index: req.index,
        };
        // A failed mmap still releases the grant (page's drop).
        let mapping = Mapping::of_fd(&page.gntdev, page.index)
            .map_err(|e| io::Error::new(e.kind(), format!("mmap of grant: {e}")))?;
        page.mapping = Some(mapping);
        Ok(page)
    }
}

impl Page for GrantPage {
    fn ptr(&self) -> *mut u8 {
        self.mapping
            .as_ref()
            .map_or(std::ptr::null_mut(), |m| m.ptr())
    }
}

impl Drop for GrantPage {
    fn drop(&mut self) {
        self.mapping = None;
        let mut req = UnmapGrantRef {
            index: self.index,
            count: 1,
            pad: 0,
        };
        let _ = sys::ioctl(
            self.gntdev.as_raw_fd(),
            sys::IOCTL_GNTDEV_UNMAP_GRANT_REF,
            &mut req,
            "IOCTL_GNTDEV_UNMAP_GRANT_REF",
        );
    }
}

/// A foreign frame mapped through privcmd (what xc_map_foreign_range does):
/// a privcmd mapping populated by IOCTL_PRIVCMD_MMAPBATCH_V2; munmap on drop
/// releases the frame.
struct ForeignPage {
    mapping: Mapping,
    _privcmd: File,
}

impl ForeignPage {
    fn map(domid: u16, gfn: u64) -> io::Result<ForeignPage> {
        let privcmd = sys::open_dev("/dev/xen/privcmd")?;
        let mapping = Mapping::of_fd(&privcmd, 0)
            .map_err(|e| io::Error::new(e.kind(), format!("mmap of /dev/xen/privcmd: {e}")))?;
        let frames = [gfn];
        let mut errors = [0i32];
        let mut req = MmapBatchV2 {
            num: 1,
            dom: domid,
            addr: mapping.ptr() as u64,
            arr: frames.as_ptr(),
            err: errors.as_mut_ptr(),
        };
        sys::ioctl(
            privcmd.as_raw_fd(),
            sys::IOCTL_PRIVCMD_MMAPBATCH_V2,
            &mut req,
            "IOCTL_PRIVCMD_MMAPBATCH_V2",
        )?;
        if errors[0] != 0 {
            let e = io::Error::from_raw_os_error(-errors[0]);
            return Err(io::Error::new(
                e.kind(),
                format!("IOCTL_PRIVCMD_MMAPBATCH_V2: {e}"),
            ));
        }
        Ok(ForeignPage {
            mapping,
            _privcmd: privcmd,
        })
    }
}

impl Page for ForeignPage {
    fn ptr(&self) -> *mut u8 {
        self.mapping.ptr()
    }
}
