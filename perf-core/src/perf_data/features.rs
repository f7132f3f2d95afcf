//! Feature sections: the host and build facts perf stores after the data section, one section per bit of
//! the header's feature bitmap.

use std::collections::BTreeMap;

use perf_sys::*;

use super::data::PERF_RECORD_HEADER_BUILD_ID;

use super::attrs::{attr_to_bytes, read_attr, EventAttr};
use super::wire::{align_up, c_str, put_string, put_u32, put_u64, Reader, NAME_ALIGN};
use crate::Error;

/// A feature section's number: its bit in the header's bitmap (perf's `HEADER_*` enum).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Feature(pub u32);

impl Feature {
    /// Tracepoint formats (`HEADER_TRACING_DATA`).
    #[doc(alias = "HEADER_TRACING_DATA")]
    pub const TRACING_DATA: Feature = Feature(1);
    /// Build ids of the binaries samples hit (`HEADER_BUILD_ID`).
    #[doc(alias = "HEADER_BUILD_ID")]
    pub const BUILD_ID: Feature = Feature(2);
    /// Host name (`HEADER_HOSTNAME`).
    #[doc(alias = "HEADER_HOSTNAME")]
    pub const HOSTNAME: Feature = Feature(3);
    /// Kernel release, `uname -r` (`HEADER_OSRELEASE`).
    #[doc(alias = "HEADER_OSRELEASE")]
    pub const OSRELEASE: Feature = Feature(4);
    /// Version of the tool that wrote the file (`HEADER_VERSION`).
    #[doc(alias = "HEADER_VERSION")]
    pub const VERSION: Feature = Feature(5);
    /// Machine, `uname -m` (`HEADER_ARCH`).
    #[doc(alias = "HEADER_ARCH")]
    pub const ARCH: Feature = Feature(6);
    /// CPUs available and online (`HEADER_NRCPUS`).
    #[doc(alias = "HEADER_NRCPUS")]
    pub const NRCPUS: Feature = Feature(7);
    /// CPU model name (`HEADER_CPUDESC`).
    #[doc(alias = "HEADER_CPUDESC")]
    pub const CPUDESC: Feature = Feature(8);
    /// CPU identification string perf uses to pick event tables (`HEADER_CPUID`).
    #[doc(alias = "HEADER_CPUID")]
    pub const CPUID: Feature = Feature(9);
    /// Total memory in KiB (`HEADER_TOTAL_MEM`).
    #[doc(alias = "HEADER_TOTAL_MEM")]
    pub const TOTAL_MEM: Feature = Feature(10);
    /// The recording command line (`HEADER_CMDLINE`).
    #[doc(alias = "HEADER_CMDLINE")]
    pub const CMDLINE: Feature = Feature(11);
    /// Event names and ids (`HEADER_EVENT_DESC`).
    #[doc(alias = "HEADER_EVENT_DESC")]
    pub const EVENT_DESC: Feature = Feature(12);
    /// CPU topology (`HEADER_CPU_TOPOLOGY`).
    #[doc(alias = "HEADER_CPU_TOPOLOGY")]
    pub const CPU_TOPOLOGY: Feature = Feature(13);
    /// NUMA topology (`HEADER_NUMA_TOPOLOGY`).
    #[doc(alias = "HEADER_NUMA_TOPOLOGY")]
    pub const NUMA_TOPOLOGY: Feature = Feature(14);
    /// Branch stack sampling was used (`HEADER_BRANCH_STACK`).
    #[doc(alias = "HEADER_BRANCH_STACK")]
    pub const BRANCH_STACK: Feature = Feature(15);
    /// PMU names and types (`HEADER_PMU_MAPPINGS`).
    #[doc(alias = "HEADER_PMU_MAPPINGS")]
    pub const PMU_MAPPINGS: Feature = Feature(16);
    /// Event groups (`HEADER_GROUP_DESC`).
    #[doc(alias = "HEADER_GROUP_DESC")]
    pub const GROUP_DESC: Feature = Feature(17);
    /// AUX area tracing index (`HEADER_AUXTRACE`).
    #[doc(alias = "HEADER_AUXTRACE")]
    pub const AUXTRACE: Feature = Feature(18);
    /// `perf stat` record (`HEADER_STAT`).
    #[doc(alias = "HEADER_STAT")]
    pub const STAT: Feature = Feature(19);
    /// CPU caches (`HEADER_CACHE`).
    #[doc(alias = "HEADER_CACHE")]
    pub const CACHE: Feature = Feature(20);
    /// Time of the first and last sample (`HEADER_SAMPLE_TIME`).
    #[doc(alias = "HEADER_SAMPLE_TIME")]
    pub const SAMPLE_TIME: Feature = Feature(21);
    /// Memory topology (`HEADER_MEM_TOPOLOGY`).
    #[doc(alias = "HEADER_MEM_TOPOLOGY")]
    pub const MEM_TOPOLOGY: Feature = Feature(22);
    /// Clock resolution (`HEADER_CLOCKID`).
    #[doc(alias = "HEADER_CLOCKID")]
    pub const CLOCKID: Feature = Feature(23);
    /// Directory-format data (`HEADER_DIR_FORMAT`).
    #[doc(alias = "HEADER_DIR_FORMAT")]
    pub const DIR_FORMAT: Feature = Feature(24);
    /// BPF program info (`HEADER_BPF_PROG_INFO`).
    #[doc(alias = "HEADER_BPF_PROG_INFO")]
    pub const BPF_PROG_INFO: Feature = Feature(25);
    /// BPF type info (`HEADER_BPF_BTF`).
    #[doc(alias = "HEADER_BPF_BTF")]
    pub const BPF_BTF: Feature = Feature(26);
    /// Compressed records (`HEADER_COMPRESSED`).
    #[doc(alias = "HEADER_COMPRESSED")]
    pub const COMPRESSED: Feature = Feature(27);
    /// Core PMU capabilities (`HEADER_CPU_PMU_CAPS`).
    #[doc(alias = "HEADER_CPU_PMU_CAPS")]
    pub const CPU_PMU_CAPS: Feature = Feature(28);
    /// Reference clock data (`HEADER_CLOCK_DATA`).
    #[doc(alias = "HEADER_CLOCK_DATA")]
    pub const CLOCK_DATA: Feature = Feature(29);
    /// Hybrid CPU topology (`HEADER_HYBRID_TOPOLOGY`).
    #[doc(alias = "HEADER_HYBRID_TOPOLOGY")]
    pub const HYBRID_TOPOLOGY: Feature = Feature(30);
    /// PMU capabilities (`HEADER_PMU_CAPS`).
    #[doc(alias = "HEADER_PMU_CAPS")]
    pub const PMU_CAPS: Feature = Feature(31);

