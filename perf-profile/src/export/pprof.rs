//! pprof `profile.proto`, through the prost types generated from the vendored schema
//! (`cargo xtask pprof-proto`), gzip-compressed as pprof expects on disk.
//!
//! The message is made part by part in its fields' order, each part handed to a [`Parts`]: the
//! whole message in memory ([`Profile::to_pprof`]), or each part encoded and compressed as it is
//! made ([`Profile::write_pprof`]): a system-wide profile's message is thousands of small lists,
//! which the writer never holds. The samples and locations, most of the message, are encoded here
//! rather than by prost (the rest is prost's); `export::bench` checks that the bytes are the ones
//! prost writes for the whole message.

use std::io::{self, Write};

use prost::encoding::{encode_varint, encoded_len_varint as varint_len};
use prost::Message;

use super::dictionary::{period, period_type, start_unix_nanos, Dictionary, Strings};
use crate::aggregate::Identity;
use crate::error::{Error, Result};
use crate::profile::Profile;
use crate::proto::perftools::profiles as pb;

/// A sample's labels: who ran (`go tool pprof -tags`, `-tagfocus=thread_name:NAME`).
fn labels<'a>(s: &mut Strings<'a>, who: &'a Identity) -> Vec<pb::Label> {
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

/// A thread's labels, also encoded as entries of a `Sample`'s `label` field (3): made once for all
/// its samples.
#[derive(Default)]
struct Labels {
    labels: Vec<pb::Label>,
    encoded: Vec<u8>,
}

impl Labels {
    fn of<'a>(s: &mut Strings<'a>, who: &'a Identity) -> io::Result<Self> {
        let labels = labels(s, who);
        let mut encoded = Vec::new();
        for l in &labels {
            encoded.push(3 << 3 | 2);
            l.encode_length_delimited(&mut encoded)
                .map_err(io::Error::other)?;
        }
        Ok(Self { labels, encoded })
    }
}

/// Where the parts of a pprof `Profile` go, in the order of their fields: the sample types (in
/// `head`), then each sample, mapping, location and function, the string table, and the fields
/// that are no table (in `tail`). A part passed by reference is only lent: its lists are reused
/// for the next one.
trait Parts {
    /// A `Profile` with only its `sample_type`.
    fn head(&mut self, head: pb::Profile) -> io::Result<()>;
    /// A sample, its `label` left to `labels`.
    fn sample(&mut self, sample: &pb::Sample, labels: &Labels) -> io::Result<()>;
    fn mapping(&mut self, mapping: &pb::Mapping) -> io::Result<()>;
    fn location(&mut self, location: &pb::Location) -> io::Result<()>;
    fn function(&mut self, function: &pb::Function) -> io::Result<()>;
    fn strings(&mut self, strings: Strings<'_>) -> io::Result<()>;
    /// A `Profile` with only the fields after `string_table`.
    fn tail(&mut self, tail: pb::Profile) -> io::Result<()>;
}

/// The message in memory.
#[derive(Default)]
struct Whole(pb::Profile);

impl Parts for Whole {
    fn head(&mut self, head: pb::Profile) -> io::Result<()> {
        self.0.sample_type = head.sample_type;
        Ok(())
    }

    fn sample(&mut self, sample: &pb::Sample, labels: &Labels) -> io::Result<()> {
        self.0.sample.push(pb::Sample {
            label: labels.labels.clone(),
            ..sample.clone()
        });
        Ok(())
    }

    fn mapping(&mut self, mapping: &pb::Mapping) -> io::Result<()> {
        self.0.mapping.push(*mapping);
        Ok(())
    }

    fn location(&mut self, location: &pb::Location) -> io::Result<()> {
        self.0.location.push(location.clone());
        Ok(())
    }

    fn function(&mut self, function: &pb::Function) -> io::Result<()> {
        self.0.function.push(*function);
        Ok(())
    }

