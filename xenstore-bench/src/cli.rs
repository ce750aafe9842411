//! Every flag of xenstore-bench, in one place.

use crate::workload::Workload;
use clap::{Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "xenstore-bench",
    about = "Benchmarks: xenstored-shim and xenstore-snoop against upstream daemons and bpftrace",
    after_help = "Examples:\n  \
        cargo run --release -p xenstore-bench -- all            # full run (<= ~10 min), writes BENCHMARKS.md\n  \
        cargo run --release -p xenstore-bench -- all --quick    # a minute or so\n  \
        cargo run --release -p xenstore-bench -- load --socket /run/xenstored/socket -w read -c 8"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Every section, interleaved; writes the report (needs root, tracefs).
    All(AllArgs),
    /// One load run against a running daemon (for profiling).
    Load(LoadArgs),
    /// Sections 3 and 4 as ratios, with no bpftrace, C xenstored or cargo:
    /// for a kernel in a VM (tests/kernels/run --bench; needs root).
    Kernel(KernelArgs),
    /// The soak: 64 dom0 clients, 8 guest rings and killed snoopers under
    /// load for SECS, then leak, store and event-accounting checks (needs root).
    Soak(SoakArgs),
    /// Seconds-long runs (CI) of throughput, memory, loss and S1–S5 at a few
    /// small N, through the code `all` measures them with, on the shim and
    /// the floor. Fails on any failure a section reports.
    Smoke {
        /// The xenstored-shim binary to start.
        #[arg(long)]
        shim: PathBuf,
        /// The floor's binary (xsbench-bare-sender).
        #[arg(long)]
        floor: PathBuf,
        /// The xenstore-snoop and xsbench-probe-loop binaries, for loss
        /// (which needs root and tracefs).
        #[arg(long)]
        snoop: Option<PathBuf>,
        #[arg(long)]
        probe_loop: Option<PathBuf>,
        /// Only these sections (comma-separated): throughput, memory, loss
        /// and s1…s5.
        #[arg(long, value_delimiter = ',', value_enum, required = true)]
        only: Vec<Section>,
        /// Also these upstream daemons (comma-separated), those installed.
        /// With oxenstored, S1 runs 100 lifecycles at once (its EINVAL
        /// answers come there) and checks its long listing.
        #[arg(long, value_delimiter = ',', value_enum)]
        upstream: Vec<StormUpstream>,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Section {
    Throughput,
    Idle,
    Snoop,
    Firing,
    Loss,
    Memory,
    /// 5-byte against 1-byte nop sites; reply against request + response.
    Sites,
    /// xenstore-snoop --metrics against unsnooped and full tracing.
    Metrics,
    /// K idle domains, then guest lifecycles at once.
    S1BootStorm,
    /// One write, one event: for a cold watcher among N, or a broad one.
    S2FanOut,
    /// A store of N domains' trees, and a big directory.
    S3BigStore,
    /// N domains, a tenth of them dying at once.
    S4MassDestroy,
    /// Requests no watch covers beside N idle connections and domains.
    S5IdleTax,
}

/// An upstream daemon S1 can run beside the shim.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum StormUpstream {
    C,
    Oxenstored,
}

#[derive(clap::Args, Debug)]
pub struct AllArgs {
    /// Short runs, one round, fewer cases.
    #[arg(long)]
    pub quick: bool,
    /// Only these sections (comma-separated); default all.
    #[arg(long, value_delimiter = ',', value_enum)]
    pub only: Vec<Section>,
    /// Where to write the report.
    #[arg(long, default_value = "BENCHMARKS.md")]
    pub out: PathBuf,
    /// Replace only the sections run (see --only) in the existing --out
    /// report, keeping the others; each replaced one says when it was measured.
    #[arg(long)]
    pub update: bool,
    /// Seconds per measured run (default 1.0, quick 0.25).
    #[arg(long)]
    pub seconds: Option<f64>,
    /// Interleaved rounds (default 3, quick 1).
    #[arg(long)]
    pub rounds: Option<usize>,
    /// Measure this xenstored-shim (with probes) instead of the workspace's.
    #[arg(long)]
    pub shim: Option<PathBuf>,
    /// Measure this probe-less xenstored-shim instead of the workspace's.
    #[arg(long)]
    pub shim_noprobes: Option<PathBuf>,
    /// Measure this xenstore-snoop binary instead of the workspace's.
    #[arg(long)]
    pub snoop: Option<PathBuf>,
    /// The scale section also measures this xenstored-shim, labelled
    /// "shim (before)": what a change bought, side by side. Sections 3 and
    /// 9 measure it unsnooped and snooped (and under --metrics).
    #[arg(long)]
    pub shim_before: Option<PathBuf>,
    /// The xenstore-snoop that snoops --shim-before in sections 3 and 9
    /// (default: the workspace's).
    #[arg(long, requires = "shim_before")]
    pub snoop_before: Option<PathBuf>,
    /// S1's idle-domain levels instead of 10,100,500,1000: C xenstored's
    /// cost per request grows with the domains, so the full curve takes
    /// ~20 minutes (C: ~8 to grow from 500 to 1000 idle domains, ~5 for
    /// its K=1000, P=100 storm).
    #[arg(long, value_delimiter = ',')]
    pub storm_idle: Option<Vec<usize>>,
    /// S1 without C xenstored and oxenstored: the shim (and --shim-before's)
    /// alone, for a quick side-by-side look (C at K=1000 takes minutes).
    #[arg(long)]
    pub storm_shims_only: bool,
    /// S1's upstream daemons (comma-separated; default both): e.g. only
    /// oxenstored, to time its storms without C's minutes at K=1000.
    #[arg(
        long,
        value_delimiter = ',',
        value_enum,
        conflicts_with = "storm_shims_only"
    )]
    pub storm_upstream: Vec<StormUpstream>,
}

