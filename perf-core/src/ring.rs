//! [`Ring`]: the consumer side of a perf ring buffer, one type for the data area and the AUX area.
//!
//! The kernel writes at a free-running `head` and never past `tail + size`; we read `[tail, head)` and
//! move `tail`. The area's fields in the mmap page differ (`data_head`/`data_tail` or `aux_head`/`aux_tail`),
//! the protocol does not, so [`Ring`] is generic over an [`Area`] marker: [`Data`] or [`Aux`].
//!
//! Memory ordering (see `include/uapi/linux/perf_event.h` and `kernel/events/ring_buffer.c`):
//! `head` is loaded with `Acquire` (pairs with the kernel's `smp_wmb()` before it publishes the head), record
//! bytes below the head are read plainly, and `tail` is stored with `Release` (pairs with the kernel's tail
//! load and control dependency before it reuses space). Our own tail is kept in the ring; we are its only
//! writer, so it is never re-read from the page. The head we act on is always one this ring loaded itself:
//! no public function takes a head (or a tail) from its caller.
//!
//! Overwrite areas (`write_backward` data rings, AUX snapshot mode) ignore the tail: the producer may write
//! any byte at any time, so they are never borrowed. [`Ring::copy_backward`] and [`Ring::copy_aux_snapshot`]
//! copy them out with atomic loads into owned buffers, then validate (see `overwrite.rs`).
//!
//! # Safety
//!
//! A `Ring` holds raw pointers into memory shared with a producer (the kernel, or [`crate::sim`]). Its
//! soundness rests on the contract of [`Ring::from_raw_parts`]: the memory stays mapped while the ring lives,
//! no other consumer reads the area or stores its tail, and the producer never writes bytes in
//! `[published tail, head)` of a normal ring. Chunks borrow the ring (or a [`Batch`], which borrows the ring
//! mutably), and the tail is only published by calls that need `&mut` of the ring, so no chunk outlives the
//! guarantee. Head and tail are only ever accessed through atomics. Every offset into the area is masked by
//! `size - 1` and every length is at most `size`, so no read leaves the area whatever the producer writes.

use std::any::Any;
use std::fmt;
use std::marker::PhantomData;
use std::mem::offset_of;
use std::num::NonZeroU64;
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use perf_sys::perf_event_mmap_page;

use crate::page::UserPage;
use crate::ErrorKind;
use crate::{fork, Chunk, Error};

/// Size of `struct perf_event_header`.
pub(crate) const HEADER: u64 = 8;

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
    /// AUX snapshot mode). Read it by copying ([`Ring::copy_backward`], [`Ring::copy_aux_snapshot`]) after
    /// pausing the producer (`PERF_EVENT_IOC_PAUSE_OUTPUT` for data, disabling the event for AUX).
    Overwrite,
}

impl RingMode {
    pub(crate) fn name(self) -> &'static str {
        match self {
            RingMode::Normal => "normal",
            RingMode::Overwrite => "overwrite",
        }
    }
}

