//! systemd's readiness protocol (sd_notify(3)) by hand: one datagram
//! "READY=1" to $NOTIFY_SOCKET, as C xenstored sends under Type=notify.

use std::io;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};

/// Sends READY=1 when $NOTIFY_SOCKET is set; Ok(false) when it is not.
pub fn ready() -> io::Result<bool> {
    let Some(target) = std::env::var_os("NOTIFY_SOCKET") else {
        return Ok(false);
    };
    let addr = match target.as_bytes().strip_prefix(b"@") {
        Some(name) => SocketAddr::from_abstract_name(name)?,
        None => SocketAddr::from_pathname(&target)?,
    };
    let ctx = |e: io::Error| io::Error::new(e.kind(), format!("NOTIFY_SOCKET: {e}"));
    let socket = UnixDatagram::unbound().map_err(ctx)?;
    socket.send_to_addr(b"READY=1", &addr).map_err(ctx)?;
    Ok(true)
}
