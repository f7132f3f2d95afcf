//! Symbolization: frames to function names and source lines.
//!
//! User frames are resolved with blazesym (feature `symbolize`, on by default) from the ELF symbols
//! and DWARF of the mapped file, by file offset: the file path and build id come from the mapping
//! (MMAP2), so a process that has exited is still symbolized. Kernel frames are named from
//! `/proc/kallsyms`. Each unique frame is resolved once and kept while it is in use: user frames
//! by file and file offset, so that every process mapping a file (each `cc1` of a build) shares
//! one resolution. The frames of one file not cached yet are resolved in one batch.
//!
//! [`Mode::Local`] keeps two things across the intervals of a continuous capture, both bounded
//! and charged to the capture's [`Budget`] (`Options::memory_budget`), least recently used out
//! first and counted ([`Symbols::kept_files`], [`Symbols::kept_lines`]): each file's blazesym
//! symbolizer (its sorted symbols, its index of compilation units, the units parsed so far), by
//! file identity (device, inode, size, modification time) and build id, within
//! [`KEPT_FILES_BYTES`] of measured resident memory, so that a later interval's new frames in a
//! file cost the compilation units that hold them and not the whole file again; and the lines of
//! every file offset resolved, within [`LINES_BYTES`], so that an address seen before is not
//! symbolized again. A continuous capture ([`Symbols::end_interval`]) forgets the frames
//! (by mapping) that no stack named in the last [`KEEP_INTERVALS`] intervals, and with
//! [`Mode::Functions`] the file offsets too, so the cache follows what runs rather than all that
//! ever ran. A batch after which nothing is kept (a capture's final snapshot, where the kept
//! bytes are 0) names what blazesym would name from a file's ELF symbols by one pass over its
//! symbol tables instead (`scan`): blazesym would sort the whole table first (`node`'s 109 848
//! symbols) to name a few addresses once; DWARF's addresses still go to blazesym.
//!
//! [`Mode::Functions`] names frames from the ELF symbol tables only, as perf does by default, read
//! here without blazesym: each file's functions are read once into a compact table (start, end,
//! where the name is: 24 bytes a function; a name is read from the file when a frame first needs
//! it) that stays across intervals within [`FUNCTION_TABLES_BYTES`], least recently used out
//! first. A continuous capture on a steady machine then reads each file once, not each interval's
//! new frames' DWARF again.
//!
//! Names are perf's: a PLT stub is `name@plt` (read from `.rela.plt`, in both modes), a symbol
//! covers its size only (one of size 0 up to the next symbol, as perf's `symbols__fixup_end`
//! extends it), code of a file no symbol covers is `[libname+0xOFF]` (its file offset, so that a
//! viewer that reads functions only shows it), and an address in no mapping is [`UNKNOWN`].
//!
//! [`Mode::None`] resolves nothing: profiles then carry addresses, mappings and build ids for a
//! backend that symbolizes (Parca, Pyroscope); an address in no mapping, which no backend can
//! name, is [`UNKNOWN`] there too.

#[cfg(feature = "symbolize")]
mod kept;
#[cfg(feature = "symbolize")]
mod scan;

use foldhash::{HashMap, HashMapExt};
use std::cmp::Reverse;
use std::sync::Arc;
use std::time::Duration;

use crate::aggregate::Frame;
use crate::maps::{AddressSpaces, KernelSymbols};
use crate::untrusted::{self, Asked, Budget, Charge, Identity, Loader};

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
    /// Names and lines from the local binaries and `/proc/kallsyms` (blazesym for user space):
    /// ELF symbols and DWARF, file:line and inlined functions.
    #[default]
    Local,
    /// Function names only, the way `perf report` names frames by default: from the ELF symbol
    /// tables (`.symtab`, `.dynsym`; for a file with no `.symtab`, that of its separate debug file
    /// under `/usr/lib/debug/.build-id/` when one is installed), no DWARF, no file:line, no
    /// inlined functions; kernel frames from `/proc/kallsyms`. Each file's function table is read
    /// once and kept across the intervals of a continuous capture while stacks name the file
    /// (see [`Symbols::end_interval`]), within [`FUNCTION_TABLES_BYTES`] (least recently used
    /// first out), so a steady machine reads each file once. The mode for continuous profiling
    /// within a CPU budget.
    #[doc(alias = "symtab")]
    Functions,
    /// Nothing: addresses, mappings and build ids only (an address in no mapping is still
    /// [`UNKNOWN`]).
    None,
}

impl Mode {
    /// Whether frames get function names (every mode but [`Mode::None`]).
    pub fn names_functions(self) -> bool {
        self != Mode::None
    }

    /// Whether frames get source files and lines ([`Mode::Local`] only).
    pub fn has_lines(self) -> bool {
        self == Mode::Local
    }
}

/// The bytes of function tables (their symbols and names) that [`Mode::Functions`] keeps across
/// intervals; beyond it the tables used least recently are dropped (read again when their file is
/// sampled again).
pub const FUNCTION_TABLES_BYTES: usize = 16 << 20;

/// How long a snapshot of a capture waits for one file's batch read on the loader (see
/// [`Symbols::set_loader`]): a file on a hung file system costs this once (later snapshots do not
/// wait for a load still running), and its frames.
pub const SNAPSHOT_WAIT: Duration = Duration::from_secs(10);

/// Intervals (cuts of a continuous capture) a resolved frame stays cached after the one whose
/// stacks last named it; with [`Mode::Functions`] a file offset and its file's table too
/// ([`Mode::Local`] keeps file offsets within [`LINES_BYTES`] instead).
pub const KEEP_INTERVALS: u64 = 6;

/// The bytes of resolved lines [`Mode::Local`] keeps by file and file offset across intervals
/// (and within the capture's budget): an address seen before is not symbolized again while its
/// lines are kept, however long ago it was seen; beyond it those used least recently go first.
pub const LINES_BYTES: usize = 8 << 20;

/// The bytes of blazesym state (measured as resident memory) that kept files share by default.
pub const KEPT_FILES_BYTES: usize = 64 << 20;

/// How long one batch may run before the symbolizers' thread counts as stuck (a file on a hung
/// file system): the next batch then starts a new thread.
pub const STUCK_AFTER: Duration = Duration::from_secs(10);

/// Files kept at most (each holds an open descriptor).
pub const MAX_KEPT_FILES: usize = 128;

/// A file costing more than this share of [`KEPT_FILES_BYTES`] (a quarter) is not kept (counted as
/// evicted): kept, it would push out the many small files every process maps, which then thrash.
pub const LARGE_FILE_SHARE: usize = 4;

/// The least a kept file is counted at: its descriptor, symbolizer and what blazesym keeps of it.
pub const MIN_FILE_BYTES: usize = 64 << 10;

/// The name of a frame whose address is in no mapping, as perf calls it.
pub const UNKNOWN: &str = "[unknown]";

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
    /// [`Mode::Functions`]: each file's function table, by path and build id.
    tables: ByteLru<FileKey, FunctionTable>,
    /// What function tables are charged to, beside their own bound (shared with the capture's
    /// other caches).
    budget: Budget,
    /// Who reads the files, and how long the caller waits for it; `None`: the caller reads.
    loader: Option<(Loader, Duration)>,
    /// [`Mode::Local`]: the files' symbolizers kept across intervals.
    #[cfg(feature = "symbolize")]
    kept: kept::Kept,
    /// [`Mode::Local`]: the bound of the lines kept by file offset, what they cost at the last
    /// cut, its charge to the budget, and how many were let go since the start.
    lines_bytes: usize,
    lines_used: usize,
    lines_charge: Option<Charge>,
    lines_evicted: u64,
    /// [`Mode::Local`]: files named by one pass over their symbol tables (no DWARF, nothing kept)
    /// rather than by blazesym.
    #[cfg(feature = "symbolize")]
    scanned: u64,
}

/// A file: its path and build id.
type FileKey = (Arc<str>, Option<Box<[u8]>>);

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
    /// It was rebuilt since it was mapped: its frames get no symbol (only where they are).
    changed: bool,
}

