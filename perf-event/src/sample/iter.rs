//! [`Iter`] (owned records) and [`CowIter`] (the record's bytes in the ring, zero-copy).

use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use perf_core::Chunk;
use perf_sys as sys;
use rustix::event::{PollFd, PollFlags, Timespec};

use super::record::{Priv, Record};
use super::{Parser, Sampler};
use crate::error::Result;

/// Owned records from a [`Sampler`], oldest first; see [`Sampler::iter`].
///
/// `next` never blocks: it returns `None` when the ring is empty (the iterator can be used again
/// afterwards). [`next_timeout`](Self::next_timeout) waits for records with `poll(2)`.
///
/// Each record's space goes back to the kernel when `next` returns it, and not before: dropping
/// the iterator loses nothing that it has not handed out. The producer's head is loaded once per
/// burst of records, not once per record.
#[derive(Debug)]
pub struct Iter<'a> {
    sampler: &'a Sampler,
    seen_head: u64,
}

impl<'a> Iter<'a> {
    pub(super) fn new(sampler: &'a Sampler) -> Self {
        Iter {
            sampler,
            seen_head: 0,
        }
    }

    /// The sampler this iterator reads.
    pub fn sampler(&self) -> &'a Sampler {
        self.sampler
    }

    /// The zero-copy form of this iterator.
    pub fn into_cow(self) -> CowIter<'a> {
        CowIter {
            sampler: self.sampler,
            scratch: Vec::new(),
            seen_head: 0,
        }
    }

    /// The next record, without blocking: `None` when the ring is empty, `Some(Err)` when the
    /// ring is corrupt (its pending bytes are then discarded, and the next call goes on).
    pub(crate) fn try_next(&mut self) -> Option<Result<(Priv, Record)>> {
        let sampler = self.sampler;
        let parser = sampler.parser();
        let mut ring = sampler.ring();
        let out = ring.next_with_seen(&mut self.seen_head, |chunk| {
            let (p, r) = parser.parse_chunk(chunk);
            sampler.account(&r);
            (p, r)
        });
        match out {
            Ok(item) => item.map(Ok),
            Err(e) => {
                if let Err(d) = ring.discard_pending() {
                    return Some(Err(d.into()));
                }
                Some(Err(e.into()))
            }
        }
    }

    /// The next record, waiting up to `timeout` for one with `poll(2)`.
    ///
    /// `None` when the time is up, or when the counter's target exited (`POLLHUP`) and the ring
    /// is drained. The kernel wakes the poll per `opts.wake_up` (by default when the ring is half
    /// full; set `wake_up.on` to a count of 1 for every record).
    pub fn next_timeout(&mut self, timeout: Duration) -> Option<(Priv, Record)> {
        let deadline = Instant::now().checked_add(timeout);
        loop {
            match self.try_next() {
                Some(Ok(item)) => return Some(item),
                Some(Err(_)) => continue,
                None => {}
            }
            let left = match deadline {
                Some(d) => d.checked_duration_since(Instant::now())?,
                None => Duration::from_secs(3600),
            };
            if left.is_zero() {
                return None;
            }
            match wait(self.sampler, left) {
                Wait::Ready => {}
                Wait::Hangup => return self.try_next().and_then(Result::ok),
            }
        }
    }
}

pub(crate) enum Wait {
    Ready,
    Hangup,
}

/// Waits for the sampler's fd to be readable (or hung up, or `left` to pass).
pub(crate) fn wait(sampler: &Sampler, left: Duration) -> Wait {
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

impl Iterator for Iter<'_> {
    type Item = (Priv, Record);

    /// The next record, or `None` when the ring is empty (non-blocking). A corrupt ring is
    /// skipped: its pending bytes are discarded.
    fn next(&mut self) -> Option<Self::Item> {
        loop {
            match self.try_next()? {
                Ok(item) => return Some(item),
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
/// ring, and the ring's tail moves past them only when the closure returns.
///
/// A record that wraps the ring's end is copied into a scratch buffer owned by the iterator and
/// reused (no allocation per record), so [`CowChunk::as_bytes`] is always one aligned slice;
/// [`CowChunk::as_slices`] is the copy-free view.
#[derive(Debug)]
pub struct CowIter<'a> {
    sampler: &'a Sampler,
    scratch: Vec<u8>,
    /// The producer's head as last loaded: `next` reloads it only when the records below it are
    /// used up (one shared-cache-line load per burst, not per record).
    seen_head: u64,
}

impl<'a> CowIter<'a> {
    /// The sampler this iterator reads.
    pub fn sampler(&self) -> &'a Sampler {
        self.sampler
    }

    /// Calls `f` with the next record's bytes and the parser, then releases the bytes to the
    /// kernel; `None` when the ring is empty (non-blocking).
    ///
    /// Keep `f` short: the ring is locked while it runs (do not call the sampler's methods from
    /// it), and the kernel cannot reuse the bytes until it returns.
    pub fn next<F, R>(&mut self, f: F) -> Option<R>
    where
        F: FnOnce(CowChunk<'_>, &Parser) -> R,
    {
        let sampler = self.sampler;
        let scratch = &mut self.scratch;
        let mut ring = sampler.ring();
        let out = ring.next_with_seen(&mut self.seen_head, |chunk| {
            account(sampler, chunk);
            f(contiguous(chunk, scratch), sampler.parser())
        });
        match out {
            Ok(r) => r,
            Err(_) => {
                let _ = ring.discard_pending();
                None
            }
        }
    }

    /// Calls `f` for every record published now (at most `max`), in one pass: the ring is locked
    /// and the tail stored once for all of them. Returns how many records `f` saw.
    pub fn drain<F>(&mut self, max: usize, mut f: F) -> usize
    where
        F: FnMut(CowChunk<'_>, &Parser),
    {
        let sampler = self.sampler;
        let parser = sampler.parser();
        let mut ring = sampler.ring();
        let mut n = 0;
        let corrupt = match ring.batch() {
            Ok(mut batch) => loop {
                if n >= max {
                    break false;
                }
                match batch.next_record() {
                    Ok(Some(chunk)) => {
                        account(sampler, chunk);
                        f(contiguous(chunk, &mut self.scratch), parser);
                        n += 1;
                    }
                    Ok(None) => break false,
                    Err(_) => break true,
                }
            },
            Err(_) => true,
        };
        if corrupt {
            let _ = ring.discard_pending();
        }
        n
    }

    /// The next record's bytes, waiting up to `timeout` with `poll(2)`; see
    /// [`Iter::next_timeout`].
    pub fn next_timeout<F, R>(&mut self, timeout: Duration, f: F) -> Option<R>
    where
        F: FnOnce(CowChunk<'_>, &Parser) -> R,
    {
        let deadline = Instant::now().checked_add(timeout);
        let mut f = Some(f);
        loop {
            if self.sampler.ring().pending_bytes() > 0 {
                let f = f.take()?;
                return self.next(f);
            }
            let left = match deadline {
                Some(d) => d.checked_duration_since(Instant::now())?,
                None => Duration::from_secs(3600),
            };
            if left.is_zero() {
                return None;
            }
            if let Wait::Hangup = wait(self.sampler, left) {
                let f = f.take()?;
                return self.next(f);
            }
        }
    }
}
