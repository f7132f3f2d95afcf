//! [`Bytes`] and [`U64s`]: variable-length record fields that are either borrowed from the ring (possibly
//! across its seam) or owned.
//!
//! One record model serves both the zero-copy path and owned records: a parsed field borrows a [`Chunk`];
//! [`into_owned`](Bytes::into_owned) copies it out. Equality compares contents, so a borrowed field equals
//! its owned copy.

use std::borrow::Cow;
use std::fmt;

use crate::Chunk;

/// A byte string from a record (a file name, RAW data, a user stack): borrowed or owned.
#[derive(Clone)]
pub struct Bytes<'a>(BytesRepr<'a>);

#[derive(Clone)]
enum BytesRepr<'a> {
    Borrowed(Chunk<'a>),
    Owned(Vec<u8>),
}

impl Default for Bytes<'_> {
    fn default() -> Self {
        Bytes(BytesRepr::Borrowed(Chunk::default()))
    }
}

impl<'a> Bytes<'a> {
    /// Bytes borrowed from a (possibly wrapped) chunk.
    pub const fn borrowed(chunk: Chunk<'a>) -> Self {
        Bytes(BytesRepr::Borrowed(chunk))
    }

    /// The bytes as a [`Chunk`] (one slice when owned or not wrapped, two when borrowed across the seam).
    #[inline]
    pub fn chunk(&self) -> Chunk<'_> {
        match &self.0 {
            BytesRepr::Borrowed(c) => *c,
            BytesRepr::Owned(v) => Chunk::contiguous(v),
        }
    }

    /// Length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        match &self.0 {
            BytesRepr::Borrowed(c) => c.len(),
            BytesRepr::Owned(v) => v.len(),
        }
    }

    /// Whether there are no bytes.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes as one slice, unless they are borrowed across the ring's seam.
    #[inline]
    pub fn as_contiguous(&self) -> Option<&[u8]> {
        match &self.0 {
            BytesRepr::Borrowed(c) => c.as_contiguous(),
            BytesRepr::Owned(v) => Some(v),
        }
    }

    /// The bytes, copied into a new vector.
    #[inline(always)]
    pub fn to_vec(&self) -> Vec<u8> {
        self.chunk().to_vec()
    }

    /// The bytes as text, replacing invalid UTF-8; borrows when the bytes are contiguous UTF-8.
    pub fn to_string_lossy(&self) -> Cow<'_, str> {
        match self.as_contiguous() {
            Some(b) => String::from_utf8_lossy(b),
            None => Cow::Owned(String::from_utf8_lossy(&self.to_vec()).into_owned()),
        }
    }

    /// The bytes one by one.
    pub fn iter(&self) -> impl Iterator<Item = u8> + '_ {
        let c = self.chunk();
        c.first().iter().chain(c.second()).copied()
    }

    /// An owned copy that no longer borrows the ring.
    pub fn into_owned(self) -> Bytes<'static> {
        match self.0 {
            BytesRepr::Owned(v) => Bytes(BytesRepr::Owned(v)),
            BytesRepr::Borrowed(c) => Bytes(BytesRepr::Owned(c.to_vec())),
        }
    }
}

impl From<Vec<u8>> for Bytes<'static> {
    fn from(v: Vec<u8>) -> Self {
        Bytes(BytesRepr::Owned(v))
    }
}

impl<'a> From<&'a [u8]> for Bytes<'a> {
    fn from(b: &'a [u8]) -> Self {
        Bytes(BytesRepr::Borrowed(Chunk::contiguous(b)))
    }
}

impl<'a> From<Chunk<'a>> for Bytes<'a> {
    fn from(c: Chunk<'a>) -> Self {
        Bytes(BytesRepr::Borrowed(c))
    }
}

impl PartialEq for Bytes<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for Bytes<'_> {}

impl PartialEq<[u8]> for Bytes<'_> {
    fn eq(&self, other: &[u8]) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter().copied())
    }
}

impl fmt::Debug for Bytes<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("b\"")?;
        for b in self.iter() {
            write!(f, "{}", std::ascii::escape_default(b))?;
        }
        f.write_str("\"")
    }
}

/// A sequence of native-endian `u64` words from a record (callchain ips, registers, branch entries):
/// borrowed bytes or owned words.
#[derive(Clone)]
pub struct U64s<'a>(WordsRepr<'a>);

#[derive(Clone)]
enum WordsRepr<'a> {
    Bytes(Chunk<'a>),
    Words(Cow<'a, [u64]>),
}

impl Default for U64s<'_> {
    fn default() -> Self {
        U64s(WordsRepr::Words(Cow::Borrowed(&[])))
    }
}

impl<'a> U64s<'a> {
    /// Words read from `chunk`, whose length must be a multiple of 8 (a trailing partial word is ignored).
    pub const fn borrowed(chunk: Chunk<'a>) -> Self {
        U64s(WordsRepr::Bytes(chunk))
    }

