//! A simulated kernel: an mmap page, a data area and optionally an AUX area in ordinary memory, and a
//! producer ([`SimKernel`]) that writes them exactly as `kernel/events/ring_buffer.c` does.
//!
//! Rings built over it are the same [`Ring`] type the real mapping gives, so everything above the ring
//! (parsers, iterators, perf-event's samplers) can be tested without a kernel, under Miri and in a fuzzer.
//!
//! What the producer reproduces:
//! - forward (normal) data rings: the space check against `data_tail` (`CIRC_SPACE`, which always leaves a
//!   byte free), records padded to 8 bytes, the head published with `Release` after the bytes, and loss
//!   accounting: a record that does not fit is counted, and the next one that fits is preceded by a
//!   `PERF_RECORD_LOST { id, lost, sample_id }` for which room is reserved together with it;
//! - backward (overwrite) data rings: the head decreases by each record's size, the record is written at the
//!   new head, the tail is ignored, nothing is lost (but while paused);
//! - `PERF_EVENT_IOC_PAUSE_OUTPUT` ([`SimControl::pause`]): a write that *begins* while the output is paused
//!   is dropped and counted as lost; a write already in progress ([`SimKernel::begin_backward`]) completes,
//!   and rings wait for it as they wait for the kernel's (an RCU grace period);
//! - AUX areas: in normal mode writes up to the space `aux_tail` leaves and advances `aux_head`; in overwrite
//!   (snapshot) mode writes over old bytes. Each write with bytes is announced by a `PERF_RECORD_AUX
//!   { aux_offset, aux_size, flags }` in the data ring (normal data rings only);
//! - the mmap page's counter fields, updated under the `lock` sequence count ([`SimKernel::update_page`]).
//!
//! Writes that ignore the tail (overwrite rings) use atomic word stores, as the consumer copies those areas
//! with atomic word loads; deliberate corruption takes `&mut` of the consumer ring, which proves no chunk of it
//! is being read. The simulation is safe to use from safe code, also with the producer and consumer on two
//! threads.
//!
//! ```
//! use perf_core::sim::{Sim, SimConfig, SimOutput};
//!
//! let Sim { mut kernel, mut ring, .. } = Sim::new(SimConfig::new(4096))?;
//! assert!(matches!(kernel.output(9, 0, &[1, 2, 3, 4, 5, 6, 7, 8])?, SimOutput::Written { .. }));
//! let mut batch = ring.batch()?;
//! let record = batch.next_record()?.expect("one record");
//! assert_eq!(record.read_u32(0), Some(9)); // type
//! assert_eq!(record.read_u16(6), Some(16)); // size: header + body
//! assert_eq!(record.read_u64(8), Some(u64::from_ne_bytes([1, 2, 3, 4, 5, 6, 7, 8])));
//! # Ok::<(), perf_core::Error>(())
//! ```
//!
//! # Safety
//!
//! The region is one zeroed heap allocation for the page and data area (and one for the AUX area), freed when
//! the last handle drops. All pointers into it derive from the allocation's raw pointer. Head and tail fields
//! and the page's counter fields are accessed through atomics only; area bytes are written by the producer
//! with raw copies only where the protocol lets it write: in normal mode outside `[tail, head)` (the producer
//! checks the space, and refuses to write at all when the positions are inconsistent), or while it holds
//! `&mut` of the ring, so no chunk is alive. Overwrite areas are written with aligned atomic `u64` stores
//! only, and read by the consumer with atomic `u64` loads only (never borrowed).

use std::alloc::{self, Layout};
use std::mem::{offset_of, size_of};
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicBool, AtomicU16, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use perf_sys::{
    perf_event_mmap_page, PERF_AUX_FLAG_OVERWRITE, PERF_AUX_FLAG_TRUNCATED, PERF_RECORD_AUX,
    PERF_RECORD_LOST,
};

use crate::page::PageSnapshot;
use crate::ring::{Area, Aux, Data, Owner, Producer, Ring, RingMode};
use crate::Error;
use crate::ErrorKind;

/// Size of the simulated mmap page (and so `data_offset`).
pub const SIM_PAGE_SIZE: u64 = 4096;

/// Largest record: `perf_event_header.size` is a u16 and records are 8-byte aligned.
const MAX_RECORD: u64 = 0xfff8;

