//! Node names: validation as C xenstored's is_valid_nodename, relative
//! names resolved under /local/domain/<domid>, and the `@` special names.

#[cfg(test)]
use crate::wire::REL_PATH_MAX;
use crate::wire::{XsError, ABS_PATH_MAX};
use std::borrow::Cow;
use std::io::Write;

pub const INTRODUCE_DOMAIN: &str = "@introduceDomain";
pub const RELEASE_DOMAIN: &str = "@releaseDomain";

pub fn domain_path(domid: u32) -> String {
    format!("/local/domain/{domid}")
}

fn valid_chars(p: &[u8]) -> bool {
    p.iter()
        .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'/' | b'_' | b'@'))
}

/// Length of a `/local/domain/<n>/` prefix, which the path quota excludes.
fn local_prefix_len(p: &[u8]) -> usize {
    let Some(rest) = p.strip_prefix(b"/local/domain/") else {
        return 0;
    };
    let digits = rest
        .iter()
        .take(5)
        .take_while(|c| c.is_ascii_digit())
        .count();
    if digits > 0 && rest.get(digits) == Some(&b'/') {
        14 + digits + 1
    } else {
        0
    }
}

/// Resolves a request's path argument for a connection of `domid`.
/// `path_max` is the path-length quota, which upstream measures after any
/// /local/domain/<n>/ prefix and applies to dom0 as well.
/// Absolute paths are borrowed from the payload: no allocation per request.
pub fn resolve(raw: &[u8], domid: u32, path_max: usize) -> Result<Cow<'_, str>, XsError> {
    match raw.first() {
        Some(b'/') => {
            check(raw, path_max)?;
            // valid_chars made it ASCII
            Ok(Cow::Borrowed(std::str::from_utf8(raw).unwrap()))
        }
        Some(b'@') => Err(XsError::Einval),
        _ => {
            // domain_path(domid) + "/" + raw, in one allocation
            let mut path = Vec::with_capacity(raw.len() + 25);
            write!(path, "/local/domain/{domid}/").expect("writing to a Vec");
            path.extend_from_slice(raw);
            check(&path, path_max)?;
            Ok(Cow::Owned(String::from_utf8(path).unwrap()))
        }
    }
}

fn check(p: &[u8], path_max: usize) -> Result<(), XsError> {
    if p.len() > 1 && p.ends_with(b"/") {
        return Err(XsError::Einval);
    }
    if p.windows(2).any(|w| w == b"//") {
        return Err(XsError::Einval);
    }
    if p.len() > ABS_PATH_MAX {
        return Err(XsError::Einval);
    }
    if p.len() - local_prefix_len(p) > path_max {
        return Err(XsError::Einval);
    }
    if !valid_chars(p) {
        return Err(XsError::Einval);
    }
    Ok(())
}

/// A watch path: any `@` name (not validated, as upstream), or a node name.
/// Returns the absolute name and whether events must be made relative.
pub fn resolve_watch(raw: &[u8], domid: u32, path_max: usize) -> Result<(String, bool), XsError> {
    if raw.first() == Some(&b'@') {
        if raw.len() > path_max {
            return Err(XsError::Einval);
        }
        let s = std::str::from_utf8(raw).map_err(|_| XsError::Einval)?;
        return Ok((s.to_string(), false));
    }
    let relative = raw.first() != Some(&b'/');
    Ok((resolve(raw, domid, path_max)?.into_owned(), relative))
}

/// The parent of an absolute path ("/" for top-level nodes).
pub fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) => "/",
        Some(i) => &path[..i],
        None => "/",
    }
}

/// The last component of a path.
pub fn basename(path: &str) -> &str {
    &path[path.rfind('/').map_or(0, |i| i + 1)..]
}

/// True when `path` is `ancestor` or lies below it (the watch rule).
#[cfg(test)]
pub fn is_at_or_below(path: &str, ancestor: &str) -> bool {
    if ancestor == "/" {
        return path.starts_with('/');
    }
    path.starts_with(ancestor)
        && (path.len() == ancestor.len() || path.as_bytes()[ancestor.len()] == b'/')
}

/// Joins a child name onto a path.
pub fn child(path: &str, name: &str) -> String {
    if path == "/" {
        format!("/{name}")
    } else {
        format!("{path}/{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    const M: usize = REL_PATH_MAX;

    #[test]
    fn absolute_and_relative() {
        assert_eq!(resolve(b"/a/b", 3, M).unwrap(), "/a/b");
        assert_eq!(resolve(b"/", 3, M).unwrap(), "/");
        assert_eq!(
            resolve(b"device/vbd", 6, M).unwrap(),
            "/local/domain/6/device/vbd"
        );
    }

    #[test]
    fn hostile_paths_are_einval() {
        for bad in [
            &b""[..],
            b"/a/",
            b"a/",
            b"//",
            b"/a//b",
            b"/a b",
            b"/a\xff",
            b"/a.b",
            b"/a\0b",
            b"@x",
        ] {
            assert_eq!(resolve(bad, 0, M), Err(XsError::Einval), "{bad:?}");
        }
        let long = [b"/".as_slice(), &[b'a'; ABS_PATH_MAX]].concat();
        assert_eq!(resolve(&long, 0, usize::MAX), Err(XsError::Einval));
    }

    #[test]
    fn path_quota_excludes_the_domain_prefix() {
        let rel = vec![b'a'; REL_PATH_MAX];
        assert!(resolve(&rel, 6, M).is_ok());
        let rel = vec![b'a'; REL_PATH_MAX + 1];
        assert!(resolve(&rel, 6, M).is_err());
        assert!(resolve(&rel, 0, M).is_err(), "dom0 too");
        let abs = [b"/".as_slice(), &[b'a'; REL_PATH_MAX - 1]].concat();
        assert!(resolve(&abs, 6, M).is_ok());
        let abs = [b"/".as_slice(), &[b'a'; REL_PATH_MAX]].concat();
        assert!(resolve(&abs, 6, M).is_err());
    }

    #[test]
    fn watch_paths() {
        assert_eq!(
            resolve_watch(b"@anything-goes here", 1, M).unwrap(),
            ("@anything-goes here".to_string(), false)
        );
        assert_eq!(
            resolve_watch(b"x", 1, M).unwrap(),
            ("/local/domain/1/x".to_string(), true)
        );
    }

    #[test]
    fn tree_helpers() {
        assert_eq!(parent("/a/b"), "/a");
        assert_eq!(parent("/a"), "/");
        assert_eq!(basename("/a/b"), "b");
        assert!(is_at_or_below("/a/b", "/a"));
        assert!(is_at_or_below("/a", "/a"));
        assert!(!is_at_or_below("/ab", "/a"));
        assert!(is_at_or_below("/ab", "/"));
        assert_eq!(child("/", "a"), "/a");
    }
}
