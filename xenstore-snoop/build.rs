//! Compiles the BPF programs (src/capture/bpf/xssnoop.bpf.c for tracing,
//! src/capture/bpf/xsmetrics.bpf.c for --metrics) with clang and generates
//! their libbpf-rs skeletons into OUT_DIR. The programs include
//! xenstore_contract.h, written first into OUT_DIR from xenstore-proto, so
//! a change to the probe contract there changes what they compile to.

use libbpf_cargo::SkeletonBuilder;
use std::path::PathBuf;

const SRCS: [(&str, &str); 2] = [
    ("src/capture/bpf/xssnoop.bpf.c", "xssnoop.skel.rs"),
    ("src/capture/bpf/xsmetrics.bpf.c", "xsmetrics.skel.rs"),
];

fn main() {
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    let header = out_dir.join("xenstore_contract.h");
    std::fs::write(&header, xenstore_proto::bpf::contract_header())
        .unwrap_or_else(|e| panic!("writing {}: {e}", header.display()));
    let include = format!("-I{}", out_dir.display());
    // Debian keeps asm/ headers (linux/ptrace.h needs them) under the multiarch directory.
    let multiarch = format!("-I/usr/include/{}-linux-gnu", std::env::consts::ARCH);
    for (src, skel) in SRCS {
        if let Err(e) = SkeletonBuilder::new()
            .source(src)
            .clang_args([include.as_str(), multiarch.as_str(), "-Wall", "-Werror"])
            .build_and_generate(out_dir.join(skel))
        {
            panic!("building {src} (needs clang and libelf-dev: .ci/setup installs them): {e:#}");
        }
        println!("cargo:rerun-if-changed={src}");
    }
}
