//! What the hypervisor says about a domain, the way C xenstored 4.17 asks
//! (`xc_domain_getinfo`, tools/xenstore/xenstored_domain.c), and what
//! xenstored makes of it on VIRQ_DOM_EXC (`check_domain`).
//!
//! libxenctrl is dlopened by glue.c rather than linked: the shim must start
//! on hosts without Xen's libraries (CI, any non-Xen machine), and its
//! soname changes with every Xen release, so a hard link would tie even the
//! simulated daemon to one Xen version's runtime package. glue.c is
//! compiled against the installed xenctrl.h and opens exactly the soname
//! that header belongs to, so `xc_dominfo_t`'s layout is the library's own.

use std::io;

/// The state bits check_domain reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DomInfo {
    /// Shut down or crashed (xenstored tests both).
    pub shutdown: bool,
    /// Being destroyed: its pages are on their way back to Xen.
    pub dying: bool,
}

/// What to do about one introduced domain after VIRQ_DOM_EXC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing new.
    Unchanged,
    /// Shut down or crashed since last asked: @releaseDomain fires, once.
    ShutDown,
    /// Dying or gone: release it (unmap, unbind, close, @releaseDomain).
    Dead,
}

/// check_domain's decision for a domain, given its info (`None`: no such
/// domain any more) and whether its shutdown was already announced.
pub fn verdict(info: Option<DomInfo>, shutdown_announced: bool) -> Verdict {
    match info {
        None => Verdict::Dead,
        Some(i) if i.dying => Verdict::Dead,
        Some(i) if i.shutdown && !shutdown_announced => Verdict::ShutDown,
        Some(_) => Verdict::Unchanged,
    }
}

/// Where domain info comes from: libxenctrl, or a test's table.
pub trait DomainInfoSource {
    /// `Ok(None)` when the domain no longer exists.
    fn info(&mut self, domid: u32) -> io::Result<Option<DomInfo>>;
}

#[repr(C)]
#[derive(Default)]
struct RawDomInfo {
    domid: u32,
    dying: u8,
    shutdown: u8,
}

extern "C" {
    fn xss_xenctrl_open(err: *mut libc::c_char, len: usize) -> libc::c_int;
    fn xss_domain_info(domid: u32, out: *mut RawDomInfo) -> libc::c_int;
}

/// libxenctrl's handle (one per process, held by glue.c).
pub struct XenCtrl(());

impl XenCtrl {
    pub fn open() -> io::Result<XenCtrl> {
        let mut err = [0 as libc::c_char; 256];
        // SAFETY: err is writable for its length; glue.c NUL-terminates.
        if unsafe { xss_xenctrl_open(err.as_mut_ptr(), err.len()) } == 0 {
            return Ok(XenCtrl(()));
        }
        // SAFETY: NUL-terminated by snprintf above.
        let why = unsafe { std::ffi::CStr::from_ptr(err.as_ptr()) };
        Err(io::Error::other(format!(
            "libxenctrl: {}",
            why.to_string_lossy()
        )))
    }
}

impl DomainInfoSource for XenCtrl {
    fn info(&mut self, domid: u32) -> io::Result<Option<DomInfo>> {
        let mut raw = RawDomInfo::default();
        // SAFETY: raw is the glue's struct xss_dominfo; the handle is open.
        match unsafe { xss_domain_info(domid, &mut raw) } {
            1 => Ok(Some(DomInfo {
                shutdown: raw.shutdown != 0,
                dying: raw.dying != 0,
            })),
            0 => Ok(None),
            _ => {
                let e = io::Error::last_os_error();
                Err(io::Error::new(
                    e.kind(),
                    format!("xc_domain_getinfo({domid}): {e}"),
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUNNING: DomInfo = DomInfo {
        shutdown: false,
        dying: false,
    };
    const SHUT: DomInfo = DomInfo {
        shutdown: true,
        dying: false,
    };
    const DYING: DomInfo = DomInfo {
        shutdown: true,
        dying: true,
    };

    #[test]
    fn a_running_domain_is_left_alone() {
        assert_eq!(verdict(Some(RUNNING), false), Verdict::Unchanged);
        // resumed after an announced shutdown: still nothing to do
        assert_eq!(verdict(Some(RUNNING), true), Verdict::Unchanged);
    }

    #[test]
    fn a_shutdown_is_announced_once() {
        assert_eq!(verdict(Some(SHUT), false), Verdict::ShutDown);
        assert_eq!(verdict(Some(SHUT), true), Verdict::Unchanged);
    }

    #[test]
    fn dying_or_gone_domains_are_dead_whatever_was_announced() {
        for announced in [false, true] {
            assert_eq!(verdict(Some(DYING), announced), Verdict::Dead);
            assert_eq!(verdict(None, announced), Verdict::Dead);
            let dying_unshut = DomInfo {
                shutdown: false,
                dying: true,
            };
            assert_eq!(verdict(Some(dying_unshut), announced), Verdict::Dead);
        }
    }

    /// Off Xen (no libxenctrl, or no hypervisor behind it) opening fails
    /// with a reason instead of crashing the process.
    #[test]
    fn opening_off_xen_fails_cleanly() {
        if std::path::Path::new("/proc/xen/capabilities").exists() {
            eprintln!("SKIP: this host runs under Xen");
            return;
        }
        let err = XenCtrl::open().err().expect("no hypervisor here");
        assert!(err.to_string().starts_with("libxenctrl: "), "{err}");
    }
}
