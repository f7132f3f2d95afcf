//! `PERF_RECORD_SAMPLE` and the variable-length pieces it is made of.

use perf_sys::*;

use super::bytes::{Bytes, U64s};
use super::cursor::{Cursor, Parsed};
use super::view::{SampleView, Segments};
use super::{Misc, ThreadId};
use crate::ErrorKind;
use crate::{Chunk, Error, ParseConfig};

/// A sample, checked against its layout when it was parsed: its body (borrowed from the ring until
/// [`into_owned`](Self::into_owned)), a copy of the [`ParseConfig`] it was parsed with, and where each run of
/// fields starts. Each accessor decodes one field and cannot fail: `Some` exactly when the field's
/// `PERF_SAMPLE_*` bit is set. [`fields`](Self::fields) decodes them all into a [`SampleFields`], and
/// [`from_fields`](Self::from_fields) builds a sample from one.
///
/// It is small (144 bytes on 64-bit targets, where every field decoded is 696), so that
/// [`RawRecord::parse`](crate::RawRecord::parse) costs little more than the [`SampleView`] that
/// [`RawRecord::view`](crate::RawRecord::view) gives; [`view`](Self::view) gives that view.
///
/// Equality compares the decoded fields, so samples from different configs with the same fields are equal.
///
/// ```
/// use perf_core::record::{Record, Sample, SampleFields, ThreadId};
/// use perf_core::{ParseConfig, ParseFields};
/// use perf_sys::*;
///
/// let cfg = ParseConfig::new(ParseFields {
///     sample_type: (PERF_SAMPLE_IP | PERF_SAMPLE_TID) as u64,
///     ..Default::default()
/// });
/// let fields = SampleFields {
///     ip: Some(0x401000),
///     thread: Some(ThreadId { pid: 7, tid: 8 }),
///     ..Default::default()
/// };
/// let sample = Sample::from_fields(&fields, &cfg)?;
/// assert_eq!(sample.ip(), Some(0x401000));
/// assert_eq!(sample.time(), None);
/// assert_eq!(sample.fields(), fields);
///
/// let mut bytes = Vec::new();
/// Record::Sample(sample.clone()).encode(&cfg, &mut bytes)?;
/// let (raw, _) = perf_core::RawRecord::from_chunk(perf_core::Chunk::contiguous(&bytes))?;
/// assert_eq!(raw.parse(&cfg)?, Record::Sample(sample));
/// # Ok::<(), perf_core::Error>(())
/// ```
#[doc(alias = "PERF_RECORD_SAMPLE")]
#[derive(Clone)]
pub struct Sample<'a> {
    body: Bytes<'a>,
    cfg: ParseConfig,
    seg: Segments,
    misc: Misc,
}

