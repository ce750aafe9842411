//! The benchmark sections, each an interleaved comparison or a sweep.

use crate::affinity::Pin;
use crate::builds::{Before, Builds, Nop1};
use crate::client::Conn;
use crate::compare::{Case, Client, Comparison};
use crate::daemons::Daemon;
use crate::daemons::{self, cpu_ns};
use crate::memory::{self, Rss};
use crate::probe_loop::ProbeLoop;
use crate::scale::{Scale, Size};
use crate::stats::Sample;
use crate::tracers::{Counts, Tracer, TracerKind, MARKER};
use crate::uprobe::{BareUprobes, Fetch};
use crate::workload::{self, Workload};
use crate::{libxs, load};
use anyhow::{anyhow, bail, ensure, Context, Result};
use std::path::{Path, PathBuf};
use std::time::Duration;
use xenstore_proto::Probe;
use xenstore_testkit::upstream::Flavor;

/// How long and how often.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    pub run: Duration,
    pub rounds: usize,
    /// Rounds for the idle-probe comparison, which looks for a 1% effect.
    pub idle_rounds: usize,
    pub memory_nodes: usize,
    pub quick: bool,
}

pub const MAX_CONNS: usize = 8;

/// A daemon that started (seeded for the workloads) or why it did not.
pub type Started = Result<Daemon>;

pub(crate) fn seeded(d: Result<Daemon>) -> Started {
    let d = d?;
    workload::seed(&d.socket, MAX_CONNS).with_context(|| format!("seed {}", d.label))?;
    Ok(d)
}

pub(crate) fn get(d: &Started) -> Result<&Daemon> {
    d.as_ref().map_err(|e| anyhow!("did not start: {e:#}"))
}

/// What the probe loop fires: request/response pairs.
pub(crate) const LOOP_PROBES: [Probe; 2] = [Probe::Request, Probe::Response];
/// The snooper on the probe loop attaches those, as on a daemon without
/// `reply`, so sections 4 and 5 count the same firings for every tracer.
pub const LOOP_SNOOP_ARGS: [&str; 1] = ["--paired"];

/// A tracer to attach around a run: its kind and the traced binary.
pub type TraceWith<'a> = Option<(&'a TracerKind, &'a Path)>;

/// One run of `case` against `daemon`, with `tracer` attached if any.
pub fn run_case(
    daemon: &Daemon,
    case: &Case,
    run: Duration,
    xs_load: Option<&Path>,
    tracer: TraceWith,
    counts: &mut Vec<Counts>,
) -> Result<Sample> {
    case.pin.apply_to_process(daemon.pid())?;
    let attached = match tracer {
        Some((kind, binary)) => {
            let mut marker = Conn::connect(&daemon.socket)?;
            Some(Tracer::attach(kind, daemon.pid(), binary, || {
                marker.read(MARKER.as_bytes()).map(|_| ())
            })?)
        }
        None => None,
    };
    let cpu_before = cpu_ns(daemon.pid())?;
    let sample = match case.client {
        Client::Raw => load::run(&daemon.socket, case.workload, case.conns, run, case.pin),
        Client::Libxenstore => {
            let exe = xs_load.context("libxenstore client not built")?;
            libxs::run(
                exe,
                &daemon.socket,
                case.workload == Workload::Write,
                run,
                case.pin,
            )
        }
    };
    let cpu_ns = cpu_ns(daemon.pid())? - cpu_before;
    if let Some(t) = attached {
        counts.push(t.detach()?);
    }
    Pin::Free.apply_to_process(daemon.pid())?;
    let mut sample = sample?;
    sample.daemon_cpu_us = cpu_ns as f64 / 1000.0 / sample.ops.max(1) as f64;
    Ok(sample)
}

