//! Many domains dying at once (issue 26, S4), on a real xenstored-shim with
//! simulated rings and its simulated VIRQ_DOM_EXC (xen/simulated.rs): the
//! dying are all released, every @releaseDomain watcher hears of it, and
//! the state queries the daemon makes do not grow with the number of
//! domains (counted by the simulated hypervisor, not timed).

use crate::common::shim::Shim;
use crate::common::{wait_for, TIMEOUT};
use std::time::Duration;
use xenstore_guest::boot;
use xenstore_guest::client::{SocketLink, Xs};
use xenstore_guest::sim::SimGuest;
use xenstore_proto::wire::MsgType;
use xenstored_probes::host::xen::simulated::{Counters, SimXen};

/// What one mass death cost and what the watchers saw.
struct Outcome {
    counts: Counters,
    /// @releaseDomain events each watcher had after the deaths.
    events: Vec<usize>,
}

/// `n` domains, each with a home it owns and a dom0 watcher of
/// @releaseDomain (as xl's monitors); every (n/m)-th dies at once.
fn mass_death(n: u16, m: u16) -> Outcome {
    let shim = Shim::start();
    let mut dom0 = Xs::connect(&shim.socket).expect("dom0 connects");
    for domid in 1..=n {
        let home = format!("/local/domain/{domid}");
        dom0.write(0, &format!("{home}/name"), &format!("guest{domid}"))
            .unwrap();
        dom0.set_perms(0, &home, &[&format!("n{domid}")]).unwrap();
        boot::introduce(&mut dom0, &shim.run_dir, domid).unwrap();
    }
    let mut watchers: Vec<Xs<SocketLink>> = (0..n)
        .map(|i| {
            let mut w = Xs::connect(&shim.socket).expect("watcher connects");
            w.watch("@releaseDomain", &format!("w{i}")).unwrap();
            let first = w
                .next_event(TIMEOUT)
                .unwrap()
                .expect("the watch's first event");
            assert_eq!(first.path, "@releaseDomain");
            w
        })
        .collect();
    let xen = SimXen::open(&shim.run_dir).unwrap();
    let before = xen.counters().unwrap();
    let dying: Vec<u16> = (1..=n).step_by(usize::from(n / m)).take(m.into()).collect();
    assert_eq!(dying.len(), usize::from(m));
    for &domid in &dying {
        SimGuest::die(&shim.run_dir, domid).unwrap();
    }
    wait_for("the dying domains' release", TIMEOUT, || {
        dying
            .iter()
            .all(|&d| !dom0.is_domain_introduced(d).unwrap())
    });
    let events = watchers
        .iter_mut()
        .map(|w| {
            let ev = w.next_event(TIMEOUT).unwrap().expect("@releaseDomain");
            assert_eq!(ev.path, "@releaseDomain");
            let mut seen = 1;
            while w.next_event(Duration::ZERO).unwrap().is_some() {
                seen += 1;
            }
            seen
        })
        .collect();
    for domid in 1..=n {
        let home = format!("/local/domain/{domid}/name");
        if dying.contains(&domid) {
            assert!(dom0.read(0, &home).is_err(), "{home} outlived its domain");
        } else {
            assert!(
                dom0.is_domain_introduced(domid).unwrap(),
                "{domid} released"
            );
            assert_eq!(dom0.read(0, &home).unwrap(), format!("guest{domid}"));
        }
    }
    let after = xen.counters().unwrap();
    Outcome {
        counts: Counters {
            queries: after.queries - before.queries,
            firings: after.firings - before.firings,
        },
        events,
    }
}

#[test]
fn domains_dying_at_once_are_released_with_queries_in_the_dying_not_the_domains() {
    // Few and more domains, the same 5 dying: upstream asks about every
    // domain on every firing (10×5 and 100×5 queries at least); the shim
    // one batch per firing, and firings are at most one per death.
    let m = 5;
    for n in [10, 100] {
        let out = mass_death(n, m);
        let Counters { queries, firings } = out.counts;
        eprintln!(
            "N={n} M={m}: {firings} firing(s), {queries} queries, events {:?}",
            {
                let mut e = out.events.clone();
                e.dedup();
                e
            }
        );
        assert!(
            (1..=u64::from(m)).contains(&firings),
            "N={n}: {firings} firings for {m} deaths"
        );
        assert_eq!(queries, firings, "N={n}: one query a firing");
        for (i, &seen) in out.events.iter().enumerate() {
            assert!(
                seen as u64 <= firings,
                "N={n}: watcher {i} had {seen} @releaseDomain events for {firings} firings"
            );
        }
    }
}

