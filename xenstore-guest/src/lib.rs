//! xenstore-guest: the other side of the wire from the daemon. A blocking
//! xenstore client over a Unix socket (a dom0 tool) or the simulated ring
//! (a guest domain), for the tests, the bench and the demo.

pub mod boot;
pub mod client;
pub mod ring;
pub mod sim;
