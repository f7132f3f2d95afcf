//! The aggregated profile: what a capture produced so far, symbolized, ready to export.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

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

    /// The names a frame shows in folded stacks, innermost first: its functions, or where it is
    /// (`libc.so.6+0x2a0f3`, `[kernel]`, `0x7f0e4b5d6010`) when it has none.
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
            Some(Frame::Unmapped { addr } | Frame::Kernel { addr }) => format!("{addr:#x}"),
            Some(Frame::KernelHidden) => "[kernel]".into(),
            None => "[unknown]".into(),
        };
        vec![name]
    }
}

/// A name fit for a folded line: no `;` (the frame separator) and no line breaks.
fn clean(name: &str) -> String {
    name.replace(';', ":").replace(['\n', '\r'], " ")
}