/// What keeps a ring's memory alive (a mapping, a simulated region, or what the caller of
/// [`Ring::from_raw_parts`] gave).
///
/// It is only cloned and dropped, never read through: a panic cannot leave state in it that a later
/// reader would see half-updated, so it is unwind-safe whatever it holds (and rings and pages with it).
#[derive(Clone, Debug)]
pub(crate) struct Owner(#[allow(dead_code)] pub(crate) Arc<dyn Any + Send + Sync>); // kept, never read

impl std::panic::UnwindSafe for Owner {}
impl std::panic::RefUnwindSafe for Owner {}

/// Who writes the area: decides how [`Ring`] waits for writes already in progress (see `overwrite.rs`).
#[derive(Clone, Debug)]
pub(crate) enum Producer {
    /// The kernel, through a mapping of a perf fd.
    Kernel,
    /// The simulator, which counts its writes in progress.
    Sim(Arc<crate::sim::SimShared>),
    /// Memory handed to [`Ring::from_raw_parts`]: nothing is known about its writer.
    Unknown,
}

/// The consumer of one perf ring area: [`Ring<Data>`] for records, [`Ring<Aux>`] for AUX bytes.
///
/// Positions are free-running `u64` byte counts, masked by `size - 1` to index the area. Reading needs
/// `&mut self`, so one ring has one consumer. Get one from [`Ring::map_exclusive`] (safe: the kernel proves
/// the ring has no other consumer), [`Ring::map`] (`unsafe`: you promise it), or the simulator in
/// [`crate::sim`].
///
/// ```no_run
/// # fn f(fd: &perf_core::PerfFd) -> Result<(), perf_core::Error> {
/// use perf_core::{Ring, RingMode};
/// let mut ring = Ring::map_exclusive(fd, 8, RingMode::Normal)?; // 8 data pages
/// let mut batch = ring.batch()?;                                  // loads data_head once
/// while let Some(record) = batch.next_record()? {
///     let ty = record.read_u32(0);
///     let _ = ty;
/// }
/// drop(batch);                                                    // publishes data_tail once
/// # Ok(()) }
/// ```
pub struct Ring<A: Area> {
    page: NonNull<perf_event_mmap_page>,
    data: NonNull<u8>,
    size: u64,
    /// Normal mode: everything below has been consumed. Overwrite mode: the head seen at the last copy.
    pub(crate) tail: u64,
    /// Normal mode: the tail stored in the page (`<= tail`).
    published: u64,
    /// Normal mode: the head this ring loaded last (`tail <= seen_head`, `seen_head - tail < size`).
    seen_head: u64,
    mode: RingMode,
    owner: Option<Owner>,
    /// The fork generation the mapping belongs to (`None` for memory that fork copies, like the simulator's).
    generation: Option<u64>,
    /// The event, for rings made by [`Ring::map_exclusive`] (needed to map its AUX area safely).
    pub(crate) fd: Option<Arc<crate::PerfFd>>,
    /// Set while an AUX ring mapped through this data ring lives.
    pub(crate) aux_claim: Arc<AtomicBool>,
    pub(crate) producer: Producer,
    _area: PhantomData<A>,
}

// SAFETY: a Ring is a unique consumer handle to shared memory whose owner (a `Send + Sync` mapping or
// simulated region) is kept alive by `owner`, or by the caller of `from_raw_parts`. Moving it to another
// thread moves the only consumer; the producer synchronises with it through atomic head/tail only.
unsafe impl<A: Area> Send for Ring<A> {}
// SAFETY: every `&self` method only performs atomic loads of page fields (head, seqlock reads), reads the
// ring's own plain fields, or hands out chunks of `[published tail, seen_head)`, which nobody writes while
// `&self` lives (publishing the tail needs `&mut self`).
unsafe impl<A: Area> Sync for Ring<A> {}

impl<A: Area> fmt::Debug for Ring<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ring")
            .field("area", &A::NAME)
            .field("size", &self.size)
            .field("mode", &self.mode)
            .field("head", &self.head())
            .field("tail", &self.tail)
            .finish_non_exhaustive()
    }
}

impl<A: Area> Ring<A> {
    /// A ring over raw memory: the mmap page at `page` and the `size`-byte area at `data`.
    ///
    /// `owner`, if given, is kept alive as long as the ring (and rings derived from it, like the AUX ring of a
    /// data ring). The tail starts at the page's current tail field in normal mode; in overwrite mode the
    /// starting point of [`copy_backward`](Ring::copy_backward) and
    /// [`copy_aux_snapshot`](Ring::copy_aux_snapshot) is the page's current head.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::BadRingSize`] if `size` is not a power of two of at least 8 bytes that fits in `usize`.
    ///
    /// # Safety
    ///
    /// - `page` points to a `perf_event_mmap_page`, 8-byte aligned, readable for the ring's life, and its
    ///   tail field for this area is writable when `mode` is [`RingMode::Normal`].
    /// - `data` points to `size` readable bytes, 8-byte aligned, for the ring's life.
    /// - Only atomic accesses touch the head and tail fields, from anyone.
    /// - The producer follows the perf protocol: in normal mode it never writes bytes between the tail this
    ///   ring last published and the head it published (so a chunk being read is never written). In
    ///   overwrite mode it may write anywhere, but only with atomic (or, for a kernel, volatile) stores.
    /// - No other consumer reads this area or stores its tail while the ring lives.
    pub unsafe fn from_raw_parts(
        page: NonNull<perf_event_mmap_page>,
        data: NonNull<u8>,
        size: u64,
        mode: RingMode,
        owner: Option<Arc<dyn Any + Send + Sync>>,
    ) -> Result<Self, Error> {
        // SAFETY: the caller's contract is ours.
        unsafe {
            Self::with_producer(
                page,
                data,
                size,
                mode,
                owner.map(Owner),
                Producer::Unknown,
                None,
            )
        }
    }

