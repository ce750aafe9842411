//! The daemon's notable events: what an operator's log pipeline keys on.
//! Each kind has a stable MESSAGE_ID (`journalctl MESSAGE_ID=…`) and a
//! priority; the fields name the domain, request, quota and reason so that
//! `journalctl XS_DOMID=7` finds a domain's story.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Started,
    Stopping,
    DomainIntroduced,
    DomainGone,
    QuotaRefused,
    Panic,
    ConnectionRefused,
    ConnectionDropped,
}

impl Kind {
    /// Never change one: queries and alerts name them.
    pub fn message_id(self) -> &'static str {
        match self {
            Kind::Started => "5e2024177004468e85e2ecb08d19c0ec",
            Kind::Stopping => "9dfd6249ac8748bf921b04de30cf5936",
            Kind::DomainIntroduced => "efe08c65050240a38abf80b9c4a4a44b",
            Kind::DomainGone => "c0a4f96aee0b48f18d354237ca292f91",
            Kind::QuotaRefused => "d2b20cda4f874639afb02e0703a495eb",
            Kind::Panic => "8e6b1ecd9ce64781ace7df08f9061e64",
            Kind::ConnectionRefused => "9bad8931c941438ba6d9d0bce50d54ba",
            Kind::ConnectionDropped => "414c560f23944989bf050a5d82c6527d",
        }
    }

    pub fn priority(self) -> libc::c_int {
        match self {
            Kind::Started | Kind::Stopping => libc::LOG_INFO,
            Kind::DomainIntroduced | Kind::DomainGone => libc::LOG_NOTICE,
            Kind::QuotaRefused => libc::LOG_WARNING,
            Kind::Panic | Kind::ConnectionRefused | Kind::ConnectionDropped => libc::LOG_ERR,
        }
    }
}

/// One event: its kind, its text, and what it concerns.
pub struct Notable<'a> {
    pub kind: Kind,
    pub message: String,
    pub domid: Option<u32>,
    /// The request's message type name (XS_WRITE, …).
    pub op: Option<&'a str>,
    /// The quota's CONTROL name (nodes, watches, …).
    pub quota: Option<&'a str>,
    pub reason: Option<&'a str>,
}

impl<'a> Notable<'a> {
    pub fn new(kind: Kind, message: String) -> Notable<'a> {
        Notable {
            kind,
            message,
            domid: None,
            op: None,
            quota: None,
            reason: None,
        }
    }

    pub fn domid(self, domid: u32) -> Self {
        Notable {
            domid: Some(domid),
            ..self
        }
    }

    pub fn op(self, op: &'a str) -> Self {
        Notable {
            op: Some(op),
            ..self
        }
    }

    pub fn quota(self, quota: &'a str) -> Self {
        Notable {
            quota: Some(quota),
            ..self
        }
    }

    pub fn reason(self, reason: &'a str) -> Self {
        Notable {
            reason: Some(reason),
            ..self
        }
    }
}
