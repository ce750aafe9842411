//! What the hypervisor says about a domain, the way C xenstored asks
//! (`xc_domain_getinfolist`, tools/xenstored/domain.c), and what xenstored
//! makes of it on VIRQ_DOM_EXC (`check_domain`).
//!
//! libxenctrl is dlopened by glue.c rather than linked: the shim must start
//! on hosts without Xen's libraries (CI, any non-Xen machine), and its
//! soname changes with every Xen release, so a hard link would tie the
//! binary to one release. glue.c reads only the part of the ABI all
//! supported releases share (xenctrl_abi.h); [`super::libxenctrl`] picks
//! the library of the running hypervisor's release.

use std::io;
use std::path::Path;

use super::libxenctrl::{self, Release};

/// The state bits check_domain reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DomInfo {
    /// Shut down or crashed (xenstored tests both).
    pub shutdown: bool,
    /// Being destroyed: its pages are on their way back to Xen.
    pub dying: bool,
}

/// The three states the tests of the verdict and the monitor start from.
#[cfg(test)]
impl DomInfo {
    pub const RUNNING: DomInfo = DomInfo {
        shutdown: false,
        dying: false,
    };
    pub const SHUT: DomInfo = DomInfo {
        shutdown: true,
        dying: false,
    };
    pub const DYING: DomInfo = DomInfo {
        shutdown: true,
        dying: true,
    };
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

/// Most domains one query asks about (glue.c's XSS_DOMINFO_BATCH): a
/// VIRQ_DOM_EXC firing costs one query per this many domains.
pub const BATCH: usize = 1024;

/// Where domain info comes from: libxenctrl, the simulated hypervisor, or
/// a test's table.
pub trait DomainInfoSource {
    /// As xc_domain_getinfolist: the existing domains with a domid at or
    /// above `first`, in domid order, at most `max` (≤ [`BATCH`]) of them.
    fn list(&mut self, first: u32, max: usize) -> io::Result<Vec<(u32, DomInfo)>>;
}

#[repr(C)]
#[derive(Default)]
struct RawDomInfo {
    domid: u32,
    dying: u8,
    shutdown: u8,
}

extern "C" {
    fn xss_xenctrl_open(
        soname: *const libc::c_char,
        err: *mut libc::c_char,
        len: usize,
    ) -> libc::c_int;
    fn xss_domain_infolist(first: u32, max: libc::c_uint, out: *mut RawDomInfo) -> libc::c_int;
}

/// libxenctrl's handle (one per process, held by glue.c).
pub struct XenCtrl {
    soname: String,
    library: Option<Release>,
    hypervisor: Option<Release>,
}

impl XenCtrl {
    /// Loads the libxenctrl of the running hypervisor's release, else the
    /// newest installed, and checks that Xen answers it (asking about
    /// dom0), so that a library of the wrong release fails here, plainly,
    /// rather than on every domain death.
    pub fn open() -> io::Result<XenCtrl> {
        let hypervisor = libxenctrl::hypervisor_release(Path::new("/sys/hypervisor"));
        let dirs: Vec<&Path> = libxenctrl::LIBRARY_DIRS.iter().map(Path::new).collect();
        let installed = libxenctrl::installed(&dirs);
        let mut tried = Vec::new();
        for soname in libxenctrl::candidates(hypervisor, &installed) {
            match load(&soname) {
                Ok(()) => {
                    let mut ctl = XenCtrl {
                        library: libxenctrl::release_of(&soname),
                        soname,
                        hypervisor,
                    };
                    ctl.list(0, 1)?;
                    return Ok(ctl);
                }
                Err(why) => tried.push(why),
            }
        }
        Err(io::Error::new(
            io::ErrorKind::NotFound,
            not_found(hypervisor, &tried),
        ))
    }

