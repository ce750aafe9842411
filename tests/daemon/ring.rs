//! Guests over the real ring protocol: a real xenstored-shim, simulated
//! domains (a shared page file and datagram doorbells under its run dir),
//! dom0 on the daemon's socket.

use crate::common::process::BoundedOutput;
use crate::common::shim::Shim;
use crate::common::{wait_for, xs_error};
use std::time::Duration;
use xenstore_guest::boot;
use xenstore_guest::client::{Guest, SocketLink, Xs};
use xenstore_guest::sim::SimGuest;
use xenstore_proto::wire::{Header, PAYLOAD_MAX};
use xenstored_probes::conn::ring::{Field, ERROR_NONE, ERROR_PROTO, ERROR_RINGIDX, RING_SIZE};

fn dom0(shim: &Shim) -> Xs<SocketLink> {
    Xs::connect(&shim.socket).expect("dom0 connects")
}

fn boot(shim: &Shim, dom0: &mut Xs<SocketLink>, domid: u16) -> Guest {
    boot::boot(dom0, &shim.run_dir, domid, Duration::from_secs(5)).unwrap()
}

#[test]
fn relative_paths_resolve_under_the_domain_home() {
    let shim = Shim::start();
    let mut dom0 = dom0(&shim);
    let mut guest = boot(&shim, &mut dom0, 6);
    assert!(dom0.is_domain_introduced(6).unwrap());
    assert_eq!(guest.get_domain_path(6).unwrap(), "/local/domain/6");

    guest.write(0, "data/greeting", "hello").unwrap();
    assert_eq!(
        dom0.read(0, "/local/domain/6/data/greeting").unwrap(),
        "hello"
    );
    dom0.write(0, "/local/domain/6/device/vbd/0/state", "3")
        .unwrap();
    assert_eq!(guest.read(0, "device/vbd/0/state").unwrap(), "3");
    assert_eq!(guest.directory(0, "device/vbd").unwrap(), ["0"]);
    assert_eq!(
        guest.read(0, "/local/domain/6/data/greeting").unwrap(),
        "hello"
    );
    assert_eq!(xs_error(guest.read(0, "device/vif/0/type")), "ENOENT");

    // A watch on a relative path reports the relative path back.
    guest.watch("data", "tok").unwrap();
    let first = guest.next_event(Duration::from_secs(5)).unwrap().unwrap();
    assert_eq!((first.path.as_str(), first.token.as_str()), ("data", "tok"));
    dom0.write(0, "/local/domain/6/data/x", "1").unwrap();
    let ev = guest.next_event(Duration::from_secs(5)).unwrap().unwrap();
    assert_eq!((ev.path.as_str(), ev.token.as_str()), ("data/x", "tok"));
}

#[test]
fn requests_and_replies_split_across_the_ring_wrap() {
    let shim = Shim::start();
    let mut dom0 = dom0(&shim);
    let mut guest = boot(&shim, &mut dom0, 6);
    // Each message is bigger than the ring (a guest's node-size quota keeps
    // values under 2048), and odd sizes move the wrap point around: every
    // header lands somewhere new.
    for i in 0..20usize {
        let value: String = (0..1900 - i * 29)
            .map(|k| (b'a' + ((k + i) % 26) as u8) as char)
            .collect();
        let path = format!("data/big{i}");
        guest.write(0, &path, &value).unwrap();
        assert_eq!(guest.read(0, &path).unwrap(), value);
        assert_eq!(
            dom0.read(0, &format!("/local/domain/6/{path}")).unwrap(),
            value
        );
    }
    // dom0 is not limited: a maximal value comes back whole over the ring.
    let biggest: String = (0..PAYLOAD_MAX - 100)
        .map(|k| (b'0' + (k % 10) as u8) as char)
        .collect();
    dom0.write(0, "/local/domain/6/data/biggest", &biggest)
        .unwrap();
    assert_eq!(guest.read(0, "data/biggest").unwrap(), biggest);
    let ring = guest.link().ring().interface();
    let req_prod = ring.load(Field::ReqProd);
    let rsp_prod = ring.load(Field::RspProd);
    assert!(req_prod > 20 * RING_SIZE, "requests wrapped: {req_prod}");
    assert!(rsp_prod > 20 * RING_SIZE, "replies wrapped: {rsp_prod}");
    assert_eq!(ring.load(Field::ReqCons), req_prod, "all requests consumed");
    assert_eq!(ring.load(Field::Error), ERROR_NONE);
}

