//! Symbolization: frames to function names and source lines.
//!
//! User frames are resolved with blazesym (feature `symbolize`, on by default) from the ELF symbols
//! and DWARF of the mapped file, by file offset: the file path and build id come from the mapping
//! (MMAP2), so a process that has exited is still symbolized. Kernel frames are named from
//! `/proc/kallsyms`. Each unique frame is resolved once and kept while it is in use: user frames
//! by file and file offset, so that every process mapping a file (each `cc1` of a build) shares
//! one resolution. The frames of one file not cached yet are resolved in one batch.
//!
//! blazesym lets go of a file (its mapping, parsed symbols and DWARF, a separate debug file's
//! decompressed sections) after its batch: the memory peak is that of the largest file, not of all
//! files together. A continuous capture ([`Symbols::end_interval`]) also forgets the frames and
//! file offsets that no stack named in the last [`KEEP_INTERVALS`] intervals, so the cache follows
//! what runs rather than all that ever ran.
//!
//! [`Mode::None`] resolves nothing: profiles then carry addresses, mappings and build ids for a
//! backend that symbolizes (Parca, Pyroscope).

use std::collections::HashMap;
use std::sync::Arc;

use crate::aggregate::Frame;
use crate::maps::{AddressSpaces, KernelSymbols};

/// One function of a frame with its source position.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Line {
    /// The function's (demangled) name.
    pub function: String,
    /// The source file, when DWARF gives it.
    pub file: Option<String>,
    /// The line, when DWARF gives it.
    pub line: Option<u32>,
}

/// What to resolve.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// Names and lines from the local binaries and `/proc/kallsyms` (blazesym for user space).
    #[default]
    Local,
    /// Nothing: addresses, mappings and build ids only.
    None,
}

/// Intervals (cuts of a continuous capture) a resolved frame, file offset or file stays cached
/// after the one whose stacks last named it.
pub const KEEP_INTERVALS: u64 = 6;

/// Resolved frames, each resolved once while it is in use.
pub struct Symbols {
    mode: Mode,
    /// By frame: its functions, innermost (inlined) first, outermost last; empty when unresolved.
    /// Shared with the profiles taken, which hold the same lines rather than copies.
    resolved: HashMap<Frame, Cached>,
    /// By file (path, then build id) and file offset: what a frame in any process mapping the file
    /// resolves to, so that a process started later (another `cc1`) costs lookups, not blazesym.
    files: HashMap<Arc<str>, Vec<FileLines>>,
    /// The current interval ([`end_interval`](Self::end_interval) counts them).
    interval: u64,
    /// What unresolved frames share.
    empty: Arc<[Line]>,
    /// Files whose build id is no longer the one mapped (rebuilt since), by path.
    changed: Vec<String>,
}

/// Lines and the last interval that used them.
#[derive(Debug)]
struct Cached {
    lines: Arc<[Line]>,
    used: u64,
}

/// The resolved offsets of one file.
#[derive(Debug)]
struct FileLines {
    build_id: Option<Vec<u8>>,
    offsets: HashMap<u64, Cached>,
    /// It was rebuilt since it was mapped: its frames stay unresolved.
    changed: bool,
}

impl std::fmt::Debug for Symbols {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Symbols")
            .field("mode", &self.mode)
            .field("resolved", &self.resolved.len())
            .field("files", &self.files.len())
            .field("interval", &self.interval)
            .finish_non_exhaustive()
    }
}

impl Symbols {
    /// An empty cache for `mode`. Without the `symbolize` feature, user frames stay unresolved in
    /// every mode.
    pub fn new(mode: Mode) -> Self {
        Self {
            mode,
            resolved: HashMap::new(),
            files: HashMap::new(),
            interval: 0,
            empty: Arc::from([]),
            changed: Vec::new(),
        }
    }

    /// The mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Files that were rebuilt since they were mapped (their build id differs): their frames are
    /// left unresolved rather than named wrongly.
    pub fn changed_files(&self) -> &[String] {
        &self.changed
    }

    /// Keeps the resolved frames that `f` maps to a frame (renumbered, e.g. after
    /// [`AddressSpaces::compact`]) and forgets the others.
    pub fn remap(&mut self, f: impl Fn(&Frame) -> Option<Frame>) {
        self.resolved = std::mem::take(&mut self.resolved)
            .into_iter()
            .filter_map(|(frame, lines)| Some((f(&frame)?, lines)))
            .collect();
    }

