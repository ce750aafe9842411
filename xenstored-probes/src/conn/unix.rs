//! Unix-socket transports: the dom0 socket (SO_PEERCRED pid per
//! connection) and the test domain backend, which gives each introduced
//! domain a socket `<run-dir>/domain/<domid>` whose connections are that
//! domain's (unprivileged, relative paths, quotas, pid 0).

use crate::conn::transport::{Attachment, DomainBackend, Listener, Transport};
use mio::net::{UnixListener, UnixStream};
use std::io::{self, Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

pub struct SocketTransport {
    stream: UnixStream,
    /// A test domain's connection (pid 0), not a dom0 client's.
    domain: bool,
    pid: u32,
    /// SO_PEERCRED's pid and uid, for the peer description.
    cred: (u32, u32),
}

impl SocketTransport {
    fn new(stream: UnixStream, domain: bool) -> SocketTransport {
        let cred = peer_cred(&stream).unwrap_or((0, u32::MAX));
        SocketTransport {
            stream,
            domain,
            pid: if domain { 0 } else { cred.0 },
            cred,
        }
    }
}

/// The command name of `pid` (/proc/PID/comm), if it can be read.
fn comm_of(pid: u32) -> Option<String> {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    Some(comm.trim_end_matches('\n').to_string())
}

fn peer_cred(s: &UnixStream) -> io::Result<(u32, u32)> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: a valid socket fd and a correctly sized out-buffer.
    let rc = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            &mut cred as *mut _ as *mut libc::c_void,
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((cred.pid as u32, cred.uid))
}

impl Transport for SocketTransport {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.stream.read(buf)
    }
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.stream.write(buf)
    }
    fn source(&mut self) -> &mut dyn mio::event::Source {
        &mut self.stream
    }
    fn kind(&self) -> &'static str {
        "socket"
    }
    fn peer(&self) -> String {
        // Read when conn_open fires, right after accept: a short-lived
        // client is still there to be named.
        let (pid, uid) = self.cred;
        let comm = (pid != 0).then(|| comm_of(pid)).flatten();
        xenstore_proto::peer::socket_peer(pid, uid, comm.as_deref())
    }
    fn pid(&self) -> u32 {
        self.pid
    }
    fn short_read_drains(&self) -> bool {
        true
    }
    fn readiness_names_direction(&self) -> bool {
        true
    }
    fn write_fd(&self) -> Option<std::os::fd::RawFd> {
        Some(self.stream.as_raw_fd())
    }
    fn inherited_fd(&self) -> Option<std::os::fd::RawFd> {
        (!self.domain).then(|| self.stream.as_raw_fd())
    }
}

/// A listening socket at `path` (mode 0600, a stale socket replaced).
pub struct SocketListener {
    listener: UnixListener,
    path: PathBuf,
    /// Connections are a domain's (pid reported as 0).
    domain: bool,
}

impl SocketListener {
    pub fn bind(path: &Path, domain: bool) -> io::Result<SocketListener> {
        let ctx = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(ctx)?;
        }
        match std::fs::remove_file(path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(ctx(e)),
            _ => {}
        }
        let listener = UnixListener::bind(path).map_err(ctx)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(ctx)?;
        Ok(SocketListener {
            listener,
            path: path.to_path_buf(),
            domain,
        })
    }
}

impl SocketListener {
    /// Live update: the listening socket at `path` the previous daemon
    /// handed over as fd `fd`.
    pub fn adopt(fd: i32, path: &Path) -> io::Result<SocketListener> {
        let listener = std::os::unix::net::UnixListener::from(inherited_socket(fd, true)?);
        listener.set_nonblocking(true)?;
        Ok(SocketListener {
            listener: UnixListener::from_std(listener),
            path: path.to_path_buf(),
            domain: false,
        })
    }
}

impl SocketTransport {
    /// Live update: a dom0 client's connection the previous daemon handed
    /// over as fd `fd`.
    pub fn adopt(fd: i32) -> io::Result<SocketTransport> {
        let stream = std::os::unix::net::UnixStream::from(inherited_socket(fd, false)?);
        stream.set_nonblocking(true)?;
        Ok(SocketTransport::new(UnixStream::from_std(stream), false))
    }
}

/// An fd number the previous daemon listed in its state: it must be an
/// open Unix socket, listening or connected as expected. It is made
/// close-on-exec, so that a later update hands on only what its own state
/// lists. The caller takes each number once.
fn inherited_socket(fd: i32, listening: bool) -> io::Result<OwnedFd> {
    let bad = |why: String| io::Error::new(io::ErrorKind::InvalidData, format!("fd {fd}: {why}"));
    if fd <= 2 {
        return Err(bad("a standard stream, not a socket".to_string()));
    }
    let int_opt = |opt: libc::c_int| -> io::Result<libc::c_int> {
        let mut v: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: any fd number may be asked; the out-buffer is an int
        // and its size is passed.
        let rc = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                opt,
                &mut v as *mut _ as *mut libc::c_void,
                &mut len,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(v)
    };
    let family = int_opt(libc::SO_DOMAIN).map_err(|e| bad(format!("not an open socket ({e})")))?;
    if family != libc::AF_UNIX {
        return Err(bad(format!("socket family {family}, not a Unix socket")));
    }
    let accepting = int_opt(libc::SO_ACCEPTCONN)?;
    if (accepting != 0) != listening {
        let what = if listening {
            "not listening"
        } else {
            "a listening socket"
        };
        return Err(bad(what.to_string()));
    }
    // SAFETY: fcntl on an fd that is open (getsockopt succeeded on it).
    if unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the fd is open, and nothing in this process owns it: the
    // process started with it inherited, std never opens fds that survive
    // exec, and the caller takes each number once.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

impl SocketListener {
    /// The listening fd, which a live update hands to the next image.
    pub fn raw_fd(&self) -> std::os::fd::RawFd {
        self.listener.as_raw_fd()
    }
}

impl Drop for SocketListener {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Listener for SocketListener {
    fn source(&mut self) -> &mut dyn mio::event::Source {
        &mut self.listener
    }
    fn accept(&mut self) -> io::Result<Option<Box<dyn Transport>>> {
        match self.listener.accept() {
            Ok((stream, _)) => Ok(Some(Box::new(SocketTransport::new(stream, self.domain)))),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// The simple domain backend: INTRODUCE creates `<run-dir>/domain/<domid>`.
pub struct SocketDomainBackend {
    dir: PathBuf,
}

impl SocketDomainBackend {
    pub fn new(run_dir: &Path) -> SocketDomainBackend {
        SocketDomainBackend {
            dir: run_dir.join("domain"),
        }
    }

    pub fn socket_path(&self, domid: u32) -> PathBuf {
        self.dir.join(domid.to_string())
    }
}

impl DomainBackend for SocketDomainBackend {
    fn introduce(&mut self, domid: u32, _gfn: u64, _port: u32) -> io::Result<Attachment> {
        let l = SocketListener::bind(&self.socket_path(domid), true)?;
        Ok(Attachment::Listener(Box::new(l)))
    }

    fn release(&mut self, domid: u32) {
        // The listener's drop removes the socket; this covers a listener
        // that never got registered.
        let _ = std::fs::remove_file(self.socket_path(domid));
    }
}
