//! The crate's one error type.

use std::io;
use std::path::PathBuf;

/// What went wrong while profiling or writing a profile. Each message says what to change.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Opening, mapping or reading the events failed; perf-event's error says why and what would
    /// work (the `perf_event_paranoid` level, a missing PMU, a pid that is gone).
    #[error(transparent)]
    Perf(#[from] perf_event::Error),
    /// The command to profile could not be started.
    #[error("cannot run {command}: {source}")]
    Spawn {
        /// The program.
        command: String,
        /// Why (`No such file or directory`: not found on `PATH`).
        source: io::Error,
    },
    /// A pid to profile does not exist.
    #[error("no such process: pid {pid} does not exist")]
    NoSuchProcess {
        /// The pid.
        pid: u32,
    },
    /// An option no capture can use, with the accepted range.
    #[error("{0}")]
    InvalidOption(String),
    /// Reading or writing a file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// Writing a profile to a stream failed.
    #[error("writing the profile: {0}")]
    Write(#[source] io::Error),
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
