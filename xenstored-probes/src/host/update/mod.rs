//! Live update, the process's side: taking over the fds and connections a
//! previous image listed in its state (`adopt.rs`, this image the target),
//! and writing this daemon's state and exec'ing the next image
//! (`handover.rs`, the source). The state's formats are migration/'s.

pub mod adopt;
pub mod handover;
