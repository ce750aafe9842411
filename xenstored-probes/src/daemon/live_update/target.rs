//! What a live update's target is, read from its file without running it
//! (a target that hangs or waits for input would stall the event loop,
//! and every guest with it): another shim, C xenstored or oxenstored with
//! live update, or the dynamic loader running one of them.

use crate::migration::stream;
use std::path::Path;

/// What every shim image carries, so `-f` recognises one by reading the
/// file. The stream version is in it, so an image that cannot read this
/// daemon's stream is refused.
const IMAGE_MARK: &str = "xenstored-shim image: migration stream v1\0";
const _: () = assert!(stream::VERSION == 1, "IMAGE_MARK names the stream version");

/// What a live update's target is, as far as taking this daemon's state
/// goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// Another xenstored-shim: reads the stream and binds each ring's
    /// event channel itself.
    Shim,
    /// C xenstored 4.15 or later (4.17 and 4.20 tested): reads the stream,
    /// and takes every ring's event channel bound on the one
    /// /dev/xen/evtchn fd the GLOBAL record names, and domain 0's ring
    /// connection in it (it never introduces dom0 on a live update).
    C,
    /// oxenstored 4.15 or later (4.17 tested): reads its own dump with
    /// `--live --restart`, every ring's channel and VIRQ_DOM_EXC bound on
    /// the one evtchn fd it names, each ring's page mapped by its frame.
    Oxenstored,
    /// The dynamic loader (ld.so), running the program `-c` names: that
    /// program is the target ([`program_run_by_loader`]). A xenstored built
    /// for another distribution's libc runs so (as the tests run Debian
    /// 13's C xenstored on Debian 12).
    Loader,
}

/// What `target` is, or why it cannot take this daemon's state.
pub(super) fn recognise_target(target: &Path) -> Result<Target, String> {
    use std::os::unix::fs::PermissionsExt;
    let Ok(meta) = std::fs::metadata(target) else {
        return Err("File not accessible.".to_string());
    };
    if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
        return Err("File not executable.".to_string());
    }
    let Ok(image) = std::fs::read(target) else {
        return Err("File not readable.".to_string());
    };
    // The mark is this function's own constant: any image that can carry
    // out a live update holds it.
    if memchr::memmem::find(&image, IMAGE_MARK.as_bytes()).is_some() {
        return Ok(Target::Shim);
    }
    let has = |s: &str| memchr::memmem::find(&image, s.as_bytes()).is_some();
    if image.starts_with(b"\x7fELF") && has("You have invoked 'ld.so'") {
        return Ok(Target::Loader);
    }
    let release = xen_release(&image);
    let named = |what: &str| match &release {
        Some(r) => format!("{what} {r}"),
        None => what.to_string(),
    };
    if has(IMAGE_MARK.trim_end_matches(|c: char| c.is_ascii_digit() || c == '\0')) {
        Err(format!(
            "The target is an xenstored-shim that reads another migration stream version \
             (this daemon writes v{}).",
            stream::VERSION
        ))
    } else if has("Live reload: database loaded") {
        // Its dump names the evtchn fd since live update came (4.15).
        if has("evtchn-dev,") {
            Ok(Target::Oxenstored)
        } else {
            Err(format!(
                "The target is not xenstored-shim but {}, which cannot take this daemon's \
                 state: it has no live update (oxenstored's dump names its event \
                 channels since 4.15).",
                named("oxenstored")
            ))
        }
    } else if has("talloc_new: ") && has("xenstored") {
        // C's live-update reader opens "<rootdir>/state_dump" (4.15 on).
        if has("%s/state_dump") {
            Ok(Target::C)
        } else {
            Err(format!(
                "The target is not xenstored-shim but {}, which cannot take this daemon's \
                 state: it has no live update (C xenstored reads the migration stream \
                 since 4.15).",
                named("C xenstored")
            ))
        }
    } else {
        Err(
            "The target is not xenstored-shim, C xenstored or oxenstored (or not one \
             that reads this daemon's migration stream)."
                .to_string(),
        )
    }
}

