//! xenstored-probes: a complete xenstore daemon with a USDT provider
//! (`xenstore`, declared in `xenstore.d`) in its request/response path.

pub mod children;
pub mod cnum;
pub mod connection;
pub mod daemon;
pub mod detached;
pub mod domain;
pub mod domid_map;
pub mod error;
pub mod frame;
pub mod home_filter;
pub mod inline_path;
pub mod listing;
pub mod listing_delta;
pub mod mentions;
pub mod migration;
pub mod node;
pub mod outstanding;
pub mod path;
pub mod perms;
pub mod poller;
pub mod probes;
pub mod quota;
pub mod record;
pub mod request;
pub mod ring;
pub mod sdt;
pub mod server;
pub mod service;
#[cfg(any(test, feature = "simulation"))]
pub mod sim;
pub mod slab;
pub mod stats_batch;
pub mod stopwatch;
pub mod store;
#[cfg(test)]
mod test_rng;
pub mod trace;
pub mod transaction;
pub mod transport;
pub mod tree;
pub mod turns;
pub mod unix;
pub mod update;
pub mod watch;
pub mod wire;
pub mod xen;
