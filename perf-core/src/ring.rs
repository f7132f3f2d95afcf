//! [`Ring`]: the consumer side of a perf ring buffer, one type for the data area and the AUX area.
//!
//! The kernel writes at a free-running `head` and never past `tail + size`; we read `[tail, head)` and
//! move `tail`. The area's fields in the mmap page differ (`data_head`/`data_tail` or `aux_head`/`aux_tail`),
//! the protocol does not, so [`Ring`] is generic over an [`Area`] marker: [`Data`] or [`Aux`].
//!
//! Memory ordering (see `include/uapi/linux/perf_event.h` and `kernel/events/ring_buffer.c`):
//! `head` is loaded with `Acquire` (pairs with the kernel's `smp_wmb()` before it publishes the head), record
//! bytes below the head are read plainly, and `tail` is stored with `Release` once per [`Batch`] (pairs with
//! the kernel's tail load and full barrier before it reuses space). Our own tail is kept in the ring; we are its
//! only writer, so it is never re-read from the page.
//!
//! # Safety
//!
//! A `Ring` holds raw pointers into memory shared with a producer (the kernel, or [`crate::sim`]). Its
//! soundness rests on the contract of [`Ring::from_raw_parts`]: the memory stays mapped while the ring lives,
//! and the producer never writes bytes in `[tail, head)` (the perf protocol in non-overwrite mode). Chunks
//! borrow the [`Batch`] (which borrows the ring mutably), and the tail moves only when the batch ends, so no
//! chunk can outlive the guarantee. Head and tail are only ever accessed through atomics. Every offset into the
//! area is masked by `size - 1` and every length is at most `size`, so no read leaves the area whatever the
//! producer writes.

use std::any::Any;
use std::fmt;
use std::marker::PhantomData;
use std::mem::offset_of;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use perf_sys::perf_event_mmap_page;

use crate::page::UserPage;
use crate::{Chunk, Error};

/// Size of `struct perf_event_header`.
const HEADER: u64 = 8;

mod sealed {
    pub trait Sealed {}
}

/// Which area of a perf ring a [`Ring`] reads: [`Data`] (records) or [`Aux`] (raw hardware trace bytes).
///
/// Sealed: the two areas are the kernel's.
pub trait Area: sealed::Sealed + Send + Sync + 'static {
    /// `"data"` or `"aux"`, for messages.
    const NAME: &'static str;
    /// Byte offset of the head field in `perf_event_mmap_page`.
    const HEAD_OFFSET: usize;
    /// Byte offset of the tail field in `perf_event_mmap_page`.
    const TAIL_OFFSET: usize;
}

/// The data area: records with a `perf_event_header`, fields `data_head`/`data_tail`.
#[derive(Debug)]
pub enum Data {}

/// The AUX area: raw bytes from a PMU (Intel PT, CoreSight, SPE...), fields `aux_head`/`aux_tail`.
///
/// Since Linux 4.1.
#[derive(Debug)]
pub enum Aux {}

impl sealed::Sealed for Data {}
impl sealed::Sealed for Aux {}

impl Area for Data {
    const NAME: &'static str = "data";
    const HEAD_OFFSET: usize = offset_of!(perf_event_mmap_page, data_head);
    const TAIL_OFFSET: usize = offset_of!(perf_event_mmap_page, data_tail);
}

impl Area for Aux {
    const NAME: &'static str = "aux";
    const HEAD_OFFSET: usize = offset_of!(perf_event_mmap_page, aux_head);
    const TAIL_OFFSET: usize = offset_of!(perf_event_mmap_page, aux_tail);
}

/// Whether the consumer moves the tail (normal) or the producer overwrites old data (overwrite).
///
/// The kernel picks the mode from the mapping: a writable mapping is a normal ring, a read-only one an
/// overwrite ring (for the data area, together with `attr.write_backward`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RingMode {
    /// The consumer publishes a tail; the producer stops (and counts `LOST`) when the ring is full.
    Normal,
    /// Read-only mapping; the producer overwrites the oldest data and ignores the tail (flight recorder,
    /// AUX snapshot mode). Pause the producer (`PERF_EVENT_IOC_PAUSE_OUTPUT`, or disable the event) before
    /// reading, or the bytes may change while you read them.
    Overwrite,
}

