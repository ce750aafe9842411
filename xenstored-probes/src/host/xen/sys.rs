//! The Linux device interfaces a dom0 xenstored uses, as plain ioctls with
//! the layouts of include/uapi/xen/{evtchn,gntdev,privcmd}.h (checked
//! against Xen's copies of those headers by the tests, through glue.c).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::RawFd;
use std::os::unix::fs::OpenOptionsExt;

/// `_IOC(_IOC_NONE, type, nr, size)` on Linux (the _IOC_NONE direction is 0).
const fn ioc_none(ty: u8, nr: u8, size: usize) -> u64 {
    ((size as u64) << 16) | ((ty as u64) << 8) | nr as u64
}

/// The grant reference a guest's xenstore page is always shared under.
pub const GNTTAB_RESERVED_XENSTORE: u32 = 1;
/// The virtual interrupt Xen raises in dom0 when any domain shuts down,
/// crashes or dies (xen.h).
pub const VIRQ_DOM_EXC: u32 = 3;

#[repr(C)]
pub struct GrantRef {
    pub domid: u32,
    pub gref: u32,
}

#[repr(C)]
pub struct MapGrantRef {
    pub count: u32,
    pub pad: u32,
    pub index: u64,
    pub refs: [GrantRef; 1],
}

#[repr(C)]
pub struct UnmapGrantRef {
    pub index: u64,
    pub count: u32,
    pub pad: u32,
}

#[repr(C)]
pub struct BindVirq {
    pub virq: u32,
}

#[repr(C)]
pub struct BindInterdomain {
    pub remote_domain: u32,
    pub remote_port: u32,
}

#[repr(C)]
pub struct Port {
    pub port: u32,
}

/// `struct privcmd_mmapbatch_v2`: map `num` foreign frames of `dom` at
/// `addr` (inside a privcmd mapping); per-frame errors land in `err`.
#[repr(C)]
pub struct MmapBatchV2 {
    pub num: u32,
    pub dom: u16,
    pub addr: u64,
    pub arr: *const u64,
    pub err: *mut i32,
}

pub const IOCTL_EVTCHN_BIND_VIRQ: u64 = ioc_none(b'E', 0, std::mem::size_of::<BindVirq>());
pub const IOCTL_EVTCHN_BIND_INTERDOMAIN: u64 =
    ioc_none(b'E', 1, std::mem::size_of::<BindInterdomain>());
pub const IOCTL_EVTCHN_UNBIND: u64 = ioc_none(b'E', 3, std::mem::size_of::<Port>());
pub const IOCTL_EVTCHN_NOTIFY: u64 = ioc_none(b'E', 4, std::mem::size_of::<Port>());
pub const IOCTL_GNTDEV_MAP_GRANT_REF: u64 = ioc_none(b'G', 0, std::mem::size_of::<MapGrantRef>());
pub const IOCTL_GNTDEV_UNMAP_GRANT_REF: u64 =
    ioc_none(b'G', 1, std::mem::size_of::<UnmapGrantRef>());
pub const IOCTL_PRIVCMD_MMAPBATCH_V2: u64 = ioc_none(b'P', 4, std::mem::size_of::<MmapBatchV2>());

/// One ioctl; the error names the request.
pub fn ioctl<T>(fd: RawFd, request: u64, arg: &mut T, what: &str) -> io::Result<libc::c_int> {
    // SAFETY: `arg` is the repr(C) struct the request number encodes.
    let r = unsafe { libc::ioctl(fd, request as _, arg as *mut T) };
    if r < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("{what}: {e}")));
    }
    Ok(r)
}

/// A Xen device node, non-blocking; the error says where it looked.
pub fn open_dev(path: &str) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| io::Error::new(e.kind(), format!("{path}: {e} (not a Xen dom0?)")))
}

#[cfg(test)]
mod tests {
    use super::*;

