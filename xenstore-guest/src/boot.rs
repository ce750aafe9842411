//! Booting a simulated guest against a running daemon: the one sequence the
//! tests, the bench's soak and xs-demo share, so a change to how a domain
//! starts is made once.

use std::path::Path;
use std::time::Duration;

use crate::client::{Guest, Result, SocketLink, Xs};
use crate::sim::SimGuest;

/// The guest's xenstore page frame and event channel port: any values do
/// on the simulated ring, as long as both sides use the same.
pub const GFN: u64 = 0xfeffc;
pub const PORT: u32 = 1;

/// The domain builder's and toolstack's part, without the guest: the
/// domain's page and port prepared, then XS_INTRODUCE.
pub fn introduce(dom0: &mut Xs<SocketLink>, run_dir: &Path, domid: u16) -> Result<()> {
    SimGuest::prepare(run_dir, domid, GFN, PORT)?;
    dom0.introduce(domid, GFN, PORT)
}

/// A domain start, whole: its home owned by the guest, [`introduce`], then
/// the guest attaches; its requests wait up to `timeout` for replies.
pub fn boot(
    dom0: &mut Xs<SocketLink>,
    run_dir: &Path,
    domid: u16,
    timeout: Duration,
) -> Result<Guest> {
    let home = format!("/local/domain/{domid}");
    dom0.mkdir(0, &home)?;
    dom0.set_perms(0, &home, &[&format!("n{domid}")])?;
    introduce(dom0, run_dir, domid)?;
    let mut guest = Guest::open(run_dir, domid)?;
    guest.timeout = timeout;
    Ok(guest)
}
