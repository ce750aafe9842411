//! One measured run, and the medians and ratios over interleaved rounds.

use xenstore_proto::quantile;

/// What one client run measured.
#[derive(Clone, Copy, Debug, Default)]
pub struct Sample {
    pub ops: u64,
    pub ops_per_s: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    /// CPU time the daemon (all its threads, kernel included) spent per op.
    pub daemon_cpu_us: f64,
}

impl Sample {
    /// From per-op latencies in ns over `secs` of wall time.
    pub fn from_latencies(mut lat_ns: Vec<u32>, secs: f64) -> Sample {
        let ops = lat_ns.len() as u64;
        let mut p = |q| quantile::nearest_rank(&mut lat_ns, q).map_or(f64::NAN, |ns| ns as f64);
        let (p50_us, p99_us) = (p(0.50) / 1000.0, p(0.99) / 1000.0);
        Sample {
            ops,
            ops_per_s: ops as f64 / secs,
            p50_us,
            p99_us,
            daemon_cpu_us: f64::NAN,
        }
    }

    /// This sample, whose op was `n` requests, per request (the latencies
    /// stay the op's).
    pub fn per_request(mut self, n: usize) -> Sample {
        self.ops *= n as u64;
        self.ops_per_s *= n as f64;
        self.daemon_cpu_us /= n as f64;
        self
    }
}

pub fn median(mut v: Vec<f64>) -> f64 {
    v.retain(|x| !x.is_nan());
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Samples of one configuration across rounds, summarised by medians.
pub fn median_sample(samples: &[Sample]) -> Sample {
    Sample {
        ops: samples.iter().map(|s| s.ops).sum(),
        ops_per_s: median(samples.iter().map(|s| s.ops_per_s).collect()),
        p50_us: median(samples.iter().map(|s| s.p50_us).collect()),
        p99_us: median(samples.iter().map(|s| s.p99_us).collect()),
        daemon_cpu_us: median(samples.iter().map(|s| s.daemon_cpu_us).collect()),
    }
}

/// A count with thin spaces between thousands ("–" for none).
pub fn ops(x: f64) -> String {
    if x.is_nan() {
        return "–".into();
    }
    let n = x.round() as u64;
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push('\u{202f}');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_and_medians() {
        let s = Sample::from_latencies((1..=100).map(|i| i * 1000).collect(), 2.0);
        assert_eq!(s.ops, 100);
        assert_eq!(s.ops_per_s, 50.0);
        assert_eq!(s.p50_us, 50.0);
        assert_eq!(s.p99_us, 99.0);
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
