//! The one error type of perf-core.

/// Everything that can go wrong in perf-core: mapping a perf fd, reading a ring, parsing a record.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {}
