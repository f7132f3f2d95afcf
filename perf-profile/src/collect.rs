//! Collection: sampling a command, a set of processes, this process or the whole system, and
//! feeding the records through the pipeline (address spaces, unwinding, aggregation).
//!
//! The events are opened once per online CPU (an inherited event cannot be mapped with `cpu = -1`),
//! each CPU's counters writing into one ring; the rings are read in time order with perf-event's
//! [`MergedIter`], so that a mapping is known before the samples that land in it.
//!
//! - A **command** is handled as `perf record` does, without unsafe code: the counters are opened
//!   on the calling thread, disabled, with `inherit` and `enable_on_exec`, right before the command
//!   is spawned. The child's inherited copies start at its `exec`; the calling thread's never run.
//! - **Pids**: every thread of each process, with `inherit` so that later threads and children
//!   are followed.
//! - **The system**: every task on every CPU (root, or `perf_event_paranoid` ≤ 0).
//!
//! The event is `cycles` where a hardware PMU exists, else `cpu-clock` (a VM, a container);
//! [`Profile::info`](crate::Profile::info) says which and why. Side-band records: MMAP2 (with
//! build ids on Linux 5.12+), COMM (exec), FORK and EXIT, with `sample_id_all`. LOST and THROTTLE
//! records are counted into [`Stats`].

use std::fs;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::{Duration, Instant, SystemTime};

use perf_event::config::{
    online_cpus, CallChain as KernelCallChain, Cpu, Inherit, OnExecve, Opts, Proc, SampleOn,
    UseBuildId,
};
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
use perf_event::config::{RegsMask, Size};
use perf_event::count::Counter;
use perf_event::event::hw::Hardware;
use perf_event::event::sw::Software;
use perf_event::event::Event;
use perf_event::sample::record::{Abi, Info as MmapInfo, Priv, Record, Switch};
use perf_event::sample::{MergedIter, Sampler};

use crate::aggregate::{Frame, IdentityId, Stacks};
use crate::error::{Error, Result};
use crate::identity::Names;
use crate::maps::perf_map::PerfMaps;
use crate::maps::{AddressSpaces, KernelSymbols};
use crate::offcpu::{self, Method, Waits};
use crate::profile::{Info, ProcessInfo, Profile, Stats};
use crate::symbolize::{Mode, Symbols};
use crate::unwind::{self, Context, RawFrame};

/// What to profile.
#[derive(Debug)]
#[non_exhaustive]
pub enum Target {
    /// A command, spawned by [`Profiler::start`], and its children.
    Command(Command),
    /// These running processes (every thread), and the threads and children they create.
    Pids(Vec<u32>),
    /// The calling process: every thread it has now, and those they create. Signal-free
    /// self-profiling: the kernel takes the samples; nothing runs in the profiled threads.
    ThisProcess,
    /// Every task on every CPU.
    System,
}

/// How call chains are taken.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum CallGraph {
    /// The kernel walks frame pointers at each sample (`PERF_SAMPLE_CALLCHAIN`), user and
    /// kernel frames. Code built without frame pointers shows truncated stacks. A chain the
    /// kernel cut at its frame limit (`perf_event_max_stack`) is rooted at `[truncated]`
    /// ([`Frame::TRUNCATED`]; see [Where a stack ends](crate::unwind#where-a-stack-ends)).
    #[default]
    #[doc(alias = "PERF_SAMPLE_CALLCHAIN")]
    FramePointer,
    /// Each sample copies the user registers and the top `stack_size` bytes of the user stack
    /// (`PERF_SAMPLE_REGS_USER`, `PERF_SAMPLE_STACK_USER`, as `perf record --call-graph dwarf`),
    /// unwound here with framehop from the binaries' `.eh_frame` / `.debug_frame`: code built
    /// without frame pointers unwinds too. Kernel frames still come from the kernel's chain.
    /// x86_64 and aarch64. A stack deeper than the copy ends where the copy does, at a
    /// `[truncated]` root ([`Frame::TRUNCATED`]). Since Linux 3.7.
    #[doc(alias = "PERF_SAMPLE_STACK_USER")]
    #[doc(alias = "PERF_SAMPLE_REGS_USER")]
    Dwarf {
        /// Bytes of user stack per sample: a multiple of 8 from 8 to 65528
        /// ([`DEFAULT_STACK_SIZE`] by default).
        stack_size: u32,
    },
}

/// The user stack copied per sample with [`CallGraph::Dwarf`] unless told otherwise: 8 KiB, as
/// `perf record --call-graph dwarf`.
pub const DEFAULT_STACK_SIZE: u32 = 8192;

/// The kernel's largest `sample_stack_user` (a record's size is 16 bits).
const MAX_STACK_SIZE: u32 = 65528;

/// The ring size (2^pages) at least used with [`CallGraph::Dwarf`]: 2 MiB with 4 KiB pages, about
/// 250 samples of 8 KiB stacks.
const DWARF_RING_PAGES_EXP: u8 = 9;

/// Capture options.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Options {
    /// Samples per second per CPU (default 99, prime to the usual timer ticks).
    pub frequency: u64,
    /// How call chains are taken.
    pub call_graph: CallGraph,
    /// How frames are named.
    pub symbolize: Mode,
    /// Each CPU's ring holds 2^`ring_pages_exp` pages (default 6: 256 KiB with 4 KiB pages; at
    /// least 9 with [`CallGraph::Dwarf`], whose samples carry the stack copy).
    pub ring_pages_exp: u8,
    /// Sample the kernel too (default). Where that is not permitted the capture falls back to user
    /// space and says so in the profile's notes.
    pub kernel: bool,
    /// The service name profiles carry ([`Info::service`]); `None`: the process's name.
    pub service: Option<String>,
    /// Off-CPU instead of CPU: the stack at each switch-out weighted by the time until the thread
    /// runs again (the [`crate::offcpu`] module); `frequency` is then unused. The switch-outs are
    /// sampled in the kernel, so `kernel: false` keeps the user frames only.
    pub off_cpu: bool,
    /// With `off_cpu`, the event that samples the switch-outs; `None` (default): `sched:sched_switch`
    /// where tracefs gives its id, else the `context-switches` software event, with a note in the
    /// profile saying why. [`Profiler::off_cpu_method`] says which was taken.
    pub off_cpu_method: Option<Method>,
    /// Where tracefs is, to read the `sched:sched_switch` tracepoint's id from
    /// (`events/sched/sched_switch/id`); `None` (default): found, or mounted as root, as perf does.
    pub tracefs: Option<PathBuf>,
    /// The bytes that JIT maps (`/tmp/perf-PID.map`), unwind tables (`-g dwarf`) and function
    /// tables ([`Mode::Functions`]) kept from the profiled processes' files share (default
    /// [`DEFAULT_MEMORY_BUDGET`](crate::untrusted::DEFAULT_MEMORY_BUDGET): the profiler stays
    /// within about 64 MiB plus this). What does not fit, once each cache's least recently used
    /// files are out, is not read: those frames keep their addresses. See [`crate::untrusted`].
    pub memory_budget: usize,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            frequency: 99,
            call_graph: CallGraph::FramePointer,
            symbolize: Mode::Local,
            ring_pages_exp: 6,
            kernel: true,
            service: None,
            off_cpu: false,
            off_cpu_method: None,
            tracefs: None,
            memory_budget: crate::untrusted::DEFAULT_MEMORY_BUDGET,
        }
    }
}

