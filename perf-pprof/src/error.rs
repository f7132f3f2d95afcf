use std::io;

/// What can go wrong.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An I/O error (writing a report, serving one).
    #[error("{0}")]
    IoError(#[from] io::Error),
    /// The profiler could not be created (pprof-rs's variant; here [`Error::Perf`] says why).
    #[error("create profiler error")]
    CreatingError,
    /// The profiler could not be created: an invalid frequency, or events the kernel would not
    /// open for another reason than privilege; perf-profile's error says which and what would work.
    #[error("create profiler error: {0}")]
    Perf(perf_profile::Error),
    /// The kernel refused to sample this process: `perf_event_paranoid` is above 2 on a kernel
    /// whose distribution patch gives those levels a meaning (a stock Ubuntu 20.04 has 4; see the
    /// README) and the process lacks `CAP_PERFMON`.
    #[error(
        "the kernel refused to sample this process: kernel.perf_event_paranoid is {}; \
         self-profiling needs it at 2 or below (`sysctl kernel.perf_event_paranoid=2`) or \
         CAP_PERFMON (or CAP_SYS_ADMIN) ({source})",
        paranoid.map_or("unreadable".to_owned(), |p| p.to_string())
    )]
    PerfEventParanoid {
        /// `/proc/sys/kernel/perf_event_paranoid`, when readable.
        paranoid: Option<i32>,
        /// The kernel's refusal, as perf-profile reports it.
        source: perf_profile::Error,
    },
    /// The profiler is already running (pprof-rs's variant; not returned here).
    #[error("start running cpu profiler error")]
    Running,
    /// The profiler is not running (its collector thread ended).
    #[error("stop running cpu profiler error")]
    NotRunning,
}

/// `Result` with this crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

/// `kernel.perf_event_paranoid`, when readable.
pub(crate) fn paranoid() -> Option<i32> {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Whether the error is a ring that could not be mapped (the locked-memory budget), not a
/// refusal to open the events.
pub(crate) fn is_ring(e: &perf_profile::Error) -> bool {
    matches!(e, perf_profile::Error::Perf(perf_event::Error::Ring(_)))
}

impl Error {
    pub(crate) fn from_start(e: perf_profile::Error) -> Self {
        // Only the kernel's refusal to open is about perf_event_paranoid: a ring over the
        // locked-memory budget fails with EPERM too, and perf-event's message names that budget.
        if let perf_profile::Error::Perf(perf_event::Error::Permission { paranoid: p, .. }) = &e {
            Error::PerfEventParanoid {
                paranoid: p.or_else(paranoid),
                source: e,
            }
        } else {
            Error::Perf(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_names_the_sysctl_its_value_and_the_fix() {
        let refused = perf_profile::Error::Perf(perf_event::Error::Permission {
            event: "cpu-clock".into(),
            paranoid: Some(3),
            hint: String::new(),
            source: io::Error::from_raw_os_error(libc::EACCES),
        });
        let e = Error::from_start(refused);
        let msg = e.to_string();
        assert!(matches!(e, Error::PerfEventParanoid { .. }), "{msg}");
        // The level perf-event read when the kernel refused.
        assert!(msg.contains("perf_event_paranoid is 3"), "{msg}");
        assert!(msg.contains("sysctl kernel.perf_event_paranoid=2"), "{msg}");
        assert!(msg.contains("CAP_PERFMON"), "{msg}");
        // A file the kernel will not let us read is not a paranoid problem.
        let file = perf_profile::Error::Io {
            path: "/proc/self/maps".into(),
            source: io::Error::from_raw_os_error(libc::EACCES),
        };
        assert!(matches!(Error::from_start(file), Error::Perf(_)));
    }
}
