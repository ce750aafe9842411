//! The BPF back end: xssnoop.bpf.c attached as a uprobe to each probe site
//! (with the site's SDT semaphore as the uprobe's reference counter, so the
//! daemon builds its probe strings only while traced), reading the
//! arguments from the registers the probe contract puts them in, filtering
//! in the kernel and writing one BPF ring buffer, read here.
//!
//! The snooper attaches a uprobe per site itself rather than through
//! libbpf's USDT support: libbpf refuses a whole binary when one of its notes
//! points outside executable code (notes of code the linker discarded stay
//! behind, as in the bench's probe loop), where sdt.rs skips such notes.
//!
//! Closing the links detaches the program and drops the semaphores; the
//! kernel does the same when the snooper dies, however it dies.

pub mod decode;
mod features;
pub(crate) mod libbpf_log;
mod ring;

use crate::capture::Source;
use crate::cli::BpfLinks;
use crate::event::{Event, Probe};
use crate::filter::Filter;
use crate::sdt::SdtProbe;
use crate::target::Target;
use anyhow::{bail, Context, Result};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags, UprobeMultiOpts, UprobeOpts};
use std::mem::MaybeUninit;
use std::os::fd::AsFd;
use xenstore_proto::bpf::cookie_of;

mod skel {
    #![allow(clippy::all, clippy::pedantic, clippy::undocumented_unsafe_blocks)]
    #![allow(
        non_camel_case_types,
        non_snake_case,
        non_upper_case_globals,
        dead_code
    )]
    include!(concat!(env!("OUT_DIR"), "/xssnoop.skel.rs"));
}
use skel::types::rodata as XssnoopRodata;
use skel::{OpenXssnoopSkel, XssnoopSkel, XssnoopSkelBuilder};

/// Filter list entries the BPF program has room for (MAX_FILTER).
const MAX_FILTER: usize = 16;

pub struct BpfSource {
    /// Dropped first: detaching stops the firings before the ring goes.
    _links: Vec<Link>,
    ring: ring::Ring,
    skel: XssnoopSkel<'static>,
    undecodable: u64,
    sites: usize,
    kernel_filters: Vec<&'static str>,
    /// How the program was attached, when not the usual way.
    links_note: String,
}

/// An error of libbpf's, in the words of the verifier or of libbpf when
/// they said why.
pub(crate) fn explained(e: libbpf_rs::Error, what: &str) -> anyhow::Error {
    match libbpf_log::take() {
        Some(why) => anyhow::anyhow!("{what}: {why}"),
        None => anyhow::Error::new(e).context(what.to_string()),
    }
}

impl BpfSource {
    /// Loads the program with `filter`'s kernel part and a ring of
    /// `ring_bytes`, and attaches it to every one of the probe sites
    /// `probes` of `target`, with the links `links` asks for; `timestamps`:
    /// whether events need the time they fired.
    pub fn open(
        target: &Target,
        probes: &[SdtProbe],
        filter: &Filter,
        ring_bytes: usize,
        links: BpfLinks,
        timestamps: bool,
    ) -> Result<BpfSource> {
        libbpf_log::listen();
        let chosen = chosen_sites(probes)?;
        let (links, links_note) = resolve_links(links);
        let ring_bytes = ring_bytes
            .next_power_of_two()
            .max(crate::capture::mapping::page_size());
        let mut open = open_object()?;
        let rodata = open
            .maps
            .rodata_data
            .as_deref_mut()
            .context("the BPF object has no .rodata")?;
        let kernel_filters = set_filters(rodata, filter);
        rodata.daemon_tgid = target.pid;
        rodata.timestamps = timestamps.into();
        size_ring(&mut open, ring_bytes)?;
        let skel = load(open, links)?;
        let attached = match links {
            BpfLinks::PerSite => attach_per_site(&skel, target, &chosen)?,
            BpfLinks::Multi | BpfLinks::Auto => vec![attach_multi(&skel, target, &chosen)?],
        };
        let ring = ring::Ring::map(skel.maps.events.as_fd(), ring_bytes)?;
        Ok(BpfSource {
            _links: attached,
            ring,
            skel,
            undecodable: 0,
            sites: chosen.len(),
            kernel_filters,
            links_note,
        })
    }
}

/// The probe sites the program knows, each with its probe; each must pass
/// the arguments where the program reads them.
fn chosen_sites(probes: &[SdtProbe]) -> Result<Vec<(Probe, &SdtProbe)>> {
    let chosen: Vec<(Probe, &SdtProbe)> = probes
        .iter()
        .filter_map(|p| Some((Probe::from_name(&p.name)?, p)))
        .collect();
    if chosen.is_empty() {
        bail!("no probe of the daemon to attach to");
    }
    for (probe, site) in &chosen {
        check_registers(*probe, site)?;
    }
    Ok(chosen)
}

