//! A minimal reader of a perf data ring for the capture tools (example and bench), independent of the
//! library's own `Ring` so that fixtures do not depend on the code they test.
//!
//! # Safety
//! `Ring` maps a perf fd and reads the mmap page's head/tail words and the data area through raw pointers
//! that stay inside the mapping it owns.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};

/// A mapped perf data ring.
pub struct Ring {
    base: *mut u8,
    len: usize,
    _fd: OwnedFd,
}

impl Ring {
    /// Maps `data_pages` (a power of two) data pages of `fd`.
    pub fn map(fd: OwnedFd, data_pages: usize) -> io::Result<Ring> {
        let page = 4096usize;
        let len = (1 + data_pages) * page;
        // SAFETY: a fresh shared mapping of a perf fd; the kernel validates the size.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Ring {
            base: base.cast(),
            len,
            _fd: fd,
        })
    }

    fn word(&self, offset: usize) -> &AtomicU64 {
        // SAFETY: offsets 1024..1056 are data_head/tail/offset/size in the first page, 8-aligned, mapped
        // for the life of `self`; the kernel writes them concurrently, hence atomics.
        unsafe { AtomicU64::from_ptr(self.base.add(offset).cast()) }
    }

    /// Appends the records between tail and head to `out` (unwrapped) and releases them.
    pub fn drain(&self, out: &mut Vec<u8>) {
        let head = self.word(1024).load(Ordering::Acquire);
        let tail = self.word(1032).load(Ordering::Relaxed);
        let off = self.word(1040).load(Ordering::Relaxed) as usize;
        let size = self.word(1048).load(Ordering::Relaxed) as usize;
        assert!(off + size <= self.len);
        for pos in tail..head {
            // SAFETY: the masked position lies inside the data area of the mapping.
            out.push(unsafe { *self.base.add(off + (pos as usize & (size - 1))) });
        }
        self.word(1032).store(head, Ordering::Release);
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `map`.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}
