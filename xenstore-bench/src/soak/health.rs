//! What the soak measures of the daemon and the host: descriptors, resident
//! memory, the store's own check, and uprobes left in tracefs.

use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::path::Path;
use xenstore_guest::client::{SocketLink, Xs};
use xenstored_probes::wire::MsgType;

pub use crate::daemons::rss_kib;

const UPROBE_EVENTS: &str = "/sys/kernel/tracing/uprobe_events";

/// Open descriptors of process `pid`.
pub fn fds(pid: u32) -> Result<usize> {
    Ok(fd_kinds(pid)?.values().sum())
}

/// What `pid`'s descriptors are, counted by kind ("socket", "/dev/null", ...).
pub fn fd_kinds(pid: u32) -> Result<BTreeMap<String, usize>> {
    let dir = format!("/proc/{pid}/fd");
    let mut kinds = BTreeMap::new();
    for fd in std::fs::read_dir(&dir).with_context(|| format!("list {dir}"))? {
        let target = std::fs::read_link(fd?.path()).unwrap_or_default();
        let kind = target
            .to_string_lossy()
            .split(':')
            .next()
            .map(str::to_string);
        *kinds.entry(kind.unwrap_or_default()).or_insert(0) += 1;
    }
    Ok(kinds)
}

/// CONTROL check: the daemon's consistency check of its store (EIO with
/// the problems logged when it finds any).
pub fn store_check(admin: &mut Xs<SocketLink>) -> Result<()> {
    let reply = admin.request(MsgType::Control, 0, b"check\0")?;
    if reply.strip_suffix(&[0]).unwrap_or(&reply) != b"OK" {
        bail!(
            "CONTROL check answered {:?}",
            String::from_utf8_lossy(&reply)
        );
    }
    Ok(())
}

/// The uprobe definitions in tracefs on `binary` (any tracer's, any group):
/// once every snooper has ended, none may be left.
pub fn uprobes_on(binary: &Path) -> Result<Vec<String>> {
    let text =
        std::fs::read_to_string(UPROBE_EVENTS).with_context(|| format!("read {UPROBE_EVENTS}"))?;
    let binary = binary.to_string_lossy();
    let on = text.lines().filter(|l| l.contains(binary.as_ref()));
    Ok(on.map(str::to_string).collect())
}
