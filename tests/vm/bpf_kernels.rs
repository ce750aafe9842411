//! The snooper's BPF back end on the kernels dom0s run: tests/kernels/run
//! boots Debian 12's 6.1 and Debian 13's 6.12 directly in QEMU (TCG, no
//! Xen) with the shim, the snooper on its default back end and Debian's
//! xenstore clients (tests/kernels/init), and the snooper must have used
//! BPF, shown every request and lost nothing; `xenstore-snoop --metrics`'s
//! own program (xsmetrics.bpf.c) must load there and count exactly those
//! requests in its textfile; across a live update of the shim in place,
//! no tracer runs blind (see `snoops_with_bpf`). Refusals, said once in the
//! verifier's or libbpf's words: Debian 11's 5.10 (no attach cookies) and
//! uprobe-multi links asked of 6.1. The host's own kernel is covered by
//! tests/snoop/.
//!
//! Needs root and apt-get (the kernels and QEMU come from Debian's archive
//! into target/xen/cache and target/kernels). The boots share the tier's
//! slots (tests/vm/slots.rs), short ones last.

use std::path::PathBuf;
use std::process::Command;

/// The requests tests/kernels/init makes, as the snooper's classic lines
/// show them (all from dom0): COMM, TX, and the rest from OP on.
const EXPECTED: &[(&str, &str, &str)] = &[
    ("xenstore-write", "0", "XS_TRANSACTION_START: -> 1"),
    (
        "xenstore-write",
        "1",
        "XS_WRITE: /harness/greeting hello -> OK",
    ),
    ("xenstore-write", "1", "XS_WRITE: /harness/count 3 -> OK"),
    ("xenstore-write", "1", "XS_TRANSACTION_END: T -> OK"),
    ("xenstore-read", "0", "XS_READ: /harness/greeting -> hello"),
    (
        "xenstore-ls",
        "0",
        "XS_DIRECTORY: /harness -> greeting count",
    ),
    ("xenstore-ls", "0", "XS_READ: /harness/greeting -> hello"),
    ("xenstore-ls", "0", "XS_DIRECTORY: /harness/greeting ->"),
    ("xenstore-ls", "0", "XS_READ: /harness/count -> 3"),
    ("xenstore-ls", "0", "XS_DIRECTORY: /harness/count ->"),
    (
        "xenstore-read",
        "0",
        "[ERROR] XS_READ: /harness/missing -> ENOENT",
    ),
    ("xenstore-rm", "0", "XS_TRANSACTION_START: -> 1"),
    ("xenstore-rm", "1", "XS_RM: /harness/count -> OK"),
    ("xenstore-rm", "1", "XS_TRANSACTION_END: T -> OK"),
];

/// Root, tracefs, apt-get (the kernels come from Debian's archive) and
/// xenstore-utils (its clients run in the VM).
fn prerequisites(test: &str) -> bool {
    crate::common::need_tools(test, &["/usr/bin/apt-get", "/usr/bin/xenstore"])
}

/// What one boot left in its --out directory.
struct Boot {
    out: PathBuf,
    /// The run's logs, for a failing assertion's message.
    report: String,
}

impl Boot {
    fn file(&self, name: &str) -> String {
        std::fs::read_to_string(self.out.join(name)).unwrap_or_default()
    }

    fn step(&self, name: &str) -> Option<String> {
        self.file("steps").lines().find_map(|l| {
            let (step, result) = l.split_once(' ')?;
            (step == name).then(|| result.to_string())
        })
    }
}

/// Boots `kernel` (6.1 or 6.12) with the snooper given `snoop_args`.
fn boot(kernel: &str, name: &str, snoop_args: &str) -> Boot {
    boot_with(kernel, name, snoop_args, &[])
}

/// As `boot`, with more of tests/kernels/run's options.
fn boot_with(kernel: &str, name: &str, snoop_args: &str, more: &[&str]) -> Boot {
    let _slot = crate::slots::take(1, 10);
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let status = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/kernels/run"))
        .args([
            "--kernel",
            kernel,
            "--snoop-args",
            snoop_args,
            "--timeout",
            "240",
        ])
        .args(more)
        .arg("--shim")
        .arg(crate::release_bin("xenstored-shim"))
        .arg("--snoop")
        .arg(crate::release_bin("xenstore-snoop"))
        .arg("--out")
        .arg(&out)
        .status()
        .expect("run tests/kernels/run");
    let text = |f: &str| std::fs::read_to_string(out.join(f)).unwrap_or_default();
    let report = format!(
        "tests/kernels/run --kernel {kernel} --snoop-args {snoop_args:?}: {status}\n\
         --- {}/steps\n{}--- times\n{}--- kernel\n{}--- snoop.err\n{}--- snoop.out\n{}\
         --- clients.out\n{}--- lu-before.err\n{}--- lu-metrics.err\n{}--- lu-after.err\n{}\
         --- console.log\n{}",
        out.display(),
        text("steps"),
        text("times"),
        text("kernel"),
        text("snoop.err"),
        text("snoop.out"),
        text("clients.out"),
        text("lu-before.err"),
        text("lu-metrics.err"),
        text("lu-after.err"),
        text("console.log"),
    );
    eprintln!("{report}");
    assert!(
        text("steps").lines().any(|l| l == "total done"),
        "the VM did not finish\n{report}"
    );
    assert!(
        text("kernel").starts_with(&format!("{kernel}.")),
        "booted another kernel\n{report}"
    );
    Boot { out, report }
}

