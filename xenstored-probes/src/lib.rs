//! xenstored-probes: a complete xenstore daemon with a USDT provider
//! (`xenstore`, declared in `xenstore.d`) in its request/response path.

pub mod guest;
pub mod probes;
pub mod ring;
pub mod wire;
