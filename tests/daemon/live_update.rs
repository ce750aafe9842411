//! Live update (issue 25), the part that needs no hypervisor: the
//! migration stream as Debian's own C xenstored 4.17 writes it. The daemon
//! runs under the project's stub (tests/peer/xenstub.c); `xenstore-control
//! live-update -f TARGET` makes it dump its state to
//! `$XENSTORED_RUNDIR/state_dump` and exec TARGET with its argv plus `-U`.
//! TARGET here is a script that keeps a copy of the dump, so the test reads
//! what a real C xenstored handed over, byte for byte.

use crate::common::upstream::{self, Flavor, Peer, Release, Upstream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;
use xenstore_guest::boot;
use xenstore_guest::client::{Guest, SocketLink, Xs};
use xenstore_testkit::daemon::Daemon;
use xenstore_testkit::Watched;
use xenstored_probes::migration::stream::{self, ConnKind, Perm};

/// Starts C xenstored with some state, updates it into a script that
/// keeps `state_dump`, and returns the dump's bytes.
fn c_xenstored_state_dump(c: &Upstream) -> Vec<u8> {
    let dir = &c.dir;
    let kept = dir.join("kept-state");
    let target = dir.join("target.sh");
    // The exec'd image inherits the stub in LD_PRELOAD; sh does not care.
    std::fs::write(
        &target,
        format!(
            "#!/bin/sh\ncp \"$XENSTORED_RUNDIR/state_dump\" {kept:?}.tmp && mv {kept:?}.tmp {kept:?}\n\
             echo \"$@\" > {args:?}\n",
            kept = kept,
            args = dir.join("target-args"),
        ),
    )
    .unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o755)).unwrap();
    // The old image's answer to `-s` travels in the stream; the target
    // never sends it, so the client sees its connection close.
    let out = xenstore_testkit::process::output_within(
        c.client("/usr/lib/xen-4.17/bin/xenstore-control")
            .args(["live-update", "-t", "10", "-f"])
            .arg(&target),
        Duration::from_secs(30),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        kept.exists(),
        "no state dump kept (xenstore-control: {}, {stderr})\n{}",
        out.status,
        c.log()
    );
    let args = std::fs::read_to_string(dir.join("target-args")).unwrap();
    assert!(
        args.split_whitespace().last() == Some("-U"),
        "the target was not exec'd with -U: {args}"
    );
    std::fs::read(&kept).unwrap()
}

#[test]
fn c_xenstored_state_dump_reads_and_writes_back_byte_for_byte() {
    let test = "c_xenstored_state_dump_reads_and_writes_back_byte_for_byte";
    if !upstream::available(Flavor::C, test) {
        return;
    }
    let c = Upstream::start(Flavor::C);
    c.run("xenstore-write", &["/local/domain/7/data", "seven"]);
    c.run("xenstore-chmod", &["/local/domain/7/data", "n7", "r0"]);
    c.run("xenstore-write", &["/empty", ""]);
    let watcher = c.watch(&["/local/domain/7"]);
    watcher.line(0, crate::common::TIMEOUT);

    let bytes = c_xenstored_state_dump(&c);
    let state = stream::read(&bytes).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        stream::write(&state),
        bytes,
        "re-encoding C xenstored's dump changed it"
    );

    assert!(state.global.is_some(), "no GLOBAL record");
    assert!(state.skipped.is_empty(), "{:?}", state.skipped);
    // Under the stub dom0 is introduced as C does at start (xsd_kva).
    assert!(
        state.connections.iter().any(|c| matches!(
            c.kind,
            ConnKind::Ring {
                domid: 0,
                target: None,
                ..
            }
        )),
        "no dom0 ring connection: {:?}",
        state.connections
    );
    let watch = state
        .watches
        .iter()
        .find(|w| w.path == b"/local/domain/7")
        .expect("the watcher's watch");
    let watching = state
        .connections
        .iter()
        .find(|c| c.id == watch.conn_id)
        .expect("the watch's connection");
    assert!(matches!(watching.kind, ConnKind::Socket { .. }));
    // The live-update request's "OK" waits in its connection's output.
    assert!(
        state
            .connections
            .iter()
            .any(|c| c.output.ends_with(b"OK\0")),
        "no held OK: {:?}",
        state.connections
    );
    let node = |path: &str| {
        state
            .nodes
            .iter()
            .find(|n| n.path == path.as_bytes())
            .unwrap_or_else(|| panic!("no node {path}"))
    };
    let data = node("/local/domain/7/data");
    assert_eq!(data.value, b"seven");
    assert_eq!(
        data.perms,
        [
            Perm {
                access: b'n',
                ignore: false,
                domid: 7
            },
            Perm {
                access: b'r',
                ignore: false,
                domid: 0
            }
        ]
    );
    assert_eq!(node("/empty").value, b"");
    node("@releaseDomain");
    node("@introduceDomain");
    // Parents come before their children.
    let at = |path: &str| state.nodes.iter().position(|n| n.path == path.as_bytes());
    assert!(at("/local/domain") < at("/local/domain/7"));
}

