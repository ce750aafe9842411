//! Not mugging a running daemon: C xenstored unlinks whatever is at its
//! socket path (its own FIXME says so); the shim first tries to connect.

use std::io;
use std::os::unix::net::UnixStream;
use std::path::Path;

/// Fails when a daemon accepts connections on `socket`. A stale socket
/// file (connection refused) or none at all is fine: binding replaces it.
pub fn refuse_if_served(socket: &Path) -> io::Result<()> {
    match UnixStream::connect(socket) {
        Ok(_) => Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            format!(
                "{}: a running xenstored serves this socket (it accepted a connection); not starting",
                socket.display()
            ),
        )),
        Err(_) => Ok(()),
    }
}
