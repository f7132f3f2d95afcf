//! [`Iter`] (owned records) and [`CowIter`] (the record's bytes in the ring, zero-copy), and the reader
//! state they share: the ring lease, the end, the waiter.

use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use perf_core::{Chunk, RingMode};
use perf_sys as sys;
use rustix::event::{PollFd, PollFlags, Timespec};

use super::reactor::Waiter;
use super::record::{Priv, Record};
use super::sampler::Lease;
use super::{Parser, Sampler};
use crate::error::{Error, Result};

/// The longest a blocking wait sleeps while another reader holds the ring, before looking again.
const BUSY_BACKOFF: Duration = Duration::from_millis(2);

/// What [`Reader::wait`] saw.
pub(crate) enum Wait {
    /// Something was reported (or the time is up): look at the ring again.
    Ready,
    /// The target exited: drain the ring, then end.
    Hangup,
}

/// The state an iterator keeps over a sampler: the ring while it reads (a lease, given back when the
/// ring is found empty and on drop), whether it ended, and its waiter for blocking waits.
#[derive(Debug)]
pub(crate) struct Reader<'a> {
    pub(crate) sampler: &'a Sampler,
    lease: Option<Lease<'a>>,
    ended: bool,
    waiter: Option<Waiter>,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(sampler: &'a Sampler) -> Self {
        Reader {
            sampler,
            lease: None,
            ended: false,
            waiter: None,
        }
    }

    /// Whether the reader met a terminal error (the ring can never be read forward).
    pub(crate) fn ended(&self) -> bool {
        self.ended
    }

    /// Ends the reader with `e`, returned once.
    fn end<T>(&mut self, e: Error) -> Option<Result<T>> {
        self.ended = true;
        self.lease = None;
        Some(Err(e))
    }

    /// Consumes the next record with `f`: `None` when the ring is empty (the ring is given back) or
    /// the reader has ended; `Some(Err(RingBusy))` while another reader holds the ring; another error
    /// for a corrupt ring (its pending bytes are dropped, and reading goes on) or a terminal one (a
    /// forward read of an overwrite ring, a fork child): once, then `None`.
    pub(crate) fn next_with<R>(
        &mut self,
        f: impl FnOnce(Chunk<'_>, &'a Sampler) -> R,
    ) -> Option<Result<R>> {
        if self.ended {
            return None;
        }
        let sampler = self.sampler;
        if sampler.mode() != RingMode::Normal {
            return self.end(Error::Ring(
                perf_core::ErrorKind::RingMode {
                    area: "data",
                    what: "a forward read",
                    needs: "normal",
                    is: "overwrite (write_backward: read it with Sampler::newest)",
                }
                .into(),
            ));
        }
        if self.lease.is_some() && sampler.wanted() {
            // Another reader found the ring held: give it back (waking it), and let it have a turn.
            self.lease = None;
            return Some(Err(Error::RingBusy));
        }
        if self.lease.is_none() {
            match sampler.lease() {
                Some(l) => self.lease = Some(l),
                None => return Some(Err(Error::RingBusy)),
            }
        }
        let ring = self.lease.as_mut().and_then(Lease::ring)?;
        match ring.next_record() {
            Ok(Some(chunk)) => Some(Ok(f(chunk, sampler))),
            Ok(None) => {
                self.lease = None;
                None
            }
            Err(e) if matches!(e.kind(), perf_core::ErrorKind::ForkedChild { .. }) => {
                self.end(e.into())
            }
            Err(e) => {
                if let Err(d) = ring.discard_pending() {
                    return self.end(d.into());
                }
                Some(Err(e.into()))
            }
        }
    }

    /// Calls `f` for every record published now (at most `max`) in one batch: one head load, one tail
    /// store. Returns how many `f` saw (0 while another reader holds the ring, or after the end).
    pub(crate) fn drain(&mut self, max: usize, mut f: impl FnMut(Chunk<'_>, &'a Sampler)) -> usize {
        if self.ended || self.sampler.mode() != RingMode::Normal {
            return 0;
        }
        let sampler = self.sampler;
        let lease = match self.lease.take().or_else(|| sampler.lease()) {
            Some(l) => self.lease.insert(l),
            None => return 0,
        };
        let Some(ring) = lease.ring() else {
            return 0;
        };
        let mut n = 0;
        let corrupt = match ring.batch() {
            Ok(mut batch) => loop {
                if n >= max {
                    break false;
                }
                match batch.next_record() {
                    Ok(Some(chunk)) => {
                        f(chunk, sampler);
                        n += 1;
                    }
                    Ok(None) => break false,
                    Err(_) => break true,
                }
            },
            Err(e) if matches!(e.kind(), perf_core::ErrorKind::ForkedChild { .. }) => {
                self.ended = true;
                false
            }
            Err(_) => true,
        };
        if corrupt {
            let _ = ring.discard_pending();
        }
        if n < max {
            self.lease = None; // drained: give the ring back
        }
        n
    }

    /// The waiter, once [`arm`](Self::arm)ed.
    pub(crate) fn waiter(&self) -> Option<&Waiter> {
        self.waiter.as_ref()
    }

    /// Registers this reader's waiter with the sampler's reactor registration (once), so that no
    /// wakeup between a look at the ring and the wait is missed.
    pub(crate) fn arm(&mut self) {
        if self.waiter.is_none() {
            self.waiter = self.sampler.waiters().ok().map(|w| w.waiter());
        }
    }

    /// Waits up to `left` for the kernel to report something (or, while another reader holds the
    /// ring, a short while). Goes through the sampler's one reactor registration, so it shares the
    /// kernel's wakeups with every async iterator of the sampler; falls back to `poll(2)` if the
    /// reactor cannot be started.
    pub(crate) fn wait(&mut self, left: Duration, busy: bool) -> Wait {
        let left = if busy { left.min(BUSY_BACKOFF) } else { left };
        self.arm();
        match &self.waiter {
            Some(w) => {
                let ready = w.wait_blocking(left);
                if ready.hangup && !ready.readable {
                    Wait::Hangup
                } else {
                    Wait::Ready
                }
            }
            None => poll_fd(self.sampler, left),
        }
    }
}

