//! USDT probe sites of a binary, from its `.note.stapsdt` ELF notes.
//!
//! The kernel's uprobes want file offsets, not addresses: a note address is
//! mapped through the PT_LOAD segment that holds it (rust-lld lays out PIE
//! binaries where address != file offset).

use anyhow::{bail, Context, Result};
use goblin::elf::{
    program_header::{PF_X, PT_LOAD},
    Elf,
};
use std::path::Path;

const NT_STAPSDT: u32 = 3;

/// One probe site, ready for a uprobe definition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SdtProbe {
    pub provider: String,
    pub name: String,
    /// File offset of the probe instruction.
    pub offset: u64,
    /// File offset of the is-enabled semaphore (0: none).
    pub semaphore: u64,
    /// The note's argument specs, e.g. `8@%rdi`.
    pub args: Vec<String>,
}

/// Reads every stapsdt note of the ELF file at `path`.
pub fn read_probes(path: &Path) -> Result<Vec<SdtProbe>> {
    let bytes =
        std::fs::read(path).with_context(|| format!("reading ELF binary {}", path.display()))?;
    parse_probes(&bytes).with_context(|| format!("reading USDT notes of {}", path.display()))
}

pub fn parse_probes(bytes: &[u8]) -> Result<Vec<SdtProbe>> {
    let elf = Elf::parse(bytes).context("not an ELF file")?;
    if !elf.is_64 || !elf.little_endian {
        bail!("only 64-bit little-endian binaries are supported");
    }
    // Prelink-style adjustment: the note records where .stapsdt.base was at
    // link time; if the section moved since, every address moved with it.
    let base_now = elf
        .section_headers
        .iter()
        .find(|s| elf.shdr_strtab.get_at(s.sh_name) == Some(".stapsdt.base"))
        .map(|s| s.sh_addr);
    let Some(notes) = elf.iter_note_sections(bytes, Some(".note.stapsdt")) else {
        bail!("no .note.stapsdt section: the binary has no USDT probes");
    };
    let mut probes = Vec::new();
    for note in notes {
        let note = note.context("malformed .note.stapsdt")?;
        if note.n_type != NT_STAPSDT || note.name != "stapsdt" {
            continue;
        }
        let desc = note.desc;
        if desc.len() < 24 {
            bail!("stapsdt note too short ({} bytes)", desc.len());
        }
        let word = |i: usize| u64::from_le_bytes(desc[i * 8..i * 8 + 8].try_into().unwrap());
        let (mut pc, base, mut sema) = (word(0), word(1), word(2));
        if let Some(now) = base_now {
            let delta = now.wrapping_sub(base);
            pc = pc.wrapping_add(delta);
            if sema != 0 {
                sema = sema.wrapping_add(delta);
            }
        }
        let mut strings = desc[24..].split(|&b| b == 0);
        let mut next = || String::from_utf8_lossy(strings.next().unwrap_or_default()).into_owned();
        let (provider, name, args) = (next(), next(), next());
        // Notes of code the linker discarded stay behind with addresses
        // outside any executable segment: a uprobe there would be bogus.
        let Some(offset) = file_offset(&elf, pc, PF_X) else {
            continue;
        };
        let semaphore = if sema == 0 {
            0
        } else {
            file_offset(&elf, sema, 0).with_context(|| {
                format!("semaphore of {provider}:{name} at {sema:#x} is in no PT_LOAD")
            })?
        };
        probes.push(SdtProbe {
            provider,
            name,
            offset,
            semaphore,
            args: args.split_whitespace().map(str::to_string).collect(),
        });
    }
    Ok(probes)
}

/// addr − p_vaddr + p_offset of the loadable segment holding `addr`, among
/// those with all of `flags`.
fn file_offset(elf: &Elf, addr: u64, flags: u32) -> Option<u64> {
    elf.program_headers
        .iter()
        .filter(|ph| ph.p_type == PT_LOAD && ph.p_flags & flags == flags)
        .find(|ph| addr >= ph.p_vaddr && addr < ph.p_vaddr + ph.p_memsz)
        .map(|ph| addr - ph.p_vaddr + ph.p_offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shim() -> std::path::PathBuf {
        // target/debug/deps/<test> -> target/debug/xenstored-shim
        let exe = std::env::current_exe().unwrap();
        exe.parent()
            .unwrap()
            .parent()
            .unwrap()
            .join("xenstored-shim")
    }

    #[test]
    fn shim_notes_map_through_pt_load() {
        let path = shim();
        if !path.exists() {
            eprintln!("skipping: {} not built", path.display());
            return;
        }
        let probes = read_probes(&path).unwrap();
        let request = probes.iter().find(|p| p.name == "request").unwrap();
        assert_eq!(request.provider, "xenstore");
        assert_eq!(
            request.args,
            ["8@%rdi", "8@%rsi", "8@%rdx", "8@%rcx", "8@%r8", "8@%r9"]
        );
        assert_ne!(request.semaphore, 0);
        // The bytes at the file offset are the probe's 5-byte nop.
        let bytes = std::fs::read(&path).unwrap();
        let at = request.offset as usize;
        assert_eq!(
            bytes[at..at + 5],
            [0x0f, 0x1f, 0x44, 0x00, 0x00],
            "no nop at probe offset"
        );
    }

    #[test]
    fn garbage_is_a_clear_error() {
        let err = parse_probes(b"not an elf").unwrap_err();
        assert!(format!("{err:#}").contains("not an ELF"), "{err:#}");
    }
}