/// The guest tells the daemon of room it freed only when the response
/// queue was full (as Linux's xenbus does): events far beyond the ring's
/// 1024 bytes, queued while the guest was not reading, all arrive in order.
#[test]
fn a_guest_that_reads_late_gets_every_event_in_order() {
    let shim = Shim::start();
    let mut dom0 = dom0(&shim);
    let mut guest = boot(&shim, &mut dom0, 6);
    guest.watch("late", "t").unwrap();
    let first = guest.next_event(Duration::from_secs(5)).unwrap().unwrap();
    assert_eq!(first.path, "late");
    // ~30 bytes an event: 400 fill the ring a dozen times over.
    let events = 400;
    for i in 0..events {
        dom0.write(0, &format!("/local/domain/6/late/k{i}"), "v")
            .unwrap();
    }
    for i in 0..events {
        let ev = guest.next_event(Duration::from_secs(5)).unwrap();
        let ev = ev.unwrap_or_else(|| panic!("event {i} of {events} did not come"));
        assert_eq!(ev.path, format!("late/k{i}"), "event {i}");
    }
    let ring = guest.link().ring().interface();
    assert!(
        ring.load(Field::RspProd) > 10 * RING_SIZE,
        "the ring filled"
    );
}

#[test]
fn oversized_length_stops_only_that_ring() {
    let shim = Shim::start();
    let mut dom0 = dom0(&shim);
    let mut bad = boot(&shim, &mut dom0, 6);
    let mut good = boot(&shim, &mut dom0, 7);
    good.write(0, "data/x", "before").unwrap();
    good.watch("data", "good").unwrap();
    good.next_event(Duration::from_secs(5)).unwrap().unwrap();

    let header = Header {
        ty: 11,
        req_id: 99,
        tx_id: 0,
        len: PAYLOAD_MAX as u32 + 1,
    };
    bad.send_raw(&header.encode()).unwrap();
    wait_for("the error field", Duration::from_secs(5), || {
        bad.link().ring().error() == ERROR_PROTO
    });
    let err = bad.read(0, "data").unwrap_err();
    assert_eq!(err.ring_error(), Some(ERROR_PROTO), "{err}");

    // Everyone else carries on: the other guest, its watch, and dom0.
    good.write(0, "data/x", "after").unwrap();
    let ev = good.next_event(Duration::from_secs(5)).unwrap().unwrap();
    assert_eq!(ev.path, "data/x");
    assert_eq!(dom0.read(0, "/local/domain/7/data/x").unwrap(), "after");
    dom0.write(0, "/local/domain/6/data/y", "dom0 still writes")
        .unwrap();

    // The reconnect handshake revives the stopped ring on a packet boundary.
    bad.reconnect().unwrap();
    assert_eq!(bad.link().ring().error(), ERROR_NONE);
    assert_eq!(bad.read(0, "data/y").unwrap(), "dom0 still writes");
}

#[test]
fn reconnect_discards_watches_and_transactions() {
    let shim = Shim::start();
    let mut dom0 = dom0(&shim);
    let mut guest = boot(&shim, &mut dom0, 6);
    guest.watch("data", "w").unwrap();
    assert!(guest.next_event(Duration::from_secs(5)).unwrap().is_some());
    let tx = guest.transaction_start().unwrap();
    guest.write(tx, "data/in-tx", "1").unwrap();

    guest.reconnect().unwrap();
    let ring = guest.link().ring().interface();
    assert_eq!(ring.load(Field::ReqProd), 0, "queues emptied");
    assert_eq!(ring.load(Field::RspProd), 0, "queues emptied");

    // The transaction is gone: its id means nothing and its write never landed.
    assert!(guest
        .transaction_end(tx, true)
        .unwrap_err()
        .xs_error()
        .is_some());
    assert_eq!(
        xs_error(dom0.read(0, "/local/domain/6/data/in-tx")),
        "ENOENT"
    );
    // The watch is gone: a change under it fires nothing.
    dom0.write(0, "/local/domain/6/data/z", "1").unwrap();
    assert_eq!(guest.next_event(Duration::from_millis(500)).unwrap(), None);
    // And the ring works as before.
    guest.write(0, "data/after", "ok").unwrap();
    assert_eq!(guest.read(0, "data/after").unwrap(), "ok");
}

#[test]
fn guests_cannot_touch_each_others_nodes() {
    let shim = Shim::start();
    let mut dom0 = dom0(&shim);
    let mut six = boot(&shim, &mut dom0, 6);
    let mut seven = boot(&shim, &mut dom0, 7);
    six.write(0, "data/secret", "6's").unwrap();

    assert_eq!(
        xs_error(seven.read(0, "/local/domain/6/data/secret")),
        "EACCES"
    );
    assert_eq!(
        xs_error(seven.write(0, "/local/domain/6/data/secret", "7 was here")),
        "EACCES"
    );
    assert_eq!(
        xs_error(seven.directory(0, "/local/domain/6/data")),
        "EACCES"
    );
    assert_eq!(
        xs_error(seven.set_perms(0, "/local/domain/6/data/secret", &["n7"])),
        "EACCES"
    );
    assert_eq!(dom0.read(0, "/local/domain/6/data/secret").unwrap(), "6's");

    // The owner shares it read-only: 7 reads, still cannot write.
    six.set_perms(0, "data/secret", &["n6", "r7"]).unwrap();
    assert_eq!(seven.read(0, "/local/domain/6/data/secret").unwrap(), "6's");
    assert_eq!(
        xs_error(seven.write(0, "/local/domain/6/data/secret", "7 was here")),
        "EACCES"
    );
    assert_eq!(six.read(0, "data/secret").unwrap(), "6's");
}

