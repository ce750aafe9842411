//! The upstream peer harness itself: both Debian daemons, and Debian 13's C
//! xenstored 4.20, run without Xen under tests/peer/xenstub.c, serve real
//! clients on a private socket, honour XENSTUB_DOMIDS, and are gone once
//! dropped.
use crate::common::process::BoundedOutput;
use crate::common::upstream::{Flavor, Peer, Release, Upstream};
use crate::common::wire;
use std::io::Write;
use std::os::unix::net::UnixStream;

/// One request on a fresh connection; returns (type, payload).
fn request(daemon: &Upstream, ty: u32, payload: &[u8]) -> (u32, Vec<u8>) {
    let mut s = UnixStream::connect(&daemon.socket).unwrap();
    s.set_read_timeout(Some(crate::common::TIMEOUT)).unwrap();
    s.write_all(&wire::message(ty, 1, 0, payload)).unwrap();
    let (header, body) = wire::reply(&mut s);
    (header.ty, body)
}

fn serves_clients_and_dies_on_drop(peer: Peer) {
    let test = format!("serves_clients_and_dies_on_drop({})", peer.name());
    if !crate::common::upstream::available(peer, &test) {
        return;
    }
    let mut daemon = Upstream::start(peer);
    let pid = daemon.pid();
    let out = daemon
        .client("xenstore-write")
        .args(["/peer/key", "value"])
        .bounded_output();
    assert!(out.status.success(), "{out:?}");
    let out = daemon
        .client("xenstore-read")
        .arg("/peer/key")
        .bounded_output();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "value\n");
    // Dom0 was set up through the stub: its domain path and introduction.
    assert_eq!(request(&daemon, 17, b"0\0"), (17, b"T\0".to_vec()));
    assert!(daemon.alive());
    drop(daemon);
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "{} still running after drop",
        peer.name()
    );
}

#[test]
fn c_xenstored_serves_clients_and_dies_on_drop() {
    serves_clients_and_dies_on_drop(Flavor::C.into());
}

#[test]
fn c_xenstored_420_serves_clients_and_dies_on_drop() {
    serves_clients_and_dies_on_drop(Peer::c(Release::Xen420));
}

#[test]
fn oxenstored_serves_clients_and_dies_on_drop() {
    serves_clients_and_dies_on_drop(Flavor::Ocaml.into());
}

/// C xenstored asks the (stubbed) hypervisor whether a permission's domain
/// exists; XENSTUB_DOMIDS decides (4.17 through xc_domain_getinfo, 4.20
/// through xc_domain_getinfo_single).
fn stub_domids_decide_which_domains_exist(peer: Peer) {
    let test = format!("stub_domids_decide_which_domains_exist({})", peer.name());
    if !crate::common::upstream::available(peer, &test) {
        return;
    }
    let daemon = Upstream::start_with_env(peer, &[], &[("XENSTUB_DOMIDS", "0-9,12")]);
    assert_eq!(request(&daemon, 11, b"/p\0v").0, 11);
    let set_perms = |perm: &str| request(&daemon, 14, format!("/p\0{perm}\0").as_bytes());
    assert_eq!(set_perms("n9"), (14, b"OK\0".to_vec()));
    assert_eq!(set_perms("n12"), (14, b"OK\0".to_vec()));
    assert_eq!(set_perms("n10"), (16, b"ENOENT\0".to_vec()));
    assert_eq!(set_perms("n13"), (16, b"ENOENT\0".to_vec()));
}

#[test]
fn stub_domids_decide_which_domains_exist_417() {
    stub_domids_decide_which_domains_exist(Flavor::C.into());
}

#[test]
fn stub_domids_decide_which_domains_exist_420() {
    stub_domids_decide_which_domains_exist(Peer::c(Release::Xen420));
}
