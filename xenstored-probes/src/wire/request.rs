//! Parsing a request's payload into typed arguments, apart from executing
//! it: one function per message type (or shared argument shape), called by
//! that type's handler first thing. Argument rules follow C xenstored: `onearg` payloads are exactly one
//! NUL-terminated string; multi-argument payloads need every argument
//! NUL-terminated; numbers are read with atoi.

use crate::wire::c_number::atoi;
use crate::wire::error::{Fail, Reason};
use crate::wire::XsError;

const EINVAL_ARGS: Fail = Fail::new(XsError::Einval, Reason::Args);

/// Exactly one NUL-terminated string filling the payload.
fn onearg(p: &[u8]) -> Result<&[u8], Fail> {
    match p.iter().position(|&b| b == 0) {
        Some(i) if i + 1 == p.len() => Ok(&p[..i]),
        _ => Err(EINVAL_ARGS),
    }
}

/// The first `N` NUL-terminated strings and what follows them.
fn strings<const N: usize>(p: &[u8]) -> Result<([&[u8]; N], &[u8]), Fail> {
    let mut out = [&p[..0]; N];
    let mut rest = p;
    for slot in out.iter_mut() {
        let i = rest.iter().position(|&b| b == 0).ok_or(EINVAL_ARGS)?;
        *slot = &rest[..i];
        rest = &rest[i + 1..];
    }
    Ok((out, rest))
}

/// Exactly two NUL-terminated strings (a third is EINVAL, as upstream).
fn two_strings(p: &[u8]) -> Result<[&[u8]; 2], Fail> {
    match strings::<2>(p)? {
        (pair, rest) if !rest.contains(&0) => Ok(pair),
        _ => Err(EINVAL_ARGS),
    }
}

/// Every NUL-terminated string (an unterminated tail is not one).
fn all_strings(p: &[u8]) -> Vec<&[u8]> {
    let mut v: Vec<&[u8]> = p.split(|&b| b == 0).collect();
    v.pop(); // the part after the last NUL
    v
}

/// Strictly decimal, for the newest xenstore.txt's commands.
fn number(s: &[u8]) -> Result<u32, Fail> {
    if s.is_empty() || s.len() > 10 || !s.iter().all(u8::is_ascii_digit) {
        return Err(EINVAL_ARGS);
    }
    std::str::from_utf8(s)
        .unwrap()
        .parse()
        .map_err(|_| EINVAL_ARGS)
}

/// READ, DIRECTORY, GET_PERMS, MKDIR, RM: a lone path. A malformed one is
/// EINVAL, as C xenstored answers from 4.18 on (4.17 looked up a NULL
/// name: ENOENT, and ENOMEM for MKDIR/RM; DIFFERENCES.md).
pub fn path(p: &[u8]) -> Result<&[u8], Fail> {
    onearg(p)
}

/// RELEASE, GET_DOMAIN_PATH, IS_DOMAIN_INTRODUCED, RESUME: one domid.
pub fn domid(p: &[u8]) -> Result<u32, Fail> {
    Ok(atoi(onearg(p)?))
}

#[derive(Debug, PartialEq, Eq)]
pub struct Write<'a> {
    pub path: &'a [u8],
    /// Everything after the path's NUL, binary data included.
    pub value: &'a [u8],
}

pub fn write(p: &[u8]) -> Result<Write<'_>, Fail> {
    let ([path], value) = strings::<1>(p)?;
    Ok(Write { path, value })
}

#[derive(Debug, PartialEq, Eq)]
pub struct DirectoryPart<'a> {
    pub path: &'a [u8],
    pub offset: usize,
}

pub fn directory_part(p: &[u8]) -> Result<DirectoryPart<'_>, Fail> {
    match all_strings(p).as_slice() {
        [path, offset] => Ok(DirectoryPart {
            path,
            offset: atoi(offset) as i32 as isize as usize,
        }),
        _ => Err(EINVAL_ARGS),
    }
}

/// WATCH and UNWATCH.
#[derive(Debug, PartialEq, Eq)]
pub struct Watch<'a> {
    pub path: &'a [u8],
    pub token: &'a [u8],
}

pub fn watch(p: &[u8]) -> Result<Watch<'_>, Fail> {
    let [path, token] = two_strings(p)?;
    Ok(Watch { path, token })
}

/// TRANSACTION_END: true to commit, false to abort.
pub fn transaction_end(p: &[u8]) -> Result<bool, Fail> {
    match onearg(p)? {
        b"T" => Ok(true),
        b"F" => Ok(false),
        _ => Err(EINVAL_ARGS),
    }
}

#[derive(Debug, PartialEq, Eq)]
pub struct Introduce {
    pub domid: u32,
    pub gfn: u64,
    pub port: u32,
}

pub fn introduce(p: &[u8]) -> Result<Introduce, Fail> {
    let ([domid, gfn, port], _) = strings::<3>(p)?;
    let port = atoi(port);
    if port as i32 <= 0 {
        return Err(Fail::new(XsError::Einval, Reason::Port));
    }
    let gfn = std::str::from_utf8(gfn)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0);
    Ok(Introduce {
        domid: atoi(domid),
        gfn,
        port,
    })
}

/// `perms` holds `count` NUL-terminated entries (parsed by perms.rs).
#[derive(Debug, PartialEq, Eq)]
pub struct SetPerms<'a> {
    pub path: &'a [u8],
    pub perms: &'a [u8],
    pub count: usize,
}

pub fn set_perms(p: &[u8]) -> Result<SetPerms<'_>, Fail> {
    let nuls = p.iter().filter(|&&b| b == 0).count();
    if nuls < 2 {
        return Err(EINVAL_ARGS);
    }
    let ([path], perms) = strings::<1>(p)?;
    Ok(SetPerms {
        path,
        perms,
        count: nuls - 1,
    })
}