impl RingMode {
    fn name(self) -> &'static str {
        match self {
            RingMode::Normal => "normal",
            RingMode::Overwrite => "overwrite",
        }
    }
}

/// What keeps a ring's memory alive (a mapping, a simulated region).
pub(crate) type Owner = Arc<dyn Any + Send + Sync>;

/// The consumer of one perf ring area: [`Ring<Data>`] for records, [`Ring<Aux>`] for AUX bytes.
///
/// Positions are free-running `u64` byte counts, masked by `size - 1` to index the area. Reading needs
/// `&mut self`, so one ring has one consumer. Get one from [`Ring::map`], [`Ring::map_aux`] or the
/// simulator in [`crate::sim`].
///
/// ```no_run
/// # fn f(fd: std::os::fd::BorrowedFd<'_>) -> Result<(), perf_core::Error> {
/// use perf_core::{Ring, RingMode};
/// let mut ring = Ring::map(fd, 8, RingMode::Normal)?; // 8 data pages
/// let mut batch = ring.batch()?;                        // loads data_head once
/// while let Some(record) = batch.next_record()? {
///     let ty = record.read_u32(0);
///     let _ = ty;
/// }
/// drop(batch);                                          // publishes data_tail once
/// # Ok(()) }
/// ```
pub struct Ring<A: Area> {
    page: NonNull<perf_event_mmap_page>,
    data: NonNull<u8>,
    size: u64,
    /// Our tail (normal mode), or the head seen at the last snapshot (overwrite mode).
    tail: u64,
    mode: RingMode,
    owner: Option<Owner>,
    _area: PhantomData<A>,
}

// SAFETY: a Ring is a unique consumer handle to shared memory whose owner (a `Send + Sync` mapping or
// simulated region) is kept alive by `owner`, or by the caller of `from_raw_parts`. Moving it to another
// thread moves the only consumer; the producer synchronises with it through atomic head/tail only.
unsafe impl<A: Area> Send for Ring<A> {}
// SAFETY: every `&self` method only performs atomic loads of page fields (head, seqlock reads) or reads the
// ring's own plain fields; all reads of the area's bytes and every tail store need `&mut self`.
unsafe impl<A: Area> Sync for Ring<A> {}

impl<A: Area> fmt::Debug for Ring<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ring")
            .field("area", &A::NAME)
            .field("size", &self.size)
            .field("mode", &self.mode)
            .field("head", &self.head())
            .field("tail", &self.tail)
            .finish()
    }
}

impl<A: Area> Ring<A> {
    /// A ring over raw memory: the mmap page at `page` and the `size`-byte area at `data`.
    ///
    /// `owner`, if given, is kept alive as long as the ring (and rings derived from it, like the AUX ring of a
    /// data ring). The tail starts at the page's current tail field in normal mode; in overwrite mode the
    /// starting point of [`backward_snapshot`](Ring::backward_snapshot) and
    /// [`aux_snapshot`](Ring::aux_snapshot) is the page's current head.
    ///
    /// # Errors
    ///
    /// [`Error::BadRingSize`] if `size` is not a non-zero power of two that fits in `usize`.
    ///
    /// # Safety
    ///
    /// - `page` points to a `perf_event_mmap_page`, 8-byte aligned, readable for the ring's life, and its
    ///   tail field for this area is writable when `mode` is [`RingMode::Normal`].
    /// - `data` points to `size` readable bytes for the ring's life.
    /// - Only atomic accesses touch the head and tail fields, from anyone.
    /// - The producer follows the perf protocol: in normal mode it never writes bytes between the tail this
    ///   ring last published and the head it published (so a chunk being read is never written).
    /// - No other consumer reads this area or stores its tail while the ring lives.
    pub unsafe fn from_raw_parts(
        page: NonNull<perf_event_mmap_page>,
        data: NonNull<u8>,
        size: u64,
        mode: RingMode,
        owner: Option<Arc<dyn Any + Send + Sync>>,
    ) -> Result<Self, Error> {
        if size == 0 || !size.is_power_of_two() || usize::try_from(size).is_err() {
            return Err(Error::BadRingSize {
                area: A::NAME,
                size,
            });
        }
        let mut ring = Ring {
            page,
            data,
            size,
            tail: 0,
            mode,
            owner,
            _area: PhantomData,
        };
        ring.tail = match mode {
            RingMode::Normal => ring.tail_atomic().load(Ordering::Relaxed),
            RingMode::Overwrite => ring.head(),
        };
        Ok(ring)
    }

