//! The other tracers over the same probes: bpftrace, perf, the scripts, stack correlation.
//! One test binary (a tier, as ripgrep's); each file a module; tests/README.md indexes them.

mod bpftrace_probes;
#[path = "../common/mod.rs"]
mod common;
mod perf_sdt;
mod scripts_live;
mod stack_correlate;
