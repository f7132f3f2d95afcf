//! Per-CPU sampling: the same event on every online CPU, one ring each, and an iterator that
//! merges their records in time order, flushing in rounds as `perf record`/`perf report` do.
//!
//! The kernel cannot give a CPU-wide event (`pid = -1`) or an inherited per-task event one ring
//! for all CPUs: each CPU writes its own ring, in its own time order. [`MergedIter`] reads every
//! ring up to its current head (a *round*), queues the records by time, and emits those that no
//! later round can precede: the ones not newer than the newest time seen *before* the round (the
//! rule of perf's `FINISHED_ROUND` ordered-events queue, which allows for a record timestamped on
//! one CPU just before another CPU's newer record but committed to its ring just after). A
//! round that finds every ring empty flushes the queue. Records without a time (no
//! `record_id_format.time`, or a side-band record without `record_id_all`) take the time of the
//! record before them in their ring, so they keep their place in it.

use std::borrow::Borrow;
use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::future::poll_fn;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures_core::Stream;

use super::reactor::{wait_any, Waiter};
use super::record::{Priv, Record};
use super::{Iter, Sampler};
use crate::config::online_cpus;
use crate::config::{CpuScope, Opts};
use crate::count::{Counter, PerCpu};
use crate::error::{Error, Result};
use crate::event::spec::EventSpec;
use crate::event::Event;

/// Records of one ring queued at most (a round reads only up to this, less what is queued); a ring
/// with more left holds the round's horizon back to its last time, so order is kept while memory
/// stays bounded, also across merged iterators dropped early (whose queues their samplers keep).
const ROUND_MAX: usize = if cfg!(test) { 8 } else { 1 << 16 };

/// One sampler per CPU over the same event, enabled together, read as one time-ordered stream.
///
/// ```no_run
/// use perf_event::config::{Opts, Proc, SampleOn};
/// use perf_event::event::sw::Software;
/// use perf_event::sample::PerCpuSampler;
///
/// let mut opts = Opts::default();
/// opts.sample_on = SampleOn::Freq(1000);
/// opts.sample_format.code_addr = true;
/// opts.record_id_format.time = true; // without a time, rings are merged in round order
/// opts.record_id_format.cpu = true;
/// // Every task on every online CPU (needs CAP_PERFMON or perf_event_paranoid <= 0).
/// let set = PerCpuSampler::new(Software::CpuClock, Proc::ALL, &opts, 4)?;
/// set.enable()?;
/// std::thread::sleep(std::time::Duration::from_millis(100));
/// set.disable()?;
/// for (cpu, cpumode, record) in set.iter() {
///     println!("cpu{cpu} {cpumode:?} {record:-?}");
/// }
/// # Ok::<(), perf_event::Error>(())
/// ```
#[derive(Debug)]
pub struct PerCpuSampler {
    counters: PerCpu<Counter>,
    samplers: Vec<(u32, Sampler)>,
}

impl PerCpuSampler {
    /// Opens `event` on every online CPU for `scope` ([`Proc::ALL`](crate::config::Proc::ALL):
    /// every task; a [`Proc`](crate::config::Proc); a [`Cgroup`](crate::config::Cgroup)) and maps
    /// a ring of 2^`exp` data pages for each.
    ///
    /// # Errors
    ///
    /// As [`PerCpu::counters`] and [`Counter::sampler`], for the first CPU that fails.
    pub fn new<E>(event: E, scope: impl CpuScope, opts: impl Borrow<Opts>, exp: u8) -> Result<Self>
    where
        E: TryInto<Event>,
        Error: From<E::Error>,
    {
        Self::from_counters(PerCpu::counters(event, scope, opts)?, exp)
    }

