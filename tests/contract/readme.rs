//! README's xenstore-snoop examples are true: every command line of its
//! code blocks that starts with `xenstore-snoop` runs here, as written (in
//! order, in one directory, so a trace written by one is read by a later
//! one), against a real shim with guest and dom0 traffic. Live examples
//! get `--daemon-pid` (several shims run at once in the tests); the rest of
//! the line is README's. A new example is covered by adding it to README.

use crate::common::process::{BoundedOutput, Watched};
use crate::common::shim::Shim;
use crate::common::TIMEOUT;
use std::path::Path;
use std::process::{Command, Stdio};

const README: &str = include_str!("../../README.md");

/// Examples another test runs, with the reason.
const ELSEWHERE: [(&str, &str); 3] = [
    (
        "scripts/xs-stack-correlate",
        "needs bpftrace's stacks: tests/tracers/scripts_live.rs stacks_attribute_every_client_request",
    ),
    (
        "--top",
        "a full-screen view: tests/snoop/top.rs runs it in a terminal (tmux)",
    ),
    (
        "--metrics",
        "a long-lived exporter: tests/service/metrics.rs runs it under the real Prometheus",
    ),
];

/// README's `xenstore-snoop ...` command lines, comments stripped.
fn examples() -> Vec<String> {
    let mut in_code = false;
    let mut out = Vec::new();
    for line in README.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        let command = line.split(" # ").next().unwrap_or("").trim();
        if in_code && command.split_whitespace().next() == Some("xenstore-snoop") {
            out.push(command.to_string());
        }
    }
    out
}

/// Whether `command` replays a file rather than tracing a daemon.
fn replays(command: &str) -> bool {
    command
        .split_whitespace()
        .any(|w| w == "-r" || w == "--read" || w.starts_with("--read="))
}

/// A guest's and dom0's requests, successes and failures, in domain 6's
/// home: something for any example's filters to show.
fn traffic(shim: &Shim, guest: &Path, round: usize) {
    shim.run(
        "xenstore-write",
        &[&format!("/local/domain/6/readme/{round}"), "1"],
    );
    let guest_read = |path: &str| {
        Command::new("xenstore-read")
            .env("XENSTORED_PATH", guest)
            .arg(path)
            .bounded_output()
    };
    assert!(guest_read("device/vbd/0/state").status.success());
    assert!(!guest_read("readme/missing").status.success());
}

/// The xenstore-snoop process of a `sh -c` (the shell itself when it
/// exec'd the command, else its child).
fn snooper_of(shell: u32) -> Option<u32> {
    let stat = |pid: u32| std::fs::read_to_string(format!("/proc/{pid}/stat")).ok();
    // "pid (comm) state ppid ..."
    let parse = |s: &str| -> Option<(String, u32)> {
        let (head, rest) = s.rsplit_once(") ")?;
        let comm = head.split_once(" (")?.1.to_string();
        Some((comm, rest.split_whitespace().nth(1)?.parse().ok()?))
    };
    if stat(shell)
        .and_then(|s| parse(&s))
        .is_some_and(|(c, _)| c == "xenstore-snoop")
    {
        return Some(shell);
    }
    std::fs::read_dir("/proc").ok()?.find_map(|e| {
        let pid: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
        let (comm, ppid) = parse(&stat(pid)?)?;
        (ppid == shell && comm == "xenstore-snoop").then_some(pid)
    })
}

#[test]
fn readme_lists_snooper_examples() {
    let all = examples();
    assert!(all.len() >= 5, "{all:?}");
    assert!(all.iter().any(|c| replays(c)), "a replay example: {all:?}");
}

#[test]
fn every_readme_snoop_example_runs() {
    if !crate::common::need_root("every_readme_snoop_example_runs") {
        return;
    }
    let shim = Shim::private_copy();
    let guest = crate::common::introduce(&shim, 6);
    let bin_dir = crate::common::bin("xenstore-snoop")
        .parent()
        .unwrap()
        .to_path_buf();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let work = shim.dir.join("readme");
    std::fs::create_dir_all(&work).unwrap();
    let mut ran = 0;
    for (round, example) in examples().into_iter().enumerate() {
        if let Some((_, why)) = ELSEWHERE.iter().find(|(k, _)| example.contains(k)) {
            eprintln!("README example `{example}`: {why}");
            continue;
        }
        let command = if replays(&example) {
            example.clone()
        } else {
            example.replacen(
                "xenstore-snoop",
                &format!("xenstore-snoop --daemon-pid {}", shim.pid()),
                1,
            )
        };
        let mut shell = Watched::spawn(
            &format!("`{example}`"),
            Command::new("sh")
                .args(["-c", &command])
                .current_dir(&work)
                .env("PATH", &path)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped()),
            false,
        );
        let ended = if replays(&example) {
            shell.end(TIMEOUT)
        } else {
            shell.wait_ready("the snooper to attach", TIMEOUT, |_, err| {
                err.iter().any(|l| l.contains("Ctrl-C to end."))
            });
            traffic(&shim, &guest, round);
            // Ctrl-C to the snooper alone: it drains what the requests above
            // fired, prints (tables too), and a pipe's reader sees the end.
            let snooper = snooper_of(shell.child.id()).expect("the snooper's pid");
            crate::common::signal(snooper, 2);
            shell.end(TIMEOUT)
        };
        let (out, err) = (ended.stdout.join("\n"), ended.stderr.join("\n"));
        assert!(
            ended.status.success(),
            "`{command}` failed ({}):\n{out}\n{err}",
            ended.status
        );
        // Only that it shows requests: each example filters differently.
        assert!(
            out.contains("XS_"),
            "`{command}` showed no request:\n{out}\n{err}"
        );
        assert!(!err.contains("panicked"), "{err}");
        if !replays(&example) {
            assert!(err.contains(" 0 lost"), "`{command}`: {err}");
        }
        ran += 1;
    }
    assert!(ran >= 5, "only {ran} examples ran");
}

/// The snooper flags README gives `scripts/demo` ("`scripts/demo -T -L`
/// (or `--json`, `--summary`)"): each backticked span of that sentence.
fn demo_variants() -> Vec<Vec<String>> {
    let at = README
        .find("`scripts/demo ")
        .expect("README mentions scripts/demo");
    let sentence = &README[at..];
    let sentence = &sentence[..sentence.find(".\n").unwrap_or(sentence.len())];
    sentence
        .split('`')
        .skip(1)
        .step_by(2)
        .map(|span| {
            span.trim_start_matches("scripts/demo")
                .split_whitespace()
                .map(str::to_string)
                .collect()
        })
        .collect()
}

#[test]
fn readme_demo_variants_run() {
    let variants = demo_variants();
    assert_eq!(variants.len(), 3, "{variants:?}");
    if !crate::common::need_root("readme_demo_variants_run") {
        return;
    }
    let bin_dir = crate::common::bin("xenstored-shim")
        .parent()
        .unwrap()
        .to_path_buf();
    for flags in variants {
        let out = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/demo"))
            .args(&flags)
            .env("BIN_DIR", &bin_dir)
            .bounded_output();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert!(
            out.status.success(),
            "scripts/demo {flags:?}: {stdout}\n{stderr}"
        );
        assert!(
            stdout.contains("XS_READ") && stdout.contains("device/vif/0/type"),
            "scripts/demo {flags:?} showed no requests:\n{stdout}\n{stderr}"
        );
        assert!(stderr.contains(" 0 lost"), "{stderr}");
    }
}
