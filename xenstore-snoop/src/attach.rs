//! Which of the daemon's probe sites the snooper attaches to: as few as
//! make its lines, since every firing costs the daemon a trap.
//!
//! `reply` carries a whole operation in one firing, so it and
//! `watch_event` make every line; `conn_open` names the client (COMM, one
//! firing a connection) and `truncated` counts what a cut string lost (it
//! fires only for long payloads); the other connection and transaction
//! probes only when their lines are shown (-v). A daemon binary older than
//! `reply` gets `request` + `response`, paired by serial: that fallback
//! (and pairing.rs's pairing) exists only for such binaries.

use crate::filter::Filter;
use crate::sdt::SdtProbe;
use anyhow::{bail, Result};
use std::path::Path;
use xenstore_proto::{Probe, PROVIDER};

/// The sites of `sites` (every note of `binary`) to attach to for `filter`;
/// `paired`: request + response even if there is `reply` (--paired, for
/// the benchmark).
pub fn choose(
    binary: &Path,
    sites: Vec<SdtProbe>,
    filter: &Filter,
    paired: bool,
) -> Result<Vec<SdtProbe>> {
    let ours: Vec<(Probe, SdtProbe)> = sites
        .into_iter()
        .filter(|s| s.provider == PROVIDER)
        .filter_map(|s| Some((Probe::from_name(&s.name)?, s)))
        .collect();
    let has = |p: Probe| ours.iter().any(|(probe, _)| *probe == p);
    let pairable = has(Probe::Request) && has(Probe::Response);
    let mut wanted = if has(Probe::Reply) && !(paired && pairable) {
        vec![Probe::Reply]
    } else if pairable {
        vec![Probe::Request, Probe::Response]
    } else {
        bail!(
            "{} has no xenstore:{} probe (nor xenstore:{} and xenstore:{}): \
             is it a xenstored-shim built with probes?",
            binary.display(),
            Probe::Reply.name(),
            Probe::Request.name(),
            Probe::Response.name()
        );
    };
    if !filter.failed_only && !filter.no_watch_events {
        wanted.push(Probe::WatchEvent);
    }
    wanted.extend([Probe::ConnOpen, Probe::Truncated]);
    if filter.lifecycle && !filter.failed_only {
        wanted.extend([Probe::ConnClose, Probe::TxEnd]);
    }
    Ok(ours
        .into_iter()
        .filter(|(probe, _)| wanted.contains(probe))
        .map(|(_, site)| site)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(provider: &str, name: &str) -> SdtProbe {
        SdtProbe {
            provider: provider.into(),
            name: name.into(),
            offset: 0x1000,
            semaphore: 0x2000,
            args: Vec::new(),
        }
    }

    fn names(sites: &[SdtProbe]) -> Vec<&str> {
        sites.iter().map(|s| s.name.as_str()).collect()
    }

    fn all_sites() -> Vec<SdtProbe> {
        let mut sites: Vec<SdtProbe> = Probe::ALL
            .iter()
            .map(|p| site(PROVIDER, p.name()))
            .collect();
        sites.push(site("other", "reply"));
        sites.push(site(PROVIDER, "not_ours"));
        sites
    }

    #[test]
    fn reply_and_watch_events_make_the_lines() {
        let bin = Path::new("shim");
        let plain = Filter::default();
        let chosen = choose(bin, all_sites(), &plain, false).unwrap();
        assert_eq!(
            names(&chosen),
            ["watch_event", "conn_open", "reply", "truncated"]
        );
        let chosen = choose(bin, all_sites(), &plain, true).unwrap();
        assert_eq!(
            names(&chosen),
            [
                "request",
                "response",
                "watch_event",
                "conn_open",
                "truncated"
            ]
        );
        assert!(chosen.iter().all(|s| s.provider == PROVIDER));
        let verbose = Filter {
            lifecycle: true,
            ..Filter::default()
        };
        let chosen = choose(bin, all_sites(), &verbose, false).unwrap();
        assert_eq!(
            names(&chosen),
            [
                "watch_event",
                "conn_open",
                "conn_close",
                "tx_end",
                "reply",
                "truncated"
            ]
        );
        // Filters that drop every event of a probe leave it unattached.
        let failed = Filter {
            failed_only: true,
            lifecycle: true,
            ..Filter::default()
        };
        assert_eq!(
            names(&choose(bin, all_sites(), &failed, false).unwrap()),
            ["conn_open", "reply", "truncated"]
        );
        let no_events = Filter {
            no_watch_events: true,
            ..Filter::default()
        };
        assert_eq!(
            names(&choose(bin, all_sites(), &no_events, false).unwrap()),
            ["conn_open", "reply", "truncated"]
        );
    }

    #[test]
    fn a_binary_without_reply_gets_request_and_response() {
        let old: Vec<SdtProbe> = all_sites()
            .into_iter()
            .filter(|s| s.name != "reply" || s.provider != PROVIDER)
            .collect();
        let chosen = choose(Path::new("shim"), old, &Filter::default(), false).unwrap();
        assert_eq!(
            names(&chosen),
            [
                "request",
                "response",
                "watch_event",
                "conn_open",
                "truncated"
            ]
        );
    }

    #[test]
    fn a_binary_without_either_is_a_clear_error() {
        let err = choose(
            Path::new("/usr/sbin/xenstored"),
            vec![site(PROVIDER, "request")],
            &Filter::default(),
            false,
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("/usr/sbin/xenstored has no xenstore:reply"),
            "{err}"
        );
    }
}
