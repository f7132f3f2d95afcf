//! [`PerfDataWriter`]: a perf.data file written as records arrive, its header fixed up at the end.

use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::Path;

use perf_sys::*;

use super::attrs::{attr_to_bytes, EventAttr};
use super::data::{EventMap, PERF_RECORD_FINISHED_ROUND};
use super::features::{Features, SampleTime};
use super::header::{FileHeader, FileSection, FILE_HEADER_SIZE};
use crate::ErrorKind;
use crate::{Chunk, Error, RawRecord, Record};

/// Writes a perf.data file that `perf report` and `perf script` open: header, events with their ids, the
/// records, and feature sections.
///
/// The layout is perf's: header, ids arrays, attrs, then the data section, which grows as records are
/// written (nothing is held in memory), then at [`finish`](Self::finish) the feature section table and
/// the features, and a seek back to fill in the header. A file that was never finished has a data size of
/// 0, which perf reports as an interrupted recording.
///
/// Records are written as they are: perf sorts them by time within rounds, so call
/// [`finish_round`](Self::finish_round) after each pass over the rings (as `perf record` does) to let it
/// process a long file in bounded memory; without rounds it sorts the whole file at the end.
///
/// ```no_run
/// use perf_core::perf_data::{EventAttr, Features, PerfDataWriter};
/// use perf_core::record::{Comm, Record, SampleId};
/// use perf_sys::*;
///
/// let mut attr = perf_event_attr::default();
/// attr.type_ = PERF_TYPE_SOFTWARE;
/// attr.config = PERF_COUNT_SW_CPU_CLOCK as u64;
/// attr.sample_type = (PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_PERIOD) as u64;
/// attr.set_sample_id_all(1);
/// let event = EventAttr::new(attr).with_ids([1]).with_name("cpu-clock");
///
/// let mut w = PerfDataWriter::create("perf.data", vec![event])?;
/// let comm = Record::Comm(Comm {
///     pid: 42,
///     tid: 42,
///     comm: b"busy".as_slice().into(),
///     sample_id: SampleId { thread: Some(Default::default()), time: Some(1), ..Default::default() },
///     ..Default::default()
/// });
/// w.write_record(0, &comm)?;
/// w.finish_round()?;
/// w.finish(&Features::from_host())?;
/// # Ok::<(), perf_core::Error>(())
/// ```
pub struct PerfDataWriter<W: Write + Seek> {
    out: W,
    events: Vec<EventAttr>,
    map: EventMap,
    attr_size: u32,
    header: FileHeader,
    /// Bytes of records written so far.
    data_len: u64,
    scratch: Vec<u8>,
    samples: u64,
    records: u64,
    sample_time: Option<SampleTime>,
}

impl<W: Write + Seek> std::fmt::Debug for PerfDataWriter<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PerfDataWriter")
            .field("events", &self.events)
            .field("data_len", &self.data_len)
            .field("records", &self.records)
            .field("samples", &self.samples)
            .finish_non_exhaustive()
    }
}

fn io(what: &'static str) -> impl FnOnce(std::io::Error) -> Error {
    move |source| ErrorKind::PerfDataIo { what, source }.into()
}

impl PerfDataWriter<BufWriter<File>> {
    /// Creates (or truncates) the file at `path` and starts writing it.
    ///
    /// # Errors
    /// [`ErrorKind::PerfDataIo`] when the file cannot be created or written; as [`new`](Self::new) otherwise.
    pub fn create(path: impl AsRef<Path>, events: Vec<EventAttr>) -> Result<Self, Error> {
        let file = File::create(path).map_err(io("creating the file"))?;
        PerfDataWriter::new(BufWriter::with_capacity(1 << 16, file), events)
    }
}

