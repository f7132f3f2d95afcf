//! [`SampleView`]: a sample validated in one pass and read lazily, and [`RecordView`], what
//! [`RawRecord::view`](crate::RawRecord::view) returns.
//!
//! Decoding every field of a sample ([`SampleFields`]) costs a consumer that reads a few of them the price
//! of all; the view instead walks the sample once, checking every length against the record's size and
//! noting where each variable-position field starts. Its accessors then read one field each, and cannot
//! fail: a view exists only for a sample whose layout [`parse`](crate::RawRecord::parse) would accept. The
//! parsed [`Sample`] is the same walk's result with the config copied, and reads its fields through a view.

use perf_sys::*;

use super::bytes::{Bytes, U64s};
use super::config::{SamplePrefix, ABSENT, KNOWN_READ_FORMAT, KNOWN_SAMPLE_TYPE};
use super::cursor::Cursor;
use super::kinds::Record;
use super::raw::RawRecord;
use super::sample::{
    decode_sample, parse_branch_stack, parse_read, parse_regs, parse_stack_user, BranchStack,
    Callchain, ReadValues, Regs, Sample, SampleFields, StackUser, Weight,
};
use super::{Misc, ThreadId};
use crate::ErrorKind;
use crate::{Chunk, Error, ParseConfig};

// Indexes into `SampleView::at`: the fields after the fixed prefix, in the kernel's order.
const READ: usize = 0;
const CALLCHAIN: usize = 1;
const RAW: usize = 2;
const BRANCH_STACK: usize = 3;
const REGS_USER: usize = 4;
const STACK_USER: usize = 5;
const WEIGHT: usize = 6;
const DATA_SRC: usize = 7;
const TRANSACTION: usize = 8;
const REGS_INTR: usize = 9;
const PHYS_ADDR: usize = 10;
const CGROUP: usize = 11;
const DATA_PAGE_SIZE: usize = 12;
const CODE_PAGE_SIZE: usize = 13;
const AUX: usize = 14;

// Indexes into `SampleView::seg`: where each run of fields after a variable-length one starts. READ starts
// right after the fixed prefix; the fields of a run sit at fixed distances from its start.
const SEG_CALLCHAIN: usize = 0;
const SEG_RAW: usize = 1;
const SEG_BRANCH_STACK: usize = 2;
const SEG_REGS_USER: usize = 3;
const SEG_STACK_USER: usize = 4;
/// WEIGHT, DATA_SRC, TRANSACTION, then REGS_INTR.
const SEG_MIDDLE: usize = 5;
/// PHYS_ADDR, CGROUP, DATA_PAGE_SIZE, CODE_PAGE_SIZE, then AUX.
const SEG_TAIL: usize = 6;
const SEGMENTS: usize = 8;

/// Where each run of a sample's fields starts (what [`layout`] notes).
pub(crate) type Segments = [u32; SEGMENTS];

/// The sample_type bits whose fields come after the fixed prefix.
const AFTER_PREFIX: u64 = (PERF_SAMPLE_READ
    | PERF_SAMPLE_CALLCHAIN
    | PERF_SAMPLE_RAW
    | PERF_SAMPLE_BRANCH_STACK
    | PERF_SAMPLE_REGS_USER
    | PERF_SAMPLE_STACK_USER
    | PERF_SAMPLE_WEIGHT
    | PERF_SAMPLE_WEIGHT_STRUCT
    | PERF_SAMPLE_DATA_SRC
    | PERF_SAMPLE_TRANSACTION
    | PERF_SAMPLE_REGS_INTR
    | PERF_SAMPLE_PHYS_ADDR
    | PERF_SAMPLE_CGROUP
    | PERF_SAMPLE_DATA_PAGE_SIZE
    | PERF_SAMPLE_CODE_PAGE_SIZE
    | PERF_SAMPLE_AUX) as u64;

