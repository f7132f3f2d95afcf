//! The file header (`struct perf_file_header`): magic, section table and feature bitmap.

use super::features::Feature;
use super::wire::Reader;
use crate::Error;
use crate::ErrorKind;

/// The magic number at the start of a perf.data file, `"PERFILE2"` read as a native-endian `u64`
/// (perf's `__perf_magic2`). A file from a machine of the other byte order reads as the byte-swapped value.
#[doc(alias = "__perf_magic2")]
pub const PERF_MAGIC: u64 = u64::from_le_bytes(*b"PERFILE2");

/// Size of `struct perf_file_header` in bytes.
pub const FILE_HEADER_SIZE: usize = 104;

/// Where a section lies in the file (`struct perf_file_section`).
#[doc(alias = "perf_file_section")]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FileSection {
    /// Offset from the start of the file.
    pub offset: u64,
    /// Length in bytes.
    pub size: u64,
}

impl FileSection {
    /// The section's bytes in `file`, or a format error naming `what` when it lies outside the file.
    pub(crate) fn slice<'a>(&self, file: &'a [u8], what: &str) -> Result<&'a [u8], Error> {
        let range = usize::try_from(self.offset).ok().and_then(|start| {
            let end = start.checked_add(usize::try_from(self.size).ok()?)?;
            file.get(start..end)
        });
        range.ok_or_else(|| {
            ErrorKind::PerfDataFormat {
                reason: format!(
                    "the {what} section ({} bytes) runs past the end of the {}-byte file",
                    self.size,
                    file.len()
                ),
                offset: self.offset,
            }
            .into()
        })
    }

    fn read(r: &mut Reader<'_>, what: &str) -> Result<Self, Error> {
        Ok(FileSection {
            offset: r.u64(what)?,
            size: r.u64(what)?,
        })
    }

    pub(crate) fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.offset.to_ne_bytes());
        out.extend_from_slice(&self.size.to_ne_bytes());
    }
}

/// The header at the start of a perf.data file (`struct perf_file_header`), 104 bytes.
///
/// The feature sections are not in this table: their own table of [`FileSection`]s starts right after the
/// data section, one entry per bit set in [`features`](Self::features), in bit order.
#[doc(alias = "perf_file_header")]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FileHeader {
    /// Size of one entry of the attrs section: the attr's size plus 16 for its ids section.
    pub attr_size: u64,
    /// The attrs section: `perf_event_attr` + ids [`FileSection`] per event.
    pub attrs: FileSection,
    /// The data section: the records.
    pub data: FileSection,
    /// The obsolete event_types section (perf ignores it; written empty).
    pub event_types: FileSection,
    /// Bitmap of the feature sections present (`adds_features`), bit *n* is [`Feature`] *n*.
    pub features: [u64; 4],
}

impl FileHeader {
    /// Whether the file has the feature section `f`.
    pub fn has_feature(&self, f: Feature) -> bool {
        let bit = f.0 as usize;
        self.features
            .get(bit / 64)
            .is_some_and(|w| w & (1u64 << (bit % 64)) != 0)
    }

    /// Marks the feature section `f` present (bits past 255 are ignored: the format has 256).
    pub fn set_feature(&mut self, f: Feature) {
        let bit = f.0 as usize;
        if let Some(w) = self.features.get_mut(bit / 64) {
            *w |= 1u64 << (bit % 64);
        }
    }

    /// The features present, in bit order: the order of their entries in the feature section table.
    pub fn feature_list(&self) -> impl Iterator<Item = Feature> + '_ {
        (0..256u32).map(Feature).filter(|&f| self.has_feature(f))
    }

    /// The header of the perf.data file in `bytes`.
    ///
    /// # Errors
    /// [`ErrorKind::PerfDataFormat`] when the magic is not `PERFILE2` in this machine's byte order, the file is
    /// a pipe-mode stream (`perf record -o -`), or the header is shorter than 104 bytes.
    pub fn parse(bytes: &[u8]) -> Result<Self, Error> {
        let mut r = Reader::new(bytes, 0);
        let magic = r.u64("file header magic")?;
        if magic == PERF_MAGIC.swap_bytes() {
            return Err(r.error(
                "the file was written on a machine of the other byte order, which this reader does not convert",
            ));
        }
        if magic != PERF_MAGIC {
            let found = String::from_utf8_lossy(&magic.to_le_bytes()).into_owned();
            return Err(ErrorKind::PerfDataFormat {
                reason: format!(
                    "magic is {found:?}, not \"PERFILE2\" (an old PERFFILE or another format)"
                ),
                offset: 0,
            }
            .into());
        }
        let size = r.u64("file header size")?;
        if size == 16 {
            return Err(r.error(
                "this is a pipe-mode stream (perf record -o -); convert it with `perf inject -i IN -o OUT`",
            ));
        }
        if size != FILE_HEADER_SIZE as u64 {
            return Err(r.error(format!(
                "header size is {size}, this reader knows the {FILE_HEADER_SIZE}-byte header"
            )));
        }
        let attr_size = r.u64("file header attr_size")?;
        let attrs = FileSection::read(&mut r, "file header attrs")?;
        let data = FileSection::read(&mut r, "file header data")?;
        let event_types = FileSection::read(&mut r, "file header event_types")?;
        let mut features = [0u64; 4];
        for w in &mut features {
            *w = r.u64("file header feature bitmap")?;
        }
        Ok(FileHeader {
            attr_size,
            attrs,
            data,
            event_types,
            features,
        })
    }

    /// The header's 104 bytes, in this machine's byte order.
    pub fn to_bytes(&self) -> [u8; FILE_HEADER_SIZE] {
        let mut v = Vec::with_capacity(FILE_HEADER_SIZE);
        v.extend_from_slice(&PERF_MAGIC.to_ne_bytes());
        v.extend_from_slice(&(FILE_HEADER_SIZE as u64).to_ne_bytes());
        v.extend_from_slice(&self.attr_size.to_ne_bytes());
        self.attrs.put(&mut v);
        self.data.put(&mut v);
        self.event_types.put(&mut v);
        for w in self.features {
            v.extend_from_slice(&w.to_ne_bytes());
        }
        let mut out = [0u8; FILE_HEADER_SIZE];
        out.copy_from_slice(&v);
        out
    }
}