    /// Opens a hybrid event on every online CPU for `scope`, each CPU with the copy whose PMU counts
    /// there, and maps a ring of 2^`exp` data pages for each: `perf record -e cycles` on a machine
    /// with several core PMUs (`cpu_core` and `cpu_atom`, or one `armv8_*` PMU per cluster).
    /// `copies` is one entry of [`EventList::merged`](crate::event::spec::EventList::merged); a copy
    /// without a CPU list (one core PMU, a software event) opens on every CPU. CPUs that no copy's
    /// PMU covers are left out, as perf leaves them. [`iter`](Self::iter) merges the records of
    /// every copy in time order; a sample's `record_id.id` (with `record_id_format.id`) tells the
    /// copies apart.
    ///
    /// # Errors
    ///
    /// [`Error::NotSupported`] when no copy's PMU counts on any online CPU; as [`new`](Self::new),
    /// for the first CPU that fails.
    pub fn merged<'a>(
        copies: impl IntoIterator<Item = &'a EventSpec>,
        scope: impl CpuScope,
        opts: impl Borrow<Opts>,
        exp: u8,
    ) -> Result<Self> {
        let copies: Vec<&EventSpec> = copies.into_iter().collect();
        let cpus = online_cpus()?;
        let plan = copy_per_cpu(&copies, &cpus);
        if plan.is_empty() {
            let name = copies.first().map_or("", |c| c.merge_name());
            return Err(Error::NotSupported {
                event: name.into(),
                detail: format!(
                    "no PMU of this event counts on an online CPU (online: {}; {})",
                    crate::diagnose::cpu_list(&cpus),
                    crate::count::where_copies_count(&copies).join(", ")
                ),
                source: std::io::Error::from_raw_os_error(libc::ENOENT),
            });
        }
        let items = plan
            .into_iter()
            .map(|(cpu, c)| Ok((cpu, Counter::new(c.event(), scope.on(cpu), opts.borrow())?)))
            .collect::<Result<_>>()?;
        Self::from_counters(PerCpu::from_items(items), exp)
    }

    /// Maps a ring of 2^`exp` data pages for each counter of a per-CPU set.
    ///
    /// # Errors
    ///
    /// As [`Counter::sampler`], for the first CPU that fails.
    pub fn from_counters(counters: PerCpu<Counter>, exp: u8) -> Result<Self> {
        let samplers = counters
            .iter()
            .map(|(cpu, c)| Ok((cpu, c.sampler(exp)?)))
            .collect::<Result<_>>()?;
        Ok(Self { counters, samplers })
    }

    /// The per-CPU counters.
    pub fn counters(&self) -> &PerCpu<Counter> {
        &self.counters
    }

    /// The CPUs and their samplers.
    pub fn samplers(&self) -> impl Iterator<Item = (u32, &Sampler)> {
        self.samplers.iter().map(|(c, s)| (*c, s))
    }

    /// Enables every CPU's counter.
    ///
    /// # Errors
    ///
    /// The first ioctl error.
    pub fn enable(&self) -> Result<()> {
        self.counters.enable()
    }

    /// Disables every CPU's counter.
    ///
    /// # Errors
    ///
    /// The first ioctl error.
    pub fn disable(&self) -> Result<()> {
        self.counters.disable()
    }

    /// The records of every CPU, merged in time order; see [`MergedIter`].
    pub fn iter(&self) -> MergedIter<'_> {
        MergedIter::new(self.samplers.iter().map(|(c, s)| (*c, s.iter())))
    }

    /// The records of every CPU, merged in time order, as a [`Stream`]; see [`AsyncMergedIter`].
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when a sampler cannot be registered with the reactor.
    pub fn iter_async(&self) -> Result<AsyncMergedIter<'_>> {
        self.iter().into_async()
    }
}

/// For each of `cpus`, the first copy whose PMU counts on it (a copy without a CPU list counts
/// everywhere); CPUs no copy covers are left out.
pub(crate) fn copy_per_cpu<'a>(
    copies: &[&'a EventSpec],
    cpus: &[u32],
) -> Vec<(u32, &'a EventSpec)> {
    cpus.iter()
        .filter_map(|&cpu| {
            copies
                .iter()
                .find(|c| c.cpus().is_none_or(|own| own.contains(&cpu)))
                .map(|c| (cpu, *c))
        })
        .collect()
}

