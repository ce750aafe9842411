use super::{run, Choice, Report};

/// Runs seeds `first..` until `seeds` seeds ran and `passes` loop passes
/// are done: what it covered, or the first seed that failed and why.
fn run_seeds(first: u64, seeds: u64, passes: u64) -> Result<(u64, Report), (u64, String)> {
    let mut total = Report::default();
    let mut seed = first;
    while seed - first < seeds || total.passes < passes {
        let r = run(Choice::seeded(seed)).map_err(|e| (seed, e))?;
        total.passes += r.passes;
        total.choices += r.choices;
        total.requests += r.requests;
        total.slowest = total.slowest.max(r.slowest);
        total.watchers = total.watchers.max(r.watchers);
        total.guests = total.guests.max(r.guests);
        total.clients = total.clients.max(r.clients);
        total.tally.add(&r.tally);
        seed += 1;
    }
    Ok((seed - first, total))
}

/// `make test`'s budget: a fixed range of seeds, every run checked.
#[test]
fn seeds_keep_every_request_answered() {
    let (seeds, r) = match run_seeds(0, 100, 0) {
        Ok(covered) => covered,
        Err((seed, e)) => panic!("seed {seed}: {e}\n(replay: SIM_SEED={seed} make sim-replay)"),
    };
    eprintln!(
        "simulation: seeds 0..{seeds}: {} passes, {} requests answered, {} choices, \
         at most {} clients ({} watchers, {} guests), a reply owed at most {} passes; {:?}",
        r.passes, r.requests, r.choices, r.clients, r.watchers, r.guests, r.slowest, r.tally
    );
    let t = r.tally;
    let taken = [
        t.blocked_writes,
        t.late_edges,
        t.spurious,
        t.hangups,
        t.full_rings,
        t.conflicts,
    ];
    assert!(taken.iter().all(|&n| n > 0), "a turn never taken: {t:?}");
    assert!(r.watchers > 80 && r.guests > 0, "{r:?}");
}

/// A seed replays bit for bit: the same schedule, the same run.
#[test]
fn a_seed_replays_bit_for_bit() {
    let a = run(Choice::seeded(7)).unwrap();
    let b = run(Choice::seeded(7)).unwrap();
    assert_eq!(
        (a.passes, a.choices, a.requests, a.slowest),
        (b.passes, b.choices, b.requests, b.slowest)
    );
}

/// `make sim-long` (SIM_PASSES, from SIM_FIRST_SEED) and `make sim-replay`
/// (SIM_SEED: one seed): the long run the notes record, in release.
#[test]
#[ignore = "minutes long: make sim-long"]
fn long_run() {
    let var = |name: &str, default: u64| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let (first, passes) = match std::env::var("SIM_SEED") {
        Ok(seed) => (seed.parse().expect("SIM_SEED: a number"), 0),
        Err(_) => (
            var("SIM_FIRST_SEED", 1_000_000),
            var("SIM_PASSES", 10_000_000),
        ),
    };
    let start = std::time::Instant::now();
    match run_seeds(first, 1, passes) {
        Ok((seeds, r)) => println!(
            "simulation long run: seeds {first}..{}: {} passes, {} requests answered, \
             {} choices, 0 violations, a reply owed at most {} passes, {:.0?}; {:?}",
            first + seeds,
            r.passes,
            r.requests,
            r.choices,
            r.slowest,
            start.elapsed(),
            r.tally
        ),
        Err((seed, e)) => panic!("seed {seed}: {e}"),
    }
}
