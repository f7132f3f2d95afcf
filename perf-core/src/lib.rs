//! perf_event mmap ring buffers (data and AUX), the mmap page, and zero-copy record parsing.
//!
//! perf-core opens no event: it maps a perf fd it is given and parses bytes. Everything here runs on
//! simulated kernel memory too, so it is tested under Miri and fuzzed.
#![warn(missing_docs)]

mod chunk;
mod error;

pub use chunk::Chunk;
pub use error::Error;
