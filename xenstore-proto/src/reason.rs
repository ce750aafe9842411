//! Why a request failed, beyond its error name: the reason the daemon
//! gives the `response` probe (str2) and `reply` (str3), which tracers
//! print and match on. The names are a contract: append, never rename.
//! tests/reason_contract.rs checks the daemon fails with these and no
//! others, and that xenstored-probes(7) lists them all.

/// One error reason, by the name the probes carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Reason {
    pub name: &'static str,
    /// What it means, as the man page says it.
    pub meaning: &'static str,
}

const fn r(name: &'static str, meaning: &'static str) -> Reason {
    Reason { name, meaning }
}

impl Reason {
    /// Every reason, grouped by what it concerns.
    pub const ALL: [Reason; 40] = [
        r("perm", "permission denied"),
        r("perm:privileged", "a dom0-only operation"),
        r("perm:owner", "only the node's owner may do this"),
        r("perms", "a malformed permission list"),
        r(
            "perms:no such domain",
            "a permission names an unknown domain",
        ),
        r("quota:nodes", "the domain owns its quota of nodes"),
        r("quota:watches", "the connection has its quota of watches"),
        r(
            "quota:transactions",
            "the connection has its quota of open transactions",
        ),
        r("quota:node-size", "the node would exceed the size quota"),
        r(
            "quota:permissions",
            "more permissions than the quota allows",
        ),
        r(
            "quota:transaction-nodes",
            "the transaction touched its quota of nodes",
        ),
        r("quota:memory", "the domain's memory quota is used up"),
        r("quota name", "no such quota"),
        r("tx:unknown", "no such transaction id"),
        r("tx:none", "TRANSACTION_END outside a transaction"),
        r("tx:conflict", "the transaction lost a conflict"),
        r("tx:nested", "TRANSACTION_START inside a transaction"),
        r("args", "malformed arguments"),
        r("path", "an illegal path"),
        r("type", "an unknown message type"),
        r("port", "an illegal event channel port"),
        r("special", "no such special node (@...)"),
        r(
            "watch exists",
            "the same path and token are watched already",
        ),
        r("no such watch", "UNWATCH of a watch that does not exist"),
        r("reply too long", "the reply would exceed the payload limit"),
        r("internal:panic", "the handler panicked; the daemon went on"),
        r(
            "connection gone",
            "the connection closed while the request ran",
        ),
        r(
            "backend",
            "the domain's ring or event channel could not be attached",
        ),
        r("domid", "an illegal domain id"),
        r("domain", "no such domain"),
        r("target", "SET_TARGET's target is no domain"),
        r("control:args", "malformed CONTROL arguments"),
        r(
            "control:check",
            "CONTROL check found the store inconsistent",
        ),
        r(
            "control:no file",
            "CONTROL memreport with no file and logging off",
        ),
        r("control:file", "CONTROL memreport could not write its file"),
        r("control:unknown command", "no such CONTROL command"),
        r(
            "feature unsupported",
            "SET_FEATURE of a feature the daemon lacks",
        ),
        r("rm /", "RM of the root"),
        r(
            "rm:parent-missing-in-tx",
            "RM in a transaction of a node whose parent is gone",
        ),
        r(
            "rm:not-a-child-in-tx",
            "RM in a transaction whose copy of the parent lacks the node",
        ),
    ];

    /// The reason named `name`, if it is one.
    pub fn by_name(name: &str) -> Option<Reason> {
        Reason::ALL.iter().copied().find(|r| r.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique() {
        for (i, a) in Reason::ALL.iter().enumerate() {
            assert!(
                Reason::ALL[i + 1..].iter().all(|b| b.name != a.name),
                "{} twice",
                a.name
            );
            assert_eq!(Reason::by_name(a.name), Some(*a));
        }
    }
}
