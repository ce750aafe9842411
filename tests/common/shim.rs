//! A real xenstored-shim on a private socket, killed when dropped.

use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Shim {
    pub child: Child,
    pub dir: PathBuf,
    pub socket: PathBuf,
    /// Holds per-domain transports (domain sockets, simulated rings).
    pub run_dir: PathBuf,
}

impl Shim {
    pub fn start() -> Shim {
        Shim::start_with(&[])
    }

    /// Starts the shim with extra arguments and waits until it accepts.
    pub fn start_with(args: &[&str]) -> Shim {
        let dir = private_dir("shim");
        let socket = dir.join("socket");
        let run_dir = dir.join("run");
        std::fs::create_dir_all(&run_dir).unwrap();
        let child = Command::new(super::bin("xenstored-shim"))
            .arg("--socket")
            .arg(&socket)
            .arg("--run-dir")
            .arg(&run_dir)
            .args(args)
            .stdin(Stdio::null())
            .spawn()
            .expect("start xenstored-shim");
        let shim = Shim {
            child,
            dir,
            socket,
            run_dir,
        };
        shim.wait_ready();
        shim
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while UnixStream::connect(&self.socket).is_err() {
            assert!(
                Instant::now() < deadline,
                "shim never listened on {}",
                self.socket.display()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// A command with XENSTORED_PATH pointing at this shim (Debian's clients honour it).
    pub fn client(&self, program: &str) -> Command {
        let mut cmd = Command::new(program);
        cmd.env("XENSTORED_PATH", &self.socket);
        cmd
    }

    /// Runs a Debian client to completion; panics with its stderr on failure.
    pub fn run(&self, program: &str, args: &[&str]) -> String {
        let out = self.client(program).args(args).output().expect(program);
        assert!(
            out.status.success(),
            "{program} {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }
}

impl Drop for Shim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A fresh directory under the target dir's tmp, unique per call.
pub fn private_dir(tag: &str) -> PathBuf {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let base = std::env::temp_dir().join("xenstore-e2e");
    let dir = base.join(format!(
        "{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub fn wait_for(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}