/// Section 1: the shim against C xenstored and oxenstored, raw and
/// libxenstore clients; at smoke size every workload at 1 and 2
/// connections on the shim (and `--upstream`'s daemons). Every run must
/// complete ops and connection 0's transactions all commit (its counter
/// read back), or the section reports a failure.
pub fn throughput(s: &Scale, budget: &Budget, xs_load: Option<&Path>) -> Comparison {
    let smoke = s.size == Size::Smoke;
    let upstream = if smoke {
        s.upstream.clone()
    } else {
        vec![Flavor::C, Flavor::Ocaml]
    };
    let mut daemons = vec![("shim", seeded(daemons::shim("shim", &s.shims[0].1)))];
    for flavor in upstream {
        daemons.push(match flavor {
            Flavor::C => (
                "C xenstored",
                seeded(daemons::c_xenstored("C xenstored", None)),
            ),
            Flavor::Ocaml => ("oxenstored", seeded(daemons::oxenstored("oxenstored"))),
        });
    }
    let mut cases = Vec::new();
    if smoke {
        for w in Workload::ALL {
            cases.extend([1, 2].map(|conns| Case::raw(w, conns, Pin::Free)));
        }
    } else {
        let workloads: &[Workload] = if budget.quick {
            &[Workload::Read, Workload::Write]
        } else {
            &Workload::ALL
        };
        for &w in workloads {
            cases.push(Case::raw(w, 1, Pin::Cpu0));
            cases.push(Case::raw(w, 1, Pin::Free));
            cases.push(Case::raw(w, MAX_CONNS, Pin::Free));
        }
        for w in [Workload::Read, Workload::Write] {
            cases.push(Case {
                client: Client::Libxenstore,
                ..Case::raw(w, 1, Pin::Cpu0)
            });
        }
    }
    let labels: Vec<&str> = daemons.iter().map(|d| d.0).collect();
    let mut counts = Vec::new();
    let mut c = Comparison::run("throughput", &labels, cases, budget.rounds, |case, k| {
        run_case(
            get(&daemons[k].1)?,
            case,
            budget.run,
            xs_load,
            None,
            &mut counts,
        )
    });
    for (k, (label, d)) in daemons.iter().enumerate() {
        if let Err(e) = check_commits(&c, k, d) {
            c.failures.push(format!("{label}: {e:#}"));
        }
    }
    c
}

/// Config `k`'s runs each completed ops, and connection 0's counter holds
/// at least two commits a transaction run (its warm-up and one measured).
fn check_commits(c: &Comparison, k: usize, d: &Started) -> Result<()> {
    let Ok(d) = d else { return Ok(()) };
    let mut txn_runs = 0;
    for (ci, case) in c.cases.iter().enumerate() {
        if c.samples[ci][k].iter().any(|s| s.ops == 0) {
            bail!("{}: no operation completed", case.describe());
        }
        if case.workload == Workload::Txn {
            txn_runs += c.samples[ci][k].len() as u64;
        }
    }
    let mut conn = Conn::connect(&d.socket)?;
    let counter: u64 = std::str::from_utf8(conn.read(b"/bench/c0/counter")?.ok()?)?.parse()?;
    ensure!(
        counter >= 2 * txn_runs,
        "transactions did not commit: counter {counter} after {txn_runs} runs"
    );
    Ok(())
}

/// Section 2: The shim with its probes compiled in (idle) and compiled out.
pub fn idle_probes(b: &Builds, budget: &Budget) -> Comparison {
    let daemons = [
        seeded(daemons::shim("shim probes", &b.shim)),
        seeded(daemons::shim("shim no probes", &b.shim_noprobes)),
    ];
    let mut cases = Vec::new();
    for w in [Workload::Read, Workload::Write] {
        cases.push(Case::raw(w, 1, Pin::Cpu0));
        cases.push(Case::raw(w, MAX_CONNS, Pin::Free));
    }
    let mut counts = Vec::new();
    Comparison::run(
        "idle probes",
        &["probes compiled in, idle", "probes compiled out"],
        cases,
        budget.idle_rounds,
        |case, k| run_case(get(&daemons[k])?, case, budget.run, None, None, &mut counts),
    )
}

