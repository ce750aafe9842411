//! A real xenstored-shim on a private socket, killed when dropped.

use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Shim {
    pub child: Child,
    /// The binary it runs (a private copy for tracing tests).
    pub binary: PathBuf,
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
        Shim::launch(private_dir("shim"), super::bin("xenstored-shim"), args)
    }

    /// A shim running from a private copy of its binary. Uprobes attach to
    /// the file, so tracing tests that share one binary would see each
    /// other's traffic and semaphore counts.
    pub fn private_copy() -> Shim {
        let dir = private_dir("shim-copy");
        let binary = dir.join("xenstored-shim");
        std::fs::copy(super::bin("xenstored-shim"), &binary).unwrap();
        Shim::launch(dir, binary, &[])
    }

    fn launch(dir: PathBuf, binary: PathBuf, args: &[&str]) -> Shim {
        let socket = dir.join("socket");
        let run_dir = dir.join("run");
        std::fs::create_dir_all(&run_dir).unwrap();
        let mut cmd = Command::new(&binary);
        cmd.arg("--socket")
            .arg(&socket)
            .arg("--run-dir")
            .arg(&run_dir)
            .args(args)
            .stdin(Stdio::null());
        let child = spawn_retrying_etxtbsy(&mut cmd).expect("start xenstored-shim");
        let shim = Shim {
            child,
            binary,
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

/// A fresh directory under $TMPDIR/xenstore-e2e, unique per call.
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

/// Spawns `cmd`, retrying briefly on ETXTBSY: a freshly copied binary stays
/// busy while a child that a parallel test forked still holds the copy's
/// write descriptor (until that child execs).
pub fn spawn_retrying_etxtbsy(cmd: &mut Command) -> std::io::Result<Child> {
    let mut tries = 0;
    loop {
        match cmd.spawn() {
            Err(e) if e.raw_os_error() == Some(ETXTBSY) && tries < 100 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            result => return result,
        }
    }
}

const ETXTBSY: i32 = 26;
