//! Where probe firings come from: the seam between the session (pairing,
//! filters, output) and a capture back end (tracefs uprobes read through
//! perf rings, or a BPF program writing a BPF ring buffer).

pub mod bpf;
pub mod mapping;
pub mod tracefs;

use crate::capture::bpf::BpfSource;
use crate::capture::tracefs::TracefsSource;
use crate::cli::{Args, Backend};
use crate::event::{Event, Probe};
use crate::filter::Filter;
use crate::sdt::SdtProbe;
use crate::target::Target;
use anyhow::{Context, Result};

pub trait Source {
    /// What the "Tracing ..." line says about the attachment.
    fn describe(&self) -> String;

    /// Waits up to `timeout_ms` for events to be ready to drain.
    fn wait(&mut self, timeout_ms: i32) -> Result<()>;

    /// Hands events of the traced daemon now captured to `f`: each CPU's in
    /// time order, the CPUs one after the other. A back end that reads its
    /// CPUs one at a time may hold back what an event still to come could
    /// precede (see `TracefsSource::drain`); `last` hands over everything.
    fn drain(&mut self, f: &mut dyn FnMut(Event), last: bool);

    /// Events dropped because the ring was full, so far.
    fn lost(&self) -> u64;

    /// Records captured that could not be decoded, so far.
    fn undecodable(&self) -> u64;

    /// Bytes of corrupt capture data skipped, so far.
    fn corrupt_bytes(&self) -> u64 {
        0
    }

    /// Anything else wrong with the capture, for the closing line.
    fn trouble(&self) -> Option<String> {
        None
    }

    /// Detaches from the daemon, reporting what could not be cleaned up.
    fn close(self: Box<Self>) -> Result<()>;
}

/// Opens the back end `--backend` asks for on the probe sites `probes`
/// (both back ends attach the same ones); without it, BPF when this kernel
/// can load it, else tracefs, saying why on stderr.
pub fn open(
    args: &Args,
    target: &Target,
    probes: &[SdtProbe],
    filter: &Filter,
) -> Result<Box<dyn Source>> {
    let ring_bytes = (args.ring_mb as usize) << 20;
    let paired = probes.iter().any(|p| p.name == Probe::Request.name());
    let bpf = || -> Result<Box<dyn Source>> {
        Ok(Box::new(BpfSource::open(
            target,
            probes,
            filter,
            ring_bytes,
            args.bpf_links,
            args.needs_firing_times(paired),
        )?))
    };
    let tracefs = || -> Result<Box<dyn Source>> {
        Ok(Box::new(TracefsSource::open(
            target,
            probes,
            filter,
            ring_bytes,
            args.tracefs.as_deref(),
        )?))
    };
    match args.backend {
        Some(Backend::Bpf) => bpf().context("--backend bpf"),
        Some(Backend::Tracefs) => tracefs(),
        None => bpf().or_else(|e| {
            eprintln!(
                "xenstore-snoop: BPF back end unavailable ({}); using tracefs",
                one_line(&e)
            );
            tracefs()
        }),
    }
}

/// An error chain on one line.
pub(crate) fn one_line(e: &anyhow::Error) -> String {
    format!("{e:#}").replace('\n', " ")
}
