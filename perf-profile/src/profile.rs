//! The aggregated profile: what a capture produced so far, symbolized, ready to export.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use std::collections::HashMap;

use crate::aggregate::{Frame, FrameId, Stacks};
use crate::maps::Mapping;
use crate::symbolize::{Line, Mode};

/// What was sampled, and what was not: every dropped record or sample has a number here.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Samples aggregated.
    pub samples: u64,
    /// Records the kernel dropped because a ring was full (`PERF_RECORD_LOST`).
    #[doc(alias = "PERF_RECORD_LOST")]
    pub lost_records: u64,
    /// Samples dropped before reaching a ring (`PERF_RECORD_LOST_SAMPLES`). Since Linux 4.2.
    #[doc(alias = "PERF_RECORD_LOST_SAMPLES")]
    pub lost_samples: u64,
    /// Times the kernel throttled sampling because samples took too long (`PERF_RECORD_THROTTLE`):
    /// samples were not taken meanwhile. `kernel.perf_cpu_time_max_percent` and
    /// `kernel.perf_event_max_sample_rate` set the limits.
    #[doc(alias = "PERF_RECORD_THROTTLE")]
    pub throttled: u64,
    /// Samples without any frame (no call chain and no address), not aggregated.
    pub empty: u64,
    /// Records merged out of time order (see perf-event's `MergedIter::late`).
    pub late: u64,
    /// Profiles a pusher (module `push`, feature `push`) dropped before this one got through: its queue was full
    /// past its bound, or the endpoint refused them for good. Reported in the next profile sent.
    pub dropped_profiles: u64,
    /// The samples in those dropped profiles.
    pub dropped_samples: u64,
}

impl Stats {
    /// Adds `other`'s counts to these (two intervals merged).
    pub fn add(&mut self, other: &Stats) {
        self.samples += other.samples;
        self.lost_records += other.lost_records;
        self.lost_samples += other.lost_samples;
        self.throttled += other.throttled;
        self.empty += other.empty;
        self.late += other.late;
        self.dropped_profiles += other.dropped_profiles;
        self.dropped_samples += other.dropped_samples;
    }

    /// What was counted since `base`, an earlier copy of these counts.
    pub fn since(&self, base: &Stats) -> Stats {
        Stats {
            samples: self.samples.saturating_sub(base.samples),
            lost_records: self.lost_records.saturating_sub(base.lost_records),
            lost_samples: self.lost_samples.saturating_sub(base.lost_samples),
            throttled: self.throttled.saturating_sub(base.throttled),
            empty: self.empty.saturating_sub(base.empty),
            late: self.late.saturating_sub(base.late),
            dropped_profiles: self.dropped_profiles.saturating_sub(base.dropped_profiles),
            dropped_samples: self.dropped_samples.saturating_sub(base.dropped_samples),
        }
    }
}

/// How the profile was taken.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Info {
    /// The sampled event: `cycles` where a hardware PMU exists, else `cpu-clock`.
    pub event: String,
    /// Why that event: e.g. that `cycles` was not available.
    pub event_reason: String,
    /// Samples per second per CPU the kernel was asked for.
    pub frequency: u64,
    /// When sampling started.
    pub start: SystemTime,
    /// How long it has run.
    pub duration: Duration,
    /// Counts of what was sampled and lost.
    pub stats: Stats,
    /// Notes for the reader (kernel symbols hidden and which sysctl shows them, rebuilt files).
    pub notes: Vec<String>,
    /// How frames were symbolized.
    pub symbolize: Mode,
    /// The process profiled (a command, the first of the pids, this process); `None` for the whole
    /// system. OTLP exports name it in the resource (`process.pid`, `process.executable.name`).
    pub process: Option<ProcessInfo>,
    /// The service the profile is of (OTLP `service.name`, Pyroscope's application name); `None`:
    /// the process's name ([`service_name`](Self::service_name)).
    pub service: Option<String>,
}

/// The process a profile is of.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProcessInfo {
    /// Its pid.
    pub pid: u32,
    /// Its executable's file name (`gzip`, not `/usr/bin/gzip`).
    pub name: String,
}

impl ProcessInfo {
    /// Process `pid` named `name` (a path is cut to its file name).
    pub fn new(pid: u32, name: &str) -> Self {
        Self {
            pid,
            name: name.rsplit('/').next().unwrap_or(name).to_owned(),
        }
    }

    /// Process `pid`, named by its executable (`/proc/PID/exe`, else `/proc/PID/comm`); `None` when it
    /// is gone.
    pub fn of_pid(pid: u32) -> Option<Self> {
        let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
            .ok()
            .map(|p| {
                p.to_string_lossy()
                    .trim_end_matches(" (deleted)")
                    .to_owned()
            });
        let name = match exe {
            Some(e) => e,
            None => std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .ok()?
                .trim_end()
                .to_owned(),
        };
        Some(Self::new(pid, &name))
    }
}

impl Info {
    /// The service name: [`service`](Self::service) when set, else the process's name, else
    /// `unknown_service` (a system-wide profile), as OpenTelemetry names a service without one.
    pub fn service_name(&self) -> String {
        match (&self.service, &self.process) {
            (Some(s), _) => s.clone(),
            (None, Some(p)) => p.name.clone(),
            (None, None) => "unknown_service".into(),
        }
    }
}

