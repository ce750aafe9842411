//! Live update: the state a xenstored hands to the image it execs, as
//! data. `stream.rs` is the migration stream C xenstored writes (and
//! reads), `oxenstored.rs` oxenstored's own dump read into the same state.
//! What a process does with it is update/'s.

pub mod oxenstored;
pub mod stream;
