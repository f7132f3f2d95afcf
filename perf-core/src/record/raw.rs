//! [`RawRecord`]: a record's header and body bytes, and [`Records`], a walk over a buffer of records.

use perf_sys::*;

use super::config::ABSENT;
use super::kinds::{parse_record, Record};
use super::view::{RecordView, SampleView};
use super::{parse_sample_id, Misc, SampleId, ThreadId};
use crate::ErrorKind;
use crate::{Chunk, Error, ParseConfig};

/// One record as the kernel wrote it: type, misc, and the body after the 8-byte header as a [`Chunk`]
/// (two slices when it wraps the end of the ring).
///
/// The cheap accessors ([`time`](Self::time), [`id`](Self::id), ...) read one field at an offset the
/// [`ParseConfig`] computed once: from the sample for SAMPLE records, from the sample_id trailer for the
/// others (only with `sample_id_all`). [`parse`](Self::parse) gives the typed record.
///
/// ```
/// use perf_core::{Chunk, ParseConfig, ParseFields, RawRecord, Record};
/// use perf_sys::*;
///
/// let cfg = ParseConfig::new(ParseFields { sample_type: (PERF_SAMPLE_IP | PERF_SAMPLE_TIME) as u64, ..Default::default() });
/// let mut bytes = Vec::new();
/// bytes.extend_from_slice(&PERF_RECORD_SAMPLE.to_ne_bytes());
/// bytes.extend_from_slice(&(PERF_RECORD_MISC_USER as u16).to_ne_bytes());
/// bytes.extend_from_slice(&24u16.to_ne_bytes());
/// bytes.extend_from_slice(&0x401000u64.to_ne_bytes()); // ip
/// bytes.extend_from_slice(&12345u64.to_ne_bytes()); // time
///
/// let (raw, size) = RawRecord::from_chunk(Chunk::contiguous(&bytes))?;
/// assert_eq!(size, 24);
/// assert_eq!(raw.time(&cfg), Some(12345));
/// let Record::Sample(s) = raw.parse(&cfg)? else { panic!("not a sample") };
/// assert_eq!(s.ip(), Some(0x401000));
/// # Ok::<(), perf_core::Error>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct RawRecord<'a> {
    /// The type in the low 32 bits, misc in the next 16: one word, so that moving a record (through the
    /// walk's `Option<Result<..>>`) is whole-word stores and loads the CPU can forward.
    head: u64,
    data: Chunk<'a>,
}

impl std::fmt::Debug for RawRecord<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawRecord")
            .field("record_type", &self.record_type())
            .field("misc", &self.misc())
            .field("data", &self.data)
            .finish()
    }
}

/// Size of `struct perf_event_header`.
const HEADER: usize = 8;

impl<'a> RawRecord<'a> {
    /// A record from its header fields and body.
    pub const fn new(record_type: u32, misc: u16, data: Chunk<'a>) -> Self {
        RawRecord {
            head: record_type as u64 | (misc as u64) << 32,
            data,
        }
    }

    /// The record that starts at the beginning of `bytes` (header included), and its size in bytes.
    ///
    /// # Errors
    /// [`ErrorKind::RecordOverrun`] when fewer bytes than a header, or than the header's size, are available;
    /// [`ErrorKind::RecordTooShort`] when the header's size is smaller than the header.
    #[inline]
    pub fn from_chunk(bytes: Chunk<'a>) -> Result<(Self, usize), Error> {
        match Self::split(bytes) {
            Some((rec, size)) => Ok((rec, size)),
            None => Err(header_error(bytes)),
        }
    }

    /// [`from_chunk`](Self::from_chunk) without the error's details: the walk's hot path.
    #[inline(always)]
    fn split(bytes: Chunk<'a>) -> Option<(Self, usize)> {
        let (Some(record_type), Some(misc), Some(size)) =
            (bytes.read_u32(0), bytes.read_u16(4), bytes.read_u16(6))
        else {
            return None;
        };
        let size = size as usize;
        let data = bytes.get(HEADER, size.checked_sub(HEADER)?)?;
        Some((RawRecord::new(record_type, misc, data), size))
    }

