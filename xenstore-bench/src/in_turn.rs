//! Every daemon in turn at each level: the driver S3's big store and big
//! directory share. A daemon whose host did not start, or which failed at
//! a level, keeps its curve up to there.

use anyhow::Result;
use std::time::Instant;

pub struct Curve<P> {
    pub label: String,
    pub points: Vec<P>,
    /// Why the curve stops where it does, if it does.
    pub failed: Option<String>,
}

/// Starts a host per daemon, then at each level asks every live one for
/// its `point` (an error there, already saying where, ends its curve) and
/// reports the level `done` with the seconds since the start.
pub fn run<S, H, P>(
    daemons: &[(String, S)],
    levels: &[usize],
    start: impl Fn(&str, &S) -> Result<H>,
    mut point: impl FnMut(&mut H, usize) -> Result<P, String>,
    done: impl Fn(usize, f64),
) -> Vec<Curve<P>> {
    let started = Instant::now();
    let mut hosts: Vec<(Option<H>, Curve<P>)> = daemons
        .iter()
        .map(|(label, spec)| {
            let host = start(label, spec);
            let failed = host.as_ref().err().map(|e| format!("did not start: {e:#}"));
            let curve = Curve {
                label: label.clone(),
                points: Vec::new(),
                failed,
            };
            (host.ok(), curve)
        })
        .collect();
    for &n in levels {
        for (host, curve) in &mut hosts {
            let Some(h) = host else { continue };
            if curve.failed.is_some() {
                continue;
            }
            match point(h, n) {
                Ok(p) => curve.points.push(p),
                Err(e) => curve.failed = Some(e),
            }
        }
        done(n, started.elapsed().as_secs_f64());
    }
    hosts.into_iter().map(|(_, c)| c).collect()
}
