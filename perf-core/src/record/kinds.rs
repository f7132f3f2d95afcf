//! The typed record model: one struct per `PERF_RECORD_*` type, and [`Record`] over all of them.

use perf_sys::*;

use super::bytes::{Bytes, U64s};
use super::cursor::{Cursor, Parsed};
use super::sample::{parse_sample, ReadValues, Sample};
use super::{parse_read, parse_sample_id, Misc, SampleId};
use crate::ErrorKind;
use crate::{Chunk, Error, ParseConfig};

/// A typed record: what [`RawRecord::parse`](crate::RawRecord::parse) returns.
///
/// Variants borrow the ring until [`into_owned`](Self::into_owned); the same value encodes back to bytes with
/// [`encode`](Self::encode).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Record<'a> {
    /// `PERF_RECORD_MMAP`.
    #[doc(alias = "PERF_RECORD_MMAP")]
    Mmap(Mmap<'a>),
    /// `PERF_RECORD_LOST`.
    #[doc(alias = "PERF_RECORD_LOST")]
    Lost(Lost),
    /// `PERF_RECORD_COMM`.
    #[doc(alias = "PERF_RECORD_COMM")]
    Comm(Comm<'a>),
    /// `PERF_RECORD_EXIT`.
    #[doc(alias = "PERF_RECORD_EXIT")]
    Exit(Task),
    /// `PERF_RECORD_THROTTLE`.
    #[doc(alias = "PERF_RECORD_THROTTLE")]
    Throttle(Throttle),
    /// `PERF_RECORD_UNTHROTTLE`.
    #[doc(alias = "PERF_RECORD_UNTHROTTLE")]
    Unthrottle(Throttle),
    /// `PERF_RECORD_FORK`.
    #[doc(alias = "PERF_RECORD_FORK")]
    Fork(Task),
    /// `PERF_RECORD_READ`.
    #[doc(alias = "PERF_RECORD_READ")]
    Read(Read<'a>),
    /// `PERF_RECORD_SAMPLE`.
    #[doc(alias = "PERF_RECORD_SAMPLE")]
    Sample(Sample<'a>),
    /// `PERF_RECORD_MMAP2`. Since Linux 3.16.
    #[doc(alias = "PERF_RECORD_MMAP2")]
    Mmap2(Mmap2<'a>),
    /// `PERF_RECORD_AUX`. Since Linux 4.1.
    #[doc(alias = "PERF_RECORD_AUX")]
    Aux(Aux),
    /// `PERF_RECORD_ITRACE_START`. Since Linux 4.1.
    #[doc(alias = "PERF_RECORD_ITRACE_START")]
    ItraceStart(ItraceStart),
    /// `PERF_RECORD_LOST_SAMPLES`. Since Linux 4.2.
    #[doc(alias = "PERF_RECORD_LOST_SAMPLES")]
    LostSamples(LostSamples),
    /// `PERF_RECORD_SWITCH`. Since Linux 4.3.
    #[doc(alias = "PERF_RECORD_SWITCH")]
    Switch(Switch),
    /// `PERF_RECORD_SWITCH_CPU_WIDE`. Since Linux 4.3.
    #[doc(alias = "PERF_RECORD_SWITCH_CPU_WIDE")]
    SwitchCpuWide(SwitchCpuWide),
    /// `PERF_RECORD_NAMESPACES`. Since Linux 4.12.
    #[doc(alias = "PERF_RECORD_NAMESPACES")]
    Namespaces(Namespaces<'a>),
    /// `PERF_RECORD_KSYMBOL`. Since Linux 5.1.
    #[doc(alias = "PERF_RECORD_KSYMBOL")]
    Ksymbol(Ksymbol<'a>),
    /// `PERF_RECORD_BPF_EVENT`. Since Linux 5.1.
    #[doc(alias = "PERF_RECORD_BPF_EVENT")]
    BpfEvent(BpfEvent),
    /// `PERF_RECORD_CGROUP`. Since Linux 5.7.
    #[doc(alias = "PERF_RECORD_CGROUP")]
    Cgroup(Cgroup<'a>),
    /// `PERF_RECORD_TEXT_POKE`. Since Linux 5.9.
    #[doc(alias = "PERF_RECORD_TEXT_POKE")]
    TextPoke(TextPoke<'a>),
    /// `PERF_RECORD_AUX_OUTPUT_HW_ID`. Since Linux 5.16.
    #[doc(alias = "PERF_RECORD_AUX_OUTPUT_HW_ID")]
    AuxOutputHwId(AuxOutputHwId),
    /// `PERF_RECORD_CALLCHAIN_DEFERRED`. Since Linux 6.19.
    #[doc(alias = "PERF_RECORD_CALLCHAIN_DEFERRED")]
    CallchainDeferred(CallchainDeferred<'a>),
    /// A record type this parser does not know: its bytes, unparsed.
    Unknown(Unknown<'a>),
}

/// `PERF_RECORD_MMAP`: an executable mapping (data mappings too with `mmap_data`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Mmap<'a> {
    /// Header misc: [`cpumode`](Misc::cpumode), [`mmap_data`](Misc::mmap_data).
    pub misc: Misc,
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Start address.
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
    /// File offset.
    pub pgoff: u64,
    /// File name (without the NUL and padding).
    pub filename: Bytes<'a>,
    /// The sample_id trailer.
    pub sample_id: SampleId,
}

/// `PERF_RECORD_LOST`: records the kernel dropped because the ring was full.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Lost {
    /// Header misc.
    pub misc: Misc,
    /// Id of the event whose records were dropped.
    pub id: u64,
    /// How many records were dropped.
    pub lost: u64,
    /// The sample_id trailer.
    pub sample_id: SampleId,
}

/// `PERF_RECORD_COMM`: a thread's name changed (prctl or exec).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Comm<'a> {
    /// Header misc: [`comm_exec`](Misc::comm_exec).
    pub misc: Misc,
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// The new name (without the NUL and padding).
    pub comm: Bytes<'a>,
    /// The sample_id trailer.
    pub sample_id: SampleId,
}

/// `PERF_RECORD_FORK` / `PERF_RECORD_EXIT`: a task was created or exited.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Task {
    /// Header misc.
    pub misc: Misc,
    /// Process id.
    pub pid: u32,
    /// Parent process id.
    pub ppid: u32,
    /// Thread id.
    pub tid: u32,
    /// Parent thread id.
    pub ptid: u32,
    /// Timestamp.
    pub time: u64,
    /// The sample_id trailer.
    pub sample_id: SampleId,
}

/// `PERF_RECORD_THROTTLE` / `PERF_RECORD_UNTHROTTLE`: sampling was throttled or resumed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Throttle {
    /// Header misc.
    pub misc: Misc,
    /// Timestamp.
    pub time: u64,
    /// Event id.
    pub id: u64,
    /// Stream id.
    pub stream_id: u64,
    /// The sample_id trailer.
    pub sample_id: SampleId,
}

/// `PERF_RECORD_READ`: counter values of an exiting child (`inherit_stat`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Read<'a> {
    /// Header misc.
    pub misc: Misc,
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// The values, laid out by `read_format`.
    pub values: ReadValues<'a>,
    /// The sample_id trailer.
    pub sample_id: SampleId,
}

/// What identifies an MMAP2 mapping's file: device and inode, or a build id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mmap2File {
    /// Device and inode numbers.
    Inode {
        /// Device major.
        maj: u32,
        /// Device minor.
        min: u32,
        /// Inode number.
        ino: u64,
        /// Inode generation.
        ino_generation: u64,
    },
    /// A build id (`PERF_RECORD_MISC_MMAP_BUILD_ID`, `attr.build_id`). Since Linux 5.12.
    BuildId(BuildId),
}

impl Default for Mmap2File {
    fn default() -> Self {
        Mmap2File::Inode {
            maj: 0,
            min: 0,
            ino: 0,
            ino_generation: 0,
        }
    }
}

/// A build id as MMAP2 carries it: up to 20 bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct BuildId {
    /// `build_id_size`: how many bytes of `bytes` are the id.
    pub size: u8,
    /// The id, zero-padded to 20 bytes.
    pub bytes: [u8; 20],
}

impl BuildId {
    /// The id's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        self.bytes.get(..self.size as usize).unwrap_or(&self.bytes)
    }
}

/// `PERF_RECORD_MMAP2`: a mapping, with the file's identity and protection. Since Linux 3.16.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Mmap2<'a> {
    /// Header misc: [`cpumode`](Misc::cpumode), [`mmap_data`](Misc::mmap_data),
    /// [`mmap_build_id`](Misc::mmap_build_id) (with [`ParseConfig::mmap2_has_build_id`], it decides
    /// `file`'s variant: a build id only where the event asked for one).
    ///
    /// [`ParseConfig::mmap2_has_build_id`]: crate::ParseConfig::mmap2_has_build_id
    pub misc: Misc,
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Start address.
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
    /// File offset.
    pub pgoff: u64,
    /// Device/inode or build id.
    pub file: Mmap2File,
    /// `PROT_*` bits.
    pub prot: u32,
    /// `MAP_*` bits.
    pub flags: u32,
    /// File name (without the NUL and padding).
    pub filename: Bytes<'a>,
    /// The sample_id trailer.
    pub sample_id: SampleId,
}