#[test]
fn a_guest_exhausting_its_quota_leaves_dom0_alone() {
    let shim = Shim::start();
    let mut dom0 = dom0(&shim);
    let mut guest = boot(&shim, &mut dom0, 6);
    let mut refused = None;
    for i in 0..20_000 {
        // Spread over directories: a directory's child list counts against
        // the node-size quota, and the nodes quota is the one under test.
        match guest.write(0, &format!("data/d{}/n{}", i / 100, i % 100), "x") {
            Ok(()) => {}
            Err(e) => {
                refused = Some((i, e));
                break;
            }
        }
    }
    let (count, err) = refused.expect("the guest's node quota ran out");
    // Default quota: 1000 nodes per domain, its home and directories included.
    assert!(
        (900..1000).contains(&count),
        "{count} nodes before the quota"
    );
    assert!(
        matches!(err.xs_error(), Some("ENOSPC") | Some("EDQUOT")),
        "{err}"
    );
    // The guest is still connected, just refused; freeing a node gives it
    // exactly one back.
    assert_eq!(guest.read(0, "data/d0/n0").unwrap(), "x");
    guest.rm(0, "data/d0/n0").unwrap();
    guest.write(0, "data/d0/again", "x").unwrap();
    assert_eq!(xs_error(guest.write(0, "data/d0/one-more", "x")), "ENOSPC");
    // dom0 is not limited, even writing nodes the guest owns.
    for i in 0..50 {
        dom0.write(0, &format!("/local/domain/6/data/dom0-{i}"), "y")
            .unwrap();
    }
    dom0.write(0, "/tool/after-quota", "fine").unwrap();
}

#[test]
fn release_drops_the_domain_and_its_watches() {
    let shim = Shim::start();
    let mut dom0 = dom0(&shim);
    let mut guest = boot(&shim, &mut dom0, 6);
    guest.watch("data", "old").unwrap();
    assert!(guest.next_event(Duration::from_secs(5)).unwrap().is_some());
    dom0.watch("@releaseDomain", "rel").unwrap();
    assert!(dom0.next_event(Duration::from_secs(5)).unwrap().is_some());

    dom0.release(6).unwrap();
    assert!(!dom0.is_domain_introduced(6).unwrap());
    let ev = dom0.next_event(Duration::from_secs(5)).unwrap().unwrap();
    assert_eq!(ev.path, "@releaseDomain");

    // The nodes the domain owned went with it.
    assert_eq!(xs_error(dom0.read(0, "/local/domain/6")), "ENOENT");

    // Introduced again over the same page: the old watch did not survive.
    dom0.introduce(6, boot::GFN, boot::PORT).unwrap();
    dom0.mkdir(0, "/local/domain/6").unwrap();
    dom0.set_perms(0, "/local/domain/6", &["n6"]).unwrap();
    dom0.write(0, "/local/domain/6/data/x", "1").unwrap();
    assert_eq!(guest.next_event(Duration::from_millis(500)).unwrap(), None);
    assert_eq!(guest.read(0, "data/x").unwrap(), "1");
}

#[test]
fn a_vanished_guest_is_torn_down() {
    let shim = Shim::start();
    let mut dom0 = dom0(&shim);
    let mut guest = boot(&shim, &mut dom0, 6);
    guest.watch("data", "w").unwrap();
    let _tx = guest.transaction_start().unwrap();
    dom0.watch("@releaseDomain", "rel").unwrap();
    assert!(dom0.next_event(Duration::from_secs(5)).unwrap().is_some());
    drop(guest);

    SimGuest::destroy(&shim.run_dir, 6).unwrap();
    let ev = dom0.next_event(Duration::from_secs(5)).unwrap();
    assert_eq!(ev.map(|e| e.path).as_deref(), Some("@releaseDomain"));
    wait_for("domain 6 gone", Duration::from_secs(5), || {
        !dom0.is_domain_introduced(6).unwrap()
    });
    // dom0 and the store carry on.
    dom0.write(0, "/local/domain/6/data/x", "1").unwrap();
}