/// `xenstore-control live-update -f xenstored-shim` against C xenstored:
/// C dumps its state and execs the shim in its own process, which takes
/// over the socket, the connections (one of them waiting on a watch), the
/// store, and sends the OK C held for the update's request.
#[test]
fn c_xenstored_updates_live_into_the_shim() {
    on_c(
        Release::Xen417,
        "c_xenstored_updates_live_into_the_shim",
        c_xenstored_update_into_the_shim,
    );
}

/// The same from Debian 13's C xenstored 4.20 (run under trixie's loader).
#[test]
fn c_xenstored_420_updates_live_into_the_shim() {
    on_c(
        Release::Xen420,
        "c_xenstored_420_updates_live_into_the_shim",
        c_xenstored_update_into_the_shim,
    );
}

/// Domain 5 on a ring, introduced as the toolstack does (its ring-ref and
/// port written, where a daemon taking the host back finds the ring
/// again), its `data` written and watched.
fn a_guest_watching(dom0: &mut Xs<SocketLink>, ring_dir: &Path) -> Guest {
    let mut guest = boot::boot(dom0, ring_dir, 5, crate::common::TIMEOUT).unwrap();
    dom0.write(0, "/local/domain/5/store/ring-ref", &boot::GFN.to_string())
        .unwrap();
    dom0.write(0, "/local/domain/5/store/port", &boot::PORT.to_string())
        .unwrap();
    guest.write(0, "data", "before").unwrap();
    guest.watch("data", "mine").unwrap();
    guest
        .next_event(crate::common::TIMEOUT)
        .unwrap()
        .expect("the watch's first event");
    guest
}

/// The guest's watch (a_guest_watching), set before the first update,
/// fires after the second.
fn assert_guest_watch_fires(guest: &mut Guest, log: impl Fn() -> String) {
    guest.write(0, "data", "after").unwrap();
    let event = guest.next_event(crate::common::TIMEOUT).unwrap();
    assert_eq!(
        event.map(|e| e.token),
        Some("mine".to_string()),
        "the guest's watch, set before the first update, after the second:\n{}",
        log()
    );
}

/// Runs `body` with `release`'s C xenstored, when this host has it.
fn on_c(release: Release, test: &str, body: fn(Release)) {
    if upstream::available(Peer::c(release), test) {
        body(release);
    }
}

fn c_xenstored_update_into_the_shim(release: Release) {
    let mut c = Upstream::start(Peer::c(release));
    let watcher = some_state(&c);
    a_big_directory(&c);
    c.run("xenstore-write", &["/vm/uuid/name", "guest7"]);
    let before = c.run("xenstore-ls", &["-f", "-p"]);
    let pid = c.pid();
    let shim = crate::common::bin("xenstored-shim");
    let out = xenstore_testkit::process::output_within(
        release
            .command(&release.program("xenstore-control"))
            .env("XENSTORED_PATH", &c.socket)
            .args(["live-update", "-t", "10", "-f"])
            .arg(&shim),
        Duration::from_secs(30),
    );
    assert_updated(&mut c, &out, pid, &shim, &watcher);
    assert!(!c.dir.join("state_dump").exists(), "the state file stayed");
    assert_eq!(store_but_probe(&c), before, "{}", c.log());
    assert_eq!(c.run("xenstore-read", &["/vm/uuid/name"]).trim(), "guest7");
}

/// Giving the host back: C xenstored 4.17 updates into the shim and the
/// shim back into it, a guest's ring (its doorbell carried by the stub as
/// C's event channel) and a dom0 watcher served throughout: the shim hands
/// C every ring's channel on one fd and domain 0's connection, as C's own
/// stream does.
#[test]
fn the_shim_gives_the_host_back_to_c_xenstored() {
    on_c(
        Release::Xen417,
        "the_shim_gives_the_host_back_to_c_xenstored",
        give_back_to_c,
    );
}

/// The same with Debian 13's C xenstored 4.20, which runs under trixie's
/// loader: the shim is given the loader, `-c` naming the program (which
/// the shim recognises as it would the file itself) and its arguments.
#[test]
fn the_shim_gives_the_host_back_to_c_xenstored_420() {
    on_c(
        Release::Xen420,
        "the_shim_gives_the_host_back_to_c_xenstored_420",
        give_back_to_c,
    );
}