/// The flags of a `PERF_RECORD_AUX` (`PERF_AUX_FLAG_*`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AuxFlags(pub u64);

impl AuxFlags {
    /// `PERF_AUX_FLAG_TRUNCATED`: the record was truncated to fit.
    pub const fn truncated(self) -> bool {
        self.0 & 0x1 != 0
    }
    /// `PERF_AUX_FLAG_OVERWRITE`: a snapshot from overwrite mode.
    pub const fn overwrite(self) -> bool {
        self.0 & 0x2 != 0
    }
    /// `PERF_AUX_FLAG_PARTIAL`: the record contains gaps. Since Linux 4.12.
    pub const fn partial(self) -> bool {
        self.0 & 0x4 != 0
    }
    /// `PERF_AUX_FLAG_COLLISION`: the sample collided with another. Since Linux 4.15.
    pub const fn collision(self) -> bool {
        self.0 & 0x8 != 0
    }
    /// `PERF_AUX_FLAG_PMU_FORMAT_TYPE_MASK`: PMU-specific trace format type. Since Linux 5.13.
    pub const fn pmu_format_type(self) -> u8 {
        (self.0 >> 8) as u8
    }
}

/// `PERF_RECORD_AUX`: new data landed in the AUX area. Since Linux 4.1.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Aux {
    /// Header misc.
    pub misc: Misc,
    /// Offset of the data in the AUX area.
    pub aux_offset: u64,
    /// Size of the data.
    pub aux_size: u64,
    /// Flags.
    pub flags: AuxFlags,
    /// The sample_id trailer.
    pub sample_id: SampleId,
}