    fn field(&self, offset: usize) -> &AtomicU64 {
        let ptr = self
            .page
            .as_ptr()
            .cast::<u8>()
            .wrapping_add(offset)
            .cast::<u64>();
        // SAFETY: `offset` is the offset of a u64 field inside the page, which is valid and 8-byte aligned for
        // the ring's life (contract of `from_raw_parts`), and that field is only accessed atomically.
        unsafe { AtomicU64::from_ptr(ptr) }
    }

    fn head_atomic(&self) -> &AtomicU64 {
        self.field(A::HEAD_OFFSET)
    }

    fn tail_atomic(&self) -> &AtomicU64 {
        self.field(A::TAIL_OFFSET)
    }

    /// The producer's head, loaded with `Acquire`: bytes below it are complete.
    pub fn head(&self) -> u64 {
        self.head_atomic().load(Ordering::Acquire)
    }

    /// Our tail: everything below it has been consumed (normal mode); in overwrite mode, the head seen at
    /// the last snapshot.
    pub fn tail(&self) -> u64 {
        self.tail
    }

    /// Size of the area in bytes (a power of two).
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The mode the ring was created in.
    pub fn mode(&self) -> RingMode {
        self.mode
    }

    /// Bytes published and not yet consumed (`head - tail`); more than [`size`](Self::size) means the ring is
    /// corrupt (a batch would report it).
    pub fn pending_bytes(&self) -> u64 {
        match self.mode {
            RingMode::Normal => self.head().wrapping_sub(self.tail),
            RingMode::Overwrite => self.tail.wrapping_sub(self.head()),
        }
    }

