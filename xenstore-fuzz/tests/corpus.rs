//! Every fuzz corpus input and every crash regression, replayed through its
//! target on stable Rust: a fixed crash stays fixed, and the corpus keeps
//! reaching what it reached.

use std::path::Path;

#[test]
fn corpora_and_regressions_replay_cleanly() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    for (name, target) in xenstore_fuzz::TARGETS {
        let mut inputs = 0;
        for kind in ["corpus", "regressions"] {
            let Ok(dir) = std::fs::read_dir(root.join(kind).join(name)) else {
                continue;
            };
            for entry in dir {
                let path = entry.unwrap().path();
                let data = std::fs::read(&path).unwrap();
                let result = std::panic::catch_unwind(|| target(&data));
                assert!(result.is_ok(), "{name}: {} panics", path.display());
                inputs += 1;
            }
        }
        assert!(inputs > 0, "{name}: no corpus under {}", root.display());
    }
}