pub struct SnoopResult {
    pub comparison: Comparison,
    /// The snooper's own seen/lost reports (and CPU use) from its runs.
    pub snoop_counts: Vec<Counts>,
    /// bpftrace's CPU use from its runs.
    pub bpftrace_counts: Vec<Counts>,
    /// The snooper's reports on its tracefs back end.
    pub snoop_tracefs_counts: Vec<Counts>,
}

/// xenstore-snoop with `args` on its BPF back end and on its tracefs one,
/// each asked for by name (no silent fallback).
pub(crate) fn snoopers(snoop: &Path, args: &[&str]) -> (TracerKind, TracerKind) {
    let on = |backend: &str| TracerKind::Snoop {
        binary: snoop.to_path_buf(),
        args: args
            .iter()
            .copied()
            .chain(["--backend", backend])
            .map(String::from)
            .collect(),
    };
    (on("bpf"), on("tracefs"))
}

/// Section 3: The shim unsnooped, with bare uprobes (the kernel's floor),
/// under xenstore-snoop (BPF back end), under bpftrace; C xenstored without
/// and with its own -T trace file; last, xenstore-snoop on its tracefs back end.
pub fn snooping(
    b: &Builds,
    budget: &Budget,
    bpftrace_script: &Path,
    before: Option<&Before>,
) -> SnoopResult {
    let shim = seeded(daemons::shim("shim", &b.shim));
    // The build before a change, unsnooped and snooped (configs 7 and 8).
    let shim_before = before.map(|x| seeded(daemons::shim("shim (before)", &x.shim)));
    let snoop_before = before.map(|x| snoopers(&x.snoop, &[]).0);
    let c = seeded(daemons::c_xenstored("C xenstored", None));
    let c_trace = (|| {
        let trace = crate::daemons::scratch_dir("c-trace")?.join("trace");
        seeded(daemons::c_xenstored("C xenstored -T", Some(&trace)))
    })();
    let (snoop, snoop_tracefs) = snoopers(&b.snoop, &[]);
    let bpftrace = TracerKind::Bpftrace {
        script: bpftrace_script.to_path_buf(),
        // What a production capture to a file uses.
        buffering: "full",
    };
    let cases = vec![
        Case::raw(Workload::Read, 1, Pin::Cpu0),
        Case::raw(Workload::Write, 1, Pin::Cpu0),
        Case::raw(Workload::Read, MAX_CONNS, Pin::Free),
        Case::raw(Workload::Write, MAX_CONNS, Pin::Free),
    ];
    let mut snoop_counts = Vec::new();
    let mut bpftrace_counts = Vec::new();
    let mut snoop_tracefs_counts = Vec::new();
    let mut other_counts = Vec::new();
    let mut configs = vec![
        "shim",
        "shim + bare uprobes",
        "shim + xenstore-snoop (bpf)",
        "shim + bpftrace",
        "C xenstored",
        "C xenstored -T",
        "shim + xenstore-snoop (tracefs)",
    ];
    if before.is_some() {
        configs.extend(["shim (before)", "shim (before) + xenstore-snoop (bpf)"]);
    }
    let comparison = Comparison::run("snooping", &configs, cases, budget.rounds, |case, k| {
        let run = |d: &Started, t: TraceWith, counts: &mut Vec<Counts>| {
            run_case(get(d)?, case, budget.run, None, t, counts)
        };
        match k {
            0 => run(&shim, None, &mut other_counts),
            1 => {
                // What the snooper attaches per op.
                let _floor = BareUprobes::enable(&b.shim, &[Probe::Reply], Fetch::SnoopArgs)?;
                run(&shim, None, &mut other_counts)
            }
            2 => run(&shim, Some((&snoop, &b.shim)), &mut snoop_counts),
            3 => run(&shim, Some((&bpftrace, &b.shim)), &mut bpftrace_counts),
            4 => run(&c, None, &mut other_counts),
            5 => run(&c_trace, None, &mut other_counts),
            7 | 8 => {
                let (Some(d), Some(snoop), Some(x)) = (&shim_before, &snoop_before, before) else {
                    bail!("no --shim-before");
                };
                let tracer = (k == 8).then_some((snoop, x.shim.as_path()));
                run(d, tracer, &mut other_counts)
            }
            _ => run(
                &shim,
                Some((&snoop_tracefs, &b.shim)),
                &mut snoop_tracefs_counts,
            ),
        }
    });
    SnoopResult {
        comparison,
        snoop_counts,
        bpftrace_counts,
        snoop_tracefs_counts,
    }
}

