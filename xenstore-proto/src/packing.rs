//! How the probes pack several integers into one 64-bit argument: each
//! packed argument as a struct with `pack` and `unpack`, and its bit fields
//! by name, shift and width for code that works on the raw value (the
//! snooper's tracefs fetch, scripts).

/// A bit field of a packed 64-bit argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    /// The name the scripts and the snooper give the value.
    pub name: &'static str,
    pub shift: u32,
    pub width: u32,
}

impl Field {
    const fn new(name: &'static str, shift: u32, width: u32) -> Field {
        Field { name, shift, width }
    }

    /// The field's bits, unshifted.
    pub const fn mask(self) -> u64 {
        if self.width >= 64 {
            u64::MAX
        } else {
            (1 << self.width) - 1
        }
    }

    /// `value` in the field's place; bits beyond its width are dropped.
    pub const fn put(self, value: u64) -> u64 {
        (value & self.mask()) << self.shift
    }

    /// The field's value out of a packed argument.
    pub const fn get(self, packed: u64) -> u64 {
        (packed >> self.shift) & self.mask()
    }

    /// The same as a C expression on `arg` (bpftrace, DTrace, systemtap).
    pub fn c_expr(self, arg: &str) -> String {
        let shifted = match self.shift {
            0 => arg.to_string(),
            s => format!("({arg} >> {s})"),
        };
        if self.shift + self.width >= 64 {
            shifted
        } else {
            format!("({shifted} & {:#x})", self.mask())
        }
    }
}

/// "a << 32 | b << 16 | c": how the docs and xenstore.d write a packing.
pub fn describe(fields: &[Field]) -> String {
    fields
        .iter()
        .map(|f| match f.shift {
            0 => f.name.to_string(),
            s => format!("{} << {s}", f.name),
        })
        .collect::<Vec<_>>()
        .join(" | ")
}

/// Bits of the request, response and reply `flags` fields.
pub mod flag {
    /// The daemon cut str1 to fit the probe.
    pub const STR1_TRUNCATED: u16 = 1 << 0;
    /// The daemon cut str2 to fit the probe.
    pub const STR2_TRUNCATED: u16 = 1 << 1;
    /// The daemon cut str3 to fit the probe (`reply` only).
    pub const STR3_TRUNCATED: u16 = 1 << 2;
    /// Every flag defined: (bit, what it means).
    pub const ALL: [(u16, &str); 3] = [
        (STR1_TRUNCATED, "str1 truncated"),
        (STR2_TRUNCATED, "str2 truncated"),
        (STR3_TRUNCATED, "str3 truncated"),
    ];
    /// Any string cut.
    pub const TRUNCATED: u16 = STR1_TRUNCATED | STR2_TRUNCATED | STR3_TRUNCATED;
}

/// arg1 of every probe: which connection, and the request's type.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ident {
    /// The daemon's connection number (never reused).
    pub conn: u32,
    /// The xs_wire.h type of the request concerned.
    pub op: u16,
    /// The connection's domain.
    pub dom: u16,
}

impl Ident {
    pub const CONN: Field = Field::new("conn", 32, 32);
    pub const OP: Field = Field::new("op", 16, 16);
    pub const DOM: Field = Field::new("dom", 0, 16);
    /// Highest first.
    pub const FIELDS: [Field; 3] = [Self::CONN, Self::OP, Self::DOM];

    pub const fn pack(self) -> u64 {
        Self::CONN.put(self.conn as u64)
            | Self::OP.put(self.op as u64)
            | Self::DOM.put(self.dom as u64)
    }

    pub const fn unpack(v: u64) -> Ident {
        Ident {
            conn: Self::CONN.get(v) as u32,
            op: Self::OP.get(v) as u16,
            dom: Self::DOM.get(v) as u16,
        }
    }

    /// `op` of a request whose type does not fit the field: a client's
    /// bytes (type 0x10002 must not show as XS_READ), never a real type.
    pub const OP_OUT_OF_RANGE: u16 = u16::MAX;
    /// `dom` of a domid that does not fit the field; Xen's domids stop
    /// below 0x7ff0, so no real domain has it.
    pub const DOM_OUT_OF_RANGE: u16 = u16::MAX;

    /// The `op` field for message type `ty`: itself, or OP_OUT_OF_RANGE.
    pub const fn op_of(ty: u32) -> u16 {
        if ty >= Self::OP_OUT_OF_RANGE as u32 {
            Self::OP_OUT_OF_RANGE
        } else {
            ty as u16
        }
    }

    /// The `dom` field for `domid`: itself, or DOM_OUT_OF_RANGE.
    pub const fn dom_of(domid: u32) -> u16 {
        if domid >= Self::DOM_OUT_OF_RANGE as u32 {
            Self::DOM_OUT_OF_RANGE
        } else {
            domid as u16
        }
    }
}

