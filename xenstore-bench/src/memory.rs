//! Memory: a daemon's resident set with 100k nodes of mixed sizes.

use crate::affinity::Pin;
use crate::client::Conn;
use crate::daemons::Daemon;
use anyhow::{Context, Result};

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
