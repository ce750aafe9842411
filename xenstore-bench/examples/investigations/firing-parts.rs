//! Where a probe firing's cost goes: the probe loop pinned to CPU 0 under
//! interleaved configurations that add one piece of a tracer at a time;
//! prints a markdown table of ns per event, ÷ the bare uprobe, and the
//! reader's own CPU per event. Needs root, tracefs and the bench's release
//! builds (run `xenstore-bench all --only firing` once first).
//!
//!   cargo run --release --target-dir target/bench/probes -p xenstore-bench \
//!     --example firing-parts -- ROUNDS SECONDS CONFIG...
//!
//! CONFIG:
//!   none          no tracer
//!   bare          the bench's floor: uprobes into a private ftrace instance, no reader
//!   snoop-defs    xenstore-snoop's own uprobe definitions, same instance, no reader
//!   perf-noread   those events into per-CPU perf rings big enough (256 MiB)
//!                 to hold the run: the kernel's perf path alone, no reader
//!   perf-drain    the same with a reader thread that only frees ring space
//!   ftrace-read   snoop-defs into an instance (16 MiB/CPU, trace_clock mono) with
//!                 a reader thread walking every event of per_cpu/cpuN/trace_pipe_raw
//!   ftrace-read-pid  the same, with the instance keeping only the loop's
//!                 threads (set_event_pid, options/event-fork): ftrace records
//!                 carry a thread id, not a process, so a reader needs this
//!   perf-task     the snooper's events into perf rings opened for the loop's
//!                 process only (pid, each CPU, inherit) and sampling TIME|RAW,
//!                 no TID: the kernel filters by process; a reader frees space
//!   perf-notid    perf-drain with TIME|RAW samples, still every process
//!   snoop=PATH    that xenstore-snoop binary, full capture to a file
//!
//! `firing-parts ops ROUNDS SECONDS CONFIG...` measures the same pieces at
//! the op level instead: the shim under a pinned 1-connection read load
//! (see `ops` below), where the daemon context-switches with its client.
use anyhow::{bail, Context, Result};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use xenstore_bench::affinity::Pin;
use xenstore_bench::plan::LOOP_SNOOP_ARGS;
use xenstore_bench::probe_loop::ProbeLoop;
use xenstore_bench::stats::median;
use xenstore_bench::tracers::{Tracer, TracerKind};
use xenstore_bench::uprobe::{BareUprobes, Fetch};
use xenstore_proto::Probe;
use xenstore_snoop::capture::tracefs::format::Format;
use xenstore_snoop::capture::tracefs::perf::Rings;
use xenstore_snoop::capture::tracefs::uprobe::Group;

const INSTANCES: &str = "/sys/kernel/tracing/instances";

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("ops") {
        return ops(&args[1..]);
    }
    let [rounds, secs, configs @ ..] = args.as_slice() else {
        bail!("usage: firing-parts ROUNDS SECONDS CONFIG...");
    };
    let (rounds, secs): (usize, f64) = (rounds.parse()?, secs.parse()?);
    let loop_bin = xenstore_bench::builds::workspace_root()
        .join("target/bench/probes/release/xsbench-probe-loop");
    let mut lp = ProbeLoop::start(&loop_bin)?;
    Pin::Cpu0.apply_to_process(lp.pid())?;
    // results[config][round] = (ns per event, reader CPU ns per event)
    let mut results = vec![Vec::new(); configs.len()];
    for round in 0..rounds {
        for (i, c) in configs.iter().enumerate() {
            let (ns, reader) = one(&mut lp, c, secs).with_context(|| format!("config {c}"))?;
            eprintln!("round {round} {c}: {ns:.0} ns/event, reader {reader:.0} ns/event");
            results[i].push((ns, reader));
        }
    }
    let column = |i: usize, f: fn(&(f64, f64)) -> f64| median(results[i].iter().map(f).collect());
    let find = |name: &str| configs.iter().position(|c| c == name);
    let none = find("none").map_or(0.0, |i| column(i, |r| r.0));
    println!("| config | ns/event | cost/firing (ns) | ÷ bare | reader CPU ns/event |");
    println!("|---|---|---|---|---|");
    for (i, c) in configs.iter().enumerate() {
        let ns = column(i, |r| r.0);
        // The median of the per-round ratios, as the bench reports them.
        let ratio = find("bare").map_or("-".to_string(), |b| {
            let per_round = (0..rounds)
                .map(|r| (results[i][r].0 - none) / (results[b][r].0 - none))
                .collect();
            format!("{:.3}", median(per_round))
        });
        let reader = column(i, |r| r.1);
        println!(
            "| {c} | {ns:.0} | {:.0} | {ratio} | {reader:.0} |",
            ns - none
        );
    }
    Ok(())
}