/// `PERF_RECORD_ITRACE_START`: instruction tracing started for a task. Since Linux 4.1.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ItraceStart {
    /// Header misc.
    pub misc: Misc,
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// The sample_id trailer.
    pub sample_id: SampleId,
}

/// `PERF_RECORD_LOST_SAMPLES`: samples the PMU dropped (e.g. PEBS). Since Linux 4.2.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct LostSamples {
    /// Header misc.
    pub misc: Misc,
    /// Samples lost.
    pub lost: u64,
    /// The sample_id trailer.
    pub sample_id: SampleId,
}

/// `PERF_RECORD_SWITCH`: the monitored task was switched in or out. Since Linux 4.3.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Switch {
    /// Header misc: [`switch_out`](Misc::switch_out), [`switch_out_preempt`](Misc::switch_out_preempt).
    pub misc: Misc,
    /// The sample_id trailer.
    pub sample_id: SampleId,
}

/// `PERF_RECORD_SWITCH_CPU_WIDE`: a context switch on a monitored CPU. Since Linux 4.3.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SwitchCpuWide {
    /// Header misc: [`switch_out`](Misc::switch_out), [`switch_out_preempt`](Misc::switch_out_preempt).
    pub misc: Misc,
    /// Process id of the next task (switching out) or previous task (switching in).
    pub next_prev_pid: u32,
    /// Thread id of the next or previous task.
    pub next_prev_tid: u32,
    /// The sample_id trailer.
    pub sample_id: SampleId,
}