/// Section 4: Per-firing cost on the probe loop: no tracer, a bare uprobe with
/// no reader, xenstore-snoop (BPF), bpftrace, a bare uprobe fetching
/// nothing (its event still written, empty), xenstore-snoop on tracefs, a
/// BPF program that only tests a map (the floor of any BPF tracer), and
/// xenstore-snoop (BPF) with -T, whose program then reads the clock.
/// Samples' ops_per_s are events/s.
pub fn per_firing(b: &Builds, budget: &Budget, bpftrace_script: &Path) -> Comparison {
    // The loop on CPU 0; a tracer's reader is left the other CPU(s).
    let mut lp = ProbeLoop::start(&b.probe_loop)
        .and_then(|lp| Pin::Cpu0.apply_to_process(lp.pid()).map(|_| lp));
    let (snoop, snoop_tracefs) = snoopers(&b.snoop, &LOOP_SNOOP_ARGS);
    let (snoop_timed, _) = snoopers(&b.snoop, &[&LOOP_SNOOP_ARGS[..], &["-T"]].concat());
    let bpftrace = TracerKind::Bpftrace {
        script: bpftrace_script.to_path_buf(),
        // What a production capture to a file uses.
        buffering: "full",
    };
    let empty_bpf = empty_bpf_script().map(|script| TracerKind::Bpftrace {
        script,
        // It prints one line, the marker: it must not wait in a buffer.
        buffering: "line",
    });
    let secs = budget.run.as_secs_f64() / 2.0;
    let case = Case::raw(Workload::Read, 1, Pin::Cpu0);
    Comparison::run(
        "per firing",
        &[
            "no tracer",
            "bare uprobe, no reader",
            "xenstore-snoop (bpf)",
            "bpftrace",
            "uprobe, no fetch args, no reader (an empty ftrace event)",
            "xenstore-snoop (tracefs)",
            "a BPF program that only tests a map (bpftrace)",
            "xenstore-snoop (bpf) with -T (a clock read a firing)",
        ],
        vec![case],
        // Half-second runs, many rounds: a firing costs ~1 µs, so noise from the
        // shared machine weighs more here than in the op-level sections.
        4 * budget.rounds,
        |_, k| {
            let lp = lp.as_mut().map_err(|e| anyhow!("{e:#}"))?;
            let fire = |lp: &mut ProbeLoop| lp.sample(secs);
            match k {
                0 => fire(lp),
                1 | 4 => {
                    let fetch = if k == 1 {
                        Fetch::SnoopArgs
                    } else {
                        Fetch::Nothing
                    };
                    let _probes = BareUprobes::enable(&lp.binary, &LOOP_PROBES, fetch)?;
                    fire(lp)
                }
                _ => {
                    let kind = match k {
                        2 => &snoop,
                        3 => &bpftrace,
                        5 => &snoop_tracefs,
                        6 => empty_bpf.as_ref().map_err(|e| anyhow!("{e:#}"))?,
                        _ => &snoop_timed,
                    };
                    let binary = lp.binary.clone();
                    let pid = lp.pid();
                    let t = Tracer::attach(kind, pid, &binary, || lp.mark())?;
                    let s = fire(lp);
                    t.detach()?;
                    s
                }
            }
        },
    )
}

