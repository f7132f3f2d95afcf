//! Names for this process's frames, kept for the life of the process.
//!
//! perf-profile's symbolizer reads a file's DWARF again for each batch of new frames, a trade
//! made for continuous whole-machine profiling; a program that asks for a report after every
//! loop (pprof-rs's examples, criterion's one guard per benchmark) would pay that DWARF read
//! each time. Here the files are this process's own and few, so their parsed symbols and DWARF
//! stay in one blazesym symbolizer for the process, as pprof-rs's backtrace-rs keeps them, within
//! [`FILES_BUDGET`] bytes of files: each address is resolved once, each file read once while the
//! budget holds.
//!
//! The cache is process-wide, not per guard: a second guard (criterion starts one per benchmark)
//! finds the names the first resolved. A report asks for it with no lock of the profiler held,
//! so the collector thread drains the rings meanwhile. The files are parsed on one thread,
//! `pprof-symbols` (blazesym's symbolizer stays on the thread that made it), which lets them go
//! and ends after [`READER_IDLE`] without a request; the names it resolved stay.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::os::fd::AsRawFd;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use blazesym::symbolize::source::{Elf, Source};
use blazesym::symbolize::{Input, Symbolized, Symbolizer};
use perf_profile::aggregate::Frame;
use perf_profile::symbolize::Line;
use perf_profile::Profile;

/// The name of the thread that names frames; reports leave its samples out.
pub(crate) const SYMBOLS_THREAD: &str = "pprof-symbols";

/// The bytes of files (their sizes on disk: the symbols, DWARF and its parsed form scale with
/// them) whose parsed symbols are kept. Past it, every file is let go of and read again when a
/// new address in it is sampled; the names already resolved stay. A file larger than this alone
/// is read for each batch of its new addresses (perf-profile's way).
pub const FILES_BUDGET: u64 = 256 << 20;

/// A file: its path and build id.
type FileKey = (Arc<str>, Option<Vec<u8>>);

/// The resolved addresses of every file, kept for the process.
struct Names {
    /// By file, by file offset: its functions, innermost first (empty: no symbol covers it).
    resolved: HashMap<FileKey, HashMap<u64, Arc<[Line]>>>,
    /// Files that cannot be read, or whose build id is not the one mapped (rebuilt since).
    unreadable: HashSet<FileKey>,
    /// The reader thread's requests; `None` before the first, or once it has gone idle.
    reader: Option<Sender<Request>>,
}

/// A file's offsets to resolve, and where the answer goes (`None`: the file cannot be read).
type Request = (FileKey, Vec<u64>, Sender<Option<Vec<Vec<Line>>>>);

static NAMES: Mutex<Option<Names>> = Mutex::new(None);

/// How long the reader thread keeps the files it parsed with no request, before it lets them go
/// (and ends). The names it resolved stay in [`Names`].
const READER_IDLE: Duration = Duration::from_secs(60);

/// The parsed files, on the reader thread (blazesym's symbolizer is not `Send`).
struct Reader {
    /// The files whose parse `symbolizer` holds, open (blazesym knows them as
    /// `/proc/self/fd/N`: the descriptor must outlive the symbolizer's entry, or a reused number
    /// would name another file), and their bytes.
    open: HashMap<FileKey, File>,
    bytes: u64,
    symbolizer: Symbolizer,
}

fn new_symbolizer() -> Symbolizer {
    Symbolizer::builder()
        // Debug links are not followed: a file names its functions from its own sections.
        .set_debug_dirs(Some(Vec::<std::path::PathBuf>::new()))
        .enable_code_info(true)
        .enable_inlined_fns(true)
        .enable_demangling(true)
        .build()
}

