//! pprof `profile.proto`, through the prost types generated from the vendored schema
//! (`cargo xtask pprof-proto`), gzip-compressed as pprof expects on disk.

use std::io::Write;

use prost::Message;

use super::dictionary::{period, period_type, start_unix_nanos, Dictionary, Strings};
use crate::aggregate::Identity;
use crate::error::{Error, Result};
use crate::profile::Profile;
use crate::proto::perftools::profiles as pb;

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

impl Profile {
    /// The profile as a pprof `Profile` message (not compressed).
    ///
    /// Sample values are `samples/count` and the summed period: `cpu/nanoseconds` for
    /// `cpu-clock`, `cycles/count` for `cycles`. Each frame is one `Location` (with its mapping,
    /// address and, when symbolized, `Line`s innermost first); mappings carry their file, offset
    /// and build id; lost and throttled counts and notes go into `comment`. Each sample is of one
    /// stack in one thread, labelled with who ran: `pid` and `tid` (numbers), `comm` (the
    /// process's name), `thread_name` and, in a container, `container_id` (strings).
    pub fn to_pprof(&self) -> pb::Profile {
        let dict = Dictionary::of(self);
        let mut s = dict.strings;
        let (period_type, period_unit) = period_type(&self.info);
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

        let sample = self
            .stacks
            .sampled_by_identity()
            .map(|(stack, who, counts)| pb::Sample {
                location_id: self
                    .stacks
                    .frames_of(stack)
                    .map(|f| u64::from(f.0) + 1)
                    .collect(),
                value: vec![counts.samples as i64, counts.period as i64],
                label: who
                    .and_then(|w| self.stacks.identity(w))
                    .map(|w| labels(&mut s, w))
                    .unwrap_or_default(),
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
            time_nanos: start_unix_nanos(&self.info) as i64,
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
}

#[cfg(test)]
mod tests {
    use crate::export::dictionary::tests::{sample_profile, CONTAINER};

    #[test]
    fn ids_start_at_one_and_name_what_the_shared_tables_hold() {
        let p = sample_profile().to_pprof();
        let s = |i: i64| p.string_table[i as usize].as_str();
        assert_eq!(s(0), "");
        let ids = |ids: Vec<u64>| assert_eq!(ids, (1..=ids.len() as u64).collect::<Vec<_>>());
        ids(p.mapping.iter().map(|m| m.id).collect());
        ids(p.function.iter().map(|f| f.id).collect());
        ids(p.location.iter().map(|l| l.id).collect());
        assert_eq!(p.location.len(), 5);
        let (app, kernel) = (&p.mapping[0], &p.mapping[1]);
        assert_eq!((s(app.filename), s(app.build_id)), ("/bin/app", "0a0b0c"));
        assert!(app.has_functions && app.has_inline_frames);
        assert_eq!(
            (s(kernel.filename), s(kernel.build_id)),
            ("[kernel.kallsyms]", "")
        );
        let names: Vec<&str> = p
            .location
            .iter()
            .flat_map(|l| &l.line)
            .map(|l| s(p.function[l.function_id as usize - 1].name))
            .collect();
        assert_eq!(names, ["main", "leaf", "inlined", "[kernel]"]);
        // Leaf first: the kernel address, leaf, main; the hidden kernel, the unmapped frame, main.
        let stacks: Vec<&[u64]> = p.sample.iter().map(|x| &x.location_id[..]).collect();
        assert_eq!(stacks, [&[3, 2, 1][..], &[5, 4, 1][..]]);
        let st: Vec<(&str, &str)> = p
            .sample_type
            .iter()
            .map(|v| (s(v.r#type), s(v.unit)))
            .collect();
        assert_eq!(st, [("samples", "count"), ("cpu", "nanoseconds")]);
    }

    #[test]
    fn each_sample_says_who_ran_numbers_as_numbers() {
        let p = sample_profile().to_pprof();
        let s = |i: i64| p.string_table[i as usize].as_str();
        let labels: Vec<Vec<(&str, String)>> = p
            .sample
            .iter()
            .map(|x| {
                x.label
                    .iter()
                    .map(|l| {
                        let v = if l.str != 0 {
                            s(l.str).to_owned()
                        } else {
                            format!("#{}", l.num)
                        };
                        (s(l.key), v)
                    })
                    .collect()
            })
            .collect();
        let l = |k, v: &str| (k, v.to_owned());
        assert_eq!(
            labels,
            [
                vec![
                    l("pid", "#10"),
                    l("tid", "#10"),
                    l("comm", "app"),
                    l("thread_name", "app")
                ],
                vec![
                    l("pid", "#10"),
                    l("tid", "#11"),
                    l("comm", "app"),
                    l("thread_name", "worker"),
                    l("container_id", CONTAINER)
                ],
            ]
        );
    }

    #[test]
    fn one_stack_in_two_threads_is_two_samples() {
        let mut profile = sample_profile();
        let frames: Vec<_> = {
            let st = profile.stacks();
            let (first, _) = st.sampled().next().unwrap();
            let mut f: Vec<_> = st.frames_of(first).map(|f| st.frame(f).unwrap()).collect();
            f.reverse();
            f
        };
        let other = crate::aggregate::Identity::new(10, 12, "app", "other");
        profile.stacks.add_as(frames.iter().copied(), 1, &other);
        profile.stacks.add_as(frames.iter().copied(), 1, &other);
        let p = profile.to_pprof();
        assert_eq!(p.sample.len(), 3);
        assert_eq!(p.sample[0].location_id, p.sample[2].location_id);
        assert_eq!(p.sample[2].value[0], 2);
    }
}
