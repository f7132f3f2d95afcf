//! Safe, fast Linux `perf_event_open(2)` (filled by the counting and sampling issues).
#![forbid(unsafe_code)]
#![warn(missing_docs)]
