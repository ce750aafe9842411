//! The kernel's floor: `xenstore` probes of a binary as plain tracefs
//! uprobes (same fetch args as xenstore-snoop), enabled in a private trace
//! instance with no reader at all.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use xenstore_proto::Probe;
use xenstore_snoop::capture::tracefs::uprobe::fetch_args;
use xenstore_snoop::sdt::{read_probes, SdtProbe};

const TRACEFS: &str = "/sys/kernel/tracing";

/// The `xenstore` provider's sites in `binary`, read as xenstore-snoop reads
/// them (stale notes of discarded code skipped).
pub fn sites(binary: &Path) -> Result<Vec<SdtProbe>> {
    let sites: Vec<SdtProbe> = read_probes(binary)?
        .into_iter()
        .filter(|p| p.provider == xenstore_proto::PROVIDER)
        .collect();
    if sites.is_empty() {
        bail!("{} has no xenstore probes", binary.display());
    }
    Ok(sites)
}

/// What the bare uprobes fetch when they fire.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Fetch {
    /// xenstore-snoop's fetch args (`uprobe::fetch_args`, without the
    /// kernel-filter `dom` field).
    SnoopArgs,
    /// Nothing: the trap and an empty event.
    Nothing,
}

/// Uprobes on some of `binary`'s probe sites, enabled while alive.
pub struct BareUprobes {
    group: String,
    names: Vec<String>,
    instance: PathBuf,
}

impl BareUprobes {
    /// Uprobes on every site of `probes` in `binary`.
    pub fn enable(binary: &Path, probes: &[Probe], fetch: Fetch) -> Result<BareUprobes> {
        let group = format!("xsbench_{}", std::process::id());
        let mut defs = String::new();
        let mut names = Vec::new();
        for (i, site) in sites(binary)?
            .iter()
            .filter(|s| probes.iter().any(|p| p.name() == s.name))
            .enumerate()
        {
            names.push(format!("{}_{i}", site.name));
            let args = match fetch {
                Fetch::SnoopArgs => format!(" {}", fetch_args(&site.args, false)?),
                Fetch::Nothing => String::new(),
            };
            defs += &format!(
                "p:{group}/{}_{i} {}:{:#x}({:#x}){args}\n",
                site.name,
                binary.display(),
                site.offset,
                site.semaphore
            );
        }
        append(&format!("{TRACEFS}/uprobe_events"), &defs)?;
        let instance = PathBuf::from(format!("{TRACEFS}/instances/{group}"));
        let probes = BareUprobes {
            group,
            names,
            instance,
        };
        std::fs::create_dir_all(&probes.instance).context("create trace instance")?;
        write(&probes.instance.join("tracing_on"), "1")?;
        write(
            &probes
                .instance
                .join(format!("events/{}/enable", probes.group)),
            "1",
        )?;
        Ok(probes)
    }
}

impl Drop for BareUprobes {
    fn drop(&mut self) {
        let _ = write(
            &self.instance.join(format!("events/{}/enable", self.group)),
            "0",
        );
        let _ = std::fs::remove_dir(&self.instance);
        for name in &self.names {
            let _ = append(
                &format!("{TRACEFS}/uprobe_events"),
                &format!("-:{}/{name}", self.group),
            );
        }
    }
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("write {text:?} to {}", path.display()))
}

fn append(path: &str, text: &str) -> Result<()> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .with_context(|| format!("open {path} (root and tracefs needed)"))?;
    for line in text.lines() {
        f.write_all(format!("{line}\n").as_bytes())
            .with_context(|| format!("write {line:?} to {path}"))?;
    }
    Ok(())
}