/// The accessors of [`Sample`], each the same-named one of its [`SampleView`].
macro_rules! from_view {
    ($($(#[$attr:meta])* $name:ident -> $ty:ty;)*) => {
        $(
            $(#[$attr])*
            #[inline]
            pub fn $name(&self) -> $ty {
                self.view().$name()
            }
        )*
    };
}

impl<'a> Sample<'a> {
    /// The sample of `data`, whose `seg` a [`SampleView`] with `cfg` noted (the body borrowed, the config
    /// copied).
    #[inline(always)]
    pub(crate) fn new(misc: Misc, data: Chunk<'a>, cfg: &ParseConfig, seg: Segments) -> Self {
        Sample {
            body: Bytes::borrowed(data),
            cfg: *cfg,
            seg,
            misc,
        }
    }

    /// The sample with these fields as `cfg` lays them out (owned): fails, naming the field, when a
    /// field is present without its `PERF_SAMPLE_*` bit or missing with it, or does not fit the config
    /// (register counts, branch entries).
    pub fn from_fields(
        fields: &SampleFields<'_>,
        cfg: &ParseConfig,
    ) -> Result<Sample<'static>, Error> {
        let body = crate::encode::sample_body(fields, cfg)?;
        let seg = super::view::segments_of(fields.misc, Chunk::contiguous(&body), cfg)?;
        Ok(Sample {
            body: Bytes::from(body),
            cfg: *cfg,
            seg,
            misc: fields.misc,
        })
    }

    /// The lazy view of this sample, borrowing it.
    #[inline(always)]
    pub fn view(&self) -> SampleView<'_> {
        SampleView::from_parts(self.misc, self.body.chunk(), &self.cfg, self.seg)
    }

    /// The config the sample was parsed with (its `sample_type`, `read_format` and so on).
    #[inline]
    pub const fn config(&self) -> &ParseConfig {
        &self.cfg
    }

    /// The header's misc bits: [`cpumode`](Misc::cpumode), [`exact_ip`](Misc::exact_ip).
    #[inline]
    pub const fn misc(&self) -> Misc {
        self.misc
    }

    /// The sample's body: everything after the header, as the kernel wrote it.
    #[inline]
    pub fn data(&self) -> Chunk<'_> {
        self.body.chunk()
    }

    /// Every field decoded at once.
    pub fn fields(&self) -> SampleFields<'_> {
        self.view().fields()
    }

    /// An owned copy that no longer borrows the ring (one allocation: the body).
    pub fn into_owned(self) -> Sample<'static> {
        Sample {
            body: self.body.into_owned(),
            cfg: self.cfg,
            seg: self.seg,
            misc: self.misc,
        }
    }

    from_view! {
        /// `PERF_SAMPLE_IDENTIFIER`: the event id, at a fixed position.
        #[doc(alias = "PERF_SAMPLE_IDENTIFIER")]
        identifier -> Option<u64>;
        /// `PERF_SAMPLE_IP`: the instruction pointer.
        #[doc(alias = "PERF_SAMPLE_IP")]
        ip -> Option<u64>;
        /// `PERF_SAMPLE_TID`: process and thread id.
        #[doc(alias = "PERF_SAMPLE_TID")]
        thread -> Option<ThreadId>;
        /// `PERF_SAMPLE_TIME`: perf clock timestamp in ns.
        #[doc(alias = "PERF_SAMPLE_TIME")]
        time -> Option<u64>;
        /// `PERF_SAMPLE_ADDR`: the data address (page faults, memory events, breakpoints).
        #[doc(alias = "PERF_SAMPLE_ADDR")]
        addr -> Option<u64>;
        /// `PERF_SAMPLE_ID`: the event id (of the group leader when read through a group).
        #[doc(alias = "PERF_SAMPLE_ID")]
        id -> Option<u64>;
        /// `PERF_SAMPLE_STREAM_ID`: the id of the event that opened the stream.
        #[doc(alias = "PERF_SAMPLE_STREAM_ID")]
        stream_id -> Option<u64>;
        /// `PERF_SAMPLE_CPU`: the CPU (the reserved half-word is dropped).
        #[doc(alias = "PERF_SAMPLE_CPU")]
        cpu -> Option<u32>;
        /// `PERF_SAMPLE_PERIOD`: the sample period.
        #[doc(alias = "PERF_SAMPLE_PERIOD")]
        period -> Option<u64>;
        /// `PERF_SAMPLE_READ`: counter values, laid out by `read_format`.
        #[doc(alias = "PERF_SAMPLE_READ")]
        read -> Option<ReadValues<'_>>;
        /// `PERF_SAMPLE_CALLCHAIN`: instruction pointers with `PERF_CONTEXT_*` markers.
        #[doc(alias = "PERF_SAMPLE_CALLCHAIN")]
        callchain -> Option<Callchain<'_>>;
        /// `PERF_SAMPLE_RAW`: opaque data (tracepoint fields), including the kernel's alignment padding.
        #[doc(alias = "PERF_SAMPLE_RAW")]
        raw -> Option<Bytes<'_>>;
        /// `PERF_SAMPLE_BRANCH_STACK`: the last branches taken.
        #[doc(alias = "PERF_SAMPLE_BRANCH_STACK")]
        branch_stack -> Option<BranchStack<'_>>;
        /// `PERF_SAMPLE_REGS_USER`: user registers selected by `sample_regs_user`.
        #[doc(alias = "PERF_SAMPLE_REGS_USER")]
        regs_user -> Option<Regs<'_>>;
        /// `PERF_SAMPLE_STACK_USER`: a copy of the user stack.
        #[doc(alias = "PERF_SAMPLE_STACK_USER")]
        stack_user -> Option<StackUser<'_>>;
        /// `PERF_SAMPLE_WEIGHT` or `PERF_SAMPLE_WEIGHT_STRUCT`: the raw weight word; see [`Weight`].
        #[doc(alias = "PERF_SAMPLE_WEIGHT")]
        #[doc(alias = "PERF_SAMPLE_WEIGHT_STRUCT")]
        weight -> Option<Weight>;
        /// `PERF_SAMPLE_DATA_SRC`: the memory data source (`union perf_mem_data_src`).
        #[doc(alias = "PERF_SAMPLE_DATA_SRC")]
        data_src -> Option<u64>;
        /// `PERF_SAMPLE_TRANSACTION`: transactional memory abort flags.
        #[doc(alias = "PERF_SAMPLE_TRANSACTION")]
        transaction -> Option<u64>;
        /// `PERF_SAMPLE_REGS_INTR`: registers at the interrupt, selected by `sample_regs_intr`.
        #[doc(alias = "PERF_SAMPLE_REGS_INTR")]
        regs_intr -> Option<Regs<'_>>;
        /// `PERF_SAMPLE_PHYS_ADDR`: physical address of `addr`. Since Linux 4.13.
        #[doc(alias = "PERF_SAMPLE_PHYS_ADDR")]
        phys_addr -> Option<u64>;
        /// `PERF_SAMPLE_CGROUP`: cgroup id (v2 inode number). Since Linux 5.7.
        #[doc(alias = "PERF_SAMPLE_CGROUP")]
        cgroup -> Option<u64>;
        /// `PERF_SAMPLE_DATA_PAGE_SIZE`: page size of `addr`. Since Linux 5.11.
        #[doc(alias = "PERF_SAMPLE_DATA_PAGE_SIZE")]
        data_page_size -> Option<u64>;
        /// `PERF_SAMPLE_CODE_PAGE_SIZE`: page size of `ip`. Since Linux 5.11.
        #[doc(alias = "PERF_SAMPLE_CODE_PAGE_SIZE")]
        code_page_size -> Option<u64>;
        /// `PERF_SAMPLE_AUX`: a snapshot of the AUX area. Since Linux 5.5.
        #[doc(alias = "PERF_SAMPLE_AUX")]
        aux -> Option<Bytes<'_>>;
    }
}

impl Default for Sample<'_> {
    /// The sample of an event that selects no field: an empty body.
    fn default() -> Self {
        Sample {
            body: Bytes::default(),
            cfg: ParseConfig::default(),
            seg: Segments::default(),
            misc: Misc::default(),
        }
    }
}

