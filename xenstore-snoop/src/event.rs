//! Decoded probe firings: the probes of the contract, typed.

use xenstore_proto::{flag, RequestExtra, ResponseExtra};

/// The probes of the `xenstore` provider, as xenstore-proto lists them.
pub use xenstore_proto::Probe;

/// One probe firing, fields as the contract defines them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub probe: Probe,
    /// CLOCK_MONOTONIC ns, from perf.
    pub mono_ns: u64,
    pub serial: u64,
    pub dom: u16,
    pub op: u16,
    pub conn: u32,
    pub pid: u32,
    pub tx: u32,
    pub extra: u64,
    pub s1: String,
    pub s2: String,
    /// `reply`'s str3 (result or error reason); "" for the other probes.
    pub s3: String,
    /// `reply`'s latency_ns; 0 for the other probes.
    pub latency_ns: u64,
}

impl Event {
    /// request/response: the client's req_id (the same bits in both).
    pub fn req_id(&self) -> u32 {
        RequestExtra::unpack(self.extra).req_id
    }
    /// response, reply: the errno of a failed request (0 on success).
    pub fn errno(&self) -> u32 {
        match self.probe {
            Probe::Response | Probe::Reply => ResponseExtra::unpack(self.extra).errno.into(),
            _ => 0,
        }
    }
    /// Whether the daemon cut a string to fit the probe.
    pub fn truncated(&self) -> bool {
        let flags = match self.probe {
            Probe::Request => RequestExtra::unpack(self.extra).flags,
            Probe::Response | Probe::Reply => ResponseExtra::unpack(self.extra).flags.into(),
            _ => 0,
        };
        flags & u32::from(flag::TRUNCATED) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn response_extra_unpacks() {
        let mut e = Event {
            probe: Probe::Response,
            mono_ns: 0,
            serial: 1,
            dom: 0,
            op: 2,
            conn: 1,
            pid: 0,
            tx: 0,
            extra: ResponseExtra {
                flags: flag::STR2_TRUNCATED,
                errno: 2,
                req_id: 77,
            }
            .pack(),
            s1: "ENOENT".into(),
            s2: String::new(),
            s3: String::new(),
            latency_ns: 0,
        };
        assert_eq!((e.req_id(), e.errno(), e.truncated()), (77, 2, true));
        e.probe = Probe::Request;
        e.extra = 77;
        assert_eq!((e.req_id(), e.errno(), e.truncated()), (77, 0, false));
        e.extra = RequestExtra {
            flags: flag::STR1_TRUNCATED.into(),
            req_id: 77,
        }
        .pack();
        assert_eq!((e.req_id(), e.errno(), e.truncated()), (77, 0, true));
    }
}
