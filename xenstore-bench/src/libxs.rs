//! The libxenstore client: c/xs_load.c, compiled with `cc -lxenstore` at
//! bench time (libxen-dev), run pinned or not against a daemon's socket.

use crate::affinity::Pin;
use crate::stats::Sample;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const SOURCE: &str = include_str!("../c/xs_load.c");

/// Compiles the client into `dir`; its path.
pub fn build(dir: &Path) -> Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let src = dir.join("xs_load.c");
    let exe = dir.join("xs_load");
    std::fs::write(&src, SOURCE)?;
    let out = Command::new("cc")
        .args(["-O2", "-o"])
        .arg(&exe)
        .arg(&src)
        .arg("-lxenstore")
        .output()
        .context("run cc (install a C compiler and libxen-dev)")?;
    if !out.status.success() {
        bail!(
            "cc xs_load.c -lxenstore failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(exe)
}

/// `write` or `read` workload for `duration` through libxenstore.
pub fn run(exe: &Path, socket: &Path, write: bool, duration: Duration, pin: Pin) -> Result<Sample> {
    // The child takes this thread's CPUs at fork: pinned as affinity.rs
    // pins every client, and this thread freed again after.
    pin.apply_here()?;
    let out = Command::new(exe)
        .arg(if write { "write" } else { "read" })
        .arg(duration.as_secs_f64().to_string())
        .env("XENSTORED_PATH", socket)
        .output();
    Pin::Free.apply_here()?;
    let out = out.with_context(|| format!("run {}", exe.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!(
            "xs_load failed: {}{}",
            text,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let field = |key: &str| -> Result<f64> {
        let mut words = text.split_whitespace();
        words
            .position(|w| w == key)
            .and_then(|_| words.next())
            .and_then(|v| v.parse().ok())
            .with_context(|| format!("no {key} in xs_load output {text:?}"))
    };
    let ops = field("ops")?;
    Ok(Sample {
        ops: ops as u64,
        ops_per_s: ops / field("secs")?,
        p50_us: field("p50_ns")? / 1000.0,
        p99_us: field("p99_ns")? / 1000.0,
        daemon_cpu_us: f64::NAN,
    })
}
