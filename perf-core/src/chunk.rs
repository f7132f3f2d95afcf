//! [`Chunk`]: bytes in a ring that may wrap its end, as two slices.

/// Bytes that may wrap the end of a ring buffer: `first`, then `second` (empty unless they wrap).
///
/// The ring never copies a record that straddles the end of the buffer; it hands out both halves and the
/// parser reads across the seam. Integer reads are native-endian (the kernel writes host order) and
/// bounds-checked: an offset past the end gives `None`, never a panic.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Chunk<'a> {
    first: &'a [u8],
    second: &'a [u8],
}

impl<'a> Chunk<'a> {
    /// Bytes given as two halves, in order.
    #[inline]
    pub const fn new(first: &'a [u8], second: &'a [u8]) -> Self {
        Self { first, second }
    }

    /// Contiguous bytes.
    #[inline]
    pub const fn contiguous(bytes: &'a [u8]) -> Self {
        Self {
            first: bytes,
            second: &[],
        }
    }

    /// The part before the seam (all of it when the bytes do not wrap).
    #[inline]
    pub const fn first(&self) -> &'a [u8] {
        self.first
    }

    /// The part after the seam (empty when the bytes do not wrap).
    #[inline]
    pub const fn second(&self) -> &'a [u8] {
        self.second
    }

    /// Total length in bytes.
    #[inline]
    pub const fn len(&self) -> usize {
        self.first.len() + self.second.len()
    }

    /// Whether there are no bytes.
    #[inline]
    pub const fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes as one slice, when they do not wrap.
    #[inline]
    pub fn as_contiguous(&self) -> Option<&'a [u8]> {
        if self.second.is_empty() {
            Some(self.first)
        } else if self.first.is_empty() {
            Some(self.second)
        } else {
            None
        }
    }

    /// The sub-range `offset..offset + len`, or `None` if it is out of bounds.
    #[inline]
    pub fn get(&self, offset: usize, len: usize) -> Option<Chunk<'a>> {
        let end = offset.checked_add(len)?;
        if end > self.len() {
            return None;
        }
        let split = self.first.len();
        Some(if end <= split {
            Chunk::contiguous(self.first.get(offset..end)?)
        } else if offset >= split {
            Chunk::contiguous(self.second.get(offset - split..end - split)?)
        } else {
            Chunk::new(self.first.get(offset..)?, self.second.get(..end - split)?)
        })
    }

    /// Copies all bytes into `dst`, which must be exactly [`len`](Self::len) long; `false` otherwise.
    #[inline]
    pub fn copy_to_slice(&self, dst: &mut [u8]) -> bool {
        if dst.len() != self.len() {
            return false;
        }
        let (a, b) = dst.split_at_mut(self.first.len());
        a.copy_from_slice(self.first);
        b.copy_from_slice(self.second);
        true
    }

    /// The bytes in a new vector.
    #[inline(always)]
    pub fn to_vec(&self) -> Vec<u8> {
        if self.second.is_empty() {
            return self.first.to_vec();
        }
        let mut v = Vec::with_capacity(self.len());
        v.extend_from_slice(self.first);
        v.extend_from_slice(self.second);
        v
    }

    #[inline]
    fn read_array<const N: usize>(&self, offset: usize) -> Option<[u8; N]> {
        // Fast path: wholly inside the first half.
        if let Some(b) = self.first.get(offset..offset.checked_add(N)?) {
            return b.try_into().ok();
        }
        let mut out = [0u8; N];
        self.get(offset, N)?.copy_to_slice(&mut out).then_some(out)
    }

    /// The native-endian `u64` at `offset`.
    #[inline]
    pub fn read_u64(&self, offset: usize) -> Option<u64> {
        self.read_array(offset).map(u64::from_ne_bytes)
    }

    /// The native-endian `u32` at `offset`.
    #[inline]
    pub fn read_u32(&self, offset: usize) -> Option<u32> {
        self.read_array(offset).map(u32::from_ne_bytes)
    }

    /// The native-endian `u16` at `offset`.
    #[inline]
    pub fn read_u16(&self, offset: usize) -> Option<u16> {
        self.read_array(offset).map(u16::from_ne_bytes)
    }

    /// The byte at `offset`.
    #[inline]
    pub fn read_u8(&self, offset: usize) -> Option<u8> {
        self.read_array::<1>(offset).map(|[b]| b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_across_the_seam_at_every_split() {
        let bytes: Vec<u8> = (0u8..32).collect();
        for split in 0..=bytes.len() {
            let c = Chunk::new(&bytes[..split], &bytes[split..]);
            assert_eq!(c.len(), 32);
            for off in 0..=24 {
                let want = u64::from_ne_bytes(bytes[off..off + 8].try_into().unwrap());
                assert_eq!(c.read_u64(off), Some(want), "split {split} off {off}");
            }
            assert_eq!(c.read_u64(25), None);
            assert_eq!(c.read_u8(31), Some(31));
            assert_eq!(c.read_u8(32), None);
            assert_eq!(c.get(3, 20).unwrap().to_vec(), bytes[3..23].to_vec());
            assert_eq!(c.get(30, 3), None);
            assert_eq!(c.get(usize::MAX, 2), None);
            assert_eq!(c.to_vec(), bytes);
        }
    }
}
