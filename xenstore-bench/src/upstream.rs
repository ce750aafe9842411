//! Debian's upstream daemons (C xenstored, oxenstored) running without Xen
//! under the conformance harness's LD_PRELOAD stub (tests/peer/xenstub.c),
//! started the way tests/common/upstream.rs starts them.

use crate::daemons::{scratch_dir, Daemon};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

pub const C_XENSTORED: &str = "/usr/lib/xen-4.17/bin/xenstored";
pub const OXENSTORED: &str = "/usr/lib/xen-4.17/bin/oxenstored";

/// The stub, compiled once per bench run into target/bench/work.
fn stub_library() -> Result<&'static Path> {
    static LIB: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let lib = LIB.get_or_init(|| {
        let root = crate::builds::workspace_root();
        let source = std::env::var_os("XSBENCH_XENSTUB_SOURCE")
            .map(PathBuf::from)
            .unwrap_or_else(|| root.join("tests/peer/xenstub.c"));
        let dir = root.join("target/bench/work");
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let lib = dir.join("libxenstub.so");
        let out = Command::new("cc")
            .args(["-shared", "-fPIC", "-O1", "-Wall", "-o"])
            .arg(&lib)
            .arg(&source)
            .arg("-ldl")
            .output()
            .map_err(|e| format!("run cc: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "cc {}: {}",
                source.display(),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(lib)
    });
    match lib {
        Ok(lib) => Ok(lib),
        Err(e) => bail!("upstream stub: {e}"),
    }
}

/// C xenstored in the foreground; `trace` turns on its own -T trace file.
pub fn c_xenstored(label: &str, trace: Option<&Path>) -> Result<Daemon> {
    if !Path::new(C_XENSTORED).exists() {
        bail!("{C_XENSTORED} not installed (xen-utils-4.17)");
    }
    let dir = scratch_dir(label)?;
    let socket = dir.join("socket");
    let mut cmd = Command::new(C_XENSTORED);
    cmd.env("LD_PRELOAD", stub_library()?)
        .env("XENSTUB_DIR", &dir)
        .env("XENSTORED_PATH", &socket)
        .env("XENSTORED_RUNDIR", &dir)
        .arg("-N")
        .arg("-F")
        .arg(dir.join("pid"));
    if let Some(trace) = trace {
        cmd.arg("-T").arg(trace);
    }
    Daemon::spawn(label, cmd, dir, socket)
}

/// oxenstored in the foreground (its socket path is compiled in; the stub
/// moves /var/run/xenstored to XENSTUB_DIR).
pub fn oxenstored(label: &str) -> Result<Daemon> {
    if !Path::new(OXENSTORED).exists() {
        bail!("{OXENSTORED} not installed (xen-utils-4.17)");
    }
    let dir = scratch_dir(label)?;
    let socket = dir.join("socket");
    let conf = dir.join("oxenstored.conf");
    std::fs::write(
        &conf,
        format!(
            "pid-file = {d}/pid\npersistent = false\n\
             xenstored-log-file = {d}/xenstored.log\n\
             access-log-file = {d}/access.log\n\
             xenstored-kva = /proc/xen/xsd_kva\n\
             xenstored-port = /proc/xen/xsd_port\n",
            d = dir.display()
        ),
    )
    .context("write oxenstored.conf")?;
    let mut cmd = Command::new(OXENSTORED);
    cmd.env("LD_PRELOAD", stub_library()?)
        .env("XENSTUB_DIR", &dir)
        .arg("--no-fork")
        .arg("--config-file")
        .arg(&conf);
    Daemon::spawn(label, cmd, dir, socket)
}