    /// An EACCES from Xen, explained when the library is another release's.
    fn explain(&self, what: String, e: io::Error) -> io::Error {
        let mismatch = match (self.library, self.hypervisor) {
            (Some(lib), Some(xen)) if lib != xen && e.raw_os_error() == Some(libc::EACCES) => {
                format!(
                    " ({} is Xen {}.{}'s and the hypervisor is Xen {}.{}: Xen refuses \
                     another release's libxenctrl when their hypercall interface differs; \
                     install {} ({}))",
                    self.soname,
                    lib.0,
                    lib.1,
                    xen.0,
                    xen.1,
                    libxenctrl::soname(xen),
                    libxenctrl::debian_package(xen),
                )
            }
            _ => String::new(),
        };
        io::Error::new(e.kind(), format!("{what}: {e}{mismatch}"))
    }
}

/// dlopens one soname through glue.c; the loader's reason on failure.
fn load(soname: &str) -> Result<(), String> {
    let name = std::ffi::CString::new(soname).map_err(|e| format!("{soname}: {e}"))?;
    let mut err = [0 as libc::c_char; 256];
    // SAFETY: name is NUL-terminated; err is writable for its length and
    // glue.c NUL-terminates it.
    if unsafe { xss_xenctrl_open(name.as_ptr(), err.as_mut_ptr(), err.len()) } == 0 {
        return Ok(());
    }
    // SAFETY: NUL-terminated by snprintf above.
    let why = unsafe { std::ffi::CStr::from_ptr(err.as_ptr()) };
    Err(why.to_string_lossy().into_owned())
}

/// What is missing, and which package provides it.
fn not_found(hypervisor: Option<Release>, tried: &[String]) -> String {
    let dirs = libxenctrl::LIBRARY_DIRS.join(", ");
    let tried = if tried.is_empty() {
        String::new()
    } else {
        format!(" ({})", tried.join("; "))
    };
    match hypervisor {
        Some(xen) => format!(
            "libxenctrl: no usable {} for the running Xen {}.{}{tried}, and no other \
             libxenctrl.so.4.* in {dirs}: install {} (Debian's package for it)",
            libxenctrl::soname(xen),
            xen.0,
            xen.1,
            libxenctrl::debian_package(xen),
        ),
        None => format!(
            "libxenctrl: no usable library{tried}; looked for libxenctrl.so.4.* in {dirs} \
             (/sys/hypervisor/version does not say the Xen release): install the running \
             Xen's libxenctrl (Debian: libxenmisc4.N)"
        ),
    }
}

impl DomainInfoSource for XenCtrl {
    fn list(&mut self, first: u32, max: usize) -> io::Result<Vec<(u32, DomInfo)>> {
        let max = max.min(BATCH);
        let mut raw: Vec<RawDomInfo> = (0..max).map(|_| RawDomInfo::default()).collect();
        // SAFETY: raw holds max of glue.c's struct xss_dominfo, max ≤ its
        // XSS_DOMINFO_BATCH; the handle is open.
        let n = unsafe { xss_domain_infolist(first, max as libc::c_uint, raw.as_mut_ptr()) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return Err(self.explain(format!("xc_domain_getinfolist({first}, {max})"), e));
        }
        raw.truncate(n as usize);
        Ok(raw
            .into_iter()
            .map(|r| {
                let info = DomInfo {
                    shutdown: r.shutdown != 0,
                    dying: r.dying != 0,
                };
                (r.domid, info)
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    extern "C" {
        fn xss_dominfo_batch() -> libc::c_uint;
    }

    #[test]
    fn the_batch_is_glue_cs() {
        // SAFETY: returns a constant.
        assert_eq!(unsafe { xss_dominfo_batch() } as usize, BATCH);
    }

    #[test]
    fn a_running_domain_is_left_alone() {
        assert_eq!(verdict(Some(DomInfo::RUNNING), false), Verdict::Unchanged);
        // resumed after an announced shutdown: still nothing to do
        assert_eq!(verdict(Some(DomInfo::RUNNING), true), Verdict::Unchanged);
    }

    #[test]
    fn a_shutdown_is_announced_once() {
        assert_eq!(verdict(Some(DomInfo::SHUT), false), Verdict::ShutDown);
        assert_eq!(verdict(Some(DomInfo::SHUT), true), Verdict::Unchanged);
    }

    #[test]
    fn dying_or_gone_domains_are_dead_whatever_was_announced() {
        for announced in [false, true] {
            assert_eq!(verdict(Some(DomInfo::DYING), announced), Verdict::Dead);
            assert_eq!(verdict(None, announced), Verdict::Dead);
            let dying_unshut = DomInfo {
                shutdown: false,
                dying: true,
            };
            assert_eq!(verdict(Some(dying_unshut), announced), Verdict::Dead);
        }
    }

    /// Xen's EACCES for another release's library says which to install.
    #[test]
    fn a_refusal_of_another_releases_library_is_explained() {
        let ctl = XenCtrl {
            soname: "libxenctrl.so.4.17".into(),
            library: Some((4, 17)),
            hypervisor: Some((4, 21)),
        };
        let refused = io::Error::from_raw_os_error(libc::EACCES);
        let msg = ctl
            .explain("xc_domain_getinfolist(0)".into(), refused)
            .to_string();
        assert!(
            msg.starts_with("xc_domain_getinfolist(0): Permission denied"),
            "{msg}"
        );
        assert!(
            msg.contains("libxenctrl.so.4.17 is Xen 4.17's and the hypervisor is Xen 4.21")
                && msg.contains("install libxenctrl.so.4.21 (libxenmisc4.21)"),
            "{msg}"
        );
        // The same release, or another error: nothing to explain.
        let same = XenCtrl {
            hypervisor: Some((4, 17)),
            ..ctl
        };
        let msg = same
            .explain("q".into(), io::Error::from_raw_os_error(libc::EACCES))
            .to_string();
        assert_eq!(msg, "q: Permission denied (os error 13)");
        let other = XenCtrl {
            hypervisor: Some((4, 21)),
            ..same
        };
        let msg = other
            .explain("q".into(), io::Error::from_raw_os_error(libc::ESRCH))
            .to_string();
        assert_eq!(msg, "q: No such process (os error 3)");
    }

    /// The shim on Debian 13 without libxenmisc4.20: the error names the
    /// library, the release and the package.
    #[test]
    fn a_missing_library_is_named_with_its_package() {
        let why = "libxenctrl.so.4.20: cannot open shared object file: No such file or directory";
        let msg = not_found(Some((4, 20)), &[why.to_string()]);
        assert!(
            msg.starts_with("libxenctrl: no usable libxenctrl.so.4.20 for the running Xen 4.20 (")
                && msg.contains(why)
                && msg.ends_with("install libxenmisc4.20 (Debian's package for it)"),
            "{msg}"
        );
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
        let err = err.to_string();
        assert!(err.starts_with("libxenctrl: "), "{err}");
        assert!(err.contains("install "), "names no package: {err}");
    }
}
