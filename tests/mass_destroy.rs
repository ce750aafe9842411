//! Many domains dying at once (issue 26, S4), on a real xenstored-shim with
//! simulated rings and its simulated VIRQ_DOM_EXC (xen/simulated.rs): the
//! dying are all released, every @releaseDomain watcher hears of it, and
//! the state queries the daemon makes do not grow with the number of
//! domains (counted by the simulated hypervisor, not timed).

mod common;

use common::shim::Shim;
use common::{wait_for, TIMEOUT};
use std::time::Duration;
use xenstore_guest::boot;
use xenstore_guest::client::{SocketLink, Xs};
use xenstore_guest::sim::SimGuest;
use xenstored_probes::xen::simulated::{Counters, SimXen};

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