/// arg2 of every probe: the transaction and the dom0 client process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Client {
    /// The transaction id (0: none).
    pub tx: u32,
    /// The dom0 client's pid from SO_PEERCRED; 0 for domain connections.
    pub pid: u32,
}

impl Client {
    pub const TX: Field = Field::new("tx", 32, 32);
    pub const PID: Field = Field::new("pid", 0, 32);
    /// Highest first.
    pub const FIELDS: [Field; 2] = [Self::TX, Self::PID];

    pub const fn pack(self) -> u64 {
        Self::TX.put(self.tx as u64) | Self::PID.put(self.pid as u64)
    }

    pub const fn unpack(v: u64) -> Client {
        Client {
            tx: Self::TX.get(v) as u32,
            pid: Self::PID.get(v) as u32,
        }
    }
}

/// arg3 of `request`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RequestExtra {
    /// [`flag`] bits.
    pub flags: u32,
    /// The client's req_id.
    pub req_id: u32,
}

impl RequestExtra {
    pub const FLAGS: Field = Field::new("flags", 32, 32);
    pub const REQ_ID: Field = Field::new("req_id", 0, 32);
    /// Highest first.
    pub const FIELDS: [Field; 2] = [Self::FLAGS, Self::REQ_ID];

    pub const fn pack(self) -> u64 {
        Self::FLAGS.put(self.flags as u64) | Self::REQ_ID.put(self.req_id as u64)
    }

    pub const fn unpack(v: u64) -> RequestExtra {
        RequestExtra {
            flags: Self::FLAGS.get(v) as u32,
            req_id: Self::REQ_ID.get(v) as u32,
        }
    }
}

/// arg3 of `response` and of `reply`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResponseExtra {
    /// [`flag`] bits.
    pub flags: u16,
    /// The Linux errno of the error sent; 0 for success.
    pub errno: u16,
    /// The client's req_id.
    pub req_id: u32,
}

impl ResponseExtra {
    pub const FLAGS: Field = Field::new("flags", 48, 16);
    pub const ERRNO: Field = Field::new("errno", 32, 16);
    pub const REQ_ID: Field = Field::new("req_id", 0, 32);
    /// Highest first.
    pub const FIELDS: [Field; 3] = [Self::FLAGS, Self::ERRNO, Self::REQ_ID];

    pub const fn pack(self) -> u64 {
        Self::FLAGS.put(self.flags as u64)
            | Self::ERRNO.put(self.errno as u64)
            | Self::REQ_ID.put(self.req_id as u64)
    }

    pub const fn unpack(v: u64) -> ResponseExtra {
        ResponseExtra {
            flags: Self::FLAGS.get(v) as u16,
            errno: Self::ERRNO.get(v) as u16,
            req_id: Self::REQ_ID.get(v) as u32,
        }
    }
}

/// arg3 of `truncated`: the uncut byte lengths of the strings of the probe
/// that fires next (str3 for a probe with three strings, else 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CutExtra {
    pub str1_len: u32,
    pub str2_len: u32,
    pub str3_len: u32,
}

impl CutExtra {
    pub const STR1_LEN: Field = Field::new("str1_len", 42, 22);
    pub const STR2_LEN: Field = Field::new("str2_len", 21, 21);
    pub const STR3_LEN: Field = Field::new("str3_len", 0, 21);
    /// Highest first.
    pub const FIELDS: [Field; 3] = [Self::STR1_LEN, Self::STR2_LEN, Self::STR3_LEN];

    /// Lengths past a field's width (2 MiB; a message is 4 KiB) saturate.
    pub const fn pack(self) -> u64 {
        const fn fit(v: u32, f: Field) -> u64 {
            let v = v as u64;
            if v > f.mask() {
                f.mask()
            } else {
                v
            }
        }
        Self::STR1_LEN.put(fit(self.str1_len, Self::STR1_LEN))
            | Self::STR2_LEN.put(fit(self.str2_len, Self::STR2_LEN))
            | Self::STR3_LEN.put(fit(self.str3_len, Self::STR3_LEN))
    }

