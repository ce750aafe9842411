//! What the running kernel offers the BPF back end, asked of the kernel
//! itself (not read from its version: distributions backport).

use libbpf_rs::libbpf_sys as sys;
use std::ffi::CStr;

/// Whether the kernel has uprobe-multi links (6.6 and later) that filter
/// by process, not by thread (fixed in 6.9 and its stable releases): the
/// program's one link for the daemon's process needs both. Asked as libbpf
/// asks it: a trivial uprobe-multi program, then links the kernel must
/// refuse, each with the error only a kernel that has them gives.
pub fn uprobe_multi_links() -> bool {
    let insns = [
        // r0 = 0; exit
        sys::bpf_insn {
            code: (sys::BPF_ALU64 | sys::BPF_MOV | sys::BPF_K) as u8,
            ..Default::default()
        },
        sys::bpf_insn {
            code: (sys::BPF_JMP | sys::BPF_EXIT) as u8,
            ..Default::default()
        },
    ];
    let load = sys::bpf_prog_load_opts {
        sz: size_of::<sys::bpf_prog_load_opts>() as _,
        expected_attach_type: sys::BPF_TRACE_UPROBE_MULTI,
        ..Default::default()
    };
    // SAFETY: the instructions and options outlive the call; the options'
    // size is their own.
    let prog = unsafe {
        sys::bpf_prog_load(
            sys::BPF_PROG_TYPE_KPROBE,
            std::ptr::null(),
            c"GPL".as_ptr(),
            insns.as_ptr(),
            insns.len() as _,
            &load as *const _ as *mut _,
        )
    };
    if prog < 0 {
        return false;
    }
    // A directory is no binary: EBADF from a kernel with the links.
    let has_links = link_error(prog, c"/", 0) == libc::EBADF;
    // A pid that cannot be: EINVAL before the path from a kernel whose
    // links filter by process.
    let by_process = has_links && link_error(prog, c"/", -1) == libc::EINVAL;
    // SAFETY: prog is our own descriptor, closed once.
    unsafe { libc::close(prog) };
    by_process
}

/// The errno with which the kernel refuses a uprobe-multi link of `prog`
/// on `path` for `pid` (0 if it made one).
fn link_error(prog: i32, path: &CStr, pid: i32) -> i32 {
    let offsets: [std::ffi::c_ulong; 1] = [0];
    let opts = sys::bpf_link_create_opts {
        sz: size_of::<sys::bpf_link_create_opts>() as _,
        __bindgen_anon_1: sys::bpf_link_create_opts__bindgen_ty_1 {
            uprobe_multi: sys::bpf_link_create_opts__bindgen_ty_1__bindgen_ty_3 {
                path: path.as_ptr(),
                offsets: offsets.as_ptr(),
                cnt: 1,
                pid: pid as u32,
                ..Default::default()
            },
        },
        ..Default::default()
    };
    // SAFETY: the options and what they point to outlive the call.
    let link = unsafe { sys::bpf_link_create(prog, -1, sys::BPF_TRACE_UPROBE_MULTI, &opts) };
    if link >= 0 {
        // SAFETY: our own descriptor, closed once.
        unsafe { libc::close(link) };
        return 0;
    }
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}