/// What [`Mode::Local`] keeps of the files it read ([`Symbols::kept_files`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct KeptFiles {
    /// Bytes counted for the files kept now (the resident memory their batches grew the process
    /// by).
    pub bytes: usize,
    /// Files kept now.
    pub files: usize,
    /// Files read (parsed afresh) since the start.
    pub read: u64,
    /// Batches answered by a file kept from an earlier batch.
    pub reused: u64,
    /// Files let go since the start: least recently used out to make room, or too large to keep.
    pub evicted: u64,
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
    /// An empty cache for `mode`. Without the `symbolize` feature, user frames get no symbol in
    /// [`Mode::Local`] (only where they are, `[libx.so+0xOFF]`), and [`Mode::Functions`] gives names as the symbol tables have them (not
    /// demangled).
    pub fn new(mode: Mode) -> Self {
        Self {
            mode,
            resolved: HashMap::new(),
            files: HashMap::new(),
            interval: 0,
            empty: Arc::from([]),
            changed: Vec::new(),
            tables: ByteLru::new(FUNCTION_TABLES_BYTES),
            budget: Budget::default(),
            loader: None,
            #[cfg(feature = "symbolize")]
            kept: kept::Kept::new(),
            lines_bytes: LINES_BYTES,
            lines_used: 0,
            lines_charge: None,
            lines_evicted: 0,
            #[cfg(feature = "symbolize")]
            scanned: 0,
        }
    }

    /// Reads the files with `loader`, waiting at most `wait` for a file's batch: a batch not
    /// resolved by then leaves its frames unresolved in this snapshot, and its result is picked
    /// up by the next one. A file on a hung file system then costs its frames, not the caller.
    /// Without it (the default) files are read on the caller's thread.
    pub fn set_loader(&mut self, loader: Loader, wait: Duration) {
        self.loader = Some((loader, wait));
    }

    /// Charges the function tables kept to `budget` too (shared with the capture's other
    /// caches): a table that does not fit, once this cache's least recently used ones are out,
    /// names its batch and is not kept.
    pub fn set_budget(&mut self, budget: Budget) {
        #[cfg(feature = "symbolize")]
        self.kept.set_budget(budget.clone());
        self.budget = budget;
    }

    /// Sets the bytes that [`Mode::Local`]'s kept files share (default [`KEPT_FILES_BYTES`],
    /// counted as the resident memory their batches grew the process by); beyond it the files
    /// used least recently are let go (read again when their frames need it). 0 keeps none: each
    /// batch reads its file afresh.
    pub fn set_kept_files_bytes(&mut self, bytes: usize) {
        #[cfg(feature = "symbolize")]
        self.kept.set_bytes(bytes);
        #[cfg(not(feature = "symbolize"))]
        let _ = bytes;
    }

    /// Whether nothing read for a batch is kept after it (the kept files' bytes are 0, as in a
    /// capture's final snapshot): a file is then read for the offsets asked only.
    fn keeps_nothing(&self) -> bool {
        #[cfg(feature = "symbolize")]
        return self.kept.keeps_nothing();
        #[cfg(not(feature = "symbolize"))]
        false
    }

    /// [`Mode::Local`]'s kept files now and since the start: see [`KeptFiles`].
    pub fn kept_files(&self) -> KeptFiles {
        #[cfg(feature = "symbolize")]
        {
            use std::sync::atomic::Ordering::Relaxed;
            let s = self.kept.stats();
            KeptFiles {
                bytes: s.bytes.load(Relaxed),
                files: s.files.load(Relaxed),
                read: s.read.load(Relaxed),
                reused: s.reused.load(Relaxed),
                evicted: s.evicted.load(Relaxed),
            }
        }
        #[cfg(not(feature = "symbolize"))]
        KeptFiles::default()
    }

    /// Sets the bytes of function tables [`Mode::Functions`] keeps (default
    /// [`FUNCTION_TABLES_BYTES`]); tables beyond it are dropped, least recently used first.
    pub fn set_function_tables_bytes(&mut self, bytes: usize) {
        self.tables.set_budget(bytes);
    }

    /// The bytes of function tables kept now ([`Mode::Functions`]), and how many files they are of.
    pub fn function_tables(&self) -> (usize, usize) {
        (self.tables.used(), self.tables.len())
    }

    /// The mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Files that were rebuilt since they were mapped (their build id differs): their frames are
    /// named where they are (`[libx.so+0xOFF]`) rather than named wrongly.
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
    /// back), and with [`Mode::Functions`] the function tables of files none of whose offsets is
    /// left, so that the cache follows what runs now rather than growing with everything that
    /// ever ran.
    pub fn end_interval(&mut self) {
        let oldest = (self.interval + 1).saturating_sub(KEEP_INTERVALS);
        let recent = |c: &Cached| c.used >= oldest;
        self.resolved.retain(|_, c| recent(c));
        shrink(&mut self.resolved);
        if self.mode == Mode::Local {
            self.bound_lines();
        } else {
            for versions in self.files.values_mut() {
                for file in versions.iter_mut() {
                    file.offsets.retain(|_, c| recent(c));
                }
            }
        }
        for versions in self.files.values_mut() {
            for file in versions.iter_mut() {
                shrink(&mut file.offsets);
            }
            versions.retain(|f| !f.offsets.is_empty());
        }
        self.files.retain(|_, v| !v.is_empty());
        shrink(&mut self.files);
        // A file's function table lives while stacks name the file (and within its bytes): a
        // steady machine's files are read once, one that ran once leaves after a minute.
        let files = &self.files;
        self.tables.retain(|(path, id)| {
            files
                .get(path)
                .is_some_and(|v| v.iter().any(|f| f.build_id.as_deref() == id.as_deref()))
        });
        self.changed = self
            .files
            .iter()
            .filter(|(_, v)| v.iter().any(|f| f.changed))
            .map(|(path, _)| path.to_string())
            .collect();
        self.interval += 1;
    }

    /// [`Mode::Local`]: keeps the file offsets' lines within [`LINES_BYTES`] and the budget,
    /// letting those used least recently go (counted).
    fn bound_lines(&mut self) {
        self.lines_charge = None;
        let room = self.lines_bytes.min(self.budget.available());
        let mut all: Vec<(u64, usize, Arc<str>, usize, u64)> = Vec::new();
        let mut total = 0;
        for (path, versions) in &self.files {
            for (v, file) in versions.iter().enumerate() {
                for (&offset, c) in &file.offsets {
                    let bytes = cached_bytes(&c.lines);
                    total += bytes;
                    all.push((c.used, bytes, path.clone(), v, offset));
                }
            }
        }
        if total > room {
            all.sort_unstable_by_key(|e| e.0);
            for (_, bytes, path, v, offset) in all {
                if total <= room {
                    break;
                }
                if let Some(file) = self.files.get_mut(&path).and_then(|f| f.get_mut(v)) {
                    file.offsets.remove(&offset);
                    total -= bytes;
                    self.lines_evicted += 1;
                }
            }
        }
        self.lines_charge = self.budget.charge(total);
        self.lines_used = total;
    }

    /// [`Mode::Local`]'s lines of file offsets kept across intervals: their bytes (as counted
    /// against [`LINES_BYTES`]), and how many were let go since the start to stay within it.
    pub fn kept_lines(&self) -> (usize, u64) {
        (self.lines_used, self.lines_evicted)
    }

    /// Sets the bytes of lines [`Mode::Local`] keeps by file offset (default [`LINES_BYTES`]).
    pub fn set_lines_bytes(&mut self, bytes: usize) {
        self.lines_bytes = bytes;
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
        type Batch = (Option<u32>, Vec<(Frame, u64)>);
        let mut user: HashMap<(Arc<str>, Option<&[u8]>), Batch> = HashMap::new();
        for &frame in frames {
            if let Some(c) = self.resolved.get_mut(&frame) {
                c.used = now;
                // Functions: the file offset is used too, which keeps the file's table (see
                // `end_interval`).
                if let (Mode::Functions, Frame::User { mapping, addr }) = (self.mode, frame) {
                    if let Some(m) = maps.mapping(mapping).filter(|m| m.is_file()) {
                        let offset = m.file_offset_of(addr);
                        let build_id = m.build_id.as_deref();
                        if let Some(c) = self
                            .file_mut(&m.path, build_id)
                            .and_then(|f| f.offsets.get_mut(&offset))
                        {
                            c.used = now;
                        }
                    }
                }
                continue;
            }
            let lines = match (self.mode, frame) {
                // An address in no mapping is no return address (a garbage word the frame
                // pointer chain led to): perf's `[unknown]`, in every mode and output.
                (_, Frame::Unmapped { .. }) => self.share(vec![Line {
                    function: UNKNOWN.to_owned(),
                    file: None,
                    line: None,
                }]),
                (Mode::None, _) | (_, Frame::KernelHidden | Frame::Jit { .. }) => {
                    self.empty.clone()
                }
                (Mode::Local | Mode::Functions, Frame::Kernel { addr }) => {
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
                (Mode::Local | Mode::Functions, Frame::User { mapping, addr }) => {
                    match maps.mapping(mapping) {
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
                                    let batch = user
                                        .entry((m.path.clone(), build_id))
                                        .or_insert_with(|| (maps.mapped_by(mapping), Vec::new()));
                                    batch.1.push((frame, offset));
                                    continue;
                                }
                            }
                        }
                        // Not a file (`[vdso]`, `//anon`, a deleted file): where it is, too.
                        Some(m) => self.share(vec![Line {
                            function: located(&m.path, m.file_offset_of(addr)),
                            file: None,
                            line: None,
                        }]),
                        None => self.empty.clone(),
                    }
                }
            };
            self.resolved.insert(frame, Cached { lines, used: now });
        }
        for ((path, build_id), (pid, frames)) in user {
            let mut offsets: Vec<u64> = frames.iter().map(|&(_, o)| o).collect();
            offsets.sort_unstable();
            offsets.dedup();
            let done = if self.mode == Mode::Functions {
                self.functions_of(&path, pid, build_id, &offsets)
            } else {
                let load = untrusted::key(("local", &path, build_id, &offsets));
                self.local(load, &path, pid, build_id, &offsets)
            };
            // Still loading: the frames stay unresolved now and are asked for again next time.
            let Some((lines, changed)) = done else {
                continue;
            };
            // What no symbol covers is named where it is, as perf prints a DSO's unresolved
            // frames: a viewer that reads functions only (speedscope) shows it too.
            let lines: Vec<Arc<[Line]>> = lines
                .into_iter()
                .zip(&offsets)
                .map(|(l, &offset)| {
                    if l.is_empty() {
                        self.share(vec![Line {
                            function: located(&path, offset),
                            file: None,
                            line: None,
                        }])
                    } else {
                        self.share(l)
                    }
                })
                .collect();
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

impl Symbols {
    /// [`Mode::Functions`]: the functions at `offsets` of the file at `path` with `build_id`, from
    /// its table (read now if it is not kept), and whether the file was rebuilt since it was
    /// mapped (then nothing is resolved).
    fn functions_of(
        &mut self,
        path: &Arc<str>,
        pid: Option<u32>,
        build_id: Option<&[u8]>,
        offsets: &[u64],
    ) -> Option<(Vec<Vec<Line>>, bool)> {
        let none = || vec![Vec::new(); offsets.len()];
        let key = (path.clone(), build_id.map(Box::from));
        let load = untrusted::key(("functions", &key, offsets));
        // The table travels to the loader and back: it reads names from the file.
        let cached = self.tables.remove(&key);
        if cached.is_none() {
            // Room for the symbol tables read: this cache's least recently used go first.
            while self.budget.available() < FUNCTION_TABLES_BYTES && self.tables.pop_lru() {}
        }
        let max = self.budget.available() as u64;
        // The final snapshot (nothing kept after it): a table read now names this batch only, so
        // it holds the functions that name these offsets, not all of them sorted.
        let only = cached.is_none() && self.keeps_nothing();
        let (p, id, offs) = (
            path.to_string(),
            build_id.map(<[u8]>::to_vec),
            offsets.to_vec(),
        );
        let work = move || {
            let table = cached.or_else(|| {
                FunctionTable::read(&p, pid, id.as_deref(), max, only.then_some(&offs[..]))
            });
            let names = table.as_ref().and_then(|t| t.names(&p, pid, &offs));
            (table, names)
        };
        let (table, names) = self.run(load, work)?;
        let Some(mut table) = table else {
            return Some((none(), true));
        };
        // Kept when it fits the shared budget; larger than what is left, it named its batch only.
        let cost = table.bytes();
        if table.charge.as_ref().is_none_or(|c| c.bytes() != cost) {
            table.charge = None;
            table.charge = self.budget.charge(cost);
        }
        if table.charge.is_some() && !only {
            let _ = self.tables.insert(key, table, cost);
        }
        let Some(names) = names else {
            return Some((none(), true));
        };
        let lines = names
            .into_iter()
            .map(|name| {
                name.map(|function| {
                    vec![Line {
                        function,
                        file: None,
                        line: None,
                    }]
                })
                .unwrap_or_default()
            })
            .collect();
        Some((lines, false))
    }

    /// [`Mode::Local`]: the lines at `offsets` of the file at `path` with `build_id` (from the
    /// file's symbolizer kept from an earlier batch, or one made now), and whether the file was
    /// rebuilt since it was mapped; `None`: not done yet.
    #[cfg(feature = "symbolize")]
    fn local(
        &mut self,
        load: u64,
        path: &str,
        pid: Option<u32>,
        build_id: Option<&[u8]>,
        offsets: &[u64],
    ) -> Option<(Vec<Vec<Line>>, bool)> {
        if !self.kept.keeps_nothing() {
            let job = self.kept.job(path, pid, build_id, offsets);
            return self.run(load, job).flatten();
        }
        // Nothing is kept after this batch (a capture's final snapshot): what blazesym would name
        // from the file's ELF symbols is named by one pass over them, not by sorting them all
        // first (see `scan`); blazesym names the rest (DWARF's, or the whole file).
        let ask = self.kept.asker(path, pid, build_id);
        let offs = offsets.to_vec();
        let (p, id) = (path.to_owned(), build_id.map(<[u8]>::to_vec));
        let job = move || {
            let Some((scan, changed)) = scanned(&p, pid, id.as_deref(), &offs) else {
                return ask(offs).map(|done| (done, false));
            };
            if changed {
                return Some(((vec![Vec::new(); offs.len()], true), false));
            }
            let rest: Vec<u64> = offs
                .iter()
                .zip(&scan)
                .filter(|(_, l)| l.is_none())
                .map(|(&o, _)| o)
                .collect();
            let (mut named, changed) = if rest.is_empty() {
                (Vec::new(), false)
            } else {
                ask(rest)?
            };
            named.reverse();
            let lines = scan
                .into_iter()
                .map(|l| l.unwrap_or_else(|| named.pop().unwrap_or_default()))
                .collect();
            Some(((lines, changed), true))
        };
        let (done, scan) = self.run(load, job).flatten()?;
        self.scanned += u64::from(scan);
        Some(done)
    }

    /// Without blazesym, user frames stay unresolved.
    #[cfg(not(feature = "symbolize"))]
    fn local(
        &mut self,
        _load: u64,
        _path: &str,
        _pid: Option<u32>,
        _build_id: Option<&[u8]>,
        offsets: &[u64],
    ) -> Option<(Vec<Vec<Line>>, bool)> {
        Some((vec![Vec::new(); offsets.len()], false))
    }

    /// `job` (which reads other processes' files) on the loader, waited for as long as
    /// [`set_loader`](Self::set_loader) said; without a loader, here and now. `None`: not done yet.
    fn run<T: Send + 'static>(
        &self,
        key: u64,
        job: impl FnOnce() -> T + Send + 'static,
    ) -> Option<T> {
        match &self.loader {
            None => Some(job()),
            Some((loader, wait)) => match loader.ask(key, *wait, job) {
                Asked::Ready(t) => Some(t),
                Asked::Pending => None,
            },
        }
    }
}