impl<W: Write + Seek> PerfDataWriter<W> {
    /// Starts a perf.data file at the current start of `out` (position 0): writes a provisional header,
    /// the events' ids and attrs, and positions the data section after them.
    ///
    /// # Errors
    /// [`ErrorKind::PerfDataWrite`] when there are no events, an id belongs to two events, or there are several
    /// events and one lacks `PERF_SAMPLE_ID`/`PERF_SAMPLE_IDENTIFIER` or disagrees with the first on where
    /// records carry the id (perf could not tell their records apart); [`ErrorKind::PerfDataIo`] when writing fails.
    pub fn new(mut out: W, events: Vec<EventAttr>) -> Result<Self, Error> {
        check_events(&events)?;
        let attr_size = events
            .iter()
            .map(EventAttr::file_attr_size)
            .max()
            .unwrap_or(PERF_ATTR_SIZE_VER0);
        let entry = attr_size as u64 + 16;

        let mut head = Vec::new();
        let mut ids_at = Vec::new();
        let mut pos = FILE_HEADER_SIZE as u64;
        for e in &events {
            ids_at.push(FileSection {
                offset: pos,
                size: 8 * e.ids.len() as u64,
            });
            for &id in &e.ids {
                head.extend_from_slice(&id.to_ne_bytes());
            }
            pos += 8 * e.ids.len() as u64;
        }
        let attrs = FileSection {
            offset: pos,
            size: entry * events.len() as u64,
        };
        for (e, ids) in events.iter().zip(&ids_at) {
            let mut attr = e.attr;
            attr.size = attr_size;
            let bytes = attr_to_bytes(&attr);
            head.extend_from_slice(bytes.get(..attr_size as usize).unwrap_or(&bytes));
            ids.put(&mut head);
        }
        let header = FileHeader {
            attr_size: entry,
            attrs,
            data: FileSection {
                offset: attrs.offset + attrs.size,
                size: 0,
            },
            ..FileHeader::default()
        };
        out.seek(SeekFrom::Start(0))
            .map_err(io("seeking to the start"))?;
        out.write_all(&header.to_bytes())
            .map_err(io("writing the header"))?;
        out.write_all(&head)
            .map_err(io("writing the attrs section"))?;
        Ok(PerfDataWriter {
            out,
            map: EventMap::new(&events),
            events,
            attr_size,
            header,
            data_len: 0,
            scratch: Vec::with_capacity(256),
            samples: 0,
            records: 0,
            sample_time: None,
        })
    }

    /// The events, as given.
    pub fn events(&self) -> &[EventAttr] {
        &self.events
    }

    /// Records written so far (FINISHED_ROUND included).
    pub fn records_written(&self) -> u64 {
        self.records
    }

    /// Samples written so far.
    pub fn samples_written(&self) -> u64 {
        self.samples
    }

    /// Size of the data section so far, in bytes.
    pub fn data_size(&self) -> u64 {
        self.data_len
    }

    /// Encodes `record` with the layout of event `event` (an index into the events) and appends it.
    ///
    /// # Errors
    /// [`ErrorKind::PerfDataWrite`] when `event` is out of range; [`ErrorKind::Encode`] when the record does not fit
    /// the event's layout; [`ErrorKind::PerfDataIo`] when writing fails.
    pub fn write_record(&mut self, event: usize, record: &Record<'_>) -> Result<(), Error> {
        let cfg = self
            .map
            .config(event)
            .ok_or_else(|| ErrorKind::PerfDataWrite {
                reason: format!(
                    "event index {event} is out of range: the file has {} events",
                    self.events.len()
                ),
            })?;
        let mut buf = std::mem::take(&mut self.scratch);
        buf.clear();
        let r = record.encode(&cfg, &mut buf).and_then(|_| {
            let (raw, _) = RawRecord::from_chunk(Chunk::contiguous(&buf))?;
            self.note(&raw, Some(event));
            self.append(&buf)
        });
        self.scratch = buf;
        r
    }

    /// Appends a record exactly as the kernel (or a ring) gave it: header and body, no re-encoding.
    ///
    /// # Errors
    /// [`ErrorKind::PerfDataIo`] when writing fails.
    pub fn write_raw(&mut self, record: &RawRecord<'_>) -> Result<(), Error> {
        let data = record.data();
        let size = u16::try_from(record.size()).map_err(|_| ErrorKind::PerfDataWrite {
            reason: format!(
                "a record of {} bytes does not fit a record header",
                record.size()
            ),
        })?;
        let mut head = [0u8; 8];
        head[..4].copy_from_slice(&record.record_type().to_ne_bytes());
        head[4..6].copy_from_slice(&record.misc().0.to_ne_bytes());
        head[6..].copy_from_slice(&size.to_ne_bytes());
        let event = self.map.event_of(record);
        self.note(record, event);
        self.append(&head)?;
        self.append(data.first())?;
        self.append(data.second())
    }