/// Domains that die together (VIRQ_DOM_EXC, not XS_RELEASE) lose every
/// node they own wherever it is, and every right other nodes gave them
/// (upstream's XS_PERM_IGNORE): the same domids introduced again inherit
/// nothing, while a surviving domain named beside them keeps its rights.
/// Release finds these through the store's index of where each domain is
/// mentioned, so the cases cover each way a node comes to mention one.
#[test]
fn dead_domains_perms_grant_nothing_and_reused_domids_inherit_none() {
    const DYING: [u16; 2] = [1, 2];
    const SURVIVOR: u16 = 3;
    let shim = Shim::start();
    let mut dom0 = Xs::connect(&shim.socket).expect("dom0 connects");
    let boot = |dom0: &mut Xs<SocketLink>, domid| {
        boot::boot(dom0, &shim.run_dir, domid, TIMEOUT).expect("guest boots")
    };
    let mut guests: Vec<_> = [1, 2, SURVIVOR].map(|d| boot(&mut dom0, d)).into();
    // named beside a survivor; `name` was made before (dom0's only),
    // `later` after (inheriting the entries)
    dom0.write(0, "/vm/shared/name", "x").unwrap();
    dom0.set_perms(0, "/vm/shared", &["n0", "r1", "r2", "r3"])
        .unwrap();
    dom0.write(0, "/vm/shared/later", "y").unwrap();
    // a backend directory readable by its frontend, children inheriting
    let backend = "/local/domain/0/backend/vbd/1/51712";
    dom0.mkdir(0, backend).unwrap();
    dom0.set_perms(0, backend, &["n0", "r1"]).unwrap();
    dom0.write(0, &format!("{backend}/state"), "4").unwrap();
    // owned far from home, with dom0's node and the owner's again below
    dom0.write(0, "/libxl/2/dm/keep/mine", "z").unwrap();
    dom0.set_perms(0, "/libxl/2", &["n2"]).unwrap();
    dom0.set_perms(0, "/libxl/2/dm/keep", &["n0"]).unwrap();
    dom0.set_perms(0, "/libxl/2/dm/keep/mine", &["n2"]).unwrap();
    dom0.write(0, "/tool/owned-by-1", "w").unwrap();
    dom0.set_perms(0, "/tool/owned-by-1", &["n1"]).unwrap();
    // a node a guest made under the survivor's grant
    dom0.mkdir(0, "/data").unwrap();
    dom0.set_perms(0, "/data", &["n0", "b2"]).unwrap();
    guests[1].write(0, "/data/by-2", "v").unwrap();
    for g in &mut guests {
        assert_eq!(g.read(0, "/vm/shared/later").unwrap(), "y");
    }
    assert_eq!(guests[0].read(0, &format!("{backend}/state")).unwrap(), "4");
    assert_eq!(guests[1].read(0, "/libxl/2/dm/keep/mine").unwrap(), "z");

    for d in DYING {
        SimGuest::destroy(&shim.run_dir, d).unwrap();
    }
    wait_for("the dying domains' release", TIMEOUT, || {
        DYING
            .iter()
            .all(|&d| !dom0.is_domain_introduced(d).unwrap())
    });
    for gone in [
        "/libxl/2",
        "/tool/owned-by-1",
        "/data/by-2",
        "/local/domain/1",
    ] {
        assert_eq!(
            crate::common::xs_error(dom0.read(0, gone)),
            "ENOENT",
            "{gone} outlived its owner"
        );
    }
    assert_eq!(
        dom0.get_perms(0, "/vm/shared").unwrap(),
        ["n0", "r1", "r2", "r3"],
        "entries are kept, as upstream lists them"
    );
    let check = dom0.request(MsgType::Control, 0, b"check\0").unwrap();
    assert_eq!(check, b"OK\0", "CONTROL check after the release");

    let mut reborn: Vec<_> = DYING.map(|d| boot(&mut dom0, d)).into();
    for (g, d) in reborn.iter_mut().zip(DYING) {
        for node in ["/vm/shared", "/vm/shared/name", "/vm/shared/later", backend] {
            assert_eq!(
                crate::common::xs_error(g.read(0, node)),
                "EACCES",
                "the new domain {d} reads {node}"
            );
        }
    }
    assert_eq!(
        crate::common::xs_error(reborn[0].read(0, &format!("{backend}/state"))),
        "EACCES"
    );
    assert_eq!(
        crate::common::xs_error(reborn[1].write(0, "/data/new", "v")),
        "EACCES"
    );
    let survivor = &mut guests[2];
    assert_eq!(survivor.read(0, "/vm/shared").unwrap(), "");
    assert_eq!(survivor.read(0, "/vm/shared/later").unwrap(), "y");
    // a grant made after the reuse counts
    dom0.set_perms(0, "/vm/shared/later", &["n0", "r1"])
        .unwrap();
    assert_eq!(reborn[0].read(0, "/vm/shared/later").unwrap(), "y");
}