/// A least-recently-used map bounded by the bytes its values cost (as the caller counts them).
#[derive(Debug)]
struct ByteLru<K, V> {
    budget: usize,
    used: usize,
    /// Counts uses: an entry's last use orders eviction.
    clock: u64,
    entries: HashMap<K, (V, usize, u64)>,
    /// Entries let go to make room, since the start (the owner may count more).
    evicted: u64,
}

impl<K: std::hash::Hash + Eq + Clone, V> ByteLru<K, V> {
    fn new(budget: usize) -> Self {
        Self {
            budget,
            used: 0,
            clock: 0,
            entries: HashMap::new(),
            evicted: 0,
        }
    }

    fn used(&self) -> usize {
        self.used
    }

    fn len(&self) -> usize {
        self.entries.len()
    }

    fn set_budget(&mut self, budget: usize) {
        self.budget = budget;
        self.evict_to(budget);
    }

    /// The value of `key`, now the most recently used.
    #[cfg(test)]
    fn get(&mut self, key: &K) -> Option<&V> {
        self.clock += 1;
        let e = self.entries.get_mut(key)?;
        e.2 = self.clock;
        Some(&e.0)
    }

    /// Keeps `value` (replacing one under `key`), evicting the least recently used entries until
    /// it fits; a value costing more than the whole budget is not kept but handed back.
    fn insert(&mut self, key: K, value: V, cost: usize) -> Result<&V, V> {
        if let Some((_, old, _)) = self.entries.remove(&key) {
            self.used -= old;
        }
        if cost > self.budget {
            return Err(value);
        }
        self.evict_to(self.budget - cost);
        self.clock += 1;
        self.used += cost;
        let e = self
            .entries
            .entry(key)
            .insert_entry((value, cost, self.clock));
        Ok(&e.into_mut().0)
    }

    /// Keeps the entries whose key `keep` accepts.
    fn retain(&mut self, mut keep: impl FnMut(&K) -> bool) {
        let mut freed = 0;
        self.entries.retain(|k, e| {
            let kept = keep(k);
            if !kept {
                freed += e.1;
            }
            kept
        });
        self.used -= freed;
        shrink(&mut self.entries);
    }

    /// Takes `key`'s value out.
    fn remove(&mut self, key: &K) -> Option<V> {
        let (v, cost, _) = self.entries.remove(key)?;
        self.used -= cost;
        Some(v)
    }

    /// Evicts the least recently used entry; `false` when there is none.
    fn pop_lru(&mut self) -> bool {
        let Some(oldest) = self
            .entries
            .iter()
            .min_by_key(|(_, e)| e.2)
            .map(|(k, _)| k.clone())
        else {
            return false;
        };
        if let Some((_, cost, _)) = self.entries.remove(&oldest) {
            self.used -= cost;
            self.evicted += 1;
        }
        true
    }

    /// Evicts the least recently used entries until at most `bytes` are used.
    fn evict_to(&mut self, bytes: usize) {
        while self.used > bytes {
            let Some(oldest) = self
                .entries
                .iter()
                .min_by_key(|(_, e)| e.2)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some((_, cost, _)) = self.entries.remove(&oldest) {
                self.used -= cost;
                self.evicted += 1;
            }
        }
        shrink(&mut self.entries);
    }
}

/// The functions of one ELF file by virtual address, and its loadable segments to turn file
/// offsets into addresses. Names stay in the file: a function's is read when a frame first needs
/// it (a large binary's names are tens of MiB; its functions' addresses a tenth of that).
#[derive(Debug, Default)]
struct FunctionTable {
    /// (file offset, its size, virtual address) of each `PT_LOAD` segment.
    segments: Vec<(u64, u64, u64)>,
    /// (start, end, the name's offset in its string table, the string table's index in
    /// `strings`, the symbol's binding), sorted by start, one per address.
    functions: Vec<RawSymbol>,
    /// The string tables: in the file itself (`false`) or its debug file, at (offset, size).
    strings: Vec<(bool, u64, u64)>,
    /// The string table (an index of `strings`) of the PLT entries' names: theirs get `@plt`.
    plt: Option<u8>,
    /// The separate debug file whose `.symtab` named a stripped file's functions, beneath
    /// [`untrusted::DEBUG_DIR`].
    debug: Option<String>,
    /// The file's and the debug file's identity (device, inode, size, modification time) as
    /// opened when the table was read: names are read from the files later, and only from
    /// handles with the same identity.
    identity: Vec<Identity>,
    /// Its bytes charged to the capture's budget while it is kept.
    charge: Option<Charge>,
}

/// A symbol read from a symbol table: (start, size (in a table: end), name offset, string table,
/// binding).
type RawSymbol = (u64, u64, u32, u8, u8);

/// `sh_type` of a `.symtab`, and of a `.dynsym`.
const SHT_SYMTAB: u32 = 2;
const SHT_DYNSYM: u32 = 11;
/// The most bytes of one symbol table read (a large binary's `.symtab` is a few MiB).
const MAX_SYMTAB: u64 = 256 << 20;
/// The most bytes of one name read (Rust's and C++'s mangled names run to a few hundred).
const MAX_NAME: u64 = 4096;

