//! Paths as the daemon resolves them: a connection's relative paths are
//! under its domain's home, /local/domain/<domid> (xenstore.txt).

use crate::record::{Kind, Record};
use std::borrow::Cow;
use xenstore_proto::wire::MsgType;

/// The ops whose first argument is a node path.
const PATH_OPS: [MsgType; 10] = [
    MsgType::Directory,
    MsgType::DirectoryPart,
    MsgType::Read,
    MsgType::GetPerms,
    MsgType::SetPerms,
    MsgType::Watch,
    MsgType::Unwatch,
    MsgType::Write,
    MsgType::Mkdir,
    MsgType::Rm,
];

/// `path` as sent by a connection of domain `dom`, made absolute.
/// Absolute paths, special ones (`@introduceDomain`) and "" stay as they are.
pub fn absolute(dom: u16, path: &str) -> Cow<'_, str> {
    if path.is_empty() || path.starts_with('/') || path.starts_with('@') {
        Cow::Borrowed(path)
    } else {
        Cow::Owned(format!("/local/domain/{dom}/{path}"))
    }
}

/// The record's path made absolute when it names a node (ops on nodes and
/// watch events); other first arguments (a domid, a feature) as they are.
pub fn record_path(r: &Record) -> Cow<'_, str> {
    node_path(r).unwrap_or(Cow::Borrowed(&r.path))
}

/// The node the record names, made absolute; None when its first argument
/// is not a node (a domid, a feature, nothing).
pub fn node_path(r: &Record) -> Option<Cow<'_, str>> {
    let names_a_node = match r.kind {
        Kind::Op => {
            r.op.is_some_and(|op| PATH_OPS.iter().any(|&t| t as u16 == op))
        }
        Kind::WatchEvent => true,
        _ => false,
    };
    names_a_node.then(|| absolute(r.dom, &r.path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Probe;
    use crate::pairing::tests::ev;
    use crate::pairing::Pairing;

    #[test]
    fn relative_paths_resolve_under_the_domains_home() {
        assert_eq!(absolute(6, "device/vbd"), "/local/domain/6/device/vbd");
        assert_eq!(absolute(0, "data"), "/local/domain/0/data");
        assert_eq!(absolute(6, "/tool"), "/tool");
        assert_eq!(absolute(6, "@releaseDomain"), "@releaseDomain");
        assert_eq!(absolute(6, ""), "");
    }

    #[test]
    fn only_node_paths_resolve() {
        let mut p = Pairing::new();
        let mut req = ev(Probe::Request, 1, MsgType::Read as u16, "device/vbd", "");
        req.dom = 6;
        p.push(req);
        let r = p.push(ev(Probe::Response, 1, 2, "x", "")).unwrap();
        assert_eq!(record_path(&r), "/local/domain/6/device/vbd");
        assert_eq!(r.path, "device/vbd", "the record keeps the path as sent");
        let gdp = MsgType::GetDomainPath as u16;
        p.push(ev(Probe::Request, 2, gdp, "6", ""));
        let r = p
            .push(ev(Probe::Response, 2, gdp, "/local/domain/6", ""))
            .unwrap();
        assert_eq!(record_path(&r), "6");
        let mut w = ev(Probe::WatchEvent, 3, 15, "device", "t");
        w.dom = 6;
        assert_eq!(record_path(&p.push(w).unwrap()), "/local/domain/6/device");
    }
}
