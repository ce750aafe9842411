//! Parsing a request's payload into typed arguments, apart from executing
//! it. Argument rules follow C xenstored: `onearg` payloads are exactly one
//! NUL-terminated string; multi-argument payloads need every argument
//! NUL-terminated; numbers are read with atoi.

use crate::cnum::atoi;
use crate::error::Fail;
use crate::wire::{MsgType, XsError};

#[derive(Debug, PartialEq, Eq)]
pub enum Request<'a> {
    Control(Vec<&'a [u8]>),
    Directory(&'a [u8]),
    DirectoryPart {
        path: &'a [u8],
        offset: usize,
    },
    Read(&'a [u8]),
    GetPerms(&'a [u8]),
    Watch {
        path: &'a [u8],
        token: &'a [u8],
    },
    Unwatch {
        path: &'a [u8],
        token: &'a [u8],
    },
    TransactionStart,
    TransactionEnd {
        commit: bool,
    },
    Introduce {
        domid: u32,
        gfn: u64,
        port: u32,
    },
    Release(u32),
    GetDomainPath(u32),
    Write {
        path: &'a [u8],
        value: &'a [u8],
    },
    Mkdir(&'a [u8]),
    Rm(&'a [u8]),
    /// `perms` holds `count` NUL-terminated entries (parsed by perms.rs).
    SetPerms {
        path: &'a [u8],
        perms: &'a [u8],
        count: usize,
    },
    IsDomainIntroduced(u32),
    Resume(u32),
    SetTarget {
        domid: u32,
        target: u32,
    },
    ResetWatches,
    GetFeature(Option<u32>),
    SetFeature {
        domid: u32,
        value: u32,
    },
    GetQuota {
        domid: Option<u32>,
        name: Option<&'a [u8]>,
    },
    SetQuota {
        domid: Option<u32>,
        name: &'a [u8],
        value: u32,
    },
}

const EINVAL_ARGS: Fail = Fail(XsError::Einval, "args");

/// Exactly one NUL-terminated string filling the payload.
fn onearg(p: &[u8]) -> Result<&[u8], Fail> {
    match p.iter().position(|&b| b == 0) {
        Some(i) if i + 1 == p.len() => Ok(&p[..i]),
        _ => Err(EINVAL_ARGS),
    }
}

/// A lone path argument. Upstream passes a malformed one on as a NULL
/// name, which its lookups answer with ENOENT and MKDIR/RM with ENOMEM.
fn path_arg(p: &[u8], error: XsError) -> Result<&[u8], Fail> {
    onearg(p).map_err(|_| Fail(error, "args"))
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

pub fn parse(ty: MsgType, p: &[u8]) -> Result<Request<'_>, Fail> {
    use Request as R;
    Ok(match ty {
        MsgType::Control => {
            let args = all_strings(p);
            if args.is_empty() {
                return Err(EINVAL_ARGS);
            }
            R::Control(args)
        }
        MsgType::Directory => R::Directory(path_arg(p, XsError::Enoent)?),
        MsgType::DirectoryPart => {
            let args = all_strings(p);
            if args.len() != 2 {
                return Err(EINVAL_ARGS);
            }
            R::DirectoryPart {
                path: args[0],
                offset: atoi(args[1]) as i32 as isize as usize,
            }
        }
        MsgType::Read => R::Read(path_arg(p, XsError::Enoent)?),
        MsgType::GetPerms => R::GetPerms(path_arg(p, XsError::Enoent)?),
        MsgType::Watch => {
            let [path, token] = two_strings(p)?;
            R::Watch { path, token }
        }
        MsgType::Unwatch => {
            let [path, token] = two_strings(p)?;
            R::Unwatch { path, token }
        }
        MsgType::TransactionStart => R::TransactionStart,
        MsgType::TransactionEnd => match onearg(p)? {
            b"T" => R::TransactionEnd { commit: true },
            b"F" => R::TransactionEnd { commit: false },
            _ => return Err(EINVAL_ARGS),
        },
        MsgType::Introduce => {
            let ([domid, gfn, port], _) = strings::<3>(p)?;
            let port = atoi(port);
            if port as i32 <= 0 {
                return Err(Fail(XsError::Einval, "port"));
            }
            let gfn = std::str::from_utf8(gfn)
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .unwrap_or(0);
            R::Introduce {
                domid: atoi(domid),
                gfn,
                port,
            }
        }
        MsgType::Release => R::Release(atoi(onearg(p)?)),
        MsgType::GetDomainPath => R::GetDomainPath(atoi(onearg(p)?)),
        MsgType::Write => {
            let ([path], value) = strings::<1>(p)?;
            R::Write { path, value }
        }
        MsgType::Mkdir => R::Mkdir(path_arg(p, XsError::Enomem)?),
        MsgType::Rm => R::Rm(path_arg(p, XsError::Enomem)?),
        MsgType::SetPerms => {
            let nuls = p.iter().filter(|&&b| b == 0).count();
            if nuls < 2 {
                return Err(EINVAL_ARGS);
            }
            let ([path], perms) = strings::<1>(p)?;
            R::SetPerms {
                path,
                perms,
                count: nuls - 1,
            }
        }
        MsgType::IsDomainIntroduced => R::IsDomainIntroduced(atoi(onearg(p)?)),
        MsgType::Resume => R::Resume(atoi(onearg(p)?)),
        MsgType::SetTarget => {
            let ([domid, target], _) = strings::<2>(p)?;
            R::SetTarget {
                domid: atoi(domid),
                target: atoi(target),
            }
        }
        MsgType::ResetWatches => R::ResetWatches,
        MsgType::GetFeature => match all_strings(p).as_slice() {
            [] => R::GetFeature(None),
            [b""] => R::GetFeature(None),
            [d] => R::GetFeature(Some(number(d)?)),
            _ => return Err(EINVAL_ARGS),
        },
        MsgType::SetFeature => match all_strings(p).as_slice() {
            [d, v] => R::SetFeature {
                domid: number(d)?,
                value: number(v)?,
            },
            _ => return Err(EINVAL_ARGS),
        },
        MsgType::GetQuota => match all_strings(p).as_slice() {
            [] => R::GetQuota {
                domid: None,
                name: None,
            },
            [n] => R::GetQuota {
                domid: None,
                name: Some(n),
            },
            [d, n] => R::GetQuota {
                domid: Some(number(d)?),
                name: Some(n),
            },
            _ => return Err(EINVAL_ARGS),
        },
        MsgType::SetQuota => match all_strings(p).as_slice() {
            [n, v] => R::SetQuota {
                domid: None,
                name: n,
                value: number(v)?,
            },
            [d, n, v] => R::SetQuota {
                domid: Some(number(d)?),
                name: n,
                value: number(v)?,
            },
            _ => return Err(EINVAL_ARGS),
        },
        MsgType::WatchEvent | MsgType::Error => {
            return Err(Fail(XsError::Enosys, "server-only type"))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn onearg_needs_exactly_one_terminated_string() {
        assert_eq!(parse(MsgType::Read, b"/a\0"), Ok(Request::Read(b"/a")));
        for bad in [&b""[..], b"/a", b"/a\0\0", b"/a\0b", b"\0/a\0"] {
            let e = Fail(XsError::Enoent, "args");
            assert_eq!(parse(MsgType::Read, bad), Err(e), "{bad:?}");
            let e = Fail(XsError::Enomem, "args");
            assert_eq!(parse(MsgType::Rm, bad), Err(e), "{bad:?}");
            assert_eq!(parse(MsgType::Release, bad), Err(EINVAL_ARGS), "{bad:?}");
        }
    }

    #[test]
    fn write_value_keeps_binary_data() {
        assert_eq!(
            parse(MsgType::Write, b"/a\0v\0w"),
            Ok(Request::Write {
                path: b"/a",
                value: b"v\0w"
            })
        );
        assert_eq!(
            parse(MsgType::Write, b"/a\0"),
            Ok(Request::Write {
                path: b"/a",
                value: b""
            })
        );
        assert!(parse(MsgType::Write, b"/a").is_err());
    }

    #[test]
    fn watch_needs_two_strings() {
        assert!(parse(MsgType::Watch, b"/a\0tok").is_err());
        assert!(parse(MsgType::Watch, b"/a\0tok\0").is_ok());
        assert!(parse(MsgType::Watch, b"/a\0tok\0extra\0").is_err());
        assert!(parse(MsgType::Unwatch, b"/a\0tok\0extra\0").is_err());
    }

    #[test]
    fn set_perms_counts_terminated_entries() {
        assert_eq!(
            parse(MsgType::SetPerms, b"/a\0n0\0r1"),
            Ok(Request::SetPerms {
                path: b"/a",
                perms: b"n0\0r1",
                count: 1
            })
        );
        assert!(parse(MsgType::SetPerms, b"/a\0").is_err());
    }

    #[test]
    fn numbers_as_atoi() {
        assert_eq!(atoi(b"6"), 6);
        assert_eq!(atoi(b" 6abc"), 6);
        assert_eq!(atoi(b"abc"), 0);
        assert_eq!(atoi(b"-1"), u32::MAX);
        assert_eq!(atoi(b"99999999999999999999"), u32::MAX);
        assert!(parse(MsgType::Introduce, b"1\0\x30\0\0").is_err(), "port 0");
        assert_eq!(
            parse(MsgType::Introduce, b"5\x00123\x007\x00"),
            Ok(Request::Introduce {
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
        for ty in 0..27 {
            let Some(t) = MsgType::from_u32(ty) else {
                continue;
            };
            for s in samples {
                let _ = parse(t, s);
            }
        }
    }
}
