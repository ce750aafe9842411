//! One interval's numbers as Prometheus metrics, encoded by
//! prometheus-client. Every label comes from a closed set (op, result,
//! outcome, quota) or is the domid of a live domain, at most `max_domains`
//! of them; never a path, token or pid.

use super::counters::{Totals, BUCKETS, OP_OTHER};
use super::daemon::Quotas;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use std::collections::BTreeMap;
use std::fmt::Error;
use xenstore_proto::wire::{msg_name, XsError};
use xenstore_proto::TxOutcome;

/// A live domain, as labelled.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DomainView {
    pub name: Option<String>,
    /// CONTROL quota <domid>.
    pub used: Quotas,
    /// Its limits: CONTROL quota's, or its own (XS_GET_QUOTA <domid>).
    pub limits: Quotas,
}

/// What one exposition shows.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub totals: Totals,
    /// The live domains with series of their own (at most the cap).
    pub domains: BTreeMap<u32, DomainView>,
    /// Live domains past the cap: their counts go to domid="other".
    pub over_cap: Vec<u32>,
    /// CONTROL quota: the global limits.
    pub limits: Quotas,
    /// Times the exporter re-attached after the daemon exec'd a new image
    /// (a live update): the firings between were not counted.
    pub exec_gaps: u64,
}

type Labels = Vec<(&'static str, String)>;

fn op_name(slot: u32) -> String {
    match (slot < OP_OTHER).then(|| msg_name(slot)).flatten() {
        Some(name) => name.to_string(),
        None => "other".to_string(),
    }
}

fn result_name(errno: u32) -> String {
    match errno {
        0 => "ok".to_string(),
        e => XsError::from_errno(e)
            .map_or("other", XsError::name)
            .to_string(),
    }
}

fn family<M: EncodeMetric>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    ty: MetricType,
    series: impl IntoIterator<Item = (Labels, M)>,
) -> Result<(), Error> {
    let mut metric = enc.encode_descriptor(name, help, None, ty)?;
    for (labels, value) in series {
        value.encode(metric.encode_family(&labels)?)?;
    }
    Ok(())
}

impl Snapshot {
    fn domain_counts(&self) -> Vec<(String, [u64; 3])> {
        let mut out: Vec<(String, [u64; 3])> = Vec::new();
        let mut other = [0u64; 3];
        for (domid, counts) in &self.totals.domains {
            if self.domains.contains_key(domid) {
                out.push((domid.to_string(), *counts));
            } else if self.over_cap.contains(domid) {
                for (o, c) in other.iter_mut().zip(counts) {
                    *o += c;
                }
            }
        }
        if !self.over_cap.is_empty() {
            out.push(("other".to_string(), other));
        }
        out
    }
}

