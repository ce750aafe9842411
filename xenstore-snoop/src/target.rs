//! Which daemon to trace: a pid, a binary, or the one running
//! `xenstored-shim` found by scanning /proc.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

pub const DAEMON_NAME: &str = "xenstored-shim";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub pid: u32,
    /// Where the daemon's binary is; uprobes are defined on this file.
    pub binary: PathBuf,
    /// The file it runs, as [`image`] names it.
    pub image: Option<(u64, u64)>,
}

impl Target {
    /// Whether it still runs the image it was found running: a live update
    /// execs a new one in the same process, where the uprobes on the old
    /// file no longer fire.
    pub fn runs(&self) -> bool {
        alive(self.pid) && image(self.pid) == self.image
    }
}

/// `--daemon-pid` and/or `--binary`; with neither, the one running shim.
pub fn find(pid: Option<u32>, binary: Option<&Path>) -> Result<Target> {
    let binary = binary
        .map(|b| std::fs::canonicalize(b).with_context(|| format!("--binary {}", b.display())))
        .transpose()?;
    if let Some(pid) = pid {
        let exe = exe_of(pid)
            .with_context(|| format!("no process {pid} to trace (or not allowed to see it)"))?;
        if let Some(b) = &binary {
            if !same_file(&exe, b) {
                bail!("process {pid} runs {}, not {}", exe.display(), b.display());
            }
        }
        return Ok(Target {
            pid,
            binary: proc_exe_path(pid, &exe),
            image: image(pid),
        });
    }
    let found: Vec<(u32, PathBuf)> = processes()
        .into_iter()
        .filter(|(_, exe)| match &binary {
            Some(b) => same_file(exe, b),
            None => exe.file_name().is_some_and(|n| n == DAEMON_NAME),
        })
        .collect();
    let wanted = binary
        .as_ref()
        .map_or(DAEMON_NAME.to_string(), |b| b.display().to_string());
    match found.as_slice() {
        [] => bail!("no running {wanted} found; start the daemon or pass --daemon-pid PID"),
        [(pid, exe)] => Ok(Target {
            pid: *pid,
            binary: proc_exe_path(*pid, exe),
            image: image(*pid),
        }),
        many => {
            let pids: Vec<String> = many.iter().map(|(p, _)| p.to_string()).collect();
            bail!(
                "several {wanted} processes are running (pids {}): choose one with --daemon-pid PID",
                pids.join(", ")
            )
        }
    }
}

/// Uprobes go on `/proc/PID/exe`: it names the very inode the daemon runs
/// even if its file was replaced or deleted since. Falls back to the path.
fn proc_exe_path(pid: u32, exe: &Path) -> PathBuf {
    let proc_exe = PathBuf::from(format!("/proc/{pid}/exe"));
    if std::fs::metadata(&proc_exe).is_ok() {
        proc_exe
    } else {
        exe.to_path_buf()
    }
}

fn exe_of(pid: u32) -> Result<PathBuf> {
    Ok(std::fs::read_link(format!("/proc/{pid}/exe"))?)
}

/// Every process whose executable can be read, with its path.
pub fn processes() -> Vec<(u32, PathBuf)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let pid: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
        Some((pid, exe_of(pid).ok()?))
    })
    .collect()
}

fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => a == b,
    }
}

/// The file process `pid` runs, as (device, inode).
pub fn image(pid: u32) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(format!("/proc/{pid}/exe")).ok()?;
    Some((m.dev(), m.ino()))
}

/// Whether the traced daemon still runs (a zombie does not).
pub fn alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // "pid (comm) S ...": the state follows the last ')'.
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .is_some_and(|state| state != "Z" && state != "X")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pid_that_is_not_running_is_a_clear_error() {
        let err = find(Some(u32::MAX - 1), None).unwrap_err();
        assert!(format!("{err:#}").contains("no process"), "{err:#}");
    }

    #[test]
    fn our_own_pid_resolves_to_proc_exe() {
        let me = std::process::id();
        let t = find(Some(me), None).unwrap();
        assert_eq!(t.pid, me);
        assert_eq!(t.binary, PathBuf::from(format!("/proc/{me}/exe")));
        let exe = std::env::current_exe().unwrap();
        assert!(find(Some(me), Some(&exe)).is_ok());
        assert!(find(Some(me), Some(Path::new("/bin/sh"))).is_err());
    }
}
