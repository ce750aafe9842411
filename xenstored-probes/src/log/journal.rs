//! systemd's native journal protocol: an entry is one datagram of fields
//! to /run/systemd/journal/socket; an entry too big for a datagram goes in
//! a sealed memfd whose descriptor is sent instead (systemd.journal-fields,
//! "Native protocol"). Hand-written on libc: two system calls, no crate
//! pulling a logging facade and an allocator of its own into the daemon.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixDatagram;
use std::path::Path;

pub const SOCKET: &str = "/run/systemd/journal/socket";

/// A socket to send journald entries from. Unconnected: each entry is
/// addressed anew, so a restarted journald is found again.
pub struct Journal {
    socket: UnixDatagram,
}

impl Journal {
    pub fn new() -> io::Result<Journal> {
        Ok(Journal {
            socket: UnixDatagram::unbound()?,
        })
    }

    /// Sends one entry; `fields` are (NAME, value), names in journald's
    /// form (upper case, digits, underscores, not starting with one). An
    /// error (ENOENT, ECONNREFUSED: no journald) sends the caller to syslog.
    pub fn send(&self, fields: &[(&str, &str)]) -> io::Result<()> {
        self.send_to(Path::new(SOCKET), fields)
    }

    /// As `send`, to journald's socket at `socket` (a test reaches a
    /// journald in another mount namespace through /proc/PID/root).
    pub fn send_to(&self, socket: &Path, fields: &[(&str, &str)]) -> io::Result<()> {
        let entry = encode(fields);
        match self.socket.send_to(&entry, socket) {
            Ok(_) => Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EMSGSIZE) => self.send_memfd(socket, &entry),
            Err(e) => Err(e),
        }
    }

    fn send_memfd(&self, socket: &Path, entry: &[u8]) -> io::Result<()> {
        // SAFETY: a constant name; the returned descriptor is owned below.
        let fd = unsafe {
            libc::memfd_create(
                c"xenstored-shim-journal".as_ptr(),
                libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd was just created and nothing else owns it.
        let memfd = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut file = std::fs::File::from(memfd);
        io::Write::write_all(&mut file, entry)?;
        // journald accepts only a sealed memfd: it must not change under it.
        let seals =
            libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE | libc::F_SEAL_SEAL;
        // SAFETY: fcntl on a descriptor this function owns.
        if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_ADD_SEALS, seals) } < 0 {
            return Err(io::Error::last_os_error());
        }
        send_fd(&self.socket, socket, file.as_raw_fd())
    }
}

/// `NAME=value\n` per field; a value holding a newline is framed instead
/// as `NAME\n`, its length (u64, little-endian), the bytes, `\n`.
pub fn encode(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, value) in fields {
        out.extend_from_slice(name.as_bytes());
        if value.contains('\n') {
            out.push(b'\n');
            out.extend_from_slice(&(value.len() as u64).to_le_bytes());
        } else {
            out.push(b'=');
        }
        out.extend_from_slice(value.as_bytes());
        out.push(b'\n');
    }
    out
}

/// One SCM_RIGHTS message carrying `fd` and no data.
fn send_fd(socket: &UnixDatagram, to: &Path, fd: libc::c_int) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    const FD_LEN: u32 = std::mem::size_of::<libc::c_int>() as u32;
    // u64s: the control buffer must be aligned for cmsghdr.
    let mut control = [0u64; 4];
    // SAFETY: CMSG_SPACE is pure arithmetic.
    let space = unsafe { libc::CMSG_SPACE(FD_LEN) } as usize;
    assert!(space <= std::mem::size_of_val(&control));
    // SAFETY: an all-zero msghdr is valid; the pointers set below live
    // until sendmsg returns, and the cmsg lies within `control`.
    unsafe {
        let mut addr: libc::sockaddr_un = std::mem::zeroed();
        addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
        let path = to.as_os_str().as_bytes();
        if path.len() >= addr.sun_path.len() {
            return Err(io::ErrorKind::InvalidInput.into());
        }
        for (d, s) in addr.sun_path.iter_mut().zip(path) {
            *d = *s as libc::c_char;
        }
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_name = (&raw mut addr).cast();
        msg.msg_namelen = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(FD_LEN) as usize;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>(), fd);
        if libc::sendmsg(socket.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::encode;

    #[test]
    fn a_value_with_a_newline_is_framed_by_its_length() {
        let got = encode(&[("MESSAGE", "a\nb"), ("XS_DOMID", "7")]);
        let mut want = b"MESSAGE\n".to_vec();
        want.extend_from_slice(&3u64.to_le_bytes());
        want.extend_from_slice(b"a\nb\nXS_DOMID=7\n");
        assert_eq!(got, want);
    }
}