fn give_back_to_c(release: Release) {
    let ring_dir = xenstore_testkit::daemon::scratch_dir("give-back-rings").unwrap();
    let rings = ring_dir.to_str().unwrap();
    // The shim C execs keeps its rings under its run dir: the same.
    let env = [("XENSTUB_RING_DIR", rings), ("XENSTORED_RUNDIR", rings)];
    let mut c = Upstream::start_with_env(Peer::c(release), &[], &env);
    c.run("xenstore-write", &["/local/domain/7/data", "seven"]);
    let watcher = c.watch(&["/local/domain/7"]);
    watcher.line(0, crate::common::TIMEOUT);
    // As xenconsoled and xl watch for deaths, across both updates.
    let releases = c.watch(&["@releaseDomain"]);
    releases.line(0, crate::common::TIMEOUT);
    let mut dom0 = Xs::connect(&c.socket).unwrap();
    dom0.timeout = crate::common::TIMEOUT;
    // As xenconsoled's: a client connected throughout, whose library
    // writes a request's header and body apart.
    let mut console = std::os::unix::net::UnixStream::connect(&c.socket).unwrap();
    let mut guest = a_guest_watching(&mut dom0, &ring_dir);
    let before = store_but_probe(&c);
    let pid = c.pid();
    let update = |c: &Upstream, target: &Path, cmdline: Option<&str>| {
        let mut control = release.command(&release.program("xenstore-control"));
        control.env("XENSTORED_PATH", &c.socket).arg("live-update");
        if let Some(words) = cmdline {
            control.args(["-c", words]);
        }
        xenstore_testkit::process::output_within(
            control.args(["-t", "10", "-f"]).arg(target),
            Duration::from_secs(30),
        )
    };
    let shim = crate::common::bin("xenstored-shim");
    let out = update(&c, &shim, None);
    assert_updated(&mut c, &out, pid, &shim, &watcher);
    assert_eq!(guest.read(0, "data").unwrap(), "before", "{}", c.log());
    // C as the harness started it: 4.20 through trixie's loader, whose
    // words (--library-path DIR PROGRAM) lead -c's, C's own arguments after.
    let program = release.program("xenstored");
    let start = release.command(&program);
    let back = PathBuf::from(start.get_program());
    let pid_file = c.dir.join("pid");
    let own_args = format!("-N -F {}", pid_file.display());
    let cmdline = (back != program).then(|| {
        let words: Vec<String> = start
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        format!("{} {own_args}", words.join(" "))
    });
    let update_back = |c: &Upstream| update(c, &back, cmdline.as_deref());
    // A node of a domain C has no connection for: C would die on it, so
    // the shim refuses, and serves on.
    c.run("xenstore-chmod", &["/local/domain/7/data", "n7"]);
    let out = update_back(&c);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("owned by domain 7"), "{said}");
    assert_eq!(exe_of(pid), shim.canonicalize().unwrap());
    c.run("xenstore-chmod", &["/local/domain/7/data", "n0"]);
    let out = update_back(&c);
    assert_updated_back(&mut c, &out, pid, &back, &watcher);
    let running = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    assert!(
        running
            .split(|&b| b == 0)
            .any(|w| w == program.as_os_str().as_encoded_bytes()),
        "C {} is not what runs: {:?}",
        release.version(),
        String::from_utf8_lossy(&running)
    );
    let reply = request_in_two_writes(&mut console, b"/local/domain/7/data\0");
    assert_eq!(
        reply,
        Ok(b"seven".to_vec()),
        "a connection handed back lost on a request written in two parts \
         (C reads the body right after the header: a socket left non-blocking \
         gives it EAGAIN, which it takes for the client gone)\n{}",
        c.log()
    );
    assert_guest_watch_fires(&mut guest, || c.log());
    assert_eq!(guest.read(0, "data").unwrap(), "after");
    c.run("xenstore-write", &["/local/domain/5/data", "before"]);
    assert_eq!(store_but_probe(&c), before, "{}", c.log());
    drop(guest);
    let seen = releases.stdout().len();
    dom0.release(5).unwrap();
    let fired = releases.line(seen, crate::common::TIMEOUT);
    assert!(fired.starts_with("@releaseDomain"), "{fired}");
}

