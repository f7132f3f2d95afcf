//! Safe, fast Linux `perf_event_open(2)`: counters, groups, per-CPU sets, and (in later modules)
//! samplers.
//!
//! The API follows the `perf-event-open` crate's names and module paths: [`config`] (options and
//! targets), [`event`] (what to count), [`count`] (counters and their values).
//!
//! ```no_run
//! use perf_event::config::{Cpu, Opts, Proc};
//! use perf_event::count::Counter;
//! use perf_event::event::sw::Software;
//!
//! let mut opts = Opts::default();
//! opts.exclude.kernel = true; // what an unprivileged user may count at perf_event_paranoid 2
//! opts.stat_format.time_enabled = true;
//! opts.stat_format.time_running = true;
//!
//! let counter = Counter::new(Software::TaskClock, (Proc::CURRENT, Cpu::ALL), &opts)?;
//! counter.enable()?;
//! let x: u64 = (0..1_000_000u64).sum();
//! counter.disable()?;
//! let stat = counter.stat()?;
//! println!("{x}: {} ns ({})", stat.count, stat.scaled());
//! # Ok::<(), perf_event::Error>(())
//! ```
//!
//! # Errors that explain
//!
//! Opening fails with an [`Error`] that says what to change: the `perf_event_paranoid` level and
//! what it allows, the missing PMU (a virtual machine has no hardware PMU), the option the running
//! kernel is too old for and the Linux version that added it, `RLIMIT_NOFILE`, the online CPUs.
//!
//! # Threads
//!
//! [`Counter`](count::Counter), [`CounterGroup`](count::CounterGroup), [`PerCpu`](count::PerCpu),
//! [`Sampler`](sample::Sampler), [`PerCpuSampler`](sample::PerCpuSampler), [`Event`](event::Event),
//! [`Error`] and the records are `Send` and `Sync`; the iterators ([`Iter`](sample::Iter),
//! [`CowIter`](sample::CowIter), [`AsyncIter`](sample::AsyncIter),
//! [`MergedIter`](sample::MergedIter)) are `Send` and borrow their sampler, so they cannot outlive
//! it. A sampler holds its own duplicate of the counter's fd and may outlive the counter. Every fd
//! is opened close-on-exec. (The integration tests assert these bounds at compile time.)
//!
//! # Kernel compatibility
//!
//! One build works on every kernel: the attr is encoded with the newest layout, which older kernels
//! accept as long as the fields they lack are zero.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod config;
pub mod count;
mod diagnose;
mod error;
pub mod event;
pub mod sample;
mod sys;
mod version;

pub use error::{Error, Result};
/// The raw kernel ABI, for [`Counter::new_with`](count::Counter::new_with) and friends.
pub use perf_sys;