impl FunctionTable {
    /// What the table costs in memory, counted the way [`ByteLru`] bounds it.
    fn bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.segments.capacity() * std::mem::size_of::<(u64, u64, u64)>()
            + self.functions.capacity() * std::mem::size_of::<RawSymbol>()
            + self.strings.capacity() * std::mem::size_of::<(bool, u64, u64)>()
            + self.debug.as_ref().map_or(0, String::capacity)
            + self.identity.capacity() * std::mem::size_of::<Identity>()
    }

    /// The function at file offset `offset`: its name's string table and offset there.
    fn function_at(&self, offset: u64) -> Option<(u8, u32)> {
        let &(seg_off, _, vaddr) = self
            .segments
            .iter()
            .find(|&&(o, size, _)| offset >= o && offset - o < size)?;
        let addr = vaddr.checked_add(offset - seg_off)?;
        let i = self.functions.partition_point(|f| f.0 <= addr);
        let &(_, end, name, table, _) = self.functions.get(i.checked_sub(1)?)?;
        (addr < end).then_some((table, name))
    }

    /// The (demangled) names of the functions at file offsets `offsets` of the file at `path`
    /// (as `pid` names it) this table was read from; `None` when the file (or its debug file)
    /// changed since. The files are opened again through the door, and read only when the open
    /// handles are the files the table was read from.
    fn names(&self, path: &str, pid: Option<u32>, offsets: &[u64]) -> Option<Vec<Option<String>>> {
        let mut files = vec![untrusted::open(path, pid).ok()?];
        if let Some(debug) = &self.debug {
            files.push(untrusted::open_debug_file(debug).ok()?);
        }
        if files
            .iter()
            .map(untrusted::Vetted::identity)
            .ne(self.identity.iter().copied())
        {
            return None;
        }
        let mut open: Vec<Option<crate::elf::Elf<&std::fs::File>>> =
            files.iter().map(|f| crate::elf::of(f.file())).collect();
        let names = offsets
            .iter()
            .map(|&o| {
                let (table, at) = self.function_at(o)?;
                let &(debug, str_off, str_size) = self.strings.get(usize::from(table))?;
                let elf = open.get_mut(usize::from(debug))?.as_mut()?;
                let at = u64::from(at);
                let len = str_size.checked_sub(at)?.min(MAX_NAME);
                let bytes = elf.read(str_off.checked_add(at)?, len, MAX_NAME)?;
                let name = &bytes[..bytes.iter().position(|&b| b == 0)?];
                let name = (!name.is_empty()).then(|| demangle(&String::from_utf8_lossy(name)))?;
                Some(if self.plt == Some(table) {
                    format!("{name}@plt")
                } else {
                    name
                })
            })
            .collect();
        Some(names)
    }

    /// The table of the file at `path` as `pid` names it (opened once, through the door; its
    /// symbol tables read within `max` bytes); `None` when its build id is no longer `build_id`
    /// (rebuilt since it was mapped). A file that cannot be read gets an empty table (it names
    /// nothing and is not read again while kept). A file without `.symtab` (a distribution's
    /// stripped libc: `.dynsym` only) takes its separate debug file's `.symtab` too, as perf does,
    /// where one is installed under `/usr/lib/debug/.build-id/` (root's, opened beneath it).
    ///
    /// `only`: the file offsets the table is read for (it then holds the functions that name them,
    /// and names nothing else right).
    fn read(
        path: &str,
        pid: Option<u32>,
        build_id: Option<&[u8]>,
        max: u64,
        only: Option<&[u64]>,
    ) -> Option<Self> {
        let mut table = Self::default();
        let Ok(file) = untrusted::open(path, pid) else {
            return Some(table);
        };
        if rebuilt(&file, build_id) {
            return None;
        }
        let Some(mut elf) = crate::elf::of(file.file()) else {
            return Some(table);
        };
        table.identity.push(file.identity());
        table.segments = elf
            .program_headers()
            .unwrap_or_default()
            .iter()
            .filter(|p| p.kind == crate::elf::PT_LOAD)
            .map(|p| (p.offset, p.filesz, p.vaddr))
            .collect();
        let mut symbols = Collect::new(only.map(|o| table.addresses(o)));
        let mut left = max;
        let has_symtab = table.symbols(&mut elf, false, &mut symbols, &mut left);
        let debug = build_id
            .filter(|id| id.len() >= 2 && !has_symtab)
            .map(|id| {
                let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
                format!(".build-id/{}/{}.debug", &hex[..2], &hex[2..])
            });
        if let Some((debug, file)) =
            debug.and_then(|d| Some((d.clone(), untrusted::open_debug_file(&d).ok()?)))
        {
            if let Some(mut elf) = crate::elf::of(file.file()) {
                table.identity.push(file.identity());
                table.symbols(&mut elf, true, &mut symbols, &mut left);
                table.debug = Some(debug);
            }
        }
        table.fill(symbols.into_symbols());
        Some(table)
    }

    /// The addresses of file offsets `offsets` (those in a segment), sorted.
    fn addresses(&self, offsets: &[u64]) -> Vec<u64> {
        let mut addrs: Vec<u64> = offsets
            .iter()
            .filter_map(|&o| {
                let &(seg_off, _, vaddr) = self
                    .segments
                    .iter()
                    .find(|&&(s, size, _)| o >= s && o - s < size)?;
                vaddr.checked_add(o - seg_off)
            })
            .collect();
        addrs.sort_unstable();
        addrs.dedup();
        addrs
    }

    /// Adds the functions of `elf`'s `.symtab` and `.dynsym` (those of a debug file: `debug`) to
    /// `symbols`; whether it has a `.symtab`.
    fn symbols(
        &mut self,
        elf: &mut crate::elf::Elf<impl crate::elf::Source>,
        debug: bool,
        symbols: &mut Collect,
        left: &mut u64,
    ) -> bool {
        /// `sh_flags` of a compressed section.
        const SHF_COMPRESSED: u64 = 0x800;
        /// Symbols read at a time.
        const PIECE: u64 = 2048;
        let crate::elf::Header {
            is64, endian: e, ..
        } = *elf.header();
        let sections = elf.sections().unwrap_or_default();
        let entry = if is64 { 24 } else { 16 };
        let mut has_symtab = false;
        for s in &sections {
            let strtab: &[u8] = match s.kind {
                SHT_SYMTAB => b".strtab",
                SHT_DYNSYM => b".dynstr",
                _ => continue,
            };
            has_symtab |= s.kind == SHT_SYMTAB;
            let Some(strings) = sections.iter().find(|t| t.name == strtab) else {
                continue;
            };
            let Ok(table) = u8::try_from(self.strings.len()) else {
                break;
            };
            // What the table's functions may cost (an entry each at most), within the budget.
            let cost = s.size / entry as u64 * std::mem::size_of::<RawSymbol>() as u64;
            if s.size > MAX_SYMTAB || cost > *left {
                continue;
            }
            *left -= cost;
            self.strings.push((debug, strings.offset, strings.size));
            // Read in pieces rather than the whole table at once: a large binary's is a few MiB,
            // and a large buffer, freed, would stay in the heap (RSS) for the rest of the capture.
            // A compressed table (the usual tools do not compress them) is read whole.
            let mut at = 0;
            while at < s.size {
                let piece = if s.flags & SHF_COMPRESSED != 0 {
                    at = s.size;
                    elf.section_data(s, MAX_SYMTAB)
                } else {
                    let len = (s.size - at).min(PIECE * entry as u64);
                    let piece = s.offset.checked_add(at).and_then(|o| elf.read(o, len, len));
                    at += len;
                    piece
                };
                let Some(piece) = piece else {
                    break;
                };
                for sym in piece.chunks_exact(entry) {
                    // Elf64_Sym: name u32, info u8, other u8, shndx u16, value u64, size u64;
                    // Elf32_Sym: name u32, value u32, size u32, info u8, other u8, shndx u16.
                    let parsed = if is64 {
                        (|| {
                            Some((
                                e.u32(sym, 0)?,
                                *sym.get(4)?,
                                e.u16(sym, 6)?,
                                e.u64(sym, 8)?,
                                e.u64(sym, 16)?,
                            ))
                        })()
                    } else {
                        (|| {
                            Some((
                                e.u32(sym, 0)?,
                                *sym.get(12)?,
                                e.u16(sym, 14)?,
                                u64::from(e.u32(sym, 4)?),
                                u64::from(e.u32(sym, 8)?),
                            ))
                        })()
                    };
                    let Some((name, info, shndx, value, size)) = parsed else {
                        continue;
                    };
                    // STT_FUNC or STT_GNU_IFUNC, defined (not SHN_UNDEF), named.
                    let kind = info & 0xf;
                    if (kind == 2 || kind == 10) && shndx != 0 && name != 0 && value != 0 {
                        symbols.push((value, size, name, table, info >> 4));
                    }
                }
            }
        }
        // PLT entries, as perf adds them: `name@plt`, not the symbol before them (`_init`). A
        // debug file's PLT takes no room in the file: the file's own names them.
        if let Some(plt) = (!debug).then(|| elf.plt(&sections)).flatten() {
            let strings = sections.get(plt.strings);
            let cost = (plt.entries.len() * std::mem::size_of::<RawSymbol>()) as u64;
            if let (Some(strings), Ok(table), true) =
                (strings, u8::try_from(self.strings.len()), cost <= *left)
            {
                *left -= cost;
                self.strings.push((false, strings.offset, strings.size));
                self.plt = Some(table);
                for p in plt.entries {
                    symbols.push((p.addr, p.size, p.name, table, 1));
                }
            }
        }
        has_symtab
    }

    /// The table of `symbols`: one per address (of aliases the one perf would pick: with a size,
    /// then global before weak before local); a symbol of size 0 extends to the next one (the
    /// last to the end of the page after its own), as perf's `symbols__fixup_end` reads them;
    /// others end where their size says, so that code past them is named by none.
    fn fill(&mut self, mut symbols: Vec<RawSymbol>) {
        symbols.sort_unstable_by_key(|s| (s.0, alias_order(s)));
        symbols.dedup_by_key(|s| s.0);
        // In place: the end replaces the size (a size of 0 ends at the next start).
        for i in 0..symbols.len() {
            let next = symbols.get(i + 1).map(|n| n.0);
            let s = &mut symbols[i];
            s.1 = match (s.1, next) {
                (0, Some(next)) => next,
                (0, None) => (s.0.saturating_add(0xfff) & !0xfff).saturating_add(0x1000),
                (size, _) => s.0.saturating_add(size),
            };
        }
        symbols.shrink_to_fit();
        self.functions = symbols;
    }
}

/// Of the aliases at one address, those first that [`FunctionTable::fill`] keeps: with a size,
/// then global (`STB_GLOBAL`) before weak before local before others, then by string table and
/// name.
fn alias_order(s: &RawSymbol) -> (bool, u8, u8, u32) {
    let binding = match s.4 {
        1 => 0,
        2 => 1,
        0 => 2,
        _ => 3,
    };
    (s.1 == 0, binding, s.3, s.2)
}

/// Where [`FunctionTable::symbols`] puts the functions it reads: all of them, or only those a
/// table read for some addresses needs (`select`) to name them as the whole table would. That
/// takes one pass with a binary search over the addresses per function (no sort of them all): for
/// an address, the function at the greatest start at or below it (the first of its aliases in
/// [`alias_order`]), and the least start above it (where one of size 0 ends).
#[derive(Debug)]
struct Collect {
    all: Vec<RawSymbol>,
    select: Option<Select>,
}

