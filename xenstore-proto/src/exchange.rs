//! One request and its reply over a blocking stream (a dom0 socket): for
//! tools and tests that ask a daemon a few things and need no watch
//! queue. A fuller client (rings, watch events kept) is xenstore-guest's
//! `Xs`.

use std::io::{self, Read, Write};

use crate::frame::{message, read_message};
use crate::wire::{Header, MsgType, PAYLOAD_MAX};

/// The next message that is not a watch event: the reply to the oldest
/// request outstanding (a daemon answers a connection's requests in
/// order). A payload over PAYLOAD_MAX is InvalidData.
pub fn read_reply(r: &mut impl Read) -> io::Result<(Header, Vec<u8>)> {
    loop {
        let (header, payload) = read_message(r, PAYLOAD_MAX)?;
        if header.ty != MsgType::WatchEvent as u32 {
            return Ok((header, payload));
        }
    }
}

/// Sends request `ty` with `payload` (outside a transaction) and waits for
/// its reply: Ok(the payload), or Err(the error's name, as `EACCES`).
pub fn ask(
    s: &mut (impl Read + Write),
    ty: MsgType,
    req_id: u32,
    payload: &[u8],
) -> io::Result<Result<Vec<u8>, String>> {
    s.write_all(&message(ty as u32, req_id, 0, payload))?;
    let (header, body) = read_reply(s)?;
    if header.ty == MsgType::Error as u32 {
        let name = String::from_utf8_lossy(body.strip_suffix(&[0]).unwrap_or(&body));
        return Ok(Err(name.into_owned()));
    }
    Ok(Ok(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scripted daemon: what it will send, and what it was sent.
    struct Script {
        replies: io::Cursor<Vec<u8>>,
        sent: Vec<u8>,
    }

    impl Read for Script {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.replies.read(buf)
        }
    }

    impl Write for Script {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.sent.write(buf)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_reply_is_found_behind_watch_events_and_an_error_named() {
        let mut replies = message(MsgType::WatchEvent as u32, 0, 0, b"/a\0tok\0");
        replies.extend(message(MsgType::Read as u32, 5, 0, b"v"));
        replies.extend(message(MsgType::Error as u32, 6, 0, b"ENOENT\0"));
        let mut daemon = Script {
            replies: io::Cursor::new(replies),
            sent: Vec::new(),
        };
        let got = ask(&mut daemon, MsgType::Read, 5, b"/a\0").unwrap();
        assert_eq!(got, Ok(b"v".to_vec()));
        assert_eq!(daemon.sent, message(MsgType::Read as u32, 5, 0, b"/a\0"));
        let got = ask(&mut daemon, MsgType::Read, 6, b"/b\0").unwrap();
        assert_eq!(got, Err("ENOENT".to_string()));
        let closed = ask(&mut daemon, MsgType::Read, 7, b"/c\0").unwrap_err();
        assert_eq!(closed.kind(), io::ErrorKind::UnexpectedEof);
    }
}
