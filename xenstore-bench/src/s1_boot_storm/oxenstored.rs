//! CI's check of what S1's lenient run of oxenstored rests on, against
//! the real daemon: a listing over 4096 bytes is refused by a strict
//! client and taken whole by a lenient one, and a storm with its EINVAL
//! commits retried still runs every lifecycle to its end with every commit.

use crate::daemons;
use crate::s1_boot_storm::replay::dom0;
use crate::s1_boot_storm::verdict::{judge, Answer, Leniency, Verdict};
use crate::s1_boot_storm::{self, Plan};
use anyhow::{bail, ensure, Context, Result};
use xenstore_proto::wire::{MsgType, PAYLOAD_MAX};
use xenstore_testkit::upstream::Flavor;

/// Children listed: their names (11 bytes each with the NUL) make a
/// reply of 4400 bytes, over the protocol's 4096.
const CHILDREN: usize = 400;

pub fn smoke(idle: usize, parallel: usize) -> Result<()> {
    oversized_listing()?;
    storm(idle, parallel)
}

fn oversized_listing() -> Result<()> {
    let daemon = daemons::oxenstored("oxenstored listing")?;
    let mut writer = dom0(&daemon.socket)?;
    let names: Vec<String> = (0..CHILDREN).map(|i| format!("child-{i:04}")).collect();
    for n in &names {
        writer.write(0, &format!("/big/{n}"), "")?;
    }
    let mut strict = dom0(&daemon.socket)?;
    match strict.directory(0, "/big") {
        Err(e) if e.to_string().contains(&format!("exceeds {PAYLOAD_MAX}")) => {}
        other => bail!("a strict client took oxenstored's long listing: {other:?}"),
    }
    let mut lenient = dom0(&daemon.socket)?;
    lenient.reply_max = Leniency::Oxenstored.reply_max();
    let mut got = lenient
        .directory(0, "/big")
        .context("the lenient client's listing")?;
    got.sort();
    ensure!(
        got == names,
        "listed {} children, not {CHILDREN}",
        got.len()
    );
    let bytes: usize = got.iter().map(|n| n.len() + 1).sum();
    let verdict = judge(
        Leniency::Oxenstored,
        MsgType::Directory,
        Answer::Reply(bytes),
    );
    ensure!(
        verdict == Verdict::TakeOversized,
        "{bytes} bytes judged {verdict:?}"
    );
    println!(
        "storm smoke oxenstored: a {bytes}-byte listing refused by a strict client, \
         taken whole by the lenient one"
    );
    Ok(())
}

fn storm(idle: usize, parallel: usize) -> Result<()> {
    let r = s1_boot_storm::run(&Plan {
        shims: Vec::new(),
        upstream: vec![Flavor::Ocaml],
        idle: vec![idle],
        parallel: vec![parallel],
    });
    let storms = r.curves[0].whole()?;
    // every storm checked that it made P lifecycles' commits
    for (k, p, s) in storms {
        println!(
            "storm smoke oxenstored: K={k} P={p}: {} lifecycles, {} commits, {} EAGAIN, \
             {} EINVAL retried ({} transactions, each then committed), {} oversized listings",
            s.lifecycles,
            s.tally.committed,
            s.tally.eagain,
            s.tally.einval,
            s.tally.einval_then_committed,
            s.tally.oversized
        );
    }
    ensure!(!storms.is_empty(), "no storm ran");
    Ok(())
}
