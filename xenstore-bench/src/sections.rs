//! The table of sections: each has one name, the same in `--only`, in its
//! report heading and in its file or folder. `all` runs the wanted ones in
//! this order, `--update` merges them by heading, and `smoke` runs those
//! that it can at a few small N through the very same functions.

use crate::builds::{self, Before, Builds};
use crate::cli::Section;
use crate::plain::{self, bpftrace_script, Budget};
use crate::scale::{Part, Scale};
use anyhow::{Context, Result};
use std::path::PathBuf;

/// Every section, in report order; `kernels` is measured in VMs
/// (`xenstore-bench kernel`) and kept from the old report.
pub const ALL: [Section; 13] = [
    Section::Throughput,
    Section::Idle,
    Section::Snoop,
    Section::Firing,
    Section::Loss,
    Section::Memory,
    Section::Metrics,
    Section::Sites,
    Section::S1BootStorm,
    Section::S2FanOut,
    Section::S3BigStore,
    Section::S4MassDestroy,
    Section::S5IdleTax,
];

/// What the sections run on.
pub struct Bench {
    pub scale: Scale,
    pub budget: Budget,
    /// The release builds `all` made; None in a smoke run, whose plain
    /// sections other than throughput, memory and loss need them (and root,
    /// tracefs, bpftrace).
    pub builds: Option<Builds>,
    /// The snooper and the probe loop (loss's), if given.
    pub snoop: Option<PathBuf>,
    pub probe_loop: Option<PathBuf>,
    pub before: Option<Before>,
    /// The libxenstore client (throughput's libxenstore rows).
    pub xs_load: Option<PathBuf>,
}

/// `section` measured and rendered.
pub fn part(section: Section, b: &Bench) -> Result<Part> {
    let budget = &b.budget;
    let builds = || {
        (b.builds.as_ref()).with_context(|| {
            format!("{section:?} has no smoke run (it needs the release builds `all` makes)")
        })
    };
    Ok(match section {
        Section::Throughput => plain::throughput::render(&plain::throughput::measure(
            &b.scale,
            budget,
            b.xs_load.as_deref(),
        )),
        Section::Idle => plain::idle::render(&plain::idle::measure(builds()?, budget)),
        Section::Snoop => plain::snoop::render(&plain::snoop::measure(
            builds()?,
            budget,
            &bpftrace_script()?,
            b.before.as_ref(),
        )),
        Section::Firing => plain::firing::render(&plain::firing::measure(
            builds()?,
            budget,
            &bpftrace_script()?,
        )),
        Section::Loss => {
            let (probe_loop, snoop) = (b.probe_loop.as_ref().zip(b.snoop.as_ref()))
                .context("loss needs --snoop and --probe-loop")?;
            plain::loss::render(&plain::loss::measure(probe_loop, snoop, budget), budget)
        }
        Section::Memory => {
            let shim = &b.scale.shims[0].1;
            plain::memory::render(&plain::memory::measure(shim, budget), budget)
        }
        Section::Metrics => plain::metrics::render(&plain::metrics::measure(
            builds()?,
            budget,
            b.before.as_ref(),
        )),
        Section::Sites => {
            let builds = builds()?;
            plain::sites::render(&plain::sites::measure(
                builds,
                &builds::build_nop1()?,
                budget,
            ))
        }
        Section::S1BootStorm => crate::s1_boot_storm::section(&b.scale),
        Section::S2FanOut => crate::s2_fan_out::section(&b.scale),
        Section::S3BigStore => crate::s3_big_store::section(&b.scale),
        Section::S4MassDestroy => crate::s4_mass_destroy::section(&b.scale),
        Section::S5IdleTax => crate::s5_idle_tax::section(&b.scale),
    })
}