/// One namespace link of a NAMESPACES record (`struct perf_ns_link_info`).
#[doc(alias = "perf_ns_link_info")]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct NamespaceLink {
    /// Device of the nsfs inode.
    pub dev: u64,
    /// Inode number of the namespace.
    pub ino: u64,
}

/// `PERF_RECORD_NAMESPACES`: a task's namespaces (on fork, unshare, setns). Since Linux 4.12.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Namespaces<'a> {
    /// Header misc.
    pub misc: Misc,
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// `dev`, `ino` word pairs, indexed by `NET_NS_INDEX`... (`NR_NAMESPACES` of them on current kernels).
    pub words: U64s<'a>,
    /// The sample_id trailer.
    pub sample_id: SampleId,
}

impl Namespaces<'_> {
    /// The namespaces in the kernel's index order (uts, pid, ipc, mnt, net, user, cgroup, time, ...).
    pub fn links(&self) -> impl Iterator<Item = NamespaceLink> + '_ {
        (0..self.words.len() / 2).map(move |i| NamespaceLink {
            dev: self.words.get(2 * i).unwrap_or(0),
            ino: self.words.get(2 * i + 1).unwrap_or(0),
        })
    }
}

/// `PERF_RECORD_KSYMBOL`: a kernel symbol (BPF program, trampoline) was registered or unregistered.
/// Since Linux 5.1.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ksymbol<'a> {
    /// Header misc.
    pub misc: Misc,
    /// Address.
    pub addr: u64,
    /// Length.
    pub len: u32,
    /// `PERF_RECORD_KSYMBOL_TYPE_*`.
    pub ksym_type: u16,
    /// `PERF_RECORD_KSYMBOL_FLAGS_UNREGISTER` or 0.
    pub flags: u16,
    /// Symbol name (without the NUL and padding).
    pub name: Bytes<'a>,
    /// The sample_id trailer.
    pub sample_id: SampleId,
}

/// `PERF_RECORD_BPF_EVENT`: a BPF program was loaded or unloaded. Since Linux 5.1.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct BpfEvent {
    /// Header misc.
    pub misc: Misc,
    /// `PERF_BPF_EVENT_*`.
    pub event_type: u16,
    /// Flags.
    pub flags: u16,
    /// Program id.
    pub id: u32,
    /// Program tag (`BPF_TAG_SIZE` bytes).
    pub tag: [u8; 8],
    /// The sample_id trailer.
    pub sample_id: SampleId,
}

/// `PERF_RECORD_CGROUP`: a cgroup was created. Since Linux 5.7.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cgroup<'a> {
    /// Header misc.
    pub misc: Misc,
    /// Cgroup id (the inode number in the cgroup v2 hierarchy).
    pub id: u64,
    /// Path under the cgroup root (without the NUL and padding).
    pub path: Bytes<'a>,
    /// The sample_id trailer.
    pub sample_id: SampleId,
}

/// `PERF_RECORD_TEXT_POKE`: kernel text was modified. Since Linux 5.9.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TextPoke<'a> {
    /// Header misc.
    pub misc: Misc,
    /// Address of the change.
    pub addr: u64,
    /// The bytes before (`old_len` of them).
    pub old_bytes: Bytes<'a>,
    /// The bytes after (`new_len` of them).
    pub new_bytes: Bytes<'a>,
    /// The sample_id trailer.
    pub sample_id: SampleId,
}

/// `PERF_RECORD_AUX_OUTPUT_HW_ID`: the hardware id of `aux_output` data. Since Linux 5.16.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AuxOutputHwId {
    /// Header misc.
    pub misc: Misc,
    /// Architecture-specific hardware id.
    pub hw_id: u64,
    /// The sample_id trailer.
    pub sample_id: SampleId,
}

/// `PERF_RECORD_CALLCHAIN_DEFERRED`: the user part of earlier samples' callchains, captured before returning
/// to user space. Since Linux 6.19.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallchainDeferred<'a> {
    /// Header misc.
    pub misc: Misc,
    /// Matches [`Callchain::deferred_cookie`](crate::record::Callchain::deferred_cookie) of the samples to stitch.
    pub cookie: u64,
    /// The user instruction pointers (with context markers).
    pub ips: U64s<'a>,
    /// The sample_id trailer.
    pub sample_id: SampleId,
}

