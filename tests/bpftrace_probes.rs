//! bpftrace attached by binary path to a live shim sees a request, its
//! response under the same serial, and the watch event that request fired.
mod common;

use common::process::{BoundedOutput, StopOnDrop};
use common::shim::Shim;
use common::TIMEOUT;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use xenstore_proto::wire::MsgType;
use xenstore_proto::{Ident, Probe, RequestExtra, ResponseExtra, PROVIDER};

/// The packed fields unpacked as xenstore-proto says, so this test checks
/// the crate's packing against the real probes.
fn script(bin: &Path) -> String {
    let (op, dom, conn) = (
        Ident::OP.c_expr("arg1"),
        Ident::DOM.c_expr("arg1"),
        Ident::CONN.c_expr("arg1"),
    );
    let (req_id, errno) = (
        RequestExtra::REQ_ID.c_expr("arg3"),
        ResponseExtra::ERRNO.c_expr("arg3"),
    );
    let usdt = |probe: Probe| format!("usdt:{}:{PROVIDER}:{}", bin.display(), probe.name());
    format!(
        r#"
BEGIN {{ printf("READY\n"); }}
{} {{
  printf("REQ serial=%llu op=%llu dom=%llu req=%llu path=%s args=%s\n",
         arg0, {op}, {dom}, {req_id}, str(arg4), str(arg5));
}}
{} {{
  printf("RSP serial=%llu op=%llu errno=%llu req=%llu result=%s\n",
         arg0, {op}, {errno}, {req_id}, str(arg4));
}}
{} {{
  printf("EVT serial=%llu conn=%llu firer=%llu path=%s token=%s\n",
         arg0, {conn}, arg3, str(arg4), str(arg5));
}}
"#,
        usdt(Probe::Request),
        usdt(Probe::Response),
        usdt(Probe::WatchEvent)
    )
}

fn field<'a>(line: &'a str, key: &str) -> &'a str {
    let start = line
        .find(&format!(" {key}="))
        .unwrap_or_else(|| panic!("{key} in {line}"))
        + key.len()
        + 2;
    let rest = &line[start..];
    // path/args/result/token may hold spaces only at the end of a line
    if matches!(key, "args" | "result" | "token") {
        return rest;
    }
    rest.split(' ').next().unwrap()
}

#[test]
fn bpftrace_sees_request_response_and_watch_event_with_one_serial() {
    if !common::need_root("bpftrace_sees_request_response_and_watch_event_with_one_serial") {
        return;
    }
    let shim = Shim::start();
    let bin = common::bin("xenstored-shim");
    let script = script(&bin);
    // Stopped even when the test fails: a leftover bpftrace keeps the
    // shim's uprobes and can make later attaches to a rebuilt binary fail.
    let mut bt = StopOnDrop {
        child: Command::new("bpftrace")
            .args(["-B", "line", "-e", &script])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("bpftrace must be installed"),
        signal: 2,
    };
    let (tx, rx) = mpsc::channel();
    let out = bt.child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let next =
        |deadline: Instant| rx.recv_timeout(deadline.saturating_duration_since(Instant::now()));
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let line = next(deadline).expect("bpftrace never attached");
        // BEGIN runs once every probe is attached.
        if line == "READY" {
            break;
        }
    }

    let watch = shim.watch(&["-n", "2", "/bt"]);
    assert_eq!(watch.line(0, TIMEOUT), "/bt");
    shim.run("xenstore-write", &["/bt/x", "hello"]);
    assert_eq!(watch.line(1, TIMEOUT), "/bt/x");
    assert!(watch.end(TIMEOUT).status.success());

    let write = (MsgType::Write as u32).to_string();
    let mut lines = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    let write_serial = loop {
        let line = next(deadline).unwrap_or_else(|_| panic!("no WRITE request seen: {lines:#?}"));
        lines.push(line.clone());
        if line.starts_with("REQ ")
            && field(&line, "op") == write
            && field(&line, "path") == "/bt/x"
        {
            assert_eq!(field(&line, "args"), "hello");
            assert_eq!(field(&line, "dom"), "0");
            break field(&line, "serial").to_string();
        }
    };
    let (mut response, mut event) = (None, None);
    while response.is_none() || event.is_none() {
        let line =
            next(deadline).unwrap_or_else(|_| panic!("missing response or event: {lines:#?}"));
        lines.push(line.clone());
        if line.starts_with("RSP ") && field(&line, "serial") == write_serial {
            response = Some(line);
        } else if line.starts_with("EVT ") && field(&line, "serial") == write_serial {
            event = Some(line);
        }
    }
    let response = response.unwrap();
    assert_eq!(field(&response, "op"), write);
    assert_eq!(field(&response, "errno"), "0");
    assert_eq!(field(&response, "result"), "OK");
    let event = event.unwrap();
    assert_eq!(field(&event, "path"), "/bt/x");
    assert_eq!(field(&event, "token"), "/bt");
    assert_ne!(
        field(&event, "conn"),
        field(&event, "firer"),
        "the writer fired the watcher's event"
    );
}

#[test]
fn bpftrace_lists_every_declared_probe() {
    if !common::need_root("bpftrace_lists_every_declared_probe") {
        return;
    }
    let bin = common::bin("xenstored-shim");
    let out = Command::new("bpftrace")
        .arg("-l")
        .arg(format!("usdt:{}:*", bin.display()))
        .bounded_output();
    let listed = String::from_utf8_lossy(&out.stdout);
    for probe in Probe::ALL.map(Probe::name) {
        assert!(
            listed
                .lines()
                .any(|l| l.ends_with(&format!(":{PROVIDER}:{probe}"))),
            "{probe} not listed:\n{listed}"
        );
    }
}