    /// [`from_raw_parts`](Self::from_raw_parts) with what perf-core knows about the memory.
    ///
    /// # Safety
    ///
    /// As `from_raw_parts`; `generation` is `Some` only for mappings that `fork` does not copy and that
    /// are registered with [`fork::register`].
    pub(crate) unsafe fn with_producer(
        page: NonNull<perf_event_mmap_page>,
        data: NonNull<u8>,
        size: u64,
        mode: RingMode,
        owner: Option<Owner>,
        producer: Producer,
        generation: Option<u64>,
    ) -> Result<Self, Error> {
        if size < HEADER || !size.is_power_of_two() || usize::try_from(size).is_err() {
            return Err(ErrorKind::BadRingSize {
                area: A::NAME,
                size,
            }
            .into());
        }
        let mut ring = Ring {
            page,
            data,
            size,
            tail: 0,
            published: 0,
            seen_head: 0,
            mode,
            owner,
            generation,
            fd: None,
            aux_claim: Arc::default(),
            producer,
            _area: PhantomData,
        };
        match mode {
            RingMode::Normal => {
                let tail = ring.tail_atomic().load(Ordering::Relaxed);
                ring.tail = tail;
                ring.published = tail;
                ring.seen_head = tail;
            }
            RingMode::Overwrite => ring.tail = ring.head(),
        }
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

    fn tail_atomic(&self) -> &AtomicU64 {
        self.field(A::TAIL_OFFSET)
    }

    /// The producer's head, with `Acquire` ordering: bytes below it are complete.
    ///
    /// (A relaxed load followed by an acquire fence: the mapping of an overwrite ring is read-only, and only
    /// relaxed word-sized atomic loads are promised to work on read-only memory.)
    pub fn head(&self) -> u64 {
        let head = self.field(A::HEAD_OFFSET).load(Ordering::Relaxed);
        fence(Ordering::Acquire);
        head
    }

    /// Our tail: everything below it has been consumed (normal mode; it is published to the kernel as
    /// described at [`next_record`](Ring::next_record)); in overwrite mode, the head seen at the last copy.
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

    /// Bytes published and not yet consumed (`head - tail`) in normal mode; in overwrite mode, bytes written
    /// since the last copy. More than [`size`](Self::size) in normal mode means the ring is corrupt (a read
    /// would report it).
    pub fn pending_bytes(&self) -> u64 {
        match self.mode {
            RingMode::Normal => self.head().wrapping_sub(self.tail),
            RingMode::Overwrite => self.tail.wrapping_sub(self.head()),
        }
    }

    /// The mmap page this ring belongs to (counter index, time conversion, user-space counter reads).
    pub fn page(&self) -> UserPage<'_> {
        // SAFETY: the page is valid for reads for the ring's life (contract of `from_raw_parts`), which
        // outlives the returned borrow; in a fork child it is a zeroed placeholder (see `fork`).
        unsafe { UserPage::from_ptr(self.page) }
    }

    pub(crate) fn page_ptr(&self) -> NonNull<perf_event_mmap_page> {
        self.page
    }

    pub(crate) fn data_ptr(&self) -> NonNull<u8> {
        self.data
    }

    pub(crate) fn owner(&self) -> Option<&Owner> {
        self.owner.as_ref()
    }

    /// Sets our tail (and what we know was published) without storing it: the simulator moved the page's
    /// positions itself.
    pub(crate) fn reset_positions(&mut self, tail: u64) {
        self.tail = tail;
        self.published = tail;
        self.seen_head = tail;
    }

    /// Refuses to work in a child made by `fork()`: the kernel did not copy the mapping there.
    pub(crate) fn check_process(&self) -> Result<(), Error> {
        match self.generation {
            Some(g) if fork::forked_since(g) => {
                Err(ErrorKind::ForkedChild { area: A::NAME }.into())
            }
            _ => Ok(()),
        }
    }

