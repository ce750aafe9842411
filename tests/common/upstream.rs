//! Debian's upstream daemons (C xenstored, oxenstored) on a private socket,
//! running without Xen under the LD_PRELOAD stub tests/peer/xenstub.c, killed
//! when dropped. Same shape as `Shim`.

use super::shim::private_dir;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

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
}

/// True when the upstream daemon is installed; false (loudly) when it may be
/// skipped. Under CI (`.ci/run` installs xen-utils-4.17 and libxen-dev) it
/// must be there.
pub fn available(flavor: Flavor, test: &str) -> bool {
    let headers = Path::new("/usr/include/xenctrl.h");
    let missing = if !Path::new(flavor.binary()).exists() {
        format!("{} not installed (xen-utils-4.17)", flavor.binary())
    } else if !headers.exists() {
        "/usr/include/xenctrl.h not installed (libxen-dev)".to_string()
    } else {
        return true;
    };
    if std::env::var_os("CI").is_some() {
        panic!("{test}: {missing}, and CI is set: this test must run");
    }
    eprintln!("\n*** SKIPPING {test}: {missing} (CI unset) ***\n");
    false
}

/// The stub library, compiled once per source version into the target dir.
/// Parallel test processes each compile to a private name and rename into
/// place, so nobody ever loads a half-written file.
pub fn stub_library() -> &'static Path {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peer/xenstub.c");
        let text = std::fs::read(&source).expect("read tests/peer/xenstub.c");
        let dir = target_dir().join("xenstub");
        std::fs::create_dir_all(&dir).unwrap();
        let lib = dir.join(format!("libxenstub-{:016x}.so", fnv1a(&text)));
        if lib.exists() {
            return lib;
        }
        let tmp = dir.join(format!("libxenstub.{}.tmp.so", std::process::id()));
        let out = Command::new("cc")
            .args(["-shared", "-fPIC", "-O1", "-Wall", "-o"])
            .arg(&tmp)
            .arg(&source)
            .arg("-ldl")
            .output()
            .expect("run cc (a C compiler is needed for the upstream stub)");
        assert!(
            out.status.success(),
            "compiling {} failed:\n{}",
            source.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::rename(&tmp, &lib).unwrap();
        lib
    })
}

fn target_dir() -> PathBuf {
    // target/<profile>/deps/<test-exe> -> target/<profile>
    let exe = std::env::current_exe().unwrap();
    exe.parent().and_then(|d| d.parent()).unwrap().to_path_buf()
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf29ce484222325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x100000001b3)
    })
}

pub struct Upstream {
    pub flavor: Flavor,
    pub child: Child,
    pub dir: PathBuf,
    pub socket: PathBuf,
}

impl Upstream {
    pub fn start(flavor: Flavor) -> Upstream {
        Upstream::start_with(flavor, &[])
    }

    /// Starts the daemon in the foreground with extra arguments and waits
    /// until it accepts connections.
    pub fn start_with(flavor: Flavor, args: &[&str]) -> Upstream {
        Upstream::start_with_env(flavor, args, &[])
    }

    /// Also sets environment variables, e.g. XENSTUB_DOMIDS.
    pub fn start_with_env(flavor: Flavor, args: &[&str], env: &[(&str, &str)]) -> Upstream {
        let dir = private_dir(match flavor {
            Flavor::C => "xenstored",
            Flavor::Ocaml => "oxenstored",
        });
        let socket = dir.join("socket");
        let mut cmd = Command::new(flavor.binary());
        cmd.env("LD_PRELOAD", stub_library())
            .env("XENSTUB_DIR", &dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
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
                )
                .unwrap();
                cmd.arg("--no-fork").arg("--config-file").arg(&conf);
            }
        }
        let child = cmd
            .args(args)
            .envs(env.iter().copied())
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", flavor.binary()));
        let mut daemon = Upstream {
            flavor,
            child,
            dir,
            socket,
        };
        daemon.wait_ready();
        daemon
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while UnixStream::connect(&self.socket).is_err() {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("{} exited before listening: {status}", self.flavor.name());
            }
            assert!(
                Instant::now() < deadline,
                "{} never listened on {}",
                self.flavor.name(),
                self.socket.display()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// A command with XENSTORED_PATH pointing at this daemon.
    pub fn client(&self, program: &str) -> Command {
        let mut cmd = Command::new(program);
        cmd.env("XENSTORED_PATH", &self.socket);
        cmd
    }

    /// True while the daemon process is alive (a client's bytes must never
    /// kill a daemon).
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
