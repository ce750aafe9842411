//! Why a request failed, beyond its error name: the reason the daemon
//! gives the `response` probe (str2) and `reply` (str3), which tracers
//! print and match on. The names are a contract: append, never rename.
//! The daemon's `Fail` carries a `Reason`, so it can give no other;
//! tests/contract/reason_contract.rs checks it gives each of them and that
//! xenstored-probes(7) lists them all.

/// Declares the enum, its list and each reason's name and meaning from one
/// table, so a reason cannot be added to one of them only.
macro_rules! reasons {
    ($($variant:ident = ($name:literal, $meaning:literal),)*) => {
        /// One error reason; [`Reason::name`] is what the probes carry.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Reason {
            $($variant,)*
        }

        impl Reason {
            /// Every reason, grouped by what it concerns.
            pub const ALL: &'static [Reason] = &[$(Reason::$variant,)*];

            /// The name the probes carry.
            pub const fn name(self) -> &'static str {
                match self {
                    $(Reason::$variant => $name,)*
                }
            }

            /// What it means, as the man page says it.
            pub const fn meaning(self) -> &'static str {
                match self {
                    $(Reason::$variant => $meaning,)*
                }
            }
        }
    };
}

reasons! {
    Perm = ("perm", "permission denied"),
    PermPrivileged = ("perm:privileged", "a dom0-only operation"),
    PermOwner = ("perm:owner", "only the node's owner may do this"),
    Perms = ("perms", "a malformed permission list"),
    PermsNoSuchDomain = ("perms:no such domain", "a permission names an unknown domain"),
    QuotaNodes = ("quota:nodes", "the domain owns its quota of nodes"),
    QuotaWatches = ("quota:watches", "the connection has its quota of watches"),
    QuotaTransactions = ("quota:transactions", "the connection has its quota of open transactions"),
    QuotaNodeSize = ("quota:node-size", "the node would exceed the size quota"),
    QuotaPermissions = ("quota:permissions", "more permissions than the quota allows"),
    QuotaTransactionNodes = ("quota:transaction-nodes", "the transaction touched its quota of nodes"),
    QuotaMemory = ("quota:memory", "the domain's memory quota is used up"),
    QuotaName = ("quota name", "no such quota"),
    TxUnknown = ("tx:unknown", "no such transaction id"),
    TxNone = ("tx:none", "TRANSACTION_END outside a transaction"),
    TxConflict = ("tx:conflict", "the transaction lost a conflict"),
    TxNested = ("tx:nested", "TRANSACTION_START inside a transaction"),
    Args = ("args", "malformed arguments"),
    Path = ("path", "an illegal path"),
    Type = ("type", "an unknown message type"),
    Port = ("port", "an illegal event channel port"),
    Special = ("special", "no such special node (@...)"),
    WatchExists = ("watch exists", "the same path and token are watched already"),
    NoSuchWatch = ("no such watch", "UNWATCH of a watch that does not exist"),
    ReplyTooLong = ("reply too long", "the reply would exceed the payload limit"),
    InternalPanic = ("internal:panic", "the handler panicked; the daemon went on"),
    ConnectionGone = ("connection gone", "the connection closed while the request ran"),
    Backend = ("backend", "the domain's ring or event channel could not be attached"),
    Domid = ("domid", "an illegal domain id"),
    Domain = ("domain", "no such domain"),
    Target = ("target", "SET_TARGET's target is no domain"),
    ControlArgs = ("control:args", "malformed CONTROL arguments"),
    ControlCheck = ("control:check", "CONTROL check found the store inconsistent"),
    ControlNoFile = ("control:no file", "CONTROL memreport with no file and logging off"),
    ControlFile = ("control:file", "CONTROL memreport could not write its file"),
    ControlUnknownCommand = ("control:unknown command", "no such CONTROL command"),
    FeatureUnsupported = ("feature unsupported", "SET_FEATURE of a feature the daemon lacks"),
    RmRoot = ("rm /", "RM of the root"),
    RmParentMissingInTx = ("rm:parent-missing-in-tx", "RM in a transaction of a node whose parent is gone"),
    RmNotAChildInTx = ("rm:not-a-child-in-tx", "RM in a transaction whose copy of the parent lacks the node"),
}

impl Reason {
    /// The reason named `name`, if it is one.
    pub fn by_name(name: &str) -> Option<Reason> {
        Reason::ALL.iter().copied().find(|r| r.name() == name)
    }

    /// The quota a `quota:` reason names ("nodes" for `quota:nodes`).
    pub fn quota(self) -> Option<&'static str> {
        self.name().strip_prefix("quota:")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique() {
        for (i, a) in Reason::ALL.iter().enumerate() {
            assert!(
                Reason::ALL[i + 1..].iter().all(|b| b.name() != a.name()),
                "{} twice",
                a.name()
            );
            assert_eq!(Reason::by_name(a.name()), Some(*a));
        }
    }
}
