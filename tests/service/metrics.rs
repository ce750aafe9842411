//! `xenstore-snoop --metrics` read by the real Prometheus: the exporter
//! writes node_exporter's textfile directory and serves /metrics; the real
//! prometheus-node-exporter reads the directory; the real Prometheus
//! scrapes both (loopback, private ports) and is asked through its HTTP
//! query API whether the sums equal what a known workload did (a guest
//! over the simulated ring, errors, a transaction conflict), whether the
//! quota gauges match CONTROL quota, and whether a dead domain's series go.
//! `promtool check metrics` passes on the textfile.

use crate::common::process::{output_fed, Watched};
use crate::common::shim::{private_dir, Shim};
use crate::common::{wait_for, xs_error, TIMEOUT};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;
use xenstore_guest::boot::boot;
use xenstore_guest::client::Xs;
use xenstore_proto::wire::MsgType;
use xenstore_testkit::daemon::{private_copy_of, scratch_dir};

const GUEST: u16 = 7;
const SIGTERM: i32 = 15;

/// A loopback port free now (the child binds it right after).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// GET `path` from 127.0.0.1:`port`; the body.
fn http_get(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(TIMEOUT)).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut reply = String::new();
    s.read_to_string(&mut reply).ok()?;
    let (head, body) = reply.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.").then(|| body.to_string())
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

struct Prometheus {
    _server: Watched,
    port: u16,
}

