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
//! `off_cpu/nanoseconds` for off-CPU profiles), each with its own `profile_id` (16 random bytes,
//! left out where the system gives none). The dictionary holds the tables the samples index
//! (strings, mappings, locations, functions, stacks, attributes; each with the empty entry at 0);
//! strings, mappings, locations and functions are the ones the pprof exporter writes too. Each
//! sample is of one stack in one thread and says who ran, by the semantic conventions:
//! `process.pid`, `thread.id`, `process.executable.name` (the process's `comm`), `thread.name` and,
//! in a container, `container.id` (attributes in the dictionary's table, written once per thread).

use std::io::Write;
use std::iter;

use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;
use opentelemetry_proto::tonic::common::v1::{
    any_value, AnyValue, ArrayValue, InstrumentationScope, KeyValue,
};
use opentelemetry_proto::tonic::profiles::v1development as pb;
use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message;

use super::dictionary::{period, period_type, start_unix_nanos, Dictionary, Interner, Strings};
use crate::aggregate::Identity;
use crate::error::{Error, Result};
use crate::profile::Profile;

/// The OpenTelemetry semantic-convention attribute a mapping's GNU build id goes in (hex).
pub const BUILD_ID_ATTRIBUTE: &str = "process.executable.build_id.gnu";

/// The attribute table, its empty entry at 0. Attributes are not interned: each is written once.
struct Attributes(Vec<pb::KeyValueAndUnit>);

impl Attributes {
    fn new() -> Self {
        Self(vec![pb::KeyValueAndUnit::default()])
    }

    /// Adds an attribute; its index.
    fn add<'a>(
        &mut self,
        s: &mut Strings<'a>,
        key: &'a str,
        value: any_value::Value,
        unit: &'a str,
    ) -> i32 {
        self.0.push(pb::KeyValueAndUnit {
            key_strindex: index(s.id(key)),
            value: Some(AnyValue { value: Some(value) }),
            unit_strindex: index(s.id(unit)),
        });
        self.0.len() as i32 - 1
    }
}

/// A sample's attributes, by the semantic conventions: who ran.
fn identity_attributes<'a>(a: &mut Attributes, s: &mut Strings<'a>, who: &'a Identity) -> Vec<i32> {
    let int = |n: u32| any_value::Value::IntValue(n.into());
    let mut out = vec![
        a.add(s, "process.pid", int(who.pid), ""),
        a.add(s, "thread.id", int(who.tid), ""),
    ];
    let strings = [
        ("process.executable.name", Some(&who.comm)),
        ("thread.name", Some(&who.thread_name)),
        ("container.id", who.container_id.as_ref()),
    ];
    for (key, value) in strings {
        if let Some(v) = value.filter(|v| !v.is_empty()) {
            out.push(a.add(s, key, string_value(v.to_string()), ""));
        }
    }
    out
}

/// A table index of the shared dictionary as OTLP writes it. (A profile's tables stay far below
/// 2^31 entries: each entry takes memory.)
fn index(n: u32) -> i32 {
    n as i32
}

/// The `profile_id`s of a profile's two OTLP profiles (one per sample type), kept by whoever sends
/// the same profile again (a retried push), so that a receiver can tell a repeat.
pub(crate) type ProfileIds = [Vec<u8>; 2];

/// New [`ProfileIds`].
pub(crate) fn new_profile_ids() -> ProfileIds {
    [profile_id(), profile_id()]
}

