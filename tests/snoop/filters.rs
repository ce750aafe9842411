//! What -d, -p, --op, -x, --path and --comm select, in the kernel and after.

use super::*;

#[test]
fn domain_filter_shows_only_that_domain() {
    if !common::need_root("domain_filter_shows_only_that_domain") {
        return;
    }
    let shim = Shim::private_copy();
    let dom6 = common::introduce(&shim, 6);
    let dom7 = common::introduce(&shim, 7);
    let snoop = Snooper::attach(&shim, &["-d", "6"]);
    shim.run("xenstore-write", &["/local/domain/6/from-dom0", "x"]);
    assert!(guest(&dom7, "xenstore-read", &["device/vbd/0/state"])
        .status
        .success());
    assert!(guest(&dom6, "xenstore-read", &["device/vbd/0/state"])
        .status
        .success());
    assert!(guest(&dom6, "xenstore-write", &["done", "1"])
        .status
        .success());
    snoop.wait_line("dom 6's last write", |l| {
        l.contains("XS_WRITE: done 1 -> OK")
    });
    let (out, _, status) = snoop.stop();
    assert!(status.success());
    let lines = &out[1..];
    assert!(lines.len() >= 2, "{out:?}");
    for l in lines {
        assert_eq!(columns(l)[0], "6", "a line of another domain: {l}");
    }
}

#[test]
fn user_space_filters_on_concurrent_snoopers() {
    if !common::need_root("user_space_filters_on_concurrent_snoopers") {
        return;
    }
    let shim = Shim::private_copy();
    // Three snoopers on one daemon at once, each with its own uprobe group.
    let failed = Snooper::attach(&shim, &["-x"]);
    let writes = Snooper::attach(&shim, &["--op", "WRITE", "--path", "^/keep/"]);
    let quiet = Snooper::attach(&shim, &["--no-watch-events", "--op", "WATCH_EVENT,RM"]);
    let watch = shim.watch(&["-n", "2", "/keep"]);
    writes.wait_line("nothing but a header yet", |l| l.starts_with("DOM"));
    // The watch's initial event says it is registered.
    assert_eq!(watch.line(0, TIMEOUT), "/keep");
    shim.run("xenstore-write", &["/keep/a", "1", "/drop/b", "2"]);
    assert!(watch.end(TIMEOUT).status.success());
    let _ = shim
        .client("xenstore-read")
        .arg("/keep/missing")
        .bounded_output();
    shim.run("xenstore-rm", &["/drop"]);
    writes.wait_line("the /keep write", |l| l.contains("XS_WRITE: /keep/a 1"));
    failed.wait_line("the failed read", |l| l.contains("/keep/missing"));
    quiet.wait_line("the rm", |l| l.contains("XS_RM: /drop -> OK"));

    let body = |s: Snooper| -> Vec<String> {
        let (out, _, status) = s.stop();
        assert!(status.success());
        out[1..].to_vec()
    };
    let failed = body(failed);
    assert!(!failed.is_empty());
    assert!(failed.iter().all(|l| l.contains("[ERROR] ")), "{failed:?}");
    assert_eq!(body(writes).len(), 1);
    let quiet = body(quiet);
    assert!(quiet.iter().all(|l| l.contains("XS_RM:")), "{quiet:?}");
}

#[test]
fn pid_filter_shows_one_dom0_client() {
    if !common::need_root("pid_filter_shows_one_dom0_client") {
        return;
    }
    let shim = Shim::private_copy();
    // A pyxs client that waits for a go, so its pid is known beforehand.
    let mut client = Command::new("/usr/bin/python3")
        .arg("-c")
        .arg(format!(
            "import sys\nfrom pyxs import Client\nsys.stdin.readline()\n\
             c = Client(unix_socket_path={:?})\nc.connect()\n\
             c.write(b'/mine', b'1')\nc.read(b'/mine')\nc.close()\n",
            shim.socket.display().to_string()
        ))
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = client.id().to_string();
    let snoop = Snooper::attach(&shim, &["-p", &pid, "--duration", "60"]);
    shim.run("xenstore-write", &["/theirs", "1"]);
    std::io::Write::write_all(client.stdin.as_mut().unwrap(), b"go\n").unwrap();
    assert!(wait_exit(&mut client, "the pyxs client", TIMEOUT).success());
    snoop.wait_line("the client's read", |l| l.contains("XS_READ: /mine -> 1"));
    let (out, _, _) = snoop.stop();
    let body = &out[1..];
    assert_eq!(body.len(), 2, "{body:?}");
    assert!(body.iter().all(|l| columns(l)[1] == pid), "{body:?}");
}

