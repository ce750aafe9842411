//! The kernel side of --metrics: bpf/xsmetrics.bpf.c attached to the
//! daemon's `stats_batch` site (on an older daemon, to `reply_stats` or
//! else `reply`, and `watch_event` and `tx_end`), counting in maps; read
//! here once an interval into plain totals.

use crate::capture::bpf::{check_registers, explained, libbpf_log};
use crate::sdt::SdtProbe;
use crate::target::Target;
use anyhow::{bail, Context, Result};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags, UprobeMultiOpts, UprobeOpts};
use std::collections::BTreeMap;
use std::mem::MaybeUninit;
use xenstore_proto::bpf::cookie_of;
use xenstore_proto::{Probe, PROVIDER};

mod skel {
    #![allow(clippy::all, clippy::pedantic, clippy::undocumented_unsafe_blocks)]
    #![allow(
        non_camel_case_types,
        non_snake_case,
        non_upper_case_globals,
        dead_code
    )]
    include!(concat!(env!("OUT_DIR"), "/xsmetrics.skel.rs"));
}
use skel::{XsmetricsSkel, XsmetricsSkelBuilder};

/// The program's table sizes (xsmetrics.bpf.c).
pub const OPS: u32 = 33;
pub const OP_OTHER: u32 = 32;
pub const ERRS: u32 = 128;
pub const BUCKETS: usize = 32;
const LAT_SLOTS: u32 = BUCKETS as u32 + 1;
const T_WATCH_EVENTS: u32 = 0;
const T_TX_COMMIT: u32 = 1;
const T_TX_OTHER: u32 = 5;
const T_DOMAIN_OVERFLOW: u32 = 6;
const T_RECORDS_LOST: u32 = 7;

/// Totals since the program was attached.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Totals {
    /// (op slot, errno slot) → replies.
    pub requests: BTreeMap<(u32, u32), u64>,
    /// op slot → (count per log2-ns bucket, sum of ns).
    pub latency: BTreeMap<u32, ([u64; BUCKETS], u64)>,
    pub watch_events: u64,
    /// By xenstore_proto::TxOutcome code; [4]: an unknown code.
    pub transactions: [u64; 5],
    /// Firings counted only in the totals: the domain table was full.
    pub domain_overflow: u64,
    /// Batched records not counted at all (unreadable, or an unknown kind).
    pub records_lost: u64,
    /// domid → (requests, errors, watch events).
    pub domains: BTreeMap<u32, [u64; 3]>,
}

impl Totals {
    /// Adds `other`'s counts (an earlier image's, across a live update).
    pub fn add(&mut self, other: &Totals) {
        for (k, n) in &other.requests {
            *self.requests.entry(*k).or_default() += n;
        }
        for (op, (buckets, sum)) in &other.latency {
            let mine = self.latency.entry(*op).or_insert(([0; BUCKETS], 0));
            for (m, n) in mine.0.iter_mut().zip(buckets) {
                *m += n;
            }
            mine.1 += sum;
        }
        self.watch_events += other.watch_events;
        for (m, n) in self.transactions.iter_mut().zip(other.transactions) {
            *m += n;
        }
        self.domain_overflow += other.domain_overflow;
        self.records_lost += other.records_lost;
        for (domid, counts) in &other.domains {
            let mine = self.domains.entry(*domid).or_default();
            for (m, n) in mine.iter_mut().zip(counts) {
                *m += n;
            }
        }
    }
}

pub struct Counters {
    _links: Vec<Link>,
    /// The probe sites counted on.
    pub sites: Vec<SdtProbe>,
    skel: XsmetricsSkel<'static>,
    /// How it attached: the reply probe counted and the links.
    pub how: String,
}

impl Counters {
    /// Loads the program for `target` with room for `max_domains`
    /// domains, and attaches it to the sites it counts.
    pub fn attach(target: &Target, sites: &[SdtProbe], max_domains: u32) -> Result<Counters> {
        libbpf_log::listen();
        let ours: Vec<(Probe, &SdtProbe)> = sites
            .iter()
            .filter(|s| s.provider == PROVIDER)
            .filter_map(|s| Some((Probe::from_name(&s.name)?, s)))
            .collect();
        let wanted = counted_probes(&ours);
        let chosen: Vec<(Probe, &SdtProbe)> = ours
            .into_iter()
            .filter(|(p, _)| wanted.contains(p))
            .collect();
        if !chosen.iter().any(|(p, _)| *p == wanted[0]) {
            bail!(
                "{} has no xenstore:reply probe, which --metrics counts: \
                 is it a xenstored-shim built with probes?",
                target.binary.display()
            );
        }
        for (probe, site) in &chosen {
            check_registers(*probe, site)?;
        }
        Self::load(target, &chosen, max_domains, true).or_else(|multi| {
            Self::load(target, &chosen, max_domains, false)
                .map_err(|e| e.context(format!("uprobe-multi link: {multi:#}")))
        })
    }

