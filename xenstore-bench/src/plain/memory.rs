//! Section 6, memory: each daemon's resident set after the same nodes
//! (100k nodes of mixed sizes at full size).

use super::{part, ratio, Budget};
use crate::affinity::Pin;
use crate::client::Conn;
use crate::daemons::{self, Daemon, Start};
use crate::scale::Part;
use crate::template::fill;
use anyhow::{Context, Result};
use std::fmt::Write;
use std::path::Path;
use xenstore_testkit::upstream::Flavor;

/// Section 6: RSS with `nodes` nodes in each daemon.
pub fn measure(shim: &Path, budget: &Budget) -> Vec<(String, Result<Rss>)> {
    let upstream = [Flavor::C, Flavor::Ocaml].map(|f| (daemons::label(f), Start::Upstream(f)));
    [("shim", Start::Shim(shim.to_path_buf()))]
        .into_iter()
        .chain(upstream)
        .map(|(label, start)| {
            let rss = (start.launch(label)).and_then(|d| fill_and_measure(&d, budget.memory_nodes));
            if let Err(e) = &rss {
                eprintln!("bench: memory {label}: FAILED: {e:#}");
            }
            (label.to_string(), rss)
        })
        .collect()
}

/// The RSS measured for the daemon called `label`, if it was measured.
fn rss_of<'a>(mem: &'a [(String, Result<Rss>)], label: &str) -> Option<&'a Rss> {
    mem.iter()
        .find(|(l, _)| l == label)
        .and_then(|(_, r)| r.as_ref().ok())
}

/// Section 6: RSS after writing the same nodes to each daemon.
pub fn render(mem: &[(String, Result<Rss>)], b: &Budget) -> Part {
    let mut g = Vec::new();
    let rss = |label: &str| rss_of(mem, label).map(|r| r.after_kib as f64);
    let shim_vs_c = rss("shim").zip(rss("C xenstored")).map(|(a, b)| a / b);
    g.push((
        format!("shim RSS ÷ C xenstored RSS, {} nodes", b.memory_nodes),
        "≤ 1.0",
        shim_vs_c.map_or(String::new(), |x| format!("{x:.2}")),
        shim_vs_c.map(|x| x <= 1.0),
    ));
    let mut limits = Vec::new();
    let per_node = |label: &str| {
        rss_of(mem, label)
            .map(|x| (x.after_kib - x.before_kib) as f64 * 1024.0 / b.memory_nodes as f64)
    };
    let values: f64 =
        (0..b.memory_nodes).map(value_len).sum::<usize>() as f64 / b.memory_nodes as f64;
    if let (Some(shim), Some(c)) = (per_node("shim"), per_node("C xenstored")) {
        limits.push(fill(
            include_str!("../../report/limits-memory.md").trim_end(),
            &[
                ("shim", format!("{shim:.0}")),
                ("c", format!("{c:.0}")),
                ("values", format!("{values:.0}")),
            ],
        ));
    }
    let mut s = String::from(
        "| daemon | RSS before (KiB) | RSS after (KiB) | ÷ C xenstored |\n|---|---|---|---|\n",
    );
    let c_after = rss_of(mem, "C xenstored").map(|r| r.after_kib as f64);
    for (label, rss) in mem {
        match rss {
            Ok(x) => {
                let _ = writeln!(
                    s,
                    "| {label} | {} | {} | {} |",
                    x.before_kib,
                    x.after_kib,
                    ratio(c_after.map(|c| x.after_kib as f64 / c))
                );
            }
            Err(e) => {
                let _ = writeln!(s, "| {label} | not measured: {e:#} | | |");
            }
        }
    }
    let intro = fill(
        include_str!("../../report/6-memory.md"),
        &[("nodes", b.memory_nodes.to_string())],
    );
    part(&intro, s, g, limits)
}

/// Value sizes cycle through 8 B (40%), 32 B (30%), 128 B (20%), 1 KiB (10%).
pub fn value_len(i: usize) -> usize {
    match i % 10 {
        0..=3 => 8,
        4..=6 => 32,
        7..=8 => 128,
        _ => 1024,
    }
}

pub struct Rss {
    pub before_kib: u64,
    pub after_kib: u64,
}

/// Writes `nodes` nodes (/mem/dN/nM, 1000 a directory) and reads VmRSS
/// before and after.
pub fn fill_and_measure(daemon: &Daemon, nodes: usize) -> Result<Rss> {
    let before_kib = crate::daemons::rss_kib(daemon.pid())?;
    Pin::Cpu0.apply_to_process(daemon.pid())?;
    let filler = {
        let socket = daemon.socket.clone();
        std::thread::spawn(move || -> Result<()> {
            Pin::Cpu0.apply_here()?;
            let mut c = Conn::connect(&socket)?;
            let value = vec![b'v'; 1024];
            for i in 0..nodes {
                let path = format!("/mem/d{}/n{}", i / 1000, i % 1000);
                c.write(0, path.as_bytes(), &value[..value_len(i)])?
                    .ok()
                    .with_context(|| format!("write {path}"))?;
            }
            Ok(())
        })
    };
    filler.join().expect("filler panicked")?;
    Pin::Free.apply_to_process(daemon.pid())?;
    // Let a daemon that trims or compacts lazily settle.
    std::thread::sleep(std::time::Duration::from_millis(300));
    Ok(Rss {
        before_kib,
        after_kib: crate::daemons::rss_kib(daemon.pid())?,
    })
}
