//! perf_event mmap ring buffers (data and AUX), the mmap page, and zero-copy record parsing.
//!
//! perf-core opens no event: it maps a perf fd it is given and parses bytes. Everything here runs on
//! simulated kernel memory too, so it is tested under Miri and fuzzed.
#![warn(missing_docs)]

mod chunk;
mod error;

pub use chunk::Chunk;
pub use error::Error;
mod encode;
pub mod perf_data;
pub mod record;

pub use record::{ParseConfig, ParseFields, RawRecord, Record, Records};

mod mmap;
mod page;
mod ring;
pub mod sim;

pub use mmap::{page_size, MappedPage};
pub use page::{Capabilities, PageSnapshot, UserCount, UserPage};
pub use ring::{Area, Aux, AuxSnapshot, BackwardRecords, Batch, Data, Ring, RingMode};
