//! Real-Xen test aid (run in dom0): corrupts a live guest's xenstore ring
//! the way a hostile guest could, by moving the response queue's consumer
//! index 8 KiB behind its producer. The daemon meets it when it next
//! writes to the guest (e.g. a watch event after a dom0 write under the
//! guest's watched control/sysrq).
//!
//! The request queue is no use for this with a Linux guest: its xenbus
//! rings the daemon's doorbell only when it finds that queue empty, so a
//! planted request would wait there unseen.
//!
//!     xen-ring-scribble DOMID GFN

use std::process::ExitCode;
use std::sync::atomic::{AtomicU32, Ordering};

/// xs_wire.h's offsets of the response queue's indices.
const RSP_CONS: usize = 2056;
const RSP_PROD: usize = 2060;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(domid), Some(gfn)) = (
        args.first().and_then(|a| a.parse::<u16>().ok()),
        args.get(1).and_then(|a| a.parse::<u64>().ok()),
    ) else {
        eprintln!("usage: xen-ring-scribble DOMID GFN");
        return ExitCode::from(2);
    };
    let page = match xenstored_probes::xen::page::map_guest(domid, gfn) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("xen-ring-scribble: domain {domid}: {e}");
            return ExitCode::FAILURE;
        }
    };
    // SAFETY: a live mapping of PAGE_SIZE bytes; both offsets are 4-aligned.
    let (cons, prod) = unsafe {
        let word = |off: usize| &*(page.ptr().add(off) as *const AtomicU32);
        (word(RSP_CONS), word(RSP_PROD))
    };
    let p = prod.load(Ordering::Acquire);
    cons.store(p.wrapping_sub(0x2000), Ordering::Release);
    println!(
        "domain {domid}: rsp_cons {:#x}, rsp_prod {p:#x}",
        cons.load(Ordering::Acquire)
    );
    ExitCode::SUCCESS
}
