//! Guests on simulated rings (xenstore-guest's sim.rs): a page file
//! and a doorbell socket per domain under a directory the daemon maps them
//! from (the shim's run directory; for C xenstored and oxenstored the
//! conformance stub's XENSTUB_RING_DIR). The only place the bench boots a
//! domain, so moving the guest side elsewhere touches this file alone.

use anyhow::{Context, Result};
use std::path::Path;
use std::time::Duration;
use xenstore_guest::client::{Guest, SocketLink, Xs};

/// A booted guest: its own connection to xenstore over its ring.
pub struct RingGuest {
    pub domid: u16,
    xs: Guest,
}

/// A domain start (xenstore_guest::boot: its home, its page and port,
/// INTRODUCE from dom0, then the guest attaches).
pub fn boot(dom0: &mut Xs<SocketLink>, rings: &Path, domid: u16) -> Result<RingGuest> {
    let mut xs = xenstore_guest::boot::boot(dom0, rings, domid, Duration::from_secs(10))
        .with_context(|| format!("boot domain {domid} on a simulated ring"))?;
    // One open file a domain, not two: the scale section holds thousands
    // of domains at once, and on machines whose hard limit is 20000 open
    // files (which root there cannot raise) the last daemons' domains ran
    // out of them.
    xs.link().unlock();
    Ok(RingGuest { domid, xs })
}

impl RingGuest {
    /// A watch on `path` (relative to the domain's home).
    pub fn watch(&mut self, path: &str, token: &str) -> Result<()> {
        Ok(self.xs.watch(path, token)?)
    }

    /// The path of the next watch event, waiting up to `timeout`.
    pub fn event(&mut self, timeout: Duration) -> Result<String> {
        let ev = self.xs.next_event(timeout)?;
        Ok(ev.context("no watch event in time")?.path)
    }

    /// Whether an event is waiting (without waiting for one).
    pub fn has_event(&mut self) -> Result<bool> {
        Ok(self.xs.next_event(Duration::ZERO)?.is_some())
    }
}

/// A domain as the toolstack leaves it before the guest runs: its home
/// (owned by it, with its name), its page and port, INTRODUCE.
pub fn introduce_with_home(dom0: &mut Xs<SocketLink>, rings: &Path, domid: u16) -> Result<()> {
    let home = format!("/local/domain/{domid}");
    dom0.write(0, &format!("{home}/name"), &format!("guest{domid}"))?;
    dom0.set_perms(0, &home, &[&format!("n{domid}")])?;
    xenstore_guest::boot::introduce(dom0, rings, domid)
        .with_context(|| format!("introduce domain {domid} on a simulated ring"))
}

/// The domain dies as on Xen: marked dying, VIRQ_DOM_EXC raised.
pub fn die(rings: &Path, domid: u16) -> Result<()> {
    xenstore_guest::sim::SimGuest::die(rings, domid).with_context(|| format!("domain {domid} dies"))
}

const INOTIFY_INSTANCES: &str = "/proc/sys/fs/inotify/max_user_instances";

/// Makes room for `domains` more simulated domains: each costs its daemon
/// one inotify instance (the ring notices the page file vanish through it),
/// and the default 128 per user is shared by every process of the user.
/// Returns the limit to put back afterwards, if it was raised.
pub fn make_room(domains: usize) -> Result<Option<u64>> {
    let read = || -> Result<u64> {
        let v = std::fs::read_to_string(INOTIFY_INSTANCES).context(INOTIFY_INSTANCES)?;
        v.trim().parse().context(INOTIFY_INSTANCES)
    };
    let old = read()?;
    let wanted = domains as u64 + 64;
    if old >= wanted {
        return Ok(None);
    }
    eprintln!("bench: raising {INOTIFY_INSTANCES} from {old} to {wanted} for simulated domains");
    std::fs::write(INOTIFY_INSTANCES, wanted.to_string())
        .with_context(|| format!("raise {INOTIFY_INSTANCES} to {wanted}"))?;
    Ok(Some(old))
}

/// Puts back what `make_room` raised.
pub fn restore_room(old: Option<u64>) {
    if let Some(old) = old {
        if let Err(e) = std::fs::write(INOTIFY_INSTANCES, old.to_string()) {
            eprintln!("bench: could not put {INOTIFY_INSTANCES} back to {old}: {e}");
        }
    }
}
