//! bpftrace attached by binary path to a live shim sees a request, its
//! response under the same serial, and the watch event that request fired;
//! and a real client's request fires `reply` once, with the whole operation.
//! `stats_batch` fires a full batch at once and an idle daemon's held
//! records within its bound.
use crate::common::process::{BoundedOutput, StopOnDrop};
use crate::common::shim::Shim;
use crate::common::TIMEOUT;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use xenstore_proto::wire::MsgType;
use xenstore_proto::wire::XsError;
use xenstore_proto::{Client, Ident, Probe, RequestExtra, ResponseExtra, PROVIDER};

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

/// bpftrace running `script` (which prints READY from BEGIN), once every
/// probe is attached, and its output lines. Stopped on drop even when the
/// test fails: a leftover bpftrace keeps the shim's uprobes and can make
/// later attaches to a rebuilt binary fail.
fn bpftrace(script: &str) -> (StopOnDrop, mpsc::Receiver<String>) {
    let mut bt = StopOnDrop {
        child: Command::new("bpftrace")
            .args(["-B", "line", "-e", script])
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
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let wait = deadline.saturating_duration_since(Instant::now());
        let line = rx.recv_timeout(wait).expect("bpftrace never attached");
        // BEGIN runs once every probe is attached.
        if line == "READY" {
            return (bt, rx);
        }
    }
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
    if !crate::common::need_root("bpftrace_sees_request_response_and_watch_event_with_one_serial") {
        return;
    }
    let shim = Shim::start();
    let bin = crate::common::bin("xenstored-shim");
    let (_bt, rx) = bpftrace(&script(&bin));
    let next =
        |deadline: Instant| rx.recv_timeout(deadline.saturating_duration_since(Instant::now()));

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
    if !crate::common::need_root("bpftrace_lists_every_declared_probe") {
        return;
    }
    let bin = crate::common::bin("xenstored-shim");
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

/// `request` and `reply` of one operation, fields unpacked as xenstore-proto
/// says; reply's three strings between `|`s, as any may be empty. bpftrace
/// 0.17 refuses arg6 and arg7 (it caps argN at x86-64's six argument
/// registers, USDT or not), so they are read from the registers the notes
/// name for them.
fn reply_script(bin: &Path) -> String {
    let (op, dom, conn) = (
        Ident::OP.c_expr("arg1"),
        Ident::DOM.c_expr("arg1"),
        Ident::CONN.c_expr("arg1"),
    );
    let pid = Client::PID.c_expr("arg2");
    let (req_id, errno, flags) = (
        ResponseExtra::REQ_ID.c_expr("arg3"),
        ResponseExtra::ERRNO.c_expr("arg3"),
        ResponseExtra::FLAGS.c_expr("arg3"),
    );
    let usdt = |probe: Probe| format!("usdt:{}:{PROVIDER}:{}", bin.display(), probe.name());
    format!(
        r#"
BEGIN {{ printf("READY\n"); }}
{} {{
  printf("REQ serial=%llu conn=%llu path=%s\n", arg0, {conn}, str(arg4));
}}
{} {{
  printf("RPL serial=%llu op=%llu dom=%llu conn=%llu pid=%llu req=%llu errno=%llu flags=%llu latency=%llu |%s|%s|%s|\n",
         arg0, {op}, {dom}, {conn}, {pid}, {req_id}, {errno}, {flags}, reg("r11"),
         str(arg4), str(arg5), str(reg("r10")));
}}
"#,
        usdt(Probe::Request),
        usdt(Probe::Reply),
    )
}

/// A real client's request fires `reply` once, after its `request` under
/// the same serial, carrying path, value, outcome and a latency: a write
/// that succeeds and a read that fails.
#[test]
fn a_real_clients_request_fires_one_reply_with_the_whole_operation() {
    if !crate::common::need_root("a_real_clients_request_fires_one_reply_with_the_whole_operation")
    {
        return;
    }
    // A binary of its own: no other test's traffic or tracer.
    let shim = Shim::private_copy();
    let (_bt, rx) = bpftrace(&reply_script(&shim.binary));
    shim.run("xenstore-write", &["/rp/x", "hello world"]);
    let read = crate::common::process::output_within(
        shim.client("xenstore-read").arg("/rp/none"),
        TIMEOUT,
    );
    assert!(!read.status.success(), "read of a missing node succeeded");

    let mut lines = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    // serial -> its request's line, then its reply's.
    let mut seen: Vec<(String, Option<String>)> = Vec::new();
    let wanted = |seen: &[(String, Option<String>)], path: &str| {
        seen.iter()
            .find(|(req, rpl)| field(req, "path") == path && rpl.is_some())
            .map(|(_, rpl)| rpl.clone().unwrap())
    };
    while wanted(&seen, "/rp/x").is_none() || wanted(&seen, "/rp/none").is_none() {
        let wait = deadline.saturating_duration_since(Instant::now());
        let line = rx
            .recv_timeout(wait)
            .unwrap_or_else(|_| panic!("no reply to the write and the read: {lines:#?}"));
        lines.push(line.clone());
        if line.starts_with("REQ ") {
            seen.push((line, None));
        } else if line.starts_with("RPL ") {
            let serial = field(&line, "serial");
            let req = seen
                .iter_mut()
                .find(|(req, _)| field(req, "serial") == serial)
                .unwrap_or_else(|| panic!("reply before its request: {lines:#?}"));
            assert!(
                req.1.is_none(),
                "two replies to serial {serial}: {lines:#?}"
            );
            assert_eq!(field(&line, "conn"), field(&req.0, "conn"));
            req.1 = Some(line);
        }
    }
    // Every request so far got exactly one reply (the clients wait for each).
    for (req, rpl) in &seen {
        assert!(rpl.is_some(), "no reply to {req}: {lines:#?}");
    }

    let strings = |line: &str| -> Vec<String> {
        let s = &line[line.find(" |").unwrap() + 2..];
        let s = s.strip_suffix('|').unwrap();
        s.split('|').map(String::from).collect()
    };
    let write = wanted(&seen, "/rp/x").unwrap();
    assert_eq!(field(&write, "op"), (MsgType::Write as u32).to_string());
    assert_eq!(field(&write, "dom"), "0");
    assert_ne!(field(&write, "pid"), "0", "a dom0 client's pid");
    assert_eq!(field(&write, "errno"), "0");
    assert_eq!(field(&write, "flags"), "0");
    assert_eq!(strings(&write), ["/rp/x", "hello world", "OK"]);
    let latency: u64 = field(&write, "latency").parse().unwrap();
    assert!(latency > 0, "{write}");

    let read = wanted(&seen, "/rp/none").unwrap();
    assert_eq!(field(&read, "op"), (MsgType::Read as u32).to_string());
    let enoent = XsError::from_errno(2).unwrap();
    assert_eq!(enoent.name(), "ENOENT");
    assert_eq!(field(&read, "errno"), "2");
    // str3 is the error's reason: none for a missing node.
    assert_eq!(strings(&read), ["/rp/none", "", ""]);
    assert!(field(&read, "latency").parse::<u64>().unwrap() > 0);
    // req_id as the client sent it: both clients send their first as 0.
    assert_eq!(field(&read, "req"), field(&write, "req"));
}

/// `reply_stats`, as xenstore-snoop --metrics reads it: a real client's
/// write and failing read each fire it once, with op, errno, the static
/// error name (str1; str2 "") and elapsed_ns (arg6, r10).
#[test]
fn reply_stats_carries_replys_numbers_and_the_error_name() {
    if !crate::common::need_root("reply_stats_carries_replys_numbers_and_the_error_name") {
        return;
    }
    let shim = Shim::private_copy();
    let (bin, probe) = (shim.binary.display(), Probe::ReplyStats.name());
    let (op, dom) = (Ident::OP.c_expr("arg1"), Ident::DOM.c_expr("arg1"));
    let errno = ResponseExtra::ERRNO.c_expr("arg3");
    let flags = ResponseExtra::FLAGS.c_expr("arg3");
    let script = format!(
        r#"
BEGIN {{ printf("READY\n"); }}
usdt:{bin}:{PROVIDER}:{probe} {{
  printf("STATS op=%llu dom=%llu errno=%llu flags=%llu elapsed=%llu |%s|%s|\n",
         {op}, {dom}, {errno}, {flags}, reg("r10"), str(arg4), str(arg5));
}}
"#
    );
    let (_bt, rx) = bpftrace(&script);
    shim.run("xenstore-write", &["/rs/x", "v"]);
    let read = crate::common::process::output_within(
        shim.client("xenstore-read").arg("/rs/none"),
        TIMEOUT,
    );
    assert!(!read.status.success(), "read of a missing node succeeded");

    let (write_op, read_op) = (MsgType::Write as u32, MsgType::Read as u32);
    let mut lines = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    let find = |lines: &[String], op: u32| {
        lines
            .iter()
            .find(|l| field(l, "op") == op.to_string())
            .cloned()
    };
    while find(&lines, write_op).is_none() || find(&lines, read_op).is_none() {
        let wait = deadline.saturating_duration_since(Instant::now());
        let line = rx
            .recv_timeout(wait)
            .unwrap_or_else(|_| panic!("no reply_stats for the write and the read: {lines:#?}"));
        lines.push(line);
    }
    let write = find(&lines, write_op).unwrap();
    assert_eq!(field(&write, "dom"), "0");
    assert_eq!(field(&write, "errno"), "0");
    assert_eq!(field(&write, "flags"), "0");
    assert!(write.ends_with(" |||"), "no strings for success: {write}");
    assert!(
        field(&write, "elapsed").parse::<u64>().unwrap() > 0,
        "{write}"
    );
    let read = find(&lines, read_op).unwrap();
    assert_eq!(field(&read, "errno"), "2");
    assert!(read.ends_with(" |ENOENT||"), "{read}");
    assert!(
        field(&read, "elapsed").parse::<u64>().unwrap() > 0,
        "{read}"
    );
}

/// `stats_batch` as a tracer other than --metrics reads it: 1000 pipelined
/// requests arrive in batches of at most 256, at least one of them full
/// (a full batch fires at once, not at its deadline), and every record
/// arrives: the last few while the daemon is idle (the event loop wakes
/// for the deadline). Then one request on an idle daemon arrives alone,
/// its record as the crate lays it out.
#[test]
fn stats_batch_fires_full_batches_at_once_and_an_idle_daemons_within_its_bound() {
    use std::io::Write;
    use std::mem::offset_of;
    use std::os::unix::net::UnixStream;
    use xenstore_proto::stats::{StatsKind, StatsRecord, BATCH_RECORDS, LAYOUT};
    let test = "stats_batch_fires_full_batches_at_once_and_an_idle_daemons_within_its_bound";
    if !crate::common::need_root(test) {
        return;
    }
    let shim = Shim::private_copy();
    let (bin, probe) = (shim.binary.display(), Probe::StatsBatch.name());
    let (kind, op, errno, domid, pid) = (
        offset_of!(StatsRecord, kind),
        offset_of!(StatsRecord, op),
        offset_of!(StatsRecord, errno),
        offset_of!(StatsRecord, domid),
        offset_of!(StatsRecord, pid),
    );
    let script = format!(
        r#"
BEGIN {{ printf("READY\n"); }}
usdt:{bin}:{PROVIDER}:{probe} {{
  $r = (uint64)reg("r10");
  printf("BATCH n=%llu layout=%s kind=%u op=%u errno=%u dom=%u pid=%u\n", arg3, str(arg4),
         *(uint8 *)uptr($r + {kind}), *(uint16 *)uptr($r + {op}),
         *(uint16 *)uptr($r + {errno}), *(uint16 *)uptr($r + {domid}),
         *(uint32 *)uptr($r + {pid}));
}}
"#
    );
    let (_bt, rx) = bpftrace(&script);
    let batches_until = |total: u64, lines: &mut Vec<String>| {
        let deadline = Instant::now() + TIMEOUT;
        let mut sum = 0;
        while sum < total {
            let wait = deadline.saturating_duration_since(Instant::now());
            let line = rx
                .recv_timeout(wait)
                .unwrap_or_else(|_| panic!("{sum} of {total} records arrived: {lines:#?}"));
            sum += field(&line, "n").parse::<u64>().unwrap();
            lines.push(line);
        }
        assert_eq!(sum, total, "{lines:#?}");
    };

    // Written at once, so the daemon reads them faster than its deadline.
    let requests = 1000;
    let mut stream = UnixStream::connect(&shim.socket).unwrap();
    stream.set_read_timeout(Some(TIMEOUT)).unwrap();
    let burst: Vec<u8> = (0..requests)
        .flat_map(|i| crate::common::wire::message(MsgType::Read as u32, i, 0, b"/sb/none\0"))
        .collect();
    stream.write_all(&burst).unwrap();
    for _ in 0..requests {
        crate::common::wire::reply(&mut stream);
    }
    let mut lines = Vec::new();
    batches_until(requests as u64, &mut lines);
    let sizes: Vec<usize> = lines
        .iter()
        .map(|l| field(l, "n").parse().unwrap())
        .collect();
    assert!(sizes.iter().all(|&n| n <= BATCH_RECORDS), "{sizes:?}");
    assert!(sizes.contains(&BATCH_RECORDS), "no full batch: {sizes:?}");
    eprintln!("stats_batch: 1000 requests in batches of {sizes:?}");

    // One request, then nothing: it arrives alone, on the deadline.
    let (header, body) = {
        stream
            .write_all(&crate::common::wire::message(
                MsgType::Read as u32,
                1,
                0,
                b"/sb/none\0",
            ))
            .unwrap();
        crate::common::wire::reply(&mut stream)
    };
    assert_eq!(header.ty, MsgType::Error as u32, "{body:?}");
    let mut lines = Vec::new();
    batches_until(1, &mut lines);
    let line = &lines[0];
    assert_eq!(field(line, "layout"), LAYOUT.to_str().unwrap(), "{line}");
    assert_eq!(
        field(line, "kind"),
        (StatsKind::Reply as u8).to_string(),
        "{line}"
    );
    assert_eq!(
        field(line, "op"),
        (MsgType::Read as u32).to_string(),
        "{line}"
    );
    assert_eq!(field(line, "errno"), "2", "ENOENT: {line}");
    assert_eq!(field(line, "dom"), "0", "{line}");
    assert_eq!(field(line, "pid"), std::process::id().to_string(), "{line}");
}