/// The kernel's per-CPU sample rate limit is `kernel.perf_event_max_sample_rate` (100000 by default).
const MAX_FREQUENCY: u64 = 100_000;

/// A running capture: start it, [`poll`](Self::poll) it (or let a thread do so), take the
/// [`profile`](Self::profile) so far at any time, [`finish`](Self::finish) it.
///
/// ```no_run
/// use std::process::Command;
/// use std::time::Duration;
/// use perf_profile::{Options, Profiler, Target};
///
/// let mut cmd = Command::new("sleep");
/// cmd.arg("1");
/// let mut p = Profiler::start(Target::Command(cmd), &Options::default())?;
/// while p.child_mut().is_some_and(|c| matches!(c.try_wait(), Ok(None))) {
///     p.poll(Duration::from_millis(100))?;
/// }
/// let profile = p.finish()?;
/// profile.write_to_file("cpu.pb.gz".as_ref())?;
/// # Ok::<(), perf_profile::Error>(())
/// ```
#[derive(Debug)]
pub struct Profiler {
    source: Source,
    pipe: Pipeline,
}

/// The counters and their rings.
#[derive(Debug)]
struct Source {
    counters: Vec<Counter>,
    /// One ring per CPU.
    samplers: Vec<(u32, Sampler)>,
    child: Option<Child>,
    stopped: bool,
}

/// Records in, stacks out.
#[derive(Debug)]
struct Pipeline {
    maps: AddressSpaces,
    kernel: KernelSymbols,
    stacks: Stacks,
    symbols: Symbols,
    stats: Stats,
    info: Info,
    started: Instant,
    raw: Vec<RawFrame>,
    frames: Vec<Frame>,
    /// With [`CallGraph::Dwarf`]: the user-stack unwinder.
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    dwarf: Option<unwind::dwarf::DwarfUnwinder>,
    /// The last cut: when, and the counts then.
    cut: Option<(Instant, Stats)>,
    /// Off-CPU: the threads switched out, `None` for a CPU profile.
    waits: Option<Waits>,
    /// JIT symbols (`/tmp/perf-PID.map`).
    jit: PerfMaps,
    /// Process and thread names, from COMM and FORK records.
    names: Names,
    /// The kernel's limit on a call chain's frames: a chain that long ran out.
    max_stack: u32,
    /// With [`CallGraph::Dwarf`]: samples whose unwinding reached a file whose tables were still
    /// being read, unwound again once they are (see [`Deferred`]).
    deferred: Vec<Deferred>,
    /// The bytes of stack they keep.
    deferred_bytes: usize,
    /// Processes that exited while samples of theirs were deferred: their maps are kept until
    /// those are unwound.
    exited: Vec<u32>,
}

/// A sample kept until the unwind tables of a file its stack passes through are read: unwound
/// then, its stack ends where every later sample of the same path ends, instead of at the frame
/// in that file (see [`unwind::Ending::Pending`]).
#[derive(Debug)]
#[cfg_attr(
    not(any(target_arch = "x86_64", target_arch = "aarch64")),
    allow(dead_code)
)]
struct Deferred {
    since: Instant,
    pid: u32,
    tid: u32,
    time: Option<u64>,
    period: u64,
    who: crate::aggregate::Identity,
    /// The kernel's frames (a sample in the kernel).
    kernel: Vec<RawFrame>,
    regs: Vec<u64>,
    stack: Vec<u8>,
    /// Off CPU: the nanoseconds until the thread ran again, once it did.
    waited: Option<u64>,
    /// Off CPU: the thread exited; a wait not ended by then is not counted.
    exited: bool,
}

/// How long a sample waits for a file's unwind tables (a file on a hung file system never
/// comes): then it is unwound as far as it goes and marked `[truncated]`. A file that has
/// kept samples waiting that long keeps no more ([`unwind::dwarf::LOADING_WAIT`]), so a
/// profile taken waits at most this long, once per such file.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
const DEFER_WAIT: Duration = unwind::dwarf::LOADING_WAIT;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const DEFER_WAIT: Duration = Duration::from_secs(2);

/// The stack bytes deferred samples may keep in all; past it a sample is not deferred.
const DEFER_BYTES: usize = 4 << 20;