/// The program a loader invocation's words (`-c`: glibc ld.so's options,
/// the program, its arguments) run, recognised as `-f` recognises a file:
/// C xenstored or the shim (oxenstored's `--live --restart` would have to
/// follow the program: not supported).
pub(super) fn program_run_by_loader(words: &str) -> Result<Target, String> {
    const WITH_VALUE: [&str; 7] = [
        "--library-path",
        "--inhibit-rpath",
        "--audit",
        "--preload",
        "--argv0",
        "--glibc-hwcaps-prepend",
        "--glibc-hwcaps-mask",
    ];
    let mut words = words.split_whitespace();
    let program = loop {
        match words.next() {
            None => return Err("-c names no program for the loader to run.".to_string()),
            Some(w) if WITH_VALUE.contains(&w) => {
                words.next();
            }
            Some("--inhibit-cache") => {}
            Some(w) if w.starts_with('-') => {
                return Err(format!(
                    "-c: {w} is no loader option that runs a program (the words are \
                     the loader's: --library-path DIR PROGRAM ARGS...)."
                ))
            }
            Some(program) => break program,
        }
    };
    match recognise_target(Path::new(program))? {
        Target::Shim => Ok(Target::Shim),
        Target::C => Ok(Target::C),
        Target::Oxenstored => {
            Err("oxenstored through the loader is not supported: name oxenstored itself.".into())
        }
        Target::Loader => Err("-c names the loader again.".to_string()),
    }
}

/// The Xen release an upstream image was built for, by the libxenctrl it
/// links ("libxenctrl.so.4.17").
fn xen_release(image: &[u8]) -> Option<String> {
    const LIB: &[u8] = b"libxenctrl.so.";
    let at = memchr::memmem::find(image, LIB)? + LIB.len();
    let version: String = image[at..]
        .iter()
        .take_while(|b| b.is_ascii_digit() || **b == b'.')
        .map(|&b| b as char)
        .collect();
    (!version.is_empty()).then_some(version)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// `recognise_target` of an executable file holding `bytes`.
    fn recognise(name: &str, bytes: &[u8]) -> Result<Target, String> {
        let dir = std::env::temp_dir().join(format!("xss-lu-target-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join(name);
        std::fs::write(&file, bytes).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
        recognise_target(&file)
    }

    #[test]
    fn the_loader_runs_the_target_minus_c_names() {
        let dir = std::env::temp_dir().join(format!("xss-lu-loader-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let c = dir.join("xenstored");
        std::fs::write(
            &c,
            b"\x7fELF libxenctrl.so.4.20\0 talloc_new: xenstored %s/state_dump",
        )
        .unwrap();
        std::fs::set_permissions(&c, std::fs::Permissions::from_mode(0o755)).unwrap();
        let ld = b"\x7fELF You have invoked 'ld.so', the program interpreter";
        assert_eq!(recognise("ld.so", ld), Ok(Target::Loader));
        let c = c.display();
        assert_eq!(
            program_run_by_loader(&format!("--library-path /l --inhibit-cache {c} -N -U")),
            Ok(Target::C)
        );
        for (words, why) in [
            ("--library-path /l".to_string(), "names no program"),
            (
                format!("--list {c}"),
                "--list is no loader option that runs",
            ),
            ("/nonexistent".to_string(), "File not accessible."),
        ] {
            let said = program_run_by_loader(&words).unwrap_err();
            assert!(said.contains(why), "{words}: {said}");
        }
    }

    #[test]
    fn targets_are_told_apart_by_what_their_files_hold() {
        let c = b"\x7fELF libxenctrl.so.4.17\0 talloc_new: xenstored_core.c %s/state_dump";
        assert_eq!(recognise("c", c), Ok(Target::C));
        assert_eq!(recognise("shim", IMAGE_MARK.as_bytes()), Ok(Target::Shim));
        let ox = b"libxenctrl.so.4.17\0 Live reload: database loaded evtchn-dev,%d,%d";
        assert_eq!(recognise("ox", ox), Ok(Target::Oxenstored));
        let cases: [(&str, &[u8], &str); 4] = [
            (
                "old-shim",
                b"xenstored-shim image: migration stream v0\0",
                "reads another migration stream version (this daemon writes v1)",
            ),
            (
                "old-c",
                b"libxenctrl.so.4.14\0 talloc_new: xenstored",
                "C xenstored 4.14, which cannot take this daemon's state: it has no live update",
            ),
            (
                "old-ox",
                b"libxenctrl.so.4.14\0 Live reload: database loaded",
                "oxenstored 4.14, which cannot take this daemon's state: it has no live update",
            ),
            (
                "other",
                b"#!/bin/sh\n",
                "not xenstored-shim, C xenstored or oxenstored",
            ),
        ];
        for (name, bytes, why) in cases {
            let said = recognise(name, bytes).unwrap_err();
            assert!(said.contains(why), "{name}: {said}");
        }
    }
}
