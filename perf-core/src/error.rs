//! The one error type of perf-core: [`Error`], a pointer to its [`ErrorKind`].

use std::error::Error as _;
use std::fmt;

/// Everything that can go wrong in perf-core: mapping a perf fd, reading a ring, parsing a record.
///
/// One pointer wide (the details are boxed in an [`ErrorKind`]), so that every `Result` of perf-core
/// stays a register or two wide on the paths that succeed. Match on [`kind`](Self::kind):
///
/// ```
/// use perf_core::{Chunk, ErrorKind, RawRecord};
///
/// let err = RawRecord::from_chunk(Chunk::contiguous(&[9, 0, 0, 0, 0, 0, 4, 0])).unwrap_err();
/// assert!(matches!(err.kind(), ErrorKind::RecordTooShort { size: 4 }));
/// assert_eq!(
///     err.to_string(),
///     "record header says 4 bytes, less than the 8-byte header: the bytes are not at a record boundary"
/// );
/// ```
///
/// `{:?}` prints the message and any cause it does not already quote (what `main` shows for an error
/// returned with `?`); `{:#?}` prints the [`ErrorKind`] with its fields.
pub struct Error(Box<ErrorKind>);

impl Error {
    /// What went wrong, with its details.
    pub fn kind(&self) -> &ErrorKind {
        &self.0
    }

    /// The details, by value.
    pub fn into_kind(self) -> ErrorKind {
        *self.0
    }
}

impl From<ErrorKind> for Error {
    #[cold]
    #[inline(never)]
    fn from(kind: ErrorKind) -> Self {
        Error(Box::new(kind))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&*self.0, f)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if f.alternate() {
            return fmt::Debug::fmt(&*self.0, f);
        }
        let mut shown = self.to_string();
        f.write_str(&shown)?;
        // Most messages quote their errno already; add only the causes they do not.
        let mut heading = true;
        let mut cause = self.0.source();
        while let Some(c) = cause {
            let text = c.to_string();
            if !shown.contains(&text) {
                if heading {
                    f.write_str("\n\nCaused by:")?;
                    heading = false;
                }
                write!(f, "\n    {text}")?;
                shown.push_str(&text);
            }
            cause = c.source();
        }
        Ok(())
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

/// What went wrong in perf-core, with its details: see [`Error::kind`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ErrorKind {
    // --- record parsing and encoding (record/, encode.rs) ---
    /// A record header's size is smaller than the 8-byte header itself.
    #[error("record header says {size} bytes, less than the 8-byte header: the bytes are not at a record boundary")]
    RecordTooShort {
        /// The header's `size`.
        size: u16,
    },
    /// A record's header size runs past the bytes available.
    #[error("record of {size} bytes overruns the {available} bytes available: the buffer is truncated or not at a record boundary")]
    RecordOverrun {
        /// The header's `size`.
        size: usize,
        /// Bytes available from the record's start.
        available: usize,
    },
    /// A field of a record lies past the end of the record's body.
    #[error("{record} record truncated: field `{field}` runs past its {len}-byte body; was the ParseConfig built from this event's attr?")]
    Truncated {
        /// The record type, e.g. `"SAMPLE"`.
        record: &'static str,
        /// The field that did not fit.
        field: &'static str,
        /// Length of the record's body (after the header).
        len: usize,
    },
    /// A record has bytes left over after every field its layout declares.
    #[error("{record} record has {extra} bytes more than its layout declares; was the ParseConfig built from this event's attr?")]
    TrailingBytes {
        /// The record type, e.g. `"SAMPLE"`.
        record: &'static str,
        /// Unexplained bytes.
        extra: usize,
    },
    /// The ParseConfig's sample_type or read_format has bits this parser does not know, so the layout is unknown.
    #[error("cannot parse samples: sample_type {sample_type:#x} / read_format {read_format:#x} have bits newer than this parser")]
    UnknownLayout {
        /// `perf_event_attr.sample_type`.
        sample_type: u64,
        /// `perf_event_attr.read_format`.
        read_format: u64,
    },
    /// A record cannot be encoded as the ParseConfig lays it out.
    #[error("cannot encode {record} record: {reason}")]
    Encode {
        /// The record type, e.g. `"SAMPLE"`.
        record: &'static str,
        /// What is inconsistent.
        reason: &'static str,
    },

    // --- perf.data files (perf_data/) ---
    /// Reading or writing a perf.data file failed at the I/O level.
    #[error("perf.data: {what} failed: {source}")]
    PerfDataIo {
        /// What was being done, e.g. `"writing the data section"`.
        what: &'static str,
        /// The error the file or stream returned.
        source: std::io::Error,
    },
    /// The bytes are not a perf.data file this reader understands, or a section is out of bounds.
    #[error("not a readable perf.data file: {reason} (at byte {offset})")]
    PerfDataFormat {
        /// What is wrong, with the values found.
        reason: String,
        /// File offset where the problem is.
        offset: u64,
    },
    /// A perf.data writer was used in a way the format cannot express.
    #[error("cannot write perf.data: {reason}")]
    PerfDataWrite {
        /// What is inconsistent.
        reason: String,
    },

