//! What S1's replay makes of each answer a daemon gives: taken as the
//! real run got it, retried as a conflict, or a failure. Strict for the
//! shim and C xenstored; for oxenstored 4.17 alone, and counted apart,
//! two failures a real libxl would die of are worked around so that its
//! storm can be timed at all (BENCHMARKS.md, "Scale S1").

use xenstore_proto::wire::{MsgType, PAYLOAD_MAX};

/// What the replay forgives a daemon.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Leniency {
    /// Only what the real run got too; anything else fails the lifecycle.
    Strict,
    /// oxenstored 4.17's two known failures as well: EINVAL to a
    /// conflicted commit (its blame pass raises outside the `try` that
    /// answers EAGAIN; the transaction is gone and nothing was committed,
    /// so it is run again as after EAGAIN), and DIRECTORY replies over
    /// 4096 bytes (it has no DIRECTORY_PART), taken up to OVERSIZED_MAX.
    Oxenstored,
}

/// The longest listing taken from a lenient daemon's client: a thousand
/// domains' `backend/vbd` is ~5 KB, and the client's buffer must hold
/// the whole reply (frame::LARGEST_PAYLOAD).
pub const OVERSIZED_MAX: usize = 16 * 1024;
const _: () = assert!(OVERSIZED_MAX <= xenstored_probes::wire::frame::LARGEST_PAYLOAD);

impl Leniency {
    /// The longest reply payload its clients take.
    pub fn reply_max(self) -> usize {
        match self {
            Leniency::Strict => PAYLOAD_MAX,
            Leniency::Oxenstored => OVERSIZED_MAX,
        }
    }
}

/// What a request got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer<'a> {
    /// A reply with a payload of this many bytes.
    Reply(usize),
    /// XS_ERROR with this name.
    Error(&'a str),
}

/// What the replay does with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Taken as it is.
    Take,
    /// A listing over 4096 bytes, taken and counted (oxenstored only).
    TakeOversized,
    /// ENOENT of a read, listing or removal, as the real run got: an
    /// empty answer.
    Missing,
    /// E2BIG of a listing too long for one reply: libxl's cleanup takes a
    /// failed listing as not empty and keeps the directory.
    NotEmpty,
    /// EAGAIN to a commit: the transaction is run again from its start.
    Conflict,
    /// EINVAL to a commit from oxenstored: the same, counted apart.
    ConflictEinval,
    /// Anything else: the lifecycle fails.
    Fail,
}

/// What a request of type `ty` answered `answer` comes to.
pub fn judge(leniency: Leniency, ty: MsgType, answer: Answer) -> Verdict {
    let lenient = leniency == Leniency::Oxenstored;
    match answer {
        Answer::Reply(len) if len <= PAYLOAD_MAX => Verdict::Take,
        Answer::Reply(len) if lenient && ty == MsgType::Directory && len <= OVERSIZED_MAX => {
            Verdict::TakeOversized
        }
        Answer::Reply(_) => Verdict::Fail,
        Answer::Error("EAGAIN") if ty == MsgType::TransactionEnd => Verdict::Conflict,
        Answer::Error("EINVAL") if lenient && ty == MsgType::TransactionEnd => {
            Verdict::ConflictEinval
        }
        Answer::Error("ENOENT")
            if matches!(ty, MsgType::Read | MsgType::Directory | MsgType::Rm) =>
        {
            Verdict::Missing
        }
        Answer::Error("E2BIG") if ty == MsgType::Directory => Verdict::NotEmpty,
        Answer::Error(_) => Verdict::Fail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Answer::{Error, Reply};
    use Leniency::{Oxenstored, Strict};
    use MsgType::{Directory, Read, Rm, TransactionEnd, Write};
    use Verdict::*;

    #[test]
    fn each_daemon_is_forgiven_only_its_own_failures() {
        let both = [Strict, Oxenstored];
        let cases: &[(&[Leniency], MsgType, Answer, Verdict)] = &[
            // what the real run got too
            (&both, TransactionEnd, Error("EAGAIN"), Conflict),
            (&both, Write, Error("EAGAIN"), Fail),
            (&both, Read, Error("ENOENT"), Missing),
            (&both, Directory, Error("ENOENT"), Missing),
            (&both, Rm, Error("ENOENT"), Missing),
            (&both, Write, Error("ENOENT"), Fail),
            (&both, Directory, Error("E2BIG"), NotEmpty),
            (&both, TransactionEnd, Reply(3), Take),
            (&both, TransactionEnd, Error("EACCES"), Fail),
            (&both, Directory, Reply(4096), Take),
            // a strict daemon gets no workaround
            (&[Strict], TransactionEnd, Error("EINVAL"), Fail),
            (&[Strict], Directory, Reply(4097), Fail),
            // oxenstored its two failures, and nothing else
            (
                &[Oxenstored],
                TransactionEnd,
                Error("EINVAL"),
                ConflictEinval,
            ),
            (&[Oxenstored], Write, Error("EINVAL"), Fail),
            (&[Oxenstored], Directory, Error("EINVAL"), Fail),
            (&[Oxenstored], Directory, Reply(4835), TakeOversized),
            (&[Oxenstored], Read, Reply(4835), Fail),
            (&[Oxenstored], Directory, Reply(OVERSIZED_MAX + 1), Fail),
        ];
        for &(daemons, ty, answer, want) in cases {
            for &l in daemons {
                assert_eq!(judge(l, ty, answer), want, "{l:?} {ty:?} {answer:?}");
            }
        }
        assert_eq!(Strict.reply_max(), PAYLOAD_MAX);
        assert_eq!(Oxenstored.reply_max(), OVERSIZED_MAX);
    }
}