/// How to lay out a simulated region.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimConfig {
    /// Data area size in bytes: a power of two, at least 8 (the kernel's is a power of two of pages).
    pub data_size: u64,
    /// [`RingMode::Normal`]: forward writes with a tail. [`RingMode::Overwrite`]: backward writes, as with
    /// `write_backward` and a read-only mapping.
    pub data_mode: RingMode,
    /// AUX area size in bytes (a power of two), or 0 for none.
    pub aux_size: u64,
    /// Mode of the AUX area: normal (`aux_tail` respected) or overwrite (snapshot).
    pub aux_mode: RingMode,
    /// The `id` field written into `PERF_RECORD_LOST`.
    pub lost_id: u64,
    /// Bytes appended to `PERF_RECORD_LOST` and `PERF_RECORD_AUX` (the `sample_id` trailer when
    /// `sample_id_all` is set); padded to 8 bytes.
    pub sample_id: Vec<u8>,
}

impl SimConfig {
    /// A normal data ring of `data_size` bytes, no AUX area, `lost_id` 0, no `sample_id` trailer.
    pub fn new(data_size: u64) -> Self {
        SimConfig {
            data_size,
            data_mode: RingMode::Normal,
            aux_size: 0,
            aux_mode: RingMode::Normal,
            lost_id: 0,
            sample_id: Vec::new(),
        }
    }
}

/// A heap allocation, zeroed, freed on drop.
#[derive(Debug)]
struct Block {
    ptr: NonNull<u8>,
    layout: Layout,
}

