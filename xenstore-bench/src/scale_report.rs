//! The scale section of BENCHMARKS.md: each scenario a table of curves,
//! one column a daemon, one row a number of idle connections.

use crate::report::ops;
use crate::scale::{Curve, Point, ScaleResult, FLOOR, WATCHES_PER_CONN};
use crate::stats::Sample;
use std::fmt::Write;

/// Where the section starts; `splice` replaces it in a report.
pub const HEADING: &str = "## Scale: idle connections and their watches";

/// The section: the sockets-only run (every daemon), then the run with
/// idle domains too (the shims: under the stub C xenstored stops answering
/// guests past a few dozen domains, oxenstored answers none).
pub fn render(sockets: &ScaleResult, domains: &ScaleResult) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{HEADING}\n\nIssue 26's question: does a request cost more as the host grows? N idle \
         dom0 connections each hold {WATCHES_PER_CONN} watches ({} on \
         `…/device/vif/<j>/state`, which nothing writes; one on `…/device/vbd/<n>/state`, which \
         S2 writes below); in the second pair of tables N idle domains (guests on simulated \
         rings; for C xenstored and oxenstored the conformance stub's ring pages) hold as \
         many too. The {FLOOR} column is a daemon that does only what these requests need \
         (see under S2's table). Every daemon has a host (a daemon and its \
         idle population) for each N, grown once; each round then measures every N, each \
         daemon in turn, the N in the opposite order every other round ({} round(s) of \
         {:.2} s per scenario, medians), so both the columns and the rows ran side by side, \
         seconds apart, and a drifting machine moves them alike; the section took \
         {:.0} s (`xenstore-bench all --only scale`). One client thread and the daemon are \
         pinned to CPU 0. Cells: requests/s, (p50/p99 µs), the daemon's CPU per request in µs; \
         the last row is what grows with the host.\n",
        WATCHES_PER_CONN - 1,
        sockets.rounds,
        sockets.run.as_secs_f64(),
        (sockets.elapsed + domains.elapsed).as_secs_f64()
    );
    for (r, whom) in [
        (sockets, "N idle dom0 connections"),
        (
            domains,
            "N idle dom0 connections and N idle domains on rings",
        ),
    ] {
        let _ = writeln!(
            s,
            "### S5 idle tax: {whom}\n\nWrite+read pairs on `/scale/load/x`, which no \
             watch covers.\n"
        );
        s += &table(r, |p| p.idle_tax, true);
        s += &goal(r, |p| p.idle_tax, &format!("S5, {whom}"));
        let _ = writeln!(
            s,
            "\n### S2 watch fan-out: {whom}\n\nEach write goes below the watched path of an \
             idle connection (or, every other write when there are domains, an idle domain), \
             spread over all of them, and is timed until that watcher has read the event: \
             the latency is write to event, the CPU is per write (with its event).\n"
        );
        s += &table(r, |p| p.fan_out, false);
        s += &goal(r, |p| p.fan_out, &format!("S2, {whom}"));
        s += &what_grows(r);
        let _ = writeln!(
            s,
            "\nThe same with every write for one watcher (the first connection, or domain): \
             the daemon's own cost of finding and sending the event, without a different \
             watcher's socket or ring and output buffer to touch each time. What grows in the \
             table above and not here is that.\n"
        );
        s += &table(r, |p| p.fan_out_one, false);
        for c in &r.curves {
            if let Some(why) = &c.no_domains {
                let _ = writeln!(s, "\n{} ran without idle domains: {why}", c.label);
            }
        }
        s += "\n";
    }
    s
}