/// One measured run: (ns per event, reader CPU ns per event).
fn one(lp: &mut ProbeLoop, config: &str, secs: f64) -> Result<(f64, f64)> {
    let fire = |lp: &mut ProbeLoop| -> Result<(u64, f64)> {
        let (events, ns) = lp.run(secs, 0.0, 1)?;
        Ok((events, ns as f64 / events as f64))
    };
    match config {
        "none" => Ok((fire(lp)?.1, 0.0)),
        "bare" => {
            let probes = [Probe::Request, Probe::Response];
            let _floor = BareUprobes::enable(&lp.binary, &probes, Fetch::SnoopArgs)?;
            Ok((fire(lp)?.1, 0.0))
        }
        "snoop-defs" => {
            let group = SnoopGroup::define(&lp.binary)?;
            let _inst = Instance::enable(&group.group.name, None, None)?;
            Ok((fire(lp)?.1, 0.0))
        }
        "perf-noread" => {
            let group = SnoopGroup::define(&lp.binary)?;
            let mut rings = Rings::open(&group.ids, 256 << 20, None)?;
            rings.enable()?;
            let ns = fire(lp)?.1;
            let mut held = 0u64;
            rings.drain(|_| held += 1);
            eprintln!("  perf-noread: {held} samples held, {} lost", rings.lost());
            Ok((ns, 0.0))
        }
        "perf-drain" => {
            let group = SnoopGroup::define(&lp.binary)?;
            let mut rings = Rings::open(&group.ids, 16 << 20, None)?;
            rings.enable()?;
            with_reader(lp, fire, |stop| {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    rings.wait(100)?;
                    rings.drain(|_| n += 1);
                }
                rings.drain(|_| n += 1);
                Ok((n, rings.lost()))
            })
        }
        "ftrace-read" | "ftrace-read-pid" => {
            let group = SnoopGroup::define(&lp.binary)?;
            let pid = (config == "ftrace-read-pid").then(|| lp.pid());
            let inst = Instance::enable(&group.group.name, Some(16 << 10), pid)?;
            with_reader(lp, fire, |stop| read_pipes(&inst.dir, &group.ids, stop))
        }
        "perf-task" | "perf-notid" => {
            let group = SnoopGroup::define(&lp.binary)?;
            let pid = (config == "perf-task").then(|| lp.pid());
            let mut rings = raw_perf::Rings::open(&group.ids, pid, false, 16 << 20)?;
            with_reader(lp, fire, |stop| {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                    n += rings.drain();
                }
                n += rings.drain();
                Ok((n, 0))
            })
        }
        c if c.starts_with("snoop=") => {
            let kind = TracerKind::Snoop {
                binary: c["snoop=".len()..].into(),
                args: LOOP_SNOOP_ARGS.map(String::from).to_vec(),
            };
            let binary = lp.binary.clone();
            let pid = lp.pid();
            let tracer = Tracer::attach(&kind, pid, &binary, || lp.mark())?;
            let snoop = child_named("xenstore-snoop").context("the snooper's pid")?;
            let cpu_before = xenstore_bench::daemons::cpu_ns(snoop)?;
            let (events, ns) = fire(lp)?;
            let cpu = xenstore_bench::daemons::cpu_ns(snoop)? - cpu_before;
            let counts = tracer.detach()?;
            if counts.lost != Some(0) {
                eprintln!("  {c}: lost {:?}", counts.lost);
            }
            Ok((ns, cpu as f64 / events as f64))
        }
        _ => bail!("unknown config {config}"),
    }
}

