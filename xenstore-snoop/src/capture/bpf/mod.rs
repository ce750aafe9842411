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

mod features;
pub(crate) mod libbpf_log;
pub mod record;
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
use skel::{XssnoopSkel, XssnoopSkelBuilder};

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
        if links == BpfLinks::Auto {
            let (links, note) = if features::uprobe_multi_links() {
                (BpfLinks::Multi, "")
            } else {
                (BpfLinks::PerSite, " (the kernel has no uprobe-multi links)")
            };
            let mut source =
                BpfSource::open(target, probes, filter, ring_bytes, links, timestamps)?;
            source.links_note += note;
            return Ok(source);
        }
        // The skeleton borrows its object for as long as it lives: for the
        // rest of the process (one session per process).
        let object = Box::leak(Box::new(MaybeUninit::uninit()));
        let mut open = XssnoopSkelBuilder::default()
            .open(object)
            .map_err(|e| explained(e, "opening the BPF object"))?;

        let ring_bytes = ring_bytes
            .next_power_of_two()
            .max(crate::capture::mapping::page_size());
        let cpus = crate::capture::tracefs::perf::online_cpus()?.len().max(1);
        let rodata = open
            .maps
            .rodata_data
            .as_deref_mut()
            .context("the BPF object has no .rodata")?;
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
        rodata.daemon_tgid = target.pid;
        rodata.failed_only = filter.failed_only.into();
        rodata.timestamps = timestamps.into();
        // The reader is woken when a quarter of the ring waits; with every
        // CPU between looks at that, up to another quarter may.
        rodata.wake_at = (ring_bytes / 4) as u64;
        rodata.check_every = (ring_bytes / 4 / cpus).max(1) as u32;
        open.maps
            .events
            .set_max_entries(ring_bytes as u32)
            .context("sizing the BPF ring buffer")?;
        let unused = match links {
            BpfLinks::PerSite => &mut open.progs.xenstore_probe_multi,
            _ => &mut open.progs.xenstore_probe,
        };
        unused.set_autoload(false);
        // What libbpf said while opening explains no failure from here on.
        libbpf_log::take();
        let skel = open
            .load()
            .map_err(|e| explained(e, "loading the BPF program"))?;

        let mut multi = UprobeMultiOpts::default();
        let mut per_site = Vec::new();
        for (probe, site) in &chosen {
            let what = || format!("probe site xenstore:{} at {:#x}", site.name, site.offset);
            let cookie = record::cookie_of(*probe);
            if links != BpfLinks::PerSite {
                multi.offsets.push(site.offset as usize);
                multi.ref_ctr_offsets.push(site.semaphore as usize);
                multi.cookies.push(cookie);
                continue;
            }
            let opts = UprobeOpts {
                ref_ctr_offset: site.semaphore as usize,
                cookie,
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
                .map_err(|e| explained(e, &format!("attaching to the {}", what())))?;
            per_site.push(link);
        }
        let attached = if per_site.is_empty() {
            let link = skel
                .progs
                .xenstore_probe_multi
                .attach_uprobe_multi_with_opts(target.pid as i32, &target.binary, "", multi)
                .map_err(|e| explained(e, "attaching a uprobe-multi link to the probe sites"))?;
            vec![link]
        } else {
            per_site
        };
        let sites = chosen.len();

        let ring = ring::Ring::map(skel.maps.events.as_fd(), ring_bytes)?;
        Ok(BpfSource {
            _links: attached,
            ring,
            skel,
            undecodable: 0,
            sites,
            kernel_filters,
            links_note: match links {
                BpfLinks::PerSite => ", a uprobe link each".to_string(),
                BpfLinks::Multi | BpfLinks::Auto => String::new(),
            },
        })
    }
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

    fn drain(&mut self, f: &mut dyn FnMut(Event)) {
        // Records are written without waking us: take whatever is there.
        let bad = &mut self.undecodable;
        let skipped = self.ring.drain(|raw| match record::decode(raw) {
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
