//! The shim and the exporter as a host runs them: the Debian package, the journal, Prometheus.
//! One test binary (a tier, as ripgrep's); each file a module; tests/README.md indexes them.

mod alert_rules;
#[path = "../common/mod.rs"]
mod common;
mod journal;
mod metrics;
mod metrics_upstream;
mod package;