    /// The name perf gives the feature (`"HOSTNAME"`), `"UNKNOWN"` for a number it does not name.
    pub const fn name(self) -> &'static str {
        const NAMES: [&str; 32] = [
            "RESERVED",
            "TRACING_DATA",
            "BUILD_ID",
            "HOSTNAME",
            "OSRELEASE",
            "VERSION",
            "ARCH",
            "NRCPUS",
            "CPUDESC",
            "CPUID",
            "TOTAL_MEM",
            "CMDLINE",
            "EVENT_DESC",
            "CPU_TOPOLOGY",
            "NUMA_TOPOLOGY",
            "BRANCH_STACK",
            "PMU_MAPPINGS",
            "GROUP_DESC",
            "AUXTRACE",
            "STAT",
            "CACHE",
            "SAMPLE_TIME",
            "MEM_TOPOLOGY",
            "CLOCKID",
            "DIR_FORMAT",
            "BPF_PROG_INFO",
            "BPF_BTF",
            "COMPRESSED",
            "CPU_PMU_CAPS",
            "CLOCK_DATA",
            "HYBRID_TOPOLOGY",
            "PMU_CAPS",
        ];
        if (self.0 as usize) < NAMES.len() {
            NAMES[self.0 as usize]
        } else {
            "UNKNOWN"
        }
    }
}

/// CPU counts (`HEADER_NRCPUS`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct NrCpus {
    /// CPUs the system could have (highest present CPU number + 1).
    pub available: u32,
    /// CPUs online.
    pub online: u32,
}

/// One binary's build id (an entry of `HEADER_BUILD_ID`, a `struct perf_record_header_build_id`).
///
/// perf uses it to check that the file it symbolizes from is the one that ran (or to find it in its
/// build-id cache).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct BuildIdEntry {
    /// The machine's pid: -1 for the host (perf's `HOST_KERNEL_ID`).
    pub pid: i32,
    /// Header misc: the CPU mode of the binary, `PERF_RECORD_MISC_USER` or `PERF_RECORD_MISC_KERNEL`.
    pub cpumode: u16,
    /// The id: at most 20 bytes (SHA-1 or shorter).
    pub build_id: Vec<u8>,
    /// The binary's path as the mappings name it.
    pub filename: String,
}

