//! The text and JSON lines: columns, times, names, cut values, odd types.

use super::*;

#[test]
fn classic_lines_for_real_clients() {
    if !common::need_root("classic_lines_for_real_clients") {
        return;
    }
    let shim = Shim::private_copy();
    let dom6 = common::introduce(&shim, 6);
    let snoop = Snooper::attach(&shim, &[]);

    // dom0 via pyxs: the domain path, a transaction with one write.
    common::pyxs(
        &shim.socket,
        "c.get_domain_path(6)\n\
         c.transaction()\n\
         c.write(b'/local/domain/6/data/tx-written', b'yes')\n\
         assert c.commit()\n\
         c.close()\n",
    );
    // dom0 watches, then a guest read, a missing node and a write firing it.
    let watch = shim.watch(&["-n", "2", "/local/domain/6/device"]);
    snoop.wait_line("for the WATCH", |l| {
        l.contains("XS_WATCH: /local/domain/6/device")
    });
    let read = guest(&dom6, "xenstore-read", &["device/vbd/0/state"]);
    assert_eq!(String::from_utf8_lossy(&read.stdout).trim(), "3");
    let missing = guest(&dom6, "xenstore-read", &["device/vif/0/type"]);
    assert!(!missing.status.success());
    let write = guest(&dom6, "xenstore-write", &["device/vbd/0/state", "4"]);
    assert!(write.status.success(), "{write:?}");
    assert!(watch.end(TIMEOUT).status.success());

    let header = snoop.stdout()[0].clone();
    assert_eq!(columns(&header), ["DOM", "PID", "COMM", "TX", "OP"]);
    let gdp = snoop.wait_line("XS_GET_DOMAIN_PATH", |l| l.contains("XS_GET_DOMAIN_PATH:"));
    let c = columns(&gdp);
    assert_eq!(c[0], "0", "{gdp}");
    assert_ne!(c[1], "0", "a dom0 client has a pid: {gdp}");
    assert_eq!(c[2], "python3", "the client's comm: {gdp}");
    assert_eq!(c[3], "0", "{gdp}");
    assert!(
        gdp.ends_with("XS_GET_DOMAIN_PATH: 6 -> /local/domain/6"),
        "{gdp}"
    );

    let start = snoop.wait_line("XS_TRANSACTION_START", |l| {
        l.contains("XS_TRANSACTION_START")
    });
    let tx_id = start.rsplit("-> ").next().unwrap().trim().to_string();
    assert!(tx_id.parse::<u32>().unwrap() > 0, "{start}");
    let tx_write = snoop.wait_line("the write in the transaction", |l| {
        l.contains("XS_WRITE: /local/domain/6/data/tx-written yes -> OK")
    });
    assert_eq!(columns(&tx_write)[3], tx_id, "{tx_write}");
    let tx_end = snoop.wait_line("XS_TRANSACTION_END", |l| l.contains("XS_TRANSACTION_END"));
    assert_eq!(columns(&tx_end)[3], tx_id, "{tx_end}");

    let guest_read = snoop.wait_line("the guest read", |l| {
        l.contains("XS_READ: device/vbd/0/state -> 3")
    });
    // no /local/domain/6/name in this store: the guest is `-`
    assert_eq!(
        columns(&guest_read)[..4],
        ["6", "0", "-", "0"],
        "{guest_read}"
    );
    let enoent = snoop.wait_line("the ENOENT", |l| l.contains("device/vif/0/type"));
    assert!(
        enoent.ends_with("[ERROR] XS_READ: device/vif/0/type -> ENOENT"),
        "{enoent}"
    );
    assert_eq!(columns(&enoent)[0], "6");
    let event = snoop.wait_line("the watch event", |l| {
        l.contains("XS_WATCH_EVENT: /local/domain/6/device/vbd/0/state")
    });
    let c = columns(&event);
    assert_eq!((c[0], c[2], c[3]), ("0", "xenstore-watch", "-"), "{event}");
    assert_eq!(c.len(), 7, "path and token: {event}");

    let me = snoop.pid();
    let (_, stderr, status) = snoop.stop();
    assert!(status.success(), "{status} {stderr:?}");
    assert!(our_uprobes(me).is_empty(), "SIGINT leaves no group");
    let stats = stats_line(&stderr);
    // Domain 6's name, looked up once through the daemon, is not shown.
    assert!(
        stats.ends_with(", 0 lost, 1 of its own requests (domain names) not shown"),
        "{stats}"
    );
}

