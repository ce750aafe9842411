//! The shim binary carries every probe declared in xenstore.d, each site
//! a 5-byte nop with its arguments where the note says.
use crate::common::process::BoundedOutput;
use std::process::Command;
use xenstore_proto::Probe;

/// The probe-site nop the kernel can optimise (`nopl 0(%rax,%rax,1)`).
const NOP5: [u8; 5] = [0x0f, 0x1f, 0x44, 0x00, 0x00];

/// Every site of `binary`, as the snooper reads the notes, is a 5-byte nop.
fn assert_sites_are_nop5(binary: &std::path::Path) -> Vec<xenstore_snoop::sdt::SdtProbe> {
    let sites = xenstore_snoop::sdt::read_probes(binary).unwrap();
    let bytes = std::fs::read(binary).unwrap();
    for site in &sites {
        let at = site.offset as usize;
        assert_eq!(bytes[at..at + 5], NOP5, "{site:?} is not at a 5-byte nop");
    }
    sites
}

/// One note a probe, its arguments as many as xenstore.d declares, in
/// the registers sdt.rs puts them in, each with its own semaphore.
#[test]
fn notes_match_the_declarations_and_sit_on_5_byte_nops() {
    let sites = assert_sites_are_nop5(&crate::common::bin("xenstored-shim"));
    let mut names: Vec<&str> = sites.iter().map(|s| s.name.as_str()).collect();
    names.sort();
    let mut declared = Probe::ALL.map(Probe::name);
    declared.sort();
    assert_eq!(names, declared, "one site per probe");
    for site in &sites {
        assert_eq!(site.provider, xenstore_proto::PROVIDER);
        let probe = Probe::from_name(&site.name).unwrap();
        assert_eq!(site.args, probe.note_args(), "{}", site.name);
        assert_ne!(site.semaphore, 0, "{}", site.name);
    }
    let reply = sites.iter().find(|s| s.name == "reply").unwrap();
    assert_eq!(reply.args.len(), 8);
    let mut semaphores: Vec<u64> = sites.iter().map(|s| s.semaphore).collect();
    semaphores.sort();
    semaphores.dedup();
    assert_eq!(semaphores.len(), sites.len(), "a semaphore each");
}

#[test]
fn every_declared_probe_is_in_the_binary() {
    let declared: Vec<String> = include_str!("../../xenstored-probes/src/xenstore.d")
        .lines()
        .filter_map(|l| l.trim().strip_prefix("probe "))
        .map(|l| l.split('(').next().unwrap().to_string())
        .collect();
    assert!(declared.len() >= 6, "{declared:?}");
    let out = Command::new("readelf")
        .arg("-n")
        .arg(crate::common::bin("xenstored-shim"))
        .bounded_output();
    let notes = String::from_utf8_lossy(&out.stdout);
    for name in &declared {
        assert!(
            notes.contains(&format!("Name: {name}\n")),
            "probe {name} missing:\n{notes}"
        );
    }
}

/// The notes of probe code the linker throws away (the bench's probe loop
/// once had a second, discarded copy of the probes) stay behind with pc 0,
/// outside any executable segment. A copy of the shim given such a note
/// for its first probe: the snooper still finds exactly the real sites.
#[test]
fn stale_notes_of_discarded_code_are_skipped() {
    let dir = crate::common::daemon::scratch_dir("stale-notes").unwrap();
    let binary = dir.join("xenstored-shim");
    std::fs::copy(crate::common::bin("xenstored-shim"), &binary).unwrap();
    let dump = dir.join("notes");
    let section = |how: &str| {
        let out = Command::new("objcopy")
            .arg(format!("--{how}-section"))
            .arg(format!(".note.stapsdt={}", dump.display()))
            .arg(&binary)
            .bounded_output();
        assert!(out.status.success(), "objcopy --{how}-section: {out:?}");
    };
    section("dump");
    let mut notes = std::fs::read(&dump).unwrap();
    // The first note (namesz, descsz, type, name, desc; each part 4-aligned)
    // again, its pc (the desc's first word) zeroed.
    let word = |at: usize| u32::from_le_bytes(notes[at..at + 4].try_into().unwrap()) as usize;
    let desc_at = 12 + word(0).next_multiple_of(4);
    let mut stale = notes[..desc_at + word(4).next_multiple_of(4)].to_vec();
    stale[desc_at..desc_at + 8].fill(0);
    // After pc, base and semaphore: provider, name and arguments.
    let name = stale[desc_at + 24..].split(|&b| b == 0).nth(1).unwrap();
    let name = String::from_utf8(name.to_vec()).unwrap();
    notes.extend(stale);
    std::fs::write(&dump, &notes).unwrap();
    section("update");

    let out = Command::new("readelf")
        .arg("-n")
        .arg(&binary)
        .bounded_output();
    let named = String::from_utf8_lossy(&out.stdout)
        .matches(&format!("Name: {name}\n"))
        .count();
    assert_eq!(named, 2, "{name}: its note and the stale copy");
    let sites = assert_sites_are_nop5(&binary);
    let real = xenstore_snoop::sdt::read_probes(&crate::common::bin("xenstored-shim")).unwrap();
    assert_eq!(sites, real, "the stale note skipped, the real ones kept");
    std::fs::remove_dir_all(dir).unwrap();
}