impl BuildIdEntry {
    /// A user-space binary of the host.
    pub fn user(build_id: impl Into<Vec<u8>>, filename: impl Into<String>) -> Self {
        BuildIdEntry {
            pid: -1,
            cpumode: PERF_RECORD_MISC_USER as u16,
            build_id: build_id.into(),
            filename: filename.into(),
        }
    }

    /// A kernel image or module of the host (`"[kernel.kallsyms]"` for the kernel).
    pub fn kernel(build_id: impl Into<Vec<u8>>, filename: impl Into<String>) -> Self {
        BuildIdEntry {
            cpumode: PERF_RECORD_MISC_KERNEL as u16,
            ..BuildIdEntry::user(build_id, filename)
        }
    }
}

/// `PERF_RECORD_MISC_BUILD_ID_SIZE`: the build id entry stores its length in byte 20 of the id.
const MISC_BUILD_ID_SIZE: u16 = 1 << 15;
/// header (8) + pid (4) + build_id (24).
const BUILD_ID_FIXED: usize = 36;

/// Time of the first and last sample, in the clock the samples used (`HEADER_SAMPLE_TIME`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SampleTime {
    /// Timestamp of the first sample.
    pub first: u64,
    /// Timestamp of the last sample.
    pub last: u64,
}

/// The feature sections of a perf.data file that this crate reads and writes, plus any others kept as bytes.
///
/// Event names and ids (`HEADER_EVENT_DESC`) are not here: they belong to the events
/// ([`EventAttr::name`], [`EventAttr::ids`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Features {
    /// `HEADER_HOSTNAME`.
    pub hostname: Option<String>,
    /// `HEADER_OSRELEASE`.
    pub osrelease: Option<String>,
    /// `HEADER_VERSION`.
    pub version: Option<String>,
    /// `HEADER_ARCH`.
    pub arch: Option<String>,
    /// `HEADER_NRCPUS`.
    pub nr_cpus: Option<NrCpus>,
    /// `HEADER_CPUDESC`.
    pub cpudesc: Option<String>,
    /// `HEADER_CPUID`.
    pub cpuid: Option<String>,
    /// `HEADER_TOTAL_MEM`, in KiB.
    pub total_mem_kib: Option<u64>,
    /// `HEADER_CMDLINE`.
    pub cmdline: Option<Vec<String>>,
    /// `HEADER_BUILD_ID` (written when not empty).
    pub build_ids: Vec<BuildIdEntry>,
    /// `HEADER_SAMPLE_TIME`. The writer fills it from the samples it wrote when left `None`.
    pub sample_time: Option<SampleTime>,
    /// Other sections, as bytes, by feature number: read from a file, or written as given. Entries for
    /// features this struct has a field for, and for `EVENT_DESC`, are ignored when writing.
    pub other: BTreeMap<u32, Vec<u8>>,
}

