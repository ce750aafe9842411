//! `conn_open`'s str2: who is at the other end of a new connection.
//!
//! - a dom0 socket client: `pid PID uid UID comm COMM`, COMM being the
//!   client's /proc/PID/comm when the connection opened (the rest of the
//!   string: it may hold spaces); ` comm COMM` is left out when the daemon
//!   could not read it;
//! - a domain: `domain DOMID` and the transport's own description.
//!
//! Grown only by appending words, so older readers still find theirs.

/// How the docs (xenstore.d, xenstored-probes(7)) write a socket peer.
pub const SOCKET_PEER: &str = "pid PID uid UID comm COMM";

/// The description of a dom0 socket client.
pub fn socket_peer(pid: u32, uid: u32, comm: Option<&str>) -> String {
    match comm {
        Some(comm) => format!("pid {pid} uid {uid} comm {comm}"),
        None => format!("pid {pid} uid {uid}"),
    }
}

/// The client's command name in a socket peer's description, if any.
pub fn peer_comm(peer: &str) -> Option<&str> {
    let rest = peer.strip_prefix("pid ")?;
    let (_, comm) = rest.split_once(" comm ")?;
    Some(comm)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_peers_round_trip() {
        let p = socket_peer(42, 0, Some("xenstore-write"));
        assert_eq!(p, "pid 42 uid 0 comm xenstore-write");
        assert_eq!(peer_comm(&p), Some("xenstore-write"));
        assert_eq!(peer_comm(&socket_peer(42, 0, Some("a b"))), Some("a b"));
        assert_eq!(peer_comm(&socket_peer(42, 0, None)), None);
        assert_eq!(peer_comm("domain 6 ring /run/x"), None);
        // The format the docs give is the one written.
        let words: Vec<&str> = SOCKET_PEER.split(' ').step_by(2).collect();
        let written: Vec<&str> = p.split(' ').step_by(2).collect();
        assert_eq!(words, written);
    }
}
