//! xenstore-bench: the shim and the snooper measured against upstream
//! daemons and bpftrace, as ratios between interleaved runs. The sections
//! are listed in sections.rs; S1–S5 each live in the folder or file of
//! their name, S5's and S2's shared hosts in idle_hosts/.

pub mod affinity;
pub mod builds;
pub mod cli;
pub mod client;
pub mod compare;
pub mod daemons;
pub mod guests;
pub mod idle_hosts;
pub mod in_turn;
pub mod kernel;
pub mod libxs;
pub mod load;
pub mod machine;
pub mod plain;
pub mod probe_loop;
pub mod report;
pub mod report_update;
pub mod run;
pub mod s1_boot_storm;
pub mod s2_fan_out;
pub mod s3_big_store;
pub mod s4_mass_destroy;
pub mod s5_idle_tax;
pub mod scale;
pub mod sections;
pub mod soak;
pub mod stats;
pub mod template;
pub mod tracers;
pub mod uprobe;
pub mod workload;
