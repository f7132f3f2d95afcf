//! [`Sampler`]: the ring buffer of one counter (and of counters attached to it), with its controls.
//!
//! Ownership: a counter has at most one sampler, and the sampler's ring has one reader at a time. The ring
//! lives in the sampler while nobody reads it; an iterator takes it out (a lease) when it finds records and
//! puts it back when the ring is empty, when another reader asks for it, or when the iterator is dropped,
//! so a second reader — another iterator, or a sampler method called from inside a
//! [`CowIter`](super::CowIter) closure — is told the ring is busy instead of waiting for it (the `next`
//! forms wait at most 10 ms for a turn first). Every lock of a sampler is a fork-safe
//! [`perf_core::fork::Lock`], never held while user code runs. The mmap page is read through its own
//! view ([`perf_core::MappedPage`]), so times and counts stay readable while an iterator holds the ring.

use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use perf_core::fork::{Lock, LockGuard};
use perf_core::sim::SimControl;
use perf_core::{BackwardCopy, Data, MappedPage, Ring, RingMode};
use perf_sys as sys;
use sys::perf_event_attr;

use super::iter::Iter;
use super::per_cpu::Carried;
use super::reactor::Waiters;
use super::record::{Priv, Record};
use super::Parser;
use crate::count::{Counter, Stat, SINGLE_MAX};
use crate::error::{Error, Result};

const FORMAT_LOST: u64 = sys::PERF_FORMAT_LOST as u64;
const FORMAT_GROUP: u64 = sys::PERF_FORMAT_GROUP as u64;
const IDENTIFIER: u64 = sys::PERF_SAMPLE_IDENTIFIER as u64;

/// The largest data ring the kernel maps on most configurations (its page list must fit one allocation);
/// only used to advise: kernels that vmalloc their rings take more, so larger requests go to the kernel.
const MAX_EXP: u8 = 18;

/// Above this, `2^exp` pages overflow any address space: refused before asking the kernel.
const LAST_EXP: u8 = 39;

/// Lost data, as counted so far; see [`Sampler::lost`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct LostCounts {
    /// Records the kernel dropped because the ring was full: the sum of the `PERF_RECORD_LOST`
    /// records read so far. The kernel writes a LOST record only once a later record fits, so this
    /// can trail [`format_lost`](Self::format_lost).
    #[doc(alias = "PERF_RECORD_LOST")]
    pub lost_records: u64,
    /// Samples dropped before reaching the ring (`PERF_RECORD_LOST_SAMPLES`, e.g. by PEBS): the sum
    /// of those records read so far. Since Linux 4.2.
    #[doc(alias = "PERF_RECORD_LOST_SAMPLES")]
    pub lost_samples: u64,
    /// The kernel's own count of records lost for this counter (`PERF_FORMAT_LOST`, read now): sampling
    /// counters ask for it by default where the kernel has it (Linux 6.0, and backports such as
    /// Debian's 5.10); `None` when the read format lacks it.
    #[doc(alias = "PERF_FORMAT_LOST")]
    pub format_lost: Option<u64>,
}

impl LostCounts {
    /// Records lost because the ring was full: the kernel's own count
    /// ([`format_lost`](Self::format_lost)) where the read format has it, else the
    /// `PERF_RECORD_LOST` records read ([`lost_records`](Self::lost_records)); never less than the
    /// records read. Samples dropped before the ring ([`lost_samples`](Self::lost_samples)) are
    /// counted apart.
    ///
    /// Loss at the very end of a capture shows only here, through `format_lost`: the kernel writes
    /// a LOST record only once a later record fits, so when nothing follows the loss, no iterator
    /// ever sees one.
    pub fn total(&self) -> u64 {
        self.format_lost
            .map_or(self.lost_records, |k| k.max(self.lost_records))
    }
}

/// How the sampler's ioctls reach its event: the kernel, or the simulator in tests.
#[derive(Clone, Debug)]
pub(crate) enum Control {
    Kernel,
    /// Only the unit tests make simulated samplers.
    #[cfg_attr(not(test), allow(dead_code))]
    Sim(SimControl),
}

impl Control {
    fn pause(&self, fd: BorrowedFd<'_>, pause: bool) -> Result<()> {
        match self {
            Control::Kernel => sys::ioctl::pause_output(fd, pause)
                .map_err(|e| Error::io("PERF_EVENT_IOC_PAUSE_OUTPUT", e)),
            Control::Sim(c) => {
                c.pause(pause);
                Ok(())
            }
        }
    }

    fn enable(&self, fd: BorrowedFd<'_>, enable: bool) -> Result<()> {
        match self {
            Control::Kernel if enable => {
                sys::ioctl::enable(fd).map_err(|e| Error::io("PERF_EVENT_IOC_ENABLE", e))
            }
            Control::Kernel => {
                sys::ioctl::disable(fd).map_err(|e| Error::io("PERF_EVENT_IOC_DISABLE", e))
            }
            Control::Sim(c) => {
                c.enable(enable);
                Ok(())
            }
        }
    }
}

