//! Address spaces: which file is mapped where in each process, and the kernel's symbols.
//!
//! A process's space is seeded from `/proc/PID/maps` when it is first seen (it was running before
//! the capture) and then kept current from the records: MMAP2 adds a mapping (replacing whatever
//! it overlaps, which is also how an unmapped range is forgotten: the kernel reports `mmap` but not
//! `munmap`), an exec (COMM with `comm_exec`) empties the space before the new image's MMAP2
//! records, FORK copies the parent's space to a new process (replacing a reused pid's old one),
//! and EXIT of the process drops it.
//!
//! Every distinct mapping (file, range, file offset, build id) is interned once in a table shared
//! by all processes, so that a frame can name its mapping by index and still be symbolized after
//! the process is gone.

pub mod build_id;
mod kernel;
pub mod perf_map;

use foldhash::HashMap;
use std::collections::BTreeMap;
use std::fs;
use std::sync::Arc;
use std::time::Duration;

use crate::untrusted::{self, Asked, Loader};

pub use kernel::{KernelSymbol, KernelSymbols};

/// Index of a [`Mapping`] in [`AddressSpaces::mappings`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MappingId(pub u32);

/// A file (or pseudo-file such as `[vdso]`) mapped into a process.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Mapping {
    /// First address of the mapping.
    pub start: u64,
    /// Address past its end.
    pub end: u64,
    /// Offset in the file of `start` (`pgoff`).
    pub file_offset: u64,
    /// The file's path as the kernel names it (`/usr/lib/...`, `[vdso]`, `//anon`).
    pub path: Arc<str>,
    /// The ELF build id: from the MMAP2 record (Linux 5.12+), else read from the file.
    pub build_id: Option<Vec<u8>>,
}

impl Mapping {
    /// The file offset of `addr`, an address inside the mapping.
    pub fn file_offset_of(&self, addr: u64) -> u64 {
        addr.wrapping_sub(self.start).wrapping_add(self.file_offset)
    }

    /// Whether the path names a file on disk (not `[vdso]`, `//anon`, a deleted file).
    pub fn is_file(&self) -> bool {
        self.path.starts_with('/')
            && !self.path.starts_with("//")
            && !self.path.ends_with(" (deleted)")
    }

    /// The build id in lowercase hex, as `readelf -n` prints it.
    pub fn build_id_hex(&self) -> Option<String> {
        self.build_id
            .as_ref()
            .map(|id| id.iter().map(|b| format!("{b:02x}")).collect())
    }
}

/// One process's mappings by start address: `start -> (end, mapping)`.
type Space = BTreeMap<u64, (u64, MappingId)>;

/// The address spaces of the processes seen, and the table of every mapping.
#[derive(Debug, Default)]
pub struct AddressSpaces {
    mappings: Vec<Mapping>,
    /// By mapping, the process that first mapped it: whose root its path is resolved in.
    mapped_by: Vec<u32>,
    index: HashMap<Mapping, MappingId>,
    spaces: HashMap<u32, Space>,
    /// Build ids read from files, by path (read once).
    file_ids: HashMap<Arc<str>, Option<Vec<u8>>>,
    /// Processes whose `/proc/PID/maps` could not be read when first seen (gone already).
    unseeded: u64,
    /// Per process, a number that changes whenever its space does (for caches of a space).
    generations: HashMap<u32, u64>,
    next_generation: u64,
    /// Who reads build ids from files, and how long a read is waited for.
    loader: Loader,
    wait: Option<Duration>,
}

impl AddressSpaces {
    /// No processes yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads build ids from files with `loader` (shared with the other caches of a capture),
    /// waiting at most `wait` for one (default [`untrusted::DRAIN_WAIT`]): a build id not read by
    /// then is left out of the mapping (and asked for again for the next mapping of the file).
    pub fn set_loader(&mut self, loader: Loader, wait: Duration) {
        self.loader = loader;
        self.wait = Some(wait);
    }

    /// Every mapping seen, indexed by [`MappingId`].
    pub fn mappings(&self) -> &[Mapping] {
        &self.mappings
    }

    /// The mapping `id`.
    pub fn mapping(&self, id: MappingId) -> Option<&Mapping> {
        self.mappings.get(id.0 as usize)
    }

    /// The process that first mapped `id`: its path names a file in that process's root (see
    /// [`crate::untrusted::open`]).
    pub fn mapped_by(&self, id: MappingId) -> Option<u32> {
        self.mapped_by.get(id.0 as usize).copied()
    }

