//! OTLP profiles: an `ExportProfilesServiceRequest` of OpenTelemetry's profiles signal
//! (`opentelemetry.proto.profiles.v1development`), through the `opentelemetry-proto` crate's prost
//! messages (feature `otlp`).
//!
//! **Alpha.** The signal is alpha upstream and its package is still `v1development`: the schema is
//! the one of opentelemetry-proto v1.10 (wire-identical to v1.11), which `opentelemetry-proto`
//! 0.33 generates. It may change with the next schema, outside this crate's semver guarantees.
//!
//! The request has one resource (`service.name`, `host.name`, `process.pid`,
//! `process.executable.name`), one scope (`perf-profile` and its version) and two profiles over the
//! same samples, one per sample type, as the pprof exporter has two values per sample:
//! `samples/count` and the period (`cpu/nanoseconds` for `cpu-clock`, `cycles/count` for `cycles`,
//! `off_cpu/nanoseconds` for off-CPU profiles). The dictionary holds the tables the samples index
//! (strings, mappings, locations, functions, stacks, attributes; each with the empty entry at 0).

use std::collections::HashMap;
use std::io::Write;
use std::time::UNIX_EPOCH;

use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;
use opentelemetry_proto::tonic::common::v1::{
    any_value, AnyValue, ArrayValue, InstrumentationScope, KeyValue,
};
use opentelemetry_proto::tonic::profiles::v1development as pb;
use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message;

use crate::aggregate::{Frame, FrameId};
use crate::error::{Error, Result};
use crate::profile::Profile;
use crate::symbolize::Line;

/// The OpenTelemetry semantic-convention attribute a mapping's GNU build id goes in (hex).
pub const BUILD_ID_ATTRIBUTE: &str = "process.executable.build_id.gnu";

/// The dictionary under construction: every table with its empty entry at index 0.
struct Dictionary {
    d: pb::ProfilesDictionary,
    strings: HashMap<String, i32>,
    functions: HashMap<(i32, i32), i32>,
    stacks: HashMap<Vec<i32>, i32>,
}

impl Dictionary {
    fn new() -> Self {
        let d = pb::ProfilesDictionary {
            mapping_table: vec![pb::Mapping::default()],
            location_table: vec![pb::Location::default()],
            function_table: vec![pb::Function::default()],
            link_table: vec![pb::Link::default()],
            string_table: vec![String::new()],
            attribute_table: vec![pb::KeyValueAndUnit::default()],
            stack_table: vec![pb::Stack::default()],
        };
        Self {
            d,
            strings: HashMap::from([(String::new(), 0)]),
            functions: HashMap::new(),
            stacks: HashMap::new(),
        }
    }

    fn string(&mut self, s: &str) -> i32 {
        if let Some(&i) = self.strings.get(s) {
            return i;
        }
        let i = self.d.string_table.len() as i32;
        self.d.string_table.push(s.to_owned());
        self.strings.insert(s.to_owned(), i);
        i
    }

    fn attribute(&mut self, key: &str, value: any_value::Value, unit: &str) -> i32 {
        let entry = pb::KeyValueAndUnit {
            key_strindex: self.string(key),
            value: Some(AnyValue { value: Some(value) }),
            unit_strindex: self.string(unit),
        };
        let i = self.d.attribute_table.len() as i32;
        self.d.attribute_table.push(entry);
        i
    }

    fn function(&mut self, line: &Line) -> i32 {
        let name = self.string(&line.function);
        let file = self.string(line.file.as_deref().unwrap_or(""));
        if let Some(&i) = self.functions.get(&(name, file)) {
            return i;
        }
        let i = self.d.function_table.len() as i32;
        self.d.function_table.push(pb::Function {
            name_strindex: name,
            system_name_strindex: name,
            filename_strindex: file,
            start_line: 0,
        });
        self.functions.insert((name, file), i);
        i
    }

    fn stack(&mut self, locations: Vec<i32>) -> i32 {
        if let Some(&i) = self.stacks.get(&locations) {
            return i;
        }
        let i = self.d.stack_table.len() as i32;
        self.d.stack_table.push(pb::Stack {
            location_indices: locations.clone(),
        });
        self.stacks.insert(locations, i);
        i
    }
}

