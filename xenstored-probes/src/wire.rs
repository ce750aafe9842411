//! The xenstore wire format, owned by xenstore-proto; re-exported so the
//! daemon's `crate::wire::...` paths stay as they are.

pub use xenstore_proto::wire::*;
