use std::collections::HashMap;
use std::fmt::{self, Debug, Formatter};
use std::hash::{Hash, Hasher};
use std::os::raw::{c_int, c_void};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use perf_profile::aggregate::{Frame, FrameId, IdentityId, StackId};
use perf_profile::symbolize::Line;
use perf_profile::Profile;

use crate::frames::{Frames, Symbol};
use crate::profiler::ProfilerGuard;
use crate::{Result, MAX_THREAD_NAME};

/// The frequency, start and length of a report's capture.
#[derive(Clone, Debug)]
pub struct ReportTiming {
    /// Samples per second.
    pub frequency: i32,
    /// When sampling started.
    pub start_time: SystemTime,
    /// How long it had run when the report was built.
    pub duration: Duration,
}

impl Default for ReportTiming {
    fn default() -> Self {
        Self {
            frequency: 1,
            start_time: SystemTime::UNIX_EPOCH,
            duration: Duration::ZERO,
        }
    }
}

/// The report: each sampled stack with how many samples it got.
pub struct Report {
    /// Stacks and their sample counts.
    pub data: HashMap<Frames, isize>,
    /// The capture's frequency, start and length.
    pub timing: ReportTiming,
}

/// A stack not yet symbolized: its addresses, leaf first, and the thread that ran it.
#[derive(Clone)]
pub struct UnresolvedFrames {
    /// The frames' addresses, leaf first.
    pub frames: Vec<usize>,
    /// The thread's name, `thread_name_length` bytes, not NUL-terminated.
    pub thread_name: [u8; MAX_THREAD_NAME],
    /// The length of `thread_name`.
    pub thread_name_length: usize,
    /// The thread's id: the kernel's thread id (pprof-rs: `pthread_self()`).
    pub thread_id: u64,
    /// When it was sampled (here: when the report was built).
    pub sample_timestamp: SystemTime,
}

impl Debug for UnresolvedFrames {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.frames.iter().map(|a| a as *const usize))
            .finish()
    }
}

/// Equal when the addresses and the thread are, as in pprof-rs.
impl PartialEq for UnresolvedFrames {
    fn eq(&self, other: &Self) -> bool {
        self.thread_id == other.thread_id && self.frames == other.frames
    }
}

impl Eq for UnresolvedFrames {}

impl Hash for UnresolvedFrames {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.frames.hash(state);
        self.thread_id.hash(state);
    }
}

/// The report before symbolization: stacks of addresses and their sample counts.
pub struct UnresolvedReport {
    /// Stacks and their sample counts.
    pub data: HashMap<UnresolvedFrames, isize>,
    /// The capture's frequency, start and length.
    pub timing: ReportTiming,
}

impl Debug for UnresolvedReport {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        for (key, val) in &self.data {
            writeln!(f, "{key:?} {val}")?;
        }
        Ok(())
    }
}

type FramesPostProcessor = Box<dyn Fn(&mut Frames)>;

/// Builds a [`Report`] or an [`UnresolvedReport`] of what a [`ProfilerGuard`] sampled so far.
pub struct ReportBuilder<'a> {
    frames_post_processor: Option<FramesPostProcessor>,
    guard: &'a ProfilerGuard<'a>,
}

impl Debug for ReportBuilder<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReportBuilder")
            .field("guard", self.guard)
            .finish_non_exhaustive()
    }
}

/// A stack of the profile as the report needs it.
struct Stack {
    frames: Vec<FrameId>,
    count: isize,
    /// Who ran it: the thread's name and id.
    thread: (String, u64),
}

impl<'a> ReportBuilder<'a> {
    pub(crate) fn new(guard: &'a ProfilerGuard<'a>) -> Self {
        Self {
            frames_post_processor: None,
            guard,
        }
    }

    /// A function applied to every stack before it is counted (to rename threads, drop frames).
    pub fn frames_post_processor<T>(&mut self, frames_post_processor: T) -> &mut Self
    where
        T: Fn(&mut Frames) + 'static,
    {
        self.frames_post_processor = Some(Box::new(frames_post_processor));
        self
    }

    /// The stacks sampled so far, their frames as addresses.
    ///
    /// # Errors
    ///
    /// None today; pprof-rs's signature.
    pub fn build_unresolved(&self) -> Result<UnresolvedReport> {
        let profile = self.guard.profile();
        let now = SystemTime::now();
        let mut data = HashMap::new();
        for s in stacks(&profile, self.guard.blocklist()) {
            let (name, tid) = &s.thread;
            let mut thread_name = [0u8; MAX_THREAD_NAME];
            let len = name.len().min(MAX_THREAD_NAME - 1);
            thread_name[..len].copy_from_slice(&name.as_bytes()[..len]);
            let key = UnresolvedFrames {
                frames: s
                    .frames
                    .iter()
                    .map(|&f| addr_of(&profile, f) as usize)
                    .collect(),
                thread_name,
                thread_name_length: len,
                thread_id: *tid,
                sample_timestamp: now,
            };
            *data.entry(key).or_insert(0) += s.count;
        }
        Ok(UnresolvedReport {
            data,
            timing: self.guard.timing(),
        })
    }