/// A counter's output state, shared by the [`Counter`] and its [`Sampler`]: who holds the ring, and the
/// counted pause and stop that keep the producer quiet while an overwrite area is copied.
#[derive(Debug, Default)]
pub(crate) struct Output {
    /// Set while a sampler maps the counter's ring (one consumer).
    pub(crate) claimed: AtomicBool,
    /// A fork-safe lock: a child made while a thread held it takes it over (with no holds).
    holds: Lock<Holds>,
}

/// Who wants the output paused or the event stopped.
#[derive(Debug, Default)]
struct Holds {
    /// The user paused the output ([`Sampler::pause`], [`Counter::pause_output`]).
    user_paused: bool,
    /// Reads of an overwrite ring in progress: the output stays paused while any runs.
    pausing_reads: u32,
    /// The user disabled the event through the sampler ([`Sampler::disable`]).
    user_disabled: bool,
    /// AUX snapshot reads in progress: the event stays stopped while any runs.
    stopping_reads: u32,
}

impl Output {
    fn holds(&self) -> LockGuard<'_, Holds> {
        self.holds.lock()
    }

    /// The user's pause or resume: takes effect at once unless a read holds the pause, in which case the
    /// read's end applies it.
    pub(crate) fn set_user_pause(
        &self,
        control: &Control,
        fd: BorrowedFd<'_>,
        pause: bool,
    ) -> Result<()> {
        let mut h = self.holds();
        if h.pausing_reads == 0 {
            control.pause(fd, pause)?;
        }
        h.user_paused = pause;
        Ok(())
    }

    fn set_user_enabled(&self, control: &Control, fd: BorrowedFd<'_>, enable: bool) -> Result<()> {
        let mut h = self.holds();
        if h.stopping_reads == 0 {
            control.enable(fd, enable)?;
        }
        h.user_disabled = !enable;
        Ok(())
    }

    /// Pauses the output for a read (counted); the guard resumes it when the last read ends, unless the
    /// user paused it.
    fn pause_for_read<'s>(
        &'s self,
        control: &'s Control,
        fd: BorrowedFd<'s>,
    ) -> Result<ReadHold<'s>> {
        let mut h = self.holds();
        if h.pausing_reads == 0 && !h.user_paused {
            control.pause(fd, true)?;
        }
        h.pausing_reads += 1;
        Ok(ReadHold {
            output: self,
            control,
            fd,
            stop: false,
        })
    }

    /// Stops the event for an AUX snapshot read (counted); the guard starts it again when the last such
    /// read ends, unless the user disabled it through the sampler.
    pub(crate) fn stop_for_read<'s>(
        &'s self,
        control: &'s Control,
        fd: BorrowedFd<'s>,
    ) -> Result<ReadHold<'s>> {
        let mut h = self.holds();
        if h.stopping_reads == 0 && !h.user_disabled {
            control.enable(fd, false)?;
        }
        h.stopping_reads += 1;
        Ok(ReadHold {
            output: self,
            control,
            fd,
            stop: true,
        })
    }
}

/// A read's hold on the output (a pause) or the event (a stop); released on drop.
pub(crate) struct ReadHold<'s> {
    output: &'s Output,
    control: &'s Control,
    fd: BorrowedFd<'s>,
    stop: bool,
}

impl Drop for ReadHold<'_> {
    fn drop(&mut self) {
        let mut h = self.output.holds();
        // A failed resume cannot be reported from a destructor; the next pause or resume says it.
        if self.stop {
            h.stopping_reads -= 1;
            if h.stopping_reads == 0 && !h.user_disabled {
                let _ = self.control.enable(self.fd, true);
            }
        } else {
            h.pausing_reads -= 1;
            if h.pausing_reads == 0 && !h.user_paused {
                let _ = self.control.pause(self.fd, false);
            }
        }
    }
}

/// The ring buffer of a sampling counter: 2^n data pages the kernel writes records into.
///
/// Made by [`Counter::sampler`]. A counter has at most one `Sampler` at a time, and its ring has one
/// reader at a time: an iterator holds the ring while it finds records and gives it back when the ring
/// is empty, another reader asks for it, or the iterator is dropped; meanwhile other readers see
/// [`Error::RingBusy`] (the `try_` forms) or, after a wait of at most 10 ms, an empty iterator: never
/// a deadlock. The sampler holds its own duplicate of the counter's fd, so it may outlive
/// the [`Counter`]; it is `Send` and `Sync`.
pub struct Sampler {
    file: File,
    attr: perf_event_attr,
    parser: Parser,
    /// The ring while no reader holds it. Every lock of a sampler is a fork-safe [`Lock`], held only for
    /// a few instructions of ours (never while user code runs), so a `fork()` cannot strand it.
    ring: Lock<Option<Ring<Data>>>,
    page: Option<MappedPage>,
    mode: RingMode,
    control: Control,
    output: Arc<Output>,
    pub(super) aux_mapped: AtomicBool,
    lost_records: AtomicU64,
    lost_samples: AtomicU64,
    /// The sampler's one registration with the reactor, shared by every waiter: made for the first one
    /// and kept until the sampler drops (a profiler makes iterators at every poll, and a registration
    /// each time cost a dup, two `epoll_ctl`s and a close per ring). Its duplicate fd closes with it.
    waiters: Lock<Option<Arc<Waiters>>>,
    /// A reader found the ring held: the holder gives it back at its next call, and waiters are woken
    /// when it does. Set and cleared only under `ring`'s lock (set while the ring is out, cleared when it
    /// comes back), so it never outlives the lease it asks to end; read without the lock on the hot path.
    wanted: AtomicBool,
    /// The fork generation the sampler was made in: in a child, its ring is a placeholder.
    generation: u64,
    /// Records a dropped merged iterator had read from this ring but not handed out.
    pub(super) carried: Lock<Carried>,
}

