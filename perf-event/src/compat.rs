//! What code written against perf-event-open 0.5 needs beyond the module paths: conversions its
//! generic signatures assume. See the crate docs' "Migrating from perf-event-open" section.

use std::io;

use crate::error::Error;

/// perf-event-open 0.5's generic functions take `E: TryInto<Event, Error = io::Error>`; with this
/// conversion such an `E` also satisfies ours (`Error: From<E::Error>`), so generic code written
/// for that crate compiles unchanged. The caller's `io::Error` is kept as the source.
impl From<io::Error> for Error {
    fn from(source: io::Error) -> Self {
        Error::Io {
            what: "the caller's conversion (an io::Error from outside perf-event, e.g. a TryInto<Event>)".into(),
            source,
        }
    }
}
