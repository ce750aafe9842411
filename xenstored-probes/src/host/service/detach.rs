//! Detaching from the caller as C xenstored's daemonize() does (fork,
//! setsid, fork again, chdir /), except that the caller's process exits
//! only when the daemon says it serves: a start script may connect as
//! soon as `xenstored-shim --pid-file F` returns, and F is written by then.
//! A start-up failure in the daemon makes the caller exit 1 with the
//! daemon's message on its stderr.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};

const READY: &[u8] = b"READY";

/// The daemon's end of the start-up handshake.
pub struct Detached {
    to_caller: File,
}

/// Forks into the background. Returns only in the daemon; the calling
/// process waits there for the daemon's verdict and exits with it.
/// Must be called while the process has one thread.
pub fn detach() -> io::Result<Detached> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two descriptors that we then own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fresh descriptors from pipe2.
    let (read_end, write_end) =
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    match fork()? {
        Some(child) => {
            drop(write_end);
            wait_for_daemon(File::from(read_end), child)
        }
        None => {
            drop(read_end);
            // SAFETY: setsid in a fresh child (never a group leader).
            unsafe { libc::setsid() };
            // Leave the session leader so the daemon can never regain a
            // controlling terminal.
            if fork()?.is_some() {
                // SAFETY: exit without running the caller's destructors
                // (they would remove the socket the daemon serves).
                unsafe { libc::_exit(0) };
            }
            std::env::set_current_dir("/")?;
            Ok(Detached {
                to_caller: File::from(write_end),
            })
        }
    }
}

/// Some(pid) in the parent, None in the child.
fn fork() -> io::Result<Option<libc::pid_t>> {
    // SAFETY: the caller guarantees a single thread.
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        0 => Ok(None),
        pid => Ok(Some(pid)),
    }
}

fn wait_for_daemon(mut from_daemon: File, child: libc::pid_t) -> ! {
    let mut said = Vec::new();
    let code = match from_daemon.read_to_end(&mut said) {
        Ok(_) if said == READY => 0,
        Ok(_) if said.is_empty() => {
            eprintln!("xenstored-shim: the daemon exited during start-up");
            1
        }
        Ok(_) => {
            eprintln!("xenstored-shim: {}", String::from_utf8_lossy(&said));
            1
        }
        Err(e) => {
            eprintln!("xenstored-shim: waiting for the daemon: {e}");
            1
        }
    };
    // Reap the intermediate process; the daemon is init's now.
    // SAFETY: waiting for our child, status discarded.
    unsafe { libc::waitpid(child, std::ptr::null_mut(), 0) };
    // SAFETY: exit without running destructors: the daemon owns the
    // socket, the pid file and the rings now.
    unsafe { libc::_exit(code) }
}

impl Detached {
    /// The daemon serves: stdio goes to /dev/null and the caller exits 0.
    pub fn ready(mut self) -> io::Result<()> {
        let null = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/null")?;
        for fd in 0..=2 {
            // SAFETY: dup2 onto the standard descriptors.
            if unsafe { libc::dup2(std::os::fd::AsRawFd::as_raw_fd(&null), fd) } < 0 {
                return Err(io::Error::last_os_error());
            }
        }
        self.to_caller.write_all(READY)
    }

    /// Start-up failed: the caller prints `why` and exits 1.
    pub fn failed(mut self, why: &str) {
        let _ = self.to_caller.write_all(why.as_bytes());
    }
}
