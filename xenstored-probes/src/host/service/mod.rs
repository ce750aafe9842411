//! Running as a system daemon the way C xenstored does: detaching once
//! ready, the pid file, logging to stderr, syslog or the journal, stop signals,
//! systemd's readiness notification, and not mugging a live daemon's
//! socket. The event loop knows none of this (it only has a stop source).

pub mod detach;
pub mod live;
pub mod notify;
pub mod pidfile;
pub mod signals;