/// Waits for the sampler's fd with `poll(2)` (the fallback when no reactor can be started).
fn poll_fd(sampler: &Sampler, left: Duration) -> Wait {
    let ts = Timespec {
        tv_sec: i64::try_from(left.as_secs()).unwrap_or(i64::MAX),
        tv_nsec: i64::from(left.subsec_nanos()),
    };
    let fd = sampler.as_fd();
    let mut fds = [PollFd::new(&fd, PollFlags::IN)];
    match rustix::event::poll(&mut fds, Some(&ts)) {
        Ok(_) => {
            let revents = fds[0].revents();
            if revents.intersects(PollFlags::HUP | PollFlags::ERR)
                && !revents.contains(PollFlags::IN)
            {
                Wait::Hangup
            } else {
                Wait::Ready
            }
        }
        Err(_) => Wait::Ready,
    }
}

/// Owned records from a [`Sampler`], oldest first; see [`Sampler::iter`].
///
/// `next` never blocks: it returns `None` when the ring is empty (the iterator can be used again
/// afterwards). [`next_timeout`](Self::next_timeout) waits for records.
///
/// While it finds records the iterator holds the sampler's ring; it gives the ring back when the
/// ring is empty and when dropped. Meanwhile another reader of the same sampler gets nothing
/// ([`try_next`](Self::try_next) says [`Error::RingBusy`]). Each record's space goes back to the
/// kernel after `next` returns it (at the latest when the records seen are used up, after a
/// quarter of the ring, or when the iterator is dropped; see [`perf_core::Ring::next_record`]):
/// dropping the iterator loses nothing that it has not handed out.
///
/// A forward read of an overwrite (`write_backward`) ring, or of a ring in a child made by
/// `fork()`, is an error that ends the iterator: one error from [`try_next`](Self::try_next), then
/// `None`.
#[derive(Debug)]
pub struct Iter<'a> {
    reader: Reader<'a>,
}

impl<'a> Iter<'a> {
    pub(super) fn new(sampler: &'a Sampler) -> Self {
        Iter {
            reader: Reader::new(sampler),
        }
    }

