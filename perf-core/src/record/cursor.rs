//! A bounds-checked reader over a record body; a miss becomes an [`ErrorKind::Truncated`].

use crate::ErrorKind;
use crate::{Chunk, Error};

/// A field that did not fit; the [`Cursor`] keeps the details until [`Cursor::error`] builds the public
/// error. Keeping the hot path's error type zero-sized keeps every `Result` a register wide.
#[derive(Debug)]
pub(crate) struct Fail;

pub(crate) type Parsed<T> = Result<T, Fail>;

#[derive(Clone, Copy)]
enum Failure {
    Truncated(&'static str),
    Trailing(usize),
}

pub(crate) struct Cursor<'a> {
    failed: Option<Failure>,
    data: Chunk<'a>,
    pos: usize,
    /// Where the fields end (the body length minus the sample_id trailer).
    end: usize,
    record: &'static str,
}

impl<'a> Cursor<'a> {
    #[inline]
    pub(crate) fn new(data: Chunk<'a>, end: usize, record: &'static str) -> Self {
        Cursor {
            failed: None,
            data,
            pos: 0,
            end,
            record,
        }
    }

    #[cold]
    fn truncated(&mut self, field: &'static str) -> Fail {
        self.failed = Some(Failure::Truncated(field));
        Fail
    }

    /// The public error for the failure this cursor saw.
    #[cold]
    pub(crate) fn error(&self) -> Error {
        match self.failed {
            Some(Failure::Trailing(extra)) => ErrorKind::TrailingBytes {
                record: self.record,
                extra,
            }
            .into(),
            Some(Failure::Truncated(field)) => ErrorKind::Truncated {
                record: self.record,
                field,
                len: self.data.len(),
            }
            .into(),
            None => ErrorKind::Truncated {
                record: self.record,
                field: "?",
                len: self.data.len(),
            }
            .into(),
        }
    }

    #[inline]
    fn take(&mut self, n: usize, field: &'static str) -> Parsed<usize> {
        let at = self.pos;
        match at.checked_add(n) {
            Some(next) if next <= self.end => {
                self.pos = next;
                Ok(at)
            }
            _ => Err(self.truncated(field)),
        }
    }

    #[inline]
    pub(crate) fn u64(&mut self, field: &'static str) -> Parsed<u64> {
        let at = self.take(8, field)?;
        self.data.read_u64(at).ok_or_else(|| self.truncated(field))
    }

    #[inline]
    pub(crate) fn u32(&mut self, field: &'static str) -> Parsed<u32> {
        let at = self.take(4, field)?;
        self.data.read_u32(at).ok_or_else(|| self.truncated(field))
    }

    #[inline]
    pub(crate) fn u16(&mut self, field: &'static str) -> Parsed<u16> {
        let at = self.take(2, field)?;
        self.data.read_u16(at).ok_or_else(|| self.truncated(field))
    }

    #[inline]
    pub(crate) fn u8(&mut self, field: &'static str) -> Parsed<u8> {
        let at = self.take(1, field)?;
        self.data.read_u8(at).ok_or_else(|| self.truncated(field))
    }

    #[inline]
    pub(crate) fn bytes(&mut self, n: usize, field: &'static str) -> Parsed<Chunk<'a>> {
        let at = self.take(n, field)?;
        self.data.get(at, n).ok_or_else(|| self.truncated(field))
    }

    /// `n` bytes, `n` read from the record as a `u64`.
    #[inline]
    pub(crate) fn bytes_u64(&mut self, n: u64, field: &'static str) -> Parsed<Chunk<'a>> {
        let n = usize::try_from(n).map_err(|_| self.truncated(field))?;
        self.bytes(n, field)
    }

    /// `count` words of `words_each` u64s, with the multiplication checked.
    #[inline]
    pub(crate) fn words(
        &mut self,
        count: u64,
        words_each: usize,
        field: &'static str,
    ) -> Parsed<Chunk<'a>> {
        let n = usize::try_from(count)
            .ok()
            .and_then(|c| c.checked_mul(words_each))
            .and_then(|w| w.checked_mul(8))
            .ok_or_else(|| self.truncated(field))?;
        self.bytes(n, field)
    }

    /// Everything up to the end of the fields.
    pub(crate) fn rest(&mut self) -> Chunk<'a> {
        let n = self.end.saturating_sub(self.pos);
        let c = self.data.get(self.pos, n).unwrap_or_default();
        self.pos = self.end.max(self.pos);
        c
    }

    pub(crate) fn remaining(&self) -> usize {
        self.end.saturating_sub(self.pos)
    }

    /// Succeeds when every byte up to the end has been read.
    #[inline]
    pub(crate) fn finish(&mut self) -> Parsed<()> {
        match self.remaining() {
            0 => Ok(()),
            extra => {
                self.failed = Some(Failure::Trailing(extra));
                Err(Fail)
            }
        }
    }
}
