//! The daemon's behaviour, request by request: every test drives
//! `Daemon::handle` as the event loop does and reads what it queued.

use super::*;
use crate::daemon::direct::{Idle, NoBackend};
use crate::wire::HEADER_LEN;

/// A new connection of `domid`.
fn open(d: &mut Daemon, domid: u32, pid: u32, peer: &'static str) -> u32 {
    d.open(domid, Box::new(Idle { pid, peer }))
}

fn daemon() -> Daemon {
    Daemon::new(Quotas::default(), Box::new(NoBackend))
}

/// Everything queued for `id` since the last call: (type, tx_id, payload).
fn drain(d: &mut Daemon, id: u32) -> Vec<(u32, u32, Vec<u8>)> {
    let Some(c) = d.conn_mut(id) else {
        return vec![];
    };
    let mut out = Vec::new();
    let mut b = c.pending();
    while b.len() >= HEADER_LEN {
        let h = Header::decode(b[..HEADER_LEN].try_into().unwrap());
        let end = HEADER_LEN + h.len as usize;
        out.push((h.ty, h.tx_id, b[HEADER_LEN..end].to_vec()));
        b = &b[end..];
    }
    let n = c.pending().len();
    c.consumed(n, &mut SpareOutput::default());
    out
}

fn call(d: &mut Daemon, id: u32, ty: MsgType, tx: u32, payload: &[u8]) -> (u32, Vec<u8>) {
    let h = Header {
        ty: ty as u32,
        req_id: 9,
        tx_id: tx,
        len: payload.len() as u32,
    };
    d.handle(id, h, payload);
    let (evs, replies): (Vec<_>, Vec<_>) = drain(d, id)
        .into_iter()
        .partition(|m| m.0 == MsgType::WatchEvent as u32);
    STASH.with(|s| s.borrow_mut().entry(id).or_default().extend(evs));
    assert_eq!(replies.len(), 1, "{replies:?}");
    let (t, _, p) = replies.into_iter().next().unwrap();
    (t, p)
}

fn ok(d: &mut Daemon, id: u32, ty: MsgType, payload: &[u8]) -> Vec<u8> {
    let (t, p) = call(d, id, ty, 0, payload);
    assert_eq!(t, ty as u32, "{}", String::from_utf8_lossy(&p));
    p
}

fn err(d: &mut Daemon, id: u32, ty: MsgType, tx: u32, payload: &[u8]) -> String {
    let (t, p) = call(d, id, ty, tx, payload);
    assert_eq!(t, MsgType::Error as u32, "{}", String::from_utf8_lossy(&p));
    String::from_utf8(p)
        .unwrap()
        .trim_end_matches('\0')
        .to_string()
}

type Message = (u32, u32, Vec<u8>);

thread_local! {
    /// Watch events `call` read past, per connection.
    static STASH: std::cell::RefCell<std::collections::HashMap<u32, Vec<Message>>> =
        Default::default();
}

fn events(d: &mut Daemon, id: u32) -> Vec<String> {
    let mut all = STASH.with(|s| s.borrow_mut().remove(&id).unwrap_or_default());
    all.extend(drain(d, id));
    all.into_iter()
        .filter(|m| m.0 == MsgType::WatchEvent as u32)
        .map(|m| {
            String::from_utf8_lossy(&m.2)
                .replace('\0', " ")
                .trim_end()
                .to_string()
        })
        .collect()
}

/// dom0 connection, domain 6 introduced with /local/domain/6 owned by it,
/// and a connection of domain 6.
fn with_guest() -> (Daemon, u32, u32) {
    let mut d = daemon();
    let dom0 = open(&mut d, 0, 100, "test");
    ok(&mut d, dom0, MsgType::Introduce, b"6\x001\x001\x00");
    ok(&mut d, dom0, MsgType::Mkdir, b"/local/domain/6\0");
    ok(&mut d, dom0, MsgType::SetPerms, b"/local/domain/6\0n6\0");
    let guest = open(&mut d, 6, 0, "guest");
    (d, dom0, guest)
}

#[test]
fn unknown_types_privileged_ops_and_unknown_transactions() {
    let (mut d, dom0, guest) = with_guest();
    assert_eq!(err(&mut d, dom0, MsgType::Read, 0, b"/nope\0"), "ENOENT");
    let h = Header {
        ty: 20,
        req_id: 1,
        tx_id: 0,
        len: 0,
    };
    d.handle(dom0, h, b"");
    assert_eq!(drain(&mut d, dom0)[0].2, b"ENOSYS\0");
    assert_eq!(
        err(&mut d, guest, MsgType::Introduce, 0, b"7\x001\x001\x00"),
        "EACCES"
    );
    assert_eq!(
        err(&mut d, guest, MsgType::Control, 0, b"check\0"),
        "EACCES"
    );
    assert_eq!(err(&mut d, dom0, MsgType::Read, 42, b"/tool\0"), "ENOENT");
    // WATCH ignores the tx id as upstream (XS_FLAG_NOTID)
    let (t, _) = call(&mut d, dom0, MsgType::Watch, 42, b"/tool\0t\0");
    assert_eq!(t, MsgType::Watch as u32);
}