pub struct LossStep {
    pub target_rate: f64,
    pub threads: usize,
    pub achieved_rate: f64,
    pub fired: u64,
    pub counts: Counts,
}

/// Section 5: The snooper against the probe loop at rising event rates.
pub fn loss_sweep(b: &Builds, budget: &Budget) -> Result<Vec<LossStep>> {
    let mut lp = ProbeLoop::start(&b.probe_loop)?;
    let snoop = TracerKind::Snoop {
        binary: b.snoop.clone(),
        args: LOOP_SNOOP_ARGS.map(String::from).to_vec(),
    };
    // (events/s, firing threads); 0 = as fast as the threads go.
    let rates: &[(f64, usize)] = if budget.quick {
        &[(500e3, 1), (0.0, 2)]
    } else {
        &[
            (250e3, 1),
            (500e3, 1),
            (1e6, 1),
            (0.0, 1),
            (1e6, 2),
            (0.0, 2),
        ]
    };
    let mut steps = Vec::new();
    for &(rate, threads) in rates {
        let binary = lp.binary.clone();
        let pid = lp.pid();
        let t = Tracer::attach(&snoop, pid, &binary, || lp.mark())?;
        let (fired, ns) = lp.run(budget.run.as_secs_f64(), rate, threads)?;
        let counts = t.detach()?;
        let achieved_rate = fired as f64 * 1e9 / ns as f64;
        eprintln!(
            "bench: loss target {rate:.0}/s achieved {achieved_rate:.0}/s fired {fired} {counts:?}"
        );
        steps.push(LossStep {
            target_rate: rate,
            threads,
            achieved_rate,
            fired,
            counts,
        });
    }
    Ok(steps)
}

/// Section 7's configurations: the daemon (nop5: the shim as built,
/// nop1: with 1-byte nop sites), unsnooped, under the tracefs snooper
/// (reply and watch_event), under the snooper with --paired (request,
/// response and watch_event).
pub const SITES: [&str; 6] = [
    "nop5",
    "nop5 + snoop",
    "nop5 + snoop --paired",
    "nop1",
    "nop1 + snoop",
    "nop1 + snoop --paired",
];

pub struct SitesResult {
    /// Ops on the shim: [`SITES`].
    pub per_op: SnoopResult,
    /// Firings of the probe loop: [`SITES_FIRING`].
    pub per_firing: Comparison,
}

/// Section 7: 5-byte against 1-byte nop probe sites, per op on the shim
/// and per firing on the probe loop.
pub fn sites(b: &Builds, nop1: &Nop1, budget: &Budget) -> SitesResult {
    SitesResult {
        per_op: sites_per_op(b, &nop1.shim, budget),
        per_firing: sites_per_firing(b, &nop1.probe_loop, budget),
    }
}

/// Section 7's per-firing configurations: each probe loop without a
/// tracer, with bare uprobes (the snooper's fetch args, no reader), with
/// no fetch args (an empty event written).
pub const SITES_FIRING: [&str; 6] = [
    "nop5, no tracer",
    "nop5, bare uprobe",
    "nop5, uprobe, no fetch args",
    "nop1, no tracer",
    "nop1, bare uprobe",
    "nop1, uprobe, no fetch args",
];

/// Per-firing cost of each site, as section 4 measures it, on the probe
/// loop built with each nop.
fn sites_per_firing(b: &Builds, nop1_loop: &Path, budget: &Budget) -> Comparison {
    let start = |binary: &Path| {
        ProbeLoop::start(binary).and_then(|lp| Pin::Cpu0.apply_to_process(lp.pid()).map(|_| lp))
    };
    let mut loops = [start(&b.probe_loop), start(nop1_loop)];
    let secs = budget.run.as_secs_f64() / 2.0;
    let case = Case::raw(Workload::Read, 1, Pin::Cpu0);
    Comparison::run(
        "nop per firing",
        &SITES_FIRING,
        vec![case],
        4 * budget.rounds,
        |_, k| {
            let lp = loops[k / 3].as_mut().map_err(|e| anyhow!("{e:#}"))?;
            let fetch = [None, Some(Fetch::SnoopArgs), Some(Fetch::Nothing)][k % 3];
            let _probes = fetch
                .map(|f| BareUprobes::enable(&lp.binary, &LOOP_PROBES, f))
                .transpose()?;
            lp.sample(secs)
        },
    )
}

