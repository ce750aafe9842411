//! bpftrace attached by binary path to a live shim sees a request, its
//! response under the same serial, and the watch event that request fired.
mod common;

use common::shim::Shim;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const SCRIPT: &str = r#"
BEGIN { printf("READY\n"); }
usdt:BIN:xenstore:request {
  printf("REQ serial=%llu op=%llu dom=%llu req=%llu path=%s args=%s\n",
         arg0, (arg1 >> 16) & 0xffff, arg1 & 0xffff, arg3 & 0xffffffff, str(arg4), str(arg5));
}
usdt:BIN:xenstore:response {
  printf("RSP serial=%llu op=%llu errno=%llu req=%llu result=%s\n",
         arg0, (arg1 >> 16) & 0xffff, (arg3 >> 32) & 0xffff, arg3 & 0xffffffff, str(arg4));
}
usdt:BIN:xenstore:watch_event {
  printf("EVT serial=%llu conn=%llu firer=%llu path=%s token=%s\n",
         arg0, arg1 >> 32, arg3, str(arg4), str(arg5));
}
"#;

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

/// bpftrace stopped even when the test fails: a leftover one keeps the
/// shim's uprobes and can make later attaches to a rebuilt binary fail.
struct Tracer(Child);

impl Drop for Tracer {
    fn drop(&mut self) {
        common::signal(self.0.id(), 2);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn bpftrace_sees_request_response_and_watch_event_with_one_serial() {
    if !common::need_root("bpftrace_sees_request_response_and_watch_event_with_one_serial") {
        return;
    }
    let shim = Shim::start();
    let bin = common::bin("xenstored-shim");
    let script = SCRIPT.replace("BIN", bin.to_str().unwrap());
    let mut bt = Tracer(
        Command::new("bpftrace")
            .args(["-B", "line", "-e", &script])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("bpftrace must be installed"),
    );
    let (tx, rx) = mpsc::channel();
    let out = bt.0.stdout.take().unwrap();
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

    let mut watch = shim
        .client("xenstore-watch")
        .args(["-n", "2", "/bt"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut events = BufReader::new(watch.stdout.take().unwrap()).lines();
    assert_eq!(events.next().unwrap().unwrap(), "/bt");
    shim.run("xenstore-write", &["/bt/x", "hello"]);
    assert_eq!(events.next().unwrap().unwrap(), "/bt/x");
    watch.wait().unwrap();

    let mut lines = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    let write_serial = loop {
        let line = next(deadline).unwrap_or_else(|_| panic!("no WRITE request seen: {lines:#?}"));
        lines.push(line.clone());
        if line.starts_with("REQ ") && field(&line, "op") == "11" && field(&line, "path") == "/bt/x"
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
    assert_eq!(field(&response, "op"), "11");
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
        .output()
        .expect("bpftrace must be installed");
    let listed = String::from_utf8_lossy(&out.stdout);
    for probe in [
        "request",
        "response",
        "watch_event",
        "conn_open",
        "conn_close",
        "tx_end",
    ] {
        assert!(
            listed
                .lines()
                .any(|l| l.ends_with(&format!(":xenstore:{probe}"))),
            "{probe} not listed:\n{listed}"
        );
    }
}
