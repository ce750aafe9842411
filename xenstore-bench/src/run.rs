//! The commands: `all` (the wanted sections in the table's order, then
//! the report), `load`, `smoke`.

use crate::affinity::Pin;
use crate::builds;
use crate::cli::{AllArgs, LoadArgs, Section, StormUpstream};
use crate::machine::{self, Machine};
use crate::plain::{Budget, MAX_CONNS};
use crate::report::{self, Head};
use crate::scale::{Scale, Size};
use crate::sections::{self, Bench};
use crate::workload;
use crate::{libxs, load, report_update};
use anyhow::{bail, Context, Result};
use clap::ValueEnum;
use std::path::Path;
use std::time::{Duration, Instant};
use xenstore_testkit::upstream::Flavor;

pub fn all(args: &AllArgs) -> Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("run as root: the snooping sections use tracefs and uprobes");
    }
    let started = Instant::now();
    let quick = args.quick;
    let budget = Budget {
        run: Duration::from_secs_f64(args.seconds.unwrap_or(if quick { 0.25 } else { 1.0 })),
        rounds: args.rounds.unwrap_or(if quick { 1 } else { 3 }),
        // The idle-probe cost is a few ns on a ~5 µs op: only many rounds
        // bring the noise of this shared machine (±3% at 8) below 1%.
        idle_rounds: args.rounds.unwrap_or(if quick { 1 } else { 16 }),
        memory_nodes: if quick { 20_000 } else { 100_000 },
        quick,
    };
    let wanted = |s: &Section| args.only.is_empty() || args.only.contains(s);
    let machine = Machine::describe();
    let mut b = builds::build_all()?;
    for (over, built) in [
        (&args.shim, &mut b.shim),
        (&args.shim_noprobes, &mut b.shim_noprobes),
        (&args.snoop, &mut b.snoop),
    ] {
        if let Some(path) = over {
            *built = path.clone();
        }
    }
    let before = args.shim_before.clone().map(|shim| builds::Before {
        shim,
        snoop: args.snoop_before.clone().unwrap_or_else(|| b.snoop.clone()),
    });
    let xs_load = libxs::build(&b.work)
        .map_err(|e| eprintln!("bench: libxenstore client: {e:#}"))
        .ok();
    let scale = Scale {
        shims: [("shim".to_string(), b.shim.clone())]
            .into_iter()
            .chain(
                args.shim_before
                    .clone()
                    .map(|p| ("shim (before)".into(), p)),
            )
            .collect(),
        floor: b.bare_sender.clone(),
        upstream: storm_upstream(args),
        size: if quick { Size::Quick } else { Size::Full },
        run: budget.run,
        rounds: budget.rounds,
        storm_idle: args.storm_idle.clone(),
    };
    let bench = Bench {
        scale,
        budget,
        snoop: Some(b.snoop.clone()),
        probe_loop: Some(b.probe_loop.clone()),
        builds: Some(b),
        before,
        xs_load,
    };
    let mut parts = Vec::new();
    for &section in sections::ALL.iter().filter(|s| wanted(s)) {
        let part = sections::part(section, &bench)?;
        for f in &part.failures {
            eprintln!("bench: {f}");
        }
        parts.push(part);
    }
    let head = Head {
        machine,
        load_after: machine::load(),
        budget,
        elapsed: started.elapsed(),
    };
    let mut text = report::render(&head, &parts);
    let old = std::fs::read_to_string(&args.out).unwrap_or_default();
    if args.update {
        text = report_update::update(&old, &text, &measured(args, &head.machine));
    } else {
        // The dom0 kernels' section comes from VMs (`xenstore-bench kernel`): kept.
        text += crate::kernel::section_of(&old);
    }
    std::fs::write(&args.out, &text).with_context(|| format!("write {}", args.out.display()))?;
    println!("{text}");
    eprintln!("bench: wrote {}", args.out.display());
    Ok(())
}

/// When, on what and how an `--update`d section was measured, for its
/// header: sections of one report may come from different machines.
fn measured(args: &AllArgs, machine: &Machine) -> String {
    let only: Vec<String> = args
        .only
        .iter()
        .filter_map(|s| Some(s.to_possible_value()?.get_name().to_string()))
        .collect();
    format!(
        "{} on {} CPUs ({}), kernel {} (`all{}{}`)",
        machine.date,
        machine.cpus,
        machine.cpu_model,
        machine.kernel,
        if only.is_empty() {
            String::new()
        } else {
            format!(" --only {}", only.join(","))
        },
        if args.quick { " --quick" } else { "" }
    )
}

pub fn load(args: &LoadArgs) -> Result<()> {
    if args.seed {
        workload::seed(&args.socket, args.conns.max(MAX_CONNS))?;
    }
    let pin = if args.pinned { Pin::Cpu0 } else { Pin::Free };
    let s = load::run(
        &args.socket,
        args.workload,
        args.conns,
        Duration::from_secs_f64(args.seconds),
        pin,
    )?;
    println!(
        "{:?} conns {}: {:.0} ops/s p50 {:.1} µs p99 {:.1} µs ({} ops)",
        args.workload, args.conns, s.ops_per_s, s.p50_us, s.p99_us, s.ops
    );
    Ok(())
}

/// `sections` at smoke size on `shim` (and the floor), each printed as it
/// would be reported; fails on any failure one reports.
pub fn smoke(
    shim: &Path,
    floor: &Path,
    snoop: Option<&Path>,
    probe_loop: Option<&Path>,
    sections: &[Section],
    upstream: &[StormUpstream],
) -> Result<()> {
    let available = |f: &Flavor| xenstore_testkit::upstream::available(*f, "the smoke run");
    let run = Duration::from_millis(100);
    let bench = Bench {
        scale: Scale {
            shims: vec![("shim".into(), shim.to_path_buf())],
            floor: floor.to_path_buf(),
            upstream: upstream.iter().map(flavor).filter(available).collect(),
            size: Size::Smoke,
            run,
            rounds: 1,
            storm_idle: None,
        },
        budget: Budget {
            run,
            rounds: 1,
            idle_rounds: 1,
            memory_nodes: 2000,
            quick: true,
        },
        builds: None,
        snoop: snoop.map(Path::to_path_buf),
        probe_loop: probe_loop.map(Path::to_path_buf),
        before: None,
        xs_load: None,
    };
    for &section in sections {
        let part = sections::part(section, &bench)?;
        println!("{}", part.text);
        if !part.failures.is_empty() {
            bail!("{section:?}:\n{}", part.failures.join("\n"));
        }
    }
    Ok(())
}

/// The upstream daemons the scale sections run: `--storm-upstream`'s, none with
/// `--storm-shims-only`, else both.
fn storm_upstream(args: &AllArgs) -> Vec<Flavor> {
    if args.storm_shims_only {
        return Vec::new();
    }
    if args.storm_upstream.is_empty() {
        return vec![Flavor::C, Flavor::Ocaml];
    }
    args.storm_upstream.iter().map(flavor).collect()
}

fn flavor(d: &StormUpstream) -> Flavor {
    match d {
        StormUpstream::C => Flavor::C,
        StormUpstream::Oxenstored => Flavor::Ocaml,
    }
}