impl Profiler {
    /// Opens the events for `target` and starts sampling (for a command: spawns it).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidOption`] for a frequency of 0 or above 100000; [`Error::NoSuchProcess`] for
    /// a pid that does not exist; [`Error::Perf`] when the events cannot be opened (its message
    /// names the `perf_event_paranoid` level and what would work, e.g. for the whole system
    /// without privilege); [`Error::Spawn`] when the command cannot be run.
    pub fn start(target: Target, opts: &Options) -> Result<Self> {
        if opts.frequency == 0 || opts.frequency > MAX_FREQUENCY {
            return Err(Error::InvalidOption(format!(
                "a frequency of {} Hz: use 1 to {MAX_FREQUENCY} (the kernel's \
                 perf_event_max_sample_rate caps it further)",
                opts.frequency
            )));
        }
        check_call_graph(opts.call_graph)?;
        let start = SystemTime::now();
        let budget = crate::untrusted::Budget::new(opts.memory_budget);
        // Other processes' files are read on the loader's threads, never on the one that drains
        // the rings (see `crate::untrusted`); seeding, before the capture starts, waits longer.
        let loader = crate::untrusted::Loader::new();
        let mut maps = AddressSpaces::new();
        maps.set_loader(loader.clone(), Duration::from_secs(1));
        let (tasks, mode) = match &target {
            Target::Command(_) => (vec![Some(Proc::CURRENT)], Mode_::Command),
            Target::System => (vec![None], Mode_::System),
            Target::Pids(pids) => (threads_of(pids)?, Mode_::Tasks),
            Target::ThisProcess => (threads_of(&[std::process::id()])?, Mode_::Tasks),
        };
        if let Target::Pids(pids) = &target {
            for &pid in pids {
                maps.seed_from_proc(pid);
            }
        }
        if let Target::ThisProcess = &target {
            maps.seed_from_proc(std::process::id());
        }
        let cpus = online_cpus()?;
        let mut notes = Vec::new();
        let opened = open(&tasks, &cpus, mode, opts, &mut notes)?;
        let kernel = if opened.kernel {
            let k = KernelSymbols::load();
            if let Some(why) = k.hidden() {
                notes.push(why.to_owned());
            }
            k
        } else {
            KernelSymbols::default()
        };
        let mut source = Source {
            counters: opened.counters,
            samplers: opened.samplers,
            child: None,
            stopped: false,
        };
        let mut process = match &target {
            Target::Pids(pids) => pids.first().and_then(|&p| ProcessInfo::of_pid(p)),
            Target::ThisProcess => ProcessInfo::of_pid(std::process::id()),
            Target::Command(_) | Target::System => None,
        };
        match target {
            Target::Command(mut cmd) => {
                let child = cmd.spawn().map_err(|e| Error::Spawn {
                    command: cmd.get_program().to_string_lossy().into_owned(),
                    source: e,
                })?;
                process = Some(ProcessInfo::new(
                    child.id(),
                    &cmd.get_program().to_string_lossy(),
                ));
                source.child = Some(child);
            }
            _ => {
                for c in &source.counters {
                    c.enable()?;
                }
            }
        }
        maps.set_loader(loader.clone(), crate::untrusted::DRAIN_WAIT);
        let mut symbols = Symbols::new(opts.symbolize);
        symbols.set_budget(budget.clone());
        symbols.set_loader(loader.clone(), crate::symbolize::SNAPSHOT_WAIT);
        let mut jit = PerfMaps::new();
        jit.set_budget(budget.clone());
        jit.set_loader(loader.clone(), crate::untrusted::DRAIN_WAIT);
        Ok(Self {
            source,
            pipe: Pipeline {
                maps,
                kernel,
                stacks: Stacks::new(),
                symbols,
                stats: Stats::default(),
                info: Info {
                    event: opened.event.into(),
                    event_reason: opened.event_reason,
                    frequency: opts.frequency,
                    start,
                    duration: Duration::ZERO,
                    stats: Stats::default(),
                    notes,
                    symbolize: opts.symbolize,
                    process,
                    service: opts.service.clone(),
                },
                started: Instant::now(),
                raw: Vec::new(),
                frames: Vec::new(),
                #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
                dwarf: matches!(opts.call_graph, CallGraph::Dwarf { .. }).then(|| {
                    let mut d = unwind::dwarf::DwarfUnwinder::with_budget(budget);
                    d.set_loader(loader, crate::untrusted::DRAIN_WAIT);
                    d
                }),
                cut: None,
                waits: opts.off_cpu.then(Waits::new),
                jit,
                names: Names::default(),
                max_stack: unwind::max_stack(),
                deferred: Vec::new(),
                deferred_bytes: 0,
                exited: Vec::new(),
            },
        })
    }

    /// The command being profiled ([`Target::Command`]), to wait for or signal.
    pub fn child_mut(&mut self) -> Option<&mut Child> {
        self.source.child.as_mut()
    }

    /// Waits up to `timeout` for records, then aggregates every record in the rings. Returns how
    /// many records were read.
    ///
    /// # Errors
    ///
    /// None today; the `Result` leaves room for rings that fail for good.
    pub fn poll(&mut self, timeout: Duration) -> Result<usize> {
        let mut merged = MergedIter::new(self.source.samplers.iter().map(|(c, s)| (*c, s.iter())));
        let mut n = 0;
        if let Some((_, cpumode, record)) = merged.next_timeout(timeout) {
            self.pipe.handle(cpumode, record);
            n += 1;
        }
        for (_, cpumode, record) in merged.by_ref() {
            self.pipe.handle(cpumode, record);
            n += 1;
        }
        self.pipe.retry_deferred(false);
        self.pipe.stats.late += merged.late();
        Ok(n)
    }

    /// What was counted so far.
    pub fn stats(&self) -> &Stats {
        &self.pipe.stats
    }

    /// The event sampled (`cycles` or `cpu-clock`; off CPU, [`Method::event`]) and why.
    pub fn event(&self) -> (&str, &str) {
        (&self.pipe.info.event, &self.pipe.info.event_reason)
    }

    /// With [`Options::off_cpu`], how the switch-outs are sampled; `None` for a CPU profile.
    pub fn off_cpu_method(&self) -> Option<Method> {
        Method::of(&self.pipe.info)
    }

    /// The profile so far (since the last [`cut`](Self::cut), if any), symbolized (frames not seen
    /// before are resolved now, once), without stopping the capture. Records still in the rings
    /// are not in it: [`poll`](Self::poll) first.
    pub fn profile(&mut self) -> Profile {
        self.pipe.snapshot(false)
    }

    /// The profile since the last cut (or the start), and a fresh aggregation from now on, for
    /// continuous profiling: every sample read is in exactly one cut, its counts (and lost or
    /// throttled records) too. Mappings no process has any more are dropped; symbols stay cached
    /// while the files they are in are sampled (see [`Symbols::end_interval`]). Records still in the rings are not in
    /// it: [`poll`](Self::poll) first.
    pub fn cut(&mut self) -> Profile {
        // The stacks move into the profile: the aggregation starts afresh.
        let profile = self.pipe.snapshot(true);
        self.pipe.cut = Some((Instant::now(), self.pipe.stats.clone()));
        if let Some(w) = self.pipe.waits.as_mut() {
            w.retain_alive();
        }
        self.pipe.jit.forget_exited();
        // A long capture keeps only what is mapped now, and the names of the frames in it.
        let remap = self.pipe.maps.compact();
        self.pipe.symbols.remap(|f| match *f {
            Frame::User { mapping, addr } => remap
                .get(mapping.0 as usize)
                .copied()
                .flatten()
                .map(|mapping| Frame::User { mapping, addr }),
            Frame::Kernel { .. } | Frame::KernelHidden => Some(*f),
            Frame::Unmapped { .. } | Frame::Jit { .. } => None,
        });
        self.pipe.symbols.end_interval();
        profile
    }

    /// Stops sampling and reads what is left in the rings. Idempotent.
    ///
    /// # Errors
    ///
    /// [`Error::Perf`] when a counter cannot be disabled.
    pub fn stop(&mut self) -> Result<()> {
        if self.source.stopped {
            return Ok(());
        }
        self.source.stopped = true;
        for c in &self.source.counters {
            c.disable()?;
        }
        while self.poll(Duration::ZERO)? > 0 {}
        // Every sample is in the stacks before anything reads them (the kernel symbols a
        // profile needs, its frames).
        self.pipe.settle_deferred();
        // The kernel's own count of lost records (it writes its last LOST record only once a
        // later record fits), where it has it.
        let mut lost = 0u64;
        for (_, s) in &self.source.samplers {
            let l = s.lost()?;
            lost += l.lost_records.max(l.format_lost.unwrap_or(0));
        }
        self.pipe.stats.lost_records = self.pipe.stats.lost_records.max(lost);
        Ok(())
    }