    /// Processes first seen after they had exited, whose frames stay unmapped.
    pub fn unseeded(&self) -> u64 {
        self.unseeded
    }

    /// Whether `pid`'s space is known.
    pub fn knows(&self, pid: u32) -> bool {
        self.spaces.contains_key(&pid)
    }

    /// A number that changes whenever `pid`'s space changes (a mapping, an exec, a fork, an
    /// exit): what a cache derived from the space compares.
    pub fn generation(&self, pid: u32) -> u64 {
        self.generations.get(&pid).copied().unwrap_or(0)
    }

    /// `pid`'s mappings: each address range with its mapping, by address.
    pub fn space(&self, pid: u32) -> impl Iterator<Item = (std::ops::Range<u64>, MappingId)> + '_ {
        self.spaces
            .get(&pid)
            .into_iter()
            .flatten()
            .map(|(&start, &(end, id))| (start..end, id))
    }

    fn touch(&mut self, pid: u32) {
        self.next_generation += 1;
        self.generations.insert(pid, self.next_generation);
    }

    /// Seeds `pid`'s space from `/proc/PID/maps` (its executable mappings). Returns `false` when
    /// the file cannot be read (the process is gone).
    ///
    /// Since Linux 6.11 the kernel is asked for the executable mappings alone, each with its
    /// file's build id (`PROCMAP_QUERY`): no text of every mapping formatted and parsed, and no
    /// file opened for a build id the kernel read from the file mapped. Before, or where the
    /// query fails, the text is read.
    pub fn seed_from_proc(&mut self, pid: u32) -> bool {
        if let Ok(Some(found)) = perf_event::sample::executable_mappings(pid) {
            self.seed_queried(pid, &found);
            return true;
        }
        match fs::read_to_string(format!("/proc/{pid}/maps")) {
            Ok(text) => {
                self.seed(pid, &text);
                true
            }
            Err(_) => {
                self.spaces.entry(pid).or_default();
                self.unseeded += 1;
                false
            }
        }
    }

    /// Seeds `pid`'s space from the text of a `/proc/PID/maps` file, replacing what was known.
    pub fn seed(&mut self, pid: u32, maps: &str) {
        self.spaces.insert(pid, Space::new());
        self.touch(pid);
        for line in maps.lines() {
            let Some(m) = parse_maps_line(line) else {
                continue;
            };
            self.mmap(pid, m.start, m.end - m.start, m.file_offset, &m.path, None);
        }
    }

    /// Seeds `pid`'s space from its executable mappings as the kernel answered them, replacing
    /// what was known: as [`seed`](Self::seed) does from the text (a mapping without a name is
    /// `//anon`), with the build ids the kernel read.
    pub fn seed_queried(&mut self, pid: u32, found: &[perf_event::sample::ExecMapping]) {
        self.spaces.insert(pid, Space::new());
        self.touch(pid);
        for m in found {
            let name = m.name.as_ref().map(|n| n.to_string_lossy());
            let path = name.as_deref().unwrap_or(ANON);
            let len = m.end.saturating_sub(m.start);
            self.mmap(pid, m.start, len, m.offset, path, m.build_id.clone());
        }
    }

    /// A mapping was made (an MMAP2 record): `len` bytes at `start` of `path` from `file_offset`.
    pub fn mmap(
        &mut self,
        pid: u32,
        start: u64,
        len: u64,
        file_offset: u64,
        path: &str,
        build_id: Option<Vec<u8>>,
    ) {
        let Some(end) = start.checked_add(len).filter(|_| len > 0) else {
            return;
        };
        let path: Arc<str> = Arc::from(path);
        let build_id = match build_id.filter(|id| !id.is_empty()) {
            Some(id) => Some(id),
            None => self.file_build_id(&path, pid),
        };
        let mapping = Mapping {
            start,
            end,
            file_offset,
            path,
            build_id,
        };
        let id = match self.index.get(&mapping) {
            Some(&id) => id,
            None => {
                let id = MappingId(self.mappings.len() as u32);
                self.index.insert(mapping.clone(), id);
                self.mappings.push(mapping);
                self.mapped_by.push(pid);
                id
            }
        };
        let space = self.spaces.entry(pid).or_default();
        unmap(space, start, end);
        space.insert(start, (end, id));
        self.touch(pid);
    }

    /// `pid` executed a new image: its old mappings are gone.
    pub fn exec(&mut self, pid: u32) {
        self.spaces.insert(pid, Space::new());
        self.touch(pid);
    }

    /// A new process `child` was forked from `parent`: it starts with a copy of the parent's space.
    /// (A new thread, `child == parent`, shares its process's space and changes nothing.)
    pub fn fork(&mut self, parent: u32, child: u32) {
        if parent == child {
            return;
        }
        let space = self.spaces.get(&parent).cloned().unwrap_or_default();
        self.spaces.insert(child, space);
        self.touch(child);
    }

    /// The process `pid` exited.
    pub fn exit(&mut self, pid: u32) {
        self.spaces.remove(&pid);
        self.generations.remove(&pid);
    }

    /// The mapping of `addr` in `pid`'s space.
    pub fn find(&self, pid: u32, addr: u64) -> Option<MappingId> {
        let space = self.spaces.get(&pid)?;
        let (_, &(end, id)) = space.range(..=addr).next_back()?;
        (addr < end).then_some(id)
    }

    /// Drops the mappings that no process has any more (and the build ids of files no mapping
    /// names) and renumbers the rest, so that a long capture's table stays as large as what is
    /// mapped now. Returns, by old id, the new id (`None`: dropped): whatever holds old ids must be
    /// renumbered with it.
    pub fn compact(&mut self) -> Vec<Option<MappingId>> {
        let mut remap: Vec<Option<MappingId>> = vec![None; self.mappings.len()];
        let mut kept: Vec<usize> = Vec::new();
        for space in self.spaces.values_mut() {
            for (_, id) in space.values_mut() {
                let old = id.0 as usize;
                let Some(slot) = remap.get_mut(old) else {
                    continue;
                };
                *id = *slot.get_or_insert_with(|| {
                    kept.push(old);
                    MappingId(kept.len() as u32 - 1)
                });
            }
        }
        let mut old: Vec<Option<Mapping>> = std::mem::take(&mut self.mappings)
            .into_iter()
            .map(Some)
            .collect();
        self.mappings = kept.iter().filter_map(|&i| old[i].take()).collect();
        self.mapped_by = kept
            .iter()
            .map(|&i| self.mapped_by.get(i).copied().unwrap_or(0))
            .collect();
        self.index = self
            .mappings
            .iter()
            .enumerate()
            .map(|(i, m)| (m.clone(), MappingId(i as u32)))
            .collect();
        let live: std::collections::HashSet<&str> =
            self.mappings.iter().map(|m| &*m.path).collect();
        self.file_ids.retain(|p, _| live.contains(&**p));
        remap
    }

    /// The build id of the file at `path` as `pid` names it, read once (a file that has none or
    /// cannot be read is remembered as such). Deleted files and pseudo-files are not read.
    fn file_build_id(&mut self, path: &Arc<str>, pid: u32) -> Option<Vec<u8>> {
        if let Some(id) = self.file_ids.get(path) {
            return id.clone();
        }
        let names_a_file =
            path.starts_with('/') && !path.starts_with("//") && !path.ends_with(" (deleted)");
        if !names_a_file {
            self.file_ids.insert(Arc::clone(path), None);
            return None;
        }
        let owned = path.to_string();
        let wait = self.wait.unwrap_or(untrusted::DRAIN_WAIT);
        let key = untrusted::key(("build id", &**path, pid));
        let id = match self
            .loader
            .ask(key, wait, move || build_id::read(&owned, Some(pid)))
        {
            Asked::Ready(id) => id,
            Asked::Pending => return None,
        };
        self.file_ids.insert(Arc::clone(path), id.clone());
        id
    }
}