/// Giving the host back to oxenstored: oxenstored updates into the shim
/// and the shim back into it, a guest's ring and dom0 watchers served
/// throughout. The shim writes oxenstored's dump with every ring's channel
/// and VIRQ_DOM_EXC bound on the one fd it names, answers `-s` "BUSY" as
/// oxenstored does, and oxenstored answers the next one "OK"; a domain
/// dying after the return reaches it through the VIRQ the shim handed on.
#[test]
fn the_shim_gives_the_host_back_to_oxenstored() {
    let test = "the_shim_gives_the_host_back_to_oxenstored";
    if !upstream::available(Flavor::Ocaml, test) {
        return;
    }
    let ring_dir = xenstore_testkit::daemon::scratch_dir("give-back-ox-rings").unwrap();
    let rings = ring_dir.to_str().unwrap();
    // The shim oxenstored execs keeps its rings under its run dir: the same.
    let env = [("XENSTUB_RING_DIR", rings), ("XENSTORED_RUNDIR", rings)];
    let mut o = Upstream::start_with_env(Flavor::Ocaml, &[], &env);
    let watcher = some_state(&o);
    let releases = o.watch(&["@releaseDomain"]);
    releases.line(0, crate::common::TIMEOUT);
    let mut dom0 = Xs::connect(&o.socket).unwrap();
    dom0.timeout = crate::common::TIMEOUT;
    let mut guest = a_guest_watching(&mut dom0, &ring_dir);
    let before = store_but_probe(&o);
    let pid = o.pid();
    let shim = crate::common::bin("xenstored-shim");
    let out = xenstore_control(&o, &["-t", "10", "-f", shim.to_str().unwrap()]);
    assert_updated(&mut o, &out, pid, &shim, &watcher);
    assert_eq!(guest.read(0, "data").unwrap(), "before", "{}", o.log());

    // A device model's domain acting for the guest: oxenstored's dump
    // cannot say so, so the shim refuses, and serves on.
    boot::introduce(&mut dom0, &ring_dir, 6).unwrap();
    set_target(&o, 6, 5);
    let out = xenstore_control(&o, &["-t", "10", "-f", upstream::OXENSTORED]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("domain 6 acts for domain 5"), "{said}");
    assert_eq!(exe_of(pid), shim.canonicalize().unwrap());
    dom0.release(6).unwrap();

    let back = Path::new(upstream::OXENSTORED);
    let out = xenstore_control(&o, &["-t", "10", "-f", upstream::OXENSTORED]);
    assert_updated_back(&mut o, &out, pid, back, &watcher);
    assert_guest_watch_fires(&mut guest, || o.log());
    dom0.write(0, "/local/domain/5/data", "before").unwrap();
    assert_eq!(store_but_probe(&o), before, "{}", o.log());
    drop(guest);
    // Its first line fired when it was set; this one for the death.
    let seen = releases.stdout().len();
    xenstore_guest::sim::SimGuest::destroy(&ring_dir, 5).unwrap();
    let fired = releases.line(seen, crate::common::TIMEOUT);
    assert!(fired.starts_with("@releaseDomain"), "{fired}");
}

/// XS_READ of `path` (NUL-terminated) on `stream`, its header written
/// alone and its body once the daemon has taken the header (the socket's
/// unread bytes gone): the value read, or what came instead.
fn request_in_two_writes(
    stream: &mut std::os::unix::net::UnixStream,
    path: &[u8],
) -> Result<Vec<u8>, String> {
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use xenstore_proto::wire::{MsgType, HEADER_LEN};
    stream
        .set_read_timeout(Some(crate::common::TIMEOUT))
        .unwrap();
    let request = crate::common::wire::message(MsgType::Read as u32, 77, 0, path);
    let (header, body) = request.split_at(HEADER_LEN);
    stream.write_all(header).map_err(|e| e.to_string())?;
    let unread = || {
        let mut n: libc::c_int = 0;
        // SAFETY: SIOCOUTQ writes one int: the bytes the peer has not read.
        unsafe { libc::ioctl(stream.as_raw_fd(), libc::TIOCOUTQ, &mut n) };
        n
    };
    xenstore_testkit::wait::wait_for(
        "the daemon to read the header",
        crate::common::TIMEOUT,
        || unread() == 0,
    );
    stream
        .write_all(body)
        .map_err(|e| format!("writing the body: {e}"))?;
    let (h, value) = xenstore_proto::exchange::read_reply(stream).map_err(|e| e.to_string())?;
    if h.ty != MsgType::Read as u32 {
        return Err(format!(
            "reply {h:?}: {:?}",
            String::from_utf8_lossy(&value)
        ));
    }
    Ok(value)
}

/// SET_TARGET(domid, target) from dom0 over `d`'s socket (no client
/// sends it but the toolstack's library).
fn set_target(d: &Daemon, domid: u16, target: u16) {
    use std::io::Write;
    use xenstore_proto::wire::MsgType;
    let mut dom0 = std::os::unix::net::UnixStream::connect(&d.socket).unwrap();
    dom0.set_read_timeout(Some(crate::common::TIMEOUT)).unwrap();
    let payload = format!("{domid}\0{target}\0");
    let request = crate::common::wire::message(MsgType::SetTarget as u32, 1, 0, payload.as_bytes());
    dom0.write_all(&request).unwrap();
    let (h, body) = crate::common::wire::reply(&mut dom0);
    assert_eq!(h.ty, MsgType::SetTarget as u32, "{body:?}");
}

/// [`assert_updated`] but for the shim's word that it took over: an
/// update into an upstream daemon, which says nothing of it.
fn assert_updated_back(d: &mut Daemon, out: &Output, pid: u32, exe: &Path, watcher: &Watched) {
    assert!(
        out.status.success(),
        "xenstore-control live-update: {} {}{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        d.log()
    );
    assert!(d.alive(), "the daemon died:\n{}", d.log());
    assert_eq!(exe_of(pid), exe.canonicalize().unwrap(), "{}", d.log());
    d.run("xenstore-write", &["/local/domain/7/after", "back"]);
    watcher.wait_line(
        "the event for /local/domain/7/after",
        crate::common::TIMEOUT,
        |l| l.starts_with("/local/domain/7/after"),
    );
}

