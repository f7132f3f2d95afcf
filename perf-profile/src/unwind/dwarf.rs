//! `-g dwarf`: unwinding a copy of the user stack with the binaries' DWARF CFI, with framehop.
//!
//! Each sample carries the user registers framehop needs (`PERF_SAMPLE_REGS_USER`: the
//! instruction, stack and frame pointers; on aarch64 also the link register) and a copy of the top
//! of the user stack (`PERF_SAMPLE_STACK_USER`). framehop walks it with the `.eh_frame` (indexed by
//! `.eh_frame_hdr`) or `.debug_frame` of the file each address is mapped from, falling back to the
//! frame pointer where a file has no tables.
//!
//! Each file's unwind sections are read once (cached by path and build id; a file rebuilt since it
//! was mapped is not used) and shared by every process that maps it. Each process gets a framehop
//! unwinder built from its address space, rebuilt when the space changes.
//!
//! The files are opened through [`crate::untrusted`] (in the mapping process's root, no links,
//! regular files only) and the sections kept are charged to the capture's [`Budget`]: a file
//! whose sections do not fit, once the files no process's unwinder uses any more are evicted
//! (least recently used first), is left without tables (its frames end the unwinding there) and
//! remembered as failed rather than read again. A process's unwinder holds the files it was built
//! from, so their bytes and their charge go together.

use std::collections::HashMap;
use std::fmt;
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use framehop::{
    CacheNative, ExplicitModuleSectionInfo, FrameAddress, MayAllocateDuringUnwind, Module,
    UnwindRegsNative, Unwinder, UnwinderNative,
};

use super::elf::{self, UnwindSections};
use super::{Context, Ending, RawFrame};
use crate::maps::{build_id, AddressSpaces, Mapping};
use crate::untrusted::{self, Asked, Budget, Charge, Loader};

/// Frames beyond this many are not unwound (a corrupt stack that loops): the stack is
/// [`Ending::Truncated`] there.
pub const MAX_FRAMES: usize = 512;

/// The user registers a sample must carry (`sample_regs_user`): `perf_regs.h`'s numbering.
#[cfg(target_arch = "x86_64")]
pub const REGS_MASK: u64 = (1 << 6) | (1 << 7) | (1 << 8); // BP, SP, IP
/// The user registers a sample must carry (`sample_regs_user`): `perf_regs.h`'s numbering.
#[cfg(target_arch = "aarch64")]
pub const REGS_MASK: u64 = (1 << 29) | (1 << 30) | (1 << 31) | (1 << 32); // FP, LR, SP, PC

/// The sampled pc, the stack pointer and framehop's registers, from the values of
/// [`REGS_MASK`] in bit order.
#[cfg(target_arch = "x86_64")]
fn registers(regs: &[u64]) -> Option<(u64, u64, UnwindRegsNative)> {
    let &[bp, sp, ip] = regs else { return None };
    Some((ip, sp, UnwindRegsNative::new(ip, sp, bp)))
}

#[cfg(target_arch = "aarch64")]
fn registers(regs: &[u64]) -> Option<(u64, u64, UnwindRegsNative)> {
    let &[fp, lr, sp, pc] = regs else { return None };
    Some((pc, sp, UnwindRegsNative::new(lr, sp, fp)))
}

/// A file: its path and build id.
type FileKey = (Arc<str>, Option<Vec<u8>>);

type Native = UnwinderNative<Bytes, MayAllocateDuringUnwind>;

/// A section's bytes, shared with framehop without copying them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Bytes(Arc<Vec<u8>>);

impl std::ops::Deref for Bytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.0
    }
}

/// One file's unwind sections and their charge to the budget.
#[derive(Debug)]
struct Loaded {
    sections: UnwindSections,
    _charge: Charge,
}

/// How long a file's tables are waited for: a frame in a file still loading ends the unwinding
/// as [`Ending::Pending`] (the sample is unwound again later) for this long after the file was
/// first asked for, then as [`Ending::Truncated`] (a file on a hung file system never comes).
pub const LOADING_WAIT: Duration = Duration::from_secs(2);

/// Files remembered as failed (not ELF, unreadable, refused, over the budget), at most.
const MAX_FAILED: usize = 4096;

