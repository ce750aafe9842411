//! Unmodified clients against a real shim: Debian's xenstore-utils and
//! xenstore-control, pyxs under /usr/bin/python3, the xenstore-rs crate,
//! and a guest domain reaching the shim through its domain socket.
use crate::common::daemon::run_client;
use crate::common::process::{BoundedOutput, Watched};
use crate::common::shim::Shim;
use crate::common::wire;
use crate::common::{wait_for, TIMEOUT};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

const XENSTORE_CONTROL: &str = "/usr/lib/xen-4.17/bin/xenstore-control";

/// A minimal raw-wire client for what xenstore-utils cannot send
/// (INTRODUCE, RELEASE): one request, one reply, watch events skipped.
struct Raw(UnixStream);

impl Raw {
    fn connect(socket: &Path) -> Raw {
        let s = UnixStream::connect(socket).expect("connect to the shim");
        s.set_read_timeout(Some(TIMEOUT)).unwrap();
        Raw(s)
    }

    fn call(&mut self, ty: u32, payload: &[u8]) -> (u32, Vec<u8>) {
        self.0.write_all(&wire::message(ty, 1, 0, payload)).unwrap();
        let (header, body) = wire::reply(&mut self.0);
        (header.ty, body)
    }
}

const INTRODUCE: u32 = 8;
const RELEASE: u32 = 9;
const ERROR: u32 = 16;