#[derive(clap::Args, Debug)]
pub struct LoadArgs {
    #[arg(long)]
    pub socket: PathBuf,
    #[arg(short, long, value_enum, default_value = "read")]
    pub workload: Workload,
    #[arg(short, long, default_value_t = 1)]
    pub conns: usize,
    #[arg(short, long, default_value_t = 5.0)]
    pub seconds: f64,
    /// Pin the client threads to CPU 0 (pin the daemon yourself: taskset).
    #[arg(long)]
    pub pinned: bool,
    /// Seed the keys first.
    #[arg(long)]
    pub seed: bool,
}

#[derive(clap::Args, Debug, Clone)]
pub struct SoakArgs {
    /// How long the load runs, in seconds.
    #[arg(long, default_value_t = 300.0)]
    pub secs: f64,
    /// The seed of every random choice (default: from the clock); printed,
    /// so a failure can be replayed.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Dom0 socket connections.
    #[arg(long, default_value_t = 64)]
    pub dom0: usize,
    /// Guest domains, each on a simulated ring.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub guests: u16,
    /// The xenstored-shim binary (default: the workspace's, next to this one).
    #[arg(long)]
    pub shim: Option<PathBuf>,
    /// The xenstore-snoop binary (default: the workspace's, next to this one).
    #[arg(long)]
    pub snoop: Option<PathBuf>,
    /// Each snooper's per-CPU ring, in MiB (its --ring-mb): how much it
    /// may fall behind, and how long it drains on SIGINT.
    #[arg(long, default_value_t = 16)]
    pub snoop_ring_mb: u32,
    /// Allowed VmRSS growth of the daemon from the end of warm-up to the end, in MiB.
    #[arg(long, default_value_t = 16)]
    pub rss_bound_mib: u64,
}

#[derive(clap::Args, Debug)]
pub struct KernelArgs {
    /// The xenstored-shim binary (with probes) to measure.
    #[arg(long)]
    pub shim: PathBuf,
    /// The xenstore-snoop binary to measure.
    #[arg(long)]
    pub snoop: PathBuf,
    /// The xsbench-probe-loop binary.
    #[arg(long)]
    pub probe_loop: PathBuf,
    /// Another xenstore-snoop (a build before a change) measured per firing
    /// beside --snoop's, side by side in the same rounds.
    #[arg(long, value_name = "SNOOP")]
    pub baseline: Option<PathBuf>,
    /// Seconds per measured run.
    #[arg(long, default_value_t = 1.0)]
    pub seconds: f64,
    /// Interleaved rounds (section 4 runs four times as many, half as long).
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
}
