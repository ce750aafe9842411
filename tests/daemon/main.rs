//! The daemon end to end, no root needed: real clients on its socket, guests on simulated rings,
//! conformance with C xenstored and oxenstored, live update, running as a system daemon.
//! One test binary (a tier, as ripgrep's); each file a module; tests/README.md indexes them.

mod clients;
#[path = "../common/mod.rs"]
mod common;
mod conformance;
mod conformance_rings;
mod dropin;
mod fair_turns;
mod hostile_guest;
mod live_update;
mod mass_destroy;
mod pipelining;
mod ring;
mod robustness;
mod tx_serializable;
mod upstream_clients;
mod upstream_peer;
mod upstream_test_xenstore;
mod xenctrl_abi;