fn string_value(s: impl Into<String>) -> any_value::Value {
    any_value::Value::StringValue(s.into())
}

fn key_value(key: &str, value: any_value::Value) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue { value: Some(value) }),
        ..KeyValue::default()
    }
}

/// This machine's host name (`/proc/sys/kernel/hostname`), or `localhost` when unreadable.
pub(crate) fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

impl Profile {
    /// The OTLP resource attributes, in the order written: `service.name`
    /// ([`Info::service_name`](crate::Info::service_name)), `host.name`, and for a process
    /// `process.pid` and `process.executable.name`.
    pub fn resource_attributes(&self) -> Vec<(String, String)> {
        let mut out = vec![
            ("service.name".to_owned(), self.info.service_name()),
            ("host.name".to_owned(), host_name()),
        ];
        if let Some(p) = &self.info.process {
            out.push(("process.pid".into(), p.pid.to_string()));
            out.push(("process.executable.name".into(), p.name.clone()));
        }
        out
    }

    /// The profile as an OTLP `ExportProfilesServiceRequest` (alpha: see the module's docs).
    pub fn to_otlp(&self) -> ExportProfilesServiceRequest {
        let mut dict = Dictionary::new();

        // Mappings: the user ones frames name, then one for the kernel.
        let mut mapping_ids: HashMap<u32, i32> = HashMap::new();
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
                    let mut attribute_indices = Vec::new();
                    if let Some(id) = m.build_id_hex() {
                        attribute_indices.push(dict.attribute(
                            BUILD_ID_ATTRIBUTE,
                            string_value(id),
                            "",
                        ));
                    }
                    let filename_strindex = dict.string(&m.path);
                    let i = dict.d.mapping_table.len() as i32;
                    dict.d.mapping_table.push(pb::Mapping {
                        memory_start: m.start,
                        memory_limit: m.end,
                        file_offset: m.file_offset,
                        filename_strindex,
                        attribute_indices,
                    });
                    mapping_ids.insert(mapping.0, i);
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
            let filename_strindex = dict.string("[kernel.kallsyms]");
            let i = dict.d.mapping_table.len() as i32;
            dict.d.mapping_table.push(pb::Mapping {
                memory_start: lo,
                memory_limit: hi.saturating_add(1),
                file_offset: 0,
                filename_strindex,
                attribute_indices: Vec::new(),
            });
            i
        });

        // A location per frame, at index frame id + 1.
        let hidden = [Line {
            function: "[kernel]".into(),
            file: None,
            line: None,
        }];
        for (i, frame) in self.stacks.frames().iter().enumerate() {
            let (mapping_index, address) = match *frame {
                Frame::User { mapping, addr } => {
                    (mapping_ids.get(&mapping.0).copied().unwrap_or(0), addr)
                }
                Frame::Unmapped { addr } | Frame::Jit { addr, .. } => (0, addr),
                Frame::Kernel { addr } => (kernel_mapping.unwrap_or(0), addr),
                Frame::KernelHidden => (kernel_mapping.unwrap_or(0), 0),
            };
            let named = match frame {
                Frame::KernelHidden => &hidden[..],
                _ => self.lines(FrameId(i as u32)),
            };
            let lines = named
                .iter()
                .map(|l| pb::Line {
                    function_index: dict.function(l),
                    line: l.line.map_or(0, i64::from),
                    column: 0,
                })
                .collect();
            dict.d.location_table.push(pb::Location {
                mapping_index,
                address,
                lines,
                attribute_indices: Vec::new(),
            });
        }

        // Stacks (leaf first, as pprof) and their counts.
        let mut sampled = Vec::new();
        for (stack, counts) in self.stacks.sampled() {
            let locations = self
                .stacks
                .frames_of(stack)
                .map(|f| f.0 as i32 + 1)
                .collect();
            sampled.push((dict.stack(locations), counts));
        }

        // What the capture counted and lost, on both profiles.
        let st = &self.info.stats;
        let mut attribute_indices = vec![
            dict.attribute(
                "perf_profile.event",
                string_value(self.info.event.clone()),
                "",
            ),
            dict.attribute(
                "perf_profile.frequency",
                any_value::Value::IntValue(self.info.frequency as i64),
                "Hz",
            ),
        ];
        for (key, n) in [
            ("perf_profile.samples", st.samples),
            ("perf_profile.lost_records", st.lost_records),
            ("perf_profile.lost_samples", st.lost_samples),
            ("perf_profile.throttled", st.throttled),
            ("perf_profile.dropped_profiles", st.dropped_profiles),
            ("perf_profile.dropped_samples", st.dropped_samples),
        ] {
            attribute_indices.push(dict.attribute(key, any_value::Value::IntValue(n as i64), ""));
        }
        if !self.info.notes.is_empty() {
            let notes = ArrayValue {
                values: self
                    .info
                    .notes
                    .iter()
                    .map(|n| AnyValue {
                        value: Some(string_value(n.clone())),
                    })
                    .collect(),
            };
            attribute_indices.push(dict.attribute(
                "perf_profile.notes",
                any_value::Value::ArrayValue(notes),
                "",
            ));
        }

        let (period_type, period_unit) = crate::export::pprof::period_type(&self.info);
        let period_vt = pb::ValueType {
            type_strindex: dict.string(period_type),
            unit_strindex: dict.string(period_unit),
        };
        let count_vt = pb::ValueType {
            type_strindex: dict.string("samples"),
            unit_strindex: dict.string("count"),
        };
        let time_unix_nano = self
            .info
            .start
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let period = crate::export::pprof::period(&self.info);
        let profile =
            |vt: pb::ValueType, value: &dyn Fn(crate::aggregate::Counts) -> u64| pb::Profile {
                sample_type: Some(vt),
                samples: sampled
                    .iter()
                    .map(|&(stack_index, counts)| pb::Sample {
                        stack_index,
                        values: vec![value(counts) as i64],
                        ..pb::Sample::default()
                    })
                    .collect(),
                time_unix_nano,
                duration_nano: self.info.duration.as_nanos() as u64,
                period_type: Some(period_vt),
                period,
                attribute_indices: attribute_indices.clone(),
                ..pb::Profile::default()
            };
        let profiles = vec![
            profile(count_vt, &|c| c.samples),
            profile(period_vt, &|c| c.period),
        ];

        let mut resource = Resource::default();
        for (key, value) in self.resource_attributes() {
            let value = match key.as_str() {
                "process.pid" => any_value::Value::IntValue(value.parse().unwrap_or(0)),
                _ => string_value(value),
            };
            resource.attributes.push(key_value(&key, value));
        }
        ExportProfilesServiceRequest {
            resource_profiles: vec![pb::ResourceProfiles {
                resource: Some(resource),
                scope_profiles: vec![pb::ScopeProfiles {
                    scope: Some(InstrumentationScope {
                        name: "perf-profile".into(),
                        version: env!("CARGO_PKG_VERSION").into(),
                        ..InstrumentationScope::default()
                    }),
                    profiles,
                    schema_url: String::new(),
                }],
                schema_url: String::new(),
            }],
            dictionary: Some(dict.d),
        }
    }

    /// Writes [`to_otlp`](Self::to_otlp) as protobuf bytes (what OTLP/HTTP posts, `application/x-protobuf`).
    ///
    /// # Errors
    ///
    /// [`Error::Write`] when `w` fails.
    pub fn write_otlp(&self, mut w: impl Write) -> Result<()> {
        w.write_all(&self.to_otlp().encode_to_vec())
            .map_err(Error::Write)?;
        w.flush().map_err(Error::Write)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dictionary_tables_start_with_their_empty_entry_and_intern() {
        let mut d = Dictionary::new();
        assert_eq!(d.string(""), 0);
        let a = d.string("a");
        assert_eq!(d.string("a"), a);
        let l = Line {
            function: "f".into(),
            file: Some("f.c".into()),
            line: Some(3),
        };
        let f = d.function(&l);
        assert_eq!(f, 1);
        assert_eq!(d.function(&l), f);
        let s = d.stack(vec![1, 2]);
        assert_eq!(s, 1);
        assert_eq!(d.stack(vec![1, 2]), 1);
        assert_eq!(d.stack(vec![2]), 2);
        for len in [
            d.d.mapping_table.len(),
            d.d.location_table.len(),
            d.d.link_table.len(),
            d.d.attribute_table.len(),
        ] {
            assert_eq!(len, 1);
        }
        assert_eq!(d.d.stack_table[0], pb::Stack::default());
    }
}
