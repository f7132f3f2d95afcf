//! JIT symbol maps: `/tmp/perf-PID.map`, which JIT compilers (V8/Node `--perf-basic-prof`, the JVM
//! with perf-map-agent, .NET `DOTNET_PerfMapEnabled`, LuaJIT, CPython 3.12 `-X perf`) write for
//! the code they generate: one `START SIZE NAME` line per function, `START` and `SIZE` in hex.
//!
//! A process's map is read when the process is first seen and again when an address is not in it
//! (the JIT has generated more code since), at most once per [`REREAD_EVERY`] and only when the
//! file changed. A process without a map (most code outside files is not a JIT's that writes one:
//! V8 without `--perf-basic-prof`, the vDSO) is looked for again less and less often, every
//! [`ABSENT_REREAD_MAX`] at most: a JIT that writes its map later is named within that. The symbols are kept after the process exits, so that its frames are named when
//! the profile is taken, until [`PerfMaps::forget_exited`] drops them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use crate::untrusted::{self, Asked, Budget, Charge, Identity, Loader};

/// The least time between two reads of one process's map on misses.
pub const REREAD_EVERY: Duration = Duration::from_millis(50);

/// The longest time between two looks for a map that was not there: the wait doubles from
/// [`REREAD_EVERY`] with each look that finds none. Looking every 50 ms for the maps of processes
/// that have none (each look a file open on the loader thread) was 7 % of a system-wide capture's
/// CPU beside twenty busy programs.
pub const ABSENT_REREAD_MAX: Duration = Duration::from_millis(800);

/// A map larger than this is not read (a runaway file), whatever the budget.
const MAX_MAP_BYTES: u64 = 256 << 20;

/// Parsed maps remembered by file identity, at most (for maps hard-linked under several pids).
const MAX_SHARED: usize = 4096;

/// The symbols of one map file: `(start, end, name offset, name length)` sorted by start, the
/// names in one string. Charged to the budget while it lives.
#[derive(Debug)]
struct JitSyms {
    ranges: Vec<(u64, u64, u32, u32)>,
    names: String,
    _charge: Charge,
}

impl JitSyms {
    fn lookup(&self, addr: u64) -> Option<&str> {
        let i = self.ranges.partition_point(|s| s.0 <= addr);
        let &(start, end, at, len) = self.ranges.get(i.checked_sub(1)?)?;
        let (at, len) = (at as usize, len as usize);
        (addr >= start && addr < end).then(|| self.names.get(at..at + len))?
    }
}

/// One process's JIT symbols.
#[derive(Debug, Default)]
struct PidMap {
    syms: Option<Arc<JitSyms>>,
    /// The identity of the file last read or refused: not read again until it changes.
    read_as: Option<Identity>,
    last_read: Option<Instant>,
    /// Looks in a row that found no map (or one the door refused).
    absent: u32,
    exited: bool,
}

impl PidMap {
    /// Whether a miss may read the map again now.
    fn due(&self) -> bool {
        let wait = REREAD_EVERY
            .saturating_mul(1 << self.absent.min(8))
            .min(ABSENT_REREAD_MAX);
        !self.exited && self.last_read.is_none_or(|t| t.elapsed() >= wait)
    }
}

/// The JIT symbols of the processes seen.
#[derive(Debug, Default)]
pub struct PerfMaps {
    pids: HashMap<u32, PidMap>,
    /// Where the maps are (`/tmp`); tests point it elsewhere.
    dir: String,
    /// What parsed maps are charged to.
    budget: Budget,
    /// Parsed maps by file identity: one file under several pids (hard links) is parsed once.
    shared: Arc<Mutex<Shared>>,
    /// Who opens and reads the maps, and how long a read is waited for.
    loader: Loader,
    wait: Duration,
}

type Shared = HashMap<Identity, Weak<JitSyms>>;

/// What a load of a map found.
enum Load {
    /// Not there, or refused by the door.
    Refused,
    /// The file as read last time.
    Unchanged,
    /// The file's identity and its symbols (`None`: over the budget or unreadable).
    Read(Identity, Option<Arc<JitSyms>>),
}

impl PerfMaps {
    /// Maps read from `/tmp/perf-PID.map`.
    pub fn new() -> Self {
        Self::in_dir("/tmp")
    }

    /// Maps read from `DIR/perf-PID.map`.
    pub fn in_dir(dir: &str) -> Self {
        Self {
            pids: HashMap::new(),
            dir: dir.to_owned(),
            budget: Budget::default(),
            shared: Arc::default(),
            loader: Loader::new(),
            wait: untrusted::DRAIN_WAIT,
        }
    }

