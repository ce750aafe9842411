//! The daemon on a host: serving real Xen domains (xen/), running as a
//! system service (service/), and live update's process side (update/).

pub mod service;
pub mod update;
pub mod xen;
