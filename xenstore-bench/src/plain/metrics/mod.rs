//! The metrics section: the shim unsnooped, under `xenstore-snoop
//! --metrics` (counting in the kernel, from the daemon's batched records)
//! and under full tracing (the BPF back end, every reply to user space),
//! side by side with two floors (an empty program on a per-op probe and on
//! the batched one); and the exporter's
//! resident memory with 1000 live domains, each of which made a request,
//! and with twice as many (past its cap on domains with series of their
//! own): what bounds it.

pub mod report;

use super::{part, ratios, run_case, table, Budget, MAX_CONNS};
use crate::affinity::Pin;
use crate::builds::{Before, Builds};
use crate::client::Conn;
use crate::compare::{Case, Comparison};
use crate::daemons::{rss_kib, scratch_dir};
use crate::scale::Part;
use crate::tracers::TracerKind;
use crate::workload::{self, Workload};
use anyhow::{bail, Context, Result};
use std::fmt::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use xenstore_proto::wire::MsgType;
use xenstore_testkit::Shim;

/// Live domains for the exporter's memory figure.
pub const DOMAINS: u32 = 1000;
/// The exporter's default --metrics-max-domains (xenstore-snoop's cli.rs).
pub const CAP: u32 = 1024;

pub struct MetricsResult {
    /// unsnooped, --metrics, full tracing.
    pub comparison: Comparison,
    pub at_1000: Result<ExporterAt>,
    /// At 2 × DOMAINS live domains, past CAP.
    pub at_2000: Result<ExporterAt>,
    /// Tracers killed after ignoring SIGINT (their runs kept).
    pub killed: usize,
}

/// The exporter with `domains` live domains.
pub struct ExporterAt {
    pub domains: u32,
    pub rss_kib: u64,
    /// Sample lines in the textfile, and its bytes.
    pub series: usize,
    pub bytes: usize,
}

pub const CONFIGS: [&str; 5] = [
    "shim",
    "shim + xenstore-snoop --metrics",
    "shim + xenstore-snoop (bpf)",
    "shim + a BPF program on reply_stats that only tests a map (bpftrace)",
    "shim + a BPF program on stats_batch that only tests a map (bpftrace)",
];

/// With `--shim-before`: that build unsnooped, under --metrics and under
/// full tracing (configs 5, 6 and 7, after CONFIGS).
pub const BEFORE_CONFIGS: [&str; 3] = [
    "shim (before)",
    "shim (before) + xenstore-snoop --metrics",
    "shim (before) + xenstore-snoop (bpf)",
];

pub fn measure(b: &Builds, budget: &Budget, before: Option<&Before>) -> MetricsResult {
    let seeded = |label: &str, binary: &Path| {
        crate::daemons::shim(label, binary).and_then(|d| {
            workload::seed(&d.socket, MAX_CONNS)?;
            Ok(d)
        })
    };
    let shim = seeded("shim", &b.shim);
    let shim_before = before.map(|x| seeded("shim (before)", &x.shim));
    let (metrics_before, full_before) = match before {
        Some(x) => (
            Some(TracerKind::Metrics {
                binary: x.snoop.clone(),
            }),
            Some(TracerKind::Snoop {
                binary: x.snoop.clone(),
                args: vec!["--backend".into(), "bpf".into()],
            }),
        ),
        None => (None, None),
    };
    let metrics = TracerKind::Metrics {
        binary: b.snoop.clone(),
    };
    let full = TracerKind::Snoop {
        binary: b.snoop.clone(),
        args: vec!["--backend".into(), "bpf".into()],
    };
    // The floor of any per-op BPF counter: the trap and the kernel's entry
    // into a program on reply_stats, a probe firing once per op. Then the
    // floor of --metrics itself: the daemon's records and one trap per
    // batch, counting nothing. Line-buffered: each prints once, the attach
    // marker, which must reach the file.
    let empty_on = |probe: &str| {
        empty_program(probe).map(|script| TracerKind::Bpftrace {
            script,
            buffering: "line",
        })
    };
    let (per_op_floor, batch_floor) = (empty_on("reply_stats"), empty_on("stats_batch"));
    let cases = vec![
        Case::raw(Workload::Read, 1, Pin::Cpu0),
        Case::raw(Workload::Write, 1, Pin::Cpu0),
        Case::raw(Workload::Read, MAX_CONNS, Pin::Free),
        Case::raw(Workload::Write, MAX_CONNS, Pin::Free),
    ];
    let mut configs = CONFIGS.to_vec();
    if before.is_some() {
        configs.extend(BEFORE_CONFIGS);
    }
    let mut counts = Vec::new();
    let comparison = Comparison::run("metrics", &configs, cases, budget.rounds, |case, k| {
        if k >= CONFIGS.len() {
            let (Some(d), Some(x)) = (&shim_before, before) else {
                bail!("no --shim-before");
            };
            let d = d.as_ref().map_err(|e| anyhow::anyhow!("{e:#}"))?;
            let tracer = match k - CONFIGS.len() {
                0 => None,
                1 => metrics_before.as_ref(),
                _ => full_before.as_ref(),
            };
            let tracer = tracer.map(|t| (t, x.shim.as_path()));
            return run_case(d, case, budget.run, None, tracer, &mut counts);
        }
        let d = shim.as_ref().map_err(|e| anyhow::anyhow!("{e:#}"))?;
        let tracer = match k {
            0 => None,
            1 => Some((&metrics, b.shim.as_path())),
            2 => Some((&full, b.shim.as_path())),
            3 => Some((floor(&per_op_floor)?, b.shim.as_path())),
            _ => Some((floor(&batch_floor)?, b.shim.as_path())),
        };
        run_case(d, case, budget.run, None, tracer, &mut counts)
    });
    MetricsResult {
        comparison,
        killed: counts.iter().filter(|c| c.killed).count(),
        at_1000: exporter_at(b, DOMAINS),
        at_2000: exporter_at(b, 2 * DOMAINS),
    }
}

