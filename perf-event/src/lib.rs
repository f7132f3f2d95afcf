//! Safe, fast Linux `perf_event_open(2)`: counters, groups, per-CPU sets, sampling into the mmap
//! ring buffer (owned, zero-copy and async iterators), overwrite rings and AUX tracing.
//!
//! Published as the package `perf-event-safe` (`cargo add perf-event-safe`); the library is named
//! `perf_event`. Module paths and names follow the `perf-event-open` crate: [`config`] (options
//! and targets), [`event`] (what to count), [`count`] (counters, groups and their values),
//! [`sample`] (rings, records and iterators).
//!
//! `perf_event_open(2)` in one paragraph: an *event* (a software counter such as page faults, a
//! hardware counter, a tracepoint, a PMU event) is opened on a *target* (a thread, or every task on
//! a CPU) with *options* (what to exclude, when to take a *sample*, what a sample holds). The
//! kernel returns a file descriptor: reading it gives the count; mapping it gives a ring buffer
//! into which the kernel writes *records* (samples, and side-band records such as mmaps and
//! exits). Unprivileged users may count their own processes in user space at the default
//! `perf_event_paranoid` level (2): the quickstarts below exclude the kernel so that they run
//! anywhere.
//!
//! # Quickstarts
//!
//! Each one is a doc test that runs (the last one only compiles: it needs an AUX-capable PMU).
//!
//! ## Counting
//!
//! ```
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
//! let x: u64 = std::hint::black_box((0..1_000_000u64).sum());
//! counter.disable()?;
//! let stat = counter.stat()?;
//! println!("{x}: {} ns ({})", stat.count, stat.scaled());
//! # Ok::<(), perf_event::Error>(())
//! ```
//!
//! Events can also be named as `perf stat -e` names them ([`Event::parse`](event::Event::parse)):
//! `Counter::new("page-faults:u", ...)`, `"sched:sched_switch"` (tracefs is found, or mounted when
//! this process may: see [`event::tp`]), `"msr/tsc/"`.
//!
//! ## Groups: several events read in one system call
//!
//! ```
//! use perf_event::config::{sibling, Cpu, Opts, Proc};
//! use perf_event::count::CounterGroup;
//! use perf_event::event::sw::Software;
//!
//! let mut opts = Opts::default();
//! opts.exclude.kernel = true;
//! let mut member = sibling::Opts::default();
//! member.exclude.kernel = true;
//!
//! let mut group = CounterGroup::new(Software::TaskClock, (Proc::CURRENT, Cpu::ALL), &opts)?;
//! group.add(Software::PageFault, &member)?;
//! group.add(Software::MinorPageFault, &member)?;
//! group.enable()?;
//! let pages = vec![1u8; 64 << 12];
//! group.disable()?;
//! let stat = group.stat()?; // one read(2) for the whole group
//! let count = |i| stat.count(i).unwrap_or_default(); // the leader is 0, then in order
//! let (ns, faults, minor) = (count(0), count(1), count(2));
//! println!("{} bytes: {ns} ns, {faults} page faults, {minor} minor", pages.len());
//! assert!(faults >= minor);
//! # Ok::<(), perf_event::Error>(())
//! ```
//!
//! ## Sampling with call chains
//!
//! A counter samples when [`Opts::sample_on`](config::Opts::sample_on) is set; its
//! [`sampler`](count::Counter::sampler) maps the ring (2^`exp` data pages) and iterates the
//! records.
//!
//! ```
//! use perf_event::config::{CallChain, Cpu, Opts, Proc, SampleOn};
//! use perf_event::count::Counter;
//! use perf_event::event::sw::Software;
//! use perf_event::perf_sys::PERF_CONTEXT_MAX;
//! use perf_event::sample::record::Record;
//!
//! let mut opts = Opts::default();
//! opts.exclude.kernel = true;
//! opts.sample_on = SampleOn::Count(1); // a sample at every page fault
//! opts.sample_format.code_addr = true;
//! opts.sample_format.call_chain = Some(CallChain {
//!     exclude_user: false,
//!     exclude_kernel: true, // the user-space frames only
//!     defer_user: false,
//!     max_stack_frames: 0, // the system's limit
//! });
//! let counter = Counter::new(Software::PageFault, (Proc::CURRENT, Cpu::ALL), &opts)?;
//! let sampler = counter.sampler(4)?;
//! counter.enable()?;
//! let pages = vec![1u8; 16 << 12];
//! counter.disable()?;
//! let mut chains = 0;
//! for (_cpumode, record) in sampler.iter() {
//!     if let Record::Sample(sample) = record {
//!         let chain = sample.call_chain.unwrap_or_default();
//!         // The kernel marks where user frames start with PERF_CONTEXT_* values.
//!         let frames: Vec<u64> = chain.ips().iter().copied().filter(|&ip| ip < PERF_CONTEXT_MAX).collect();
//!         chains += usize::from(!frames.is_empty());
//!     }
//! }
//! println!("{} bytes, {chains} samples with a call chain", pages.len());
//! assert!(chains > 0);
//! # Ok::<(), perf_event::Error>(())
//! ```
//!
//! ## The zero-copy iterator
//!
//! [`CowIter::next`](sample::CowIter::next) hands the closure each record's bytes where they lie
//! in the ring, and the parser; the ring's space is released when the closure returns. Parse only
//! what you need:
//!
//! ```
//! use perf_event::config::{Cpu, Opts, Proc, SampleOn};
//! use perf_event::count::Counter;
//! use perf_event::event::sw::Software;
//! use perf_event::perf_sys::PERF_RECORD_SAMPLE;
//! use perf_event::sample::record::Record;
//!
//! let mut opts = Opts::default();
//! opts.exclude.kernel = true;
//! opts.sample_on = SampleOn::Count(1);
//! opts.sample_format.data_addr = true; // the faulting address
//! let counter = Counter::new(Software::PageFault, (Proc::CURRENT, Cpu::ALL), &opts)?;
//! let sampler = counter.sampler(4)?;
//! counter.enable()?;
//! let pages = vec![1u8; 16 << 12];
//! counter.disable()?;
//!
//! let mut iter = sampler.iter().into_cow();
//! let mut in_pages = 0;
//! while let Some(addr) = iter.next(|chunk, parser| {
//!     // The record header's type, read in place; only samples are parsed.
//!     if chunk.record_type() != PERF_RECORD_SAMPLE {
//!         return None;
//!     }
//!     match parser.parse(chunk) {
//!         (_, Record::Sample(s)) => s.data_addr,
//!         _ => None,
//!     }
//! }) {
//!     let range = pages.as_ptr() as u64..pages.as_ptr() as u64 + pages.len() as u64;
//!     in_pages += usize::from(addr.is_some_and(|a| range.contains(&a)));
//! }
//! println!("{in_pages} faults in the vector");
//! # Ok::<(), perf_event::Error>(())
//! ```
//!
//! ## Async, with tokio
//!
//! [`Iter::into_async`](sample::Iter::into_async) gives a `futures::Stream` (and the `next().await`
//! form shown here) that any executor can drive: one helper thread serves every async iterator of
//! the process. A stream on another process ends once that process has exited and its ring is
//! drained.
//!
//! ```
//! use std::process::{Command, Stdio};
//!
//! use perf_event::config::{Cpu, Opts, Proc, SampleOn, WakeUpOn};
//! use perf_event::count::Counter;
//! use perf_event::event::sw::Software;
//! use perf_event::sample::record::Record;
//!
//! #[tokio::main(flavor = "current_thread")]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     // A child that waits until its counter is open (its stdin closes), then runs a program.
//!     let mut child = Command::new("sh")
//!         .args(["-c", "read _; exec cat /proc/self/status"])
//!         .stdin(Stdio::piped())
//!         .stdout(Stdio::null())
//!         .spawn()?;
//!     let mut opts = Opts::default();
//!     opts.exclude.kernel = true;
//!     opts.sample_on = SampleOn::Count(1);
//!     opts.sample_format.data_addr = true;
//!     opts.wake_up.on = WakeUpOn::Samples(8); // wake the stream every 8 samples
//!     let counter = Counter::new(Software::PageFault, (Proc(child.id()), Cpu::ALL), &opts)?;
//!     let sampler = counter.sampler(6)?;
//!     let mut stream = sampler.iter().into_async()?;
//!     counter.enable()?;
//!     drop(child.stdin.take()); // go
//!
//!     let mut faults = 0;
//!     while let Some((_cpumode, record)) = stream.next().await {
//!         faults += usize::from(matches!(record, Record::Sample(_)));
//!     }
//!     child.wait()?;
//!     println!("the child took {faults} page faults");
//!     assert!(faults > 0);
//!     Ok(())
//! }
//! ```
//!
//! ## Per-CPU sampling of a whole process
//!
//! A ring per CPU ([`PerCpuSampler`](sample::PerCpuSampler)) scales with the CPUs the process
//! runs on, and is what the kernel requires to follow the children and threads a process creates
//! (`inherit`). Its iterator merges the rings in time order.
//!
//! ```
//! use std::process::{Command, Stdio};
//!
//! use perf_event::config::{Inherit, Opts, Proc, SampleOn};
//! use perf_event::event::sw::Software;
//! use perf_event::sample::record::Record;
//! use perf_event::sample::PerCpuSampler;
//!
//! // A shell that, once started, runs two more programs: each a child of the process.
//! let mut child = Command::new("sh")
//!     .args(["-c", "read _; cat /proc/self/status; ls /"])
//!     .stdin(Stdio::piped())
//!     .stdout(Stdio::null())
//!     .spawn()?;
//! let mut opts = Opts::default();
//! opts.exclude.kernel = true;
//! opts.inherit = Some(Inherit::NewChild); // the children it creates from now on, too
//! opts.sample_on = SampleOn::Count(1);
//! opts.record_id_format.task = true; // which process and thread took the sample
//! opts.record_id_format.time = true; // the merge orders by time
//! let set = PerCpuSampler::new(Software::PageFault, Proc(child.id()), &opts, 4)?;
//! set.enable()?;
//! drop(child.stdin.take());
//! child.wait()?;
//! set.disable()?;
//!
//! let mut pids = std::collections::BTreeSet::new();
//! for (_cpu, _cpumode, record) in set.iter() {
//!     if let Record::Sample(s) = record {
//!         pids.extend(s.record_id.task.map(|t| t.pid));
//!     }
//! }
//! println!("samples from the processes {pids:?}");
//! assert!(pids.len() >= 2, "the shell and its children: {pids:?}");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Flight recorder: an overwrite ring
//!
//! With [`Opts::write_backward`](config::Opts::write_backward) the kernel overwrites the oldest
//! records instead of stopping when the ring is full; [`Sampler::newest`](sample::Sampler::newest)
//! reads the newest ones (pausing the ring meanwhile). Since Linux 4.7.
//!
//! ```
//! use perf_event::config::{Cpu, Opts, Proc, SampleOn};
//! use perf_event::count::Counter;
//! use perf_event::event::sw::Software;
//! use perf_event::sample::record::Record;
//!
//! let mut opts = Opts::default();
//! opts.exclude.kernel = true;
//! opts.write_backward = true;
//! opts.sample_on = SampleOn::Count(1);
//! opts.sample_format.data_addr = true;
//! let counter = Counter::new(Software::PageFault, (Proc::CURRENT, Cpu::ALL), &opts)?;
//! let sampler = counter.sampler(0)?; // one data page: it wraps many times below
//! counter.enable()?;
//! let pages = vec![1u8; 1024 << 12];
//! counter.disable()?;
//! let newest = sampler.newest(10)?; // newest first
//! let last: Vec<u64> = newest
//!     .iter()
//!     .filter_map(|(_, r)| match r {
//!         Record::Sample(s) => s.data_addr,
//!         _ => None,
//!     })
//!     .collect();
//! println!("{} bytes; the last faults: {last:x?}", pages.len());
//! assert!(!last.is_empty() && last.len() <= 10);
//! # Ok::<(), perf_event::Error>(())
//! ```
//!
//! ## AUX tracing (Intel PT and friends)
//!
//! A PMU with an AUX area writes its trace into a second ring, and says in the data ring which
//! bytes it added ([`Record::Aux`](sample::record::Record::Aux)). Only PMUs such as `intel_pt`,
//! `intel_bts`, `cs_etm` and `arm_spe` have one, so this example only compiles here.
//!
//! ```no_run
//! use perf_event::config::{Cpu, Opts, Proc};
//! use perf_event::count::Counter;
//! use perf_event::event::Event;
//! use perf_event::sample::record::Record;
//!
//! let mut opts = Opts::default();
//! opts.exclude.kernel = true;
//! let pt = Event::parse("intel_pt//")?; // the PMU from sysfs, with its default config
//! let counter = Counter::new(pt, (Proc::CURRENT, Cpu::ALL), &opts)?;
//! let sampler = counter.sampler(4)?;
//! let aux = sampler.aux_tracer(8)?; // 2^8 pages of trace
//! counter.enable()?;
//! let x: u64 = std::hint::black_box((0..1_000_000u64).sum());
//! counter.disable()?;
//! let announced: u64 = sampler
//!     .iter()
//!     .filter_map(|(_, r)| match r {
//!         Record::Aux(a) => Some(a.size),
//!         _ => None,
//!     })
//!     .sum();
//! let mut trace = Vec::new();
//! let mut chunks = aux.iter();
//! while let Some(bytes) = chunks.next(None) {
//!     trace.extend_from_slice(&bytes);
//! }
//! println!("{x}: {announced} bytes announced, {} bytes of trace read", trace.len());
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
//! # Migrating
//!
//! From perf-event-open 0.5 (change the crate name; its paths resolve here) and from perf-event2:
//! see [`migrating`], which lists every deliberate difference.
//!
//! # Kernel compatibility
//!
//! One build serves every kernel it is tested on: the attr is encoded with the newest layout,
//! which older kernels accept as long as the fields they lack are zero, and what a kernel lacks is
//! decided at run time. Tested: Linux 5.10, 6.1, 6.12 and 7.2 on x86_64 (booted under qemu by the
//! workspace's kernel matrix) and 6.18.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod command;
mod compat;
pub mod config;
pub mod count;
mod diagnose;
mod error;
pub mod event;
pub mod migrating;
pub mod sample;
mod sys;
mod version;

pub use error::{Error, Result};
/// The raw kernel ABI, for [`Counter::new_with`](count::Counter::new_with) and friends.
pub use perf_sys;

/// The README's code, compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
