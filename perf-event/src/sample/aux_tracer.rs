//! [`AuxTracer`]: the AUX area of a sampler's ring (Intel PT, CoreSight, ARM SPE... trace bytes).

use std::future::poll_fn;
use std::os::fd::{AsFd, BorrowedFd};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use perf_core::fork::Lock;
use perf_core::{Aux, Chunk, MappedPage, Ring, RingMode};

use super::asynk::Wait;
use super::Sampler;
use crate::error::{Error, Result};

/// AUX bytes as one or two slices (two when they wrap the area's end); see [`AuxCowIter`].
pub type AuxChunk<'a> = Chunk<'a>;

/// The AUX area of a [`Sampler`]: raw trace bytes a PMU writes; made by
/// [`Sampler::aux_tracer`]. Since Linux 4.1.
///
/// Each `PERF_RECORD_AUX` in the data ring ([`Record::Aux`](super::record::Record::Aux)) says
/// which bytes were added (`offset`, `size`); reading the chunks in order after the data records
/// gives the same bytes.
///
/// In normal mode the bytes are read in place (the PMU stops before it would overwrite unread
/// bytes). In snapshot mode the PMU overwrites the oldest bytes at any time, so they are never
/// borrowed: [`snapshot`](Self::snapshot) stops the event, copies the newest bytes out and starts
/// the event again, as `perf record --snapshot` does.
///
/// The area has one reader at a time, as the data ring has: while an [`AuxCowIter::next`] closure
/// runs, the tracer's other readers (a nested `cow_iter().next`, [`snapshot`](Self::snapshot)) get
/// nothing or [`Error::RingBusy`] instead of waiting for it; [`head`](Self::head) and
/// [`mode`](Self::mode) work from inside the closure.
#[derive(Debug)]
pub struct AuxTracer<'a> {
    sampler: &'a Sampler,
    /// The AUX ring while no reader holds it (fork-safe; never held while user code runs).
    ring: Lock<Option<Ring<Aux>>>,
    mode: RingMode,
    /// The mmap page, for `aux_head` while a reader holds the ring.
    page: Option<MappedPage>,
    /// A reader found the ring held: the sampler's async waiters are woken when it comes back. Set
    /// and cleared under `ring`'s lock.
    wanted: AtomicBool,
}

/// The newest bytes of an AUX area in snapshot mode, copied out; see [`AuxTracer::snapshot`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuxSnapshot {
    /// `aux_head` when the copy was taken.
    pub head: u64,
    /// The bytes, oldest first, ending at `head`.
    pub bytes: Vec<u8>,
}

impl Sampler {
    /// Maps the AUX area with 2^`exp` pages and returns its reader. The PMU stops (and flags
    /// records `truncated`) when the area is full.
    ///
    /// # Errors
    ///
    /// [`Error::Sampling`] if this sampler already has an AUX tracer, or when the counter's
    /// `wake_up.on_aux_bytes` exceeds the area (no reader would ever be woken); [`Error::RingBusy`] while an
    /// iterator holds the data ring (make the tracer before iterating); [`Error::Ring`] from the
    /// mapping (`Map` with EINVAL/EOPNOTSUPP when the PMU has no AUX area: only PMUs such as
    /// `intel_pt`, `intel_bts`, `cs_etm`, `arm_spe` have one; `MapMemory` for the locked-memory
    /// budget).
    pub fn aux_tracer(&self, exp: u8) -> Result<AuxTracer<'_>> {
        self.map_aux(exp, RingMode::Normal)
    }

    /// Maps the AUX area in snapshot (overwrite) mode: the PMU overwrites the oldest bytes, and
    /// [`AuxTracer::snapshot`] copies the newest ones out.
    ///
    /// # Errors
    ///
    /// As [`aux_tracer`](Self::aux_tracer).
    pub fn aux_tracer_snapshot(&self, exp: u8) -> Result<AuxTracer<'_>> {
        self.map_aux(exp, RingMode::Overwrite)
    }

    fn map_aux(&self, exp: u8, mode: RingMode) -> Result<AuxTracer<'_>> {
        if self.aux_mapped.swap(true, Ordering::AcqRel) {
            return Err(Error::Sampling(
                "this sampler already has an AUX tracer (one AUX area per ring)".into(),
            ));
        }
        let made = (|| {
            let pages = 1u64
                .checked_shl(u32::from(exp))
                .filter(|_| exp < 40)
                .ok_or_else(|| {
                    Error::Sampling(format!(
                        "aux_tracer({exp}): 2^{exp} AUX pages do not fit in the address space"
                    ))
                })?;
            // The kernel wakes an AUX reader once `aux_watermark` bytes were written since the last
            // wakeup, and a normal AUX area holds at most its size: a larger watermark never wakes.
            let bytes = pages.saturating_mul(perf_core::page_size());
            let watermark = u64::from(self.attr().aux_watermark);
            if mode == RingMode::Normal && watermark > bytes {
                return Err(Error::Sampling(format!(
                    "wake_up.on_aux_bytes = {watermark} can never wake a reader of this AUX area: \
                     aux_tracer({exp}) maps {bytes} bytes; use at most {bytes} (0: half the area), \
                     or a larger area"
                )));
            }
            let ring = self.with_ring(|ring| ring.map_aux_exclusive(pages, mode))??;
            Ok(AuxTracer::new(self, ring))
        })();
        if made.is_err() {
            self.aux_mapped.store(false, Ordering::Release);
        }
        made
    }
}