impl PartialEq for Sample<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.fields() == other.fields()
    }
}

impl Eq for Sample<'_> {}

impl std::fmt::Debug for Sample<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Sample").field(&self.fields()).finish()
    }
}

/// A sample's fields, all decoded: what [`Sample::fields`] gives and [`Sample::from_fields`] takes, in the
/// kernel's order.
///
/// A field is `Some` exactly when its `PERF_SAMPLE_*` bit is set. Variable-length fields borrow the ring
/// until [`into_owned`](Self::into_owned).
#[doc(alias = "PERF_RECORD_SAMPLE")]
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SampleFields<'a> {
    /// The header's misc bits: [`cpumode`](Misc::cpumode), [`exact_ip`](Misc::exact_ip).
    pub misc: Misc,
    /// `PERF_SAMPLE_IDENTIFIER`: the event id, at a fixed position.
    #[doc(alias = "PERF_SAMPLE_IDENTIFIER")]
    pub identifier: Option<u64>,
    /// `PERF_SAMPLE_IP`: the instruction pointer.
    #[doc(alias = "PERF_SAMPLE_IP")]
    pub ip: Option<u64>,
    /// `PERF_SAMPLE_TID`: process and thread id.
    #[doc(alias = "PERF_SAMPLE_TID")]
    pub thread: Option<ThreadId>,
    /// `PERF_SAMPLE_TIME`: perf clock timestamp in ns.
    #[doc(alias = "PERF_SAMPLE_TIME")]
    pub time: Option<u64>,
    /// `PERF_SAMPLE_ADDR`: the data address (page faults, memory events, breakpoints).
    #[doc(alias = "PERF_SAMPLE_ADDR")]
    pub addr: Option<u64>,
    /// `PERF_SAMPLE_ID`: the event id (of the group leader when read through a group).
    #[doc(alias = "PERF_SAMPLE_ID")]
    pub id: Option<u64>,
    /// `PERF_SAMPLE_STREAM_ID`: the id of the event that opened the stream (inherited events share it).
    #[doc(alias = "PERF_SAMPLE_STREAM_ID")]
    pub stream_id: Option<u64>,
    /// `PERF_SAMPLE_CPU`: the CPU (the reserved half-word is dropped).
    #[doc(alias = "PERF_SAMPLE_CPU")]
    pub cpu: Option<u32>,
    /// `PERF_SAMPLE_PERIOD`: the sample period.
    #[doc(alias = "PERF_SAMPLE_PERIOD")]
    pub period: Option<u64>,
    /// `PERF_SAMPLE_READ`: counter values, laid out by `read_format`.
    #[doc(alias = "PERF_SAMPLE_READ")]
    pub read: Option<ReadValues<'a>>,
    /// `PERF_SAMPLE_CALLCHAIN`: instruction pointers with `PERF_CONTEXT_*` markers.
    #[doc(alias = "PERF_SAMPLE_CALLCHAIN")]
    pub callchain: Option<Callchain<'a>>,
    /// `PERF_SAMPLE_RAW`: opaque data (tracepoint fields), including the kernel's alignment padding.
    #[doc(alias = "PERF_SAMPLE_RAW")]
    pub raw: Option<Bytes<'a>>,
    /// `PERF_SAMPLE_BRANCH_STACK`: the last branches taken.
    #[doc(alias = "PERF_SAMPLE_BRANCH_STACK")]
    pub branch_stack: Option<BranchStack<'a>>,
    /// `PERF_SAMPLE_REGS_USER`: user registers selected by `sample_regs_user`.
    #[doc(alias = "PERF_SAMPLE_REGS_USER")]
    pub regs_user: Option<Regs<'a>>,
    /// `PERF_SAMPLE_STACK_USER`: a copy of the user stack.
    #[doc(alias = "PERF_SAMPLE_STACK_USER")]
    pub stack_user: Option<StackUser<'a>>,
    /// `PERF_SAMPLE_WEIGHT` or `PERF_SAMPLE_WEIGHT_STRUCT`: the raw weight word; see [`Weight`].
    #[doc(alias = "PERF_SAMPLE_WEIGHT")]
    #[doc(alias = "PERF_SAMPLE_WEIGHT_STRUCT")]
    pub weight: Option<Weight>,
    /// `PERF_SAMPLE_DATA_SRC`: the memory data source (`union perf_mem_data_src`).
    #[doc(alias = "PERF_SAMPLE_DATA_SRC")]
    pub data_src: Option<u64>,
    /// `PERF_SAMPLE_TRANSACTION`: transactional memory abort flags.
    #[doc(alias = "PERF_SAMPLE_TRANSACTION")]
    pub transaction: Option<u64>,
    /// `PERF_SAMPLE_REGS_INTR`: registers at the interrupt, selected by `sample_regs_intr`.
    #[doc(alias = "PERF_SAMPLE_REGS_INTR")]
    pub regs_intr: Option<Regs<'a>>,
    /// `PERF_SAMPLE_PHYS_ADDR`: physical address of `addr`. Since Linux 4.13.
    #[doc(alias = "PERF_SAMPLE_PHYS_ADDR")]
    pub phys_addr: Option<u64>,
    /// `PERF_SAMPLE_CGROUP`: cgroup id (v2 inode number). Since Linux 5.7.
    #[doc(alias = "PERF_SAMPLE_CGROUP")]
    pub cgroup: Option<u64>,
    /// `PERF_SAMPLE_DATA_PAGE_SIZE`: page size of `addr`. Since Linux 5.11.
    #[doc(alias = "PERF_SAMPLE_DATA_PAGE_SIZE")]
    pub data_page_size: Option<u64>,
    /// `PERF_SAMPLE_CODE_PAGE_SIZE`: page size of `ip`. Since Linux 5.11.
    #[doc(alias = "PERF_SAMPLE_CODE_PAGE_SIZE")]
    pub code_page_size: Option<u64>,
    /// `PERF_SAMPLE_AUX`: a snapshot of the AUX area. Since Linux 5.5.
    #[doc(alias = "PERF_SAMPLE_AUX")]
    pub aux: Option<Bytes<'a>>,
}

