//! Reading overwrite areas by copying: [`Ring::copy_backward`] (a `write_backward` data ring) and
//! [`Ring::copy_aux_snapshot`] (an AUX area in snapshot mode).
//!
//! The producer of an overwrite area ignores the tail, so no byte of it is ever safe to borrow: it is copied
//! out with atomic loads (a race with the producer then gives stale or mixed bytes, never undefined
//! behaviour), and the copy is validated before anything parses it.
//!
//! Pausing the producer is the caller's part (`PERF_EVENT_IOC_PAUSE_OUTPUT` for data records, disabling
//! the event for AUX hardware). Pausing is not enough on its own: the kernel checks the pause flag when a
//! write *begins* (`__perf_output_begin`), so a write that began on another CPU just before the pause still
//! completes after it, over the oldest bytes. Such a write runs inside an RCU read-side critical section
//! (from `perf_output_begin` to `perf_output_end`), so after pausing [`Ring::copy_backward`] waits for an RCU
//! grace period with `membarrier(MEMBARRIER_CMD_GLOBAL)` (one `synchronize_rcu()`, a few milliseconds)
//! before it copies. Where membarrier is refused (seccomp, `nohz_full`), it waits for the head to stop
//! moving instead. Either way the head is loaded again after the copy, and bytes a late write could have
//! reached are dropped from the copy.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::ring::{Aux, Data, Producer, Ring, RingMode, HEADER};
use crate::ErrorKind;
use crate::{Chunk, Error};

/// Longest wait for a kernel head to settle (the fallback when membarrier is refused).
const SETTLE_LIMIT: Duration = Duration::from_millis(200);

/// Longest wait for a simulated write in progress (a descheduled producer thread on a loaded machine).
const SIM_WRITE_LIMIT: Duration = Duration::from_secs(5);

impl<A: crate::ring::Area> Ring<A> {
    /// Waits until writes that began before the caller paused the producer have finished.
    pub(crate) fn quiesce(&self, rcu: bool) -> Result<(), Error> {
        match &self.producer {
            Producer::Sim(shared) => shared.wait_idle(SIM_WRITE_LIMIT),
            Producer::Kernel if rcu && membarrier_global() => Ok(()),
            Producer::Kernel | Producer::Unknown => {
                self.settle_head();
                Ok(())
            }
        }
    }

    /// Waits (at most [`SETTLE_LIMIT`]) until the head stays the same for a millisecond.
    fn settle_head(&self) {
        let start = Instant::now();
        let mut last = self.head();
        while start.elapsed() < SETTLE_LIMIT {
            std::thread::sleep(Duration::from_millis(1));
            let now = self.head();
            if now == last {
                return;
            }
            last = now;
        }
    }

    /// Copies `dst.len()` bytes from free-running position `pos` of the area, wrapping, with relaxed atomic
    /// word loads (the producer may be writing).
    fn copy_out(&self, pos: u64, dst: &mut [u8]) {
        let size = self.size();
        let mut pos = pos;
        let mut done = 0usize;
        while done < dst.len() {
            let off = pos & (size - 1);
            let word = off & !7;
            let value = self.load_word(word);
            let skip = (off - word) as usize;
            let n = (8 - skip).min(dst.len() - done);
            dst[done..done + n].copy_from_slice(&value.to_ne_bytes()[skip..skip + n]);
            done += n;
            pos = pos.wrapping_add(n as u64);
        }
    }

    /// The aligned word at byte offset `word` (`< size`, a multiple of 8) of the area.
    fn load_word(&self, word: u64) -> u64 {
        debug_assert!(word < self.size() && word.is_multiple_of(8));
        let ptr = self
            .data_ptr()
            .as_ptr()
            .wrapping_add((word & (self.size() - 1) & !7) as usize)
            .cast::<u64>();
        // SAFETY: the offset is masked into the area and 8-aligned, and the area is 8-byte aligned and
        // readable for the ring's life (contract of `from_raw_parts`), so `ptr` is a valid, aligned u64; the
        // producer writes overwrite areas only atomically (or is the kernel, outside the Rust memory model),
        // and a relaxed word-sized atomic load is allowed on read-only memory.
        unsafe { AtomicU64::from_ptr(ptr) }.load(Ordering::Relaxed)
    }
}

