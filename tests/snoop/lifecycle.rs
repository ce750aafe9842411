//! How a session starts and ends: errors, exits, closed pipes, --follow.

use super::*;

#[test]
fn target_exit_ends_the_trace_cleanly() {
    if !common::need_root("target_exit_ends_the_trace_cleanly") {
        return;
    }
    let mut shim = Shim::private_copy();
    let snoop = Snooper::attach(&shim, &[]);
    shim.run("xenstore-write", &["/bye", "1"]);
    snoop.wait_line("the write", |l| l.contains("XS_WRITE: /bye 1"));
    shim.child.kill().unwrap();
    shim.child.wait().unwrap();
    let me = snoop.pid();
    let ended = snoop.0.end(TIMEOUT);
    assert!(ended.status.success(), "{}", ended.status);
    let err = ended.stderr.join("\n");
    assert!(err.contains("exited"), "{err}");
    assert!(err.contains("events seen"), "{err}");
    assert!(our_uprobes(me).is_empty());
}

#[test]
fn closed_pipe_exits_quietly() {
    if !common::need_root("closed_pipe_exits_quietly") {
        return;
    }
    let shim = Shim::private_copy();
    let mut snoop = Watched::spawn(
        "xenstore-snoop",
        common::snoop_command()
            .args(["--daemon-pid", &shim.pid().to_string(), "-c", "1000"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
        true,
    );
    let mut out = BufReader::new(snoop.child.stdout.take().unwrap());
    let mut header = String::new();
    out.read_line(&mut header).unwrap();
    assert!(header.starts_with("DOM"));
    drop(out); // like `| head -1`
    for i in 0..20 {
        shim.run("xenstore-write", &["/pipe", &i.to_string()]);
    }
    let ended = snoop.end(TIMEOUT);
    let err = ended.stderr.join("\n");
    assert!(ended.status.success(), "{} {err}", ended.status);
    assert!(
        !err.contains("Broken pipe") && !err.contains("panicked"),
        "{err}"
    );
    assert!(err.contains("events seen"), "{err}");
}

#[test]
fn errors_are_clear() {
    let out = Command::new(common::bin("xenstore-snoop"))
        .args(["--daemon-pid", "4000000000"])
        .bounded_output();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("xenstore-snoop: "), "{err}");
    let out = Command::new(common::bin("xenstore-snoop"))
        .args(["--op", "NOT_AN_OP"])
        .bounded_output();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown operation"));
    let help = Command::new(common::bin("xenstore-snoop"))
        .arg("--help")
        .bounded_output();
    assert!(String::from_utf8_lossy(&help.stdout).contains("Examples:"));
}

#[test]
fn not_root_is_a_clear_error() {
    if !common::need_root("not_root_is_a_clear_error") {
        return;
    }
    // A copy under /tmp, so the build tree's permissions don't matter.
    let dir = private_dir("snoop-nobody");
    let binary = dir.join("xenstore-snoop");
    std::fs::copy(common::bin("xenstore-snoop"), &binary).unwrap();
    let run = || {
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&binary)
            .bounded_output()
    };
    let mut out = run();
    // ETXTBSY while a sibling test's fork still holds the copy's write fd.
    for _ in 0..100 {
        if !String::from_utf8_lossy(&out.stderr).contains("Text file busy") {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
        out = run();
    }
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("xenstore-snoop: ") && err.contains("root"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn follow_traces_across_a_daemon_restart() {
    if !common::need_root("follow_traces_across_a_daemon_restart") {
        return;
    }
    let first = Shim::private_copy();
    let mut snoop = Snooper::attach(&first, &["--follow", "--path", "^/life/"]);
    // A restart: the old process goes, a new one runs the same binary.
    trace_then_stop(&mut snoop, &first);
    let second = Shim::launch(
        "second xenstored-shim",
        &first.binary,
        private_dir("shim-follow"),
        &[],
    )
    .unwrap();
    let new = second.pid();
    snoop
        .0
        .wait_ready("the snooper to re-attach", TIMEOUT, |_, err| {
            err.iter()
                .any(|l| l.starts_with(&format!("Tracing xenstored-shim pid {new} ")))
        });
    second.run("xenstore-write", &["/life/second", "2"]);
    snoop.wait_line("the second daemon's write", |l| l.contains("/life/second"));
    let (out, err, status) = snoop.stop();
    assert!(status.success(), "{err:?}");
    assert_eq!(
        out.iter().filter(|l| l.starts_with("DOM ")).count(),
        1,
        "one header: {out:?}"
    );
    let gap = err
        .iter()
        .find(|l| l.contains("--follow: gap of "))
        .unwrap_or_else(|| panic!("the gap is reported: {err:?}"));
    assert!(gap.ends_with(&format!("following pid {new}")), "{gap}");
}

#[test]
fn a_failed_reattach_still_ends_the_trace_and_says_the_counts() {
    if !common::need_root("a_failed_reattach_still_ends_the_trace_and_says_the_counts") {
        return;
    }
    let first = Shim::private_copy();
    let trace = first.dir.join("failed.jsonl");
    let mut snoop = Snooper::attach(&first, &["--follow", "-w", trace.to_str().unwrap()]);
    trace_then_stop(&mut snoop, &first);
    // The daemon's binary is replaced by one without the probes, which
    // then runs: --follow finds it, and attaching to it fails.
    std::fs::remove_file(&first.binary).unwrap();
    std::fs::copy("/bin/sleep", &first.binary).unwrap();
    let mut probeless = Command::new(&first.binary).arg("600").spawn().unwrap();
    let Ended { stderr, status, .. } = snoop.0.end(TIMEOUT);
    probeless.kill().unwrap();
    probeless.wait().unwrap();
    assert_eq!(status.code(), Some(1), "{stderr:?}");
    let counts = stats_line(&stderr);
    assert!(counts.contains(" events seen, 0 lost"), "{counts}");
    let failure = stderr.last().unwrap();
    assert!(
        failure.contains("no .note.stapsdt section"),
        "the failure is said after the counts: {stderr:?}"
    );
    let end = json_lines(std::fs::read_to_string(&trace).unwrap().lines())
        .pop()
        .unwrap();
    assert_eq!(end["trace"], "end", "{end}");
    assert_eq!(end["stopped"], "Failed", "{end}");
    assert!(end["seen"].as_u64().unwrap() > 0, "{end}");
}

/// Every `xenstore-snoop ...` command README.md shows parses with today's
/// flags (what each does is run by the tests above and by `make demo`).
#[test]
fn readme_snooper_commands_parse() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let mut checked = 0;
    for line in readme.lines().map(str::trim_start) {
        let Some(rest) = line.strip_prefix("xenstore-snoop ") else {
            continue;
        };
        let command = rest.split(['#', '|']).next().unwrap();
        // Words, with '...' quoting as the shell does.
        let mut words = vec!["xenstore-snoop".to_string()];
        for (i, part) in command.split('\'').enumerate() {
            if i % 2 == 1 {
                words.push(part.to_string());
            } else {
                words.extend(part.split_whitespace().map(String::from));
            }
        }
        if let Err(e) = xenstore_snoop::cli::command().try_get_matches_from(&words) {
            panic!("README's `{line}`: {e}");
        }
        checked += 1;
    }
    assert!(checked >= 8, "{checked} commands found");
}

/// The snooper (under --follow) sees a write to `shim`, then `shim` is
/// stopped (SIGTERM) and the snooper notices.
fn trace_then_stop(snoop: &mut Snooper, shim: &Shim) {
    shim.run("xenstore-write", &["/life/first", "1"]);
    snoop.wait_line("the first daemon's write", |l| l.contains("/life/first"));
    let old = shim.pid();
    common::signal(old, 15); // SIGTERM
    snoop
        .0
        .wait_ready("the exit to be noticed", TIMEOUT, |_, err| {
            err.iter().any(|l| l.contains(&format!("pid {old} exited")))
        });
}
