//! pprof `profile.proto`, through the prost types generated from the vendored schema
//! (`cargo xtask pprof-proto`), gzip-compressed as pprof expects on disk.

use std::io::Write;

use prost::Message;

use super::dictionary::{period, period_type, start_unix_nanos, Dictionary};
use crate::error::{Error, Result};
use crate::profile::Profile;
use crate::proto::perftools::profiles as pb;

impl Profile {
    /// The profile as a pprof `Profile` message (not compressed).
    ///
    /// Sample values are `samples/count` and the summed period: `cpu/nanoseconds` for
    /// `cpu-clock`, `cycles/count` for `cycles`. Each frame is one `Location` (with its mapping,
    /// address and, when symbolized, `Line`s innermost first); mappings carry their file, offset
    /// and build id; lost and throttled counts and notes go into `comment`.
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
        let mut gz = flate2::write::GzEncoder::new(w, flate2::Compression::default());
        gz.write_all(&bytes).map_err(Error::Write)?;
        gz.finish()
            .map_err(Error::Write)?
            .flush()
            .map_err(Error::Write)
    }
}

#[cfg(test)]
mod tests {
    use crate::export::dictionary::tests::sample_profile;

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
}