/// A record of a type this parser does not know.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Unknown<'a> {
    /// The header's type.
    pub record_type: u32,
    /// Header misc.
    pub misc: Misc,
    /// Everything after the header.
    pub data: Bytes<'a>,
}

/// Splits a NUL-terminated, NUL-padded string region.
fn c_string(region: Chunk<'_>) -> Bytes<'_> {
    let first_nul = region
        .first()
        .iter()
        .chain(region.second())
        .position(|&b| b == 0)
        .unwrap_or(region.len());
    Bytes::borrowed(region.get(0, first_nul).unwrap_or_default())
}

#[inline]
pub(crate) fn parse_record<'a>(
    ty: u32,
    misc: Misc,
    data: Chunk<'a>,
    cfg: &ParseConfig,
) -> Result<Record<'a>, Error> {
    if ty == PERF_RECORD_SAMPLE {
        return parse_sample(misc, data, cfg);
    }
    if !(PERF_RECORD_MMAP..PERF_RECORD_MAX).contains(&ty) {
        return Ok(Record::Unknown(Unknown {
            record_type: ty,
            misc,
            data: Bytes::borrowed(data),
        }));
    }
    let name = super::record_type_name(ty);
    let (sample_id, end) = parse_sample_id(data, cfg, name)?;
    if ty == PERF_RECORD_READ && cfg.read_format() & !super::config::KNOWN_READ_FORMAT != 0 {
        return Err(ErrorKind::UnknownLayout {
            sample_type: cfg.sample_type(),
            read_format: cfg.read_format(),
        }
        .into());
    }
    let c = &mut Cursor::new(data, end, name);
    let body = |c: &mut Cursor<'a>| -> Parsed<Record<'a>> {
        let record = match ty {
            PERF_RECORD_MMAP => Record::Mmap(Mmap {
                misc,
                pid: c.u32("pid")?,
                tid: c.u32("tid")?,
                addr: c.u64("addr")?,
                len: c.u64("len")?,
                pgoff: c.u64("pgoff")?,
                filename: c_string(c.rest()),
                sample_id,
            }),
            PERF_RECORD_LOST => Record::Lost(Lost {
                misc,
                id: c.u64("id")?,
                lost: c.u64("lost")?,
                sample_id,
            }),
            PERF_RECORD_COMM => Record::Comm(Comm {
                misc,
                pid: c.u32("pid")?,
                tid: c.u32("tid")?,
                comm: c_string(c.rest()),
                sample_id,
            }),
            PERF_RECORD_EXIT | PERF_RECORD_FORK => {
                let t = Task {
                    misc,
                    pid: c.u32("pid")?,
                    ppid: c.u32("ppid")?,
                    tid: c.u32("tid")?,
                    ptid: c.u32("ptid")?,
                    time: c.u64("time")?,
                    sample_id,
                };
                if ty == PERF_RECORD_EXIT {
                    Record::Exit(t)
                } else {
                    Record::Fork(t)
                }
            }
            PERF_RECORD_THROTTLE | PERF_RECORD_UNTHROTTLE => {
                let t = Throttle {
                    misc,
                    time: c.u64("time")?,
                    id: c.u64("id")?,
                    stream_id: c.u64("stream_id")?,
                    sample_id,
                };
                if ty == PERF_RECORD_THROTTLE {
                    Record::Throttle(t)
                } else {
                    Record::Unthrottle(t)
                }
            }
            PERF_RECORD_READ => Record::Read(Read {
                misc,
                pid: c.u32("pid")?,
                tid: c.u32("tid")?,
                values: parse_read(c, cfg)?,
                sample_id,
            }),
            PERF_RECORD_MMAP2 => {
                let (pid, tid) = (c.u32("pid")?, c.u32("tid")?);
                let (addr, len, pgoff) = (c.u64("addr")?, c.u64("len")?, c.u64("pgoff")?);
                let file = if cfg.mmap2_has_build_id(misc) {
                    let size = c.u8("build_id_size")?;
                    c.u8("__reserved_1")?;
                    c.u16("__reserved_2")?;
                    let mut bytes = [0u8; 20];
                    c.bytes(20, "build_id")?.copy_to_slice(&mut bytes);
                    Mmap2File::BuildId(BuildId { size, bytes })
                } else {
                    Mmap2File::Inode {
                        maj: c.u32("maj")?,
                        min: c.u32("min")?,
                        ino: c.u64("ino")?,
                        ino_generation: c.u64("ino_generation")?,
                    }
                };
                Record::Mmap2(Mmap2 {
                    misc,
                    pid,
                    tid,
                    addr,
                    len,
                    pgoff,
                    file,
                    prot: c.u32("prot")?,
                    flags: c.u32("flags")?,
                    filename: c_string(c.rest()),
                    sample_id,
                })
            }
            PERF_RECORD_AUX => Record::Aux(Aux {
                misc,
                aux_offset: c.u64("aux_offset")?,
                aux_size: c.u64("aux_size")?,
                flags: AuxFlags(c.u64("flags")?),
                sample_id,
            }),
            PERF_RECORD_ITRACE_START => Record::ItraceStart(ItraceStart {
                misc,
                pid: c.u32("pid")?,
                tid: c.u32("tid")?,
                sample_id,
            }),
            PERF_RECORD_LOST_SAMPLES => Record::LostSamples(LostSamples {
                misc,
                lost: c.u64("lost")?,
                sample_id,
            }),
            PERF_RECORD_SWITCH => Record::Switch(Switch { misc, sample_id }),
            PERF_RECORD_SWITCH_CPU_WIDE => Record::SwitchCpuWide(SwitchCpuWide {
                misc,
                next_prev_pid: c.u32("next_prev_pid")?,
                next_prev_tid: c.u32("next_prev_tid")?,
                sample_id,
            }),
            PERF_RECORD_NAMESPACES => {
                let (pid, tid) = (c.u32("pid")?, c.u32("tid")?);
                let nr = c.u64("nr_namespaces")?;
                Record::Namespaces(Namespaces {
                    misc,
                    pid,
                    tid,
                    words: U64s::borrowed(c.words(nr, 2, "namespaces")?),
                    sample_id,
                })
            }
            PERF_RECORD_KSYMBOL => Record::Ksymbol(Ksymbol {
                misc,
                addr: c.u64("addr")?,
                len: c.u32("len")?,
                ksym_type: c.u16("ksym_type")?,
                flags: c.u16("flags")?,
                name: c_string(c.rest()),
                sample_id,
            }),
            PERF_RECORD_BPF_EVENT => {
                let (event_type, flags, id) = (c.u16("type")?, c.u16("flags")?, c.u32("id")?);
                let mut tag = [0u8; 8];
                c.bytes(8, "tag")?.copy_to_slice(&mut tag);
                Record::BpfEvent(BpfEvent {
                    misc,
                    event_type,
                    flags,
                    id,
                    tag,
                    sample_id,
                })
            }
            PERF_RECORD_CGROUP => Record::Cgroup(Cgroup {
                misc,
                id: c.u64("id")?,
                path: c_string(c.rest()),
                sample_id,
            }),
            PERF_RECORD_TEXT_POKE => {
                let addr = c.u64("addr")?;
                let (old_len, new_len) = (c.u16("old_len")?, c.u16("new_len")?);
                let old_bytes = Bytes::borrowed(c.bytes(old_len as usize, "old_bytes")?);
                let new_bytes = Bytes::borrowed(c.bytes(new_len as usize, "new_bytes")?);
                // The kernel pads the bytes to 8; anything longer is not padding.
                if c.remaining() >= 8 {
                    c.finish()?;
                }
                c.rest();
                Record::TextPoke(TextPoke {
                    misc,
                    addr,
                    old_bytes,
                    new_bytes,
                    sample_id,
                })
            }
            PERF_RECORD_AUX_OUTPUT_HW_ID => Record::AuxOutputHwId(AuxOutputHwId {
                misc,
                hw_id: c.u64("hw_id")?,
                sample_id,
            }),
            PERF_RECORD_CALLCHAIN_DEFERRED => {
                let cookie = c.u64("cookie")?;
                let nr = c.u64("nr")?;
                Record::CallchainDeferred(CallchainDeferred {
                    misc,
                    cookie,
                    ips: U64s::borrowed(c.words(nr, 1, "ips")?),
                    sample_id,
                })
            }
            _ => Record::Unknown(Unknown {
                record_type: ty,
                misc,
                data: Bytes::borrowed(data),
            }),
        };
        c.finish()?;
        Ok(record)
    };
    body(c).map_err(|_| c.error())
}