    pub(crate) fn require(&self, mode: RingMode, what: &'static str) -> Result<(), Error> {
        if self.mode == mode {
            Ok(())
        } else {
            Err(ErrorKind::RingMode {
                area: A::NAME,
                what,
                needs: mode.name(),
                is: self.mode.name(),
            }
            .into())
        }
    }

    /// Loads the head for a forward read and checks it against our tail.
    fn load_head(&mut self) -> Result<u64, Error> {
        let head = self.head();
        // The producer always leaves at least one byte free (`CIRC_SPACE`), so a full ring is never seen.
        if head.wrapping_sub(self.tail) >= self.size {
            return Err(ErrorKind::RingHeadOutOfRange {
                area: A::NAME,
                head,
                tail: self.tail,
                size: self.size,
            }
            .into());
        }
        self.seen_head = head;
        Ok(head)
    }

    /// Stores our tail in the page (`Release`), giving the consumed bytes back to the producer.
    ///
    /// Only called with `&mut self`, so no chunk of the bytes below the tail is alive.
    fn publish(&mut self) {
        debug_assert_eq!(self.mode, RingMode::Normal);
        if self.tail != self.published && self.check_process().is_ok() {
            self.published = self.tail;
            self.tail_atomic().store(self.tail, Ordering::Release);
        }
    }

    /// Publishes the tail now: every record consumed so far goes back to the producer.
    ///
    /// [`next_record`](Ring::next_record) defers this; every other consuming call publishes on its own.
    pub fn commit(&mut self) {
        if self.mode == RingMode::Normal {
            self.publish();
        }
    }

    /// Starts a batch: loads the head once; the tail is published once, when the batch is dropped.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::RingMode`] on an overwrite ring (use [`Ring::copy_backward`] or
    /// [`Ring::copy_aux_snapshot`]); [`ErrorKind::RingHeadOutOfRange`] if the head is a whole ring or more
    /// ahead of the tail (the producer always leaves a byte free, so that is corruption);
    /// [`ErrorKind::ForkedChild`] in a child made by `fork()`.
    pub fn batch(&mut self) -> Result<Batch<'_, A>, Error> {
        self.require(RingMode::Normal, "a forward read")?;
        self.check_process()?;
        let head = self.load_head()?;
        let pos = self.tail;
        Ok(Batch {
            ring: self,
            head,
            pos,
        })
    }

    /// Drops everything published so far: sets the tail to the head and publishes it. The way out of a
    /// corrupt ring. Returns how many bytes were dropped.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::RingMode`] on an overwrite ring; [`ErrorKind::ForkedChild`] in a child made by `fork()`.
    pub fn discard_pending(&mut self) -> Result<u64, Error> {
        self.require(RingMode::Normal, "discarding")?;
        self.check_process()?;
        let head = self.head();
        let dropped = head.wrapping_sub(self.tail);
        self.tail = head;
        self.seen_head = head;
        self.publish();
        Ok(dropped)
    }

    /// `perf_event_header.size` of the record at 8-aligned position `pos`, which has at least 8 bytes
    /// published (so `size > 8`: `pending < size`).
    ///
    /// An aligned header never straddles the end (the size is a power of two of at least 8), so it is read
    /// in place: this is the hot path of every record walk.
    #[inline(always)]
    fn header_size(&self, pos: u64) -> u16 {
        let off = pos & (self.size - 1);
        if off + HEADER > self.size {
            return 0; // not reached for an aligned `pos`; keeps the read in bounds regardless
        }
        // SAFETY: `off + 8 <= size` (checked above), so bytes `off + 6 .. off + 8` lie in the area; they are
        // published record bytes the producer does not write while they are unconsumed (see `chunk`); the
        // read is unaligned-tolerant.
        unsafe { std::ptr::read_unaligned(self.data.as_ptr().add(off as usize + 6).cast::<u16>()) }
    }

    /// Checks the record header at `pos` with `available` bytes published from it; returns its length.
    fn record_len(&self, pos: u64, available: u64) -> Result<u64, Error> {
        let size = if available >= HEADER && pos & (HEADER - 1) == 0 {
            self.header_size(pos)
        } else {
            0
        };
        let len = u64::from(size);
        if len < HEADER || len & (HEADER - 1) != 0 || len > available {
            return Err(ErrorKind::RingCorruptRecord {
                position: pos,
                size,
                available,
            }
            .into());
        }
        Ok(len)
    }

    /// The `len` bytes at free-running position `pos`, as one or two slices. `len <= size`.
    ///
    /// Only for bytes of a normal ring in `[published tail, seen_head)` (records consumed and not given
    /// back yet, or not consumed yet), which the producer does not write until a published tail passes them.
    #[inline]
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
        // for bytes of a normal ring in `[published tail, seen_head)`: complete (below a head loaded with
        // Acquire) and not written by the producer until a tail past them is published, which needs
        // `&mut self`, so not while the returned borrow of `self` lives.
        unsafe {
            Chunk::new(
                std::slice::from_raw_parts(base.add(off), first),
                std::slice::from_raw_parts(base, second),
            )
        }
    }
}