impl<'a> AuxTracer<'a> {
    pub(crate) fn new(sampler: &'a Sampler, ring: Ring<Aux>) -> Self {
        AuxTracer {
            sampler,
            mode: ring.mode(),
            page: ring.mapped_page(),
            ring: Lock::new(Some(ring)),
            wanted: AtomicBool::new(false),
        }
    }

    /// Runs `f` (our code, never the user's) with the ring; [`Error::RingBusy`] while a reader holds
    /// it.
    fn with_ring<R>(&self, f: impl FnOnce(&mut Ring<Aux>) -> R) -> Result<R> {
        self.ring.lock().as_mut().map(f).ok_or(Error::RingBusy)
    }

    /// Takes the ring for a reader; `None` while another one holds it (whose lease then wakes the
    /// sampler's async waiters when it ends).
    fn lease(&self) -> Option<AuxLease<'_>> {
        let mut slot = self.ring.lock();
        let Some(ring) = slot.take() else {
            self.wanted.store(true, Ordering::Relaxed);
            return None;
        };
        Some(AuxLease {
            tracer: self,
            ring: Some(ring),
        })
    }

    /// Normal, or snapshot (overwrite).
    pub fn mode(&self) -> RingMode {
        self.mode
    }

    /// The `aux_head`: how many bytes the PMU has written in all (free-running).
    pub fn head(&self) -> u64 {
        match &self.page {
            Some(page) => page.page().aux_head(),
            None => self.with_ring(|r| r.head()).unwrap_or(0),
        }
    }

    /// In snapshot mode: stops the event (`PERF_EVENT_IOC_DISABLE`, which makes the PMU flush and
    /// publish `aux_head`), copies out the bytes written since the previous snapshot (at most
    /// `max_len` and one area, the newest), and starts the event again (`PERF_EVENT_IOC_ENABLE`)
    /// — unless it was disabled through [`Sampler::disable`]. Concurrent snapshots share one stop.
    ///
    /// # Errors
    ///
    /// [`Error::Ring`] (`RingMode`) in normal mode (read it with [`iter`](Self::iter));
    /// [`Error::Io`] if the event cannot be stopped; [`Error::RingBusy`] from inside an
    /// [`AuxCowIter::next`] closure.
    pub fn snapshot(&self, max_len: Option<u64>) -> Result<AuxSnapshot> {
        let mut snap = AuxSnapshot::default();
        let _stop = self.sampler.stop_for_read()?;
        snap.head = self.with_ring(|r| r.copy_aux_snapshot(max_len, &mut snap.bytes))??;
        Ok(snap)
    }

    /// In snapshot mode, the whole area (the `size` bytes ending at `aux_head`), copied out with the
    /// event stopped as [`snapshot`](Self::snapshot) does: for PMUs that publish `aux_head` as an
    /// offset in this mode.
    ///
    /// # Errors
    ///
    /// As [`snapshot`](Self::snapshot).
    pub fn snapshot_full(&self) -> Result<AuxSnapshot> {
        let mut snap = AuxSnapshot::default();
        let _stop = self.sampler.stop_for_read()?;
        snap.head = self.with_ring(|r| r.copy_aux_full(&mut snap.bytes))??;
        Ok(snap)
    }

    /// An iterator over the AUX bytes as owned chunks.
    pub fn iter(&self) -> AuxIter<'_> {
        AuxIter { tracer: self }
    }

    /// An iterator over the AUX bytes in place (in snapshot mode, a copy).
    pub fn cow_iter(&self) -> AuxCowIter<'_> {
        AuxCowIter {
            tracer: self,
            copy: Vec::new(),
        }
    }
}