    fn strings(&mut self, strings: Strings<'_>) -> io::Result<()> {
        self.0.string_table = strings.table();
        Ok(())
    }

    fn tail(&mut self, tail: pb::Profile) -> io::Result<()> {
        let sample_type = std::mem::take(&mut self.0.sample_type);
        let sample = std::mem::take(&mut self.0.sample);
        let mapping = std::mem::take(&mut self.0.mapping);
        let location = std::mem::take(&mut self.0.location);
        let function = std::mem::take(&mut self.0.function);
        let string_table = std::mem::take(&mut self.0.string_table);
        self.0 = pb::Profile {
            sample_type,
            sample,
            mapping,
            location,
            function,
            string_table,
            ..tail
        };
        Ok(())
    }
}

/// The bytes of a number field (tag below 16) as proto3 writes it: none when 0.
fn number_len(n: u64) -> usize {
    if n == 0 {
        0
    } else {
        1 + varint_len(n)
    }
}

/// Appends the number field `tag` (below 16) as proto3 writes it: not at all when 0.
fn put_number(buf: &mut Vec<u8>, tag: u8, n: u64) {
    if n != 0 {
        buf.push(tag << 3);
        encode_varint(n, buf);
    }
}

/// The bytes of a length-delimited entry (tag below 16) of `len` bytes.
fn entry_len(len: usize) -> usize {
    1 + varint_len(len as u64) + len
}

/// How much encoded message [`Encoder`] gathers before handing it on.
const CHUNK: usize = 64 * 1024;

/// The message encoded part by part, as prost would encode it whole (fields in order, each
/// repeated message field's entries one after the other), written on in chunks.
struct Encoder<W> {
    buf: Vec<u8>,
    w: W,
}

impl<W: Write> Encoder<W> {
    fn new(w: W) -> Self {
        Self {
            buf: Vec::with_capacity(CHUNK + 4096),
            w,
        }
    }