    // --- rings, mappings and the mmap page (ring.rs, mmap.rs, aux.rs, page.rs, sim.rs) ---
    /// A ring's size is not a non-zero power of two, or the page count is not one.
    #[error(
        "bad {area} ring size {size}: it must be a non-zero power of two (of pages, when mapping)"
    )]
    BadRingSize {
        /// `"data"` or `"aux"`.
        area: &'static str,
        /// The size asked for (pages or bytes).
        size: u64,
    },
    /// The mapping length of a ring does not fit in the address space.
    #[error(
        "a {area} ring of {pages} pages of {page_size} bytes does not fit in the address space"
    )]
    SizeOverflow {
        /// `"data"` or `"aux"`.
        area: &'static str,
        /// Pages asked for.
        pages: u64,
        /// The system page size.
        page_size: u64,
    },
    /// The kernel refused to map a ring because of its locked-memory budget (EPERM).
    #[error("mapping {len} bytes of perf {area} ring failed ({source}): locked-memory budget exceeded; \
perf_event_mlock_kb is {mlock_kb} KiB (per CPU, /proc/sys/kernel/perf_event_mlock_kb) and RLIMIT_MEMLOCK is \
{memlock_cur} (hard {memlock_max}) bytes. Map fewer pages, raise perf_event_mlock_kb or RLIMIT_MEMLOCK (ulimit -l), \
or run with CAP_IPC_LOCK")]
    MapMemory {
        /// `"data"` or `"aux"`.
        area: &'static str,
        /// Bytes asked for.
        len: u64,
        /// `/proc/sys/kernel/perf_event_mlock_kb`, as read (`"unreadable"` if it could not be).
        mlock_kb: String,
        /// RLIMIT_MEMLOCK soft limit (`"unlimited"` or bytes).
        memlock_cur: String,
        /// RLIMIT_MEMLOCK hard limit (`"unlimited"` or bytes).
        memlock_max: String,
        /// The error mmap(2) returned.
        source: std::io::Error,
    },
    /// The kernel could not allocate a ring this large (ENOMEM), whatever the locked-memory budget.
    #[error("the kernel could not allocate a {len}-byte perf {area} ring ({source}): it keeps a ring's page list \
in one allocation, which limits a data ring to 2^18 pages (1 GiB with 4 KiB pages) on most kernels, or memory is \
short; map fewer pages")]
    MapTooLarge {
        /// `"data"` or `"aux"`.
        area: &'static str,
        /// Bytes asked for.
        len: u64,
        /// The error mmap(2) returned.
        source: std::io::Error,
    },
    /// [`Ring::map_exclusive`](crate::Ring::map_exclusive) found the event mapped already.
    #[error("the perf event already has a mapping (another ring of it, or a mapping of a duplicate of its fd): a \
second {area} ring would be a second consumer of the same ring; read it through the existing one")]
    AlreadyMapped {
        /// `"data"`.
        area: &'static str,
    },
    /// The fd is not a perf event fd the kernel lets us detach and map.
    #[error("cannot map a perf {area} ring of this fd ({source}): not a perf event fd, or it cannot be duplicated")]
    NotPerfFd {
        /// `"data"`.
        area: &'static str,
        /// The error the kernel returned.
        source: std::io::Error,
    },
    /// The AUX area cannot be mapped safely through this data ring.
    #[error("cannot map the AUX area: {why}")]
    AuxUnavailable {
        /// Why not.
        why: &'static str,
    },
    /// A ring or page was used in a child made by `fork()`: the kernel does not copy perf mappings into
    /// children (`VM_DONTCOPY`).
    #[error("this perf {area} ring belongs to the parent process: fork() does not copy perf mappings into the \
child; open and map the event again in the child")]
    ForkedChild {
        /// `"data"` or `"aux"`.
        area: &'static str,
    },
    /// [`Ring::map_exclusive`](crate::Ring::map_exclusive) was given a fork child's copy of its parent's
    /// event: both processes could map it, and both would consume one ring.
    #[error("this perf event was opened by the parent process (the fd was inherited through fork()): mapping its \
{area} ring here would make parent and child two consumers of one ring; open the event again in the child")]
    InheritedFd {
        /// `"data"`.
        area: &'static str,
    },
    /// The fd's output is redirected to another event's ring (EBUSY).
    #[error(
        "mapping the perf {area} ring failed ({source}): this fd's output was redirected with \
PERF_EVENT_IOC_SET_OUTPUT (or its ring is busy); map the fd it writes into instead"
    )]
    MapBusy {
        /// `"data"` or `"aux"`.
        area: &'static str,
        /// The error mmap(2) returned.
        source: std::io::Error,
    },
    /// mmap(2) of a perf fd failed for another reason.
    #[error("mapping {len} bytes of perf {area} ring at offset {offset} failed ({source}){}", Hint(*hint))]
    Map {
        /// `"data"` or `"aux"`.
        area: &'static str,
        /// Bytes asked for.
        len: u64,
        /// File offset asked for.
        offset: u64,
        /// What the errno usually means here, when something is known.
        hint: Option<&'static str>,
        /// The error mmap(2) returned.
        source: std::io::Error,
    },
    /// The kernel's head is further from the tail than the ring holds: corrupt, or another consumer moved the tail.
    #[error("{area} ring corrupt: head {head} is {} bytes from tail {tail}, more than the ring's {size} bytes \
