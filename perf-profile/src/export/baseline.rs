//! The pprof writer as it was before the writer streamed its message (test only): what the new
//! one must still write, byte for byte, and the baseline of its benchmark
//! (`export::bench::pprof_write_cpu`).

#![allow(dead_code, missing_docs)]

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;
use std::io::Write;

use prost::Message;

use super::dictionary::{period, period_type, start_unix_nanos};
use crate::aggregate::{Frame, FrameId, Identity};
use crate::error::{Error, Result};
use crate::profile::Profile;
use crate::proto::perftools::profiles as pb;
use crate::symbolize::Line;

/// Distinct values numbered from 1 in the order first seen (0 is left for "none").
#[derive(Debug)]
pub(crate) struct Interner<K> {
    values: Vec<K>,
    index: HashMap<K, u32>,
}

impl<K: Hash + Eq + Clone> Interner<K> {
    pub(crate) fn new() -> Self {
        Self {
            values: Vec::new(),
            index: HashMap::new(),
        }
    }

    /// The number of `key`, interning it when new.
    pub(crate) fn id<Q>(&mut self, key: &Q) -> u32
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        if let Some(&i) = self.index.get(key) {
            return i;
        }
        let value = key.to_owned();
        self.values.push(value.clone());
        let i = self.values.len() as u32;
        self.index.insert(value, i);
        i
    }

    /// The values in order: number `n` is `into_values()[n - 1]`.
    pub(crate) fn into_values(self) -> Vec<K> {
        self.values
    }
}

/// The string table: the empty string is 0, as pprof and OTLP both require.
#[derive(Debug)]
pub(crate) struct Strings(Interner<String>);

impl Strings {
    pub(crate) fn new() -> Self {
        Self(Interner::new())
    }

    /// The index of `s` in [`table`](Self::table).
    pub(crate) fn id(&mut self, s: &str) -> u32 {
        if s.is_empty() {
            0
        } else {
            self.0.id(s)
        }
    }

    /// Every string by index, the empty one first.
    pub(crate) fn table(self) -> Vec<String> {
        let mut t = Vec::with_capacity(self.0.values.len() + 1);
        t.push(String::new());
        t.extend(self.0.values);
        t
    }
}

/// A mapping the frames name: a file's, or one spanning the kernel's frames.
#[derive(Debug)]
pub(crate) struct Mapping {
    pub start: u64,
    pub limit: u64,
    pub file_offset: u64,
    /// The path (`[kernel.kallsyms]` for the kernel).
    pub filename: u32,
    /// The GNU build id in lowercase hex.
    pub build_id: Option<String>,
    /// Whether its frames were symbolized: functions named ...
    pub has_functions: bool,
    /// ... with their files, lines and inlined frames.
    pub has_lines: bool,
}

/// A function: its name and file (0 when unknown).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Function {
    pub name: u32,
    pub file: u32,
}

/// A location: one frame of the stack table.
#[derive(Debug)]
pub(crate) struct Location {
    /// Its mapping (0: none).
    pub mapping: u32,
    pub address: u64,
    /// Its functions, innermost (inlined) first, with their line (0 when unknown).
    pub lines: Vec<(u32, i64)>,
}

/// The tables of one profile.
#[derive(Debug)]
pub(crate) struct Dictionary {
    pub strings: Strings,
    /// Mapping `n` is `mappings[n - 1]`: the ones user frames name, then the kernel's.
    pub mappings: Vec<Mapping>,
    /// Function `n` is `functions.into_values()[n - 1]`.
    pub functions: Interner<Function>,
    /// Location `n` is `locations[n - 1]`, the frame `FrameId(n - 1)`.
    pub locations: Vec<Location>,
}