/// What limits S2's spread curve: how much of the daemon's CPU per write,
/// and of its growth from the smallest N to the largest, is kernel time.
fn what_grows(r: &ScaleResult) -> String {
    let Some((first, last)) = ends(r) else {
        return String::new();
    };
    let mut s = format!(
        "\nWhat limits it: the daemon's CPU per write split into kernel and user time \
         (/proc's stime and utime over the run, tick-sampled), N={} → N={}:\n\n",
        r.levels[first], r.levels[last]
    );
    for c in &r.curves {
        let Some((a, b)) = c
            .points
            .as_ref()
            .ok()
            .and_then(|p| Some((p.get(first)?, p.get(last)?)))
        else {
            continue;
        };
        let split = |p: &Point| {
            let kernel = p.fan_out.daemon_cpu_us * p.fan_out_kernel;
            (kernel, p.fan_out.daemon_cpu_us - kernel)
        };
        let ((ka, ua), (kb, ub)) = (split(a), split(b));
        let grows = kb + ub - ka - ua;
        let share = if grows > 0.0 {
            format!(
                "{:.0} % of the {grows:.2} µs it grows is kernel time",
                100.0 * (kb - ka) / grows
            )
        } else {
            "it does not grow".to_string()
        };
        let _ = writeln!(
            s,
            "- {}: kernel {ka:.2} → {kb:.2} µs, user {ua:.2} → {ub:.2} µs: {share}.",
            c.label
        );
    }
    s + "\nThat split is sampled at the timer tick and moves by tenths of a µs between \
         runs. Each write here goes to a different watcher, so what it touches is cold among \
         a thousand: in the kernel, the watcher's socket (the send's lock, queue and \
         wake-up) or, for a domain, its ring page and doorbell socket; in the daemon, the \
         node written, the watch list and the connection. With one watcher (below) the same \
         work stays in the cache and does not grow. Per event the daemon makes no call it \
         could drop: one send on a watcher's socket (not polled for room to write while \
         nothing waits; an event that is not readable is not followed by a read), the events \
         before the reply, and for a domain one copy into its ring page and one doorbell \
         send on a socket connected to the guest (the guest rings back only when it finds \
         its response queue was full, as Linux's xenbus does). What is left is the price of \
         reaching a cold socket, which the kernel pays inside those sends.\n"
        + &sends_text(r)
        + &doorbells_text(r)
        + &floor_text(r, first, last)
}

/// `c`'s daemon CPU per S2 spread write at N=`n`.
fn write_cpu(r: &ScaleResult, c: &Curve, n: usize) -> Option<f64> {
    let i = r.levels.iter().position(|&l| l == n)?;
    Some(c.points.as_ref().ok()?.get(i)?.fan_out.daemon_cpu_us)
}

/// What the floor's curve leaves the first shim: the floor grows by the
/// price of reaching a cold watcher; the shim's growth beyond it is its
/// own state's.
fn floor_text(r: &ScaleResult, first: usize, last: usize) -> String {
    let cpu = |label: &str| {
        let c = r.curves.iter().find(|c| c.label == label)?;
        Some((
            write_cpu(r, c, r.levels[first])?,
            write_cpu(r, c, r.levels[last])?,
        ))
    };
    let Some(shim) = r.curves.first().filter(|c| c.label != FLOOR) else {
        return String::new();
    };
    let (Some((fa, fb)), Some((sa, sb))) = (cpu(FLOOR), cpu(&shim.label)) else {
        return String::new();
    };
    let (n_a, n_b, label) = (r.levels[first], r.levels[last], &shim.label);
    let (floor_grew, shim_grew) = (fb - fa, sb - sa);
    format!(
        "\nThe {FLOOR} column is `xsbench-bare-sender` (xenstore-bench/src/bin/bare-sender.rs): \
         a daemon that does only what these writes need (one read of the request, the value \
         kept in a hash map, the watcher of the path or its nearest watched parent found in \
         another, the event and the reply each sent at once; a domain's ring read and written \
         with the shim's own ring code, a doorbell each time): no permissions, quotas, \
         transactions or probes, two map entries per watcher. Its CPU per write grew \
         {floor_grew:.2} µs from N={n_a} to N={n_b} ({fa:.2} → {fb:.2} µs): the price of \
         reaching a cold watcher (its socket; for a domain, its ring page and doorbell). A daemon that costs what the {label} \
         costs at N={n_a} ({sa:.2} µs) and grows only that much would read {:.2}×; the \
         {label} grew {shim_grew:.2} µs, {:.2} µs more than the {FLOOR}: its own state for a \
         cold watcher (the connection, the watch, the node written, the output buffer).\n",
        (sa + floor_grew) / sa,
        shim_grew - floor_grew,
    )
}

