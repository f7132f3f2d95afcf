//! What the kernel will not report because it predates the recording: the names of running threads
//! (COMM), their executable mappings (MMAP2, from `/proc/PID/maps`) and the kernel's own mapping
//! (MMAP of `[kernel.kallsyms]`), built as perf builds them, with the kernel's build id.

use std::fs;

use perf_core::record::{Comm, Misc, Mmap, Mmap2, Mmap2File, Record, SampleId, ThreadId};
use perf_core::ParseConfig;
use perf_event::perf_sys as sys;

/// Builds the sample_id trailer of synthesized records: the fields the layout has, time 0 (before
/// every record the kernel writes, so perf processes them first), the id of one of our counters.
#[derive(Clone, Copy)]
pub struct Ids {
    pub cfg: ParseConfig,
    pub id: u64,
}

impl Ids {
    pub fn sample_id(&self, pid: u32, tid: u32) -> SampleId {
        let has =
            |bit: u32| self.cfg.sample_id_all() && self.cfg.sample_type() & u64::from(bit) != 0;
        SampleId {
            thread: has(sys::PERF_SAMPLE_TID).then_some(ThreadId { pid, tid }),
            time: has(sys::PERF_SAMPLE_TIME).then_some(0),
            id: has(sys::PERF_SAMPLE_ID).then_some(self.id),
            stream_id: has(sys::PERF_SAMPLE_STREAM_ID).then_some(self.id),
            cpu: has(sys::PERF_SAMPLE_CPU).then_some(0),
            identifier: has(sys::PERF_SAMPLE_IDENTIFIER).then_some(self.id),
        }
    }
}

/// Every process id under /proc.
pub fn all_pids() -> Vec<u32> {
    numeric_entries("/proc")
}

/// The thread ids of `pid` (empty when it is gone).
pub fn threads(pid: u32) -> Vec<u32> {
    numeric_entries(&format!("/proc/{pid}/task"))
}

fn numeric_entries(dir: &str) -> Vec<u32> {
    let mut out: Vec<u32> = fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    out.sort_unstable();
    out
}

/// The COMM records of `pid`'s threads and the MMAP2 records of its executable mappings. A process
/// that exits meanwhile yields what could be read.
pub fn process(pid: u32, ids: &Ids) -> Vec<Record<'static>> {
    let mut out = Vec::new();
    for tid in threads(pid) {
        let Ok(name) = fs::read(format!("/proc/{pid}/task/{tid}/comm")) else {
            continue;
        };
        let name = name.strip_suffix(b"\n").unwrap_or(&name).to_vec();
        out.push(Record::Comm(Comm {
            misc: Misc(0),
            pid,
            tid,
            comm: name.into(),
            sample_id: ids.sample_id(pid, tid),
        }));
    }
    if let Ok(maps) = fs::read_to_string(format!("/proc/{pid}/maps")) {
        out.extend(
            maps.lines()
                .filter_map(|l| mapping(l, pid, ids))
                .map(Record::Mmap2),
        );
    }
    out
}

/// One line of /proc/PID/maps as an MMAP2 record, when the mapping is executable.
///
/// `start-end perms offset maj:min inode [path]`; anonymous executable memory is `//anon`, as perf
/// names it.
fn mapping(line: &str, pid: u32, ids: &Ids) -> Option<Mmap2<'static>> {
    let mut f = line.split_whitespace();
    let (range, perms, off, dev, ino) = (f.next()?, f.next()?, f.next()?, f.next()?, f.next()?);
    if !perms.contains('x') {
        return None;
    }
    // The path is the rest of the line, spaces included.
    let path = line
        .splitn(6, char::is_whitespace)
        .nth(5)
        .map(str::trim)
        .unwrap_or("");
    let path = if path.is_empty() { "//anon" } else { path };
    let (s, e) = range.split_once('-')?;
    let (start, end) = (hex(s)?, hex(e)?);
    let (maj, min) = dev.split_once(':')?;
    let mut prot = 0;
    for (c, bit) in [
        ('r', libc::PROT_READ),
        ('w', libc::PROT_WRITE),
        ('x', libc::PROT_EXEC),
    ] {
        if perms.contains(c) {
            prot |= bit as u32;
        }
    }
    let flags = if perms.contains('s') {
        libc::MAP_SHARED
    } else {
        libc::MAP_PRIVATE
    } as u32;
    Some(Mmap2 {
        misc: Misc(sys::PERF_RECORD_MISC_USER as u16),
        pid,
        tid: pid,
        addr: start,
        len: end.checked_sub(start)?,
        pgoff: hex(off)?,
        file: Mmap2File::Inode {
            maj: u32::from_str_radix(maj, 16).ok()?,
            min: u32::from_str_radix(min, 16).ok()?,
            ino: ino.parse().ok()?,
            ino_generation: 0,
        },
        prot,
        flags,
        filename: path.as_bytes().to_vec().into(),
        sample_id: ids.sample_id(pid, pid),
    })
}

fn hex(s: &str) -> Option<u64> {
    u64::from_str_radix(s, 16).ok()
}

/// The address of `_text` in /proc/kallsyms: where the kernel image starts. `None` when it cannot
/// be read or is hidden (`kptr_restrict` shows zeros).
pub fn kernel_text() -> Option<u64> {
    let syms = fs::read_to_string("/proc/kallsyms").ok()?;
    let addr = syms.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        let (addr, _kind, name) = (f.next()?, f.next()?, f.next()?);
        (name == "_text").then(|| hex(addr))?
    })?;
    (addr != 0).then_some(addr)
}

/// The MMAP perf itself writes for the kernel: `[kernel.kallsyms]_text` from `_text` to the end of the
/// address space, its `pgoff` the address of the `_text` symbol (perf relocates symbols with it), pid
/// -1 (the host kernel).
pub fn kernel_mmap(text: u64, ids: &Ids) -> Record<'static> {
    Record::Mmap(Mmap {
        misc: Misc(sys::PERF_RECORD_MISC_KERNEL as u16),
        pid: u32::MAX,
        tid: 0,
        addr: text,
        len: u64::MAX - text,
        pgoff: text,
        filename: b"[kernel.kallsyms]_text".to_vec().into(),
        sample_id: ids.sample_id(u32::MAX, 0),
    })
}

/// The running kernel's build id, from the ELF notes in /sys/kernel/notes (`NT_GNU_BUILD_ID`).
pub fn kernel_build_id() -> Option<Vec<u8>> {
    const NT_GNU_BUILD_ID: u32 = 3;
    let notes = fs::read("/sys/kernel/notes").ok()?;
    let word = |at: usize| -> Option<u32> {
        Some(u32::from_ne_bytes(notes.get(at..at + 4)?.try_into().ok()?))
    };
    let pad4 = |n: usize| n.checked_add(3).map(|n| n & !3);
    let mut at = 0;
    while at + 12 <= notes.len() {
        let (namesz, descsz, ty) = (word(at)? as usize, word(at + 4)? as usize, word(at + 8)?);
        let name_at = at + 12;
        let desc_at = name_at.checked_add(pad4(namesz)?)?;
        let next = desc_at.checked_add(pad4(descsz)?)?;
        if ty == NT_GNU_BUILD_ID && notes.get(name_at..name_at + namesz)? == b"GNU\0" {
            let id = notes.get(desc_at..desc_at + descsz)?;
            return (!id.is_empty() && id.len() <= 20).then(|| id.to_vec());
        }
        at = next;
    }
    None
}