    /// Hands on what is gathered once it is a chunk.
    fn spill(&mut self) -> io::Result<()> {
        if self.buf.len() >= CHUNK {
            self.w.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    /// A `Profile`'s fields encoded: they merge with those already written.
    fn fields(&mut self, m: &pb::Profile) -> io::Result<()> {
        m.encode(&mut self.buf).map_err(io::Error::other)?;
        self.spill()
    }

    /// One entry of the length-delimited field `tag` of `Profile`: its key (one byte: every
    /// field this writes has a tag below 16), the length, then `m`.
    fn entry(&mut self, tag: u8, m: &impl Message) -> io::Result<()> {
        self.buf.push(tag << 3 | 2);
        m.encode_length_delimited(&mut self.buf)
            .map_err(io::Error::other)?;
        self.spill()
    }

    /// Writes the rest; the writer.
    fn finish(mut self) -> io::Result<W> {
        self.w.write_all(&self.buf)?;
        Ok(self.w)
    }
}

impl<W: Write> Parts for Encoder<W> {
    fn head(&mut self, head: pb::Profile) -> io::Result<()> {
        self.fields(&head)
    }

    fn sample(&mut self, sample: &pb::Sample, labels: &Labels) -> io::Result<()> {
        // Written here rather than by prost, which goes over the location ids three times (the
        // sample's length, the packed field's, the ids): a system-wide profile's samples hold
        // tens of thousands. Fields 1 and 2 packed (proto3's repeated numbers), each left out when
        // empty; then the labels, the last field, encoded once per thread.
        let ids: usize = sample.location_id.iter().map(|&v| varint_len(v)).sum();
        let values: usize = sample.value.iter().map(|&v| varint_len(v as u64)).sum();
        let packed = |n: usize| if n == 0 { 0 } else { entry_len(n) };
        self.buf.push(2 << 3 | 2);
        encode_varint(
            (packed(ids) + packed(values) + labels.encoded.len()) as u64,
            &mut self.buf,
        );
        if ids > 0 {
            self.buf.push(1 << 3 | 2);
            encode_varint(ids as u64, &mut self.buf);
            for &v in &sample.location_id {
                encode_varint(v, &mut self.buf);
            }
        }
        if values > 0 {
            self.buf.push(2 << 3 | 2);
            encode_varint(values as u64, &mut self.buf);
            for &v in &sample.value {
                encode_varint(v as u64, &mut self.buf);
            }
        }
        self.buf.extend_from_slice(&labels.encoded);
        self.spill()
    }

    fn mapping(&mut self, mapping: &pb::Mapping) -> io::Result<()> {
        self.entry(3, mapping)
    }

    fn location(&mut self, l: &pb::Location) -> io::Result<()> {
        // By hand, as the sample: there is a location per frame, and prost's encoding of them
        // was a quarter of the whole message's time (3.2 ms -> 2.35 ms in export::bench).
        let line_len = |x: &pb::Line| {
            number_len(x.function_id) + number_len(x.line as u64) + number_len(x.column as u64)
        };
        let lines: usize = l.line.iter().map(|x| entry_len(line_len(x))).sum();
        let len = number_len(l.id)
            + number_len(l.mapping_id)
            + number_len(l.address)
            + lines
            + number_len(l.is_folded.into());
        let buf = &mut self.buf;
        buf.push(4 << 3 | 2);
        encode_varint(len as u64, buf);
        put_number(buf, 1, l.id);
        put_number(buf, 2, l.mapping_id);
        put_number(buf, 3, l.address);
        for x in &l.line {
            buf.push(4 << 3 | 2);
            encode_varint(line_len(x) as u64, buf);
            put_number(buf, 1, x.function_id);
            put_number(buf, 2, x.line as u64);
            put_number(buf, 3, x.column as u64);
        }
        put_number(buf, 5, l.is_folded.into());
        self.spill()
    }

    fn function(&mut self, function: &pb::Function) -> io::Result<()> {
        self.entry(5, function)
    }

    fn strings(&mut self, strings: Strings<'_>) -> io::Result<()> {
        for s in strings.iter() {
            // Field 6, length-delimited; prost writes every entry of a repeated string, the
            // empty one too.
            self.buf.push(6 << 3 | 2);
            prost::encode_length_delimiter(s.len(), &mut self.buf).map_err(io::Error::other)?;
            self.buf.extend_from_slice(s.as_bytes());
            self.spill()?;
        }
        Ok(())
    }

    fn tail(&mut self, tail: pb::Profile) -> io::Result<()> {
        self.fields(&tail)
    }
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
        let mut whole = Whole::default();
        match self.pprof_parts(&mut whole) {
            Ok(()) => whole.0,
            // Nothing in it fails: its parts are only kept.
            Err(_) => pb::Profile::default(),
        }
    }

    /// The message's parts, into `out`. Strings are numbered in the order the old single message
    /// met them (its mappings' build ids before the samples' labels, the comments last), so the
    /// string table is the same whichever way the message is made.
    fn pprof_parts(&self, out: &mut impl Parts) -> io::Result<()> {
        let dict = Dictionary::of(self);
        let mut s = dict.strings;
        let (period_type, period_unit) = period_type(&self.info);
        let mut value_type = |t, u| pb::ValueType {
            r#type: s.id(t).into(),
            unit: s.id(u).into(),
        };
        let sample_type = vec![
            value_type("samples", "count"),
            value_type(period_type, period_unit),
        ];
        let period_vt = value_type(period_type, period_unit);
        out.head(pb::Profile {
            sample_type,
            ..Default::default()
        })?;
        let build_ids: Vec<i64> = dict
            .mappings
            .iter()
            .map(|m| m.build_id.clone().map_or(0, |b| s.owned(b).into()))
            .collect();

        // Each thread's labels, made the first time one of its samples is.
        let mut labelled: Vec<Option<Labels>> = Vec::new();
        labelled.resize_with(self.stacks.identities().len(), || None);
        let unknown = Labels::default();
        let mut sample = pb::Sample::default();
        for (stack, who, counts) in self.stacks.sampled_by_identity() {
            sample.location_id.clear();
            sample
                .location_id
                .extend(self.stacks.frames_of(stack).map(|f| u64::from(f.0) + 1));
            sample.value.clear();
            sample
                .value
                .extend([counts.samples as i64, counts.period as i64]);
            let slot =
                who.and_then(|w| Some((self.stacks.identity(w)?, labelled.get_mut(w.0 as usize)?)));
            let labels = match slot {
                Some((_, Some(labels))) => &*labels,
                Some((who, slot)) => &*slot.insert(Labels::of(&mut s, who)?),
                None => &unknown,
            };
            out.sample(&sample, labels)?;
        }

        for ((m, id), build_id) in dict.mappings.iter().zip(1..).zip(build_ids) {
            out.mapping(&pb::Mapping {
                id,
                memory_start: m.start,
                memory_limit: m.limit,
                file_offset: m.file_offset,
                filename: m.filename.into(),
                build_id,
                has_functions: m.has_functions,
                has_filenames: m.has_lines,
                has_line_numbers: m.has_lines,
                has_inline_frames: m.has_lines,
            })?;
        }
        let mut location = pb::Location::default();
        for (l, id) in dict.locations.iter().zip(1..) {
            location.id = id;
            location.mapping_id = l.mapping.into();
            location.address = l.address;
            location.line.clear();
            location
                .line
                .extend(
                    dict.lines[l.lines.clone()]
                        .iter()
                        .map(|&(function, line)| pb::Line {
                            function_id: function.into(),
                            line,
                            column: 0,
                        }),
                );
            out.location(&location)?;
        }
        for (f, id) in dict.functions.into_values().into_iter().zip(1..) {
            out.function(&pb::Function {
                id,
                name: f.name.into(),
                system_name: f.name.into(),
                filename: f.file.into(),
                start_line: 0,
            })?;
        }

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
        let mut comment: Vec<i64> = comments.into_iter().map(|c| s.owned(c).into()).collect();
        comment.extend(self.info.notes.iter().map(|n| i64::from(s.id(n))));
        out.strings(s)?;

        out.tail(pb::Profile {
            time_nanos: start_unix_nanos(&self.info) as i64,
            duration_nanos: self.info.duration.as_nanos() as i64,
            period_type: Some(period_vt),
            period: period(&self.info),
            comment,
            ..Default::default()
        })
    }

    /// Writes the profile as gzip-compressed pprof (what `go tool pprof` and the fleet backends read).
    ///
    /// # Errors
    ///
    /// [`Error::Write`] when `w` fails.
    pub fn write_pprof(&self, w: impl Write) -> Result<()> {
        // The fastest level, as Go's runtime/pprof writes its profiles. On a system-wide
        // capture's profile (export::bench: 793 KB of protobuf) zlib-rs takes 2.5 ms at level 1
        // for 285 KB, 3.9 ms at level 2 for 16% less, 8.4 ms at level 6 for 23% less: each level
        // above costs more than making the whole message does (3.3 ms).
        let gz = flate2::write::GzEncoder::new(w, flate2::Compression::fast());
        let mut encoder = Encoder::new(gz);
        self.pprof_parts(&mut encoder).map_err(Error::Write)?;
        encoder
            .finish()
            .and_then(|gz| gz.finish())
            .and_then(|mut w| w.flush())
            .map_err(Error::Write)
    }
}

/// The message encoded as [`Profile::write_pprof`] encodes it, not compressed.
#[cfg(test)]
pub(crate) fn encode_for_bench(profile: &Profile) -> Vec<u8> {
    let mut encoder = Encoder::new(Vec::new());
    profile.pprof_parts(&mut encoder).unwrap();
    encoder.finish().unwrap()
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
