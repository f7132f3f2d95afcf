//! The executable mappings of a running process, as `perf record` synthesizes MMAP2 records for
//! the processes that ran before its events were enabled: asked of the kernel one mapping at a
//! time (`PROCMAP_QUERY`, Linux 6.11) with each file's build id, rather than `/proc/PID/maps`'s
//! text of every mapping formatted and parsed again.

use std::ffi::OsString;
use std::fs::File;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStringExt;

use perf_sys::procmap::{self, PROCMAP_QUERY_COVERING_OR_NEXT_VMA, PROCMAP_QUERY_VMA_EXECUTABLE};

use crate::error::{Error, Result};

/// The longest name asked for (`PATH_MAX`); a longer one (`ENAMETOOLONG`) is left without.
const NAME_MAX: usize = 4096;

/// Build ids are at most 20 bytes (SHA-1) in the kernel's reader; room for any note.
const BUILD_ID_MAX: usize = 64;

/// One executable mapping of a process.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExecMapping {
    /// The first address.
    pub start: u64,
    /// The address after the last.
    pub end: u64,
    /// The offset in the file of `start` (0 where no file is mapped).
    pub offset: u64,
    /// The file's inode; 0 for memory that is no file's (anonymous, `[vdso]`).
    pub inode: u64,
    /// The name `/proc/PID/maps` shows: the file's path (with ` (deleted)` once unlinked), a
    /// kernel name such as `[vdso]`, an anonymous mapping's name; `None` for none.
    pub name: Option<OsString>,
    /// The mapped file's GNU build id, as the kernel read it from the file mapped (`None` where
    /// it has none, or its note could not be read).
    pub build_id: Option<Vec<u8>>,
}

/// The executable mappings of process `pid`, lowest first; `Ok(None)` where the kernel cannot be
/// asked one by one (before Linux 6.11): read `/proc/PID/maps` then. The x86-64 `[vsyscall]`
/// page, which `/proc/PID/maps` lists last, is not one of them (it is no mapping of the
/// process's own, and legacy code alone calls into it).
///
/// Since Linux 6.11.
///
/// # Errors
///
/// [`Error::Io`] when `/proc/PID/maps` cannot be opened or the kernel refuses the query (the
/// process is gone, or may not be read: another user's without `CAP_SYS_PTRACE`).
#[doc(alias = "PROCMAP_QUERY")]
pub fn executable_mappings(pid: u32) -> Result<Option<Vec<ExecMapping>>> {
    let path = format!("/proc/{pid}/maps");
    let maps = File::open(&path).map_err(|e| Error::io(format!("opening {path}"), e))?;
    let (mut name, mut build_id) = (vec![0u8; NAME_MAX], [0u8; BUILD_ID_MAX]);
    let flags = PROCMAP_QUERY_COVERING_OR_NEXT_VMA | PROCMAP_QUERY_VMA_EXECUTABLE;
    let refused = |e| Error::io(format!("PROCMAP_QUERY on {path}"), e);
    let mut found = Vec::new();
    let mut addr = 0u64;
    loop {
        let a = match procmap::query(maps.as_fd(), flags, addr, &mut name, &mut build_id) {
            Ok(a) => a,
            Err(e) => match e.raw_os_error() {
                Some(libc::ENOENT) => break,
                Some(libc::ENOTTY) if found.is_empty() => return Ok(None),
                // A name longer than PATH_MAX: the mapping, unnamed.
                Some(libc::ENAMETOOLONG) => {
                    procmap::query(maps.as_fd(), flags, addr, &mut [], &mut build_id)
                        .map_err(refused)?
                }
                _ => return Err(refused(e)),
            },
        };
        let q = a.query;
        // The kernel answers a mapping at or above the address asked; anything else would loop.
        if q.vma_end <= q.vma_start || q.vma_end <= addr {
            break;
        }
        found.push(ExecMapping {
            start: q.vma_start,
            end: q.vma_end,
            offset: q.vma_offset,
            inode: q.inode,
            name: (a.name_len > 0).then(|| OsString::from_vec(name[..a.name_len].to_vec())),
            build_id: (a.build_id_len > 0).then(|| build_id[..a.build_id_len].to_vec()),
        });
        addr = q.vma_end;
    }
    Ok(Some(found))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every executable line of this process's `/proc/self/maps`, and nothing else, in order
    /// (taken after the query, with no mapping made between: the test maps nothing itself), but
    /// x86-64's `[vsyscall]` page, which is no mapping of the process (the text adds the gate
    /// page; the query walks the process's own mappings).
    #[test]
    fn the_same_mappings_as_the_text_of_proc_maps() {
        let Some(got) = executable_mappings(std::process::id()).unwrap() else {
            println!("skipped: PROCMAP_QUERY needs Linux 6.11");
            return;
        };
        let text = std::fs::read_to_string("/proc/self/maps").unwrap();
        let want: Vec<(u64, u64, Option<String>)> = text
            .lines()
            .filter_map(|l| {
                let mut it = l.splitn(6, ' ');
                let (s, e) = it.next()?.split_once('-')?;
                let perms = it.next()?;
                let name = it.nth(3).unwrap_or("").trim_start();
                (perms.as_bytes()[2] == b'x' && name != "[vsyscall]").then(|| {
                    (
                        u64::from_str_radix(s, 16).unwrap(),
                        u64::from_str_radix(e, 16).unwrap(),
                        (!name.is_empty()).then(|| name.to_owned()),
                    )
                })
            })
            .collect();
        let got: Vec<(u64, u64, Option<String>)> = got
            .iter()
            .map(|m| {
                (
                    m.start,
                    m.end,
                    m.name.as_ref().map(|n| n.to_string_lossy().into_owned()),
                )
            })
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_process_that_is_not_there_is_an_error() {
        assert!(executable_mappings(u32::MAX).is_err());
    }
}