/// `xenstore-control live-update ARGS` against `daemon`: its output.
fn xenstore_control(daemon: &Daemon, args: &[&str]) -> Output {
    xenstore_testkit::process::output_within(
        daemon
            .client("/usr/lib/xen-4.17/bin/xenstore-control")
            .arg("live-update")
            .args(args),
        Duration::from_secs(60),
    )
}

/// `xenstore-ls -f -p` without the node assert_updated writes.
fn store_but_probe(d: &Daemon) -> String {
    let ls = d.run("xenstore-ls", &["-f", "-p"]);
    ls.lines()
        .filter(|l| !l.starts_with("/local/domain/7/after "))
        .map(|l| format!("{l}\n"))
        .collect()
}

fn exe_of(pid: u32) -> PathBuf {
    std::fs::read_link(format!("/proc/{pid}/exe")).unwrap()
}

/// What an update starts from: a node with permissions, and a client with
/// a watch on it, connected throughout.
fn some_state(d: &Daemon) -> Watched {
    d.run("xenstore-write", &["/local/domain/7/data", "seven"]);
    d.run("xenstore-chmod", &["/local/domain/7/data", "n7", "r0"]);
    let watcher = d.watch(&["/local/domain/7"]);
    watcher.line(0, crate::common::TIMEOUT);
    watcher
}

/// A directory past 8192 bytes of listing (the shim keeps it beside its
/// node, indexed), its first child removed. Not for oxenstored, which
/// sends such a listing in one reply longer than clients accept.
fn a_big_directory(d: &Daemon) {
    let writes: Vec<String> = (0..2000)
        .flat_map(|i| [format!("/big/{i}"), String::new()])
        .collect();
    let writes: Vec<&str> = writes.iter().map(String::as_str).collect();
    d.run("xenstore-write", &writes);
    d.run("xenstore-rm", &["/big/0"]);
}

/// What a successful update leaves: xenstore-control got its "OK", process
/// `pid` runs `exe` now and said it took over, and the watch set before
/// the update fires after it, on the connection open throughout.
fn assert_updated(d: &mut Daemon, out: &Output, pid: u32, exe: &Path, watcher: &Watched) {
    assert_updated_back(d, out, pid, exe, watcher);
    assert!(d.log().contains("live update: took over"), "{}", d.log());
}

/// Upgrading the shim in place: the running shim hands its state to a new
/// binary it execs in its own process, connections and watches kept.
#[test]
fn the_shim_updates_live_into_a_new_shim() {
    let test = "the_shim_updates_live_into_a_new_shim";
    if !upstream::available(Flavor::C, test) {
        return; // xenstore-control comes with xen-utils-4.17
    }
    let mut shim = crate::common::shim::Shim::private_copy();
    let watcher = some_state(&shim);
    a_big_directory(&shim);
    let before = shim.run("xenstore-ls", &["-f", "-p"]);
    let pid = shim.pid();
    let v2 = shim.dir.join("v2");
    std::fs::create_dir(&v2).unwrap();
    let new = xenstore_testkit::daemon::private_copy_of(&crate::common::bin("xenstored-shim"), &v2)
        .unwrap();
    assert_ne!(exe_of(pid), new);
    let out = xenstore_control(&shim, &["-t", "10", "-f", new.to_str().unwrap()]);
    assert_updated(&mut shim, &out, pid, &new, &watcher);
    assert_eq!(store_but_probe(&shim), before, "{}", shim.log());
}