/// Probe sites (5-byte against 1-byte nops) by what the tracefs snooper
/// attaches (reply alone against request + response), one pinned
/// connection. Samples as in section 3.
fn sites_per_op(b: &Builds, nop1: &Path, budget: &Budget) -> SnoopResult {
    let daemons = [
        seeded(daemons::shim("shim nop5", &b.shim)),
        seeded(daemons::shim("shim nop1", nop1)),
    ];
    let snoop = |args: &[&str]| TracerKind::Snoop {
        binary: b.snoop.clone(),
        args: args.iter().map(|a| a.to_string()).collect(),
    };
    // The tracefs back end, which these rows were first measured on.
    let tracers = [
        None,
        Some(snoop(&["--backend", "tracefs"])),
        Some(snoop(&["--paired", "--backend", "tracefs"])),
    ];
    let cases = vec![
        Case::raw(Workload::Read, 1, Pin::Cpu0),
        Case::raw(Workload::Write, 1, Pin::Cpu0),
    ];
    let mut snoop_counts = Vec::new();
    let comparison = Comparison::run("probe sites", &SITES, cases, budget.rounds, |case, k| {
        let (daemon, binary) = if k < 3 {
            (&daemons[0], b.shim.as_path())
        } else {
            (&daemons[1], nop1)
        };
        let tracer = tracers[k % 3].as_ref().map(|t| (t, binary));
        run_case(
            get(daemon)?,
            case,
            budget.run,
            None,
            tracer,
            &mut snoop_counts,
        )
    });
    SnoopResult {
        comparison,
        snoop_counts,
        bpftrace_counts: Vec::new(),
        snoop_tracefs_counts: Vec::new(),
    }
}

/// Section 6: RSS with `nodes` nodes in each daemon.
pub fn memory(b: &Builds, budget: &Budget) -> Vec<(String, Result<Rss>)> {
    let daemons = [
        daemons::shim("shim", &b.shim),
        daemons::c_xenstored("C xenstored", None),
        daemons::oxenstored("oxenstored"),
    ];
    let labels = ["shim", "C xenstored", "oxenstored"];
    daemons
        .into_iter()
        .zip(labels)
        .map(|(d, label)| {
            let rss = d.and_then(|d| memory::fill_and_measure(&d, budget.memory_nodes));
            if let Err(e) = &rss {
                eprintln!("bench: memory {label}: FAILED: {e:#}");
            }
            (label.to_string(), rss)
        })
        .collect()
}

/// The floor of any BPF tracer of the probe loop: on each firing a program
/// that tests one map (so that the first firing, the attach marker, can be
/// printed) and does nothing else.
fn empty_bpf_script() -> Result<PathBuf> {
    let script = crate::daemons::scratch_dir("empty-bpf")?.join("empty.bt");
    std::fs::write(
        &script,
        "usdt:$1:xenstore:request /@shown == 0/ { @shown = 1; printf(\"%s\\n\", str(arg4)); }\n\
         usdt:$1:xenstore:response /@shown == 0/ { }\n",
    )?;
    Ok(script)
}

/// The project's bpftrace snoop script, scripts/xenstore-snoop.bt.
pub fn bpftrace_script() -> Result<PathBuf> {
    let script = crate::builds::workspace_root().join("scripts/xenstore-snoop.bt");
    if !script.exists() {
        bail!("{} is missing", script.display());
    }
    Ok(script)
}
