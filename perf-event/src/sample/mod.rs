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
//!   empty); [`Iter::next_timeout`] waits for records.
//! - [`Iter::into_cow`] gives a [`CowIter`]: the closure sees each record's bytes in the ring, and the
//!   kernel gets them back only after it returns.
//! - [`Iter::into_async`] and [`CowIter::into_async`] are the async forms, woken by one shared reactor
//!   thread; [`PerCpuSampler`] reads one ring per CPU as one time-ordered stream (also async).
//! - [`Sampler::aux_tracer`] maps the AUX area (Intel PT and friends): [`AuxTracer`], read by
//!   [`AuxIter`] and [`AuxCowIter`], or asynchronously by [`AsyncAuxIter`] and [`AsyncAuxCowIter`]
//!   (woken through the sampler's registration with the same reactor).
//! - [`Sampler::attach`] makes other counters write into this ring (`PERF_EVENT_IOC_SET_OUTPUT`).
//! - A counter opened with `write_backward` gets an overwrite ring (flight recorder): read the newest
//!   records with [`Sampler::newest`], which copies them out with the output paused.
//!
//! # One reader at a time, and no deadlock
//!
//! The kernel gives a ring one tail, so a ring has one reader. A [`Sampler`] lends its ring to the
//! iterator that finds records and takes it back when that iterator finds the ring empty, is dropped,
//! or is asked to give it up by another reader; meanwhile other readers (other iterators, or a sampler
//! method called from inside a [`CowIter`] closure) get [`Error::RingBusy`] from the `try_` forms at
//! once, and `None` from the `next` forms after waiting at most 10 ms for a turn. The hand-over is
//! exact: a request is made and cleared under the sampler's lock, so a reader alone never stops early
//! with records in the ring. Blocking and async waits share one reactor registration per sampler, so
//! every waiter sees every kernel wakeup; it is made at the first wait and kept until the sampler is
//! dropped, so iterators made at every poll cost no syscall to wait. Iterators end with one error, then `None`, when the ring can
//! never be read forward (an overwrite ring, or a ring in a child made by `fork()`).
//!
//! Two limits of this contract, by choice:
//! - A pass ends when it finds the ring empty, not at the head it saw when it began: records written
//!   while it reads are read in the same pass. A reader that is itself sampled fast enough (a
//!   `task-clock` at its minimum period on the reading thread) finds new records as fast as it reads
//!   them, so `for r in sampler.iter()` may never end there (records it falls behind on are lost and
//!   counted, never unread). Bound such a pass: `sampler.iter().take(n)`,
//!   [`CowIter::drain`](iter::CowIter::drain) with a maximum, or a deadline of the caller's.
//! - A reader leaked with `std::mem::forget` keeps the ring lent for good, as a leaked guard keeps any
//!   lock: later readers get [`Error::RingBusy`] (the `next` forms `None`), and an async reader waits for
//!   a hand-over that never comes. Drop readers; nothing unsound follows from leaking one.
//!
//! Every lock of perf-event is held only for a few instructions of its own: never while a closure of
//! the caller runs, a waker is cloned, woken or dropped, or a value of the caller's type is dropped (an
//! executor's waker may drop a task whose future holds another reader of the same sampler, which takes
//! the same lock). Records a reader took from a ring are handed out, or kept for the next reader: a
//! [`MergedIter`] or [`AsyncMergedIter`] dropped early leaves the records it had read but not handed out
//! with their samplers, and the next merged iterator over them hands them out first.
//!
//! # fork()
//!
//! A child made by `fork()` cannot read or map its parent's rings: a parent's [`Sampler`] or
//! [`AuxTracer`] copied into the child says [`ForkedChild`](perf_core::ErrorKind::ForkedChild), and
//! [`Counter::sampler`](crate::count::Counter::sampler) on a parent's counter says
//! [`InheritedFd`](perf_core::ErrorKind::InheritedFd) (open the counter again in the child). No lock of
//! perf-event can be left held by a thread the child does not have: each is a
//! [`perf_core::fork::Lock`], which the child takes over, so every call in the child returns. A call
//! that would pause or stop the shared event for a read ([`Sampler::newest`], AUX snapshots), or
//! register it for wakeups (an async iterator, a blocking wait), says `ForkedChild` before any syscall
//! on the fd the child shares with its parent. Explicit controls
//! ([`Sampler::pause`], [`Sampler::enable`], `Counter::enable`, ...) still act on that shared event: the
//! child asked for them. A `fork()` inside a [`CowIter`] closure leaves the child a chunk that reads as
//! zeros (the ring's mapping is a zeroed placeholder in the child), never memory of someone else's.
//!
//! [`Error::RingBusy`]: crate::Error::RingBusy

mod asynk;
mod aux_tracer;
mod compat;
pub mod iter;
mod limits;
mod mappings;
pub(crate) mod per_cpu;
mod reactor;
pub mod record;
mod sampler;

pub use asynk::{AsyncCowIter, AsyncIter};
// perf-event-open 0.5's module paths.
pub use aux_tracer::{
    AsyncAuxCowIter, AsyncAuxIter, AuxChunk, AuxCowIter, AuxIter, AuxSnapshot, AuxTracer,
};
pub use compat::{auxiliary, rb};
pub use iter::{CowChunk, CowIter, Iter};
pub use mappings::{executable_mappings, ExecMapping};
pub use per_cpu::{AsyncMergedIter, MergedIter, PerCpuSampler};
pub use record::Parser;
pub(crate) use sampler::{Control, Output};
pub use sampler::{LostCounts, Sampler};