/// A floor's tracer, or why it could not be made.
fn floor(f: &Result<TracerKind>) -> Result<&TracerKind> {
    f.as_ref().map_err(|e| anyhow::anyhow!("{e:#}"))
}

/// bpftrace on `probe` testing one map a firing; it prints the attach
/// marker once, on its first firing, for Tracer::attach.
fn empty_program(probe: &str) -> Result<std::path::PathBuf> {
    let script = scratch_dir(&format!("metrics-floor-{probe}"))?.join("floor.bt");
    std::fs::write(
        &script,
        format!(
            "usdt:$1:xenstore:{probe} /@shown == 0/ {{ @shown = 1; printf(\"{}\\n\"); }}\n",
            crate::tracers::MARKER
        ),
    )?;
    Ok(script)
}

/// The exporter's RSS once its textfile shows `domains` live domains, each
/// of which made a request, counted (domain DOMAINS's series is there).
fn exporter_at(b: &Builds, domains: u32) -> Result<ExporterAt> {
    let dir = scratch_dir(&format!("metrics-{domains}"))?;
    let shim = Shim::launch(
        &format!("shim {domains} domains"),
        &b.shim,
        dir.clone(),
        &[],
    )?;
    let mut dom0 = Conn::connect(&shim.socket)?;
    for domid in 1..=domains {
        let id = format!("{domid}\0");
        dom0.call(MsgType::Introduce, 0, &[id.as_bytes(), b"4242\0", b"7\0"])?
            .ok()
            .with_context(|| format!("INTRODUCE {domid}"))?;
        let name = format!("/local/domain/{domid}/name\0");
        dom0.write(0, name.as_bytes(), format!("guest-{domid}").as_bytes())?
            .ok()?;
    }
    let textfile = dir.join("textfile");
    std::fs::create_dir_all(&textfile)?;
    let mut exporter = Command::new(&b.snoop)
        .arg("--daemon-pid")
        .arg(shim.pid().to_string())
        .args(["--metrics", "--interval", "0.5", "--metrics-textfile"])
        .arg(&textfile)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("start the exporter")?;
    let result = (|| {
        // Each domain asks once over its own socket, so each has counts.
        let want = format!("xenstore_domain_requests_total{{domid=\"{DOMAINS}\"}}");
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut asked = false;
        loop {
            if let Some(status) = exporter.try_wait()? {
                bail!("the exporter exited: {status}");
            }
            let text = std::fs::read_to_string(textfile.join("xenstore.prom")).unwrap_or_default();
            if !asked && text.contains("xenstore_domain_info") {
                ask_from_every_domain(&shim.run_dir, domains)?;
                asked = true;
            }
            if asked && text.contains(&want) {
                let series = text.lines().filter(|l| !l.starts_with('#')).count();
                return Ok(ExporterAt {
                    domains,
                    rss_kib: rss_kib(exporter.id())?,
                    series,
                    bytes: text.len(),
                });
            }
            if Instant::now() > deadline {
                bail!("the textfile never showed {want}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    })();
    let _ = exporter.kill();
    let _ = exporter.wait();
    result
}

fn ask_from_every_domain(run_dir: &Path, domains: u32) -> Result<()> {
    for domid in 1..=domains {
        let socket = run_dir.join("domain").join(domid.to_string());
        let mut c = Conn::connect(&socket).with_context(|| format!("{}", socket.display()))?;
        c.read(b"name\0")?;
    }
    Ok(())
}

/// Section 9: `--metrics` against unsnooped and full tracing.
pub fn render(m: &MetricsResult) -> Part {
    let mut g = Vec::new();
    let c = &m.comparison;
    let (measured, min) = ratios(c, 1, 0, |case| case.conns == 1, true);
    g.push((
        "--metrics ÷ unsnooped ops/s, 1 connection (pinned)".to_string(),
        "≥ 0.95",
        measured,
        min.map(|x| x >= 0.95),
    ));
    g.extend(report::goals(m));
    let mut s = String::new();
    let mut ratios = vec![("metrics ÷ shim", 1, 0), ("tracing ÷ shim", 2, 0)];
    if m.comparison.configs.len() > CONFIGS.len() {
        // --shim-before's build (configs 5, 6, 7) in the same run.
        ratios.extend([
            ("before: metrics ÷ shim", 6, 5),
            ("before: tracing ÷ shim", 7, 5),
            ("shim ÷ shim (before)", 0, 5),
        ]);
    }
    s += &table(&m.comparison, &ratios, &ratios);
    if m.killed > 0 {
        let _ = writeln!(
            s,
            "\n{} tracer stop(s) took longer than {} s after SIGINT: killed, their runs kept \
             (measured before the signal).",
            m.killed,
            crate::tracers::STOP_BOUND.as_secs()
        );
    }
    s += &report::exporter_memory(m);
    let mut p = part(
        include_str!("../../../report/9-metrics-mode.md"),
        s,
        g,
        report::limits(m),
    );
    p.failures = m.comparison.failures.clone();
    p
}