/// Unwinds copied user stacks for every process of a capture.
pub struct DwarfUnwinder {
    /// Each file's unwind sections, by path and build id, with the clock of their last use;
    /// `None`: failed (not ELF, unreadable, refused by the door, over the budget, or rebuilt
    /// since it was mapped).
    files: HashMap<FileKey, Option<(Arc<Loaded>, u64)>>,
    /// Each process's unwinder, the generation of the space it was built from, and the files it
    /// holds.
    procs: HashMap<u32, Proc>,
    cache: CacheNative<MayAllocateDuringUnwind>,
    budget: Budget,
    clock: u64,
    /// Files refused for want of room while every file kept was held.
    no_room: Vec<FileKey>,
    /// Who reads the files (off the thread that drains the rings), and how long a read is waited
    /// for.
    loader: Loader,
    wait: Duration,
    /// Files still loading, and when each was first asked for.
    loading_since: HashMap<FileKey, Instant>,
}

/// An unwinder built while some of its files were still loading: built again on the next sample.
const PROVISIONAL: u64 = u64::MAX;

/// A process's unwinder.
struct Proc {
    /// The generation of the address space it was built from, or [`PROVISIONAL`].
    generation: u64,
    unwinder: Native,
    /// The files it holds.
    held: Vec<Arc<Loaded>>,
    /// The address ranges of the files still loading when it was built: framehop has no tables
    /// for them and would guess (frame pointers) past them. With each, whether it has been
    /// waited for [`LOADING_WAIT`] already.
    loading: Vec<Loading>,
}

/// A file still loading: its address range, and whether it was waited for [`LOADING_WAIT`].
type Loading = (Range<u64>, bool);

/// What a load of a file's sections found.
enum Load {
    Loaded(Loaded),
    Failed,
    /// The sections claim this many bytes and the budget has not that much left.
    NeedsRoom(usize),
}

impl fmt::Debug for DwarfUnwinder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DwarfUnwinder")
            .field("files", &self.files.len())
            .field("processes", &self.procs.len())
            .finish_non_exhaustive()
    }
}

impl Default for DwarfUnwinder {
    fn default() -> Self {
        Self::new()
    }
}

impl DwarfUnwinder {
    /// No files read yet.
    pub fn new() -> Self {
        Self::with_budget(Budget::default())
    }

    /// No files read yet; the sections kept are charged to `budget`.
    pub fn with_budget(budget: Budget) -> Self {
        Self {
            files: HashMap::new(),
            procs: HashMap::new(),
            cache: CacheNative::new(),
            budget,
            clock: 0,
            no_room: Vec::new(),
            loader: Loader::new(),
            wait: untrusted::DRAIN_WAIT,
            loading_since: HashMap::new(),
        }
    }

    /// Reads files with `loader` (shared with the other caches of a capture), waiting at most
    /// `wait` for one (default [`untrusted::DRAIN_WAIT`]): a process's unwinder built without a
    /// file still loading is built again on its next sample.
    pub fn set_loader(&mut self, loader: Loader, wait: Duration) {
        self.loader = loader;
        self.wait = wait;
    }

    /// The process `pid` exited: its unwinder goes.
    pub fn exit(&mut self, pid: u32) {
        if self.procs.remove(&pid).is_some_and(|p| !p.held.is_empty()) {
            // Room may be made now: the files refused for the lack of it are asked for again.
            for key in self.no_room.drain(..) {
                self.files.remove(&key);
            }
        }
    }

