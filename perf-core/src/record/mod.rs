//! Records: the raw view ([`RawRecord`]), the layout ([`ParseConfig`]) and the typed, borrowed model ([`Record`]).
//!
//! The layouts are those of `enum perf_event_type` in the kernel's `include/uapi/linux/perf_event.h`.
//! Parsing borrows: variable-length fields ([`Bytes`], [`U64s`]) point into the ring, across its seam when
//! a record wraps, and nothing is allocated. `into_owned` copies a record out; the same types then hold owned
//! data, so one model serves the zero-copy path, owned records and the [encoder](Record::encode).

mod bytes;
mod config;
mod cursor;
mod kinds;
mod raw;
mod sample;
mod view;

pub use bytes::{Bytes, U64s, U64sIter};
pub use config::{ParseConfig, ParseFields};
pub use kinds::*;
pub use raw::{RawRecord, Records};
pub use sample::{
    BranchEntry, BranchFlags, BranchStack, Callchain, CallchainContext, ReadEntry, ReadGroup,
    ReadSingle, ReadValues, Regs, Sample, SampleFields, StackUser, Weight,
};
pub use view::{OtherView, RecordView, SampleView};

pub(crate) use cursor::Cursor;
pub(crate) use sample::parse_read;

use perf_sys::*;

use crate::ErrorKind;
use crate::{Chunk, Error};

/// The `misc` bits of a record header.
///
/// Which bits mean what depends on the record type: bit 13 is `MMAP_DATA` on MMAP/MMAP2, `COMM_EXEC` on
/// COMM, `SWITCH_OUT` on SWITCH; bit 14 is `EXACT_IP` on SAMPLE, `SWITCH_OUT_PREEMPT` on SWITCH and
/// `MMAP_BUILD_ID` on MMAP2.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Misc(pub u16);

impl std::fmt::Debug for Misc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Misc({:#x}, {:?})", self.0, self.cpumode())
    }
}

/// Where the CPU was when a record was made (`PERF_RECORD_MISC_CPUMODE_MASK`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CpuMode {
    /// `PERF_RECORD_MISC_CPUMODE_UNKNOWN`.
    #[doc(alias = "PERF_RECORD_MISC_CPUMODE_UNKNOWN")]
    Unknown,
    /// `PERF_RECORD_MISC_KERNEL`.
    #[doc(alias = "PERF_RECORD_MISC_KERNEL")]
    Kernel,
    /// `PERF_RECORD_MISC_USER`.
    #[doc(alias = "PERF_RECORD_MISC_USER")]
    User,
    /// `PERF_RECORD_MISC_HYPERVISOR`.
    #[doc(alias = "PERF_RECORD_MISC_HYPERVISOR")]
    Hypervisor,
    /// `PERF_RECORD_MISC_GUEST_KERNEL`.
    #[doc(alias = "PERF_RECORD_MISC_GUEST_KERNEL")]
    GuestKernel,
    /// `PERF_RECORD_MISC_GUEST_USER`.
    #[doc(alias = "PERF_RECORD_MISC_GUEST_USER")]
    GuestUser,
    /// A value (6 or 7) without a name.
    Other(u8),
}

impl Misc {
    const fn bit(self, b: u32) -> bool {
        self.0 as u32 & b != 0
    }

    /// The CPU mode.
    pub const fn cpumode(self) -> CpuMode {
        match self.0 as u32 & PERF_RECORD_MISC_CPUMODE_MASK {
            PERF_RECORD_MISC_CPUMODE_UNKNOWN => CpuMode::Unknown,
            PERF_RECORD_MISC_KERNEL => CpuMode::Kernel,
            PERF_RECORD_MISC_USER => CpuMode::User,
            PERF_RECORD_MISC_HYPERVISOR => CpuMode::Hypervisor,
            PERF_RECORD_MISC_GUEST_KERNEL => CpuMode::GuestKernel,
            PERF_RECORD_MISC_GUEST_USER => CpuMode::GuestUser,
            other => CpuMode::Other(other as u8),
        }
    }

    /// SAMPLE: the ip is the exact instruction that caused the event (`PERF_RECORD_MISC_EXACT_IP`).
    #[doc(alias = "PERF_RECORD_MISC_EXACT_IP")]
    pub const fn exact_ip(self) -> bool {
        self.bit(PERF_RECORD_MISC_EXACT_IP)
    }

    /// COMM: the name changed because of exec (`PERF_RECORD_MISC_COMM_EXEC`). Since Linux 3.16.
    #[doc(alias = "PERF_RECORD_MISC_COMM_EXEC")]
    pub const fn comm_exec(self) -> bool {
        self.bit(PERF_RECORD_MISC_COMM_EXEC)
    }

    /// MMAP/MMAP2: a data (non-executable) mapping (`PERF_RECORD_MISC_MMAP_DATA`).
    #[doc(alias = "PERF_RECORD_MISC_MMAP_DATA")]
    pub const fn mmap_data(self) -> bool {
        self.bit(PERF_RECORD_MISC_MMAP_DATA)
    }

    /// SWITCH/SWITCH_CPU_WIDE: switching out, not in (`PERF_RECORD_MISC_SWITCH_OUT`).
    #[doc(alias = "PERF_RECORD_MISC_SWITCH_OUT")]
    pub const fn switch_out(self) -> bool {
        self.bit(PERF_RECORD_MISC_SWITCH_OUT)
    }

