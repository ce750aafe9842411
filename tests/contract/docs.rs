//! The docs cannot go stale: every repository path that README,
//! ARCHITECTURE, the man pages, the tests' and the crates' docs name exists,
//! and tests/README.md indexes exactly the files of the test tiers.
//!
//! A path is a word with a `/` (or a `.rs`/`.md` file name): one that starts
//! at a top-level entry of the repository (`tests/…`, `xenstored-probes/…`)
//! must exist from the root or from the crate the doc is in; any
//! other (`capture/bpf/`, `daemon/dispatch.rs`, relative to a crate's
//! source) must be the end of some path in the repository. Xen's own paths
//! (`tools/xenstored/…`) and host paths (`/etc/…`) are not ours.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Directories no doc describes: build output, fuzzing's inputs, recorded data.
const SKIPPED_DIRS: [&str; 3] = ["target", ".git", "artifacts"];

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if p.is_dir() {
            if !SKIPPED_DIRS.contains(&name.as_str()) {
                walk(&p, out);
            }
        } else {
            out.push(p);
        }
    }
}

/// Every file of the repository, relative to its root.
fn tree() -> Vec<String> {
    let mut files = Vec::new();
    walk(&root(), &mut files);
    files
        .iter()
        .map(|p| {
            p.strip_prefix(root())
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect()
}

/// Paths that name Xen's tree, the host or build output, never this
/// repository's files.
const NOT_OURS: [&str; 15] = [
    "target/",
    "xen/",
    // What a run writes into its --out directory.
    "out/",
    "kernel/",
    // Made when a fuzz target crashes.
    "fuzz/artifacts/",
    "xenstore-fuzz/fuzz/artifacts/",
    "tools/",
    "docs/misc/",
    "docs/designs/",
    "xen/include/",
    "include/",
    "sys/",
    "linux/",
    "bpf/bpf_",
    "arch/",
];

/// What a file name a doc gives ends with.
const FILE_KINDS: [&str; 12] = [
    ".rs", ".md", ".c", ".h", ".sh", ".py", ".bt", ".stp", ".toml", ".yml", ".json", ".txt",
];

/// The words of `text` that name a path, with the line they are on: words
/// with a `/`, and `.rs` file names. A word after `$` is a shell variable's
/// value (`$here/lib.sh`); one-letter names are examples (`x/y.rs`).
fn path_words(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let is_path_char = |c: char| c.is_ascii_alphanumeric() || "_./-".contains(c);
    for (n, line) in text.lines().enumerate() {
        if line.contains("://") {
            continue;
        }
        let mut rest = line;
        while let Some(start) = rest.find(is_path_char) {
            let after_dollar = rest[..start].ends_with(['$', '{']);
            let len = rest[start..]
                .find(|c| !is_path_char(c))
                .unwrap_or(rest.len() - start);
            let word = &rest[start..start + len];
            rest = &rest[start + len..];
            let word = word
                .trim_end_matches(['.', '-'])
                .trim_start_matches(['.', '-']);
            let stem = word.split(['/', '.']).next().unwrap_or("");
            let wanted = word.contains('/') || (word.ends_with(".rs") && !word.contains("::"));
            if wanted
                && !after_dollar
                && stem.len() > 1
                && !word.starts_with('/')
                && !word.contains("//")
            {
                out.push((n + 1, word.to_string()));
            }
        }
    }
    out
}

/// Files read whole: their comments are their docs (scripts, C, BPF,
/// build files, conformance cases).
const READ_WHOLE: [&str; 11] = [
    ".md", ".c", ".h", ".d", ".bt", ".stp", ".yml", ".sh", ".xs", "Makefile", ".service",
];

/// Folders of scripts without a suffix, read whole.
const SCRIPT_DIRS: [&str; 5] = [
    "scripts/",
    ".ci/",
    "tests/xen/",
    "tests/kernels/",
    "tests/peer/",
];

/// The doc text of a file: all of a Markdown or man page, a script or a
/// C file, a Rust file's doc comments.
fn docs_of(path: &str, text: &str) -> Option<String> {
    if READ_WHOLE.iter().any(|s| path.ends_with(s))
        || SCRIPT_DIRS.iter().any(|d| path.starts_with(d))
    {
        return Some(text.to_string());
    }
    if path.starts_with("man/") {
        // roff: `\-` is a hyphen, `\fB`…`\fR` change the font.
        let mut text = text.replace("\\-", "-");
        for font in ["\\fB", "\\fI", "\\fR", "\\fP"] {
            text = text.replace(font, " ");
        }
        return Some(text);
    }
    if path.ends_with(".rs") {
        let docs: Vec<&str> = text
            .lines()
            .map(|l| {
                let t = l.trim_start();
                if t.starts_with("//!") || t.starts_with("///") {
                    t
                } else {
                    ""
                }
            })
            .collect();
        return Some(docs.join("\n"));
    }
    None
}

#[test]
fn every_path_the_docs_name_exists() {
    let files = tree();
    let dirs: BTreeSet<String> = files
        .iter()
        .flat_map(|f| {
            let parts: Vec<&str> = f.split('/').collect();
            (1..parts.len()).map(move |n| parts[..n].join("/"))
        })
        .collect();
    let exists = |p: &str| {
        let p = p.trim_end_matches('/');
        files.iter().any(|f| f == p) || dirs.contains(p)
    };
    let ends_some_path = |p: &str| {
        let p = p.trim_end_matches('/');
        let tail = format!("/{p}");
        files
            .iter()
            .chain(dirs.iter())
            .any(|f| f == p || f.ends_with(&tail))
    };
    let dir_names: BTreeSet<&str> = dirs.iter().map(|d| d.rsplit('/').next().unwrap()).collect();
    let top: BTreeSet<&str> = files.iter().map(|f| f.split('/').next().unwrap()).collect();
    let mut stale = Vec::new();
    let mut checked = 0;
    for file in &files {
        let Ok(text) = std::fs::read_to_string(root().join(file)) else {
            continue;
        };
        let Some(docs) = docs_of(file, &text) else {
            continue;
        };
        let crates: Vec<&&str> = top
            .iter()
            .filter(|t| exists(&format!("{t}/Cargo.toml")))
            .collect();
        // The crate (or the repository) the doc belongs to.
        let krate = top
            .iter()
            .find(|t| file.starts_with(&format!("{t}/")) && exists(&format!("{t}/Cargo.toml")))
            .map_or(String::new(), |t| format!("{t}/"));
        for (line, word) in path_words(&docs) {
            if NOT_OURS.iter().any(|p| word.starts_with(p)) {
                continue;
            }
            let first = word.split('/').next().unwrap();
            let ok = if !krate.is_empty() && exists(&format!("{krate}{word}")) {
                true // from the crate the doc is in
            } else if word.contains('/') && top.contains(first) {
                exists(&word)
            } else if word.starts_with("src/") {
                // From the crate the doc is in; a root doc names a crate's.
                crates.iter().any(|c| exists(&format!("{c}/{word}")))
            } else if FILE_KINDS.iter().any(|k| word.ends_with(k))
                || (word.ends_with('/') && dir_names.contains(first))
            {
                ends_some_path(&word)
            } else {
                continue; // a/b in prose: ops/s, request/response
            };
            checked += 1;
            if !ok {
                stale.push(format!("{file}:{line}: {word}"));
            }
        }
    }
    assert!(
        checked > 500,
        "only {checked} paths found: is the scan broken?"
    );
    assert!(
        stale.is_empty(),
        "{} paths the docs name do not exist:\n{}",
        stale.len(),
        stale.join("\n")
    );
}

/// tests/README.md's index rows: (tier, file).
fn indexed() -> BTreeSet<(String, String)> {
    let readme = std::fs::read_to_string(root().join("tests/README.md")).unwrap();
    readme
        .lines()
        .filter_map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let tier = cells.get(1)?.strip_prefix('`')?.strip_suffix('`')?;
            let file = cells.get(2)?.strip_prefix('`')?.strip_suffix('`')?;
            file.ends_with(".rs")
                .then(|| (tier.to_string(), file.to_string()))
        })
        .collect()
}

/// Each tier's files, as its main.rs declares them.
fn tiers() -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for e in std::fs::read_dir(root().join("tests")).unwrap().flatten() {
        let main = e.path().join("main.rs");
        let Ok(text) = std::fs::read_to_string(&main) else {
            continue;
        };
        let tier = e.file_name().to_string_lossy().into_owned();
        for line in text.lines() {
            if let Some(m) = line.strip_prefix("mod ").and_then(|l| l.strip_suffix(';')) {
                if m != "common" {
                    out.insert((tier.clone(), format!("{m}.rs")));
                }
            }
        }
    }
    out
}

#[test]
fn the_tests_index_lists_every_tier_file() {
    let (indexed, tiers) = (indexed(), tiers());
    assert!(tiers.len() > 30, "{tiers:?}");
    let missing: Vec<_> = tiers.difference(&indexed).collect();
    let extra: Vec<_> = indexed.difference(&tiers).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "tests/README.md misses {missing:?} and lists {extra:?}, which no tier declares"
    );
    // No test file outside a tier: each top-level one would be a binary of its own.
    for e in std::fs::read_dir(root().join("tests")).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        assert!(
            !name.ends_with(".rs"),
            "tests/{name}: put it in a tier (tests/README.md)"
        );
    }
}