/// A queued record, ordered by (time, arrival).
#[derive(Debug)]
pub(crate) struct Queued {
    time: u64,
    /// Whether `time` is the record's own (not its ring's previous record's).
    timed: bool,
    seq: u64,
    /// The index of its ring's [`Source`].
    source: usize,
    cpu: u32,
    cpumode: Priv,
    record: Record,
}

/// Records a merged iterator had taken from a ring but not handed out when it was dropped (after
/// `take(n)`, a `break`, a cancelled task): the ring's [`Sampler`] keeps them, and the next merged
/// iterator over that sampler hands them out first, so that dropping one loses nothing.
#[derive(Debug, Default)]
pub(crate) struct Carried {
    /// In the order they were read.
    records: Vec<Queued>,
    /// The time of the last record read from the ring (for the records after it without one).
    last_time: u64,
    /// An empty queue's allocation, left by the last merged iterator that had the sampler first,
    /// for the next one: a merged iterator per poll grew its queue of records from nothing each
    /// time (3 % of a system-wide profiler's CPU, most of it page faults on the fresh memory).
    spare: Vec<Reverse<Queued>>,
}

/// The most records a spare queue holds room for (about 1 MiB): a burst's larger queue is let go.
const SPARE_MAX: usize = 4096;

impl PartialEq for Queued {
    fn eq(&self, other: &Self) -> bool {
        (self.time, self.seq) == (other.time, other.seq)
    }
}
impl Eq for Queued {}
impl PartialOrd for Queued {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Queued {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.time, self.seq).cmp(&(other.time, other.seq))
    }
}

/// One ring's iterator and the time of its last record.
#[derive(Debug)]
struct Source<'a> {
    cpu: u32,
    iter: Iter<'a>,
    last_time: u64,
    /// Its records in the queue.
    queued: usize,
}

/// The records of several rings (one per CPU), merged in time order: `(cpu, cpumode, record)`.
///
/// Made by [`PerCpuSampler::iter`] or [`MergedIter::new`]. Like [`Iter`], `next` never blocks: it
/// returns `None` once every ring is empty and every queued record was emitted (it can be used
/// again afterwards); [`next_timeout`](Self::next_timeout) waits with `poll(2)` on every ring.
///
/// Times are non-decreasing across the merged stream as long as each ring's records are
/// (the kernel writes a CPU's records in the order it timestamps them) and a record is
/// committed to its ring within one round of its timestamp: each round reads every ring up to
/// its head, then emits the queued records not newer than the newest time seen before the round
/// (perf's `FINISHED_ROUND` rule); a round that finds every ring empty flushes the queue. A
/// record committed later than that (its CPU was held up between taking the time and writing the
/// record, e.g. a virtual CPU descheduled by a busy host) still comes out, after newer ones, and
/// is counted in [`late`](Self::late), as perf counts such "out of order events". Records
/// without a time take the time of the record before them in their ring, keeping their place.
/// A ring whose records cannot be parsed is skipped, as [`Iter`] does.
///
/// Nothing read is lost when it is dropped early (after `take(n)`, a `break`, a cancelled
/// [`AsyncMergedIter`]): the records it had taken from the rings but not handed out stay with their
/// samplers, and the next merged iterator over them ([`PerCpuSampler::iter`] again, or
/// [`MergedIter::new`] over the same samplers) hands them out first. A plain [`Iter`] of one of those
/// samplers does not see them.
#[derive(Debug)]
pub struct MergedIter<'a> {
    sources: Vec<Source<'a>>,
    queue: BinaryHeap<Reverse<Queued>>,
    /// Queued records not newer than this may be emitted.
    horizon: u64,
    /// The newest time read so far.
    newest: u64,
    seq: u64,
    /// The newest time emitted so far.
    emitted: u64,
    /// Records emitted after a newer one.
    late: u64,
}