(another consumer of the same ring, or a corrupt page)", head.wrapping_sub(*tail))]
    RingHeadOutOfRange {
        /// `"data"` or `"aux"`.
        area: &'static str,
        /// The head loaded from the page.
        head: u64,
        /// Our tail.
        tail: u64,
        /// Ring size in bytes.
        size: u64,
    },
    /// A record header in a data ring is impossible: its size is under 8, not a multiple of 8, or past the head.
    #[error("data ring corrupt at position {position}: record header says {size} bytes, but a record is a multiple \
of 8, at least 8, and within the {available} bytes published; call Ring::discard_pending to resynchronise")]
    RingCorruptRecord {
        /// Free-running position of the bad header.
        position: u64,
        /// The header's size (0 when fewer than 8 bytes were left for a header).
        size: u16,
        /// Bytes published from `position` to the head.
        available: u64,
    },
    /// An overwrite ring's head is not 8-byte aligned. The kernel writes whole records, each a multiple of 8
    /// bytes, so its head never is: the memory was written by something else.
    #[error("overwrite ring's head {head} is not 8-byte aligned: the kernel writes records of multiples of 8 bytes, \
so this memory was not written as a perf ring; nothing was copied")]
    RingHeadUnaligned {
        /// The free-running head.
        head: u64,
    },
    /// The operation needs the other ring mode (e.g. a forward read on an overwrite ring).
    #[error("{what} needs the {area} ring in {needs} mode, but it is in {is} mode")]
    RingMode {
        /// `"data"` or `"aux"`.
        area: &'static str,
        /// The operation.
        what: &'static str,
        /// The mode it needs.
        needs: &'static str,
        /// The ring's mode.
        is: &'static str,
    },
    /// The mmap page kept changing while it was read (its seqlock never settled).
    #[error("the perf mmap page kept changing ({attempts} reads); retry, or read(2) the counter instead")]
    PageUnstable {
        /// Attempts made.
        attempts: u32,
    },
    /// A simulated-kernel call was given a ring of another simulated region, or impossible arguments.
    #[error("simulated kernel: {0}")]
    Sim(&'static str),
}

/// A [`ErrorKind::Map`] hint, as the end of its message.
struct Hint(Option<&'static str>);

impl fmt::Display for Hint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(h) => write!(f, ": {h}"),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_is_one_pointer_and_results_stay_small() {
        assert_eq!(std::mem::size_of::<Error>(), std::mem::size_of::<usize>());
        assert!(std::mem::size_of::<Error>() <= 16);
        assert_eq!(std::mem::size_of::<Result<(), Error>>(), 8);
        assert_eq!(std::mem::size_of::<Result<u64, Error>>(), 16);
    }

    #[test]
    fn debug_is_the_message_and_the_causes_it_does_not_quote() {
        let quoted: Error = ErrorKind::MapBusy {
            area: "data",
            source: std::io::Error::from_raw_os_error(libc::EBUSY),
        }
        .into();
        let text = format!("{quoted:?}");
        assert_eq!(text, quoted.to_string());
        assert!(!text.contains("MapBusy {"), "{text}");
        assert!(!text.contains("Caused by"), "{text}");
        // A cause the message does not quote is added under "Caused by".
        let wrapped: Error = ErrorKind::PerfDataIo {
            what: "writing the data section",
            source: std::io::Error::other(Inner),
        }
        .into();
        let text = format!("{wrapped:?}");
        assert!(
            text.starts_with("perf.data: writing the data section failed: outer"),
            "{text}"
        );
        assert!(text.ends_with("\n\nCaused by:\n    inner cause"), "{text}");
        // `{:#?}` names the kind and its fields.
        let alt = format!("{quoted:#?}");
        assert!(alt.starts_with("MapBusy {"), "{alt}");
        assert!(alt.contains("area: \"data\""), "{alt}");
    }

    #[derive(Debug)]
    struct Inner;
    impl fmt::Display for Inner {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("outer")
        }
    }
    impl std::error::Error for Inner {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&Cause)
        }
    }
    #[derive(Debug)]
    struct Cause;
    impl fmt::Display for Cause {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("inner cause")
        }
    }
    impl std::error::Error for Cause {}

    #[test]
    fn map_hints_are_self_contained() {
        let e: Error = ErrorKind::Map {
            area: "aux",
            len: 8192,
            offset: 4096,
            hint: Some("this event's PMU has no AUX area"),
            source: std::io::Error::from_raw_os_error(libc::EOPNOTSUPP),
        }
        .into();
        let text = e.to_string();
        assert!(
            text.ends_with("): this event's PMU has no AUX area"),
            "{text}"
        );
        let e: Error = ErrorKind::Map {
            area: "data",
            len: 8192,
            offset: 0,
            hint: None,
            source: std::io::Error::from_raw_os_error(libc::EIO),
        }
        .into();
        assert!(e.to_string().ends_with(')'), "{e}");
    }
}