    /// Ends an interval of a continuous capture: frames and file offsets that no stack
    /// named in the last [`KEEP_INTERVALS`] intervals are forgotten (resolved again if they come
    /// back), so that the cache follows what runs now rather than growing with everything that
    /// ever ran.
    pub fn end_interval(&mut self) {
        let oldest = (self.interval + 1).saturating_sub(KEEP_INTERVALS);
        let recent = |c: &Cached| c.used >= oldest;
        self.resolved.retain(|_, c| recent(c));
        shrink(&mut self.resolved);
        for versions in self.files.values_mut() {
            for file in versions.iter_mut() {
                file.offsets.retain(|_, c| recent(c));
                shrink(&mut file.offsets);
            }
            versions.retain(|f| !f.offsets.is_empty());
        }
        self.files.retain(|_, v| !v.is_empty());
        shrink(&mut self.files);
        self.changed = self
            .files
            .iter()
            .filter(|(_, v)| v.iter().any(|f| f.changed))
            .map(|(path, _)| path.to_string())
            .collect();
        self.interval += 1;
    }

    /// The functions of `frame`, innermost first; empty when unresolved or not yet resolved.
    pub fn lines(&self, frame: &Frame) -> &[Line] {
        self.resolved.get(frame).map_or(&[], |c| &c.lines)
    }

    /// [`lines`](Self::lines), shared rather than copied (for a profile's table).
    pub(crate) fn shared_lines(&self, frame: &Frame) -> Arc<[Line]> {
        self.resolved
            .get(frame)
            .map_or(&self.empty, |c| &c.lines)
            .clone()
    }

    /// `lines` as one shared allocation (the one empty list for every unresolved frame).
    fn share(&self, lines: Vec<Line>) -> Arc<[Line]> {
        if lines.is_empty() {
            self.empty.clone()
        } else {
            lines.into()
        }
    }

    /// The cached offsets of the file at `path` with `build_id`.
    fn file_mut(&mut self, path: &str, build_id: Option<&[u8]>) -> Option<&mut FileLines> {
        self.files
            .get_mut(path)?
            .iter_mut()
            .find(|f| f.build_id.as_deref() == build_id)
    }

    /// Resolves the frames of `frames` not resolved before, and marks them all used in this
    /// interval.
    pub fn resolve(&mut self, frames: &[Frame], maps: &AddressSpaces, kernel: &KernelSymbols) {
        let now = self.interval;
        // By file (its path and build id): the new frames and their file offsets.
        type Batch = Vec<(Frame, u64)>;
        let mut user: HashMap<(Arc<str>, Option<&[u8]>), Batch> = HashMap::new();
        for &frame in frames {
            if let Some(c) = self.resolved.get_mut(&frame) {
                c.used = now;
                continue;
            }
            let lines = match (self.mode, frame) {
                (Mode::None, _)
                | (_, Frame::Unmapped { .. } | Frame::KernelHidden | Frame::Jit { .. }) => {
                    self.empty.clone()
                }
                (Mode::Local, Frame::Kernel { addr }) => {
                    let lines = kernel
                        .find(addr)
                        .map(|s| {
                            vec![Line {
                                function: s.name.to_owned(),
                                file: s.module.as_ref().map(|m| format!("[{m}]")),
                                line: None,
                            }]
                        })
                        .unwrap_or_default();
                    self.share(lines)
                }
                (Mode::Local, Frame::User { mapping, addr }) => match maps.mapping(mapping) {
                    Some(m) if m.is_file() => {
                        let offset = m.file_offset_of(addr);
                        let build_id = m.build_id.as_deref();
                        let known = self
                            .file_mut(&m.path, build_id)
                            .and_then(|f| f.offsets.get_mut(&offset));
                        match known {
                            Some(c) => {
                                c.used = now;
                                c.lines.clone()
                            }
                            None => {
                                user.entry((m.path.clone(), build_id))
                                    .or_default()
                                    .push((frame, offset));
                                continue;
                            }
                        }
                    }
                    _ => self.empty.clone(),
                },
            };
            self.resolved.insert(frame, Cached { lines, used: now });
        }
        for ((path, build_id), frames) in user {
            let mut offsets: Vec<u64> = frames.iter().map(|&(_, o)| o).collect();
            offsets.sort_unstable();
            offsets.dedup();
            let (lines, changed) = resolve_file(&path, build_id, &offsets);
            let lines: Vec<Arc<[Line]>> = lines.into_iter().map(|l| self.share(l)).collect();
            if changed && !self.changed.iter().any(|p| **p == *path) {
                self.changed.push(path.to_string());
            }
            let versions = self.files.entry(path).or_default();
            let i = match versions
                .iter()
                .position(|f| f.build_id.as_deref() == build_id)
            {
                Some(i) => i,
                None => {
                    versions.push(FileLines {
                        build_id: build_id.map(<[u8]>::to_vec),
                        offsets: HashMap::new(),
                        changed: false,
                    });
                    versions.len() - 1
                }
            };
            let file = &mut versions[i];
            file.changed |= changed;
            for (&offset, lines) in offsets.iter().zip(lines) {
                file.offsets.insert(offset, Cached { lines, used: now });
            }
            for (frame, offset) in frames {
                if let Some(c) = file.offsets.get(&offset) {
                    let lines = c.lines.clone();
                    self.resolved.insert(frame, Cached { lines, used: now });
                }
            }
        }
    }
}