    /// The `PERF_RECORD_*` type.
    pub const fn record_type(&self) -> u32 {
        self.head as u32
    }

    /// The header's misc bits.
    pub const fn misc(&self) -> Misc {
        Misc((self.head >> 32) as u16)
    }

    /// The body: everything after the header.
    pub const fn data(&self) -> Chunk<'a> {
        self.data
    }

    /// The size of the whole record, header included.
    pub const fn size(&self) -> usize {
        HEADER + self.data.len()
    }

    #[inline]
    fn at(&self, (in_sample, from_end): (u8, u8)) -> Option<usize> {
        if self.record_type() == PERF_RECORD_SAMPLE {
            (in_sample != ABSENT).then_some(in_sample as usize)
        } else if from_end != ABSENT
            && (PERF_RECORD_MMAP..PERF_RECORD_MAX).contains(&self.record_type())
        {
            self.data.len().checked_sub(from_end as usize)
        } else {
            None
        }
    }

    /// The timestamp (`PERF_SAMPLE_TIME`), from the sample or the sample_id trailer.
    #[inline]
    pub fn time(&self, cfg: &ParseConfig) -> Option<u64> {
        self.data.read_u64(self.at(cfg.time_offsets())?)
    }

    /// The event id: `PERF_SAMPLE_IDENTIFIER` if set, else `PERF_SAMPLE_ID`.
    #[inline]
    pub fn id(&self, cfg: &ParseConfig) -> Option<u64> {
        self.data.read_u64(self.at(cfg.id_offsets())?)
    }

    /// The stream id (`PERF_SAMPLE_STREAM_ID`).
    #[inline]
    pub fn stream_id(&self, cfg: &ParseConfig) -> Option<u64> {
        self.data.read_u64(self.at(cfg.stream_id_offsets())?)
    }

    /// The CPU (`PERF_SAMPLE_CPU`).
    #[inline]
    pub fn cpu(&self, cfg: &ParseConfig) -> Option<u32> {
        self.data.read_u32(self.at(cfg.cpu_offsets())?)
    }

    /// Process and thread id (`PERF_SAMPLE_TID`).
    #[inline]
    pub fn thread(&self, cfg: &ParseConfig) -> Option<ThreadId> {
        let at = self.at(cfg.tid_offsets())?;
        Some(ThreadId {
            pid: self.data.read_u32(at)?,
            tid: self.data.read_u32(at.checked_add(4)?)?,
        })
    }

    /// The sample_id trailer of a non-sample record (all `None` without `sample_id_all`).
    ///
    /// # Errors
    /// [`ErrorKind::Truncated`] when the body is shorter than the trailer.
    pub fn sample_id(&self, cfg: &ParseConfig) -> Result<SampleId, Error> {
        parse_sample_id(self.data, cfg, super::record_type_name(self.record_type()))
            .map(|(id, _)| id)
    }

    /// The typed record, borrowing the body. Allocates nothing.
    ///
    /// # Errors
    /// [`ErrorKind::Truncated`] or [`ErrorKind::TrailingBytes`] when the body does not match the layout `cfg`
    /// describes; [`ErrorKind::UnknownLayout`] for a sample or READ whose config has bits this parser does not know.
    /// An unknown record type is not an error: it parses to [`Record::Unknown`].
    #[inline]
    pub fn parse(&self, cfg: &ParseConfig) -> Result<Record<'a>, Error> {
        parse_record(self.record_type(), self.misc(), self.data, cfg)
    }

    /// The record for reading a few fields fast: a sample is checked against its layout in one pass and
    /// its fields decoded on demand ([`SampleView`]); any other record is checked as [`parse`](Self::parse)
    /// checks it and given as an [`OtherView`](super::OtherView), whose
    /// [`record`](super::OtherView::record) parses it. Allocates nothing.
    ///
    /// # Errors
    /// Exactly those of [`parse`](Self::parse): the view succeeds when the parse does.
    ///
    /// The view borrows `cfg` as well as the record's bytes. It is small (`Result<RecordView, Error>` is 88
    /// bytes on 64-bit targets, where a [`Record`] is 200), so in a loop it stays in registers: the other
    /// records' check runs out of line and returns only its error.
    #[inline(always)]
    pub fn view<'v>(&self, cfg: &'v ParseConfig) -> Result<RecordView<'v>, Error>
    where
        'a: 'v,
    {
        if self.record_type() != PERF_RECORD_SAMPLE {
            // Checked out of line; the view itself is built here, small, so it need not go through memory.
            return match check_other(self.head, self.data.first(), self.data.second(), cfg) {
                None => Ok(RecordView::Other(super::view::OtherView::new(*self, cfg))),
                Some(e) => Err(e),
            };
        }
        // Straight into the result: no intermediate `Result<SampleView, Error>` to move.
        match SampleView::try_new(self.misc(), self.data, cfg) {
            Some(view) => Ok(RecordView::Sample(view)),
            None => Err(super::view::refusal(self.misc(), self.data, cfg)),
        }
    }

    /// The lazy [`SampleView`] of a sample that matches its layout; `None` for any other record, or for a
    /// sample that [`parse`](Self::parse) would refuse. The fastest way to read a few fields of each sample.
    ///
    /// It returns no error and no other record, so it skips `view`'s test of the record type and its
    /// error path (compare `walk + sample_view` with `walk + view` in
    /// `cargo bench -p perf-core --bench parse`). Where
    /// it gives `None`, [`view`](Self::view) tells the rest: [`RecordView::Other`] for another record type,
    /// or the error that refused the sample. A sample's layout is then checked twice, which only a damaged
    /// sample pays. Allocates nothing.
    ///
    /// ```
    /// use perf_core::record::RecordView;
    /// use perf_core::{Chunk, ParseConfig, ParseFields, Records};
    /// use perf_sys::*;
    ///
    /// let cfg = ParseConfig::new(ParseFields { sample_type: (PERF_SAMPLE_IP | PERF_SAMPLE_TIME) as u64, ..Default::default() });
    /// let mut bytes = Vec::new();
    /// for (ty, size, words) in [(PERF_RECORD_SAMPLE, 24u16, &[0x401000u64, 7][..]), (PERF_RECORD_LOST, 24, &[1, 3])] {
    ///     bytes.extend_from_slice(&ty.to_ne_bytes());
    ///     bytes.extend_from_slice(&0u16.to_ne_bytes());
    ///     bytes.extend_from_slice(&size.to_ne_bytes());
    ///     words.iter().for_each(|w| bytes.extend_from_slice(&w.to_ne_bytes()));
    /// }
    ///
    /// let (mut ips, mut others) = (Vec::new(), 0);
    /// let mut records = Records::new(Chunk::contiguous(&bytes));
    /// while let Some(raw) = records.next_record() {
    ///     match raw.sample_view(&cfg) {
    ///         Some(s) => ips.push(s.ip()),
    ///         None => match raw.view(&cfg)? {
    ///             RecordView::Other(_) => others += 1,
    ///             RecordView::Sample(_) => unreachable!("sample_view gives every valid sample"),
    ///             _ => {}
    ///         },
    ///     }
    /// }
    /// assert_eq!((ips, others), (vec![Some(0x401000)], 1));
    /// # Ok::<(), perf_core::Error>(())
    /// ```
    #[doc(alias = "PERF_RECORD_SAMPLE")]
    #[inline(always)]
    pub fn sample_view<'v>(&self, cfg: &'v ParseConfig) -> Option<SampleView<'v>>
    where
        'a: 'v,
    {
        if self.record_type() == PERF_RECORD_SAMPLE {
            SampleView::try_new(self.misc(), self.data, cfg)
        } else {
            None
        }
    }
}

