//! `PROCMAP_QUERY` (Linux 6.11): one mapping of a process at a time, asked of an open
//! `/proc/PID/maps` by ioctl, with its file's path and build id, instead of the whole text of the
//! file formatted by the kernel and parsed again. A profiler builds the address spaces of the
//! processes running when it starts from it, as `perf record` synthesizes MMAP2 records.
//!
//! The layout is `struct procmap_query` of `include/uapi/linux/fs.h`; the request number is
//! `_IOWR('f', 17, struct procmap_query)`, built with the architecture's `_IOC` encoding.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

use crate::ioctl::{encoding, ioc};

/// `struct procmap_query`: what is asked (`size`, `query_flags`, `query_addr`, the buffers) and
/// what the kernel answers (the mapping's range, flags, offset, file and the lengths written).
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct procmap_query {
    /// This struct's size, for the kernel's versioning of it.
    pub size: u64,
    /// `PROCMAP_QUERY_*` flags.
    pub query_flags: u64,
    /// The address asked about.
    pub query_addr: u64,
    /// The mapping's first address.
    pub vma_start: u64,
    /// The address after the mapping.
    pub vma_end: u64,
    /// `PROCMAP_QUERY_VMA_*` flags of the mapping.
    pub vma_flags: u64,
    /// The mapping's page size.
    pub vma_page_size: u64,
    /// The file offset of `vma_start` (0 for a mapping of no file).
    pub vma_offset: u64,
    /// The file's inode (0 for none).
    pub inode: u64,
    /// The file's device, major.
    pub dev_major: u32,
    /// The file's device, minor.
    pub dev_minor: u32,
    /// In: the name buffer's size; out: the name's size with its NUL (0: no name).
    pub vma_name_size: u32,
    /// In: the build-id buffer's size; out: the build id's size (0: none found).
    pub build_id_size: u32,
    /// The name buffer's address.
    pub vma_name_addr: u64,
    /// The build-id buffer's address.
    pub build_id_addr: u64,
}

/// The mapping is readable (a query flag: only such mappings are answered; a `vma_flags` bit).
pub const PROCMAP_QUERY_VMA_READABLE: u64 = 0x01;
/// The mapping is writable.
pub const PROCMAP_QUERY_VMA_WRITABLE: u64 = 0x02;
/// The mapping is executable.
pub const PROCMAP_QUERY_VMA_EXECUTABLE: u64 = 0x04;
/// The mapping is shared.
pub const PROCMAP_QUERY_VMA_SHARED: u64 = 0x08;
/// Answer the mapping that holds `query_addr` or else the next one above it.
pub const PROCMAP_QUERY_COVERING_OR_NEXT_VMA: u64 = 0x10;
/// Only mappings of a file.
pub const PROCMAP_QUERY_FILE_BACKED_VMA: u64 = 0x20;

/// `_IOWR('f', 17, struct procmap_query)`.
pub const PROCMAP_QUERY: u32 = ioc(
    encoding::READ | encoding::WRITE,
    b'f',
    17,
    core::mem::size_of::<procmap_query>(),
);

/// What [`query`] found: the kernel's answer, the name's and the build id's lengths within the
/// buffers passed (the name without its NUL).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Answer {
    /// The kernel's answer.
    pub query: procmap_query,
    /// Bytes of the name buffer that hold the name (no NUL); 0 for a mapping without a name.
    pub name_len: usize,
    /// Bytes of the build-id buffer that hold the build id; 0 where none was found.
    pub build_id_len: usize,
}

