//! xenstored-shim on a private socket and run directory.

use crate::daemon::{private_copy_of, private_dir, scratch_dir, Daemon};
use std::io;
use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::process::Command;

pub struct Shim {
    pub daemon: Daemon,
    /// The binary it runs (a private copy for tracing tests).
    pub binary: PathBuf,
    /// Holds per-domain transports (domain sockets, simulated rings).
    pub run_dir: PathBuf,
}

impl Shim {
    /// Starts `binary` with extra `args` in `dir` and waits until it accepts.
    pub fn launch(label: &str, binary: &Path, dir: PathBuf, args: &[&str]) -> io::Result<Shim> {
        let socket = dir.join("socket");
        let run_dir = dir.join("run");
        std::fs::create_dir_all(&run_dir)?;
        let mut cmd = Command::new(binary);
        cmd.arg("--socket")
            .arg(&socket)
            .arg("--run-dir")
            .arg(&run_dir)
            .args(args);
        Ok(Shim {
            daemon: Daemon::spawn(label, cmd, dir, socket)?,
            binary: binary.to_path_buf(),
            run_dir,
        })
    }

    /// The workspace's shim on a fresh directory (for tests).
    pub fn start() -> Shim {
        Shim::start_with(&[])
    }

    /// As `start`, with extra arguments.
    pub fn start_with(args: &[&str]) -> Shim {
        let dir = private_dir("shim");
        Shim::launch("xenstored-shim", &crate::bin("xenstored-shim"), dir, args)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// A shim running from a private copy of its binary (for tests). Uprobes
    /// attach to the file, so tracing tests that share one binary would see
    /// each other's traffic and semaphore counts.
    pub fn private_copy() -> Shim {
        let start = || -> io::Result<Shim> {
            let dir = scratch_dir("shim-copy")?;
            let binary = private_copy_of(&crate::bin("xenstored-shim"), &dir)?;
            Shim::launch("xenstored-shim copy", &binary, dir, &[])
        };
        start().unwrap_or_else(|e| panic!("{e}"))
    }

    /// Gives up the shim's extra paths, keeping the running daemon.
    pub fn into_daemon(self) -> Daemon {
        self.daemon
    }
}

impl Deref for Shim {
    type Target = Daemon;
    fn deref(&self) -> &Daemon {
        &self.daemon
    }
}

impl DerefMut for Shim {
    fn deref_mut(&mut self) -> &mut Daemon {
        &mut self.daemon
    }
}