    /// The mmap page this ring belongs to (counter index, time conversion, user-space counter reads).
    pub fn page(&self) -> UserPage<'_> {
        // SAFETY: the page is valid for reads for the ring's life (contract of `from_raw_parts`), which
        // outlives the returned borrow.
        unsafe { UserPage::from_ptr(self.page) }
    }

    pub(crate) fn page_ptr(&self) -> NonNull<perf_event_mmap_page> {
        self.page
    }

    pub(crate) fn data_ptr(&self) -> NonNull<u8> {
        self.data
    }

    /// Sets our tail without publishing it (the simulator moved the page's tail itself).
    pub(crate) fn reset_tail(&mut self, tail: u64) {
        self.tail = tail;
    }

    pub(crate) fn owner(&self) -> Option<&Owner> {
        self.owner.as_ref()
    }

    /// Starts a batch: loads the head once; the tail is published once, when the batch is dropped.
    ///
    /// # Errors
    ///
    /// [`Error::RingMode`] on an overwrite ring (use [`Ring::backward_snapshot`] or [`Ring::aux_snapshot`]);
    /// [`Error::RingHeadOutOfRange`] if the head is a whole ring or more ahead of the tail (the producer always
    /// leaves a byte free, so that is corruption).
    pub fn batch(&mut self) -> Result<Batch<'_, A>, Error> {
        self.require(RingMode::Normal, "a forward read")?;
        let head = self.head();
        // The producer always leaves at least one byte free (`CIRC_SPACE`), so a full ring is never seen.
        if head.wrapping_sub(self.tail) >= self.size {
            return Err(Error::RingHeadOutOfRange {
                area: A::NAME,
                head,
                tail: self.tail,
                size: self.size,
            });
        }
        let pos = self.tail;
        Ok(Batch {
            ring: self,
            head,
            pos,
        })
    }

    /// Drops everything published so far: sets the tail to the head. The way out of a corrupt ring.
    ///
    /// # Errors
    ///
    /// [`Error::RingMode`] on an overwrite ring.
    pub fn discard_pending(&mut self) -> Result<u64, Error> {
        self.require(RingMode::Normal, "discarding")?;
        let head = self.head();
        let dropped = head.wrapping_sub(self.tail);
        self.publish_tail(head);
        Ok(dropped)
    }

    fn require(&self, mode: RingMode, what: &'static str) -> Result<(), Error> {
        if self.mode == mode {
            Ok(())
        } else {
            Err(Error::RingMode {
                area: A::NAME,
                what,
                needs: mode.name(),
                is: self.mode.name(),
            })
        }
    }

    fn publish_tail(&mut self, tail: u64) {
        debug_assert_eq!(self.mode, RingMode::Normal);
        if tail != self.tail {
            self.tail = tail;
            self.tail_atomic().store(tail, Ordering::Release);
        }
    }

    /// `perf_event_header.size` of the record at 8-aligned position `pos`, which has at least 8 bytes
    /// published (so `size > 8`: `pending < size`).
    ///
    /// An aligned header never straddles the end (the size is a power of two larger than 8), so it is read in
    /// place: this is the hot path of every record walk.
    fn header_size(&self, pos: u64) -> u16 {
        let off = pos & (self.size - 1);
        if off + HEADER > self.size {
            return 0; // not reached for an aligned `pos`; keeps the read in bounds regardless
        }
        // SAFETY: `off + 8 <= size` (checked above), so bytes `off + 6 .. off + 8` lie in the area; they are
        // published record bytes the producer does not write while the batch lives (see `chunk`); the read
        // is unaligned-tolerant.
        unsafe { std::ptr::read_unaligned(self.data.as_ptr().add(off as usize + 6).cast::<u16>()) }
    }

    /// The `len` bytes at free-running position `pos`, as one or two slices. `len <= size`.
    pub(crate) fn chunk(&self, pos: u64, len: u64) -> Chunk<'_> {
        let mask = self.size - 1;
        let len = len.min(self.size);
        let off = pos & mask;
        let first = len.min(self.size - off);
        // `off < size`, `first <= size - off`, `len - first < size` and `size` fits in usize (checked at
        // construction), so the casts are lossless and both ranges lie inside the area.
        let (off, first, second) = (off as usize, first as usize, (len - first) as usize);
        let base = self.data.as_ptr();
        // SAFETY: `[off, off + first)` and `[0, second)` lie in the `size`-byte area (above). Callers only ask
        // for bytes the producer does not write while the returned borrow of `self` lives: `[tail, head)` in
        // normal mode while the tail cannot move (it needs `&mut self`), or a paused overwrite ring.
        unsafe {
            Chunk::new(
                std::slice::from_raw_parts(base.add(off), first),
                std::slice::from_raw_parts(base, second),
            )
        }
    }
}

impl Ring<Data> {
    /// Consumes one record like [`next_with`](Self::next_with), but loads the producer's head only when the
    /// records below the head seen last (`seen_head`) are used up: the per-record form of a batch.
    ///
    /// `seen_head` is the caller's memory of the last head loaded; start it at [`tail`](Self::tail) (or any
    /// value at or below the tail, which forces a load). Bytes below a head once loaded with `Acquire` stay
    /// complete and unwritten until the tail passes them, so reusing it is sound. The tail is published
    /// (`Release`) when `f` returns, as with `next_with`.
    ///
    /// # Errors
    ///
    /// As [`batch`](Self::batch) and [`Batch::next_record`].
    pub fn next_with_seen<R>(
        &mut self,
        seen_head: &mut u64,
        f: impl FnOnce(Chunk<'_>) -> R,
    ) -> Result<Option<R>, Error> {
        self.require(RingMode::Normal, "a forward read")?;
        let ahead = seen_head.wrapping_sub(self.tail);
        let head = if ahead == 0 || ahead >= self.size {
            let head = self.head();
            if head.wrapping_sub(self.tail) >= self.size {
                return Err(Error::RingHeadOutOfRange {
                    area: Data::NAME,
                    head,
                    tail: self.tail,
                    size: self.size,
                });
            }
            *seen_head = head;
            head
        } else {
            *seen_head
        };
        let pos = self.tail;
        let mut batch = Batch {
            ring: self,
            head,
            pos,
        };
        match batch.next_record()? {
            Some(record) => Ok(Some(f(record))),
            None => Ok(None),
        }
    }

    /// Consumes one record: calls `f` with its bytes, then moves the tail past it (also when `f` panics).
    ///
    /// Loads the head and stores the tail once per call; for many records prefer [`batch`](Self::batch).
    /// `Ok(None)` when the ring is empty.
    ///
    /// # Errors
    ///
    /// As [`batch`](Self::batch) and [`Batch::next_record`].
    pub fn next_with<R>(&mut self, f: impl FnOnce(Chunk<'_>) -> R) -> Result<Option<R>, Error> {
        let mut batch = self.batch()?;
        match batch.next_record()? {
            Some(record) => Ok(Some(f(record))),
            None => Ok(None),
        }
    }
}

/// A pass over the bytes published when it began; dropping it publishes the tail once (also on panic).
///
/// Chunks borrow the batch, so none outlives the tail store that lets the producer reuse their bytes.
#[derive(Debug)]
pub struct Batch<'r, A: Area> {
    ring: &'r mut Ring<A>,
    head: u64,
    pos: u64,
}

impl<A: Area> Batch<'_, A> {
    /// The head loaded when the batch began.
    pub fn head(&self) -> u64 {
        self.head
    }