impl<'a> Record<'a> {
    /// The `PERF_RECORD_*` type.
    pub fn record_type(&self) -> u32 {
        match self {
            Record::Mmap(_) => PERF_RECORD_MMAP,
            Record::Lost(_) => PERF_RECORD_LOST,
            Record::Comm(_) => PERF_RECORD_COMM,
            Record::Exit(_) => PERF_RECORD_EXIT,
            Record::Throttle(_) => PERF_RECORD_THROTTLE,
            Record::Unthrottle(_) => PERF_RECORD_UNTHROTTLE,
            Record::Fork(_) => PERF_RECORD_FORK,
            Record::Read(_) => PERF_RECORD_READ,
            Record::Sample(_) => PERF_RECORD_SAMPLE,
            Record::Mmap2(_) => PERF_RECORD_MMAP2,
            Record::Aux(_) => PERF_RECORD_AUX,
            Record::ItraceStart(_) => PERF_RECORD_ITRACE_START,
            Record::LostSamples(_) => PERF_RECORD_LOST_SAMPLES,
            Record::Switch(_) => PERF_RECORD_SWITCH,
            Record::SwitchCpuWide(_) => PERF_RECORD_SWITCH_CPU_WIDE,
            Record::Namespaces(_) => PERF_RECORD_NAMESPACES,
            Record::Ksymbol(_) => PERF_RECORD_KSYMBOL,
            Record::BpfEvent(_) => PERF_RECORD_BPF_EVENT,
            Record::Cgroup(_) => PERF_RECORD_CGROUP,
            Record::TextPoke(_) => PERF_RECORD_TEXT_POKE,
            Record::AuxOutputHwId(_) => PERF_RECORD_AUX_OUTPUT_HW_ID,
            Record::CallchainDeferred(_) => PERF_RECORD_CALLCHAIN_DEFERRED,
            Record::Unknown(u) => u.record_type,
        }
    }