impl Block {
    fn new(size: u64) -> Result<Block, Error> {
        let size = usize::try_from(size).map_err(|_| ErrorKind::Sim("region too large"))?;
        let layout = Layout::from_size_align(size, SIM_PAGE_SIZE as usize)
            .map_err(|_| ErrorKind::Sim("region too large"))?;
        if layout.size() == 0 {
            return Err(ErrorKind::Sim("empty region").into());
        }
        // SAFETY: the layout has a non-zero size (checked above).
        let ptr = unsafe { alloc::alloc_zeroed(layout) };
        match NonNull::new(ptr) {
            Some(ptr) => Ok(Block { ptr, layout }),
            None => alloc::handle_alloc_error(layout),
        }
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        // SAFETY: allocated in `Block::new` with this layout, freed once (the last owner drops the Region).
        unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

/// The simulated kernel memory: page + data area, and the AUX area.
#[derive(Debug)]
struct Region {
    main: Block,
    data_size: u64,
    aux: Option<(Block, u64)>,
    shared: Arc<SimShared>,
}

// SAFETY: the region is plain heap memory. Concurrent access follows the ring protocol: head, tail and page
// fields through atomics; area bytes written by the single producer only where no consumer reads (see the
// module's Safety section).
unsafe impl Send for Region {}
// SAFETY: as above.
unsafe impl Sync for Region {}

impl Region {
    fn page(&self) -> NonNull<perf_event_mmap_page> {
        self.main.ptr.cast()
    }

    fn data(&self) -> NonNull<u8> {
        // SAFETY: `SIM_PAGE_SIZE < main.layout.size()` (the data area follows the page), so the offset pointer
        // stays inside the allocation and is non-null.
        unsafe { self.main.ptr.add(SIM_PAGE_SIZE as usize) }
    }

    fn field<T>(&self, offset: usize) -> *mut T {
        self.main.ptr.as_ptr().wrapping_add(offset).cast()
    }

    fn u64_field(&self, offset: usize) -> &AtomicU64 {
        // SAFETY: an aligned u64 field of the page (the allocation is page aligned), valid while `self` is,
        // and only accessed atomically.
        unsafe { AtomicU64::from_ptr(self.field(offset)) }
    }

    fn u32_field(&self, offset: usize) -> &AtomicU32 {
        // SAFETY: as `u64_field`, for a u32 field.
        unsafe { AtomicU32::from_ptr(self.field(offset)) }
    }

    fn u16_field(&self, offset: usize) -> &AtomicU16 {
        // SAFETY: as `u64_field`, for a u16 field.
        unsafe { AtomicU16::from_ptr(self.field(offset)) }
    }

    /// Copies `bytes` into an area of `size` bytes at `base`, starting at masked position `pos`, wrapping.
    ///
    /// # Safety
    ///
    /// `base` is an area of `size` (a power of two) bytes in this region, and no reference to the written
    /// bytes is alive (no consumer chunk covers them).
    unsafe fn copy_in(base: NonNull<u8>, size: u64, pos: u64, bytes: &[u8]) {
        let mut pos = pos;
        let mut rest = bytes;
        while !rest.is_empty() {
            let off = pos & (size - 1);
            let n = (rest.len() as u64).min(size - off) as usize;
            let (now, later) = rest.split_at(n);
            // SAFETY: `off + n <= size`: inside the area; the caller guarantees nobody borrows those bytes.
            unsafe {
                std::ptr::copy_nonoverlapping(now.as_ptr(), base.as_ptr().add(off as usize), n);
            }
            pos = pos.wrapping_add(n as u64);
            rest = later;
        }
    }
}

impl Region {
    /// Stores `bytes` at free-running position `pos` of an overwrite area of `size` bytes at `base` with
    /// aligned atomic `u64` stores (read-modify-write at unaligned ends; the producer is the only writer).
    fn store_atomic(base: NonNull<u8>, size: u64, pos: u64, bytes: &[u8]) {
        let mut pos = pos;
        let mut done = 0usize;
        while done < bytes.len() {
            let off = pos & (size - 1);
            let word = off & !7;
            let skip = (off - word) as usize;
            let n = (8 - skip).min(bytes.len() - done);
            // SAFETY: `word < size` and 8-aligned in an 8-aligned area of `size` bytes inside the region,
            // accessed only atomically by producer and consumer alike (module Safety section).
            let cell = unsafe { AtomicU64::from_ptr(base.as_ptr().add(word as usize).cast()) };
            let mut value = cell.load(Ordering::Relaxed).to_ne_bytes();
            value[skip..skip + n].copy_from_slice(&bytes[done..done + n]);
            cell.store(u64::from_ne_bytes(value), Ordering::Relaxed);
            done += n;
            pos = pos.wrapping_add(n as u64);
        }
    }
}

/// The simulated event's controls and writes in progress, shared by the producer, its rings and
/// [`SimControl`] handles.
#[derive(Debug, Default)]
pub struct SimShared {
    paused: AtomicBool,
    disabled: AtomicBool,
    /// Writes begun and writes finished (the producer is one `&mut SimKernel`: they finish in order).
    started: AtomicU64,
    finished: AtomicU64,
    pause_lost: AtomicU64,
}

impl SimShared {
    /// Waits until every write that had begun when it was called has finished: what an RCU grace period
    /// gives for the kernel's writes (later writes are not waited for).
    pub(crate) fn wait_idle(&self, limit: Duration) -> Result<(), Error> {
        let begun = self.started.load(Ordering::SeqCst);
        let start = Instant::now();
        while self.finished.load(Ordering::SeqCst) < begun {
            if start.elapsed() > limit {
                return Err(
                    ErrorKind::Sim("a simulated write in progress did not finish in time").into(),
                );
            }
            std::thread::yield_now();
        }
        Ok(())
    }

    /// Enters a write: `false` (counted as lost) when the output is paused. Pairs with `SimControl::pause`:
    /// either the writer sees the pause, or the pauser sees the write begun and waits for it.
    fn enter(&self) -> bool {
        self.started.fetch_add(1, Ordering::SeqCst);
        if self.paused.load(Ordering::SeqCst) {
            self.finished.fetch_add(1, Ordering::SeqCst);
            self.pause_lost.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        true
    }

    fn leave(&self) {
        self.finished.fetch_add(1, Ordering::SeqCst);
    }
}

/// The ioctls of a simulated event: pause the output (`PERF_EVENT_IOC_PAUSE_OUTPUT`) and disable it
/// (`PERF_EVENT_IOC_DISABLE`, which stops AUX writes). Cheap to clone; usable from any thread.
#[derive(Clone, Debug)]
pub struct SimControl {
    shared: Arc<SimShared>,
}

impl SimControl {
    /// Pauses (`true`) or resumes the output. Writes that begin while paused are lost.
    pub fn pause(&self, pause: bool) {
        self.shared.paused.store(pause, Ordering::SeqCst);
    }

    /// Whether the output is paused.
    pub fn is_paused(&self) -> bool {
        self.shared.paused.load(Ordering::SeqCst)
    }

    /// Enables (`true`) or disables the event; a disabled event's AUX writes do nothing.
    pub fn enable(&self, enable: bool) {
        self.shared.disabled.store(!enable, Ordering::SeqCst);
    }

    /// Whether the event is enabled.
    pub fn is_enabled(&self) -> bool {
        !self.shared.disabled.load(Ordering::SeqCst)
    }

    /// Writes dropped because they began while the output was paused.
    pub fn lost_while_paused(&self) -> u64 {
        self.shared.pause_lost.load(Ordering::Relaxed)
    }
}

/// A simulated region, split into the producer and the consumer rings.
#[derive(Debug)]
pub struct Sim {
    /// The producer: writes records and AUX bytes like the kernel.
    pub kernel: SimKernel,
    /// The consumer of the data area.
    pub ring: Ring<Data>,
    /// The consumer of the AUX area, when the config asked for one.
    pub aux: Option<Ring<Aux>>,
    /// The event's controls (pause, enable).
    pub control: SimControl,
}

impl Sim {
    /// Allocates a zeroed region as `config` says, with the page's `data_offset`/`data_size` (and
    /// `aux_offset`/`aux_size`) filled in and `cap_bit0_is_deprecated` set, as a 6.x kernel would.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::BadRingSize`] if a size is not a power of two (or the data area is under 8 bytes);
    /// [`ErrorKind::Sim`] if the sample_id trailer makes a LOST record too large.
    pub fn new(config: SimConfig) -> Result<Sim, Error> {
        if config.data_size < 8 || !config.data_size.is_power_of_two() {
            return Err(ErrorKind::BadRingSize {
                area: Data::NAME,
                size: config.data_size,
            }
            .into());
        }
        if config.aux_size != 0 && !config.aux_size.is_power_of_two() {
            return Err(ErrorKind::BadRingSize {
                area: Aux::NAME,
                size: config.aux_size,
            }
            .into());
        }
        let trailer = pad8(&config.sample_id);
        if trailer.len() > 1024 {
            return Err(ErrorKind::Sim("sample_id trailer longer than 1 KiB").into());
        }
        let main = Block::new(
            SIM_PAGE_SIZE
                .checked_add(config.data_size)
                .ok_or(ErrorKind::Sim("region too large"))?,
        )?;
        let aux = if config.aux_size != 0 {
            Some((Block::new(config.aux_size)?, config.aux_size))
        } else {
            None
        };
        let shared = Arc::new(SimShared::default());
        let region = Arc::new(Region {
            main,
            data_size: config.data_size,
            aux,
            shared: Arc::clone(&shared),
        });
        region
            .u64_field(offset_of!(perf_event_mmap_page, data_offset))
            .store(SIM_PAGE_SIZE, Ordering::Relaxed);
        region
            .u64_field(offset_of!(perf_event_mmap_page, data_size))
            .store(config.data_size, Ordering::Relaxed);
        region
            .u64_field(offset_of!(perf_event_mmap_page, __bindgen_anon_1))
            .store(
                crate::page::Capabilities::BIT0_IS_DEPRECATED.bits(),
                Ordering::Relaxed,
            );
        if config.aux_size != 0 {
            let aux_offset = SIM_PAGE_SIZE + config.data_size;
            region
                .u64_field(offset_of!(perf_event_mmap_page, aux_offset))
                .store(aux_offset, Ordering::Relaxed);
            region
                .u64_field(offset_of!(perf_event_mmap_page, aux_size))
                .store(config.aux_size, Ordering::Relaxed);
        }
        let owner = Owner(region.clone());
        // SAFETY: the page and data area are in `region`, kept alive by `owner`, writable, page aligned; the
        // producer below follows the protocol (module Safety section); this is the region's only data ring.
        let ring = unsafe {
            Ring::with_producer(
                region.page(),
                region.data(),
                config.data_size,
                config.data_mode,
                Some(owner.clone()),
                Producer::Sim(Arc::clone(&shared)),
                None,
            )?
        };
        let aux_ring = match &region.aux {
            Some((block, size)) => {
                // SAFETY: as above, for the AUX block of `size` bytes; the region's only AUX ring.
                Some(unsafe {
                    Ring::with_producer(
                        region.page(),
                        block.ptr,
                        *size,
                        config.aux_mode,
                        Some(owner),
                        Producer::Sim(Arc::clone(&shared)),
                        None,
                    )?
                })
            }
            None => None,
        };
        Ok(Sim {
            kernel: SimKernel {
                region,
                head: 0,
                lost: 0,
                lost_total: 0,
                aux_head: 0,
                config: SimConfig {
                    sample_id: trailer,
                    ..config
                },
            },
            ring,
            aux: aux_ring,
            control: SimControl { shared },
        })
    }
}

fn pad8(bytes: &[u8]) -> Vec<u8> {
    let mut v = bytes.to_vec();
    v.resize(bytes.len().div_ceil(8) * 8, 0);
    v
}

/// What happened to a record the simulated kernel was asked to write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SimOutput {
    /// Written at free-running position `position`; `lost_first` if a `PERF_RECORD_LOST` went just before it.
    Written {
        /// Where the record starts.
        position: u64,
        /// Whether a LOST record was written before it.
        lost_first: bool,
    },
    /// No room: counted as lost, reported by the next record that fits.
    Lost,
}

/// What an AUX write did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimAuxOutput {
    /// `aux_head` before the write (the `aux_offset` of the AUX record).
    pub offset: u64,
    /// Bytes written (fewer than asked when a normal AUX area is nearly full).
    pub written: u64,
    /// The `PERF_AUX_FLAG_*` bits of the AUX record.
    pub flags: u64,
    /// What happened to the `PERF_RECORD_AUX` in the data ring (`None` when none was written).
    pub record: Option<SimOutput>,
}

/// The producer side of a simulated region: the kernel's writes, step by step.
#[derive(Debug)]
pub struct SimKernel {
    region: Arc<Region>,
    /// Our head (forward: increasing; backward: decreasing).
    head: u64,
    lost: u64,
    lost_total: u64,
    aux_head: u64,
    config: SimConfig,
}

impl SimKernel {
    fn data_head(&self) -> &AtomicU64 {
        self.region
            .u64_field(offset_of!(perf_event_mmap_page, data_head))
    }

