//! [`PerfData`]: a perf.data file read from its bytes.

use super::attrs::{parse_attrs, EventAttr};
use super::data::{DataRecords, EventMap};
use super::features::{decode_event_desc, Feature, Features};
use super::header::{FileHeader, FileSection};
use crate::Error;

/// A perf.data file: its header, events (with ids and names), feature sections, and a walk over its records.
///
/// It borrows the file's bytes (read them with [`std::fs::read`]); records borrow them too, so walking
/// allocates nothing. Files from a machine of the other byte order and pipe-mode streams are refused.
///
/// ```no_run
/// use perf_core::perf_data::PerfData;
/// use perf_core::Record;
///
/// let bytes = std::fs::read("perf.data")?;
/// let file = PerfData::parse(&bytes)?;
/// println!("host {:?}, events {:?}", file.features().hostname, file.events());
/// let mut samples = 0;
/// for rec in file.records() {
///     if let Record::Sample(_) = rec?.parse()? {
///         samples += 1;
///     }
/// }
/// println!("{samples} samples");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct PerfData<'f> {
    bytes: &'f [u8],
    header: FileHeader,
    events: Vec<EventAttr>,
    map: EventMap,
    features: Features,
}

impl<'f> PerfData<'f> {
    /// Reads the header, events and feature sections of the file in `bytes`. Records are read lazily by
    /// [`records`](Self::records).
    ///
    /// # Errors
    /// [`ErrorKind::PerfDataFormat`](crate::ErrorKind::PerfDataFormat) when the bytes are not a perf.data file in this machine's byte order, a
    /// section lies outside the file, an attr has non-zero fields newer than this crate, or a known feature
    /// section is malformed.
    pub fn parse(bytes: &'f [u8]) -> Result<Self, Error> {
        let header = FileHeader::parse(bytes)?;
        let mut events = parse_attrs(bytes, header.attrs, header.attr_size)?;
        header.data.slice(bytes, "data")?;

        // The feature section table starts right after the data section.
        let mut features = Features::default();
        let list: Vec<Feature> = header.feature_list().collect();
        let table = FileSection {
            offset: header.data.offset + header.data.size,
            size: 16 * list.len() as u64,
        };
        let table_bytes = table.slice(bytes, "feature table")?;
        for (f, entry) in list.iter().zip(table_bytes.chunks_exact(16)) {
            let mut w = [0u8; 8];
            w.copy_from_slice(&entry[..8]);
            let offset = u64::from_ne_bytes(w);
            w.copy_from_slice(&entry[8..]);
            let section = FileSection {
                offset,
                size: u64::from_ne_bytes(w),
            };
            let body = section.slice(bytes, f.name())?;
            if *f == Feature::EVENT_DESC {
                // Entries follow the attrs' order; match by id, by position for events without ids.
                for (i, desc) in decode_event_desc(body, section.offset)?
                    .into_iter()
                    .enumerate()
                {
                    let by_id = desc
                        .ids
                        .first()
                        .and_then(|id| events.iter().position(|e| e.ids.contains(id)));
                    if let Some(e) = by_id.or(desc.ids.is_empty().then_some(i)) {
                        if let Some(e) = events.get_mut(e) {
                            e.name = Some(desc.name);
                        }
                    }
                }
            } else {
                features.decode(*f, body, section.offset)?;
            }
        }
        Ok(PerfData {
            bytes,
            header,
            map: EventMap::new(&events),
            events,
            features,
        })
    }

    /// The file header.
    pub fn header(&self) -> &FileHeader {
        &self.header
    }

    /// The events, in file order, with their ids and (from `EVENT_DESC`) names.
    pub fn events(&self) -> &[EventAttr] {
        &self.events
    }

    /// The index of the event that `id` belongs to.
    pub fn event_of_id(&self, id: u64) -> Option<usize> {
        self.map.event_of_id(id)
    }

    /// The feature sections.
    pub fn features(&self) -> &Features {
        &self.features
    }

    /// The data section's bytes.
    pub fn data(&self) -> &'f [u8] {
        let d = self.header.data;
        d.slice(self.bytes, "data").unwrap_or_default()
    }

    /// The records of the data section, in file order, each with its event and layout.
    pub fn records(&self) -> DataRecords<'_> {
        DataRecords::new(self.data(), self.header.data.offset, &self.map)
    }
}