impl std::fmt::Debug for Sampler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sampler")
            .field("file", &self.file)
            .field("mode", &self.mode)
            .field("parser", &self.parser)
            .finish_non_exhaustive()
    }
}

impl Counter {
    /// Maps the counter's ring buffer with 2^`exp` data pages and returns its [`Sampler`].
    ///
    /// A counter opened with `write_backward` gets an overwrite ring (a flight recorder): read it
    /// with [`Sampler::newest`]. The memory counts against `perf_event_mlock_kb` (per CPU), then
    /// `RLIMIT_MEMLOCK`.
    ///
    /// # Errors
    ///
    /// [`Error::SamplerExists`] if this counter already has a sampler (one consumer per ring);
    /// [`Error::Sampling`] when the ring could never receive anything useful: the counter neither
    /// samples nor asks for side-band records, the largest record its settings produce does not fit
    /// 2^`exp` pages (both sizes are in the message), a wake-up watermark
    /// ([`WakeUpOn::Bytes`](crate::config::WakeUpOn::Bytes)) the ring cannot reach before it fills
    /// (the ring's size and the largest watermark it reaches are in the message), `exp` is above what kernels map, or the counter
    /// is inherited on every CPU (the kernel refuses that ring; use
    /// [`PerCpuSampler`](super::PerCpuSampler)); [`Error::Ring`] with perf-core's explanation:
    /// `MapMemory` (the locked-memory budget, with the current `perf_event_mlock_kb` and
    /// `RLIMIT_MEMLOCK`), `MapTooLarge`, `MapBusy` (the counter's output was redirected to another
    /// ring with [`Sampler::attach`]), `AlreadyMapped` (the fd is mapped elsewhere).
    pub fn sampler(&self, exp: u8) -> Result<Sampler> {
        let output = Arc::clone(&self.output);
        if output.claimed.swap(true, Ordering::AcqRel) {
            return Err(Error::SamplerExists);
        }
        let made = (|| {
            if self.redirected.load(Ordering::Acquire) {
                // Older kernels map a redirected counter (the ring it writes into, a second consumer
                // of it); newer ones refuse with EBUSY. Refuse alike everywhere.
                return Err(Error::Ring(
                    perf_core::ErrorKind::MapBusy {
                        area: "data",
                        source: std::io::Error::from_raw_os_error(libc::EBUSY),
                    }
                    .into(),
                ));
            }
            let pages = check_ring_request(self.attr(), self.cpu(), exp)?;
            let fd = self
                .perf_fd()
                .try_clone()
                .map_err(|e| Error::io("duplicating the counter's fd", e))?;
            let mode = if self.attr().write_backward() != 0 {
                RingMode::Overwrite
            } else {
                RingMode::Normal
            };
            let ring = Ring::map_exclusive(&fd, pages, mode)?;
            Ok(Sampler::from_parts(
                File::from(fd.into_owned()),
                *self.attr(),
                ring,
                Control::Kernel,
                Arc::clone(&output),
            ))
        })();
        if made.is_err() {
            output.claimed.store(false, Ordering::Release);
        }
        made
    }
}

