//! A daemon process listening on a private Unix socket: started with its
//! output in a log file, ready once the socket accepts, killed (and its
//! directory removed) when dropped.

use crate::error;
use std::io;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a daemon may take to listen; generous, for a loaded machine.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

pub struct Daemon {
    /// Names the daemon in messages.
    pub label: String,
    pub child: Child,
    /// Private to this daemon: socket, log, pid file; removed on drop.
    pub dir: PathBuf,
    pub socket: PathBuf,
}

impl Daemon {
    /// Starts `cmd`, which must listen on `socket`, with stdout and stderr in
    /// `dir/daemon.log`, and waits until the socket accepts.
    pub fn spawn(
        label: &str,
        mut cmd: Command,
        dir: PathBuf,
        socket: PathBuf,
    ) -> io::Result<Daemon> {
        let log = std::fs::File::create(dir.join("daemon.log"))?;
        cmd.stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        let child = crate::process::spawn_retrying_etxtbsy(&mut cmd)
            .map_err(|e| error(format!("start {label} ({cmd:?}): {e}")))?;
        let mut daemon = Daemon {
            label: label.to_string(),
            child,
            dir,
            socket,
        };
        daemon.wait_ready()?;
        Ok(daemon)
    }

    fn wait_ready(&mut self) -> io::Result<()> {
        let deadline = Instant::now() + READY_TIMEOUT;
        while UnixStream::connect(&self.socket).is_err() {
            if let Some(status) = self.child.try_wait()? {
                return Err(error(format!(
                    "{} exited ({status}) before listening:\n{}",
                    self.label,
                    self.log()
                )));
            }
            if Instant::now() >= deadline {
                return Err(error(format!(
                    "{} never listened on {} in {READY_TIMEOUT:?}:\n{}",
                    self.label,
                    self.socket.display(),
                    self.log()
                )));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What the daemon wrote to stdout and stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("daemon.log")).unwrap_or_default()
    }

    /// True while the process is alive (a client's bytes must never kill a
    /// daemon).
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// A command with XENSTORED_PATH pointing at this daemon (Debian's
    /// clients honour it).
    pub fn client(&self, program: &str) -> Command {
        let mut cmd = Command::new(program);
        cmd.env("XENSTORED_PATH", &self.socket);
        cmd
    }

    /// `xenstore-watch ARGS` against this daemon, its stdout collected.
    /// Line 0 is the initial event: once it is there the watch is
    /// registered.
    pub fn watch(&self, args: &[&str]) -> crate::Watched {
        crate::Watched::spawn(
            "xenstore-watch",
            self.client("xenstore-watch")
                .args(args)
                .stdout(Stdio::piped()),
            false,
        )
    }

    /// Runs a client to completion (bounded); panics with its stderr on
    /// failure. For tests.
    pub fn run(&self, program: &str, args: &[&str]) -> String {
        run_client(&self.socket, program, args)
    }
}

/// Runs a client against the daemon on `socket` to completion (bounded);
/// its stdout, or a panic with its stderr on failure. For tests.
pub fn run_client(socket: &Path, program: &str, args: &[&str]) -> String {
    let mut cmd = Command::new(program);
    cmd.env("XENSTORED_PATH", socket).args(args);
    let out = crate::process::output_within(&mut cmd, crate::process::CLIENT_TIMEOUT);
    assert!(
        out.status.success(),
        "{program} {args:?} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A fresh directory under $TMPDIR/xenstore-testkit, unique to this process
/// and call, named after `tag`.
pub fn scratch_dir(tag: &str) -> io::Result<PathBuf> {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let tag: String = tag
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let dir = std::env::temp_dir().join("xenstore-testkit").join(format!(
        "{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| error(format!("create {}: {e}", dir.display())))?;
    Ok(dir)
}

/// As `scratch_dir`, panicking on failure (for tests).
pub fn private_dir(tag: &str) -> PathBuf {
    scratch_dir(tag).unwrap_or_else(|e| panic!("{e}"))
}

/// Copies `binary` into `dir` (same file name) and returns the copy's path.
pub fn private_copy_of(binary: &Path, dir: &Path) -> io::Result<PathBuf> {
    let name = binary
        .file_name()
        .ok_or_else(|| error(format!("{} names no file", binary.display())))?;
    let copy = dir.join(name);
    std::fs::copy(binary, &copy).map_err(|e| {
        error(format!(
            "copy {} to {}: {e}",
            binary.display(),
            copy.display()
        ))
    })?;
    Ok(copy)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_daemon_that_dies_before_listening_says_why() {
        let dir = scratch_dir("dies").unwrap();
        let socket = dir.join("socket");
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo no config >&2; exit 3"]);
        let err = Daemon::spawn("dying daemon", cmd, dir.clone(), socket)
            .err()
            .expect("a daemon that never listens is an error");
        let err = err.to_string();
        assert!(err.contains("dying daemon exited"), "{err}");
        assert!(err.contains("no config"), "{err}");
        let _ = std::fs::remove_dir_all(dir);
    }
}