#[test]
fn control_check_fails_on_a_corrupt_store() {
    let mut d = daemon();
    let dom0 = open(&mut d, 0, 100, "test");
    assert_eq!(ok(&mut d, dom0, MsgType::Control, b"check\0"), b"OK\0");
    // A node removed behind its parent's back: /tool still lists it.
    assert!(d.store.unlink("/tool/xenstored"));
    assert_eq!(err(&mut d, dom0, MsgType::Control, 0, b"check\0"), "EIO");
}

#[test]
fn guests_use_relative_paths_and_meet_permissions() {
    let (mut d, dom0, guest) = with_guest();
    ok(&mut d, guest, MsgType::Write, b"data/x\0v");
    assert_eq!(
        ok(&mut d, dom0, MsgType::Read, b"/local/domain/6/data/x\0"),
        b"v"
    );
    assert_eq!(ok(&mut d, guest, MsgType::GetPerms, b"data/x\0"), b"n6\0");
    assert_eq!(err(&mut d, guest, MsgType::Read, 0, b"/tool\0"), "EACCES");
    assert_eq!(err(&mut d, guest, MsgType::Write, 0, b"/x\0v"), "EACCES");
    // a guest cannot give its node away, dom0 can
    assert_eq!(
        err(&mut d, guest, MsgType::SetPerms, 0, b"data/x\0n0\0"),
        "EPERM"
    );
    ok(&mut d, guest, MsgType::SetPerms, b"data/x\0n6\0r7\0");
    assert_eq!(
        ok(&mut d, guest, MsgType::GetDomainPath, b"6\0"),
        b"/local/domain/6\0"
    );
}

#[test]
fn watches_fire_only_for_readers_with_relative_paths_for_relative_watches() {
    let (mut d, dom0, guest) = with_guest();
    ok(&mut d, guest, MsgType::Watch, b"data\0rel\0");
    ok(&mut d, guest, MsgType::Watch, b"/tool\0abs\0");
    assert_eq!(
        events(&mut d, guest),
        ["data rel", "/tool abs"],
        "initial events"
    );
    ok(&mut d, dom0, MsgType::Write, b"/local/domain/6/data/y\0z");
    assert_eq!(events(&mut d, guest), ["data/y rel"]);
    ok(&mut d, dom0, MsgType::Write, b"/tool/secret\0z");
    assert_eq!(
        events(&mut d, guest),
        Vec::<String>::new(),
        "unreadable for domain 6"
    );
    ok(&mut d, dom0, MsgType::SetPerms, b"/tool/secret\0n0\0r6\0");
    assert_eq!(events(&mut d, guest), ["/tool/secret abs"]);
    // RM: the removed node and each descendant's exact watchers
    ok(&mut d, dom0, MsgType::Watch, b"/a/b/c\0deep\0");
    ok(&mut d, dom0, MsgType::Write, b"/a/b/c\0v");
    ok(&mut d, dom0, MsgType::Watch, b"/a\0top\0");
    events(&mut d, dom0);
    ok(&mut d, dom0, MsgType::Rm, b"/a/b\0");
    assert_eq!(events(&mut d, dom0), ["/a/b/c deep", "/a/b top"]);
    assert_eq!(err(&mut d, dom0, MsgType::Watch, 0, b"/a\0top\0"), "EEXIST");
    ok(&mut d, dom0, MsgType::Unwatch, b"/a\0top\0");
    assert_eq!(
        err(&mut d, dom0, MsgType::Unwatch, 0, b"/a\0top\0"),
        "ENOENT"
    );
}