    /// The position up to which this batch has consumed; published as the tail on drop.
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// Bytes of this batch not consumed yet.
    pub fn remaining(&self) -> u64 {
        self.head.wrapping_sub(self.pos)
    }

    /// The next at most `max_len` bytes (all remaining when `None`), as one or two slices, consumed.
    ///
    /// For the AUX area this is how trace bytes are read; on the data area it takes raw bytes without looking
    /// at record headers (perf record's way: copy everything out, parse later).
    pub fn next_chunk(&mut self, max_len: Option<u64>) -> Option<Chunk<'_>> {
        let len = self.remaining().min(max_len.unwrap_or(u64::MAX));
        if len == 0 {
            return None;
        }
        let pos = self.pos;
        self.pos = pos.wrapping_add(len);
        Some(self.ring.chunk(pos, len))
    }

    /// Publishes the tail now, keeping the batch open; chunks taken so far are given back to the producer.
    pub fn commit(&mut self) {
        self.ring.publish_tail(self.pos);
    }
}

impl Batch<'_, Data> {
    /// The next record (header included), or `None` at the batch's head.
    ///
    /// # Errors
    ///
    /// [`Error::RingCorruptRecord`] when the header's size is under 8, not a multiple of 8, or runs past the
    /// head (also when fewer than 8 bytes are left). The batch then stays at the bad record; see
    /// [`Ring::discard_pending`].
    pub fn next_record(&mut self) -> Result<Option<Chunk<'_>>, Error> {
        let available = self.remaining();
        if available == 0 {
            return Ok(None);
        }
        let size = if available >= HEADER && self.pos & (HEADER - 1) == 0 {
            self.ring.header_size(self.pos)
        } else {
            0
        };
        let len = u64::from(size);
        if len < HEADER || len & (HEADER - 1) != 0 || len > available {
            return Err(Error::RingCorruptRecord {
                position: self.pos,
                size,
                available,
            });
        }
        let pos = self.pos;
        self.pos = pos.wrapping_add(len);
        Ok(Some(self.ring.chunk(pos, len)))
    }
}

impl<A: Area> Drop for Batch<'_, A> {
    fn drop(&mut self) {
        self.ring.publish_tail(self.pos);
    }
}

/// Records of a paused overwrite (`write_backward`) data ring, newest first; see
/// [`Ring::backward_snapshot`].
#[derive(Debug)]
pub struct BackwardRecords<'r> {
    ring: &'r Ring<Data>,
    pos: u64,
    /// Bytes still allowed from `pos` (at most one ring).
    budget: u64,
    /// Whether the budget is exact (everything written since the start fits): a record crossing it is corrupt.
    exact: bool,
    failed: bool,
}

