//! [`ParseConfig`]: what an event's attr says about the layout of its records, computed once.

use perf_sys::*;

/// Every `PERF_SAMPLE_*` bit this parser knows (all below `PERF_SAMPLE_MAX`).
pub(crate) const KNOWN_SAMPLE_TYPE: u64 = PERF_SAMPLE_MAX as u64 - 1;
/// Every `PERF_FORMAT_*` bit this parser knows.
pub(crate) const KNOWN_READ_FORMAT: u64 = PERF_FORMAT_MAX as u64 - 1;

const NONE: u8 = u8::MAX;

/// The attr fields that decide how records are laid out, as plain values.
///
/// This is what a perf.data file or a test needs to rebuild a [`ParseConfig`] without a live
/// `perf_event_attr`. With the `serde` feature it (and [`ParseConfig`], through it) serializes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct ParseFields {
    /// `perf_event_attr.sample_type`: which `PERF_SAMPLE_*` fields samples (and the sample_id trailer) carry.
    pub sample_type: u64,
    /// `perf_event_attr.read_format`: the layout of `PERF_SAMPLE_READ` values and `PERF_RECORD_READ`.
    pub read_format: u64,
    /// `perf_event_attr.branch_sample_type`: `PERF_SAMPLE_BRANCH_HW_INDEX` and `PERF_SAMPLE_BRANCH_COUNTERS`
    /// change the branch stack layout.
    pub branch_sample_type: u64,
    /// `perf_event_attr.sample_regs_user`: one `u64` per set bit follows the ABI word.
    pub sample_regs_user: u64,
    /// `perf_event_attr.sample_regs_intr`: one `u64` per set bit follows the ABI word.
    pub sample_regs_intr: u64,
    /// `perf_event_attr.sample_id_all`: non-sample records end with the sample_id trailer.
    pub sample_id_all: bool,
    /// `perf_event_attr.build_id` (Since Linux 5.12): an MMAP2 record whose misc has
    /// `PERF_RECORD_MISC_MMAP_BUILD_ID` carries a build id instead of device and inode. The bit is
    /// believed only when this is set: kernels leave it on the MMAP2 records they then write for
    /// other events, with device and inode (6.18 here does, whenever another event on the CPU asks
    /// for build ids).
    #[cfg_attr(feature = "serde", serde(default))]
    pub build_id: bool,
}

/// The layout of one event's records, derived once from its attr: the parser's only input besides the bytes.
///
/// Offsets of the fields that [`RawRecord`](crate::RawRecord)'s cheap accessors read (time, id, cpu,
/// stream id, pid/tid in a sample and in the sample_id trailer) are computed here, so each accessor is
/// one bounds-checked load. The value is small and `Copy`.
///
/// ```
/// use perf_core::{ParseConfig, ParseFields};
/// use perf_sys::*;
///
/// let mut attr = perf_event_attr::default();
/// attr.sample_type = (PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME) as u64;
/// attr.set_sample_id_all(1);
/// let cfg = ParseConfig::from_attr(&attr);
/// assert_eq!(cfg.sample_id_len(), 16); // pid/tid + time
/// assert_eq!(cfg, ParseConfig::new(cfg.fields()));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(from = "ParseFields", into = "ParseFields")
)]
pub struct ParseConfig {
    fields: ParseFields,
    regs_user_count: u8,
    regs_intr_count: u8,
    /// Length of the sample_id trailer in bytes (0 without sample_id_all).
    trailer_len: u8,
    // Offsets from the start of a SAMPLE body (NONE: absent).
    s_tid: u8,
    s_time: u8,
    s_id: u8,
    s_stream_id: u8,
    s_cpu: u8,
    // The rest of the sample's fixed prefix, for the lazy sample view (NONE: absent).
    s_identifier: u8,
    s_ip: u8,
    s_addr: u8,
    s_id_field: u8,
    s_period: u8,
    /// Length of the fixed prefix (IDENTIFIER .. PERIOD), where a sample's variable part starts.
    prefix_len: u8,
    // Offsets from the *end* of a non-sample body, i.e. `len - off` (NONE: absent).
    t_tid: u8,
    t_time: u8,
    t_id: u8,
    t_stream_id: u8,
    t_cpu: u8,
}

impl Default for ParseConfig {
    fn default() -> Self {
        ParseConfig::new(ParseFields::default())
    }
}

impl From<ParseFields> for ParseConfig {
    fn from(f: ParseFields) -> Self {
        ParseConfig::new(f)
    }
}

impl From<ParseConfig> for ParseFields {
    fn from(c: ParseConfig) -> Self {
        c.fields
    }
}