    fn load(
        target: &Target,
        chosen: &[(Probe, &SdtProbe)],
        max_domains: u32,
        multi: bool,
    ) -> Result<Counters> {
        // The skeleton borrows its object for the rest of the process.
        let object = Box::leak(Box::new(MaybeUninit::uninit()));
        let mut open = XsmetricsSkelBuilder::default()
            .open(object)
            .map_err(|e| explained(e, "opening the metrics BPF object"))?;
        let rodata = open
            .maps
            .rodata_data
            .as_deref_mut()
            .context("the BPF object has no .rodata")?;
        rodata.daemon_tgid = target.pid;
        rodata.exporter_pid = std::process::id();
        open.maps
            .domains
            .set_max_entries(max_domains)
            .context("sizing the domain table")?;
        let unused = if multi {
            &mut open.progs.xenstore_metrics
        } else {
            &mut open.progs.xenstore_metrics_multi
        };
        unused.set_autoload(false);
        let skel = open
            .load()
            .map_err(|e| explained(e, "loading the metrics BPF program"))?;
        let mut links = Vec::new();
        if multi {
            let mut opts = UprobeMultiOpts::default();
            for (probe, site) in chosen {
                opts.offsets.push(site.offset as usize);
                opts.ref_ctr_offsets.push(site.semaphore as usize);
                opts.cookies.push(cookie_of(*probe).into());
            }
            let link = skel
                .progs
                .xenstore_metrics_multi
                .attach_uprobe_multi_with_opts(target.pid as i32, &target.binary, "", opts)
                .map_err(|e| explained(e, "attaching a uprobe-multi link to the probe sites"))?;
            links.push(link);
        } else {
            for (probe, site) in chosen {
                let opts = UprobeOpts {
                    ref_ctr_offset: site.semaphore as usize,
                    cookie: cookie_of(*probe).into(),
                    ..Default::default()
                };
                let what = format!("attaching to xenstore:{} at {:#x}", site.name, site.offset);
                let link = skel
                    .progs
                    .xenstore_metrics
                    .attach_uprobe_with_opts(-1, &target.binary, site.offset as usize, opts)
                    .map_err(|e| explained(e, &what))?;
                links.push(link);
            }
        }
        Ok(Counters {
            _links: links,
            sites: chosen.iter().map(|(_, s)| (*s).clone()).collect(),
            skel,
            how: format!(
                "{}, {}",
                chosen
                    .iter()
                    .find(|(p, _)| matches!(
                        p,
                        Probe::Reply | Probe::ReplyStats | Probe::StatsBatch
                    ))
                    .map_or("?", |(p, _)| p.name()),
                if multi {
                    "one uprobe-multi link"
                } else {
                    "a uprobe link per site"
                }
            ),
        })
    }

    /// The totals now.
    pub fn read(&self) -> Result<Totals> {
        let maps = &self.skel.maps;
        let mut t = Totals::default();
        let requests = percpu_array_sums(&maps.requests)?;
        let latency = percpu_array_sums(&maps.latency)?;
        let at = |sums: &[u64], i: u32| sums.get(i as usize).copied().unwrap_or(0);
        for op in 0..OPS {
            for err in 0..ERRS {
                let n = at(&requests, op * ERRS + err);
                if n > 0 {
                    t.requests.insert((op, err), n);
                }
            }
            let mut buckets = [0u64; BUCKETS];
            for (b, slot) in buckets.iter_mut().enumerate() {
                *slot = at(&latency, op * LAT_SLOTS + b as u32);
            }
            if buckets.iter().any(|&n| n > 0) {
                let sum = at(&latency, op * LAT_SLOTS + BUCKETS as u32);
                t.latency.insert(op, (buckets, sum));
            }
        }
        t.watch_events = percpu_sum(&maps.totals, T_WATCH_EVENTS)?;
        for (i, slot) in t.transactions.iter_mut().enumerate() {
            *slot = percpu_sum(&maps.totals, T_TX_COMMIT + i as u32)?;
        }
        debug_assert_eq!(T_TX_COMMIT + 4, T_TX_OTHER);
        t.domain_overflow = percpu_sum(&maps.totals, T_DOMAIN_OVERFLOW)?;
        t.records_lost = percpu_sum(&maps.totals, T_RECORDS_LOST)?;
        for key in maps.domains.keys() {
            let Some(v) = maps.domains.lookup(&key, MapFlags::ANY)? else {
                continue; // deleted meanwhile
            };
            let (Ok(k), Some(v)) = (<[u8; 4]>::try_from(&key[..]), words::<3>(&v)) else {
                bail!("a domain table entry of {} bytes", v.len());
            };
            t.domains.insert(u32::from_ne_bytes(k), v);
        }
        Ok(t)
    }

    /// Drops a dead domain's counts from the kernel's table.
    pub fn forget_domain(&self, domid: u32) {
        let _ = self.skel.maps.domains.delete(&domid.to_ne_bytes());
    }
}