    /// Unwinds `stack` (the copy of the user stack from the stack pointer up) from `regs` (the
    /// values of [`REGS_MASK`], in bit order) in `pid`'s address space, appending the user
    /// frames (leaf first, return addresses minus one) to `out`, and says how the unwinding
    /// ended (see [Where a stack ends](super#where-a-stack-ends)). `None` when the registers are
    /// not the expected ones (nothing appended).
    pub fn unwind(
        &mut self,
        pid: u32,
        maps: &AddressSpaces,
        regs: &[u64],
        stack: &[u8],
        out: &mut Vec<RawFrame>,
    ) -> Option<Ending> {
        let (pc, sp, regs) = registers(regs)?;
        let generation = maps.generation(pid);
        let stale = self
            .procs
            .get(&pid)
            .is_none_or(|p| p.generation != generation);
        if stale {
            // The old unwinder lets go of its files first: they may be evicted for the new one's.
            self.procs.remove(&pid);
            let (unwinder, held, loading) = self.build(pid, maps);
            let generation = if loading.is_empty() {
                generation
            } else {
                PROVISIONAL
            };
            self.procs.insert(
                pid,
                Proc {
                    generation,
                    unwinder,
                    held,
                    loading,
                },
            );
        }
        let Proc {
            unwinder, loading, ..
        } = self.procs.get(&pid)?;
        let mut read_stack = |addr: u64| -> Result<u64, ()> {
            let at = usize::try_from(addr.checked_sub(sp).ok_or(())?).map_err(|_| ())?;
            let bytes = stack.get(at..at.checked_add(8).ok_or(())?).ok_or(())?;
            Ok(u64::from_le_bytes(bytes.try_into().map_err(|_| ())?))
        };
        let mut frames = unwinder.iter_frames(pc, regs, &mut self.cache, &mut read_stack);
        let mut n = 0;
        loop {
            let frame = match frames.next() {
                Ok(Some(frame)) => frame,
                // framehop found the root: the CFI's undefined return address, or a zero frame
                // pointer or return address where it had no tables.
                Ok(None) => return Some(Ending::Root),
                // A frame outside the copied stack, a stack that does not advance, ...
                Err(_) => return Some(Ending::Truncated),
            };
            let addr = match frame {
                FrameAddress::InstructionPointer(ip) => ip,
                ra @ FrameAddress::ReturnAddress(_) => ra.address_for_lookup(),
            };
            if addr == 0 {
                // A jump to address zero: nothing to unwind from.
                return Some(Ending::Truncated);
            }
            out.push(RawFrame {
                addr,
                context: Context::User,
            });
            n += 1;
            if let Some((_, overdue)) = loading.iter().find(|(r, _)| r.contains(&addr)) {
                return Some(if *overdue {
                    Ending::Truncated
                } else {
                    Ending::Pending
                });
            }
            if n >= MAX_FRAMES {
                return Some(Ending::Truncated);
            }
        }
    }

    /// A framehop unwinder with a module for every file mapping of `pid`'s space, the files it
    /// holds, and the ranges of the files still loading (empty: it is complete).
    fn build(
        &mut self,
        pid: u32,
        maps: &AddressSpaces,
    ) -> (Native, Vec<Arc<Loaded>>, Vec<Loading>) {
        let mut unwinder = Native::new();
        let mut held: Vec<Arc<Loaded>> = Vec::new();
        let mut loading = Vec::new();
        for (range, id) in maps.space(pid) {
            let Some(mapping) = maps.mapping(id) else {
                continue;
            };
            if !mapping.is_file() {
                continue;
            }
            let loaded = match self.sections(pid, mapping) {
                Asked::Ready(Some(loaded)) => loaded,
                Asked::Ready(None) => continue,
                Asked::Pending => {
                    let key = (Arc::clone(&mapping.path), mapping.build_id.clone());
                    if self.loading_since.len() >= MAX_FAILED {
                        // Stuck files by the thousand: they are waited for afresh.
                        self.loading_since.clear();
                    }
                    let since = *self.loading_since.entry(key).or_insert_with(Instant::now);
                    loading.push((range, since.elapsed() >= LOADING_WAIT));
                    continue;
                }
            };
            let sections = &loaded.sections;
            let Some(bias) = sections.bias(mapping.start, mapping.file_offset) else {
                continue;
            };
            let info = ExplicitModuleSectionInfo {
                base_svma: 0,
                text_svma: sections.text.clone(),
                got_svma: sections.got.clone(),
                eh_frame_svma: sections.eh_frame.as_ref().map(|s| s.svma.clone()),
                eh_frame: sections
                    .eh_frame
                    .as_ref()
                    .map(|s| Bytes(Arc::clone(&s.data))),
                eh_frame_hdr_svma: sections.eh_frame_hdr.as_ref().map(|s| s.svma.clone()),
                eh_frame_hdr: sections
                    .eh_frame_hdr
                    .as_ref()
                    .map(|s| Bytes(Arc::clone(&s.data))),
                debug_frame: sections
                    .debug_frame
                    .as_ref()
                    .map(|s| Bytes(Arc::clone(&s.data))),
                ..ExplicitModuleSectionInfo::default()
            };
            unwinder.add_module(Module::new(mapping.path.to_string(), range, bias, info));
            if !held.iter().any(|h| Arc::ptr_eq(h, &loaded)) {
                held.push(loaded);
            }
        }
        (unwinder, held, loading)
    }

