//! Live update, the process side: this image was exec'd with `-U` by the
//! xenstored it replaces, in the same process, with the state that daemon
//! left in `<run-dir>/state_dump` and the fds that state lists still open
//! (C xenstored 4.17–4.20's `lu_exec`). The daemon side, what the state
//! means to the store and the connections, is daemon/restore.rs.

use crate::conn::transport::Attachment;
use crate::conn::unix::{SocketListener, SocketTransport};
use crate::migration::stream::{ConnKind, State};
use crate::server::Server;
use std::collections::HashSet;
use std::path::Path;

/// Where C xenstored writes its state: its run (= root) directory.
pub const STATE_FILE: &str = "state_dump";

/// Reads the state the previous image left and removes the file; on a bad
/// stream the file stays, for whoever has to find out what went wrong.
pub fn take_state(run_dir: &Path) -> Result<State, String> {
    let file = run_dir.join(STATE_FILE);
    let bytes = std::fs::read(&file).map_err(|e| format!("{}: {e}", file.display()))?;
    let state =
        crate::migration::stream::read(&bytes).map_err(|e| format!("{}: {e}", file.display()))?;
    std::fs::remove_file(&file).map_err(|e| format!("{}: {e}", file.display()))?;
    Ok(state)
}

/// Reads oxenstored's dump (it exec'd this image with `--live --restart`)
/// and removes it; a bad one stays.
pub fn take_oxenstored_state(file: &Path) -> Result<State, String> {
    let text = std::fs::read(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let state = crate::migration::oxenstored::read(&String::from_utf8_lossy(&text))
        .map_err(|e| format!("{}: {e}", file.display()))?;
    std::fs::remove_file(file).map_err(|e| format!("{}: {e}", file.display()))?;
    Ok(state)
}

/// Closes the event-channel device the previous image served its rings
/// through (the stream's GLOBAL evtchn fd). Closing it unbinds every port
/// bound on it, so that each ring's channel, dom0's included, binds again
/// in this image, one device open per channel as the shim keeps them; the
/// previous image already unbound VIRQ_DOM_EXC. Call before serving dom0.
pub fn release_event_channels(state: &State) {
    let Some(global) = state.global else {
        return;
    };
    let fd = global.evtchn_fd;
    let is_socket = fd == global.socket_fd
        || state
            .connections
            .iter()
            .any(|c| c.kind == ConnKind::Socket { fd });
    if fd > 2 && !is_socket {
        // SAFETY: nothing in this process owns the fd: the process started
        // with it inherited, and std opens nothing that survives exec.
        unsafe { libc::close(fd) };
    }
}

/// What was taken over, for the log.
#[derive(Debug, Default)]
pub struct Adopted {
    /// The listening socket's fd (the next update hands it on).
    pub listener_fd: i32,
    pub nodes: usize,
    pub connections: usize,
    pub watches: usize,
    /// What could not be taken over, and why; the daemon serves the rest.
    pub skipped: Vec<String>,
}

/// Adopts the listening socket at `socket` (or binds it afresh when the
/// previous daemon had none) and every connection the state lists, with
/// its watches and buffered bytes. `dom0_ring`: the connection serving
/// dom0's ring, when this is a dom0 (`xen::serve_dom0` attached it).
/// Fails only when the daemon cannot serve at all (no store, no socket); a
/// connection that cannot be taken over is closed and reported.
pub fn adopt(
    server: &mut Server,
    state: &State,
    socket: &Path,
    dom0_ring: Option<u32>,
) -> Result<Adopted, String> {
    let mut adopted = Adopted {
        nodes: server.daemon_mut().restore_store(&state.nodes)?,
        ..Adopted::default()
    };
    let mut taken = HashSet::new();
    let listener = match state.global.map(|g| g.socket_fd).filter(|&fd| fd >= 0) {
        Some(fd) => {
            taken.insert(fd);
            SocketListener::adopt(fd, socket)
                .map_err(|e| format!("the listening socket {}: {e}", socket.display()))?
        }
        None => SocketListener::bind(socket, false).map_err(|e| format!("listening: {e}"))?,
    };
    adopted.listener_fd = listener.raw_fd();
    server
        .listen(Box::new(listener), 0)
        .map_err(|e| format!("polling the socket: {e}"))?;

    for conn in &state.connections {
        let watches: Vec<_> = state
            .watches
            .iter()
            .filter(|w| w.conn_id == conn.id)
            .collect();
        let attached = match conn.kind {
            ConnKind::Socket { fd } if !taken.insert(fd) => Err(format!("fd {fd} listed twice")),
            ConnKind::Socket { fd } => SocketTransport::adopt(fd)
                .and_then(|t| server.attach(Box::new(t), 0))
                .map(Some)
                .map_err(|e| e.to_string()),
            ConnKind::Ring { domid: 0, .. } => dom0_ring
                .map(Some)
                .ok_or_else(|| "no hypervisor here".to_string()),
            ConnKind::Ring { domid, target, .. } => {
                let domid = domid as u32;
                match server
                    .daemon_mut()
                    .restore_domain(domid, target.map(u32::from))
                {
                    Ok(Attachment::Connection(t)) => server.attach(t, domid).map(Some),
                    // A test backend's per-domain socket: its clients
                    // connect again.
                    Ok(Attachment::Listener(l)) => server.listen(l, domid).map(|()| None),
                    Err(e) => Err(e),
                }
                .map_err(|e| e.to_string())
            }
        };
        let what = match conn.kind {
            ConnKind::Socket { fd } => format!("socket connection (fd {fd})"),
            ConnKind::Ring { domid, .. } => format!("domain {domid}'s ring"),
        };
        match attached {
            Ok(Some(id)) => match server.daemon_mut().restore_connection(id, conn, &watches) {
                Ok(()) => {
                    adopted.connections += 1;
                    adopted.watches += watches.len();
                }
                Err(e) => {
                    server.daemon_mut().close(id, 0, "live update");
                    adopted.skipped.push(format!("{what}: {e}"));
                }
            },
            Ok(None) if watches.is_empty() => adopted.connections += 1,
            Ok(None) => adopted
                .skipped
                .push(format!("{what}: its {} watches", watches.len())),
            Err(e) => adopted.skipped.push(format!("{what}: {e}")),
        }
    }
    Ok(adopted)
}