/// Refuses rings that can never work, with the reason; returns the page count.
fn check_ring_request(attr: &perf_event_attr, cpu: Option<u32>, exp: u8) -> Result<u64> {
    if exp > LAST_EXP {
        return Err(Error::Sampling(format!(
            "sampler({exp}): 2^{exp} data pages do not fit in any address space; most kernels map at \
             most 2^{MAX_EXP} pages ({} MiB with this page size) per data ring",
            (perf_core::page_size() << MAX_EXP) >> 20
        )));
    }
    if attr.inherit() != 0 && cpu.is_none() {
        return Err(Error::Sampling(
            "an inherited counter on every CPU (Cpu::ALL) cannot have a ring buffer: the kernel refuses \
             to map it (children on other CPUs could not write into one ring); sample the process and its \
             children with PerCpuSampler::new(event, Proc(pid), opts, exp), one ring per CPU"
                .into(),
        ));
    }
    // `sample_period` and `sample_freq` share one u64. A PMU of its own (a dynamic type, e.g. intel_pt)
    // may write AUX records without sampling, so only the kernel's fixed types are judged.
    let sampling = attr.sample_period_or_freq() != 0;
    let fixed_type = attr.type_ < sys::PERF_TYPE_MAX;
    if fixed_type && !sampling && !has_side_band(attr) {
        return Err(Error::Sampling(
            "this counter does not sample (opts.sample_on is not set, or is a frequency of 0) and asks \
             for no side-band records, so its ring would stay empty: set opts.sample_on \
             (SampleOn::Count(n) or SampleOn::Freq(hz)) or an opts.extra_record option"
                .into(),
        ));
    }
    let pages = 1u64 << exp;
    let ring = pages * perf_core::page_size();
    let largest = super::limits::largest_record(attr);
    // The producer leaves a byte free and writes whole 8-byte units, and after a loss a LOST record must
    // fit together with the next one.
    let need = largest + super::limits::lost_record(attr);
    if need > ring - 8 {
        let min_exp = (0..=LAST_EXP)
            .find(|e| (1u64 << e) * perf_core::page_size() - 8 >= need)
            .map_or_else(|| "none".to_owned(), |e| e.to_string());
        return Err(Error::Sampling(format!(
            "the largest record this counter can write is {largest} bytes (plus {} for a LOST record), \
             but a ring of 2^{exp} pages holds {} bytes: every such record would be lost; use sampler({min_exp}) \
             or more, or ask for less (a smaller sample_format.user_stack or max_stack_frames)",
            need - largest,
            ring - 8
        )));
    }
    check_wake_up(attr, exp, ring, largest)?;
    Ok(pages)
}

/// Refuses a wake-up watermark (`WakeUpOn::Bytes`) the ring can never reach.
///
/// The kernel keeps `min(wakeup_watermark, ring size)` and wakes the reader when more than that many
/// bytes were written since its last wakeup; a ring of N bytes holds at most N - 8 bytes of records
/// (one byte stays free, records are 8-byte units), and once fewer bytes than the next record are free
/// the kernel drops records instead of writing them. So a reader that waits for the watermark is woken
/// for sure only when the watermark plus the largest record fits in N - 8 bytes; above that the ring
/// can fill (and lose every later record) with nobody woken. `WakeUpOn::Samples(n)` needs no check:
/// the kernel wakes at half the ring as well.
fn check_wake_up(attr: &perf_event_attr, exp: u8, ring: u64, largest: u64) -> Result<()> {
    if attr.watermark() == 0 {
        return Ok(());
    }
    let watermark = u64::from(attr.wakeup_events_or_watermark());
    // Bytes(0) is the kernel's default, half the ring.
    let most = (ring - 8).saturating_sub(largest);
    if watermark != 0 && watermark > most {
        return Err(Error::Sampling(format!(
            "WakeUpOn::Bytes({watermark}) can never wake a reader of this ring: sampler({exp}) maps \
             {ring} bytes, which hold at most {} bytes of records, and the kernel wakes a reader only \
             once more than the watermark was written, so with records of up to {largest} bytes the \
             ring can fill (every later record lost) below it; use WakeUpOn::Bytes({most}) or less \
             (Bytes(0): half the ring), or a larger ring",
            ring - 8
        )));
    }
    Ok(())
}

/// Whether the attr asks for any side-band (non-sample) record.
fn has_side_band(attr: &perf_event_attr) -> bool {
    attr.mmap() != 0
        || attr.mmap2() != 0
        || attr.mmap_data() != 0
        || attr.comm() != 0
        || attr.task() != 0
        || attr.context_switch() != 0
        || attr.namespaces() != 0
        || attr.ksymbol() != 0
        || attr.bpf_event() != 0
        || attr.cgroup() != 0
        || attr.text_poke() != 0
        || attr.aux_output() != 0
        || attr.inherit_stat() != 0
        || attr.defer_output() != 0
}

impl Sampler {
    /// A sampler over a ring already made (a mapping, or simulated memory in tests).
    pub(crate) fn from_parts(
        file: File,
        attr: perf_event_attr,
        ring: Ring<Data>,
        control: Control,
        output: Arc<Output>,
    ) -> Self {
        Sampler {
            file,
            parser: Parser::from_attr(&attr),
            mode: ring.mode(),
            page: ring.mapped_page(),
            attr,
            ring: Lock::new(Some(ring)),
            control,
            output,
            aux_mapped: AtomicBool::new(false),
            lost_records: AtomicU64::new(0),
            lost_samples: AtomicU64::new(0),
            waiters: Lock::new(None),
            wanted: AtomicBool::new(false),
            generation: perf_core::fork::generation(),
            carried: Lock::new(Carried::default()),
        }
    }

    /// [`simulated`](Self::simulated) over `fd` (e.g. a pipe, which the reactor can watch, where
    /// `/dev/null` cannot be added to an epoll set).
    #[cfg(test)]
    pub(crate) fn simulated_on(
        attr: perf_event_attr,
        ring: Ring<Data>,
        control: SimControl,
        fd: std::os::fd::OwnedFd,
    ) -> Self {
        let output = Arc::new(Output::default());
        output.claimed.store(true, Ordering::Relaxed);
        Self::from_parts(File::from(fd), attr, ring, Control::Sim(control), output)
    }

