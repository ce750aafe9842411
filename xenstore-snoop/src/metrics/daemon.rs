//! What --metrics asks the daemon itself through its dom0 socket once an
//! interval: the live domains and their names, and quotas with
//! XS_CONTROL `quota` (limits) and `quota <domid>` (a domain's use), which
//! C xenstored answers in the same layout, so the gauges work against it
//! too; and a domain's own limits with XS_GET_QUOTA where the daemon has
//! per-domain quotas.

use crate::domains::ask;
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;
use xenstore_proto::wire::MsgType;

const TIMEOUT: Duration = Duration::from_secs(5);

/// One connection to the daemon for an interval's questions.
pub struct DaemonSocket {
    stream: UnixStream,
}

/// quota name → value.
pub type Quotas = BTreeMap<String, u64>;

impl DaemonSocket {
    pub fn connect(path: &Path) -> Result<DaemonSocket> {
        let stream = UnixStream::connect(path)
            .with_context(|| format!("connecting to the daemon at {}", path.display()))?;
        stream.set_read_timeout(Some(TIMEOUT))?;
        stream.set_write_timeout(Some(TIMEOUT))?;
        Ok(DaemonSocket { stream })
    }

    fn request(&mut self, ty: MsgType, payload: &[u8]) -> Result<Result<Vec<u8>, String>> {
        ask(&mut self.stream, ty, payload).with_context(|| format!("{} to the daemon", ty.name()))
    }

    /// Domain ids under /local/domain that the daemon has introduced
    /// (dom0 always), with `extra` candidates (domains seen firing).
    pub fn live_domains(&mut self, extra: impl Iterator<Item = u32>) -> Result<Vec<u32>> {
        let mut ids: Vec<u32> = match self.request(MsgType::Directory, b"/local/domain\0")? {
            Ok(list) => list
                .split(|&b| b == 0)
                .filter_map(|s| std::str::from_utf8(s).ok()?.parse().ok())
                .collect(),
            Err(_) => Vec::new(),
        };
        ids.extend(extra);
        ids.push(0);
        ids.sort_unstable();
        ids.dedup();
        let mut live = Vec::new();
        for id in ids {
            if id == 0 || self.introduced(id)? {
                live.push(id);
            }
        }
        Ok(live)
    }

    fn introduced(&mut self, domid: u32) -> Result<bool> {
        let answer = self.request(MsgType::IsDomainIntroduced, format!("{domid}\0").as_bytes())?;
        Ok(answer.is_ok_and(|a| a.starts_with(b"T")))
    }

    /// /local/domain/<domid>/name, if set.
    pub fn name(&mut self, domid: u32) -> Result<Option<String>> {
        let path = format!("/local/domain/{domid}/name\0");
        Ok(self
            .request(MsgType::Read, path.as_bytes())?
            .ok()
            .map(|v| String::from_utf8_lossy(&v).into_owned())
            .filter(|n| !n.is_empty()))
    }

    /// `CONTROL quota`: the hard limits every domain has.
    pub fn quota_limits(&mut self) -> Result<Quotas> {
        match self.request(MsgType::Control, b"quota\0")? {
            Ok(text) => Ok(parse_quota(&text)),
            Err(e) => bail!("CONTROL quota: {e}"),
        }
    }

    /// XS_GET_QUOTA without arguments: the names of the quotas the daemon
    /// keeps per domain (XS_SET_QUOTA <domid> overrides: the shim, newest
    /// xenstore.txt); None from a daemon without the message (C xenstored
    /// 4.20 and older, oxenstored answer an error), whose limits are the
    /// same for every domain.
    pub fn per_domain_quotas(&mut self) -> Result<Option<Vec<String>>> {
        Ok(self.request(MsgType::GetQuota, b"")?.ok().map(|names| {
            String::from_utf8_lossy(&names)
                .split([' ', '\0'])
                .filter(|n| !n.is_empty())
                .map(str::to_string)
                .collect()
        }))
    }

    /// XS_GET_QUOTA <domid> <name>: the domain's limit (its override, else
    /// the global one); None for a domain the daemon does not know.
    pub fn quota_limit(&mut self, domid: u32, name: &str) -> Result<Option<u64>> {
        let payload = format!("{domid}\0{name}\0");
        let Ok(answer) = self.request(MsgType::GetQuota, payload.as_bytes())? else {
            return Ok(None);
        };
        let text = String::from_utf8_lossy(answer.strip_suffix(&[0]).unwrap_or(&answer));
        text.parse()
            .map(Some)
            .with_context(|| format!("XS_GET_QUOTA {domid} {name} answered {text:?}"))
    }

    /// `CONTROL quota <domid>`: what the domain uses; None for a domain the
    /// daemon does not know (it died meanwhile).
    pub fn quota_used(&mut self, domid: u32) -> Result<Option<Quotas>> {
        let payload = format!("quota\0{domid}\0");
        Ok(self
            .request(MsgType::Control, payload.as_bytes())?
            .ok()
            .map(|text| parse_quota(&text)))
    }
}

/// `name : value …` lines (the layout of C xenstored's `quota` answers);
/// other lines (headings) are skipped.
pub fn parse_quota(text: &[u8]) -> Quotas {
    String::from_utf8_lossy(text)
        .lines()
        .filter_map(|line| {
            let (name, rest) = line.split_once(':')?;
            let value = rest.split_whitespace().next()?.parse().ok()?;
            let name = name.trim();
            let known = name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
            (known && !name.is_empty()).then(|| (name.to_string(), value))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::parse_quota;

    #[test]
    fn quota_answers_parse_into_names_and_values() {
        let limits = parse_quota(b"Quota settings:\nnodes            :     1000 Nodes per domain\nmemory           :  2621440 Memory per domain\n\0");
        assert_eq!(limits.get("nodes"), Some(&1000));
        assert_eq!(limits.get("memory"), Some(&2621440));
        let used = parse_quota(b"Domain 7:\nwatches         :        2\n\0");
        assert_eq!(used.len(), 1, "{used:?}");
        assert_eq!(used.get("watches"), Some(&2));
    }
}
