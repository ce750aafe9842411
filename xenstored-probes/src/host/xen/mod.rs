//! Serving real Xen domains from dom0, chosen at run time: when
//! /proc/xen/capabilities says `control_d`, the daemon serves dom0's own
//! ring (/proc/xen/xsd_kva, /proc/xen/xsd_port) before anything else, maps
//! each introduced guest's page (grant, else foreign frame), binds its port,
//! and follows VIRQ_DOM_EXC to announce shutdowns and release dead domains,
//! as C xenstored 4.17 does (tools/xenstore/xenstored_domain.c).
//!
//! Rings go through the same [`crate::conn::ring`] server code as simulated ones,
//! so a guest's corrupt indices or oversized lengths meet the same
//! [`crate::conn::ring::RingError`] handling.

pub mod ctrl;
pub mod evtchn;
pub mod libxenctrl;
pub mod monitor;
pub mod page;
pub mod simulated;
pub mod sys;

use std::io;
use std::path::{Path, PathBuf};

use crate::conn::ring::conn::{Attached, RingBackend};
use crate::conn::ring::transport::RingTransport;
use crate::conn::transport::{Attachment, DomainBackend};
use crate::server::Server;

/// Where a Linux dom0 shows its Xen interfaces (the xenfs mount).
pub const PROC_XEN: &str = "/proc/xen";

/// True when `proc_xen`/capabilities names this domain the control domain.
pub fn is_dom0(proc_xen: &Path) -> bool {
    std::fs::read_to_string(proc_xen.join("capabilities")).is_ok_and(|caps| {
        caps.split(|c: char| c == ',' || c.is_whitespace())
            .any(|c| c == "control_d")
    })
}

/// INTRODUCE on a Xen dom0: every domain is a mapped ring.
pub struct XenDomains;

impl RingBackend for XenDomains {
    fn attach(&self, domid: u16, gfn: u64, port: u32) -> io::Result<Attached> {
        let page = page::map_guest(domid, gfn)?;
        let channel = evtchn::XenChannel::bind(domid, port)?;
        Ok(Attached {
            page,
            channel: Box::new(channel),
        })
    }
}

impl DomainBackend for XenDomains {
    fn introduce(&mut self, domid: u32, gfn: u64, port: u32) -> io::Result<Attachment> {
        let ring = RingTransport::attach(&*self, domid, gfn, port)?;
        Ok(Attachment::Connection(Box::new(ring)))
    }

    /// The page is unmapped and the port unbound when the daemon drops the
    /// domain's transport.
    fn release(&mut self, _domid: u32) {}
}

/// dom0's ring, as dom0_init: the kernel's page and the port it allocated.
struct Dom0Ring {
    proc_xen: PathBuf,
}

impl RingBackend for Dom0Ring {
    fn attach(&self, domid: u16, _gfn: u64, port: u32) -> io::Result<Attached> {
        let page = page::map_dom0(&self.proc_xen.join("xsd_kva"))?;
        let channel = evtchn::XenChannel::bind(domid, port)?;
        Ok(Attached {
            page: Box::new(page),
            channel: Box::new(channel),
        })
    }
}

/// The port in `proc_xen`/xsd_port.
pub fn dom0_port(proc_xen: &Path) -> io::Result<u32> {
    let path = proc_xen.join("xsd_port");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    text.trim().parse().map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {:?} is not a port", path.display(), text.trim()),
        )
    })
}

/// Makes `server` a dom0 xenstored: dom0's ring attached (served first:
/// its kernel and any client that fell back to /dev/xen/xenbus wait on
/// it) and VIRQ_DOM_EXC followed. Call before listening on the socket.
/// Returns the connection serving dom0's ring.
pub fn serve_dom0(server: &mut Server, proc_xen: &Path) -> io::Result<u32> {
    let ctl = ctrl::XenCtrl::open()?;
    let virq = evtchn::DomExcVirq::bind()?;
    let port = dom0_port(proc_xen)?;
    let ring = RingTransport::attach(
        &Dom0Ring {
            proc_xen: proc_xen.to_path_buf(),
        },
        0,
        0,
        port,
    )
    .map_err(|e| io::Error::new(e.kind(), format!("dom0 ring: {e}")))?;
    let id = server.attach(Box::new(ring), 0)?;
    server.monitor_domains(Box::new(monitor::DomExcMonitor::new(virq, ctl)))?;
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proc_dir(files: &[(&str, &str)]) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "xss-proc-xen-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for (name, text) in files {
            std::fs::write(dir.join(name), text).unwrap();
        }
        dir
    }

    #[test]
    fn only_the_control_domain_is_dom0() {
        assert!(is_dom0(&proc_dir(&[("capabilities", "control_d\n")])));
        assert!(is_dom0(&proc_dir(&[("capabilities", "foo,control_d\n")])));
        // a domU's xenfs shows an empty capabilities file
        assert!(!is_dom0(&proc_dir(&[("capabilities", "")])));
        assert!(!is_dom0(&proc_dir(&[("capabilities", "control_dx\n")])));
        // no xenfs at all: not Xen
        assert!(!is_dom0(&proc_dir(&[])));
    }

    #[test]
    fn the_dom0_port_is_read_and_checked() {
        assert_eq!(dom0_port(&proc_dir(&[("xsd_port", "7\n")])).unwrap(), 7);
        let bad = dom0_port(&proc_dir(&[("xsd_port", "seven")])).unwrap_err();
        assert!(bad.to_string().contains("\"seven\" is not a port"), "{bad}");
        let missing = dom0_port(&proc_dir(&[])).unwrap_err();
        assert!(missing.to_string().contains("xsd_port"), "{missing}");
    }
}
