//! CPU profiles from Linux `perf_event_open(2)` samples, on top of [`perf_event`]: the whole chain
//! a profiler needs after the kernel's samples.
//!
//! Data flows one way, a module per stage:
//!
//! [`collect`] (samplers per CPU; side-band MMAP2, COMM, FORK, EXIT; LOST and THROTTLE counted) →
//! [`maps`] (address spaces from `/proc/PID/maps`, then from the records; kernel symbols) →
//! [`unwind`] (the kernel's frame-pointer call chains, or copied user stacks unwound with framehop)
//! → [`symbolize`] (blazesym, one lookup per unique frame, one batch per file) → [`aggregate`] (a
//! stack table: a prefix tree of frames, each sample keyed by its stack and who ran it, from
//! [`identity`]) → [`export`] (pprof, folded stacks, flame graph SVG, OTLP).
//!
//! Every sample says who ran: pprof labels `pid`, `tid`, `comm`, `thread_name`, `container_id`;
//! OTLP attributes `process.pid`, `thread.id`, `process.executable.name`, `thread.name`,
//! `container.id`; folded stacks and flame graphs by process or thread with
//! [`Profile::set_folded_roots`].
//!
//! For fleets: [`Profiler::cut`] for continuous profiling, `push` (feature `push`) to send each
//! cut to an OTLP/HTTP or Pyroscope endpoint without losing any silently, [`offcpu`] for where
//! threads wait, JIT frames named from `/tmp/perf-PID.map` ([`maps::perf_map`]), and [`doctor`]
//! for what will and will not work on this machine.
//!
//! # Quickstart
//!
//! Profile a command and write a pprof file that `go tool pprof` reads, and folded stacks:
//!
//! ```no_run
//! use std::process::Command;
//! use std::time::Duration;
//! use perf_profile::{Options, Profiler, Target};
//!
//! let mut cmd = Command::new("gzip");
//! cmd.args(["-9", "-c", "/usr/bin/perf"]).stdout(std::process::Stdio::null());
//! let mut profiler = Profiler::start(Target::Command(cmd), &Options::default())?;
//! while profiler.child_mut().is_some_and(|c| matches!(c.try_wait(), Ok(None))) {
//!     profiler.poll(Duration::from_millis(100))?;
//! }
//! let profile = profiler.finish()?;
//! profile.write_to_file("gzip.pb.gz".as_ref())?;
//! profile.write_to_file("gzip.folded".as_ref())?;
//! println!("{} samples of {}", profile.info.stats.samples, profile.info.event);
//! # Ok::<(), perf_profile::Error>(())
//! ```
//!
//! Profile this process itself, signal-free (the kernel takes the samples), and take the profile
//! so far without stopping:
//!
//! ```no_run
//! use std::time::Duration;
//! use perf_profile::{Options, Profiler, Target};
//!
//! let mut profiler = Profiler::start(Target::ThisProcess, &Options::default())?;
//! let x: u64 = (0..50_000_000u64).map(std::hint::black_box).sum();
//! profiler.poll(Duration::ZERO)?;
//! let so_far = profiler.profile();
//! for (stack, count) in so_far.folded() {
//!     println!("{stack} {count}");
//! }
//! # let _ = x;
//! # Ok::<(), perf_profile::Error>(())
//! ```
//!
//! # Features
//!
//! - `symbolize` (default): function names and file:line with blazesym. Without it, profiles carry
//!   addresses, mappings and build ids for a backend that symbolizes.
//! - `flamegraph`: flame graph SVGs with inferno (CDDL-1.0 licensed, so off by default).
//! - `otlp` (default): OTLP profiles ([`export::otlp`]; the signal is alpha upstream).
//! - `push`: push profiles (module `push`) to OTLP/HTTP or Pyroscope endpoints from a sender thread, with
//!   retries and a bounded queue (ureq, rustls).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod aggregate;
pub mod collect;
pub mod doctor;
mod elf;
mod error;
pub mod export;
/// The parsers of untrusted bytes, for the fuzz targets in `fuzz/`: not part of the API. (In
/// tests too: the seeds and the inputs that once crashed a target are run as a unit test.)
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;
pub mod identity;
pub mod maps;
pub mod offcpu;
pub mod privilege;
mod profile;
pub mod proto;
#[cfg(feature = "push")]
pub mod push;
pub mod symbolize;
pub mod untrusted;
pub mod unwind;

pub use collect::{CallGraph, Options, Profiler, Target};
pub use error::{Error, Result};
pub use export::Format;
pub use profile::{Info, ProcessInfo, Profile, Stats};

/// The README's example, compiled as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