impl SampleFields<'_> {
    /// An owned copy that no longer borrows the ring.
    pub fn into_owned(self) -> SampleFields<'static> {
        SampleFields {
            misc: self.misc,
            identifier: self.identifier,
            ip: self.ip,
            thread: self.thread,
            time: self.time,
            addr: self.addr,
            id: self.id,
            stream_id: self.stream_id,
            cpu: self.cpu,
            period: self.period,
            read: self.read.map(ReadValues::into_owned),
            callchain: self.callchain.map(Callchain::into_owned),
            raw: self.raw.map(Bytes::into_owned),
            branch_stack: self.branch_stack.map(BranchStack::into_owned),
            regs_user: self.regs_user.map(Regs::into_owned),
            stack_user: self.stack_user.map(StackUser::into_owned),
            weight: self.weight,
            data_src: self.data_src,
            transaction: self.transaction,
            regs_intr: self.regs_intr.map(Regs::into_owned),
            phys_addr: self.phys_addr,
            cgroup: self.cgroup,
            data_page_size: self.data_page_size,
            code_page_size: self.code_page_size,
            aux: self.aux.map(Bytes::into_owned),
        }
    }
}

/// The sample weight word: `PERF_SAMPLE_WEIGHT` reads it whole, `PERF_SAMPLE_WEIGHT_STRUCT` as three parts.
#[doc(alias = "perf_sample_weight")]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Weight(pub u64);

impl Weight {
    /// The whole word (`PERF_SAMPLE_WEIGHT`).
    pub const fn full(self) -> u64 {
        self.0
    }
    /// `var1_dw` of `PERF_SAMPLE_WEIGHT_STRUCT` (on x86: the access latency).
    pub const fn var1_dw(self) -> u32 {
        self.0 as u32
    }
    /// `var2_w` of `PERF_SAMPLE_WEIGHT_STRUCT` (on x86: the instruction latency).
    pub const fn var2_w(self) -> u16 {
        (self.0 >> 32) as u16
    }
    /// `var3_w` of `PERF_SAMPLE_WEIGHT_STRUCT`.
    pub const fn var3_w(self) -> u16 {
        (self.0 >> 48) as u16
    }
}

/// Counter values as `read_format` lays them out (`struct read_format` in the kernel header).
#[doc(alias = "read_format")]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadValues<'a> {
    /// One counter (no `PERF_FORMAT_GROUP`).
    Single(ReadSingle),
    /// A whole group (`PERF_FORMAT_GROUP`).
    #[doc(alias = "PERF_FORMAT_GROUP")]
    Group(ReadGroup<'a>),
}

impl ReadValues<'_> {
    /// An owned copy that no longer borrows the ring.
    pub fn into_owned(self) -> ReadValues<'static> {
        match self {
            ReadValues::Single(s) => ReadValues::Single(s),
            ReadValues::Group(g) => ReadValues::Group(g.into_owned()),
        }
    }
}

/// One counter's value; the optional parts are present when their `PERF_FORMAT_*` bit is set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ReadSingle {
    /// The counter value.
    pub value: u64,
    /// `PERF_FORMAT_TOTAL_TIME_ENABLED`.
    pub time_enabled: Option<u64>,
    /// `PERF_FORMAT_TOTAL_TIME_RUNNING`.
    pub time_running: Option<u64>,
    /// `PERF_FORMAT_ID`.
    pub id: Option<u64>,
    /// `PERF_FORMAT_LOST`. Since Linux 6.0.
    pub lost: Option<u64>,
}

/// A group's values: shared times, then one [`ReadEntry`] per member (leader first).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadGroup<'a> {
    /// `PERF_FORMAT_TOTAL_TIME_ENABLED`.
    pub time_enabled: Option<u64>,
    /// `PERF_FORMAT_TOTAL_TIME_RUNNING`.
    pub time_running: Option<u64>,
    /// Whether each entry carries an id (`PERF_FORMAT_ID`).
    pub has_id: bool,
    /// Whether each entry carries a lost count (`PERF_FORMAT_LOST`).
    pub has_lost: bool,
    /// The entries' words: `value`, then `id` and `lost` when present, per member.
    pub words: U64s<'a>,
}

/// One member of a group read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ReadEntry {
    /// The counter value.
    pub value: u64,
    /// `PERF_FORMAT_ID`.
    pub id: Option<u64>,
    /// `PERF_FORMAT_LOST`.
    pub lost: Option<u64>,
}