/// Whether [`RawRecord::parse`] accepts a record other than a sample: `None`, or its error. Out of line and
/// taking the record as a word and two slices, so that the caller's record never needs an address.
#[inline(never)]
fn check_other(head: u64, first: &[u8], second: &[u8], cfg: &ParseConfig) -> Option<Error> {
    let raw = RawRecord {
        head,
        data: Chunk::new(first, second),
    };
    parse_record(raw.record_type(), raw.misc(), raw.data, cfg).err()
}

/// Why [`RawRecord::split`] refused `bytes`.
#[cold]
#[inline(never)]
fn header_error(bytes: Chunk<'_>) -> Error {
    match bytes.read_u16(6) {
        None => ErrorKind::RecordOverrun {
            size: HEADER,
            available: bytes.len(),
        }
        .into(),
        Some(size) if (size as usize) < HEADER => ErrorKind::RecordTooShort { size }.into(),
        Some(size) => ErrorKind::RecordOverrun {
            size: size as usize,
            available: bytes.len(),
        }
        .into(),
    }
}

/// A walk over the records in a buffer (a perf.data section, a captured ring, a chunk of a ring).
///
/// Yields each record or, once, the error that stopped the walk (a header that is truncated or too short).
///
/// The fastest walk is this iterator or [`next_record`](Self::next_record) (the same cost: an item is a
/// record beside a one-pointer [`Error`]) with [`RawRecord::sample_view`], and [`RawRecord::view`] for
/// what it leaves; [`RawRecord::view`] alone is close behind (`cargo bench -p perf-core --bench parse`).
#[derive(Clone, Debug)]
pub struct Records<'a> {
    rest: Chunk<'a>,
    failed: bool,
}

