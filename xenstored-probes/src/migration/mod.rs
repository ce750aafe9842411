//! Live update: the state a xenstored hands to the image it execs.
//! `stream.rs` is the migration stream C xenstored writes (and reads).

pub mod stream;