    /// Charges parsed maps to `budget` (shared with the other caches of a capture).
    pub fn set_budget(&mut self, budget: Budget) {
        self.budget = budget;
    }

    /// Loads maps with `loader` (shared with the other caches of a capture), waiting at most
    /// `wait` for one (default [`untrusted::DRAIN_WAIT`]): a map not read by then is asked for
    /// again on a later miss.
    pub fn set_loader(&mut self, loader: Loader, wait: Duration) {
        self.loader = loader;
        self.wait = wait;
    }

    /// Process `pid` was seen: reads its map the first time.
    pub fn seen(&mut self, pid: u32) {
        if !self.pids.contains_key(&pid) {
            let mut m = PidMap::default();
            self.read(pid, &mut m);
            self.pids.insert(pid, m);
        }
    }

    /// The JIT function at `addr` in `pid`, re-reading the map on a miss when it changed.
    pub fn find(&mut self, pid: u32, addr: u64) -> Option<&str> {
        self.seen(pid);
        let known = self
            .pids
            .get(&pid)
            .and_then(|m| m.syms.as_ref())
            .is_some_and(|s| s.lookup(addr).is_some());
        if !known {
            let mut m = self.pids.remove(&pid)?;
            if m.due() {
                self.read(pid, &mut m);
            }
            self.pids.insert(pid, m);
        }
        self.name(pid, addr)
    }

    /// Whether `pid`'s map was looked for.
    #[cfg(test)]
    pub(crate) fn looked_for(&self, pid: u32) -> bool {
        self.pids.get(&pid).is_some_and(|m| m.last_read.is_some())
    }

    /// The JIT function at `addr` in `pid` as known now, without reading anything.
    pub fn name(&self, pid: u32, addr: u64) -> Option<&str> {
        self.pids.get(&pid)?.syms.as_ref()?.lookup(addr)
    }

    /// Process `pid` exited: its symbols stay until [`forget_exited`](Self::forget_exited).
    pub fn exit(&mut self, pid: u32) {
        if let Some(m) = self.pids.get_mut(&pid) {
            m.exited = true;
        }
    }

    /// Forgets `pid`'s symbols now (it ran `exec`: a new program with a map of its own).
    pub fn forget(&mut self, pid: u32) {
        self.pids.remove(&pid);
    }

    /// Drops the symbols of processes that exited (once the profiles naming them are taken).
    pub fn forget_exited(&mut self) {
        self.pids.retain(|_, m| !m.exited);
        lock(&self.shared).retain(|_, w| w.strong_count() > 0);
    }

    /// Reads (or re-reads) `pid`'s map into `m` if the file changed since, through the door
    /// ([`untrusted::open_jit_map`]: a regular file of the process's user or root, no link), on
    /// the loader: the caller waits at most `wait`.
    fn read(&mut self, pid: u32, m: &mut PidMap) {
        m.last_read = Some(Instant::now());
        let path = format!("{}/perf-{pid}.map", self.dir);
        let key = untrusted::key(("jit", pid, &path));
        let (read_as, shared, budget) = (m.read_as, Arc::clone(&self.shared), self.budget.clone());
        let job = move || load(&path, pid, read_as, &shared, &budget);
        match self.loader.ask(key, self.wait, job) {
            // Remembered whether or not it could be kept: a map that failed is not read again
            // per sample, only once it changes. Old symbols stay until new ones replace them.
            Asked::Ready(Load::Read(id, syms)) => {
                m.read_as = Some(id);
                m.absent = 0;
                if syms.is_some() {
                    m.syms = syms;
                }
            }
            Asked::Ready(Load::Refused) => m.absent = m.absent.saturating_add(1),
            Asked::Ready(Load::Unchanged) => m.absent = 0,
            // Not known yet (a slow file system): asked again on the next due miss.
            Asked::Pending => {}
        }
    }
}

fn lock(shared: &Mutex<Shared>) -> std::sync::MutexGuard<'_, Shared> {
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