/// Fires while `reader` runs on another thread (unpinned, as the snooper);
/// the reader returns (events read, events lost) once `stop` is set.
fn with_reader(
    lp: &mut ProbeLoop,
    fire: impl Fn(&mut ProbeLoop) -> Result<(u64, f64)>,
    reader: impl FnOnce(&AtomicBool) -> Result<(u64, u64)> + Send,
) -> Result<(f64, f64)> {
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let r = s.spawn(|| -> Result<(u64, u64, u64)> {
            let start = thread_cpu_ns();
            let (read, lost) = reader(&stop)?;
            Ok((read, lost, thread_cpu_ns() - start))
        });
        let fired = fire(lp);
        stop.store(true, Ordering::Relaxed);
        let (read, lost, cpu) = r.join().expect("reader panicked")?;
        let (events, ns) = fired?;
        eprintln!("  read {read} of {events} fired, {lost} lost");
        Ok((ns, cpu as f64 / events as f64))
    })
}

fn thread_cpu_ns() -> u64 {
    xenstore_snoop::output::clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// xenstore-snoop's uprobe definitions for the request and response sites,
/// in a group of our own (deleted on drop), and their event ids.
struct SnoopGroup {
    group: Group,
    ids: Vec<u16>,
}

impl SnoopGroup {
    fn define(binary: &Path) -> Result<SnoopGroup> {
        let mut group = Group::new(
            xenstore_snoop::capture::tracefs::uprobe::tracefs(None)?,
            false,
        );
        group.name = format!("xsparts_{}", std::process::id());
        let mut ids = Vec::new();
        let mut seen: HashMap<String, u32> = HashMap::new();
        for p in xenstore_bench::uprobe::sites(binary)? {
            if ![Probe::Request, Probe::Response]
                .map(Probe::name)
                .contains(&p.name.as_str())
            {
                continue;
            }
            let n = seen.entry(p.name.clone()).or_default();
            let mut site = p.clone();
            site.name = format!("{}_{n}", p.name);
            *n += 1;
            group.add(binary, &site)?;
            let text = std::fs::read_to_string(group.event_dir(&site.name).join("format"))?;
            ids.push(Format::parse(&text)?.id);
        }
        Ok(SnoopGroup { group, ids })
    }
}

/// A private ftrace instance with one group's events enabled, removed on drop.
struct Instance {
    dir: PathBuf,
    group: String,
}

impl Instance {
    fn enable(group: &str, buffer_kb: Option<usize>, pid: Option<u32>) -> Result<Instance> {
        let dir = Path::new(INSTANCES).join(group);
        std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
        let inst = Instance {
            dir,
            group: group.to_string(),
        };
        if let Some(kb) = buffer_kb {
            write(&inst.dir.join("buffer_size_kb"), &kb.to_string())?;
            // What the snooper would need: perf's CLOCK_MONOTONIC stamps.
            write(&inst.dir.join("trace_clock"), "mono")?;
        }
        if let Some(pid) = pid {
            // The threads the process has now and those they start later.
            write(&inst.dir.join("options/event-fork"), "1")?;
            let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))?;
            for task in tasks {
                let tid = task?.file_name().to_string_lossy().into_owned();
                let path = inst.dir.join("set_event_pid");
                use std::io::Write;
                std::fs::OpenOptions::new()
                    .append(true)
                    .open(&path)?
                    .write_all(format!("{tid}\n").as_bytes())
                    .with_context(|| format!("add {tid} to {}", path.display()))?;
            }
        }
        write(&inst.dir.join(format!("events/{group}/enable")), "1")?;
        Ok(inst)
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = write(&self.dir.join(format!("events/{}/enable", self.group)), "0");
        let _ = std::fs::remove_dir(&self.dir);
    }
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("write {text:?} to {}", path.display()))
}

