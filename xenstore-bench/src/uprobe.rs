//! The kernel's floor: the `xenstore` probes of a binary as plain tracefs
//! uprobes (same fetch args as xenstore-snoop), enabled in a private trace
//! instance with no reader at all.

use anyhow::{bail, Context, Result};
use goblin::elf::{
    program_header::{PF_X, PT_LOAD},
    Elf,
};
use std::path::{Path, PathBuf};

const TRACEFS: &str = "/sys/kernel/tracing";

/// One probe site: its name and file offsets of the site and semaphore.
#[derive(Debug)]
pub struct Site {
    pub name: String,
    pub offset: u64,
    pub semaphore: u64,
}

/// The `xenstore` provider's sites in `binary` (.note.stapsdt).
pub fn sites(binary: &Path) -> Result<Vec<Site>> {
    let data = std::fs::read(binary).with_context(|| format!("read {}", binary.display()))?;
    let elf = Elf::parse(&data).context("parse ELF")?;
    let file_offset = |addr: u64| -> Result<u64> {
        elf.program_headers
            .iter()
            .find(|ph| {
                ph.p_type == PT_LOAD && (ph.p_vaddr..ph.p_vaddr + ph.p_memsz).contains(&addr)
            })
            .map(|ph| addr - ph.p_vaddr + ph.p_offset)
            .with_context(|| format!("address {addr:#x} is in no PT_LOAD segment"))
    };
    let stapsdt_base = elf
        .section_headers
        .iter()
        .find(|s| elf.shdr_strtab.get_at(s.sh_name) == Some(".stapsdt.base"))
        .map(|s| s.sh_addr);
    let mut out = Vec::new();
    for note in elf
        .iter_note_sections(&data, Some(".note.stapsdt"))
        .context("no .note.stapsdt")?
    {
        let note = note.context("bad note")?;
        if note.name != "stapsdt" || note.n_type != 3 || note.desc.len() < 24 {
            continue;
        }
        let word = |i: usize| u64::from_le_bytes(note.desc[i * 8..i * 8 + 8].try_into().unwrap());
        let (mut pc, base, sem) = (word(0), word(1), word(2));
        if let Some(actual) = stapsdt_base {
            pc = pc.wrapping_add(actual).wrapping_sub(base);
        }
        // Notes of code the linker discarded survive with addresses near 0:
        // only a site inside executable code can ever fire.
        let executable = elf.program_headers.iter().any(|ph| {
            ph.p_type == PT_LOAD
                && ph.p_flags & PF_X != 0
                && (ph.p_vaddr..ph.p_vaddr + ph.p_memsz).contains(&pc)
        });
        if !executable {
            continue;
        }
        let mut strings = note.desc[24..].split(|&b| b == 0);
        let provider = strings.next().unwrap_or_default();
        let name = String::from_utf8_lossy(strings.next().unwrap_or_default()).into_owned();
        if provider != b"xenstore" {
            continue;
        }
        out.push(Site {
            name,
            offset: file_offset(pc)?,
            semaphore: if sem == 0 { 0 } else { file_offset(sem)? },
        });
    }
    if out.is_empty() {
        bail!("{} has no xenstore probes", binary.display());
    }
    Ok(out)
}

/// Uprobes on `binary`'s request and response sites, enabled while alive.
pub struct BareUprobes {
    group: String,
    names: Vec<String>,
    instance: PathBuf,
}

impl BareUprobes {
    pub fn enable(binary: &Path) -> Result<BareUprobes> {
        let group = format!("xsbench_{}", std::process::id());
        let mut defs = String::new();
        let mut names = Vec::new();
        for (i, site) in sites(binary)?
            .iter()
            .filter(|s| s.name == "request" || s.name == "response")
            .enumerate()
        {
            names.push(format!("{}_{i}", site.name));
            defs += &format!(
                "p:{group}/{}_{i} {}:{:#x}({:#x}) serial=%di:u64 ident=%si:u64 client=%dx:u64 \
                 extra=%cx:u64 s1=+0(%r8):string s2=+0(%r9):string\n",
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
