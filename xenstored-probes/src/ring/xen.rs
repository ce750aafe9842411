//! The real dom0 backend (cargo feature `xen`): the guest's xenstore page
//! mapped through /dev/xen/gntdev (the reserved grant GNTTAB_RESERVED_XENSTORE,
//! as xenstored does when the guest set it up) and its port bound through
//! /dev/xen/evtchn. Plain ioctls with the layouts of Linux's
//! include/uapi/xen/{gntdev,evtchn}.h, so it builds without libxen.
//!
//! Built in CI, never exercised there: it needs a Xen hypervisor. Not done:
//! the privcmd foreign-mapping fallback for guests without the reserved
//! grant, and VIRQ_DOM_EXC (a dying domain is noticed through the
//! toolstack's XS_RELEASE only).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;

use super::conn::{Attached, EventChannel, Liveness, RingBackend};
use super::{Mapping, Page};

/// The grant reference a guest's xenstore page is always shared under.
const GNTTAB_RESERVED_XENSTORE: u32 = 1;

/// `_IOC(_IOC_NONE, type, nr, size)` on Linux (the _IOC_NONE direction is 0).
const fn ioc_none(ty: u8, nr: u8, size: usize) -> u64 {
    ((size as u64) << 16) | ((ty as u64) << 8) | nr as u64
}

#[repr(C)]
struct GrantRef {
    domid: u32,
    gref: u32,
}

#[repr(C)]
struct MapGrantRef {
    count: u32,
    pad: u32,
    index: u64,
    refs: [GrantRef; 1],
}

#[repr(C)]
struct UnmapGrantRef {
    index: u64,
    count: u32,
    pad: u32,
}

#[repr(C)]
struct BindInterdomain {
    remote_domain: u32,
    remote_port: u32,
}

#[repr(C)]
struct Port {
    port: u32,
}

const IOCTL_GNTDEV_MAP_GRANT_REF: u64 = ioc_none(b'G', 0, std::mem::size_of::<MapGrantRef>());
const IOCTL_GNTDEV_UNMAP_GRANT_REF: u64 = ioc_none(b'G', 1, std::mem::size_of::<UnmapGrantRef>());
const IOCTL_EVTCHN_BIND_INTERDOMAIN: u64 =
    ioc_none(b'E', 1, std::mem::size_of::<BindInterdomain>());
const IOCTL_EVTCHN_UNBIND: u64 = ioc_none(b'E', 3, std::mem::size_of::<Port>());
const IOCTL_EVTCHN_NOTIFY: u64 = ioc_none(b'E', 4, std::mem::size_of::<Port>());

fn ioctl<T>(fd: RawFd, request: u64, arg: &mut T, what: &str) -> io::Result<libc::c_int> {
    // SAFETY: `arg` is the repr(C) struct the request number encodes.
    let r = unsafe { libc::ioctl(fd, request as _, arg as *mut T) };
    if r < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("{what}: {e}")));
    }
    Ok(r)
}

fn open_dev(path: &str) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| io::Error::new(e.kind(), format!("{path}: {e} (not a Xen dom0?)")))
}

pub struct XenBackend;

impl RingBackend for XenBackend {
    fn attach(&self, domid: u16, _gfn: u64, port: u32) -> io::Result<Attached> {
        let page = GrantPage::map(domid)?;
        let channel = XenChannel::bind(domid, port)?;
        Ok(Attached {
            page: Box::new(page),
            channel: Box::new(channel),
        })
    }
}

/// A guest's page mapped through gntdev; unmapped, then ungranted, on drop.
struct GrantPage {
    mapping: Option<Mapping>,
    gntdev: File,
    index: u64,
}

impl GrantPage {
    fn map(domid: u16) -> io::Result<GrantPage> {
        let gntdev = open_dev("/dev/xen/gntdev")?;
        let mut req = MapGrantRef {
            count: 1,
            pad: 0,
            index: 0,
            refs: [GrantRef {
                domid: domid as u32,
                gref: GNTTAB_RESERVED_XENSTORE,
            }],
        };
        ioctl(
            gntdev.as_raw_fd(),
            IOCTL_GNTDEV_MAP_GRANT_REF,
            &mut req,
            "IOCTL_GNTDEV_MAP_GRANT_REF",
        )?;
        let mapping = Mapping::of_fd(&gntdev, req.index)?;
        Ok(GrantPage {
            mapping: Some(mapping),
            gntdev,
            index: req.index,
        })
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
        let _ = ioctl(
            self.gntdev.as_raw_fd(),
            IOCTL_GNTDEV_UNMAP_GRANT_REF,
            &mut req,
            "IOCTL_GNTDEV_UNMAP_GRANT_REF",
        );
    }
}

/// An interdomain event channel bound through /dev/xen/evtchn.
struct XenChannel {
    evtchn: File,
    local_port: u32,
    domid: u16,
    remote_port: u32,
}

impl XenChannel {
    fn bind(domid: u16, remote_port: u32) -> io::Result<XenChannel> {
        let evtchn = open_dev("/dev/xen/evtchn")?;
        let mut req = BindInterdomain {
            remote_domain: domid as u32,
            remote_port,
        };
        let local_port = ioctl(
            evtchn.as_raw_fd(),
            IOCTL_EVTCHN_BIND_INTERDOMAIN,
            &mut req,
            "IOCTL_EVTCHN_BIND_INTERDOMAIN",
        )? as u32;
        Ok(XenChannel {
            evtchn,
            local_port,
            domid,
            remote_port,
        })
    }
}

impl EventChannel for XenChannel {
    fn notify(&self) -> io::Result<()> {
        let mut req = Port {
            port: self.local_port,
        };
        ioctl(
            self.evtchn.as_raw_fd(),
            IOCTL_EVTCHN_NOTIFY,
            &mut req,
            "IOCTL_EVTCHN_NOTIFY",
        )
        .map(drop)
    }

    fn fd(&self) -> RawFd {
        self.evtchn.as_raw_fd()
    }

    /// Reads the fired ports and writes them back, which unmasks them.
    fn drain(&self) -> io::Result<Liveness> {
        use std::io::{Read, Write};
        let mut buf = [0u8; 4 * 64];
        loop {
            match (&self.evtchn).read(&mut buf) {
                Ok(0) => break,
                Ok(n) => (&self.evtchn).write_all(&buf[..n - n % 4])?,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            }
        }
        Ok(Liveness::Alive)
    }

    fn describe(&self) -> String {
        format!(
            "xen domain {} port {} (local {})",
            self.domid, self.remote_port, self.local_port
        )
    }
}

impl Drop for XenChannel {
    fn drop(&mut self) {
        let mut req = Port {
            port: self.local_port,
        };
        let _ = ioctl(
            self.evtchn.as_raw_fd(),
            IOCTL_EVTCHN_UNBIND,
            &mut req,
            "IOCTL_EVTCHN_UNBIND",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The request numbers Linux's headers define.
    #[test]
    fn ioctl_numbers_match_the_uapi_headers() {
        assert_eq!(IOCTL_GNTDEV_MAP_GRANT_REF, 0x0018_4700);
        assert_eq!(IOCTL_GNTDEV_UNMAP_GRANT_REF, 0x0010_4701);
        assert_eq!(IOCTL_EVTCHN_BIND_INTERDOMAIN, 0x0008_4501);
        assert_eq!(IOCTL_EVTCHN_UNBIND, 0x0004_4503);
        assert_eq!(IOCTL_EVTCHN_NOTIFY, 0x0004_4504);
    }
}