/// The links to attach with (`Auto` made `Multi` where the kernel has
/// uprobe-multi links, else `PerSite`), and how `describe` says them.
fn resolve_links(asked: BpfLinks) -> (BpfLinks, String) {
    const PER_SITE: &str = ", a uprobe link each";
    match asked {
        BpfLinks::Auto if features::uprobe_multi_links() => (BpfLinks::Multi, String::new()),
        BpfLinks::Auto => (
            BpfLinks::PerSite,
            format!("{PER_SITE} (the kernel has no uprobe-multi links)"),
        ),
        BpfLinks::Multi => (BpfLinks::Multi, String::new()),
        BpfLinks::PerSite => (BpfLinks::PerSite, PER_SITE.to_string()),
    }
}

/// The program's object, opened and not yet loaded.
fn open_object() -> Result<OpenXssnoopSkel<'static>> {
    // The skeleton borrows its object for as long as it lives: for the
    // rest of the process (one session per process).
    let object = Box::leak(Box::new(MaybeUninit::uninit()));
    XssnoopSkelBuilder::default()
        .open(object)
        .map_err(|e| explained(e, "opening the BPF object"))
}

/// Writes the part of `filter` the kernel can apply into the program's
/// constants; returns what it filters, for `describe`.
fn set_filters(rodata: &mut XssnoopRodata, filter: &Filter) -> Vec<&'static str> {
    let mut kernel_filters = Vec::new();
    if fill(&mut rodata.doms, &filter.domains) {
        rodata.n_doms = filter.domains.len() as u32;
        kernel_filters.push("domain");
    }
    if fill(&mut rodata.pids, &filter.pids) {
        rodata.n_pids = filter.pids.len() as u32;
        kernel_filters.push("pid");
    }
    if fill(&mut rodata.ops, &filter.ops) {
        rodata.n_ops = filter.ops.len() as u32;
        kernel_filters.push("op");
    }
    rodata.failed_only = filter.failed_only.into();
    kernel_filters
}

/// Sizes the ring buffer to `ring_bytes` (a power of two, at least a page)
/// and tells the program when to wake the reader.
fn size_ring(open: &mut OpenXssnoopSkel<'static>, ring_bytes: usize) -> Result<()> {
    let cpus = crate::capture::tracefs::perf::online_cpus()?.len().max(1);
    let rodata = open
        .maps
        .rodata_data
        .as_deref_mut()
        .context("the BPF object has no .rodata")?;
    // The reader is woken when a quarter of the ring waits; with every
    // CPU between looks at that, up to another quarter may.
    rodata.wake_at = (ring_bytes / 4) as u64;
    rodata.check_every = (ring_bytes / 4 / cpus).max(1) as u32;
    open.maps
        .events
        .set_max_entries(ring_bytes as u32)
        .context("sizing the BPF ring buffer")
}