/// A target that is not a shim is refused before anything is torn down:
/// the same image serves on, and says why; the target is read, never run
/// (one that hangs would stall every guest).
#[test]
fn a_live_update_to_a_target_that_is_no_shim_is_refused_untouched() {
    let test = "a_live_update_to_a_target_that_is_no_shim_is_refused_untouched";
    if !upstream::available(Flavor::C, test) {
        return;
    }
    let mut shim = crate::common::shim::Shim::private_copy();
    shim.run("xenstore-write", &["/kept", "yes"]);
    let pid = shim.pid();
    let exe = exe_of(pid);
    let data = shim.dir.join("not-a-program");
    std::fs::write(&data, "data").unwrap();
    // A target that would hang the event loop if the shim ran it to ask.
    let ran = shim.dir.join("hanging-target-ran");
    let hangs = shim.dir.join("hangs");
    std::fs::write(
        &hangs,
        format!("#!/bin/sh\ntouch {}\nexec sleep 1000\n", ran.display()),
    )
    .unwrap();
    std::fs::set_permissions(&hangs, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    for (target, why) in [
        (hangs.to_str().unwrap(), "not xenstored-shim"),
        ("/bin/true", "not xenstored-shim"),
        ("/nonexistent", "File not accessible."),
        (data.to_str().unwrap(), "File not executable."),
    ] {
        let out = xenstore_control(&shim, &["-t", "5", "-f", target]);
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{target}: {said}");
        assert!(said.contains(why), "{target}: {said}");
        assert!(shim.alive());
        assert_eq!(exe_of(pid), exe);
        assert_eq!(shim.run("xenstore-read", &["/kept"]).trim(), "yes");
    }
    assert!(!ran.exists(), "the shim ran a target to check it");
}

/// An open transaction holds the update until -t runs out; then it is
/// refused, or with -F the transaction is dropped and the update goes on.
#[test]
fn an_open_transaction_holds_a_live_update_until_forced() {
    use std::io::Write;
    use xenstore_proto::wire::MsgType;
    let test = "an_open_transaction_holds_a_live_update_until_forced";
    if !upstream::available(Flavor::C, test) {
        return;
    }
    let shim = crate::common::shim::Shim::private_copy();
    let mut client = std::os::unix::net::UnixStream::connect(&shim.socket).unwrap();
    client
        .set_read_timeout(Some(crate::common::TIMEOUT))
        .unwrap();
    let start = crate::common::wire::message(MsgType::TransactionStart as u32, 1, 0, b"\0");
    client.write_all(&start).unwrap();
    let (_, tx) = crate::common::wire::reply(&mut client);
    let tx: u32 = String::from_utf8_lossy(&tx)
        .trim_end_matches('\0')
        .parse()
        .unwrap();
    let pid = shim.pid();
    let exe = exe_of(pid);
    let target = crate::common::bin("xenstored-shim");

    let out = xenstore_control(&shim, &["-t", "2", "-f", target.to_str().unwrap()]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("long running transactions"), "{said}");
    assert_eq!(exe_of(pid), exe);

    let out = xenstore_control(&shim, &["-t", "2", "-F", "-f", target.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        shim.log()
    );
    assert_eq!(exe_of(pid), target.canonicalize().unwrap());
    // The dropped transaction is unknown to the new image.
    let write = crate::common::wire::message(MsgType::Write as u32, 2, tx, b"/t\0v");
    client.write_all(&write).unwrap();
    let (h, body) = crate::common::wire::reply(&mut client);
    assert_eq!(h.ty, MsgType::Error as u32, "{body:?}");
}

/// A request that arrives with the `-s` making the update ready, in the
/// same poll, runs on the new image: a transaction the old one started
/// then would be lost (once seen on real Xen, `xl create` failing with
/// ENOENT). The daemon is stopped while both are written, so that one
/// poll finds them; the update's connection, the less served, goes first.
#[test]
fn a_transaction_asked_with_the_update_is_not_lost() {
    use std::io::Write;
    use xenstore_proto::wire::MsgType;
    let shim = crate::common::shim::Shim::private_copy();
    let connect = || {
        let c = std::os::unix::net::UnixStream::connect(&shim.socket).unwrap();
        c.set_read_timeout(Some(crate::common::TIMEOUT)).unwrap();
        c
    };
    let ask = |c: &mut std::os::unix::net::UnixStream, ty: MsgType, tx: u32, body: &[u8]| {
        c.write_all(&crate::common::wire::message(ty as u32, 1, tx, body))
            .unwrap();
        crate::common::wire::reply(c)
    };
    let mut client = connect();
    for _ in 0..20 {
        ask(&mut client, MsgType::Read, 0, b"/\0");
    }
    let mut control = connect();
    let target = crate::common::bin("xenstored-shim");
    let mut f = b"live-update\0-f\0".to_vec();
    f.extend_from_slice(target.to_str().unwrap().as_bytes());
    f.push(0);
    let (h, body) = ask(&mut control, MsgType::Control, 0, &f);
    assert_eq!(h.ty, MsgType::Control as u32, "{body:?}");
    let pid = shim.pid();
    // SAFETY: kill(2) on the daemon's pid touches no memory of ours.
    let signal = |sig| assert_eq!(unsafe { libc::kill(pid as i32, sig) }, 0);
    signal(libc::SIGSTOP);
    let s = crate::common::wire::message(
        MsgType::Control as u32,
        2,
        0,
        b"live-update\0-s\0-t\x0010\0",
    );
    control.write_all(&s).unwrap();
    let start = crate::common::wire::message(MsgType::TransactionStart as u32, 3, 0, b"\0");
    client.write_all(&start).unwrap();
    signal(libc::SIGCONT);
    let (h, body) = crate::common::wire::reply(&mut control);
    assert_eq!(
        (h.ty, body.as_slice()),
        (MsgType::Control as u32, &b"OK\0"[..])
    );
    assert_eq!(
        exe_of(pid),
        target.canonicalize().unwrap(),
        "{}",
        shim.log()
    );
    let (h, tx) = crate::common::wire::reply(&mut client);
    assert_eq!(h.ty, MsgType::TransactionStart as u32, "{tx:?}");
    let tx: u32 = String::from_utf8_lossy(&tx)
        .trim_end_matches('\0')
        .parse()
        .unwrap();
    let (h, body) = ask(&mut client, MsgType::Write, tx, b"/in-tx\0v");
    assert_eq!(h.ty, MsgType::Write as u32, "{body:?}\n{}", shim.log());
    let (h, body) = ask(&mut client, MsgType::TransactionEnd, tx, b"T\0");
    assert_eq!(
        h.ty,
        MsgType::TransactionEnd as u32,
        "the transaction, started with the update: {body:?}\n{}",
        shim.log()
    );
    assert_eq!(shim.run("xenstore-read", &["/in-tx"]).trim(), "v");
}

/// oxenstored (Debian 12's default xenstored) updates live into the shim:
/// it runs `<shim> --live --restart <its args> --help` to validate the
/// target, dumps its state to /var/run/xenstored/db (the stub's directory
/// here) and execs the shim, whose first answer to the repeated `-s` is
/// the "OK" xenstore-control waits for.
#[test]
fn oxenstored_updates_live_into_the_shim() {
    let test = "oxenstored_updates_live_into_the_shim";
    if !upstream::available(Flavor::Ocaml, test) {
        return;
    }
    let mut o = Upstream::start(Flavor::Ocaml);
    let watcher = some_state(&o);
    // oxenstored writes /tool/xenstored (its binary) at start: the shim
    // keeps what it finds.
    let before = o.run("xenstore-ls", &["-f", "-p"]);
    let pid = o.pid();
    let shim = crate::common::bin("xenstored-shim");
    let out = xenstore_control(&o, &["-t", "10", "-f", shim.to_str().unwrap()]);
    assert_updated(&mut o, &out, pid, &shim, &watcher);
    assert!(!o.dir.join("db").exists(), "the dump stayed");
    // The same nodes, values and permissions. oxenstored lists children
    // sorted and shows its special nodes as children of /; the shim (as C)
    // lists them in creation order and keeps the specials out of the tree.
    let nodes = |ls: &str| {
        let mut l: Vec<String> = ls
            .lines()
            .filter(|l| !l.starts_with("/@"))
            .map(String::from)
            .collect();
        l.sort();
        l
    };
    assert_eq!(nodes(&store_but_probe(&o)), nodes(&before), "{}", o.log());
    assert!(before.contains("/@releaseDomain"), "{before}");
}

/// `xenstore-snoop --follow` across a live update: the daemon's pid stays
/// and its image changes, so the uprobes on the old file fall silent; the
/// snooper notices the exec, reports the gap, and attaches to the new image.
#[test]
fn the_snooper_follows_a_live_update() {
    use std::process::Stdio;
    let test = "the_snooper_follows_a_live_update";
    if !crate::common::need_root(test) || !upstream::available(Flavor::C, test) {
        return;
    }
    let shim = crate::common::shim::Shim::private_copy();
    let pid = shim.pid();
    let mut snoop = Watched::spawn(
        "xenstore-snoop",
        crate::common::snoop_command()
            .args([
                "--daemon-pid",
                &pid.to_string(),
                "--follow",
                "--path",
                "^/life/",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
        false,
    );
    snoop.wait_ready("the snooper to attach", crate::common::TIMEOUT, |_, err| {
        err.iter().any(|l| l.contains("Ctrl-C to end."))
    });
    shim.run("xenstore-write", &["/life/before", "1"]);
    snoop.wait_line("the write before", crate::common::TIMEOUT, |l| {
        l.contains("XS_WRITE: /life/before")
    });

    let v2 = shim.dir.join("v2");
    std::fs::create_dir(&v2).unwrap();
    let new = xenstore_testkit::daemon::private_copy_of(&crate::common::bin("xenstored-shim"), &v2)
        .unwrap();
    let out = xenstore_control(&shim, &["-t", "10", "-f", new.to_str().unwrap()]);
    assert!(out.status.success(), "{}", shim.log());
    snoop.wait_ready(
        "the snooper to re-attach",
        crate::common::TIMEOUT,
        |_, err| {
            err.iter()
                .filter(|l| l.starts_with(&format!("Tracing xenstored-shim pid {pid} ")))
                .count()
                == 2
        },
    );
    shim.run("xenstore-write", &["/life/after", "2"]);
    snoop.wait_line("the write after", crate::common::TIMEOUT, |l| {
        l.contains("XS_WRITE: /life/after")
    });
    let ended = snoop.stop(2, crate::common::TIMEOUT); // SIGINT
    let err = ended.stderr.join("\n");
    assert!(
        err.contains(&format!("pid {pid} exec'd a new image")),
        "{err}"
    );
    assert!(err.contains("--follow: gap of "), "{err}");
    assert!(err.contains(&format!("following pid {pid}")), "{err}");
}

/// Each probe's semaphore in process `pid`'s memory now.
fn semaphores_of(pid: u32) -> Vec<(String, Option<u16>)> {
    let target = xenstore_snoop::target::find(Some(pid), None).unwrap();
    let probes = xenstore_snoop::sdt::read_probes(&target.binary).unwrap();
    xenstore_snoop::semaphores::Semaphores::open(&target, &probes)
        .unwrap()
        .values()
}

/// The exporter's count of successful XS_WRITEs in its textfile (0 before
/// the first).
fn writes_counted(textfile: &Path) -> u64 {
    std::fs::read_to_string(textfile.join("xenstore.prom"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(r#"xenstore_requests_total{op="XS_WRITE",result="ok"} "#))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// A live update in place (the same file, the same pid: the issue's
/// `xenstore-control live-update -f` into the running binary) never leaves
/// a tracer blind: a snooper without --follow says its daemon exec'd and
/// exits 1; one started after sees the requests (raising the semaphores
/// the kernel left down, where it did); the exporter follows the exec and
/// its counters keep rising; and once all detach, no semaphore stays up.
#[test]
fn no_tracer_goes_blind_across_an_update_in_place() {
    use std::process::{Command, Stdio};
    let test = "no_tracer_goes_blind_across_an_update_in_place";
    if !crate::common::need_root(test) || !upstream::available(Flavor::C, test) {
        return;
    }
    let shim = crate::common::shim::Shim::private_copy();
    let pid = shim.pid();
    let exe = exe_of(pid);
    let snooper = || {
        let mut s = Watched::spawn(
            "xenstore-snoop",
            crate::common::snoop_command()
                .args(["--daemon-pid", &pid.to_string(), "--path", "^/blind/"])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped()),
            false,
        );
        s.wait_ready("the snooper to attach", crate::common::TIMEOUT, |_, err| {
            err.iter().any(|l| l.contains("Ctrl-C to end."))
        });
        s
    };
    let before = snooper();
    let textfile = shim.dir.join("textfile");
    std::fs::create_dir(&textfile).unwrap();
    let mut exporter = Watched::spawn(
        "xenstore-snoop --metrics-textfile",
        // BPF only: not crate::common::snoop_command(), which may name a back end.
        Command::new(crate::common::bin("xenstore-snoop"))
            .args(["--interval", "0.2", "--daemon-pid", &pid.to_string()])
            .arg("--socket")
            .arg(&shim.socket)
            .arg("--metrics-textfile")
            .arg(&textfile)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped()),
        false,
    );
    exporter.wait_ready(
        "the exporter to attach",
        crate::common::TIMEOUT,
        |_, err| err.iter().any(|l| l.contains("metrics of daemon")),
    );
    shim.run("xenstore-write", &["/blind/before", "1"]);
    before.wait_line("the write before", crate::common::TIMEOUT, |l| {
        l.contains("XS_WRITE: /blind/before")
    });
    xenstore_testkit::wait::wait_until("the exporter to count it", crate::common::TIMEOUT, || {
        writes_counted(&textfile) >= 1
    })
    .unwrap();
    let counted_before = writes_counted(&textfile);

    let out = xenstore_control(&shim, &["-t", "10", "-f", exe.to_str().unwrap()]);
    assert!(out.status.success(), "{}", shim.log());
    assert_eq!(exe_of(pid), exe);

    let ended = before.end(crate::common::TIMEOUT);
    let err = ended.stderr.join("\n");
    assert_eq!(ended.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("pid {pid} exec'd a new image")),
        "{err}"
    );
    assert!(
        err.contains("start the snooper again, or use --follow"),
        "{err}"
    );

    // Requests in the gap (until the exporter attached to the new image)
    // are not counted.
    exporter.wait_ready(
        "the exporter to follow the exec",
        crate::common::TIMEOUT,
        |_, err| {
            err.iter()
                .any(|l| l.contains("exec'd a new image") && l.contains("counting on it"))
        },
    );
    let after = snooper();
    shim.run("xenstore-write", &["/blind/after", "2"]);
    after.wait_line("the write after the update", crate::common::TIMEOUT, |l| {
        l.contains("XS_WRITE: /blind/after")
    });
    let rising = xenstore_testkit::wait::wait_until(
        "the exporter to count the write after the update",
        crate::common::TIMEOUT,
        || writes_counted(&textfile) > counted_before,
    );
    assert!(
        rising.is_ok(),
        "{:?}\n{:?}\n{}",
        exporter.stderr(),
        semaphores_of(pid),
        std::fs::read_to_string(textfile.join("xenstore.prom")).unwrap_or_default()
    );
    let prom = std::fs::read_to_string(textfile.join("xenstore.prom")).unwrap();
    assert!(
        prom.lines()
            .any(|l| l == r#"xenstore_exporter_gaps_total{reason="exec"} 1"#),
        "{prom}"
    );
    // Which path ran: the kernel's own semaphores, or ours.
    let said = |w: &Watched| {
        w.stderr()
            .iter()
            .any(|l| l.contains("raised them in its memory"))
    };
    eprintln!(
        "{test}: semaphores raised by the snooper started after: {}, by the exporter: {}",
        said(&after),
        said(&exporter)
    );
    let ended = after.stop(2, crate::common::TIMEOUT); // SIGINT
    assert!(ended.status.success(), "{:?}", ended.stderr);
    let ended = exporter.stop(15, crate::common::TIMEOUT); // SIGTERM
    assert!(ended.status.success(), "{:?}", ended.stderr);
    let left: Vec<_> = semaphores_of(pid)
        .into_iter()
        .filter(|(_, v)| *v != Some(0))
        .collect();
    assert!(left.is_empty(), "semaphores left raised: {left:?}");
}