/// The functions at `offsets` of the file at `path` with `build_id`, one batch for the file, and
/// whether the file was rebuilt since (its build id differs: then nothing is resolved).
#[cfg(feature = "symbolize")]
fn resolve_file(path: &str, build_id: Option<&[u8]>, offsets: &[u64]) -> (Vec<Vec<Line>>, bool) {
    use blazesym::symbolize::source::{Elf, Source};
    use blazesym::symbolize::Input;

    let none = || vec![Vec::new(); offsets.len()];
    if let Some(id) = build_id {
        let now = crate::maps::build_id::read(std::path::Path::new(path));
        if now.as_deref().is_some_and(|now| now != id) {
            return (none(), true);
        }
    }
    let src = Source::Elf(Elf::new(path));
    // New offsets are few after the first snapshot: reading the file again then costs less
    // memory than keeping every file's symbols and DWARF for the whole capture. Measured on a
    // system-wide continuous capture here, side by side: keeping the files sampled again and
    // again open within 32 MiB of measured RSS growth saved a tenth of the CPU and cost 28 to 53
    // MiB; keeping the two files resolved in consecutive intervals (libc and its debug file among
    // them) saved nothing measurable and cost 15 to 40 MiB. A symbolizer per file rather
    // than one and `evict(path)`: blazesym also caches the separate debug file a
    // `.gnu_debuglink` led to (e.g. /usr/lib/debug/.build-id/..), every page of which its
    // checksum read, and evicting `path` leaves that one mapped.
    let lines = match new_symbolizer().symbolize(&src, Input::FileOffset(offsets)) {
        Ok(syms) => syms.into_iter().map(lines_of).collect(),
        Err(_) => none(),
    };
    (lines, false)
}

/// Without blazesym, user frames stay unresolved.
#[cfg(not(feature = "symbolize"))]
fn resolve_file(_path: &str, _build_id: Option<&[u8]>, offsets: &[u64]) -> (Vec<Vec<Line>>, bool) {
    (vec![Vec::new(); offsets.len()], false)
}

/// Gives a map's memory back once most of it is unused (a burst of frames that is over).
fn shrink<K: std::hash::Hash + Eq, V>(map: &mut HashMap<K, V>) {
    if map.capacity() > 64 && map.len() < map.capacity() / 4 {
        map.shrink_to_fit();
    }
}

/// A symbolizer with empty caches: names, file:line and inlined functions, demangled.
#[cfg(feature = "symbolize")]
fn new_symbolizer() -> blazesym::symbolize::Symbolizer {
    blazesym::symbolize::Symbolizer::builder()
        .enable_code_info(true)
        .enable_inlined_fns(true)
        .enable_demangling(true)
        .build()
}

