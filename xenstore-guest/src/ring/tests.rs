use std::sync::Arc;

use super::Client;
use xenstore_proto::wire::{Header, PAYLOAD_MAX};
use xenstored_probes::conn::ring::*;

fn pair() -> (Server, Client, Arc<Mapping>) {
    let page = Arc::new(Mapping::anonymous().unwrap());
    let client = Client::new(Box::new(page.clone()));
    let server = Server::new(Box::new(page.clone()));
    (server, client, page)
}

fn set_indices(c: &Client, req: u32, rsp: u32) {
    let i = c.interface();
    i.store(Field::ReqCons, req);
    i.store(Field::ReqProd, req);
    i.store(Field::RspCons, rsp);
    i.store(Field::RspProd, rsp);
}

fn message(ty: u32, payload: &[u8]) -> Vec<u8> {
    xenstore_proto::frame::message(ty, 7, 0, payload)
}

fn drain_server(s: &mut Server) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 64];
    loop {
        let n = s.read(&mut buf).unwrap();
        if n == 0 {
            return out;
        }
        out.extend_from_slice(&buf[..n]);
    }
}

#[test]
fn server_advertises_features_first() {
    let (_s, c, _p) = pair();
    assert_eq!(c.server_features(), FEATURE_RECONNECTION | FEATURE_ERROR);
    assert!(c.connected());
    assert_eq!(c.error(), ERROR_NONE);
}

#[test]
fn message_split_across_the_wrap() {
    let (mut s, c, page) = pair();
    set_indices(&c, 1000, 1010);
    let msg = message(2, b"device/vbd/0/state\0 and then some more bytes to cross");
    assert_eq!(c.write(&msg).unwrap(), msg.len());
    // The first 24 bytes sit at the end of the ring, the rest at its start.
    // SAFETY: the page is PAGE_SIZE bytes, mapped while `page` lives, and
    // nothing writes it during this read.
    let raw = unsafe { std::slice::from_raw_parts(page.ptr(), 1024) };
    assert_eq!(&raw[1000..1024], &msg[..24]);
    assert_eq!(&raw[..msg.len() - 24], &msg[24..]);
    assert_eq!(drain_server(&mut s), msg);

    let reply = message(2, &[b'x'; 100]);
    assert_eq!(s.write(&reply).unwrap(), reply.len());
    let mut got = vec![0u8; 200];
    let n = c.read(&mut got).unwrap();
    assert_eq!(&got[..n], &reply[..]);
    assert_eq!(
        c.interface().load(Field::RspCons),
        1010 + reply.len() as u32
    );
}

#[test]
fn partial_reads_and_a_full_queue() {
    let (_s, c, p) = pair();
    let stream: Vec<u8> = (0..3000u32).map(|i| (i * 7) as u8).collect();
    // Only a ring's worth fits until the server consumes.
    assert_eq!(c.write(&stream).unwrap(), RING_SIZE as usize);
    assert_eq!(c.write(&stream[1024..]).unwrap(), 0);
    let mut got = Vec::new();
    let mut sent = RING_SIZE as usize;
    let mut buf = [0u8; 7];
    while got.len() < stream.len() {
        let n = read_raw(&p, &mut buf);
        got.extend_from_slice(&buf[..n]);
        sent += c.write(&stream[sent..]).unwrap();
    }
    assert_eq!(got, stream);
}

/// Reads request bytes that are not xenstore messages, as the server's end
/// would with its framing bypassed.
fn read_raw(page: &Arc<Mapping>, buf: &mut [u8]) -> usize {
    Interface::new(Box::new(page.clone()))
        .consume(REQUESTS, buf)
        .unwrap()
}

#[test]
fn indices_wrap_past_u32_max() {
    let (mut s, c, _p) = pair();
    set_indices(&c, u32::MAX - 10, u32::MAX - 3);
    let msg = message(1, &[b'a'; 40]);
    assert_eq!(c.write(&msg).unwrap(), msg.len());
    assert_eq!(c.interface().load(Field::ReqProd), 45);
    assert_eq!(drain_server(&mut s), msg);
    assert_eq!(c.interface().load(Field::ReqCons), 45);

    let reply = message(1, &[b'b'; 2000]);
    assert_eq!(s.write(&reply).unwrap(), RING_SIZE as usize);
    let mut buf = vec![0u8; 4000];
    let n = c.read(&mut buf).unwrap();
    assert_eq!(n, RING_SIZE as usize);
    assert_eq!(s.write(&reply[n..]).unwrap(), reply.len() - n);
    let m = c.read(&mut buf[n..]).unwrap();
    assert_eq!(&buf[..n + m], &reply[..]);
    assert_eq!(c.interface().load(Field::RspCons), reply.len() as u32 - 4);
}