impl Drop for AuxTracer<'_> {
    fn drop(&mut self) {
        self.sampler.aux_mapped.store(false, Ordering::Release);
    }
}

/// A reader's hold on the AUX ring; puts it back on drop, and wakes the async readers that found
/// it held.
struct AuxLease<'t> {
    tracer: &'t AuxTracer<'t>,
    ring: Option<Ring<Aux>>,
}

impl Drop for AuxLease<'_> {
    fn drop(&mut self) {
        if let Some(ring) = self.ring.take() {
            let wanted = {
                let mut slot = self.tracer.ring.lock();
                *slot = Some(ring);
                self.tracer.wanted.swap(false, Ordering::Relaxed)
            };
            if wanted {
                self.tracer.sampler.wake_waiters();
            }
        }
    }
}

/// Owned AUX chunks; see [`AuxTracer::iter`].
#[derive(Debug)]
pub struct AuxIter<'a> {
    tracer: &'a AuxTracer<'a>,
}

impl<'a> AuxIter<'a> {
    /// The copy-on-write iterator over the same area (perf-event-open 0.5's `Iter::into_cow`; the
    /// same as [`AuxTracer::cow_iter`]).
    pub fn into_cow(self) -> AuxCowIter<'a> {
        self.tracer.cow_iter()
    }

    /// Creates an asynchronous iterator, woken when the kernel wakes the sampler (it writes a
    /// `PERF_RECORD_AUX` into the data ring as it adds AUX bytes) or when another reader gives the
    /// area back. It shares the sampler's one registration with the reactor (see
    /// [`AsyncIter`](super::AsyncIter)).
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the sampler's fd cannot be registered with the reactor.
    pub fn into_async(self) -> Result<AsyncAuxIter<'a>> {
        Ok(AsyncAuxIter {
            inner: self.into_cow().into_async()?,
        })
    }

    /// The next at most `max_chunk_len` bytes (all available when `None`), copied out; `None`
    /// when there are none. In snapshot mode: [`AuxTracer::snapshot`]'s bytes (`None` when there
    /// are none or the snapshot failed; call `snapshot` to see the error).
    pub fn next(&mut self, max_chunk_len: Option<u64>) -> Option<Vec<u8>> {
        self.tracer
            .cow_iter()
            .next(max_chunk_len, |chunk| chunk.to_vec())
    }
}

/// AUX bytes in place; see [`AuxTracer::cow_iter`].
#[derive(Debug)]
pub struct AuxCowIter<'a> {
    tracer: &'a AuxTracer<'a>,
    /// Snapshot mode: the copy `f` sees.
    copy: Vec<u8>,
}