/// The pid of our child process called `comm`.
fn child_named(comm: &str) -> Option<u32> {
    let me = std::process::id();
    std::fs::read_dir("/proc").ok()?.find_map(|e| {
        let pid: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let (name, rest) = stat.split_once(" (")?.1.rsplit_once(") ")?;
        let ppid: u32 = rest.split_whitespace().nth(1)?.parse().ok()?;
        (ppid == me && name == comm).then_some(pid)
    })
}

/// Reads every CPU's trace_pipe_raw (one ring-buffer page a read), every
/// 10 ms, until `stop`, then once more: (events of `ids`, pages that say
/// events were lost before them).
fn read_pipes(inst: &Path, ids: &[u16], stop: &AtomicBool) -> Result<(u64, u64)> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut pipes = Vec::new();
    for cpu in xenstore_snoop::capture::tracefs::perf::online_cpus()? {
        let path = inst.join(format!("per_cpu/cpu{cpu}/trace_pipe_raw"));
        pipes.push(
            std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&path)
                .with_context(|| format!("open {}", path.display()))?,
        );
    }
    let mut page = vec![0u8; 4096];
    let (mut events, mut lost) = (0, 0);
    let mut last = false;
    loop {
        for pipe in &mut pipes {
            loop {
                match pipe.read(&mut page) {
                    Ok(0) => break,
                    Ok(len) => {
                        let (n, missed) = walk_page(&page[..len], ids);
                        events += n;
                        lost += missed as u64;
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) => return Err(e).context("read trace_pipe_raw"),
                }
            }
        }
        if last {
            return Ok((events, lost));
        }
        last = stop.load(Ordering::Relaxed);
        if !last {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}

/// Counts the events of `ids` in one ring-buffer page (events/header_page:
/// u64 timestamp, u64 commit whose bits 30-31 flag missed events, data;
/// events/header_event: u32 type_len:5 time_delta:27, then array[]), and
/// says whether events were missed before it.
fn walk_page(page: &[u8], ids: &[u16]) -> (u64, bool) {
    let Some(commit) = page.get(8..16) else {
        return (0, false);
    };
    let commit = u64::from_ne_bytes(commit.try_into().unwrap());
    let size = (commit & ((1 << 30) - 1)) as usize;
    let data = &page[16..(16 + size).min(page.len())];
    let word = |at: usize| {
        data.get(at..at + 4)
            .map(|b| u32::from_ne_bytes(b.try_into().unwrap()) as usize)
    };
    let (mut at, mut n) = (0, 0);
    while let Some(header) = word(at) {
        let (len, payload) = match header & 31 {
            // length in array[0], data after it
            0 => match word(at + 4) {
                Some(l) => (l + 4, at + 8),
                None => break,
            },
            // padding: rest of the page, or array[0] bytes
            29 => match word(at + 4) {
                Some(l) if l > 0 => (l + 4, usize::MAX),
                _ => break,
            },
            // time extend, absolute time stamp
            30 | 31 => (8, usize::MAX),
            small => (small * 4 + 4, at + 4),
        };
        if let Some(id) = data.get(payload..payload.saturating_add(2)) {
            n += ids.contains(&u16::from_ne_bytes([id[0], id[1]])) as u64;
        }
        at += len;
    }
    (n, commit & (3 << 30) != 0)
}

/// Perf events with a choice the snooper's perf module does not offer:
/// scoped to one process (pid, each CPU, inherit) sampling TIME|RAW, into
/// the snooper's perf rings.
mod raw_perf {
    use anyhow::{bail, Result};
    use perf_event_open_sys as sys;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use xenstore_snoop::capture::tracefs::perf_ring::Ring;

    pub struct Rings {
        _fds: Vec<OwnedFd>,
        rings: Vec<Ring>,
        scratch: Vec<u8>,
    }

    impl Rings {
        pub fn open(
            ids: &[u16],
            pid: Option<u32>,
            with_tid: bool,
            data_size: usize,
        ) -> Result<Rings> {
            let (mut fds, mut rings) = (Vec::new(), Vec::new());
            // Every thread the process has now; inherit covers later ones.
            let tids: Vec<i32> = match pid {
                Some(pid) => std::fs::read_dir(format!("/proc/{pid}/task"))?
                    .map(|t| Ok(t?.file_name().to_string_lossy().parse()?))
                    .collect::<Result<_>>()?,
                None => vec![-1],
            };
            for cpu in xenstore_snoop::capture::tracefs::perf::online_cpus()? {
                let mut ring: Option<i32> = None;
                for &tid in &tids {
                    for &id in ids {
                        let mut attr = sys::bindings::perf_event_attr {
                            type_: sys::bindings::PERF_TYPE_TRACEPOINT,
                            size: std::mem::size_of::<sys::bindings::perf_event_attr>() as u32,
                            config: id as u64,
                            sample_type: (sys::bindings::PERF_SAMPLE_TIME
                                | sys::bindings::PERF_SAMPLE_RAW
                                | if with_tid {
                                    sys::bindings::PERF_SAMPLE_TID
                                } else {
                                    0
                                }) as u64,
                            ..Default::default()
                        };
                        attr.__bindgen_anon_1.sample_period = 1;
                        attr.set_use_clockid(1);
                        attr.clockid = libc::CLOCK_MONOTONIC;
                        attr.set_inherit(pid.is_some() as u64);
                        attr.set_watermark(1);
                        attr.__bindgen_anon_2.wakeup_watermark = (data_size / 8) as u32;
                        // SAFETY: attr is a valid perf_event_attr of its declared size.
                        let fd = unsafe {
                            sys::perf_event_open(
                                &mut attr,
                                tid,
                                cpu as i32,
                                -1,
                                sys::bindings::PERF_FLAG_FD_CLOEXEC as _,
                            )
                        };
                        if fd < 0 {
                            bail!("perf_event_open: {}", std::io::Error::last_os_error());
                        }
                        // SAFETY: a new fd nothing else owns.
                        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
                        match ring {
                            None => {
                                rings.push(Ring::map(&fd, data_size)?);
                                ring = Some(fd.as_raw_fd());
                            }
                            Some(out) => {
                                // SAFETY: both fds are open perf events of ours.
                                if unsafe { sys::ioctls::SET_OUTPUT(fd.as_raw_fd(), out) } < 0 {
                                    bail!("SET_OUTPUT: {}", std::io::Error::last_os_error());
                                }
                            }
                        }
                        fds.push(fd);
                    }
                }
            }
            Ok(Rings {
                _fds: fds,
                rings,
                scratch: Vec::new(),
            })
        }

        /// Frees every ring's space; returns the sample records it held.
        pub fn drain(&mut self) -> u64 {
            let mut n = 0;
            for ring in &self.rings {
                ring.drain(&mut self.scratch, |rec| {
                    let ty = u32::from_ne_bytes(rec[0..4].try_into().unwrap());
                    n += (ty == sys::bindings::PERF_RECORD_SAMPLE) as u64;
                });
            }
            n
        }
    }
}

/// `ops ROUNDS SECONDS CONFIG...`: the shim under the bench's pinned
/// single-connection read load (client and shim on CPU 0), with
/// CONFIG: none | bare | perf-sys-tid (the snooper's perf events: every
/// process, TID|TIME|RAW) | perf-sys (TIME|RAW) | perf-task (the shim's
/// process only, TIME|RAW, inherit); a reader thread frees ring space |
/// ftrace-read | ftrace-read-pid (as in the per-firing configs).
/// Prints ops/s and the shim's CPU µs per op, medians.
fn ops(args: &[String]) -> Result<()> {
    use xenstore_bench::workload::{self, Workload};
    let [rounds, secs, configs @ ..] = args else {
        bail!("usage: firing-parts ops ROUNDS SECONDS CONFIG...");
    };
    let (rounds, secs): (usize, f64) = (rounds.parse()?, secs.parse()?);
    let shim =
        xenstore_bench::builds::workspace_root().join("target/bench/probes/release/xenstored-shim");
    let daemon = xenstore_bench::daemons::shim("shim", &shim)?;
    workload::seed(&daemon.socket, 1)?;
    Pin::Cpu0.apply_to_process(daemon.pid())?;
    let mut results = vec![Vec::new(); configs.len()];
    for round in 0..rounds {
        for (i, c) in configs.iter().enumerate() {
            let group = SnoopGroup::define(&shim)?;
            let ftrace = c.starts_with("ftrace-read");
            let pid = (c == "ftrace-read-pid").then(|| daemon.pid());
            let inst = ftrace
                .then(|| Instance::enable(&group.group.name, Some(16 << 10), pid))
                .transpose()?;
            let mut rings = match c.as_str() {
                "none" | "bare" | "ftrace-read" | "ftrace-read-pid" => None,
                "perf-sys-tid" => Some(raw_perf::Rings::open(&group.ids, None, true, 16 << 20)?),
                "perf-sys" => Some(raw_perf::Rings::open(&group.ids, None, false, 16 << 20)?),
                "perf-task" => Some(raw_perf::Rings::open(
                    &group.ids,
                    Some(daemon.pid()),
                    false,
                    16 << 20,
                )?),
                _ => bail!("unknown config {c}"),
            };
            let _bare = (c == "bare")
                .then(|| {
                    BareUprobes::enable(&shim, &[Probe::Request, Probe::Response], Fetch::SnoopArgs)
                })
                .transpose()?;
            let stop = AtomicBool::new(false);
            let (sample, cpu) = std::thread::scope(|s| -> Result<_> {
                let reader = s.spawn(|| {
                    if let Some(inst) = &inst {
                        read_pipes(&inst.dir, &group.ids, &stop).expect("read trace_pipe_raw");
                        return;
                    }
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(std::time::Duration::from_millis(10));
                        if let Some(r) = rings.as_mut() {
                            r.drain();
                        }
                    }
                });
                let before = xenstore_bench::daemons::cpu_ns(daemon.pid())?;
                let sample = xenstore_bench::load::run(
                    &daemon.socket,
                    Workload::Read,
                    1,
                    std::time::Duration::from_secs_f64(secs),
                    Pin::Cpu0,
                );
                let cpu = xenstore_bench::daemons::cpu_ns(daemon.pid())? - before;
                stop.store(true, Ordering::Relaxed);
                reader.join().expect("reader panicked");
                Ok((sample?, cpu))
            })?;
            let cpu_us = cpu as f64 / 1000.0 / sample.ops.max(1) as f64;
            eprintln!(
                "round {round} {c}: {:.0} ops/s, {cpu_us:.2} µs/op",
                sample.ops_per_s
            );
            results[i].push((sample.ops_per_s, cpu_us));
        }
    }
    println!("| config | ops/s | shim CPU µs/op |");
    println!("|---|---|---|");
    for (i, c) in configs.iter().enumerate() {
        let ops = median(results[i].iter().map(|r| r.0).collect());
        let cpu = median(results[i].iter().map(|r| r.1).collect());
        println!("| {c} | {ops:.0} | {cpu:.2} |");
    }
    Ok(())
}