/// `membarrier(MEMBARRIER_CMD_GLOBAL)`: returns after a full RCU grace period (`synchronize_rcu()`).
fn membarrier_global() -> bool {
    #[cfg(not(miri))]
    {
        const MEMBARRIER_CMD_GLOBAL: libc::c_long = 1;
        // SAFETY: membarrier takes two integers and touches no memory of ours.
        let r = unsafe {
            libc::syscall(
                libc::SYS_membarrier,
                MEMBARRIER_CMD_GLOBAL,
                0 as libc::c_long,
                0 as libc::c_long,
            )
        };
        r == 0
    }
    #[cfg(miri)]
    false
}

/// The records of an overwrite (`write_backward`) data ring, copied out: see [`Ring::copy_backward`].
///
/// Reusable: each copy overwrites the previous one without allocating once the buffer is large enough.
/// The bytes are 8-byte aligned, newest record first.
#[derive(Clone, Debug, Default)]
pub struct BackwardCopy {
    words: Vec<u64>,
    /// Bytes of `words` that belong to the copy.
    len: usize,
    head: u64,
    /// Whether everything written since the previous copy fits (so a record crossing the end is corrupt,
    /// not the oldest partly overwritten one).
    exact: bool,
    /// Bytes the producer published while the copy was made.
    late: u64,
}

impl BackwardCopy {
    /// An empty copy.
    pub fn new() -> Self {
        Self::default()
    }

    /// The head the copy starts at (the newest record's position).
    pub fn head(&self) -> u64 {
        self.head
    }

    /// Bytes the producer published while the copy was made (0 when it was paused and idle). Those
    /// records are not in this copy (the next copy has them), and the oldest bytes they may have reached
    /// were dropped from this one.
    pub fn late_bytes(&self) -> u64 {
        self.late
    }

    /// The copied bytes, newest record first, 8-byte aligned.
    pub fn as_bytes(&self) -> &[u8] {
        let all = self.words.as_slice();
        // SAFETY: `all` is `all.len() * 8` initialised bytes (u64s have no padding), u8 has alignment 1,
        // and `len <= all.len() * 8`.
        let bytes = unsafe { std::slice::from_raw_parts(all.as_ptr().cast::<u8>(), all.len() * 8) };
        &bytes[..self.len.min(bytes.len())]
    }

    /// The records, newest first: each a contiguous chunk of the copy. The walk ends at never-written
    /// memory (a zero header) and before the oldest record if it was partly overwritten; an impossible
    /// header yields [`ErrorKind::RingCorruptRecord`] once, then the end.
    pub fn records(&self) -> BackwardRecords<'_> {
        BackwardRecords {
            bytes: self.as_bytes(),
            head: self.head,
            off: 0,
            exact: self.exact,
            failed: false,
        }
    }
}

/// Records of a [`BackwardCopy`], newest first.
#[derive(Debug)]
pub struct BackwardRecords<'c> {
    bytes: &'c [u8],
    head: u64,
    off: usize,
    exact: bool,
    failed: bool,
}

impl<'c> Iterator for BackwardRecords<'c> {
    type Item = Result<Chunk<'c>, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        let budget = self.bytes.len() - self.off;
        if self.failed || budget < HEADER as usize {
            return None;
        }
        let size = u16::from_ne_bytes([self.bytes[self.off + 6], self.bytes[self.off + 7]]);
        let len = usize::from(size);
        if size == 0 {
            return None; // never written
        }
        if len < HEADER as usize || len % HEADER as usize != 0 || (self.exact && len > budget) {
            self.failed = true;
            return Some(Err(ErrorKind::RingCorruptRecord {
                position: self.head.wrapping_add(self.off as u64),
                size,
                available: budget as u64,
            }
            .into()));
        }
        if len > budget {
            return None; // the oldest record, partly overwritten by newer ones
        }
        let record = &self.bytes[self.off..self.off + len];
        self.off += len;
        Some(Ok(Chunk::contiguous(record)))
    }
}

