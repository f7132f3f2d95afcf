//! The data section: the kernel's records, plus the records only the perf tool writes (types 64 and up).

use std::collections::HashMap;

use super::attrs::EventAttr;
use super::wire::Reader;
use crate::record::record_type_name as kernel_record_type_name;
use crate::{Chunk, Error, ParseConfig, RawRecord, Record};

/// An attr, in pipe-mode streams (`PERF_RECORD_HEADER_ATTR`).
pub const PERF_RECORD_HEADER_ATTR: u32 = 64;
/// Obsolete event type names (`PERF_RECORD_HEADER_EVENT_TYPE`).
pub const PERF_RECORD_HEADER_EVENT_TYPE: u32 = 65;
/// Tracepoint formats, in pipe-mode streams (`PERF_RECORD_HEADER_TRACING_DATA`).
pub const PERF_RECORD_HEADER_TRACING_DATA: u32 = 66;
/// A build id (`PERF_RECORD_HEADER_BUILD_ID`); also the entry format of the `BUILD_ID` feature.
pub const PERF_RECORD_HEADER_BUILD_ID: u32 = 67;
/// End of a round: every record before the previous round's end may be sorted and processed
/// (`PERF_RECORD_FINISHED_ROUND`). A bare 8-byte header.
pub const PERF_RECORD_FINISHED_ROUND: u32 = 68;
/// Event id to CPU/thread index (`PERF_RECORD_ID_INDEX`).
pub const PERF_RECORD_ID_INDEX: u32 = 69;
/// AUX area tracing setup (`PERF_RECORD_AUXTRACE_INFO`).
pub const PERF_RECORD_AUXTRACE_INFO: u32 = 70;
/// AUX area data; its payload follows the record and is not counted in the header's size
/// (`PERF_RECORD_AUXTRACE`).
pub const PERF_RECORD_AUXTRACE: u32 = 71;
/// AUX area decoding error (`PERF_RECORD_AUXTRACE_ERROR`).
pub const PERF_RECORD_AUXTRACE_ERROR: u32 = 72;
/// Threads monitored (`PERF_RECORD_THREAD_MAP`).
pub const PERF_RECORD_THREAD_MAP: u32 = 73;
/// CPUs monitored (`PERF_RECORD_CPU_MAP`).
pub const PERF_RECORD_CPU_MAP: u32 = 74;
/// `perf stat` configuration (`PERF_RECORD_STAT_CONFIG`).
pub const PERF_RECORD_STAT_CONFIG: u32 = 75;
/// A `perf stat` counter value (`PERF_RECORD_STAT`).
pub const PERF_RECORD_STAT: u32 = 76;
/// End of a `perf stat` interval (`PERF_RECORD_STAT_ROUND`).
pub const PERF_RECORD_STAT_ROUND: u32 = 77;
/// Event name, unit, scale or CPUs (`PERF_RECORD_EVENT_UPDATE`).
pub const PERF_RECORD_EVENT_UPDATE: u32 = 78;
/// Conversion of perf time to TSC (`PERF_RECORD_TIME_CONV`).
pub const PERF_RECORD_TIME_CONV: u32 = 79;
/// A feature section, in pipe-mode streams (`PERF_RECORD_HEADER_FEATURE`).
pub const PERF_RECORD_HEADER_FEATURE: u32 = 80;
/// zstd-compressed records (`PERF_RECORD_COMPRESSED`).
pub const PERF_RECORD_COMPRESSED: u32 = 81;
/// End of the records synthesized before recording (`PERF_RECORD_FINISHED_INIT`).
pub const PERF_RECORD_FINISHED_INIT: u32 = 82;

/// The first record type only the perf tool writes (`PERF_RECORD_USER_TYPE_START`).
pub const PERF_RECORD_USER_TYPE_START: u32 = 64;

/// The name of a record type as perf prints it: the kernel's (`"SAMPLE"`) or the tool's (`"FINISHED_ROUND"`),
/// `"UNKNOWN"` otherwise.
pub const fn record_name(ty: u32) -> &'static str {
    match ty {
        PERF_RECORD_HEADER_ATTR => "ATTR",
        PERF_RECORD_HEADER_EVENT_TYPE => "EVENT_TYPE",
        PERF_RECORD_HEADER_TRACING_DATA => "TRACING_DATA",
        PERF_RECORD_HEADER_BUILD_ID => "BUILD_ID",
        PERF_RECORD_FINISHED_ROUND => "FINISHED_ROUND",
        PERF_RECORD_ID_INDEX => "ID_INDEX",
        PERF_RECORD_AUXTRACE_INFO => "AUXTRACE_INFO",
        PERF_RECORD_AUXTRACE => "AUXTRACE",
        PERF_RECORD_AUXTRACE_ERROR => "AUXTRACE_ERROR",
        PERF_RECORD_THREAD_MAP => "THREAD_MAP",
        PERF_RECORD_CPU_MAP => "CPU_MAP",
        PERF_RECORD_STAT_CONFIG => "STAT_CONFIG",
        PERF_RECORD_STAT => "STAT",
        PERF_RECORD_STAT_ROUND => "STAT_ROUND",
        PERF_RECORD_EVENT_UPDATE => "EVENT_UPDATE",
        PERF_RECORD_TIME_CONV => "TIME_CONV",
        PERF_RECORD_HEADER_FEATURE => "FEATURE",
        PERF_RECORD_COMPRESSED => "COMPRESSED",
        PERF_RECORD_FINISHED_INIT => "FINISHED_INIT",
        _ => kernel_record_type_name(ty),
    }
}

