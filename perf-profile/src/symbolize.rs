//! Symbolization: frames to function names and source lines.
//!
//! User frames are resolved with blazesym (feature `symbolize`, on by default) from the ELF symbols
//! and DWARF of the mapped file, by file offset: the file path and build id come from the mapping
//! (MMAP2), so a process that has exited is still symbolized. Kernel frames are named from
//! `/proc/kallsyms`. Each unique frame is resolved once and kept, however many samples and
//! snapshots name it. The frames of one file (in every process that maps it) are resolved in one
//! batch, after which blazesym lets go of the file (its mapping and parsed symbols and DWARF): the
//! memory peak is that of the largest file, not of all files together.
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

/// Resolved frames, each resolved once.
pub struct Symbols {
    mode: Mode,
    /// By frame: its functions, innermost (inlined) first, outermost last; empty when unresolved.
    /// Shared with the profiles taken, which hold the same lines rather than copies.
    resolved: HashMap<Frame, Arc<[Line]>>,
    /// What unresolved frames share.
    empty: Arc<[Line]>,
    #[cfg(feature = "symbolize")]
    symbolizer: blazesym::symbolize::Symbolizer,
    /// Files whose build id is no longer the one mapped (rebuilt since), by path.
    changed: Vec<String>,
}

impl std::fmt::Debug for Symbols {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Symbols")
            .field("mode", &self.mode)
            .field("resolved", &self.resolved.len())
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
            empty: Arc::from([]),
            #[cfg(feature = "symbolize")]
            symbolizer: new_symbolizer(),
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

    /// The functions of `frame`, innermost first; empty when unresolved or not yet resolved.
    pub fn lines(&self, frame: &Frame) -> &[Line] {
        self.resolved.get(frame).map_or(&[], |l| l)
    }

    /// [`lines`](Self::lines), shared rather than copied (for a profile's table).
    pub(crate) fn shared_lines(&self, frame: &Frame) -> Arc<[Line]> {
        self.resolved.get(frame).unwrap_or(&self.empty).clone()
    }

    /// `lines` as one shared allocation (the one empty list for every unresolved frame).
    fn share(&self, lines: Vec<Line>) -> Arc<[Line]> {
        if lines.is_empty() {
            self.empty.clone()
        } else {
            lines.into()
        }
    }

    /// Resolves the frames of `frames` not resolved before.
    pub fn resolve(&mut self, frames: &[Frame], maps: &AddressSpaces, kernel: &KernelSymbols) {
        let new: Vec<Frame> = frames
            .iter()
            .filter(|f| !self.resolved.contains_key(f))
            .copied()
            .collect();
        if new.is_empty() {
            return;
        }
        // By file: its path and build id.
        let mut user: HashMap<(&str, Option<&[u8]>), Vec<Frame>> = HashMap::new();
        for frame in new {
            let lines = match (self.mode, frame) {
                (Mode::None, _)
                | (_, Frame::Unmapped { .. } | Frame::KernelHidden | Frame::Jit { .. }) => {
                    Vec::new()
                }
                (Mode::Local, Frame::Kernel { addr }) => kernel
                    .find(addr)
                    .map(|s| {
                        vec![Line {
                            function: s.name.to_owned(),
                            file: s.module.as_ref().map(|m| format!("[{m}]")),
                            line: None,
                        }]
                    })
                    .unwrap_or_default(),
                (Mode::Local, Frame::User { mapping, .. }) => match maps.mapping(mapping) {
                    Some(m) if m.is_file() => {
                        user.entry((&*m.path, m.build_id.as_deref()))
                            .or_default()
                            .push(frame);
                        continue;
                    }
                    _ => Vec::new(),
                },
            };
            let lines = self.share(lines);
            self.resolved.insert(frame, lines);
        }
        for ((path, build_id), frames) in user {
            let lines = self.resolve_user(maps, path, build_id, &frames);
            for (frame, l) in frames.into_iter().zip(lines) {
                let l = self.share(l);
                self.resolved.insert(frame, l);
            }
        }
    }

    /// The functions at `frames` (all in the file at `path` with `build_id`, from any of its
    /// mappings), by file offset, one batch for the file; blazesym then forgets the file.
    #[cfg(feature = "symbolize")]
    fn resolve_user(
        &mut self,
        maps: &AddressSpaces,
        path: &str,
        build_id: Option<&[u8]>,
        frames: &[Frame],
    ) -> Vec<Vec<Line>> {
        use blazesym::symbolize::source::{Elf, Source};
        use blazesym::symbolize::Input;

        let none = || vec![Vec::new(); frames.len()];
        if let Some(id) = build_id {
            let now = crate::maps::build_id::read(std::path::Path::new(path));
            if now.as_deref().is_some_and(|now| now != id) {
                if !self.changed.iter().any(|p| p == path) {
                    self.changed.push(path.to_owned());
                }
                return none();
            }
        }
        let offsets: Vec<u64> = frames
            .iter()
            .map(|f| match f {
                Frame::User { mapping, addr } => maps
                    .mapping(*mapping)
                    .map_or(0, |m| m.file_offset_of(*addr)),
                _ => 0,
            })
            .collect();
        let src = Source::Elf(Elf::new(path));
        let lines = match self.symbolizer.symbolize(&src, Input::FileOffset(&offsets)) {
            Ok(syms) => syms.into_iter().map(lines_of).collect(),
            Err(_) => none(),
        };
        // Frames not seen before are few after the first snapshot: reading the file again then
        // costs less than keeping every file's symbols and DWARF for the whole capture. A new
        // symbolizer rather than `evict(path)`: blazesym also caches the separate debug file a
        // `.gnu_debuglink` led to (e.g. /usr/lib/debug/.build-id/..), every page of which its
        // checksum read, and evicting `path` leaves that one mapped.
        self.symbolizer = new_symbolizer();
        lines
    }

    /// Without blazesym, user frames stay unresolved.
    #[cfg(not(feature = "symbolize"))]
    fn resolve_user(
        &mut self,
        _maps: &AddressSpaces,
        _path: &str,
        _build_id: Option<&[u8]>,
        frames: &[Frame],
    ) -> Vec<Vec<Line>> {
        vec![Vec::new(); frames.len()]
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
}