    /// The stacks sampled so far, symbolized (inlined functions included), each passed through
    /// the post-processor.
    ///
    /// # Errors
    ///
    /// None today; pprof-rs's signature.
    pub fn build(&self) -> Result<Report> {
        // The snapshot holds the profiler's lock; naming its frames does not.
        let profile = self.guard.profile();
        let lines = crate::symbols::frame_lines(&profile);
        let now = SystemTime::now();
        let mut symbols: HashMap<FrameId, Vec<Symbol>> = HashMap::new();
        let mut data = HashMap::new();
        for s in stacks(&profile, self.guard.blocklist()) {
            let frames = s
                .frames
                .iter()
                .map(|&f| {
                    symbols
                        .entry(f)
                        .or_insert_with(|| symbols_of(&profile, &lines, f))
                        .clone()
                })
                .collect();
            let (thread_name, thread_id) = s.thread;
            let mut key = Frames {
                frames,
                thread_name,
                thread_id,
                sample_timestamp: now,
            };
            if let Some(p) = &self.frames_post_processor {
                p(&mut key);
            }
            *data.entry(key).or_insert(0) += s.count;
        }
        Ok(Report {
            data,
            timing: self.guard.timing(),
        })
    }
}

/// The thread a sample names (its name and id), else the process's name and id.
fn thread_of(profile: &Profile, who: Option<IdentityId>) -> (String, u64) {
    if let Some(who) = who.and_then(|w| profile.stacks().identity(w)) {
        return (who.thread_name.to_string(), u64::from(who.tid));
    }
    match &profile.info.process {
        Some(p) => (p.name.clone(), u64::from(p.pid)),
        None => (String::new(), u64::from(std::process::id())),
    }
}

/// Whether a thread of this name is one the profiler started: its collector (`perf-pprof`),
/// the thread that names frames (`pprof-symbols`) and perf-profile's file loaders and symbolizer
/// (`perf-profile-*`, 15 bytes as the kernel keeps a name). Their samples are the profiler's
/// cost, not the program's, and would grow with the DWARF a report reads; pprof-rs has no threads
/// of its own.
fn is_profilers_own(thread_name: &str) -> bool {
    thread_name == crate::profiler::COLLECTOR_THREAD
        || thread_name == crate::symbols::SYMBOLS_THREAD
        || thread_name.starts_with("perf-profile-")
}

/// The profile's stacks, leaf first, their user frames only, less those whose leaf is in a
/// blocklisted library.
fn stacks(profile: &Profile, blocklist: &[String]) -> Vec<Stack> {
    let stacks = profile.stacks();
    stacks
        .sampled_by_identity()
        .filter_map(|(id, who, counts): (StackId, _, _)| {
            // User frames only, as pprof-rs: a sample in the kernel counts for the user stack
            // that entered it.
            let frames: Vec<FrameId> = stacks
                .frames_of(id)
                .filter(|&f| {
                    !matches!(
                        stacks.frame(f),
                        Some(Frame::Kernel { .. } | Frame::KernelHidden)
                    )
                })
                .collect();
            let leaf = *frames.first()?;
            let thread = thread_of(profile, who);
            if is_profilers_own(&thread.0) {
                return None;
            }
            if !blocklist.is_empty() {
                if let Some(Frame::User { mapping, .. }) = stacks.frame(leaf) {
                    let path = profile.mappings().get(mapping.0 as usize)?.path.clone();
                    if blocklist.iter().any(|b| path.contains(b.as_str())) {
                        return None;
                    }
                }
            }
            Some(Stack {
                frames,
                count: isize::try_from(counts.samples).unwrap_or(isize::MAX),
                thread,
            })
        })
        .collect()
}

fn addr_of(profile: &Profile, f: FrameId) -> u64 {
    match profile.stacks().frame(f) {
        Some(
            Frame::User { addr, .. }
            | Frame::Unmapped { addr }
            | Frame::Kernel { addr }
            | Frame::Jit { addr, .. },
        ) => addr,
        _ => 0,
    }
}

/// A frame's functions, innermost first; where it has none, one symbol naming where it is
/// (`libc.so.6+0x2a0f3`).
fn symbols_of(profile: &Profile, lines: &[Arc<[Line]>], f: FrameId) -> Vec<Symbol> {
    let addr = Some(addr_of(profile, f) as usize as *mut c_void);
    let lines = lines.get(f.0 as usize).map_or(&[][..], |l| l);
    if lines.is_empty() {
        return profile
            .frame_names(f)
            .into_iter()
            .map(|n| Symbol {
                name: Some(n.into_bytes()),
                addr,
                lineno: None,
                filename: None,
            })
            .collect();
    }
    lines
        .iter()
        .map(|l| Symbol {
            name: Some(l.function.clone().into_bytes()),
            addr,
            lineno: l.line,
            filename: l.file.as_ref().map(PathBuf::from),
        })
        .collect()
}