    /// The header's misc bits.
    pub fn misc(&self) -> Misc {
        match self {
            Record::Mmap(r) => r.misc,
            Record::Lost(r) => r.misc,
            Record::Comm(r) => r.misc,
            Record::Exit(r) | Record::Fork(r) => r.misc,
            Record::Throttle(r) | Record::Unthrottle(r) => r.misc,
            Record::Read(r) => r.misc,
            Record::Sample(r) => r.misc(),
            Record::Mmap2(r) => r.misc,
            Record::Aux(r) => r.misc,
            Record::ItraceStart(r) => r.misc,
            Record::LostSamples(r) => r.misc,
            Record::Switch(r) => r.misc,
            Record::SwitchCpuWide(r) => r.misc,
            Record::Namespaces(r) => r.misc,
            Record::Ksymbol(r) => r.misc,
            Record::BpfEvent(r) => r.misc,
            Record::Cgroup(r) => r.misc,
            Record::TextPoke(r) => r.misc,
            Record::AuxOutputHwId(r) => r.misc,
            Record::CallchainDeferred(r) => r.misc,
            Record::Unknown(r) => r.misc,
        }
    }

    /// The sample_id trailer, for every record but SAMPLE (whose fields hold the same values) and unknown ones.
    pub fn sample_id(&self) -> Option<&SampleId> {
        Some(match self {
            Record::Mmap(r) => &r.sample_id,
            Record::Lost(r) => &r.sample_id,
            Record::Comm(r) => &r.sample_id,
            Record::Exit(r) | Record::Fork(r) => &r.sample_id,
            Record::Throttle(r) | Record::Unthrottle(r) => &r.sample_id,
            Record::Read(r) => &r.sample_id,
            Record::Mmap2(r) => &r.sample_id,
            Record::Aux(r) => &r.sample_id,
            Record::ItraceStart(r) => &r.sample_id,
            Record::LostSamples(r) => &r.sample_id,
            Record::Switch(r) => &r.sample_id,
            Record::SwitchCpuWide(r) => &r.sample_id,
            Record::Namespaces(r) => &r.sample_id,
            Record::Ksymbol(r) => &r.sample_id,
            Record::BpfEvent(r) => &r.sample_id,
            Record::Cgroup(r) => &r.sample_id,
            Record::TextPoke(r) => &r.sample_id,
            Record::AuxOutputHwId(r) => &r.sample_id,
            Record::CallchainDeferred(r) => &r.sample_id,
            Record::Sample(_) | Record::Unknown(_) => return None,
        })
    }

