//! [`Mode::Local`](super::Mode::Local)'s symbolizers, kept across the intervals of a capture.
//!
//! Measured before this cache (a system-wide continuous capture beside a build's churn, `perf
//! record` on the profiler, see BENCHMARKS.md): about half of the profiler's CPU went into blazesym
//! building each file's state again for every interval's new frames: sorting the ELF symbol table
//! by address (17%), parsing the DWARF compilation units that hold the frames (10% their functions,
//! 7% their line programs), loading (and inflating) the DWARF sections and indexing the units (9%).
//! Here a file's blazesym symbolizer lives on while its frames come back: a later interval's new
//! frames in it cost a lookup in its sorted symbols and the compilation units not parsed yet, no
//! more. blazesym parses lazily what it keeps: its index of units comes from `.debug_aranges` (or
//! each unit's `DW_AT_ranges`/`low_pc`), and a unit's lines and functions are parsed when an
//! address in it is first asked for. That is the index this needs, so none of our own is built.
//!
//! blazesym's `Symbolizer` is not `Send` (it shares its parsed files through `Rc`), so the
//! symbolizers live on one thread of their own; the loader's workers hand it each file's batch and
//! wait for the answer at most as long as the caller waits. A batch that gets stuck on a file (a
//! hung file system) leaves that thread behind with what it kept: the next batch starts a new one,
//! with empty caches, and the old one ends after its batch.
//!
//! A file is kept by identity (device, inode, size, modification time, and the build id the mapping
//! named): a file replaced under the same path is read afresh, the old one goes out with the least
//! recently used. What a kept file costs is what the process's resident memory grew by while its
//! batches ran (its mapped pages read, its sections inflated, its symbols sorted, its units
//! parsed), at least [`MIN_FILE_BYTES`]; kept files share [`KEPT_FILES_BYTES`] and the capture's
//! [`Budget`], least recently used out first, at most [`MAX_KEPT_FILES`] of them (each holds a
//! descriptor).

use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use super::{
    lines_of, names_other_files, new_symbolizer, plt_names, rebuilt, ByteLru, Line,
    LARGE_FILE_SHARE, MAX_KEPT_FILES, MIN_FILE_BYTES, STUCK_AFTER,
};
use crate::untrusted::{self, Budget, Charge, Identity};

/// What a batch resolves to: each offset's lines, and whether the file was rebuilt since mapped.
pub(super) type Resolved = (Vec<Vec<Line>>, bool);

/// Counts of the kept files, shared with their thread.
#[derive(Debug, Default)]
pub(super) struct Stats {
    /// Bytes counted for the files kept now.
    pub bytes: AtomicUsize,
    /// Files kept now.
    pub files: AtomicUsize,
    /// Files read (a symbolizer made) since the start.
    pub read: AtomicU64,
    /// Batches answered by a file kept from an earlier one.
    pub reused: AtomicU64,
    /// Files let go to make room (or for lack of budget) since the start.
    pub evicted: AtomicU64,
}

/// The handle [`Symbols`](super::Symbols) holds: where batches go.
#[derive(Debug)]
pub(super) struct Kept {
    owner: Option<Owner>,
    budget: Budget,
    bytes: usize,
    stats: Arc<Stats>,
    stuck_after: Duration,
}

#[derive(Debug)]
struct Owner {
    tx: mpsc::Sender<Request>,
    /// When the batch running now started.
    busy: Arc<Mutex<Option<Instant>>>,
    /// Set when a stuck batch made a new thread take over: this one ends after it.
    abandoned: Arc<AtomicBool>,
}

struct Request {
    path: String,
    pid: Option<u32>,
    build_id: Option<Vec<u8>>,
    offsets: Vec<u64>,
    reply: mpsc::Sender<Resolved>,
}

impl Kept {
    pub(super) fn new() -> Self {
        Self {
            owner: None,
            budget: Budget::default(),
            bytes: super::KEPT_FILES_BYTES,
            stats: Arc::default(),
            stuck_after: STUCK_AFTER,
        }
    }

    pub(super) fn set_budget(&mut self, budget: Budget) {
        self.budget = budget;
        // The next batch starts a thread that charges the new budget.
        self.retire();
    }

    pub(super) fn set_bytes(&mut self, bytes: usize) {
        self.bytes = bytes;
        self.retire();
    }

    /// Whether no file is kept after its batch (a capture's final snapshot).
    pub(super) fn keeps_nothing(&self) -> bool {
        self.bytes == 0
    }