impl Dictionary {
    /// The tables of `profile`, with a location per frame of its stack table.
    pub(crate) fn of(profile: &Profile) -> Self {
        let mut strings = Strings::new();
        let symbolized = profile.info.symbolize.names_functions();
        let lines = profile.info.symbolize.has_lines();
        let frames = profile.stacks.frames();

        // Mappings: the ones frames name, then one for the kernel.
        let mut mappings = Vec::new();
        let mut mapping_ids: HashMap<u32, u32> = HashMap::new();
        let mut kernel_range: Option<(u64, u64)> = None;
        for frame in frames {
            match *frame {
                Frame::User { mapping, .. } => {
                    if mapping_ids.contains_key(&mapping.0) {
                        continue;
                    }
                    let Some(m) = profile.mappings.get(mapping.0 as usize) else {
                        continue;
                    };
                    let resolved = symbolized && m.is_file();
                    mappings.push(Mapping {
                        start: m.start,
                        limit: m.end,
                        file_offset: m.file_offset,
                        filename: strings.id(&m.path),
                        build_id: m.build_id_hex(),
                        has_functions: resolved,
                        has_lines: resolved && lines,
                    });
                    mapping_ids.insert(mapping.0, mappings.len() as u32);
                }
                Frame::Kernel { addr } => {
                    let (lo, hi) = kernel_range.unwrap_or((addr, addr));
                    kernel_range = Some((lo.min(addr), hi.max(addr)));
                }
                Frame::KernelHidden => {
                    kernel_range.get_or_insert((0, 0));
                }
                Frame::Unmapped { .. } | Frame::Jit { .. } => {}
            }
        }
        let kernel_mapping = kernel_range.map_or(0, |(lo, hi)| {
            mappings.push(Mapping {
                start: lo,
                limit: hi.saturating_add(1),
                file_offset: 0,
                filename: strings.id("[kernel.kallsyms]"),
                build_id: None,
                has_functions: symbolized,
                has_lines: false,
            });
            mappings.len() as u32
        });

        // Functions, interned by (name, file); a location per frame.
        let hidden = [Line {
            function: "[kernel]".into(),
            file: None,
            line: None,
        }];
        let mut functions = Interner::new();
        let locations = frames
            .iter()
            .enumerate()
            .map(|(i, frame)| {
                let (mapping, address) = match *frame {
                    Frame::User { mapping, addr } => {
                        (mapping_ids.get(&mapping.0).copied().unwrap_or(0), addr)
                    }
                    // Not an address: no location's address says it.
                    f if f.is_truncated() => (0, 0),
                    Frame::Unmapped { addr } | Frame::Jit { addr, .. } => (0, addr),
                    Frame::Kernel { addr } => (kernel_mapping, addr),
                    Frame::KernelHidden => (kernel_mapping, 0),
                };
                let named = match frame {
                    Frame::KernelHidden => &hidden[..],
                    _ => profile.lines(FrameId(i as u32)),
                };
                let lines = named
                    .iter()
                    .map(|l| {
                        let function = Function {
                            name: strings.id(&l.function),
                            file: strings.id(l.file.as_deref().unwrap_or("")),
                        };
                        (functions.id(&function), l.line.map_or(0, i64::from))
                    })
                    .collect();
                Location {
                    mapping,
                    address,
                    lines,
                }
            })
            .collect();

        Self {
            strings,
            mappings,
            functions,
            locations,
        }
    }
}

/// A sample's labels: who ran (`go tool pprof -tags`, `-tagfocus=thread_name:NAME`).
fn labels(s: &mut Strings, who: &Identity) -> Vec<pb::Label> {
    let mut labels = vec![
        pb::Label {
            key: s.id("pid").into(),
            num: who.pid.into(),
            ..Default::default()
        },
        pb::Label {
            key: s.id("tid").into(),
            num: who.tid.into(),
            ..Default::default()
        },
    ];
    let strings = [
        ("comm", Some(&who.comm)),
        ("thread_name", Some(&who.thread_name)),
        ("container_id", who.container_id.as_ref()),
    ];
    for (key, value) in strings {
        if let Some(v) = value.filter(|v| !v.is_empty()) {
            labels.push(pb::Label {
                key: s.id(key).into(),
                str: s.id(v).into(),
                ..Default::default()
            });
        }
    }
    labels
}

