//! Not mugging a running daemon: C xenstored unlinks whatever is at its
//! socket path (its own FIXME says so); the shim first tries to connect.

use std::io;
use std::path::Path;

/// Fails when a daemon listens on `socket`: the connection is accepted, or
/// would be but its backlog is full (a non-blocking connect never hangs on
/// a stuck daemon). A stale socket file (connection refused) or none at
/// all is fine: binding replaces it.
pub fn refuse_if_served(socket: &Path) -> io::Result<()> {
    let busy = match mio::net::UnixStream::connect(socket) {
        Ok(_) => "it accepted a connection",
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => "its backlog is full",
        Err(_) => return Ok(()),
    };
    Err(io::Error::new(
        io::ErrorKind::AddrInUse,
        format!(
            "{}: a running xenstored serves this socket ({busy}); not starting",
            socket.display()
        ),
    ))
}
