//! scripts/xs-stack-correlate on stack records captured by xs-stacks.bt on
//! this machine (tests/data/xs-stacks.txt: one xenstore-write, one pyxs
//! client) and snoop JSON lines built to match them. The live end-to-end
//! run with the real snooper is still to come (see the scripts report).
use std::io::Write;
use std::process::{Command, Stdio};

const STACKS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/xs-stacks.txt");
const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/xs-stack-correlate");

fn correlate(json: &str) -> String {
    let mut child = Command::new(SCRIPT)
        .args(["--stacks", STACKS, "--delay", "0"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run scripts/xs-stack-correlate");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(json.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn requests_go_to_the_latest_stack_of_their_pid() {
    // xenstore-write pid 9383 recorded xs_write at 1834934539711;
    // python3 pid 9385 sent at 1834976672594 and 1834976714096.
    let ops = [
        (9383, 1834934540000u64, 1, None),
        (9385, 1834976700000, 2, None),
        (9385, 1834976800000, 3, Some("EAGAIN")),
        (9385, 1834976900000, 4, None), // same send as serial 3: shared
        (4242, 1834976900000, 5, Some("ENOENT")), // no record: unattributed
        (0, 1834976900000, 6, None),    // a domain
    ];
    let mut json = String::new();
    for (pid, ns, serial, error) in ops {
        json += &format!(
            "{{\"kind\":\"op\",\"mono_ns\":{ns},\"pid\":{pid},\"dom\":0,\"serial\":{serial},\
             \"op\":\"XS_WRITE\",\"path\":\"/a\",\"value\":\"v\",\"result\":\"{}\",\"error\":{}}}\n",
            error.unwrap_or("OK"),
            error.map_or("null".to_string(), |e| format!("\"{e}\""))
        );
    }
    json += "{\"kind\":\"watch_event\",\"mono_ns\":1,\"pid\":0,\"dom\":0,\"serial\":1,\"fired_by\":1}\n";
    json += "not json\n";
    let out = correlate(&json);
    assert!(
        out.contains(
            "dom0 pid 9383 XS_WRITE: /a v -> OK\n    xs_write [xenstore-write tid 9383, uprobe"
        ),
        "{out}"
    );
    assert!(
        out.contains("    sys_enter_sendto [python3 tid 9385, syscall"),
        "{out}"
    );
    assert!(
        out.contains("pid 4242 [ERROR] XS_WRITE: /a v -> ENOENT\n    (unattributed"),
        "{out}"
    );
    assert!(out.contains("unattributed dom0 requests: 1\n"), "{out}");
    assert!(
        out.contains("domain requests (no dom0 stack): 1\n"),
        "{out}"
    );
    // ranking: the second python send took 2 requests, 1 EAGAIN error
    let summary = out.split("STACKS BY REQUESTS").nth(1).unwrap();
    let rows: Vec<&str> = summary.lines().filter(|l| l.starts_with("   ")).collect();
    assert!(
        rows[0]
            .split_whitespace()
            .eq(["2", "1", "1", "0", "python3", "sys_enter_sendto"]),
        "{summary}"
    );
    assert!(
        summary.contains("1      0      0      1  xenstore-write xs_write"),
        "{summary}"
    );
}