/// Opens and reads a map (on a loader thread) unless it is the file `read_as` names.
fn load(
    path: &str,
    pid: u32,
    read_as: Option<Identity>,
    shared: &Mutex<Shared>,
    budget: &Budget,
) -> Load {
    let Ok(file) = untrusted::open_jit_map(path, pid) else {
        return Load::Refused;
    };
    let id = file.identity();
    if read_as == Some(id) {
        return Load::Unchanged;
    }
    if let Some(syms) = lock(shared).get(&id).and_then(Weak::upgrade) {
        return Load::Read(id, Some(syms));
    }
    let Some(read_charge) =
        budget.charge(usize::try_from(file.len().min(MAX_MAP_BYTES)).unwrap_or(usize::MAX))
    else {
        return Load::Read(id, None);
    };
    let Ok(text) = file.read_to_end(read_charge.bytes() as u64) else {
        return Load::Read(id, None);
    };
    let syms = parse(&String::from_utf8_lossy(&text), budget).map(Arc::new);
    drop(text);
    drop(read_charge);
    if let Some(syms) = &syms {
        let mut shared = lock(shared);
        if shared.len() >= MAX_SHARED {
            shared.retain(|_, w| w.strong_count() > 0);
        }
        if shared.len() < MAX_SHARED {
            shared.insert(id, Arc::downgrade(syms));
        }
    }
    Load::Read(id, syms)
}

/// The symbols of a map's text, sorted by start; malformed lines are skipped. Of overlapping
/// entries (code regenerated at an address) the later line wins. `None` when what they need
/// does not fit `budget`.
fn parse(text: &str, budget: &Budget) -> Option<JitSyms> {
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok();
    // At most one entry a line and the text's bytes of names: charged before they are made.
    let lines = text.lines().count();
    let entry = std::mem::size_of::<(u64, u64, u32, u32, u32)>();
    let charge = budget.charge(lines.checked_mul(entry)?.checked_add(text.len())?)?;
    let mut names = String::with_capacity(text.len());
    let mut syms: Vec<(u64, u64, u32, u32, u32)> = Vec::with_capacity(lines);
    for (n, line) in text.lines().enumerate() {
        let mut parts = line.splitn(3, ' ');
        let (Some(start), Some(size), Some(name)) = (
            parts.next().and_then(hex),
            parts.next().and_then(hex),
            parts.next(),
        ) else {
            continue;
        };
        let name = name.trim();
        if size == 0 || name.is_empty() {
            continue;
        }
        let at = u32::try_from(names.len()).ok()?;
        names.push_str(name);
        let len = u32::try_from(name.len()).ok()?;
        let n = u32::try_from(n).ok()?;
        syms.push((start, start.saturating_add(size), at, len, n));
    }
    // Later lines first among equal starts, then keep only entries not overlapped by a later one.
    syms.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(b.4.cmp(&a.4)));
    let mut out: Vec<(u64, u64, u32, u32, u32)> = Vec::with_capacity(syms.len());
    for s in syms {
        match out.last_mut() {
            Some(last) if s.0 < last.1 => {
                if s.4 > last.4 {
                    *last = s;
                }
            }
            _ => out.push(s),
        }
    }
    let ranges: Vec<(u64, u64, u32, u32)> = out
        .into_iter()
        .map(|(s, e, at, len, _)| (s, e, at, len))
        .collect();
    names.shrink_to_fit();
    drop(charge);
    let kept = ranges.capacity() * std::mem::size_of::<(u64, u64, u32, u32)>() + names.capacity();
    let charge = budget.charge(kept)?;
    Some(JitSyms {
        ranges,
        names,
        _charge: charge,
    })
}

/// A map's symbols as (start, end, name), and the names found at some addresses.
#[cfg(any(test, feature = "fuzzing"))]
type ParsedAndFound = (Vec<(u64, u64, String)>, Vec<Option<String>>);

