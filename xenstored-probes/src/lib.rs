//! xenstored-probes: a complete xenstore daemon with a USDT provider
//! (`xenstore`, declared in `xenstore.d`) in its request/response path.
//!
//! The folders are layers: each uses only those declared before it below
//! (`scripts/module-graph` checks it). ARCHITECTURE.md says more of each.

// Layers, bottom first (scripts/module-graph checks the order):
#[cfg(test)]
mod test_rng;
// Logging to stderr, syslog or the journal, and the notable events.
pub mod log;
// The wire format: framing, parsing requests, errors, paths.
pub mod wire;
// The `xenstore` USDT probes and the classic trace file.
pub mod probes;
// The state a live update hands over, as data (C's stream, oxenstored's dump).
pub mod migration;
// The tree: nodes, permissions, transactions.
pub(crate) mod store;
// Watches and which of them an event fires.
pub(crate) mod watch;
// A client connection and the transports it runs over (Unix socket, ring).
pub mod conn;
// Executing requests, with no event loop: domains, quotas, every handler.
pub mod daemon;
// The event loop: readiness, fair turns, output; its simulation.
pub mod server;
// The daemon on a host: real Xen, the system service, live update's exec.
pub mod host;