impl From<&perf_event_attr> for ParseConfig {
    fn from(attr: &perf_event_attr) -> Self {
        ParseConfig::from_attr(attr)
    }
}

impl ParseConfig {
    /// The layout described by `fields`.
    pub const fn new(fields: ParseFields) -> Self {
        let st = fields.sample_type;

        // The sample's fixed prefix: IDENTIFIER, IP, TID, TIME, ADDR, ID, STREAM_ID, CPU, PERIOD.
        let mut off: u8 = 0;
        let mut s_id = NONE;
        let mut s_identifier = NONE;
        if bit_set(st, PERF_SAMPLE_IDENTIFIER) {
            s_id = off;
            s_identifier = off;
            off += 8;
        }
        let mut s_ip = NONE;
        if bit_set(st, PERF_SAMPLE_IP) {
            s_ip = off;
            off += 8;
        }
        let mut s_tid = NONE;
        if bit_set(st, PERF_SAMPLE_TID) {
            s_tid = off;
            off += 8;
        }
        let mut s_time = NONE;
        if bit_set(st, PERF_SAMPLE_TIME) {
            s_time = off;
            off += 8;
        }
        let mut s_addr = NONE;
        if bit_set(st, PERF_SAMPLE_ADDR) {
            s_addr = off;
            off += 8;
        }
        let mut s_id_field = NONE;
        if bit_set(st, PERF_SAMPLE_ID) {
            if s_id == NONE {
                s_id = off;
            }
            s_id_field = off;
            off += 8;
        }
        let mut s_stream_id = NONE;
        if bit_set(st, PERF_SAMPLE_STREAM_ID) {
            s_stream_id = off;
            off += 8;
        }
        let mut s_cpu = NONE;
        if bit_set(st, PERF_SAMPLE_CPU) {
            s_cpu = off;
            off += 8;
        }
        let mut s_period = NONE;
        if bit_set(st, PERF_SAMPLE_PERIOD) {
            s_period = off;
            off += 8;
        }

        // The trailer: TID, TIME, ID, STREAM_ID, CPU, IDENTIFIER; offsets counted from its start first.
        let (mut t_tid, mut t_time, mut t_id, mut t_stream_id, mut t_cpu) =
            (NONE, NONE, NONE, NONE, NONE);
        let mut len: u8 = 0;
        if fields.sample_id_all {
            if bit_set(st, PERF_SAMPLE_TID) {
                t_tid = len;
                len += 8;
            }
            if bit_set(st, PERF_SAMPLE_TIME) {
                t_time = len;
                len += 8;
            }
            if bit_set(st, PERF_SAMPLE_ID) {
                t_id = len;
                len += 8;
            }
            if bit_set(st, PERF_SAMPLE_STREAM_ID) {
                t_stream_id = len;
                len += 8;
            }
            if bit_set(st, PERF_SAMPLE_CPU) {
                t_cpu = len;
                len += 8;
            }
            if bit_set(st, PERF_SAMPLE_IDENTIFIER) {
                // IDENTIFIER wins over ID: its position is fixed (the last word).
                t_id = len;
                len += 8;
            }
        }
        // Convert to distances from the end of the body.
        const fn from_end(o: u8, len: u8) -> u8 {
            if o == NONE {
                NONE
            } else {
                len - o
            }
        }
        ParseConfig {
            fields,
            regs_user_count: fields.sample_regs_user.count_ones() as u8,
            regs_intr_count: fields.sample_regs_intr.count_ones() as u8,
            trailer_len: len,
            s_tid,
            s_time,
            s_id,
            s_stream_id,
            s_cpu,
            s_identifier,
            s_ip,
            s_addr,
            s_id_field,
            s_period,
            prefix_len: off,
            t_tid: from_end(t_tid, len),
            t_time: from_end(t_time, len),
            t_id: from_end(t_id, len),
            t_stream_id: from_end(t_stream_id, len),
            t_cpu: from_end(t_cpu, len),
        }
    }

    /// The layout of records from an event opened with `attr`.
    pub fn from_attr(attr: &perf_event_attr) -> Self {
        ParseConfig::new(ParseFields {
            sample_type: attr.sample_type,
            read_format: attr.read_format,
            branch_sample_type: attr.branch_sample_type,
            sample_regs_user: attr.sample_regs_user,
            sample_regs_intr: attr.sample_regs_intr,
            sample_id_all: attr.sample_id_all() != 0,
            build_id: attr.build_id() != 0,
        })
    }

    /// The attr fields this layout was computed from.
    pub const fn fields(&self) -> ParseFields {
        self.fields
    }