/// The probes to count on, the one carrying replies first: `stats_batch`
/// alone (it carries all three kinds of event, one trap per batch) where
/// the daemon has it; else `reply_stats` (no strings rendered) or, on a
/// shim older than both, `reply`, each with `watch_event` and `tx_end`.
fn counted_probes(ours: &[(Probe, &SdtProbe)]) -> Vec<Probe> {
    let has = |probe| ours.iter().any(|(p, _)| *p == probe);
    if has(Probe::StatsBatch) {
        return vec![Probe::StatsBatch];
    }
    let replies = if has(Probe::ReplyStats) {
        Probe::ReplyStats
    } else {
        Probe::Reply
    };
    vec![replies, Probe::WatchEvent, Probe::TxEnd]
}

/// Every entry of per-CPU array `map` of u64s, summed over the CPUs, by
/// index: one BPF_MAP_LOOKUP_BATCH call (5.6+) where a lookup each would
/// take thousands (libbpf-rs batches no per-CPU map, hence libbpf's call).
fn percpu_array_sums(map: &dyn MapCore) -> Result<Vec<u64>> {
    use std::os::fd::AsRawFd;
    let what = || format!("reading {}", map.name().to_string_lossy());
    let entries = map.max_entries() as usize;
    let cpus = libbpf_rs::num_possible_cpus().with_context(what)?;
    // The kernel gives a per-CPU value as one 8-byte slot per possible CPU.
    debug_assert_eq!(map.value_size(), 8);
    let mut keys = vec![0u32; entries];
    let mut values = vec![0u64; entries * cpus];
    let opts = libbpf_rs::libbpf_sys::bpf_map_batch_opts {
        sz: std::mem::size_of::<libbpf_rs::libbpf_sys::bpf_map_batch_opts>() as _,
        ..Default::default()
    };
    // Where the next call starts (the kernel's cursor), and how many read.
    let (mut cursor, mut read) = (None::<u32>, 0usize);
    while read < entries {
        let mut next = 0u32;
        let mut count = (entries - read) as u32;
        let start = cursor
            .as_mut()
            .map_or(std::ptr::null_mut(), |c| (c as *mut u32).cast());
        // SAFETY: keys[read..] has room for `count` u32 keys and
        // values[read * cpus..] for `count` values of `cpus` u64s, which is
        // what the kernel writes for a per-CPU array of u64s; start (NULL:
        // the first entry) and next are one u32 key each. All outlive the
        // call.
        let ret = unsafe {
            libbpf_rs::libbpf_sys::bpf_map_lookup_batch(
                map.as_fd().as_raw_fd(),
                start,
                (&mut next as *mut u32).cast(),
                keys[read..].as_mut_ptr().cast(),
                values[read * cpus..].as_mut_ptr().cast(),
                &mut count,
                &opts,
            )
        };
        // ENOENT: the read reached the map's end, `count` entries in.
        if ret < 0 && ret != -libc::ENOENT {
            return Err(std::io::Error::from_raw_os_error(-ret)).with_context(what);
        }
        read += count as usize;
        if ret < 0 || count == 0 {
            break;
        }
        cursor = Some(next);
    }
    let mut sums = vec![0u64; entries];
    for (i, key) in keys.iter().take(read).enumerate() {
        if let Some(sum) = sums.get_mut(*key as usize) {
            *sum = values[i * cpus..(i + 1) * cpus].iter().sum();
        }
    }
    Ok(sums)
}

fn percpu_sum(map: &dyn MapCore, key: u32) -> Result<u64> {
    let per_cpu = map
        .lookup_percpu(&key.to_ne_bytes(), MapFlags::ANY)
        .with_context(|| format!("reading {} [{key}]", map.name().to_string_lossy()))?
        .unwrap_or_default();
    Ok(per_cpu
        .iter()
        .filter_map(|v| words::<1>(v))
        .map(|[n]| n)
        .sum())
}

/// A map value as N native u64s.
fn words<const N: usize>(v: &[u8]) -> Option<[u64; N]> {
    let mut out = [0u64; N];
    for (i, w) in out.iter_mut().enumerate() {
        *w = u64::from_ne_bytes(v.get(i * 8..i * 8 + 8)?.try_into().ok()?);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use std::mem::{offset_of, size_of};
    use xenstore_proto::stats::StatsRecord;

    /// The compiled program's batch record (its BTF, as the skeleton has
    /// it) is StatsRecord, field for field.
    #[test]
    fn the_compiled_stats_record_is_the_rust_struct() {
        use super::skel::types::stats_record as Compiled;
        let compiled = [
            ("elapsed_ns", offset_of!(Compiled, elapsed_ns)),
            ("pid", offset_of!(Compiled, pid)),
            ("domid", offset_of!(Compiled, domid)),
            ("op", offset_of!(Compiled, op)),
            ("errno", offset_of!(Compiled, errno)),
            ("kind", offset_of!(Compiled, kind)),
            ("outcome", offset_of!(Compiled, outcome)),
            ("reserved", offset_of!(Compiled, reserved)),
        ];
        let rust: Vec<_> = StatsRecord::C_FIELDS
            .iter()
            .map(|f| (f.name, f.offset))
            .collect();
        assert_eq!(compiled.to_vec(), rust);
        assert_eq!(size_of::<Compiled>(), size_of::<StatsRecord>());
    }
}
