//! Raw wire messages, for tests that send what no client would, framed by
//! xenstore-proto's framer.

use std::io::Read;
pub use xenstore_proto::frame::message;
use xenstore_proto::wire::Header;

/// The next message that is not a watch event: its header and payload.
pub fn reply(s: &mut impl Read) -> (Header, Vec<u8>) {
    xenstore_proto::exchange::read_reply(s).expect("a reply")
}
