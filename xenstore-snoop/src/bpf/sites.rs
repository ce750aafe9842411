//! The probe sites the BPF program is attached to, as its `sites` map holds
//! them: each site's probe kind and where each argument is, from the site's
//! stapsdt note (`8@%rdi`, `-4@-16(%rbp)`, as sdt.rs reads them).
//!
//! The snooper attaches a uprobe per site itself rather than through
//! libbpf's USDT support: libbpf refuses a whole binary when one of its notes
//! points outside executable code (notes of code the linker discarded stay
//! behind, as in the bench's probe loop), where sdt.rs skips such notes.

use crate::event::Probe;
use anyhow::{bail, Context, Result};

/// `struct site` of xssnoop.bpf.c: kind, argument count, MAX_ARGS specs.
pub const SITE_LEN: usize = 8 + MAX_ARGS * ARG_SPEC_LEN;
/// The BPF program's MAX_SITES and MAX_ARGS.
pub const MAX_SITES: usize = 64;
const MAX_ARGS: usize = 8;
/// `struct arg_spec`: reg_off u16, deref u8, shift u8, disp i32.
const ARG_SPEC_LEN: usize = 8;

/// Where one argument is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArgSpec {
    /// Offset of the register in the kernel's x86-64 `struct pt_regs`.
    pub reg_off: u16,
    /// Some(disp): the value is in memory at the register + disp.
    pub deref: Option<i32>,
    /// The argument's size in bytes.
    pub size: u8,
}

/// `struct pt_regs` (x86-64) offsets, by any name of the register.
fn reg_offset(name: &str) -> Option<u16> {
    const REGS: [(&[&str], u16); 18] = [
        (&["r15", "r15d", "r15w", "r15b"], 0),
        (&["r14", "r14d", "r14w", "r14b"], 8),
        (&["r13", "r13d", "r13w", "r13b"], 16),
        (&["r12", "r12d", "r12w", "r12b"], 24),
        (&["rbp", "ebp", "bp", "bpl"], 32),
        (&["rbx", "ebx", "bx", "bl", "bh"], 40),
        (&["r11", "r11d", "r11w", "r11b"], 48),
        (&["r10", "r10d", "r10w", "r10b"], 56),
        (&["r9", "r9d", "r9w", "r9b"], 64),
        (&["r8", "r8d", "r8w", "r8b"], 72),
        (&["rax", "eax", "ax", "al", "ah"], 80),
        (&["rcx", "ecx", "cx", "cl", "ch"], 88),
        (&["rdx", "edx", "dx", "dl", "dh"], 96),
        (&["rsi", "esi", "si", "sil"], 104),
        (&["rdi", "edi", "di", "dil"], 112),
        (&["rip", "eip", "ip"], 128),
        (&["rsp", "esp", "sp", "spl"], 152),
        (&[], 0),
    ];
    REGS.iter()
        .find(|(names, _)| names.contains(&name))
        .map(|&(_, off)| off)
}

impl ArgSpec {
    /// Parses one stapsdt argument: `SIZE@%REG` or `SIZE@DISP(%REG)`.
    pub fn parse(spec: &str) -> Result<ArgSpec> {
        let bad = || format!("unsupported USDT argument {spec:?}");
        let (size, loc) = spec.split_once('@').with_context(bad)?;
        let size: i8 = size.parse().ok().with_context(bad)?;
        let size = size.unsigned_abs();
        if ![1, 2, 4, 8].contains(&size) {
            bail!(bad());
        }
        let reg = |r: &str| r.strip_prefix('%').and_then(reg_offset).with_context(bad);
        let (reg_off, deref) = match loc.split_once('(') {
            None => (reg(loc)?, None),
            Some((disp, rest)) => {
                let base = reg(rest.strip_suffix(')').with_context(bad)?)?;
                let disp = if disp.is_empty() {
                    0
                } else {
                    disp.parse().ok().with_context(bad)?
                };
                (base, Some(disp))
            }
        };
        Ok(ArgSpec {
            reg_off,
            deref,
            size,
        })
    }
}

/// A site's `struct site` bytes for the `sites` map.
pub fn site_bytes(kind: Probe, args: &[String]) -> Result<[u8; SITE_LEN]> {
    if args.len() > MAX_ARGS {
        bail!("{} arguments, at most {MAX_ARGS} supported", args.len());
    }
    let mut b = [0u8; SITE_LEN];
    b[0..4].copy_from_slice(&(super::record::cookie_of(kind) as u32).to_ne_bytes());
    b[4..8].copy_from_slice(&(args.len() as u32).to_ne_bytes());
    for (i, spec) in args.iter().enumerate() {
        let a = ArgSpec::parse(spec)?;
        let at = 8 + i * ARG_SPEC_LEN;
        b[at..at + 2].copy_from_slice(&a.reg_off.to_ne_bytes());
        b[at + 2] = a.deref.is_some().into();
        b[at + 3] = 64 - 8 * a.size;
        b[at + 4..at + 8].copy_from_slice(&a.deref.unwrap_or(0).to_ne_bytes());
    }
    Ok(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_parse_as_the_kernel_lays_out_pt_regs() {
        let p = |s| ArgSpec::parse(s).unwrap();
        assert_eq!(
            p("8@%rdi"),
            ArgSpec {
                reg_off: 112,
                deref: None,
                size: 8
            }
        );
        assert_eq!(p("8@%r10").reg_off, 56);
        assert_eq!(p("-4@%esi").size, 4);
        assert_eq!(
            p("8@-16(%rbp)"),
            ArgSpec {
                reg_off: 32,
                deref: Some(-16),
                size: 8
            }
        );
        assert_eq!(p("8@(%rsp)").deref, Some(0));
        for bad in ["8@$5", "%rdi", "3@%rdi", "8@%xmm0", "8@4(%rdi"] {
            assert!(ArgSpec::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn site_bytes_match_the_program_struct() {
        assert_eq!(
            SITE_LEN,
            std::mem::size_of::<super::super::skel::types::site>()
        );
        let args: Vec<String> = ["8@%rdi", "4@8(%rsp)"].map(String::from).to_vec();
        let b = site_bytes(Probe::Response, &args).unwrap();
        assert_eq!(u32::from_ne_bytes(b[0..4].try_into().unwrap()), 1);
        assert_eq!(u32::from_ne_bytes(b[4..8].try_into().unwrap()), 2);
        assert_eq!(&b[8..16], &[112, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&b[16..20], &[152, 0, 1, 32]);
        assert_eq!(i32::from_ne_bytes(b[20..24].try_into().unwrap()), 8);
        let nine = vec!["8@%rdi".to_string(); 9];
        assert!(site_bytes(Probe::Request, &nine).is_err());
    }
}