    pub const fn unpack(v: u64) -> CutExtra {
        CutExtra {
            str1_len: Self::STR1_LEN.get(v) as u32,
            str2_len: Self::STR2_LEN.get(v) as u32,
            str3_len: Self::STR3_LEN.get(v) as u32,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client's out-of-range type or domid is never shown as another one.
    #[test]
    fn out_of_range_types_and_domids_are_marked_not_wrapped() {
        assert_eq!(Ident::op_of(2), 2);
        assert_eq!(Ident::op_of(0x10002), Ident::OP_OUT_OF_RANGE);
        assert_eq!(Ident::op_of(u32::MAX), Ident::OP_OUT_OF_RANGE);
        assert_eq!(Ident::dom_of(0x7ff0), 0x7ff0);
        assert_eq!(Ident::dom_of(0x10006), Ident::DOM_OUT_OF_RANGE);
    }

    /// Each packing's fields tile the 64 bits exactly, highest first.
    #[test]
    fn fields_tile_the_argument() {
        for fields in [
            &Ident::FIELDS[..],
            &Client::FIELDS,
            &RequestExtra::FIELDS,
            &ResponseExtra::FIELDS,
            &CutExtra::FIELDS,
        ] {
            let mut top = 64;
            for f in fields {
                assert_eq!(f.shift + f.width, top, "{fields:?}");
                top = f.shift;
            }
            assert_eq!(top, 0, "{fields:?}");
        }
        // req_id is the low word of both extras: readable without the probe.
        assert_eq!(RequestExtra::REQ_ID, ResponseExtra::REQ_ID);
    }

    #[test]
    fn cut_lengths_round_trip_and_saturate() {
        let c = CutExtra {
            str1_len: 3072,
            str2_len: 4000,
            str3_len: 7,
        };
        assert_eq!(CutExtra::unpack(c.pack()), c);
        let huge = CutExtra {
            str2_len: u32::MAX,
            ..c
        };
        assert_eq!(CutExtra::unpack(huge.pack()).str2_len, (1 << 21) - 1);
        assert_eq!(CutExtra::unpack(huge.pack()).str3_len, 7);
    }

    #[test]
    fn unpack_undoes_pack_at_the_edges() {
        for conn in [0, 1, u32::MAX] {
            for op in [0, 15, u16::MAX] {
                for dom in [0, 0x7ff0, u16::MAX] {
                    let i = Ident { conn, op, dom };
                    assert_eq!(Ident::unpack(i.pack()), i);
                }
            }
        }
        for tx in [0, 1, u32::MAX] {
            for pid in [0, 1, u32::MAX] {
                let c = Client { tx, pid };
                assert_eq!(Client::unpack(c.pack()), c);
            }
        }
        let every_flag = flag::ALL.iter().fold(0, |a, (bit, _)| a | bit);
        let mut flag_sets: Vec<u16> = vec![0, every_flag, u16::MAX];
        flag_sets.extend(flag::ALL.iter().map(|(bit, _)| bit));
        for &flags in &flag_sets {
            for req_id in [0, 1, u32::MAX] {
                let r = RequestExtra {
                    flags: flags.into(),
                    req_id,
                };
                assert_eq!(RequestExtra::unpack(r.pack()), r);
                for errno in [0, 2, 106, u16::MAX] {
                    let r = ResponseExtra {
                        flags,
                        errno,
                        req_id,
                    };
                    assert_eq!(ResponseExtra::unpack(r.pack()), r);
                }
            }
        }
        let r = RequestExtra {
            flags: u32::MAX,
            req_id: 0,
        };
        assert_eq!(RequestExtra::unpack(r.pack()), r);
    }

    /// The packings as xenstore.d has always written them.
    #[test]
    fn packings_are_the_documented_ones() {
        let ident = Ident {
            conn: 3,
            op: 2,
            dom: 7,
        };
        assert_eq!(ident.pack(), 3 << 32 | 2 << 16 | 7);
        assert_eq!(Client { tx: 5, pid: 100 }.pack(), 5 << 32 | 100);
        let req = RequestExtra {
            flags: flag::STR2_TRUNCATED.into(),
            req_id: 9,
        };
        assert_eq!(req.pack(), 2 << 32 | 9);
        let resp = ResponseExtra {
            flags: flag::STR1_TRUNCATED,
            errno: 2,
            req_id: 9,
        };
        assert_eq!(resp.pack(), 1 << 48 | 2 << 32 | 9);
        assert_eq!(describe(&Ident::FIELDS), "conn << 32 | op << 16 | dom");
        assert_eq!(
            describe(&ResponseExtra::FIELDS),
            "flags << 48 | errno << 32 | req_id"
        );
    }

    #[test]
    fn fields_read_and_write_their_bits_only() {
        assert_eq!(Ident::DOM.mask(), 0xffff);
        assert_eq!(Ident::OP.put(0x1_0002), 2 << 16);
        assert_eq!(Ident::CONN.get(u64::MAX), u32::MAX as u64);
        assert_eq!(Ident::OP.c_expr("arg1"), "((arg1 >> 16) & 0xffff)");
        assert_eq!(Ident::DOM.c_expr("arg1"), "(arg1 & 0xffff)");
        assert_eq!(Ident::CONN.c_expr("arg1"), "(arg1 >> 32)");
        let whole = Field::new("x", 0, 64);
        assert_eq!((whole.mask(), whole.get(u64::MAX)), (u64::MAX, u64::MAX));
    }
}
