//! xenstore-proto: what the daemon, its tracers and its tests must agree
//! on, in one dependency-free crate.
//!
//! - [`wire`]: the xenstore wire format (header, message types, errors,
//!   size limits) of xen/include/public/io/xs_wire.h.
//! - [`probe`]: the `xenstore` USDT provider's probe list and what each
//!   argument carries; [`packing`]: how several integers share one 64-bit
//!   argument, by named shift and width, with pack and unpack; [`peer`]:
//!   how `conn_open` describes the peer; [`stats`]: the records
//!   `stats_batch` carries.
//!
//! To add a message type: [`wire`]. To add a probe or a field: [`probe`] and
//! [`packing`], then xenstored-probes/src/xenstore.d and the scripts, which
//! tests/contract/scripts_contract.rs checks against this crate.

pub mod packing;
pub mod peer;
pub mod probe;
pub mod reason;
pub mod stats;
pub mod wire;

pub use packing::{flag, Client, CutExtra, Field, Ident, RequestExtra, ResponseExtra};
pub use probe::{Extra, Probe, TxOutcome, PROVIDER, STR1_MAX, STRINGS_MAX};
pub use reason::Reason;
