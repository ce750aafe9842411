//! -w and -r: recording a trace and replaying it.

use super::*;

#[test]
fn record_then_replay_with_other_filters_and_summary() {
    if !common::need_root("record_then_replay_with_other_filters_and_summary") {
        return;
    }
    let shim = Shim::private_copy();
    let dom6 = common::introduce(&shim, 6);
    let trace = shim.dir.join("trace.jsonl");
    let trace_arg = trace.to_str().unwrap();
    // Tee-like: -x shows only failures, the trace gets everything.
    let snoop = Snooper::attach(&shim, &["-w", trace_arg, "-x", "-T", "-L"]);
    let watch = shim.watch(&["-n", "2", "/rec"]);
    assert_eq!(watch.line(0, TIMEOUT), "/rec");
    shim.run("xenstore-write", &["/rec/a", "1"]);
    assert!(watch.end(TIMEOUT).status.success());
    assert!(!guest(&dom6, "xenstore-read", &["rec/missing"])
        .status
        .success());
    assert!(guest(&dom6, "xenstore-read", &["device/vbd/0/state"])
        .status
        .success());
    snoop.wait_line("the guest's failed read", |l| l.contains("rec/missing"));
    let (live, err, status) = snoop.stop();
    assert!(status.success(), "{err:?}");
    assert!(live[1..].iter().all(|l| l.contains("[ERROR]")), "{live:?}");

    // The file: its owner's only, a header, every record before the
    // filters, the end line.
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&trace).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    let file = std::fs::read_to_string(&trace).unwrap();
    let lines = json_lines(file.lines());
    let header = &lines[0];
    assert_eq!(header["trace"], "header");
    assert_eq!(header["format"], "xenstore-snoop-trace");
    assert_eq!(header["version"], 1);
    assert_eq!(header["daemon_pid"], shim.pid());
    let end = lines.last().unwrap();
    assert_eq!(end["trace"], "end");
    assert_eq!(end["lost"], 0);
    let stats = stats_line(&err);
    assert!(
        stats.contains(&format!("{} events seen", end["seen"])),
        "{stats}"
    );
    let recorded = |op: &str, path: &str| {
        lines
            .iter()
            .any(|r| r["op"] == op && r["path"] == path && r.get("trace").is_none())
    };
    assert!(recorded("XS_WRITE", "/rec/a"), "{file}");
    assert!(recorded("XS_WATCH_EVENT", "/rec/a"), "{file}");
    assert!(recorded("XS_READ", "device/vbd/0/state"), "{file}");
    // -x attaches neither watch_event nor the lifecycle probes; -w attaches
    // all, so -v on the replay shows connections.
    assert!(lines.iter().any(|r| r["kind"] == "conn_open"), "{file}");

    // The same flags on the replay give exactly the live output.
    let replay = snoop_run(&["-r", trace_arg, "-x", "-T", "-L"]);
    assert!(replay.status.success(), "{replay:?}");
    assert_eq!(text(&replay.stdout).lines().collect::<Vec<_>>(), live);
    assert!(text(&replay.stderr).contains("the recording lost 0 events"));
    // -r - reads standard input (zcat trace.gz | xenstore-snoop -r -).
    let piped = common::process::output_fed(
        Command::new(common::bin("xenstore-snoop")).args(["-r", "-", "-x", "-T", "-L"]),
        file.as_bytes(),
        CLIENT_TIMEOUT,
    );
    assert!(piped.status.success(), "{piped:?}");
    assert_eq!(piped.stdout, replay.stdout);

    // Other filters on the same file.
    let dom6_only = snoop_run(&["-r", trace_arg, "-d", "6"]);
    let out = text(&dom6_only.stdout);
    let body: Vec<&str> = out.lines().skip(1).collect();
    assert_eq!(body.len(), 2, "{out}");
    assert!(body.iter().all(|l| columns(l)[0] == "6"), "{out}");
    let writes = snoop_run(&["-r", trace_arg, "--op", "WRITE", "--json"]);
    let json = json_lines(text(&writes.stdout).lines());
    assert!(json.iter().all(|r| r["op"] == "XS_WRITE"), "{json:?}");
    assert!(json.iter().any(|r| r["path"] == "/rec/a"), "{json:?}");
    let verbose = snoop_run(&["-r", trace_arg, "-v"]);
    assert!(text(&verbose.stdout).contains("[CONN_OPEN]"), "{verbose:?}");
    let two = snoop_run(&["-r", trace_arg, "-c", "2"]);
    assert_eq!(text(&two.stdout).lines().count(), 3, "header and 2 lines");

    // --summary over the trace; piped, so plain ASCII tables.
    let summary = snoop_run(&["-r", trace_arg, "--summary"]);
    let tables = text(&summary.stdout);
    assert!(tables.is_ascii(), "{tables}");
    let row = |tables: &str, first: &str| -> Vec<String> {
        tables
            .lines()
            .map(|l| {
                l.split(['|', '│', '┆'])
                    .map(|c| c.trim().to_string())
                    .filter(|c| !c.is_empty())
                    .collect::<Vec<_>>()
            })
            .find(|c| c.first().map(String::as_str) == Some(first))
            .unwrap_or_else(|| panic!("no row {first}:\n{tables}"))
    };
    assert_eq!(
        row(&tables, "6")[1..3],
        ["2", "1"],
        "dom 6: two reads, one failed"
    );
    assert_eq!(row(&tables, "/rec/a")[1], "1");

    // On a terminal: box drawing with a UTF-8 locale, ASCII with LANG=C.
    let on_a_pty = |lang: &str| {
        let cmd = format!(
            "{} -r {trace_arg} --summary",
            common::bin("xenstore-snoop").display()
        );
        let out = Command::new("script")
            .args(["-qec", &cmd, "/dev/null"])
            .env_remove("LC_ALL")
            .env_remove("LC_CTYPE")
            .env("LANG", lang)
            .stdin(Stdio::null())
            .bounded_output();
        assert!(out.status.success(), "{out:?}");
        text(&out.stdout)
    };
    let boxes = on_a_pty("C.UTF-8");
    assert!(boxes.contains('│') && !boxes.contains('|'), "{boxes}");
    assert_eq!(row(&boxes, "6")[1..3], ["2", "1"]);
    let ascii = on_a_pty("C");
    assert!(ascii.is_ascii() && ascii.contains('|'), "{ascii}");
}