#[test]
fn json_lines_parse_with_the_schema() {
    if !common::need_root("json_lines_parse_with_the_schema") {
        return;
    }
    let shim = Shim::private_copy();
    let snoop = Snooper::attach(&shim, &["--json", "-v"]);
    shim.run("xenstore-write", &["/json/a", "line1\nline2"]);
    let missing = shim
        .client("xenstore-read")
        .arg("/json/missing")
        .bounded_output();
    assert!(!missing.status.success());
    let watch = shim.watch(&["-n", "2", "/json"]);
    snoop.wait_line("the WATCH", |l| l.contains("\"XS_WATCH\""));
    shim.run("xenstore-write", &["/json/b", "2"]);
    assert!(watch.end(TIMEOUT).status.success());
    snoop.wait_line("the watch event", |l| {
        l.contains("\"watch_event\"") && l.contains("/json/b")
    });
    let (out, _, status) = snoop.stop();
    assert!(status.success());

    let records = json_lines(&out);
    for r in &records {
        for key in xenstore_snoop::output::JSON_KEYS {
            assert!(r.get(key).is_some(), "{key} missing: {r}");
        }
    }
    let write = records
        .iter()
        .find(|r| r["op"] == "XS_WRITE" && r["path"] == "/json/a")
        .expect("the write");
    assert_eq!(write["value"], "line1\nline2");
    assert_eq!(write["result"], "OK");
    assert!(write["latency_us"].as_f64().unwrap() > 0.0);
    assert!(write["ts"].as_str().unwrap().ends_with('Z'));
    // JSON shows when each request came (the BPF program reads the clock
    // only when the output shows times).
    let later = records
        .iter()
        .find(|r| r["op"] == "XS_WRITE" && r["path"] == "/json/b")
        .expect("the second write");
    let (a, b) = (write["mono_ns"].as_u64(), later["mono_ns"].as_u64());
    assert!(a.unwrap() > 0 && a < b, "{write} then {later}");
    let read = records
        .iter()
        .find(|r| r["op"] == "XS_READ" && r["path"] == "/json/missing")
        .expect("the failed read");
    assert_eq!(read["error"], "ENOENT");
    let fired = records
        .iter()
        .find(|r| r["kind"] == "watch_event" && r["path"] == "/json/b")
        .expect("the watch event");
    let firer = records
        .iter()
        .find(|r| r["op"] == "XS_WRITE" && r["path"] == "/json/b")
        .expect("the firing write");
    assert_eq!(fired["fired_by"], firer["serial"]);
    assert_eq!(fired["tx"], serde_json::Value::Null);
    assert!(
        records.iter().any(|r| r["kind"] == "conn_open"),
        "-v shows connections"
    );
}

#[test]
fn timestamp_and_latency_columns() {
    if !common::need_root("timestamp_and_latency_columns") {
        return;
    }
    let shim = Shim::private_copy();
    let snoop = Snooper::attach(&shim, &["-T", "-L"]);
    shim.run("xenstore-write", &["/cols", "1"]);
    let line = snoop.wait_line("the write", |l| l.contains("XS_WRITE: /cols 1 -> OK"));
    let (out, _, _) = snoop.stop();
    assert_eq!(
        columns(&out[0]),
        ["TIME", "DOM", "PID", "COMM", "TX", "LAT(us)", "OP"]
    );
    let c = columns(&line);
    // HH:MM:SS.µµµµµµ of now (UTC), then dom, pid, comm, tx, latency
    let time = chrono_like(c[0]);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
        % 86400.0;
    assert!((now - time).abs() < 60.0, "{line}");
    assert_eq!(c[0].len(), 15, "{line}");
    assert_eq!(c[3], "xenstore-write", "{line}");
    let lat: f64 = c[5].parse().unwrap();
    assert!(lat > 0.0 && lat < 1e6, "{line}");
}