    /// SWITCH/SWITCH_CPU_WIDE: switched out while runnable, i.e. preempted (`PERF_RECORD_MISC_SWITCH_OUT_PREEMPT`).
    /// Since Linux 4.17.
    #[doc(alias = "PERF_RECORD_MISC_SWITCH_OUT_PREEMPT")]
    pub const fn switch_out_preempt(self) -> bool {
        self.bit(PERF_RECORD_MISC_SWITCH_OUT_PREEMPT)
    }

    /// MMAP2: the record carries a build id instead of device and inode (`PERF_RECORD_MISC_MMAP_BUILD_ID`).
    /// Since Linux 5.12. Believe it only for an event that asked for build ids
    /// ([`ParseConfig::mmap2_has_build_id`](crate::ParseConfig::mmap2_has_build_id)): kernels leave
    /// the bit on records written for other events.
    #[doc(alias = "PERF_RECORD_MISC_MMAP_BUILD_ID")]
    pub const fn mmap_build_id(self) -> bool {
        self.bit(PERF_RECORD_MISC_MMAP_BUILD_ID)
    }
}

/// A process and thread id pair (`u32 pid, tid`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct ThreadId {
    /// Process id (thread group id).
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
}

/// The `struct sample_id` trailer that `sample_id_all` appends to every non-sample record.
///
/// Each field is `Some` when the trailer is present and its `PERF_SAMPLE_*` bit is set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct SampleId {
    /// `PERF_SAMPLE_TID`.
    pub thread: Option<ThreadId>,
    /// `PERF_SAMPLE_TIME`.
    pub time: Option<u64>,
    /// `PERF_SAMPLE_ID`.
    pub id: Option<u64>,
    /// `PERF_SAMPLE_STREAM_ID`.
    pub stream_id: Option<u64>,
    /// `PERF_SAMPLE_CPU`.
    pub cpu: Option<u32>,
    /// `PERF_SAMPLE_IDENTIFIER`.
    pub identifier: Option<u64>,
}

#[inline]
pub(crate) fn parse_sample_id(
    data: Chunk<'_>,
    cfg: &ParseConfig,
    record: &'static str,
) -> Result<(SampleId, usize), Error> {
    let len = cfg.sample_id_len();
    if len == 0 {
        return Ok((SampleId::default(), data.len()));
    }
    let start = data.len().checked_sub(len).ok_or(ErrorKind::Truncated {
        record,
        field: "sample_id",
        len: data.len(),
    })?;
    let trailer = data.get(start, len).unwrap_or_default();
    let c = &mut Cursor::new(trailer, len, record);
    trailer_fields(c, cfg)
        .map(|id| (id, start))
        .map_err(|_| c.error())
}

#[inline]
fn trailer_fields(c: &mut Cursor<'_>, cfg: &ParseConfig) -> cursor::Parsed<SampleId> {
    let mut id = SampleId::default();
    if cfg.has(PERF_SAMPLE_TID) {
        let pid = c.u32("sample_id.pid")?;
        let tid = c.u32("sample_id.tid")?;
        id.thread = Some(ThreadId { pid, tid });
    }
    if cfg.has(PERF_SAMPLE_TIME) {
        id.time = Some(c.u64("sample_id.time")?);
    }
    if cfg.has(PERF_SAMPLE_ID) {
        id.id = Some(c.u64("sample_id.id")?);
    }
    if cfg.has(PERF_SAMPLE_STREAM_ID) {
        id.stream_id = Some(c.u64("sample_id.stream_id")?);
    }
    if cfg.has(PERF_SAMPLE_CPU) {
        id.cpu = Some(c.u32("sample_id.cpu")?);
        c.u32("sample_id.res")?;
    }
    if cfg.has(PERF_SAMPLE_IDENTIFIER) {
        id.identifier = Some(c.u64("sample_id.identifier")?);
    }
    Ok(id)
}

/// The name the kernel header gives a record type, e.g. `"MMAP2"` for 10, `"UNKNOWN"` past the last.
pub const fn record_type_name(ty: u32) -> &'static str {
    match ty {
        PERF_RECORD_MMAP => "MMAP",
        PERF_RECORD_LOST => "LOST",
        PERF_RECORD_COMM => "COMM",
        PERF_RECORD_EXIT => "EXIT",
        PERF_RECORD_THROTTLE => "THROTTLE",
        PERF_RECORD_UNTHROTTLE => "UNTHROTTLE",
        PERF_RECORD_FORK => "FORK",
        PERF_RECORD_READ => "READ",
        PERF_RECORD_SAMPLE => "SAMPLE",
        PERF_RECORD_MMAP2 => "MMAP2",
        PERF_RECORD_AUX => "AUX",
        PERF_RECORD_ITRACE_START => "ITRACE_START",
        PERF_RECORD_LOST_SAMPLES => "LOST_SAMPLES",
        PERF_RECORD_SWITCH => "SWITCH",
        PERF_RECORD_SWITCH_CPU_WIDE => "SWITCH_CPU_WIDE",
        PERF_RECORD_NAMESPACES => "NAMESPACES",
        PERF_RECORD_KSYMBOL => "KSYMBOL",
        PERF_RECORD_BPF_EVENT => "BPF_EVENT",
        PERF_RECORD_CGROUP => "CGROUP",
        PERF_RECORD_TEXT_POKE => "TEXT_POKE",
        PERF_RECORD_AUX_OUTPUT_HW_ID => "AUX_OUTPUT_HW_ID",
        PERF_RECORD_CALLCHAIN_DEFERRED => "CALLCHAIN_DEFERRED",
        _ => "UNKNOWN",
    }
}
