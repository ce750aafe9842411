//! Raw wire messages, for tests that send what no client would, framed by
//! the shared `xenstore_proto::wire::Header`.

use std::io::Read;
use xenstore_proto::wire::{Header, MsgType, HEADER_LEN};

/// One message: header, then payload.
pub fn message(ty: u32, req_id: u32, tx_id: u32, payload: &[u8]) -> Vec<u8> {
    let header = Header {
        ty,
        req_id,
        tx_id,
        len: payload.len() as u32,
    };
    [&header.encode()[..], payload].concat()
}

/// The next message that is not a watch event: its header and payload.
pub fn reply(s: &mut impl Read) -> (Header, Vec<u8>) {
    loop {
        let mut h = [0u8; HEADER_LEN];
        s.read_exact(&mut h).expect("a reply");
        let header = Header::decode(&h);
        let mut body = vec![0; header.len as usize];
        s.read_exact(&mut body).unwrap();
        if header.ty != MsgType::WatchEvent as u32 {
            return (header, body);
        }
    }
}