#[test]
fn transactions_see_own_writes_fire_on_commit_and_conflict() {
    let mut d = daemon();
    let a = open(&mut d, 0, 1, "a");
    let b = open(&mut d, 0, 2, "b");
    ok(&mut d, b, MsgType::Watch, b"/t\0w\0");
    events(&mut d, b);
    let tx = ok(&mut d, a, MsgType::TransactionStart, b"\0");
    assert_eq!(tx, b"1\0");
    assert_eq!(
        call(&mut d, a, MsgType::Write, 1, b"/t/x\0in-tx").0,
        MsgType::Write as u32
    );
    assert_eq!(call(&mut d, a, MsgType::Read, 1, b"/t/x\0").1, b"in-tx");
    assert_eq!(err(&mut d, b, MsgType::Read, 0, b"/t/x\0"), "ENOENT");
    assert_eq!(
        events(&mut d, b),
        Vec::<String>::new(),
        "nothing before commit"
    );
    assert_eq!(err(&mut d, a, MsgType::TransactionStart, 1, b"\0"), "EBUSY");
    assert_eq!(
        call(&mut d, a, MsgType::TransactionEnd, 1, b"T\0").1,
        b"OK\0"
    );
    assert_eq!(events(&mut d, b), ["/t/x w"]);
    // conflict: b changes what a's transaction read
    assert_eq!(ok(&mut d, a, MsgType::TransactionStart, b"\0"), b"2\0");
    call(&mut d, a, MsgType::Read, 2, b"/t/x\0");
    call(&mut d, a, MsgType::Write, 2, b"/t/y\x001");
    ok(&mut d, b, MsgType::Write, b"/t/x\0changed");
    assert_eq!(err(&mut d, a, MsgType::TransactionEnd, 2, b"T\0"), "EAGAIN");
    assert_eq!(err(&mut d, a, MsgType::Read, 0, b"/t/y\0"), "ENOENT");
    assert_eq!(err(&mut d, a, MsgType::TransactionEnd, 2, b"T\0"), "ENOENT");
    // abort discards
    ok(&mut d, a, MsgType::TransactionStart, b"\0");
    call(&mut d, a, MsgType::Write, 3, b"/t/z\0");
    assert_eq!(
        call(&mut d, a, MsgType::TransactionEnd, 3, b"F\0").1,
        b"OK\0"
    );
    assert_eq!(err(&mut d, a, MsgType::Read, 0, b"/t/z\0"), "ENOENT");
    assert!(d.store.check().is_empty());
}

#[test]
fn guest_quotas_apply_and_dom0_is_exempt() {
    let (mut d, dom0, guest) = with_guest();
    ok(&mut d, dom0, MsgType::Control, b"quota\0set\0nodes\x003\0");
    ok(
        &mut d,
        dom0,
        MsgType::Control,
        b"quota\0set\0watches\x001\0",
    );
    ok(
        &mut d,
        dom0,
        MsgType::Control,
        b"quota\0set\0transactions\x001\0",
    );
    // /local/domain/6 is the first of its 3 nodes
    ok(&mut d, guest, MsgType::Write, b"a/b\0");
    assert_eq!(err(&mut d, guest, MsgType::Write, 0, b"c\0"), "ENOSPC");
    ok(&mut d, dom0, MsgType::Write, b"/local/domain/6/c\0");
    ok(&mut d, guest, MsgType::Watch, b"a\0t\0");
    assert_eq!(err(&mut d, guest, MsgType::Watch, 0, b"c\0t\0"), "E2BIG");
    ok(&mut d, guest, MsgType::TransactionStart, b"\0");
    assert_eq!(
        err(&mut d, guest, MsgType::TransactionStart, 0, b"\0"),
        "ENOSPC"
    );
    let perms = b"a\0n6\0r1\0r2\0r3\0r4\0r5\0";
    assert_eq!(err(&mut d, guest, MsgType::SetPerms, 0, perms), "ENOSPC");
    let big = [b"a\0".as_slice(), &[b'x'; 2048]].concat();
    assert_eq!(err(&mut d, guest, MsgType::Write, 0, &big), "ENOSPC");
    let big = [b"/big\0".as_slice(), &[b'x'; 4000]].concat();
    ok(&mut d, dom0, MsgType::Write, &big);
}

#[test]
fn one_request_sends_an_identical_event_once() {
    let mut d = daemon();
    let a = open(&mut d, 0, 1, "a");
    ok(&mut d, a, MsgType::Watch, b"/x\0t\0");
    ok(&mut d, a, MsgType::Watch, b"/x/y\0t\0");
    ok(&mut d, a, MsgType::Watch, b"/x/y\0u\0");
    events(&mut d, a);
    ok(&mut d, a, MsgType::Write, b"/x/y\0v");
    assert_eq!(events(&mut d, a), ["/x/y t", "/x/y u"]);
    ok(&mut d, a, MsgType::Write, b"/x/y\0w");
    assert_eq!(events(&mut d, a), ["/x/y t", "/x/y u"], "per request");
}

/// Message types `id` gets for its RELEASE of `domid`, in order.
fn release_order(d: &mut Daemon, id: u32, domid: &[u8]) -> Vec<u32> {
    let h = Header {
        ty: MsgType::Release as u32,
        req_id: 1,
        tx_id: 0,
        len: domid.len() as u32,
    };
    d.handle(id, h, domid);
    drain(d, id).into_iter().map(|m| m.0).collect()
}