/// A record as [`RawRecord::view`](crate::RawRecord::view) gives it: a lazily read sample, or any other
/// record, checked, which [`OtherView::record`] parses (those are rare beside samples). Both variants are
/// small (80 bytes on 64-bit targets), so a view stays in registers in a caller's loop where a [`Record`]
/// (200 bytes) goes through memory.
///
/// ```
/// use perf_core::record::RecordView;
/// use perf_core::{Chunk, ParseConfig, ParseFields, RawRecord};
/// use perf_sys::*;
///
/// let cfg = ParseConfig::new(ParseFields {
///     sample_type: (PERF_SAMPLE_IP | PERF_SAMPLE_TIME | PERF_SAMPLE_CALLCHAIN) as u64,
///     ..Default::default()
/// });
/// let mut bytes = Vec::new();
/// bytes.extend_from_slice(&PERF_RECORD_SAMPLE.to_ne_bytes());
/// bytes.extend_from_slice(&(PERF_RECORD_MISC_USER as u16).to_ne_bytes());
/// bytes.extend_from_slice(&48u16.to_ne_bytes());
/// for word in [0x401000u64, 12345, 2, 0x401000, 0x402000] {
///     bytes.extend_from_slice(&word.to_ne_bytes()); // ip, time, callchain nr and ips
/// }
///
/// let (raw, _) = RawRecord::from_chunk(Chunk::contiguous(&bytes))?;
/// let RecordView::Sample(s) = raw.view(&cfg)? else { panic!("not a sample") };
/// assert_eq!(s.ip(), Some(0x401000));
/// assert_eq!(s.time(), Some(12345));
/// assert_eq!(s.addr(), None); // not in the sample_type
/// let ips: Vec<u64> = s.callchain().unwrap().ips.iter().collect();
/// assert_eq!(ips, [0x401000, 0x402000]);
/// assert_eq!(perf_core::Record::Sample(s.to_sample()), raw.parse(&cfg)?);
///
/// // Any other record: checked by the view, parsed on demand.
/// let mut lost = Vec::new();
/// lost.extend_from_slice(&PERF_RECORD_LOST.to_ne_bytes());
/// lost.extend_from_slice(&0u16.to_ne_bytes());
/// lost.extend_from_slice(&24u16.to_ne_bytes());
/// lost.extend_from_slice(&7u64.to_ne_bytes()); // id
/// lost.extend_from_slice(&3u64.to_ne_bytes()); // lost
/// let (raw, _) = RawRecord::from_chunk(Chunk::contiguous(&lost))?;
/// let RecordView::Other(other) = raw.view(&cfg)? else { panic!("not another record") };
/// assert_eq!(other.record_type(), PERF_RECORD_LOST);
/// let perf_core::Record::Lost(l) = other.record() else { panic!("not LOST") };
/// assert_eq!((l.id, l.lost), (7, 3));
/// # Ok::<(), perf_core::Error>(())
/// ```
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum RecordView<'a> {
    /// `PERF_RECORD_SAMPLE`, validated, its fields read on demand.
    #[doc(alias = "PERF_RECORD_SAMPLE")]
    Sample(SampleView<'a>),
    /// Any other record type, checked as [`RawRecord::parse`](crate::RawRecord::parse) checks it;
    /// [`OtherView::record`] gives the typed record (never [`Record::Sample`]).
    Other(OtherView<'a>),
}

impl<'a> RecordView<'a> {
    /// The `PERF_RECORD_*` type.
    pub fn record_type(&self) -> u32 {
        match self {
            RecordView::Sample(_) => PERF_RECORD_SAMPLE,
            RecordView::Other(r) => r.record_type(),
        }
    }

    /// The typed record, as [`RawRecord::parse`](crate::RawRecord::parse) gives it.
    pub fn to_record(&self) -> Record<'a> {
        match self {
            RecordView::Sample(s) => Record::Sample(s.to_sample()),
            RecordView::Other(r) => r.record(),
        }
    }
}

/// A record other than a sample that [`RawRecord::parse`](crate::RawRecord::parse) accepts, as
/// [`RawRecord::view`](crate::RawRecord::view) gives it: the raw record and its config, small enough for a
/// view to stay in registers (48 bytes, where a [`Record`] is 200). [`record`](Self::record) parses it.
#[derive(Clone, Copy)]
pub struct OtherView<'a> {
    raw: RawRecord<'a>,
    cfg: &'a ParseConfig,
}

impl<'a> OtherView<'a> {
    /// `raw`, which `cfg` parses without error and is not a sample.
    pub(crate) const fn new(raw: RawRecord<'a>, cfg: &'a ParseConfig) -> Self {
        OtherView { raw, cfg }
    }

    /// The `PERF_RECORD_*` type.
    pub const fn record_type(&self) -> u32 {
        self.raw.record_type()
    }

