//! The daemons under test, each on a private socket, killed when dropped.

use anyhow::{bail, Context, Result};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Daemon {
    pub label: String,
    pub socket: PathBuf,
    child: Child,
    dir: PathBuf,
}

impl Daemon {
    /// `xenstored-shim` from `binary`.
    pub fn shim(label: &str, binary: &Path) -> Result<Daemon> {
        let dir = scratch_dir(label)?;
        let socket = dir.join("socket");
        let run_dir = dir.join("run");
        std::fs::create_dir_all(&run_dir)?;
        let mut cmd = Command::new(binary);
        cmd.arg("--socket")
            .arg(&socket)
            .arg("--run-dir")
            .arg(&run_dir);
        Daemon::spawn(label, cmd, dir, socket)
    }

    /// Starts `cmd` (which must listen on `socket`) and waits until it accepts.
    pub fn spawn(label: &str, mut cmd: Command, dir: PathBuf, socket: PathBuf) -> Result<Daemon> {
        let log = std::fs::File::create(dir.join("daemon.log"))?;
        let child = cmd
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("start {label}: {cmd:?}"))?;
        let mut daemon = Daemon {
            label: label.to_string(),
            socket,
            child,
            dir,
        };
        daemon.wait_ready()?;
        Ok(daemon)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn wait_ready(&mut self) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(10);
        while UnixStream::connect(&self.socket).is_err() {
            if let Some(status) = self.child.try_wait()? {
                let log = std::fs::read_to_string(self.dir.join("daemon.log")).unwrap_or_default();
                bail!("{} exited ({status}) before listening:\n{log}", self.label);
            }
            if Instant::now() > deadline {
                bail!("{} never listened on {}", self.label, self.socket.display());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    }

    /// CPU time of all the daemon's threads so far, in ns.
    pub fn cpu_ns(&self) -> Result<u64> {
        cpu_ns(self.pid())
    }

    /// Resident set size in KiB (VmRSS).
    pub fn rss_kib(&self) -> Result<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .context("no VmRSS")
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
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

/// A fresh directory for one daemon or tracer of this run.
pub fn scratch_dir(tag: &str) -> Result<PathBuf> {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let tag: String = tag
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let dir = std::env::temp_dir().join(format!(
        "xenstore-bench-{}/{tag}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
    Ok(dir)
}
