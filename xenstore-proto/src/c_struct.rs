//! Structs shared with C: `c_struct!` declares a `#[repr(C)]` struct and,
//! from the same field list, what a C declaration of it needs, so the C
//! side is generated (see [`crate::bpf::contract_header`]) rather than kept
//! by hand.

/// A field type C can declare: `__u8` to `__u64`, or an array of one.
pub trait CType {
    /// The element's C type.
    const NAME: &'static str;
    /// Elements of an array; None for a scalar.
    const LEN: Option<usize>;
}

macro_rules! scalar {
    ($($t:ty => $c:literal),*) => {
        $(impl CType for $t {
            const NAME: &'static str = $c;
            const LEN: Option<usize> = None;
        })*
    };
}
scalar!(u8 => "__u8", u16 => "__u16", u32 => "__u32", u64 => "__u64");

impl<T: CType, const N: usize> CType for [T; N] {
    const NAME: &'static str = T::NAME;
    const LEN: Option<usize> = Some(N);
}

/// One field as C declares it, and where Rust put it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CField {
    pub name: &'static str,
    pub c_type: &'static str,
    pub len: Option<usize>,
    pub offset: usize,
}

/// A `#[repr(C)]` struct with its fields as [`CField`]s in `C_FIELDS` and
/// its C tag in `C_NAME`.
macro_rules! c_struct {
    (
        $(#[$meta:meta])*
        pub struct $name:ident as $c_name:literal {
            $($(#[$field_meta:meta])* pub $field:ident: $ty:ty,)*
        }
    ) => {
        $(#[$meta])*
        #[repr(C)]
        pub struct $name {
            $($(#[$field_meta])* pub $field: $ty,)*
        }

        impl $name {
            /// `struct <C_NAME>` in C.
            pub const C_NAME: &'static str = $c_name;
            /// The fields in declaration order.
            pub const C_FIELDS: &'static [$crate::c_struct::CField] = &[$(
                $crate::c_struct::CField {
                    name: stringify!($field),
                    c_type: <$ty as $crate::c_struct::CType>::NAME,
                    len: <$ty as $crate::c_struct::CType>::LEN,
                    offset: std::mem::offset_of!($name, $field),
                },
            )*];
        }
    };
}
pub(crate) use c_struct;

/// The C declaration of a [`c_struct!`] struct, with static assertions
/// that C lays each field out where Rust did.
pub fn declare(c_name: &str, fields: &[CField], size: usize) -> String {
    let mut c = format!("struct {c_name} {{\n");
    for f in fields {
        let dims = f.len.map_or(String::new(), |n| format!("[{n}]"));
        c += &format!("\t{} {}{dims};\n", f.c_type, f.name);
    }
    c += "};\n";
    for f in fields {
        c += &format!(
            "_Static_assert(__builtin_offsetof(struct {c_name}, {}) == {}, \"{c_name}.{} as in Rust\");\n",
            f.name, f.offset, f.name
        );
    }
    c += &format!(
        "_Static_assert(sizeof(struct {c_name}) == {size}, \"{c_name}'s size as in Rust\");\n"
    );
    c
}