/// Each frame's functions of `profile`, innermost first, by frame id: user frames in files
/// resolved (each file offset once per process), the others empty.
pub(crate) fn frame_lines(profile: &Profile) -> Vec<Arc<[Line]>> {
    let empty: Arc<[Line]> = Arc::from([]);
    let frames = profile.stacks().frames();
    let mut out = vec![empty.clone(); frames.len()];
    // By mapping: the frames in it and their file offsets.
    let mut by_mapping: HashMap<u32, Vec<(usize, u64)>> = HashMap::new();
    for (i, f) in frames.iter().enumerate() {
        if let Frame::User { mapping, addr } = *f {
            if let Some(m) = profile.mappings().get(mapping.0 as usize) {
                if m.is_file() {
                    by_mapping
                        .entry(mapping.0)
                        .or_default()
                        .push((i, m.file_offset_of(addr)));
                }
            }
        }
    }
    if by_mapping.is_empty() {
        return out;
    }
    let mut guard = NAMES.lock().unwrap_or_else(PoisonError::into_inner);
    let cache = guard.get_or_insert_with(|| Names {
        resolved: HashMap::new(),
        unreadable: HashSet::new(),
        reader: None,
    });
    for (mapping, frames) in by_mapping {
        let m = &profile.mappings()[mapping as usize];
        let key: FileKey = (m.path.clone(), m.build_id.clone());
        let offsets: Vec<u64> = frames.iter().map(|&(_, o)| o).collect();
        for ((i, _), lines) in frames.iter().zip(cache.resolve(key, &offsets)) {
            out[*i] = lines;
        }
    }
    out
}

impl Names {
    /// The functions at each of `offsets` in the file `key`, innermost first, in the order
    /// asked; empty where no symbol covers an offset or the file cannot be read.
    fn resolve(&mut self, key: FileKey, offsets: &[u64]) -> Vec<Arc<[Line]>> {
        let empty: Arc<[Line]> = Arc::from([]);
        if self.unreadable.contains(&key) {
            return vec![empty; offsets.len()];
        }
        let known = self.resolved.entry(key.clone()).or_default();
        let mut new: Vec<u64> = offsets
            .iter()
            .copied()
            .filter(|o| !known.contains_key(o))
            .collect();
        new.sort_unstable();
        new.dedup();
        if !new.is_empty() {
            let Some(lines) = self.ask(&key, new.clone()) else {
                self.resolved.remove(&key);
                self.unreadable.insert(key);
                return vec![empty; offsets.len()];
            };
            let known = self.resolved.entry(key.clone()).or_default();
            for (o, l) in new.into_iter().zip(lines) {
                known.insert(o, l.into());
            }
        }
        let known = &self.resolved[&key];
        offsets
            .iter()
            .map(|o| known.get(o).cloned().unwrap_or_else(|| empty.clone()))
            .collect()
    }

    /// Resolves `offsets` (sorted) of the file `key` on the reader thread, started where none
    /// runs. `None` when the file cannot be read.
    fn ask(&mut self, key: &FileKey, offsets: Vec<u64>) -> Option<Vec<Vec<Line>>> {
        // A reader that went idle as the request was sent drops it: a new one answers.
        for _ in 0..2 {
            let reader = match &self.reader {
                Some(r) => r.clone(),
                None => {
                    let (tx, rx) = mpsc::channel();
                    let spawned = std::thread::Builder::new()
                        .name(SYMBOLS_THREAD.into())
                        .spawn(move || Reader::run(&rx));
                    if spawned.is_err() {
                        return None;
                    }
                    self.reader = Some(tx.clone());
                    tx
                }
            };
            let (answer, answered) = mpsc::channel();
            if reader.send((key.clone(), offsets.clone(), answer)).is_ok() {
                if let Ok(lines) = answered.recv() {
                    return lines;
                }
            }
            self.reader = None;
        }
        None
    }
}

impl Reader {
    fn run(requests: &Receiver<Request>) {
        let mut reader = Reader {
            open: HashMap::new(),
            bytes: 0,
            symbolizer: new_symbolizer(),
        };
        while let Ok((key, offsets, answer)) = requests.recv_timeout(READER_IDLE) {
            let _ = answer.send(reader.read(&key, &offsets));
        }
    }