impl Ring<Data> {
    /// Copies the records of an overwrite (`write_backward`) ring written since the previous copy (or since
    /// the ring was made), at most one ring's worth, into `into`; read them with
    /// [`BackwardCopy::records`], newest first.
    ///
    /// Pause the producer first (`PERF_EVENT_IOC_PAUSE_OUTPUT`): this waits for writes that began before
    /// the pause (an RCU grace period, a few milliseconds; see the module notes), copies, loads the head again
    /// and drops the oldest bytes that any write published meanwhile could have overwritten. Without a pause
    /// the copy is still sound, but records may be missing or, rarely, mixed. Since Linux 4.7
    /// (`write_backward`).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::RingMode`] on a normal ring; [`ErrorKind::ForkedChild`] in a child made by `fork()`;
    /// [`ErrorKind::RingHeadUnaligned`] if the head is not 8-byte aligned; [`ErrorKind::Sim`] if a simulated write in
    /// progress never finished.
    pub fn copy_backward(&mut self, into: &mut BackwardCopy) -> Result<(), Error> {
        self.require(RingMode::Overwrite, "a backward copy")?;
        self.check_process()?;
        self.quiesce(true)?;
        let head = self.head();
        if !head.is_multiple_of(HEADER) {
            return Err(ErrorKind::RingHeadUnaligned { head }.into());
        }
        let written = self.tail.wrapping_sub(head);
        let mut len = written.min(self.size());
        let words = (len / HEADER) as usize;
        into.words.clear();
        into.words.resize(words, 0);
        for (i, w) in into.words.iter_mut().enumerate() {
            *w = self.load_word(head.wrapping_add(i as u64 * HEADER) & (self.size() - 1));
        }
        let late = head.wrapping_sub(self.head());
        // Records published meanwhile sit in `[head - late, head)`, which is the same memory as the last
        // `late` bytes of a full ring's window `[head, head + size)`.
        if late != 0 {
            len = len.min(self.size().saturating_sub(late));
        }
        into.len = len as usize;
        into.head = head;
        into.exact = written <= self.size() && len == written;
        into.late = late;
        self.tail = head;
        Ok(())
    }
}

impl Ring<Aux> {
    /// Copies the newest bytes of an AUX area in snapshot (overwrite) mode into `into` (replacing its
    /// contents): those written since the previous copy (or since the ring was made), at most one area and
    /// at most `max_len`, oldest first, ending at `aux_head`. Returns that head.
    ///
    /// Stop the PMU first (disable the event: that makes the driver publish `aux_head`; `perf record
    /// --snapshot` does the same): hardware keeps writing otherwise. Bytes published during the copy are
    /// dropped from its oldest end. Some PMUs publish `aux_head` as an offset rather than a free-running
    /// count in this mode; then use [`copy_aux_full`](Self::copy_aux_full) and the PMU's own way to find
    /// where its data starts.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::RingMode`] on a normal AUX ring; [`ErrorKind::ForkedChild`] in a child made by `fork()`.
    pub fn copy_aux_snapshot(
        &mut self,
        max_len: Option<u64>,
        into: &mut Vec<u8>,
    ) -> Result<u64, Error> {
        self.require(RingMode::Overwrite, "an AUX snapshot")?;
        self.check_process()?;
        self.quiesce(false)?;
        let head = self.head();
        let len = head
            .wrapping_sub(self.tail)
            .min(self.size())
            .min(max_len.unwrap_or(u64::MAX));
        self.copy_aux(head, len, into);
        self.tail = head;
        Ok(head)
    }

    /// The whole AUX area, oldest first if it has wrapped: the `size` bytes ending at `aux_head`, copied into
    /// `into`. Returns that head.
    ///
    /// # Errors
    ///
    /// As [`copy_aux_snapshot`](Self::copy_aux_snapshot).
    pub fn copy_aux_full(&mut self, into: &mut Vec<u8>) -> Result<u64, Error> {
        self.require(RingMode::Overwrite, "an AUX snapshot")?;
        self.check_process()?;
        self.quiesce(false)?;
        let head = self.head();
        self.copy_aux(head, self.size(), into);
        self.tail = head;
        Ok(head)
    }

    /// Copies the `len` bytes ending at `head`, then drops the oldest ones a write published meanwhile could
    /// have reached.
    fn copy_aux(&self, head: u64, len: u64, into: &mut Vec<u8>) {
        into.clear();
        into.resize(len as usize, 0);
        self.copy_out(head.wrapping_sub(len), into);
        let late = self.head().wrapping_sub(head);
        if late != 0 {
            let keep = len.min(self.size().saturating_sub(late)) as usize;
            into.drain(..into.len() - keep);
        }
    }
}