/// Which event a record belongs to: the only one, or the one whose id the record carries.
#[derive(Clone, Debug, Default)]
pub(crate) struct EventMap {
    configs: Vec<ParseConfig>,
    by_id: HashMap<u64, usize>,
}

impl EventMap {
    pub(crate) fn new(events: &[EventAttr]) -> Self {
        let mut by_id = HashMap::new();
        for (i, e) in events.iter().enumerate() {
            for &id in &e.ids {
                by_id.entry(id).or_insert(i);
            }
        }
        EventMap {
            configs: events.iter().map(EventAttr::parse_config).collect(),
            by_id,
        }
    }

    pub(crate) fn config(&self, event: usize) -> Option<ParseConfig> {
        self.configs.get(event).copied()
    }

    pub(crate) fn event_of_id(&self, id: u64) -> Option<usize> {
        self.by_id.get(&id).copied()
    }

    /// The event of a kernel record. perf requires every event of a file to put the id at the same place,
    /// so the first event's layout finds it.
    pub(crate) fn event_of(&self, raw: &RawRecord<'_>) -> Option<usize> {
        if raw.record_type() >= PERF_RECORD_USER_TYPE_START {
            return None;
        }
        match self.configs.as_slice() {
            [] => None,
            [_] => Some(0),
            [first, ..] => self.event_of_id(raw.id(first)?),
        }
    }
}

/// One record of a perf.data data section.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataRecord<'a> {
    /// File offset of the record's header.
    pub offset: u64,
    /// The record's header and body.
    pub raw: RawRecord<'a>,
    /// Index of the event (in [`PerfData::events`](super::PerfData::events)) the record belongs to, when
    /// known: always with one event, by the record's id with several; `None` for the tool's records.
    pub event: Option<usize>,
    /// The layout to parse it with: the event's, or the first event's when the event is unknown (perf requires
    /// all events of a file to agree on the sample_id layout).
    pub config: ParseConfig,
    /// The data that follows a `PERF_RECORD_AUXTRACE` record outside its header's size; empty otherwise.
    pub payload: &'a [u8],
}

impl<'a> DataRecord<'a> {
    /// The record type.
    pub const fn record_type(&self) -> u32 {
        self.raw.record_type()
    }

    /// Whether this is one of the perf tool's records (type 64 and up), which the kernel never writes.
    pub const fn is_tool_record(&self) -> bool {
        self.raw.record_type() >= PERF_RECORD_USER_TYPE_START
    }

    /// The typed record. The tool's records parse to [`Record::Unknown`] with their bytes.
    ///
    /// # Errors
    /// As [`RawRecord::parse`].
    pub fn parse(&self) -> Result<Record<'a>, Error> {
        self.raw.parse(&self.config)
    }
}

/// The records of a data section, in file order. Yields each record or, once, the error that ends the walk.
#[derive(Clone, Debug)]
pub struct DataRecords<'f> {
    r: Reader<'f>,
    events: &'f EventMap,
    failed: bool,
}

impl<'f> DataRecords<'f> {
    pub(crate) fn new(data: &'f [u8], offset: u64, events: &'f EventMap) -> Self {
        DataRecords {
            r: Reader::new(data, offset),
            events,
            failed: false,
        }
    }

    fn next_record(&mut self) -> Result<DataRecord<'f>, Error> {
        let offset = self.r.offset();
        let mut peek = self.r;
        peek.u32("record header")?;
        peek.u16("record header")?;
        let size = peek.u16("record header")? as usize;
        if size < 8 {
            return Err(self.r.error(format!(
                "record header says {size} bytes, less than the 8-byte header"
            )));
        }
        let bytes = self.r.take(size, "record")?;
        let (raw, _) = RawRecord::from_chunk(Chunk::contiguous(bytes))?;
        let mut payload: &[u8] = &[];
        if raw.record_type() == PERF_RECORD_AUXTRACE {
            let len = raw.data().read_u64(0).ok_or_else(|| {
                self.r
                    .error("AUXTRACE record too short to hold its payload size")
            })?;
            let len =
                usize::try_from(len).map_err(|_| self.r.error("AUXTRACE payload too large"))?;
            payload = self.r.take(len, "AUXTRACE payload")?;
        }
        let event = self.events.event_of(&raw);
        let config = event
            .or(Some(0))
            .and_then(|e| self.events.config(e))
            .unwrap_or_default();
        Ok(DataRecord {
            offset,
            raw,
            event,
            config,
            payload,
        })
    }
}

impl<'f> Iterator for DataRecords<'f> {
    type Item = Result<DataRecord<'f>, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.r.is_empty() {
            return None;
        }
        let r = self.next_record();
        self.failed = r.is_err();
        Some(r)
    }
}

impl std::iter::FusedIterator for DataRecords<'_> {}