impl Features {
    /// The facts of this host, read from `/proc` and `/sys`, with `version` naming perf-core and `cmdline`
    /// this process's arguments. A fact that cannot be read is left `None`.
    pub fn from_host() -> Self {
        let read = |p: &str| std::fs::read_to_string(p).ok().map(|s| s.trim().to_owned());
        let cpuinfo = read("/proc/cpuinfo").unwrap_or_default();
        let field = |name: &str| {
            cpuinfo.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == name).then(|| v.trim().to_owned())
            })
        };
        let cpudesc = field("model name")
            .or_else(|| field("Processor"))
            .or_else(|| field("cpu"));
        // perf's x86 CPUID string: vendor,family,model,stepping.
        let cpuid = match (
            field("vendor_id"),
            field("cpu family"),
            field("model"),
            field("stepping"),
        ) {
            (Some(v), Some(f), Some(m), Some(s)) => Some(format!("{v},{f},{m},{s}")),
            _ => None,
        };
        let total_mem_kib = read("/proc/meminfo").and_then(|m| {
            m.lines().find_map(|l| {
                l.strip_prefix("MemTotal:")?
                    .trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse()
                    .ok()
            })
        });
        let present = read("/sys/devices/system/cpu/present").and_then(|s| cpu_list(&s));
        let online = read("/sys/devices/system/cpu/online").and_then(|s| cpu_list(&s));
        let nr_cpus = match (present, online) {
            (Some((max, _)), Some((_, count))) => Some(NrCpus {
                available: max + 1,
                online: count,
            }),
            _ => None,
        };
        Features {
            hostname: read("/proc/sys/kernel/hostname"),
            osrelease: read("/proc/sys/kernel/osrelease"),
            version: Some(concat!("perf-core ", env!("CARGO_PKG_VERSION")).to_owned()),
            arch: Some(std::env::consts::ARCH.to_owned()),
            nr_cpus,
            cpudesc,
            cpuid,
            total_mem_kib,
            cmdline: Some(std::env::args().collect()),
            build_ids: Vec::new(),
            sample_time: None,
            other: BTreeMap::new(),
        }
    }

    /// The sections to write, in feature order, with `EVENT_DESC` built from `events`.
    pub(crate) fn encode(&self, events: &[EventAttr], attr_size: u32) -> Vec<(Feature, Vec<u8>)> {
        let mut out: BTreeMap<Feature, Vec<u8>> = BTreeMap::new();
        let mut string = |f: Feature, s: &Option<String>| {
            if let Some(s) = s {
                let mut b = Vec::new();
                put_string(&mut b, s);
                out.insert(f, b);
            }
        };
        string(Feature::HOSTNAME, &self.hostname);
        string(Feature::OSRELEASE, &self.osrelease);
        string(Feature::VERSION, &self.version);
        string(Feature::ARCH, &self.arch);
        string(Feature::CPUDESC, &self.cpudesc);
        string(Feature::CPUID, &self.cpuid);
        if let Some(n) = self.nr_cpus {
            let mut b = Vec::new();
            put_u32(&mut b, n.available);
            put_u32(&mut b, n.online);
            out.insert(Feature::NRCPUS, b);
        }
        if let Some(m) = self.total_mem_kib {
            out.insert(Feature::TOTAL_MEM, m.to_ne_bytes().to_vec());
        }
        if let Some(args) = &self.cmdline {
            let mut b = Vec::new();
            put_u32(&mut b, args.len() as u32);
            for a in args {
                put_string(&mut b, a);
            }
            out.insert(Feature::CMDLINE, b);
        }
        if !self.build_ids.is_empty() {
            let mut b = Vec::new();
            for e in &self.build_ids {
                encode_build_id(&mut b, e);
            }
            out.insert(Feature::BUILD_ID, b);
        }
        if let Some(t) = self.sample_time {
            let mut b = Vec::new();
            put_u64(&mut b, t.first);
            put_u64(&mut b, t.last);
            out.insert(Feature::SAMPLE_TIME, b);
        }
        // perf reads the first id of each event to name it, so every event needs one.
        if !events.is_empty() && events.iter().all(|e| e.name.is_some() && !e.ids.is_empty()) {
            out.insert(Feature::EVENT_DESC, encode_event_desc(events, attr_size));
        }
        for (&bit, bytes) in &self.other {
            out.entry(Feature(bit)).or_insert_with(|| bytes.clone());
        }
        out.into_iter()
            .filter(|(f, _)| f.0 > 0 && f.0 < 256)
            .collect()
    }

    /// Fills the field for feature `f` from its section. Unknown features go to [`other`](Self::other).
    pub(crate) fn decode(&mut self, f: Feature, bytes: &[u8], offset: u64) -> Result<(), Error> {
        let mut r = Reader::new(bytes, offset);
        let what = f.name();
        match f {
            Feature::HOSTNAME => self.hostname = Some(r.string(what)?),
            Feature::OSRELEASE => self.osrelease = Some(r.string(what)?),
            Feature::VERSION => self.version = Some(r.string(what)?),
            Feature::ARCH => self.arch = Some(r.string(what)?),
            Feature::CPUDESC => self.cpudesc = Some(r.string(what)?),
            Feature::CPUID => self.cpuid = Some(r.string(what)?),
            Feature::NRCPUS => {
                self.nr_cpus = Some(NrCpus {
                    available: r.u32(what)?,
                    online: r.u32(what)?,
                })
            }
            Feature::TOTAL_MEM => self.total_mem_kib = Some(r.u64(what)?),
            Feature::CMDLINE => {
                let n = r.u32(what)?;
                let mut args = Vec::new();
                for _ in 0..n {
                    args.push(r.string(what)?);
                }
                self.cmdline = Some(args);
            }
            Feature::BUILD_ID => {
                while !r.is_empty() {
                    self.build_ids.push(decode_build_id(&mut r)?);
                }
            }
            Feature::SAMPLE_TIME => {
                self.sample_time = Some(SampleTime {
                    first: r.u64(what)?,
                    last: r.u64(what)?,
                })
            }
            _ => {
                self.other.insert(f.0, bytes.to_vec());
            }
        }
        Ok(())
    }
}

