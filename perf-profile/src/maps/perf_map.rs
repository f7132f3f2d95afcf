//! JIT symbol maps: `/tmp/perf-PID.map`, which JIT compilers (V8/Node `--perf-basic-prof`, the JVM
//! with perf-map-agent, .NET `DOTNET_PerfMapEnabled`, LuaJIT, CPython 3.12 `-X perf`) write for
//! the code they generate: one `START SIZE NAME` line per function, `START` and `SIZE` in hex.
//!
//! A process's map is read when the process is first seen and again when an address is not in it
//! (the JIT has generated more code since), at most once per [`REREAD_EVERY`] and only when the
//! file changed. The symbols are kept after the process exits, so that its frames are named when
//! the profile is taken, until [`PerfMaps::forget_exited`] drops them.

use std::collections::HashMap;
use std::fs;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// The least time between two reads of one process's map on misses.
pub const REREAD_EVERY: Duration = Duration::from_millis(50);

/// A map larger than this is not read (a runaway file).
const MAX_MAP_BYTES: u64 = 256 << 20;

/// One process's JIT symbols.
#[derive(Debug, Default)]
struct PidMap {
    /// `(start, end, name)`, sorted by start.
    syms: Vec<(u64, u64, Arc<str>)>,
    /// The file's length and modification time when read.
    read_as: Option<(u64, SystemTime)>,
    last_read: Option<Instant>,
    exited: bool,
}

/// The JIT symbols of the processes seen.
#[derive(Debug, Default)]
pub struct PerfMaps {
    pids: HashMap<u32, PidMap>,
    /// Where the maps are (`/tmp`); tests point it elsewhere.
    dir: String,
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
        }
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
    pub fn find(&mut self, pid: u32, addr: u64) -> Option<Arc<str>> {
        self.seen(pid);
        if let Some(name) = self.pids.get(&pid).and_then(|m| lookup(m, addr)) {
            return Some(name);
        }
        let mut m = self.pids.remove(&pid)?;
        if !m.exited && m.last_read.is_none_or(|t| t.elapsed() >= REREAD_EVERY) {
            self.read(pid, &mut m);
        }
        let found = lookup(&m, addr);
        self.pids.insert(pid, m);
        found
    }

    /// The JIT function at `addr` in `pid` as known now, without reading anything.
    pub fn name(&self, pid: u32, addr: u64) -> Option<Arc<str>> {
        lookup(self.pids.get(&pid)?, addr)
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
    }

    /// Reads (or re-reads) `pid`'s map into `m` if the file changed since.
    fn read(&self, pid: u32, m: &mut PidMap) {
        m.last_read = Some(Instant::now());
        let path = format!("{}/perf-{pid}.map", self.dir);
        let Ok(meta) = fs::metadata(&path) else {
            return;
        };
        let stamp = (
            meta.len(),
            meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
        );
        if m.read_as == Some(stamp) || meta.len() > MAX_MAP_BYTES {
            return;
        }
        let Ok(text) = fs::read_to_string(&path) else {
            return;
        };
        m.read_as = Some(stamp);
        m.syms = parse(&text);
    }
}

fn lookup(m: &PidMap, addr: u64) -> Option<Arc<str>> {
    let i = m.syms.partition_point(|s| s.0 <= addr);
    let (start, end, name) = m.syms.get(i.checked_sub(1)?)?;
    (addr >= *start && addr < *end).then(|| Arc::clone(name))
}

/// The symbols of a map's text, sorted by start; malformed lines are skipped. Of overlapping
/// entries (code regenerated at an address) the later line wins.
fn parse(text: &str) -> Vec<(u64, u64, Arc<str>)> {
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok();
    let mut syms: Vec<(u64, u64, Arc<str>, usize)> = Vec::new();
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
        syms.push((start, start.saturating_add(size), Arc::from(name), n));
    }
    // Later lines first among equal starts, then keep only entries not overlapped by a later one.
    syms.sort_by(|a, b| a.0.cmp(&b.0).then(b.3.cmp(&a.3)));
    let mut out: Vec<(u64, u64, Arc<str>, usize)> = Vec::with_capacity(syms.len());
    for s in syms {
        match out.last_mut() {
            Some(last) if s.0 < last.1 => {
                if s.3 > last.3 {
                    *last = s;
                }
            }
            _ => out.push(s),
        }
    }
    out.into_iter().map(|(s, e, n, _)| (s, e, n)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_into_ranges_and_bad_lines_are_skipped() {
        let syms = parse(
            "7f0010 20 LazyCompile:*foo app.js:1\n\
             garbage\n\
             7f0000 10 bar\n\
             0x7f0100 0 empty\n\
             7f0040 8 \n",
        );
        assert_eq!(
            syms,
            [
                (0x7f0000, 0x7f0010, Arc::from("bar")),
                (0x7f0010, 0x7f0030, Arc::from("LazyCompile:*foo app.js:1")),
            ]
        );
    }

    #[test]
    fn read_when_seen_again_on_a_miss_and_kept_after_exit() {
        let dir = std::env::temp_dir().join(format!("pp-perfmap-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let file = dir.join("perf-42.map");
        fs::write(&file, "1000 100 first\n").unwrap();
        let mut maps = PerfMaps::in_dir(dir.to_str().unwrap());
        maps.seen(42);
        fs::write(&file, "1000 100 first\n2000 10 second\n").unwrap();
        assert_eq!(maps.name(42, 0x1050).as_deref(), Some("first"));
        // Not read since it was seen: a miss reads it again.
        assert_eq!(maps.name(42, 0x2004), None);
        std::thread::sleep(REREAD_EVERY);
        assert_eq!(maps.find(42, 0x2004).as_deref(), Some("second"));
        assert_eq!(maps.find(42, 0x3000), None);
        // The process exits and its map is deleted: the names stay until forgotten.
        maps.exit(42);
        fs::remove_file(&file).unwrap();
        assert_eq!(maps.find(42, 0x2004).as_deref(), Some("second"));
        maps.forget_exited();
        assert_eq!(maps.name(42, 0x2004), None);
        let _ = fs::remove_dir_all(&dir);
    }
}
