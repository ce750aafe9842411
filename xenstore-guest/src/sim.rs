//! The guest's end of the simulated ring (the daemon's is
//! `xenstored_probes::conn::ring::sim`; both over `xenstore_proto::sim`): the domain builder's `prepare`, a guest
//! process attaching to its page and event channel, the domain's death.

use std::fs::{File, OpenOptions, TryLockError};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::time::Duration;

use xenstore_proto::ring::Mapping;
use xenstore_proto::ring::PAGE_SIZE;
use xenstore_proto::sim::{
    bind_fresh, drain_socket, ring_bell, wait_readable, SimPaths, SimXen, State,
};

/// How long a guest process waits for the one before it to finish.
const LOCK_WAIT: Duration = Duration::from_secs(10);

/// Waits for the other guest processes of the domain (an flock on the page).
fn take_turn(page: &File, paths: &SimPaths, wait: Duration) -> io::Result<()> {
    let deadline = std::time::Instant::now() + wait;
    loop {
        match page.try_lock() {
            Ok(()) => return Ok(()),
            Err(TryLockError::WouldBlock) => {}
            Err(TryLockError::Error(e)) => return Err(e),
        }
        if std::time::Instant::now() >= deadline {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!(
                    "{}: another guest process holds this domain's ring (one at a time)",
                    paths.dir.display()
                ),
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The guest's end: the page mapped and the guest's socket bound, held by
/// one guest process at a time (an flock on the page file).
pub struct SimGuest {
    pub gfn: u64,
    pub port: u32,
    paths: SimPaths,
    sock: UnixDatagram,
    page: Option<Mapping>,
    /// The page file, open while this process holds the domain's flock.
    lock: Option<File>,
}

impl SimGuest {
    /// Creates a domain's page (zeroed) and event channel port: what the
    /// domain builder does before the toolstack introduces the domain.
    pub fn prepare(run_dir: &Path, domid: u16, gfn: u64, port: u32) -> io::Result<SimPaths> {
        let paths = SimPaths::new(run_dir, domid);
        if paths.dir.exists() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!(
                    "{} exists: domain {domid} is already prepared",
                    paths.dir.display()
                ),
            ));
        }
        std::fs::create_dir_all(&paths.dir)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", paths.dir.display())))?;
        File::create(paths.page(gfn))?.set_len(PAGE_SIZE as u64)?;
        // Binding creates the socket file that names the port.
        drop(bind_fresh(&paths.guest_end(port))?);
        SimXen::open(run_dir)?.set(domid, Some(State::Running))?;
        Ok(paths)
    }

    /// Attaches this process as the domain's guest, waiting for any other
    /// guest process of the domain to finish.
    pub fn open(run_dir: &Path, domid: u16) -> io::Result<SimGuest> {
        let paths = SimPaths::new(run_dir, domid);
        let (gfn, port) = paths.discover()?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(paths.page(gfn))?;
        take_turn(&file, &paths, LOCK_WAIT)?;
        let page = Mapping::of_fd(&file, 0)?;
        let sock = bind_fresh(&paths.guest_end(port))?;
        Ok(SimGuest {
            gfn,
            port,
            paths,
            sock,
            page: Some(page),
            lock: Some(file),
        })
    }

    /// Closes the page file, letting another guest process of the domain
    /// attach: for a process holding thousands of domains (the bench's
    /// idle ones) under a limit of open files it cannot raise, and whose
    /// domains nothing else attaches to. The mapping stays.
    pub fn unlock(&mut self) {
        self.lock = None;
    }

    /// The page, handed to the ring's [`crate::ring::Client`] once.
    pub fn take_page(&mut self) -> Option<Mapping> {
        self.page.take()
    }

    pub fn notify(&self) -> io::Result<()> {
        ring_bell(&self.sock, &self.paths.daemon_end(self.port))
    }

    /// Waits up to `timeout` for a notification; true if one came.
    pub fn wait(&self, timeout: Duration) -> io::Result<bool> {
        let signalled = wait_readable(self.sock.as_raw_fd(), timeout)?;
        drain_socket(&self.sock)?;
        Ok(signalled)
    }

    /// The domain dies and is gone: its page and directory removed, then,
    /// as Xen does, the simulated hypervisor marks it dying and raises
    /// VIRQ_DOM_EXC (the daemon asks, finds it dying, releases it).
    pub fn destroy(run_dir: &Path, domid: u16) -> io::Result<()> {
        let paths = SimPaths::new(run_dir, domid);
        let (gfn, _port) = paths.discover()?;
        std::fs::remove_file(paths.page(gfn))?;
        std::fs::remove_dir_all(&paths.dir)?;
        SimGuest::die(run_dir, domid)
    }

    /// The domain dies as on Xen: the simulated hypervisor marks it dying
    /// and raises VIRQ_DOM_EXC, which names no domain (the daemon asks);
    /// its page stays until [`SimGuest::destroy`].
    pub fn die(run_dir: &Path, domid: u16) -> io::Result<()> {
        let xen = SimXen::open(run_dir)?;
        xen.set(domid, Some(State::Dying))?;
        xen.fire()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::RawFd;

    use crate::ring::Client;
    use xenstored_probes::conn::ring::conn::{RingConn, Wake};
    use xenstored_probes::conn::ring::sim::SimBackend;
    use xenstored_probes::conn::ring::transport::RingTransport;
    use xenstored_probes::daemon::direct::NoBackend;
    use xenstored_probes::daemon::quota::Quotas;
    use xenstored_probes::daemon::Daemon;
    use xenstored_probes::server::Server;

    fn readable(fd: RawFd, ms: u64) -> bool {
        wait_readable(fd, Duration::from_millis(ms)).unwrap()
    }

    #[test]
    fn introduce_talk_and_vanish() {
        let run = std::env::temp_dir().join(format!("xs-sim-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&run);
        SimGuest::prepare(&run, 6, 1234, 3).unwrap();
        assert!(SimGuest::prepare(&run, 6, 1234, 3).is_err());
        let backend = SimBackend::new(&run);
        // The wrong gfn or port is refused, as a bad XS_INTRODUCE should be.
        assert!(RingConn::attach(&backend, 6, 99, 3).is_err());
        assert!(RingConn::attach(&backend, 6, 1234, 4).is_err());
        let mut conn = RingConn::attach(&backend, 6, 1234, 3).unwrap();

        let mut guest = SimGuest::open(&run, 6).unwrap();
        assert_eq!((guest.gfn, guest.port), (1234, 3));
        let client = Client::new(Box::new(guest.take_page().unwrap()));
        assert_eq!(client.server_features(), 3);
        client.write(b"hello").unwrap();
        guest.notify().unwrap();
        assert!(readable(conn.fd(), 1000));
        assert_eq!(conn.wake().unwrap(), Wake::Ready);
        assert!(!readable(conn.fd(), 0), "drain leaves nothing pending");
        let mut buf = [0u8; 16];
        assert_eq!(conn.read(&mut buf).unwrap(), 5);
        assert_eq!(
            conn.read(&mut buf).unwrap_err().kind(),
            io::ErrorKind::WouldBlock
        );
        conn.write(b"world").unwrap();
        assert!(guest.wait(Duration::from_secs(1)).unwrap());
        assert_eq!(client.read(&mut buf).unwrap(), 5);
        assert_eq!(&buf[..5], b"world");

        drop(client);
        drop(guest);
        SimGuest::destroy(&run, 6).unwrap();
        // The daemon hears of it from VIRQ_DOM_EXC; a wake-up sees it too.
        assert_eq!(conn.wake().unwrap(), Wake::Gone);
        assert_eq!(conn.read(&mut buf).unwrap(), 0);
        std::fs::remove_dir_all(&run).unwrap();
    }

    /// This process's fd of the Unix socket bound at `path` (the inode
    /// /proc/net/unix lists for the path, found among /proc/self/fd).
    fn fd_bound_at(path: &Path) -> RawFd {
        let unix = std::fs::read_to_string("/proc/net/unix").unwrap();
        let inode = unix
            .lines()
            .find_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f.len() == 8 && Path::new(f[7]) == path).then(|| f[6].to_string())
            })
            .unwrap_or_else(|| panic!("{} not in /proc/net/unix", path.display()));
        let target = format!("socket:[{inode}]");
        std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .filter_map(|e| e.ok())
            .find(|e| std::fs::read_link(e.path()).is_ok_and(|l| l.as_os_str() == target.as_str()))
            .and_then(|e| e.file_name().to_str()?.parse().ok())
            .unwrap_or_else(|| panic!("no fd of {target}"))
    }

    /// The daemon's event loop, one turn per call: a byte on the stop
    /// socket raises the edge that makes `Server::run` return after it.
    struct OneTurn {
        server: Server,
        stop_tx: UnixDatagram,
        _stop_rx: UnixDatagram,
    }

    impl OneTurn {
        fn turn(&mut self) {
            self.stop_tx.send(&[1]).unwrap();
            self.server.run().unwrap();
        }
    }

    /// A guest rings after the loop's poll returned and the loop's own
    /// drain of the doorbell takes that signal (here: the test reads the
    /// daemon's socket in its place). The edge the guest raised is still
    /// queued, but the next poll reports the socket as it is: writable, not
    /// readable. The loop must read the ring anyway, or the request waits
    /// for a signal that never comes (the soak's "no reply").
    #[test]
    fn a_doorbell_taken_between_poll_and_read_still_gets_the_ring_read() {
        let run = std::env::temp_dir().join(format!("xs-sim-race-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&run);
        SimGuest::prepare(&run, 7, 4321, 5).unwrap();
        let ring = RingTransport::attach(&SimBackend::new(&run), 7, 4321, 5).unwrap();
        let doorbell = fd_bound_at(&SimPaths::new(&run, 7).daemon_end(5));
        let (stop_tx, stop_rx) = UnixDatagram::pair().unwrap();
        let daemon = Daemon::new(Quotas::default(), Box::new(NoBackend));
        let mut server = Server::new(daemon).unwrap();
        server.stop_when_readable(stop_rx.as_raw_fd()).unwrap();
        server.attach(Box::new(ring), 7).unwrap();
        let mut turns = OneTurn {
            server,
            stop_tx,
            _stop_rx: stop_rx,
        };
        // Settle the introduction's signals.
        turns.turn();

        let mut guest = SimGuest::open(&run, 7).unwrap();
        let client = Client::new(Box::new(guest.take_page().unwrap()));
        let request = xenstore_proto::frame::message(1, 9, 0, b"/\0");
        assert_eq!(client.write(&request).unwrap(), request.len());
        guest.notify().unwrap();
        // The loop's take_signals for an earlier event, standing in.
        assert!(readable(doorbell, 1000));
        let mut byte = [0u8; 8];
        // SAFETY: the daemon's socket, alive until `turns` drops; reads
        // into a local buffer of the given size.
        let n = unsafe {
            libc::recv(
                doorbell,
                byte.as_mut_ptr() as *mut libc::c_void,
                byte.len(),
                libc::MSG_DONTWAIT,
            )
        };
        assert_eq!(n, 1, "the guest's one signal");
        turns.turn();
        assert!(
            guest.wait(Duration::from_secs(5)).unwrap(),
            "no reply signalled: the request was left in the ring"
        );
        let mut reply = [0u8; 64];
        assert!(client.read(&mut reply).unwrap() >= 16, "a whole header");
        assert_eq!(reply[4..8], 9u32.to_le_bytes(), "the reply to req_id 9");
        drop(client);
        drop(guest);
        drop(turns);
        std::fs::remove_dir_all(&run).unwrap();
    }
}