#[derive(Debug, PartialEq, Eq)]
pub struct SetTarget {
    pub domid: u32,
    pub target: u32,
}

pub fn set_target(p: &[u8]) -> Result<SetTarget, Fail> {
    let ([domid, target], _) = strings::<2>(p)?;
    Ok(SetTarget {
        domid: atoi(domid),
        target: atoi(target),
    })
}

/// CONTROL: the command and its arguments.
pub fn control(p: &[u8]) -> Result<Vec<&[u8]>, Fail> {
    let args = all_strings(p);
    if args.is_empty() {
        return Err(EINVAL_ARGS);
    }
    Ok(args)
}

/// GET_FEATURE: a domid, or none for the daemon's own features.
pub fn get_feature(p: &[u8]) -> Result<Option<u32>, Fail> {
    match all_strings(p).as_slice() {
        [] | [b""] => Ok(None),
        [d] => Ok(Some(number(d)?)),
        _ => Err(EINVAL_ARGS),
    }
}

#[derive(Debug, PartialEq, Eq)]
pub struct SetFeature {
    pub domid: u32,
    pub value: u32,
}

pub fn set_feature(p: &[u8]) -> Result<SetFeature, Fail> {
    match all_strings(p).as_slice() {
        [d, v] => Ok(SetFeature {
            domid: number(d)?,
            value: number(v)?,
        }),
        _ => Err(EINVAL_ARGS),
    }
}

/// GET_QUOTA: no name lists the quotas; no domid asks for the global value.
#[derive(Debug, PartialEq, Eq)]
pub struct GetQuota<'a> {
    pub domid: Option<u32>,
    pub name: Option<&'a [u8]>,
}

pub fn get_quota(p: &[u8]) -> Result<GetQuota<'_>, Fail> {
    let (domid, name) = match all_strings(p).as_slice() {
        [] => (None, None),
        [n] => (None, Some(*n)),
        [d, n] => (Some(number(d)?), Some(*n)),
        _ => return Err(EINVAL_ARGS),
    };
    Ok(GetQuota { domid, name })
}

/// SET_QUOTA: no domid sets the global value.
#[derive(Debug, PartialEq, Eq)]
pub struct SetQuota<'a> {
    pub domid: Option<u32>,
    pub name: &'a [u8],
    pub value: u32,
}

pub fn set_quota(p: &[u8]) -> Result<SetQuota<'_>, Fail> {
    let (domid, name, value) = match all_strings(p).as_slice() {
        [n, v] => (None, *n, *v),
        [d, n, v] => (Some(number(d)?), *n, *v),
        _ => return Err(EINVAL_ARGS),
    };
    Ok(SetQuota {
        domid,
        name,
        value: number(value)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn onearg_needs_exactly_one_terminated_string() {
        assert_eq!(path(b"/a\0"), Ok(&b"/a"[..]));
        for bad in [&b""[..], b"/a", b"/a\0\0", b"/a\0b", b"\0/a\0"] {
            assert_eq!(path(bad), Err(EINVAL_ARGS), "{bad:?}");
            assert_eq!(domid(bad), Err(EINVAL_ARGS), "{bad:?}");
        }
    }

    #[test]
    fn write_value_keeps_binary_data() {
        assert_eq!(
            write(b"/a\0v\0w"),
            Ok(Write {
                path: b"/a",
                value: b"v\0w"
            })
        );
        assert_eq!(
            write(b"/a\0"),
            Ok(Write {
                path: b"/a",
                value: b""
            })
        );
        assert!(write(b"/a").is_err());
    }

    #[test]
    fn watch_needs_two_strings() {
        assert!(watch(b"/a\0tok").is_err());
        assert!(watch(b"/a\0tok\0").is_ok());
        assert!(watch(b"/a\0tok\0extra\0").is_err());
    }

    #[test]
    fn set_perms_counts_terminated_entries() {
        assert_eq!(
            set_perms(b"/a\0n0\0r1"),
            Ok(SetPerms {
                path: b"/a",
                perms: b"n0\0r1",
                count: 1
            })
        );
        assert!(set_perms(b"/a\0").is_err());
    }

    #[test]
    fn numbers_as_atoi() {
        assert_eq!(atoi(b"6"), 6);
        assert_eq!(atoi(b" 6abc"), 6);
        assert_eq!(atoi(b"abc"), 0);
        assert_eq!(atoi(b"-1"), u32::MAX);
        assert_eq!(atoi(b"99999999999999999999"), u32::MAX);
        assert!(introduce(b"1\0\x30\0\0").is_err(), "port 0");
        assert_eq!(
            introduce(b"5\x00123\x007\x00"),
            Ok(Introduce {
                domid: 5,
                gfn: 123,
                port: 7
            })
        );
    }

    #[test]
    fn hostile_payloads_never_panic() {
        let samples: [&[u8]; 6] = [
            b"",
            b"\0",
            b"\0\0\0",
            b"\xff\xfe",
            b"a\0b\0c\0d\0",
            &[0u8; 4096],
        ];
        for s in samples {
            let _ = path(s);
            let _ = domid(s);
            let _ = write(s);
            let _ = directory_part(s);
            let _ = watch(s);
            let _ = transaction_end(s);
            let _ = introduce(s);
            let _ = set_perms(s);
            let _ = set_target(s);
            let _ = control(s);
            let _ = get_feature(s);
            let _ = set_feature(s);
            let _ = get_quota(s);
            let _ = set_quota(s);
        }
    }
}
