//! perf.data files: a streaming [writer](PerfDataWriter) and a [reader](PerfData) of the format the perf
//! tool records to and reports from.
//!
//! A file is a [header](FileHeader), the events' attrs with their ids ([`EventAttr`]), the data section of
//! records (the kernel's, as [`RawRecord`](crate::RawRecord)s, plus perf's own such as
//! [`PERF_RECORD_FINISHED_ROUND`]), and [feature sections](Features) with host facts, event names and
//! build ids. The layouts are those of the kernel tree's `tools/perf/Documentation/perf.data-file-format.txt`;
//! files are in the writing machine's byte order.
//!
//! Files written here open in `perf report` and `perf script` (checked against perf 6.1 by the tests in
//! `perf-core/tests/perf_data.rs`); files written by `perf record` read here.

mod attrs;
mod data;
mod features;
mod header;
mod reader;
mod wire;
mod writer;

pub use attrs::EventAttr;
pub use data::*;
pub use features::{BuildIdEntry, Feature, Features, NrCpus, SampleTime};
pub use header::{FileHeader, FileSection, FILE_HEADER_SIZE, PERF_MAGIC};
pub use reader::PerfData;
pub use writer::PerfDataWriter;