impl<'a> MergedIter<'a> {
    /// Merges the records of `iters`, each labelled with its CPU.
    ///
    /// Records that an earlier merged iterator over the same samplers had read but not handed out
    /// when it was dropped come first, in their time order (see the type's docs).
    pub fn new(iters: impl IntoIterator<Item = (u32, Iter<'a>)>) -> Self {
        let mut merged = Self {
            sources: iters
                .into_iter()
                .map(|(cpu, iter)| Source {
                    cpu,
                    iter,
                    last_time: 0,
                    queued: 0,
                })
                .collect(),
            queue: BinaryHeap::new(),
            horizon: 0,
            newest: 0,
            seq: 0,
            emitted: 0,
            late: 0,
        };
        merged.take_carried();
        merged
    }

    /// Queues the records the samplers kept from dropped merged iterators.
    fn take_carried(&mut self) {
        if let Some(first) = self.sources.first() {
            let spare = std::mem::take(&mut first.iter.sampler().carried.lock().spare);
            if spare.is_empty() {
                self.queue = BinaryHeap::from(spare);
            }
        }
        for (i, src) in self.sources.iter_mut().enumerate() {
            let sampler = src.iter.sampler();
            // A fork child's copy of its parent's sampler reads nothing, kept records included.
            if sampler.forked() {
                continue;
            }
            let carried = std::mem::take(&mut *sampler.carried.lock());
            src.last_time = src.last_time.max(carried.last_time);
            for mut q in carried.records {
                src.queued += 1;
                self.seq += 1;
                q.seq = self.seq;
                q.source = i;
                q.cpu = src.cpu;
                self.newest = self.newest.max(q.time);
                self.queue.push(Reverse(q));
            }
        }
    }

    /// Records queued, read from the rings but not yet emitted.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Records emitted so far whose time is older than that of a record emitted before them:
    /// committed to their ring more than a round after their time (see the type's docs), or
    /// emitted after a [`flush`](Self::flush). Zero while the timed records of the merged stream
    /// are in time order; records without a time are not counted.
    pub fn late(&self) -> u64 {
        self.late
    }

    /// Reads every ring up to its head (as long as it has fewer than [`ROUND_MAX`] records queued);
    /// returns how many records were read. Sets the horizon for the records queued.
    fn round(&mut self) -> usize {
        let before = self.newest;
        let mut horizon = before;
        let mut read = 0;
        for (source, src) in self.sources.iter_mut().enumerate() {
            let budget = ROUND_MAX.saturating_sub(src.queued);
            let mut n = 0;
            while n < budget {
                let Some(item) = src.iter.try_next() else {
                    break;
                };
                let (cpumode, record) = match item {
                    Ok(item) => item,
                    // Another reader holds this ring, or it can never be read forward (an overwrite
                    // ring, a fork child): nothing from it this round.
                    Err(Error::RingBusy) => break,
                    Err(_) if src.iter.reader().ended() => break,
                    // A corrupt ring: its pending bytes were discarded; go on.
                    Err(_) => continue,
                };
                n += 1;
                src.queued += 1;
                let own = record.record_id().and_then(|id| id.time);
                let time = own.unwrap_or(src.last_time);
                src.last_time = time;
                self.newest = self.newest.max(time);
                self.seq += 1;
                self.queue.push(Reverse(Queued {
                    time,
                    timed: own.is_some(),
                    seq: self.seq,
                    source,
                    cpu: src.cpu,
                    cpumode,
                    record,
                }));
            }
            if n == budget {
                // Records may be left in this ring: none newer than its last may go out yet. (A round
                // that reads nothing at all flushes the queue, so a full queue always drains.)
                horizon = horizon.min(src.last_time);
            }
            read += n;
        }
        self.horizon = if read == 0 { self.newest } else { horizon };
        read
    }

    fn pop_ready(&mut self) -> Option<(u32, Priv, Record)> {
        match self.queue.peek() {
            Some(Reverse(q)) if q.time <= self.horizon => {}
            _ => return None,
        }
        let Reverse(q) = self.queue.pop()?;
        if let Some(src) = self.sources.get_mut(q.source) {
            src.queued = src.queued.saturating_sub(1);
        }
        if q.timed {
            if q.time < self.emitted {
                self.late += 1;
            } else {
                self.emitted = q.time;
            }
        }
        Some((q.cpu, q.cpumode, q.record))
    }

    /// Emits every queued record, whatever the horizon: for the end of a capture, after the
    /// counters are disabled and the rings drained. Later records may then be older than these.
    pub fn flush(&mut self) -> impl Iterator<Item = (u32, Priv, Record)> + use<'_, 'a> {
        self.horizon = u64::MAX;
        std::iter::from_fn(move || self.pop_ready())
    }

    /// The next record, waiting up to `timeout` for one on every ring.
    ///
    /// `None` when the time is up, or when every ring's target exited (`POLLHUP`) and everything
    /// was emitted. The wait shares each sampler's wakeups with its other waiters (one reactor
    /// registration per sampler).
    pub fn next_timeout(&mut self, timeout: Duration) -> Option<(u32, Priv, Record)> {
        let deadline = Instant::now().checked_add(timeout);
        for src in &mut self.sources {
            src.iter.reader().arm();
        }
        loop {
            if let Some(item) = self.next() {
                return Some(item);
            }
            if self.sources.iter_mut().all(|s| s.iter.reader().ended()) {
                return None;
            }
            let left = match deadline {
                Some(d) => d.checked_duration_since(Instant::now())?,
                None => Duration::from_secs(3600),
            };
            if left.is_zero() {
                return None;
            }
            let waiters: Vec<&Waiter> = self
                .sources
                .iter()
                .filter_map(|s| s.iter.waiter())
                .collect();
            if waiters.len() < self.sources.len() {
                // No reactor (e.g. out of fds): look again shortly rather than wait blind.
                std::thread::sleep(left.min(Duration::from_millis(10)));
                continue;
            }
            let ready = wait_any(&waiters, left);
            if !ready.is_empty() && ready.iter().all(|r| r.hangup && !r.readable) {
                // Every target is gone: whatever is left, then the end.
                return self.next().or_else(|| self.flush().next());
            }
        }
    }

    /// Creates an asynchronous form: a [`Stream`] of the merged records, woken through each
    /// sampler's one reactor registration.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when a sampler cannot be registered with the reactor.
    pub fn into_async(self) -> Result<AsyncMergedIter<'a>> {
        let waiters = self
            .sources
            .iter()
            .map(|s| Ok(s.iter.sampler().waiters()?.waiter()))
            .collect::<Result<Vec<_>>>()?;
        Ok(AsyncMergedIter {
            merged: self,
            waiters,
            ended: false,
        })
    }
}

