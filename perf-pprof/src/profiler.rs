use std::marker::PhantomData;
use std::os::raw::c_int;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use perf_profile::{CallGraph, Options, Profile, Profiler, Target};

use crate::error::{Error, Result};
use crate::report::{ReportBuilder, ReportTiming};

/// The collector thread's name; reports leave its samples out.
pub(crate) const COLLECTOR_THREAD: &str = "perf-pprof";

/// How often the collector thread drains the rings: often enough that a ring (256 KiB per CPU)
/// never fills at pprof-rs's frequencies, rarely enough to cost nothing measurable.
const DRAIN_EVERY: Duration = Duration::from_millis(50);

/// Builds a [`ProfilerGuard`]: the frequency (99 Hz by default) and the libraries whose samples to
/// leave out.
#[derive(Clone, Debug)]
pub struct ProfilerGuardBuilder {
    frequency: c_int,
    blocklist: Vec<String>,
}

impl Default for ProfilerGuardBuilder {
    fn default() -> Self {
        Self {
            frequency: 99,
            blocklist: Vec::new(),
        }
    }
}

impl ProfilerGuardBuilder {
    /// Samples per second of each thread's CPU time (and so of the process's), user and system
    /// time where sampling the kernel is permitted, user time only where it is not (see the
    /// crate docs). pprof-rs's rate stops at the kernel's tick rate; this one does not.
    pub fn frequency(self, frequency: c_int) -> Self {
        Self { frequency, ..self }
    }

    /// Leaves out the samples taken while running in a library whose path contains one of these
    /// names (`&["libc", "libgcc", "pthread"]`), as pprof-rs does. The libraries are matched when
    /// the report is built, so those loaded later count too.
    pub fn blocklist<T: AsRef<str>>(self, blocklist: &[T]) -> Self {
        Self {
            blocklist: blocklist.iter().map(|s| s.as_ref().to_owned()).collect(),
            ..self
        }
    }

    /// Starts sampling every thread of this process (and those started later), and the collector
    /// thread that drains the samples.
    ///
    /// # Errors
    ///
    /// [`Error::PerfEventParanoid`] where the kernel refuses (`perf_event_paranoid` above 2
    /// without `CAP_PERFMON`); [`Error::Perf`] for a frequency of 0 or above the kernel's limit,
    /// or events that cannot be opened for another reason; [`Error::IoError`] when the collector
    /// thread cannot be started.
    pub fn build(self) -> Result<ProfilerGuard<'static>> {
        let frequency = u64::try_from(self.frequency).unwrap_or(0);
        let mut opts = Options::default();
        opts.frequency = frequency;
        // pprof-rs's frequency is per second of the process's CPU time, user and system
        // (ITIMER_PROF), each sample charged to the user stack: a sample that lands in the
        // kernel is taken too where that is permitted (perf_event_paranoid <= 1, CAP_PERFMON),
        // and the report keeps its user frames only. Where it is not, perf-profile falls back to
        // user space, and time in the kernel goes unsampled (the kernel drops those samples).
        opts.kernel = true;
        // Frames are named by the report, outside the profiler's lock (`crate::symbols`): the
        // collector thread keeps draining the rings while a report reads DWARF.
        opts.symbolize = perf_profile::symbolize::Mode::None;
        // Rust code, std included, is built without frame pointers unless told otherwise, so the
        // default is pprof-rs's: unwinding with the binaries' CFI (here framehop, on the collector
        // thread, from the stack the kernel copied). `frame-pointer` takes the kernel's chain, as
        // pprof-rs's feature of that name does.
        opts.call_graph = if cfg!(feature = "frame-pointer") {
            CallGraph::FramePointer
        } else {
            CallGraph::Dwarf {
                stack_size: perf_profile::collect::DEFAULT_STACK_SIZE,
            }
        };
        let profiler = match Profiler::start(Target::ThisProcess, &opts) {
            // The stack copies need rings of 2 MiB per CPU, more than an unprivileged user's
            // locked-memory budget holds on a machine with more than a few CPUs
            // (perf_event_mlock_kb per CPU, 516 KiB by default, plus RLIMIT_MEMLOCK): sampling with
            // frame-pointer chains in 256 KiB rings beats not sampling. `call_graph()` says which.
            Err(e) if crate::error::is_ring(&e) && opts.call_graph != CallGraph::FramePointer => {
                opts.call_graph = CallGraph::FramePointer;
                Profiler::start(Target::ThisProcess, &opts).map_err(Error::from_start)?
            }
            r => r.map_err(Error::from_start)?,
        };
        let shared = Arc::new(Shared {
            profiler: Mutex::new(profiler),
            stop: Mutex::new(false),
            wake: Condvar::new(),
        });
        let collector = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name(COLLECTOR_THREAD.into())
            .spawn(move || collector.collect())?;
        Ok(ProfilerGuard {
            shared,
            thread: Some(thread),
            blocklist: self.blocklist,
            frequency: self.frequency,
            start_time: SystemTime::now(),
            started: Instant::now(),
            call_graph: opts.call_graph,
            _lifetime: PhantomData,
        })
    }
}