    /// Stops sampling and returns the final profile.
    ///
    /// # Errors
    ///
    /// As [`stop`](Self::stop).
    pub fn finish(mut self) -> Result<Profile> {
        self.stop()?;
        // No lookup follows: each file's symbolizer goes once its frames are named, so the
        // files' mapped debug info is resident one file at a time, not all at once (beside a
        // debug build's test binary, 95 MiB peak RSS instead of the largest file's share).
        self.pipe.symbols.set_kept_files_bytes(0);
        // Of the kernel's ~120 000 symbols, only those that name this profile's frames are kept.
        self.pipe
            .kernel
            .read_only_for(self.pipe.stacks.frames().iter().filter_map(|f| match *f {
                Frame::Kernel { addr } => Some(addr),
                _ => None,
            }));
        Ok(self.pipe.snapshot(true))
    }
}

impl Pipeline {
    /// The profile of the stacks aggregated, symbolized; `take`: they move into it (and the
    /// aggregation starts afresh) instead of being copied.
    fn snapshot(&mut self, take: bool) -> Profile {
        self.settle_deferred();
        self.symbols
            .resolve(self.stacks.frames(), &self.maps, &self.kernel);
        let lines = self
            .stacks
            .frames()
            .iter()
            .map(|f| match *f {
                Frame::Jit { pid, addr } => jit_lines(&self.jit, pid, addr).into(),
                _ if f.is_truncated() => truncated_lines(),
                _ => self.symbols.shared_lines(f),
            })
            .collect();
        let mut info = self.info.clone();
        info.duration = self.started.elapsed();
        info.stats = self.stats.clone();
        if let Some((at, base)) = &self.cut {
            let since_start = at.duration_since(self.started);
            info.start += since_start;
            info.duration = info.duration.saturating_sub(since_start);
            info.stats = self.stats.since(base);
        }
        for f in self.symbols.changed_files() {
            info.notes.push(format!(
                "{f} was rebuilt since it was mapped (its build id differs): its frames are not named"
            ));
        }
        if self.maps.unseeded() > 0 {
            info.notes.push(format!(
                "{} processes had exited before their mappings could be read: their frames are addresses",
                self.maps.unseeded()
            ));
        }
        Profile {
            stacks: if take {
                std::mem::take(&mut self.stacks)
            } else {
                self.stacks.clone()
            },
            mappings: self.maps.mappings().to_vec(),
            lines,
            info,
            folded_roots: Default::default(),
        }
    }

    /// With [`CallGraph::Dwarf`]: the kernel's frames (a sample in the kernel), then the user
    /// stack unwound from the sample's registers and stack copy, into `self.raw`, and how its
    /// unwinding ended. `None` when the sample has no copy to unwind (another mode, a kernel
    /// thread, a 32-bit task).
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    fn unwind_user(
        &mut self,
        pid: u32,
        cpumode: Priv,
        s: &perf_event::sample::record::Sample,
    ) -> Option<unwind::Ending> {
        let dwarf = self.dwarf.as_mut()?;
        let (Some((regs, Abi::_64)), Some(stack)) = (&s.user_regs, &s.user_stack) else {
            return None;
        };
        if pid != 0 && !self.maps.knows(pid) {
            self.maps.seed_from_proc(pid);
        }
        if cpumode == Priv::Kernel {
            // The kernel's chain holds the kernel part only (`exclude_callchain_user`).
            unwind::frames_from_call_chain(
                s.call_chain.as_ref().map(|c| c.ips()),
                s.code_addr.map(|(ip, _)| ip),
                true,
                &mut self.raw,
            );
            self.raw.retain(|f| f.context == Context::Kernel);
        }
        dwarf.unwind(pid, &self.maps, regs, stack, &mut self.raw)
    }

    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    fn unwind_user(
        &mut self,
        _pid: u32,
        _cpumode: Priv,
        _s: &perf_event::sample::record::Sample,
    ) -> Option<unwind::Ending> {
        None
    }

    fn sample(&mut self, cpumode: Priv, mut s: Box<perf_event::sample::record::Sample>) {
        let pid = s.record_id.task.map_or(0, |t| t.pid);
        self.raw.clear();
        let ending = match self.unwind_user(pid, cpumode, &s) {
            Some(ending) => ending,
            None => {
                let chain = s.call_chain.as_ref().map(|c| c.ips());
                unwind::frames_from_call_chain(
                    chain,
                    s.code_addr.map(|(ip, _)| ip),
                    cpumode == Priv::Kernel,
                    &mut self.raw,
                );
                match chain {
                    Some(c) if unwind::chain_ran_out(c, self.max_stack) => {
                        unwind::Ending::Truncated
                    }
                    _ => unwind::Ending::Root,
                }
            }
        };
        let (tid, time) = (s.record_id.task.map_or(0, |t| t.tid), s.record_id.time);
        let period = s.period.unwrap_or(1);
        if ending == unwind::Ending::Pending {
            if let (Some((regs, _)), Some(stack)) = (s.user_regs.take(), s.user_stack.take()) {
                if self.deferred_bytes + stack.len() <= DEFER_BYTES {
                    self.deferred_bytes += stack.len();
                    let kernel = self
                        .raw
                        .iter()
                        .copied()
                        .filter(|f| f.context == Context::Kernel)
                        .collect();
                    let who = self.names.identity(pid, tid);
                    self.deferred.push(Deferred {
                        since: Instant::now(),
                        pid,
                        tid,
                        time,
                        period,
                        who,
                        kernel,
                        regs,
                        stack,
                        waited: None,
                        exited: false,
                    });
                    return;
                }
            }
        }
        let who = self.names.interned(pid, tid, &mut self.stacks);
        self.aggregate(pid, tid, time, period, ending, who, None);
    }

