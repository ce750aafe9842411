//! Debian's upstream daemons (C xenstored, oxenstored) on a private socket,
//! running without Xen under the LD_PRELOAD stub tests/peer/xenstub.c.

use crate::daemon::{scratch_dir, Daemon};
use crate::error;
use std::io;
use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::process::Command;

pub const C_XENSTORED: &str = "/usr/lib/xen-4.17/bin/xenstored";
pub const OXENSTORED: &str = "/usr/lib/xen-4.17/bin/oxenstored";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// tools/xenstored, the C daemon: the reference.
    C,
    /// tools/ocaml/xenstored: a second opinion.
    Ocaml,
}

impl Flavor {
    pub fn binary(self) -> &'static str {
        match self {
            Flavor::C => C_XENSTORED,
            Flavor::Ocaml => OXENSTORED,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Flavor::C => "C xenstored",
            Flavor::Ocaml => "oxenstored",
        }
    }

    /// What is missing to run this daemon, if anything.
    pub fn missing(self) -> Option<String> {
        if !Path::new(self.binary()).exists() {
            Some(format!("{} not installed (xen-utils-4.17)", self.binary()))
        } else if !Path::new("/usr/include/xenctrl.h").exists() {
            Some("/usr/include/xenctrl.h not installed (libxen-dev)".to_string())
        } else {
            None
        }
    }
}

/// True when the upstream daemon is installed; false (loudly) when a test
/// may skip. Under CI (`.ci/setup` installs xen-utils-4.17 and libxen-dev)
/// it must be there.
pub fn available(flavor: Flavor, test: &str) -> bool {
    let Some(missing) = flavor.missing() else {
        return true;
    };
    if std::env::var_os("CI").is_some() {
        panic!("{test}: {missing}, and CI is set: this test must run");
    }
    eprintln!("\n*** SKIPPING {test}: {missing} (CI unset) ***\n");
    false
}

/// The stub library, compiled once per source version into
/// target/xenstub. Each compile writes a private name and renames it into
/// place, so parallel tests and benches never load a half-written file.
pub fn stub_library() -> io::Result<PathBuf> {
    let root = crate::workspace_root();
    let source = root.join("tests/peer/xenstub.c");
    let text =
        std::fs::read(&source).map_err(|e| error(format!("read {}: {e}", source.display())))?;
    let dir = root.join("target/xenstub");
    std::fs::create_dir_all(&dir)?;
    let lib = dir.join(format!("libxenstub-{:016x}.so", fnv1a(&text)));
    if lib.exists() {
        return Ok(lib);
    }
    let tmp = dir.join(format!(
        "libxenstub.{}.{:?}.tmp.so",
        std::process::id(),
        std::thread::current().id()
    ));
    let out = Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-Wall", "-o"])
        .arg(&tmp)
        .arg(&source)
        .arg("-ldl")
        .output()
        .map_err(|e| error(format!("run cc (needed for the upstream stub): {e}")))?;
    if !out.status.success() {
        return Err(error(format!(
            "compiling {} failed:\n{}",
            source.display(),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    std::fs::rename(&tmp, &lib)?;
    Ok(lib)
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf29ce484222325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x100000001b3)
    })
}

pub struct Upstream {
    pub flavor: Flavor,
    pub daemon: Daemon,
}

impl Upstream {
    /// Starts `flavor` in the foreground with extra `args` and `env` (e.g.
    /// XENSTUB_DOMIDS) and waits until it accepts connections.
    pub fn launch(
        flavor: Flavor,
        label: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> io::Result<Upstream> {
        if let Some(missing) = flavor.missing() {
            return Err(error(missing));
        }
        let dir = scratch_dir(label)?;
        let socket = dir.join("socket");
        let mut cmd = Command::new(flavor.binary());
        cmd.env("LD_PRELOAD", stub_library()?)
            .env("XENSTUB_DIR", &dir);
        match flavor {
            // No -D: without dom0 init the store is never set up and the
            // daemon crashes on the first request. No -T: it halves throughput.
            Flavor::C => {
                cmd.env("XENSTORED_PATH", &socket)
                    .env("XENSTORED_RUNDIR", &dir)
                    .arg("-N")
                    .arg("-F")
                    .arg(dir.join("pid"));
            }
            // The socket is compiled in as /var/run/xenstored/socket; the stub
            // moves that directory to XENSTUB_DIR.
            Flavor::Ocaml => {
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
                )?;
                cmd.arg("--no-fork").arg("--config-file").arg(&conf);
            }
        }
        cmd.args(args).envs(env.iter().copied());
        Ok(Upstream {
            flavor,
            daemon: Daemon::spawn(label, cmd, dir, socket)?,
        })
    }

    /// The daemon with no extra arguments (for tests).
    pub fn start(flavor: Flavor) -> Upstream {
        Upstream::start_with_env(flavor, &[], &[])
    }

    /// With extra arguments (for tests).
    pub fn start_with(flavor: Flavor, args: &[&str]) -> Upstream {
        Upstream::start_with_env(flavor, args, &[])
    }

    /// With extra arguments and environment (for tests).
    pub fn start_with_env(flavor: Flavor, args: &[&str], env: &[(&str, &str)]) -> Upstream {
        Upstream::launch(flavor, flavor.name(), args, env).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Gives up the flavor, keeping the running daemon.
    pub fn into_daemon(self) -> Daemon {
        self.daemon
    }
}

impl Deref for Upstream {
    type Target = Daemon;
    fn deref(&self) -> &Daemon {
        &self.daemon
    }
}

impl DerefMut for Upstream {
    fn deref_mut(&mut self) -> &mut Daemon {
        &mut self.daemon
    }
}
