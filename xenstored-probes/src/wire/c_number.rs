//! Numbers in requests parsed the way C xenstored's libc parses them, so
//! odd inputs ("+6", " 0x10", "6abc") get upstream's answers.

/// Skips C's isspace blanks and an optional sign: (negative, index after).
fn blanks_and_sign(s: &[u8]) -> (bool, usize) {
    let mut i = 0;
    while i < s.len() && matches!(s[i], b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
        i += 1;
    }
    match s.get(i) {
        Some(b'-') => (true, i + 1),
        Some(b'+') => (false, i + 1),
        _ => (false, i),
    }
}

/// C's atoi: optional blanks and sign, then digits; garbage ends the number;
/// the int result is reinterpreted as unsigned like upstream's domids.
pub fn atoi(s: &[u8]) -> u32 {
    let (neg, start) = blanks_and_sign(s);
    let mut v: i64 = 0;
    for &c in &s[start..] {
        if !c.is_ascii_digit() {
            break;
        }
        v = v.saturating_mul(10).saturating_add((c - b'0') as i64);
    }
    // strtol saturates to LONG_MAX; atoi's int keeps the low bits
    let v = if neg { v.wrapping_neg() } else { v };
    v as i32 as u32
}

/// strtol(s, &end, 0) that must consume the whole, non-empty string; the
/// long result is truncated to an unsigned int as upstream does.
pub fn strtol_whole(s: &[u8]) -> Option<u32> {
    if s.is_empty() {
        return None;
    }
    let (neg, i) = blanks_and_sign(s);
    let (radix, digits_from) = match (s.get(i), s.get(i + 1)) {
        (Some(b'0'), Some(b'x' | b'X')) if s.get(i + 2).is_some_and(|c| c.is_ascii_hexdigit()) => {
            (16, i + 2)
        }
        (Some(b'0'), _) => (8, i),
        _ => (10, i),
    };
    let digits = &s[digits_from..];
    if digits.is_empty() {
        return None;
    }
    let mut value: i64 = 0;
    for &c in digits {
        let d = (c as char).to_digit(radix)? as i64;
        value = value.saturating_mul(radix as i64).saturating_add(d);
    }
    let value = if neg { value.wrapping_neg() } else { value };
    Some(value as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_libc() {
        assert_eq!(atoi(b" +6abc"), 6);
        assert_eq!(atoi(b"-1"), u32::MAX);
        assert_eq!(atoi(b"x"), 0);
        assert_eq!(strtol_whole(b"0x10"), Some(16));
        assert_eq!(strtol_whole(b"010"), Some(8));
        assert_eq!(strtol_whole(b" -2"), Some(u32::MAX - 1));
        assert_eq!(strtol_whole(b"6abc"), None);
        assert_eq!(strtol_whole(b"-"), None);
        assert_eq!(strtol_whole(b""), None);
    }
}