    /// The unwind sections of a mapping's file (as process `pid` names it), read once, on the
    /// loader; `Ready(None)`: it has none (or failed, and is remembered as failed).
    fn sections(&mut self, pid: u32, mapping: &Mapping) -> Asked<Option<Arc<Loaded>>> {
        self.clock += 1;
        let key = (Arc::clone(&mapping.path), mapping.build_id.clone());
        if let Some(s) = self.files.get_mut(&key) {
            self.loading_since.remove(&key);
            return Asked::Ready(s.as_mut().map(|(loaded, used)| {
                *used = self.clock;
                Arc::clone(loaded)
            }));
        }
        let (path, build_id, budget) = (
            mapping.path.to_string(),
            mapping.build_id.clone(),
            self.budget.clone(),
        );
        let job = move || load(&path, pid, build_id.as_deref(), &budget);
        let loaded = match self.loader.ask(untrusted::key(&key), self.wait, job) {
            Asked::Pending => return Asked::Pending,
            Asked::Ready(Load::Loaded(l)) => Some(Arc::new(l)),
            Asked::Ready(Load::Failed) => None,
            // Room is made from the files no unwinder holds, least recently used first, then the
            // file is asked for again (next sample); where none can go, it stays without tables.
            Asked::Ready(Load::NeedsRoom(want)) if want <= self.budget.limit() => {
                while self.budget.available() < want && self.evict_one() {}
                if self.budget.available() >= want {
                    return Asked::Pending;
                }
                // Remembered as failed until a process exits and lets go of its files.
                self.no_room.push(key.clone());
                None
            }
            Asked::Ready(Load::NeedsRoom(_)) => None,
        };
        if loaded.is_none() && self.files.values().filter(|f| f.is_none()).count() >= MAX_FAILED {
            self.files.retain(|_, f| f.is_some());
        }
        self.loading_since.remove(&key);
        self.files
            .insert(key, loaded.as_ref().map(|l| (Arc::clone(l), self.clock)));
        Asked::Ready(loaded)
    }

    /// Drops the least recently used file that no process's unwinder holds; `false` when there
    /// is none.
    fn evict_one(&mut self) -> bool {
        let oldest = self
            .files
            .iter()
            .filter_map(|(k, f)| f.as_ref().map(|(l, used)| (k, l, *used)))
            .filter(|(_, l, _)| Arc::strong_count(l) == 1)
            .min_by_key(|(_, _, used)| *used)
            .map(|(k, _, _)| k.clone());
        match oldest {
            Some(k) => {
                self.files.remove(&k);
                true
            }
            None => false,
        }
    }
}