fn xs_guest(shim: &Shim, domid: u16, args: &[&str], stdin: &str) -> std::process::Output {
    crate::common::process::output_fed(
        std::process::Command::new(crate::common::bin("xs-guest"))
            .arg("--run-dir")
            .arg(&shim.run_dir)
            .args(["--domid", &domid.to_string()])
            .args(args),
        stdin.as_bytes(),
        crate::common::process::CLIENT_TIMEOUT,
    )
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn xs_guest_cli_is_a_guest_across_processes() {
    let shim = Shim::start();
    let mut dom0 = dom0(&shim);
    let prepared = xs_guest(&shim, 9, &["prepare", "--gfn", "4660", "--port", "3"], "");
    assert!(prepared.status.success(), "{prepared:?}");
    assert_eq!(stdout(&prepared), "4660 3\n");
    dom0.mkdir(0, "/local/domain/9").unwrap();
    dom0.set_perms(0, "/local/domain/9", &["n9"]).unwrap();
    // The wrong page is refused as Xen would fail to map it.
    assert_eq!(xs_error(dom0.introduce(9, 4661, 3)), "EINVAL");
    dom0.introduce(9, 4660, 3).unwrap();

    // One process writes, the next reads: the ring outlives them.
    let w = xs_guest(&shim, 9, &["write", "data/x", "hello", "world"], "");
    assert!(w.status.success(), "{w:?}");
    let r = xs_guest(&shim, 9, &["read", "data/x"], "");
    assert_eq!(stdout(&r), "hello world\n");
    assert_eq!(
        dom0.read(0, "/local/domain/9/data/x").unwrap(),
        "hello world"
    );
    let missing = xs_guest(&shim, 9, &["read", "data/missing"], "");
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("ENOENT"));

    // A scripted session: a transaction, a watch, an error that does not
    // end the session.
    let script = "\
        start\n\
        write data/a 1\n\
        write data/b 2\n\
        commit\n\
        read data/a\n\
        read data/nope\n\
        watch-add data/b tok\n\
        events 1\n\
        ls data\n";
    let s = xs_guest(&shim, 9, &["session"], script);
    let out = stdout(&s);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0].parse::<u32>().map(|t| t > 0), Ok(true), "{out}");
    assert_eq!(lines[1], "1");
    assert!(
        lines[2].starts_with("error: XS_READ data/nope: ENOENT"),
        "{out}"
    );
    assert_eq!(lines[3], "data/b tok");
    assert_eq!(&lines[4..], ["x", "a", "b"]);
    assert_eq!(
        s.status.code(),
        Some(1),
        "a failed command fails the session"
    );

    let gone = xs_guest(&shim, 9, &["destroy"], "");
    assert!(gone.status.success(), "{gone:?}");
    wait_for("domain 9 released", Duration::from_secs(5), || {
        !dom0.is_domain_introduced(9).unwrap()
    });
}

#[test]
fn the_demo_boots_a_guest() {
    let shim = Shim::start();
    let out = std::process::Command::new(crate::common::bin("xs-demo"))
        .arg("--socket")
        .arg(&shim.socket)
        .arg("--run-dir")
        .arg(&shim.run_dir)
        .bounded_output();
    let text = stdout(&out);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for want in [
        "device/vif/0/type is absent (ENOENT)",
        "frontend state 3",
        "both in XenbusState 4",
        "domain 6 released",
    ] {
        assert!(text.contains(want), "{want:?} missing from:\n{text}");
    }
    let mut dom0 = dom0(&shim);
    assert!(!dom0.is_domain_introduced(6).unwrap());
    assert_eq!(xs_error(dom0.read(0, "/local/domain/6")), "ENOENT");
    assert_eq!(dom0.read(0, "/local/domain/0/name").unwrap(), "Domain-0");
}

#[test]
fn inconsistent_indices_stop_only_that_ring() {
    let shim = Shim::start();
    let mut dom0 = dom0(&shim);
    let mut bad = boot(&shim, &mut dom0, 6);
    let mut good = boot(&shim, &mut dom0, 7);
    // Claim more queued request bytes than the ring holds.
    let ring = bad.link().ring().interface();
    let cons = ring.load(Field::ReqCons);
    ring.store(Field::ReqProd, cons.wrapping_add(RING_SIZE + 1));
    bad.link().notify().unwrap();
    wait_for("the error field", Duration::from_secs(5), || {
        bad.link().ring().error() == ERROR_RINGIDX
    });
    good.write(0, "data/x", "unaffected").unwrap();
    assert_eq!(
        dom0.read(0, "/local/domain/7/data/x").unwrap(),
        "unaffected"
    );
    assert!(
        dom0.is_domain_introduced(6).unwrap(),
        "a ring error is no RELEASE"
    );
    bad.reconnect().unwrap();
    bad.write(0, "data/x", "back").unwrap();
    assert_eq!(dom0.read(0, "/local/domain/6/data/x").unwrap(), "back");
}