/// The doorbells timed in this run (scale_sends.rs): a domain event's
/// doorbell against the hot reply, and how much of the CPU per write's
/// growth it is (every other write of the table rings one).
fn doorbells_text(r: &ScaleResult) -> String {
    let [(n_a, Ok(a)), (n_b, Ok(b))] = r.doorbells.as_slice() else {
        return match r.doorbells.iter().find_map(|(_, t)| t.as_ref().err()) {
            Some(e) => format!("\nThe doorbells were not timed in this run: {e:#}.\n"),
            None => String::new(),
        };
    };
    let label = r.curves.first().map_or("shim", |c| c.label.as_str());
    let us = |ns: f64| ns / 1000.0;
    let cpu_at = |n: usize| write_cpu(r, r.curves.first()?, n);
    // As for the sends: tracing slows the hot reply too, so only what the
    // doorbell grew beyond it is the cold socket's.
    let bell_grew = us(b.doorbells.mean_ns - a.doorbells.mean_ns);
    let reply_grew = us(b.replies.mean_ns - a.replies.mean_ns);
    let cold = bell_grew - reply_grew;
    let share = match (cpu_at(*n_a), cpu_at(*n_b)) {
        (Some(cpu_a), Some(cpu_b)) if cpu_b > cpu_a && cold > 0.0 => format!(
            ". The doorbell grew {bell_grew:.2} µs and the reply's send {reply_grew:.2} µs: \
             reaching a cold doorbell socket costs at least their difference, {cold:.2} µs \
             a domain event; every other write above rings one, so {:.2} µs of the {:.2} µs \
             the {label}'s CPU per write grew untraced is that socket, the rest the daemon's \
             and the kernel's other work on a cold domain",
            cold / 2.0,
            cpu_b - cpu_a,
        ),
        _ => String::new(),
    };
    format!(
        "\nThe doorbells, timed in this run: one more S2 spread run of the {label} with every \
         write for a domain, at N={n_a} and at N={n_b}, with bpftrace timing each write on a \
         domain's doorbell socket and each sendto (its overhead included, alike at both N). A \
         doorbell took {:.2} µs at N={n_a} and {:.2} µs at N={n_b} ({} and {} over {} and {} \
         domains); the reply's send on the writer's socket, as hot at every N, {:.2} and \
         {:.2} µs{share}.\n",
        us(a.doorbells.mean_ns),
        us(b.doorbells.mean_ns),
        a.doorbells.count,
        b.doorbells.count,
        a.domains,
        b.domains,
        us(a.replies.mean_ns),
        us(b.replies.mean_ns),
    )
}

/// The daemon's sends timed in this run (scale_sends.rs): the event's
/// send to a cold watcher's socket against the reply's on the writer's,
/// and how much of the CPU per write's growth the event's send is.
fn sends_text(r: &ScaleResult) -> String {
    let [(n_a, Ok(a)), (n_b, Ok(b))] = r.sends.as_slice() else {
        return match r.sends.iter().find_map(|(_, t)| t.as_ref().err()) {
            Some(e) => format!("\nThe sends were not timed in this run: {e:#}.\n"),
            None => String::new(),
        };
    };
    let label = r.curves.first().map_or("shim", |c| c.label.as_str());
    let us = |ns: f64| ns / 1000.0;
    let cpu_at = |n: usize| write_cpu(r, r.curves.first()?, n);
    // Tracing, and the traced run's own drift, slow the hot reply's send
    // too: only what the event's send grew beyond it is the cold socket's.
    let event_grew = us(b.events.mean_ns - a.events.mean_ns);
    let reply_grew = us(b.replies.mean_ns - a.replies.mean_ns);
    let cold = event_grew - reply_grew;
    let share = match (cpu_at(*n_a), cpu_at(*n_b)) {
        (Some(cpu_a), Some(cpu_b)) if cpu_b > cpu_a && cold > 0.0 => format!(
            ". The event's send grew {event_grew:.2} µs and the reply's {reply_grew:.2} µs: \
             tracing moves both, so reaching a cold socket costs at least their difference, \
             {cold:.2} µs of the {:.2} µs the {label}'s CPU per write grew untraced. That \
             alone, the rest of the write as cheap at N={n_b} as at N={n_a} ({cpu_a:.2} µs), \
             makes the ratio {:.2}×",
            cpu_b - cpu_a,
            (cpu_a + cold) / cpu_a
        ),
        _ => String::new(),
    };
    format!(
        "\nThose sends, timed in this run: one more S2 spread run of the {label} (sockets \
         only) at N={n_a} and at N={n_b}, with bpftrace timing each sendto from entry to exit \
         (its overhead included, alike at both N). An event's send to a watcher's socket took \
         {:.2} µs at N={n_a} and {:.2} µs at N={n_b} ({} and {} sends over {} and {} \
         sockets); the reply's send on the writer's socket, as hot at every N, {:.2} and \
         {:.2} µs{share}.\n",
        us(a.events.mean_ns),
        us(b.events.mean_ns),
        a.events.count,
        b.events.count,
        a.watchers,
        b.watchers,
        us(a.replies.mean_ns),
        us(b.replies.mean_ns),
    )
}

