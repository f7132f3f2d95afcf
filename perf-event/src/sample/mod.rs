//! Sampling: a [`Sampler`] over a counter's ring buffer, typed [`record`]s, and iterators over them.
//!
//! ```no_run
//! use perf_event::config::{Cpu, Opts, Proc, SampleOn};
//! use perf_event::count::Counter;
//! use perf_event::event::sw::Software;
//!
//! let mut opts = Opts::default();
//! opts.sample_on = SampleOn::Count(100_000); // one sample per 100 µs of task clock
//! opts.sample_format.code_addr = true;
//! let counter = Counter::new(Software::TaskClock, (Proc::CURRENT, Cpu::ALL), &opts)?;
//! let sampler = counter.sampler(5)?; // 2^5 data pages
//! counter.enable()?;
//! let x: u64 = (0..10_000_000u64).sum();
//! counter.disable()?;
//! for (cpumode, record) in sampler.iter() {
//!     println!("{x} {cpumode:?} {record:-?}");
//! }
//! # Ok::<(), perf_event::Error>(())
//! ```
//!
//! - [`Sampler::iter`] yields owned `(Priv, Record)` pairs and never blocks (`None` when the ring is
//!   empty); [`Iter::next_timeout`] waits with `poll(2)`.
//! - [`Iter::into_cow`] gives a [`CowIter`]: the closure sees each record's bytes in the ring, and the
//!   ring's tail moves only when it returns.
//! - [`Sampler::aux_tracer`] maps the AUX area (Intel PT and friends): [`AuxTracer`].
//! - [`Sampler::attach`] makes other counters write into this ring (`PERF_EVENT_IOC_SET_OUTPUT`).
//! - A counter opened with `write_backward` gets an overwrite ring (flight recorder): read the newest
//!   records with [`Sampler::newest`].

mod asynk;
mod aux_tracer;
mod iter;
mod limits;
mod per_cpu;
mod reactor;
pub mod record;
mod sampler;

pub use asynk::{AsyncCowIter, AsyncIter};
pub use aux_tracer::{AuxChunk, AuxCowIter, AuxIter, AuxSnapshot, AuxTracer};
pub use iter::{CowChunk, CowIter, Iter};
pub use per_cpu::{AsyncMergedIter, MergedIter, PerCpuSampler};
pub use record::Parser;
pub(crate) use sampler::{Control, Output};
pub use sampler::{LostCounts, Sampler};
