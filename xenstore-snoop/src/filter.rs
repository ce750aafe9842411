//! Which records are shown. Domains also go into the kernel (see
//! `kernel_filter`); everything else is decided here, in user space.

use crate::record::{Kind, Record};
use regex::Regex;

#[derive(Debug, Default)]
pub struct Filter {
    pub domains: Vec<u16>,
    /// dom0 client pids.
    pub pids: Vec<u32>,
    /// Client names (`-n`): a dom0 client's comm or a guest's domain name.
    pub names: Vec<String>,
    pub failed_only: bool,
    /// Wire type numbers; empty = all.
    pub ops: Vec<u16>,
    pub path: Option<Regex>,
    pub no_watch_events: bool,
    /// conn_open / conn_close / tx_end records.
    pub lifecycle: bool,
}

impl Filter {
    /// The perf event filter for `-d`, or None when every domain is wanted.
    pub fn kernel_filter(&self) -> Option<String> {
        if self.domains.is_empty() {
            return None;
        }
        let terms: Vec<String> = self.domains.iter().map(|d| format!("dom == {d}")).collect();
        Some(terms.join(" || "))
    }

    pub fn wants(&self, r: &Record) -> bool {
        match r.kind {
            Kind::Op => {}
            Kind::WatchEvent if self.no_watch_events || self.failed_only => return false,
            Kind::WatchEvent => {}
            _ if !self.lifecycle || self.failed_only => return false,
            _ => {}
        }
        if !self.domains.is_empty() && !self.domains.contains(&r.dom) {
            return false;
        }
        if !self.pids.is_empty() && !self.pids.contains(&r.pid) {
            return false;
        }
        if !self.names.is_empty()
            && !r
                .comm
                .as_deref()
                .is_some_and(|c| self.names.iter().any(|n| crate::names::matches(n, c)))
        {
            return false;
        }
        if self.failed_only && r.error.is_none() {
            return false;
        }
        if !self.ops.is_empty() && !r.op.is_some_and(|op| self.ops.contains(&op)) {
            return false;
        }
        if let Some(re) = &self.path {
            // Relative paths as the daemon resolves them.
            if !re.is_match(&crate::paths::record_path(r)) {
                return false;
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Probe;
    use crate::pairing::tests::{ev, response_extra};
    use crate::pairing::Pairing;

    fn op(serial: u64, op: u16, path: &str, dom: u16, errno: u16) -> Record {
        let mut p = Pairing::new();
        let mut req = ev(Probe::Request, serial, op, path, "");
        req.dom = dom;
        p.push(req);
        let mut resp = ev(
            Probe::Response,
            serial,
            op,
            if errno == 0 { "OK" } else { "ENOENT" },
            "",
        );
        resp.extra = response_extra(errno, 0);
        p.push(resp).unwrap()
    }

    #[test]
    fn kernel_filter_for_domains() {
        let f = Filter {
            domains: vec![6, 7],
            ..Default::default()
        };
        assert_eq!(f.kernel_filter().as_deref(), Some("dom == 6 || dom == 7"));
        assert_eq!(Filter::default().kernel_filter(), None);
    }

    #[test]
    fn user_space_filters() {
        let read_ok = op(1, 2, "/local/domain/6/a", 6, 0);
        let read_err = op(2, 2, "/x", 0, 2);
        let write = op(3, 11, "/local/domain/6/b", 6, 0);
        let watch = Pairing::new()
            .push(ev(Probe::WatchEvent, 3, 15, "/local/domain/6/b", "t"))
            .unwrap();
        let all = [&read_ok, &read_err, &write, &watch];
        let shown = |f: &Filter| all.iter().filter(|r| f.wants(r)).count();

        assert_eq!(shown(&Filter::default()), 4);
        let failed = Filter {
            failed_only: true,
            ..Default::default()
        };
        assert_eq!(shown(&failed), 1);
        assert!(failed.wants(&read_err));
        let dom6 = Filter {
            domains: vec![6],
            ..Default::default()
        };
        assert_eq!(shown(&dom6), 2); // the watch event went to dom 0
        let reads = Filter {
            ops: vec![2],
            ..Default::default()
        };
        assert_eq!(shown(&reads), 2);
        let path = Filter {
            path: Some(Regex::new("^/local/domain/6/").unwrap()),
            ..Default::default()
        };
        assert_eq!(shown(&path), 3);
        let quiet = Filter {
            no_watch_events: true,
            ..Default::default()
        };
        assert_eq!(shown(&quiet), 3);
        let pid = Filter {
            pids: vec![55],
            ..Default::default()
        };
        assert_eq!(shown(&pid), 0);
        let named = Filter {
            names: vec!["xl".into()],
            ..Default::default()
        };
        assert_eq!(shown(&named), 0);
        let mut by_xl = read_err.clone();
        by_xl.comm = Some("xl".into());
        assert!(named.wants(&by_xl));
        let mut relative = op(5, 2, "device/vbd", 6, 0);
        assert!(path.wants(&relative), "resolved under /local/domain/6");
        relative.dom = 7;
        assert!(!path.wants(&relative));
    }
}