    /// The sampler this iterator reads.
    pub fn sampler(&self) -> &'a Sampler {
        self.reader.sampler
    }

    pub(crate) fn reader(&mut self) -> &mut Reader<'a> {
        &mut self.reader
    }

    pub(crate) fn waiter(&self) -> Option<&Waiter> {
        self.reader.waiter()
    }

    /// The zero-copy form of this iterator.
    pub fn into_cow(self) -> CowIter<'a> {
        CowIter {
            reader: self.reader,
            scratch: Vec::new(),
        }
    }

    /// The next record, without blocking: `None` when the ring is empty (or the iterator ended);
    /// `Some(Err)` when another reader holds the ring ([`Error::RingBusy`]), when the ring is
    /// corrupt (its pending bytes are then discarded, and the next call goes on), or once for an
    /// error that ends the iterator.
    pub fn try_next(&mut self) -> Option<Result<(Priv, Record)>> {
        self.reader.next_with(|chunk, sampler| {
            let (p, r) = sampler.parser().parse_chunk(chunk);
            sampler.account(&r);
            (p, r)
        })
    }

    /// The next record, waiting up to `timeout` for one.
    ///
    /// `None` when the time is up, when the counter's target exited (`POLLHUP`) and the ring is
    /// drained, or when the iterator ended. The kernel wakes waiters per `opts.wake_up` (by default
    /// when the ring is half full; set `wake_up.on` to a count of 1 for every record). The wait
    /// shares the sampler's wakeups with its async iterators (one registration per sampler).
    pub fn next_timeout(&mut self, timeout: Duration) -> Option<(Priv, Record)> {
        let deadline = Instant::now().checked_add(timeout);
        self.reader.arm();
        let mut hung_up = false;
        loop {
            let mut busy = false;
            match self.try_next() {
                Some(Ok(item)) => return Some(item),
                Some(Err(Error::RingBusy)) => busy = true,
                Some(Err(_)) if self.reader.ended() => return None,
                Some(Err(_)) => continue,
                None if self.reader.ended() || hung_up => return None,
                None => {}
            }
            let left = match deadline {
                Some(d) => d.checked_duration_since(Instant::now())?,
                None => Duration::from_secs(3600),
            };
            if left.is_zero() {
                return None;
            }
            if let Wait::Hangup = self.reader.wait(left, busy) {
                hung_up = true;
            }
        }
    }
}

impl Iterator for Iter<'_> {
    type Item = (Priv, Record);

    /// The next record, or `None` when the ring is empty, another reader holds it, or the iterator
    /// ended (non-blocking). A corrupt ring is skipped: its pending bytes are discarded.
    fn next(&mut self) -> Option<Self::Item> {
        loop {
            match self.try_next()? {
                Ok(item) => return Some(item),
                Err(Error::RingBusy) => return None,
                Err(_) => continue,
            }
        }
    }
}

/// One record's bytes, header included, as the kernel wrote them: see [`CowIter::next`].
#[derive(Clone, Copy, Debug)]
pub struct CowChunk<'a> {
    bytes: &'a [u8],
    chunk: Chunk<'a>,
}

impl<'a> CowChunk<'a> {
    /// The bytes, contiguous and 8-byte aligned: in the ring itself, or (for a record that wraps
    /// the ring's end) a copy in the iterator's scratch buffer.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The bytes in the ring, as one or two slices (two when the record wraps): never a copy.
    pub fn as_slices(&self) -> (&'a [u8], &'a [u8]) {
        (self.chunk.first(), self.chunk.second())
    }

    /// The bytes in the ring as perf-core's [`Chunk`].
    pub fn as_chunk(&self) -> Chunk<'a> {
        self.chunk
    }

    /// Length in bytes (the header's `size`).
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether there are no bytes (never, for a record).
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The `PERF_RECORD_*` type from the header.
    pub fn record_type(&self) -> u32 {
        self.chunk.read_u32(0).unwrap_or(0)
    }
}

/// A record's bytes as one aligned slice: in place, or copied into `scratch` when it wraps.
fn contiguous<'s>(chunk: Chunk<'s>, scratch: &'s mut Vec<u8>) -> CowChunk<'s> {
    if let Some(bytes) = chunk.as_contiguous() {
        // The ring's data area is page aligned and records are 8-byte multiples, so `bytes` is
        // 8-byte aligned.
        return CowChunk { bytes, chunk };
    }
    let len = chunk.len();
    if scratch.len() < len + 8 {
        scratch.resize(len + 8, 0);
    }
    let off = scratch.as_ptr().align_offset(8).min(7);
    let dst = &mut scratch[off..off + len];
    chunk.copy_to_slice(dst);
    CowChunk { bytes: dst, chunk }
}

/// Counts lost data from a LOST / LOST_SAMPLES record's bytes without building a record.
#[inline]
fn account(sampler: &Sampler, chunk: Chunk<'_>) {
    let ty = chunk.read_u32(0).unwrap_or(0);
    if ty == sys::PERF_RECORD_LOST {
        sampler.account_raw(ty, chunk.read_u64(16).unwrap_or(0));
    } else if ty == sys::PERF_RECORD_LOST_SAMPLES {
        sampler.account_raw(ty, chunk.read_u64(8).unwrap_or(0));
    }
}