#[test]
fn a_type_beyond_16_bits_is_not_shown_as_a_real_one() {
    if !common::need_root("a_type_beyond_16_bits_is_not_shown_as_a_real_one") {
        return;
    }
    use std::io::Write;
    let shim = Shim::private_copy();
    let snoop = Snooper::attach(&shim, &[]);
    let mut s = std::os::unix::net::UnixStream::connect(&shim.socket).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // 0x10002 would be XS_READ in 16 bits.
    s.write_all(&common::wire::message(0x10002, 1, 0, b"/forged\0"))
        .unwrap();
    let (h, body) = common::wire::reply(&mut s);
    assert_eq!((h.ty, body.as_slice()), (16, &b"ENOSYS\0"[..]));
    let line = snoop.wait_line("the forged request", |l| l.contains("/forged"));
    assert!(
        line.contains("[ERROR] XS_UNKNOWN(>65534): /forged -> ENOSYS"),
        "{line}"
    );
}

#[test]
fn short_lived_clients_are_named_and_selected_by_name() {
    if !common::need_root("short_lived_clients_are_named_and_selected_by_name") {
        return;
    }
    let shim = Shim::private_copy();
    // Connected before the snooper: named from /proc at first sight (so
    // it must still run then: it waits for a third event).
    let watch = shim.watch(&["-n", "3", "/named"]);
    assert_eq!(watch.line(0, TIMEOUT), "/named");
    let named = Snooper::attach(&shim, &["-n", "xenstore-write", "-n", "xenstore-watch"]);
    let json = Snooper::attach(&shim, &["--json"]);
    // xenstore-write lives milliseconds: gone long before anyone looks.
    shim.run("xenstore-write", &["/named/a", "1"]);
    shim.run("xenstore-read", &["/named/a"]);
    let write = named.wait_line("the write", |l| l.contains("XS_WRITE: /named/a 1 -> OK"));
    assert_eq!(columns(&write)[2], "xenstore-write", "{write}");
    let event = named.wait_line("the watch event", |l| {
        l.contains("XS_WATCH_EVENT: /named/a")
    });
    assert_eq!(columns(&event)[2], "xenstore-watch", "{event}");
    shim.run("xenstore-write", &["/named/done", "1"]);
    assert!(watch.end(TIMEOUT).status.success());
    named.wait_line("the last write", |l| l.contains("/named/done"));
    let (out, _, status) = named.stop();
    assert!(status.success());
    let body = &out[1..];
    assert!(
        body.iter()
            .all(|l| ["xenstore-write", "xenstore-watch"].contains(&columns(l)[2])),
        "-n shows only those names: {body:?}"
    );
    assert!(!body.iter().any(|l| l.contains("XS_READ:")), "{body:?}");

    json.wait_line("the last write", |l| l.contains("/named/done"));
    let (out, _, _) = json.stop();
    let read = json_lines(&out)
        .into_iter()
        .find(|r| r["op"] == "XS_READ" && r["path"] == "/named/a")
        .expect("the read");
    assert_eq!(read["comm"], "xenstore-read", "{read}");
}