    /// The record's header and bytes.
    pub const fn raw(&self) -> RawRecord<'a> {
        self.raw
    }

    /// The typed record, as [`RawRecord::parse`](crate::RawRecord::parse) gives it (parsed again: the view
    /// only checked it). Allocates nothing.
    pub fn record(&self) -> Record<'a> {
        match self.raw.parse(self.cfg) {
            Ok(record) => record,
            // Unreachable: the view exists only for a record that parses.
            Err(_) => Record::Unknown(super::kinds::Unknown {
                record_type: self.raw.record_type(),
                misc: self.raw.misc(),
                data: Bytes::borrowed(self.raw.data()),
            }),
        }
    }
}

impl std::fmt::Debug for OtherView<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("OtherView").field(&self.record()).finish()
    }
}

/// A `PERF_RECORD_SAMPLE` checked against its layout in one pass and read lazily: each accessor decodes one
/// field of the record's bytes (borrowed from the ring, across its seam when the record wraps).
///
/// Made by [`RawRecord::view`](crate::RawRecord::view) or, fastest, [`RawRecord::sample_view`](crate::RawRecord::sample_view),
/// only when [`parse`](crate::RawRecord::parse) would succeed, so every accessor returns exactly the matching field of the parsed [`Sample`]: `Some` when the
/// event's `sample_type` selects the field, `None` otherwise. Accessors neither allocate nor fail.
/// [`to_sample`](Self::to_sample) gives the [`Sample`] (and `.to_sample().into_owned()` an owned one),
/// [`fields`](Self::fields) every field decoded.
///
/// The view borrows the [`ParseConfig`] as well as the bytes; it holds the body, a reference to the
/// config and where each run of fields after a variable-length one starts (80 bytes in all, where a
/// [`Sample`], which copies the config, is 144).
#[doc(alias = "PERF_RECORD_SAMPLE")]
#[derive(Clone, Copy)]
pub struct SampleView<'a> {
    data: Chunk<'a>,
    cfg: &'a ParseConfig,
    /// Where each run of fields after a variable-length one starts in `data` (see `SEG_*`).
    seg: [u32; SEGMENTS],
    misc: Misc,
}

impl<'a> SampleView<'a> {
    /// Validates `data` (a sample body) against `cfg` and notes where its fields start; `None` where
    /// [`RawRecord::parse`](crate::RawRecord::parse) fails (whose error [`refusal`] gives). As an
    /// `Option`, the view stays in registers in a caller's loop.
    #[inline(always)]
    pub(crate) fn try_new(misc: Misc, data: Chunk<'a>, cfg: &'a ParseConfig) -> Option<Self> {
        let mut seg = [0; SEGMENTS];
        layout(data, cfg, &mut seg)?;
        Some(SampleView {
            data,
            cfg,
            seg,
            misc,
        })
    }

    /// A view of `data` whose `seg` an earlier [`try_new`](Self::try_new) with the same `cfg` noted.
    #[inline(always)]
    pub(crate) const fn from_parts(
        misc: Misc,
        data: Chunk<'a>,
        cfg: &'a ParseConfig,
        seg: Segments,
    ) -> Self {
        SampleView {
            data,
            cfg,
            seg,
            misc,
        }
    }

    #[inline(always)]
    fn prefix(&self) -> SamplePrefix {
        self.cfg.sample_prefix()
    }

    /// The header's misc bits: [`cpumode`](Misc::cpumode), [`exact_ip`](Misc::exact_ip).
    #[inline(always)]
    pub const fn misc(&self) -> Misc {
        self.misc
    }

