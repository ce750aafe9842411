//! Attaching: which probe sites, which daemon, semaphores, tracefs mounts, and nothing left behind.

use super::*;

#[test]
fn sigkilled_snooper_leaves_nothing_behind() {
    if !common::need_root("sigkilled_snooper_leaves_nothing_behind") {
        return;
    }
    let shim = Shim::private_copy();
    assert!(all_down(&semaphores(&shim)));
    let first = Snooper::attach(&shim, &[]);
    let victim = first.pid();
    // BPF attaches without tracefs events: only the semaphores show it.
    assert_eq!(!our_uprobes(victim).is_empty(), first.on_tracefs());
    let raised = semaphores(&shim);
    for (probe, count) in &raised {
        let attached = SNOOPED.contains(&probe.as_str());
        assert_eq!(*count > 0, attached, "{probe}: {raised:?}");
    }
    shim.run("xenstore-write", &["/killed/a", "1"]);
    first.wait_line("the write", |l| l.contains("XS_WRITE: /killed/a 1"));
    first.stop_with(9); // SIGKILL
                        // Its perf events closed with it: the probes are off already.
    assert!(all_down(&semaphores(&shim)), "{:?}", semaphores(&shim));

    let second = Snooper::attach(&shim, &[]);
    assert!(
        our_uprobes(victim).is_empty(),
        "stale group left: {:?}\nthe second snooper said: {:?}",
        our_uprobes(victim),
        second.stderr()
    );
    // (A snooper of a parallel test may have been the one to remove it.)
    shim.run("xenstore-write", &["/killed/b", "2"]);
    second.wait_line("the write", |l| l.contains("XS_WRITE: /killed/b 2"));
    let me = second.pid();
    let (_, _, status) = second.stop_with(15);
    assert!(status.success());
    assert!(our_uprobes(me).is_empty(), "SIGTERM leaves no group");
    assert!(all_down(&semaphores(&shim)));
}

/// Another daemon run from the same binary is left alone: nothing of it
/// is shown, and with the BPF back end's uprobe-multi link its probes stay
/// off (it neither traps nor builds probe strings). tracefs uprobe events
/// and BPF's per-site links (for kernels without uprobe-multi) reach it,
/// and its firings are dropped.
#[test]
fn a_second_daemon_of_the_same_binary_is_left_alone() {
    if !common::need_root("a_second_daemon_of_the_same_binary_is_left_alone") {
        return;
    }
    let traced = Shim::private_copy();
    let dir = common::daemon::scratch_dir("twin").unwrap();
    let twin = Shim::launch("xenstored-shim twin", &traced.binary, dir, &[]).unwrap();
    let snoop = Snooper::attach(&traced, &[]);
    for (probe, count) in semaphores(&traced) {
        assert_eq!(count > 0, SNOOPED.contains(&probe.as_str()), "{probe}");
    }
    if !snoop.on_tracefs() {
        assert!(all_down(&semaphores(&twin)), "{:?}", semaphores(&twin));
        let tracing = snoop.tracing_line();
        assert!(
            !tracing.contains("uprobe link each"),
            "this kernel (6.6 or later) has uprobe-multi links: {tracing:?}"
        );
    }
    twin.run("xenstore-write", &["/twin/a", "1"]);
    traced.run("xenstore-write", &["/twin/b", "2"]);
    snoop.wait_line("the traced write", |l| l.contains("XS_WRITE: /twin/b 2"));
    let (out, _, status) = snoop.stop();
    assert!(status.success());
    assert!(!out.iter().any(|l| l.contains("/twin/a")), "{out:?}");

    let per_site = Snooper::attach(&traced, &["--backend", "bpf", "--bpf-links", "per-site"]);
    let tracing = per_site.tracing_line();
    assert!(tracing.contains("a uprobe link each"), "{tracing:?}");
    assert!(
        !all_down(&semaphores(&twin)),
        "per-site links reach the twin"
    );
    twin.run("xenstore-write", &["/twin/c", "3"]);
    traced.run("xenstore-write", &["/twin/d", "4"]);
    per_site.wait_line("the traced write", |l| {
        l.contains("XS_WRITE: /twin/d 4 -> OK")
    });
    let (out, _, status) = per_site.stop();
    assert!(status.success());
    assert!(!out.iter().any(|l| l.contains("/twin/c")), "{out:?}");
    assert!(all_down(&semaphores(&twin)) && all_down(&semaphores(&traced)));
}

/// --paired attaches request and response instead of reply, and makes
/// the same lines from them.
#[test]
fn paired_mode_makes_the_same_lines_from_request_and_response() {
    if !common::need_root("paired_mode_makes_the_same_lines_from_request_and_response") {
        return;
    }
    let shim = Shim::private_copy();
    let snoop = Snooper::attach(&shim, &["--paired", "-L"]);
    for (probe, count) in semaphores(&shim) {
        let attached = [
            "request",
            "response",
            "watch_event",
            "conn_open",
            "truncated",
        ]
        .contains(&probe.as_str());
        assert_eq!(count > 0, attached, "{probe}");
    }
    shim.run("xenstore-write", &["/paired/a", "1"]);
    let line = snoop.wait_line("the write", |l| l.contains("XS_WRITE: /paired/a 1 -> OK"));
    // DOM PID COMM TX LAT(us) OP
    let latency: f64 = columns(&line)[4].parse().unwrap();
    assert!(latency > 0.0, "{line}");
    let (_, _, status) = snoop.stop();
    assert!(status.success());
}

