//! pprof-rs 0.15's API over perf_event_open(2) self-profiling.
//!
//! Switching from pprof-rs is one line in Cargo.toml, and code that uses pprof-rs compiles
//! unchanged:
//!
//! ```toml
//! pprof = { package = "perf-pprof", version = "0.1", features = ["flamegraph"] }
//! ```
//!
//! ```no_run
//! let guard = pprof::ProfilerGuard::new(100)?;
//! let v: u64 = (0..50_000_000u64).map(std::hint::black_box).sum();
//! let report = guard.report().build()?;
//! println!("{v} {report:?}");
//! # Ok::<(), pprof::Error>(())
//! ```
//!
//! # What differs underneath
//!
//! pprof-rs samples with `setitimer(ITIMER_PROF)` and walks the stack inside the `SIGPROF` handler
//! of the interrupted thread, which is where its crashes and deadlocks come from (unwinding or
//! allocating while the thread holds a lock). Here the kernel takes the samples
//! ([`perf_profile::Target::ThisProcess`]: every thread of the process, and the threads started
//! later), each sample with a copy of the top of the user stack, which the collector thread
//! unwinds with framehop and the binaries' CFI (or, with feature `frame-pointer`, the call chain
//! the kernel walks from frame pointers). A collector thread that the
//! [`ProfilerGuard`] owns drains the rings; symbols come from blazesym (ELF symbols and DWARF,
//! inlined functions included), read when a report is built, without holding the collector's
//! lock, and kept for the process: each address is named once. No signal handler is installed,
//! ever.
//!
//! - Samples need `perf_event_paranoid` ≤ 2 or `CAP_PERFMON`; where the kernel refuses,
//!   [`ProfilerGuard::new`] returns [`Error::PerfEventParanoid`] naming the setting and the fix.
//! - Every [`Frames`] carries the thread that ran it, its name and its kernel thread id (pprof-rs:
//!   `pthread_self()`) as `thread_name` and `thread_id`, and the time of the report as
//!   `sample_timestamp`.
//! - Only user-space frames, as pprof-rs. Time in the kernel is sampled where that is permitted
//!   (`perf_event_paranoid` ≤ 1 or `CAP_PERFMON`) and charged to the user stack that entered it,
//!   as pprof-rs's `ITIMER_PROF` counts system time; at 2 only user time is sampled.
//! - [`Symbol::name`] holds the demangled name (pprof-rs holds the raw one and demangles in
//!   [`Symbol::name()`]); `addr` is the frame's address.
//! - Several guards may run at once (pprof-rs allows one per process).
//!
//! # Features
//!
//! - `flamegraph`: `Report::flamegraph` and `Report::flamegraph_with_options`, inferno
//!   re-exported as `pprof::flamegraph` (CDDL-1.0 licensed).
//! - `prost-codec`, `protobuf-codec`: `Report::pprof()` and the `protos` module. Both give
//!   prost messages; `protos::Message` offers prost's `encode` and rust-protobuf's `write_to_vec`.
//! - `criterion`: `criterion::PProfProfiler`, criterion 0.5's `Profiler`.
//! - `frame-pointer`: call chains from frame pointers, walked by the kernel (for code built with
//!   `-C force-frame-pointers=yes`; Rust's std is built without).
//! - `framehop-unwinder`: the default here; does nothing.
//! - `cpp`, `perfmaps`, `large-depth`, `huge-depth`, `protobuf`: accepted, do nothing (C++ names
//!   are demangled and JIT perf maps read regardless; stacks are as deep as the kernel's
//!   `perf_event_max_stack`).
#![warn(missing_docs)]
#![forbid(unsafe_code)]

/// The README's examples, compiled as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

mod error;
mod frames;
pub mod http;
mod profiler;
mod report;
mod symbols;

pub use error::{Error, Result};
pub use frames::{Frames, Symbol};
pub use profiler::{ProfilerGuard, ProfilerGuardBuilder};
pub use report::{Report, ReportBuilder, ReportTiming, UnresolvedFrames, UnresolvedReport};

/// inferno's flame graph module, for [`Report::flamegraph_with_options`]'s options.
#[cfg(feature = "flamegraph")]
pub use inferno::flamegraph;

#[cfg(feature = "_protobuf")]
pub mod protos;

#[cfg(feature = "criterion")]
pub mod criterion;

/// pprof-rs's deepest stack by default; here stacks are as deep as the kernel gives them
/// (`kernel.perf_event_max_stack`, 127 by default).
pub const MAX_DEPTH: usize = 128;

/// The longest thread name (with its terminating NUL) Linux keeps, as pprof-rs's constant.
pub const MAX_THREAD_NAME: usize = 16;