fn failing(shim: &Shim, socket: &Path, program: &str, args: &[&str]) -> String {
    let out = shim
        .client(program)
        .env("XENSTORED_PATH", socket)
        .args(args)
        .bounded_output();
    assert!(!out.status.success(), "{program} {args:?} should fail");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn xenstore_utils_write_read_list_exists_rm() {
    let shim = Shim::start();
    shim.run("xenstore-write", &["/vm/a", "1", "/vm/b/c", "two words"]);
    assert_eq!(shim.run("xenstore-read", &["/vm/a"]), "1\n");
    assert_eq!(shim.run("xenstore-read", &["/vm/b/c"]), "two words\n");
    assert_eq!(shim.run("xenstore-list", &["/vm"]), "a\nb\n");
    shim.run("xenstore-exists", &["/vm/b"]);
    let out = shim
        .client("xenstore-exists")
        .arg("/vm/nope")
        .bounded_output();
    assert!(!out.status.success());
    shim.run("xenstore-rm", &["/vm/b"]);
    assert_eq!(shim.run("xenstore-list", &["/vm"]), "a\n");
    let err = failing(&shim, &shim.socket, "xenstore-read", &["/vm/b/c"]);
    assert!(err.contains("couldn't read path /vm/b/c"), "{err}");
}

#[test]
fn xenstore_ls_shows_the_upstream_initial_tree_and_permissions() {
    let shim = Shim::start();
    assert_eq!(
        shim.run("xenstore-ls", &["-f", "-p"]),
        "/tool = \"\"   (n0)\n/tool/xenstored = \"\"   (n0)\n"
    );
    shim.run("xenstore-write", &["/p/q", "v"]);
    shim.run("xenstore-chmod", &["/p/q", "b0", "r5", "w7"]);
    let ls = shim.run("xenstore-ls", &["-f", "-p", "/p"]);
    assert_eq!(ls, "/p/q = \"v\"   (b0,r5,w7)\n");
}

#[test]
fn xenstore_watch_reports_the_initial_event_and_changes() {
    let shim = Shim::start();
    shim.run("xenstore-write", &["/w/x", "0"]);
    let watch = shim.watch(&["-n", "3", "/w"]);
    assert_eq!(watch.line(0, TIMEOUT), "/w", "initial event");
    shim.run("xenstore-write", &["/w/x", "1"]);
    assert_eq!(watch.line(1, TIMEOUT), "/w/x");
    shim.run("xenstore-rm", &["/w"]);
    assert_eq!(watch.line(2, TIMEOUT), "/w");
    assert!(watch.end(TIMEOUT).status.success());
}

#[test]
fn xenstore_control_speaks_the_upstream_commands() {
    let shim = Shim::start();
    let help = shim.run(XENSTORE_CONTROL, &["help"]);
    for cmd in [
        "check",
        "log",
        "logfile",
        "memreport",
        "print",
        "quota",
        "quota-soft",
        "help",
    ] {
        assert!(
            help.contains(&format!("\n{cmd}\t")) || help.starts_with(&format!("{cmd}\t")),
            "{help}"
        );
    }
    assert_eq!(shim.run(XENSTORE_CONTROL, &["check"]), "OK\n");
    assert_eq!(shim.run(XENSTORE_CONTROL, &["print", "hello"]), "OK\n");
    let quota = shim.run(XENSTORE_CONTROL, &["quota"]);
    assert!(quota.starts_with("Quota settings:\n"), "{quota}");
    assert!(
        quota.contains("nodes            :     1000 Nodes per domain\n"),
        "{quota}"
    );
    shim.run(XENSTORE_CONTROL, &["quota", "set", "nodes", "42"]);
    let quota = shim.run(XENSTORE_CONTROL, &["quota"]);
    assert!(
        quota.contains("nodes            :       42 Nodes per domain\n"),
        "{quota}"
    );
    assert_eq!(
        shim.run(XENSTORE_CONTROL, &["quota", "0"]),
        "Domain 0:\nnodes           :        3\nwatches         :        0\n\
         transactions    :        0\noutstanding     :        0\nmemory          :      132\n\n"
    );
    let report = shim.dir.join("mem");
    shim.run(XENSTORE_CONTROL, &["memreport", report.to_str().unwrap()]);
    assert!(std::fs::read_to_string(&report)
        .unwrap()
        .contains("nodes: "));
    // Unknown commands are EINVAL: the client answers with the help text.
    let out = shim.client(XENSTORE_CONTROL).arg("bogus").bounded_output();
    let said = [out.stdout, out.stderr].concat();
    assert!(String::from_utf8_lossy(&said).contains("Valid commands are"));
}

const PYXS_SESSION: &str = r#"
import sys
from pyxs import Client
sock = sys.argv[1]
with Client(unix_socket_path=sock) as c:
    c.write(b"/py/a", b"1")
    print("read", c.read(b"/py/a"))
    c.transaction()
    c.write(b"/py/t", b"x")
    print("commit", c.commit(), c.read(b"/py/t"))
    with Client(unix_socket_path=sock) as other:
        c.transaction()
        c.read(b"/py/a")
        c.write(b"/py/a", b"mine")
        other.write(b"/py/a", b"theirs")
        print("conflict commit", c.commit(), c.read(b"/py/a"))
    c.transaction()
    c.write(b"/py/r", b"1")
    c.rollback()
    print("rolled back", c.exists(b"/py/r"))
    with c.monitor() as m:
        m.watch(b"/py/w", b"tok")
        events = m.wait()
        print("event", next(events))
        c.write(b"/py/w/x", b"1")
        print("event", next(events))
print("done")
"#;

#[test]
fn pyxs_transactions_conflicts_and_watches() {
    let shim = Shim::start();
    let out = Command::new("/usr/bin/python3")
        .arg("-c")
        .arg(PYXS_SESSION)
        .arg(&shim.socket)
        .bounded_output();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "read b'1'\n\
         commit True b'x'\n\
         conflict commit False b'theirs'\n\
         rolled back False\n\
         event Event(path=b'/py/w', token=b'tok')\n\
         event Event(path=b'/py/w/x', token=b'tok')\n\
         done\n"
    );
}

#[test]
fn xenstore_rs_client() {
    // XsUnix::new reads XENSTORED_PATH; setting it in this multi-threaded
    // process would race other tests, so the session runs in a child.
    let shim = Shim::start();
    // Test names carry the module path below the binary's crate.
    let (_, module) = module_path!().split_once("::").unwrap();
    let session = format!("{module}::xenstore_rs_session");
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &session, "--ignored", "--nocapture"])
        .env("XENSTORED_PATH", &shim.socket)
        .bounded_output();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("xenstore-rs session ok"), "{stdout}");
}

