//! Every daemon in turn at each level: the driver S3's big store and big
//! directory share (one host a daemon, grown from level to level; a daemon
//! whose host did not start, or which failed at a level, keeps its curve up
//! to there), and `rounds`, that of the S5 and S2 tables and S2's broad
//! watch (a host for every level at once, measured round after round).

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

/// Every level's host of every daemon (`hosts[level][daemon]`, all up at
/// once) measured once a round, the levels in the opposite order every
/// other round, so a drifting machine moves every level alike. A host
/// whose measurement fails is replaced by the error and left out from then
/// on; `done` hears each round's index. Returns `samples[level][daemon]`.
pub fn rounds<H, S, E>(
    hosts: &mut [Vec<Result<H, E>>],
    rounds: usize,
    mut measure: impl FnMut(&mut H, usize) -> Result<S, E>,
    done: impl Fn(usize),
) -> Vec<Vec<Vec<S>>> {
    let mut samples: Vec<Vec<Vec<S>>> = (hosts.iter())
        .map(|row| row.iter().map(|_| Vec::new()).collect())
        .collect();
    for round in 0..rounds {
        let mut order: Vec<usize> = (0..hosts.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for l in order {
            for (k, host) in hosts[l].iter_mut().enumerate() {
                let Ok(h) = host.as_mut() else { continue };
                match measure(h, l) {
                    Ok(s) => samples[l][k].push(s),
                    Err(e) => *host = Err(e),
                }
            }
        }
        done(round);
    }
    samples
}