/// The functions kept for `addrs` (sorted): `at[i]`, of those whose start is in `(addrs[i - 1],
/// addrs[i]]`, the one at the greatest start; `next[i]`, of those whose start is in `(addrs[i],
/// addrs[i + 1]]` (or above the last), the one at the least.
#[derive(Debug)]
struct Select {
    addrs: Vec<u64>,
    at: Vec<Option<RawSymbol>>,
    next: Vec<Option<RawSymbol>>,
}

impl Collect {
    fn new(addrs: Option<Vec<u64>>) -> Self {
        Self {
            all: Vec::new(),
            select: addrs.map(|addrs| Select {
                at: vec![None; addrs.len()],
                next: vec![None; addrs.len()],
                addrs,
            }),
        }
    }

    fn push(&mut self, s: RawSymbol) {
        let Some(sel) = &mut self.select else {
            self.all.push(s);
            return;
        };
        let i = sel.addrs.partition_point(|&a| a < s.0);
        if let Some(at) = sel.at.get_mut(i) {
            if at.is_none_or(|c| (c.0, Reverse(alias_order(&c))) < (s.0, Reverse(alias_order(&s))))
            {
                *at = Some(s);
            }
        }
        if let Some(next) = i.checked_sub(1).and_then(|i| sel.next.get_mut(i)) {
            if next.is_none_or(|c| (s.0, alias_order(&s)) < (c.0, alias_order(&c))) {
                *next = Some(s);
            }
        }
    }

    /// What the table is filled with.
    fn into_symbols(self) -> Vec<RawSymbol> {
        match self.select {
            None => self.all,
            Some(sel) => sel.at.into_iter().chain(sel.next).flatten().collect(),
        }
    }
}

/// The function table of an ELF file whose bytes `elf` reads (the fuzz target's way in: no file
/// is opened), and for each of `offsets` the name's (string table, offset) it finds there.
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) fn function_table_of(
    elf: &mut crate::elf::Elf<impl crate::elf::Source>,
    offsets: &[u64],
) -> Vec<Option<(u8, u32)>> {
    table_of(elf, offsets, false, 1 << 20)
}

/// [`function_table_of`] within `budget` bytes of symbols; `select`: the table read for `offsets`
/// only (as the final snapshot reads it).
#[cfg(any(test, feature = "fuzzing"))]
fn table_of(
    elf: &mut crate::elf::Elf<impl crate::elf::Source>,
    offsets: &[u64],
    select: bool,
    mut budget: u64,
) -> Vec<Option<(u8, u32)>> {
    let mut table = FunctionTable {
        segments: elf
            .program_headers()
            .unwrap_or_default()
            .iter()
            .filter(|p| p.kind == crate::elf::PT_LOAD)
            .map(|p| (p.offset, p.filesz, p.vaddr))
            .collect(),
        ..FunctionTable::default()
    };
    let mut symbols = Collect::new(select.then(|| table.addresses(offsets)));
    table.symbols(elf, false, &mut symbols, &mut budget);
    table.fill(symbols.into_symbols());
    // A filled table is sorted by start, one function per start, none ending before it starts.
    assert!(table.functions.windows(2).all(|w| w[0].0 < w[1].0));
    assert!(table.functions.iter().all(|f| f.0 <= f.1));
    assert!(!select || table.functions.len() <= 2 * offsets.len());
    offsets.iter().map(|&o| table.function_at(o)).collect()
}

/// `name` demangled (Rust, then C++), or as it is.
fn demangle(name: &str) -> String {
    #[cfg(feature = "symbolize")]
    {
        if let Ok(d) = rustc_demangle::try_demangle(name) {
            return format!("{d:#}");
        }
        if name.starts_with("_Z") {
            if let Some(d) = cpp_demangle::Symbol::new(name)
                .ok()
                .and_then(|s| s.demangle().ok())
            {
                return d;
            }
        }
    }
    name.to_owned()
}

/// For those of `offsets` (file offsets) in a PLT entry of the ELF file `file`: their index and
/// the entry's name, `name@plt` as perf gives it.
#[cfg(feature = "symbolize")]
fn plt_names(file: &std::fs::File, offsets: &[u64]) -> Vec<(usize, String)> {
    /// The longest name read from the PLT's string table (`.dynstr`).
    const MAX_NAME: u64 = 64 << 10;
    let Some(mut elf) = crate::elf::of(file) else {
        return Vec::new();
    };
    let sections = elf.sections().unwrap_or_default();
    // Most batches hold no PLT frame: then no relocation is read.
    let in_plt = |o: u64| {
        sections.iter().any(|s| {
            matches!(&s.name[..], b".plt" | b".plt.sec" | b".plt.got")
                && o.checked_sub(s.offset).is_some_and(|d| d < s.size)
        })
    };
    if !offsets.iter().any(|&o| in_plt(o)) {
        return Vec::new();
    }
    let Some(plt) = elf.plt(&sections).filter(|p| !p.entries.is_empty()) else {
        return Vec::new();
    };
    let segments: Vec<_> = elf
        .program_headers()
        .unwrap_or_default()
        .into_iter()
        .filter(|p| p.kind == crate::elf::PT_LOAD)
        .collect();
    // Each name read alone: the table is MiBs in a large library.
    let Some(names) = sections.get(plt.strings) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for (i, &offset) in offsets.iter().enumerate() {
        let Some(addr) = segments.iter().find_map(|p| {
            let inside = offset.checked_sub(p.offset).filter(|&d| d < p.filesz)?;
            p.vaddr.checked_add(inside)
        }) else {
            continue;
        };
        let at = plt.entries.partition_point(|e| e.addr <= addr);
        let Some(e) = at.checked_sub(1).and_then(|at| plt.entries.get(at)) else {
            continue;
        };
        if addr - e.addr >= e.size {
            continue;
        }
        let name = elf.string(names, e.name, MAX_NAME).unwrap_or_default();
        if !name.is_empty() {
            found.push((i, format!("{}@plt", String::from_utf8_lossy(&name))));
        }
    }
    found
}

/// [`Mode::Local`]'s lines of `offsets` of the file at `path` (as `pid` names it) by one pass over
/// its symbol tables (`None`: an offset for blazesym), and whether it was rebuilt since it was
/// mapped; `None`: the whole file for blazesym (see [`scan::local`]), or it cannot be opened.
#[cfg(feature = "symbolize")]
fn scanned(
    path: &str,
    pid: Option<u32>,
    build_id: Option<&[u8]>,
    offsets: &[u64],
) -> Option<(Vec<Option<Vec<Line>>>, bool)> {
    let opened = untrusted::open(path, pid).ok()?;
    if rebuilt(&opened, build_id) {
        return Some((Vec::new(), true));
    }
    Some((scan::local(opened.file(), offsets)?, false))
}

/// Whether the file `opened` was rebuilt since it was mapped: the mapping named `build_id` and the
/// file has another now (one without a build id, or unreadable, is taken as the one mapped).
fn rebuilt(opened: &untrusted::Vetted, build_id: Option<&[u8]>) -> bool {
    build_id.is_some_and(|id| {
        crate::maps::build_id::of_file(opened.file()).is_some_and(|now| now != id)
    })
}

/// Whether the ELF file `file` names another file for its debug information (a section
/// `.gnu_debuglink`, `.gnu_debugaltlink` or `.debug_sup`), or its sections cannot be read.
#[cfg(feature = "symbolize")]
fn names_other_files(file: &std::fs::File) -> bool {
    crate::elf::of(file)
        .and_then(|mut e| e.sections())
        .is_none_or(|sections| names_another_file(&sections))
}

/// Whether `sections` (an ELF file's) name another file for its debug information.
#[cfg(feature = "symbolize")]
fn names_another_file(sections: &[crate::elf::SectionHeader]) -> bool {
    sections.iter().any(|s| {
        matches!(
            &s.name[..],
            b".gnu_debuglink" | b".gnu_debugaltlink" | b".debug_sup"
        )
    })
}

/// What one file offset's lines cost kept: the map's entry, the shared list, its strings.
fn cached_bytes(lines: &[Line]) -> usize {
    let entry = std::mem::size_of::<(u64, Cached)>() + 16;
    entry
        + lines
            .iter()
            .map(|l| {
                std::mem::size_of::<Line>()
                    + l.function.capacity()
                    + l.file.as_ref().map_or(0, String::capacity)
            })
            .sum::<usize>()
}

/// Gives a map's memory back once most of it is unused (a burst of frames that is over).
fn shrink<K: std::hash::Hash + Eq, V>(map: &mut HashMap<K, V>) {
    if map.capacity() > 64 && map.len() < map.capacity() / 4 {
        map.shrink_to_fit();
    }
}

/// The name of code at `offset` of the mapped `path` that no symbol covers, as perf prints a DSO's
/// unresolved frames: `[libc.so.6+0x2a0f3]`, `[vdso+0xc01]`, `[anon+0x10]`.
fn located(path: &str, offset: u64) -> String {
    let base = path.rsplit('/').next().unwrap_or(path);
    let base = base.trim_start_matches('[').trim_end_matches(']');
    let base = if base.is_empty() { "anon" } else { base };
    format!("[{base}+{offset:#x}]")
}

