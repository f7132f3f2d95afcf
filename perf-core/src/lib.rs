//! perf_event mmap ring buffers, the mmap page, and zero-copy record parsing (filled by the perf-core issue).
#![warn(missing_docs)]