impl Drop for MergedIter<'_> {
    /// Gives the records read but not handed out to their samplers, for the next merged iterator.
    fn drop(&mut self) {
        if self.queue.is_empty() {
            let spare = std::mem::take(&mut self.queue).into_vec();
            if let Some(first) = self.sources.first() {
                if spare.capacity() <= SPARE_MAX {
                    // Swapped under the lock, the one it held let go after it.
                    let old =
                        std::mem::replace(&mut first.iter.sampler().carried.lock().spare, spare);
                    drop(old);
                }
            }
            return;
        }
        let mut left: Vec<Queued> = std::mem::take(&mut self.queue)
            .into_iter()
            .map(|Reverse(q)| q)
            .collect();
        left.sort_unstable_by_key(|q| q.seq);
        let mut per_source: Vec<Vec<Queued>> = self.sources.iter().map(|_| Vec::new()).collect();
        for q in left {
            if let Some(v) = per_source.get_mut(q.source) {
                v.push(q);
            }
        }
        for (src, records) in self.sources.iter().zip(per_source) {
            if records.is_empty() {
                continue;
            }
            // Only moves under the lock: nothing is dropped there.
            let mut carried = src.iter.sampler().carried.lock();
            carried.records.extend(records);
            carried.last_time = carried.last_time.max(src.last_time);
        }
    }
}

/// The records of several rings merged in time order, as a [`Stream`]: the async form of
/// [`MergedIter`], made by [`MergedIter::into_async`] or [`PerCpuSampler::iter_async`].
///
/// It is woken when any sampler's kernel wakeup (or flush timer) fires, and ends (`None`) once
/// every ring's target has exited and everything was emitted; an event on every task of a CPU
/// never hangs up.
#[derive(Debug)]
pub struct AsyncMergedIter<'a> {
    merged: MergedIter<'a>,
    waiters: Vec<Waiter>,
    ended: bool,
}