    /// The sample's body: everything after the header.
    #[inline(always)]
    pub const fn data(&self) -> Chunk<'a> {
        self.data
    }

    #[inline(always)]
    fn prefix_u64(&self, off: u8) -> Option<u64> {
        if off == ABSENT {
            None
        } else {
            self.data.read_u64(off as usize)
        }
    }

    /// Where `field` (one of the indexes above) starts in `data`, or `None` when the sample does not carry it.
    #[inline(always)]
    fn at(&self, field: usize) -> Option<usize> {
        let st = self.cfg.sample_type();
        let bit = |b: u32| st & b as u64 != 0;
        let word = |b: u32| if bit(b) { 8 } else { 0 };
        let weight = if bit(PERF_SAMPLE_WEIGHT) || bit(PERF_SAMPLE_WEIGHT_STRUCT) {
            8
        } else {
            0
        };
        let seg = |i: usize| self.seg.get(i).map(|&s| s as usize);
        let middle = |skip: usize| seg(SEG_MIDDLE).map(|s| s + skip);
        let tail = |skip: usize| seg(SEG_TAIL).map(|s| s + skip);
        // The sums stay within the body: `layout` checked that every present field fits.
        let (present, start) = match field {
            READ => (
                bit(PERF_SAMPLE_READ),
                Some(self.cfg.sample_prefix().len as usize),
            ),
            CALLCHAIN => (bit(PERF_SAMPLE_CALLCHAIN), seg(SEG_CALLCHAIN)),
            RAW => (bit(PERF_SAMPLE_RAW), seg(SEG_RAW)),
            BRANCH_STACK => (bit(PERF_SAMPLE_BRANCH_STACK), seg(SEG_BRANCH_STACK)),
            REGS_USER => (bit(PERF_SAMPLE_REGS_USER), seg(SEG_REGS_USER)),
            STACK_USER => (bit(PERF_SAMPLE_STACK_USER), seg(SEG_STACK_USER)),
            WEIGHT => (weight != 0, middle(0)),
            DATA_SRC => (bit(PERF_SAMPLE_DATA_SRC), middle(weight)),
            TRANSACTION => (
                bit(PERF_SAMPLE_TRANSACTION),
                middle(weight + word(PERF_SAMPLE_DATA_SRC)),
            ),
            REGS_INTR => (
                bit(PERF_SAMPLE_REGS_INTR),
                middle(weight + word(PERF_SAMPLE_DATA_SRC) + word(PERF_SAMPLE_TRANSACTION)),
            ),
            PHYS_ADDR => (bit(PERF_SAMPLE_PHYS_ADDR), tail(0)),
            CGROUP => (bit(PERF_SAMPLE_CGROUP), tail(word(PERF_SAMPLE_PHYS_ADDR))),
            DATA_PAGE_SIZE => (
                bit(PERF_SAMPLE_DATA_PAGE_SIZE),
                tail(word(PERF_SAMPLE_PHYS_ADDR) + word(PERF_SAMPLE_CGROUP)),
            ),
            CODE_PAGE_SIZE => (
                bit(PERF_SAMPLE_CODE_PAGE_SIZE),
                tail(
                    word(PERF_SAMPLE_PHYS_ADDR)
                        + word(PERF_SAMPLE_CGROUP)
                        + word(PERF_SAMPLE_DATA_PAGE_SIZE),
                ),
            ),
            AUX => (
                bit(PERF_SAMPLE_AUX),
                tail(
                    word(PERF_SAMPLE_PHYS_ADDR)
                        + word(PERF_SAMPLE_CGROUP)
                        + word(PERF_SAMPLE_DATA_PAGE_SIZE)
                        + word(PERF_SAMPLE_CODE_PAGE_SIZE),
                ),
            ),
            _ => (false, None),
        };
        if present {
            start
        } else {
            None
        }
    }

    #[inline(always)]
    fn word(&self, field: usize) -> Option<u64> {
        self.data.read_u64(self.at(field)?)
    }

    /// A cursor over the bytes from `field`'s start to the end of the sample.
    #[inline(always)]
    fn cursor(&self, field: usize) -> Option<Cursor<'a>> {
        let at = self.at(field)?;
        let len = self.data.len().checked_sub(at)?;
        Some(Cursor::new(self.data.get(at, len)?, len, "SAMPLE"))
    }

    /// `PERF_SAMPLE_IDENTIFIER`: the event id, at a fixed position.
    #[doc(alias = "PERF_SAMPLE_IDENTIFIER")]
    #[inline(always)]
    pub fn identifier(&self) -> Option<u64> {
        self.prefix_u64(self.prefix().identifier)
    }

    /// `PERF_SAMPLE_IP`: the instruction pointer.
    #[doc(alias = "PERF_SAMPLE_IP")]
    #[inline(always)]
    pub fn ip(&self) -> Option<u64> {
        self.prefix_u64(self.prefix().ip)
    }

    /// `PERF_SAMPLE_TID`: process and thread id.
    #[doc(alias = "PERF_SAMPLE_TID")]
    #[inline(always)]
    pub fn thread(&self) -> Option<ThreadId> {
        let off = self.prefix().tid;
        if off == ABSENT {
            return None;
        }
        // One load for both halves.
        let [a, b, c, d, e, f, g, h] = self.data.read_u64(off as usize)?.to_ne_bytes();
        Some(ThreadId {
            pid: u32::from_ne_bytes([a, b, c, d]),
            tid: u32::from_ne_bytes([e, f, g, h]),
        })
    }

    /// `PERF_SAMPLE_TIME`: perf clock timestamp in ns.
    #[doc(alias = "PERF_SAMPLE_TIME")]
    #[inline(always)]
    pub fn time(&self) -> Option<u64> {
        self.prefix_u64(self.prefix().time)
    }

    /// `PERF_SAMPLE_ADDR`: the data address (page faults, memory events, breakpoints).
    #[doc(alias = "PERF_SAMPLE_ADDR")]
    #[inline(always)]
    pub fn addr(&self) -> Option<u64> {
        self.prefix_u64(self.prefix().addr)
    }

    /// `PERF_SAMPLE_ID`: the event id (of the group leader when read through a group).
    #[doc(alias = "PERF_SAMPLE_ID")]
    #[inline(always)]
    pub fn id(&self) -> Option<u64> {
        self.prefix_u64(self.prefix().id)
    }

    /// `PERF_SAMPLE_STREAM_ID`: the id of the event that opened the stream.
    #[doc(alias = "PERF_SAMPLE_STREAM_ID")]
    #[inline(always)]
    pub fn stream_id(&self) -> Option<u64> {
        self.prefix_u64(self.prefix().stream_id)
    }

    /// `PERF_SAMPLE_CPU`: the CPU (the reserved half-word is dropped).
    #[doc(alias = "PERF_SAMPLE_CPU")]
    #[inline(always)]
    pub fn cpu(&self) -> Option<u32> {
        let off = self.prefix().cpu;
        if off == ABSENT {
            None
        } else {
            self.data.read_u32(off as usize)
        }
    }

    /// `PERF_SAMPLE_PERIOD`: the sample period.
    #[doc(alias = "PERF_SAMPLE_PERIOD")]
    #[inline(always)]
    pub fn period(&self) -> Option<u64> {
        self.prefix_u64(self.prefix().period)
    }

    /// `PERF_SAMPLE_READ`: counter values, laid out by `read_format`.
    #[doc(alias = "PERF_SAMPLE_READ")]
    pub fn read(&self) -> Option<ReadValues<'a>> {
        parse_read(&mut self.cursor(READ)?, self.cfg).ok()
    }

    /// `PERF_SAMPLE_CALLCHAIN`: instruction pointers with `PERF_CONTEXT_*` markers.
    #[doc(alias = "PERF_SAMPLE_CALLCHAIN")]
    #[inline(always)]
    pub fn callchain(&self) -> Option<Callchain<'a>> {
        let at = self.at(CALLCHAIN)?;
        let nr = usize::try_from(self.data.read_u64(at)?).ok()?;
        Some(Callchain {
            ips: U64s::borrowed(self.data.get(at + 8, nr.checked_mul(8)?)?),
        })
    }

    /// `PERF_SAMPLE_RAW`: opaque data (tracepoint fields), including the kernel's alignment padding.
    #[doc(alias = "PERF_SAMPLE_RAW")]
    #[inline(always)]
    pub fn raw(&self) -> Option<Bytes<'a>> {
        let at = self.at(RAW)?;
        let size = self.data.read_u32(at)? as usize;
        Some(Bytes::borrowed(self.data.get(at + 4, size)?))
    }

    /// `PERF_SAMPLE_BRANCH_STACK`: the last branches taken.
    #[doc(alias = "PERF_SAMPLE_BRANCH_STACK")]
    pub fn branch_stack(&self) -> Option<BranchStack<'a>> {
        parse_branch_stack(&mut self.cursor(BRANCH_STACK)?, self.cfg).ok()
    }

    /// `PERF_SAMPLE_REGS_USER`: user registers selected by `sample_regs_user`.
    #[doc(alias = "PERF_SAMPLE_REGS_USER")]
    pub fn regs_user(&self) -> Option<Regs<'a>> {
        let mut c = self.cursor(REGS_USER)?;
        let (mask, count) = (self.cfg.regs_user_mask(), self.cfg.regs_user_count());
        parse_regs(&mut c, mask, count, "regs_user").ok()
    }

    /// `PERF_SAMPLE_STACK_USER`: a copy of the user stack.
    #[doc(alias = "PERF_SAMPLE_STACK_USER")]
    pub fn stack_user(&self) -> Option<StackUser<'a>> {
        parse_stack_user(&mut self.cursor(STACK_USER)?).ok()
    }

    /// `PERF_SAMPLE_WEIGHT` or `PERF_SAMPLE_WEIGHT_STRUCT`: the raw weight word; see [`Weight`].
    #[doc(alias = "PERF_SAMPLE_WEIGHT")]
    #[doc(alias = "PERF_SAMPLE_WEIGHT_STRUCT")]
    #[inline(always)]
    pub fn weight(&self) -> Option<Weight> {
        self.word(WEIGHT).map(Weight)
    }

    /// `PERF_SAMPLE_DATA_SRC`: the memory data source (`union perf_mem_data_src`).
    #[doc(alias = "PERF_SAMPLE_DATA_SRC")]
    #[inline(always)]
    pub fn data_src(&self) -> Option<u64> {
        self.word(DATA_SRC)
    }

    /// `PERF_SAMPLE_TRANSACTION`: transactional memory abort flags.
    #[doc(alias = "PERF_SAMPLE_TRANSACTION")]
    #[inline(always)]
    pub fn transaction(&self) -> Option<u64> {
        self.word(TRANSACTION)
    }

    /// `PERF_SAMPLE_REGS_INTR`: registers at the interrupt, selected by `sample_regs_intr`.
    #[doc(alias = "PERF_SAMPLE_REGS_INTR")]
    pub fn regs_intr(&self) -> Option<Regs<'a>> {
        let mut c = self.cursor(REGS_INTR)?;
        let (mask, count) = (self.cfg.regs_intr_mask(), self.cfg.regs_intr_count());
        parse_regs(&mut c, mask, count, "regs_intr").ok()
    }

    /// `PERF_SAMPLE_PHYS_ADDR`: physical address of `addr`. Since Linux 4.13.
    #[doc(alias = "PERF_SAMPLE_PHYS_ADDR")]
    #[inline(always)]
    pub fn phys_addr(&self) -> Option<u64> {
        self.word(PHYS_ADDR)
    }

    /// `PERF_SAMPLE_CGROUP`: cgroup id (v2 inode number). Since Linux 5.7.
    #[doc(alias = "PERF_SAMPLE_CGROUP")]
    #[inline(always)]
    pub fn cgroup(&self) -> Option<u64> {
        self.word(CGROUP)
    }

    /// `PERF_SAMPLE_DATA_PAGE_SIZE`: page size of `addr`. Since Linux 5.11.
    #[doc(alias = "PERF_SAMPLE_DATA_PAGE_SIZE")]
    #[inline(always)]
    pub fn data_page_size(&self) -> Option<u64> {
        self.word(DATA_PAGE_SIZE)
    }

    /// `PERF_SAMPLE_CODE_PAGE_SIZE`: page size of `ip`. Since Linux 5.11.
    #[doc(alias = "PERF_SAMPLE_CODE_PAGE_SIZE")]
    #[inline(always)]
    pub fn code_page_size(&self) -> Option<u64> {
        self.word(CODE_PAGE_SIZE)
    }

    /// `PERF_SAMPLE_AUX`: a snapshot of the AUX area. Since Linux 5.5.
    #[doc(alias = "PERF_SAMPLE_AUX")]
    pub fn aux(&self) -> Option<Bytes<'a>> {
        let at = self.at(AUX)?;
        let size = usize::try_from(self.data.read_u64(at)?).ok()?;
        Some(Bytes::borrowed(self.data.get(at + 8, size)?))
    }

    /// The [`Sample`] that [`RawRecord::parse`](crate::RawRecord::parse) gives: the same body and offsets
    /// with a copy of the config, so that it can outlive the config and be made owned. Allocates nothing.
    #[inline]
    pub fn to_sample(&self) -> Sample<'a> {
        Sample::new(self.misc, self.data, self.cfg, self.seg)
    }

    /// Every field decoded at once.
    pub fn fields(&self) -> SampleFields<'a> {
        SampleFields {
            misc: self.misc,
            identifier: self.identifier(),
            ip: self.ip(),
            thread: self.thread(),
            time: self.time(),
            addr: self.addr(),
            id: self.id(),
            stream_id: self.stream_id(),
            cpu: self.cpu(),
            period: self.period(),
            read: self.read(),
            callchain: self.callchain(),
            raw: self.raw(),
            branch_stack: self.branch_stack(),
            regs_user: self.regs_user(),
            stack_user: self.stack_user(),
            weight: self.weight(),
            data_src: self.data_src(),
            transaction: self.transaction(),
            regs_intr: self.regs_intr(),
            phys_addr: self.phys_addr(),
            cgroup: self.cgroup(),
            data_page_size: self.data_page_size(),
            code_page_size: self.code_page_size(),
            aux: self.aux(),
        }
    }
}