impl ReadGroup<'_> {
    /// A group read built from entries (all entries must agree on which optional parts they carry).
    pub fn from_entries(
        time_enabled: Option<u64>,
        time_running: Option<u64>,
        entries: &[ReadEntry],
    ) -> ReadGroup<'static> {
        let has_id = entries.first().is_some_and(|e| e.id.is_some());
        let has_lost = entries.first().is_some_and(|e| e.lost.is_some());
        let mut words = Vec::with_capacity(entries.len() * 3);
        for e in entries {
            words.push(e.value);
            if has_id {
                words.push(e.id.unwrap_or(0));
            }
            if has_lost {
                words.push(e.lost.unwrap_or(0));
            }
        }
        ReadGroup {
            time_enabled,
            time_running,
            has_id,
            has_lost,
            words: words.into(),
        }
    }

    fn stride(&self) -> usize {
        1 + self.has_id as usize + self.has_lost as usize
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.words.len() / self.stride()
    }

    /// Whether the group has no member.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The members, leader first.
    pub fn entries(&self) -> impl Iterator<Item = ReadEntry> + '_ {
        let stride = self.stride();
        (0..self.len()).map(move |i| {
            let base = i * stride;
            let mut k = base + 1;
            let mut next = || {
                let w = self.words.get(k);
                k += 1;
                w
            };
            let value = self.words.get(base).unwrap_or(0);
            let id = if self.has_id { next() } else { None };
            let lost = if self.has_lost { next() } else { None };
            ReadEntry { value, id, lost }
        })
    }

    /// An owned copy that no longer borrows the ring.
    pub fn into_owned(self) -> ReadGroup<'static> {
        ReadGroup {
            time_enabled: self.time_enabled,
            time_running: self.time_running,
            has_id: self.has_id,
            has_lost: self.has_lost,
            words: self.words.into_owned(),
        }
    }
}

#[inline]
pub(crate) fn parse_read<'a>(c: &mut Cursor<'a>, cfg: &ParseConfig) -> Parsed<ReadValues<'a>> {
    let opt = |c: &mut Cursor<'a>, bit: u32, f: &'static str| -> Parsed<Option<u64>> {
        if cfg.has_format(bit) {
            c.u64(f).map(Some)
        } else {
            Ok(None)
        }
    };
    if cfg.has_format(PERF_FORMAT_GROUP) {
        let nr = c.u64("read.nr")?;
        let time_enabled = opt(c, PERF_FORMAT_TOTAL_TIME_ENABLED, "read.time_enabled")?;
        let time_running = opt(c, PERF_FORMAT_TOTAL_TIME_RUNNING, "read.time_running")?;
        let has_id = cfg.has_format(PERF_FORMAT_ID);
        let has_lost = cfg.has_format(PERF_FORMAT_LOST);
        let words = c.words(nr, 1 + has_id as usize + has_lost as usize, "read.values")?;
        Ok(ReadValues::Group(ReadGroup {
            time_enabled,
            time_running,
            has_id,
            has_lost,
            words: U64s::borrowed(words),
        }))
    } else {
        let value = c.u64("read.value")?;
        Ok(ReadValues::Single(ReadSingle {
            value,
            time_enabled: opt(c, PERF_FORMAT_TOTAL_TIME_ENABLED, "read.time_enabled")?,
            time_running: opt(c, PERF_FORMAT_TOTAL_TIME_RUNNING, "read.time_running")?,
            id: opt(c, PERF_FORMAT_ID, "read.id")?,
            lost: opt(c, PERF_FORMAT_LOST, "read.lost")?,
        }))
    }
}

/// A callchain: instruction pointers, with `PERF_CONTEXT_*` marker words saying whose frames follow.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Callchain<'a> {
    /// Every word, markers included, as the kernel wrote them.
    pub ips: U64s<'a>,
}

/// Whose frames a callchain context holds (`enum perf_callchain_context`).
#[doc(alias = "perf_callchain_context")]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CallchainContext {
    /// Frames before any marker.
    Unmarked,
    /// `PERF_CONTEXT_HV`.
    #[doc(alias = "PERF_CONTEXT_HV")]
    Hypervisor,
    /// `PERF_CONTEXT_KERNEL`.
    #[doc(alias = "PERF_CONTEXT_KERNEL")]
    Kernel,
    /// `PERF_CONTEXT_USER`.
    #[doc(alias = "PERF_CONTEXT_USER")]
    User,
    /// `PERF_CONTEXT_USER_DEFERRED`: the user part comes later in a `PERF_RECORD_CALLCHAIN_DEFERRED`;
    /// the one word that follows is its cookie. Since Linux 6.19.
    #[doc(alias = "PERF_CONTEXT_USER_DEFERRED")]
    UserDeferred,
    /// `PERF_CONTEXT_GUEST`.
    #[doc(alias = "PERF_CONTEXT_GUEST")]
    Guest,
    /// `PERF_CONTEXT_GUEST_KERNEL`.
    #[doc(alias = "PERF_CONTEXT_GUEST_KERNEL")]
    GuestKernel,
    /// `PERF_CONTEXT_GUEST_USER`.
    #[doc(alias = "PERF_CONTEXT_GUEST_USER")]
    GuestUser,
    /// Another marker word (≥ `PERF_CONTEXT_MAX`) this parser does not name.
    Other(u64),
}