/// What the guard and its collector thread share.
struct Shared {
    profiler: Mutex<Profiler>,
    stop: Mutex<bool>,
    wake: Condvar,
}

impl Shared {
    fn profiler(&self) -> MutexGuard<'_, Profiler> {
        self.profiler.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn collect(&self) {
        let mut stop = self.stop.lock().unwrap_or_else(PoisonError::into_inner);
        while !*stop {
            stop = self
                .wake
                .wait_timeout(stop, DRAIN_EVERY)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
            // Poll never blocks here (timeout zero), so a report waits at most one drain.
            let _ = self.profiler().poll(Duration::ZERO);
        }
    }
}

/// A running profiler: sampling stops, and the collector thread is joined, when it is dropped.
/// [`report`](Self::report) builds the report of everything sampled so far.
///
/// The lifetime is pprof-rs's (whose guard borrows a global profiler); here it is always
/// `'static`.
pub struct ProfilerGuard<'a> {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    blocklist: Vec<String>,
    frequency: c_int,
    start_time: SystemTime,
    started: Instant,
    call_graph: CallGraph,
    _lifetime: PhantomData<&'a ()>,
}

impl std::fmt::Debug for ProfilerGuard<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProfilerGuard")
            .field("frequency", &self.frequency)
            .field("blocklist", &self.blocklist)
            .field("call_graph", &self.call_graph)
            .finish_non_exhaustive()
    }
}

impl ProfilerGuard<'_> {
    /// Starts profiling this process at `frequency` samples per second.
    ///
    /// # Errors
    ///
    /// As [`ProfilerGuardBuilder::build`].
    pub fn new(frequency: c_int) -> Result<ProfilerGuard<'static>> {
        ProfilerGuardBuilder::default().frequency(frequency).build()
    }

    /// A builder of the report of everything sampled so far (sampling goes on).
    pub fn report(&self) -> ReportBuilder<'_> {
        ReportBuilder::new(self)
    }

    /// The profile so far as perf-profile's [`Profile`]: its stacks, mappings, addresses, build
    /// ids and statistics, not symbolized (perf-profile's `Mode::None`: the report names the
    /// frames, and [`http::profile_gzipped_pprof`](crate::http::profile_gzipped_pprof)). Not in
    /// pprof-rs. Holds the profiler's lock only to read the rings and copy the tables.
    pub fn profile(&self) -> Profile {
        let mut p = self.shared.profiler();
        let _ = p.poll(Duration::ZERO);
        p.profile()
    }

    /// How call chains are taken: copied stacks unwound with framehop
    /// ([`CallGraph::Dwarf`]), or the kernel's frame-pointer chains ([`CallGraph::FramePointer`]:
    /// with feature `frame-pointer`, or where the stack-copy rings did not fit the locked-memory
    /// budget). Not in pprof-rs.
    pub fn call_graph(&self) -> CallGraph {
        self.call_graph
    }

    pub(crate) fn blocklist(&self) -> &[String] {
        &self.blocklist
    }

    pub(crate) fn timing(&self) -> ReportTiming {
        ReportTiming {
            frequency: self.frequency,
            start_time: self.start_time,
            duration: self.started.elapsed(),
        }
    }
}

impl Drop for ProfilerGuard<'_> {
    fn drop(&mut self) {
        *self
            .shared
            .stop
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = true;
        self.shared.wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        // Nothing to report a failure to: the counters close with the profiler anyway.
        let _ = self.shared.profiler().stop();
    }
}