/// Removes `[start, end)` from `space`, trimming mappings that overlap it at either side.
fn unmap(space: &mut Space, start: u64, end: u64) {
    // Mappings in a space do not overlap, so their ends grow with their starts: walking down from
    // `end`, the overlapping ones come first, then the first one that ends at or below `start`.
    let all: Vec<u64> = space
        .range(..end)
        .rev()
        .take_while(|(_, &(e, _))| e > start)
        .map(|(&s, _)| s)
        .collect();
    for s in all {
        let Some((e, id)) = space.remove(&s) else {
            continue;
        };
        if s < start {
            space.insert(s, (start, id));
        }
        if e > end {
            // The tail keeps the same mapping (and so the same file offset arithmetic) for its range.
            space.insert(end, (e, id));
        }
    }
}

/// What a mapping without a name is called (perf's name for anonymous memory, as MMAP2 records
/// give it).
const ANON: &str = "//anon";

/// One line of `/proc/PID/maps`, when it is executable.
pub(crate) struct MapsLine {
    pub start: u64,
    pub end: u64,
    pub file_offset: u64,
    pub path: String,
}

pub(crate) fn parse_maps_line(line: &str) -> Option<MapsLine> {
    // 7f0e4b5d6000-7f0e4b6f0000 r-xp 00026000 fe:01 1311 /usr/lib/x86_64-linux-gnu/libc.so.6
    let mut it = line.splitn(6, ' ');
    let (start, end) = it.next()?.split_once('-')?;
    let perms = it.next()?;
    let offset = it.next()?;
    let _dev = it.next()?;
    let _inode = it.next()?;
    let path = it.next().unwrap_or("").trim_start();
    if perms.as_bytes().get(2) != Some(&b'x') {
        return None;
    }
    let start = u64::from_str_radix(start, 16).ok()?;
    let end = u64::from_str_radix(end, 16).ok()?;
    Some(MapsLine {
        start,
        end: end.max(start),
        file_offset: u64::from_str_radix(offset, 16).ok()?,
        path: if path.is_empty() {
            ANON.into()
        } else {
            path.into()
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &str = "\
55d0a0a00000-55d0a0a01000 r--p 00000000 fe:01 100 /bin/work
55d0a0a01000-55d0a0a02000 r-xp 00001000 fe:01 100 /bin/work
7f0e4b5d6000-7f0e4b6f0000 r-xp 00026000 fe:01 1311 /usr/lib/libc.so.6
7ffd5a3f0000-7ffd5a3f2000 r-xp 00000000 00:00 0 [vdso]
";

    fn path(s: &AddressSpaces, pid: u32, addr: u64) -> Option<String> {
        s.find(pid, addr)
            .map(|id| s.mapping(id).unwrap().path.to_string())
    }

    /// This process seeded from the kernel's answers and from the text of `/proc/self/maps` (its
    /// build ids read from the files): the same mappings, paths, offsets and build ids, but the
    /// text's `[vsyscall]` page (no mapping of the process's own).
    #[test]
    fn the_kernels_answers_seed_the_space_the_text_does() {
        let me = std::process::id();
        let Some(found) = perf_event::sample::executable_mappings(me).unwrap() else {
            println!("skipped: PROCMAP_QUERY needs Linux 6.11");
            return;
        };
        let text = std::fs::read_to_string("/proc/self/maps").unwrap();
        let (mut asked, mut read) = (AddressSpaces::new(), AddressSpaces::new());
        asked.set_loader(Loader::new(), Duration::from_secs(30));
        read.set_loader(Loader::new(), Duration::from_secs(30));
        asked.seed_queried(me, &found);
        read.seed(me, &text);
        let all = |s: &AddressSpaces| -> Vec<_> {
            s.space(me)
                .map(|(range, id)| {
                    let m = s.mapping(id).unwrap();
                    (range, m.path.to_string(), m.file_offset, m.build_id.clone())
                })
                .filter(|m| m.1 != "[vsyscall]")
                .collect()
        };
        let (asked, read) = (all(&asked), all(&read));
        assert_eq!(asked, read);
        assert!(
            read.iter().filter(|m| m.3.is_some()).count() >= 2,
            "the test binary and libc have build ids: {read:?}"
        );
    }

    #[test]
    fn seeded_from_maps_executable_only() {
        let mut s = AddressSpaces::new();
        s.seed(7, MAPS);
        assert_eq!(path(&s, 7, 0x55d0a0a00500), None, "not executable");
        assert_eq!(path(&s, 7, 0x55d0a0a01010).as_deref(), Some("/bin/work"));
        let id = s.find(7, 0x7f0e4b5d6010).unwrap();
        assert_eq!(
            s.mapping(id).unwrap().file_offset_of(0x7f0e4b5d6010),
            0x26010
        );
        assert_eq!(path(&s, 7, 0x7ffd5a3f0001).as_deref(), Some("[vdso]"));
        assert_eq!(path(&s, 7, 0x7ffd5a3f2000), None, "end is exclusive");
    }

    #[test]
    fn dlopen_exec_fork_exit_and_pid_reuse() {
        let mut s = AddressSpaces::new();
        s.seed(7, MAPS);
        // dlopen after the start.
        s.mmap(
            7,
            0x7f00_0000_0000,
            0x2000,
            0x1000,
            "/usr/lib/libplug.so",
            None,
        );
        assert_eq!(
            path(&s, 7, 0x7f00_0000_1fff).as_deref(),
            Some("/usr/lib/libplug.so")
        );
        // A process forked from 7 sees the library; a thread (same pid) changes nothing.
        s.fork(7, 8);
        s.fork(7, 7);
        assert_eq!(
            path(&s, 8, 0x7f00_0000_0010).as_deref(),
            Some("/usr/lib/libplug.so")
        );
        // 8 execs: its old mappings go, the new image's come.
        s.exec(8);
        assert_eq!(path(&s, 8, 0x7f00_0000_0010), None);
        s.mmap(8, 0x40_0000, 0x1000, 0, "/bin/other", None);
        assert_eq!(path(&s, 8, 0x40_0010).as_deref(), Some("/bin/other"));
        assert_eq!(
            path(&s, 7, 0x7f00_0000_0010).as_deref(),
            Some("/usr/lib/libplug.so")
        );
        // Each change of 8's space is seen by its generation, not by 7's.
        let (g7, g8) = (s.generation(7), s.generation(8));
        s.mmap(8, 0x50_0000, 0x1000, 0, "/bin/more", None);
        assert_ne!(s.generation(8), g8);
        assert_eq!(s.generation(7), g7);
        assert_eq!(
            s.space(8).map(|(r, _)| r.start).collect::<Vec<_>>(),
            [0x40_0000, 0x50_0000]
        );
        // 8 exits; its pid is reused by a child of 7.
        s.exit(8);
        assert!(!s.knows(8));
        s.fork(7, 8);
        assert_eq!(path(&s, 8, 0x40_0010), None);
        assert_eq!(path(&s, 8, 0x55d0a0a01010).as_deref(), Some("/bin/work"));
    }

    #[test]
    fn a_new_mapping_replaces_the_overlapped_part_of_old_ones() {
        let mut s = AddressSpaces::new();
        s.mmap(1, 0x1000, 0x3000, 0, "/a", None);
        // munmap + mmap of the middle page.
        s.mmap(1, 0x2000, 0x1000, 0, "/b", None);
        assert_eq!(path(&s, 1, 0x1fff).as_deref(), Some("/a"));
        assert_eq!(path(&s, 1, 0x2000).as_deref(), Some("/b"));
        assert_eq!(path(&s, 1, 0x3000).as_deref(), Some("/a"));
        // The tail of /a keeps its file offsets.
        let id = s.find(1, 0x3010).unwrap();
        assert_eq!(s.mapping(id).unwrap().file_offset_of(0x3010), 0x2010);
        // One that covers everything.
        s.mmap(1, 0x0, 0x10000, 0, "/c", None);
        for a in [0x1000, 0x2000, 0x3000] {
            assert_eq!(path(&s, 1, a).as_deref(), Some("/c"));
        }
        // The same mapping again is interned once.
        let n = s.mappings().len();
        s.mmap(2, 0x0, 0x10000, 0, "/c", None);
        assert_eq!(s.mappings().len(), n);
    }

    #[test]
    fn compaction_keeps_what_is_mapped_and_renumbers_it() {
        let mut s = AddressSpaces::new();
        s.mmap(1, 0x1000, 0x1000, 0, "[a]", None);
        s.mmap(2, 0x1000, 0x1000, 0, "[b]", None);
        s.mmap(2, 0x5000, 0x1000, 0, "[c]", None);
        s.mmap(1, 0x9000, 0x1000, 0, "[c]", None);
        assert_eq!(s.mappings().len(), 4);
        s.exit(1);
        let remap = s.compact();
        assert_eq!(s.mappings().len(), 2);
        assert_eq!(remap[0], None);
        assert_eq!(remap[3], None);
        let b = remap[1].unwrap();
        assert_eq!(s.find(2, 0x1800), Some(b));
        assert_eq!(&*s.mapping(b).unwrap().path, "[b]");
        assert_eq!(&*s.mapping(s.find(2, 0x5000).unwrap()).unwrap().path, "[c]");
        // Interning still works after it.
        s.mmap(3, 0x5000, 0x1000, 0, "[c]", None);
        assert_eq!(s.find(3, 0x5000), s.find(2, 0x5000));
        assert_eq!(s.mappings().len(), 2);
    }

    #[test]
    fn malformed_lines_and_records_are_ignored() {
        let mut s = AddressSpaces::new();
        s.seed(1, "garbage\nzz-10 r-xp 0 0 0 /x\n10-20 r-xp\n");
        assert_eq!(s.mappings().len(), 0);
        s.mmap(1, u64::MAX, 2, 0, "/wrap", None);
        s.mmap(1, 0x10, 0, 0, "/empty", None);
        assert_eq!(s.mappings().len(), 0);
    }
}
