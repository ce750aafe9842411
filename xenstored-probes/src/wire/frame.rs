//! Framing, owned by xenstore-proto (one framer for the daemon, the guest,
//! the snooper and the tests); re-exported so `crate::frame::...` paths
//! stay as they are.

pub use xenstore_proto::frame::*;