    /// Number of words.
    #[inline]
    pub fn len(&self) -> usize {
        match &self.0 {
            WordsRepr::Bytes(c) => c.len() / 8,
            WordsRepr::Words(w) => w.len(),
        }
    }

    /// Whether there are no words.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The word at `index`, or `None` past the end.
    #[inline]
    pub fn get(&self, index: usize) -> Option<u64> {
        match &self.0 {
            WordsRepr::Bytes(c) => {
                if index >= c.len() / 8 {
                    return None;
                }
                c.read_u64(index.checked_mul(8)?)
            }
            WordsRepr::Words(w) => w.get(index).copied(),
        }
    }

    /// The words in order.
    pub fn iter(&self) -> U64sIter<'_> {
        U64sIter {
            words: self.reborrow(),
            next: 0,
            end: self.len(),
        }
    }

    /// The words `start..end`, or `None` if the range is out of bounds.
    pub fn slice(&self, start: usize, end: usize) -> Option<U64s<'_>> {
        if start > end || end > self.len() {
            return None;
        }
        Some(match &self.0 {
            WordsRepr::Bytes(c) => U64s(WordsRepr::Bytes(c.get(start * 8, (end - start) * 8)?)),
            WordsRepr::Words(w) => U64s(WordsRepr::Words(Cow::Borrowed(w.get(start..end)?))),
        })
    }

    fn reborrow(&self) -> U64s<'_> {
        match &self.0 {
            WordsRepr::Bytes(c) => U64s(WordsRepr::Bytes(*c)),
            WordsRepr::Words(w) => U64s(WordsRepr::Words(Cow::Borrowed(w))),
        }
    }

    /// The words, copied into a new vector (one allocation of the exact size).
    #[inline(always)]
    pub fn to_vec(&self) -> Vec<u64> {
        match &self.0 {
            WordsRepr::Bytes(c) => match c.as_contiguous() {
                Some(bytes) => words_of(bytes),
                None => {
                    let mut v = Vec::with_capacity(self.len());
                    v.extend(self.iter());
                    v
                }
            },
            WordsRepr::Words(w) => w.to_vec(),
        }
    }

    /// An owned copy that no longer borrows the ring.
    pub fn into_owned(self) -> U64s<'static> {
        match self.0 {
            WordsRepr::Words(Cow::Owned(w)) => U64s(WordsRepr::Words(Cow::Owned(w))),
            _ => U64s(WordsRepr::Words(Cow::Owned(self.to_vec()))),
        }
    }
}

impl From<Vec<u64>> for U64s<'static> {
    fn from(v: Vec<u64>) -> Self {
        U64s(WordsRepr::Words(Cow::Owned(v)))
    }
}

impl<'a> From<&'a [u64]> for U64s<'a> {
    fn from(v: &'a [u64]) -> Self {
        U64s(WordsRepr::Words(Cow::Borrowed(v)))
    }
}

impl PartialEq for U64s<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for U64s<'_> {}

impl fmt::Debug for U64s<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        struct Hex(u64);
        impl fmt::Debug for Hex {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{:#x}", self.0)
            }
        }
        f.debug_list().entries(self.iter().map(Hex)).finish()
    }
}

impl<'b> IntoIterator for &'b U64s<'_> {
    type Item = u64;
    type IntoIter = U64sIter<'b>;
    fn into_iter(self) -> U64sIter<'b> {
        self.iter()
    }
}

/// The whole words of `bytes`, native-endian: one allocation and one copy.
#[inline(always)]
fn words_of(bytes: &[u8]) -> Vec<u64> {
    let n = bytes.len() / 8;
    let mut v: Vec<u64> = Vec::with_capacity(n);
    // SAFETY: the vector has room for `n` words, i.e. `n * 8` bytes, and `bytes` holds at least that many;
    // a fresh allocation does not overlap `bytes`; every bit pattern is a valid `u64` (native-endian, as
    // `u64::from_ne_bytes` reads it), so the first `n` elements are initialised before `set_len`.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), v.as_mut_ptr().cast::<u8>(), n * 8);
        v.set_len(n);
    }
    v
}

/// Iterator over the words of a [`U64s`].
#[derive(Clone, Debug)]
pub struct U64sIter<'a> {
    words: U64s<'a>,
    next: usize,
    end: usize,
}

impl Iterator for U64sIter<'_> {
    type Item = u64;

    #[inline]
    fn next(&mut self) -> Option<u64> {
        if self.next >= self.end {
            return None;
        }
        let w = self.words.get(self.next);
        self.next += 1;
        w
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.end.saturating_sub(self.next);
        (n, Some(n))
    }
}

impl ExactSizeIterator for U64sIter<'_> {}
