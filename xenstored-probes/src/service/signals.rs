//! SIGTERM and SIGINT as a readable descriptor (signalfd), so the event
//! loop stops between requests and the daemon can clean up; SIGHUP, which
//! makes C xenstored reopen its trace file, is ignored.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

pub struct StopSignals {
    fd: OwnedFd,
}

impl StopSignals {
    /// Blocks SIGTERM and SIGINT (they stay pending for the descriptor)
    /// and ignores SIGHUP.
    pub fn new() -> io::Result<StopSignals> {
        // SAFETY: plain libc calls on a sigset_t we own; the daemon has
        // one thread, so the process mask is this thread's.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGTERM);
            libc::sigaddset(&mut set, libc::SIGINT);
            if libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
                return Err(io::Error::last_os_error());
            }
            let fd = libc::signalfd(-1, &set, libc::SFD_NONBLOCK | libc::SFD_CLOEXEC);
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            libc::signal(libc::SIGHUP, libc::SIG_IGN);
            Ok(StopSignals {
                fd: OwnedFd::from_raw_fd(fd),
            })
        }
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// The name of a signal received, if one is pending.
    pub fn received(&self) -> Option<&'static str> {
        // SAFETY: reading one signalfd_siginfo into a buffer of its size.
        let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<libc::signalfd_siginfo>();
        let n = unsafe { libc::read(self.fd(), &mut info as *mut _ as *mut libc::c_void, size) };
        if n as usize != size {
            return None;
        }
        Some(match info.ssi_signo as i32 {
            libc::SIGTERM => "SIGTERM",
            libc::SIGINT => "SIGINT",
            _ => "a signal",
        })
    }
}
