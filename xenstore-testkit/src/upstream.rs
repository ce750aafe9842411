//! Debian's upstream daemons (C xenstored, oxenstored) on a private socket,
//! running without Xen under the LD_PRELOAD stub tests/peer/xenstub.c:
//! Debian 12's own (Xen 4.17), and Debian 13's C xenstored (Xen 4.20),
//! fetched by tests/peer/fetch and run under trixie's loader.

use crate::daemon::{scratch_dir, Daemon};
use crate::error;
use std::io;
use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

pub const C_XENSTORED: &str = "/usr/lib/xen-4.17/bin/xenstored";
pub const OXENSTORED: &str = "/usr/lib/xen-4.17/bin/oxenstored";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// tools/xenstored, the C daemon: the reference.
    C,
    /// tools/ocaml/xenstored: a second opinion.
    Ocaml,
}

/// The Xen release an upstream daemon comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Release {
    /// Debian 12's, installed on the host (xen-utils-4.17).
    Xen417,
    /// Debian 13's, extracted under target/ by `tests/peer/fetch 4.20`.
    Xen420,
}

impl Release {
    pub fn version(self) -> &'static str {
        match self {
            Release::Xen417 => "4.17",
            Release::Xen420 => "4.20",
        }
    }

    /// Where tests/peer/fetch extracts the release.
    fn fetched(self) -> PathBuf {
        crate::workspace_root().join(format!("target/peer/xen-{}", self.version()))
    }

    /// Where the release's files are: the host's / or the extracted tree.
    fn root(self) -> PathBuf {
        match self {
            Release::Xen417 => PathBuf::from("/"),
            Release::Xen420 => self.fetched().join("root"),
        }
    }

    /// One of the release's programs (/usr/lib/xen-<version>/bin/<name>).
    pub fn program(self, name: &str) -> PathBuf {
        self.root()
            .join(format!("usr/lib/xen-{}/bin/{name}", self.version()))
    }

    /// A command running `program` with the release's own libraries: the
    /// host's as they are, an extracted release's under its own loader
    /// (trixie's binaries need a newer glibc than the host's).
    pub fn command(self, program: &Path) -> Command {
        match self {
            Release::Xen417 => Command::new(program),
            Release::Xen420 => {
                let libs = self.root().join("usr/lib/x86_64-linux-gnu");
                let mut cmd = Command::new(libs.join("ld-linux-x86-64.so.2"));
                cmd.arg("--library-path").arg(&libs).arg(program);
                cmd
            }
        }
    }

    /// What is missing to run the release's programs, if anything.
    fn missing(self) -> Option<String> {
        match self {
            Release::Xen417 => (!Path::new(C_XENSTORED).exists())
                .then(|| format!("{C_XENSTORED} not installed (xen-utils-4.17)")),
            Release::Xen420 => (!self.fetched().join("complete").exists()).then(|| {
                format!(
                    "{} not fetched (tests/peer/fetch 4.20; make test does it)",
                    self.fetched().display()
                )
            }),
        }
    }
}

/// An upstream daemon: which one, of which release.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Peer {
    pub flavor: Flavor,
    pub release: Release,
}

/// A bare flavor is Debian 12's, the host's own.
impl From<Flavor> for Peer {
    fn from(flavor: Flavor) -> Peer {
        Peer {
            flavor,
            release: Release::Xen417,
        }
    }
}

impl Peer {
    /// C xenstored of `release`.
    pub const fn c(release: Release) -> Peer {
        Peer {
            flavor: Flavor::C,
            release,
        }
    }

    pub fn binary(self) -> PathBuf {
        self.release.program(match self.flavor {
            Flavor::C => "xenstored",
            Flavor::Ocaml => "oxenstored",
        })
    }