#[test]
fn path_filter_matches_guest_relative_paths_as_resolved() {
    if !common::need_root("path_filter_matches_guest_relative_paths_as_resolved") {
        return;
    }
    let shim = Shim::private_copy();
    let dom6 = common::introduce(&shim, 6);
    let dom7 = common::introduce(&shim, 7);
    // Named before the snooper starts: looked up in the store at first sight.
    shim.run("xenstore-write", &["/local/domain/7/name", "db02"]);
    let snoop = Snooper::attach(&shim, &["--path", "^/local/domain/6/device/"]);
    let by_name = Snooper::attach(&shim, &["-n", "db02"]);
    // The toolstack names domain 6: its lines show the name from then on.
    shim.run("xenstore-write", &["/local/domain/6/name", "web01"]);
    for (socket, path) in [
        (&dom6, "device/vbd/0/state"),
        (&dom6, "/local/domain/6/device/vbd/0/state"),
        (&dom7, "device/vbd/0/state"),
        (&dom6, "name"),
    ] {
        let out = guest(socket, "xenstore-read", &[path]);
        assert!(out.status.success(), "{path}: {out:?}");
    }
    shim.run("xenstore-read", &["/local/domain/6/device/vbd/0/state"]);
    let line = snoop.wait_line("dom0's read", |l| l.starts_with("0 "));
    let (out, _, status) = snoop.stop();
    assert!(status.success());
    let body: Vec<&str> = out[1..].iter().map(String::as_str).collect();
    assert_eq!(body.len(), 3, "{body:?}");
    // Shown as sent: the relative path stays relative.
    assert_eq!(
        columns(body[0]),
        [
            "6",
            "0",
            "web01",
            "0",
            "XS_READ:",
            "device/vbd/0/state",
            "->",
            "3"
        ],
        "{body:?}"
    );
    assert!(
        body[1].ends_with("XS_READ: /local/domain/6/device/vbd/0/state -> 3"),
        "{body:?}"
    );
    assert!(line.contains("xenstore-read"), "{line}");
    let (out, _, _) = by_name.stop();
    assert_eq!(
        columns(&out[1]),
        [
            "7",
            "0",
            "db02",
            "0",
            "XS_READ:",
            "device/vbd/0/state",
            "->",
            "3"
        ],
        "{out:?}"
    );
    assert_eq!(
        out.len(),
        2,
        "only domain 7's request, not the snooper's lookup: {out:?}"
    );
}

#[test]
fn an_unknown_domain_is_warned_about() {
    if !common::need_root("an_unknown_domain_is_warned_about") {
        return;
    }
    let shim = Shim::private_copy();
    common::introduce(&shim, 6);
    let known = Snooper::attach(&shim, &["-d", "6"]);
    let unknown = Snooper::attach(&shim, &["-d", "6", "-d", "7"]);
    let (_, err, _) = known.stop();
    assert!(!err.iter().any(|l| l.contains("warning")), "{err:?}");
    let (_, err, _) = unknown.stop();
    let warnings: Vec<&String> = err.iter().filter(|l| l.contains("warning")).collect();
    assert_eq!(warnings.len(), 1, "{err:?}");
    assert!(
        warnings[0].contains("does not know domain 7 (not introduced, no /local/domain/7)"),
        "{err:?}"
    );
}
