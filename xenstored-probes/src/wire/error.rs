//! The daemon's one error type: what a request that fails gets.

use crate::wire::XsError;
pub use xenstore_proto::Reason;

/// Why a request failed: the error its reply carries, and the contract's
/// reason for logs and the `response` probe (none when the error says it
/// all).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fail(pub XsError, pub Option<Reason>);

impl Fail {
    pub const fn new(error: XsError, reason: Reason) -> Fail {
        Fail(error, Some(reason))
    }

    /// The reason's name as the probes carry it ("" for none).
    pub fn reason_name(&self) -> &'static str {
        self.1.map_or("", Reason::name)
    }
}

impl From<XsError> for Fail {
    fn from(e: XsError) -> Fail {
        Fail(e, None)
    }
}