impl<'a> AuxCowIter<'a> {
    /// Creates an asynchronous iterator; see [`AuxIter::into_async`].
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the sampler's fd cannot be registered with the reactor.
    pub fn into_async(self) -> Result<AsyncAuxCowIter<'a>> {
        let wait = Wait::new(self.tracer.sampler)?;
        Ok(AsyncAuxCowIter {
            inner: self,
            wait,
            error: None,
        })
    }

    /// Calls `f` with the next at most `max_chunk_len` bytes (one or two slices) in the AUX
    /// area, then gives them back to the PMU; `None` when there are none, or while another reader
    /// of the tracer holds the area (see [`try_next`](Self::try_next)). In snapshot mode `f` sees a
    /// copy taken as [`AuxTracer::snapshot`] does (`None` also when that fails).
    ///
    /// `f` runs with no lock held: it may call the tracer ([`AuxTracer::head`],
    /// [`AuxTracer::mode`]; a nested reader gets nothing), and the sampler.
    pub fn next<F, R>(&mut self, max_chunk_len: Option<u64>, f: F) -> Option<R>
    where
        F: FnOnce(AuxChunk<'_>) -> R,
    {
        self.try_next(max_chunk_len, f)?.ok()
    }

    /// As [`next`](Self::next), but says why there are no bytes: `Some(Err)` with
    /// [`Error::RingBusy`] while another reader of the tracer holds the area (a `next` closure
    /// further up this thread's stack, or another thread), or with the error of a snapshot or of
    /// the ring (a fork child's copy of the tracer).
    pub fn try_next<F, R>(&mut self, max_chunk_len: Option<u64>, f: F) -> Option<Result<R>>
    where
        F: FnOnce(AuxChunk<'_>) -> R,
    {
        if self.tracer.mode() == RingMode::Overwrite {
            let snap = match self.tracer.snapshot(max_chunk_len) {
                Ok(snap) => snap,
                Err(e) => return Some(Err(e)),
            };
            self.copy = snap.bytes;
            return (!self.copy.is_empty()).then(|| Ok(f(Chunk::contiguous(&self.copy))));
        }
        let Some(mut lease) = self.tracer.lease() else {
            return Some(Err(Error::RingBusy));
        };
        let ring = lease.ring.as_mut()?;
        let mut batch = match ring.batch() {
            Ok(batch) => batch,
            Err(e) => return Some(Err(e.into())),
        };
        let chunk = batch.next_chunk(max_chunk_len)?;
        Some(Ok(f(chunk)))
    }
}

/// An async iterator of owned AUX chunks; made by [`AuxIter::into_async`].
///
/// It waits on the sampler's registration with the shared reactor: the kernel wakes the sampler's
/// fd as it writes records (a `PERF_RECORD_AUX` for each batch of AUX bytes) into the data ring, by
/// [`Opts::wake_up`](crate::config::Opts::wake_up), and a reader that found the area held by
/// another is woken when it is given back. It ends (`None`) when the monitored task has exited and
/// the area is drained; an error ends a call with `None` too, and [`take_error`](Self::take_error)
/// says what it was.
#[derive(Debug)]
pub struct AsyncAuxIter<'a> {
    inner: AsyncAuxCowIter<'a>,
}

impl<'a> AsyncAuxIter<'a> {
    /// Polls for the next at most `max_chunk_len` bytes (all available when `None`), copied out,
    /// registering the task for wakeup when there are none; `None` once the iterator has ended.
    /// In snapshot mode: [`AuxTracer::snapshot`]'s bytes.
    pub fn poll_next(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        max_chunk_len: Option<u64>,
    ) -> Poll<Option<Vec<u8>>> {
        self.get_mut()
            .inner
            .poll_next_inner(cx, max_chunk_len, |c| c.to_vec())
    }

    /// Waits for the next at most `max_chunk_len` bytes; see [`poll_next`](Self::poll_next).
    pub async fn next(&mut self, max_chunk_len: Option<u64>) -> Option<Vec<u8>> {
        poll_fn(|cx| Pin::new(&mut *self).poll_next(cx, max_chunk_len)).await
    }

    /// The error that ended the last call with `None`, if any (a snapshot that failed, the ring of
    /// a fork child, `EPOLLERR` from the kernel); taking it clears it.
    pub fn take_error(&mut self) -> Option<Error> {
        self.inner.take_error()
    }

    /// Wakes the task every `interval` even without a kernel wakeup; see
    /// [`AsyncIter::flush_every`](super::AsyncIter::flush_every).
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the timer cannot be created.
    pub fn flush_every(&mut self, interval: Option<Duration>) -> Result<()> {
        self.inner.flush_every(interval)
    }

