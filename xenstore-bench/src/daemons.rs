//! The daemons under test, each on a private socket, killed when dropped:
//! started by the harness the end-to-end tests use (xenstore-testkit), so
//! the bench measures daemons set up exactly as the tests check them.

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use xenstore_testkit::upstream::{Flavor, Upstream};
use xenstore_testkit::Shim;

pub use xenstore_testkit::{scratch_dir, Daemon};

/// `xenstored-shim` from `binary`.
pub fn shim(label: &str, binary: &Path) -> Result<Daemon> {
    Ok(Shim::launch(label, binary, scratch_dir(label)?, &[])?.into_daemon())
}

/// The scale section's floor, `xsbench-bare-sender` from `binary`
/// (src/bin/bare-sender.rs): the least a daemon does for S2 and S5. Its
/// domains' rings go in `dir/run`, as the shim's.
pub fn bare_sender(label: &str, binary: &Path) -> Result<Daemon> {
    let dir = scratch_dir(label)?;
    let socket = dir.join("socket");
    let rings = dir.join("run");
    std::fs::create_dir_all(&rings).with_context(|| format!("create {}", rings.display()))?;
    let mut cmd = std::process::Command::new(binary);
    cmd.arg(&socket).arg(&rings);
    Ok(Daemon::spawn(label, cmd, dir, socket)?)
}

/// C xenstored in the foreground under the stub; `trace` turns on its own
/// -T trace file.
pub fn c_xenstored(label: &str, trace: Option<&Path>) -> Result<Daemon> {
    let trace = trace.map(|t| t.to_string_lossy().into_owned());
    let args: Vec<&str> = match &trace {
        Some(t) => vec!["-T", t],
        None => vec![],
    };
    Ok(Upstream::launch(Flavor::C, label, &args, &[])?.into_daemon())
}

/// oxenstored in the foreground under the stub.
pub fn oxenstored(label: &str) -> Result<Daemon> {
    Ok(Upstream::launch(Flavor::Ocaml, label, &[], &[])?.into_daemon())
}

/// CPU time of all threads of process `pid` so far, in ns (schedstat).
pub fn cpu_ns(pid: u32) -> Result<u64> {
    let mut total = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        let stat = std::fs::read_to_string(task?.path().join("schedstat"))?;
        total += stat
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<u64>().ok())
            .context("bad schedstat")?;
    }
    Ok(total)
}

/// Resident set size of process `pid` in KiB (VmRSS).
pub fn rss_kib(pid: u32) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .context("no VmRSS")
}

/// C xenstored or oxenstored under the stub, serving guests whose
/// simulated rings live in the directory returned (XENSTUB_RING_DIR).
pub fn upstream_with_rings(flavor: Flavor, label: &str) -> Result<(Daemon, PathBuf)> {
    let rings = scratch_dir(&format!("{label} rings"))?;
    let dir = rings.to_string_lossy().into_owned();
    let env = [("XENSTUB_RING_DIR", dir.as_str())];
    let daemon = Upstream::launch(flavor, label, &[], &env)?.into_daemon();
    Ok((daemon, rings))
}

/// How the scale sections start each daemon they measure.
#[derive(Clone)]
pub enum Start {
    Shim(PathBuf),
    /// C xenstored or oxenstored under the conformance stub.
    Upstream(Flavor),
}

impl Start {
    pub fn launch(&self, label: &str) -> Result<Daemon> {
        match self {
            Start::Shim(binary) => shim(label, binary),
            Start::Upstream(flavor) => {
                Ok(Upstream::launch(*flavor, label, &[], &[])?.into_daemon())
            }
        }
    }

    /// A fresh daemon and the directory its guests' simulated rings live
    /// in (the stub keeps the shim's simulated hypervisor there).
    pub fn launch_with_rings(&self, label: &str) -> Result<(Daemon, PathBuf)> {
        match self {
            Start::Shim(binary) => {
                let daemon = shim(label, binary)?;
                let rings = daemon.dir.join("run");
                Ok((daemon, rings))
            }
            Start::Upstream(flavor) => upstream_with_rings(*flavor, label),
        }
    }
}

/// An upstream daemon's column label.
pub fn label(flavor: Flavor) -> &'static str {
    match flavor {
        Flavor::C => "C xenstored",
        Flavor::Ocaml => "oxenstored",
    }
}