#[test]
fn release_event_precedes_the_reply_unless_the_ring_is_next() {
    let (ev, rel) = (MsgType::WatchEvent as u32, MsgType::Release as u32);
    let mut d = daemon();
    let a = open(&mut d, 0, 1, "a");
    ok(&mut d, a, MsgType::Introduce, b"4\x001\x001\0");
    let b = open(&mut d, 0, 2, "b");
    for c in [a, b] {
        ok(&mut d, c, MsgType::Watch, b"@releaseDomain\0r\0");
        events(&mut d, c);
    }
    // domain 4's ring connection comes right after a
    assert_eq!(release_order(&mut d, a, b"4\0"), [rel, ev]);
    // now b comes between a and the ring
    ok(&mut d, a, MsgType::Introduce, b"4\x001\x001\0");
    assert_eq!(release_order(&mut d, a, b"4\0"), [ev, rel]);
    events(&mut d, b);
    ok(&mut d, b, MsgType::Introduce, b"4\x001\x001\0");
    assert_eq!(release_order(&mut d, b, b"4\0"), [rel, ev]);
    ok(&mut d, b, MsgType::Introduce, b"4\x001\x001\0");
    events(&mut d, a);
    assert_eq!(release_order(&mut d, a, b"4\0"), [ev, rel]);
}

#[test]
fn release_closes_the_domain_and_removes_what_it_owned() {
    let (mut d, dom0, guest) = with_guest();
    ok(&mut d, guest, MsgType::Write, b"x\0");
    ok(&mut d, guest, MsgType::TransactionStart, b"\0");
    ok(&mut d, dom0, MsgType::Watch, b"@releaseDomain\0r\0");
    ok(&mut d, dom0, MsgType::Watch, b"/local\0l\0");
    events(&mut d, dom0);
    assert_eq!(
        ok(&mut d, dom0, MsgType::IsDomainIntroduced, b"6\0"),
        b"T\0"
    );
    ok(&mut d, dom0, MsgType::Release, b"6\0");
    assert!(d.conn(guest).is_none());
    assert_eq!(d.effects.closed.len(), 1, "the guest's transport");
    assert_eq!(d.effects.released, [6]);
    assert_eq!(
        events(&mut d, dom0),
        // descendants of a removed node only fire exact watches
        ["/local/domain/6 l", "@releaseDomain r"]
    );
    assert_eq!(
        err(&mut d, dom0, MsgType::Read, 0, b"/local/domain/6\0"),
        "ENOENT"
    );
    assert_eq!(
        ok(&mut d, dom0, MsgType::IsDomainIntroduced, b"6\0"),
        b"F\0"
    );
    assert_eq!(err(&mut d, dom0, MsgType::Release, 0, b"6\0"), "ENOENT");
    assert_eq!(err(&mut d, dom0, MsgType::Release, 0, b"0\0"), "EINVAL");
    assert!(d.store.check().is_empty());
}

#[test]
fn hypervisor_news_announces_shutdowns_once_and_releases_the_dead() {
    let (mut d, dom0, guest) = with_guest();
    ok(&mut d, guest, MsgType::TransactionStart, b"\0");
    ok(&mut d, dom0, MsgType::Watch, b"@releaseDomain\0r\0");
    events(&mut d, dom0);
    let news = |shut_down: &[u32], dead: &[u32]| crate::conn::transport::DomainChanges {
        shut_down: shut_down.to_vec(),
        dead: dead.to_vec(),
    };
    d.domains_changed(&news(&[6], &[]));
    assert_eq!(events(&mut d, dom0), ["@releaseDomain r"]);
    assert_eq!(d.guests(), [(6, true)]);
    assert!(d.conn(guest).is_some(), "a shut-down guest keeps its ring");
    ok(&mut d, dom0, MsgType::Resume, b"6\0");
    assert_eq!(d.guests(), [(6, false)]);
    d.domains_changed(&news(&[], &[6]));
    assert!(d.conn(guest).is_none());
    assert_eq!(d.effects.closed.len(), 1, "the guest's transport");
    assert_eq!(d.effects.released, [6]);
    assert_eq!(events(&mut d, dom0), ["@releaseDomain r"]);
    assert!(d.guests().is_empty());
    // news of a domain already gone changes nothing
    d.domains_changed(&news(&[6], &[6]));
    assert!(events(&mut d, dom0).is_empty());
}

