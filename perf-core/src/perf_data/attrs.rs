//! The attrs section: one `struct perf_file_attr` per event (its `perf_event_attr` as the file declares it,
//! then the [`FileSection`] of its ids), and the ids arrays those sections point at.
//!
//! # Safety
//!
//! `perf_event_attr` is converted to and from bytes with a raw copy. That is sound because the struct is
//! `#[repr(C)]` plain data made only of integers and unions of integers, with no implicit padding (the uapi
//! header pads explicitly with `__reserved_*` fields, and perf-sys's generated layout tests check every
//! field's offset and the total size): every byte is initialized, and every bit pattern is a valid value.

use std::fmt;
use std::mem::size_of;

use perf_sys::*;

use super::header::FileSection;
use super::wire::Reader;
use crate::ErrorKind;
use crate::{Error, ParseConfig};

/// The attr sizes the kernel has defined (`PERF_ATTR_SIZE_VER0..`), smallest first.
const ATTR_SIZES: [u32; 10] = [
    PERF_ATTR_SIZE_VER0,
    PERF_ATTR_SIZE_VER1,
    PERF_ATTR_SIZE_VER2,
    PERF_ATTR_SIZE_VER3,
    PERF_ATTR_SIZE_VER4,
    PERF_ATTR_SIZE_VER5,
    PERF_ATTR_SIZE_VER6,
    PERF_ATTR_SIZE_VER7,
    PERF_ATTR_SIZE_VER8,
    PERF_ATTR_SIZE_VER9,
];

/// Size of `struct perf_event_attr` as this crate knows it.
pub(crate) const ATTR_MAX: usize = size_of::<perf_event_attr>();

/// One event of a perf.data file: its attr, the ids of its kernel events (one per fd: per CPU and per
/// inherited thread), and the name perf shows for it.
///
/// The ids are what `PERF_SAMPLE_ID` / `PERF_SAMPLE_IDENTIFIER` carry in records; with more than one event
/// in a file they are how a reader tells whose record is whose (`PERF_EVENT_IOC_ID` gives them).
#[doc(alias = "perf_file_attr")]
#[derive(Clone)]
pub struct EventAttr {
    /// The attr the event was opened with. Its `size` is ignored when writing: the writer stores the
    /// smallest `PERF_ATTR_SIZE_VER*` that holds every non-zero field, so older perf tools read it.
    pub attr: perf_event_attr,
    /// The kernel ids of the event's fds.
    pub ids: Vec<u64>,
    /// The event's name (e.g. `"cpu-clock"`), written to the `EVENT_DESC` feature. Without names, perf
    /// derives one from the attr.
    pub name: Option<String>,
}

impl EventAttr {
    /// An event with `attr`, no ids and no name.
    pub fn new(attr: perf_event_attr) -> Self {
        EventAttr {
            attr,
            ids: Vec::new(),
            name: None,
        }
    }

    /// The same event with these ids.
    pub fn with_ids(mut self, ids: impl IntoIterator<Item = u64>) -> Self {
        self.ids = ids.into_iter().collect();
        self
    }

    /// The same event with this name.
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The layout of this event's records.
    pub fn parse_config(&self) -> ParseConfig {
        ParseConfig::from_attr(&self.attr)
    }

    /// The size this attr takes in a file: the smallest `PERF_ATTR_SIZE_VER*` holding every non-zero byte.
    pub fn file_attr_size(&self) -> u32 {
        let mut bytes = attr_to_bytes(&self.attr);
        // The size field itself does not count.
        if let Some(size) = bytes.get_mut(4..8) {
            size.fill(0);
        }
        let used = bytes.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
        ATTR_SIZES
            .iter()
            .copied()
            .find(|&s| s as usize >= used && s as usize <= ATTR_MAX)
            .unwrap_or(ATTR_MAX as u32)
    }
}

impl PartialEq for EventAttr {
    fn eq(&self, other: &Self) -> bool {
        attr_to_bytes(&self.attr) == attr_to_bytes(&other.attr)
            && self.ids == other.ids
            && self.name == other.name
    }
}

impl Eq for EventAttr {}

impl fmt::Debug for EventAttr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let a = &self.attr;
        f.debug_struct("EventAttr")
            .field("type", &a.type_)
            .field("config", &format_args!("{:#x}", a.config))
            .field("size", &a.size)
            .field("sample_type", &format_args!("{:#x}", a.sample_type))
            .field("read_format", &format_args!("{:#x}", a.read_format))
            .field("sample_id_all", &a.sample_id_all())
            .field("ids", &self.ids)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// The bytes of `attr`.