    /// Adds the frames unwound into `self.raw` (leaf first), ended by `ending`, as a sample of
    /// `period` in thread `tid` of `pid` at `time`; off CPU, as the thread's switch-out, or
    /// (`waited`: a deferred one whose wait ended meanwhile) as that wait.
    #[allow(clippy::too_many_arguments)]
    fn aggregate(
        &mut self,
        pid: u32,
        tid: u32,
        time: Option<u64>,
        period: u64,
        ending: unwind::Ending,
        who: IdentityId,
        waited: Option<u64>,
    ) {
        if self.raw.is_empty() {
            self.stats.empty += 1;
            return;
        }
        if pid != 0 && !self.maps.knows(pid) && self.raw.iter().any(|f| f.context == Context::User)
        {
            self.maps.seed_from_proc(pid);
        }
        self.frames.clear();
        for f in &self.raw {
            let frame = match f.context {
                Context::Kernel if self.kernel.hidden().is_some() => {
                    if self.frames.last() == Some(&Frame::KernelHidden) {
                        continue;
                    }
                    Frame::KernelHidden
                }
                Context::Kernel => Frame::Kernel { addr: f.addr },
                Context::User => {
                    let mapping = self.maps.find(pid, f.addr);
                    let file = mapping
                        .and_then(|m| self.maps.mapping(m))
                        .is_some_and(|m| m.is_file());
                    match mapping {
                        // A JIT's code lies in executable memory that is no file (its mmap or its
                        // mprotect to executable made a record: `//anon`, a memfd), where perf
                        // too looks in /tmp/perf-PID.map. An address in no executable mapping (a
                        // return address a frame-pointer walk read from the heap or the stack)
                        // is not looked up: looking cost a file open per process, again and
                        // again, beside programs built without frame pointers.
                        Some(_) if !file && self.jit.find(pid, f.addr).is_some() => {
                            Frame::Jit { pid, addr: f.addr }
                        }
                        Some(mapping) => Frame::User {
                            mapping,
                            addr: f.addr,
                        },
                        None => Frame::Unmapped { addr: f.addr },
                    }
                }
            };
            self.frames.push(frame);
        }
        if ending != unwind::Ending::Root {
            self.frames.push(Frame::TRUNCATED);
        }
        if let Some(w) = self.waits.as_mut() {
            if let Some(ns) = waited {
                self.stacks
                    .add_in(self.frames.iter().rev().copied(), ns, who);
                self.stats.samples += 1;
            } else if let Some(time) = time {
                w.switched_out(tid, time, &self.frames);
            }
            return;
        }
        self.stacks
            .add_in(self.frames.iter().rev().copied(), period, who);
        self.stats.samples += 1;
    }

    /// Unwinds the deferred samples again: those whose files are read now, those that waited
    /// [`DEFER_WAIT`], and with `all` (a profile is taken) every one, marked `[truncated]` where
    /// a file is still not read. The processes that exited meanwhile go once none of their
    /// samples waits.
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    fn retry_deferred(&mut self, all: bool) {
        if self.deferred.is_empty() {
            return;
        }
        let mut keep = Vec::new();
        // A process whose first deferred sample still waits: its others wait too (each try
        // rebuilds its unwinder).
        let mut waiting: Vec<u32> = Vec::new();
        for d in std::mem::take(&mut self.deferred) {
            let forced = all;
            if !forced && waiting.contains(&d.pid) {
                keep.push(d);
                continue;
            }
            self.raw.clear();
            self.raw.extend_from_slice(&d.kernel);
            let Some(dwarf) = self.dwarf.as_mut() else {
                break;
            };
            let ending = dwarf
                .unwind(d.pid, &self.maps, &d.regs, &d.stack, &mut self.raw)
                .unwrap_or(unwind::Ending::Truncated);
            if ending == unwind::Ending::Pending && !forced && d.since.elapsed() < DEFER_WAIT {
                waiting.push(d.pid);
                keep.push(d);
                continue;
            }
            self.deferred_bytes -= d.stack.len();
            if self.waits.is_some() && d.waited.is_none() {
                // Off CPU, still switched out: unless it exited or switched out again since
                // (a switch-in was lost), its wait goes on from its switch-out.
                let later = self.waits.as_ref().is_some_and(|w| w.contains(d.tid));
                if d.exited || later {
                    continue;
                }
            }
            let ending = match ending {
                unwind::Ending::Pending => unwind::Ending::Truncated,
                e => e,
            };
            let who = self.stacks.intern_identity(&d.who);
            self.aggregate(d.pid, d.tid, d.time, d.period, ending, who, d.waited);
        }
        keep.append(&mut self.deferred);
        self.deferred = keep;
        let mut exited = std::mem::take(&mut self.exited);
        exited.retain(|&pid| {
            let waits = self.deferred.iter().any(|d| d.pid == pid);
            if !waits {
                self.exit_process(pid);
            }
            waits
        });
        self.exited = exited;
    }

    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    fn retry_deferred(&mut self, _all: bool) {}