/// Domains that die together are released together: every one's nodes
/// and permissions go, and a watcher hears @releaseDomain once.
#[test]
fn domains_dying_together_fire_release_domain_once() {
    let (mut d, dom0, _guest) = with_guest();
    for id in [7u32, 8] {
        ok(
            &mut d,
            dom0,
            MsgType::Introduce,
            format!("{id}\x001\x001\x00").as_bytes(),
        );
        let home = format!("/local/domain/{id}\0");
        ok(&mut d, dom0, MsgType::Mkdir, home.as_bytes());
        ok(
            &mut d,
            dom0,
            MsgType::SetPerms,
            format!("{home}n{id}\0").as_bytes(),
        );
        open(&mut d, id, 0, "guest");
    }
    ok(&mut d, dom0, MsgType::Mkdir, b"/shared\0");
    ok(&mut d, dom0, MsgType::SetPerms, b"/shared\0n0\0r7\0r9\0");
    ok(&mut d, dom0, MsgType::Watch, b"@releaseDomain\0r\0");
    events(&mut d, dom0);
    d.domains_changed(&crate::conn::transport::DomainChanges {
        shut_down: vec![],
        dead: vec![8, 6, 8],
    });
    assert_eq!(events(&mut d, dom0), ["@releaseDomain r"]);
    assert_eq!(d.guests(), [(7, false)]);
    let mut released = d.effects.released.clone();
    released.sort_unstable();
    assert_eq!(released, [6, 8]);
    assert!(d.store.node("/local/domain/6").is_none());
    assert!(d.store.node("/local/domain/8").is_none());
    assert!(d.store.node("/local/domain/7").is_some());
    // 7 still reads /shared; 9 was never introduced and keeps its entry
    let perms = ok(&mut d, dom0, MsgType::GetPerms, b"/shared\0");
    assert_eq!(perms, b"n0\0r7\0r9\0");
    assert!(d.store.check().is_empty());
}

#[test]
fn set_target_gives_a_device_model_its_targets_rights() {
    let (mut d, dom0, guest) = with_guest();
    ok(&mut d, guest, MsgType::Write, b"private\0secret");
    ok(&mut d, dom0, MsgType::Introduce, b"7\x001\x001\x00");
    let dm = open(&mut d, 7, 0, "device model");
    assert_eq!(
        err(&mut d, dm, MsgType::Read, 0, b"/local/domain/6/private\0"),
        "EACCES"
    );
    assert_eq!(
        err(&mut d, dm, MsgType::SetTarget, 0, b"7\x006\x00"),
        "EACCES"
    );
    assert_eq!(
        err(&mut d, dom0, MsgType::SetTarget, 0, b"7\x009\x00"),
        "ENOENT"
    );
    ok(&mut d, dom0, MsgType::SetTarget, b"7\x006\x00");
    assert_eq!(
        ok(&mut d, dm, MsgType::Read, b"/local/domain/6/private\0"),
        b"secret"
    );
    ok(
        &mut d,
        dm,
        MsgType::Write,
        b"/local/domain/6/private\0changed",
    );
    // and connections opened later inherit it
    let dm2 = open(&mut d, 7, 0, "device model 2");
    assert_eq!(
        ok(&mut d, dm2, MsgType::Read, b"/local/domain/6/private\0"),
        b"changed"
    );
}

/// The target's death ends a device model's rights over it: a new domain
/// with the target's id is not its target, for connections already open
/// or opened later.
#[test]
fn a_dead_targets_rights_leave_its_device_model() {
    let (mut d, dom0, _guest) = with_guest();
    ok(&mut d, dom0, MsgType::Introduce, b"7\x001\x001\x00");
    let dm = open(&mut d, 7, 0, "device model");
    ok(&mut d, dom0, MsgType::SetTarget, b"7\x006\x00");
    d.domains_changed(&crate::conn::transport::DomainChanges {
        shut_down: vec![],
        dead: vec![6],
    });
    ok(&mut d, dom0, MsgType::Introduce, b"6\x001\x001\x00");
    ok(&mut d, dom0, MsgType::Write, b"/local/domain/6/new\0v");
    ok(
        &mut d,
        dom0,
        MsgType::SetPerms,
        b"/local/domain/6/new\0n6\0",
    );
    let later = open(&mut d, 7, 0, "device model, after");
    for c in [dm, later] {
        assert_eq!(
            err(&mut d, c, MsgType::Read, 0, b"/local/domain/6/new\0"),
            "EACCES"
        );
    }
    assert!(d.store.check().is_empty());
}

#[test]
fn a_reused_domid_inherits_no_rights() {
    let (mut d, dom0, guest) = with_guest();
    ok(&mut d, dom0, MsgType::Write, b"/shared\0v");
    ok(&mut d, dom0, MsgType::SetPerms, b"/shared\0n0\0r6\0");
    assert_eq!(ok(&mut d, guest, MsgType::Read, b"/shared\0"), b"v");
    ok(&mut d, dom0, MsgType::Release, b"6\0");
    ok(&mut d, dom0, MsgType::Introduce, b"6\x001\x001\x00");
    let again = open(&mut d, 6, 0, "new guest");
    assert_eq!(err(&mut d, again, MsgType::Read, 0, b"/shared\0"), "EACCES");
    assert_eq!(
        ok(&mut d, dom0, MsgType::GetPerms, b"/shared\0"),
        b"n0\0r6\0"
    );
}