/// Zero-copy records: the closure given to [`next`](Self::next) sees the record's bytes in the
/// ring.
///
/// The bytes are the closure's until it returns; they go back to the kernel after that, at the
/// latest when the records the iterator has seen are used up (before it looks for newer ones),
/// when a quarter of the ring has been consumed, or when the iterator is dropped (see
/// [`perf_core::Ring::next_record`]). While it finds records the iterator holds the sampler's ring
/// (no lock per record); it gives the ring back when the ring is empty and when dropped. Another
/// reader of the sampler meanwhile — including one called from inside the closure — gets nothing,
/// never a wait: [`Sampler::iter`]'s iterator is empty and says [`Error::RingBusy`]. The sampler's
/// other methods (times, counts, pause) work from inside the closure.
///
/// A record that wraps the ring's end is copied into a scratch buffer owned by the iterator and
/// reused (no allocation per record), so [`CowChunk::as_bytes`] is always one aligned slice;
/// [`CowChunk::as_slices`] is the copy-free view.
#[derive(Debug)]
pub struct CowIter<'a> {
    reader: Reader<'a>,
    scratch: Vec<u8>,
}

impl<'a> CowIter<'a> {
    /// The sampler this iterator reads.
    pub fn sampler(&self) -> &'a Sampler {
        self.reader.sampler
    }

    pub(crate) fn reader(&mut self) -> &mut Reader<'a> {
        &mut self.reader
    }

    /// Calls `f` with the next record's bytes and the parser, then releases the bytes to the
    /// kernel; `None` when the ring is empty, another reader holds it, or the iterator ended
    /// (non-blocking).
    ///
    /// Keep `f` short: the kernel cannot reuse the bytes until it returns.
    pub fn next<F, R>(&mut self, f: F) -> Option<R>
    where
        F: FnOnce(CowChunk<'_>, &Parser) -> R,
    {
        self.try_next(f)?.ok()
    }

    /// As [`next`](Self::next), but says why there is no record: `Some(Err)` when another reader
    /// holds the ring ([`Error::RingBusy`]), when the ring is corrupt (its pending bytes are then
    /// discarded), or once for an error that ends the iterator.
    pub fn try_next<F, R>(&mut self, f: F) -> Option<Result<R>>
    where
        F: FnOnce(CowChunk<'_>, &Parser) -> R,
    {
        let scratch = &mut self.scratch;
        self.reader.next_with(|chunk, sampler| {
            account(sampler, chunk);
            f(contiguous(chunk, scratch), sampler.parser())
        })
    }

    /// Calls `f` for every record published now (at most `max`), in one pass: one head load and
    /// one tail store for all of them. Returns how many records `f` saw.
    pub fn drain<F>(&mut self, max: usize, mut f: F) -> usize
    where
        F: FnMut(CowChunk<'_>, &Parser),
    {
        let scratch = &mut self.scratch;
        self.reader.drain(max, |chunk, sampler| {
            account(sampler, chunk);
            f(contiguous(chunk, scratch), sampler.parser());
        })
    }

    /// The next record's bytes, waiting up to `timeout`; see [`Iter::next_timeout`].
    pub fn next_timeout<F, R>(&mut self, timeout: Duration, f: F) -> Option<R>
    where
        F: FnOnce(CowChunk<'_>, &Parser) -> R,
    {
        let deadline = Instant::now().checked_add(timeout);
        self.reader.arm();
        let mut f = Some(f);
        let mut hung_up = false;
        loop {
            let mut busy = false;
            let got = self.try_next(|c, p| f.take().map(|f| f(c, p)));
            match got {
                Some(Ok(r)) => return r,
                Some(Err(Error::RingBusy)) => busy = true,
                Some(Err(_)) if self.reader.ended() => return None,
                Some(Err(_)) => continue,
                None if self.reader.ended() || hung_up => return None,
                None => {}
            }
            let left = match deadline {
                Some(d) => d.checked_duration_since(Instant::now())?,
                None => Duration::from_secs(3600),
            };
            if left.is_zero() {
                return None;
            }
            if let Wait::Hangup = self.reader.wait(left, busy) {
                hung_up = true;
            }
        }
    }
}