impl<'a> Records<'a> {
    /// The records in `bytes`, which must start at a record boundary.
    pub const fn new(bytes: Chunk<'a>) -> Self {
        Records {
            rest: bytes,
            failed: false,
        }
    }

    /// The bytes not yet walked.
    pub const fn remaining(&self) -> Chunk<'a> {
        self.rest
    }

    /// The next record, or `None` at the end of the bytes or at a header that does not fit them, which
    /// [`error`](Self::error) then describes.
    ///
    /// The same walk as the iterator without a `Result` per record (as fast, now that an [`Error`] is
    /// one pointer).
    ///
    /// ```
    /// use perf_core::{Chunk, Records};
    ///
    /// let bytes = [9u32.to_ne_bytes(), [0, 0, 8, 0]].concat(); // one empty SAMPLE
    /// let mut records = Records::new(Chunk::contiguous(&bytes));
    /// while let Some(raw) = records.next_record() {
    ///     assert_eq!(raw.size(), 8);
    /// }
    /// assert!(records.error().is_none());
    /// ```
    #[inline(always)]
    pub fn next_record(&mut self) -> Option<RawRecord<'a>> {
        if self.failed {
            return None;
        }
        let (rec, size) = RawRecord::split(self.rest)?;
        self.rest = self
            .rest
            .get(size, self.rest.len() - size)
            .unwrap_or_default();
        Some(rec)
    }

    /// Why the walk stopped before the end of the bytes (the error the iterator yields), or `None` while
    /// the walk can go on or when it reached the end.
    pub fn error(&self) -> Option<Error> {
        if self.rest.is_empty() || (!self.failed && RawRecord::split(self.rest).is_some()) {
            None
        } else {
            Some(header_error(self.rest))
        }
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<RawRecord<'a>, Error>;

    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.rest.is_empty() {
            return None;
        }
        match RawRecord::split(self.rest) {
            Some((rec, size)) => {
                self.rest = self
                    .rest
                    .get(size, self.rest.len() - size)
                    .unwrap_or_default();
                Some(Ok(rec))
            }
            None => {
                self.failed = true;
                Some(Err(header_error(self.rest)))
            }
        }
    }
}

impl std::iter::FusedIterator for Records<'_> {}
