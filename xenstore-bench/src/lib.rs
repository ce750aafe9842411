//! xenstore-bench: the shim and the snooper measured against upstream
//! daemons and bpftrace, as ratios between interleaved runs.

pub mod affinity;
pub mod builds;
pub mod cli;
pub mod client;
pub mod compare;
pub mod daemons;
pub mod guests;
pub mod kernel;
pub mod libxs;
pub mod load;
pub mod machine;
pub mod memory;
pub mod metrics_mode;
pub mod metrics_report;
pub mod plan;
pub mod probe_loop;
pub mod report;
pub mod report_update;
pub mod run;
pub mod scale;
pub mod scale_broad;
pub mod scale_death;
pub mod scale_death_report;
pub mod scale_report;
pub mod scale_store;
pub mod scale_store_report;
pub mod scale_storm;
pub mod scale_storm_lifecycle;
pub mod scale_storm_replay;
pub mod scale_storm_report;
pub mod soak;
pub mod stats;
pub mod tracers;
pub mod uprobe;
pub mod workload;