impl CallchainContext {
    /// The context a marker word names, or `None` when `word` is an ordinary address.
    pub const fn from_marker(word: u64) -> Option<Self> {
        if word < PERF_CONTEXT_MAX {
            return None;
        }
        Some(match word {
            PERF_CONTEXT_HV => CallchainContext::Hypervisor,
            PERF_CONTEXT_KERNEL => CallchainContext::Kernel,
            PERF_CONTEXT_USER => CallchainContext::User,
            PERF_CONTEXT_USER_DEFERRED => CallchainContext::UserDeferred,
            PERF_CONTEXT_GUEST => CallchainContext::Guest,
            PERF_CONTEXT_GUEST_KERNEL => CallchainContext::GuestKernel,
            PERF_CONTEXT_GUEST_USER => CallchainContext::GuestUser,
            other => CallchainContext::Other(other),
        })
    }
}

impl<'a> Callchain<'a> {
    /// Number of words, markers included.
    pub fn len(&self) -> usize {
        self.ips.len()
    }

    /// Whether the callchain is empty.
    pub fn is_empty(&self) -> bool {
        self.ips.is_empty()
    }

    /// The callchain split at its markers: each context with the frames that follow it.
    pub fn contexts(&self) -> impl Iterator<Item = (CallchainContext, U64s<'_>)> + '_ {
        let n = self.ips.len();
        let mut at = 0usize;
        std::iter::from_fn(move || {
            if at >= n {
                return None;
            }
            let ctx = match self.ips.get(at).and_then(CallchainContext::from_marker) {
                Some(ctx) => {
                    at += 1;
                    ctx
                }
                None => CallchainContext::Unmarked,
            };
            let start = at;
            while at < n
                && self
                    .ips
                    .get(at)
                    .and_then(CallchainContext::from_marker)
                    .is_none()
            {
                at += 1;
            }
            Some((ctx, self.ips.slice(start, at).unwrap_or_default()))
        })
    }

    /// The cookie after a `PERF_CONTEXT_USER_DEFERRED` marker, matching a later
    /// [`CallchainDeferred`](super::CallchainDeferred) record. Since Linux 6.19.
    pub fn deferred_cookie(&self) -> Option<u64> {
        self.contexts()
            .find(|(c, _)| *c == CallchainContext::UserDeferred)
            .and_then(|(_, w)| w.get(0))
    }

    /// An owned copy that no longer borrows the ring.
    pub fn into_owned(self) -> Callchain<'static> {
        Callchain {
            ips: self.ips.into_owned(),
        }
    }
}

/// The branch stack (`PERF_SAMPLE_BRANCH_STACK`): entries, the hardware index and per-branch counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BranchStack<'a> {
    /// `hw_idx`, present with `PERF_SAMPLE_BRANCH_HW_INDEX` even when there is no entry. Since Linux 5.7.
    #[doc(alias = "PERF_SAMPLE_BRANCH_HW_INDEX")]
    pub hw_idx: Option<u64>,
    /// The entries' words: `from`, `to`, `flags` per entry, newest first.
    pub words: U64s<'a>,
    /// One counters word per entry with `PERF_SAMPLE_BRANCH_COUNTERS`. Since Linux 6.8.
    #[doc(alias = "PERF_SAMPLE_BRANCH_COUNTERS")]
    pub counters: Option<U64s<'a>>,
}

/// One taken branch (`struct perf_branch_entry`).
#[doc(alias = "perf_branch_entry")]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct BranchEntry {
    /// Source instruction.
    pub from: u64,
    /// Branch target.
    pub to: u64,
    /// The flag bits; see the accessors.
    pub flags: BranchFlags,
}

/// The flag word of a [`BranchEntry`] (bit-fields as the kernel's C compiler lays them out).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct BranchFlags(pub u64);

impl BranchFlags {
    #[inline]
    const fn field(self, offset: u32, width: u32) -> u64 {
        let mask = (1u64 << width) - 1;
        if cfg!(target_endian = "big") {
            (self.0 >> (64 - offset - width)) & mask
        } else {
            (self.0 >> offset) & mask
        }
    }
    /// The target was mispredicted.
    pub const fn mispred(self) -> bool {
        self.field(0, 1) != 0
    }
    /// The target was predicted.
    pub const fn predicted(self) -> bool {
        self.field(1, 1) != 0
    }
    /// In a hardware transaction.
    pub const fn in_tx(self) -> bool {
        self.field(2, 1) != 0
    }
    /// Aborting a hardware transaction.
    pub const fn abort(self) -> bool {
        self.field(3, 1) != 0
    }
    /// Cycles since the previous branch (0 if unsupported).
    pub const fn cycles(self) -> u16 {
        self.field(4, 16) as u16
    }
    /// Branch type (`PERF_BR_*`).
    pub const fn branch_type(self) -> u8 {
        self.field(20, 4) as u8
    }
    /// Speculation info (`PERF_BR_SPEC_*`).
    pub const fn spec(self) -> u8 {
        self.field(24, 2) as u8
    }
    /// Extended branch type (`PERF_BR_NEW_*`).
    pub const fn new_type(self) -> u8 {
        self.field(26, 4) as u8
    }
    /// Privilege level (`PERF_BR_PRIV_*`).
    pub const fn privilege(self) -> u8 {
        self.field(30, 3) as u8
    }
}

