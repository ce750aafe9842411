//! Real kernels and a real hypervisor in QEMU (TCG): Xen 4.17 and 4.20 with the shim as dom0's
//! xenstored, and the BPF programs on Debian's dom0 kernels.
//! One test binary (a tier, as ripgrep's); each file a module; tests/README.md indexes them.

mod bpf_kernels;
#[path = "../common/mod.rs"]
mod common;
mod real_xen;
mod slots;
mod xen_boot;
mod xl_matrix;

use std::path::PathBuf;

/// The release build of `name`, which the VMs run: what `make deb` packages
/// and users install (`make test` builds it before this tier; a bare `cargo
/// test --test vm` needs `cargo build --release -p xenstored-probes -p
/// xenstore-snoop` after each change). Under TCG it also costs the boots a
/// tenth less CPU than the debug build.
fn release_bin(name: &str) -> PathBuf {
    let debug = common::bin(name);
    let path = debug.parent().unwrap().with_file_name("release").join(name);
    assert!(
        path.exists(),
        "{} not built: cargo build --release -p xenstored-probes -p xenstore-snoop",
        path.display()
    );
    path
}