    pub fn name(self) -> &'static str {
        match (self.flavor, self.release) {
            (Flavor::C, Release::Xen417) => "C xenstored",
            (Flavor::C, Release::Xen420) => "C xenstored 4.20",
            (Flavor::Ocaml, Release::Xen417) => "oxenstored",
            (Flavor::Ocaml, Release::Xen420) => "oxenstored 4.20",
        }
    }

    /// What is missing to run this daemon, if anything.
    pub fn missing(self) -> Option<String> {
        if self.flavor == Flavor::Ocaml && self.release != Release::Xen417 {
            // 4.20's needs its xenctrl plugin, which the stub does not fake.
            return Some(format!("{} is not supported by the stub", self.name()));
        }
        if let Some(missing) = self.release.missing() {
            Some(missing)
        } else if !self.binary().exists() {
            Some(format!("{} not there", self.binary().display()))
        } else if !Path::new("/usr/include/xenctrl.h").exists() {
            Some("/usr/include/xenctrl.h not installed (libxen-dev)".to_string())
        } else {
            None
        }
    }
}

impl Flavor {
    pub fn binary(self) -> PathBuf {
        Peer::from(self).binary()
    }

    pub fn name(self) -> &'static str {
        Peer::from(self).name()
    }

    /// What is missing to run this daemon, if anything.
    pub fn missing(self) -> Option<String> {
        Peer::from(self).missing()
    }
}

/// True when the upstream daemon is installed; false (loudly) when a test
/// may skip. Under CI (`.ci/setup` installs xen-utils-4.17 and libxen-dev,
/// `make test` fetches 4.20) it must be there.
pub fn available(peer: impl Into<Peer>, test: &str) -> bool {
    let Some(missing) = peer.into().missing() else {
        return true;
    };
    if std::env::var_os("CI").is_some() {
        panic!("{test}: {missing}, and CI is set: this test must run");
    }
    eprintln!("\n*** SKIPPING {test}: {missing} (CI unset) ***\n");
    false
}

/// How long compiling the stub may take on a loaded machine (~1 s idle).
const CC_BOUND: Duration = Duration::from_secs(120);

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
    // cc's complaints go to a file, not a pipe it could fill while nobody
    // reads; the compile is bounded like every other wait.
    let complaints = tmp.with_extension("err");
    let mut cc = Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-Wall", "-o"])
        .arg(&tmp)
        .arg(&source)
        .arg("-ldl")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&complaints)?)
        .spawn()
        .map_err(|e| error(format!("run cc (needed for the upstream stub): {e}")))?;
    let mut status = None;
    let waited = crate::wait_until("cc to compile the upstream stub", CC_BOUND, || {
        status = cc.try_wait().ok().flatten();
        status.is_some()
    });
    if let Err(e) = waited {
        let _ = cc.kill();
        let _ = cc.wait();
        return Err(error(format!("{e} (killed it)")));
    }
    let stderr = std::fs::read_to_string(&complaints).unwrap_or_default();
    let _ = std::fs::remove_file(&complaints);
    if !status.is_some_and(|s| s.success()) {
        return Err(error(format!(
            "compiling {} failed:\n{stderr}",
            source.display()
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
    pub peer: Peer,
    pub daemon: Daemon,
}

impl Upstream {
    /// Starts `flavor` in the foreground with extra `args` and `env` (e.g.
    /// XENSTUB_DOMIDS) and waits until it accepts connections.
    pub fn launch(
        peer: impl Into<Peer>,
        label: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> io::Result<Upstream> {
        let peer = peer.into();
        if let Some(missing) = peer.missing() {
            return Err(error(missing));
        }
        let dir = scratch_dir(label)?;
        let socket = dir.join("socket");
        let mut cmd = peer.release.command(&peer.binary());
        cmd.env("LD_PRELOAD", stub_library()?)
            .env("XENSTUB_DIR", &dir);
        match peer.flavor {
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
            peer,
            daemon: Daemon::spawn(label, cmd, dir, socket)?,
        })
    }

    /// The daemon with no extra arguments (for tests).
    pub fn start(peer: impl Into<Peer>) -> Upstream {
        Upstream::start_with_env(peer, &[], &[])
    }

    /// With extra arguments (for tests).
    pub fn start_with(peer: impl Into<Peer>, args: &[&str]) -> Upstream {
        Upstream::start_with_env(peer, args, &[])
    }

    /// With extra arguments and environment (for tests).
    pub fn start_with_env(peer: impl Into<Peer>, args: &[&str], env: &[(&str, &str)]) -> Upstream {
        let peer = peer.into();
        Upstream::launch(peer, peer.name(), args, env).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Gives up the peer, keeping the running daemon.
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
