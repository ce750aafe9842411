//! Node permissions: `n`/`r`/`w`/`b` entries, owner first, and the C
//! xenstored rule deciding what a connection may do with a node.

use crate::wire::c_number::strtol_whole;
use crate::wire::XsError;
use std::io::Write;

pub const READ: u8 = 1;
pub const WRITE: u8 = 2;
/// Owners and privileged connections hold this on top of read/write.
pub const OWNER: u8 = 4;
/// The entry names a domain released since it was written: it grants
/// nothing, so a new domain reusing the id inherits no rights (upstream's
/// XS_PERM_IGNORE, XSA-322). Still listed by GET_PERMS.
pub const IGNORE: u8 = 0x10;

// Packed (5 bytes, alignment 1): the store keeps these in place inside
// node records (packed_node.rs), most nodes having exactly one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C, packed)]
pub struct Perm {
    pub domid: u32,
    /// READ | WRITE bits.
    pub access: u8,
}

/// A node's permission list: entry 0 names the owner and the access of
/// every domain not listed later. Read through [`PermList`], which the
/// store's borrowed `&[Perm]` shares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Perms(pub Vec<Perm>);

impl std::ops::Deref for Perms {
    type Target = [Perm];
    fn deref(&self) -> &[Perm] {
        &self.0
    }
}

/// Who is asking: what decides the outcome of a permission check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Identity {
    pub domid: u32,
    pub privileged: bool,
    /// SET_TARGET: a device model acts with its target's rights.
    pub target: Option<u32>,
}

impl Identity {
    pub fn dom0() -> Identity {
        Identity {
            domid: 0,
            privileged: true,
            target: None,
        }
    }
}

impl Perms {
    pub fn owned_by(domid: u32) -> Perms {
        Perms(vec![Perm { domid, access: 0 }])
    }

    /// Parses `count` NUL-terminated entries such as `n0\0r5\0`, as
    /// libxenstore's xs_strings_to_perms does (ids via strtol base 0).
    pub fn parse(strings: &[u8], count: usize) -> Result<Perms, XsError> {
        let mut perms = Vec::with_capacity(count);
        let mut rest = strings;
        for _ in 0..count {
            let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
            let entry = &rest[..end];
            rest = rest.get(end + 1..).unwrap_or(&[]);
            let access = match entry.first() {
                Some(b'n') => 0,
                Some(b'r') => READ,
                Some(b'w') => WRITE,
                Some(b'b') => READ | WRITE,
                _ => return Err(XsError::Einval),
            };
            let domid = strtol_whole(&entry[1..]).ok_or(XsError::Einval)?;
            perms.push(Perm { domid, access });
        }
        if perms.is_empty() {
            return Err(XsError::Einval);
        }
        Ok(Perms(perms))
    }
}

/// What a permission list answers, owned or borrowed from the store.
pub trait PermList {
    fn owner(&self) -> u32;
    fn for_identity(&self, who: &Identity) -> u8;
    fn write_to(&self, out: &mut Vec<u8>);
}

impl PermList for [Perm] {
    fn owner(&self) -> u32 {
        self[0].domid
    }

    /// C xenstored's perm_for_conn: owners and privileged connections get
    /// everything; otherwise the first entry naming the domain (or its
    /// target) decides, else the owner entry's access applies to everyone.
    fn for_identity(&self, who: &Identity) -> u8 {
        let is = |d: u32| d == who.domid || who.target == Some(d);
        if who.privileged || is(self.owner()) {
            return READ | WRITE | OWNER;
        }
        self[1..]
            .iter()
            .find(|p| p.access & IGNORE == 0 && is(p.domid))
            .unwrap_or(&self[0])
            .access
    }

    /// Appends the wire form: each entry NUL-terminated.
    fn write_to(&self, out: &mut Vec<u8>) {
        for p in self {
            out.push(match p.access & (READ | WRITE) {
                0 => b'n',
                READ => b'r',
                WRITE => b'w',
                _ => b'b',
            });
            write!(out, "{}", { p.domid }).expect("writing to a Vec");
            out.push(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guest(domid: u32) -> Identity {
        Identity {
            domid,
            privileged: false,
            target: None,
        }
    }

    #[test]
    fn parse_and_format_round_trip() {
        let p = Perms::parse(b"n0\0r5\0b0x10\0w010\0", 4).unwrap();
        assert_eq!(p.owner(), 0);
        assert_eq!(
            p.0[2],
            Perm {
                domid: 16,
                access: READ | WRITE
            }
        );
        assert_eq!(
            p.0[3],
            Perm {
                domid: 8,
                access: WRITE
            }
        );
        let mut out = Vec::new();
        p.write_to(&mut out);
        assert_eq!(out, b"n0\0r5\0b16\0w8\0");
    }

    #[test]
    fn hostile_perm_strings_are_einval() {
        for bad in [
            &b"x1\0"[..],
            b"r\0",
            b"r1x\0",
            b"\0",
            b"r-\0",
            b"r0x\0",
            b"r 1 \0",
        ] {
            assert_eq!(Perms::parse(bad, 1), Err(XsError::Einval), "{bad:?}");
        }
        assert_eq!(Perms::parse(b"", 0), Err(XsError::Einval));
        // missing entries past the end are as malformed as bad ones
        assert_eq!(Perms::parse(b"r1\0", 2), Err(XsError::Einval));
        assert_eq!({ Perms::parse(b"r-1\0", 1).unwrap().0[0].domid }, u32::MAX);
    }

    #[test]
    fn owner_privileged_listed_and_default_access() {
        let p = Perms::parse(b"w3\0r5\0n7\0", 3).unwrap();
        assert_eq!(p.for_identity(&Identity::dom0()), READ | WRITE | OWNER);
        assert_eq!(p.for_identity(&guest(3)), READ | WRITE | OWNER);
        assert_eq!(p.for_identity(&guest(5)), READ);
        assert_eq!(p.for_identity(&guest(7)), 0);
        assert_eq!(p.for_identity(&guest(9)), WRITE);
        let dm = Identity {
            domid: 9,
            privileged: false,
            target: Some(3),
        };
        assert_eq!(p.for_identity(&dm), READ | WRITE | OWNER);
        let mut p = p;
        p.0[1].access |= IGNORE;
        assert_eq!(
            p.for_identity(&guest(5)),
            WRITE,
            "falls back to the owner entry"
        );
        let mut out = Vec::new();
        p.write_to(&mut out);
        assert_eq!(out, b"w3\0r5\0n7\0");
    }
}