/// One line per stack, `FRAME: f -> FRAME: g -> THREAD: name count`, as pprof-rs prints it.
impl Debug for Report {
    fn fmt(&self, f: &mut Formatter) -> fmt::Result {
        for (key, val) in &self.data {
            writeln!(f, "{key:?} {val}")?;
        }
        Ok(())
    }
}

impl Report {
    /// Folded stacks as pprof-rs draws them: the thread first, then the frames root first.
    #[cfg_attr(not(feature = "flamegraph"), allow(dead_code))]
    fn folded(&self) -> Vec<String> {
        self.data
            .iter()
            .map(|(key, value)| {
                let mut line = key.thread_name_or_id().replace(';', ":");
                for frame in key.frames.iter().rev() {
                    for symbol in frame.iter().rev() {
                        line.push(';');
                        line.push_str(&symbol.name().replace(';', ":"));
                    }
                }
                line.push(' ');
                line.push_str(&value.to_string());
                line
            })
            .collect()
    }
}

#[cfg(feature = "flamegraph")]
impl Report {
    /// Writes a flame graph SVG to `writer`.
    ///
    /// # Errors
    ///
    /// [`Error::IoError`](crate::Error::IoError) when drawing or writing fails.
    pub fn flamegraph<W: std::io::Write>(&self, writer: W) -> Result<()> {
        self.flamegraph_with_options(writer, &mut inferno::flamegraph::Options::default())
    }

    /// Writes a flame graph SVG drawn with `options` to `writer`.
    ///
    /// # Errors
    ///
    /// [`Error::IoError`](crate::Error::IoError) when drawing or writing fails.
    pub fn flamegraph_with_options<W: std::io::Write>(
        &self,
        writer: W,
        options: &mut inferno::flamegraph::Options,
    ) -> Result<()> {
        let lines = self.folded();
        if !lines.is_empty() {
            inferno::flamegraph::from_lines(options, lines.iter().map(String::as_str), writer)
                .map_err(std::io::Error::other)?;
        }
        Ok(())
    }
}

#[cfg(feature = "_protobuf")]
impl Report {
    /// The report as a pprof profile (`profile.proto`): samples (count) and cpu (nanoseconds) per
    /// stack, a location per function, each sample labelled with its `thread`.
    ///
    /// # Errors
    ///
    /// None today; pprof-rs's signature.
    pub fn pprof(&self) -> Result<crate::protos::Profile> {
        use crate::protos;
        let mut strings: Vec<String> = vec![String::new()];
        let mut index: HashMap<String, i64> = HashMap::new();
        let mut intern = |s: &str| -> i64 {
            if let Some(&i) = index.get(s) {
                return i;
            }
            strings.push(s.to_owned());
            let i = strings.len() as i64 - 1;
            index.insert(s.to_owned(), i);
            i
        };
        let samples_ty = protos::ValueType {
            r#type: intern("samples"),
            unit: intern("count"),
        };
        let cpu_ty = protos::ValueType {
            r#type: intern("cpu"),
            unit: intern("nanoseconds"),
        };
        let thread = intern("thread");
        let period = 1_000_000_000 / i64::from(self.timing.frequency.max(1));
        let mut functions: Vec<protos::Function> = Vec::new();
        let mut locations: Vec<protos::Location> = Vec::new();
        let mut by_name: HashMap<(String, u32), u64> = HashMap::new();
        let mut samples = Vec::new();
        for (key, &count) in &self.data {
            let mut location_id = Vec::new();
            for frame in &key.frames {
                for symbol in frame {
                    let name = symbol.name();
                    let lineno = symbol.lineno();
                    let id = match by_name.get(&(name.clone(), lineno)) {
                        Some(&id) => id,
                        None => {
                            let id = functions.len() as u64 + 1;
                            let n = intern(&name);
                            functions.push(protos::Function {
                                id,
                                name: n,
                                system_name: n,
                                filename: intern(&symbol.filename()),
                                ..Default::default()
                            });
                            locations.push(protos::Location {
                                id,
                                line: vec![protos::Line {
                                    function_id: id,
                                    line: i64::from(lineno),
                                    ..Default::default()
                                }],
                                ..Default::default()
                            });
                            by_name.insert((name, lineno), id);
                            id
                        }
                    };
                    location_id.push(id);
                }
            }
            let count = count as i64;
            samples.push(protos::Sample {
                location_id,
                value: vec![count, count.saturating_mul(period)],
                label: vec![protos::Label {
                    key: thread,
                    str: intern(&key.thread_name_or_id()),
                    ..Default::default()
                }],
            });
        }
        Ok(protos::Profile {
            sample_type: vec![samples_ty, cpu_ty],
            sample: samples,
            function: functions,
            location: locations,
            time_nanos: self
                .timing
                .start_time
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos() as i64,
            duration_nanos: self.timing.duration.as_nanos() as i64,
            period_type: Some(cpu_ty),
            period,
            string_table: strings,
            ..Default::default()
        })
    }
}

// pprof-rs's frequency is a `c_int`; this keeps the two in step.
const _: fn(c_int) -> i32 = |f| f;