#[test]
fn hostile_requests_never_panic_nor_corrupt_the_store() {
    let (mut d, dom0, guest) = with_guest();
    let mut below = crate::test_rng::below(0x9e3779b97f4a7c15u64);
    let words: [&[u8]; 12] = [
        b"/",
        b"/a",
        b"a",
        b"@releaseDomain",
        b"\0",
        b"T",
        b"n0",
        b"r6",
        b"6",
        b"-1",
        b"//",
        b"\xff",
    ];
    for _ in 0..20000 {
        let ty = below(30) as u32;
        let mut payload = Vec::new();
        for _ in 0..below(5) {
            payload.extend_from_slice(words[below(12) as usize]);
            if below(3) != 0 {
                payload.push(0);
            }
        }
        let conn = if below(2) == 0 { dom0 } else { guest };
        let h = Header {
            ty,
            req_id: 1,
            tx_id: below(4) as u32,
            len: payload.len() as u32,
        };
        if ty == MsgType::Release as u32 || ty == MsgType::ResetWatches as u32 {
            continue;
        }
        d.handle(conn, h, &payload);
        drain(&mut d, dom0);
        drain(&mut d, guest);
    }
    assert!(d.store.check().is_empty(), "{:?}", d.store.check());
}

/// A payload that makes `execute` panic, as a handler bug would.
pub(super) const INJECT_PANIC: &[u8] = b"\0inject a panic\0";

#[test]
fn a_panicking_handler_is_answered_eio_and_the_daemon_goes_on() {
    let (mut d, dom0, guest) = with_guest();
    ok(&mut d, dom0, MsgType::Write, b"/before\0kept");
    assert_eq!(err(&mut d, guest, MsgType::Read, 0, INJECT_PANIC), "EIO");
    // Every client is still served, the store intact.
    assert_eq!(ok(&mut d, dom0, MsgType::Read, b"/before\0"), b"kept");
    ok(&mut d, guest, MsgType::Write, b"data/after\0x");
    assert_eq!(ok(&mut d, dom0, MsgType::Control, b"check\0"), b"OK\0");
}

#[test]
fn transaction_nodes_quota_is_checked_at_each_access_and_memory_stays_bounded() {
    let (mut d, dom0, guest) = with_guest();
    ok(
        &mut d,
        dom0,
        MsgType::Control,
        b"quota\0set\0transaction-nodes\x004\0",
    );
    let tx: u32 = String::from_utf8(ok(&mut d, guest, MsgType::TransactionStart, b"\0"))
        .unwrap()
        .trim_end_matches('\0')
        .parse()
        .unwrap();
    // A read of a missing node touches it and its parent: ENOSPC comes
    // once four distinct nodes are touched, and stays for new nodes.
    let answers: Vec<String> = (0..20_000)
        .map(|n| {
            err(
                &mut d,
                guest,
                MsgType::Read,
                tx,
                format!("missing/{n}\0").as_bytes(),
            )
        })
        .collect();
    let first_refused = answers.iter().position(|a| a == "ENOSPC").unwrap();
    assert!(
        first_refused > 0 && first_refused < 4,
        "{:?}",
        &answers[..5]
    );
    assert!(answers[..first_refused].iter().all(|a| a == "ENOENT"));
    assert!(answers[first_refused..].iter().all(|a| a == "ENOSPC"));
    // Nothing past the quota was kept.
    let t = &d.conn(guest).unwrap().transactions[&tx];
    assert_eq!(t.accessed(), 4);
    // Nodes it touched already still answer; the commit fails, as upstream.
    assert_eq!(
        err(&mut d, guest, MsgType::Read, tx, b"missing/0\0"),
        "ENOENT"
    );
    assert_eq!(
        err(&mut d, guest, MsgType::TransactionEnd, tx, b"T\0"),
        "ENOMEM"
    );
    // dom0 has no such quota.
    let (_, reply) = call(&mut d, dom0, MsgType::TransactionStart, 0, b"\0");
    let tx0: u32 = String::from_utf8(reply)
        .unwrap()
        .trim_end_matches('\0')
        .parse()
        .unwrap();
    for n in 0..10 {
        let path = format!("/missing/{n}\0");
        assert_eq!(
            err(&mut d, dom0, MsgType::Read, tx0, path.as_bytes()),
            "ENOENT"
        );
    }
    let (ty, _) = call(&mut d, dom0, MsgType::TransactionEnd, tx0, b"T\0");
    assert_eq!(ty, MsgType::TransactionEnd as u32);
}

/// `CONTROL quota <domid>`'s value for `name`.
fn quota_usage(d: &mut Daemon, dom0: u32, domid: u32, name: &str) -> usize {
    let text = ok(
        d,
        dom0,
        MsgType::Control,
        format!("quota\0{domid}\0").as_bytes(),
    );
    let text = String::from_utf8(text).unwrap();
    let line = text.lines().find(|l| l.starts_with(name)).unwrap();
    line.split(':').nth(1).unwrap().trim().parse().unwrap()
}

