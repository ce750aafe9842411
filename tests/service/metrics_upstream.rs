//! --metrics' questions to the daemon (live domains, names, CONTROL quota
//! limits and use) answered by C xenstored 4.17 under tests/peer's stub,
//! with a guest over a simulated ring: the quota gauges work against the
//! upstream daemon, not only the shim; then the exporter itself run on C
//! xenstored writes them (the counters need the shim's probes; C
//! xenstored has none).

use crate::common::process::Watched;
use crate::common::shim::private_dir;
use crate::common::upstream::{Flavor, Upstream};
use std::process::{Command, Stdio};
use std::time::Duration;
use xenstore_guest::boot::boot;
use xenstore_guest::client::Xs;
use xenstore_proto::wire::MsgType;
use xenstore_snoop::metrics::daemon::{parse_quota, DaemonSocket};
use xenstore_snoop::metrics::{ask_daemon, encode};

const DOMID: u16 = 6;

#[test]
fn quota_gauges_from_c_xenstored() {
    let test = "quota_gauges_from_c_xenstored";
    if !crate::common::upstream::available(Flavor::C, test) {
        return;
    }
    let rings = private_dir("metrics-c-rings");
    let c = Upstream::start_with_env(
        Flavor::C,
        &[],
        &[("XENSTUB_RING_DIR", rings.to_str().unwrap())],
    );
    let mut dom0 = Xs::connect(&c.socket).unwrap();
    dom0.timeout = Duration::from_secs(10);
    let mut guest = boot(&mut dom0, &rings, DOMID, Duration::from_secs(10)).unwrap();
    dom0.write(0, &format!("/local/domain/{DOMID}/name"), "guest-six")
        .unwrap();
    guest.watch("a", "1").unwrap();
    guest.watch("b", "2").unwrap();
    guest.write(0, "data", "x").unwrap();

    let snapshot = ask_daemon(&c.socket, std::iter::empty(), 1024).unwrap();
    assert_eq!(snapshot.domains.keys().copied().collect::<Vec<_>>(), [0, 6]);
    let six = &snapshot.domains[&6];
    assert_eq!(six.name.as_deref(), Some("guest-six"));
    let answer = dom0
        .request(MsgType::Control, 0, format!("quota\0{DOMID}\0").as_bytes())
        .unwrap();
    assert_eq!(six.used, parse_quota(&answer));
    assert_eq!(six.used.get("watches"), Some(&2), "{:?}", six.used);
    for quota in ["nodes", "watches", "transactions", "outstanding", "memory"] {
        assert!(six.used.contains_key(quota), "{quota} in {:?}", six.used);
    }
    // C xenstored has no per-domain quotas (no XS_GET_QUOTA, up to 4.20):
    // every domain's limits are CONTROL quota's, 4.17's defaults here.
    let mut asked = DaemonSocket::connect(&c.socket).unwrap();
    assert_eq!(asked.per_domain_quotas().unwrap(), None);
    assert_eq!(six.limits, snapshot.limits);
    assert_eq!(
        snapshot.limits.get("watches"),
        Some(&128),
        "{:?}",
        snapshot.limits
    );
    assert_eq!(
        snapshot.limits.get("nodes"),
        Some(&1000),
        "{:?}",
        snapshot.limits
    );
    let text = encode::openmetrics(snapshot);
    assert!(
        text.contains("xenstore_domain_quota_used{domid=\"6\",quota=\"watches\"} 2\n"),
        "{text}"
    );
    assert!(
        text.contains("xenstore_domain_quota_limit{domid=\"6\",quota=\"watches\"} 128\n"),
        "{text}"
    );
    assert!(
        text.contains("xenstore_domain_info{domid=\"6\",name=\"guest-six\"} 1\n"),
        "{text}"
    );
    // Capped: dom0 has its series, domain 6 is counted over the cap.
    let capped = ask_daemon(&c.socket, std::iter::empty(), 1).unwrap();
    assert_eq!(capped.over_cap, [6]);

    // The exporter itself on C xenstored (no probes): the gauges, no counts.
    if crate::common::need_root("quota_gauges_from_c_xenstored (the exporter)") {
        let textfile = private_dir("metrics-c-textfile");
        let mut exporter = Watched::spawn(
            "xenstore-snoop --metrics on C xenstored",
            Command::new(crate::common::bin("xenstore-snoop"))
                .args(["--metrics", "--interval", "0.2", "--daemon-pid"])
                .arg(c.pid().to_string())
                .arg("--socket")
                .arg(&c.socket)
                .arg("--metrics-textfile")
                .arg(&textfile)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped()),
            false,
        );
        let want = "xenstore_domain_quota_used_total";
        let want_gauge = "xenstore_domain_quota_used{domid=\"6\",quota=\"watches\"} 2\n";
        let file = textfile.join("xenstore.prom");
        exporter.wait_ready("the exporter's textfile", crate::common::TIMEOUT, |_, _| {
            std::fs::read_to_string(&file).is_ok_and(|t| t.contains(want_gauge))
        });
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(!text.contains(want), "a gauge is no counter: {text}");
        assert!(
            !text.contains("xenstore_requests_total{"),
            "no counts: {text}"
        );
        let ended = exporter.stop(15, crate::common::TIMEOUT);
        assert!(ended.status.success(), "{:?}", ended.stderr);
        assert!(
            ended
                .stderr
                .iter()
                .any(|l| l.contains("no xenstore probes")),
            "{:?}",
            ended.stderr
        );
    }

    dom0.release(DOMID).unwrap();
    let after = ask_daemon(&c.socket, [6].into_iter(), 1024).unwrap();
    assert!(!after.domains.contains_key(&6), "{:?}", after.domains);
}
