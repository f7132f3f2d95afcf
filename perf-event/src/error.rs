//! The crate's error type. The diagnosis that turns a bare errno into one of its variants lives in
//! the `diagnose` module; this module depends on nothing but the version type it names.

use std::error::Error as _;
use std::fmt;
use std::io;

use crate::version::KernelVersion;

/// A `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong opening, controlling or reading a perf event.
///
/// Opening errors are diagnosed: the message names what was refused and what would work (the
/// `perf_event_paranoid` level, a missing PMU, an option newer than the running kernel, ...).
/// `?` converts it into [`io::Error`] for I/O code; the message is kept.
///
/// `Debug` prints the message too, followed by any cause it does not already quote, so that
/// `fn main() -> Result<(), Error>` (which prints `Error: {e:?}`) shows what to change, not a
/// struct dump; `{:#?}` prefixes the variant's name (`Error::BadCpu: CPU 9999 is not online...`).
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// `EACCES`/`EPERM`: the kernel refused the event for lack of privilege.
    #[error("{event}: permission denied ({source}); {hint}")]
    Permission {
        /// The event that was refused.
        event: String,
        /// `/proc/sys/kernel/perf_event_paranoid`, when readable.
        paranoid: Option<i32>,
        /// What would work.
        hint: String,
        /// The errno.
        source: io::Error,
    },
    /// `ENOENT`/`EOPNOTSUPP`: the PMU or the event does not exist here.
    #[error("{event}: {detail} ({source})")]
    NotSupported {
        /// The event that was refused.
        event: String,
        /// Which PMU or event is missing.
        detail: String,
        /// The errno.
        source: io::Error,
    },
    /// `EINVAL`/`E2BIG` on an option the running kernel does not know.
    #[error(
        "{event}: {option} requires Linux {since}; this kernel is {running}{} ({source})",
        detail.as_deref().map(|d| format!("; {d}")).unwrap_or_default()
    )]
    KernelTooOld {
        /// The event that was refused.
        event: String,
        /// The option (attr field or bit) that is newer than the kernel: for several, the one
        /// that needs the newest kernel.
        option: &'static str,
        /// The first Linux version that has it.
        since: KernelVersion,
        /// The running kernel's release (`uname -r`).
        running: String,
        /// What else the kernel said: for `E2BIG`, the size of its own `perf_event_attr` (which
        /// it writes back) and every option set past it.
        detail: Option<String>,
        /// The errno.
        source: io::Error,
    },
    /// A cgroup target (`PERF_FLAG_PID_CGROUP`) was refused: the directory is not a cgroup the
    /// kernel can count in (`EBADF`), or the kernel has no perf_event state for it (`ENOENT`).
    #[error("{event}: cannot count in cgroup {path}: {detail} ({source})")]
    Cgroup {
        /// The event that was refused.
        event: String,
        /// The cgroup directory, as `/proc/self/fd` names it (or `the target cgroup` when unknown).
        path: String,
        /// What is wrong and what would work.
        detail: String,
        /// The errno.
        source: io::Error,
    },
    /// `EMFILE`: the process ran out of file descriptors.
    #[error(
        "too many open files: RLIMIT_NOFILE is {soft} (hard limit {hard}); every counter is one fd. \
         Raise the limit (`ulimit -n`, setrlimit) or open fewer counters ({source})"
    )]
    TooManyFiles {
        /// The soft limit, or `unlimited`.
        soft: String,
        /// The hard limit, or `unlimited`.
        hard: String,
        /// The errno.
        source: io::Error,
    },
    /// `ESRCH`: the target process or thread does not exist.
    #[error("no such process: pid {pid} does not exist (or has exited) ({source})")]
    NoSuchProcess {
        /// The pid that was asked for.
        pid: i32,
        /// The errno.
        source: io::Error,
    },
    /// A pid or CPU number above `i32::MAX`, refused before the open: `perf_event_open(2)` takes
    /// both as signed 32-bit numbers, and a wrapped value would mean something else (-1 is "every
    /// task" or "any CPU").
    #[error("{what} {value} is out of range: {detail}")]
    TargetOutOfRange {
        /// `"pid"` or `"CPU"`.
        what: &'static str,
        /// The number asked for.
        value: u32,
        /// What it would have become and what to use instead.
        detail: String,
    },
    /// The CPU asked for is not online (or does not exist).
    #[error("CPU {cpu} is not online; online CPUs: {online} ({source})")]
    BadCpu {
        /// The CPU that was asked for.
        cpu: i32,
        /// The online CPUs, as a list like `0-3`.
        online: String,
        /// The errno.
        source: io::Error,
    },
    /// `ENOSPC` on a breakpoint: every debug register is taken.
    #[error(
        "{event}: no free hardware breakpoint slot (the CPU has a few debug registers, 4 on x86, \
         shared by every breakpoint of the task) ({source})"
    )]
    NoBreakpointSlot {
        /// The event that was refused.
        event: String,
        /// The errno.
        source: io::Error,
    },
    /// An option every kernel refuses (a rule of the fixed ABI, such as a user stack size that is
    /// not a multiple of 8), refused before the open with what would be accepted.
    #[error("{event}: {detail}")]
    InvalidOption {
        /// The event that was being opened.
        event: String,
        /// The option, the rule it breaks, and values that keep it.
        detail: String,
    },
    /// Any other refusal by `perf_event_open(2)`.
    #[error("{event}: {detail} ({source})")]
    Open {
        /// The event that was refused.
        event: String,
        /// What is known about the cause.
        detail: String,
        /// The errno.
        source: io::Error,
    },
    /// A pinned counter could not be kept on the PMU and is in error state: `read` returns end of
    /// file until it is re-enabled. The count would be stale, so none is returned.
    #[error(
        "the pinned counter is in error state: the PMU could not keep it scheduled (another pinned or \
         exclusive event took the counters); disable and re-enable it, or do not pin it"
    )]
    PinnedCounterInError,
    /// `read` returned fewer bytes than the read format implies.
    #[error("short read from a perf event: expected {expected} bytes, got {got}")]
    ShortRead {
        /// Bytes the read format implies.
        expected: usize,
        /// Bytes returned.
        got: usize,
    },
    /// Text that names an event (`"cpu/event=0x3c/"`, `"sched:sched_switch"`) could not be resolved.
    #[error("cannot use event {input:?}: {reason}")]
    Parse {
        /// The text.
        input: String,
        /// Why.
        reason: String,
    },
    /// A system call other than the open failed (an ioctl, a read, a sysfs file).
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: io::Error,
    },
    /// A ring buffer could not be mapped or read (perf-core's explanation: the locked-memory
    /// budget, EBUSY for a redirected counter, a corrupt ring...).
    #[error(transparent)]
    Ring(#[from] perf_core::Error),
    /// The counter already has a [`Sampler`](crate::sample::Sampler): a ring has one consumer.
    #[error(
        "this counter already has a Sampler (a ring buffer has one consumer); use that one, or drop it \
         before making another"
    )]
    SamplerExists,
    /// Another reader holds the sampler's ring (an iterator that is finding records, or the one
    /// whose closure is running): a ring has one reader at a time. Not an end: try again later,
    /// or read through the holder.
    #[error(
        "another reader of this sampler holds its ring (an iterator still finding records, or the \
         CowIter whose closure is running); a ring has one reader at a time: read through that one, or \
         try again once it has drained the ring or been dropped"
    )]
    RingBusy,
    /// A sampling operation that does not fit the sampler or counter, with what to do instead.
    #[error("{0}")]
    Sampling(String),
}

