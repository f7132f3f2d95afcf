//! Bounds-checked reads from a perf.data file's bytes, and the string encoding its feature sections use.

use crate::Error;
use crate::ErrorKind;

/// Names and strings in feature sections are padded to this many bytes (perf's `NAME_ALIGN`).
pub(crate) const NAME_ALIGN: usize = 64;

/// A read position in a byte slice that knows its file offset, so errors say where the file is bad.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    /// File offset of `bytes[0]`.
    base: u64,
}

impl<'a> Reader<'a> {
    pub(crate) const fn new(bytes: &'a [u8], base: u64) -> Self {
        Reader {
            bytes,
            pos: 0,
            base,
        }
    }

    /// File offset of the next byte.
    pub(crate) const fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.pos >= self.bytes.len()
    }

    pub(crate) fn error(&self, reason: impl Into<String>) -> Error {
        ErrorKind::PerfDataFormat {
            reason: reason.into(),
            offset: self.offset(),
        }
        .into()
    }

    pub(crate) fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], Error> {
        let end = self.pos.checked_add(n);
        match end.and_then(|end| self.bytes.get(self.pos..end)) {
            Some(b) => {
                self.pos += n;
                Ok(b)
            }
            None => Err(self.error(format!(
                "{what}: {n} bytes needed, {} left in the section",
                self.bytes.len().saturating_sub(self.pos)
            ))),
        }
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], Error> {
        let b = self.take(N, what)?;
        let mut out = [0u8; N];
        out.copy_from_slice(b);
        Ok(out)
    }

    pub(crate) fn u64(&mut self, what: &str) -> Result<u64, Error> {
        self.array(what).map(u64::from_ne_bytes)
    }

    pub(crate) fn u16(&mut self, what: &str) -> Result<u16, Error> {
        self.array(what).map(u16::from_ne_bytes)
    }

    pub(crate) fn u32(&mut self, what: &str) -> Result<u32, Error> {
        self.array(what).map(u32::from_ne_bytes)
    }

    /// A `struct perf_header_string`: `u32 len`, then `len` bytes holding a NUL-terminated string.
    pub(crate) fn string(&mut self, what: &str) -> Result<String, Error> {
        let len = self.u32(what)? as usize;
        let b = self.take(len, what)?;
        Ok(c_str(b))
    }
}

/// The text before the first NUL (all of it without one), lossily decoded.
pub(crate) fn c_str(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(b.get(..end).unwrap_or_default()).into_owned()
}

/// Rounds `n` up to a multiple of `align` (a power of two).
pub(crate) const fn align_up(n: usize, align: usize) -> usize {
    (n + align - 1) & !(align - 1)
}

pub(crate) fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_ne_bytes());
}

pub(crate) fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_ne_bytes());
}

/// Appends a `struct perf_header_string`: the length (NUL included, padded to [`NAME_ALIGN`]), then the
/// bytes, a NUL and padding. A NUL inside `s` would end the string early, so it is cut there.
pub(crate) fn put_string(out: &mut Vec<u8>, s: &str) {
    let s = s.split('\0').next().unwrap_or_default();
    let len = align_up(s.len() + 1, NAME_ALIGN);
    put_u32(out, len as u32);
    out.extend_from_slice(s.as_bytes());
    out.resize(out.len() + (len - s.len()), 0);
}
