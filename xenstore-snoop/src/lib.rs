//! xenstore-snoop: live tracing of a running xenstored-shim through its
//! `xenstore` USDT probes, read with tracefs uprobes and perf ring buffers.

pub mod cli;
pub mod event;
pub mod filter;
pub mod format;
pub mod output;
pub mod pairing;
pub mod perf;
pub mod sdt;
pub mod session;
pub mod summary;
pub mod target;
pub mod uprobe;
