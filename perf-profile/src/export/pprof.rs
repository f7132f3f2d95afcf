//! pprof `profile.proto`, through the prost types generated from the vendored schema
//! (`cargo xtask pprof-proto`), gzip-compressed as pprof expects on disk.

use std::collections::HashMap;
use std::io::Write;
use std::time::UNIX_EPOCH;

use prost::Message;

use crate::aggregate::{Frame, FrameId};
use crate::error::{Error, Result};
use crate::profile::{Info, Profile};
use crate::proto::perftools::profiles as pb;
use crate::symbolize::Mode;

/// The string table: index 0 is the empty string, as pprof requires.
struct Strings {
    table: Vec<String>,
    index: HashMap<String, i64>,
}

impl Strings {
    fn new() -> Self {
        Self {
            table: vec![String::new()],
            index: HashMap::from([(String::new(), 0)]),
        }
    }

    fn id(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.table.len() as i64;
        self.table.push(s.to_owned());
        self.index.insert(s.to_owned(), i);
        i
    }
}

/// The type and unit of a profile's period value: `off_cpu/nanoseconds` off CPU,
/// `cpu/nanoseconds` for `cpu-clock`, the event and `count` otherwise.
pub(crate) fn period_type(info: &Info) -> (&str, &'static str) {
    if crate::offcpu::is_off_cpu(info) {
        ("off_cpu", "nanoseconds")
    } else if info.event == "cpu-clock" {
        ("cpu", "nanoseconds")
    } else {
        (info.event.as_str(), "count")
    }
}

/// The sampling period in the period type's unit, where it is fixed (`cpu-clock`: 1 s / frequency).
pub(crate) fn period(info: &Info) -> i64 {
    if info.event == "cpu-clock" {
        1_000_000_000 / info.frequency.max(1) as i64
    } else {
        0
    }
}

