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