    /// Before a profile is taken: the deferred samples' files are waited for a while (their
    /// loads were asked for when the samples came), then every one is unwound.
    fn settle_deferred(&mut self) {
        let until = Instant::now() + DEFER_WAIT;
        while !self.deferred.is_empty() && Instant::now() < until {
            self.retry_deferred(false);
            if !self.deferred.is_empty() {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        self.retry_deferred(true);
    }

    /// Process `pid` exited: its address space, JIT map and unwinder go.
    fn exit_process(&mut self, pid: u32) {
        self.maps.exit(pid);
        self.jit.exit(pid);
        #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
        if let Some(d) = self.dwarf.as_mut() {
            d.exit(pid);
        }
    }

    fn handle(&mut self, cpumode: Priv, record: Record) {
        match record {
            Record::Sample(s) => self.sample(cpumode, s),
            Record::Mmap(m) => {
                if !m.executable {
                    return;
                }
                let pid = m.task.pid;
                if !self.maps.knows(pid) {
                    self.maps.seed_from_proc(pid);
                }
                let build_id = match m.ext.map(|e| e.info) {
                    Some(MmapInfo::BuildId(id)) => Some(id),
                    _ => None,
                };
                let path = m.file.to_string_lossy();
                self.maps
                    .mmap(pid, m.addr, m.len, m.page_offset, &path, build_id);
            }
            Record::Comm(c) => {
                self.names
                    .comm(c.task.pid, c.task.tid, c.comm.as_bytes(), c.by_execve);
                if c.by_execve {
                    self.maps.exec(c.task.pid);
                    // The new program's map (if it writes one) is read at its first frame
                    // outside a file: at the exec it cannot have written one yet, and looking
                    // then, for every program started, cost a file open each.
                    self.jit.forget(c.task.pid);
                }
            }
            Record::Fork(f) => {
                self.names
                    .fork(f.parent_task.pid, f.parent_task.tid, f.task.pid, f.task.tid);
                if f.task.pid == f.parent_task.pid {
                    return;
                }
                if !self.maps.knows(f.parent_task.pid) {
                    self.maps.seed_from_proc(f.parent_task.pid);
                }
                self.maps.fork(f.parent_task.pid, f.task.pid);
            }
            Record::Exit(e) => {
                self.names.exit(e.task.pid, e.task.tid);
                if let Some(w) = self.waits.as_mut() {
                    w.exited(e.task.tid);
                }
                for d in self.deferred.iter_mut().filter(|d| d.tid == e.task.tid) {
                    d.exited = true;
                }
                if e.task.pid == e.task.tid {
                    if self.deferred.iter().any(|d| d.pid == e.task.pid) {
                        // Its samples still waiting for files need its maps: it goes with them.
                        self.exited.push(e.task.pid);
                    } else {
                        self.exit_process(e.task.pid);
                    }
                }
            }
            Record::CtxSwitch(c) if matches!(c.info, Switch::InFrom(_)) => {
                let (Some(w), Some(id)) = (self.waits.as_mut(), c.record_id) else {
                    return;
                };
                let (Some(t), Some(time)) = (id.task, id.time) else {
                    return;
                };
                if let Some((frames, ns)) = w.switched_in(t.tid, time) {
                    let who = self.names.interned(t.pid, t.tid, &mut self.stacks);
                    self.stacks.add_in(frames.into_iter().rev(), ns, who);
                    self.stats.samples += 1;
                } else if let Some(d) = self
                    .deferred
                    .iter_mut()
                    .rev()
                    .find(|d| d.tid == t.tid && d.waited.is_none())
                {
                    // Its switch-out is deferred: the wait is counted once it is unwound.
                    d.waited = d.time.map(|out| time.saturating_sub(out));
                }
            }
            Record::LostRecords(l) => self.stats.lost_records += l.lost_records,
            Record::LostSamples(l) => self.stats.lost_samples += l.lost_samples,
            Record::Throttle(_) => self.stats.throttled += 1,
            _ => {}
        }
    }
}

/// The function a JIT frame names, from its process's perf map.
/// How [`Frame::TRUNCATED`] is named: a function of its own, so that viewers that read only
/// functions show it (in every symbolization mode: it is no address a backend could name).
fn truncated_lines() -> std::sync::Arc<[crate::symbolize::Line]> {
    std::sync::Arc::from(vec![crate::symbolize::Line {
        function: crate::aggregate::TRUNCATED_NAME.to_owned(),
        file: None,
        line: None,
    }])
}

fn jit_lines(jit: &PerfMaps, pid: u32, addr: u64) -> Vec<crate::symbolize::Line> {
    jit.name(pid, addr)
        .map(|name| {
            vec![crate::symbolize::Line {
                function: name.to_string(),
                file: None,
                line: None,
            }]
        })
        .unwrap_or_default()
}

/// What the counters are opened on.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode_ {
    /// This thread, inherited by the command it spawns, enabled at its exec.
    Command,
    /// Listed threads, inherited by their new threads and children.
    Tasks,
    /// Every task.
    System,
}

/// The threads of each process, as `Proc` targets.
fn threads_of(pids: &[u32]) -> Result<Vec<Option<Proc>>> {
    let mut out = Vec::new();
    for &pid in pids {
        let Ok(dir) = fs::read_dir(format!("/proc/{pid}/task")) else {
            return Err(Error::NoSuchProcess { pid });
        };
        let before = out.len();
        for e in dir.flatten() {
            if let Some(tid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) {
                out.push(Some(Proc(tid)));
            }
        }
        if out.len() == before {
            return Err(Error::NoSuchProcess { pid });
        }
    }
    Ok(out)
}

struct Opened {
    counters: Vec<Counter>,
    samplers: Vec<(u32, Sampler)>,
    event: &'static str,
    event_reason: String,
    kernel: bool,
}

/// Opens the sampling counters, falling back as perf does: `cycles` to `cpu-clock` without a
/// hardware PMU, user space only when the kernel may not be sampled, MMAP2 without build ids
/// before Linux 5.12.
fn open(
    tasks: &[Option<Proc>],
    cpus: &[u32],
    mode: Mode_,
    opts: &Options,
    notes: &mut Vec<String>,
) -> Result<Opened> {
    let mut event: (&'static str, Event) = ("cycles", Hardware::CpuCycle.into());
    let mut event_reason = "a hardware PMU counts cycles here".to_owned();
    if opts.off_cpu {
        let chosen = offcpu::choose(opts.off_cpu_method, opts.tracefs.as_deref())?;
        event = (chosen.method.event(), chosen.event);
        event_reason = chosen.reason;
        notes.extend(chosen.note);
    }
    let mut o = base_opts(mode, opts);
    loop {
        let exp = match opts.call_graph {
            CallGraph::Dwarf { .. } => opts.ring_pages_exp.max(DWARF_RING_PAGES_EXP),
            CallGraph::FramePointer => opts.ring_pages_exp,
        };
        match open_on(&event.1, tasks, cpus, mode, &o, exp) {
            Ok((counters, samplers)) => {
                return Ok(Opened {
                    counters,
                    samplers,
                    event: event.0,
                    event_reason,
                    kernel: !o.exclude.kernel && opts.kernel,
                })
            }
            Err(perf_event::Error::NotSupported { detail, .. }) if event.0 == "cycles" => {
                event = ("cpu-clock", Software::CpuClock.into());
                event_reason = no_cycles(&detail);
            }
            Err(perf_event::Error::Permission {
                event: refused,
                paranoid: Some(paranoid),
                source,
                ..
            }) if opts.off_cpu && paranoid >= 2 && mode != Mode_::System => {
                // The switch-outs are sampled in the kernel: with it excluded nothing would be.
                return Err(perf_event::Error::Permission {
                    event: refused,
                    paranoid: Some(paranoid),
                    hint: format!(
                        "off-CPU profiles sample the switch-outs, which happen in the kernel, and \
                         perf_event_paranoid is {paranoid}: `sysctl kernel.perf_event_paranoid=1`, \
                         CAP_PERFMON (Linux 5.8+) or CAP_SYS_ADMIN allows it"
                    ),
                    source,
                }
                .into());
            }
            // Off CPU the kernel cannot be left out: another refusal stands as it is.
            Err(e @ perf_event::Error::Permission { .. }) if opts.off_cpu => return Err(e.into()),
            Err(perf_event::Error::Permission { paranoid, .. }) if !o.exclude.kernel => {
                notes.push(format!(
                    "user space only: sampling the kernel is not permitted (perf_event_paranoid is \
                     {}); `sysctl kernel.perf_event_paranoid=1` or CAP_PERFMON allows it",
                    paranoid.map_or("unreadable".into(), |p| p.to_string())
                ));
                o.exclude.kernel = true;
                o.exclude.hv = true;
                if let Some(c) = o.sample_format.call_chain.as_mut() {
                    c.exclude_kernel = true;
                }
                if matches!(opts.call_graph, CallGraph::Dwarf { .. }) {
                    // The kernel's chain had the kernel part only.
                    o.sample_format.call_chain = None;
                }
            }
            Err(
                perf_event::Error::NotSupported { .. }
                | perf_event::Error::KernelTooOld { .. }
                | perf_event::Error::Io { .. },
            ) if o.extra_record.mmap.ext == Some(UseBuildId(true)) => {
                // Build ids in MMAP2 need Linux 5.12: read them from the files instead.
                o.extra_record.mmap.ext = Some(UseBuildId(false));
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Why cycles are not sampled, from the refusal's `detail`, said once and plainly: perf-event's
/// detail already says there is no hardware PMU, and nests the PMUs sysfs lists in parentheses,
/// which the capture's line and the doctor put in parentheses of their own.
pub(crate) fn no_cycles(detail: &str) -> String {
    const LISTS: &str = "sysfs lists only: ";
    match detail.strip_prefix("no hardware PMU") {
        Some(rest) => {
            let machine = if rest.contains("virtual machine") {
                "; this looks like a virtual machine"
            } else {
                ""
            };
            match rest.split_once(LISTS) {
                Some((_, pmus)) => format!(
                    "no hardware PMU, so no cycles{machine} (sysfs lists only {})",
                    pmus.trim_end_matches(')')
                ),
                None => format!("no hardware PMU, so no cycles{machine}"),
            }
        }
        None => format!("cycles cannot be counted here: {detail}"),
    }
}

fn base_opts(mode: Mode_, opts: &Options) -> Opts {
    let mut o = Opts {
        sample_on: SampleOn::Freq(opts.frequency),
        ..Opts::default()
    };
    if opts.off_cpu {
        o.sample_on = SampleOn::Count(1);
        o.extra_record.ctx_switch = true;
    }
    // Off CPU, the samples are taken in the kernel (at the switch-out): it cannot be excluded,
    // and without it only the user part of the chains is kept.
    o.exclude.kernel = !opts.kernel && !opts.off_cpu;
    o.exclude.hv = true;
    o.sample_format.code_addr = opts.kernel || !opts.off_cpu;
    o.sample_format.period = true;
    match opts.call_graph {
        CallGraph::FramePointer => {
            o.sample_format.call_chain = Some(KernelCallChain {
                exclude_user: false,
                exclude_kernel: !opts.kernel,
                defer_user: false,
                max_stack_frames: 0,
            });
        }
        #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
        CallGraph::Dwarf { stack_size } => {
            // The kernel's chain for the kernel part; the user part is unwound here.
            if opts.kernel {
                o.sample_format.call_chain = Some(KernelCallChain {
                    exclude_user: true,
                    exclude_kernel: false,
                    defer_user: false,
                    max_stack_frames: 0,
                });
            }
            o.sample_format.user_regs = Some(RegsMask(unwind::dwarf::REGS_MASK));
            o.sample_format.user_stack = Some(Size(stack_size));
        }
        // Refused by `check_call_graph`.
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        CallGraph::Dwarf { .. } => {}
    }
    // Several counters write into a CPU's ring: the id, task, time and CPU on every record.
    o.record_id_format.identifier = true;
    o.record_id_format.task = true;
    o.record_id_format.time = true;
    o.record_id_format.cpu = true;
    o.record_id_all = true;
    o.extra_record.task = true;
    o.extra_record.comm = true;
    o.extra_record.comm_exec = true;
    o.extra_record.mmap.code = true;
    o.extra_record.mmap.ext = Some(UseBuildId(true));
    match mode {
        Mode_::Command => {
            o.inherit = Some(Inherit::NewChild);
            o.on_execve = Some(OnExecve::Enable);
        }
        Mode_::Tasks => o.inherit = Some(Inherit::NewChild),
        Mode_::System => {}
    }
    o
}

/// Refuses a call graph mode this build cannot take.
fn check_call_graph(g: CallGraph) -> Result<()> {
    match g {
        CallGraph::FramePointer => Ok(()),
        CallGraph::Dwarf { stack_size } => {
            if !cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
                return Err(Error::InvalidOption(
                    "DWARF unwinding (-g dwarf) is supported on x86_64 and aarch64; use frame \
                     pointers (-g fp)"
                        .into(),
                ));
            }
            if stack_size == 0 || stack_size % 8 != 0 || stack_size > MAX_STACK_SIZE {
                return Err(Error::InvalidOption(format!(
                    "a user stack copy of {stack_size} bytes: use a multiple of 8 from 8 to \
                     {MAX_STACK_SIZE} (the kernel's limit), e.g. {DEFAULT_STACK_SIZE}"
                )));
            }
            Ok(())
        }
    }
}

/// Every counter, and each CPU's ring.
type Rings = (Vec<Counter>, Vec<(u32, Sampler)>);

/// Per CPU, a counter for each task, all writing into the CPU's one ring.
fn open_on(
    event: &Event,
    tasks: &[Option<Proc>],
    cpus: &[u32],
    mode: Mode_,
    o: &Opts,
    exp: u8,
) -> perf_event::Result<Rings> {
    let mut counters = Vec::new();
    let mut samplers = Vec::new();
    for &cpu in cpus {
        let mut ring: Option<Sampler> = None;
        let mut gone = None;
        for &task in tasks {
            let c = match task {
                Some(p) => Counter::new(event.clone(), (p, Cpu(cpu)), o),
                None => Counter::new(event.clone(), (Proc::ALL, Cpu(cpu)), o),
            };
            let c = match c {
                Ok(c) => c,
                // A thread that exited since it was listed.
                Err(e @ perf_event::Error::NoSuchProcess { .. }) if mode == Mode_::Tasks => {
                    gone = Some(e);
                    continue;
                }
                Err(e) => return Err(e),
            };
            match &ring {
                Some(s) => s.attach(&c)?,
                None => ring = Some(c.sampler(exp)?),
            }
            counters.push(c);
        }
        match ring {
            Some(s) => samplers.push((cpu, s)),
            None => {
                if let Some(e) = gone {
                    return Err(e);
                }
            }
        }
    }
    Ok((counters, samplers))
}

#[cfg(all(test, any(target_arch = "x86_64", target_arch = "aarch64")))]
mod tests {
    use super::*;
    use crate::elf::tests::build;
    use crate::elf::{Endian, PT_LOAD};
    use crate::untrusted::{self, Loader};
    use perf_event::sample::record::{RecordId, Sample, Task};
    use std::sync::{mpsc, Arc, Mutex};

    /// A `-g dwarf` pipeline whose unwinder reads files with `loader`, waiting for none.
    fn pipeline(loader: Loader) -> Pipeline {
        let mut dwarf = unwind::dwarf::DwarfUnwinder::new();
        dwarf.set_loader(loader, Duration::ZERO);
        Pipeline {
            maps: AddressSpaces::new(),
            kernel: KernelSymbols::default(),
            stacks: Stacks::new(),
            symbols: Symbols::new(Mode::None),
            stats: Stats::default(),
            info: Info {
                event: "cpu-clock".into(),
                event_reason: String::new(),
                frequency: 99,
                start: SystemTime::now(),
                duration: Duration::ZERO,
                stats: Stats::default(),
                notes: Vec::new(),
                symbolize: Mode::None,
                process: None,
                service: None,
            },
            started: Instant::now(),
            raw: Vec::new(),
            frames: Vec::new(),
            dwarf: Some(dwarf),
            cut: None,
            waits: None,
            jit: PerfMaps::new(),
            names: Names::default(),
            max_stack: 127,
            deferred: Vec::new(),
            deferred_bytes: 0,
            exited: Vec::new(),
        }
    }

    /// A user-mode sample of process 1 at 0x10010 whose stack holds one frame record: the
    /// caller's frame pointer (zero: the outermost) and a return address, 0x10020.
    fn sample() -> Box<Sample> {
        let sp = 0x7fff_0000u64;
        let mut stack = vec![0u8; 16];
        stack[8..].copy_from_slice(&0x10020u64.to_le_bytes());
        #[cfg(target_arch = "x86_64")]
        let regs = vec![sp, sp, 0x10010];
        #[cfg(target_arch = "aarch64")]
        let regs = vec![sp, 0x10020, sp, 0x10010];
        Box::new(Sample {
            record_id: RecordId {
                task: Some(Task { pid: 1, tid: 1 }),
                time: Some(1),
                ..RecordId::default()
            },
            stat: None,
            period: Some(1),
            cgroup: None,
            call_chain: None,
            user_stack: Some(stack),
            data_addr: None,
            data_phys_addr: None,
            data_page_size: None,
            data_source: None,
            code_addr: Some((0x10010, false)),
            code_page_size: None,
            user_regs: Some((regs, Abi::_64)),
            intr_regs: None,
            raw: None,
            lbr: None,
            aux: None,
            txn: None,
            weight: None,
        })
    }

    /// /tmp/perf-PID.map is looked in for a frame in executable memory that is no file (perf's
    /// rule), not for an address in no executable mapping: what a frame-pointer walk reads from
    /// the heap or the stack of code built without frame pointers, sample after sample.
    #[test]
    fn only_frames_in_anonymous_executable_memory_are_looked_up_in_the_jit_map() {
        // This process: its map is read from its own root.
        let pid = std::process::id();
        let dir = std::env::temp_dir().join(format!("pp-jit-anon-{pid}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("perf-{pid}.map")), "20000 100 jitted\n").unwrap();
        let mut p = pipeline(Loader::new());
        p.jit = PerfMaps::in_dir(dir.to_str().unwrap());
        p.jit.set_loader(Loader::new(), Duration::from_secs(60));
        assert!(p.maps.seed_from_proc(pid));
        let who = p
            .stacks
            .intern_identity(&crate::aggregate::Identity::new(pid, pid, "t", "t"));
        let user = |addr| RawFrame {
            addr,
            context: Context::User,
        };
        // Mapped nowhere (0x30000 is below any of this process's mappings).
        p.raw = vec![user(0x30010)];
        p.aggregate(pid, pid, None, 1, unwind::Ending::Root, who, None);
        assert_eq!(p.frames, [Frame::Unmapped { addr: 0x30010 }]);
        assert!(
            !p.jit.looked_for(pid),
            "the map was read for an unmapped address"
        );
        // The JIT's executable anonymous memory (its mmap or mprotect made an MMAP2 record).
        p.maps.mmap(pid, 0x20000, 0x1000, 0x20000, "//anon", None);
        p.raw = vec![user(0x20010)];
        p.aggregate(pid, pid, None, 1, unwind::Ending::Root, who, None);
        assert_eq!(p.frames, [Frame::Jit { pid, addr: 0x20010 }]);
        assert_eq!(p.jit.name(pid, 0x20010), Some("jitted"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Process 1 maps a file (`name` in a fresh folder) at 0x10000 whose tables cannot be read
    /// yet: every worker of the returned loader is held until the sender is dropped.
    fn stuck_file(name: &str) -> (Pipeline, mpsc::Sender<()>, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("pp-defer-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let sections: &[(&str, u32, u64, u64, &[u8])] = &[
            (".text", 1, 6, 0x1000, &[0x90; 16]),
            (".eh_frame", 1, 2, 0x2000, &[0; 64]),
        ];
        let segments: &[(u32, &[u8], u64)] = &[(PT_LOAD, &[0; 8], 0x1000)];
        let path = dir.join("a");
        std::fs::write(&path, build(true, Endian::Little, segments, sections)).unwrap();
        let loader = Loader::new();
        let (release, stuck) = mpsc::channel::<()>();
        let stuck = Arc::new(Mutex::new(stuck));
        for i in 0..untrusted::MAX_WORKERS {
            let s = Arc::clone(&stuck);
            let _ = loader.ask(untrusted::key(("stuck", i)), Duration::ZERO, move || {
                let _ = s.lock().unwrap().recv();
            });
        }
        let mut p = pipeline(loader);
        p.maps
            .mmap(1, 0x10000, 0x1000, 0, path.to_str().unwrap(), None);
        (p, release, dir)
    }

    /// A sample whose stack reaches a file whose tables are still being read is kept, not
    /// aggregated as far as the guess went; once the file is read it is unwound as any later
    /// sample of the path is (here: its caller too, and no `[truncated]` root).
    #[test]
    fn a_sample_waits_for_its_files_tables_then_ends_where_later_ones_do() {
        let (mut p, release, dir) = stuck_file("read");
        p.sample(Priv::User, sample());
        assert_eq!((p.stats.samples, p.deferred.len()), (0, 1));
        drop(release);
        for _ in 0..1000 {
            p.retry_deferred(false);
            if p.deferred.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(p.deferred.is_empty(), "the file was never read");
        assert_eq!((p.stats.samples, p.deferred_bytes), (1, 0));
        let addrs: Vec<u64> = p
            .stacks
            .frames()
            .iter()
            .map(|f| match f {
                Frame::User { addr, .. } | Frame::Unmapped { addr } => *addr,
                f => panic!("{f:?}"),
            })
            .collect();
        assert_eq!(addrs, [0x1001f, 0x10010], "root first");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// One whose file is still not read when the profile is taken is unwound as far as it goes
    /// and rooted at `[truncated]`; its exited process's maps were kept for it until then.
    #[test]
    fn a_sample_whose_file_never_comes_is_truncated_when_the_profile_is_taken() {
        let (mut p, release, dir) = stuck_file("never");
        p.sample(Priv::User, sample());
        p.exited.push(1);
        p.retry_deferred(true);
        assert!(p.deferred.is_empty() && p.exited.is_empty());
        assert_eq!(p.stats.samples, 1);
        let frames = p.stacks.frames();
        assert_eq!(frames.len(), 2, "{frames:?}");
        assert!(frames[0].is_truncated(), "the root: {frames:?}");
        assert!(matches!(frames[1], Frame::User { addr: 0x10010, .. }));
        assert!(!p.maps.knows(1), "its maps go once its samples are unwound");
        drop(release);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