/// A symbolizer with empty caches: names, file:line and inlined functions, demangled.
///
/// blazesym never gets a path to open: the file is opened through the door and handed to it as
/// `/proc/self/fd/N`, the open file itself, which its symbolizer keeps open (see `kept`). Its
/// DWARF is read only when the file names no other file (no `.gnu_debuglink`,
/// `.gnu_debugaltlink` or `.debug_sup`): blazesym would open what those name, in the file's
/// directory among others, with a plain open. Such a file is named from its ELF symbols only (no
/// file:line). No debug directory either, for the same reason.
#[cfg(feature = "symbolize")]
fn new_symbolizer() -> blazesym::symbolize::Symbolizer {
    blazesym::symbolize::Symbolizer::builder()
        .set_debug_dirs(Some(Vec::<std::path::PathBuf>::new()))
        // The path is a descriptor held open with the symbolizer: the same file for its whole
        // life, so there is nothing to check again at each batch.
        .enable_auto_reload(false)
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
    #[cfg(feature = "symbolize")]
    use scan::Found;

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
        // An address in no mapping is perf's `[unknown]`; unresolved frames share one empty
        // list.
        assert_eq!(symbols.lines(&frames[1])[0].function, "[unknown]");
        let (a, b) = (
            symbols.shared_lines(&frames[2]),
            symbols.shared_lines(&Frame::KernelHidden),
        );
        assert!(a.is_empty() && Arc::ptr_eq(&a, &b));
        assert!(symbols.lines(&Frame::Kernel { addr: 1 }).is_empty());
    }

    /// Code that no symbol can name gets where it is as its function (perf's DSO+offset form), in
    /// `local` and `functions`; `none` leaves it to the backend.
    #[test]
    fn code_outside_files_is_named_where_it_is() {
        assert_eq!(located("/usr/lib/libx.so.1", 0x1234), "[libx.so.1+0x1234]");
        assert_eq!(located("[vdso]", 0xc01), "[vdso+0xc01]");
        assert_eq!(located("//anon", 0x10), "[anon+0x10]");
        assert_eq!(located("", 0x10), "[anon+0x10]");
        assert_eq!(located("/tmp/a.so (deleted)", 0), "[a.so (deleted)+0x0]");
        let mut maps = AddressSpaces::new();
        maps.mmap(1, 0x7000_0000, 0x2000, 0, "[vdso]", None);
        let frame = Frame::User {
            mapping: maps.find(1, 0x7000_0c01).unwrap(),
            addr: 0x7000_0c01,
        };
        let kernel = KernelSymbols::default();
        for mode in [Mode::Local, Mode::Functions] {
            let mut symbols = Symbols::new(mode);
            symbols.resolve(&[frame], &maps, &kernel);
            assert_eq!(
                symbols.lines(&frame)[0].function,
                "[vdso+0xc01]",
                "{mode:?}"
            );
        }
        let mut symbols = Symbols::new(Mode::None);
        symbols.resolve(&[frame], &maps, &kernel);
        assert!(symbols.lines(&frame).is_empty());
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
        // Local mode keeps the file offsets' lines within their bytes, however long unused.
        for _ in 0..=KEEP_INTERVALS {
            symbols.end_interval();
        }
        assert_eq!(symbols.files.len(), 1);
        assert_eq!(symbols.kept_lines().1, 0);
        assert!(symbols.kept_lines().0 > 0);
        symbols.set_lines_bytes(0);
        symbols.end_interval();
        assert!(symbols.files.is_empty());
        assert_eq!(symbols.kept_lines(), (0, 1));
    }

    /// A copy of this test binary at a path of its own, and frames at `addrs` (functions of this
    /// binary) in a process that maps it.
    #[cfg(feature = "symbolize")]
    fn copy_of_this_binary(
        name: &str,
        addrs: &[u64],
    ) -> (std::path::PathBuf, AddressSpaces, Vec<Frame>) {
        let mut own = AddressSpaces::new();
        own.seed(1, &std::fs::read_to_string("/proc/self/maps").unwrap());
        let m = own.mapping(own.find(1, addrs[0]).unwrap()).unwrap().clone();
        let dir = std::env::temp_dir().join(format!("pp-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let copy = dir.join("bin");
        std::fs::copy(&*m.path, &copy).unwrap();
        let mut maps = AddressSpaces::new();
        maps.mmap(
            2,
            m.start,
            m.end - m.start,
            m.file_offset,
            copy.to_str().unwrap(),
            None,
        );
        let frames = addrs
            .iter()
            .map(|&addr| Frame::User {
                mapping: maps.find(2, addr).unwrap(),
                addr,
            })
            .collect();
        (dir, maps, frames)
    }

    /// Local mode reads a file once while it is kept: a later interval's new frame in it is named
    /// by the symbolizer kept from the first batch (not a second read), also after the first
    /// frames were forgotten; a file replaced under the same path (another inode) is read again;
    /// with no room for files each batch reads its file and the file goes (counted).
    #[cfg(feature = "symbolize")]
    #[test]
    fn local_mode_keeps_a_files_symbolizer_across_intervals_and_reads_a_replaced_file_again() {
        let here =
            local_mode_keeps_a_files_symbolizer_across_intervals_and_reads_a_replaced_file_again
                as fn() as usize as u64;
        let other = demangle as fn(&str) -> String as usize as u64;
        let third = located as fn(&str, u64) -> String as usize as u64;
        let (dir, maps, frames) = copy_of_this_binary("kept", &[here, other, third]);
        let kernel = KernelSymbols::default();
        let mut symbols = Symbols::new(Mode::Local);
        // A file's cost is the process's RSS growth while its batch runs: tests running beside
        // it add theirs, so room enough for that.
        symbols.set_budget(Budget::new(4 << 30));
        symbols.set_kept_files_bytes(2 << 30);
        let named = |s: &Symbols, f: &Frame, name: &str| {
            s.lines(f)
                .iter()
                .any(|l| l.function.ends_with(name) && l.line.is_some())
        };
        symbols.resolve(&frames[..1], &maps, &kernel);
        assert!(
            named(&symbols, &frames[0], "reads_a_replaced_file_again"),
            "{:?}",
            symbols.lines(&frames[0])
        );
        let first = symbols.kept_files();
        assert_eq!(
            (first.read, first.reused, first.files),
            (1, 0, 1),
            "{first:?}"
        );
        assert!(first.bytes >= MIN_FILE_BYTES, "{first:?}");
        for _ in 0..=KEEP_INTERVALS {
            symbols.end_interval();
        }
        symbols.resolve(&frames[1..2], &maps, &kernel);
        assert!(
            named(&symbols, &frames[1], "demangle"),
            "{:?}",
            symbols.lines(&frames[1])
        );
        let again = symbols.kept_files();
        assert_eq!(
            (again.read, again.reused, again.files),
            (1, 1, 1),
            "{again:?}"
        );
        // Replaced (a new inode under the path): read again; the old one is let go in time.
        let path = dir.join("bin");
        std::fs::copy(&path, dir.join("new")).unwrap();
        std::fs::rename(dir.join("new"), &path).unwrap();
        symbols.resolve(&frames[2..], &maps, &kernel);
        assert!(
            named(&symbols, &frames[2], "located"),
            "{:?}",
            symbols.lines(&frames[2])
        );
        let replaced = symbols.kept_files();
        assert_eq!((replaced.read, replaced.reused), (2, 1), "{replaced:?}");
        // No room for files: each batch reads its file, which goes after it.
        let mut none = Symbols::new(Mode::Local);
        none.set_kept_files_bytes(0);
        none.resolve(&frames[..1], &maps, &kernel);
        none.resolve(&frames[1..2], &maps, &kernel);
        assert!(named(&none, &frames[1], "demangle"));
        let k = none.kept_files();
        assert_eq!(
            (k.read, k.reused, k.files, k.bytes, k.evicted),
            (2, 0, 0, 0, 2),
            "{k:?}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Local mode's symbolizers live on one thread: a batch stuck on a file (a hung file system)
    /// must not hold up another file's for longer than STUCK_AFTER, nor a snapshot for longer
    /// than its wait.
    #[cfg(feature = "symbolize")]
    #[test]
    fn a_stuck_file_in_local_mode_does_not_hold_up_other_files() {
        let maps_text = std::fs::read_to_string("/proc/self/maps").unwrap();
        let mut own = AddressSpaces::new();
        own.seed(1, &maps_text);
        // Two copies of the C library (small, quick to symbolize): one held as stuck.
        let Some(libc) = maps_text
            .lines()
            .filter(|l| l.contains("libc.so") && l.contains("r-xp"))
            .find_map(|l| Some(u64::from_str_radix(l.split('-').next()?, 16).ok()? + 0x100))
        else {
            println!("skipped: no C library mapped");
            return;
        };
        let m = own.mapping(own.find(1, libc).unwrap()).unwrap().clone();
        let dir = std::env::temp_dir().join(format!("pp-stuck-local-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut maps = AddressSpaces::new();
        let mut frames = Vec::new();
        for (pid, name) in [(2, "stuck"), (3, "free")] {
            let copy = dir.join(name);
            std::fs::copy(&*m.path, &copy).unwrap();
            let path = copy.to_str().unwrap();
            maps.mmap(pid, m.start, m.end - m.start, m.file_offset, path, None);
            frames.push(Frame::User {
                mapping: maps.find(pid, libc).unwrap(),
                addr: libc,
            });
        }
        let stuck_path = dir.join("stuck");
        let stuck_path = stuck_path.to_str().unwrap();
        crate::untrusted::stall::hold(stuck_path);
        let kernel = KernelSymbols::default();
        let mut symbols = Symbols::new(Mode::Local);
        symbols.set_loader(crate::untrusted::Loader::new(), Duration::from_millis(50));
        symbols.kept.set_stuck_after(Duration::from_millis(300));
        let started = std::time::Instant::now();
        symbols.resolve(&frames[..1], &maps, &kernel);
        assert!(symbols.lines(&frames[0]).is_empty());
        assert!(started.elapsed() < Duration::from_secs(2));
        let mut named = false;
        for _ in 0..200 {
            symbols.resolve(&frames[1..], &maps, &kernel);
            named = !symbols.lines(&frames[1]).is_empty();
            if named {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let took = started.elapsed();
        crate::untrusted::stall::release(stuck_path);
        assert!(named, "{:?}", symbols.lines(&frames[1]));
        assert!(took < Duration::from_secs(3), "{took:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Offsets of the ELF file at `path` to name: of every `step`-th symbol of its symbol tables
    /// (functions, and the objects and labels blazesym also orders by address) its start, start +
    /// 1, its last byte, its end and the byte before it; the file's first byte, 300 offsets spread
    /// over it and offsets past every segment. As file offsets (through its `PT_LOAD` segments), sorted, distinct.
    #[cfg(feature = "symbolize")]
    fn offsets_to_name(path: &str, step: usize) -> Vec<u64> {
        let file = std::fs::File::open(path).unwrap();
        let mut elf = crate::elf::of(&file).unwrap();
        let header = *elf.header();
        let loads: Vec<_> = elf
            .program_headers()
            .unwrap()
            .into_iter()
            .filter(|p| p.kind == crate::elf::PT_LOAD)
            .collect();
        let sections = elf.sections().unwrap();
        let mut addrs = Vec::new();
        for (table, strings) in [(&b".symtab"[..], &b".strtab"[..]), (b".dynsym", b".dynstr")] {
            let (Some(t), Some(n)) = (
                sections.iter().find(|s| s.name == table),
                sections.iter().find(|s| s.name == strings),
            ) else {
                continue;
            };
            let bytes = elf.section_data(t, 1 << 30).unwrap_or_default();
            let names = elf.section_data(n, 1 << 30).unwrap_or_default();
            for sym in crate::elf::symbols(&bytes, &names, &header, t.entsize)
                .filter(|s| matches!(s.kind, 0 | 1 | 2 | 10) && s.value != 0)
                .step_by(step)
            {
                let end = sym.value.saturating_add(sym.size);
                addrs.extend([
                    sym.value,
                    sym.value + 1,
                    sym.value - 1,
                    end,
                    end.saturating_sub(1),
                ]);
            }
        }
        let mut offsets: Vec<u64> = addrs
            .into_iter()
            .filter_map(|a| {
                let p = loads
                    .iter()
                    .find(|p| a >= p.vaddr && a - p.vaddr < p.filesz)?;
                Some(a - p.vaddr + p.offset)
            })
            .collect();
        let end = loads.iter().map(|p| p.offset + p.filesz).max().unwrap_or(0);
        offsets.extend([0, end, end + 0x1000]);
        // And 300 spread over the file: inside functions, between them, in data.
        offsets.extend((0..300).map(|i| end / 300 * i + 7));
        offsets.sort_unstable();
        offsets.dedup();
        offsets
    }

    /// Process 2's frames at `offsets` of the file at `path`, mapped whole at one address.
    fn frames_at(path: &str, offsets: &[u64]) -> (AddressSpaces, Vec<Frame>) {
        let base = 0x5500_0000_0000;
        let mut maps = AddressSpaces::new();
        maps.mmap(2, base, 1 << 30, 0, path, None);
        let frames = offsets
            .iter()
            .map(|&o| Frame::User {
                mapping: maps.find(2, base + o).unwrap(),
                addr: base + o,
            })
            .collect();
        (maps, frames)
    }

    /// Real files of this machine (those present), and a C program built here with and without
    /// `-g`: (what it is, its path).
    #[cfg(feature = "symbolize")]
    fn real_files(dir: &std::path::Path) -> Vec<(String, String)> {
        let mut files = Vec::new();
        let python = std::fs::canonicalize("/usr/bin/python3")
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_else(|_| "/usr/bin/python3".into());
        for path in [
            "/usr/bin/node",
            "/usr/lib/x86_64-linux-gnu/libc.so.6",
            "/usr/bin/perf",
            &python,
            "/usr/bin/xz",
        ] {
            if std::path::Path::new(path).is_file() {
                files.push((path.to_owned(), path.to_owned()));
            } else {
                println!("skipped: {path}: absent");
            }
        }
        let src = dir.join("prog.c");
        std::fs::write(
            &src,
            "#include <stdio.h>\nstatic int helper(int x) { return x * 3 + 1; }\n\
             int twice(int x) { return helper(x) * 2; }\n\
             int main(int argc, char **argv) { printf(\"%d\\n\", twice(argc)); return 0; }\n",
        )
        .unwrap();
        for (name, flags) in [("prog-g", &["-g", "-O1"][..]), ("prog", &["-O1"][..])] {
            let out = dir.join(name);
            let built = std::process::Command::new("cc")
                .args(flags)
                .arg("-o")
                .arg(&out)
                .arg(&src)
                .status()
                .is_ok_and(|s| s.success());
            if built {
                files.push((name.to_owned(), out.to_string_lossy().into_owned()));
            } else {
                println!("skipped: {name}: no C compiler (cc)");
            }
        }
        files
    }

    /// The final snapshot's scan of a file's symbol tables names every offset as blazesym does:
    /// for files it scans, exactly local mode's lines (blazesym as local mode runs it); for every
    /// file, each offset's symbol under blazesym's ELF rules (blazesym without DWARF), where its
    /// pick does not depend on its sort's order (where it does, blazesym's name is one of the
    /// candidates the scan gives, and such a file goes to blazesym).
    #[cfg(feature = "symbolize")]
    #[test]
    fn the_final_scan_names_every_offset_as_blazesym_does() {
        let dir = std::env::temp_dir().join(format!("pp-scan-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut compared = 0;
        for (what, path) in real_files(&dir) {
            let file = std::fs::File::open(&path).unwrap();
            let mut elf = crate::elf::of(&file).unwrap();
            let sections = elf.sections().unwrap();
            let no_dwarf = scan::has_no_dwarf(&sections);
            let symbols = elf
                .sections()
                .unwrap()
                .iter()
                .filter(|s| s.name == b".symtab" || s.name == b".dynsym")
                .map(|s| s.size / 24)
                .sum::<u64>();
            let step = (symbols as usize / 300).max(1);
            let offsets = offsets_to_name(&path, step);
            let found = scan::find(&mut elf, &sections, &offsets).unwrap();
            let plt: Vec<usize> = plt_names(&file, &offsets)
                .into_iter()
                .map(|p| p.0)
                .collect();
            let elf_only = kept::blazesym_lines(file.try_clone().unwrap(), false, &offsets);
            let mut ambiguous = 0;
            for (i, (f, b)) in found.iter().zip(&elf_only).enumerate() {
                if plt.contains(&i) {
                    continue;
                }
                let o = offsets[i];
                match f {
                    Found::Nothing => assert!(b.is_empty(), "{what} {o:#x}: blazesym {b:?}"),
                    Found::Name(n) => assert_eq!(
                        b,
                        &[Line {
                            function: n.clone(),
                            file: None,
                            line: None
                        }],
                        "{what} {o:#x}"
                    ),
                    Found::Ambiguous(names, all) => {
                        ambiguous += 1;
                        assert!(
                            b.len() == 1 && (!all || names.contains(&Some(b[0].function.clone()))),
                            "{what} {o:#x}: blazesym {b:?}, candidates {names:?}"
                        );
                    }
                }
                compared += 1;
            }
            // What local mode answers today (blazesym, its DWARF allowed where the file names no
            // other file), and what the final snapshot answers now.
            let local = kept::blazesym_lines(
                file.try_clone().unwrap(),
                !names_other_files(&file),
                &offsets,
            );
            let scanned = scan::local(&file, &offsets);
            let left = scanned
                .as_ref()
                .map(|l| l.iter().filter(|l| l.is_none()).count());
            println!(
                "{what}: {} offsets, {symbols} symbols, no DWARF: {no_dwarf}, ambiguous: \
                 {ambiguous}, left to blazesym: {left:?}",
                offsets.len(),
            );
            let Some(scanned) = scanned else {
                // DWARF the scan cannot place (units not in `.debug_aranges`): blazesym's.
                assert!(!no_dwarf, "{what}");
                continue;
            };
            for (i, (s, l)) in scanned.iter().zip(&local).enumerate() {
                if let Some(s) = s {
                    assert_eq!(s, l, "{what} {:#x}", offsets[i]);
                    compared += 1;
                }
            }
            if no_dwarf {
                assert_eq!(left, Some(ambiguous), "{what}");
            }
            // A file without DWARF: blazesym's answers with and without it agree.
            if no_dwarf {
                assert_eq!(local, elf_only, "{what}");
            }
        }
        assert!(compared > 1000, "{compared}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// [`Mode::Functions`]'s final snapshot reads a file's table for the offsets asked only (one
    /// pass, the functions that name them kept, not all of them sorted): it names every offset of
    /// the real files as the whole table does, and a final resolve names frames as one that keeps
    /// the table, keeping none.
    #[cfg(feature = "symbolize")]
    #[test]
    fn the_final_function_table_names_every_offset_as_the_whole_table_does() {
        let dir = std::env::temp_dir().join(format!("pp-fscan-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut compared = 0;
        for (what, path) in real_files(&dir) {
            let file = std::fs::File::open(&path).unwrap();
            let size = std::fs::metadata(&path).unwrap().len();
            let offsets = offsets_to_name(&path, (size >> 16).max(1) as usize);
            let table = |select| {
                let mut elf = crate::elf::of(&file).unwrap();
                table_of(&mut elf, &offsets, select, 1 << 30)
            };
            let (whole, selected) = (table(false), table(true));
            for (i, (w, s)) in whole.iter().zip(&selected).enumerate() {
                assert_eq!(w, s, "{what} {:#x}", offsets[i]);
            }
            let named = whole.iter().filter(|w| w.is_some()).count();
            println!("{what}: {} offsets, {named} named", offsets.len());
            assert!(named > 0, "{what}");
            compared += offsets.len();
            if what == "prog" {
                let (maps, frames) = frames_at(&path, &offsets);
                let kernel = KernelSymbols::default();
                let mut kept = Symbols::new(Mode::Functions);
                kept.resolve(&frames, &maps, &kernel);
                assert_eq!(kept.function_tables().1, 1);
                let mut last = Symbols::new(Mode::Functions);
                last.set_kept_files_bytes(0);
                last.resolve(&frames, &maps, &kernel);
                assert_eq!(last.function_tables(), (0, 0));
                for f in &frames {
                    assert_eq!(last.lines(f), kept.lines(f), "{f:?}");
                }
                assert!(frames
                    .iter()
                    .any(|f| last.lines(f).iter().any(|l| l.function == "twice")));
            }
        }
        assert!(compared > 3000, "{compared}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A capture's final snapshot (nothing kept after it) names a file without DWARF by one pass
    /// over its symbol tables: blazesym reads (and sorts) nothing, and the names are those of a
    /// snapshot that keeps the file (blazesym's).
    #[cfg(feature = "symbolize")]
    #[test]
    fn a_final_resolve_of_a_file_without_dwarf_scans_rather_than_sorts() {
        let dir = std::env::temp_dir().join(format!("pp-noscan-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let Some((_, path)) = real_files(&dir).into_iter().find(|(w, _)| w == "prog") else {
            println!("skipped: no C compiler");
            return;
        };
        // Not those where blazesym's pick depends on its sort's order (`data_start`,
        // `__data_start`): they go to blazesym.
        let file = std::fs::File::open(&path).unwrap();
        let mut elf = crate::elf::of(&file).unwrap();
        let sections = elf.sections().unwrap();
        let mut offsets = offsets_to_name(&path, 1);
        let found = scan::find(&mut elf, &sections, &offsets).unwrap();
        let all = offsets.len();
        let mut i = 0;
        offsets.retain(|_| {
            i += 1;
            !matches!(found[i - 1], Found::Ambiguous(..))
        });
        assert!(offsets.len() * 10 > all * 9, "{} of {all}", offsets.len());
        let (maps, frames) = frames_at(&path, &offsets);
        let kernel = KernelSymbols::default();
        let mut kept = Symbols::new(Mode::Local);
        kept.resolve(&frames, &maps, &kernel);
        assert_eq!(kept.kept_files().read, 1);
        let mut last = Symbols::new(Mode::Local);
        last.set_kept_files_bytes(0);
        last.resolve(&frames, &maps, &kernel);
        assert_eq!(
            (last.kept_files().read, last.scanned),
            (0, 1),
            "blazesym read the file"
        );
        let mut named = 0;
        for f in &frames {
            assert_eq!(last.lines(f), kept.lines(f), "{f:?}");
            named += usize::from(last.lines(f).iter().any(|l| l.function == "twice"));
        }
        assert!(named > 0);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_byte_lru_keeps_within_its_budget_and_evicts_the_least_recently_used() {
        let mut lru: ByteLru<&str, u32> = ByteLru::new(100);
        assert_eq!(lru.insert("a", 1, 40).ok(), Some(&1));
        assert_eq!(lru.insert("b", 2, 40).ok(), Some(&2));
        assert_eq!((lru.used(), lru.len()), (80, 2));
        // `a` used since `b`: `b` goes for `c`.
        assert_eq!(lru.get(&"a"), Some(&1));
        assert_eq!(lru.insert("c", 3, 30).ok(), Some(&3));
        assert_eq!(lru.get(&"b"), None);
        assert_eq!((lru.used(), lru.len()), (70, 2));
        // Replacing a key counts its new cost only.
        lru.insert("c", 4, 50).unwrap();
        assert_eq!((lru.used(), lru.len()), (90, 2));
        assert_eq!(lru.get(&"c"), Some(&4));
        // More than the whole budget: handed back, nothing evicted for it.
        assert_eq!(lru.insert("d", 5, 101).err(), Some(5));
        assert_eq!((lru.used(), lru.len()), (90, 2));
        // Exactly the budget: everything else goes.
        lru.insert("e", 6, 100).unwrap();
        assert_eq!((lru.used(), lru.len()), (100, 1));
        assert_eq!(lru.get(&"a"), None);
        // A smaller budget evicts at once.
        lru.insert("f", 7, 0).unwrap();
        lru.set_budget(10);
        assert_eq!((lru.used(), lru.len()), (0, 1));
        assert_eq!(lru.get(&"f"), Some(&7));
        // Retaining counts what it drops.
        lru.insert("g", 8, 6).unwrap();
        lru.insert("h", 9, 4).unwrap();
        lru.retain(|k| *k != "g");
        assert_eq!((lru.used(), lru.len()), (4, 2));
        assert_eq!(lru.get(&"g"), None);
    }

    #[test]
    fn a_function_table_finds_offsets_by_segment_and_size_picking_one_alias() {
        let mut t = FunctionTable {
            // File offsets 0x1000.. are addresses 0x401000..
            segments: vec![(0x1000, 0x1000, 0x40_1000)],
            ..FunctionTable::default()
        };
        // (start, size, name offset, string table, binding: 0 local, 1 global, 2 weak)
        t.fill(vec![
            (0x40_1400, 8, 60, 0, 1),
            (0x40_1100, 0x10, 10, 0, 0),
            (0x40_1200, 0x20, 20, 0, 0),
            (0x40_1200, 0x20, 30, 1, 2),
            (0x40_1200, 0x20, 40, 0, 1),
            (0x40_1200, 0, 45, 0, 1),
            (0x40_1300, 0, 50, 1, 1),
            (0x40_1500, 0, 70, 0, 1),
        ]);
        assert_eq!(t.functions.len(), 5, "one per address");
        let at = |o| t.function_at(o);
        assert_eq!(at(0x1100), Some((0, 10)));
        assert_eq!(at(0x110f), Some((0, 10)));
        assert_eq!(at(0x1110), None, "past the symbol's size");
        assert_eq!(at(0x1210), Some((0, 40)), "sized and global first");
        // Size 0: up to the next symbol.
        assert_eq!(at(0x13ff), Some((1, 50)));
        assert_eq!(at(0x1404), Some((0, 60)));
        assert_eq!(at(0x1408), None);
        // The last, of size 0: to the end of the page after its own, as perf's fixup has it.
        assert_eq!(at(0x1fff), Some((0, 70)));
        assert_eq!(at(0x10ff), None, "before the first function");
        assert_eq!(at(0x2100), None, "outside every segment");
        assert!(t.bytes() >= 4 * 24);
        assert_eq!(
            demangle("_ZN4core3fmt5write17h0123456789abcdefE"),
            "core::fmt::write"
        );
        assert_eq!(demangle("_ZN3foo3barEv"), "foo::bar()");
        assert_eq!(demangle("memcpy"), "memcpy");
    }

    /// [`Mode::Functions`] names this test binary's functions from its symbol table, with no file
    /// or line, and keeps the file's table across intervals while frames of the file are named:
    /// a frame forgotten after KEEP_INTERVALS is named again from the kept table.
    #[cfg(feature = "symbolize")]
    #[test]
    fn functions_mode_names_from_the_symbol_table_without_lines_and_keeps_the_table() {
        let here = functions_mode_names_from_the_symbol_table_without_lines_and_keeps_the_table
            as fn() as usize as u64;
        let maps_text = std::fs::read_to_string("/proc/self/maps").unwrap();
        let mut maps = AddressSpaces::new();
        maps.seed(1, &maps_text);
        let frame = Frame::User {
            mapping: maps.find(1, here).unwrap(),
            addr: here,
        };
        let kernel = KernelSymbols::default();
        let mut symbols = Symbols::new(Mode::Functions);
        symbols.resolve(&[frame], &maps, &kernel);
        let lines = symbols.lines(&frame).to_vec();
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].function.ends_with(
                "functions_mode_names_from_the_symbol_table_without_lines_and_keeps_the_table"
            ),
            "{lines:?}"
        );
        assert_eq!((lines[0].file.as_deref(), lines[0].line), (None, None));
        let (bytes, files) = symbols.function_tables();
        assert_eq!(files, 1);
        assert!(bytes > 0 && bytes <= FUNCTION_TABLES_BYTES, "{bytes}");
        // Another function of the file named in every interval keeps the table: `frame`,
        // forgotten, is named again from it.
        let other_addr = demangle as fn(&str) -> String as usize as u64;
        let other = Frame::User {
            mapping: maps.find(1, other_addr).unwrap(),
            addr: other_addr,
        };
        for _ in 0..=KEEP_INTERVALS {
            symbols.resolve(&[other], &maps, &kernel);
            symbols.end_interval();
        }
        assert!(symbols.lines(&frame).is_empty(), "the frame is forgotten");
        assert!(symbols.lines(&other)[0].function.ends_with("demangle"));
        assert_eq!(symbols.function_tables(), (bytes, 1), "the table is kept");
        symbols.resolve(&[frame], &maps, &kernel);
        assert_eq!(symbols.lines(&frame), &lines[..]);
        // No frame of the file named for KEEP_INTERVALS: the table goes too.
        for _ in 0..=KEEP_INTERVALS {
            symbols.end_interval();
        }
        assert_eq!(symbols.function_tables(), (0, 0));
        // A budget below the table: it is not kept, yet names the batch it was read for.
        let mut small = Symbols::new(Mode::Functions);
        small.set_function_tables_bytes(bytes - 1);
        small.resolve(&[frame], &maps, &kernel);
        assert_eq!(small.lines(&frame), &lines[..]);
        assert_eq!(small.function_tables(), (0, 0));
    }

    /// A file on a hung file system (the door's test stand-in) costs a snapshot its wait and the
    /// file's frames, not more: the next snapshot picks up the names once the file can be read.
    #[test]
    fn a_stuck_file_leaves_its_frames_for_the_next_snapshot() {
        let here = a_stuck_file_leaves_its_frames_for_the_next_snapshot as fn() as usize as u64;
        let mut own = AddressSpaces::new();
        own.seed(1, &std::fs::read_to_string("/proc/self/maps").unwrap());
        let m = own.mapping(own.find(1, here).unwrap()).unwrap().clone();
        // A copy of this test binary, which the test holds as stuck.
        let dir = std::env::temp_dir().join(format!("pp-stuck-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let copy = dir.join("bin");
        std::fs::copy(&*m.path, &copy).unwrap();
        let path = copy.to_str().unwrap();
        let mut maps = AddressSpaces::new();
        maps.mmap(2, m.start, m.end - m.start, m.file_offset, path, None);
        crate::untrusted::stall::hold(path);
        let frame = Frame::User {
            mapping: maps.find(2, here).unwrap(),
            addr: here,
        };
        let kernel = KernelSymbols::default();
        let mut symbols = Symbols::new(Mode::Functions);
        symbols.set_loader(crate::untrusted::Loader::new(), Duration::from_millis(20));
        let started = std::time::Instant::now();
        symbols.resolve(&[frame], &maps, &kernel);
        assert!(symbols.lines(&frame).is_empty());
        assert!(started.elapsed() < Duration::from_secs(5));
        crate::untrusted::stall::release(path);
        let mut named = false;
        for _ in 0..500 {
            std::thread::sleep(Duration::from_millis(20));
            symbols.resolve(&[frame], &maps, &kernel);
            named = symbols.lines(&frame).iter().any(|l| {
                l.function
                    .ends_with("a_stuck_file_leaves_its_frames_for_the_next_snapshot")
            });
            if named {
                break;
            }
        }
        assert!(named, "{:?}", symbols.lines(&frame));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
