//! Taking over the state of the xenstored that exec'd this one (live
//! update, `-U`): its nodes, its domains, and each connection's watches and
//! buffered bytes, from the migration stream it left
//! (migration/stream.rs). The process side (inherited fds, rings) is
//! update/adopt.rs.
//!
//! More tolerant than C xenstored 4.17's reader, which exits (leaving the
//! host without xenstore) on a node whose parent or owner it does not know:
//! missing parents are created as a dom0 write creates them, and a node
//! may name an owner that has no connection (an update during `xl create`).

use super::Daemon;
use crate::conn::transport::Attachment;
use crate::daemon::domain_registry::Domain;
use crate::daemon::quota::Kind;
use crate::migration::stream;
use crate::store::perms::{Identity, Perm, Perms, IGNORE, READ, WRITE};
use crate::store::tree::{self, Limits, UNLIMITED_MEMORY};
use crate::watch::Watch;
use crate::wire::path;
use std::io;

/// Restoring ignores quotas, as C does: the state was accepted once, and a
/// smaller quota applies to what comes next.
const NO_LIMITS: Limits = Limits {
    nodes: usize::MAX,
    node_size: usize::MAX,
    memory: UNLIMITED_MEMORY,
};

fn perms_of(list: &[stream::Perm]) -> Result<Perms, String> {
    if list.is_empty() {
        return Err("a node without permissions (no owner)".to_string());
    }
    list.iter()
        .map(|p| {
            let access = match p.access {
                b'n' => 0,
                b'r' => READ,
                b'w' => WRITE,
                b'b' => READ | WRITE,
                other => return Err(format!("permission {:?}", other as char)),
            };
            Ok(Perm {
                domid: p.domid as u32,
                access: access | if p.ignore { IGNORE } else { 0 },
            })
        })
        .collect::<Result<_, _>>()
        .map(Perms)
}

impl Daemon {
    /// Restores the committed nodes, parents first as the stream has them,
    /// and the special nodes' permissions. Nodes of transactions are left
    /// out: the transactions themselves are not restored (C xenstored 4.17
    /// updates only when none is open, or drops them with -F).
    pub fn restore_store(&mut self, nodes: &[stream::Node]) -> Result<usize, String> {
        let who = Identity::dom0();
        let path_max = self.quotas.get(Kind::PathMax, 0) as usize;
        let mut restored = 0;
        for node in nodes.iter().filter(|n| n.conn_id == 0) {
            let raw = String::from_utf8_lossy(&node.path);
            let fail = |why: String| format!("node {raw:?}: {why}");
            let perms = perms_of(&node.perms).map_err(fail)?;
            if node.path.first() == Some(&b'@') {
                if raw != path::INTRODUCE_DOMAIN && raw != path::RELEASE_DOMAIN {
                    return Err(fail("not a special node".to_string()));
                }
                self.store.set_special_perms(&raw, perms);
                continue;
            }
            let abs =
                path::resolve(&node.path, 0, path_max).map_err(|e| fail(e.name().to_string()))?;
            if !abs.starts_with('/') {
                return Err(fail("not an absolute path".to_string()));
            }
            tree::write(&mut self.store, &abs, Some(&node.value), &who, &NO_LIMITS)
                .and_then(|_| tree::set_perms(&mut self.store, &abs, perms, &who, &NO_LIMITS))
                .map_err(|e| fail(e.reason_name().to_string()))?;
            restored += 1;
        }
        // The tree this daemon started with, where the stream lacks it.
        for start in ["/tool/xenstored", "/tool"] {
            if !nodes
                .iter()
                .any(|n| n.conn_id == 0 && n.path == start.as_bytes())
            {
                tree::remove(&mut self.store, start, &who)
                    .map_err(|e| format!("node {start:?}: {}", e.reason_name()))?;
            }
        }
        Ok(restored)
    }

    /// Registers a domain whose ring connection the stream lists, as
    /// INTRODUCE does but announcing nothing (it was announced before the
    /// update), and returns its backend's attachment: the connection to
    /// serve it on. Its ring's frame and remote port come from the store
    /// the toolstack wrote at its creation (`store/ring-ref`,
    /// `store/port`); the stream has only dom0's local port.
    pub fn restore_domain(&mut self, domid: u32, target: Option<u32>) -> io::Result<Attachment> {
        let home = path::domain_path(domid);
        let number = |leaf: &str| -> io::Result<u64> {
            let at = format!("{home}/store/{leaf}");
            let node = self.store.node(&at).ok_or_else(|| {
                io::Error::new(io::ErrorKind::NotFound, format!("{at} is missing"))
            })?;
            let text = String::from_utf8_lossy(node.value);
            text.trim().parse().map_err(|_| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{at}: {text:?} is not a number"),
                )
            })
        };
        let gfn = number("ring-ref")?;
        let port = u32::try_from(number("port")?)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "store/port too large"))?;
        let attachment = self.backend.introduce(domid, gfn, port)?;
        let conn_slot = self.reserve_conn_id();
        self.domains.insert(
            domid,
            Domain {
                port,
                gfn,
                target,
                conn_slot,
                ..Domain::default()
            },
        );
        Ok(attachment)
    }

    /// Gives connection `id` (just attached for the stream's `conn`) its
    /// watches, without the event a WATCH sends at once, and the bytes it
    /// had buffered: input still to execute, output still to send (the
    /// live-update request's "OK" among them).
    pub fn restore_connection(
        &mut self,
        id: u32,
        conn: &stream::Connection,
        watches: &[&stream::Watch],
    ) -> Result<(), String> {
        let path_max = self.quotas.get(Kind::PathMax, 0) as usize;
        let gone = || format!("connection {id} is gone");
        let c = self.conns.get_mut(&id).ok_or_else(gone)?;
        let domid = c.domid();
        for w in watches {
            let raw = String::from_utf8_lossy(&w.path);
            let (path, relative) = path::resolve_watch(&w.path, domid, path_max)
                .map_err(|e| format!("watch {raw:?}: {}", e.name()))?;
            // A duplicate is harmless: the stream listed it twice.
            self.watches.add(
                id,
                &mut c.watches,
                Watch {
                    path,
                    token: w.token[..].into(),
                    relative,
                },
            );
        }
        c.restore_buffers(&conn.input, &conn.output, conn.partial.into())?;
        Self::mark_dirty(&mut self.effects, c);
        Ok(())
    }
}
