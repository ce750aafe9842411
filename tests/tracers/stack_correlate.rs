//! scripts/xs-stack-correlate on stack records captured by xs-stacks.bt on
//! this machine (tests/data/xs-stacks.txt: one xenstore-write, one pyxs
//! client) and snoop JSON lines built to match them. The live end-to-end
//! run with the real snooper is still to come (see the scripts report).
use crate::common::process::{output_fed, CLIENT_TIMEOUT};
use std::process::Command;

const STACKS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/xs-stacks.txt");
const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/xs-stack-correlate");

fn correlate(json: &str) -> String {
    let out = output_fed(
        Command::new(SCRIPT).args(["--stacks", STACKS, "--delay", "0"]),
        json.as_bytes(),
        CLIENT_TIMEOUT,
    );
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn requests_go_to_the_latest_stack_of_their_pid() {
    // tests/data/xs-stacks.txt: xenstore-write pid 29838 called xs_write at
    // 4883370329298; python3 pid 29839 (pyxs) wrote /py/0 and /py/1, then read
    // /py/0: two sendto records per request (header, then payload). The file
    // also has clock lines and the maps bpftrace prints at exit.
    let ops = [
        (29838, 4883370340000u64, 1, None),
        (29839, 4883393700000, 2, None),
        (29839, 4883394100000, 3, Some("EAGAIN")),
        (29839, 4883394500000, 4, Some("ENOENT")), // the read
        (29839, 4883394600000, 5, None),           // no new record: same call
        (4242, 4883394600000, 6, Some("ENOENT")),  // no record: unattributed
        (0, 4883394600000, 7, None),               // a domain
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
    json += "{\"kind\":\"watch_event\",\"mono_ns\":1,\"pid\":0,\"dom\":0,\"serial\":2,\"fired_by\":1}\n";
    json += "not json\n";
    let out = correlate(&json);
    assert!(
        out.contains(
            "dom0 pid 29838 XS_WRITE: /a v -> OK\n    xs_write [xenstore-write tid 29838, uprobe"
        ),
        "{out}"
    );
    assert!(
        out.contains("caller 0x564e35cfaaf5 (xenstore-write text+0xaf5)"),
        "{out}"
    );
    assert!(
        out.contains("    sendto [python3 tid 29839, syscall"),
        "{out}"
    );
    assert!(out.contains("py main (/tmp/xs/pyclient.py:5)"), "{out}");
    assert!(
        out.contains("pid 4242 [ERROR] XS_WRITE: /a v -> ENOENT\n    (unattributed"),
        "{out}"
    );
    assert!(out.contains("unattributed dom0 requests: 1\n"), "{out}");
    assert!(
        out.contains("domain requests (no dom0 stack): 1\n"),
        "{out}"
    );

    // (b): the two pyxs writes share one call site despite differently
    // symbolised native frames; the read is its own.
    let summary = out.split("STACKS BY REQUESTS").nth(1).unwrap();
    let rows: Vec<Vec<&str>> = summary
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|w| w.len() == 6 && w[0].parse::<u32>().is_ok())
        .collect();
    assert_eq!(
        rows,
        [
            ["2", "1", "1", "0", "python3", "sendto"],
            ["2", "1", "0", "0", "python3", "sendto"],
            ["1", "0", "0", "1", "xenstore-write", "xs_write"],
        ],
        "{summary}"
    );
    let read_row = summary.find("py read (").unwrap();
    let write_row = summary.find("py write (").unwrap();
    assert!(write_row < read_row, "{summary}");
}