    fn data_tail(&self) -> &AtomicU64 {
        self.region
            .u64_field(offset_of!(perf_event_mmap_page, data_tail))
    }

    /// The event's controls (pause, enable), as [`Sim::control`].
    pub fn control(&self) -> SimControl {
        SimControl {
            shared: Arc::clone(&self.region.shared),
        }
    }

    /// The data head as the producer has it.
    pub fn head(&self) -> u64 {
        self.head
    }

    /// The AUX head as the producer has it.
    pub fn aux_head(&self) -> u64 {
        self.aux_head
    }

    /// The `data_tail` the consumer has published (what the kernel would see).
    pub fn published_tail(&self) -> u64 {
        self.data_tail().load(Ordering::Acquire)
    }

    /// The `aux_tail` the consumer has published.
    pub fn published_aux_tail(&self) -> u64 {
        self.region
            .u64_field(offset_of!(perf_event_mmap_page, aux_tail))
            .load(Ordering::Acquire)
    }

    /// Records lost and not yet reported by a `PERF_RECORD_LOST`.
    pub fn pending_lost(&self) -> u64 {
        self.lost
    }

    /// Records lost since the start.
    pub fn total_lost(&self) -> u64 {
        self.lost_total
    }

    fn check_ring<A: Area>(&self, ring: &Ring<A>, data: NonNull<u8>) -> Result<(), Error> {
        if ring.page_ptr() == self.region.page() && ring.data_ptr() == data {
            Ok(())
        } else {
            Err(ErrorKind::Sim("the ring given is not this region's").into())
        }
    }