#[test]
fn bogus_indices_stop_the_ring() {
    let (mut s, c, _p) = pair();
    c.interface().store(Field::ReqProd, 2000);
    let mut buf = [0u8; 16];
    let err = s.read(&mut buf).unwrap_err();
    assert_eq!(
        err,
        RingError::BadIndex {
            cons: 0,
            prod: 2000
        }
    );
    assert_eq!(c.error(), ERROR_RINGIDX);
    // Stopped for good: nothing more is read or written, the guest is told.
    assert_eq!(s.read(&mut buf).unwrap_err(), err);
    assert_eq!(s.write(b"x").unwrap_err(), err);
    assert_eq!(
        c.write(b"x").unwrap_err(),
        RingError::Stopped {
            error: ERROR_RINGIDX
        }
    );

    // The server's own queue, scribbled on by the guest, is caught too.
    let (mut s, c, _p) = pair();
    c.interface().store(Field::RspCons, 5000);
    assert!(matches!(
        s.write(b"reply").unwrap_err(),
        RingError::BadIndex { .. }
    ));
    assert_eq!(c.error(), ERROR_RINGIDX);
}

#[test]
fn oversized_header_is_a_protocol_error() {
    let (mut s, c, _p) = pair();
    // A well-formed maximal message passes, header split over reads.
    let ok = message(11, &vec![b'v'; PAYLOAD_MAX]);
    let mut sent = 0;
    let mut got = Vec::new();
    let mut buf = [0u8; 5];
    while got.len() < ok.len() {
        sent += c.write(&ok[sent..]).unwrap();
        let n = s.read(&mut buf).unwrap();
        got.extend_from_slice(&buf[..n]);
    }
    assert_eq!(got, ok);

    let bad = Header {
        ty: 11,
        req_id: 1,
        tx_id: 0,
        len: PAYLOAD_MAX as u32 + 1,
    }
    .encode();
    c.write(&bad).unwrap();
    let mut buf = [0u8; 64];
    let err = s.read(&mut buf).unwrap_err();
    assert_eq!(
        err,
        RingError::TooLong {
            len: PAYLOAD_MAX as u32 + 1
        }
    );
    assert_eq!(c.error(), ERROR_PROTO);
    assert_eq!(
        c.read(&mut buf).unwrap_err(),
        RingError::Stopped { error: ERROR_PROTO }
    );
}

#[test]
fn reconnect_empties_queues_and_clears_the_error() {
    let (mut s, c, _p) = pair();
    set_indices(&c, 300, 400);
    c.write(&message(2, b"half")[..10]).unwrap();
    s.write(b"stale reply").unwrap();
    s.stop(RingError::TooLong { len: 9999 });

    c.request_reconnect().unwrap();
    assert!(!c.connected());
    assert!(s.reconnect_requested());
    // The old error stays visible to the guest until the server resets.
    assert_eq!(c.write(b"x").unwrap_err(), RingError::Stopped { error: 3 });
    s.reset();
    assert!(c.connected());
    assert_eq!(c.error(), ERROR_NONE);
    for f in [
        Field::ReqCons,
        Field::ReqProd,
        Field::RspCons,
        Field::RspProd,
    ] {
        assert_eq!(c.interface().load(f), 0, "{f:?}");
    }
    // A fresh packet boundary: the half message is forgotten.
    let msg = message(2, b"device\0");
    c.write(&msg).unwrap();
    assert_eq!(drain_server(&mut s), msg);
}

#[test]
fn concurrent_stream_keeps_order() {
    let (_s, c, p) = pair();
    set_indices(&c, u32::MAX - 5000, 0);
    const TOTAL: usize = 1 << 20;
    let writer = std::thread::spawn(move || {
        let stream: Vec<u8> = (0..TOTAL).map(|i| (i % 251) as u8).collect();
        let mut sent = 0;
        let mut chunk = 1;
        while sent < TOTAL {
            let end = (sent + chunk).min(TOTAL);
            sent += c.write(&stream[sent..end]).unwrap();
            chunk = chunk % 1500 + 13;
        }
    });
    let mut got = 0;
    let mut buf = [0u8; 333];
    while got < TOTAL {
        let n = read_raw(&p, &mut buf);
        for (k, b) in buf[..n].iter().enumerate() {
            assert_eq!(*b, ((got + k) % 251) as u8, "byte {}", got + k);
        }
        got += n;
    }
    writer.join().unwrap();
}

/// A hostile guest scribbling anywhere on the page never makes the server
/// panic or step outside the queues; it only ever stops the ring.
#[test]
fn scribbled_page_never_panics_the_server() {
    let (mut s, c, page) = pair();
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let fields = [
        Field::ReqCons,
        Field::ReqProd,
        Field::RspCons,
        Field::RspProd,
        Field::Connection,
        Field::Error,
    ];
    let mut buf = [0u8; 700];
    let mut stops = 0;
    for _ in 0..20_000 {
        let r = next();
        match r % 4 {
            0 => c
                .interface()
                .store(fields[(r >> 8) as usize % fields.len()], (r >> 32) as u32),
            // SAFETY: an offset inside the page, which lives as long as `page`;
            // scribbling on the queues is the point (the server must cope).
            1 => unsafe { *page.ptr().add((r >> 8) as usize % 2048) = (r >> 40) as u8 },
            2 => {
                let _ = c.write(&buf[..(r >> 8) as usize % buf.len()]);
            }
            _ => {}
        }
        if s.read(&mut buf).is_err() || s.write(&buf[..(r >> 16) as usize % 300]).is_err() {
            stops += 1;
            s.reset();
        }
    }
    assert!(stops > 0, "the scribbling never tripped a check");
}