#[test]
fn memory_is_counted_as_c_xenstored_counts_it() {
    let (mut d, dom0, guest) = with_guest();
    // C xenstored 4.17 said 87 for these two nodes: key + record each.
    ok(&mut d, dom0, MsgType::Write, b"/a/b\x000123456789");
    ok(&mut d, dom0, MsgType::Write, b"/a/b/c\0y");
    ok(&mut d, dom0, MsgType::SetPerms, b"/a/b\0n5\0");
    ok(&mut d, dom0, MsgType::SetPerms, b"/a/b/c\0n5\0");
    assert_eq!(d.memory(5), 87);
    // domain 6: its home (key 15 + record 32), then a watch (path and
    // token) and a transaction's copies count too
    let home = 15 + 32;
    assert_eq!(quota_usage(&mut d, dom0, 6, "memory"), home);
    ok(&mut d, guest, MsgType::Watch, b"data\0tok\0");
    events(&mut d, guest);
    let watch = "/local/domain/6/data".len() + 3;
    assert_eq!(quota_usage(&mut d, dom0, 6, "memory"), home + watch);
    let tx = ok(&mut d, guest, MsgType::TransactionStart, b"\0");
    let tx: u32 = String::from_utf8_lossy(&tx)
        .trim_end_matches('\0')
        .parse()
        .unwrap();
    let (t, _) = call(&mut d, guest, MsgType::Write, tx, b"data\0v");
    assert_eq!(t, MsgType::Write as u32);
    assert!(quota_usage(&mut d, dom0, 6, "memory") > home + watch);
    assert_eq!(
        call(&mut d, guest, MsgType::TransactionEnd, tx, b"F\0").0,
        MsgType::TransactionEnd as u32
    );
    assert_eq!(quota_usage(&mut d, dom0, 6, "memory"), home + watch);
    assert!(d.store.check().is_empty(), "{:?}", d.store.check());
}

#[test]
fn memory_quota_refuses_writes_watches_and_big_replies() {
    let (mut d, dom0, guest) = with_guest();
    ok(
        &mut d,
        dom0,
        MsgType::Control,
        b"quota\0set\0memory\x00400\0",
    );
    let big = [b"a\0".as_slice(), &[b'x'; 200]].concat();
    ok(&mut d, guest, MsgType::Write, &big);
    // a second node would pass 400 bytes: refused as C does (EIO), the
    // probe reason says which quota
    let again = [b"b\0".as_slice(), &[b'x'; 200]].concat();
    assert_eq!(err(&mut d, guest, MsgType::Write, 0, &again), "EIO");
    assert_eq!(
        err(&mut d, guest, MsgType::Mkdir, 0, b"c/d/e/f/g/h/i\0"),
        "EIO"
    );
    assert_eq!(err(&mut d, guest, MsgType::Read, 0, b"b\0"), "ENOENT");
    // growing a value is refused, shrinking is not
    let grow = [b"a\0".as_slice(), &[b'x'; 600]].concat();
    assert_eq!(err(&mut d, guest, MsgType::Write, 0, &grow), "EIO");
    // a reply over 16 bytes that would pass the quota: ENOMEM
    assert_eq!(err(&mut d, guest, MsgType::Read, 0, b"a\0"), "ENOMEM");
    ok(&mut d, guest, MsgType::Write, b"a\0small");
    assert_eq!(ok(&mut d, guest, MsgType::Read, b"a\0"), b"small");
    // a watch whose path and token pass it: ENOMEM
    let token = [b"a\0".as_slice(), &[b't'; 350], b"\0"].concat();
    assert_eq!(err(&mut d, guest, MsgType::Watch, 0, &token), "ENOMEM");
    // a node dom0 creates under the guest's home is the guest's: the
    // guest's quota applies (C answers dom0 EIO too)
    let x = [b"/local/domain/6/x\0".as_slice(), &[b'y'; 300]].concat();
    assert_eq!(err(&mut d, dom0, MsgType::Write, 0, &x), "EIO");
    ok(
        &mut d,
        dom0,
        MsgType::Control,
        b"quota\0set\0memory\x002000\0",
    );
    ok(&mut d, dom0, MsgType::Write, &x);
    ok(
        &mut d,
        dom0,
        MsgType::Control,
        b"quota\0set\0memory\x00400\0",
    );
    assert!(d.memory(6) >= 400, "{}", d.memory(6));
    assert_eq!(
        err(&mut d, dom0, MsgType::Write, 0, b"/local/domain/6/z\0v"),
        "EIO",
        "its owner is over its quota"
    );
    assert!(!d.may_read(guest), "over the hard quota: not read from");
    ok(&mut d, dom0, MsgType::Rm, b"/local/domain/6/x\0");
    assert!(d.may_read(guest));
    assert!(d.store.check().is_empty(), "{:?}", d.store.check());
}