impl Profile {
    /// The profile as a pprof `Profile` message (not compressed).
    ///
    /// Sample values are `samples/count` and the summed period: `cpu/nanoseconds` for
    /// `cpu-clock`, `cycles/count` for `cycles`. Each frame is one `Location` (with its mapping,
    /// address and, when symbolized, `Line`s innermost first); mappings carry their file, offset
    /// and build id; lost and throttled counts and notes go into `comment`.
    pub fn to_pprof(&self) -> pb::Profile {
        let mut s = Strings::new();
        let (period_type, period_unit) = period_type(&self.info);
        let value_type = |s: &mut Strings, t: &str, u: &str| pb::ValueType {
            r#type: s.id(t),
            unit: s.id(u),
        };
        let sample_type = vec![
            value_type(&mut s, "samples", "count"),
            value_type(&mut s, period_type, period_unit),
        ];
        let period_vt = value_type(&mut s, period_type, period_unit);

        // Mappings: the ones frames name, then one for the kernel.
        let symbolized = self.info.symbolize == Mode::Local;
        let mut mapping_ids: HashMap<u32, u64> = HashMap::new();
        let mut mappings = Vec::new();
        let mut kernel_range: Option<(u64, u64)> = None;
        for frame in self.stacks.frames() {
            match *frame {
                Frame::User { mapping, .. } => {
                    if mapping_ids.contains_key(&mapping.0) {
                        continue;
                    }
                    let Some(m) = self.mappings.get(mapping.0 as usize) else {
                        continue;
                    };
                    let id = mappings.len() as u64 + 1;
                    mapping_ids.insert(mapping.0, id);
                    let resolved = symbolized && m.is_file();
                    mappings.push(pb::Mapping {
                        id,
                        memory_start: m.start,
                        memory_limit: m.end,
                        file_offset: m.file_offset,
                        filename: s.id(&m.path),
                        build_id: s.id(&m.build_id_hex().unwrap_or_default()),
                        has_functions: resolved,
                        has_filenames: resolved,
                        has_line_numbers: resolved,
                        has_inline_frames: resolved,
                    });
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
        let kernel_mapping = kernel_range.map(|(lo, hi)| {
            let id = mappings.len() as u64 + 1;
            mappings.push(pb::Mapping {
                id,
                memory_start: lo,
                memory_limit: hi.saturating_add(1),
                file_offset: 0,
                filename: s.id("[kernel.kallsyms]"),
                build_id: 0,
                has_functions: symbolized,
                has_filenames: false,
                has_line_numbers: false,
                has_inline_frames: false,
            });
            id
        });

        // Functions, interned by (name, file); a location per frame.
        let mut functions: Vec<pb::Function> = Vec::new();
        let mut function_ids: HashMap<(String, String), u64> = HashMap::new();
        let mut locations = Vec::with_capacity(self.stacks.frames().len());
        for (i, frame) in self.stacks.frames().iter().enumerate() {
            let id = FrameId(i as u32);
            let (mapping_id, address) = match *frame {
                Frame::User { mapping, addr } => {
                    (mapping_ids.get(&mapping.0).copied().unwrap_or(0), addr)
                }
                Frame::Unmapped { addr } | Frame::Jit { addr, .. } => (0, addr),
                Frame::Kernel { addr } => (kernel_mapping.unwrap_or(0), addr),
                Frame::KernelHidden => (kernel_mapping.unwrap_or(0), 0),
            };
            let mut lines = Vec::new();
            let named = self.lines(id);
            let hidden = [crate::symbolize::Line {
                function: "[kernel]".into(),
                file: None,
                line: None,
            }];
            let named = if matches!(frame, Frame::KernelHidden) {
                &hidden[..]
            } else {
                named
            };
            for l in named {
                let file = l.file.clone().unwrap_or_default();
                let key = (l.function.clone(), file);
                let function_id = match function_ids.get(&key) {
                    Some(&f) => f,
                    None => {
                        let f = functions.len() as u64 + 1;
                        functions.push(pb::Function {
                            id: f,
                            name: s.id(&key.0),
                            system_name: s.id(&key.0),
                            filename: s.id(&key.1),
                            start_line: 0,
                        });
                        function_ids.insert(key, f);
                        f
                    }
                };
                lines.push(pb::Line {
                    function_id,
                    line: l.line.map_or(0, i64::from),
                    column: 0,
                });
            }
            locations.push(pb::Location {
                id: i as u64 + 1,
                mapping_id,
                address,
                line: lines,
                is_folded: false,
            });
        }

        let sample = self
            .stacks
            .sampled()
            .map(|(stack, counts)| pb::Sample {
                location_id: self
                    .stacks
                    .frames_of(stack)
                    .map(|f| u64::from(f.0) + 1)
                    .collect(),
                value: vec![counts.samples as i64, counts.period as i64],
                label: Vec::new(),
            })
            .collect();

        let st = &self.info.stats;
        let mut comments = vec![
            format!("event: {} ({})", self.info.event, self.info.event_reason),
            format!("frequency: {} Hz", self.info.frequency),
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
        comments.extend(self.info.notes.iter().cloned());
        let comment = comments.iter().map(|c| s.id(c)).collect();
        let time_nanos = self
            .info
            .start
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i64);

        pb::Profile {
            sample_type,
            sample,
            mapping: mappings,
            location: locations,
            function: functions,
            string_table: s.table,
            drop_frames: 0,
            keep_frames: 0,
            time_nanos,
            duration_nanos: self.info.duration.as_nanos() as i64,
            period_type: Some(period_vt),
            period: period(&self.info),
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
    pub fn write_pprof(&self, w: impl Write) -> Result<()> {
        let bytes = self.to_pprof().encode_to_vec();
        let mut gz = flate2::write::GzEncoder::new(w, flate2::Compression::default());
        gz.write_all(&bytes).map_err(Error::Write)?;
        gz.finish()
            .map_err(Error::Write)?
            .flush()
            .map_err(Error::Write)
    }
}
