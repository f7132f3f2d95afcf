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

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::sync::Arc;

use framehop::{
    CacheNative, ExplicitModuleSectionInfo, FrameAddress, MayAllocateDuringUnwind, Module,
    UnwindRegsNative, Unwinder, UnwinderNative,
};

use super::elf::{self, UnwindSections};
use super::{Context, RawFrame};
use crate::maps::{build_id, AddressSpaces, Mapping};

/// Frames beyond this many are not unwound (a corrupt stack that loops).
const MAX_FRAMES: usize = 512;

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

type Native = UnwinderNative<Arc<[u8]>, MayAllocateDuringUnwind>;

/// Unwinds copied user stacks for every process of a capture.
pub struct DwarfUnwinder {
    /// Each file's unwind sections, by path and build id; `None`: not ELF, unreadable, or
    /// rebuilt since it was mapped.
    files: HashMap<FileKey, Option<Arc<UnwindSections>>>,
    /// Each process's unwinder and the generation of the space it was built from.
    procs: HashMap<u32, (u64, Native)>,
    cache: CacheNative<MayAllocateDuringUnwind>,
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
        Self {
            files: HashMap::new(),
            procs: HashMap::new(),
            cache: CacheNative::new(),
        }
    }

    /// The process `pid` exited: its unwinder goes.
    pub fn exit(&mut self, pid: u32) {
        self.procs.remove(&pid);
    }

    /// Unwinds `stack` (the copy of the user stack from the stack pointer up) from `regs` (the
    /// values of [`REGS_MASK`], in bit order) in `pid`'s address space, appending the user
    /// frames (leaf first, return addresses minus one) to `out`. Returns `false` when the
    /// registers are not the expected ones (nothing appended).
    pub fn unwind(
        &mut self,
        pid: u32,
        maps: &AddressSpaces,
        regs: &[u64],
        stack: &[u8],
        out: &mut Vec<RawFrame>,
    ) -> bool {
        let Some((pc, sp, regs)) = registers(regs) else {
            return false;
        };
        let generation = maps.generation(pid);
        let stale = self.procs.get(&pid).is_none_or(|(g, _)| *g != generation);
        if stale {
            let unwinder = self.build(pid, maps);
            self.procs.insert(pid, (generation, unwinder));
        }
        let Some((_, unwinder)) = self.procs.get(&pid) else {
            return false;
        };
        let mut read_stack = |addr: u64| -> Result<u64, ()> {
            let at = usize::try_from(addr.checked_sub(sp).ok_or(())?).map_err(|_| ())?;
            let bytes = stack.get(at..at.checked_add(8).ok_or(())?).ok_or(())?;
            Ok(u64::from_le_bytes(bytes.try_into().map_err(|_| ())?))
        };
        let mut frames = unwinder.iter_frames(pc, regs, &mut self.cache, &mut read_stack);
        let mut n = 0;
        // An error ends the stack where it is (a frame outside the copied stack, no tables).
        while let Ok(Some(frame)) = frames.next() {
            let addr = match frame {
                FrameAddress::InstructionPointer(ip) => ip,
                ra @ FrameAddress::ReturnAddress(_) => ra.address_for_lookup(),
            };
            if addr == 0 {
                break;
            }
            out.push(RawFrame {
                addr,
                context: Context::User,
            });
            n += 1;
            if n >= MAX_FRAMES {
                break;
            }
        }
        true
    }

    /// A framehop unwinder with a module for every file mapping of `pid`'s space.
    fn build(&mut self, pid: u32, maps: &AddressSpaces) -> Native {
        let mut unwinder = Native::new();
        for (range, id) in maps.space(pid) {
            let Some(mapping) = maps.mapping(id) else {
                continue;
            };
            if !mapping.is_file() {
                continue;
            }
            let Some(sections) = self.sections(mapping) else {
                continue;
            };
            let Some(bias) = sections.bias(mapping.start, mapping.file_offset) else {
                continue;
            };
            let info = ExplicitModuleSectionInfo {
                base_svma: 0,
                text_svma: sections.text.clone(),
                got_svma: sections.got.clone(),
                eh_frame_svma: sections.eh_frame.as_ref().map(|s| s.svma.clone()),
                eh_frame: sections.eh_frame.as_ref().map(|s| Arc::clone(&s.data)),
                eh_frame_hdr_svma: sections.eh_frame_hdr.as_ref().map(|s| s.svma.clone()),
                eh_frame_hdr: sections.eh_frame_hdr.as_ref().map(|s| Arc::clone(&s.data)),
                debug_frame: sections.debug_frame.as_ref().map(|s| Arc::clone(&s.data)),
                ..ExplicitModuleSectionInfo::default()
            };
            unwinder.add_module(Module::new(mapping.path.to_string(), range, bias, info));
        }
        unwinder
    }

    /// The unwind sections of a mapping's file, read once.
    fn sections(&mut self, mapping: &Mapping) -> Option<Arc<UnwindSections>> {
        let key = (Arc::clone(&mapping.path), mapping.build_id.clone());
        if let Some(s) = self.files.get(&key) {
            return s.clone();
        }
        let path = Path::new(&*mapping.path);
        let current = mapping.build_id.is_none() || build_id::read(path) == mapping.build_id;
        let sections = current
            .then(|| elf::read(path))
            .flatten()
            .filter(UnwindSections::has_tables)
            .map(Arc::new);
        self.files.insert(key, sections.clone());
        sections
    }
}
