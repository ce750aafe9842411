//! The table of sections: each has one name, the same in `--only`, in its
//! report heading and in its file or folder. `all` runs the wanted ones in
//! this order, `--update` merges them by heading, and `smoke` runs the
//! scale ones at a few small N through the very same functions.

use crate::cli::Section;
use crate::scale::{Part, Scale};

/// Every section, in report order; `kernels` is measured in VMs
/// (`xenstore-bench kernel`) and kept from the old report.
pub const ALL: [Section; 13] = [
    Section::Throughput,
    Section::Idle,
    Section::Snoop,
    Section::Firing,
    Section::Loss,
    Section::Memory,
    Section::Sites,
    Section::Metrics,
    Section::S1BootStorm,
    Section::S2FanOut,
    Section::S3BigStore,
    Section::S4MassDestroy,
    Section::S5IdleTax,
];

/// A scale section measured and rendered; None for the plain ones, which
/// report::render renders from their results.
pub fn scale_part(section: Section, s: &Scale) -> Option<Part> {
    Some(match section {
        Section::S1BootStorm => crate::s1_boot_storm::section(s),
        Section::S2FanOut => crate::s2_fan_out::section(s),
        Section::S3BigStore => crate::s3_big_store::section(s),
        Section::S4MassDestroy => crate::s4_mass_destroy::section(s),
        Section::S5IdleTax => crate::s5_idle_tax::section(s),
        _ => return None,
    })
}
