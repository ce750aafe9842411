//! What S1's lenient run of oxenstored rests on, checked against the real
//! daemon in S1's smoke run: a listing over 4096 bytes is refused by a
//! strict client and taken whole by a lenient one.

use crate::daemons;
use crate::s1_boot_storm::replay::dom0;
use crate::s1_boot_storm::verdict::{judge, Answer, Leniency, Verdict};
use anyhow::{bail, ensure, Context, Result};
use xenstore_proto::wire::{MsgType, PAYLOAD_MAX};

/// Children listed: their names (11 bytes each with the NUL) make a
/// reply of 4400 bytes, over the protocol's 4096.
const CHILDREN: usize = 400;

/// A listing of CHILDREN children refused by a strict client, taken whole
/// by the lenient one and judged `TakeOversized`.
pub fn oversized_listing() -> Result<()> {
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
    Ok(())
}
