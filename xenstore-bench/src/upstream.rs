//! Upstream daemons (Debian's C xenstored and oxenstored) without Xen.
//! Placeholder until the conformance harness (tests/common/upstream.rs) lands.

use crate::daemons::Daemon;
use anyhow::{bail, Result};
use std::path::Path;

pub fn c_xenstored(_label: &str, _trace: Option<&Path>) -> Result<Daemon> {
    bail!("upstream harness not available yet")
}

pub fn oxenstored(_label: &str) -> Result<Daemon> {
    bail!("upstream harness not available yet")
}
