//! Migrating from perf-event-open 0.5 and from perf-event2: what changes, and why.
//!
//! # Migrating from perf-event-open
//!
//! Code written against perf-event-open 0.5.1 compiles against this crate with the crate name
//! changed (`perf_event_open::` → `perf_event::`), except where listed below. That is a test, not a
//! promise: `cargo xtask dropin` lists 0.5.1's whole public API from its rustdoc JSON (2189 items:
//! paths, fields, variants, struct literals, exhaustive matches, methods with their signatures,
//! associated constants and types, trait impls, auto traits included), and
//! `tests/tests/dropin_peo_0_5.rs` compiles one check per item against 0.5.1 itself and against
//! this crate.
//!
//! ```no_run
//! // perf-event-open 0.5.1's own example, with the crate name changed.
//! use perf_event::config::{Cpu, Opts, Proc, SampleOn, Size};
//! use perf_event::count::Counter;
//! use perf_event::event::sw::Software;
//! use perf_event::sample::record::mmap::Mmap; // 0.5.1's module per record kind
//! use perf_event::sample::record::Record;
//!
//! let mut opts = Opts::default();
//! opts.sample_on = SampleOn::Freq(1000);
//! opts.sample_format.user_stack = Some(Size(8));
//! let counter = Counter::new(Software::TaskClock, (Proc::CURRENT, Cpu::ALL), opts).unwrap();
//! let sampler = counter.sampler(10).unwrap();
//! counter.enable().unwrap();
//! counter.disable().unwrap();
//! for (_, record) in sampler.iter() {
//!     if let Record::Mmap(m) = record {
//!         let m: Box<Mmap> = m;
//!         println!("{:?}", m.file);
//!     }
//! }
//! ```
//!
//! ## The same
//!
//! - Module paths: 0.5.1's modules are all here (`sample::record::{auxiliary, bpf, call_chain,
//!   cgroup, comm, ctx, itrace, ksymbol, lost, mmap, ns, read, sample, task, text_poke, throttle}`,
//!   `sample::{iter, auxiliary, rb}`, `count::group`), next to the flat re-exports
//!   (`sample::record::Mmap`, `sample::AuxIter`) that the rest of these docs use.
//! - Errors: functions return [`perf_event::Error`](crate::Error) (what failed and what to change)
//!   where 0.5.1 returned `io::Error`; it converts into `io::Error`, so `?` in a function returning
//!   `io::Result` compiles unchanged, and an `io::Error` converts into it, so generic code bounded by
//!   0.5.1's `E: TryInto<Event, Error = io::Error>` calls ours unchanged.
//! - Renamed, with 0.5.1's name kept as a deprecated alias: [`Sampler::enable_counter_with`]
//!   ([`Sampler::refresh`]) and [`Sampler::sample_on`] ([`Sampler::set_period`] /
//!   [`Sampler::set_frequency`], which refuse 0, a period of 2^63 or more and a frequency above
//!   `kernel.perf_event_max_sample_rate` before the ioctl).
//!
//! ## Refused for soundness
//!
//! - `Kprobe/Kretprobe/Uprobe/Uretprobe::try_into_dp` and `TryFrom<probe> for DynamicPmu`: a
//!   [`DynamicPmu`](crate::event::dp::DynamicPmu) is plain data, and a probe's symbol or path would
//!   be a raw pointer in its `config1`; 0.5.1 keeps it valid only by demanding `&'static CStr`.
//!   Convert the probe into an [`Event`](crate::event::Event) (`Event::try_from(probe)`, or pass it
//!   to `Counter::new`), which owns the string.
//! - `UnsafeParser` (an `unsafe fn` parsing unchecked bytes) and `Parser::as_unsafe`: this crate has
//!   no `unsafe`. [`Sampler::parser`] returns the bounds-checked [`Parser`](crate::sample::Parser);
//!   perf-core parses byte slices (perf.data, saved rings) with checks.
//! - `Counter::switch_to` takes `&mut self`: it replaces the counter's fd, which a `&self` method
//!   could do while another thread reads it or a sampler maps it.
//! - `Sampler::counter_time_enabled`/`counter_time_running` return `Result<u64>`: the mmap page is
//!   read under its seqlock, and a lock that never settles is an error rather than a torn value.
//!
//! ## Different by design
//!
//! - Threads: `CounterGroup::add` returns `Arc<Counter>` and `siblings` is `&[Arc<Counter>]`
//!   (0.5.1: `Rc`): groups and counters are `Send + Sync`.
//! - Probes own their strings: `Kprobe::Symbol::name`, `Uprobe::path` are `CString` (0.5.1:
//!   `&'static CStr`); build uprobes with [`Uprobe::new`](crate::event::dp::Uprobe::new).
//! - `Sample::call_chain` is a [`CallChains`](crate::sample::record::CallChains) (0.5.1:
//!   `Vec<CallChain>`): iterating it (`.iter()`, `for part in &chain`, `into_iter()`) yields 0.5.1's
//!   [`CallChain`](crate::sample::record::CallChain) parts (`User`, `UserDeferred { cookie }`,
//!   `Kernel`, ...), so code that walks the parts compiles unchanged; `to_vec()` (or
//!   [`Sample::call_chain_parts`](crate::sample::record::Sample::call_chain_parts)) is the
//!   `Vec<CallChain>` for code that indexes it or asks its `len()`, and `ips()` is the kernel's
//!   form, `PERF_CONTEXT_*` markers in place. Parsing a sample allocates once for its chain, not
//!   once per context. `mmap::Info::BuildId` holds a `Vec<u8>` (0.5.1:
//!   `ArrayVec<u8, 20>`; no arrayvec type in this API).
//! - [`MemLevel2`](crate::sample::record::MemLevel2) has an `L0` variant (`PERF_MEM_LVLNUM_L0`,
//!   named by the kernel after 0.5.1), which 0.5.1 read as `Unknown`: an exhaustive match needs
//!   its arm. The decoded [`DataSource`](crate::sample::record::DataSource) and branch
//!   [`Entry`](crate::sample::record::Entry) fields are 0.5.1's types; `DataSource::from_bits` /
//!   `to_bits` convert from and to the kernel's word without losing a bit the headers define, and
//!   a branch type under `PERF_BR_EXTEND_ABI` is decoded from `new_type`.
//! - More options: `Opts`, `RecordIdFormat`, `ExtraRecord`, `Uprobe` and `Uretprobe` have fields
//!   0.5.1 lacks, so a struct literal naming only 0.5.1's fields needs `..Default::default()`.
//! - Conversions that cannot fail (`Hardware`, `Software`, `Raw`, `Tracepoint`, `Breakpoint`,
//!   `DynamicPmu` into `Event`) are `From` impls, so their `TryFrom::Error` is `Infallible`.
//! - `Target` has no `PartialEq`/`Eq`/`Hash`: it holds a duplicated cgroup fd, and comparing fd
//!   numbers would not compare cgroups.
//! - The AUX iterators (`sample::auxiliary::iter::{Iter, CowIter, AsyncIter, AsyncCowIter}`) take
//!   `max_chunk_len` as an `Option<u64>` (0.5.1: `Option<NonZeroUsize>`), a length in the ring, and
//!   the copy-on-write forms take it first and give the closure an
//!   [`AuxChunk`](crate::sample::AuxChunk) (the bytes in place as one or two slices, never a copy; 0.5.1:
//!   `rb::CowChunk`): `cow.next(Some(4096), |chunk| ...)`, `iter.next(None).await`. The async forms
//!   follow the sync ones.
//! - `sample::iter::Wait` and `sample::auxiliary::iter::Wait` (internal waker state that 0.5.1
//!   leaked, with no methods or constructor) do not exist.
//!
//! # Migrating from perf-event2
//!
//! perf-event2 (0.7) builds a counter with a `Builder`; here the event, the target and the options
//! are three arguments. The main paths side by side:
//!
//! | perf-event2 0.7 | perf-event |
//! |---|---|
//! | `Builder::new(events::Software::PAGE_FAULTS)` | `Counter::new(Software::PageFault, target, &opts)` |
//! | `.observe_self()` / `.observe_pid(pid)` | target `(Proc::CURRENT, ..)` / `(Proc(pid), ..)` |
//! | `.any_cpu()` / `.one_cpu(n)` | target `(.., Cpu::ALL)` / `(.., Cpu(n))` |
//! | `.exclude_kernel(true)`, `.exclude_hv(true)` | `opts.exclude.kernel = true`, `opts.exclude.hv = true` |
//! | `.enabled(true)` | `opts.enable = true` (or `counter.enable()?`) |
//! | `.inherit(true)` | `opts.inherit = Some(Inherit::NewChild)` |
//! | `.read_format(ReadFormat::TOTAL_TIME_ENABLED \| ReadFormat::ID)` | `opts.stat_format.time_enabled = true; opts.stat_format.id = true` |
//! | `counter.read()?` / `counter.read_full()?` | `counter.stat()?.count` / `counter.stat()?` ([`Stat`](crate::count::Stat)) |
//! | `Group::new()?` / `Group::builder()..build_group()?`, `Builder::build_with_group(&mut group)` | [`CounterGroup::new`](crate::count::CounterGroup::new)`(leader, target, &opts)?`, `group.add(event, &sibling_opts)?` |
//! | `group.read()?` (`GroupData`) | `group.stat()?` ([`GroupStat`](crate::count::GroupStat): `count(i)`, `scaled(i)`) |
//! | `.sample_period(n)` / `.sample_frequency(hz)` | `opts.sample_on = SampleOn::Count(n)` / `SampleOn::Freq(hz)` |
//! | `.sample(SampleFlag::IP \| SampleFlag::TID \| SampleFlag::TIME)` | `opts.sample_format.code_addr = true; opts.record_id_format.task = true; opts.record_id_format.time = true` |
//! | `counter.sampled(bytes)?` ([`Sampler`](crate::sample::Sampler)) | `counter.sampler(exp)?` (2^`exp` data pages) |
//! | `sampler.next_record()` then `record.parse_record()` | `sampler.iter()` (owned, parsed) or `sampler.iter().into_cow()` (in place) |
//! | `events::Tracepoint::with_id(id)` | `Tracepoint { id }`, or [`Tracepoint::new`](crate::event::tp::Tracepoint::new)`("sched", "sched_switch")?` |
//! | `Counter::enable`/`disable`/`reset` | the same names |
//!
//! [`Sampler::enable_counter_with`]: crate::sample::Sampler::enable_counter_with
//! [`Sampler::sample_on`]: crate::sample::Sampler::sample_on
//! [`Sampler::refresh`]: crate::sample::Sampler::refresh
//! [`Sampler::set_period`]: crate::sample::Sampler::set_period
//! [`Sampler::set_frequency`]: crate::sample::Sampler::set_frequency
//! [`Sampler::parser`]: crate::sample::Sampler::parser