impl std::fmt::Debug for SampleView<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("SampleView").field(&self.fields()).finish()
    }
}

/// `n` words of 8 bytes past `pos`, or `None` on overflow.
#[inline(always)]
fn skip_words(pos: usize, n: u64) -> Option<usize> {
    pos.checked_add(usize::try_from(n).ok()?.checked_mul(8)?)
}

/// `PERF_SAMPLE_REGS_*` at `pos`: the ABI word, then `count` values unless the ABI is NONE.
#[inline(always)]
fn skip_regs(data: Chunk<'_>, pos: usize, count: usize) -> Option<usize> {
    let abi = data.read_u64(pos)?;
    let words = if abi == PERF_SAMPLE_REGS_ABI_NONE as u64 {
        1
    } else {
        1 + count as u64
    };
    skip_words(pos, words)
}

/// One pass over a sample body: notes in `seg` where each run of fields starts; `None` when the body does
/// not match the layout exactly (what [`decode_sample`] reports as an error).
#[inline(always)]
fn layout(data: Chunk<'_>, cfg: &ParseConfig, seg: &mut [u32; SEGMENTS]) -> Option<()> {
    let st = cfg.sample_type();
    let rf = cfg.read_format();
    if st & !KNOWN_SAMPLE_TYPE != 0 || rf & !KNOWN_READ_FORMAT != 0 {
        return None;
    }
    let len = data.len();
    let mut pos = cfg.sample_prefix().len as usize;
    if st & AFTER_PREFIX == 0 {
        return (pos == len).then_some(());
    }
    // Offsets are stored as u32; a longer body (impossible for a record, whose size is a u16) is refused.
    if u32::try_from(len).is_err() {
        return None;
    }
    let has = |bit: u32| st & bit as u64 != 0;
    let words = |bits: u32| (st & bits as u64).count_ones() as usize * 8;
    // `pos` only grows and the walk ends with `pos == len`, so every start noted in `seg` is at most `len`
    // (the casts do not truncate) and every field skipped without a read lies inside the body; the reads
    // (counts and sizes) are bounds-checked where they happen.
    if has(PERF_SAMPLE_READ) {
        let fmt = |bit: u32| rf & bit as u64 != 0;
        let times =
            fmt(PERF_FORMAT_TOTAL_TIME_ENABLED) as u64 + fmt(PERF_FORMAT_TOTAL_TIME_RUNNING) as u64;
        let per_value = 1 + fmt(PERF_FORMAT_ID) as u64 + fmt(PERF_FORMAT_LOST) as u64;
        pos = if fmt(PERF_FORMAT_GROUP) {
            let nr = data.read_u64(pos)?;
            skip_words(skip_words(pos, 1 + times)?, nr.checked_mul(per_value)?)?
        } else {
            skip_words(pos, times + per_value)?
        };
    }
    seg[SEG_CALLCHAIN] = pos as u32;
    if has(PERF_SAMPLE_CALLCHAIN) {
        let nr = data.read_u64(pos)?;
        pos = skip_words(pos + 8, nr)?;
    }
    seg[SEG_RAW] = pos as u32;
    if has(PERF_SAMPLE_RAW) {
        let size = data.read_u32(pos)? as usize;
        pos = (pos + 4).checked_add(size)?;
    }
    seg[SEG_BRANCH_STACK] = pos as u32;
    if has(PERF_SAMPLE_BRANCH_STACK) {
        let nr = data.read_u64(pos)?;
        pos = skip_words(pos, 1 + cfg.has_branch(PERF_SAMPLE_BRANCH_HW_INDEX) as u64)?;
        let per_entry = 3 + cfg.has_branch(PERF_SAMPLE_BRANCH_COUNTERS) as u64;
        pos = skip_words(pos, nr.checked_mul(per_entry)?)?;
    }
    seg[SEG_REGS_USER] = pos as u32;
    if has(PERF_SAMPLE_REGS_USER) {
        pos = skip_regs(data, pos, cfg.regs_user_count())?;
    }
    seg[SEG_STACK_USER] = pos as u32;
    if has(PERF_SAMPLE_STACK_USER) {
        let size = data.read_u64(pos)?;
        pos = (pos + 8).checked_add(usize::try_from(size).ok()?)?;
        if size > 0 {
            pos = pos.checked_add(8)?; // dyn_size
        }
    }
    seg[SEG_MIDDLE] = pos as u32;
    let weight = if has(PERF_SAMPLE_WEIGHT) || has(PERF_SAMPLE_WEIGHT_STRUCT) {
        8
    } else {
        0
    };
    pos = pos.checked_add(weight + words(PERF_SAMPLE_DATA_SRC | PERF_SAMPLE_TRANSACTION))?;
    if has(PERF_SAMPLE_REGS_INTR) {
        pos = skip_regs(data, pos, cfg.regs_intr_count())?;
    }
    seg[SEG_TAIL] = pos as u32;
    pos = pos.checked_add(words(
        PERF_SAMPLE_PHYS_ADDR
            | PERF_SAMPLE_CGROUP
            | PERF_SAMPLE_DATA_PAGE_SIZE
            | PERF_SAMPLE_CODE_PAGE_SIZE,
    ))?;
    if has(PERF_SAMPLE_AUX) {
        let size = data.read_u64(pos)?;
        pos = (pos + 8).checked_add(usize::try_from(size).ok()?)?;
    }
    (pos == len).then_some(())
}