fn table(r: &ScaleResult, pick: impl Fn(&Point) -> Sample, with_zero: bool) -> String {
    let mut s = String::from("| N × 15 watches |");
    let mut rule = String::from("|---|");
    for c in &r.curves {
        let _ = write!(s, " {} |", c.label);
        rule += "---|";
    }
    s += "\n";
    s += &rule;
    s += "\n";
    for (row, &n) in r.levels.iter().enumerate() {
        if n == 0 && !with_zero {
            continue;
        }
        let _ = write!(s, "| {n} |");
        for c in &r.curves {
            let cell = match &c.points {
                Ok(points) => points.get(row).map(|p| cell(&pick(p))),
                Err(_) => None,
            };
            let _ = write!(s, " {} |", cell.unwrap_or_else(|| "–".into()));
        }
        s += "\n";
    }
    if let Some((first, last)) = ends(r) {
        let _ = write!(
            s,
            "| CPU per request, N={} ÷ N={} |",
            r.levels[last], r.levels[first]
        );
        for c in &r.curves {
            let cell = growth(c, &pick, first, last).map_or("–".into(), |g| {
                if g.rounds > 1 {
                    format!("**{:.2}×** ({:.2}–{:.2})", g.ratio, g.lowest, g.highest)
                } else {
                    format!("**{:.2}×**", g.ratio)
                }
            });
            let _ = write!(s, " {cell} |");
        }
        s += "\n";
    }
    for c in &r.curves {
        if let Err(e) = &c.points {
            let _ = writeln!(s, "\n{}: {e:#}", c.label);
        }
    }
    s
}

/// The smallest N > 0 and the largest, as level indices.
fn ends(r: &ScaleResult) -> Option<(usize, usize)> {
    let first = r.levels.iter().position(|&n| n > 0)?;
    let last = r.levels.len().checked_sub(1)?;
    (first < last).then_some((first, last))
}

/// How a daemon's CPU per request grew from level `first` to `last`.
struct Growth {
    /// Of the medians over rounds (the table's cells).
    ratio: f64,
    /// Of the rounds' own pairs (each round ran every level side by side)
    /// and `ratio`: with a single round, that ratio itself.
    lowest: f64,
    highest: f64,
    rounds: usize,
}

fn growth(
    c: &Curve,
    pick: &impl Fn(&Point) -> Sample,
    first: usize,
    last: usize,
) -> Option<Growth> {
    let points = c.points.as_ref().ok()?;
    let ratio = pick(points.get(last)?).daemon_cpu_us / pick(points.get(first)?).daemon_cpu_us;
    let per_round: Vec<f64> = (c.by_round.get(first)?.iter())
        .zip(c.by_round.get(last)?)
        .map(|(a, b)| pick(b).daemon_cpu_us / pick(a).daemon_cpu_us)
        .collect();
    let (lowest, highest) = per_round
        .iter()
        .fold((ratio, ratio), |(lo, hi), &x| (lo.min(x), hi.max(x)));
    Some(Growth {
        ratio,
        lowest,
        highest,
        rounds: per_round.len(),
    })
}

