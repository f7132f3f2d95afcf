//! Symbolization: frames to function names and source lines.
//!
//! User frames are resolved with blazesym (feature `symbolize`, on by default) from the ELF symbols
//! and DWARF of the mapped file, by file offset: the file path and build id come from the mapping
//! (MMAP2), so a process that has exited is still symbolized. Kernel frames are named from
//! `/proc/kallsyms`. Each unique frame is resolved once and kept, however many samples and
//! snapshots name it; files are opened and parsed once, by blazesym's caches, in one batch per file.
//!
//! [`Mode::None`] resolves nothing: profiles then carry addresses, mappings and build ids for a
//! backend that symbolizes (Parca, Pyroscope).

use std::collections::HashMap;

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
    resolved: HashMap<Frame, Vec<Line>>,
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
            #[cfg(feature = "symbolize")]
            symbolizer: blazesym::symbolize::Symbolizer::builder()
                .enable_code_info(true)
                .enable_inlined_fns(true)
                .enable_demangling(true)
                .build(),
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
        self.resolved.get(frame).map_or(&[], Vec::as_slice)
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
        let mut user: HashMap<crate::maps::MappingId, Vec<Frame>> = HashMap::new();
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
                            function: s.name.clone(),
                            file: s.module.as_ref().map(|m| format!("[{m}]")),
                            line: None,
                        }]
                    })
                    .unwrap_or_default(),
                (Mode::Local, Frame::User { mapping, .. }) => {
                    user.entry(mapping).or_default().push(frame);
                    continue;
                }
            };
            self.resolved.insert(frame, lines);
        }
        for (mapping, frames) in user {
            let lines = self.resolve_user(maps, mapping, &frames);
            for (frame, l) in frames.into_iter().zip(lines) {
                self.resolved.insert(frame, l);
            }
        }
    }

    /// The functions at `frames` (all in `mapping`), by file offset, one batch for the file.
    #[cfg(feature = "symbolize")]
    fn resolve_user(
        &mut self,
        maps: &AddressSpaces,
        mapping: crate::maps::MappingId,
        frames: &[Frame],
    ) -> Vec<Vec<Line>> {
        use blazesym::symbolize::source::{Elf, Source};
        use blazesym::symbolize::{Input, Symbolized};

        let none = || vec![Vec::new(); frames.len()];
        let Some(m) = maps.mapping(mapping) else {
            return none();
        };
        if !m.is_file() {
            return none();
        }
        if let Some(id) = &m.build_id {
            let now = crate::maps::build_id::read(std::path::Path::new(&*m.path));
            if now.as_ref().is_some_and(|now| now != id) {
                if !self.changed.iter().any(|p| **p == *m.path) {
                    self.changed.push(m.path.to_string());
                }
                return none();
            }
        }
        let offsets: Vec<u64> = frames
            .iter()
            .map(|f| match f {
                Frame::User { addr, .. } => m.file_offset_of(*addr),
                _ => 0,
            })
            .collect();
        let src = Source::Elf(Elf::new(&*m.path));
        let Ok(syms) = self.symbolizer.symbolize(&src, Input::FileOffset(&offsets)) else {
            return none();
        };
        syms.into_iter()
            .map(|s| match s {
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
            })
            .collect()
    }

    /// Without blazesym, user frames stay unresolved.
    #[cfg(not(feature = "symbolize"))]
    fn resolve_user(
        &mut self,
        _maps: &AddressSpaces,
        _mapping: crate::maps::MappingId,
        frames: &[Frame],
    ) -> Vec<Vec<Line>> {
        vec![Vec::new(); frames.len()]
    }
}
