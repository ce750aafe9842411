//! The USDT emitter: a probe site as SystemTap's sys/sdt.h lays one out,
//! so bpftrace, perf, systemtap and xenstore-snoop all find it.
//!
//! - The site is a 5-byte nop (`0f 1f 44 00 00`). The kernel optimises a
//!   uprobe on one (first hit rewrites it into a call to a trampoline,
//!   later firings skip the int3 trap); a 1-byte nop is never optimised.
//! - A `.note.stapsdt` ELF note gives the site's address, its semaphore's,
//!   the provider and probe names and where each argument is (`8@%rdi`).
//! - The semaphore, a u16 in `.probes`, is raised by the kernel while a
//!   tracer is attached; the caller builds the arguments only then, so an
//!   idle probe costs one load and one branch.
//!
//! Arguments sit in fixed registers: the first six where the SysV ABI puts
//! a call's, then r10 and r11, so every site of a probe reads alike.
//! Which probes exist, and how many arguments each has, is xenstore.d's
//! word: build.rs turns it into [`DECLARED`], and every site is checked
//! against it when compiled.

use std::sync::atomic::{AtomicU16, Ordering};

include!(concat!(env!("OUT_DIR"), "/xenstore_d.rs"));

/// A probe's SDT semaphore. The kernel adds one per attached tracer at
/// the address the note gives, so it must be a plain u16 in memory.
#[repr(transparent)]
pub struct Semaphore(AtomicU16);

impl Semaphore {
    #[allow(clippy::new_without_default)] // only ever a static
    pub const fn new() -> Semaphore {
        Semaphore(AtomicU16::new(0))
    }

    /// Whether any tracer is attached to the probe now.
    #[inline(always)]
    pub fn enabled(&self) -> bool {
        self.0.load(Ordering::Relaxed) != 0
    }
}

/// Whether xenstore.d declares probe `name` with `args` arguments.
pub const fn declared(name: &str, args: usize) -> bool {
    let mut i = 0;
    while i < DECLARED.len() {
        if str_eq(DECLARED[i].0, name) {
            return DECLARED[i].1 == args;
        }
        i += 1;
    }
    false
}

pub const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The probe site: a 5-byte nop; a 1-byte one only in the benchmark's
/// comparison build (build.rs, XSS_SDT_NOP1).
#[cfg(not(sdt_nop1))]
#[macro_export]
#[doc(hidden)]
macro_rules! sdt_nop {
    () => {
        "990: .byte 0x0f, 0x1f, 0x44, 0x00, 0x00"
    };
}

#[cfg(sdt_nop1)]
#[macro_export]
#[doc(hidden)]
macro_rules! sdt_nop {
    () => {
        "990: nop"
    };
}

/// The argument registers, in order, as the note names them.
#[macro_export]
#[doc(hidden)]
macro_rules! sdt_arg_spec {
    ($first:tt $(, $rest:tt)*) => {
        concat!("8@%", $first $(, " 8@%", $rest)*)
    };
}

/// One probe site: `sdt_site!(provider, name, SEMAPHORE, ["rdi" = a,
/// "rsi" = b, ...])`, each argument 8 bytes (an integer or a pointer).
/// The caller checks the semaphore first; this only places the site.
#[macro_export]
#[doc(hidden)]
macro_rules! sdt_site {
    ($provider:ident, $name:ident, $sema:path, [$($reg:tt = $arg:expr),+ $(,)?]) => {{
        const _: () = assert!(
            $crate::probes::sdt::str_eq(stringify!($provider), $crate::probes::sdt::PROVIDER)
                && $crate::probes::sdt::declared(stringify!($name), [$($reg),+].len()),
            concat!(
                "probe ",
                stringify!($provider:$name),
                " is not declared with these arguments in xenstore.d"
            )
        );
        // SAFETY: a nop and assembler directives that only add a note
        // (and a comdat base symbol); registers are read, none written.
        // Not `nomem`: the tracer reads the strings the pointers point at,
        // so their bytes must be in memory when the nop is reached.
        unsafe {
            ::core::arch::asm!(
                $crate::sdt_nop!(),
                ".pushsection .note.stapsdt, \"\", \"note\"",
                ".balign 4",
                ".4byte 992f-991f, 994f-993f, 3",
                "991: .asciz \"stapsdt\"",
                "992: .balign 4",
                "993: .8byte 990b",
                ".8byte _.stapsdt.base",
                ".8byte {sema}",
                concat!(".asciz \"", stringify!($provider), "\""),
                concat!(".asciz \"", stringify!($name), "\""),
                concat!(".asciz \"", $crate::sdt_arg_spec!($($reg),+), "\""),
                "994: .balign 4",
                ".popsection",
                // .stapsdt.base's link-time address, which tools compare
                // with the note's to undo prelink-style moves ("R": kept
                // from the linker's garbage collection). "x" puts it in
                // the code's segment: perf turns a note's address into a
                // file offset with this section's, and rust-lld gives the
                // read-only segment another address - offset than code's.
                ".ifndef _.stapsdt.base",
                ".pushsection .stapsdt.base, \"axGR\", \"progbits\", .stapsdt.base, comdat",
                ".weak _.stapsdt.base",
                ".hidden _.stapsdt.base",
                "_.stapsdt.base: .space 1",
                ".size _.stapsdt.base, 1",
                ".popsection",
                ".endif",
                sema = sym $sema,
                $(in($reg) $arg,)+
                options(readonly, nostack, preserves_flags),
            );
        }
    }};
}

/// One semaphore a probe, named as the probe: generated from xenstore.d
/// by build.rs. Here, not in mod.rs, so that stats_batch.rs, which
/// mod.rs feeds, reads its own without a cycle.
#[cfg(feature = "probes")]
#[allow(non_upper_case_globals)]
pub mod semaphore {
    use super::Semaphore;
    include!(concat!(env!("OUT_DIR"), "/semaphores.rs"));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_declared_list_is_xenstore_d() {
        assert_eq!(PROVIDER, "xenstore");
        assert!(declared("request", 6));
        assert!(!declared("request", 8));
        assert!(declared("reply", 8));
        assert!(!declared("requests", 6));
    }
}