impl<'a> AsyncMergedIter<'a> {
    /// Polls for the next merged record, registering the task for wakeup when every ring is empty.
    pub fn poll_next(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<(u32, Priv, Record)>> {
        let this = self.get_mut();
        let mut retried = false;
        loop {
            if let Some(item) = this.merged.next() {
                return Poll::Ready(Some(item));
            }
            if this.ended
                || this
                    .merged
                    .sources
                    .iter_mut()
                    .all(|s| s.iter.reader().ended())
            {
                this.ended = true;
                return Poll::Ready(this.merged.flush().next());
            }
            let ready: Vec<_> = this.waiters.iter().map(|w| w.poll_ready(cx)).collect();
            if !ready.is_empty() && ready.iter().all(|r| r.hangup) {
                // Every target exited: one last look at the rings, then the end.
                this.ended = true;
                continue;
            }
            if ready.iter().any(|r| r.readable || r.flush) && !retried {
                retried = true;
                continue;
            }
            return Poll::Pending;
        }
    }

    /// Waits for the next merged record; `None` once every target exited and everything was
    /// emitted.
    pub async fn next(&mut self) -> Option<(u32, Priv, Record)> {
        poll_fn(|cx| Pin::new(&mut *self).poll_next(cx)).await
    }

    /// Wakes the task every `interval` even without a kernel wakeup (records below every ring's
    /// wake-up threshold are then delivered at most `interval` late); `None` turns it off.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the timer cannot be created.
    pub fn flush_every(&mut self, interval: Option<Duration>) -> Result<()> {
        // One timer is enough to wake the task; it sits on the first sampler's waiter.
        match self.waiters.first_mut() {
            Some(w) => w.set_flush_interval(interval),
            None => Ok(()),
        }
    }

    /// The synchronous iterator back.
    pub fn into_sync(self) -> MergedIter<'a> {
        self.merged
    }
}

impl Stream for AsyncMergedIter<'_> {
    type Item = (u32, Priv, Record);

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        AsyncMergedIter::poll_next(self, cx)
    }
}