/// Loads the one program `links` attaches (`xenstore_probe` per site,
/// `xenstore_probe_multi` for one uprobe-multi link).
fn load(mut open: OpenXssnoopSkel<'static>, links: BpfLinks) -> Result<XssnoopSkel<'static>> {
    let unused = match links {
        BpfLinks::PerSite => &mut open.progs.xenstore_probe_multi,
        BpfLinks::Multi | BpfLinks::Auto => &mut open.progs.xenstore_probe,
    };
    unused.set_autoload(false);
    // What libbpf said while opening explains no failure from here on.
    libbpf_log::take();
    open.load()
        .map_err(|e| explained(e, "loading the BPF program"))
}

/// One uprobe link a site, each with the site's semaphore and its probe as
/// the cookie.
fn attach_per_site(
    skel: &XssnoopSkel<'static>,
    target: &Target,
    chosen: &[(Probe, &SdtProbe)],
) -> Result<Vec<Link>> {
    let mut links = Vec::new();
    for (probe, site) in chosen {
        let opts = UprobeOpts {
            ref_ctr_offset: site.semaphore as usize,
            cookie: cookie_of(*probe).into(),
            ..Default::default()
        };
        let link = skel
            .progs
            .xenstore_probe
            .attach_uprobe_with_opts(
                // Every process: see the program's daemon_tgid.
                -1,
                &target.binary,
                site.offset as usize,
                opts,
            )
            .map_err(|e| {
                let what = format!("probe site xenstore:{} at {:#x}", site.name, site.offset);
                explained(e, &format!("attaching to the {what}"))
            })?;
        links.push(link);
    }
    Ok(links)
}

/// One uprobe-multi link on every site, bound to the daemon's process.
fn attach_multi(
    skel: &XssnoopSkel<'static>,
    target: &Target,
    chosen: &[(Probe, &SdtProbe)],
) -> Result<Link> {
    let mut multi = UprobeMultiOpts::default();
    for (probe, site) in chosen {
        multi.offsets.push(site.offset as usize);
        multi.ref_ctr_offsets.push(site.semaphore as usize);
        multi.cookies.push(cookie_of(*probe).into());
    }
    skel.progs
        .xenstore_probe_multi
        .attach_uprobe_multi_with_opts(target.pid as i32, &target.binary, "", multi)
        .map_err(|e| explained(e, "attaching a uprobe-multi link to the probe sites"))
}

/// The program reads each argument from the register the probe contract
/// puts it in (xenstore_proto::probe::ARG_REGISTERS), one load each, rather
/// than where each site's note says (a lookup and a branch chain an
/// argument, about 10 ns a firing measured): so every site's note must say
/// those registers. Any other build of the probes is for tracefs, whose
/// fetch args follow any note.
pub(crate) fn check_registers(probe: Probe, site: &SdtProbe) -> Result<()> {
    let contract = probe.note_args();
    if site.args != contract {
        bail!(
            "probe site xenstore:{} at {:#x} has its arguments at {:?}, not at the \
             probe contract's registers {:?}, which the BPF program reads",
            site.name,
            site.offset,
            site.args.join(" "),
            contract.join(" ")
        );
    }
    Ok(())
}

/// Copies `from` into the program's filter list `to`; false if there is
/// nothing to filter, or too much to filter in the kernel (user space still does).
fn fill<T: Copy, U: Copy + TryFrom<T>>(to: &mut [U; MAX_FILTER], from: &[T]) -> bool {
    if from.is_empty() || from.len() > MAX_FILTER {
        return false;
    }
    for (slot, &v) in to.iter_mut().zip(from) {
        match U::try_from(v) {
            Ok(v) => *slot = v,
            Err(_) => return false,
        }
    }
    true
}

impl Source for BpfSource {
    fn describe(&self) -> String {
        let mut s = format!("BPF, {} probe sites{}", self.sites, self.links_note);
        if !self.kernel_filters.is_empty() {
            s += &format!(
                ", {} filtered in the kernel",
                self.kernel_filters.join(", ")
            );
        }
        s
    }

    fn wait(&mut self, timeout_ms: i32) -> Result<()> {
        self.ring.wait(timeout_ms)
    }

    /// One ring for every CPU, read in the order written: nothing to hold.
    fn drain(&mut self, f: &mut dyn FnMut(Event), _last: bool) {
        // Records are written without waking us: take whatever is there.
        let bad = &mut self.undecodable;
        let skipped = self.ring.drain(|raw| match decode::decode(raw) {
            Some(ev) => f(ev),
            None => *bad += 1,
        });
        *bad += u64::from(skipped > 0);
    }

    fn lost(&self) -> u64 {
        let key = 0u32.to_ne_bytes();
        match self.skel.maps.lost.lookup_percpu(&key, MapFlags::ANY) {
            Ok(Some(per_cpu)) => per_cpu
                .iter()
                .filter_map(|v| Some(u64::from_ne_bytes(v.get(..8)?.try_into().ok()?)))
                .sum(),
            _ => 0,
        }
    }

    fn undecodable(&self) -> u64 {
        self.undecodable
    }

    fn close(self: Box<Self>) -> Result<()> {
        // Field order detaches the links first.
        drop(self);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(probe: Probe, args: &[String]) -> SdtProbe {
        SdtProbe {
            provider: xenstore_proto::PROVIDER.to_string(),
            name: probe.name().to_string(),
            offset: 0x1000,
            semaphore: 0x2000,
            args: args.to_vec(),
        }
    }

    #[test]
    fn sites_need_the_probe_contracts_registers() {
        for probe in Probe::ALL {
            check_registers(probe, &site(probe, &probe.note_args())).unwrap();
        }
        let mut moved = Probe::Request.note_args();
        moved[1] = "8@-16(%rbp)".to_string();
        let e = check_registers(Probe::Request, &site(Probe::Request, &moved)).unwrap_err();
        assert!(e.to_string().contains("8@-16(%rbp)"), "{e}");
        let six = &Probe::Reply.note_args()[..6];
        assert!(check_registers(Probe::Reply, &site(Probe::Reply, six)).is_err());
    }
}