/// What [`parse`] makes of `text` within `budget`: (start, end, name) sorted by start, and what
/// [`JitSyms::lookup`] finds at each of `addrs` (for the fuzz target).
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) fn parse_and_look_up(
    text: &str,
    budget: &Budget,
    addrs: &[u64],
) -> Option<ParsedAndFound> {
    let syms = parse(text, budget)?;
    let all = syms
        .ranges
        .iter()
        .map(|&(s, e, at, len)| {
            let name = syms.names.get(at as usize..(at + len) as usize);
            (s, e, name.unwrap_or_default().to_owned())
        })
        .collect();
    let found = addrs
        .iter()
        .map(|&a| syms.lookup(a).map(str::to_owned))
        .collect();
    Some((all, found))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn lines_parse_into_ranges_and_bad_lines_are_skipped() {
        let budget = Budget::new(1 << 20);
        let syms = parse(
            "7f0010 20 LazyCompile:*foo app.js:1\n\
             garbage\n\
             7f0000 10 bar\n\
             0x7f0100 0 empty\n\
             7f0040 8 \n\
             7f0020 4 regenerated\n",
            &budget,
        )
        .unwrap();
        let all: Vec<(u64, u64, &str)> = syms
            .ranges
            .iter()
            .map(|&(s, e, at, len)| (s, e, &syms.names[at as usize..(at + len) as usize]))
            .collect();
        assert_eq!(
            all,
            [
                (0x7f0000, 0x7f0010, "bar"),
                (0x7f0020, 0x7f0024, "regenerated"),
            ]
        );
        assert_eq!(syms.lookup(0x7f0023), Some("regenerated"));
        assert!(budget.used() > 0);
        drop(syms);
        assert_eq!(budget.used(), 0, "the charge goes with the symbols");
        // More than the budget: nothing.
        assert!(parse("1000 10 f\n", &Budget::new(8)).is_none());
    }

    #[test]
    fn read_when_seen_again_on_a_miss_and_kept_after_exit() {
        let dir = std::env::temp_dir().join(format!("pp-perfmap-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let file = dir.join("perf-42.map");
        fs::write(&file, "1000 100 first\n").unwrap();
        let mut maps = PerfMaps::in_dir(dir.to_str().unwrap());
        // Waited for as long as it takes: this test is about when maps are read, not how fast.
        maps.set_loader(Loader::new(), Duration::from_secs(60));
        maps.seen(42);
        fs::write(&file, "1000 100 first\n2000 10 second\n").unwrap();
        assert_eq!(maps.name(42, 0x1050), Some("first"));
        // Not read since it was seen: a miss reads it again.
        assert_eq!(maps.name(42, 0x2004), None);
        std::thread::sleep(REREAD_EVERY);
        assert_eq!(maps.find(42, 0x2004), Some("second"));
        assert_eq!(maps.find(42, 0x3000), None);
        // The process exits and its map is deleted: the names stay until forgotten.
        maps.exit(42);
        fs::remove_file(&file).unwrap();
        assert_eq!(maps.find(42, 0x2004), Some("second"));
        maps.forget_exited();
        assert_eq!(maps.name(42, 0x2004), None);
        let _ = fs::remove_dir_all(&dir);
    }

    /// A process without a map is not looked for on every miss: the looks thin out to one per
    /// [`ABSENT_REREAD_MAX`], and a map written later is still named within that.
    #[test]
    fn a_missing_map_is_looked_for_less_often_and_found_when_it_comes() {
        let dir = std::env::temp_dir().join(format!("pp-perfmap-absent-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let mut maps = PerfMaps::in_dir(dir.to_str().unwrap());
        maps.set_loader(Loader::new(), Duration::from_secs(60));
        // Misses for 2 s as a busy sampled process makes them (one every millisecond): every look
        // changes `last_read`.
        let (started, mut looks, mut last) = (Instant::now(), 0, None);
        while started.elapsed() < Duration::from_secs(2) {
            assert_eq!(maps.find(44, 0x1010), None);
            let now = maps.pids[&44].last_read;
            if now != last {
                looks += 1;
                last = now;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        // Every 50 ms that would be 40; doubling from 50 ms to 800 ms it is 1 + 5 + 1 or 2.
        assert!(looks <= 9, "looked {looks} times in 2 s");
        fs::write(dir.join("perf-44.map"), "1000 100 late\n").unwrap();
        let written = Instant::now();
        while maps.find(44, 0x1010).is_none() {
            assert!(
                written.elapsed() < ABSENT_REREAD_MAX * 2,
                "not named {:?} after the map was written",
                written.elapsed()
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        // Found: back to looking every REREAD_EVERY on misses.
        assert_eq!(maps.pids[&44].absent, 0);
        let _ = fs::remove_dir_all(&dir);
    }

    /// A map on a hung file system (the door's test stand-in) costs its frames, not the caller:
    /// a miss waits a few milliseconds, and the map is named once it can be read.
    #[test]
    fn a_stuck_map_costs_its_names_not_the_caller() {
        let dir = std::env::temp_dir().join(format!("pp-perfmap-stuck-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let file = dir.join("perf-43.map");
        fs::write(&file, "1000 100 named\n").unwrap();
        let path = file.to_str().unwrap();
        crate::untrusted::stall::hold(path);
        let mut maps = PerfMaps::in_dir(dir.to_str().unwrap());
        let started = Instant::now();
        for _ in 0..10 {
            assert_eq!(maps.find(43, 0x1010), None);
        }
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
        crate::untrusted::stall::release(path);
        let mut named = None;
        for _ in 0..200 {
            std::thread::sleep(REREAD_EVERY);
            named = maps.find(43, 0x1010).map(str::to_owned);
            if named.is_some() {
                break;
            }
        }
        assert_eq!(named.as_deref(), Some("named"));
        let _ = fs::remove_dir_all(&dir);
    }
}