    /// An owned copy that no longer borrows the ring.
    pub fn into_owned(self) -> Record<'static> {
        match self {
            Record::Mmap(r) => Record::Mmap(Mmap {
                filename: r.filename.into_owned(),
                misc: r.misc,
                pid: r.pid,
                tid: r.tid,
                addr: r.addr,
                len: r.len,
                pgoff: r.pgoff,
                sample_id: r.sample_id,
            }),
            Record::Lost(r) => Record::Lost(r),
            Record::Comm(r) => Record::Comm(Comm {
                comm: r.comm.into_owned(),
                misc: r.misc,
                pid: r.pid,
                tid: r.tid,
                sample_id: r.sample_id,
            }),
            Record::Exit(r) => Record::Exit(r),
            Record::Throttle(r) => Record::Throttle(r),
            Record::Unthrottle(r) => Record::Unthrottle(r),
            Record::Fork(r) => Record::Fork(r),
            Record::Read(r) => Record::Read(Read {
                values: r.values.into_owned(),
                misc: r.misc,
                pid: r.pid,
                tid: r.tid,
                sample_id: r.sample_id,
            }),
            Record::Sample(r) => Record::Sample(r.into_owned()),
            Record::Mmap2(r) => Record::Mmap2(Mmap2 {
                filename: r.filename.into_owned(),
                misc: r.misc,
                pid: r.pid,
                tid: r.tid,
                addr: r.addr,
                len: r.len,
                pgoff: r.pgoff,
                file: r.file,
                prot: r.prot,
                flags: r.flags,
                sample_id: r.sample_id,
            }),
            Record::Aux(r) => Record::Aux(r),
            Record::ItraceStart(r) => Record::ItraceStart(r),
            Record::LostSamples(r) => Record::LostSamples(r),
            Record::Switch(r) => Record::Switch(r),
            Record::SwitchCpuWide(r) => Record::SwitchCpuWide(r),
            Record::Namespaces(r) => Record::Namespaces(Namespaces {
                words: r.words.into_owned(),
                misc: r.misc,
                pid: r.pid,
                tid: r.tid,
                sample_id: r.sample_id,
            }),
            Record::Ksymbol(r) => Record::Ksymbol(Ksymbol {
                name: r.name.into_owned(),
                misc: r.misc,
                addr: r.addr,
                len: r.len,
                ksym_type: r.ksym_type,
                flags: r.flags,
                sample_id: r.sample_id,
            }),
            Record::BpfEvent(r) => Record::BpfEvent(r),
            Record::Cgroup(r) => Record::Cgroup(Cgroup {
                path: r.path.into_owned(),
                misc: r.misc,
                id: r.id,
                sample_id: r.sample_id,
            }),
            Record::TextPoke(r) => Record::TextPoke(TextPoke {
                old_bytes: r.old_bytes.into_owned(),
                new_bytes: r.new_bytes.into_owned(),
                misc: r.misc,
                addr: r.addr,
                sample_id: r.sample_id,
            }),
            Record::AuxOutputHwId(r) => Record::AuxOutputHwId(r),
            Record::CallchainDeferred(r) => Record::CallchainDeferred(CallchainDeferred {
                ips: r.ips.into_owned(),
                misc: r.misc,
                cookie: r.cookie,
                sample_id: r.sample_id,
            }),
            Record::Unknown(r) => Record::Unknown(Unknown {
                data: r.data.into_owned(),
                record_type: r.record_type,
                misc: r.misc,
            }),
        }
    }
}