    fn require(&self, mode: RingMode, what: &'static str) -> Result<(), Error> {
        if self.config.data_mode == mode {
            Ok(())
        } else {
            Err(ErrorKind::Sim(what).into())
        }
    }

    /// Writes a record `{ header { ty, misc, size }, body }` into a normal data ring, as
    /// `perf_output_begin`/`perf_output_end` do: body padded to 8 bytes, a pending `PERF_RECORD_LOST` first.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Sim`] if the region's data ring is an overwrite ring or the record exceeds 64 KiB.
    pub fn output(&mut self, ty: u32, misc: u16, body: &[u8]) -> Result<SimOutput, Error> {
        self.output_nested(ty, misc, body, false)
    }

    /// [`output`](Self::output); `nested` inside a write already counted as begun (an AUX write's record),
    /// which then only checks the pause.
    fn output_nested(
        &mut self,
        ty: u32,
        misc: u16,
        body: &[u8],
        nested: bool,
    ) -> Result<SimOutput, Error> {
        self.require(RingMode::Normal, "output() needs a normal data ring")?;
        let record = encode(ty, misc, body)?;
        if nested {
            if self.region.shared.paused.load(Ordering::SeqCst) {
                self.region
                    .shared
                    .pause_lost
                    .fetch_add(1, Ordering::Relaxed);
                self.lost += 1;
                self.lost_total += 1;
                return Ok(SimOutput::Lost);
            }
            return Ok(self.output_entered(&record));
        }
        if !self.region.shared.enter() {
            self.lost += 1;
            self.lost_total += 1;
            return Ok(SimOutput::Lost);
        }
        let out = self.output_entered(&record);
        self.region.shared.leave();
        Ok(out)
    }