/// A daemon binary from before `reply` (its note renamed in a private
/// copy, so the SDT notes no longer offer it) is snooped through request
/// and response, with the same lines.
#[test]
fn a_daemon_without_the_reply_probe_gets_request_and_response() {
    if !common::need_root("a_daemon_without_the_reply_probe_gets_request_and_response") {
        return;
    }
    let dir = common::daemon::scratch_dir("no-reply").unwrap();
    let binary = dir.join("xenstored-shim");
    let mut bytes = std::fs::read(common::bin("xenstored-shim")).unwrap();
    // A note's strings are "provider\0name\0args\0".
    let note = b"xenstore\0reply\0";
    let at: Vec<usize> = bytes
        .windows(note.len())
        .enumerate()
        .filter(|(_, w)| w == note)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(at.len(), 1, "one reply note in the shim");
    bytes[at[0] + b"xenstore\0".len()..][..5].copy_from_slice(b"older");
    std::fs::write(&binary, bytes).unwrap();
    std::fs::set_permissions(&binary, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let shim = Shim::launch("xenstored-shim without reply", &binary, dir, &[]).unwrap();
    assert!(!semaphores(&shim).iter().any(|(probe, _)| probe == "reply"));

    let snoop = Snooper::attach(&shim, &["-L"]);
    let up: Vec<String> = semaphores(&shim)
        .into_iter()
        .filter(|(_, count)| *count > 0)
        .map(|(probe, _)| probe)
        .collect();
    assert!(
        up.contains(&"request".into()) && up.contains(&"response".into()),
        "{up:?}"
    );
    shim.run("xenstore-write", &["/older/a", "1"]);
    let missing = output_within(
        Command::new("xenstore-read")
            .env("XENSTORED_PATH", &shim.socket)
            .arg("/older/missing"),
        CLIENT_TIMEOUT,
    );
    assert!(!missing.status.success());
    snoop.wait_line("the write", |l| l.contains("XS_WRITE: /older/a 1 -> OK"));
    snoop.wait_line("the failed read", |l| {
        l.contains("[ERROR] XS_READ: /older/missing -> ENOENT")
    });
    let (_, _, status) = snoop.stop();
    assert!(status.success());
}

#[test]
fn finds_the_daemon_by_its_binary() {
    if !common::need_root("finds_the_daemon_by_its_binary") {
        return;
    }
    let shim = Shim::private_copy();
    let binary = shim.dir.join("xenstored-shim");
    let snoop = Snooper::start(&["--binary", binary.to_str().unwrap()]);
    let attached = format!("Tracing xenstored-shim pid {} ", shim.pid());
    assert!(
        snoop.stderr().iter().any(|l| l.starts_with(&attached)),
        "{:?}",
        snoop.stderr()
    );
    shim.run("xenstore-write", &["/by-binary", "1"]);
    snoop.wait_line("the write", |l| l.contains("XS_WRITE: /by-binary 1 -> OK"));
    let (_, _, status) = snoop.stop();
    assert!(status.success());
}

#[test]
fn another_tracefs_mount_is_used_when_named() {
    if !common::need_root("another_tracefs_mount_is_used_when_named") {
        return;
    }
    let shim = Shim::private_copy();
    let mount = shim.dir.join("tracefs");
    std::fs::create_dir_all(&mount).unwrap();
    let mounted = output_within(
        Command::new("mount")
            .args(["-t", "tracefs", "nodev"])
            .arg(&mount),
        CLIENT_TIMEOUT,
    );
    assert!(mounted.status.success(), "{mounted:?}");
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(mount.clone());
    // The mount matters to the tracefs back end only, whichever the suite runs.
    let tracefs = ["--backend", "tracefs", "--tracefs", mount.to_str().unwrap()];
    let snoop = Snooper::attach(&shim, &tracefs);
    shim.run("xenstore-write", &["/via/other/mount", "1"]);
    snoop.wait_line("the write", |l| l.contains("/via/other/mount"));
    let (_, err, status) = snoop.stop();
    assert!(status.success(), "{err:?}");

    // $TRACEFS is the same option; a directory that is no tracefs is an error.
    let out = Command::new(common::bin("xenstore-snoop"))
        .args([
            "--backend",
            "tracefs",
            "--daemon-pid",
            &shim.pid().to_string(),
        ])
        .env("TRACEFS", &shim.dir)
        .bounded_output();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "--tracefs {}: no uprobe_events there",
            shim.dir.display()
        )),
        "{err}"
    );
}

#[test]
fn another_daemon_of_the_same_binary_is_not_shown() {
    if !common::need_root("another_daemon_of_the_same_binary_is_not_shown") {
        return;
    }
    // Uprobes fire in every process running the file: the snooper keeps
    // only its daemon's firings (in the kernel on bpf, in user space on tracefs).
    let shim = Shim::private_copy();
    let twin = Shim::launch(
        "xenstored-shim twin",
        &shim.binary,
        private_dir("snoop-twin"),
        &[],
    )
    .unwrap();
    let snoop = Snooper::attach(&shim, &[]);
    twin.run("xenstore-write", &["/twin", "1"]);
    shim.run("xenstore-write", &["/ours", "1"]);
    snoop.wait_line("our write", |l| l.contains("XS_WRITE: /ours 1 -> OK"));
    let (out, _, status) = snoop.stop();
    assert!(status.success());
    assert!(!out.iter().any(|l| l.contains("/twin")), "{out:?}");
}