#[test]
#[ignore = "run by xenstore_rs_client with XENSTORED_PATH pointing at a shim"]
fn xenstore_rs_session() {
    use xenstore_rs::{unix::XsUnix, Xs};
    assert!(
        std::env::var_os("XENSTORED_PATH").is_some(),
        "needs XENSTORED_PATH"
    );
    let xs = XsUnix::new().expect("xenstore-rs connects");
    xs.write("/rs/k", "v").unwrap();
    assert_eq!(&*xs.read("/rs/k").unwrap(), "v");
    let dir: Vec<String> = xs
        .directory("/")
        .unwrap()
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(dir, ["tool", "rs"]);
    xs.rm("/rs").unwrap();
    let err = xs.read("/rs/k").unwrap_err();
    assert!(
        err.to_string().contains("ENOENT") || err.raw_os_error() == Some(2),
        "{err}"
    );
    println!("xenstore-rs session ok");
}

#[test]
fn guest_domain_socket_relative_paths_watches_and_denial() {
    let shim = Shim::start();
    let mut dom0 = Raw::connect(&shim.socket);
    assert_eq!(
        dom0.call(INTRODUCE, b"6\x00123\x005\x00"),
        (INTRODUCE, b"OK\0".to_vec())
    );
    let guest = shim.run_dir.join("domain/6");
    wait_for("the domain socket", Duration::from_secs(5), || {
        guest.exists()
    });
    shim.run("xenstore-write", &["/local/domain/6", ""]);
    shim.run("xenstore-chmod", &["/local/domain/6", "n6"]);

    let as_guest = |args: &[&str], program: &str| run_client(&guest, program, args);
    as_guest(&["device/vbd/0/state", "3"], "xenstore-write");
    assert_eq!(as_guest(&["device/vbd/0/state"], "xenstore-read"), "3\n");
    assert_eq!(
        shim.run("xenstore-read", &["/local/domain/6/device/vbd/0/state"]),
        "3\n"
    );
    // What the guest creates, it owns.
    assert_eq!(
        shim.run("xenstore-ls", &["-f", "-p", "/local/domain/6/device/vbd"]),
        "/local/domain/6/device/vbd/0 = \"\"   (n6)\n/local/domain/6/device/vbd/0/state = \"3\"   (n6)\n"
    );

    // A relative watch gets relative event paths.
    let watch = Watched::spawn(
        "xenstore-watch",
        shim.client("xenstore-watch")
            .env("XENSTORED_PATH", &guest)
            .args(["-n", "2", "device"])
            .stdout(Stdio::piped()),
        false,
    );
    assert_eq!(watch.line(0, TIMEOUT), "device");
    shim.run("xenstore-write", &["/local/domain/6/device/vif", "x"]);
    assert_eq!(watch.line(1, TIMEOUT), "device/vif");
    assert!(watch.end(TIMEOUT).status.success());

    // Denied: dom0's nodes, other domains' homes, privileged operations.
    let err = failing(&shim, &guest, "xenstore-read", &["/tool/xenstored"]);
    assert!(err.contains("couldn't read path"), "{err}");
    let err = failing(&shim, &guest, "xenstore-write", &["/local/domain/7/x", "1"]);
    assert!(err.contains("could not write path"), "{err}");
    let mut raw_guest = Raw::connect(&guest);
    assert_eq!(
        raw_guest.call(INTRODUCE, b"7\x001\x001\x00"),
        (ERROR, b"EACCES\0".to_vec())
    );

    // RELEASE closes the guest's connections and removes its socket and nodes.
    assert_eq!(dom0.call(RELEASE, b"6\x00"), (RELEASE, b"OK\0".to_vec()));
    let mut buf = [0u8; 1];
    assert_eq!(
        raw_guest.0.read(&mut buf).unwrap(),
        0,
        "guest connection closed"
    );
    assert!(!guest.exists());
    // Upstream removes the nodes a dead domain owned (XSA-419).
    assert_eq!(shim.run("xenstore-ls", &["-f", "/local/domain"]), "");
}
