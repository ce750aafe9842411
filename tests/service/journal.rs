//! The shim's notable events reach the real systemd-journald through the
//! native protocol with their fields. journald runs in a private mount
//! namespace (fresh tmpfs over /run and /var/log), so the test needs no
//! journal of the machine's and leaves none of its entries there; the shim
//! runs in that namespace (its socket, in /tmp, is shared) and
//! `journalctl -o json XS_DOMID=…` is asked there too.

use crate::common::process::{output_within, StopOnDrop};
use crate::common::shim::private_dir;
use crate::common::{wait_for, xs_error, TIMEOUT};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;
use xenstore_guest::boot::boot;
use xenstore_guest::client::Xs;
use xenstore_testkit::daemon::Daemon;

const GUEST: u16 = 7;
const SIGTERM: i32 = 15;

/// A systemd-journald alone in a new mount namespace.
struct PrivateJournal {
    journald: StopOnDrop,
}

impl PrivateJournal {
    fn start() -> PrivateJournal {
        let script = "mount -t tmpfs tmpfs /run && mount -t tmpfs tmpfs /var/log \
                      && mkdir -p /run/systemd/journal && exec /lib/systemd/systemd-journald";
        let child = Command::new("unshare")
            .args(["--mount", "--propagation", "private", "sh", "-c", script])
            .stdin(Stdio::null())
            .spawn()
            .expect("unshare for journald");
        let journal = PrivateJournal {
            journald: StopOnDrop {
                child,
                signal: SIGTERM,
            },
        };
        let socket = journal.root().join("run/systemd/journal/socket");
        wait_for("journald's socket", TIMEOUT, || socket.exists());
        journal
    }

    /// Its namespace's root, as seen from outside it.
    fn root(&self) -> std::path::PathBuf {
        Path::new("/proc")
            .join(self.journald.child.id().to_string())
            .join("root")
    }

    /// `program` run inside journald's mount namespace.
    fn command(&self, program: &Path) -> Command {
        let mut cmd = Command::new("nsenter");
        cmd.arg(format!("--mount=/proc/{}/ns/mnt", self.journald.child.id()))
            .arg("--")
            .arg(program);
        cmd
    }

    /// The entries `journalctl -o json MATCH` returns, parsed.
    fn entries(&self, matches: &[&str]) -> Vec<Value> {
        let out = output_within(
            self.command(Path::new("journalctl"))
                .args(["--no-pager", "--all", "-o", "json"])
                .args(matches),
            TIMEOUT,
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }

    /// Waits until `matches` select `n` entries; returns them.
    fn wait_entries(&self, matches: &[&str], n: usize) -> Vec<Value> {
        let mut got = Vec::new();
        wait_for(&format!("{n} journal entries {matches:?}"), TIMEOUT, || {
            got = self.entries(matches);
            got.len() >= n
        });
        assert_eq!(got.len(), n, "{matches:?}: {got:#?}");
        got
    }
}

fn field<'v>(entry: &'v Value, name: &str) -> &'v str {
    entry[name]
        .as_str()
        .unwrap_or_else(|| panic!("no {name} in {entry:#}"))
}