/// Asks `maps` (an open `/proc/PID/maps`) for the mapping at or after `addr` that has every
/// property in `flags` (`PROCMAP_QUERY_*`), its name into `name` and its file's build id into
/// `build_id`.
///
/// # Errors
///
/// The ioctl's: `ENOENT` when no mapping matches, `ENOTTY` before Linux 6.11 (or on another
/// file), `ENAMETOOLONG` when a buffer is too small, `EACCES`/`ESRCH` for a process that may not
/// be read or is gone.
#[doc(alias = "PROCMAP_QUERY")]
pub fn query(
    maps: BorrowedFd<'_>,
    flags: u64,
    addr: u64,
    name: &mut [u8],
    build_id: &mut [u8],
) -> io::Result<Answer> {
    let mut q = procmap_query {
        size: core::mem::size_of::<procmap_query>() as u64,
        query_flags: flags,
        query_addr: addr,
        vma_name_size: u32::try_from(name.len()).unwrap_or(u32::MAX),
        build_id_size: u32::try_from(build_id.len()).unwrap_or(u32::MAX),
        vma_name_addr: if name.is_empty() {
            0
        } else {
            name.as_mut_ptr() as u64
        },
        build_id_addr: if build_id.is_empty() {
            0
        } else {
            build_id.as_mut_ptr() as u64
        },
        ..procmap_query::default()
    };
    // SAFETY: `maps` is open for the call; `q` is a live `procmap_query` of the size the request
    // number and `q.size` give, which the kernel reads and writes; it writes at most
    // `vma_name_size` bytes at `vma_name_addr` and `build_id_size` at `build_id_addr`, which are
    // the lengths of `name` and `build_id`, borrowed mutably for the call (none where empty: the
    // address is then 0 with a size of 0).
    let ret = unsafe {
        libc::ioctl(
            maps.as_raw_fd(),
            PROCMAP_QUERY as _,
            &mut q as *mut procmap_query,
        )
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    let name_len = (q.vma_name_size as usize).min(name.len());
    let name_len = name[..name_len]
        .iter()
        .position(|&b| b == 0)
        .unwrap_or(name_len);
    Ok(Answer {
        query: q,
        name_len,
        build_id_len: (q.build_id_size as usize).min(build_id.len()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn the_layout_and_request_number_are_the_kernels() {
        assert_eq!(core::mem::size_of::<procmap_query>(), 104);
        assert_eq!(core::mem::offset_of!(procmap_query, dev_major), 72);
        assert_eq!(core::mem::offset_of!(procmap_query, vma_name_addr), 88);
        #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
        assert_eq!(PROCMAP_QUERY, 0xc068_6611);
    }

    /// This process's own code: the mapping that holds this function, with its file's name, and
    /// the next executable mapping above it; nothing above the last one.
    #[test]
    fn the_mapping_of_this_code_and_the_next_one() {
        let maps = std::fs::File::open("/proc/self/maps").unwrap();
        let here = the_mapping_of_this_code_and_the_next_one as fn() as usize as u64;
        let (mut name, mut id) = ([0u8; 4096], [0u8; 64]);
        let flags = PROCMAP_QUERY_COVERING_OR_NEXT_VMA | PROCMAP_QUERY_VMA_EXECUTABLE;
        let a = match query(maps.as_fd(), flags, here, &mut name, &mut id) {
            Err(e) if e.raw_os_error() == Some(libc::ENOTTY) => {
                println!("skipped: PROCMAP_QUERY needs Linux 6.11 ({e})");
                return;
            }
            r => r.unwrap(),
        };
        assert!(a.query.vma_start <= here && here < a.query.vma_end);
        assert!(a.query.vma_flags & PROCMAP_QUERY_VMA_EXECUTABLE != 0);
        let exe = std::env::current_exe().unwrap();
        assert_eq!(
            std::str::from_utf8(&name[..a.name_len]).unwrap(),
            exe.to_str().unwrap()
        );
        assert!(a.build_id_len <= id.len());
        // Walking up from 0 ends with ENOENT.
        let mut addr = 0;
        let mut n = 0;
        loop {
            match query(maps.as_fd(), flags, addr, &mut name, &mut []) {
                Ok(a) => {
                    assert!(a.query.vma_start >= addr && a.query.vma_end > a.query.vma_start);
                    addr = a.query.vma_end;
                    n += 1;
                }
                Err(e) => {
                    assert_eq!(e.raw_os_error(), Some(libc::ENOENT), "{e}");
                    break;
                }
            }
        }
        assert!(n >= 2, "{n} executable mappings");
    }
}