pub(crate) fn attr_to_bytes(attr: &perf_event_attr) -> [u8; ATTR_MAX] {
    let mut out = [0u8; ATTR_MAX];
    // SAFETY: `attr` is valid for reads of ATTR_MAX bytes, all of them initialized (no implicit padding,
    // see the module's Safety paragraph); `out` is a distinct local array of that length.
    unsafe {
        std::ptr::copy_nonoverlapping(
            (attr as *const perf_event_attr).cast::<u8>(),
            out.as_mut_ptr(),
            ATTR_MAX,
        );
    }
    out
}

/// An attr from up to [`ATTR_MAX`] bytes; fields past the end of `bytes` are zero.
pub(crate) fn attr_from_bytes(bytes: &[u8]) -> perf_event_attr {
    let mut attr = perf_event_attr::default();
    let n = bytes.len().min(ATTR_MAX);
    // SAFETY: `attr` is a local of ATTR_MAX >= n bytes and `bytes` holds at least n; they do not overlap;
    // any bit pattern is a valid perf_event_attr (integers and unions of integers, see the module's Safety).
    unsafe {
        std::ptr::copy_nonoverlapping(
            bytes.as_ptr(),
            (&mut attr as *mut perf_event_attr).cast::<u8>(),
            n,
        );
    }
    attr
}

/// Reads an attr of `size` bytes (0 means `PERF_ATTR_SIZE_VER0`), refusing non-zero fields this crate does
/// not know.
pub(crate) fn read_attr(r: &mut Reader<'_>, size: usize) -> Result<perf_event_attr, Error> {
    let at = r.offset();
    let bytes = r.take(size, "perf_event_attr")?;
    if let Some(tail) = bytes.get(ATTR_MAX..) {
        if tail.iter().any(|&b| b != 0) {
            return Err(ErrorKind::PerfDataFormat {
                reason: format!(
                    "an attr of {size} bytes has non-zero fields past the {ATTR_MAX} bytes this reader knows"
                ),
                offset: at,
            }.into());
        }
    }
    Ok(attr_from_bytes(bytes))
}

/// The events of the attrs section, with their ids.
pub(crate) fn parse_attrs(
    file: &[u8],
    section: FileSection,
    entry_size: u64,
) -> Result<Vec<EventAttr>, Error> {
    let bytes = section.slice(file, "attrs")?;
    if section.size == 0 {
        return Ok(Vec::new());
    }
    if entry_size <= 16 || !section.size.is_multiple_of(entry_size) {
        return Err(ErrorKind::PerfDataFormat {
            reason: format!(
                "the attrs section's {} bytes are not a whole number of {entry_size}-byte entries",
                section.size
            ),
            offset: section.offset,
        }
        .into());
    }
    let entry = entry_size as usize;
    let mut out = Vec::new();
    for (i, chunk) in bytes.chunks(entry).enumerate() {
        let base = section.offset + (i * entry) as u64;
        let mut r = Reader::new(chunk, base);
        // perf reads `attr.size` bytes of attr (the size field is at byte 4), then the ids section.
        let declared = {
            let mut peek = r;
            peek.u32("perf_event_attr.type")?;
            peek.u32("perf_event_attr.size")? as usize
        };
        let size = if declared == 0 {
            PERF_ATTR_SIZE_VER0 as usize
        } else {
            declared
        };
        if size + 16 > entry {
            return Err(r.error(format!(
                "attr {i} says it is {size} bytes, more than its {entry}-byte entry holds with its ids section"
            )));
        }
        let attr = read_attr(&mut r, size)?;
        let ids_section = FileSection {
            offset: r.u64("perf_file_attr.ids.offset")?,
            size: r.u64("perf_file_attr.ids.size")?,
        };
        let ids_bytes = ids_section.slice(file, "ids")?;
        if !ids_section.size.is_multiple_of(8) {
            return Err(ErrorKind::PerfDataFormat {
                reason: format!(
                    "attr {i}'s ids section is {} bytes, not a multiple of 8",
                    ids_section.size
                ),
                offset: ids_section.offset,
            }
            .into());
        }
        let ids = ids_bytes
            .chunks_exact(8)
            .map(|c| {
                let mut w = [0u8; 8];
                w.copy_from_slice(c);
                u64::from_ne_bytes(w)
            })
            .collect();
        out.push(EventAttr {
            attr,
            ids,
            name: None,
        });
    }
    Ok(out)
}