    pub(super) fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Lets the thread go: it ends once its batches are answered, dropping what it kept.
    fn retire(&mut self) {
        if let Some(o) = self.owner.take() {
            o.abandoned.store(true, Ordering::Relaxed);
        }
    }

    /// How long one batch may run before the thread counts as stuck (tests shorten it).
    #[cfg(test)]
    pub(super) fn set_stuck_after(&mut self, after: Duration) {
        self.stuck_after = after;
    }

    /// A job (for the loader, or to run here) that resolves `offsets` of the file at `path` on the
    /// symbolizers' thread; `None` when it did not answer within twice [`STUCK_AFTER`] (its
    /// thread stuck, or this batch queued behind one that is).
    pub(super) fn job(
        &mut self,
        path: &str,
        pid: Option<u32>,
        build_id: Option<&[u8]>,
        offsets: &[u64],
    ) -> impl FnOnce() -> Option<Resolved> + Send + 'static {
        let ask = self.asker(path, pid, build_id);
        let offsets = offsets.to_vec();
        move || ask(offsets)
    }

    /// [`job`](Self::job), its offsets given when it runs.
    pub(super) fn asker(
        &mut self,
        path: &str,
        pid: Option<u32>,
        build_id: Option<&[u8]>,
    ) -> impl FnOnce(Vec<u64>) -> Option<Resolved> + Send + 'static {
        // A slow file (a large debug binary's first batch) is not a stuck one: the caller waits
        // for neither, and the loader asks no load twice while it runs; a new thread starts only
        // once one batch has taken longer than any file here should.
        let after = self.stuck_after;
        let stuck = self.owner.as_ref().is_some_and(|o| {
            o.busy
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .is_some_and(|t| t.elapsed() > after)
        });
        if stuck {
            self.retire();
        }
        let tx = match &self.owner {
            Some(o) => o.tx.clone(),
            None => {
                let o = self.spawn();
                let tx = o.tx.clone();
                self.owner = Some(o);
                tx
            }
        };
        let (path, build_id) = (path.to_owned(), build_id.map(<[u8]>::to_vec));
        move |offsets| {
            let (reply, answer) = mpsc::channel();
            let req = Request {
                path,
                pid,
                build_id,
                offsets,
                reply,
            };
            tx.send(req).ok()?;
            answer.recv_timeout(after * 2).ok()
        }
    }

    fn spawn(&self) -> Owner {
        let (tx, rx) = mpsc::channel::<Request>();
        let busy = Arc::new(Mutex::new(None));
        let abandoned = Arc::new(AtomicBool::new(false));
        let (bytes, budget, stats) = (self.bytes, self.budget.clone(), Arc::clone(&self.stats));
        let (b, a) = (Arc::clone(&busy), Arc::clone(&abandoned));
        let spawned = std::thread::Builder::new()
            .name("perf-profile-symbolizer".into())
            .spawn(move || {
                // Made here: blazesym's symbolizers never leave this thread.
                let mut files = Files {
                    kept: ByteLru::new(bytes),
                    budget,
                    stats,
                };
                while let Ok(req) = rx.recv() {
                    *b.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
                    // A parser's bug on one file loses that batch (and what was kept of the file),
                    // not the thread.
                    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        files.resolve(&req)
                    }));
                    *b.lock().unwrap_or_else(|e| e.into_inner()) = None;
                    if let Ok(out) = out {
                        let _ = req.reply.send(out);
                    }
                    if a.load(Ordering::Relaxed) {
                        break;
                    }
                }
                files.clear();
            });
        if spawned.is_err() {
            // No thread: batches are not answered (their frames stay where they are) until one
            // starts.
            abandoned.store(true, Ordering::Relaxed);
        }
        Owner {
            tx,
            busy,
            abandoned,
        }
    }
}

impl Drop for Kept {
    fn drop(&mut self) {
        self.retire();
    }
}

/// A file kept: its symbolizer, and the descriptor its path (`/proc/self/fd/N`) names.
struct File {
    symbolizer: blazesym::symbolize::Symbolizer,
    debug_syms: bool,
    file: std::fs::File,
    /// What it is counted at, and that charged to the budget.
    cost: usize,
    charge: Option<Charge>,
}

/// What the symbolizers' thread keeps.
struct Files {
    kept: ByteLru<(Identity, Option<Vec<u8>>), File>,
    budget: Budget,
    stats: Arc<Stats>,
}

