//! Compiles the BPF back end (src/capture/bpf/xssnoop.bpf.c) with clang and
//! generates its libbpf-rs skeleton into OUT_DIR.

use libbpf_cargo::SkeletonBuilder;
use std::path::PathBuf;

const SRC: &str = "src/capture/bpf/xssnoop.bpf.c";

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR")).join("xssnoop.skel.rs");
    // Debian keeps asm/ headers (linux/ptrace.h needs them) under the multiarch directory.
    let multiarch = format!("-I/usr/include/{}-linux-gnu", std::env::consts::ARCH);
    if let Err(e) = SkeletonBuilder::new()
        .source(SRC)
        .clang_args([multiarch.as_str(), "-Wall", "-Werror"])
        .build_and_generate(&out)
    {
        panic!("building {SRC} (needs clang and libelf-dev: .ci/setup installs them): {e:#}");
    }
    println!("cargo:rerun-if-changed={SRC}");
}