impl Error {
    pub(crate) fn io(what: impl Into<String>, source: io::Error) -> Self {
        Self::Io {
            what: what.into(),
            source,
        }
    }

    /// The errno behind this error, when there is one.
    pub fn raw_os_error(&self) -> Option<i32> {
        self.source_io().and_then(io::Error::raw_os_error)
    }

    /// The [`io::ErrorKind`] that best describes this error.
    pub fn kind(&self) -> io::ErrorKind {
        match self {
            Self::PinnedCounterInError => io::ErrorKind::Other,
            Self::ShortRead { .. } => io::ErrorKind::UnexpectedEof,
            Self::Parse { .. } | Self::TargetOutOfRange { .. } | Self::InvalidOption { .. } => {
                io::ErrorKind::InvalidInput
            }
            _ => self
                .source_io()
                .map_or(io::ErrorKind::Other, io::Error::kind),
        }
    }

    /// The variant's name, for `{:#?}`.
    fn variant(&self) -> &'static str {
        match self {
            Self::Permission { .. } => "Permission",
            Self::NotSupported { .. } => "NotSupported",
            Self::KernelTooOld { .. } => "KernelTooOld",
            Self::Cgroup { .. } => "Cgroup",
            Self::TooManyFiles { .. } => "TooManyFiles",
            Self::NoSuchProcess { .. } => "NoSuchProcess",
            Self::TargetOutOfRange { .. } => "TargetOutOfRange",
            Self::BadCpu { .. } => "BadCpu",
            Self::NoBreakpointSlot { .. } => "NoBreakpointSlot",
            Self::InvalidOption { .. } => "InvalidOption",
            Self::Open { .. } => "Open",
            Self::PinnedCounterInError => "PinnedCounterInError",
            Self::ShortRead { .. } => "ShortRead",
            Self::Parse { .. } => "Parse",
            Self::Io { .. } => "Io",
            Self::Ring(_) => "Ring",
            Self::SamplerExists => "SamplerExists",
            Self::RingBusy => "RingBusy",
            Self::Sampling(_) => "Sampling",
        }
    }

    fn source_io(&self) -> Option<&io::Error> {
        match self {
            Self::Permission { source, .. }
            | Self::NotSupported { source, .. }
            | Self::KernelTooOld { source, .. }
            | Self::Cgroup { source, .. }
            | Self::TooManyFiles { source, .. }
            | Self::NoSuchProcess { source, .. }
            | Self::BadCpu { source, .. }
            | Self::NoBreakpointSlot { source, .. }
            | Self::Open { source, .. }
            | Self::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if f.alternate() {
            write!(f, "Error::{}: ", self.variant())?;
        }
        let mut shown = self.to_string();
        f.write_str(&shown)?;
        // Most messages quote their errno already; add only the causes they do not.
        let mut heading = true;
        let mut cause = self.source();
        while let Some(c) = cause {
            let text = c.to_string();
            if !shown.contains(&text) {
                if heading {
                    f.write_str("\n\nCaused by:")?;
                    heading = false;
                }
                write!(f, "\n    {text}")?;
                shown.push_str(&text);
            }
            cause = c.source();
        }
        Ok(())
    }
}

impl From<Error> for io::Error {
    fn from(e: Error) -> Self {
        io::Error::new(e.kind(), e)
    }
}

impl From<std::convert::Infallible> for Error {
    fn from(e: std::convert::Infallible) -> Self {
        match e {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Outer(Leaf);
    #[derive(Debug)]
    struct Leaf;
    impl fmt::Display for Outer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("the outer failure")
        }
    }
    impl fmt::Display for Leaf {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("the leaf cause")
        }
    }
    impl std::error::Error for Outer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }
    impl std::error::Error for Leaf {}

    #[test]
    fn debug_is_the_message_then_the_causes_it_does_not_quote() {
        let e = Error::io("reading x", io::Error::other(Outer(Leaf)));
        assert_eq!(
            format!("{e:?}"),
            "reading x: the outer failure\n\nCaused by:\n    the leaf cause"
        );
        assert!(format!("{e:#?}").starts_with("Error::Io: reading x: "));
        let quoted = Error::io("reading y", io::Error::from_raw_os_error(libc::EBADF));
        assert_eq!(format!("{quoted:?}"), quoted.to_string());
    }
}