/// A new `profile_id`: 16 random bytes, or none (the field is optional; a collector may assign
/// one) where the system gives no random bytes.
fn profile_id() -> Vec<u8> {
    let mut id = [0u8; 16];
    match getrandom::fill(&mut id) {
        // All zeros is the one invalid id.
        Ok(()) if id != [0; 16] => id.to_vec(),
        _ => Vec::new(),
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

    /// The profile as an OTLP `ExportProfilesServiceRequest` (alpha: see the module's docs), its
    /// profiles with new random `profile_id`s.
    pub fn to_otlp(&self) -> ExportProfilesServiceRequest {
        self.to_otlp_with_ids(new_profile_ids())
    }

    /// As [`to_otlp`](Self::to_otlp), with the profiles' `profile_id`s given.
    pub(crate) fn to_otlp_with_ids(&self, ids: ProfileIds) -> ExportProfilesServiceRequest {
        let Dictionary {
            strings: mut s,
            mappings,
            functions,
            locations,
            lines,
        } = Dictionary::of(self);
        let mut attributes = Attributes::new();
        let mapping_table = iter::once(pb::Mapping::default())
            .chain(mappings.iter().map(|m| {
                pb::Mapping {
                    memory_start: m.start,
                    memory_limit: m.limit,
                    file_offset: m.file_offset,
                    filename_strindex: index(m.filename),
                    attribute_indices: m
                        .build_id
                        .iter()
                        .map(|id| {
                            attributes.add(&mut s, BUILD_ID_ATTRIBUTE, string_value(id.clone()), "")
                        })
                        .collect(),
                }
            }))
            .collect();
        let function_table = iter::once(pb::Function::default())
            .chain(functions.into_values().into_iter().map(|f| pb::Function {
                name_strindex: index(f.name),
                system_name_strindex: index(f.name),
                filename_strindex: index(f.file),
                start_line: 0,
            }))
            .collect();
        // A location per frame, at index frame id + 1.
        let location_table = iter::once(pb::Location::default())
            .chain(locations.iter().map(|l| {
                pb::Location {
                    mapping_index: index(l.mapping),
                    address: l.address,
                    lines: lines[l.lines.clone()]
                        .iter()
                        .map(|&(function, line)| pb::Line {
                            function_index: index(function),
                            line,
                            column: 0,
                        })
                        .collect(),
                    attribute_indices: Vec::new(),
                }
            }))
            .collect();

        // Stacks (leaf first, as pprof) and their counts.
        let mut stacks = Interner::new();
        let mut sampled = Vec::new();
        // Each identity's attributes, written once and shared by its samples.
        let mut who_attributes: std::collections::HashMap<_, Vec<i32>> = Default::default();
        for (stack, who, counts) in self.stacks.sampled_by_identity() {
            let locations: Vec<i32> = self
                .stacks
                .frames_of(stack)
                .map(|f| f.0 as i32 + 1)
                .collect();
            let who = who.and_then(|w| Some((w, self.stacks.identity(w)?)));
            let indices = match who {
                Some((id, who)) => who_attributes
                    .entry(id)
                    .or_insert_with(|| identity_attributes(&mut attributes, &mut s, who))
                    .clone(),
                None => Vec::new(),
            };
            sampled.push((index(stacks.id(&locations[..])), counts, indices));
        }
        let stack_table = iter::once(pb::Stack::default())
            .chain(
                stacks
                    .into_values()
                    .into_iter()
                    .map(|location_indices| pb::Stack { location_indices }),
            )
            .collect();

        // What the capture counted and lost, on both profiles.
        let st = &self.info.stats;
        let mut attribute_indices = vec![
            attributes.add(
                &mut s,
                "perf_profile.event",
                string_value(self.info.event.clone()),
                "",
            ),
            attributes.add(
                &mut s,
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
            attribute_indices.push(attributes.add(
                &mut s,
                key,
                any_value::Value::IntValue(n as i64),
                "",
            ));
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
            attribute_indices.push(attributes.add(
                &mut s,
                "perf_profile.notes",
                any_value::Value::ArrayValue(notes),
                "",
            ));
        }

        let (period_type, period_unit) = period_type(&self.info);
        let period_vt = pb::ValueType {
            type_strindex: index(s.id(period_type)),
            unit_strindex: index(s.id(period_unit)),
        };
        let count_vt = pb::ValueType {
            type_strindex: index(s.id("samples")),
            unit_strindex: index(s.id("count")),
        };
        let time_unix_nano = start_unix_nanos(&self.info);
        let period = period(&self.info);
        let [count_id, period_id] = ids;
        let profile =
            |vt: pb::ValueType,
             profile_id: Vec<u8>,
             value: &dyn Fn(crate::aggregate::Counts) -> u64| pb::Profile {
                sample_type: Some(vt),
                samples: sampled
                    .iter()
                    .map(|(stack_index, counts, indices)| pb::Sample {
                        stack_index: *stack_index,
                        attribute_indices: indices.clone(),
                        values: vec![value(*counts) as i64],
                        ..pb::Sample::default()
                    })
                    .collect(),
                time_unix_nano,
                duration_nano: self.info.duration.as_nanos() as u64,
                period_type: Some(period_vt),
                period,
                attribute_indices: attribute_indices.clone(),
                profile_id,
                ..pb::Profile::default()
            };
        let profiles = vec![
            profile(count_vt, count_id, &|c| c.samples),
            profile(period_vt, period_id, &|c| c.period),
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
            dictionary: Some(pb::ProfilesDictionary {
                mapping_table,
                location_table,
                function_table,
                link_table: vec![pb::Link::default()],
                string_table: s.table(),
                attribute_table: attributes.0,
                stack_table,
            }),
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
    use crate::export::dictionary::tests::{sample_profile, CONTAINER};

    #[test]
    fn each_sample_says_who_ran_by_the_semantic_conventions() {
        let r = sample_profile().to_otlp();
        let d = r.dictionary.as_ref().unwrap();
        let profile = &r.resource_profiles[0].scope_profiles[0].profiles[0];
        let attrs: Vec<Vec<(&str, any_value::Value)>> = profile
            .samples
            .iter()
            .map(|x| {
                x.attribute_indices
                    .iter()
                    .map(|&i| {
                        let a = &d.attribute_table[i as usize];
                        (
                            d.string_table[a.key_strindex as usize].as_str(),
                            a.value.clone().unwrap().value.unwrap(),
                        )
                    })
                    .collect()
            })
            .collect();
        let int = any_value::Value::IntValue;
        assert_eq!(
            attrs,
            [
                vec![
                    ("process.pid", int(10)),
                    ("thread.id", int(10)),
                    ("process.executable.name", string_value("app")),
                    ("thread.name", string_value("app")),
                ],
                vec![
                    ("process.pid", int(10)),
                    ("thread.id", int(11)),
                    ("process.executable.name", string_value("app")),
                    ("thread.name", string_value("worker")),
                    ("container.id", string_value(CONTAINER)),
                ],
            ]
        );
        // Both profiles share the attributes.
        let other = &r.resource_profiles[0].scope_profiles[0].profiles[1];
        assert_eq!(
            other.samples[1].attribute_indices,
            profile.samples[1].attribute_indices
        );
    }

    #[test]
    fn every_table_starts_with_its_empty_entry_and_each_profile_has_its_own_id() {
        let p = sample_profile();
        let r = p.to_otlp();
        let d = r.dictionary.as_ref().unwrap();
        assert_eq!(d.string_table[0], "");
        assert_eq!(d.mapping_table[0], pb::Mapping::default());
        assert_eq!(d.location_table[0], pb::Location::default());
        assert_eq!(d.function_table[0], pb::Function::default());
        assert_eq!(d.link_table, [pb::Link::default()]);
        assert_eq!(d.attribute_table[0], pb::KeyValueAndUnit::default());
        assert_eq!(d.stack_table[0], pb::Stack::default());
        // The shared tables, one entry more each; the build id as an attribute of its mapping.
        let shared = Dictionary::of(&p);
        assert_eq!(d.mapping_table.len(), shared.mappings.len() + 1);
        assert_eq!(d.location_table.len(), p.stacks().frames().len() + 1);
        assert_eq!(
            d.function_table.len(),
            shared.functions.into_values().len() + 1
        );
        let a = &d.attribute_table[d.mapping_table[1].attribute_indices[0] as usize];
        assert_eq!(d.string_table[a.key_strindex as usize], BUILD_ID_ATTRIBUTE);
        assert_eq!(
            a.value.as_ref().unwrap().value,
            Some(string_value("0a0b0c"))
        );
        let names: Vec<&str> = d.location_table[1..]
            .iter()
            .flat_map(|l| &l.lines)
            .map(|l| {
                let f = &d.function_table[l.function_index as usize];
                d.string_table[f.name_strindex as usize].as_str()
            })
            .collect();
        assert_eq!(names, ["main", "leaf", "inlined", "[kernel]"]);

        let ids: Vec<&[u8]> = r.resource_profiles[0].scope_profiles[0]
            .profiles
            .iter()
            .map(|p| &p.profile_id[..])
            .collect();
        assert_eq!(ids.len(), 2);
        assert!(ids
            .iter()
            .all(|id| id.len() == 16 && id.iter().any(|&b| b != 0)));
        assert_ne!(ids[0], ids[1]);
        let again = p.to_otlp();
        assert_ne!(
            again.resource_profiles[0].scope_profiles[0].profiles[0].profile_id,
            ids[0]
        );
    }
}