impl Ring<Data> {
    /// Finds the next record: `(position, length)`, `None` when the ring is empty. Loads the head only when
    /// the records below the head seen last are used up, publishing the tail first; publishes a quarter
    /// ring's worth of consumed bytes on the way. Does not consume.
    #[inline(never)]
    fn take_record(&mut self) -> Result<Option<(u64, u64)>, Error> {
        self.require(RingMode::Normal, "a forward read")?;
        self.check_process()?;
        let mut available = self.seen_head.wrapping_sub(self.tail);
        if available == 0 {
            self.publish();
            available = self.load_head()?.wrapping_sub(self.tail);
            if available == 0 {
                return Ok(None);
            }
        } else if self.tail.wrapping_sub(self.published) >= self.size / 4 {
            self.publish();
        }
        let pos = self.tail;
        let len = self.record_len(pos, available)?;
        Ok(Some((pos, len)))
    }

    /// Consumes the next record and returns its bytes (header included); `None` when the ring is empty.
    ///
    /// The per-record form of a [`Batch`] for a consumer that keeps the ring between calls. The tail moves
    /// past the record at once, but is *published* to the kernel lazily, never while a chunk is alive:
    /// - when the records below the head loaded last are used up, before the head is loaded again (so also
    ///   when a call finds the ring empty);
    /// - when a quarter of the ring has been consumed since the last publication;
    /// - on [`commit`](Self::commit), on any other consuming call, and when the ring is dropped.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::RingCorruptRecord`] for an impossible header (the tail stays before it; see
    /// [`discard_pending`](Ring::discard_pending)), and as [`batch`](Ring::batch).
    #[inline]
    pub fn next_record(&mut self) -> Result<Option<Chunk<'_>>, Error> {
        let Some((pos, len)) = self.consume()? else {
            return Ok(None);
        };
        Ok(Some(self.chunk(pos, len)))
    }

    /// Consumes the next record like [`next_record`](Ring::next_record), but returns where it lies instead
    /// of borrowing the ring: read its bytes with [`consumed`](Ring::consumed) until the tail is published.
    /// For a consumer that must decide what to do with the ring (give it back, say) after finding it empty,
    /// which a borrow of the ring would forbid. The tail is published as for `next_record`.
    ///
    /// # Errors
    ///
    /// As [`next_record`](Ring::next_record).
    #[inline]
    pub fn next_span(&mut self) -> Result<Option<RecordSpan>, Error> {
        let Some((pos, len)) = self.consume()? else {
            return Ok(None);
        };
        // A record's length is at least the 8-byte header (checked by both paths above).
        Ok(NonZeroU64::new(len).map(|len| RecordSpan { pos, len }))
    }

    /// The bytes of a record this ring has consumed and not yet given back: `span` from
    /// [`next_span`](Ring::next_span). `None` when the span is not (or no longer) in the consumed,
    /// unpublished part of this ring, `[published tail, tail)`: those bytes are below the head and the
    /// producer does not write them until a tail past them is published, which needs `&mut self`.
    #[inline]
    pub fn consumed(&self, span: RecordSpan) -> Option<Chunk<'_>> {
        let (pos, len) = (span.pos, span.len.get());
        let window = self.tail.wrapping_sub(self.published);
        if self.mode != RingMode::Normal
            || pos.wrapping_sub(self.published) > window
            || len > self.tail.wrapping_sub(pos)
        {
            return None;
        }
        Some(self.chunk(pos, len))
    }

    /// Consumes the next record (moves the tail past it, not published): `(position, length)`, from
    /// the hot path when it can, else from [`take_record`](Ring::take_record).
    #[inline(always)]
    fn consume(&mut self) -> Result<Option<(u64, u64)>, Error> {
        let (pos, len) = match self.seen_record() {
            Some(span) => span,
            None => match self.take_record()? {
                Some(span) => span,
                None => return Ok(None),
            },
        };
        self.tail = pos.wrapping_add(len);
        Ok(Some((pos, len)))
    }

    /// The hot path of [`next_record`](Ring::next_record): the next record when it lies below the head
    /// loaded last and no publication is due, so neither the head nor the tail field is touched. `None`
    /// sends the caller to [`take_record`](Ring::take_record), which does every check (mode, process,
    /// head, header) and says why.
    ///
    /// It needs no fork check of its own: in a child made by `fork()` the area is a zeroed placeholder
    /// (see [`fork`]), whose header size 0 fails the check below, and nothing is published from here.
    #[inline(always)]
    fn seen_record(&self) -> Option<(u64, u64)> {
        let pos = self.tail;
        let available = self.seen_head.wrapping_sub(pos);
        if self.mode != RingMode::Normal
            || available < HEADER
            || available >= self.size
            || pos.wrapping_sub(self.published) >= self.size / 4
            || pos & (HEADER - 1) != 0
        {
            return None;
        }
        let len = u64::from(self.header_size(pos));
        if len < HEADER || len & (HEADER - 1) != 0 || len > available {
            return None;
        }
        Some((pos, len))
    }

    /// The record at 8-aligned position `pos` of a normal ring, with `available` bytes below a head
    /// this ring loaded (fewer than `size`), when its header is sound and it does not wrap the end:
    /// `(offset, length)` in the area. `None` for anything else (the checking paths say what).
    #[inline(always)]
    fn in_place(&self, pos: u64, available: u64) -> Option<(usize, usize)> {
        if available < HEADER || available >= self.size || pos & (HEADER - 1) != 0 {
            return None;
        }
        let len = u64::from(self.header_size(pos));
        let off = pos & (self.size - 1);
        if len < HEADER || len & (HEADER - 1) != 0 || len > available || off + len > self.size {
            return None;
        }
        // `off + len <= size`, which fits in usize (checked at construction): the casts are lossless.
        Some((off as usize, len as usize))
    }

    /// The bytes `[off, off + len)` of the area, from [`in_place`](Self::in_place).
    ///
    /// Only for a record of a normal ring in `[published tail, seen_head)`, as [`chunk`](Self::chunk).
    #[inline(always)]
    fn slice(&self, off: usize, len: usize) -> &[u8] {
        let len = len.min(self.size as usize - off.min(self.size as usize));
        // SAFETY: `off + len <= size` (clamped above; `in_place` already guarantees it), so the range lies
        // in the `size`-byte area. Callers only pass records below a head this ring loaded with Acquire and
        // at or after the published tail, which the producer does not write until a tail past them is
        // published; that needs `&mut self`, so not while the returned borrow of `self` lives.
        unsafe { std::slice::from_raw_parts(self.data.as_ptr().add(off), len) }
    }

    /// Consumes the next record when it needs none of the work [`next_record`](Ring::next_record)
    /// may do: it lies below the head loaded last, does not wrap the ring's end, and no publication is
    /// due. Returns its bytes (header included, one slice, 8-byte aligned when the area is); `None`
    /// consumes nothing and says only "not here": call `next_record`, which does every check
    /// (mode, process, head, header) and says why.
    ///
    /// The hot path of a per-record reader: it touches neither the head nor the tail field of the
    /// page, and the tail is published as described at `next_record`. It needs no fork check of its
    /// own: in a child made by `fork()` the area is a zeroed placeholder (see [`fork`]), whose header
    /// size 0 sends every call to `next_record`, which refuses.
    #[inline(always)]
    pub fn next_seen(&mut self) -> Option<&[u8]> {
        let pos = self.tail;
        if self.mode != RingMode::Normal || pos.wrapping_sub(self.published) >= self.size / 4 {
            return None;
        }
        let (off, len) = self.in_place(pos, self.seen_head.wrapping_sub(pos))?;
        self.tail = pos.wrapping_add(len as u64);
        Some(self.slice(off, len))
    }

    /// Consumes one record: calls `f` with its bytes, then publishes the tail past it (also when `f`
    /// panics). `Ok(None)` when the ring is empty.
    ///
    /// Loads the head only when the records below the head loaded last are used up (one shared-cache-line
    /// load per burst of records, not per record); stores the tail once per call. For many records prefer
    /// [`batch`](Ring::batch) or [`next_record`](Ring::next_record).
    ///
    /// # Errors
    ///
    /// As [`next_record`](Ring::next_record).
    pub fn next_with<R>(&mut self, f: impl FnOnce(Chunk<'_>) -> R) -> Result<Option<R>, Error> {
        let Some((pos, len)) = self.take_record()? else {
            return Ok(None);
        };
        let advance = Advance {
            ring: self,
            end: pos.wrapping_add(len),
        };
        Ok(Some(f(advance.ring.chunk(pos, len))))
    }
}

