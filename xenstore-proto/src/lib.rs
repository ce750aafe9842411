//! xenstore-proto: what the daemon, its tracers and its tests must agree
//! on, in one crate that builds nothing of the daemon (libc and memmap2
//! only).
//!
//! - [`wire`]: the xenstore wire format (header, message types, errors,
//!   size limits) of xen/include/public/io/xs_wire.h; [`frame`]: messages
//!   out of a byte stream and into one; [`exchange`]: one request and its
//!   reply over a blocking stream; [`ring`]: the shared page a
//!   guest's ring lives in, both ends' queues; [`sim`]: the files and
//!   sockets a simulated domain's two ends meet in.
//! - [`probe`]: the `xenstore` USDT provider's probe list and what each
//!   argument carries; [`packing`]: how several integers share one 64-bit
//!   argument, by named shift and width, with pack and unpack; [`peer`]:
//!   how `conn_open` describes the peer; [`stats`]: the records
//!   `stats_batch` carries; [`quantile`]: the one percentile; [`bpf`]: the C header the snooper's BPF
//!   programs include, generated from the rest.
//!
//! To add a message type: [`wire`]. To add a probe or a field: [`probe`] and
//! [`packing`], then xenstored-probes/src/xenstore.d and the scripts, which
//! tests/contract/scripts_contract.rs checks against this crate.

pub mod bpf;
pub mod c_struct;
pub mod exchange;
pub mod frame;
pub mod packing;
pub mod peer;
pub mod probe;
pub mod quantile;
pub mod reason;
pub mod ring;
pub mod sim;
pub mod stats;
pub mod wire;

pub use packing::{flag, Client, CutExtra, Field, Ident, RequestExtra, ResponseExtra};
pub use probe::{Extra, Probe, TxOutcome, PROVIDER, STR1_MAX, STRINGS_MAX};
pub use reason::Reason;