impl Iterator for MergedIter<'_> {
    type Item = (u32, Priv, Record);

    /// The next record in time order, or `None` when every ring is empty and the queue is
    /// flushed (non-blocking).
    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(item) = self.pop_ready() {
                return Some(item);
            }
            if self.round() == 0 && self.queue.is_empty() {
                return None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use perf_core::sim::{Sim, SimConfig, SimKernel};
    use perf_sys::{perf_event_attr, PERF_RECORD_SAMPLE};

    use std::os::fd::OwnedFd;
    use std::time::Duration;

    use super::{MergedIter, ROUND_MAX};
    use crate::sample::record::Record;
    use crate::sample::Sampler;

    /// A sampler over a simulated ring whose samples carry IP and TIME.
    fn sim() -> (SimKernel, Sampler) {
        let sim = Sim::new(SimConfig::new(4096)).unwrap();
        let attr = perf_event_attr {
            sample_type: (perf_sys::PERF_SAMPLE_IP | perf_sys::PERF_SAMPLE_TIME) as u64,
            ..Default::default()
        };
        (sim.kernel, Sampler::simulated(attr, sim.ring, sim.control))
    }

    /// [`sim`] over a pipe's read end, which the reactor can watch (`/dev/null` cannot be added to an
    /// epoll set); the write end is returned to keep it open.
    fn sim_on_pipe() -> (SimKernel, Sampler, OwnedFd) {
        let sim = Sim::new(SimConfig::new(4096)).unwrap();
        let attr = perf_event_attr {
            sample_type: (perf_sys::PERF_SAMPLE_IP | perf_sys::PERF_SAMPLE_TIME) as u64,
            ..Default::default()
        };
        let (r, w) = rustix::pipe::pipe().unwrap();
        let sampler = Sampler::simulated_on(attr, sim.ring, sim.control, r);
        (sim.kernel, sampler, w)
    }

    fn sample(kernel: &mut SimKernel, n: u64) {
        let body = [n.to_ne_bytes(), n.to_ne_bytes()].concat();
        kernel.output(PERF_RECORD_SAMPLE, 0, &body).unwrap();
    }

    /// A merged iterator per poll (what a profiler does) does not grow its queue from nothing
    /// each time: the last one's empty queue, and its room, go to the next.
    #[test]
    fn the_next_merged_iterator_takes_the_last_ones_queue_room() {
        let ((mut ka, a), (mut kb, b)) = (sim(), sim());
        for n in 0..50 {
            sample(&mut ka, 2 * n);
            sample(&mut kb, 2 * n + 1);
        }
        let mut merged = MergedIter::new([(0, a.iter()), (1, b.iter())]);
        assert_eq!(merged.by_ref().count(), 100);
        let room = merged.queue.capacity();
        assert!(room >= 8, "{room}");
        drop(merged);
        let merged = MergedIter::new([(0, a.iter()), (1, b.iter())]);
        assert_eq!(merged.queue.capacity(), room);
        assert_eq!(merged.queued(), 0);
    }

    #[test]
    fn merged_iterators_dropped_early_lose_nothing_and_queue_at_most_a_round_per_ring() {
        // Issue 37, item 3: a merged iterator dropped after `take(n)` threw its queue away. Its
        // records now wait in their samplers for the next merged iterator, and no ring has more than
        // ROUND_MAX of them queued, however often an iterator is dropped early.
        let ((mut ka, a), (mut kb, b)) = (sim(), sim());
        for n in 0..50 {
            sample(&mut ka, 2 * n);
            sample(&mut kb, 2 * n + 1);
        }
        let mut seen = Vec::new();
        for _ in 0..100 {
            let mut merged = MergedIter::new([(0, a.iter()), (1, b.iter())]);
            let before = seen.len();
            for (_, _, r) in merged.by_ref().take(3) {
                match r {
                    Record::Sample(s) => seen.push(s.record_id.time.unwrap()),
                    other => panic!("{other:?}"),
                }
            }
            assert!(merged.queued() <= 2 * ROUND_MAX, "{}", merged.queued());
            drop(merged);
            for s in [&a, &b] {
                assert!(s.carried.lock().records.len() <= ROUND_MAX);
            }
            if seen.len() == before {
                break;
            }
        }
        let distinct: BTreeSet<u64> = seen.iter().copied().collect();
        assert_eq!(seen.len(), 100, "{seen:?}");
        assert_eq!(distinct, (0..100).collect(), "{seen:?}");
        // Order is kept across the drops: the rings were read in time order.
        assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
    }

    #[test]
    fn successive_iterators_reuse_the_samplers_one_registration() {
        // Issue 36, target 2: a profiler makes a merged iterator per poll; each one registered every
        // sampler with the reactor anew (a dup, an epoll ADD, then a DEL and a close when it dropped),
        // 2-2.5 % of a capture's CPU. The registration now lives as long as the sampler.
        let ((mut ka, a, _wa), (_kb, b, _wb)) = (sim_on_pipe(), sim_on_pipe());
        let mut tokens = Vec::new();
        for round in 0..3u64 {
            sample(&mut ka, round);
            let mut merged = MergedIter::new([(0, a.iter()), (1, b.iter())]);
            assert!(merged.next_timeout(Duration::ZERO).is_some());
            assert!(merged.next_timeout(Duration::ZERO).is_none());
            let ids: Vec<u64> = merged
                .sources
                .iter()
                .map(|s| s.iter.waiter().expect("armed").token())
                .collect();
            tokens.push(ids);
        }
        for _ in 0..3 {
            let mut it = a.iter();
            assert!(it.next_timeout(Duration::ZERO).is_none());
            tokens.push(vec![it.waiter().expect("armed").token(), tokens[0][1]]);
            // The async form shares it too.
            let stream = b.iter().into_async().unwrap();
            drop(stream);
        }
        assert!(tokens.iter().all(|t| *t == tokens[0]), "{tokens:?}");
        assert_ne!(tokens[0][0], tokens[0][1], "one registration per sampler");
    }
}