/// Issue 26's goal for S2 and S5 held against the first shim's curve,
/// with the floor's beside it: met only if every round's pair is within
/// the bound, missed if none is; otherwise (or with a single round) this
/// run cannot tell.
fn goal(r: &ScaleResult, pick: impl Fn(&Point) -> Sample, scenario: &str) -> String {
    const BOUND: f64 = 1.1;
    let Some((first, last)) = ends(r) else {
        return String::new();
    };
    let Some((shim, g)) = (r.curves.first())
        .filter(|c| c.label != FLOOR)
        .and_then(|c| Some((c, growth(c, &pick, first, last)?)))
    else {
        return String::new();
    };
    let verdict = if g.rounds < 2 {
        "**unresolved** (one round cannot tell)"
    } else if g.highest <= BOUND {
        "**met**"
    } else if g.lowest > BOUND {
        "**missed**"
    } else {
        "**unresolved** (rounds on both sides of the bound)"
    };
    let mut s = format!(
        "\nGoal (issue 26, {scenario}), {}: CPU per request at N={} {:.2}× that at N={} \
         ({:.2}–{:.2} over {} round(s); ≤ {BOUND}×): {verdict}.",
        shim.label, r.levels[last], g.ratio, r.levels[first], g.lowest, g.highest, g.rounds
    );
    if let Some(f) =
        (r.curves.iter().find(|c| c.label == FLOOR)).and_then(|c| growth(c, &pick, first, last))
    {
        let _ = write!(
            s,
            " The {FLOOR} daemon, which does only what these requests need, read {:.2}× \
             ({:.2}–{:.2}) in the same rounds.",
            f.ratio, f.lowest, f.highest
        );
    }
    s + "\n"
}

fn cell(x: &Sample) -> String {
    format!(
        "{} ({:.1}/{:.1}) {:.2}",
        ops(x.ops_per_s),
        x.p50_us,
        x.p99_us,
        x.daemon_cpu_us
    )
}

/// `report` with its scale section replaced by `section` (appended if it
/// has none), the other sections as they were measured.
pub fn splice(report: &str, section: &str) -> String {
    splice_under(report, HEADING, section)
}

/// `report` with the section under `heading` (to the next `## `) replaced
/// by `section`, or `section` appended if there is none.
pub fn splice_under(report: &str, heading: &str, section: &str) -> String {
    splice_until(report, heading, section, &["\n## "])
}

/// `report` with the scale section's part under `heading` (a `###`
/// heading: S2's broad watch, S3, S4) replaced by `part`, up to the next
/// `###` or `##` heading; appended if the report has none.
pub fn splice_part(report: &str, heading: &str, part: &str) -> String {
    splice_until(report, heading, part, &["\n## ", "\n### "])
}

