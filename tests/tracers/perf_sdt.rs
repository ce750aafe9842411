//! perf reads the shim's SDT notes: `perf list` shows every probe after
//! `perf buildid-cache --add`, `perf probe` places `reply` at the file
//! offset the snooper computes (with all eight arguments and the
//! semaphore), and `perf record` catches a real client's request there.
//!
//! perf turns a note's address into a file offset with the offset of the
//! section .stapsdt.base; rust-lld puts read-only data and code in
//! segments whose address - offset differ, so that section must sit in
//! the code's segment (sdt.rs makes it executable), or perf probes the
//! wrong instruction.
use crate::common::process::{output_within, BoundedOutput};
use crate::common::shim::Shim;
use crate::common::TIMEOUT;
use std::path::Path;
use std::process::Command;
use xenstore_proto::wire::MsgType;
use xenstore_proto::{Ident, Probe, ResponseExtra, PROVIDER};

/// A `perf probe` event, deleted on drop (even when the test fails).
struct PerfEvent(String);

impl Drop for PerfEvent {
    fn drop(&mut self) {
        let _ = Command::new("perf")
            .args(["probe", "-q", "-d", &self.0])
            .bounded_output();
    }
}

fn perf(buildid_dir: &Path, args: &[&str]) -> std::process::Output {
    let out = Command::new("perf")
        .arg("--buildid-dir")
        .arg(buildid_dir)
        .args(args)
        .bounded_output();
    assert!(
        out.status.success(),
        "perf {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `key=VALUE` of a `perf script` line, as a number.
fn arg(line: &str, key: &str) -> u64 {
    let at = line
        .find(&format!(" {key}="))
        .unwrap_or_else(|| panic!("{key} in {line}"));
    let value = line[at + key.len() + 2..].split(' ').next().unwrap();
    value.parse().unwrap_or_else(|_| panic!("{key}={value}"))
}

#[test]
fn perf_lists_places_and_records_the_probes() {
    if !crate::common::need_root("perf_lists_places_and_records_the_probes") {
        return;
    }
    let shim = Shim::private_copy();
    let dir = crate::common::shim::private_dir("perf-buildid");
    let bin = shim.binary.to_str().unwrap();
    perf(&dir, &["buildid-cache", "--add", bin]);
    let listed = perf(&dir, &["list", "sdt"]);
    let listed = String::from_utf8_lossy(&listed.stdout);
    for probe in Probe::ALL {
        let event = format!("sdt_{PROVIDER}:{}", probe.name());
        assert!(listed.contains(&event), "{event} not listed:\n{listed}");
    }

    // -f: the name is taken when another tracer has an event `reply`.
    let added = perf(
        &dir,
        &[
            "probe",
            "-f",
            "-x",
            bin,
            "-a",
            &format!("sdt_{PROVIDER}:reply"),
        ],
    );
    let said = String::from_utf8_lossy(&added.stderr);
    let event = said
        .split_whitespace()
        .find(|w| w.starts_with(&format!("sdt_{PROVIDER}:reply")))
        .unwrap_or_else(|| panic!("no event added: {said}"))
        .to_string();
    let _cleanup = PerfEvent(event.clone());

    // Where perf put it is where the snooper would.
    let site = xenstore_snoop::sdt::read_probes(&shim.binary)
        .unwrap()
        .into_iter()
        .find(|p| p.name == "reply")
        .unwrap();
    let uprobe_events = std::fs::read_to_string("/sys/kernel/tracing/uprobe_events").unwrap();
    let tracefs_name = event.replacen(':', "/", 1);
    let def = uprobe_events
        .lines()
        .find(|l| l.split_whitespace().next() == Some(&format!("p:{tracefs_name}")))
        .unwrap_or_else(|| panic!("{tracefs_name} not in uprobe_events:\n{uprobe_events}"));
    let place = format!("{bin}:{:#018x}({:#x})", site.offset, site.semaphore);
    assert!(def.contains(&place), "{def}\nwanted {place}");
    assert!(def.contains("arg8=%r11"), "{def}");

    let data = dir.join("perf.data");
    let mut record = Command::new("perf");
    record
        .args(["record", "-q", "-a", "-e", &event, "-o"])
        .arg(&data)
        .args(["--", "xenstore-write", "/pf/x", "hello"])
        .env("XENSTORED_PATH", &shim.socket);
    let recorded = output_within(&mut record, TIMEOUT);
    assert!(
        recorded.status.success(),
        "perf record: {}",
        String::from_utf8_lossy(&recorded.stderr)
    );
    let script = Command::new("perf")
        .arg("script")
        .arg("-i")
        .arg(&data)
        .bounded_output();
    let script = String::from_utf8_lossy(&script.stdout);
    let shim_pid = format!(" {} ", shim.pid());
    let samples: Vec<&str> = script.lines().filter(|l| l.contains(&shim_pid)).collect();
    // The one request of the client: its WRITE.
    assert_eq!(samples.len(), 1, "{script}");
    let line = samples[0];
    assert!(arg(line, "arg1") > 0, "serial: {line}");
    let ident = Ident::unpack(arg(line, "arg2"));
    assert_eq!(ident.op, MsgType::Write as u16, "{line}");
    assert_eq!(ident.dom, 0);
    assert_eq!(ResponseExtra::unpack(arg(line, "arg4")).errno, 0);
    assert!(arg(line, "arg8") > 0, "latency: {line}");
    let _ = std::fs::remove_dir_all(&dir);
}