#[test]
fn a_killed_recorder_leaves_a_trace_that_replays_to_the_cut() {
    if !common::need_root("a_killed_recorder_leaves_a_trace_that_replays_to_the_cut") {
        return;
    }
    let shim = Shim::private_copy();
    let trace = shim.dir.join("cut.jsonl");
    let trace_arg = trace.to_str().unwrap();
    let snoop = Snooper::attach(&shim, &["-w", trace_arg]);
    shim.run("xenstore-write", &["/cut/a", "1"]);
    // Shown means recorded: the trace is flushed before the output.
    snoop.wait_line("the write", |l| l.contains("XS_WRITE: /cut/a 1 -> OK"));
    snoop.stop_with(9);
    let replay = snoop_run(&["-r", trace_arg]);
    assert!(replay.status.success(), "{replay:?}");
    assert!(text(&replay.stdout).contains("XS_WRITE: /cut/a 1 -> OK"));
    let err = text(&replay.stderr);
    assert!(
        err.contains("without its end line") && err.contains("replayed what is there"),
        "{err}"
    );

    // Not a trace, or a newer format, or a broken line: clear errors.
    let header = std::fs::read_to_string(&trace)
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .to_string();
    let bad = |name: &str, content: &str, want: &str| {
        let path = shim.dir.join(name);
        std::fs::write(&path, content).unwrap();
        let out = snoop_run(&["-r", path.to_str().unwrap()]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {err}");
        assert!(
            err.starts_with("xenstore-snoop: ") && err.contains(want),
            "{name}: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    };
    bad(
        "text.out",
        "DOM PID    TX  OP\n",
        "is not a xenstore-snoop-trace file",
    );
    bad(
        "v2.jsonl",
        &header.replace("\"version\":1", "\"version\":2"),
        "version 2; this xenstore-snoop reads version 1",
    );
    bad(
        "broken.jsonl",
        &format!("{header}\n{{\"kind\":\"op\"}}\n{{}}\n"),
        "broken.jsonl:2: missing field",
    );
    let missing = shim.dir.join("missing.jsonl");
    let out = snoop_run(&["-r", missing.to_str().unwrap()]);
    assert!(text(&out.stderr).contains("-r: opening"), "{out:?}");
    // -r reads a file, it does not trace a daemon.
    let out = snoop_run(&["-r", trace_arg, "--daemon-pid", "1"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}