    extern "C" {
        fn xss_have_xen_headers() -> libc::c_int;
        fn xss_ioctl_evtchn_bind_virq() -> libc::c_ulong;
        fn xss_ioctl_evtchn_bind_interdomain() -> libc::c_ulong;
        fn xss_ioctl_evtchn_unbind() -> libc::c_ulong;
        fn xss_ioctl_evtchn_notify() -> libc::c_ulong;
        fn xss_ioctl_gntdev_map_grant_ref() -> libc::c_ulong;
        fn xss_ioctl_gntdev_unmap_grant_ref() -> libc::c_ulong;
        fn xss_ioctl_privcmd_mmapbatch_v2() -> libc::c_ulong;
        fn xss_sizeof_mmapbatch_v2() -> usize;
        fn xss_offsetof_mmapbatch_v2_addr() -> usize;
        fn xss_offsetof_mmapbatch_v2_err() -> usize;
        fn xss_virq_dom_exc() -> libc::c_uint;
    }

    /// The numbers as Linux's uapi headers define them, independent of glue.c.
    #[test]
    fn ioctl_numbers_match_linux() {
        assert_eq!(IOCTL_EVTCHN_BIND_VIRQ, 0x0004_4500);
        assert_eq!(IOCTL_EVTCHN_BIND_INTERDOMAIN, 0x0008_4501);
        assert_eq!(IOCTL_EVTCHN_UNBIND, 0x0004_4503);
        assert_eq!(IOCTL_EVTCHN_NOTIFY, 0x0004_4504);
        assert_eq!(IOCTL_GNTDEV_MAP_GRANT_REF, 0x0018_4700);
        assert_eq!(IOCTL_GNTDEV_UNMAP_GRANT_REF, 0x0010_4701);
        assert_eq!(IOCTL_PRIVCMD_MMAPBATCH_V2, 0x0020_5004);
    }

    /// The same numbers and layouts, as the C compiler sees Xen's headers.
    #[test]
    fn layouts_match_the_xen_headers() {
        // SAFETY: the glue's functions take nothing and return constants.
        unsafe {
            if xss_have_xen_headers() == 0 {
                assert!(
                    std::env::var_os("CI").is_none(),
                    "CI builds with libxen-dev: glue.c must see xenctrl.h"
                );
                eprintln!("SKIP: built without Xen's headers (libxen-dev)");
                return;
            }
            assert_eq!(xss_ioctl_evtchn_bind_virq() as u64, IOCTL_EVTCHN_BIND_VIRQ);
            assert_eq!(
                xss_ioctl_evtchn_bind_interdomain() as u64,
                IOCTL_EVTCHN_BIND_INTERDOMAIN
            );
            assert_eq!(xss_ioctl_evtchn_unbind() as u64, IOCTL_EVTCHN_UNBIND);
            assert_eq!(xss_ioctl_evtchn_notify() as u64, IOCTL_EVTCHN_NOTIFY);
            assert_eq!(
                xss_ioctl_gntdev_map_grant_ref() as u64,
                IOCTL_GNTDEV_MAP_GRANT_REF
            );
            assert_eq!(
                xss_ioctl_gntdev_unmap_grant_ref() as u64,
                IOCTL_GNTDEV_UNMAP_GRANT_REF
            );
            assert_eq!(
                xss_ioctl_privcmd_mmapbatch_v2() as u64,
                IOCTL_PRIVCMD_MMAPBATCH_V2
            );
            assert_eq!(
                xss_sizeof_mmapbatch_v2(),
                std::mem::size_of::<MmapBatchV2>()
            );
            assert_eq!(
                xss_offsetof_mmapbatch_v2_addr(),
                std::mem::offset_of!(MmapBatchV2, addr)
            );
            assert_eq!(
                xss_offsetof_mmapbatch_v2_err(),
                std::mem::offset_of!(MmapBatchV2, err)
            );
            assert_eq!(xss_virq_dom_exc(), VIRQ_DOM_EXC);
        }
    }
}
