//! SIGTERM, SIGINT and SIGHUP as a readable descriptor (signalfd): the
//! event loop stops between requests, and the daemon cleans up and exits
//! or (SIGHUP, as C xenstored) reopens its trace file and goes on.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

pub struct StopSignals {
    fd: OwnedFd,
}

impl StopSignals {
    /// Blocks SIGTERM, SIGINT and SIGHUP: they stay pending for the
    /// descriptor.
    pub fn new() -> io::Result<StopSignals> {
        // SAFETY: plain libc calls on a sigset_t we own; the daemon has
        // one thread, so the process mask is this thread's.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGTERM);
            libc::sigaddset(&mut set, libc::SIGINT);
            libc::sigaddset(&mut set, libc::SIGHUP);
            if libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
                return Err(io::Error::last_os_error());
            }
            let fd = libc::signalfd(-1, &set, libc::SFD_NONBLOCK | libc::SFD_CLOEXEC);
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(StopSignals {
                fd: OwnedFd::from_raw_fd(fd),
            })
        }
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Reads every pending signal (the descriptor is polled
    /// edge-triggered, so none may be left behind).
    pub fn drain(&self) -> Received {
        let mut got = Received::default();
        loop {
            // SAFETY: signalfd_siginfo is plain integers; all zeroes is valid.
            let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
            let size = std::mem::size_of::<libc::signalfd_siginfo>();
            // SAFETY: reading one signalfd_siginfo into a buffer of its size.
            let n =
                unsafe { libc::read(self.fd(), &mut info as *mut _ as *mut libc::c_void, size) };
            if n as usize != size {
                return got;
            }
            match info.ssi_signo as i32 {
                libc::SIGHUP => got.hangup = true,
                libc::SIGINT => got.stop = got.stop.or(Some("SIGINT")),
                _ => got.stop = got.stop.or(Some("SIGTERM")),
            }
        }
    }
}

/// What `drain` found.
#[derive(Debug, Default)]
pub struct Received {
    /// SIGTERM or SIGINT: stop.
    pub stop: Option<&'static str>,
    /// SIGHUP: reopen the trace file.
    pub hangup: bool,
}