/// The snooper's default back end is BPF on `kernel`, attached as `links`
/// says, and it shows every request the clients made, losing nothing.
/// Then the shim updates itself in place (tests/kernels/init's live-update
/// phase): the snooper attached before (no --follow) says its daemon
/// exec'd and exits 1, the exporter follows the exec and its count of
/// writes rises, and a snooper started after sees a write.
fn snoops_with_bpf(kernel: &str, links: &str) {
    let boot = boot_with(
        kernel,
        &format!("bpf-kernel-{kernel}"),
        "",
        &["--live-update", "yes"],
    );
    for step in [
        "lu-attached",
        "lu-update",
        "lu-snoop-before-exits",
        "lu-metrics-follows",
        "lu-snoop-after-sees",
        "lu-metrics-rising",
        "lu-snoop-after-ended",
        "lu-metrics-ended",
    ] {
        assert_eq!(
            boot.step(step).as_deref(),
            Some("ok"),
            "step {step}\n{}",
            boot.report
        );
    }
    // Which path ran: the kernel's semaphores, or the tracers' own.
    let raised = |f: &str| boot.file(f).contains("raised them in its memory");
    eprintln!(
        "{kernel}: after the update in place, semaphores raised by the exporter: {}, by the \
         snooper started after: {}",
        raised("lu-metrics.err"),
        raised("lu-after.err")
    );
    let report = &boot.report;
    for step in [
        "shim-ready",
        "snoop-attached",
        "write",
        "read",
        "ls",
        "read-missing",
        "rm",
        "snoop-saw-all",
        "snoop-ended",
    ] {
        assert_eq!(
            boot.step(step).as_deref(),
            Some("ok"),
            "step {step}\n{report}"
        );
    }
    let err = boot.file("snoop.err");
    let err: Vec<&str> = err.lines().collect();
    assert_eq!(
        err.len(),
        2,
        "the Tracing line and the closing one only\n{report}"
    );
    assert!(
        err[0].starts_with("Tracing xenstored-shim pid ")
            && err[0].ends_with(&format!("(BPF, 4 probe sites{links})... Ctrl-C to end.")),
        "{}\n{report}",
        err[0]
    );
    assert_eq!(err[1], "xenstore-snoop: 19 events seen, 0 lost", "{report}");

    let out = boot.file("snoop.out");
    let mut lines = out.lines();
    let header: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(header, ["DOM", "PID", "COMM", "TX", "OP"], "{report}");
    let shown: Vec<(String, String, String, String)> = lines
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            assert!(w.len() >= 5, "{l}\n{report}");
            (w[0].into(), w[2].into(), w[3].into(), w[4..].join(" "))
        })
        .collect();
    let expected: Vec<(String, String, String, String)> = EXPECTED
        .iter()
        .map(|&(comm, tx, op)| ("0".into(), comm.into(), tx.into(), op.into()))
        .collect();
    assert_eq!(shown, expected, "{report}");
}

#[test]
fn debian12s_kernel_6_1_runs_the_bpf_back_end_on_a_uprobe_link_each() {
    if prerequisites("debian12s_kernel_6_1_runs_the_bpf_back_end_on_a_uprobe_link_each") {
        snoops_with_bpf(
            "6.1",
            ", a uprobe link each (the kernel has no uprobe-multi links)",
        );
    }
}

#[test]
fn debian13s_kernel_6_12_runs_the_bpf_back_end_on_one_uprobe_multi_link() {
    if prerequisites("debian13s_kernel_6_12_runs_the_bpf_back_end_on_one_uprobe_multi_link") {
        snoops_with_bpf("6.12", "");
    }
}

/// A kernel lacking what the snooper is told to use: 6.1 has no uprobe-multi
/// links, and the fallback says so once, in libbpf's words.
#[test]
fn a_refused_bpf_back_end_says_why_once_in_libbpfs_words() {
    if !prerequisites("a_refused_bpf_back_end_says_why_once_in_libbpfs_words") {
        return;
    }
    let boot = boot("6.1", "bpf-kernel-6.1-multi", "--bpf-links multi");
    let err = boot.file("snoop.err");
    let unavailable: Vec<&str> = err.lines().filter(|l| l.contains("BPF")).collect();
    assert_eq!(
        unavailable,
        [
            "xenstore-snoop: BPF back end unavailable (attaching a uprobe-multi link to the \
             probe sites: prog 'xenstore_probe_multi': failed to attach multi-uprobe: -EINVAL); \
             using tracefs"
        ],
        "{}",
        boot.report
    );
    assert!(err.contains("(tracefs, 4 probe sites"), "{}", boot.report);
    assert_eq!(
        boot.step("snoop-saw-all").as_deref(),
        Some("ok"),
        "{}",
        boot.report
    );
}

