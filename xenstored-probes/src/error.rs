//! The daemon's one error type: what a request that fails gets.

use crate::wire::XsError;

/// Why a request failed: the error its reply carries, and a reason for
/// logs and the `response` probe (empty when the error says it all).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fail(pub XsError, pub &'static str);

impl From<XsError> for Fail {
    fn from(e: XsError) -> Fail {
        Fail(e, "")
    }
}
