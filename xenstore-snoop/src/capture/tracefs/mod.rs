//! The tracefs back end: one uprobe event per probe site in this
//! snooper's tracefs group, read through per-CPU perf rings.

pub mod decode;
pub mod format;
pub mod perf;
pub mod perf_ring;
pub mod uprobe;

use crate::capture::tracefs::perf::Rings;
use crate::capture::tracefs::uprobe::{remove_stale_groups, tracefs, Group};
use crate::capture::Source;
use crate::event::{Event, Probe};
use crate::filter::Filter;
use crate::sdt::SdtProbe;
use crate::target::Target;
use anyhow::{Context, Result};
use decode::Decoder;
use format::Format;
use std::collections::HashMap;

pub struct TracefsSource {
    /// Closed before the group's uprobes are deleted (field order).
    rings: Rings,
    group: Group,
    decoders: Vec<Decoder>,
    daemon: u32,
    kernel_filter: Option<String>,
    undecodable: u64,
    /// Events stamped at or after the last drain began (see `drain`).
    held: Vec<Event>,
    /// The list the last drain's held events were in, kept for its capacity.
    spare: Vec<Event>,
}

impl TracefsSource {
    /// Defines a uprobe for every one of `probes` on `target` and opens
    /// the perf rings (`ring_bytes` per CPU) that read them.
    pub fn open(
        target: &Target,
        probes: &[SdtProbe],
        filter: &Filter,
        ring_bytes: usize,
        tracefs_mount: Option<&std::path::Path>,
    ) -> Result<TracefsSource> {
        let tracefs = tracefs(tracefs_mount)?;
        for stale in remove_stale_groups(&tracefs)? {
            eprintln!("xenstore-snoop: removed stale uprobes of {stale}");
        }
        let kernel_filter = filter.kernel_filter();
        let mut group = Group::new(tracefs, kernel_filter.is_some());
        let mut decoders: Vec<Decoder> = Vec::new();
        let mut seen_names: HashMap<String, u32> = HashMap::new();
        for p in probes {
            // A probe inlined at several sites has several notes: one event each.
            let n = seen_names.entry(p.name.clone()).or_default();
            let mut site = p.clone();
            if *n > 0 {
                site.name = format!("{}_{n}", p.name);
            }
            *n += 1;
            group.add(&target.binary, &site)?;
            let path = group.event_dir(&site.name).join("format");
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            let format =
                Format::parse(&text).with_context(|| format!("parsing {}", path.display()))?;
            let probe = Probe::from_name(&p.name).expect("filtered by the caller");
            decoders.push(Decoder::new(probe, &format)?);
        }
        let ids: Vec<u16> = decoders.iter().map(|d| d.id).collect();
        let rings = Rings::open(&ids, ring_bytes, kernel_filter.as_deref())?;
        rings.enable()?;
        Ok(TracefsSource {
            rings,
            group,
            decoders,
            daemon: target.pid,
            kernel_filter,
            undecodable: 0,
            held: Vec::new(),
            spare: Vec::new(),
        })
    }
}

impl Source for TracefsSource {
    fn describe(&self) -> String {
        format!(
            "tracefs, {} probe sites, group {}{}",
            self.decoders.len(),
            self.group.name,
            self.kernel_filter
                .as_ref()
                .map_or(String::new(), |f| format!(", kernel filter `{f}`"))
        )
    }

    fn wait(&mut self, timeout_ms: i32) -> Result<()> {
        self.rings.wait(timeout_ms)
    }

    /// The CPUs' rings are read one after another, so when the daemon moves
    /// from one CPU to the next, an event it fired earlier may be committed
    /// to a ring already read after a later one was committed to a ring
    /// read next: this drain would have the later event, the next one the
    /// earlier, and the lines would come out of order (seen under load in
    /// tests/snoop's loss test). An event stamped before this drain began
    /// cannot be so overtaken: the daemon (one thread) commits each event
    /// before it stamps the next, so everything it fired before one stamped
    /// then was committed by then and is read now. Later ones wait for the
    /// next drain (at most the session's 100 ms wait), or `last`.
    fn drain(&mut self, f: &mut dyn FnMut(Event), last: bool) {
        let began = crate::output::clock_ns(libc::CLOCK_MONOTONIC);
        let mut earlier = std::mem::take(&mut self.held);
        let mut held = std::mem::take(&mut self.spare);
        let mut hand = |ev: Event| {
            if last || ev.mono_ns < began {
                f(ev);
            } else {
                held.push(ev);
            }
        };
        // What the last drain held first: it precedes this drain's events.
        earlier.drain(..).for_each(&mut hand);
        let (decoders, daemon) = (&self.decoders, self.daemon);
        let mut undecodable = 0;
        self.rings.drain(|s| {
            // uprobes fire in every process running the binary: keep ours.
            if s.pid != daemon || s.raw.len() < 2 {
                return;
            }
            let id = u16::from_ne_bytes([s.raw[0], s.raw[1]]);
            // A handful of decoders: a scan beats hashing the id.
            match decoders
                .iter()
                .find(|d| d.id == id)
                .map(|d| d.decode(s.raw, s.time_ns))
            {
                Some(Ok(ev)) => hand(ev),
                _ => undecodable += 1,
            }
        });
        self.undecodable += undecodable;
        (self.held, self.spare) = (held, earlier);
    }

    fn lost(&self) -> u64 {
        self.rings.lost()
    }

    fn undecodable(&self) -> u64 {
        self.undecodable
    }

    fn corrupt_bytes(&self) -> u64 {
        self.rings.corrupt_bytes
    }

    fn close(self: Box<Self>) -> Result<()> {
        let TracefsSource {
            rings, mut group, ..
        } = *self;
        // Close the perf events before deleting the uprobes they use.
        drop(rings);
        group.remove()
    }
}