/// A kernel older than the program's needs: Debian 11's 5.10 has no BPF
/// attach cookies (5.15), so its verifier refuses the program, and the
/// snooper says so once, in the verifier's words, and captures on tracefs.
#[test]
fn debian11s_kernel_5_10_refuses_the_program_in_the_verifiers_words() {
    if !prerequisites("debian11s_kernel_5_10_refuses_the_program_in_the_verifiers_words") {
        return;
    }
    let boot = boot("5.10", "bpf-kernel-5.10", "");
    let err = boot.file("snoop.err");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(
        lines.first().copied(),
        Some(
            "xenstore-snoop: BPF back end unavailable (loading the BPF program: the kernel's \
             verifier refused xenstore_probe: invalid func unknown#174 (at `__u32 kind = \
             bpf_get_attach_cookie(ctx);`)); using tracefs"
        ),
        "{}",
        boot.report
    );
    assert_eq!(err.matches("BPF").count(), 2, "said once\n{}", boot.report);
    assert!(
        lines
            .get(1)
            .is_some_and(|l| l.contains("(tracefs, 4 probe sites")),
        "{}",
        boot.report
    );
    assert_eq!(
        lines.get(2).copied(),
        Some("xenstore-snoop: 19 events seen, 0 lost"),
        "{}",
        boot.report
    );
}

/// The requests EXPECTED makes, as the exporter's textfile counts them.
const EXPECTED_COUNTS: &[&str] = &[
    r#"xenstore_requests_total{op="XS_DIRECTORY",result="ok"} 3"#,
    r#"xenstore_requests_total{op="XS_READ",result="ENOENT"} 1"#,
    r#"xenstore_requests_total{op="XS_READ",result="ok"} 3"#,
    r#"xenstore_requests_total{op="XS_RM",result="ok"} 1"#,
    r#"xenstore_requests_total{op="XS_TRANSACTION_END",result="ok"} 2"#,
    r#"xenstore_requests_total{op="XS_TRANSACTION_START",result="ok"} 2"#,
    r#"xenstore_requests_total{op="XS_WRITE",result="ok"} 2"#,
];

/// `xenstore-snoop --metrics` on `kernel`: its own program
/// (xsmetrics.bpf.c) loads, attaches as `how` says, and the textfile counts
/// exactly the requests the clients made.
fn counts_in_the_kernel(kernel: &str, how: &str) {
    let boot = boot(kernel, &format!("metrics-kernel-{kernel}"), "--metrics");
    let report = &boot.report;
    for step in [
        "shim-ready",
        "snoop-attached",
        "rm",
        "snoop-saw-all",
        "snoop-ended",
    ] {
        assert_eq!(
            boot.step(step).as_deref(),
            Some("ok"),
            "step {step}\n{report}"
        );
    }
    let err = boot.file("snoop.err");
    assert!(
        err.lines()
            .next()
            .is_some_and(|l| l.starts_with("xenstore-snoop: metrics of daemon ")
                && l.contains(&format!(", {how})"))),
        "{report}"
    );
    let prom = boot.file("metrics.prom");
    let mut counts: Vec<&str> = prom
        .lines()
        .filter(|l| l.starts_with("xenstore_requests_total{"))
        .collect();
    counts.sort_unstable();
    assert_eq!(counts, EXPECTED_COUNTS, "{prom}\n{report}");
    for line in [
        r#"xenstore_transactions_total{outcome="commit"} 2"#,
        r#"xenstore_domain_requests_total{domid="0"} 14"#,
        r#"xenstore_domain_errors_total{domid="0"} 1"#,
        r#"xenstore_request_duration_seconds_count{op="XS_READ"} 4"#,
    ] {
        assert!(prom.lines().any(|l| l == line), "{line}\n{prom}\n{report}");
    }
}

#[test]
fn debian12s_kernel_6_1_runs_the_metrics_program() {
    if prerequisites("debian12s_kernel_6_1_runs_the_metrics_program") {
        counts_in_the_kernel("6.1", "stats_batch, a uprobe link per site");
    }
}

#[test]
fn debian13s_kernel_6_12_runs_the_metrics_program() {
    if prerequisites("debian13s_kernel_6_12_runs_the_metrics_program") {
        counts_in_the_kernel("6.12", "stats_batch, one uprobe-multi link");
    }
}