impl Prometheus {
    /// Scraping the exporter's endpoint (job xenstore) and node_exporter
    /// (job node) every second.
    fn start(dir: &Path, exporter: u16, node: u16) -> Prometheus {
        let port = free_port();
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\n\
                 scrape_configs:\n\
                 - job_name: xenstore\n  static_configs: [{{targets: ['127.0.0.1:{exporter}']}}]\n\
                 - job_name: node\n  static_configs: [{{targets: ['127.0.0.1:{node}']}}]\n"
            ),
        )
        .unwrap();
        let server = Watched::spawn(
            "prometheus",
            Command::new("prometheus")
                .arg(format!("--config.file={}", config.display()))
                .arg(format!(
                    "--storage.tsdb.path={}",
                    dir.join("tsdb").display()
                ))
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped()),
            false,
        );
        wait_for("prometheus ready", TIMEOUT, || {
            http_get(port, "/-/ready").is_some_and(|b| b.contains("Ready"))
        });
        Prometheus {
            _server: server,
            port,
        }
    }

    /// The instant vector `query` evaluates to: (labels, value) each.
    fn query(&self, query: &str) -> Vec<(Value, f64)> {
        let path = format!("/api/v1/query?query={}", urlencode(query));
        let body = http_get(self.port, &path).unwrap_or_default();
        let v: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        v["data"]["result"]
            .as_array()
            .map(|r| {
                r.iter()
                    .map(|s| {
                        let value = s["value"][1].as_str().unwrap_or("NaN").parse().unwrap();
                        (s["metric"].clone(), value)
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Waits until `query` is one sample of `want`.
    fn wait_value(&self, query: &str, want: f64) {
        let mut last = Vec::new();
        let ok = xenstore_testkit::wait::wait_until(&format!("{query} == {want}"), TIMEOUT, || {
            last = self.query(query);
            last.len() == 1 && last[0].1 == want
        });
        assert!(
            ok.is_ok(),
            "{query}: want {want}, Prometheus answers {last:?}"
        );
    }
}

#[test]
fn prometheus_sees_what_a_known_workload_did() {
    if !crate::common::need_root("prometheus_sees_what_a_known_workload_did") {
        return;
    }
    // A private copy: uprobes attach to the file, and other tests trace
    // the workspace's binary.
    let dir = scratch_dir("metrics-shim").unwrap();
    let binary = private_copy_of(&crate::common::bin("xenstored-shim"), &dir).unwrap();
    let shim = Shim::launch("xenstored-shim", &binary, dir, &["--quota", "watches=2"]).unwrap();
    let work = private_dir("metrics");
    let textfile = work.join("textfile");
    std::fs::create_dir_all(&textfile).unwrap();

    let mut exporter = Watched::spawn(
        "xenstore-snoop --metrics",
        // BPF only: not crate::common::snoop_command(), which may name a back end.
        Command::new(crate::common::bin("xenstore-snoop"))
            .args([
                "--metrics",
                "--interval",
                "1",
                "--metrics-listen",
                "127.0.0.1:0",
            ])
            .arg("--daemon-pid")
            .arg(shim.pid().to_string())
            .arg("--socket")
            .arg(&shim.socket)
            .arg("--metrics-textfile")
            .arg(&textfile)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped()),
        false,
    );
    exporter.wait_ready("the exporter to attach", TIMEOUT, |_, err| {
        err.iter().any(|l| l.contains("/metrics"))
    });
    let banner = exporter.stderr().concat();
    // Counting on the batched probe the shim has: counts arrive up to
    // its flush bound late, and every wait below polls.
    assert!(banner.contains(", stats_batch, "), "{banner}");
    let exporter_port = listen_port(&banner);

    let node_port = free_port();
    let _node = Watched::spawn(
        "prometheus-node-exporter",
        Command::new("prometheus-node-exporter")
            .arg(format!("--web.listen-address=127.0.0.1:{node_port}"))
            .args(["--collector.disable-defaults", "--collector.textfile"])
            .arg(format!(
                "--collector.textfile.directory={}",
                textfile.display()
            ))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped()),
        false,
    );
    let prometheus = Prometheus::start(&work, exporter_port, node_port);

    // The workload, every request after the exporter attached.
    let mut dom0 = Xs::connect(&shim.socket).unwrap();
    dom0.timeout = Duration::from_secs(10);
    let mut guest = boot(&mut dom0, &shim.run_dir, GUEST, Duration::from_secs(10)).unwrap();
    dom0.write(0, &format!("/local/domain/{GUEST}/name"), "guest-seven")
        .unwrap();
    for node in ["data/a", "data/b", "data/c"] {
        guest.write(0, node, "1").unwrap();
    }
    guest.watch("w1", "t1").unwrap();
    guest.watch("w2", "t2").unwrap();
    assert_eq!(xs_error(guest.watch("w3", "t3")), "E2BIG");
    assert_eq!(xs_error(guest.read(0, "missing")), "ENOENT");
    // Two transactions write one node: the second to end conflicts.
    let t1 = dom0.transaction_start().unwrap();
    let t2 = dom0.transaction_start().unwrap();
    dom0.write(t1, "/contended", "1").unwrap();
    dom0.write(t2, "/contended", "2").unwrap();
    dom0.transaction_end(t1, true).unwrap();
    assert_eq!(xs_error(dom0.transaction_end(t2, true)), "EAGAIN");
    // dom0 1 + guest 3 + transactions 2
    let writes = 6.0;

    for job in ["xenstore", "node"] {
        let q = |s: &str| s.replace("JOB", job);
        prometheus.wait_value(
            &q(r#"sum(xenstore_requests_total{job="JOB",op="XS_WRITE"})"#),
            writes,
        );
        prometheus.wait_value(
            &q(r#"sum(xenstore_requests_total{job="JOB",op="XS_WATCH",result="E2BIG"})"#),
            1.0,
        );
        prometheus.wait_value(
            &q(r#"sum(xenstore_requests_total{job="JOB",op="XS_READ",result="ENOENT"})"#),
            1.0,
        );
        prometheus.wait_value(
            &q(r#"xenstore_transactions_total{job="JOB",outcome="conflict"}"#),
            1.0,
        );
        prometheus.wait_value(
            &q(r#"xenstore_transactions_total{job="JOB",outcome="commit"}"#),
            1.0,
        );
        // The two watches' first events.
        prometheus.wait_value(&q(r#"xenstore_watch_events_total{job="JOB"}"#), 2.0);
        // The guest's requests: 3 writes, 3 watches, 1 read; 2 failed.
        prometheus.wait_value(
            &q(r#"xenstore_domain_requests_total{job="JOB",domid="7"}"#),
            7.0,
        );
        prometheus.wait_value(
            &q(r#"xenstore_domain_errors_total{job="JOB",domid="7"}"#),
            2.0,
        );
        prometheus.wait_value(
            &q(r#"xenstore_domain_info{job="JOB",domid="7",name="guest-seven"}"#),
            1.0,
        );
        prometheus.wait_value(
            &q(r#"sum(xenstore_request_duration_seconds_count{job="JOB",op="XS_WRITE"})"#),
            writes,
        );
        prometheus.wait_value(&q(r#"xenstore_events_lost_total{job="JOB"}"#), 0.0);
    }

    // What Prometheus answered, for the record (`--nocapture`).
    for q in [
        r#"sum by (job) (xenstore_requests_total{op="XS_WRITE"})"#,
        r#"xenstore_transactions_total{job="xenstore"}"#,
        r#"xenstore_domain_quota_used{job="xenstore",domid="7"}"#,
    ] {
        eprintln!("prometheus: {q} = {:?}", prometheus.query(q));
    }

    // The quota gauges say what CONTROL quota says.
    let answer = dom0
        .request(MsgType::Control, 0, format!("quota\0{GUEST}\0").as_bytes())
        .unwrap();
    let usage = xenstore_snoop::metrics::daemon::parse_quota(&answer);
    assert_eq!(usage.get("watches"), Some(&2), "{usage:?}");
    for (quota, used) in &usage {
        prometheus.wait_value(
            &format!(r#"xenstore_domain_quota_used{{job="xenstore",domid="7",quota="{quota}"}}"#),
            *used as f64,
        );
    }
    prometheus.wait_value(
        r#"xenstore_domain_quota_limit{job="xenstore",domid="7",quota="watches"}"#,
        2.0,
    );
    // A limit of the guest's own (XS_SET_QUOTA <domid>) is its limit
    // gauge; the global one (CONTROL quota) stays another.
    let global = dom0.request(MsgType::Control, 0, b"quota\0").unwrap();
    let global = xenstore_snoop::metrics::daemon::parse_quota(&global);
    assert_eq!(global.get("transactions"), Some(&10), "{global:?}");
    dom0.request(
        MsgType::SetQuota,
        0,
        format!("{GUEST}\0transactions\0{}\0", 3).as_bytes(),
    )
    .unwrap();
    prometheus.wait_value(
        r#"xenstore_domain_quota_limit{job="xenstore",domid="7",quota="transactions"}"#,
        3.0,
    );

    // promtool accepts the textfile.
    let text = std::fs::read(textfile.join("xenstore.prom")).unwrap();
    let check = output_fed(
        Command::new("promtool").args(["check", "metrics"]),
        &text,
        TIMEOUT,
    );
    assert!(
        check.status.success(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );

    // The domain dies: its series go from both paths.
    dom0.release(GUEST).unwrap();
    dom0.rm(0, &format!("/local/domain/{GUEST}")).unwrap();
    for job in ["xenstore", "node"] {
        let gone = |name: &str| {
            let q = format!(r#"{name}{{job="{job}",domid="7"}}"#);
            wait_for(&format!("{q} gone"), TIMEOUT, || {
                prometheus.query(&q).is_empty()
            });
        };
        gone("xenstore_domain_info");
        gone("xenstore_domain_requests_total");
        gone("xenstore_domain_quota_used");
    }
    let ended = exporter.stop(SIGTERM, TIMEOUT);
    assert!(ended.status.success(), "{:?}", ended.stderr);
}

/// A private copy of the shim as an older one looks to the exporter: the
/// USDT notes of the probes `hidden` renamed (same length, a name no
/// tracer knows), so no tracer finds or raises them.
fn shim_without_probes(hidden: &[&str]) -> Shim {
    let dir = scratch_dir("metrics-older-shim").unwrap();
    let mut image = std::fs::read(crate::common::bin("xenstored-shim")).unwrap();
    for name in hidden {
        // A note names its provider, then its probe, each NUL-ended.
        let note = format!("{}\0{name}\0", xenstore_proto::PROVIDER);
        let at: Vec<usize> = image
            .windows(note.len())
            .enumerate()
            .filter(|(_, w)| *w == note.as_bytes())
            .map(|(i, _)| i)
            .collect();
        assert!(!at.is_empty(), "no note for {name}");
        for i in at {
            let name_at = i + xenstore_proto::PROVIDER.len() + 1;
            image[name_at..name_at + name.len()].fill(b'_');
        }
    }
    let binary = dir.join("xenstored-shim");
    std::fs::write(&binary, &image).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&binary, std::fs::Permissions::from_mode(0o755)).unwrap();
    Shim::launch("older xenstored-shim", &binary, dir, &[]).unwrap()
}

/// The exporter's fallbacks, on a real shim whose notes lack the probes it
/// prefers: without `stats_batch` it counts on `reply_stats`, without both
/// on `reply` (each with `watch_event` and `tx_end`); its banner names the
/// probe and its textfile counts a known workload exactly.
#[test]
fn an_older_shim_is_counted_on_reply_stats_or_reply() {
    if !crate::common::need_root("an_older_shim_is_counted_on_reply_stats_or_reply") {
        return;
    }
    let cases: [(&[&str], &str); 2] = [
        (&["stats_batch"], "reply_stats"),
        (&["stats_batch", "reply_stats"], "reply"),
    ];
    for (hidden, counted) in cases {
        let shim = shim_without_probes(hidden);
        let textfile = private_dir(&format!("metrics-older-{counted}"));
        std::fs::create_dir_all(&textfile).unwrap();
        let mut exporter = Watched::spawn(
            "xenstore-snoop --metrics",
            Command::new(crate::common::bin("xenstore-snoop"))
                // --metrics-textfile alone implies --metrics.
                .args(["--interval", "0.2", "--daemon-pid"])
                .arg(shim.pid().to_string())
                .arg("--socket")
                .arg(&shim.socket)
                .arg("--metrics-textfile")
                .arg(&textfile)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped()),
            false,
        );
        exporter.wait_ready("the exporter to attach", TIMEOUT, |_, err| {
            err.iter().any(|l| l.contains("metrics of daemon"))
        });
        let banner = exporter.stderr().concat();
        assert!(banner.contains(&format!(", {counted}, ")), "{banner}");

        let mut xs = Xs::connect(&shim.socket).unwrap();
        for node in ["/fb/a", "/fb/b", "/fb/c"] {
            xs.write(0, node, "1").unwrap();
        }
        xs.watch("/fb", "tok").unwrap();
        assert_eq!(xs_error(xs.read(0, "/fb/missing")), "ENOENT");
        let tx = xs.transaction_start().unwrap();
        xs.write(tx, "/fb/d", "1").unwrap();
        xs.transaction_end(tx, true).unwrap();
        let want = [
            r#"xenstore_requests_total{op="XS_WRITE",result="ok"} 4"#,
            r#"xenstore_requests_total{op="XS_READ",result="ENOENT"} 1"#,
            r#"xenstore_requests_total{op="XS_TRANSACTION_END",result="ok"} 1"#,
            // The watch's first event, and /fb/d's at the commit.
            "xenstore_watch_events_total 2",
            r#"xenstore_transactions_total{outcome="commit"} 1"#,
        ];
        let prom = textfile.join("xenstore.prom");
        let mut text = String::new();
        let counted_all =
            xenstore_testkit::wait::wait_until("the workload counted", TIMEOUT, || {
                text = std::fs::read_to_string(&prom).unwrap_or_default();
                want.iter().all(|w| text.lines().any(|l| l == *w))
            });
        assert!(counted_all.is_ok(), "{counted}: want {want:#?} in\n{text}");
        let ended = exporter.stop(SIGTERM, TIMEOUT);
        assert!(ended.status.success(), "{:?}", ended.stderr);
    }
}

/// A scrape counts every event before it, although the shim hands its
/// records over in batches up to 100 ms late: the exporter asks a CONTROL
/// before it reads its counts, and the shim fires what it holds before it
/// answers one. Each write is scraped once, at once, with no wait.
#[test]
fn a_scrape_counts_every_event_before_it() {
    if !crate::common::need_root("a_scrape_counts_every_event_before_it") {
        return;
    }
    let shim = Shim::private_copy();
    let mut exporter = Watched::spawn(
        "xenstore-snoop --metrics",
        Command::new(crate::common::bin("xenstore-snoop"))
            // --metrics-listen alone implies --metrics.
            .args(["--metrics-listen", "127.0.0.1:0"])
            .arg("--daemon-pid")
            .arg(shim.pid().to_string())
            .arg("--socket")
            .arg(&shim.socket)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped()),
        false,
    );
    exporter.wait_ready("the exporter to attach", TIMEOUT, |_, err| {
        err.iter().any(|l| l.contains("/metrics"))
    });
    let banner = exporter.stderr().concat();
    assert!(banner.contains(", stats_batch, "), "{banner}");
    let port = listen_port(&banner);
    let mut xs = Xs::connect(&shim.socket).unwrap();
    for n in 1..=5 {
        xs.write(0, "/scraped", &n.to_string()).unwrap();
        let text = http_get(port, "/metrics").expect("a scrape");
        let want = format!(r#"xenstore_requests_total{{op="XS_WRITE",result="ok"}} {n}"#);
        assert!(text.lines().any(|l| l == want), "want {want} in\n{text}");
    }
    let ended = exporter.stop(SIGTERM, TIMEOUT);
    assert!(ended.status.success(), "{:?}", ended.stderr);
}

/// The port of the exporter's `/metrics` endpoint, from its banner.
fn listen_port(banner: &str) -> u16 {
    banner
        .split("http://127.0.0.1:")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {banner}"))
}