/// The highest CPU number and the count in a kernel CPU list like `"0-3,8"`.
fn cpu_list(s: &str) -> Option<(u32, u32)> {
    let (mut max, mut count) = (None, 0u32);
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a.parse::<u32>().ok()?, b.parse::<u32>().ok()?),
            None => {
                let a = part.parse::<u32>().ok()?;
                (a, a)
            }
        };
        count += b.checked_sub(a)? + 1;
        max = Some(max.map_or(b, |m: u32| m.max(b)));
    }
    Some((max?, count))
}

fn encode_build_id(out: &mut Vec<u8>, e: &BuildIdEntry) {
    let start = out.len();
    // perf 6.1 pads the name to NAME_ALIGN after the 36 fixed bytes; every perf reads the size from the header.
    let name = e.filename.split('\0').next().unwrap_or_default();
    let size = BUILD_ID_FIXED + align_up(name.len() + 1, NAME_ALIGN);
    put_u32(out, PERF_RECORD_HEADER_BUILD_ID);
    out.extend_from_slice(&(e.cpumode | MISC_BUILD_ID_SIZE).to_ne_bytes());
    out.extend_from_slice(&(size as u16).to_ne_bytes());
    out.extend_from_slice(&e.pid.to_ne_bytes());
    let mut id = [0u8; 24];
    let n = e.build_id.len().min(20);
    id[..n].copy_from_slice(&e.build_id[..n]);
    id[20] = n as u8;
    out.extend_from_slice(&id);
    out.extend_from_slice(name.as_bytes());
    out.resize(start + size, 0);
}

fn decode_build_id(r: &mut Reader<'_>) -> Result<BuildIdEntry, Error> {
    const WHAT: &str = "BUILD_ID entry";
    r.u32(WHAT)?; // type: not meaningful here
    let misc = r.u16(WHAT)?;
    let size = r.u16(WHAT)? as usize;
    if size < BUILD_ID_FIXED {
        return Err(r.error(format!(
            "a BUILD_ID entry of {size} bytes is shorter than its {BUILD_ID_FIXED}-byte fixed part"
        )));
    }
    let pid = r.u32(WHAT)? as i32;
    let id = r.take(24, WHAT)?;
    let n = if misc & MISC_BUILD_ID_SIZE != 0 {
        id.get(20).map_or(20, |&n| (n as usize).min(20))
    } else {
        // Old files: 20 bytes, trailing zeros are padding.
        id.get(..20)
            .and_then(|b| b.iter().rposition(|&c| c != 0))
            .map_or(0, |i| i + 1)
    };
    let name = r.take(size - BUILD_ID_FIXED, WHAT)?;
    Ok(BuildIdEntry {
        pid,
        cpumode: misc & !MISC_BUILD_ID_SIZE,
        build_id: id.get(..n).unwrap_or_default().to_vec(),
        filename: c_str(name),
    })
}

fn encode_event_desc(events: &[EventAttr], attr_size: u32) -> Vec<u8> {
    let mut b = Vec::new();
    put_u32(&mut b, events.len() as u32);
    put_u32(&mut b, attr_size);
    for e in events {
        let mut attr = e.attr;
        attr.size = attr_size;
        let bytes = attr_to_bytes(&attr);
        b.extend_from_slice(bytes.get(..attr_size as usize).unwrap_or(&bytes));
        put_u32(&mut b, e.ids.len() as u32);
        put_string(&mut b, e.name.as_deref().unwrap_or_default());
        for &id in &e.ids {
            put_u64(&mut b, id);
        }
    }
    b
}

/// One entry of `HEADER_EVENT_DESC`: name and ids (its attr is a copy of the attrs section's).
pub(crate) struct EventDesc {
    pub(crate) name: String,
    pub(crate) ids: Vec<u64>,
}

pub(crate) fn decode_event_desc(bytes: &[u8], offset: u64) -> Result<Vec<EventDesc>, Error> {
    const WHAT: &str = "EVENT_DESC";
    let mut r = Reader::new(bytes, offset);
    let n = r.u32(WHAT)?;
    let attr_size = r.u32(WHAT)? as usize;
    let mut out = Vec::new();
    for _ in 0..n {
        read_attr(&mut r, attr_size)?;
        let nr_ids = r.u32(WHAT)?;
        let name = r.string(WHAT)?;
        let mut ids = Vec::new();
        for _ in 0..nr_ids {
            ids.push(r.u64(WHAT)?);
        }
        out.push(EventDesc { name, ids });
    }
    Ok(out)
}
