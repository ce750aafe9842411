//! xenstore-snoop: live tracing of a running xenstored-shim through its
//! `xenstore` USDT probes, read by a BPF program through a BPF ring buffer,
//! or with tracefs uprobes and perf ring buffers.

pub mod attach;
pub mod capture;
pub mod cli;
pub mod cuts;
pub mod domains;
pub mod event;
pub mod filter;
pub mod follow;
pub mod metrics;
pub mod names;
pub mod output;
pub mod pairing;
pub mod paths;
pub mod record;
pub mod replay;
pub mod sdt;
pub mod semaphores;
pub mod session;
pub mod summary;
pub mod target;
pub mod timeline;
pub mod top;
pub mod trace_file;