    /// Appends a `PERF_RECORD_FINISHED_ROUND`: everything written before the previous round's end may now
    /// be sorted and processed by perf.
    ///
    /// # Errors
    /// [`ErrorKind::PerfDataIo`] when writing fails.
    pub fn finish_round(&mut self) -> Result<(), Error> {
        let mut head = [0u8; 8];
        head[..4].copy_from_slice(&PERF_RECORD_FINISHED_ROUND.to_ne_bytes());
        head[6..].copy_from_slice(&8u16.to_ne_bytes());
        self.records += 1;
        self.append(&head)
    }

    fn note(&mut self, raw: &RawRecord<'_>, event: Option<usize>) {
        self.records += 1;
        if raw.record_type() != PERF_RECORD_SAMPLE {
            return;
        }
        self.samples += 1;
        let time = event
            .and_then(|e| self.map.config(e))
            .and_then(|cfg| raw.time(&cfg));
        if let Some(t) = time {
            let st = self
                .sample_time
                .get_or_insert(SampleTime { first: t, last: t });
            st.first = st.first.min(t);
            st.last = st.last.max(t);
        }
    }

    fn append(&mut self, bytes: &[u8]) -> Result<(), Error> {
        self.out
            .write_all(bytes)
            .map_err(io("writing the data section"))?;
        self.data_len += bytes.len() as u64;
        Ok(())
    }

    /// Writes the feature sections (`EVENT_DESC` from the events' names and ids; `SAMPLE_TIME` from the
    /// samples written when `features.sample_time` is `None`), fixes up the header, flushes, and returns
    /// the output.
    ///
    /// # Errors
    /// [`ErrorKind::PerfDataIo`] when writing, seeking or flushing fails.
    pub fn finish(mut self, features: &Features) -> Result<W, Error> {
        let mut features = features.clone();
        if features.sample_time.is_none() {
            features.sample_time = self.sample_time;
        }
        let sections = features.encode(&self.events, self.attr_size);
        self.header.data.size = self.data_len;
        let table_at = self.header.data.offset + self.data_len;
        let mut body_at = table_at + 16 * sections.len() as u64;
        let mut table = Vec::new();
        for (f, bytes) in &sections {
            self.header.set_feature(*f);
            FileSection {
                offset: body_at,
                size: bytes.len() as u64,
            }
            .put(&mut table);
            body_at += bytes.len() as u64;
        }
        self.out
            .write_all(&table)
            .map_err(io("writing the feature section table"))?;
        for (_, bytes) in &sections {
            self.out
                .write_all(bytes)
                .map_err(io("writing the feature sections"))?;
        }
        self.out
            .seek(SeekFrom::Start(0))
            .map_err(io("seeking back to the header"))?;
        self.out
            .write_all(&self.header.to_bytes())
            .map_err(io("writing the final header"))?;
        self.out
            .seek(SeekFrom::Start(body_at))
            .map_err(io("seeking to the end"))?;
        self.out.flush().map_err(io("flushing the file"))?;
        Ok(self.out)
    }
}

fn check_events(events: &[EventAttr]) -> Result<(), Error> {
    let bad = |reason: String| Err(ErrorKind::PerfDataWrite { reason }.into());
    let Some(first) = events.first() else {
        return bad("a perf.data file needs at least one event".into());
    };
    let mut seen = std::collections::HashSet::new();
    for e in events {
        for &id in &e.ids {
            if !seen.insert(id) {
                return bad(format!("id {id} is given to two events"));
            }
        }
    }
    if events.len() > 1 {
        let id_bits = (PERF_SAMPLE_ID | PERF_SAMPLE_IDENTIFIER) as u64;
        let first_cfg = first.parse_config();
        for (i, e) in events.iter().enumerate() {
            let cfg = e.parse_config();
            if e.attr.sample_type & id_bits == 0 {
                return bad(format!(
                    "event {i} has neither PERF_SAMPLE_ID nor PERF_SAMPLE_IDENTIFIER, which a file of several events needs"
                ));
            }
            if cfg.sample_id_all() != first_cfg.sample_id_all() {
                return bad(format!(
                    "event {i} disagrees with event 0 on sample_id_all; perf needs them equal"
                ));
            }
            if e.attr.sample_type & PERF_SAMPLE_IDENTIFIER as u64 == 0
                && e.attr.sample_type != first.attr.sample_type
            {
                return bad(format!(
                    "event {i} has another sample_type than event 0 and no PERF_SAMPLE_IDENTIFIER, so its id is elsewhere in records"
                ));
            }
        }
    }
    Ok(())
}
