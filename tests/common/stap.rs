//! systemtap's pass 2 (parse and elaborate) without kernel headers.

use std::path::PathBuf;
use std::process::Command;

/// A stub kernel build tree for `stap -r TREE`: stap insists on one even for
/// pass 2, and nothing is compiled there, so the release, an empty
/// Module.symvers and the uprobe options are enough. The caller removes it.
pub fn stub_kernel_tree() -> PathBuf {
    let tree = super::shim::private_dir("stap-kernel");
    let release = Command::new("uname").arg("-r").output().unwrap().stdout;
    std::fs::create_dir_all(tree.join("include/config")).unwrap();
    std::fs::write(tree.join("include/config/kernel.release"), release).unwrap();
    std::fs::write(tree.join("Module.symvers"), "").unwrap();
    std::fs::write(
        tree.join(".config"),
        "CONFIG_UPROBES=y\nCONFIG_UPROBE_EVENTS=y\nCONFIG_TRACEPOINTS=y\nCONFIG_ARCH_SUPPORTS_UPROBES=y\n",
    )
    .unwrap();
    tree
}