impl Ring<Data> {
    /// Reads a paused overwrite ring: the records written since the previous snapshot (or since the ring was
    /// created), newest first, at most one ring's worth.
    ///
    /// The kernel writes an overwrite ring backwards: `data_head` decreases by each record's size and the
    /// newest record starts at it. Walking forward from the head gives older and older records; the walk
    /// stops at the previous snapshot's head, at a zero header (never-written memory), or before a record
    /// that would go past one full ring (the oldest, partly overwritten one).
    ///
    /// Pause the ring first (`PERF_EVENT_IOC_PAUSE_OUTPUT`), or records may change under you.
    /// Since Linux 4.7 (`write_backward`).
    ///
    /// # Errors
    ///
    /// [`Error::RingMode`] on a normal ring. The iterator yields [`Error::RingCorruptRecord`] for an
    /// impossible header, then ends.
    pub fn backward_snapshot(&mut self) -> Result<BackwardRecords<'_>, Error> {
        self.require(RingMode::Overwrite, "a backward snapshot")?;
        let head = self.head();
        let written = self.tail.wrapping_sub(head);
        self.tail = head;
        let exact = written <= self.size;
        Ok(BackwardRecords {
            ring: self,
            pos: head,
            budget: written.min(self.size),
            exact,
            failed: false,
        })
    }
}

impl<'r> Iterator for BackwardRecords<'r> {
    type Item = Result<Chunk<'r>, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.budget < HEADER {
            return None;
        }
        let ring: &'r Ring<Data> = self.ring;
        let size = if self.pos & (HEADER - 1) == 0 {
            ring.chunk(self.pos, HEADER).read_u16(6).unwrap_or(0)
        } else {
            0
        };
        let len = u64::from(size);
        if size == 0 && self.pos & (HEADER - 1) == 0 {
            return None; // never written
        }
        if len < HEADER || len & (HEADER - 1) != 0 || (self.exact && len > self.budget) {
            self.failed = true;
            return Some(Err(Error::RingCorruptRecord {
                position: self.pos,
                size,
                available: self.budget,
            }));
        }
        if len > self.budget {
            return None; // the oldest record, partly overwritten by the newest
        }
        let pos = self.pos;
        self.pos = pos.wrapping_add(len);
        self.budget -= len;
        Some(Ok(ring.chunk(pos, len)))
    }
}

/// The bytes of an AUX area in overwrite (snapshot) mode; see [`Ring::aux_snapshot`].
#[derive(Clone, Copy, Debug)]
pub struct AuxSnapshot<'r> {
    /// `aux_head` when the snapshot was taken.
    pub head: u64,
    /// The bytes, oldest first, ending at `head`: two slices when they cross the end of the area.
    pub bytes: Chunk<'r>,
}

impl Ring<Aux> {
    /// Reads an AUX area in snapshot (overwrite) mode: the bytes written since the previous snapshot (or
    /// since the ring was created), at most one area and at most `max_len`, ending at `aux_head`.
    ///
    /// Disable the event (or pause the AUX output) first: the hardware keeps writing otherwise. Some PMUs
    /// publish `aux_head` as an offset rather than a free-running count in this mode; then use
    /// [`aux_snapshot_full`](Self::aux_snapshot_full) and the PMU's own way to find where its data starts.
    ///
    /// # Errors
    ///
    /// [`Error::RingMode`] on a normal AUX ring.
    pub fn aux_snapshot(&mut self, max_len: Option<u64>) -> Result<AuxSnapshot<'_>, Error> {
        self.require(RingMode::Overwrite, "an AUX snapshot")?;
        let head = self.head();
        let len = head
            .wrapping_sub(self.tail)
            .min(self.size)
            .min(max_len.unwrap_or(u64::MAX));
        self.tail = head;
        Ok(AuxSnapshot {
            head,
            bytes: self.chunk(head.wrapping_sub(len), len),
        })
    }

    /// The whole AUX area, oldest first if it has wrapped: the `size` bytes ending at `aux_head`.
    ///
    /// # Errors
    ///
    /// [`Error::RingMode`] on a normal AUX ring.
    pub fn aux_snapshot_full(&mut self) -> Result<AuxSnapshot<'_>, Error> {
        self.require(RingMode::Overwrite, "an AUX snapshot")?;
        let head = self.head();
        self.tail = head;
        Ok(AuxSnapshot {
            head,
            bytes: self.chunk(head.wrapping_sub(self.size), self.size),
        })
    }
}