impl BranchStack<'_> {
    /// Number of entries.
    pub fn len(&self) -> usize {
        self.words.len() / 3
    }

    /// Whether there is no entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The entries, newest first.
    pub fn entries(&self) -> impl Iterator<Item = BranchEntry> + '_ {
        (0..self.len()).map(move |i| BranchEntry {
            from: self.words.get(3 * i).unwrap_or(0),
            to: self.words.get(3 * i + 1).unwrap_or(0),
            flags: BranchFlags(self.words.get(3 * i + 2).unwrap_or(0)),
        })
    }

    /// A branch stack built from entries.
    pub fn from_entries(
        hw_idx: Option<u64>,
        entries: &[BranchEntry],
        counters: Option<Vec<u64>>,
    ) -> BranchStack<'static> {
        BranchStack {
            hw_idx,
            words: entries
                .iter()
                .flat_map(|e| [e.from, e.to, e.flags.0])
                .collect::<Vec<_>>()
                .into(),
            counters: counters.map(Into::into),
        }
    }

    /// An owned copy that no longer borrows the ring.
    pub fn into_owned(self) -> BranchStack<'static> {
        BranchStack {
            hw_idx: self.hw_idx,
            words: self.words.into_owned(),
            counters: self.counters.map(U64s::into_owned),
        }
    }
}

/// Sampled registers (`PERF_SAMPLE_REGS_USER` / `PERF_SAMPLE_REGS_INTR`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Regs<'a> {
    /// `enum perf_sample_regs_abi`: `PERF_SAMPLE_REGS_ABI_NONE` (0, no registers follow), `_32` or `_64`.
    #[doc(alias = "perf_sample_regs_abi")]
    pub abi: u64,
    /// The register mask from the attr; bit `i` set means register `i` is in `values`.
    pub mask: u64,
    /// One word per set bit of `mask`, lowest bit first; empty when `abi` is NONE.
    pub values: U64s<'a>,
}

impl Regs<'_> {
    /// The value of register `reg` (a bit index of the arch's `perf_event_x86_regs` etc.), if sampled.
    pub fn get(&self, reg: u32) -> Option<u64> {
        if reg >= 64 || self.mask & (1 << reg) == 0 {
            return None;
        }
        let index = (self.mask & ((1u64 << reg) - 1)).count_ones() as usize;
        self.values.get(index)
    }

    /// An owned copy that no longer borrows the ring.
    pub fn into_owned(self) -> Regs<'static> {
        Regs {
            abi: self.abi,
            mask: self.mask,
            values: self.values.into_owned(),
        }
    }
}

#[inline]
pub(crate) fn parse_regs<'a>(
    c: &mut Cursor<'a>,
    mask: u64,
    count: usize,
    field: &'static str,
) -> Parsed<Regs<'a>> {
    let abi = c.u64(field)?;
    let values = if abi == PERF_SAMPLE_REGS_ABI_NONE as u64 {
        Chunk::default()
    } else {
        c.words(count as u64, 1, field)?
    };
    Ok(Regs {
        abi,
        mask,
        values: U64s::borrowed(values),
    })
}

/// A copy of the user stack (`PERF_SAMPLE_STACK_USER`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StackUser<'a> {
    /// The copied bytes (`sample_stack_user` long, or empty when nothing could be copied).
    pub data: Bytes<'a>,
    /// How many of them are valid (`dyn_size`); 0 when `data` is empty (the kernel then writes no `dyn_size`).
    pub dyn_size: u64,
}

impl StackUser<'_> {
    /// An owned copy that no longer borrows the ring.
    pub fn into_owned(self) -> StackUser<'static> {
        StackUser {
            data: self.data.into_owned(),
            dyn_size: self.dyn_size,
        }
    }
}

#[inline]
pub(crate) fn parse_branch_stack<'a>(
    c: &mut Cursor<'a>,
    cfg: &ParseConfig,
) -> Parsed<BranchStack<'a>> {
    let nr = c.u64("branch_stack.nr")?;
    let hw_idx = opt_u64(
        c,
        cfg.has_branch(PERF_SAMPLE_BRANCH_HW_INDEX),
        "branch_stack.hw_idx",
    )?;
    let words = U64s::borrowed(c.words(nr, 3, "branch_stack.entries")?);
    let counters = if cfg.has_branch(PERF_SAMPLE_BRANCH_COUNTERS) {
        Some(U64s::borrowed(c.words(nr, 1, "branch_stack.counters")?))
    } else {
        None
    };
    Ok(BranchStack {
        hw_idx,
        words,
        counters,
    })
}

#[inline]
pub(crate) fn parse_stack_user<'a>(c: &mut Cursor<'a>) -> Parsed<StackUser<'a>> {
    let size = c.u64("stack_user.size")?;
    let bytes = c.bytes_u64(size, "stack_user.data")?;
    let dyn_size = if size > 0 {
        c.u64("stack_user.dyn_size")?
    } else {
        0
    };
    Ok(StackUser {
        data: Bytes::borrowed(bytes),
        dyn_size,
    })
}

#[inline]
fn opt_u64(c: &mut Cursor<'_>, present: bool, field: &'static str) -> Parsed<Option<u64>> {
    if present {
        c.u64(field).map(Some)
    } else {
        Ok(None)
    }
}

/// A sample body as [`RawRecord::parse`](crate::RawRecord::parse) gives it: checked in one pass (the
/// view's), the body borrowed and the config copied.
#[inline]
pub(crate) fn parse_sample<'a>(
    misc: Misc,
    data: Chunk<'a>,
    cfg: &ParseConfig,
) -> Result<super::Record<'a>, Error> {
    let seg = super::view::segments_of(misc, data, cfg)?;
    Ok(super::Record::Sample(Sample::new(misc, data, cfg, seg)))
}