fn splice_until(report: &str, heading: &str, text: &str, ends: &[&str]) -> String {
    let Some(start) = report.find(heading) else {
        return format!("{}\n\n{text}", report.trim_end());
    };
    let rest = &report[start + heading.len()..];
    let end = (ends.iter())
        .filter_map(|e| rest.find(e))
        .min()
        .map_or(report.len(), |i| start + heading.len() + i + 1);
    format!("{}{text}\n{}", &report[..start], &report[end..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scale_sends::{DoorbellTimes, SendTimes, Sends};
    use std::time::Duration;

    /// S2 spread at N=10 and N=1000 costing `cpu` µs a write.
    fn point(cpu: f64) -> Point {
        Point {
            fan_out: Sample {
                daemon_cpu_us: cpu,
                ..Sample::default()
            },
            ..Point::default()
        }
    }

    /// A daemon's curve at N = 0, 10, 1000.
    fn curve(label: &str, at_10: Point, at_1000: Point) -> Curve {
        Curve {
            label: label.into(),
            points: Ok(vec![Point::default(), at_10, at_1000]),
            by_round: vec![vec![Point::default()], vec![at_10], vec![at_1000]],
            no_domains: None,
        }
    }

    /// A run at N = 0, 10, 1000 of `curves`, nothing timed.
    fn run_of(curves: Vec<Curve>) -> ScaleResult {
        ScaleResult {
            levels: vec![0, 10, 1000],
            curves,
            run: Duration::ZERO,
            rounds: 1,
            elapsed: Duration::ZERO,
            sends: Vec::new(),
            doorbells: Vec::new(),
        }
    }

    /// 4 µs per write, a quarter in the kernel, at N=10; 5 µs, 40 % in
    /// the kernel, at N=1000: kernel 1 → 2 µs, user 3 → 3 µs, so all of
    /// the growth is kernel time.
    #[test]
    fn what_grows_splits_the_growth_into_kernel_and_user_time() {
        let split = |cpu: f64, kernel: f64| Point {
            fan_out_kernel: kernel,
            ..point(cpu)
        };
        let r = run_of(vec![curve("shim", split(4.0, 0.25), split(5.0, 0.4))]);
        let text = what_grows(&r);
        assert!(text.contains("N=10 → N=1000"), "{text}");
        assert!(
            text.contains(
                "- shim: kernel 1.00 → 2.00 µs, user 3.00 → 3.00 µs: 100 % of the 1.00 µs \
                 it grows is kernel time."
            ),
            "{text}"
        );
        assert!(!text.contains("timed in this run"), "{text}");
    }

    /// The same host with its sends timed: an event's send 0.9 µs at
    /// N=10 and 1.5 µs at N=1000, the hot reply's 0.88 and 1.08 µs, leave
    /// 0.40 of the 1.00 µs per write grown to the cold socket, which alone
    /// makes 4 µs a write 4.4: 1.10×.
    #[test]
    fn what_grows_says_how_much_of_the_growth_is_the_events_send() {
        let times = |reply_ns: f64, event_ns: f64, watchers: usize| SendTimes {
            replies: Sends {
                count: 100,
                mean_ns: reply_ns,
            },
            events: Sends {
                count: 100,
                mean_ns: event_ns,
            },
            watchers,
        };
        let r = ScaleResult {
            sends: vec![
                (10, Ok(times(880.0, 900.0, 10))),
                (1000, Ok(times(1080.0, 1500.0, 100))),
            ],
            ..run_of(vec![curve("shim", point(4.0), point(5.0))])
        };
        let text = what_grows(&r);
        assert!(
            text.contains("took 0.90 µs at N=10 and 1.50 µs at N=1000"),
            "{text}"
        );
        assert!(
            text.contains("send grew 0.60 µs and the reply's 0.20 µs"),
            "{text}"
        );
        assert!(
            text.contains("0.40 µs of the 1.00 µs the shim's CPU per write grew"),
            "{text}"
        );
        assert!(text.contains("(4.00 µs), makes the ratio 1.10×"), "{text}");
        assert!(text.contains("0.88 and 1.08 µs"), "{text}");
    }

    /// The floor beside the shim: the floor 3.0 → 3.3 µs a write, the
    /// shim 4.0 → 4.5: growing as the floor, 4.3 µs at N=1000 (1.07×);
    /// 0.20 µs grown beyond the floor.
    #[test]
    fn what_grows_says_what_the_floor_leaves_the_daemon() {
        let r = run_of(vec![
            curve("shim", point(4.0), point(4.5)),
            curve(FLOOR, point(3.0), point(3.3)),
        ]);
        let text = what_grows(&r);
        assert!(
            text.contains("grew 0.30 µs from N=10 to N=1000 (3.00 → 3.30 µs)"),
            "{text}"
        );
        assert!(
            text.contains("(4.00 µs) and grows only that much would read 1.07×"),
            "{text}"
        );
        assert!(
            text.contains("the shim grew 0.50 µs, 0.20 µs more than the floor"),
            "{text}"
        );
    }

    /// With ring domains, the doorbells timed: 1.0 µs at N=10 and 1.9 µs
    /// at N=1000, the hot reply's 0.9 and 1.0 µs, leave 0.80 µs a domain
    /// event to the cold doorbell socket, 0.40 of the 1.00 µs per write
    /// grown (every other write rings one).
    #[test]
    fn what_grows_says_how_much_of_the_growth_is_the_doorbell() {
        let times = |reply_ns: f64, bell_ns: f64, domains: usize| DoorbellTimes {
            replies: Sends {
                count: 100,
                mean_ns: reply_ns,
            },
            doorbells: Sends {
                count: 100,
                mean_ns: bell_ns,
            },
            domains,
        };
        let r = ScaleResult {
            doorbells: vec![
                (10, Ok(times(900.0, 1000.0, 10))),
                (1000, Ok(times(1000.0, 1900.0, 100))),
            ],
            ..run_of(vec![curve("shim", point(4.0), point(5.0))])
        };
        let text = what_grows(&r);
        assert!(
            text.contains("doorbell took 1.00 µs at N=10 and 1.90 µs at N=1000"),
            "{text}"
        );
        assert!(
            text.contains("doorbell grew 0.90 µs and the reply's send 0.10 µs"),
            "{text}"
        );
        assert!(
            text.contains("difference, 0.80 µs a domain event"),
            "{text}"
        );
        assert!(
            text.contains("0.40 µs of the 1.00 µs the shim's CPU per write grew"),
            "{text}"
        );
        assert!(!text.contains("Those sends"), "{text}");
    }

    /// Three rounds at N=10 and N=1000: the shim 4.0/4.0/4.0 → 4.2/4.3/4.8
    /// (per round 1.05, 1.075, 1.20; medians 4.0 → 4.3, 1.075×), the
    /// floor 3.0 → 3.6 in every round (1.20×).
    fn three_rounds(shim_at_1000: [f64; 3]) -> ScaleResult {
        let rounds = |label: &str, at_10: [f64; 3], at_1000: [f64; 3]| {
            let median = |v: [f64; 3]| crate::stats::median(v.to_vec());
            Curve {
                by_round: vec![
                    vec![Point::default(); 3],
                    at_10.map(point).to_vec(),
                    at_1000.map(point).to_vec(),
                ],
                ..curve(label, point(median(at_10)), point(median(at_1000)))
            }
        };
        ScaleResult {
            rounds: 3,
            ..run_of(vec![
                rounds("shim", [4.0; 3], shim_at_1000),
                rounds(FLOOR, [3.0; 3], [3.6; 3]),
            ])
        }
    }

    #[test]
    fn the_ratio_row_gives_the_rounds_range() {
        let text = table(&three_rounds([4.2, 4.3, 4.8]), |p| p.fan_out, false);
        assert!(
            text.contains("| CPU per request, N=1000 ÷ N=10 | **1.07×** (1.05–1.20) | **1.20×** (1.20–1.20) |"),
            "{text}"
        );
    }

    #[test]
    fn the_goal_is_met_only_when_every_round_is_within_it() {
        let unresolved = goal(&three_rounds([4.2, 4.3, 4.8]), |p| p.fan_out, "S2");
        assert!(
            unresolved.contains(
                "Goal (issue 26, S2), shim: CPU per request at N=1000 1.07× that at N=10 \
                 (1.05–1.20 over 3 round(s); ≤ 1.1×): **unresolved**"
            ),
            "{unresolved}"
        );
        assert!(
            unresolved.contains("read 1.20× (1.20–1.20)"),
            "{unresolved}"
        );
        let met = goal(&three_rounds([4.2, 4.3, 4.36]), |p| p.fan_out, "S2");
        assert!(
            met.contains("(1.05–1.09 over 3 round(s); ≤ 1.1×): **met**"),
            "{met}"
        );
        let missed = goal(&three_rounds([4.5, 4.6, 4.8]), |p| p.fan_out, "S2");
        assert!(missed.contains("**missed**"), "{missed}");
        let one = goal(
            &run_of(vec![curve("shim", point(4.0), point(4.2))]),
            |p| p.fan_out,
            "S2",
        );
        assert!(
            one.contains(
                "1.05× that at N=10 (1.05–1.05 over 1 round(s); ≤ 1.1×): **unresolved** (one round"
            ),
            "{one}"
        );
    }

    #[test]
    fn splice_replaces_only_its_section() {
        let old = format!("# B\n\n## 1. X\n\nx\n\n{HEADING}\n\nold\n\n## 9. Y\n\ny\n");
        let new = splice(&old, &format!("{HEADING}\n\nnew\n"));
        assert_eq!(
            new,
            format!("# B\n\n## 1. X\n\nx\n\n{HEADING}\n\nnew\n\n## 9. Y\n\ny\n")
        );
        let appended = splice("# B\n", &format!("{HEADING}\n"));
        assert_eq!(appended, format!("# B\n\n{HEADING}\n"));
    }

    #[test]
    fn splice_part_replaces_only_its_part() {
        let part = "### S4 mass destroy";
        let old = format!(
            "# B\n\n## Scale\n\n### S2\n\nx\n\n{part}: old\n\n#### big\n\nold\n\n## 9. Y\n"
        );
        let new = splice_part(&old, part, &format!("{part}: new\n"));
        assert_eq!(
            new,
            format!("# B\n\n## Scale\n\n### S2\n\nx\n\n{part}: new\n\n## 9. Y\n")
        );
        let old = "### S2 broad watch\n\nold\n\n### S3 big store\n\nx\n";
        let new = splice_part(old, "### S2 broad watch", "### S2 broad watch\n\nnew\n");
        assert_eq!(new, "### S2 broad watch\n\nnew\n\n### S3 big store\n\nx\n");
        assert_eq!(splice_part("# B\n", part, "P\n"), "# B\n\nP\n");
    }
}