/// Reads a mapping's file through the door (on a loader thread): its build id and its sections
/// from the one open file, the bytes their headers claim charged to the budget first (a
/// compressed section's decompressed bytes within that too).
fn load(path: &str, pid: u32, build_id: Option<&[u8]>, budget: &Budget) -> Load {
    let Ok(file) = untrusted::open(path, Some(pid)) else {
        return Load::Failed;
    };
    if build_id.is_some() && build_id::of_file(file.file()).as_deref() != build_id {
        return Load::Failed;
    }
    let Some(claimed) = elf::claimed(file.file()) else {
        return Load::Failed;
    };
    let want = usize::try_from(claimed).unwrap_or(usize::MAX);
    // Charged before they are read: loads on other workers cannot take the same room meanwhile.
    let Some(charge) = budget.charge(want) else {
        return Load::NeedsRoom(want);
    };
    let Some(sections) = elf::read(file.file(), want as u64) else {
        return Load::Failed;
    };
    if !sections.has_tables() {
        return Load::Failed;
    }
    Load::Loaded(Loaded {
        sections,
        _charge: charge,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elf::tests::build;
    use crate::elf::{Endian, PT_LOAD};

    fn proc(unwinder: Native, held: Vec<Arc<Loaded>>) -> Proc {
        Proc {
            generation: 0,
            unwinder,
            held,
            loading: Vec::new(),
        }
    }

    /// Two files whose `.eh_frame` fit the budget one at a time: the second is refused while a
    /// process's unwinder holds the first, and loaded (the first evicted) once that process exits.
    #[test]
    fn files_no_unwinder_holds_make_room_for_new_ones_within_the_budget() {
        let dir = std::env::temp_dir().join(format!("pp-unwind-lru-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let eh = vec![0u8; 600];
        let sections: &[(&str, u32, u64, u64, &[u8])] = &[
            (".text", 1, 6, 0x1000, &[0x90; 16]),
            (".eh_frame", 1, 2, 0x2000, &eh),
        ];
        let segments: &[(u32, &[u8], u64)] = &[(PT_LOAD, &[0; 8], 0x1000)];
        let mut paths = Vec::new();
        for name in ["a", "b"] {
            let p = dir.join(name);
            std::fs::write(&p, build(true, Endian::Little, segments, sections)).unwrap();
            paths.push(p.to_str().unwrap().to_owned());
        }
        let budget = Budget::new(1000);
        let mut d = DwarfUnwinder::with_budget(budget.clone());
        d.set_loader(Loader::new(), Duration::from_secs(60));
        let mut maps = AddressSpaces::new();
        maps.mmap(1, 0x10000, 0x1000, 0, &paths[0], None);
        maps.mmap(2, 0x10000, 0x1000, 0, &paths[1], None);
        let held = |d: &mut DwarfUnwinder, pid| {
            let (unwinder, held, loading) = d.build(pid, &maps);
            assert!(loading.is_empty());
            let n = held.len();
            d.procs.insert(pid, proc(unwinder, held));
            n
        };
        assert_eq!(held(&mut d, 1), 1);
        assert!(budget.used() >= 600 && budget.used() <= 1000);
        // a is held by 1's unwinder: no room for b.
        assert_eq!(held(&mut d, 2), 0);
        assert_eq!(d.files.values().filter(|f| f.is_some()).count(), 1);
        // 1 exits: a can go, b comes (asked for again, then loaded).
        d.exit(1);
        d.exit(2);
        let mut n = 0;
        for _ in 0..3 {
            d.procs.remove(&2);
            let (unwinder, h, _) = d.build(2, &maps);
            n = h.len();
            d.procs.insert(2, proc(unwinder, h));
            if n == 1 {
                break;
            }
        }
        assert_eq!(n, 1);
        assert!(budget.used() <= 1000);
        let kept: Vec<&str> = d
            .files
            .iter()
            .filter(|(_, f)| f.is_some())
            .map(|(k, _)| &*k.0)
            .collect();
        assert_eq!(kept, [paths[1].as_str()]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A frame in a file whose tables are still being read (every loader worker held by a stuck
    /// load) ends the unwinding there, said to be pending, rather than guessed past with frame
    /// pointers: before, the guess found a caller (`0x1001f`) and a root behind it, a stack that
    /// looked complete and would be rooted elsewhere than the same path's once the file is read.
    /// Once the file has been waited for [`LOADING_WAIT`], the stack is truncated there.
    #[test]
    fn a_frame_in_a_file_still_loading_ends_the_unwinding_pending() {
        let dir = std::env::temp_dir().join(format!("pp-unwind-pending-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let sections: &[(&str, u32, u64, u64, &[u8])] = &[
            (".text", 1, 6, 0x1000, &[0x90; 16]),
            (".eh_frame", 1, 2, 0x2000, &[0; 64]),
        ];
        let segments: &[(u32, &[u8], u64)] = &[(PT_LOAD, &[0; 8], 0x1000)];
        let path = dir.join("a");
        std::fs::write(&path, build(true, Endian::Little, segments, sections)).unwrap();
        let loader = Loader::new();
        let (release, stuck) = std::sync::mpsc::channel::<()>();
        let stuck = Arc::new(std::sync::Mutex::new(stuck));
        for i in 0..untrusted::MAX_WORKERS {
            let s = Arc::clone(&stuck);
            let _ = loader.ask(untrusted::key(("stuck", i)), Duration::ZERO, move || {
                let _ = s.lock().unwrap().recv();
            });
        }
        let mut d = DwarfUnwinder::new();
        d.set_loader(loader, Duration::ZERO);
        let mut maps = AddressSpaces::new();
        maps.mmap(1, 0x10000, 0x1000, 0, path.to_str().unwrap(), None);
        // A frame record at the stack pointer: the caller's frame pointer (zero, the outermost)
        // and a return address into the same file.
        let sp = 0x7fff_0000u64;
        let mut stack = vec![0u8; 16];
        stack[8..].copy_from_slice(&0x10020u64.to_le_bytes());
        #[cfg(target_arch = "x86_64")]
        let regs = [sp, sp, 0x10010];
        #[cfg(target_arch = "aarch64")]
        let regs = [sp, 0x10020, sp, 0x10010];
        let mut out = Vec::new();
        let ending = d.unwind(1, &maps, &regs, &stack, &mut out);
        let leaf = RawFrame {
            addr: 0x10010,
            context: Context::User,
        };
        assert_eq!(out, [leaf]);
        assert_eq!(ending, Some(Ending::Pending));
        // Waited for that long, the file is no longer waited for: the stack is truncated there.
        for since in d.loading_since.values_mut() {
            *since = Instant::now()
                .checked_sub(LOADING_WAIT + Duration::from_secs(1))
                .unwrap();
        }
        out.clear();
        let ending = d.unwind(1, &maps, &regs, &stack, &mut out);
        assert_eq!(out, [leaf]);
        assert_eq!(ending, Some(Ending::Truncated));
        drop(release);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
