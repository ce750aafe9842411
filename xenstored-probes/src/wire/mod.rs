//! The xenstore wire format, owned by xenstore-proto; re-exported so the
//! daemon's `crate::wire::...` paths stay as they are.

pub(crate) mod c_number;
pub(crate) mod error;
pub mod frame;
pub(crate) mod path;
pub(crate) mod request;

pub use xenstore_proto::wire::*;