#[test]
fn notable_events_reach_journald_with_their_fields() {
    if !crate::common::need_root("notable_events_reach_journald_with_their_fields") {
        return;
    }
    let journal = PrivateJournal::start();
    let dir = private_dir("journal");
    let socket = dir.join("socket");
    let run_dir = dir.join("run");
    std::fs::create_dir_all(&run_dir).unwrap();
    let mut cmd = journal.command(&crate::common::bin("xenstored-shim"));
    cmd.arg("--socket")
        .arg(&socket)
        .arg("--run-dir")
        .arg(&run_dir)
        .args(["--quota", "watches=2"]);
    let mut shim = Daemon::spawn("xenstored-shim in journald's namespace", cmd, dir, socket)
        .unwrap_or_else(|e| panic!("{e}"));
    let pid = format!("_PID={}", shim.pid());
    let id = |kind: &str| format!("MESSAGE_ID={kind}");

    let started = journal.wait_entries(&[&pid, &id("5e2024177004468e85e2ecb08d19c0ec")], 1);
    assert!(field(&started[0], "MESSAGE").starts_with("ready: serving"));
    assert_eq!(field(&started[0], "PRIORITY"), "6");
    assert_eq!(field(&started[0], "_TRANSPORT"), "journal");

    // A guest over the simulated ring: introduced, refused a third watch
    // (quota 2), released.
    let mut dom0 = Xs::connect(&shim.socket).unwrap();
    dom0.timeout = Duration::from_secs(10);
    let run_dir = shim.dir.join("run");
    let mut guest = boot(&mut dom0, &run_dir, GUEST, Duration::from_secs(10)).unwrap();
    guest.watch("a", "1").unwrap();
    guest.watch("b", "2").unwrap();
    // 30 refusals: the journal gets at most 10 a second of the domain's.
    let refusing = std::time::Instant::now();
    for _ in 0..30 {
        assert_eq!(xs_error(guest.watch("c", "3")), "E2BIG");
    }
    let seconds = refusing.elapsed().as_secs() as usize;
    dom0.release(GUEST).unwrap();

    let domid = format!("XS_DOMID={GUEST}");
    journal.wait_entries(&[&pid, &domid, &id("c0a4f96aee0b48f18d354237ca292f91")], 1);
    let entries = journal.entries(&[&pid, &domid]);
    for e in &entries {
        eprintln!("journal: {e}");
    }
    let ids: Vec<&str> = entries.iter().map(|e| field(e, "MESSAGE_ID")).collect();
    let refusals = ids.len() - 2;
    assert_eq!(
        ids[0], "efe08c65050240a38abf80b9c4a4a44b",
        "introduced first"
    );
    assert!(ids[1..=refusals]
        .iter()
        .all(|i| *i == "d2b20cda4f874639afb02e0703a495eb"));
    assert_eq!(
        ids[refusals + 1],
        "c0a4f96aee0b48f18d354237ca292f91",
        "gone last"
    );
    let budget = (10 * (seconds + 1)).min(30);
    assert!(
        (10..=budget).contains(&refusals),
        "{refusals} refusals logged in {seconds} s"
    );
    let refusal = &entries[1];
    assert_eq!(field(refusal, "XS_OP"), "XS_WATCH");
    assert_eq!(field(refusal, "XS_QUOTA"), "watches");
    assert_eq!(field(refusal, "XS_REASON"), "E2BIG");
    assert_eq!(field(refusal, "PRIORITY"), "4");
    assert_eq!(field(refusal, "SYSLOG_IDENTIFIER"), "xenstored-shim");
    assert_eq!(field(&entries[refusals + 1], "XS_REASON"), "released");

    // A client's oversized message drops it: an error with its reason.
    let mut client = std::os::unix::net::UnixStream::connect(&shim.socket).unwrap();
    let header: Vec<u8> = [2u32, 1, 0, 5000]
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect();
    std::io::Write::write_all(&mut client, &header).unwrap();
    let dropped = journal.wait_entries(&[&pid, &id("414c560f23944989bf050a5d82c6527d")], 1);
    assert_eq!(field(&dropped[0], "XS_REASON"), "oversized message");
    assert_eq!(field(&dropped[0], "PRIORITY"), "3");

    crate::common::signal(shim.pid(), SIGTERM);
    let status = crate::common::process::wait_exit(&mut shim.child, "the shim", TIMEOUT);
    assert!(status.success(), "{status}: {}", shim.log());
    let stopped = journal.wait_entries(&[&pid, &id("9dfd6249ac8748bf921b04de30cf5936")], 1);
    assert_eq!(field(&stopped[0], "MESSAGE"), "SIGTERM: stopping");
    // In the foreground, with stderr not the journal, stderr has them too.
    assert!(
        shim.log().contains("XS_WATCH refused E2BIG"),
        "{}",
        shim.log()
    );
}

/// An entry too big for one datagram goes in a sealed memfd, whole.
#[test]
fn a_big_entry_reaches_journald_through_a_memfd() {
    if !crate::common::need_root("a_big_entry_reaches_journald_through_a_memfd") {
        return;
    }
    let journal = PrivateJournal::start();
    let socket = journal.root().join("run/systemd/journal/socket");
    // Over the datagram limit (net.core.wmem_default, 208 KiB by default).
    let big = "x".repeat(1 << 20);
    let marker = format!("XS_TEST={}", std::process::id());
    let sender = xenstored_probes::log::journal::Journal::new().unwrap();
    sender
        .send_to(
            &socket,
            &[
                ("MESSAGE", &big),
                ("XS_TEST", &std::process::id().to_string()),
            ],
        )
        .unwrap();
    let got = journal.wait_entries(&[&marker], 1);
    assert_eq!(field(&got[0], "MESSAGE").len(), big.len());
}