/// Where a record consumed by [`Ring::next_span`] lies: its free-running position and its length (header
/// included). Only its ring reads it back ([`Ring::consumed`]), and only until the tail is published.
///
/// Two words, so that an `Option<RecordSpan>` is returned in registers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RecordSpan {
    pos: u64,
    /// At least the 8-byte header.
    len: NonZeroU64,
}

impl RecordSpan {
    /// The record's free-running position in its ring.
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// The record's length in bytes, header included (at least 8).
    #[allow(clippy::len_without_is_empty)] // a record is never empty
    pub fn len(&self) -> u64 {
        self.len.get()
    }
}

/// Consumes up to `end` and publishes it when dropped (also on unwind from the closure that read the bytes).
struct Advance<'r> {
    ring: &'r mut Ring<Data>,
    end: u64,
}

impl Drop for Advance<'_> {
    fn drop(&mut self) {
        self.ring.tail = self.end;
        self.ring.publish();
    }
}

impl<A: Area> Drop for Ring<A> {
    fn drop(&mut self) {
        // Consumed is released: a ring that shares its mapping (an AUX ring keeps the data ring's mapping)
        // must not keep the producer waiting for space it will never read.
        if self.mode == RingMode::Normal {
            self.publish();
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
        self.ring.tail = self.pos;
        self.ring.publish();
    }
}

impl Batch<'_, Data> {
    /// The next record (header included), or `None` at the batch's head.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::RingCorruptRecord`] when the header's size is under 8, not a multiple of 8, or runs past the
    /// head (also when fewer than 8 bytes are left). The batch then stays at the bad record; see
    /// [`Ring::discard_pending`].
    pub fn next_record(&mut self) -> Result<Option<Chunk<'_>>, Error> {
        let available = self.remaining();
        if available == 0 {
            return Ok(None);
        }
        let len = self.ring.record_len(self.pos, available)?;
        let pos = self.pos;
        self.pos = pos.wrapping_add(len);
        Ok(Some(self.ring.chunk(pos, len)))
    }

    /// The next record when it does not wrap the ring's end and its header is sound: its bytes
    /// (header included) as one slice, consumed. `None` consumes nothing: call
    /// [`next_record`](Batch::next_record), which hands out a wrapped record as two slices, reports a
    /// bad header, and says when the batch is used up.
    ///
    /// The hot path of a batch walk (no error value to build, no second slice to look at).
    #[inline(always)]
    pub fn next_seen(&mut self) -> Option<&[u8]> {
        if self.ring.mode != RingMode::Normal {
            return None;
        }
        let pos = self.pos;
        let (off, len) = self.ring.in_place(pos, self.head.wrapping_sub(pos))?;
        self.pos = pos.wrapping_add(len as u64);
        Some(self.ring.slice(off, len))
    }
}

impl<A: Area> Drop for Batch<'_, A> {
    fn drop(&mut self) {
        self.commit();
    }
}
