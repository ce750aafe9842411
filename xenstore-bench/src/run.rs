//! The commands: `all` (every section, then the report), `load`, `smoke`.

use crate::affinity::Pin;
use crate::builds::Builds;
use crate::cli::{AllArgs, LoadArgs, Section};
use crate::client::Conn;
use crate::machine::{self, Machine};
use crate::plan::{self, Budget, MAX_CONNS};
use crate::report::{self, Results};
use crate::scale::{self, Plan};
use crate::scale_store::{self, Start};
use crate::workload::{self, Workload};
use crate::{
    builds, libxs, load, report_update, scale_broad, scale_death, scale_death_report,
    scale_death_store, scale_death_store_report, scale_report, scale_store_report, scale_storm,
    scale_storm_report,
};
use crate::{scale_bigdir, scale_bigdir_report};
use anyhow::{bail, Context, Result};
use clap::ValueEnum;
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
    let wanted = |s: Section| args.only.is_empty() || args.only.contains(&s);
    let machine = Machine::describe();
    let mut b = builds::build_all()?;
    if args.only == [Section::Scale] {
        return scale_only(args, &b, &budget);
    }
    if args.only == [Section::MassDestroy] {
        return mass_destroy_only(args, &b, &budget);
    }
    if args.only == [Section::ScaleStore] {
        return scale_store_only(args, &b, &budget);
    }
    if args.only == [Section::Storm] {
        return storm_only(args, &b);
    }
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
    let script = plan::bpftrace_script()?;
    let mut r = Results {
        machine,
        load_after: String::new(),
        budget,
        elapsed: Duration::ZERO,
        throughput: None,
        idle: None,
        snoop: None,
        firing: None,
        loss: None,
        memory: None,
        sites: None,
        metrics: None,
    };
    if wanted(Section::Throughput) {
        r.throughput = Some(plan::throughput(&b, &budget, xs_load.as_deref()));
    }
    if wanted(Section::Idle) {
        r.idle = Some(plan::idle_probes(&b, &budget));
    }
    if wanted(Section::Snoop) {
        r.snoop = Some(plan::snooping(&b, &budget, &script, before.as_ref()));
    }
    if wanted(Section::Firing) {
        r.firing = Some(plan::per_firing(&b, &budget, &script));
    }
    if wanted(Section::Loss) {
        r.loss = Some(plan::loss_sweep(&b, &budget));
    }
    if wanted(Section::Memory) {
        r.memory = Some(plan::memory(&b, &budget));
    }
    if wanted(Section::Sites) {
        let nop1 = builds::build_nop1()?;
        r.sites = Some(plan::sites(&b, &nop1, &budget));
    }
    if wanted(Section::Metrics) {
        r.metrics = Some(crate::metrics_mode::run(&b, &budget, before.as_ref()));
    }
    let scale = wanted(Section::Scale).then(|| scale_section(args, &b, &budget));
    let storm = wanted(Section::Storm).then(|| storm_section(args, &b));
    r.elapsed = started.elapsed();
    r.load_after = machine::load();
    let mut text = report::render(&r);
    if let Some(scale) = &scale {
        text = scale_report::splice(&text, scale);
    }
    if let Some(storm) = &storm {
        text = scale_storm_report::splice(&text, storm);
    }
    let old = std::fs::read_to_string(&args.out).unwrap_or_default();
    if args.update {
        text = report_update::update(&old, &text, &measured(args, &r.machine));
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

/// Every workload briefly at 1 and 2 connections; checks that transactions
/// really committed by reading the counter back.
pub fn smoke(shim: &std::path::Path) -> Result<()> {
    let d = crate::daemons::shim("smoke shim", shim)?;
    workload::seed(&d.socket, 2)?;
    let run = Duration::from_millis(200);
    for w in Workload::ALL {
        for conns in [1, 2] {
            let s = load::run(&d.socket, w, conns, run, Pin::Free)?;
            println!(
                "smoke: {} x{conns}: {} ops, {:.0} ops/s, p50 {:.1} µs",
                w.name(),
                s.ops,
                s.ops_per_s,
                s.p50_us
            );
            if s.ops == 0 {
                bail!("{} x{conns}: no operation completed", w.name());
            }
        }
    }
    let mut c = Conn::connect(&d.socket)?;
    let counter = c.read(b"/bench/c0/counter")?.ok()?.to_vec();
    let counter: u64 = String::from_utf8_lossy(&counter).parse()?;
    // Two txn runs used connection 0, plus one warm-up op each.
    println!("smoke: /bench/c0/counter = {counter}");
    if counter < 4 {
        bail!("transactions did not commit: counter {counter}");
    }
    Ok(())
}

fn scale_plan(args: &AllArgs, b: &Builds, budget: &Budget, domains: bool) -> Plan {
    let mut shims = vec![("shim".to_string(), b.shim.clone())];
    if let Some(before) = &args.shim_before {
        shims.push(("shim (before)".into(), before.clone()));
    }
    Plan {
        shims,
        floor: Some(b.bare_sender.clone()),
        upstream: true,
        levels: scale::LEVELS.to_vec(),
        run: budget.run / 2,
        rounds: budget.rounds,
        check_quiet: false,
        domains,
        time_sends: !domains,
        time_doorbells: domains,
    }
}

/// The scale section: sockets only, then with idle domains too, each with
/// every daemon.
fn scale_section(args: &AllArgs, b: &Builds, budget: &Budget) -> String {
    let sockets = scale::run(&scale_plan(args, b, budget, false));
    let domains = scale::run(&scale_plan(args, b, budget, true));
    scale_report::render(&sockets, &domains)
        + &store_scenarios(args, b, budget)
        + &mass_destroy(args, b, budget)
}

/// S4 and its big-store row on the workspace's shim (and `--shim-before`'s).
fn mass_destroy(args: &AllArgs, b: &Builds, budget: &Budget) -> String {
    let mut shims = vec![("shim".to_string(), b.shim.clone())];
    if let Some(before) = &args.shim_before {
        shims.push(("shim (before)".into(), before.clone()));
    }
    let mut subjects: Vec<(String, scale_death::Subject)> = shims
        .iter()
        .map(|(label, binary)| (label.clone(), scale_death::Subject::Shim(binary.clone())))
        .collect();
    subjects.push((
        "C xenstored".into(),
        scale_death::Subject::Upstream(Flavor::C),
    ));
    subjects.push((
        "oxenstored".into(),
        scale_death::Subject::Upstream(Flavor::Ocaml),
    ));
    let r = scale_death::run(&subjects, &scale_death::LEVELS, budget.rounds);
    let big = scale_death_store::run(&shims, &scale_death_store::LEVELS, budget.rounds);
    scale_death_report::render(&r) + &scale_death_store_report::render(&big)
}

/// `--only mass-destroy`: S4's part replaces its own in the report.
fn mass_destroy_only(args: &AllArgs, b: &Builds, budget: &Budget) -> Result<()> {
    let measured = measured(args, &Machine::describe());
    let part = mass_destroy(args, b, budget);
    splice_scale_parts(args, &measured, &[(scale_death_report::HEADING, part)])
}

/// `--only scale-store`: S2's broad watch and S3 replace their parts.
fn scale_store_only(args: &AllArgs, b: &Builds, budget: &Budget) -> Result<()> {
    let measured = measured(args, &Machine::describe());
    let (broad, store) = store_parts(args, b, budget);
    splice_scale_parts(
        args,
        &measured,
        &[
            (scale_broad::HEADING, broad),
            (scale_store_report::HEADING, store),
        ],
    )
}

/// Each (heading, part) replaces its part of the report's scale section,
/// saying when and where it was `measured`: the rest of the section may be
/// another run's, on another machine.
fn splice_scale_parts(args: &AllArgs, measured: &str, parts: &[(&str, String)]) -> Result<()> {
    let mut text = std::fs::read_to_string(&args.out).unwrap_or_default();
    for (heading, part) in parts {
        let part = report_update::stamped(part, measured);
        text = scale_report::splice_part(&text, heading, &part);
        println!("{part}");
    }
    std::fs::write(&args.out, &text).with_context(|| format!("write {}", args.out.display()))?;
    eprintln!(
        "bench: wrote the scale section's parts into {}",
        args.out.display()
    );
    Ok(())
}

/// S2's broad watch and S3, each with every daemon.
fn store_scenarios(args: &AllArgs, b: &Builds, budget: &Budget) -> String {
    let (broad, store) = store_parts(args, b, budget);
    broad + &store
}

/// S2's broad watch's part and S3's (the big store and directory).
fn store_parts(args: &AllArgs, b: &Builds, budget: &Budget) -> (String, String) {
    scale::raise_fd_limit();
    let store = store_plan(args, b, budget);
    let broad = scale_broad::run(&scale_broad::Plan {
        daemons: store.daemons.clone(),
        levels: scale_broad::LEVELS.to_vec(),
        run: store.run,
        runs: budget.rounds,
    });
    let big_store = scale_store::run(&store);
    (
        scale_broad::render(&broad),
        scale_store_report::render(&big_store) + &big_directory(&store, budget),
    )
}

/// S3's big directory, with S3's daemons.
fn big_directory(store: &scale_store::Plan, budget: &Budget) -> String {
    let r = scale_bigdir::run(&scale_bigdir::Plan {
        daemons: store.daemons.clone(),
        levels: if budget.quick {
            scale_bigdir::QUICK_LEVELS.to_vec()
        } else {
            scale_bigdir::LEVELS.to_vec()
        },
        run: store.run,
    });
    scale_bigdir_report::render(&r) + "\n"
}

/// S3: the shims, C xenstored and oxenstored, on sockets.
fn store_plan(args: &AllArgs, b: &Builds, budget: &Budget) -> scale_store::Plan {
    let mut daemons = vec![("shim".to_string(), Start::Shim(b.shim.clone()))];
    if let Some(before) = &args.shim_before {
        daemons.push(("shim (before)".into(), Start::Shim(before.clone())));
    }
    daemons.push(("C xenstored".into(), Start::CXenstored));
    daemons.push(("oxenstored".into(), Start::Oxenstored));
    scale_store::Plan {
        daemons,
        levels: if budget.quick {
            vec![10, 500, 2000]
        } else {
            scale_store::LEVELS.to_vec()
        },
        run: budget.run / 2,
        removals: if budget.quick { 5 } else { 20 },
    }
}

/// `--only scale`: its section replaces the one in the report (or is
/// added), the other sections stay as they were measured.
fn scale_only(args: &AllArgs, b: &Builds, budget: &Budget) -> Result<()> {
    write_scale_section(args, &scale_section(args, b, budget))
}

fn write_scale_section(args: &AllArgs, section: &str) -> Result<()> {
    let old = std::fs::read_to_string(&args.out).unwrap_or_default();
    let text = if args.update {
        report_update::update(&old, section, &measured(args, &Machine::describe()))
    } else {
        scale_report::splice(&old, section)
    };
    std::fs::write(&args.out, &text).with_context(|| format!("write {}", args.out.display()))?;
    println!("{section}");
    eprintln!("bench: wrote the scale section into {}", args.out.display());
    Ok(())
}

/// The sends the smoke run timed: one line each, or why there are none.
fn smoke_sends(r: &scale::ScaleResult) -> Result<()> {
    for (n, timed) in &r.sends {
        match timed {
            Ok(t) => println!(
                "scale smoke: sends timed at N={n}: {} replies, {} events to {} watchers",
                t.replies.count, t.events.count, t.watchers
            ),
            Err(e) => println!("scale smoke: sends not timed at N={n}: {e:#}"),
        }
    }
    for (n, timed) in &r.doorbells {
        match timed {
            Ok(t) => println!(
                "scale smoke: doorbells timed at N={n}: {} replies, {} doorbells to {} domains",
                t.replies.count, t.doorbells.count, t.domains
            ),
            Err(e) => println!("scale smoke: doorbells not timed at N={n}: {e:#}"),
        }
    }
    Ok(())
}

/// The scale scenarios on one shim at small N, briefly: they run, and
/// every fan-out write reaches its watcher and no other.
pub fn scale_smoke(shim: &std::path::Path, floor: &std::path::Path) -> Result<()> {
    let r = scale::run(&Plan {
        shims: vec![("shim".into(), shim.to_path_buf())],
        floor: Some(floor.to_path_buf()),
        upstream: false,
        levels: vec![0, 10, 40],
        run: Duration::from_millis(100),
        rounds: 1,
        check_quiet: true,
        domains: true,
        time_sends: true,
        time_doorbells: true,
    });
    for curve in &r.curves {
        let label = &curve.label;
        let points = curve
            .points
            .as_ref()
            .map_err(|e| anyhow::anyhow!("{label}: {e:#}"))?;
        let prefix = if curve.label == scale::FLOOR {
            "floor "
        } else {
            ""
        };
        for (n, p) in r.levels.iter().zip(points) {
            println!(
                "scale smoke: {prefix}N={n}: S5 {} requests, S2 {} writes each seen by its watcher",
                p.idle_tax.ops, p.fan_out.ops
            );
        }
        if let Some(why) = &curve.no_domains {
            bail!("the {label} served no ring domains: {why}");
        }
        for (n, p) in r.levels.iter().zip(points) {
            if p.idle_tax.ops == 0 || (*n > 0 && p.fan_out.ops == 0) {
                bail!("the {label} at N={n}: no operation completed");
            }
        }
    }
    smoke_sends(&r)?;
    // S4: every dying domain released and every watcher told (checked by
    // the run itself), one query a firing and no more firings than deaths.
    let shims = [("shim".to_string(), shim.to_path_buf())];
    let subjects = [(
        "shim".to_string(),
        scale_death::Subject::Shim(shim.to_path_buf()),
    )];
    let death = scale_death::run(&subjects, &[10, 40], 1);
    let points = death.curves[0]
        .points
        .as_ref()
        .map_err(|e| anyhow::anyhow!("S4: {e:#}"))?;
    for p in points {
        println!(
            "scale smoke: S4 N={}: {} dying released, every watcher told, {} queries, {} firings",
            p.domains, p.dying, p.queries, p.firings
        );
        if p.firings == 0 || p.firings > p.dying as u64 || p.queries != p.firings {
            bail!(
                "S4 N={}: {} queries for {} firings",
                p.domains,
                p.queries,
                p.firings
            );
        }
    }
    // S4 on the upstream daemons under the stub's simulated hypervisor:
    // their dying released and every watcher told too (checked by the run),
    // each having asked about every introduced domain at least once.
    for (flavor, label) in [(Flavor::C, "C xenstored"), (Flavor::Ocaml, "oxenstored")] {
        if !xenstore_testkit::upstream::available(flavor, "scale smoke's S4") {
            continue;
        }
        let subjects = [(label.to_string(), scale_death::Subject::Upstream(flavor))];
        let death = scale_death::run(&subjects, &[10], 1);
        let points = death.curves[0]
            .points
            .as_ref()
            .map_err(|e| anyhow::anyhow!("S4 on {label}: {e:#}"))?;
        for p in points {
            println!(
                "scale smoke: S4 {label} N={}: {} dying released, every watcher told, \
                 {} queries, {} firings",
                p.domains, p.dying, p.queries, p.firings
            );
            if p.firings == 0 || p.queries < p.domains as u64 {
                bail!(
                    "S4 on {label} N={}: {} queries for {} firings",
                    p.domains,
                    p.queries,
                    p.firings
                );
            }
        }
    }
    // S4 in a big store: the dying released, their homes gone (checked by
    // the run itself).
    let big = scale_death_store::run(&shims, &[5], 1);
    let points = big.curves[0]
        .points
        .as_ref()
        .map_err(|e| anyhow::anyhow!("S4 big store: {e:#}"))?;
    for p in points {
        println!(
            "scale smoke: S4 big store, {} nodes: {} dying released",
            p.nodes,
            scale_death_store::DYING
        );
    }
    store_smoke(shim)
}

/// S3 on one shim at a few domains: the walk sees every node, DIRECTORY_PART
/// lists every domain, each `rm` sends its watcher its 15 events.
fn store_smoke(shim: &std::path::Path) -> Result<()> {
    let r = scale_store::run(&scale_store::Plan {
        daemons: vec![("shim".into(), Start::Shim(shim.to_path_buf()))],
        levels: vec![2, 12],
        run: Duration::from_millis(100),
        removals: 3,
    });
    let curve = &r.curves[0];
    if let Some(why) = &curve.failed {
        bail!("S3: {why}");
    }
    big_directory_smoke(shim)?;
    let broad = scale_broad::run(&scale_broad::Plan {
        daemons: vec![("shim".into(), Start::Shim(shim.to_path_buf()))],
        levels: vec![2, 12],
        run: Duration::from_millis(100),
        runs: 1,
    });
    if let Some(why) = &broad.curves[0].failed {
        bail!("S2 broad watch: {why}");
    }
    for (n, s) in &broad.curves[0].points {
        println!(
            "scale smoke: S2 broad watch at N={n}: {} writes each seen by the watcher",
            s.ops
        );
        if s.ops == 0 {
            bail!("S2 broad watch at N={n}: no write completed");
        }
    }
    for p in &curve.points {
        let walked = *p
            .walk
            .as_ref()
            .map(|w| &w.1)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        println!(
            "scale smoke: S3 at {} domains: walked {} nodes, {} rm events each \
             ({:.0} µs daemon CPU an rm), {} create/remove requests ({:.1} µs each)",
            p.domains,
            walked,
            p.rm_events,
            p.rm_subtree.daemon_cpu_us,
            p.create_remove.ops,
            p.create_remove.daemon_cpu_us
        );
        // the initial 3, the shared directories and the victim's home
        let want = 3 + 8 + p.nodes + scale_store::SUBTREE_NODES;
        if walked != want {
            bail!(
                "S3 at {} domains: walked {walked} nodes, not {want}",
                p.domains
            );
        }
        if p.rm_events != 15 {
            bail!("S3: an rm sent its watcher {} events, not 15", p.rm_events);
        }
        if p.create_remove.ops == 0 || p.directory_part.is_err() || p.directory.is_err() {
            bail!("S3 at {} domains: an operation failed: {p:?}", p.domains);
        }
    }
    Ok(())
}

/// S3's big directory on one shim, past the size where it keeps the list
/// beside the node: every request answered, every page listed.
fn big_directory_smoke(shim: &std::path::Path) -> Result<()> {
    let r = scale_bigdir::run(&scale_bigdir::Plan {
        daemons: vec![("shim".into(), Start::Shim(shim.to_path_buf()))],
        levels: vec![10, 2500],
        run: Duration::from_millis(100),
    });
    let curve = &r.curves[0];
    if let Some(why) = &curve.failed {
        bail!("S3 big directory: {why}");
    }
    for p in &curve.points {
        println!(
            "scale smoke: S3 big directory of {} children ({} bytes, {} pages): \
             {} create/remove, {} oldest rm/write requests",
            p.children, p.listing_bytes, p.pages, p.create_remove.ops, p.oldest.ops
        );
        if p.create_remove.ops == 0 || p.oldest.ops == 0 || p.page.is_err() || p.page_in_tx.is_err()
        {
            bail!("S3 big directory at {} children: {p:?}", p.children);
        }
    }
    Ok(())
}

/// S1 boot storm: every daemon (the shim, `--shim-before`'s, C xenstored,
/// oxenstored); quick: up to 100 idle domains.
fn storm_section(args: &AllArgs, b: &Builds) -> String {
    let mut shims = vec![("shim".to_string(), b.shim.clone())];
    if let Some(before) = &args.shim_before {
        shims.push(("shim (before)".into(), before.clone()));
    }
    let idle = if let Some(levels) = &args.storm_idle {
        levels.clone()
    } else if args.quick {
        scale_storm::QUICK_IDLE.to_vec()
    } else {
        scale_storm::IDLE.to_vec()
    };
    let r = scale_storm::run(&scale_storm::Plan {
        shims,
        upstream: storm_upstream(args),
        idle,
        parallel: scale_storm::PARALLEL.to_vec(),
    });
    scale_storm_report::render(&r)
}

/// The upstream daemons S1 runs: `--storm-upstream`'s, none with
/// `--storm-shims-only`, else both.
fn storm_upstream(args: &AllArgs) -> Vec<Flavor> {
    use crate::cli::StormUpstream;
    if args.storm_shims_only {
        return Vec::new();
    }
    if args.storm_upstream.is_empty() {
        return vec![Flavor::C, Flavor::Ocaml];
    }
    let flavor = |d: &StormUpstream| match d {
        StormUpstream::C => Flavor::C,
        StormUpstream::Oxenstored => Flavor::Ocaml,
    };
    args.storm_upstream.iter().map(flavor).collect()
}

/// `--only storm`: its section replaces the one in the report (or is
/// added), the other sections stay as they were measured.
fn storm_only(args: &AllArgs, b: &Builds) -> Result<()> {
    let machine = Machine::describe();
    let section = storm_section(args, b);
    let old = std::fs::read_to_string(&args.out).unwrap_or_default();
    // --update says when it was measured, as every other section does
    let text = if args.update {
        report_update::update(&old, &section, &measured(args, &machine))
    } else {
        scale_storm_report::splice(&old, &section)
    };
    std::fs::write(&args.out, &text).with_context(|| format!("write {}", args.out.display()))?;
    println!("{section}");
    eprintln!("bench: wrote the S1 section into {}", args.out.display());
    Ok(())
}

/// S1 on one shim: `idle` idle domains on rings, `parallel` lifecycles
/// at once; every lifecycle ran to its end and the reader was answered.
pub fn storm_smoke(shim: &std::path::Path, idle: usize, parallel: usize) -> Result<()> {
    let r = scale_storm::run(&scale_storm::Plan {
        shims: vec![("shim".into(), shim.to_path_buf())],
        upstream: Vec::new(),
        idle: vec![idle],
        parallel: vec![parallel],
    });
    for (k, p, s) in r.curves[0].whole()? {
        println!(
            "storm smoke: K={k} P={p}: {} lifecycles, {} commits, {} EAGAIN, {} reads \
             (p99 {:.2} ms), wall {:.2} s",
            s.lifecycles,
            s.tally.committed,
            s.tally.eagain,
            s.reads,
            s.read_p99.as_secs_f64() * 1e3,
            s.wall.as_secs_f64()
        );
        // every storm checked its commits itself (scale_storm::same_work)
        if s.reads == 0 {
            bail!("K={k} P={p}: no read answered");
        }
    }
    Ok(())
}
