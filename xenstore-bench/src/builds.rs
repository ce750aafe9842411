//! The binaries under test, built release into the bench's own target
//! directories: the shim with probes (and the snooper, probe loop), and the
//! shim with every probe compiled out (`--no-default-features`), and on
//! demand the shim with 1-byte nop probe sites (XSS_SDT_NOP1).

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

pub struct Builds {
    pub shim: PathBuf,
    pub shim_noprobes: PathBuf,
    pub snoop: PathBuf,
    pub probe_loop: PathBuf,
    /// The scale section's floor (src/bin/bare-sender.rs).
    pub bare_sender: PathBuf,
    /// Where generated files (the C client) go.
    pub work: PathBuf,
}

/// A build measured beside the workspace's in sections 3 and 9
/// (`--shim-before`, with `--snoop-before` or else the workspace's snooper):
/// what a change bought, in one run.
pub struct Before {
    pub shim: PathBuf,
    pub snoop: PathBuf,
}

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xenstore-bench lives in the workspace")
        .to_path_buf()
}

fn cargo_build(target_dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Result<()> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    eprintln!("bench: cargo build --release {}", args.join(" "));
    let status = Command::new(cargo)
        .current_dir(workspace_root())
        .envs(env.iter().copied())
        .args(["build", "--release", "--quiet", "--target-dir"])
        .arg(target_dir)
        .args(args)
        .status()
        .context("run cargo")?;
    if !status.success() {
        bail!("cargo build {args:?} failed");
    }
    Ok(())
}

pub fn build_all() -> Result<Builds> {
    let base = workspace_root().join("target/bench");
    let probes = base.join("probes");
    let noprobes = base.join("noprobes");
    cargo_build(
        &probes,
        &[
            "-p",
            "xenstored-probes",
            "-p",
            "xenstore-snoop",
            "-p",
            "xenstore-bench",
        ],
        &[],
    )?;
    cargo_build(
        &noprobes,
        &[
            "-p",
            "xenstored-probes",
            "--no-default-features",
            "--bin",
            "xenstored-shim",
        ],
        &[],
    )?;
    Ok(Builds {
        shim: probes.join("release/xenstored-shim"),
        shim_noprobes: noprobes.join("release/xenstored-shim"),
        snoop: probes.join("release/xenstore-snoop"),
        probe_loop: probes.join("release/xsbench-probe-loop"),
        bare_sender: probes.join("release/xsbench-bare-sender"),
        work: base.join("work"),
    })
}

/// The shim and the probe loop with their probe sites as 1-byte nops
/// (usdt's), everything else as [`build_all`] builds them: the nop-size
/// comparison's baseline.
pub struct Nop1 {
    pub shim: PathBuf,
    pub probe_loop: PathBuf,
}

pub fn build_nop1() -> Result<Nop1> {
    let dir = workspace_root().join("target/bench/nop1");
    cargo_build(
        &dir,
        &[
            "-p",
            "xenstored-probes",
            "--bin",
            "xenstored-shim",
            "-p",
            "xenstore-bench",
            "--bin",
            "xsbench-probe-loop",
        ],
        &[("XSS_SDT_NOP1", "1")],
    )?;
    Ok(Nop1 {
        shim: dir.join("release/xenstored-shim"),
        probe_loop: dir.join("release/xsbench-probe-loop"),
    })
}