    /// A sampler over simulated kernel memory, for tests: `control` plays the ioctls.
    #[cfg(test)]
    pub(crate) fn simulated(attr: perf_event_attr, ring: Ring<Data>, control: SimControl) -> Self {
        let file = File::open("/dev/null").expect("/dev/null");
        let output = Arc::new(Output::default());
        output.claimed.store(true, Ordering::Relaxed);
        Self::from_parts(file, attr, ring, Control::Sim(control), output)
    }

    /// Takes the ring for a reader; `None` while another reader holds it (which is then asked to give
    /// it back at its next call).
    pub(crate) fn lease(&self) -> Option<Lease<'_>> {
        let mut slot = self.ring.lock();
        match slot.take() {
            Some(ring) => Some(Lease {
                sampler: self,
                ring: Some(ring),
            }),
            None => {
                // Under the lock: the holder clears the request when it puts the ring back, which it
                // does under the same lock, so a request is never left behind by a lease that ended.
                self.wanted.store(true, Ordering::Relaxed);
                None
            }
        }
    }

    /// Whether another reader asked for the ring.
    #[inline(always)]
    pub(crate) fn wanted(&self) -> bool {
        self.wanted.load(Ordering::Relaxed)
    }

    /// Puts the ring back (a lease ended) and wakes the readers that found it held.
    fn give_back(&self, ring: Ring<Data>) {
        let wanted = {
            let mut slot = self.ring.lock();
            *slot = Some(ring);
            self.wanted.swap(false, Ordering::Relaxed)
        };
        if wanted {
            self.wake_waiters();
        }
    }

    /// Asks every async waiter of this sampler to look again (e.g. the AUX area was given back).
    pub(crate) fn wake_waiters(&self) {
        let waiters = self.waiters.lock().clone();
        if let Some(w) = waiters {
            w.wake_all();
        }
    }

    /// Whether this process is a child made by `fork()` after the sampler was: its ring is then a
    /// placeholder, and reading it is [`perf_core::ErrorKind::ForkedChild`].
    pub(crate) fn forked(&self) -> bool {
        perf_core::fork::generation() != self.generation
    }

    /// The one reactor registration of this sampler, made on first use and kept until the sampler
    /// drops.
    ///
    /// [`ForkedChild`](perf_core::ErrorKind::ForkedChild) in a fork child, before anything touches
    /// the fd: registering the event the child shares with its parent (an epoll `ADD` polls it) would
    /// take the kernel's pending wakeup (`perf_poll` exchanges it with zero) from the parent's waiters.
    pub(crate) fn waiters(&self) -> Result<Arc<Waiters>> {
        self.refuse_forked("data")?;
        let mut slot = self.waiters.lock();
        if let Some(w) = slot.as_ref() {
            return Ok(Arc::clone(w));
        }
        let w = Waiters::register(self.as_fd())?;
        *slot = Some(Arc::clone(&w));
        Ok(w)
    }

    /// The record parser for this sampler's counter.
    pub fn parser(&self) -> &Parser {
        &self.parser
    }

    /// The `perf_event_attr` of the counter.
    pub fn attr(&self) -> &perf_event_attr {
        &self.attr
    }

    /// Normal, or overwrite (`write_backward`).
    pub fn mode(&self) -> RingMode {
        self.mode
    }

    /// Iterates over the records in the ring, oldest first, as owned `(Priv, Record)` pairs.
    ///
    /// The iterator never blocks: it ends when the ring is empty (call `iter()` again later, or use
    /// [`Iter::next_timeout`] to wait). See [`Iter::into_cow`] for the zero-copy form.
    pub fn iter(&self) -> Iter<'_> {
        Iter::new(self)
    }

    /// Adds a counter's records to this ring (`PERF_EVENT_IOC_SET_OUTPUT`): a shared ring.
    ///
    /// Both counters must record `PERF_SAMPLE_IDENTIFIER` (`record_id_format.id` / the
    /// `identifier` bit) with the same record layout, so that every record says which counter
    /// wrote it: compare [`RecordId::id`](super::record::RecordId::id) with
    /// [`Counter::id`]. Both must be on the same CPU (or both on any CPU); the attached counter can
    /// no longer be mapped itself (EBUSY).
    ///
    /// # Errors
    ///
    /// [`Error::Sampling`] when the layouts differ or lack the identifier; [`Error::Io`] when the
    /// kernel refuses (`EINVAL`: different CPU or task, or the counter already has its own ring).
    #[doc(alias = "PERF_EVENT_IOC_SET_OUTPUT")]
    pub fn attach(&self, counter: &Counter) -> Result<()> {
        if self.attr.sample_type & IDENTIFIER == 0 || counter.attr().sample_type & IDENTIFIER == 0 {
            return Err(Error::Sampling(
                "a shared ring needs PERF_SAMPLE_IDENTIFIER on every counter \
                 (set opts.record_id_format.id or attr.sample_type |= PERF_SAMPLE_IDENTIFIER)"
                    .into(),
            ));
        }
        // The build-id choice only matters for a counter that writes MMAP2 records.
        let mut theirs = *counter.attr();
        if theirs.mmap2() == 0 {
            theirs.set_build_id(self.attr.build_id());
        }
        if Parser::from_attr(&theirs) != self.parser {
            return Err(Error::Sampling(
                "a shared ring needs the same sample_format, record_id_format and stat_format on \
                 every counter (and the same extra_record.mmap.ext build-id choice on counters \
                 that record mmaps), so that one parser reads all records"
                    .into(),
            ));
        }
        sys::ioctl::set_output(counter.fd(), Some(self.file.as_fd())).map_err(|e| {
            Error::io(
                "PERF_EVENT_IOC_SET_OUTPUT (both counters must be on the same CPU, or both per task)",
                e,
            )
        })?;
        counter.redirected.store(true, Ordering::Release);
        Ok(())
    }

    /// Pauses the ring's output (`PERF_EVENT_IOC_PAUSE_OUTPUT`): the counter keeps counting,
    /// records are dropped (and counted as lost). Since Linux 4.7.
    ///
    /// The pause is shared with [`Counter::pause_output`] and with [`newest`](Self::newest), which
    /// keeps the output paused while it copies: a resume during such a read takes effect when the
    /// read ends.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if the ioctl fails.
    #[doc(alias = "PERF_EVENT_IOC_PAUSE_OUTPUT")]
    pub fn pause(&self) -> Result<()> {
        self.output
            .set_user_pause(&self.control, self.file.as_fd(), true)
    }

    /// Resumes the ring's output after [`pause`](Self::pause). Since Linux 4.7.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if the ioctl fails.
    pub fn resume(&self) -> Result<()> {
        self.output
            .set_user_pause(&self.control, self.file.as_fd(), false)
    }

    /// Enables the counter (`PERF_EVENT_IOC_ENABLE`); during an AUX snapshot read, when that read
    /// ends.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if the ioctl fails.
    #[doc(alias = "PERF_EVENT_IOC_ENABLE")]
    pub fn enable(&self) -> Result<()> {
        self.output
            .set_user_enabled(&self.control, self.file.as_fd(), true)
    }

    /// Disables the counter (`PERF_EVENT_IOC_DISABLE`); AUX snapshot reads then leave it disabled.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if the ioctl fails.
    #[doc(alias = "PERF_EVENT_IOC_DISABLE")]
    pub fn disable(&self) -> Result<()> {
        self.output
            .set_user_enabled(&self.control, self.file.as_fd(), false)
    }

    /// Stops the event for an AUX snapshot read; see [`Output::stop_for_read`]. In a fork child,
    /// [`ForkedChild`](perf_core::ErrorKind::ForkedChild) before any syscall on the (shared) fd.
    pub(crate) fn stop_for_read(&self) -> Result<ReadHold<'_>> {
        self.refuse_forked("aux")?;
        self.output.stop_for_read(&self.control, self.file.as_fd())
    }

    /// [`perf_core::ErrorKind::ForkedChild`] (for `area`) in a fork child: for the reads that pause
    /// or stop the event, which must not touch the fd the child shares with its parent.
    fn refuse_forked(&self, area: &'static str) -> Result<()> {
        if self.forked() {
            return Err(Error::Ring(
                perf_core::ErrorKind::ForkedChild { area }.into(),
            ));
        }
        Ok(())
    }

    /// Enables the counter for `overflows` more overflows (samples), after which it disables
    /// itself (`PERF_EVENT_IOC_REFRESH`). Refused on inherited counters.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if the ioctl fails.
    #[doc(alias = "PERF_EVENT_IOC_REFRESH")]
    pub fn refresh(&self, overflows: u32) -> Result<()> {
        sys::ioctl::refresh(self.fd(), overflows)
            .map_err(|e| Error::io("PERF_EVENT_IOC_REFRESH", e))
    }

    /// Samples every `period` events from the next overflow on (`PERF_EVENT_IOC_PERIOD`).
    ///
    /// # Errors
    ///
    /// [`Error::Sampling`] on a counter that samples at a frequency (use
    /// [`set_frequency`](Self::set_frequency)), for 0, or for a period of 2^63 or more (the kernel's
    /// limit); [`Error::Io`] if the ioctl fails.
    #[doc(alias = "PERF_EVENT_IOC_PERIOD")]
    pub fn set_period(&self, period: u64) -> Result<()> {
        if self.attr.freq() != 0 {
            return Err(Error::Sampling(
                "this counter samples at a frequency (SampleOn::Freq); use set_frequency".into(),
            ));
        }
        if period >> 63 != 0 {
            return Err(Error::Sampling(format!(
                "a sample period must be below 2^63 (the kernel refuses {period:#x})"
            )));
        }
        self.period_ioctl(period)
    }

    /// Samples `hz` times a second from the next overflow on (`PERF_EVENT_IOC_PERIOD` on a
    /// frequency counter); at most `kernel.perf_event_max_sample_rate`.
    ///
    /// # Errors
    ///
    /// [`Error::Sampling`] on a counter with a fixed period (use [`set_period`](Self::set_period)),
    /// on one opened with a frequency of 0 (the kernel does not treat it as sampling), for 0, and
    /// above `kernel.perf_event_max_sample_rate` (its value is in the message); [`Error::Io`] if
    /// the ioctl fails.
    pub fn set_frequency(&self, hz: u64) -> Result<()> {
        if self.attr.freq() == 0 {
            return Err(Error::Sampling(
                "this counter samples with a fixed period (SampleOn::Count); use set_period".into(),
            ));
        }
        if self.attr.sample_period_or_freq() == 0 {
            return Err(Error::Sampling(
                "this counter was opened with SampleOn::Freq(0), which the kernel treats as not \
                 sampling, so its frequency cannot be changed: open it with a non-zero frequency"
                    .into(),
            ));
        }
        if let Some(max) = max_sample_rate() {
            if hz > max {
                return Err(Error::Sampling(format!(
                    "{hz} Hz is above kernel.perf_event_max_sample_rate ({max} Hz): ask for less, or \
                     raise it with `sysctl kernel.perf_event_max_sample_rate={hz}` (the kernel lowers \
                     it again when sampling takes too long)"
                )));
            }
        }
        self.period_ioctl(hz)
    }

    fn period_ioctl(&self, value: u64) -> Result<()> {
        if value == 0 {
            return Err(Error::Sampling(
                "a sample period or frequency of 0 is refused by the kernel".into(),
            ));
        }
        sys::ioctl::period(self.fd(), value).map_err(|e| Error::io("PERF_EVENT_IOC_PERIOD", e))
    }

    /// The mmap page's consistent snapshot.
    fn page_snapshot(&self) -> Result<perf_core::PageSnapshot> {
        match &self.page {
            Some(page) => Ok(page.page().snapshot()?),
            None => Err(Error::Sampling(
                "this sampler's ring has no mmap page".into(),
            )),
        }
    }

    /// Nanoseconds the counter was enabled, from the mmap page (seqlock-consistent, as of the
    /// page's last update: when the counter was last scheduled in or out). Readable while an
    /// iterator holds the ring, also from inside a [`CowIter`](super::CowIter) closure.
    ///
    /// # Errors
    ///
    /// [`Error::Ring`] if the page's sequence lock never settles.
    pub fn counter_time_enabled(&self) -> Result<u64> {
        Ok(self.page_snapshot()?.time_enabled)
    }

    /// Nanoseconds the counter was running (on the PMU), from the mmap page; see
    /// [`counter_time_enabled`](Self::counter_time_enabled).
    ///
    /// # Errors
    ///
    /// [`Error::Ring`] if the page's sequence lock never settles.
    pub fn counter_time_running(&self) -> Result<u64> {
        Ok(self.page_snapshot()?.time_running)
    }

    /// Reads the counter (`read(2)` on the sampler's fd): the count, and the lost-record count when the
    /// read format has `PERF_FORMAT_LOST` (by default on sampling counters). A group leader's read
    /// (`PERF_FORMAT_GROUP`) gives the leader's values, and the members' in
    /// [`Stat::siblings`].
    ///
    /// # Errors
    ///
    /// [`Error::Io`] / [`Error::ShortRead`] if the read fails.
    pub fn stat(&self) -> Result<Stat> {
        if self.attr.read_format & FORMAT_GROUP != 0 {
            return crate::count::read_group(&self.file, self.attr.read_format);
        }
        // A non-group read is at most `SINGLE_MAX` bytes (`read_size` of one member); zeroed past
        // what the read fills, for the branch-free decode.
        let want = Stat::read_size(self.attr.read_format, 1).min(SINGLE_MAX);
        let mut buf = [0u8; SINGLE_MAX];
        let got = rustix::io::read(&self.file, &mut buf[..want])
            .map_err(|e| Error::io("reading a perf counter", e.into()))?;
        if got != want {
            return Err(Error::ShortRead {
                expected: want,
                got,
            });
        }
        Ok(Stat::decode_single(&buf, self.attr.read_format))
    }

    /// Lost data so far: the `PERF_RECORD_LOST` and `PERF_RECORD_LOST_SAMPLES` counts read by this
    /// sampler's iterators, and the kernel's `PERF_FORMAT_LOST` count when the read format has it.
    ///
    /// # Errors
    ///
    /// As [`stat`](Self::stat), when the read format has `PERF_FORMAT_LOST`.
    pub fn lost(&self) -> Result<LostCounts> {
        let format_lost = if self.attr.read_format & FORMAT_LOST != 0 {
            self.stat()?.lost_records
        } else {
            None
        };
        Ok(LostCounts {
            lost_records: self.lost_records.load(Ordering::Relaxed),
            lost_samples: self.lost_samples.load(Ordering::Relaxed),
            format_lost,
        })
    }

    /// Adds a record's lost counts to the totals.
    #[inline]
    pub(crate) fn account(&self, record: &Record) {
        match record {
            Record::LostRecords(l) => {
                self.lost_records
                    .fetch_add(l.lost_records, Ordering::Relaxed);
            }
            Record::LostSamples(l) => {
                self.lost_samples
                    .fetch_add(l.lost_samples, Ordering::Relaxed);
            }
            _ => {}
        }
    }

    /// Adds raw lost counts (the zero-copy path, which does not build records).
    #[inline]
    pub(crate) fn account_raw(&self, record_type: u32, count: u64) {
        if record_type == sys::PERF_RECORD_LOST {
            self.lost_records.fetch_add(count, Ordering::Relaxed);
        } else if record_type == sys::PERF_RECORD_LOST_SAMPLES {
            self.lost_samples.fetch_add(count, Ordering::Relaxed);
        }
    }

    /// The newest records of an overwrite ring (a counter opened with `write_backward`), newest
    /// first, at most `n`: those written since the previous call (or since the ring was made).
    ///
    /// The records are copied out of the ring, never borrowed from it: the output is paused for the
    /// copy (a counted pause: a concurrent [`resume`](Self::resume) or second `newest` cannot end
    /// it early), writes that began before the pause are waited for (one RCU grace period, a few
    /// milliseconds), and bytes a late write could have reached are dropped. Records made while
    /// paused are lost (and counted). Since Linux 4.7.
    ///
    /// # Errors
    ///
    /// [`Error::Ring`] (`RingMode`) on a normal ring, (`ForkedChild`) in a child made by `fork()`,
    /// before anything touches the event the child shares with its parent; [`Error::Io`] if pausing
    /// fails.
    pub fn newest(&self, n: usize) -> Result<Vec<(Priv, Record)>> {
        if self.mode != RingMode::Overwrite {
            return Err(Error::Ring(
                perf_core::ErrorKind::RingMode {
                    area: "data",
                    what: "newest()",
                    needs: "overwrite (write_backward)",
                    is: "normal",
                }
                .into(),
            ));
        }
        // Before any syscall on the fd: in a fork child it is the parent's event too, and pausing and
        // resuming it from the child's copy of the pause state would end the parent's pause. And before
        // the ring's lock, which a fork during another thread's copy leaves empty in the child.
        self.refuse_forked("data")?;
        let mut copy = BackwardCopy::new();
        {
            let _hold = self
                .output
                .pause_for_read(&self.control, self.file.as_fd())?;
            // Forward readers never take an overwrite ring, so it is only held by another `newest`,
            // for the length of one copy.
            let mut slot = self.ring.lock();
            let ring = slot.as_mut().ok_or(Error::RingBusy)?;
            ring.copy_backward(&mut copy)?;
        }
        let mut out = Vec::new();
        for chunk in copy.records().take(n) {
            let (p, r) = self.parser.parse_chunk(chunk?);
            self.account(&r);
            out.push((p, r));
        }
        Ok(out)
    }

    /// Runs `f` (perf-core's code, never the user's) with the ring if no reader holds it (mapping the
    /// AUX area needs it).
    pub(crate) fn with_ring<R>(&self, f: impl FnOnce(&mut Ring<Data>) -> R) -> Result<R> {
        let mut slot = self.ring.lock();
        slot.as_mut().map(f).ok_or(Error::RingBusy)
    }

    fn fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
}