    /// The body of [`output`](Self::output) once the write has begun (not paused).
    fn output_entered(&mut self, record: &[u8]) -> SimOutput {
        let lost_record = if self.lost > 0 {
            let mut b = Vec::with_capacity(16 + self.config.sample_id.len());
            b.extend_from_slice(&self.config.lost_id.to_ne_bytes());
            b.extend_from_slice(&self.lost.to_ne_bytes());
            b.extend_from_slice(&self.config.sample_id);
            // A LOST body is 16 bytes plus a trailer of at most 1 KiB (checked by `Sim::new`): it encodes.
            encode(PERF_RECORD_LOST, 0, &b).ok()
        } else {
            None
        };
        let need = (record.len() + lost_record.as_ref().map_or(0, Vec::len)) as u64;
        let size = self.region.data_size;
        // (A): the tail is loaded before any byte is written; Acquire pairs with the consumer's Release store.
        let tail = self.data_tail().load(Ordering::Acquire);
        let used = self.head.wrapping_sub(tail);
        let space = if used < size {
            tail.wrapping_sub(self.head).wrapping_sub(1) & (size - 1) // CIRC_SPACE
        } else {
            0 // inconsistent positions: write nothing
        };
        if space < need {
            self.lost += 1;
            self.lost_total += 1;
            return SimOutput::Lost;
        }
        let lost_first = lost_record.is_some();
        let mut pos = self.head;
        if let Some(lost) = lost_record {
            // SAFETY: `[head, head + need)` is free space (CIRC_SPACE above): outside `[tail, head)`, which is
            // all a consumer may be reading.
            unsafe { Region::copy_in(self.region.data(), size, pos, &lost) };
            pos = pos.wrapping_add(lost.len() as u64);
            self.lost = 0;
        }
        let position = pos;
        // SAFETY: as above.
        unsafe { Region::copy_in(self.region.data(), size, pos, record) };
        self.head = pos.wrapping_add(record.len() as u64);
        // (B): bytes before head; Release pairs with the consumer's Acquire load.
        self.data_head().store(self.head, Ordering::Release);
        SimOutput::Written {
            position,
            lost_first,
        }
    }

    /// Writes a record into an overwrite (`write_backward`) data ring: the head moves down by the record's
    /// size and the record is written at the new head, over whatever was there (with atomic word stores, so
    /// a consumer may copy the ring at the same time). Dropped as lost while the output is paused.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Sim`] for a normal data ring, or a record over 64 KiB or larger than the ring.
    pub fn output_backward(&mut self, ty: u32, misc: u16, body: &[u8]) -> Result<SimOutput, Error> {
        match self.begin_backward(ty, misc, body)? {
            Some(write) => Ok(write.publish()),
            None => Ok(SimOutput::Lost),
        }
    }

    /// Begins a write into an overwrite data ring and leaves it in progress: the space is reserved below
    /// the head and the first half of the record is written, but the head is not published until
    /// [`SimWrite::publish`]. `None` (counted as lost) when the output is paused.
    ///
    /// This is the kernel's window between `perf_output_begin` (which checks the pause flag) and
    /// `perf_output_end` (which publishes the head): a write in it completes even if the output is paused
    /// meanwhile, and a consumer must wait for it (rings do: see `Ring::copy_backward`).
    ///
    /// # Errors
    ///
    /// As [`output_backward`](Self::output_backward).
    pub fn begin_backward(
        &mut self,
        ty: u32,
        misc: u16,
        body: &[u8],
    ) -> Result<Option<SimWrite<'_>>, Error> {
        self.require(
            RingMode::Overwrite,
            "output_backward() needs an overwrite data ring",
        )?;
        let record = encode(ty, misc, body)?;
        let size = self.region.data_size;
        if record.len() as u64 > size {
            return Err(ErrorKind::Sim("record larger than the ring").into());
        }
        if !self.region.shared.enter() {
            return Ok(None);
        }
        self.head = self.head.wrapping_sub(record.len() as u64);
        let half = (record.len() / 16) * 8;
        Region::store_atomic(self.region.data(), size, self.head, &record[..half]);
        Ok(Some(SimWrite {
            kernel: self,
            record,
            half,
        }))
    }

    /// Writes `bytes` into a normal AUX area as a PMU would, up to the space `aux_tail` leaves, then announces
    /// them with a `PERF_RECORD_AUX` (flag `TRUNCATED` when not everything fitted) and publishes `aux_head`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Sim`] when the region has no normal AUX area.
    pub fn aux_output(&mut self, bytes: &[u8]) -> Result<SimAuxOutput, Error> {
        let (base, size) = self.aux_area(RingMode::Normal)?;
        let tail = self
            .region
            .u64_field(offset_of!(perf_event_mmap_page, aux_tail))
            .load(Ordering::Acquire);
        let used = self.aux_head.wrapping_sub(tail);
        let space = if used < size { size - 1 - used } else { 0 };
        let n = space.min(bytes.len() as u64);
        let offset = self.aux_head;
        // SAFETY: `[aux_head, aux_head + n)` is free space: outside `[aux_tail, aux_head)`.
        unsafe { Region::copy_in(base, size, offset, &bytes[..n as usize]) };
        self.aux_head = offset.wrapping_add(n);
        let flags = if n < bytes.len() as u64 {
            u64::from(PERF_AUX_FLAG_TRUNCATED)
        } else {
            0
        };
        self.finish_aux(offset, n, flags, false)
    }