    /// `PERF_SAMPLE_*` bits.
    pub const fn sample_type(&self) -> u64 {
        self.fields.sample_type
    }

    /// `PERF_FORMAT_*` bits.
    pub const fn read_format(&self) -> u64 {
        self.fields.read_format
    }

    /// `PERF_SAMPLE_BRANCH_*` bits.
    pub const fn branch_sample_type(&self) -> u64 {
        self.fields.branch_sample_type
    }

    /// Whether non-sample records carry the sample_id trailer.
    pub const fn sample_id_all(&self) -> bool {
        self.fields.sample_id_all
    }

    /// Whether the event asked for build ids in MMAP2 records (`attr.build_id`), so that a
    /// record's `PERF_RECORD_MISC_MMAP_BUILD_ID` is believed. See [`ParseFields::build_id`].
    pub const fn build_id(&self) -> bool {
        self.fields.build_id
    }

    /// Whether this MMAP2 record carries a build id: its misc says so and the event asked for one.
    pub const fn mmap2_has_build_id(&self, misc: super::Misc) -> bool {
        self.fields.build_id && misc.mmap_build_id()
    }

    /// The mask of user registers sampled with `PERF_SAMPLE_REGS_USER`.
    pub const fn regs_user_mask(&self) -> u64 {
        self.fields.sample_regs_user
    }

    /// The mask of interrupt registers sampled with `PERF_SAMPLE_REGS_INTR`.
    pub const fn regs_intr_mask(&self) -> u64 {
        self.fields.sample_regs_intr
    }

    pub(crate) const fn regs_user_count(&self) -> usize {
        self.regs_user_count as usize
    }

    pub(crate) const fn regs_intr_count(&self) -> usize {
        self.regs_intr_count as usize
    }

    /// Length in bytes of the sample_id trailer at the end of every non-sample record (0 without sample_id_all).
    pub const fn sample_id_len(&self) -> usize {
        self.trailer_len as usize
    }

    pub(crate) const fn has(&self, bit: u32) -> bool {
        self.fields.sample_type & bit as u64 != 0
    }

    pub(crate) const fn has_format(&self, bit: u32) -> bool {
        self.fields.read_format & bit as u64 != 0
    }

    pub(crate) const fn has_branch(&self, bit: u32) -> bool {
        self.fields.branch_sample_type & bit as u64 != 0
    }

    /// Offsets for the cheap accessors, `(in a sample from the start, in the trailer from the end)`.
    pub(crate) const fn tid_offsets(&self) -> (u8, u8) {
        (self.s_tid, self.t_tid)
    }
    pub(crate) const fn time_offsets(&self) -> (u8, u8) {
        (self.s_time, self.t_time)
    }
    pub(crate) const fn id_offsets(&self) -> (u8, u8) {
        (self.s_id, self.t_id)
    }
    pub(crate) const fn stream_id_offsets(&self) -> (u8, u8) {
        (self.s_stream_id, self.t_stream_id)
    }
    pub(crate) const fn cpu_offsets(&self) -> (u8, u8) {
        (self.s_cpu, self.t_cpu)
    }

    /// Offsets of the sample's fixed prefix, from the start of its body ([`ABSENT`]: not sampled), in the
    /// kernel's order: IDENTIFIER, IP, TID, TIME, ADDR, ID, STREAM_ID, CPU, PERIOD; then the prefix length.
    pub(crate) const fn sample_prefix(&self) -> SamplePrefix {
        SamplePrefix {
            identifier: self.s_identifier,
            ip: self.s_ip,
            tid: self.s_tid,
            time: self.s_time,
            addr: self.s_addr,
            id: self.s_id_field,
            stream_id: self.s_stream_id,
            cpu: self.s_cpu,
            period: self.s_period,
            len: self.prefix_len,
        }
    }
}

/// Where the fixed fields of a sample sit; see [`ParseConfig::sample_prefix`].
#[derive(Clone, Copy)]
pub(crate) struct SamplePrefix {
    pub(crate) identifier: u8,
    pub(crate) ip: u8,
    pub(crate) tid: u8,
    pub(crate) time: u8,
    pub(crate) addr: u8,
    pub(crate) id: u8,
    pub(crate) stream_id: u8,
    pub(crate) cpu: u8,
    pub(crate) period: u8,
    pub(crate) len: u8,
}

const fn bit_set(st: u64, bit: u32) -> bool {
    st & bit as u64 != 0
}

/// Marks an absent offset in the tables above.
pub(crate) const ABSENT: u8 = NONE;