/// Every field of a sample body, decoded one after another: the error names the first field that does not
/// fit (what [`parse_sample`] reports for a body its one-pass check refuses).
pub(crate) fn decode_sample<'a>(
    misc: Misc,
    data: Chunk<'a>,
    cfg: &ParseConfig,
) -> Result<SampleFields<'a>, Error> {
    use super::config::{KNOWN_READ_FORMAT, KNOWN_SAMPLE_TYPE};
    let st = cfg.sample_type();
    if st & !KNOWN_SAMPLE_TYPE != 0 || cfg.read_format() & !KNOWN_READ_FORMAT != 0 {
        return Err(ErrorKind::UnknownLayout {
            sample_type: st,
            read_format: cfg.read_format(),
        }
        .into());
    }
    let c = &mut Cursor::new(data, data.len(), "SAMPLE");
    sample_fields(c, misc, cfg).map_err(|_| c.error())
}

fn sample_fields<'a>(
    c: &mut Cursor<'a>,
    misc: Misc,
    cfg: &ParseConfig,
) -> Parsed<SampleFields<'a>> {
    let identifier = opt_u64(c, cfg.has(PERF_SAMPLE_IDENTIFIER), "identifier")?;
    let ip = opt_u64(c, cfg.has(PERF_SAMPLE_IP), "ip")?;
    let thread = if cfg.has(PERF_SAMPLE_TID) {
        let pid = c.u32("pid")?;
        let tid = c.u32("tid")?;
        Some(ThreadId { pid, tid })
    } else {
        None
    };
    let time = opt_u64(c, cfg.has(PERF_SAMPLE_TIME), "time")?;
    let addr = opt_u64(c, cfg.has(PERF_SAMPLE_ADDR), "addr")?;
    let id = opt_u64(c, cfg.has(PERF_SAMPLE_ID), "id")?;
    let stream_id = opt_u64(c, cfg.has(PERF_SAMPLE_STREAM_ID), "stream_id")?;
    let cpu = if cfg.has(PERF_SAMPLE_CPU) {
        let cpu = c.u32("cpu")?;
        c.u32("cpu.res")?;
        Some(cpu)
    } else {
        None
    };
    let period = opt_u64(c, cfg.has(PERF_SAMPLE_PERIOD), "period")?;
    let read = if cfg.has(PERF_SAMPLE_READ) {
        Some(parse_read(c, cfg)?)
    } else {
        None
    };
    let callchain = if cfg.has(PERF_SAMPLE_CALLCHAIN) {
        let nr = c.u64("callchain.nr")?;
        Some(Callchain {
            ips: U64s::borrowed(c.words(nr, 1, "callchain.ips")?),
        })
    } else {
        None
    };
    let raw = if cfg.has(PERF_SAMPLE_RAW) {
        let size = c.u32("raw.size")?;
        Some(Bytes::borrowed(c.bytes(size as usize, "raw.data")?))
    } else {
        None
    };
    let branch_stack = if cfg.has(PERF_SAMPLE_BRANCH_STACK) {
        Some(parse_branch_stack(c, cfg)?)
    } else {
        None
    };
    let regs_user = if cfg.has(PERF_SAMPLE_REGS_USER) {
        Some(parse_regs(
            c,
            cfg.regs_user_mask(),
            cfg.regs_user_count(),
            "regs_user",
        )?)
    } else {
        None
    };
    let stack_user = if cfg.has(PERF_SAMPLE_STACK_USER) {
        Some(parse_stack_user(c)?)
    } else {
        None
    };
    let weight = if cfg.has(PERF_SAMPLE_WEIGHT) || cfg.has(PERF_SAMPLE_WEIGHT_STRUCT) {
        Some(Weight(c.u64("weight")?))
    } else {
        None
    };
    let data_src = opt_u64(c, cfg.has(PERF_SAMPLE_DATA_SRC), "data_src")?;
    let transaction = opt_u64(c, cfg.has(PERF_SAMPLE_TRANSACTION), "transaction")?;
    let regs_intr = if cfg.has(PERF_SAMPLE_REGS_INTR) {
        Some(parse_regs(
            c,
            cfg.regs_intr_mask(),
            cfg.regs_intr_count(),
            "regs_intr",
        )?)
    } else {
        None
    };
    let phys_addr = opt_u64(c, cfg.has(PERF_SAMPLE_PHYS_ADDR), "phys_addr")?;
    let cgroup = opt_u64(c, cfg.has(PERF_SAMPLE_CGROUP), "cgroup")?;
    let data_page_size = opt_u64(c, cfg.has(PERF_SAMPLE_DATA_PAGE_SIZE), "data_page_size")?;
    let code_page_size = opt_u64(c, cfg.has(PERF_SAMPLE_CODE_PAGE_SIZE), "code_page_size")?;
    let aux = if cfg.has(PERF_SAMPLE_AUX) {
        let size = c.u64("aux.size")?;
        Some(Bytes::borrowed(c.bytes_u64(size, "aux.data")?))
    } else {
        None
    };
    c.finish()?;
    Ok(SampleFields {
        misc,
        identifier,
        ip,
        thread,
        time,
        addr,
        id,
        stream_id,
        cpu,
        period,
        read,
        callchain,
        raw,
        branch_stack,
        regs_user,
        stack_user,
        weight,
        data_src,
        transaction,
        regs_intr,
        phys_addr,
        cgroup,
        data_page_size,
        code_page_size,
        aux,
    })
}