/// The profile as a pprof `Profile` message (not compressed).
///
/// Sample values are `samples/count` and the summed period: `cpu/nanoseconds` for
/// `cpu-clock`, `cycles/count` for `cycles`. Each frame is one `Location` (with its mapping,
/// address and, when symbolized, `Line`s innermost first); mappings carry their file, offset
/// and build id; lost and throttled counts and notes go into `comment`. Each sample is of one
/// stack in one thread, labelled with who ran: `pid` and `tid` (numbers), `comm` (the
/// process's name), `thread_name` and, in a container, `container_id` (strings).
pub(crate) fn to_pprof(this: &Profile) -> pb::Profile {
    let dict = Dictionary::of(this);
    let mut s = dict.strings;
    let (period_type, period_unit) = period_type(&this.info);
    let mut value_type = |t: &str, u: &str| pb::ValueType {
        r#type: s.id(t).into(),
        unit: s.id(u).into(),
    };
    let sample_type = vec![
        value_type("samples", "count"),
        value_type(period_type, period_unit),
    ];
    let period_vt = value_type(period_type, period_unit);
    let mapping = dict
        .mappings
        .iter()
        .zip(1..)
        .map(|(m, id)| pb::Mapping {
            id,
            memory_start: m.start,
            memory_limit: m.limit,
            file_offset: m.file_offset,
            filename: m.filename.into(),
            build_id: s.id(m.build_id.as_deref().unwrap_or("")).into(),
            has_functions: m.has_functions,
            has_filenames: m.has_lines,
            has_line_numbers: m.has_lines,
            has_inline_frames: m.has_lines,
        })
        .collect();
    let function = dict
        .functions
        .into_values()
        .into_iter()
        .zip(1..)
        .map(|(f, id)| pb::Function {
            id,
            name: f.name.into(),
            system_name: f.name.into(),
            filename: f.file.into(),
            start_line: 0,
        })
        .collect();
    let location = dict
        .locations
        .iter()
        .zip(1..)
        .map(|(l, id)| pb::Location {
            id,
            mapping_id: l.mapping.into(),
            address: l.address,
            line: l
                .lines
                .iter()
                .map(|&(function, line)| pb::Line {
                    function_id: function.into(),
                    line,
                    column: 0,
                })
                .collect(),
            is_folded: false,
        })
        .collect();

    let sample = this
        .stacks
        .sampled_by_identity()
        .map(|(stack, who, counts)| pb::Sample {
            location_id: this
                .stacks
                .frames_of(stack)
                .map(|f| u64::from(f.0) + 1)
                .collect(),
            value: vec![counts.samples as i64, counts.period as i64],
            label: who
                .and_then(|w| this.stacks.identity(w))
                .map(|w| labels(&mut s, w))
                .unwrap_or_default(),
        })
        .collect();

    let st = &this.info.stats;
    let mut comments = vec![
        format!("event: {} ({})", this.info.event, this.info.event_reason),
        format!("frequency: {} Hz", this.info.frequency),
        format!("samples: {}", st.samples),
        format!("lost records (ring full): {}", st.lost_records),
        format!("lost samples: {}", st.lost_samples),
        format!("throttled: {}", st.throttled),
    ];
    if st.dropped_profiles > 0 {
        comments.push(format!(
            "dropped before this profile by the push queue: {} profiles, {} samples",
            st.dropped_profiles, st.dropped_samples
        ));
    }
    comments.extend(this.info.notes.iter().cloned());
    let comment = comments.iter().map(|c| s.id(c).into()).collect();

    pb::Profile {
        sample_type,
        sample,
        mapping,
        location,
        function,
        string_table: s.table(),
        drop_frames: 0,
        keep_frames: 0,
        time_nanos: start_unix_nanos(&this.info) as i64,
        duration_nanos: this.info.duration.as_nanos() as i64,
        period_type: Some(period_vt),
        period: period(&this.info),
        comment,
        default_sample_type: 0,
        doc_url: 0,
    }
}

/// Writes the profile as gzip-compressed pprof (what `go tool pprof` and the fleet backends read).
///
/// # Errors
///
/// [`Error::Write`] when `w` fails.
pub(crate) fn write_pprof(this: &Profile, w: impl Write) -> Result<()> {
    let bytes = to_pprof(this).encode_to_vec();
    // The fastest level, as Go's runtime/pprof writes its profiles: the default level took
    // about half of writing a system-wide capture's profile (774 KB of protobuf: 19 ms
    // against 7 ms in zlib) for a file 11% smaller.
    let mut gz = flate2::write::GzEncoder::new(w, flate2::Compression::fast());
    gz.write_all(&bytes).map_err(Error::Write)?;
    gz.finish()
        .map_err(Error::Write)?
        .flush()
        .map_err(Error::Write)
}