/// `kernel.perf_event_max_sample_rate`, when readable.
fn max_sample_rate() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_max_sample_rate")
        .ok()?
        .trim()
        .parse()
        .ok()
}

impl AsFd for Sampler {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        // The registration leaves the epoll set (no iterator borrows the sampler now: only the
        // reactor thread may hold it a moment longer) before the counter can have another sampler,
        // whose registration it would otherwise race for the kernel's wakeups. In a fork child it
        // only closes the child's duplicate of the fd.
        drop(self.waiters.get_mut().take());
        self.output.claimed.store(false, Ordering::Release);
    }
}

/// A reader's hold on the sampler's ring; gives it back (with everything consumed published) on drop.
#[derive(Debug)]
pub(crate) struct Lease<'s> {
    sampler: &'s Sampler,
    ring: Option<Ring<Data>>,
}

impl Lease<'_> {
    /// The ring (`Some` until the lease is dropped).
    #[inline]
    pub(crate) fn ring(&mut self) -> Option<&mut Ring<Data>> {
        self.ring.as_mut()
    }

    /// The ring, shared (`Some` until the lease is dropped).
    #[inline]
    pub(crate) fn ring_ref(&self) -> Option<&Ring<Data>> {
        self.ring.as_ref()
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if let Some(mut ring) = self.ring.take() {
            ring.commit();
            self.sampler.give_back(ring);
        }
    }
}