    /// Resolves `offsets` (sorted) of the file `key`, with the kept symbolizer where the file
    /// fits the budget. `None` when the file cannot be opened or is not the one mapped.
    fn read(&mut self, key: &FileKey, offsets: &[u64]) -> Option<Vec<Vec<Line>>> {
        if !self.open.contains_key(key) {
            // Through perf-profile's door: no links followed, regular files only.
            let file = perf_profile::untrusted::open(&key.0, None)
                .ok()?
                .into_file();
            if let Some(id) = &key.1 {
                if perf_profile::maps::build_id::of_file(&file).is_some_and(|now| now != *id) {
                    return None;
                }
            }
            let size = file.metadata().ok()?.len();
            if size > FILES_BUDGET {
                // Too big to keep: read for this batch only.
                return Some(symbolize(&new_symbolizer(), &file, offsets));
            }
            if self.bytes + size > FILES_BUDGET {
                // The symbolizer goes before the descriptors its entries name.
                self.symbolizer = new_symbolizer();
                self.open.clear();
                self.bytes = 0;
            }
            self.bytes += size;
            self.open.insert(key.clone(), file);
        }
        let file = &self.open[key];
        Some(symbolize(&self.symbolizer, file, offsets))
    }
}

fn symbolize(symbolizer: &Symbolizer, file: &File, offsets: &[u64]) -> Vec<Vec<Line>> {
    let src = Source::Elf(Elf::new(format!("/proc/self/fd/{}", file.as_raw_fd())));
    match symbolizer.symbolize(&src, Input::FileOffset(offsets)) {
        Ok(syms) => syms.into_iter().map(lines_of).collect(),
        Err(_) => vec![Vec::new(); offsets.len()],
    }
}

/// A blazesym result as perf-profile's lines, innermost function first.
fn lines_of(s: Symbolized<'_>) -> Vec<Line> {
    let Symbolized::Sym(sym) = s else {
        return Vec::new();
    };
    let line = |function: &str, ci: Option<&blazesym::symbolize::CodeInfo<'_>>| Line {
        function: function.to_owned(),
        file: ci.map(|c| c.to_path().to_string_lossy().into_owned()),
        line: ci.and_then(|c| c.line),
    };
    // blazesym lists the outer function, then the functions inlined into it outermost first,
    // each with the position of the code inside it.
    let mut lines: Vec<Line> = std::iter::once(line(&sym.name, sym.code_info.as_deref()))
        .chain(
            sym.inlined
                .iter()
                .map(|f| line(&f.name, f.code_info.as_ref())),
        )
        .collect();
    lines.reverse();
    lines
}

/// Names the locations of `pb` (a profile's pprof message, whose location `i + 1` is frame `i`)
/// that have no line yet with `lines` (the profile's [`frame_lines`]), as perf-profile's local
/// mode would.
pub(crate) fn name_pprof(
    lines: &[Arc<[Line]>],
    pb: &mut perf_profile::proto::perftools::profiles::Profile,
) {
    use perf_profile::proto::perftools::profiles as pb_;
    let mut strings: HashMap<String, i64> = pb
        .string_table
        .iter()
        .enumerate()
        .map(|(i, s)| (s.clone(), i as i64))
        .collect();
    let mut intern = |table: &mut Vec<String>, s: &str| -> i64 {
        if let Some(&i) = strings.get(s) {
            return i;
        }
        table.push(s.to_owned());
        strings.insert(s.to_owned(), table.len() as i64 - 1);
        table.len() as i64 - 1
    };
    let mut functions: HashMap<(i64, i64), u64> = HashMap::new();
    for loc in &mut pb.location {
        let Some(frame) = loc.id.checked_sub(1) else {
            continue;
        };
        let Some(l) = lines.get(frame as usize).filter(|l| !l.is_empty()) else {
            continue;
        };
        if !loc.line.is_empty() {
            continue;
        }
        for line in l.iter() {
            let name = intern(&mut pb.string_table, &line.function);
            let file = intern(&mut pb.string_table, line.file.as_deref().unwrap_or(""));
            let id = *functions.entry((name, file)).or_insert_with(|| {
                let id = pb.function.len() as u64 + 1;
                pb.function.push(pb_::Function {
                    id,
                    name,
                    system_name: name,
                    filename: file,
                    start_line: 0,
                });
                id
            });
            loc.line.push(pb_::Line {
                function_id: id,
                line: i64::from(line.line.unwrap_or(0)),
                column: 0,
            });
        }
    }
    // Every mapping is as named as it will be: a viewer must not ask the server for symbols
    // (`go tool pprof` posts to `/debug/pprof/symbol` for a mapping without functions).
    for m in &mut pb.mapping {
        m.has_functions = true;
        m.has_filenames = true;
        m.has_line_numbers = true;
        m.has_inline_frames = true;
    }
}