#[test]
fn memory_quota_counts_transaction_copies_and_drops_events_past_it() {
    let (mut d, dom0, guest) = with_guest();
    ok(
        &mut d,
        dom0,
        MsgType::Control,
        b"quota\0set\0memory\x00600\0",
    );
    let tx = ok(&mut d, guest, MsgType::TransactionStart, b"\0");
    let tx: u32 = String::from_utf8_lossy(&tx)
        .trim_end_matches('\0')
        .parse()
        .unwrap();
    let value = [b"a\0".as_slice(), &[b'x'; 300]].concat();
    assert_eq!(
        call(&mut d, guest, MsgType::Write, tx, &value).0,
        MsgType::Write as u32
    );
    let value = [b"b\0".as_slice(), &[b'x'; 300]].concat();
    assert_eq!(call(&mut d, guest, MsgType::Write, tx, &value).1, b"EIO\0");
    assert_eq!(
        call(&mut d, guest, MsgType::TransactionEnd, tx, b"F\0").0,
        MsgType::TransactionEnd as u32
    );
    // events that would take the receiver past its quota are dropped
    ok(&mut d, guest, MsgType::Watch, b"/w\0t\0");
    assert_eq!(events(&mut d, guest), ["/w t"]);
    ok(&mut d, dom0, MsgType::Mkdir, b"/w\0");
    ok(&mut d, dom0, MsgType::SetPerms, b"/w\0n0\0r6\0");
    let name = "n".repeat(200);
    for i in 0..5 {
        ok(
            &mut d,
            dom0,
            MsgType::Write,
            format!("/w/{name}{i}\0v").as_bytes(),
        );
    }
    // not drained: three fit under 600 with the home and the watch
    let queued = d.conn(guest).unwrap().pending().len();
    assert!(queued < 600, "{queued}");
    assert!(d.dropped_events >= 2, "{}", d.dropped_events);
}

#[test]
fn outstanding_requests_hold_until_delivered_and_stop_reading() {
    let (mut d, dom0, guest) = with_guest();
    ok(
        &mut d,
        dom0,
        MsgType::Control,
        b"quota\0set\0outstanding\x003\0",
    );
    let read = Header {
        ty: MsgType::Read as u32,
        req_id: 1,
        tx_id: 0,
        len: 0,
    };
    for _ in 0..2 {
        d.handle(guest, read, b"");
    }
    assert_eq!(d.outstanding(6), 2, "replies queued, not yet written");
    assert!(d.may_read(guest));
    d.handle(guest, read, b"");
    assert!(!d.may_read(guest), "at the quota: not read from");
    assert_eq!(quota_usage(&mut d, dom0, 6, "outstanding"), 3);
    drain(&mut d, guest);
    assert_eq!(d.outstanding(6), 0);
    assert!(d.may_read(guest));
    // a request whose watch event waits at a reader stays outstanding
    ok(&mut d, dom0, MsgType::Watch, b"/local/domain/6\0t\0");
    events(&mut d, dom0);
    ok(&mut d, guest, MsgType::Write, b"x\0v");
    assert_eq!(d.outstanding(6), 1, "its event is still queued at dom0");
    assert!(d.may_read(dom0), "dom0 is never limited");
    assert_eq!(events(&mut d, dom0), ["/local/domain/6/x t"]);
    assert_eq!(d.outstanding(6), 0);
    // a closed connection releases what it held
    let other = open(&mut d, 6, 0, "guest");
    d.handle(other, read, b"");
    assert_eq!(d.outstanding(6), 1);
    d.close(other, 0, "test");
    assert_eq!(d.outstanding(6), 0);
}

#[test]
fn execute_input_stops_at_the_outstanding_quota() {
    let (mut d, dom0, guest) = with_guest();
    ok(
        &mut d,
        dom0,
        MsgType::Control,
        b"quota\0set\0outstanding\x002\0",
    );
    let mut wire = Vec::new();
    for i in 0..5 {
        crate::wire::frame::encode(&mut wire, MsgType::Read as u32, i, 0, &[b"x\0"]);
    }
    let conn = d.conn_mut(guest).unwrap();
    let mut input = conn.take_input();
    input
        .fill(|b| {
            b[..wire.len()].copy_from_slice(&wire);
            Ok(wire.len())
        })
        .unwrap();
    conn.restore_input(input);
    assert!(d.execute_input(guest, usize::MAX));
    assert_eq!(drain(&mut d, guest).len(), 2, "two answered, three wait");
    assert!(d.execute_input(guest, usize::MAX));
    assert_eq!(drain(&mut d, guest).len(), 2);
    assert!(d.execute_input(guest, usize::MAX));
    assert_eq!(drain(&mut d, guest).len(), 1);
}