    /// The synchronous iterator back.
    pub fn into_sync(self) -> AuxIter<'a> {
        AuxIter {
            tracer: self.inner.inner.tracer,
        }
    }
}

impl AsFd for AsyncAuxIter<'_> {
    /// The sampler's fd.
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inner.as_fd()
    }
}

/// An async iterator over AUX bytes in place: [`AuxCowIter::next`]'s closure form; made by
/// [`AuxCowIter::into_async`]. It is woken, and ends, as [`AsyncAuxIter`] is.
#[derive(Debug)]
pub struct AsyncAuxCowIter<'a> {
    inner: AuxCowIter<'a>,
    wait: Wait,
    error: Option<Error>,
}

impl<'a> AsyncAuxCowIter<'a> {
    /// Polls for the next at most `max_chunk_len` bytes and, when there are some, calls `f` with
    /// them in the area (one or two slices), then gives them back to the PMU; `None` once the
    /// iterator has ended, or for an error (see [`take_error`](Self::take_error)).
    ///
    /// `f` is called at most once; when the poll is pending it is dropped uncalled. It runs with no
    /// lock held, as [`AuxCowIter::next`]'s does.
    pub fn poll_next<F, R>(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        max_chunk_len: Option<u64>,
        f: F,
    ) -> Poll<Option<R>>
    where
        F: FnOnce(AuxChunk<'_>) -> R + Unpin,
    {
        self.get_mut().poll_next_inner(cx, max_chunk_len, f)
    }

    fn poll_next_inner<F, R>(
        &mut self,
        cx: &Context<'_>,
        max_chunk_len: Option<u64>,
        f: F,
    ) -> Poll<Option<R>>
    where
        F: FnOnce(AuxChunk<'_>) -> R,
    {
        let inner = &mut self.inner;
        let mut f = Some(f);
        // The AUX area never ends by itself: the stream ends after a hangup, once it is drained.
        let take = || {
            inner
                .try_next(max_chunk_len, |c| f.take().map(|f| f(c)))
                .and_then(|r| r.transpose())
        };
        match self.wait.poll_with(cx, take, || false) {
            Poll::Ready(Some(Ok(r))) => Poll::Ready(Some(r)),
            Poll::Ready(Some(Err(e))) => {
                self.error = Some(e);
                Poll::Ready(None)
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }

    /// Waits for the next at most `max_chunk_len` bytes and calls `f` with them (see
    /// [`poll_next`](Self::poll_next)); `None` once the iterator has ended, or for an error.
    pub async fn next<F, R>(&mut self, max_chunk_len: Option<u64>, f: F) -> Option<R>
    where
        F: FnOnce(AuxChunk<'_>) -> R + Unpin,
    {
        let mut f = Some(f);
        poll_fn(|cx| match f.take() {
            Some(g) => {
                // A pending poll drops its closure: pass a forwarding one, and keep `g` if unused.
                let mut slot = Some(g);
                let polled = self.poll_next_inner(cx, max_chunk_len, |c| slot.take().map(|g| g(c)));
                match polled {
                    Poll::Ready(Some(Some(r))) => Poll::Ready(Some(r)),
                    Poll::Ready(Some(None)) | Poll::Ready(None) => Poll::Ready(None),
                    Poll::Pending => {
                        f = slot;
                        Poll::Pending
                    }
                }
            }
            None => Poll::Ready(None),
        })
        .await
    }

    /// The error that ended the last call with `None`, if any; taking it clears it.
    pub fn take_error(&mut self) -> Option<Error> {
        self.error.take()
    }

    /// Wakes the task every `interval` even without a kernel wakeup; see
    /// [`AsyncIter::flush_every`](super::AsyncIter::flush_every).
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the timer cannot be created.
    pub fn flush_every(&mut self, interval: Option<Duration>) -> Result<()> {
        self.wait.flush_every(interval)
    }

    /// The synchronous iterator back.
    pub fn into_sync(self) -> AuxCowIter<'a> {
        self.inner
    }
}

impl AsFd for AsyncAuxCowIter<'_> {
    /// The sampler's fd.
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inner.tracer.sampler.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use perf_core::sim::{Sim, SimConfig, SimControl};
    use perf_core::RingMode;
    use perf_sys::perf_event_attr;

    use super::AuxTracer;
    use crate::sample::record::Record;
    use crate::sample::Sampler;
    use crate::Error;

    fn sim(
        aux_mode: RingMode,
    ) -> (
        perf_core::sim::SimKernel,
        Sampler,
        perf_core::Ring<perf_core::Aux>,
        SimControl,
    ) {
        let mut cfg = SimConfig::new(4096);
        cfg.aux_size = 1024;
        cfg.aux_mode = aux_mode;
        let sim = Sim::new(cfg).unwrap();
        let attr = perf_event_attr::default();
        let sampler = Sampler::simulated(attr, sim.ring, sim.control.clone());
        (sim.kernel, sampler, sim.aux.unwrap(), sim.control)
    }

    #[test]
    fn chunks_match_aux_records() {
        let (mut kernel, sampler, aux, _) = sim(RingMode::Normal);
        let tracer = AuxTracer::new(&sampler, aux);
        let mut written = Vec::new();
        for i in 0..5u8 {
            let bytes: Vec<u8> = (0..300u16).map(|b| (b as u8).wrapping_mul(i + 1)).collect();
            kernel.aux_output(&bytes).unwrap();
            written.extend_from_slice(&bytes);
            // Read after each write so the PMU never runs out of room.
            let mut records = Vec::new();
            for (_, r) in sampler.iter() {
                if let Record::Aux(a) = r {
                    records.push(*a);
                }
            }
            assert_eq!(records.len(), 1);
            let a = &records[0];
            assert_eq!(a.size, 300);
            assert!(!a.truncated);
            let mut got = Vec::new();
            while let Some(c) = tracer.iter().next(Some(128)) {
                assert!(c.len() <= 128);
                got.extend(c);
            }
            assert_eq!(got.len() as u64, a.size);
            let start = a.offset as usize;
            assert_eq!(&written[start..start + 300], &got[..]);
        }
        // Wrapped the 1 KiB area: 1500 bytes went through it.
        assert_eq!(tracer.head(), 1500);
    }

    #[test]
    fn full_area_truncates_and_cow_sees_two_slices() {
        let (mut kernel, sampler, aux, _) = sim(RingMode::Normal);
        let tracer = AuxTracer::new(&sampler, aux);
        kernel.aux_output(&[1u8; 1000]).unwrap();
        assert_eq!(tracer.iter().next(None).unwrap().len(), 1000);
        // 2000 bytes into an area with 1023 free: truncated.
        kernel.aux_output(&[2u8; 2000]).unwrap();
        let aux: Vec<_> = sampler
            .iter()
            .filter_map(|(_, r)| match r {
                Record::Aux(a) => Some(*a),
                _ => None,
            })
            .collect();
        assert_eq!(aux.len(), 2);
        assert!(aux[1].truncated);
        assert_eq!(aux[1].size, 1023);
        let slices = tracer
            .cow_iter()
            .next(None, |c| (c.first().len(), c.second().len()))
            .unwrap();
        assert_eq!(slices.0 + slices.1, 1023);
        assert!(slices.1 > 0, "the chunk wraps the area's end");
        assert!(tracer.iter().next(None).is_none());
    }

    #[test]
    fn snapshot_mode_returns_newest_bytes() {
        let (mut kernel, sampler, aux, control) = sim(RingMode::Overwrite);
        let bytes: Vec<u8> = (0..1500u32).map(|b| b as u8).collect();
        kernel.aux_output_overwrite(&bytes).unwrap();
        let tracer = AuxTracer::new(&sampler, aux);
        let got = tracer.iter().next(Some(100)).unwrap();
        assert_eq!(&got[..], &bytes[1400..]);
        assert!(tracer.iter().next(None).is_none());
        assert!(control.is_enabled(), "started again after the copy");
        let records: Vec<_> = sampler.iter().collect();
        assert!(records
            .iter()
            .any(|(_, r)| matches!(r, Record::Aux(a) if a.overwrite)));
    }

    #[test]
    fn snapshots_stop_the_event_counted_and_leave_a_user_disable_alone() {
        let (mut kernel, sampler, aux, control) = sim(RingMode::Overwrite);
        let tracer = AuxTracer::new(&sampler, aux);
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            // The PMU keeps writing; while any snapshot copies, the event is stopped.
            s.spawn(|| {
                let mut n = 0u8;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    kernel.aux_output_overwrite(&[n; 100]).unwrap();
                    n = n.wrapping_add(1);
                }
            });
            for _ in 0..2 {
                s.spawn(|| {
                    for _ in 0..200 {
                        let snap = tracer.snapshot(None).unwrap();
                        // Each write is 100 equal bytes: a copy taken while stopped has whole runs
                        // after the first (possibly partial) one.
                        if let Some(first) = snap.bytes.iter().position(|&b| b != snap.bytes[0]) {
                            for run in snap.bytes[first..].chunks(100) {
                                assert!(run.iter().all(|&b| b == run[0]), "mixed bytes");
                            }
                        }
                    }
                });
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
        });
        assert!(control.is_enabled(), "the last snapshot started it again");
        sampler.disable().unwrap();
        assert!(!control.is_enabled());
        tracer.snapshot(None).unwrap();
        assert!(!control.is_enabled(), "a user's disable is kept");
        sampler.enable().unwrap();
        assert!(control.is_enabled());
    }

    /// Runs `f` on a thread and fails if it does not return within `limit`: a deadlock becomes a
    /// failure (the stuck thread is left behind).
    fn within<T: Send + 'static>(
        limit: std::time::Duration,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> T {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(limit)
            .expect("deadlocked: did not return within the limit")
    }

    #[test]
    fn a_cow_closure_may_call_back_into_the_tracer() {
        // Issue (soundness round 3): `AuxCowIter::next` held the tracer's blocking mutex while its
        // closure ran, so a closure calling `head()`, `mode()`, `snapshot()` or a nested
        // `cow_iter().next` deadlocked.
        let seen = within(std::time::Duration::from_secs(5), || {
            let (mut kernel, sampler, aux, _) = sim(RingMode::Normal);
            let sampler: &'static Sampler = Box::leak(Box::new(sampler));
            let tracer = AuxTracer::new(sampler, aux);
            kernel.aux_output(&[7u8; 300]).unwrap();
            let mut cow = tracer.cow_iter();
            let inner = cow
                .next(Some(100), |chunk| {
                    let nested = tracer.cow_iter().try_next(None, |c| c.len());
                    let nested_plain = tracer.cow_iter().next(None, |c| c.len());
                    let snap = tracer.snapshot(None);
                    let full = tracer.snapshot_full();
                    (
                        chunk.len(),
                        tracer.head(),
                        tracer.mode(),
                        matches!(nested, Some(Err(Error::RingBusy))),
                        nested_plain.is_none(),
                        matches!(snap, Err(Error::RingBusy)),
                        matches!(full, Err(Error::RingBusy)),
                    )
                })
                .unwrap();
            // After the closure the area is the tracer's again: the rest is read, in order.
            let rest = tracer.iter().next(None).unwrap();
            (inner, rest.len(), tracer.head())
        });
        let ((len, head, mode, nested_busy, nested_none, snap_busy, full_busy), rest, head_after) =
            seen;
        assert_eq!(len, 100);
        assert_eq!(head, 300, "head() from inside the closure");
        assert_eq!(mode, RingMode::Normal);
        assert!(nested_busy, "a nested try_next says RingBusy");
        assert!(nested_none, "a nested next gets nothing");
        assert!(
            snap_busy && full_busy,
            "a snapshot from inside says RingBusy"
        );
        assert_eq!(rest, 200);
        assert_eq!(head_after, 300);
    }

    /// A simulated sampler whose fd is a pipe's read end, so the reactor can watch it: writing to
    /// the write end plays the kernel's wakeup, closing it plays the target's exit (`EPOLLHUP`).
    fn sim_on_pipe() -> (
        perf_core::sim::SimKernel,
        Sampler,
        perf_core::Ring<perf_core::Aux>,
        std::os::fd::OwnedFd,
    ) {
        let mut cfg = SimConfig::new(4096);
        cfg.aux_size = 1024;
        let sim = Sim::new(cfg).unwrap();
        let (r, w) = rustix::pipe::pipe().unwrap();
        let sampler = Sampler::simulated_on(perf_event_attr::default(), sim.ring, sim.control, r);
        (sim.kernel, sampler, sim.aux.unwrap(), w)
    }

    struct Count(std::sync::atomic::AtomicUsize);
    impl std::task::Wake for Count {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    #[test]
    fn async_aux_iter_wakes_on_the_sampler_and_ends_after_hangup() {
        let got = within(std::time::Duration::from_secs(10), || {
            let (mut kernel, sampler, aux, w) = sim_on_pipe();
            let tracer = AuxTracer::new(&sampler, aux);
            let mut it = tracer.iter().into_async().unwrap();
            let mut chunks = Vec::new();
            std::thread::scope(|s| {
                s.spawn(move || {
                    std::thread::sleep(std::time::Duration::from_millis(50));
                    kernel.aux_output(&[3u8; 300]).unwrap();
                    // The kernel's wakeup, then the target's exit.
                    rustix::io::write(&w, b"x").unwrap();
                    std::thread::sleep(std::time::Duration::from_millis(50));
                    drop(w);
                });
                futures::executor::block_on(async {
                    while let Some(c) = it.next(Some(128)).await {
                        chunks.push(c);
                    }
                });
            });
            assert!(it.take_error().is_none());
            chunks
        });
        let lens: Vec<usize> = got.iter().map(Vec::len).collect();
        assert_eq!(lens, [128, 128, 44]);
        assert!(got.iter().flatten().all(|&b| b == 3));
    }

    #[test]
    fn async_aux_reader_is_woken_when_a_sync_reader_gives_the_area_back() {
        use std::sync::atomic::Ordering::SeqCst;
        use std::task::{Context, Poll, Waker};
        let (mut kernel, sampler, aux, _w) = sim_on_pipe();
        let tracer = AuxTracer::new(&sampler, aux);
        kernel.aux_output(&[9u8; 300]).unwrap();
        let mut it = tracer.cow_iter().into_async().unwrap();
        let count = std::sync::Arc::new(Count(0.into()));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        let (held_tx, held_rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        std::thread::scope(|s| {
            let tracer = &tracer;
            let sync_reader = s.spawn(move || {
                tracer.cow_iter().next(Some(100), |c| {
                    held_tx.send(()).unwrap();
                    go_rx.recv().unwrap();
                    c.len()
                })
            });
            held_rx.recv().unwrap();
            // The area is leased out: the async reader waits, it does not spin or fail.
            let polled = std::pin::Pin::new(&mut it).poll_next(&mut cx, None, |c| c.len());
            assert_eq!(polled, Poll::Pending);
            assert_eq!(count.0.load(SeqCst), 0);
            go_tx.send(()).unwrap();
            assert_eq!(sync_reader.join().unwrap(), Some(100));
        });
        assert_eq!(count.0.load(SeqCst), 1, "woken when the lease ended");
        let polled = std::pin::Pin::new(&mut it).poll_next(&mut cx, None, |c| c.len());
        assert_eq!(polled, Poll::Ready(Some(200)));
        assert!(it.take_error().is_none());
    }

    #[test]
    fn async_aux_iter_converts_back_and_into_cow() {
        let (mut kernel, sampler, aux, _w) = sim_on_pipe();
        let tracer = AuxTracer::new(&sampler, aux);
        kernel.aux_output(&[1u8; 10]).unwrap();
        let mut cow = tracer.iter().into_cow();
        assert_eq!(cow.next(Some(4), |c| c.len()), Some(4));
        let mut sync = tracer.iter().into_async().unwrap().into_sync();
        assert_eq!(sync.next(None).map(|v| v.len()), Some(6));
    }
}