    /// Writes `bytes` into an overwrite (snapshot) AUX area, over the oldest bytes (with atomic word stores),
    /// and advances `aux_head` by their length; a `PERF_RECORD_AUX` with flag `OVERWRITE` follows. A
    /// disabled event ([`SimControl::enable`]) writes nothing.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Sim`] when the region has no overwrite AUX area.
    pub fn aux_output_overwrite(&mut self, bytes: &[u8]) -> Result<SimAuxOutput, Error> {
        let (base, size) = self.aux_area(RingMode::Overwrite)?;
        let shared = Arc::clone(&self.region.shared);
        if shared.disabled.load(Ordering::SeqCst) {
            return Ok(SimAuxOutput {
                offset: self.aux_head,
                written: 0,
                flags: 0,
                record: None,
            });
        }
        shared.started.fetch_add(1, Ordering::SeqCst);
        let offset = self.aux_head;
        // Only the last `size` bytes survive.
        let skip = bytes.len().saturating_sub(size as usize);
        Region::store_atomic(base, size, offset.wrapping_add(skip as u64), &bytes[skip..]);
        self.aux_head = offset.wrapping_add(bytes.len() as u64);
        let out = self.finish_aux(
            offset,
            bytes.len() as u64,
            u64::from(PERF_AUX_FLAG_OVERWRITE),
            true,
        );
        shared.leave();
        out
    }

    fn aux_area(&self, mode: RingMode) -> Result<(NonNull<u8>, u64), Error> {
        match &self.region.aux {
            Some((block, size)) if self.config.aux_mode == mode => Ok((block.ptr, *size)),
            Some(_) => Err(ErrorKind::Sim("the AUX area is in the other mode").into()),
            None => Err(ErrorKind::Sim("the region has no AUX area").into()),
        }
    }

    /// `perf_aux_output_end`; `counted` when the caller counted the write as begun.
    fn finish_aux(
        &mut self,
        offset: u64,
        written: u64,
        flags: u64,
        counted: bool,
    ) -> Result<SimAuxOutput, Error> {
        // perf_aux_output_end: the record first, then the head.
        let record = if (written != 0 || flags & !u64::from(PERF_AUX_FLAG_OVERWRITE) != 0)
            && self.config.data_mode == RingMode::Normal
        {
            let mut b = Vec::with_capacity(24 + self.config.sample_id.len());
            b.extend_from_slice(&offset.to_ne_bytes());
            b.extend_from_slice(&written.to_ne_bytes());
            b.extend_from_slice(&flags.to_ne_bytes());
            b.extend_from_slice(&self.config.sample_id);
            Some(self.output_nested(PERF_RECORD_AUX, 0, &b, counted)?)
        } else {
            None
        };
        self.region
            .u64_field(offset_of!(perf_event_mmap_page, aux_head))
            .store(self.aux_head, Ordering::Release);
        Ok(SimAuxOutput {
            offset,
            written,
            flags,
            record,
        })
    }

    /// Updates the page's counter and time fields as `perf_event_update_userpage` does: `lock` is
    /// incremented before and after the stores. `f` gets the current values (its `lock` is ignored).
    pub fn update_page(&self, f: impl FnOnce(&mut PageSnapshot)) {
        let r = &self.region;
        let lock = r.u32_field(offset_of!(perf_event_mmap_page, lock));
        let mut s = self.read_page_fields();
        f(&mut s);
        lock.fetch_add(1, Ordering::Relaxed);
        fence(Ordering::Release);
        let p = |o| r.u64_field(o);
        r.u32_field(offset_of!(perf_event_mmap_page, index))
            .store(s.index, Ordering::Relaxed);
        p(offset_of!(perf_event_mmap_page, offset)).store(s.offset as u64, Ordering::Relaxed);
        p(offset_of!(perf_event_mmap_page, time_enabled)).store(s.time_enabled, Ordering::Relaxed);
        p(offset_of!(perf_event_mmap_page, time_running)).store(s.time_running, Ordering::Relaxed);
        p(offset_of!(perf_event_mmap_page, __bindgen_anon_1))
            .store(s.capabilities.bits(), Ordering::Relaxed);
        r.u16_field(offset_of!(perf_event_mmap_page, pmc_width))
            .store(s.pmc_width, Ordering::Relaxed);
        r.u16_field(offset_of!(perf_event_mmap_page, time_shift))
            .store(s.time_shift, Ordering::Relaxed);
        r.u32_field(offset_of!(perf_event_mmap_page, time_mult))
            .store(s.time_mult, Ordering::Relaxed);
        p(offset_of!(perf_event_mmap_page, time_offset)).store(s.time_offset, Ordering::Relaxed);
        p(offset_of!(perf_event_mmap_page, time_zero)).store(s.time_zero, Ordering::Relaxed);
        p(offset_of!(perf_event_mmap_page, time_cycles)).store(s.time_cycles, Ordering::Relaxed);
        p(offset_of!(perf_event_mmap_page, time_mask)).store(s.time_mask, Ordering::Relaxed);
        lock.fetch_add(1, Ordering::Release);
    }

