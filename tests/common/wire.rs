//! Raw wire messages, for tests that send what no client would, framed by
//! xenstore-proto's framer.

use std::io::Read;
use std::time::{Duration, Instant};
use xenstore_guest::client::{Guest, Link};
pub use xenstore_proto::frame::message;
use xenstore_proto::frame::take_messages;
use xenstore_proto::wire::{Header, MsgType};

/// The next message that is not a watch event: its header and payload.
pub fn reply(s: &mut impl Read) -> (Header, Vec<u8>) {
    xenstore_proto::exchange::read_reply(s).expect("a reply")
}

/// The headers of the replies (watch events left out) a guest reads from
/// its ring until `want` have come, within TIMEOUT; `what` names the wait
/// in a failure.
pub fn ring_replies(guest: &mut Guest, want: usize, what: &str) -> Vec<Header> {
    let deadline = Instant::now() + super::TIMEOUT;
    let mut got = Vec::new();
    let mut wire = Vec::new();
    while got.len() < want {
        assert!(
            Instant::now() < deadline,
            "{what}: {} of {want} replies, then nothing",
            got.len()
        );
        let mut buf = [0u8; 1024];
        let n = guest.link().recv(&mut buf).unwrap();
        if n == 0 {
            guest.link().wait(Duration::from_millis(20)).unwrap();
            continue;
        }
        wire.extend_from_slice(&buf[..n]);
        let replies = take_messages(&mut wire).into_iter().map(|(h, _)| h);
        got.extend(replies.filter(|h| h.ty != MsgType::WatchEvent as u32));
    }
    got
}