#[test]
fn cut_values_are_marked_with_the_bytes_cut() {
    if !common::need_root("cut_values_are_marked_with_the_bytes_cut") {
        return;
    }
    let shim = Shim::private_copy();
    let text = Snooper::attach(&shim, &["--path", "^/cut$"]);
    let json = Snooper::attach(&shim, &["--json", "--path", "^/cut$"]);
    let value = "X".repeat(4000);
    shim.run("xenstore-write", &["/cut", &value]);
    assert_eq!(shim.run("xenstore-read", &["/cut"]).trim_end(), value);

    let write = text.wait_line("the write", |l| l.contains("XS_WRITE: /cut "));
    let shown = write.split("XS_WRITE: /cut ").nth(1).unwrap();
    let (kept, mark) = shown.split_once('…').expect("a cut mark");
    assert!(
        kept.len() < 4000 && kept.bytes().all(|b| b == b'X'),
        "{write}"
    );
    let cut = 4000 - kept.len();
    assert_eq!(mark, format!("[+{cut} bytes] -> OK"), "{write}");
    let read = text.wait_line("the read", |l| l.contains("XS_READ: /cut "));
    let result = read.split(" -> ").nth(1).unwrap();
    let (kept, mark) = result.split_once('…').expect("a cut mark");
    assert_eq!(mark, format!("[+{} bytes]", 4000 - kept.len()), "{read}");

    json.wait_line("the read", |l| l.contains("\"XS_READ\""));
    let (out, _, _) = json.stop();
    let records = json_lines(&out);
    let write = records.iter().find(|r| r["op"] == "XS_WRITE").unwrap();
    assert_eq!(write["truncated"], true);
    assert_eq!(write["truncated_bytes"], cut as u64, "{write}");
    assert_eq!(
        write["value"].as_str().unwrap().len() + cut,
        4000,
        "the count is what the value lacks"
    );
}

/// The BPF program copies a firing's strings in one 256-byte window when
/// they fit in it, else one by one: values on both sides of that edge, and
/// far from it, are shown whole, by the reply probe and by the paired ones.
#[test]
fn values_on_both_sides_of_the_copy_window_are_shown_whole() {
    if !common::need_root("values_on_both_sides_of_the_copy_window_are_shown_whole") {
        return;
    }
    let shim = Shim::private_copy();
    let reply = Snooper::attach(&shim, &["--json", "--path", "^/win/"]);
    let paired = Snooper::attach(&shim, &["--json", "--paired", "--path", "^/win/"]);
    let lengths: Vec<usize> = [0, 1, 100, 1000].into_iter().chain(230..=262).collect();
    let value = |len: usize| -> String {
        (0..len)
            .map(|i| char::from(b'a' + ((i + len) % 26) as u8))
            .collect()
    };
    let path = |len: usize| format!("/win/{len}");
    let mut write_args = Vec::new();
    for &len in &lengths {
        write_args.push(path(len));
        write_args.push(value(len));
    }
    let write_args: Vec<&str> = write_args.iter().map(String::as_str).collect();
    shim.run("xenstore-write", &write_args);
    let paths: Vec<String> = lengths.iter().map(|&l| path(l)).collect();
    let paths: Vec<&str> = paths.iter().map(String::as_str).collect();
    shim.run("xenstore-read", &paths);

    let last = format!("\"{}\"", path(*lengths.last().unwrap()));
    for snoop in [reply, paired] {
        snoop.wait_line("the last read", |l| {
            l.contains("\"XS_READ\"") && l.contains(&last)
        });
        let (out, _, _) = snoop.stop();
        let records = json_lines(&out);
        for &len in &lengths {
            let find = |op: &str| {
                records
                    .iter()
                    .find(|r| r["op"] == op && r["path"] == path(len).as_str())
                    .unwrap_or_else(|| panic!("no {op} of {}: {out:?}", path(len)))
            };
            let write = find("XS_WRITE");
            assert_eq!(write["value"], value(len).as_str(), "{write}");
            assert_eq!(write["result"], "OK", "{write}");
            let read = find("XS_READ");
            assert_eq!(read["result"], value(len).as_str(), "{read}");
        }
    }
}