impl Collector for Snapshot {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), Error> {
        let t = &self.totals;
        family(
            &mut enc,
            "xenstore_requests",
            "Requests answered, by message type and result (ok or the error sent)",
            MetricType::Counter,
            t.requests.iter().map(|(&(op, err), &n)| {
                let labels = vec![("op", op_name(op)), ("result", result_name(err))];
                (labels, ConstCounter::new(n))
            }),
        )?;
        let mut hist = enc.encode_descriptor(
            "xenstore_request_duration_seconds",
            "Time from a request's arrival to its reply being queued, by message type",
            None,
            MetricType::Histogram,
        )?;
        for (&op, (buckets, sum_ns)) in &t.latency {
            // Per bucket: the encoder makes them cumulative.
            let bounds: Vec<(f64, u64)> = buckets
                .iter()
                .enumerate()
                .map(|(b, &n)| {
                    // Bucket b holds [2^b, 2^(b+1)) ns; the last, all above.
                    let le = if b + 1 == BUCKETS {
                        f64::INFINITY
                    } else {
                        (1u64 << (b + 1)) as f64 / 1e9
                    };
                    (le, n)
                })
                .collect();
            let count = buckets.iter().sum();
            let labels = vec![("op", op_name(op))];
            hist.encode_family(&labels)?
                .encode_histogram::<prometheus_client::encoding::NoLabelSet>(
                    *sum_ns as f64 / 1e9,
                    count,
                    &bounds,
                    None,
                )?;
        }
        family(
            &mut enc,
            "xenstore_watch_events",
            "Watch events queued for clients",
            MetricType::Counter,
            [(Labels::new(), ConstCounter::new(t.watch_events))],
        )?;
        let outcomes = TxOutcome::ALL.iter().map(|o| o.name()).chain(["other"]);
        family(
            &mut enc,
            "xenstore_transactions",
            "Transactions ended, by outcome (commit, abort, conflict, dropped)",
            MetricType::Counter,
            outcomes
                .zip(t.transactions)
                .filter(|(name, n)| *name != "other" || *n > 0)
                .map(|(name, n)| (vec![("outcome", name.to_string())], ConstCounter::new(n))),
        )?;
        family(
            &mut enc,
            "xenstore_events_lost",
            "Events counted in the totals but not per domain (the domain table was full), \
             or not counted at all (a batch of them the kernel could not read)",
            MetricType::Counter,
            [(
                Labels::new(),
                ConstCounter::new(t.domain_overflow + t.records_lost),
            )],
        )?;
        family(
            &mut enc,
            "xenstore_exporter_gaps",
            "Times counting stopped and resumed, by reason (exec: the daemon exec'd a new \
             image, a live update, and the exporter attached to it)",
            MetricType::Counter,
            [(
                vec![("reason", "exec".to_string())],
                ConstCounter::new(self.exec_gaps),
            )],
        )?;
        family(
            &mut enc,
            "xenstore_domains_over_cap",
            "Live domains past --metrics-max-domains, counted under domid=\"other\"",
            MetricType::Gauge,
            [(Labels::new(), ConstGauge::new(self.over_cap.len() as i64))],
        )?;
        family(
            &mut enc,
            "xenstore_domain_info",
            "A live domain and its name (/local/domain/<domid>/name)",
            MetricType::Gauge,
            self.domains.iter().map(|(domid, d)| {
                let name = d.name.clone().unwrap_or_default();
                (
                    vec![("domid", domid.to_string()), ("name", name)],
                    ConstGauge::new(1),
                )
            }),
        )?;
        let per_domain = self.domain_counts();
        for (i, (name, help)) in [
            ("xenstore_domain_requests", "Requests answered, by domain"),
            (
                "xenstore_domain_errors",
                "Requests answered with an error, by domain",
            ),
            (
                "xenstore_domain_watch_events",
                "Watch events queued, by the firing domain",
            ),
        ]
        .into_iter()
        .enumerate()
        {
            family(
                &mut enc,
                name,
                help,
                MetricType::Counter,
                per_domain
                    .iter()
                    .map(|(domid, c)| (vec![("domid", domid.clone())], ConstCounter::new(c[i]))),
            )?;
        }
        let quota_series = |limits: bool| -> Vec<(Labels, ConstGauge)> {
            let mut out = Vec::new();
            for (domid, d) in self.domains.iter().filter(|(&id, _)| id != 0) {
                let values = if limits { &d.limits } else { &d.used };
                for (quota, &v) in values {
                    let labels = vec![("domid", domid.to_string()), ("quota", quota.clone())];
                    out.push((labels, ConstGauge::new(v as i64)));
                }
            }
            out
        };
        family(
            &mut enc,
            "xenstore_domain_quota_used",
            "What a domain uses of each quota (CONTROL quota <domid>)",
            MetricType::Gauge,
            quota_series(false),
        )?;
        family(
            &mut enc,
            "xenstore_domain_quota_limit",
            "Each quota's limit for a domain (its own, XS_GET_QUOTA <domid>, else CONTROL quota)",
            MetricType::Gauge,
            quota_series(true),
        )?;
        Ok(())
    }
}

/// OpenMetrics text, as served on /metrics.
pub fn openmetrics(snapshot: Snapshot) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(snapshot));
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &registry).expect("writing to a String");
    out
}

/// The same in Prometheus' text format 0.0.4, which node_exporter's
/// textfile collector reads: a counter's TYPE names its `_total` samples,
/// and there are no UNIT or EOF lines.
pub fn prometheus_text(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let fixed = match line.strip_suffix(" counter") {
            Some(head) if line.starts_with("# TYPE ") => format!("{head}_total counter"),
            _ => match line.strip_prefix("# HELP ") {
                Some(rest) if is_counter(openmetrics, rest) => {
                    let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
                    format!("# HELP {name}_total {help}")
                }
                _ => line.to_string(),
            },
        };
        out += &fixed;
        out.push('\n');
    }
    out
}

fn is_counter(text: &str, help_rest: &str) -> bool {
    let name = help_rest.split(' ').next().unwrap_or("");
    text.contains(&format!("# TYPE {name} counter\n"))
}
