//! The contracts between the parts, and docs that must stay true: probes, scripts, reasons,
//! README's examples, the demo, every path the docs name.
//! One test binary (a tier, as ripgrep's); each file a module; tests/README.md indexes them.

#[path = "../common/mod.rs"]
mod common;
mod demo;
mod docs;
mod probe_notes;
mod readme;
mod reason_contract;
mod scripts_contract;