/// Where each run of fields of the sample body `data` starts, for a [`Sample`] to keep: the one-pass check of
/// [`SampleView::try_new`], with the error [`refusal`] gives for a body it refuses.
#[inline(always)]
pub(crate) fn segments_of(
    misc: Misc,
    data: Chunk<'_>,
    cfg: &ParseConfig,
) -> Result<Segments, Error> {
    let mut seg = [0; SEGMENTS];
    match layout(data, cfg, &mut seg) {
        Some(()) => Ok(seg),
        None => Err(refusal(misc, data, cfg)),
    }
}

/// The error for a body the view refused: the one the field-by-field [`decode_sample`] reports, which names
/// the field that does not fit.
#[cold]
#[inline(never)]
pub(crate) fn refusal(misc: Misc, data: Chunk<'_>, cfg: &ParseConfig) -> Error {
    match decode_sample(misc, data, cfg) {
        Err(e) => e,
        // The view and the full parse disagree (a bug): report the body as not matching its layout.
        Ok(_) => ErrorKind::Truncated {
            record: "SAMPLE",
            field: "?",
            len: data.len(),
        }
        .into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A view is small enough to stay in registers, and a parsed sample is small too: its fields are read
    /// from the body it keeps (every field decoded, a `SampleFields`, is ~700 bytes).
    #[test]
    fn a_view_and_its_result_are_small() {
        use std::mem::size_of;
        eprintln!(
            "Sample {} Record {} Result<Record> {} SampleFields {}",
            size_of::<Sample<'_>>(),
            size_of::<Record<'_>>(),
            size_of::<Result<Record<'_>, Error>>(),
            size_of::<SampleFields<'_>>()
        );
        assert!(size_of::<SampleFields<'_>>() > 500);
        assert!(size_of::<Sample<'_>>() <= 20 * size_of::<usize>());
        assert!(size_of::<Record<'_>>() <= 25 * size_of::<usize>());
        assert!(size_of::<OtherView<'_>>() <= 6 * size_of::<usize>());
        assert!(size_of::<RecordView<'_>>() <= 10 * size_of::<usize>());
        assert!(size_of::<Result<RecordView<'_>, Error>>() <= 11 * size_of::<usize>());
    }
}
