//! perf_event mmap ring buffers (data and AUX), the mmap page, and zero-copy record parsing.
//!
//! perf-core chooses no event: it maps a perf fd it is given and parses bytes ([`PerfFd::open`] is a typed
//! `perf_event_open` whose fd the safe constructors accept). Everything here runs on
//! simulated kernel memory too, so it is tested under Miri and fuzzed.
//!
//! # Soundness
//!
//! A ring has exactly one consumer. The kernel attaches a second `mmap` of the same event to the same ring,
//! so mapping is either checked by the kernel ([`Ring::map_exclusive`], safe, for a [`PerfFd`] opened in
//! this process) or promised by the caller ([`Ring::map`], `unsafe`). Safe code never holds a reference to bytes the producer may write: in a normal
//! ring `[tail, head)` is the consumer's until it publishes a tail past it, which needs `&mut`; overwrite
//! areas are only ever copied out ([`Ring::copy_backward`], [`Ring::copy_aux_snapshot`]). A child made by
//! `fork()` gets placeholders instead of the parent's mappings ([`fork`]).
#![warn(missing_docs)]

mod chunk;
mod error;

pub use chunk::Chunk;
pub use error::{Error, ErrorKind};
mod encode;
mod fd;
pub mod perf_data;
pub mod record;

pub use record::{ParseConfig, ParseFields, RawRecord, Record, Records};

pub mod fork;
mod mmap;
mod overwrite;
mod page;
mod ring;
pub mod sim;

pub use fd::PerfFd;
pub use mmap::{page_size, MappedPage};
pub use overwrite::{BackwardCopy, BackwardRecords};
pub use page::{Capabilities, PageSnapshot, UserCount, UserPage};
pub use ring::{Area, Aux, Batch, Data, RecordSpan, Ring, RingMode};