impl Files {
    fn resolve(&mut self, req: &Request) -> Resolved {
        let none = || vec![Vec::new(); req.offsets.len()];
        let Ok(opened) = untrusted::open(&req.path, req.pid) else {
            return (none(), false);
        };
        let key = (opened.identity(), req.build_id.clone());
        // Nothing is kept (a capture's end): what the batch costs need not be measured (two
        // reads of /proc/self/status a file, 2 % of a system-wide capture beside twenty programs).
        let measure = self.kept.budget > 0;
        let before = if measure { resident() } else { 0 };
        let mut file = match self.kept.remove(&key) {
            Some(f) => {
                self.stats.reused.fetch_add(1, Ordering::Relaxed);
                f
            }
            None => {
                if rebuilt(&opened, req.build_id.as_deref()) {
                    return (none(), true);
                }
                self.stats.read.fetch_add(1, Ordering::Relaxed);
                let file = opened.into_file();
                File {
                    symbolizer: new_symbolizer(),
                    debug_syms: !names_other_files(&file),
                    file,
                    cost: MIN_FILE_BYTES,
                    charge: None,
                }
            }
        };
        let lines = file.symbolize(&req.offsets);
        if measure {
            file.cost += resident().saturating_sub(before);
        }
        self.keep(key, file);
        self.publish();
        (lines, false)
    }

    /// Keeps `file` when it fits (its own bound, the budget, the descriptors), letting the least
    /// recently used go first.
    fn keep(&mut self, key: (Identity, Option<Vec<u8>>), mut file: File) {
        let cost = file.cost;
        // A file that would take more than a quarter of the room is read again when needed:
        // kept, it would push out the many small files every process maps (the C library, the
        // shells, the compilers' drivers), which then thrash, each read again each interval.
        if cost > self.kept.budget / LARGE_FILE_SHARE {
            self.kept.evicted += 1;
            return;
        }
        if file.charge.as_ref().is_none_or(|c| c.bytes() != cost) {
            file.charge = None;
            loop {
                file.charge = self.budget.charge(cost);
                if file.charge.is_some() || !self.kept.pop_lru() {
                    break;
                }
            }
        }
        while self.kept.len() >= MAX_KEPT_FILES && self.kept.pop_lru() {}
        if file.charge.is_none() || self.kept.insert(key, file, cost).is_err() {
            // Larger than what is left: it answered its batch and goes.
            self.kept.evicted += 1;
        }
    }

    fn publish(&self) {
        self.stats.bytes.store(self.kept.used(), Ordering::Relaxed);
        self.stats.files.store(self.kept.len(), Ordering::Relaxed);
        self.stats
            .evicted
            .store(self.kept.evicted, Ordering::Relaxed);
    }

    /// Lets every kept file go (the thread ends); not counted as evictions, nor published: a
    /// thread that took over counts its own.
    fn clear(&mut self) {
        self.kept.set_budget(0);
    }
}

impl File {
    fn symbolize(&mut self, offsets: &[u64]) -> Vec<Vec<Line>> {
        use blazesym::symbolize::source::{Elf, Source};
        use blazesym::symbolize::Input;

        // The descriptor stays open as long as the symbolizer that opened its path: the path
        // names this file for the symbolizer's whole life.
        let mut elf = Elf::new(format!("/proc/self/fd/{}", self.file.as_raw_fd()));
        elf.debug_syms = self.debug_syms;
        let src = Source::Elf(elf);
        let mut lines: Vec<Vec<Line>> =
            match self.symbolizer.symbolize(&src, Input::FileOffset(offsets)) {
                Ok(syms) => syms.into_iter().map(lines_of).collect(),
                Err(_) => vec![Vec::new(); offsets.len()],
            };
        // blazesym knows no PLT: it names a stub after the symbol before it (`_init`), or nothing.
        for (i, name) in plt_names(&self.file, offsets) {
            if let Some(l) = lines.get_mut(i) {
                *l = vec![Line {
                    function: name,
                    file: None,
                    line: None,
                }];
            }
        }
        lines
    }
}

/// The lines blazesym gives `offsets` of `file` as local mode asks it (`debug_syms`: its DWARF
/// too, which local mode allows for a file that names no other file), with the PLT's names.
#[cfg(test)]
pub(super) fn blazesym_lines(
    file: std::fs::File,
    debug_syms: bool,
    offsets: &[u64],
) -> Vec<Vec<Line>> {
    let mut file = File {
        symbolizer: new_symbolizer(),
        debug_syms,
        file,
        cost: 0,
        charge: None,
    };
    file.symbolize(offsets)
}

/// This process's resident bytes (`VmRSS` of `/proc/self/status`, what the soaks read), 0 when
/// unreadable.
fn resident() -> usize {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return 0;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|kib| {
            kib.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<usize>()
                .ok()
        })
        .map_or(0, |kib| kib << 10)
}