    /// Increments the page's `lock` once, as a writer entering (odd) or leaving (even) an update does; for
    /// tests of readers that meet a writer half-way.
    pub fn bump_page_lock(&self) {
        self.region
            .u32_field(offset_of!(perf_event_mmap_page, lock))
            .fetch_add(1, Ordering::AcqRel);
    }

    fn read_page_fields(&self) -> PageSnapshot {
        // SAFETY: the page lives as long as the region, and its fields are only accessed atomically.
        let page = unsafe { crate::page::UserPage::from_ptr(self.region.page()) };
        // Only the producer writes these fields, so this read cannot meet a writer.
        page.snapshot().unwrap_or_default()
    }

    /// Overwrites data-area bytes at free-running position `pos` (wrapping) with `bytes`: garbage that no
    /// kernel would write, for robustness tests. `ring` must be this region's data ring.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Sim`] for another region's ring.
    pub fn corrupt(&mut self, ring: &mut Ring<Data>, pos: u64, bytes: &[u8]) -> Result<(), Error> {
        self.check_ring(ring, self.region.data())?;
        let size = self.region.data_size;
        let bytes = &bytes[..bytes.len().min(size as usize)];
        // SAFETY: `ring` is mutably borrowed, so no chunk of the data area is alive.
        unsafe { Region::copy_in(self.region.data(), size, pos, bytes) };
        Ok(())
    }

    /// Sets the data area's head and tail (page and both sides) to arbitrary values, e.g. to resume from a
    /// position near `u64::MAX` or to fake an impossible head. `ring` must be this region's data ring.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Sim`] for another region's ring.
    pub fn set_positions(
        &mut self,
        ring: &mut Ring<Data>,
        head: u64,
        tail: u64,
    ) -> Result<(), Error> {
        self.check_ring(ring, self.region.data())?;
        self.head = head;
        self.data_head().store(head, Ordering::Release);
        self.data_tail().store(tail, Ordering::Release);
        ring.reset_positions(tail);
        Ok(())
    }
}

/// A write into an overwrite ring in progress; see [`SimKernel::begin_backward`].
#[derive(Debug)]
pub struct SimWrite<'k> {
    kernel: &'k mut SimKernel,
    record: Vec<u8>,
    half: usize,
}

impl SimWrite<'_> {
    /// Writes the rest of the record and publishes the head (`perf_output_end`).
    pub fn publish(self) -> SimOutput {
        let k = &mut *self.kernel;
        let size = k.region.data_size;
        Region::store_atomic(
            k.region.data(),
            size,
            k.head.wrapping_add(self.half as u64),
            &self.record[self.half..],
        );
        k.data_head().store(k.head, Ordering::Release);
        k.region.shared.leave();
        SimOutput::Written {
            position: k.head,
            lost_first: false,
        }
    }
}

/// `{ type: u32, misc: u16, size: u16 }` + body padded to 8 bytes.
fn encode(ty: u32, misc: u16, body: &[u8]) -> Result<Vec<u8>, Error> {
    let size = (size_of::<u64>() + body.len()).div_ceil(8) * 8;
    if size as u64 > MAX_RECORD {
        return Err(ErrorKind::Sim("record larger than 64 KiB").into());
    }
    let mut v = Vec::with_capacity(size);
    v.extend_from_slice(&ty.to_ne_bytes());
    v.extend_from_slice(&misc.to_ne_bytes());
    v.extend_from_slice(&(size as u16).to_ne_bytes());
    v.extend_from_slice(body);
    v.resize(size, 0);
    Ok(v)
}
