//! Event channels through /dev/xen/evtchn: a ring's interdomain channel
//! and dom0's VIRQ_DOM_EXC. Each holds its own open of the device, so
//! reading it yields only its own fired ports.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};

use super::sys::{self, BindInterdomain, BindVirq, Port};
use crate::conn::ring::conn::{EventChannel, FdSource, Liveness};
use crate::conn::transport::SharedChannels;
use mio::event::Source;

/// A fresh /dev/xen/evtchn open that survives exec, for a live update's
/// target to take every ring's channel on.
pub fn open_shared() -> io::Result<SharedChannels> {
    let evtchn = sys::open_dev("/dev/xen/evtchn")?;
    // SAFETY: fcntl on an fd this function owns.
    if unsafe { libc::fcntl(evtchn.as_raw_fd(), libc::F_SETFD, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(SharedChannels::new(evtchn.into()))
}

fn bind_interdomain(fd: RawFd, domid: u16, remote_port: u32) -> io::Result<u32> {
    let mut req = BindInterdomain {
        remote_domain: domid as u32,
        remote_port,
    };
    sys::ioctl(
        fd,
        sys::IOCTL_EVTCHN_BIND_INTERDOMAIN,
        &mut req,
        "IOCTL_EVTCHN_BIND_INTERDOMAIN",
    )
    .map(|port| port as u32)
}

fn unbind(fd: RawFd, port: u32) -> io::Result<()> {
    let mut req = Port { port };
    sys::ioctl(
        fd,
        sys::IOCTL_EVTCHN_UNBIND,
        &mut req,
        "IOCTL_EVTCHN_UNBIND",
    )
    .map(drop)
}

/// A bound port, unbound on drop.
struct Bound {
    evtchn: File,
    local_port: u32,
}

impl Bound {
    /// Reads the fired ports and writes them back, which unmasks them.
    fn drain(&self) -> io::Result<()> {
        let mut buf = [0u8; 4 * 64];
        loop {
            match (&self.evtchn).read(&mut buf) {
                Ok(0) => return Ok(()),
                Ok(n) => (&self.evtchn).write_all(&buf[..n - n % 4])?,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

impl Drop for Bound {
    fn drop(&mut self) {
        let _ = unbind(self.evtchn.as_raw_fd(), self.local_port);
    }
}

/// An interdomain channel to a domain's xenstore port (dom0's own too:
/// its kernel allocated the port with itself as the remote end).
pub struct XenChannel {
    bound: Bound,
    domid: u16,
    remote_port: u32,
    /// The evtchn fd, as the event loop polls it.
    source: FdSource,
}

impl XenChannel {
    pub fn bind(domid: u16, remote_port: u32) -> io::Result<XenChannel> {
        let evtchn = sys::open_dev("/dev/xen/evtchn")?;
        let local_port = bind_interdomain(evtchn.as_raw_fd(), domid, remote_port)?;
        Ok(XenChannel {
            source: FdSource(evtchn.as_raw_fd()),
            bound: Bound { evtchn, local_port },
            domid,
            remote_port,
        })
    }
}

impl EventChannel for XenChannel {
    fn notify(&self) -> io::Result<()> {
        let mut req = Port {
            port: self.bound.local_port,
        };
        sys::ioctl(
            self.bound.evtchn.as_raw_fd(),
            sys::IOCTL_EVTCHN_NOTIFY,
            &mut req,
            "IOCTL_EVTCHN_NOTIFY",
        )
        .map(drop)
    }

    fn source(&mut self) -> &mut dyn Source {
        &mut self.source
    }

    fn fd(&self) -> RawFd {
        self.source.0
    }

    /// A Xen ring never reports its domain gone: VIRQ_DOM_EXC does.
    fn drain(&self) -> io::Result<Liveness> {
        self.bound.drain()?;
        Ok(Liveness::Alive)
    }

    fn describe(&self) -> String {
        format!(
            "xen domain {} port {} (local {})",
            self.domid, self.remote_port, self.bound.local_port
        )
    }

    /// Xen binds an interdomain port only while its remote end is unbound:
    /// unbound here first, bound back here if `shared` fails.
    fn move_to(&mut self, shared: &mut SharedChannels) -> io::Result<u32> {
        let own = self.bound.evtchn.as_raw_fd();
        unbind(own, self.bound.local_port)?;
        bind_interdomain(shared.fd(), self.domid, self.remote_port).or_else(|e| {
            self.move_back()?;
            Err(e)
        })
    }

    fn move_back(&mut self) -> io::Result<()> {
        let own = self.bound.evtchn.as_raw_fd();
        self.bound.local_port = bind_interdomain(own, self.domid, self.remote_port)?;
        Ok(())
    }
}

/// VIRQ_DOM_EXC bound in dom0: fires when any domain shuts down, crashes
/// or dies.
pub struct DomExcVirq {
    bound: Bound,
}

fn bind_dom_exc(fd: RawFd) -> io::Result<u32> {
    let mut req = BindVirq {
        virq: sys::VIRQ_DOM_EXC,
    };
    sys::ioctl(
        fd,
        sys::IOCTL_EVTCHN_BIND_VIRQ,
        &mut req,
        "IOCTL_EVTCHN_BIND_VIRQ(VIRQ_DOM_EXC)",
    )
    .map(|port| port as u32)
}

impl DomExcVirq {
    pub fn bind() -> io::Result<DomExcVirq> {
        let evtchn = sys::open_dev("/dev/xen/evtchn")?;
        let local_port = bind_dom_exc(evtchn.as_raw_fd())?;
        Ok(DomExcVirq {
            bound: Bound { evtchn, local_port },
        })
    }

    /// A VIRQ is bound once: unbound here first, bound back here if
    /// `shared` fails.
    pub fn move_to(&mut self, shared: &mut SharedChannels) -> io::Result<u32> {
        unbind(self.fd(), self.bound.local_port)?;
        bind_dom_exc(shared.fd()).or_else(|e| {
            self.move_back()?;
            Err(e)
        })
    }

    pub fn move_back(&mut self) -> io::Result<()> {
        self.bound.local_port = bind_dom_exc(self.fd())?;
        Ok(())
    }

    pub fn fd(&self) -> RawFd {
        self.bound.evtchn.as_raw_fd()
    }

    /// Consumes (and unmasks) the pending firings.
    pub fn drain(&self) -> io::Result<()> {
        self.bound.drain()
    }
}