/// A blazesym result as our lines, innermost function first.
#[cfg(feature = "symbolize")]
fn lines_of(s: blazesym::symbolize::Symbolized<'_>) -> Vec<Line> {
    use blazesym::symbolize::Symbolized;
    match s {
        Symbolized::Sym(sym) => {
            let pos = |ci: Option<&blazesym::symbolize::CodeInfo<'_>>| {
                (
                    ci.map(|c| c.to_path().to_string_lossy().into_owned()),
                    ci.and_then(|c| c.line),
                )
            };
            // blazesym lists inlined functions outermost first, each with the position of
            // the code inside it; the outer function's own position is its call site of
            // the first inlined one.
            let mut lines = Vec::with_capacity(sym.inlined.len() + 1);
            let (file, line) = pos(sym.code_info.as_deref());
            lines.push(Line {
                function: sym.name.to_string(),
                file,
                line,
            });
            for f in sym.inlined.iter() {
                let (file, line) = pos(f.code_info.as_ref());
                lines.push(Line {
                    function: f.name.to_string(),
                    file,
                    line,
                });
            }
            lines.reverse();
            lines
        }
        Symbolized::Unknown(_) => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_resolved_once_and_shared_not_copied() {
        let kernel = KernelSymbols::parse(
            "ffffffff81000000 T _stext\nffffffff81000100 t do_thing\t[ext4]\n",
        );
        let maps = AddressSpaces::new();
        let frames = [
            Frame::Kernel {
                addr: 0xffffffff81000150,
            },
            Frame::Unmapped { addr: 0x1000 },
            Frame::KernelHidden,
        ];
        let mut symbols = Symbols::new(Mode::Local);
        symbols.resolve(&frames, &maps, &kernel);
        let named = symbols.shared_lines(&frames[0]);
        assert_eq!(named[0].function, "do_thing");
        assert_eq!(named[0].file.as_deref(), Some("[ext4]"));
        // A second snapshot gets the same allocation, not a copy of the strings.
        symbols.resolve(&frames, &maps, &kernel);
        assert!(Arc::ptr_eq(&named, &symbols.shared_lines(&frames[0])));
        assert_eq!(Arc::strong_count(&named), 2, "the cache's and `named`");
        // Unresolved frames share one empty list.
        let (a, b) = (
            symbols.shared_lines(&frames[1]),
            symbols.shared_lines(&frames[2]),
        );
        assert!(a.is_empty() && Arc::ptr_eq(&a, &b));
        assert!(symbols.lines(&Frame::Kernel { addr: 1 }).is_empty());
    }

    #[test]
    fn frames_no_stack_named_for_keep_intervals_are_forgotten() {
        let kernel = KernelSymbols::parse(
            "ffffffff81000000 T _stext\nffffffff81000100 t do_thing\nffffffff81000200 t other\n",
        );
        let maps = AddressSpaces::new();
        let (old, new) = (
            Frame::Kernel {
                addr: 0xffffffff81000110,
            },
            Frame::Kernel {
                addr: 0xffffffff81000210,
            },
        );
        let mut symbols = Symbols::new(Mode::Local);
        symbols.resolve(&[old, new], &maps, &kernel);
        // `new` is named in every interval after; `old` in none: it stays for KEEP_INTERVALS more.
        for i in 1..=KEEP_INTERVALS {
            symbols.end_interval();
            symbols.resolve(&[new], &maps, &kernel);
            assert_eq!(symbols.lines(&old)[0].function, "do_thing", "interval {i}");
        }
        symbols.end_interval();
        symbols.resolve(&[new], &maps, &kernel);
        assert!(
            symbols.lines(&old).is_empty(),
            "kept past {KEEP_INTERVALS} intervals unused"
        );
        assert_eq!(symbols.lines(&new)[0].function, "other");
        assert_eq!(symbols.resolved.len(), 1);
        // Named again, it is resolved again.
        symbols.resolve(&[old], &maps, &kernel);
        assert_eq!(symbols.lines(&old)[0].function, "do_thing");
    }

    /// This test binary mapped by two processes at different addresses: the frames at the same file
    /// offset are resolved once and share their lines, until no stack names them for
    /// KEEP_INTERVALS intervals.
    #[cfg(feature = "symbolize")]
    #[test]
    fn a_file_mapped_by_two_processes_is_resolved_once_by_file_offset() {
        let exe = std::env::current_exe().unwrap();
        let exe = exe.to_str().unwrap();
        let here =
            a_file_mapped_by_two_processes_is_resolved_once_by_file_offset as fn() as usize as u64;
        let maps_text = std::fs::read_to_string("/proc/self/maps").unwrap();
        let mut own = AddressSpaces::new();
        own.seed(1, &maps_text);
        let m = own.mapping(own.find(1, here).unwrap()).unwrap();
        assert_eq!(&*m.path, exe);
        let offset = m.file_offset_of(here);
        let mut maps = AddressSpaces::new();
        let (a, b) = (0x1000_0000_0000, 0x2000_0000_0000);
        maps.mmap(2, a, 1 << 32, 0, exe, None);
        maps.mmap(3, b, 1 << 32, 0, exe, None);
        let frame = |pid, addr| Frame::User {
            mapping: maps.find(pid, addr).unwrap(),
            addr,
        };
        let frames = [frame(2, a + offset), frame(3, b + offset)];
        assert_ne!(frames[0], frames[1]);
        let kernel = KernelSymbols::default();
        let mut symbols = Symbols::new(Mode::Local);
        symbols.resolve(&frames[..1], &maps, &kernel);
        let first = symbols.shared_lines(&frames[0]);
        assert!(
            first
                .iter()
                .any(|l| l.function.contains("resolved_once_by_file_offset")),
            "{first:?}"
        );
        // The second process's frame is a lookup, not a second resolution.
        symbols.resolve(&frames[1..], &maps, &kernel);
        assert!(Arc::ptr_eq(&first, &symbols.shared_lines(&frames[1])));
        assert_eq!(symbols.files.len(), 1);
        for _ in 0..=KEEP_INTERVALS {
            symbols.end_interval();
        }
        assert!(symbols.files.is_empty());
    }
}
