//! The xenstore wire format (xen/include/public/io/xs_wire.h): a 16-byte
//! native-endian header {type, req_id, tx_id, len} followed by `len` bytes.

pub const HEADER_LEN: usize = 16;
pub const PAYLOAD_MAX: usize = 4096;
pub const ABS_PATH_MAX: usize = 3072;
pub const REL_PATH_MAX: usize = 2048;
/// First domid Xen reserves (xen.h's DOMID_FIRST_RESERVED): no domain has
/// it or one above.
pub const DOMID_FIRST_RESERVED: u32 = 0x7ff0;

/// Message types 0..=26. 20 was XS_RESTRICT, removed upstream; 23..=26 are
/// from the newest xenstore.txt (Xen 4.17's xs_wire.h stops at 22).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum MsgType {
    Control = 0,
    Directory = 1,
    Read = 2,
    GetPerms = 3,
    Watch = 4,
    Unwatch = 5,
    TransactionStart = 6,
    TransactionEnd = 7,
    Introduce = 8,
    Release = 9,
    GetDomainPath = 10,
    Write = 11,
    Mkdir = 12,
    Rm = 13,
    SetPerms = 14,
    WatchEvent = 15,
    Error = 16,
    IsDomainIntroduced = 17,
    Resume = 18,
    SetTarget = 19,
    ResetWatches = 21,
    DirectoryPart = 22,
    GetFeature = 23,
    SetFeature = 24,
    GetQuota = 25,
    SetQuota = 26,
}

const MSG_NAMES: [&str; 27] = [
    "XS_CONTROL",
    "XS_DIRECTORY",
    "XS_READ",
    "XS_GET_PERMS",
    "XS_WATCH",
    "XS_UNWATCH",
    "XS_TRANSACTION_START",
    "XS_TRANSACTION_END",
    "XS_INTRODUCE",
    "XS_RELEASE",
    "XS_GET_DOMAIN_PATH",
    "XS_WRITE",
    "XS_MKDIR",
    "XS_RM",
    "XS_SET_PERMS",
    "XS_WATCH_EVENT",
    "XS_ERROR",
    "XS_IS_DOMAIN_INTRODUCED",
    "XS_RESUME",
    "XS_SET_TARGET",
    "XS_RESTRICT",
    "XS_RESET_WATCHES",
    "XS_DIRECTORY_PART",
    "XS_GET_FEATURE",
    "XS_SET_FEATURE",
    "XS_GET_QUOTA",
    "XS_SET_QUOTA",
];

/// The name of any wire type number, known or not ("XS_UNKNOWN(99)" style
/// is left to callers that need it).
pub fn msg_name(ty: u32) -> Option<&'static str> {
    MSG_NAMES.get(ty as usize).copied()
}

/// The type number of a name, with or without the `XS_` prefix, any case.
pub fn msg_type_by_name(name: &str) -> Option<u32> {
    let upper = name.to_ascii_uppercase();
    let full = if upper.starts_with("XS_") {
        upper
    } else {
        format!("XS_{upper}")
    };
    MSG_NAMES.iter().position(|n| *n == full).map(|i| i as u32)
}

impl MsgType {
    pub fn from_u32(ty: u32) -> Option<MsgType> {
        use MsgType::*;
        Some(match ty {
            0 => Control,
            1 => Directory,
            2 => Read,
            3 => GetPerms,
            4 => Watch,
            5 => Unwatch,
            6 => TransactionStart,
            7 => TransactionEnd,
            8 => Introduce,
            9 => Release,
            10 => GetDomainPath,
            11 => Write,
            12 => Mkdir,
            13 => Rm,
            14 => SetPerms,
            15 => WatchEvent,
            16 => Error,
            17 => IsDomainIntroduced,
            18 => Resume,
            19 => SetTarget,
            21 => ResetWatches,
            22 => DirectoryPart,
            23 => GetFeature,
            24 => SetFeature,
            25 => GetQuota,
            26 => SetQuota,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        MSG_NAMES[self as usize]
    }
}

/// The errors a daemon may send, in xs_wire.h's order, with Linux errno values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum XsError {
    Einval,
    Eacces,
    Eexist,
    Eisdir,
    Enoent,
    Enomem,
    Enospc,
    Eio,
    Enotempty,
    Enosys,
    Erofs,
    Ebusy,
    Eagain,
    Eisconn,
    E2big,
    Eperm,
}

const ERRORS: [(XsError, &str, u32); 16] = [
    (XsError::Einval, "EINVAL", 22),
    (XsError::Eacces, "EACCES", 13),
    (XsError::Eexist, "EEXIST", 17),
    (XsError::Eisdir, "EISDIR", 21),
    (XsError::Enoent, "ENOENT", 2),
    (XsError::Enomem, "ENOMEM", 12),
    (XsError::Enospc, "ENOSPC", 28),
    (XsError::Eio, "EIO", 5),
    (XsError::Enotempty, "ENOTEMPTY", 39),
    (XsError::Enosys, "ENOSYS", 38),
    (XsError::Erofs, "EROFS", 30),
    (XsError::Ebusy, "EBUSY", 16),
    (XsError::Eagain, "EAGAIN", 11),
    (XsError::Eisconn, "EISCONN", 106),
    (XsError::E2big, "E2BIG", 7),
    (XsError::Eperm, "EPERM", 1),
];

impl XsError {
    pub fn name(self) -> &'static str {
        ERRORS[self as usize].1
    }
    pub fn errno(self) -> u32 {
        ERRORS[self as usize].2
    }
    pub fn from_errno(errno: u32) -> Option<XsError> {
        ERRORS.iter().find(|e| e.2 == errno).map(|e| e.0)
    }
    pub fn from_name(name: &str) -> Option<XsError> {
        ERRORS.iter().find(|e| e.1 == name).map(|e| e.0)
    }
}

impl std::fmt::Display for XsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::error::Error for XsError {}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub ty: u32,
    pub req_id: u32,
    pub tx_id: u32,
    pub len: u32,
}

impl Header {
    pub fn decode(b: &[u8; HEADER_LEN]) -> Header {
        let word = |i: usize| u32::from_ne_bytes(b[i * 4..i * 4 + 4].try_into().unwrap());
        Header {
            ty: word(0),
            req_id: word(1),
            tx_id: word(2),
            len: word(3),
        }
    }

    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        for (i, w) in [self.ty, self.req_id, self.tx_id, self.len]
            .iter()
            .enumerate()
        {
            b[i * 4..i * 4 + 4].copy_from_slice(&w.to_ne_bytes());
        }
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for ty in 0..27 {
            let name = msg_name(ty).unwrap();
            assert_eq!(msg_type_by_name(name), Some(ty));
            if let Some(t) = MsgType::from_u32(ty) {
                assert_eq!(t.name(), name);
            }
        }
        assert_eq!(msg_type_by_name("read"), Some(2));
        assert_eq!(MsgType::from_u32(20), None);
        assert_eq!(XsError::from_errno(2), Some(XsError::Enoent));
        assert_eq!(XsError::Eagain.name(), "EAGAIN");
    }

    #[test]
    fn header_round_trip() {
        let h = Header {
            ty: 2,
            req_id: 7,
            tx_id: 9,
            len: 4096,
        };
        assert_eq!(Header::decode(&h.encode()), h);
    }
}
