//! Live update: the state a xenstored hands to the image it execs.
//! `stream.rs` is the migration stream C xenstored writes (and reads);
//! `adopt.rs` takes over the fds and connections it lists (this image
//! the target); `handover.rs` writes it and execs (this image the source).
//! `oxenstored.rs` reads oxenstored's own dump into the same state.

pub mod adopt;
pub mod handover;
pub mod oxenstored;
pub mod stream;