/// An aggregated, symbolized profile: stacks with sample counts and periods, the mappings and
/// symbols they name. Export it with [`write_to_file`](Self::write_to_file),
/// [`write_pprof`](Self::write_pprof), [`write_folded`](Self::write_folded) or `write_svg`.
#[derive(Clone, Debug)]
pub struct Profile {
    pub(crate) stacks: Stacks,
    pub(crate) mappings: Vec<Mapping>,
    /// By frame id: its functions, innermost first (shared with the symbol cache and the other
    /// profiles taken from the same capture).
    pub(crate) lines: Vec<Arc<[Line]>>,
    /// How the profile was taken.
    pub info: Info,
    /// What folded stacks put at their roots.
    pub(crate) folded_roots: crate::export::FoldedRoots,
}

impl Profile {
    /// The stack table.
    pub fn stacks(&self) -> &Stacks {
        &self.stacks
    }

    /// Every mapping the profile's frames may name, indexed by `MappingId`.
    pub fn mappings(&self) -> &[Mapping] {
        &self.mappings
    }

    /// The functions of a frame, innermost (inlined) first; empty when it was not symbolized.
    pub fn lines(&self, frame: FrameId) -> &[Line] {
        self.lines.get(frame.0 as usize).map_or(&[], |l| l)
    }

    /// Adds `other` (a later interval of the same capture, or any profile of the same event) to this
    /// profile: its stacks and counts, the mappings and names they use, its statistics and notes;
    /// the time span grows to cover both.
    pub fn merge(&mut self, other: &Profile) {
        // Mappings by value: the tables of two cuts of one capture share a prefix.
        let mut index: HashMap<&crate::maps::Mapping, u32> = HashMap::new();
        for (i, m) in self.mappings.iter().enumerate() {
            index.entry(m).or_insert(i as u32);
        }
        let mut new_mappings = Vec::new();
        let mut remap = Vec::with_capacity(other.mappings.len());
        for m in &other.mappings {
            let id = match index.get(m) {
                Some(&id) => id,
                None => {
                    let id = (self.mappings.len() + new_mappings.len()) as u32;
                    new_mappings.push(m.clone());
                    id
                }
            };
            remap.push(crate::maps::MappingId(id));
        }
        self.mappings.extend(new_mappings);
        let frame = |f: Frame| match f {
            Frame::User { mapping, addr } => match remap.get(mapping.0 as usize) {
                Some(&mapping) => Frame::User { mapping, addr },
                None => Frame::Unmapped { addr },
            },
            f => f,
        };
        let mut root_first = Vec::new();
        for (stack, who, counts) in other.stacks.sampled_by_identity() {
            root_first.clear();
            root_first.extend(other.stacks.frames_of(stack));
            root_first.reverse();
            for &f in &root_first {
                let Some(of) = other.stacks.frame(f) else {
                    continue;
                };
                let id = self.stacks.intern(frame(of)).0 as usize;
                if self.lines.len() <= id {
                    self.lines.resize(id + 1, Arc::from(Vec::new()));
                }
                if self.lines[id].is_empty() {
                    self.lines[id] = Arc::from(other.lines(f));
                }
            }
            let frames = root_first
                .iter()
                .filter_map(|&f| other.stacks.frame(f))
                .map(frame);
            let who = who
                .and_then(|w| other.stacks.identity(w))
                .map(|w| self.stacks.intern_identity(w));
            self.stacks.add_counts_as(frames, counts, who);
        }
        let end = |i: &Info| i.start + i.duration;
        let (start, finish) = (
            self.info.start.min(other.info.start),
            end(&self.info).max(end(&other.info)),
        );
        self.info.start = start;
        self.info.duration = finish.duration_since(start).unwrap_or_default();
        self.info.stats.add(&other.info.stats);
        for n in &other.info.notes {
            if !self.info.notes.contains(n) {
                self.info.notes.push(n.clone());
            }
        }
    }

    /// The names a frame shows in folded stacks, innermost first: its functions, or where it is
    /// (`libc.so.6+0x2a0f3`, `[kernel]`, `0x7f0e4b5d6010`, `[unknown]` for an address in no
    /// mapping, `[truncated]` for [`Frame::TRUNCATED`]) when it has none.
    pub fn frame_names(&self, frame: FrameId) -> Vec<String> {
        let lines = self.lines(frame);
        if !lines.is_empty() {
            return lines.iter().map(|l| clean(&l.function)).collect();
        }
        let name = match self.stacks.frame(frame) {
            Some(Frame::User { mapping, addr }) => match self.mappings.get(mapping.0 as usize) {
                Some(m) => {
                    let base = m.path.rsplit('/').next().unwrap_or(&m.path);
                    format!("{}+{:#x}", clean(base), m.file_offset_of(addr))
                }
                None => format!("{addr:#x}"),
            },
            Some(f) if f.is_truncated() => crate::aggregate::TRUNCATED_NAME.into(),
            Some(Frame::Unmapped { .. }) => crate::symbolize::UNKNOWN.into(),
            Some(Frame::Kernel { addr } | Frame::Jit { addr, .. }) => format!("{addr:#x}"),
            Some(Frame::KernelHidden) => "[kernel]".into(),
            None => "[unknown]".into(),
        };
        vec![name]
    }
}

/// A name fit for a folded line: no `;` (the frame separator) and no line breaks.
pub(crate) fn clean(name: &str) -> String {
    name.replace(';', ":").replace(['\n', '\r'], " ")
}
