//! The kernel's symbols from `/proc/kallsyms`, and why they may be hidden.
//!
//! [`KernelSymbols::load`] only checks whether the addresses are shown; the file (~5 MiB of text
//! the kernel formats on each read: tens of milliseconds) is read when a kernel frame is first
//! named, so a profile without kernel frames never pays for it. Its text symbols are kept
//! compactly: the names in one buffer, 16 bytes per symbol besides. A capture's last lookups
//! ([`KernelSymbols::read_only_for`]) keep only the symbols that name the addresses asked for.
//!
//! The kernel image's text symbols are cached per boot ([`cache`]): the first capture of a boot
//! reads `/proc/kallsyms` and writes the cache (root's in `/var/cache/perf-profile`, another
//! user's in `$XDG_CACHE_HOME/perf-profile` or `~/.cache/perf-profile`, or where
//! `PERF_PROFILE_CACHE_DIR` says; set and empty, no cache); later ones name the image's frames
//! from the cache, and read `/proc/kallsyms` only for an address outside the image's text (a
//! module, a BPF program, a trampoline).

mod cache;

use std::fs;
use std::io::{BufRead, BufReader, ErrorKind, Read};
use std::sync::OnceLock;

/// A kernel text symbol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelSymbol<'a> {
    /// Its address.
    pub addr: u64,
    /// Its name.
    pub name: &'a str,
    /// The module it belongs to (`[ext4]`), `None` for the kernel image.
    pub module: Option<&'a str>,
}

/// One symbol: its address, its name's place in [`Table::names`], its module (0: none, else an
/// index + 1 into [`Table::modules`]).
#[derive(Clone, Copy, Debug)]
struct Entry {
    addr: u64,
    name_at: u32,
    name_len: u16,
    module: u16,
}

/// The text symbols, sorted by address.
#[derive(Clone, Debug, Default)]
struct Table {
    entries: Vec<Entry>,
    /// The names, one after the other (ASCII).
    names: Vec<u8>,
    modules: Vec<String>,
    /// Lines parsed, and those with a zero address (all zero: the addresses are hidden).
    lines: usize,
    zero: usize,
}

/// The kernel's text symbols, or why there are none.
#[derive(Clone, Debug, Default)]
pub struct KernelSymbols {
    /// Filled on first use when `lazy`, else when parsed.
    table: OnceLock<Table>,
    /// The symbols that name the addresses given to [`read_only_for`](Self::read_only_for), and
    /// those addresses (sorted): consulted for them only, before `table` is read.
    only: OnceLock<(Vec<u64>, Table)>,
    /// The kernel image's symbols from the cache, for lookups within its text before `table`
    /// is read; `None` inside when there is no cache of this boot's to read.
    core: OnceLock<Option<cache::Core>>,
    /// Read `/proc/kallsyms` into `table` when a symbol is first looked up.
    lazy: bool,
    hidden: Option<String>,
    /// Where the cache of the image's symbols is, and this boot's key; `None`: no cache.
    cache: Option<(cache::Place, cache::Key)>,
}

/// At most this much of `/proc/kallsyms` is read (a large kernel's is about 20 MiB): a kernel file,
/// but read through the door's rules anyway (no symlink, non-blocking, bounded).
const MAX_KALLSYMS: u64 = 128 << 20;

/// `/proc/kallsyms` is read in pieces this large.
const READ_BUFFER: usize = 256 << 10;

impl KernelSymbols {
    /// Checks that `/proc/kallsyms` shows the kernel's addresses; its symbols are read when one
    /// is first looked up ([`find`](Self::find), [`range`](Self::range)). Where
    /// `kernel.kptr_restrict` (or the reader's lack of `CAP_SYSLOG`) hides the addresses, there
    /// are no symbols and [`hidden`](Self::hidden) says why.
    ///
    /// The kernel image's symbols come from the per-boot cache where there is one (see the
    /// module's documentation).
    pub fn load() -> Self {
        Self::load_with(cache::place())
    }

    /// [`load`](Self::load) with the cache at `place` (`None`: none).
    fn load_with(place: Option<cache::Place>) -> Self {
        let file = match crate::untrusted::open_system(KALLSYMS) {
            Ok(f) => f.take(MAX_KALLSYMS),
            Err(e) => return Self::unreadable(&e),
        };
        // The kernel shows every address or none (it decides when the file is opened): the first
        // non-zero address says they are shown. (The first symbols may be per-CPU variables at
        // offset 0.) Hidden, every line is read to be sure, and nothing kept.
        // The head read is the cache key's fingerprint (see `cache`).
        let mut r = BufReader::new(file);
        let mut line = Vec::new();
        let mut t = Table::default();
        let mut head = cache::Fingerprint::default();
        loop {
            line.clear();
            match r.read_until(b'\n', &mut line) {
                Ok(0) => break,
                Ok(_) => match address(&line) {
                    Some(0) => t.zero += 1,
                    Some(_) => {
                        head.add(&line);
                        while !head.full() {
                            line.clear();
                            match r.read_until(b'\n', &mut line) {
                                Ok(1..) => head.add(&line),
                                _ => break,
                            }
                        }
                        return Self {
                            lazy: true,
                            cache: place.zip(cache::Key::of_this_boot(head.get())),
                            ..Self::default()
                        };
                    }
                    None => {
                        head.add(&line);
                        continue;
                    }
                },
                Err(e) => return Self::unreadable(&e),
            }
            head.add(&line);
            t.lines += 1;
        }
        let mut k = Self::default();
        if t.lines > 0 && t.zero == t.lines {
            let restrict = fs::read_to_string("/proc/sys/kernel/kptr_restrict")
                .map(|s| s.trim().to_owned())
                .unwrap_or_else(|_| "unreadable".into());
            let paranoid = fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
                .map(|s| s.trim().to_owned())
                .unwrap_or_else(|_| "unreadable".into());
            // The kernel's rule (kallsyms_show_value): kptr_restrict 2 hides them from everyone;
            // 1 shows them to CAP_SYSLOG; 0 to CAP_SYSLOG, and to everyone while
            // perf_event_paranoid <= 1.
            let fix = if restrict == "2" {
                "`sysctl kernel.kptr_restrict=1` and CAP_SYSLOG (root has it) name them"
            } else {
                "CAP_SYSLOG (root has it) names them, or with kernel.kptr_restrict 0, \
                 `sysctl kernel.perf_event_paranoid=1`"
            };
            k.hidden = Some(format!(
                "kernel frames are shown as one [kernel] frame: /proc/kallsyms hides the \
                 kernel's addresses from this process (kernel.kptr_restrict = {restrict}, \
                 kernel.perf_event_paranoid = {paranoid}); {fix}"
            ));
        }
        k
    }

    fn unreadable(e: &std::io::Error) -> Self {
        Self {
            hidden: Some(format!(
                "kernel frames are shown as one [kernel] frame: /proc/kallsyms: {e}"
            )),
            ..Self::default()
        }
    }

    /// Parses the text of `/proc/kallsyms` (`ADDR TYPE NAME [MODULE]` lines); text symbols only.
    pub fn parse(text: &str) -> Self {
        let mut t = Table::default();
        for line in text.lines() {
            t.add_line(line.as_bytes());
        }
        t.finish();
        let hidden = (t.lines > 0 && t.zero == t.lines)
            .then(|| "/proc/kallsyms shows zero addresses".to_owned());
        Self {
            table: OnceLock::from(t),
            lazy: false,
            hidden,
            ..Self::default()
        }
    }

    /// The symbols of the `/proc/kallsyms` text that `file` gives, read in pieces as the first
    /// lookup after [`load`](Self::load) reads them; `None` when it is not such text.
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn read_from(file: impl Read) -> Option<Self> {
        Some(Self {
            table: OnceLock::from(Table::read_from(file)?),
            ..Self::default()
        })
    }

    /// Why kernel frames cannot be named, or `None` when they can.
    pub fn hidden(&self) -> Option<&str> {
        self.hidden.as_deref()
    }

    /// The symbols, read now if they were not yet; the boot's first read writes the cache.
    fn table(&self) -> &Table {
        self.table.get_or_init(|| {
            if !self.lazy {
                return Table::default();
            }
            let t = Table::read().unwrap_or_default();
            let cached = self.core.get().is_some_and(Option::is_some);
            if let (false, Some((place, key))) = (cached, &self.cache) {
                if let Some(dir) = cache::open_dir(place) {
                    if !cache::is_current(&dir, key) {
                        cache::write(&dir, key, &t);
                    }
                }
            }
            t
        })
    }

    /// The kernel image's symbols from this boot's cache, read on first use; `None` without one.
    fn core(&self) -> Option<&cache::Core> {
        self.core
            .get_or_init(|| {
                let (place, key) = self.cache.as_ref().filter(|_| self.lazy)?;
                cache::read_all(&cache::open_dir(place)?, key)
            })
            .as_ref()
    }

    /// Whether the symbols were read (a lazy [`load`](Self::load) reads them on first use).
    #[cfg(test)]
    fn is_read(&self) -> bool {
        self.table.get().is_some()
    }

    /// Reads, in one pass over `/proc/kallsyms`, only the symbols that name `addrs` (for each, the
    /// last symbol at or below it), for the lookups of a capture's end: [`find`](Self::find)
    /// answers those addresses from them as it would from the whole table, and reads the whole
    /// table for any other address. The file is read as a whole anyway (the kernel formats every
    /// line: most of its cost); what is saved is keeping ~120 000 names (≈ 5 MiB on a
    /// distribution kernel) to name a few hundred frames. Nothing happens when the symbols were
    /// read already, are not shown, or `addrs` is empty.
    ///
    /// Where every address is in the kernel image's text and this boot's cache is there, the
    /// symbols come from the cache and `/proc/kallsyms` is not read; where there is no such
    /// cache, the file is read and the cache written.
    pub fn read_only_for(&self, addrs: impl IntoIterator<Item = u64>) {
        if !self.lazy || self.table.get().is_some() || self.only.get().is_some() {
            return;
        }
        let mut addrs: Vec<u64> = addrs.into_iter().collect();
        if addrs.is_empty() {
            return;
        }
        addrs.sort_unstable();
        addrs.dedup();
        let mut write = None;
        if let Some((place, key)) = &self.cache {
            if let Some(dir) = cache::open_dir(place) {
                match cache::read_for(&dir, key, &addrs) {
                    Ok(core) => {
                        let _ = self.only.set((addrs, core.table));
                        return;
                    }
                    Err(cache::Miss::OutOfRange) => {}
                    Err(cache::Miss::Absent) => write = Some((dir, key)),
                }
            }
        }
        let Ok(file) = crate::untrusted::open_system(KALLSYMS) else {
            return;
        };
        let mut image = write.as_ref().map(|_| Table::default());
        if let Some(t) = Table::read_for(file.take(MAX_KALLSYMS), &addrs, image.as_mut()) {
            let _ = self.only.set((addrs, t));
            if let (Some((dir, key)), Some(mut image)) = (write, image) {
                image.finish();
                cache::write(&dir, key, &image);
            }
        }
    }

    /// The symbol `addr` falls in: the last one at or below it. `None` below the first symbol.
    pub fn find(&self, addr: u64) -> Option<KernelSymbol<'_>> {
        let t = match (self.table.get(), self.only.get()) {
            (Some(t), _) => t,
            (None, Some((addrs, t))) if addrs.binary_search(&addr).is_ok() => t,
            (None, _) => match self.core() {
                Some(core) if core.covers(addr) => &core.table,
                _ => self.table(),
            },
        };
        let i = t.entries.partition_point(|e| e.addr <= addr);
        i.checked_sub(1)
            .and_then(|i| t.entries.get(i))
            .map(|e| t.symbol(e))
    }

    /// The lowest and highest symbol address.
    pub fn range(&self) -> Option<(u64, u64)> {
        let t = self.table();
        Some((t.entries.first()?.addr, t.entries.last()?.addr))
    }
}

const KALLSYMS: &str = "/proc/kallsyms";

/// The address a `/proc/kallsyms` line starts with (hex digits up to the first space or tab);
/// `None` for a line that does not start with one.
fn address(line: &[u8]) -> Option<u64> {
    address_and_digits(line).map(|(a, _)| a)
}

/// [`address`], and how many digits it has.
fn address_and_digits(line: &[u8]) -> Option<(u64, usize)> {
    let end = line
        .iter()
        .position(|b| *b == b' ' || *b == b'\t' || *b == b'\n')
        .unwrap_or(line.len());
    let hex = &line[..end];
    if hex.is_empty() || hex.len() > 16 {
        return None;
    }
    let addr = hex.iter().try_fold(0u64, |a, &b| {
        let d = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            b'A'..=b'F' => b - b'A' + 10,
            _ => return None,
        };
        Some(a << 4 | u64::from(d))
    })?;
    Some((addr, end))
}

impl Table {
    /// `/proc/kallsyms` read now; `None` when it cannot be read through.
    fn read() -> Option<Self> {
        Self::read_from(
            crate::untrusted::open_system(KALLSYMS)
                .ok()?
                .take(MAX_KALLSYMS),
        )
    }

    /// The symbols of the `/proc/kallsyms` text `file` gives; `None` when it fails.
    fn read_from(file: impl Read) -> Option<Self> {
        let mut t = Self::default();
        lines_of(file, |line| t.add_line(line))?;
        t.finish();
        Some(t)
    }

    /// Of the `/proc/kallsyms` text `file` gives, only the symbols that name `addrs` (sorted,
    /// unique): the last text symbol at or below each; `None` when reading fails.
    ///
    /// The text is not sorted (modules' symbols follow the kernel image's, each module's in its
    /// own order), so each symbol goes to the gap between two addresses asked for that it falls
    /// in (`addrs[j - 1] < symbol <= addrs[j]`), and a gap keeps its highest symbol (the later
    /// one of equal addresses, as the whole table's stable sort does). `addrs[j]` is named by its
    /// own gap's symbol, or by the nearest gap below that has one.
    ///
    /// With `image`, the same pass adds every symbol of the kernel image (no module) to it, as
    /// reading the whole table would (for the cache; not yet sorted).
    fn read_for(file: impl Read, addrs: &[u64], mut image: Option<&mut Table>) -> Option<Self> {
        let mut t = Self::default();
        // Per gap: the kept symbol's address, and its whole line (parsed once it is known to be
        // the one: most lines are kept only until the next one replaces them).
        let mut best: Vec<Option<u64>> = vec![None; addrs.len()];
        let mut lines: Vec<Vec<u8>> = vec![Vec::new(); addrs.len()];
        // The last address looked up and its gap: the kernel image's lines come sorted, so the
        // next gap is found by stepping on from there; anything else by bisection.
        let mut last = (0u64, 0usize);
        // Whether a symbol at `addr` would be kept (see above): its gap.
        let mut kept = move |best: &[Option<u64>], addr: u64| {
            let j = if addr >= last.0 {
                let mut j = last.1;
                while addrs.get(j).is_some_and(|&a| a < addr) {
                    j += 1;
                }
                j
            } else {
                addrs.partition_point(|&a| a < addr)
            };
            last = (addr, j);
            (j < addrs.len() && best[j].is_none_or(|b| b <= addr)).then_some(j)
        };
        let mut keep = |best: &mut [Option<u64>], j: usize, addr: u64, line: &[u8]| {
            best[j] = Some(addr);
            lines[j].clear();
            lines[j].extend_from_slice(line);
        };
        lines_of(file, |line| {
            if let Some(image) = image.as_deref_mut() {
                image.add_image_line(line);
            }
            // Most lines are not kept: decided from the address alone where it starts the line
            // (then it is the one `text_symbol` reads), before the rest is looked at; a line in
            // the kernel's own form is judged without splitting it into fields.
            if let Some((addr, digits)) = address_and_digits(line) {
                let Some(j) = kept(&best, addr) else {
                    return;
                };
                match usual_text_symbol(line, digits) {
                    Some(true) if addr != 0 => return keep(&mut best, j, addr, line),
                    Some(_) => return,
                    None => {}
                }
            }
            let Some((addr, _, _)) = t.text_symbol(line) else {
                return;
            };
            if let Some(j) = kept(&best, addr) {
                keep(&mut best, j, addr, line);
            }
        })?;
        for (b, line) in best.into_iter().zip(&lines) {
            if b.is_some() {
                if let Some((addr, name, module)) = t.text_symbol(line) {
                    t.push(addr, name, module);
                }
            }
        }
        t.finish();
        Some(t)
    }
}

/// Whether [`Table::text_symbol`] takes `line`, whose address (non-zero, `digits` long) starts it,
/// where the line has the kernel's own form (`ADDR TYPE NAME` or `ADDR TYPE NAME\t[MODULE]`: one
/// space after the address and after the type, ASCII, no other space): decided from the type
/// without splitting the line into fields. `None` for a line of another form (parse it whole).
fn usual_text_symbol(line: &[u8], digits: usize) -> Option<bool> {
    let [b' ', ty, b' ', rest @ ..] = line.get(digits..)? else {
        return None;
    };
    // The name (up to the tab) is then non-empty, ASCII and shorter than 64 KiB.
    let usual = matches!(rest.first(), Some(b) if *b != b'\t')
        && rest.len() <= usize::from(u16::MAX)
        && rest.is_ascii()
        && !rest.contains(&b' ');
    usual.then_some(matches!(ty, b't' | b'T' | b'w' | b'W'))
}

/// Calls `line` with each line of the text `file` gives (without its newline), parsed where it
/// was read; `None` when reading fails or a line does not fit the buffer (not `/proc/kallsyms`).
fn lines_of(mut file: impl Read, mut line: impl FnMut(&[u8])) -> Option<()> {
    // A line cut by the buffer's end moves to its start.
    let mut buf = vec![0u8; READ_BUFFER];
    let mut have = 0;
    loop {
        let n = match file.read(&mut buf[have..]) {
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return None,
        };
        have += n;
        let mut start = 0;
        while let Some(len) = newline(&buf[start..have]) {
            line(&buf[start..start + len]);
            start += len + 1;
        }
        if n == 0 {
            line(&buf[start..have]);
            break;
        }
        buf.copy_within(start..have, 0);
        have -= start;
        if have == buf.len() {
            // A line as long as the buffer: not /proc/kallsyms as we know it.
            return None;
        }
    }
    Some(())
}

/// Where the first `\n` of `bytes` is: eight bytes at a time (`/proc/kallsyms` has ~100 000
/// lines of ~40 bytes; byte by byte, finding their ends was a tenth of our CPU in reading them).
fn newline(bytes: &[u8]) -> Option<usize> {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    const NEWLINES: u64 = u64::from_ne_bytes([b'\n'; 8]);
    let in_bytes = |bytes: &[u8]| bytes.iter().position(|&b| b == b'\n');
    let mut chunks = bytes.chunks_exact(8);
    for (i, chunk) in (&mut chunks).enumerate() {
        let Ok(word) = <[u8; 8]>::try_from(chunk) else {
            break;
        };
        // `x` has a zero byte where the chunk has a newline; `(x - 0x0101..) & !x & 0x8080..` is
        // non-zero exactly when some byte of `x` is zero. The chunk then says which.
        let x = u64::from_ne_bytes(word) ^ NEWLINES;
        if x.wrapping_sub(ONES) & !x & HIGHS != 0 {
            return in_bytes(chunk).map(|at| i * 8 + at);
        }
    }
    let done = bytes.len() - chunks.remainder().len();
    in_bytes(chunks.remainder()).map(|at| done + at)
}

impl Table {
    /// Adds a line (`ADDR TYPE NAME` or `ADDR TYPE NAME\t[MODULE]`, fields separated by spaces or
    /// tabs) if it is a text symbol.
    fn add_line(&mut self, line: &[u8]) {
        if let Some((addr, name, module)) = self.text_symbol(line) {
            self.push(addr, name, module);
        }
    }

    /// The address, name and module (see [`Entry::module`]) of a line if it is a text symbol
    /// that can be kept; counts the line (and its zero address) either way, and learns its module.
    fn text_symbol<'l>(&mut self, line: &'l [u8]) -> Option<(u64, &'l [u8], u16)> {
        let separator = |b: &u8| *b == b' ' || *b == b'\t';
        let field = |rest: &[u8]| -> (usize, usize) {
            let start = rest
                .iter()
                .position(|b| !separator(b))
                .unwrap_or(rest.len());
            let len = rest[start..]
                .iter()
                .position(|b| separator(b) || *b == b'\n')
                .unwrap_or(rest.len() - start);
            (start, start + len)
        };
        let (a0, a1) = field(line);
        let (t0, t1) = field(&line[a1..]);
        let rest = &line[a1 + t1..];
        let (n0, n1) = field(rest);
        if n0 == n1 {
            return None;
        }
        self.lines += 1;
        let addr = address(&line[a0..a1])?;
        if addr == 0 {
            self.zero += 1;
            return None;
        }
        if !matches!(&line[a1 + t0..a1 + t1], b"t" | b"T" | b"w" | b"W") {
            return None;
        }
        let name = &rest[n0..n1];
        // Kernel symbol names are ASCII; anything else is not kept.
        if !name.is_ascii() || u16::try_from(name.len()).is_err() {
            return None;
        }
        let (m0, m1) = field(&rest[n1..]);
        let module = match &rest[n1 + m0..n1 + m1] {
            [] => 0,
            m => {
                let m = m.strip_prefix(b"[").unwrap_or(m);
                let m = m.strip_suffix(b"]").unwrap_or(m);
                // Modules' symbols come grouped: the last one is almost always the one.
                match self.modules.iter().rposition(|x| x.as_bytes() == m) {
                    Some(i) => i + 1,
                    None => {
                        self.modules.push(String::from_utf8_lossy(m).into_owned());
                        self.modules.len()
                    }
                }
            }
        };
        let module = u16::try_from(module).ok()?;
        Some((addr, name, module))
    }

    /// Adds a line as [`add_line`](Self::add_line) does if it is a text symbol of the kernel
    /// image (no module); a line in the kernel's own form without a module is judged without
    /// splitting it into fields.
    fn add_image_line(&mut self, line: &[u8]) {
        if let Some((addr, digits)) = address_and_digits(line) {
            match usual_text_symbol(line, digits) {
                Some(false) => return,
                Some(true) => {
                    // `ADDR T NAME`, no tab: the name is the rest.
                    let name = &line[digits + 3..];
                    if !name.contains(&b'\t') {
                        if addr != 0 {
                            self.push(addr, name, 0);
                        }
                        return;
                    }
                }
                None => {}
            }
        }
        if let Some((addr, name, 0)) = self.text_symbol(line) {
            self.push(addr, name, 0);
        }
    }

    /// The name of `e`, one of this table's symbols.
    fn name_of(&self, e: &Entry) -> &[u8] {
        let at = e.name_at as usize;
        self.names
            .get(at..at + usize::from(e.name_len))
            .unwrap_or_default()
    }

    /// Adds a text symbol (its name ASCII and shorter than 64 KiB: see `text_symbol`).
    fn push(&mut self, addr: u64, name: &[u8], module: u16) {
        let (Ok(name_at), Ok(name_len)) =
            (u32::try_from(self.names.len()), u16::try_from(name.len()))
        else {
            return;
        };
        self.names.extend_from_slice(name);
        self.entries.push(Entry {
            addr,
            name_at,
            name_len,
            module,
        });
    }

    fn finish(&mut self) {
        self.entries.sort_by_key(|e| e.addr);
        self.entries.shrink_to_fit();
        self.names.shrink_to_fit();
    }

    fn symbol(&self, e: &Entry) -> KernelSymbol<'_> {
        let at = e.name_at as usize;
        KernelSymbol {
            addr: e.addr,
            name: self
                .names
                .get(at..at + usize::from(e.name_len))
                .and_then(|n| std::str::from_utf8(n).ok())
                .unwrap_or_default(),
            module: usize::from(e.module)
                .checked_sub(1)
                .and_then(|i| self.modules.get(i))
                .map(String::as_str),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symbols_are_found_by_address() {
        let k = KernelSymbols::parse(
            "ffffffff81000000 T _stext\nffffffff81000100 t do_thing\nffffffff81000200 D data\n\
             ffffffffc0000000 t ext4_fn\t[ext4]\n",
        );
        assert!(k.hidden().is_none());
        assert_eq!(k.find(0xffffffff81000150).unwrap().name, "do_thing");
        assert_eq!(
            k.find(0xffffffff81000250).unwrap().name,
            "do_thing",
            "data symbols skipped"
        );
        assert_eq!(k.find(0xffffffffc0000010).unwrap().module, Some("ext4"));
        assert_eq!(k.find(0xffffffff81000010).unwrap().module, None);
        assert_eq!(k.range(), Some((0xffffffff81000000, 0xffffffffc0000000)));
        assert!(k.find(0x1000).is_none());
    }

    #[test]
    fn zero_addresses_mean_hidden() {
        let k = KernelSymbols::parse("0000000000000000 T _stext\n0000000000000000 t do_thing\n");
        assert!(k.hidden().is_some());
        assert!(k.find(0xffffffff81000150).is_none());
    }

    #[test]
    fn addresses_parse_as_hex_and_nothing_else() {
        assert_eq!(
            address(b"ffffffff81000000 T _stext\n"),
            Some(0xffffffff81000000)
        );
        assert_eq!(address(b"0000000000000000 A fixed_percpu_data"), Some(0));
        assert_eq!(address(b"zz T x"), None);
        assert_eq!(address(b"1ffffffff81000000 T too_long"), None);
        assert_eq!(address(b""), None);
    }

    #[test]
    fn newlines_are_found_where_they_are() {
        for len in 0..40 {
            let mut bytes = vec![b'a'; len];
            assert_eq!(newline(&bytes), None, "{len}");
            for at in 0..len {
                // Bytes on either side of the newline (0x0a): 0x0b, 0x09, 0x8a, 0xff.
                for other in [0x0b, 0x09, 0x8a, 0xff, b'a'] {
                    bytes.fill(other);
                    bytes[at] = b'\n';
                    if at + 1 < len {
                        bytes[at + 1] = b'\n';
                    }
                    assert_eq!(newline(&bytes), Some(at), "{len} {at} {other:#x}");
                }
            }
        }
    }

    #[test]
    fn text_read_in_pieces_is_parsed_as_a_whole() {
        // Longer than the buffer, so that lines are cut at its end.
        let mut text = String::new();
        let mut i = 0u64;
        while text.len() < READ_BUFFER * 2 + 100 {
            let module = if i.is_multiple_of(7) { "\t[ext4]" } else { "" };
            let ty = ["T", "t", "D", "W"][i as usize % 4];
            text += &format!(
                "{:016x} {ty} symbol_{i}{module}\n",
                0xffffffff81000000 + i * 16
            );
            i += 1;
        }
        text += "ffffffffc0000000 t no_newline_at_the_end";
        let read = Table::read_from(text.as_bytes()).unwrap();
        let parsed = KernelSymbols::parse(&text);
        let parsed = parsed.table();
        assert_eq!(read.entries.len(), parsed.entries.len());
        assert_eq!(read.names, parsed.names);
        assert_eq!(read.modules, ["ext4"]);
        let k = KernelSymbols {
            table: OnceLock::from(read),
            ..KernelSymbols::default()
        };
        assert_eq!(
            k.find(0xffffffff81000000 + 21 * 16).unwrap().name,
            "symbol_21"
        );
        assert_eq!(
            k.find(0xffffffff81000000 + 21 * 16).unwrap().module,
            Some("ext4")
        );
        assert_eq!(
            k.find(0xffffffffc0000001).unwrap().name,
            "no_newline_at_the_end"
        );
        // A line longer than the buffer is not kallsyms.
        assert!(Table::read_from(vec![b'f'; READ_BUFFER + 1].as_slice()).is_none());
    }

    /// A capture's last lookups keep only the symbols that name them, and name them as the
    /// whole table does: ties (the later line wins), modules' symbols after the image's and out
    /// of order, addresses below every symbol, between symbols, on one, above the last; lines
    /// with tabs, extra spaces, no name or a name that is not ASCII.
    #[test]
    fn only_the_symbols_asked_for_name_them_as_the_whole_table_does() {
        let text = "0000000000000000 A fixed_percpu_data\n\
                    ffffffff81000000 T _stext\n\
                    ffffffff81000000 T _text\n\
                    ffffffff81000100 t do_thing\n\
                    ffffffff81000180\tt\tin_tabs\n\
                    ffffffff81000190 T\n\
                    ffffffff810001a0 t n\u{f6}n_ascii\n\
                    ffffffff810001b0  t  two_spaces\n\
                    ffffffff81000200 D data\n\
                    ffffffff81000300 W weak_one\n\
                    ffffffff81000400 T last_of_the_image\n\
                    ffffffffc0000200 t ext4_b\t[ext4]\n\
                    ffffffffc0000000 t ext4_a\t[ext4]\n\
                    ffffffffc0000200 t ext4_b_alias\t[ext4]\n\
                    ffffffffc0001000 t xfs_a\t[xfs]\n\
                    ffffffffa0000000 t bpf_prog_x\t[bpf]\n";
        let whole = KernelSymbols::parse(text);
        let asked = [
            0x1000,
            0xffffffff81000000,
            0xffffffff81000001,
            0xffffffff81000150,
            0xffffffff81000185,
            0xffffffff810001a8,
            0xffffffff810001b0,
            0xffffffff81000250,
            0xffffffff81000300,
            0xffffffff81000500,
            0xffffffffa0000010,
            0xffffffffc0000100,
            0xffffffffc0000200,
            0xffffffffc0000fff,
            0xffffffffc0002000,
        ];
        // Each address alone, and all together.
        let mut sets: Vec<Vec<u64>> = asked.iter().map(|&a| vec![a]).collect();
        sets.push(asked.to_vec());
        for set in sets {
            let only = Table::read_for(text.as_bytes(), &set, None).unwrap();
            assert!(only.entries.len() <= set.len(), "{set:x?}: {only:?}");
            let k = KernelSymbols {
                only: OnceLock::from((set.clone(), only)),
                lazy: false,
                ..KernelSymbols::default()
            };
            for &a in &set {
                assert_eq!(k.find(a), whole.find(a), "{a:#x} of {set:x?}");
            }
        }
        assert_eq!(whole.find(0xffffffffc0000200).unwrap().name, "ext4_b_alias");
        // Lines not in the kernel's own form are parsed field by field, as the whole table does.
        assert_eq!(whole.find(0xffffffff810001a8).unwrap().name, "in_tabs");
        assert_eq!(whole.find(0xffffffff810001b0).unwrap().name, "two_spaces");
        assert_eq!(whole.find(0xffffffffa0000010).unwrap().module, Some("bpf"));
    }

    /// The same against this kernel's `/proc/kallsyms`: a few hundred addresses spread over its
    /// range are named as the whole table names them, from at most as many symbols; an address
    /// not asked for reads the whole table.
    #[test]
    fn only_the_symbols_asked_for_name_this_kernels_addresses() {
        let k = KernelSymbols::load_with(None);
        if let Some(why) = k.hidden() {
            println!("skipped: {why}");
            return;
        }
        let text = fs::read_to_string(KALLSYMS).unwrap();
        let whole = KernelSymbols::parse(&text);
        let t = whole.table();
        // Every 500th symbol, one byte in, and the image's text symbols' starts.
        let asked: Vec<u64> = t
            .entries
            .iter()
            .step_by(500)
            .map(|e| e.addr + 1)
            .chain(t.entries.iter().step_by(997).map(|e| e.addr))
            .collect();
        assert!(asked.len() > 100, "{} symbols", t.entries.len());
        k.read_only_for(asked.iter().copied());
        let (addrs, only) = k.only.get().expect("read");
        assert!(only.entries.len() <= addrs.len());
        assert!(!k.is_read());
        for &a in &asked {
            // A module or BPF program loaded or unloaded between the two reads names its
            // addresses differently: compare the image's only.
            let w = whole.find(a).unwrap();
            if w.module.is_none() {
                assert_eq!(
                    k.find(a).map(|s| (s.addr, s.name)),
                    Some((w.addr, w.name)),
                    "{a:#x}"
                );
            }
        }
        assert!(!k.is_read(), "an address asked for read the whole table");
        let other = (addrs[0]..)
            .find(|a| addrs.binary_search(a).is_err())
            .unwrap();
        let _ = k.find(other);
        assert!(
            k.is_read(),
            "an address not asked for is named from the whole table"
        );
    }

    /// Loading only checks that addresses are shown; the ~5 MiB of symbols are read when a kernel
    /// frame is first named, once.
    #[test]
    fn the_kernel_symbols_are_read_on_first_use_only() {
        let k = KernelSymbols::load_with(None);
        if let Some(why) = k.hidden() {
            println!("skipped: {why}");
            return;
        }
        assert!(!k.is_read(), "read at load");
        let text = fs::read_to_string(KALLSYMS).unwrap();
        let stext = text
            .lines()
            .find(|l| l.ends_with(" _stext"))
            .and_then(|l| address(l.as_bytes()))
            .expect("_stext in /proc/kallsyms");
        let found = k.find(stext + 1).expect("a symbol at _stext");
        assert_eq!(found.addr, stext);
        assert!(k.is_read());
        // The same lowest symbol as parsing the whole text gives (the highest may be a BPF
        // program's, loaded or unloaded meanwhile).
        assert_eq!(
            k.range().map(|r| r.0),
            KernelSymbols::parse(&text).range().map(|r| r.0)
        );
    }

    /// A scratch folder for a cache, mode 0700.
    fn cache_folder(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "perf-profile-kernel-cache-{name}-{}",
            std::process::id()
        ));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    /// `t`'s image symbols, as `(address, name)`.
    fn image_of(t: &Table) -> Vec<(u64, String)> {
        t.entries
            .iter()
            .filter(|e| e.module == 0)
            .map(|e| (e.addr, t.symbol(e).name.to_owned()))
            .collect()
    }

    fn synthetic() -> String {
        let mut text = String::from(
            "ffffffff81000000 T _stext\nffffffff81000000 T _text\nffffffff81000010 D data\n",
        );
        for i in 0..40u64 {
            let ty = ["T", "t", "W", "w", "D"][i as usize % 5];
            text += &format!("{:016x} {ty} fn_{i}\n", 0xffffffff81000100 + i * 0x40);
        }
        text += "ffffffff81000100 t alias_of_fn_0\n\
                 ffffffff81002000 T _etext\n\
                 ffffffff83000000 T init_fn\n\
                 ffffffffc0000000 t ext4_fn\t[ext4]\n\
                 ffffffffa0000000 t bpf_prog_1\t[bpf]\n";
        text
    }

    fn synthetic_key() -> cache::Key {
        cache::Key::new("boot", "6.1.0", 42).unwrap()
    }

    /// A cache of the image's symbols decodes to them (the same order of equal addresses), init
    /// text included; modules' and BPF programs' are not in it, and there is no cache where one
    /// lies among the image's.
    #[test]
    fn a_cache_decodes_to_the_image_symbols_it_was_made_of() {
        let whole = KernelSymbols::parse(&synthetic());
        let key = synthetic_key();
        let bytes = cache::encode(&key, whole.table()).unwrap();
        let core = cache::decode(bytes.as_slice(), bytes.len() as u64, &key, None).unwrap();
        assert_eq!((core.lo, core.hi), (0xffffffff81000000, 0xffffffff83000000));
        let want = image_of(whole.table());
        assert_eq!(image_of(&core.table), want);
        assert!(want.iter().any(|(_, n)| n == "alias_of_fn_0"));
        let cached = KernelSymbols {
            table: OnceLock::from(core.table.clone()),
            ..KernelSymbols::default()
        };
        for addr in (core.lo..=core.lo + 0x3000).chain(core.hi - 0x100..=core.hi) {
            assert_eq!(cached.find(addr), whole.find(addr), "{addr:#x}");
        }
        // A module's symbol among the image's: no cache.
        let mixed = KernelSymbols::parse(&(synthetic() + "ffffffff82000000 t inside\t[bpf]\n"));
        assert!(cache::encode(&key, mixed.table()).is_none());
        // Some addresses only: the symbols that name them.
        let addrs = [0xffffffff81000000, 0xffffffff81000105, 0xffffffff81000fff];
        let only = cache::decode(bytes.as_slice(), bytes.len() as u64, &key, Some(&addrs))
            .unwrap()
            .table;
        assert!(only.entries.len() <= addrs.len());
        let only = KernelSymbols {
            only: OnceLock::from((addrs.to_vec(), only)),
            ..KernelSymbols::default()
        };
        for a in addrs {
            assert_eq!(only.find(a), whole.find(a), "{a:#x}");
        }
        assert_eq!(
            cache::decode(
                bytes.as_slice(),
                bytes.len() as u64,
                &key,
                Some(&[0xffffffff83000001])
            )
            .unwrap_err(),
            cache::Miss::OutOfRange
        );
    }

    /// Another boot's (or kernel's) cache is not used.
    #[test]
    fn a_cache_of_another_key_is_not_used() {
        let whole = KernelSymbols::parse(&synthetic());
        let key = synthetic_key();
        let bytes = cache::encode(&key, whole.table()).unwrap();
        for other in [
            cache::Key::new("boot2", "6.1.0", 42),
            cache::Key::new("boot", "6.1.1", 42),
            cache::Key::new("boot", "6.1.0", 43),
        ] {
            let other = other.unwrap();
            for want in [None, Some(&[0xffffffff81000000][..])] {
                assert_eq!(
                    cache::decode(bytes.as_slice(), bytes.len() as u64, &other, want).unwrap_err(),
                    cache::Miss::Absent
                );
            }
        }
    }

    /// Every prefix of a cache is refused, and every flipped byte gives a refusal or a table
    /// that is sound (sorted, names in bounds and ASCII): never a panic.
    #[test]
    fn a_truncated_or_flipped_cache_is_refused_or_sound() {
        let whole = KernelSymbols::parse(&synthetic());
        let key = synthetic_key();
        let bytes = cache::encode(&key, whole.table()).unwrap();
        let addrs = [0xffffffff81000000, 0xffffffff81000105, 0xffffffff81000fff];
        for n in 0..bytes.len() {
            let cut = &bytes[..n];
            for want in [None, Some(&addrs[..])] {
                assert!(cache::decode(cut, n as u64, &key, want).is_err(), "{n}");
                // A size that promises more than comes.
                assert!(
                    cache::decode(cut, bytes.len() as u64, &key, want).is_err(),
                    "{n}"
                );
            }
        }
        // The names a decoded cache gives `addrs`, once it is checked sound.
        let names = |core: cache::Core, at: usize, flip: u8| {
            let t = &core.table;
            assert!(t.entries.windows(2).all(|w| w[0].addr <= w[1].addr));
            for e in &t.entries {
                assert!((core.lo..=core.hi).contains(&e.addr));
                let name = t.name_of(e);
                assert_eq!(name.len(), usize::from(e.name_len), "{at} {flip:#x}");
                assert!(!name.is_empty() && name.iter().all(u8::is_ascii_graphic));
            }
            let k = KernelSymbols {
                only: OnceLock::from((addrs.to_vec(), core.table)),
                ..KernelSymbols::default()
            };
            addrs
                .iter()
                .map(|&a| k.find(a).map(|s| (s.addr, s.name.to_owned())))
                .collect::<Vec<_>>()
        };
        let truth: Vec<_> = addrs
            .iter()
            .map(|&a| whole.find(a).map(|s| (s.addr, s.name.to_owned())))
            .collect();
        let (mut accepted, mut only_read_sound) = (0, 0);
        for at in 0..bytes.len() {
            for flip in [0x01u8, 0x20, 0x80, 0xff] {
                let mut b = bytes.clone();
                b[at] ^= flip;
                let len = b.len() as u64;
                let all = cache::decode(b.as_slice(), len, &key, None);
                let only = cache::decode(b.as_slice(), len, &key, Some(&addrs));
                let all = all.map(|core| names(core, at, flip));
                let Ok(only) = only.map(|core| names(core, at, flip)) else {
                    continue;
                };
                accepted += 1;
                match all {
                    // What is read for a few addresses names them as reading it all does.
                    Ok(all) => assert_eq!(only, all, "{at} {flip:#x}"),
                    // Refused whole but not for a few addresses: the flip is in what naming
                    // them does not read, and they are named as before it.
                    Err(_) => {
                        assert_eq!(only, truth, "{at} {flip:#x}");
                        only_read_sound += 1;
                    }
                }
            }
        }
        // Flips in names and addresses still decode: the test saw decoded tables; and flips in
        // names not read for the addresses asked.
        assert!(accepted > 0);
        assert!(only_read_sound > 0);
    }

    /// Against this kernel: the cache of `/proc/kallsyms` names each image symbol's address, the
    /// next byte and the one before as the whole file does, over the image's running text.
    #[test]
    fn a_cache_of_this_kernel_names_its_addresses_as_kallsyms_does() {
        if let Some(why) = KernelSymbols::load_with(None).hidden() {
            println!("skipped: {why}");
            return;
        }
        let whole = KernelSymbols::parse(&fs::read_to_string(KALLSYMS).unwrap());
        let key = synthetic_key();
        let bytes = cache::encode(&key, whole.table()).unwrap();
        let core = cache::decode(bytes.as_slice(), bytes.len() as u64, &key, None).unwrap();
        let t = whole.table();
        let image = t.entries.iter().filter(|e| e.module == 0);
        assert_eq!(core.hi, image.clone().next_back().unwrap().addr);
        // Init text (the idle tasks' first frames) is in it.
        if let Some(e) = image.clone().find(|e| t.name_of(e) == b"start_kernel") {
            assert!(core.covers(e.addr));
        }
        let cached = KernelSymbols {
            table: OnceLock::from(core.table.clone()),
            ..KernelSymbols::default()
        };
        let mut checked = 0;
        for e in t.entries.iter().filter(|e| core.covers(e.addr)) {
            for a in [e.addr, e.addr + 1, e.addr - 1] {
                if core.covers(a) {
                    assert_eq!(cached.find(a), whole.find(a), "{a:#x}");
                    checked += 1;
                }
            }
        }
        assert!(checked > 1000, "{checked}");
        assert!(!core.covers(core.hi + 1));
        println!(
            "{checked} addresses named alike; {} symbols, {} bytes cached",
            core.table.entries.len(),
            bytes.len()
        );
    }

    /// The bytes this thread has read (`rchar` of `/proc/thread-self/io`: every `read` and
    /// `pread`); `None` where the kernel does not count them.
    fn bytes_read() -> Option<u64> {
        let io = fs::read_to_string("/proc/thread-self/io").ok()?;
        io.lines()
            .find_map(|l| l.strip_prefix("rchar:"))?
            .trim()
            .parse()
            .ok()
    }

    /// `n` addresses spread at random over `lo..=hi` (a fixed xorshift, so that a failure
    /// repeats), with `lo` and `hi`: sorted, unique.
    fn random_addrs(lo: u64, hi: u64, n: usize, seed: u64) -> Vec<u64> {
        let mut x = seed | 1;
        let mut addrs: Vec<u64> = (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                lo + x % (hi - lo + 1)
            })
            .chain([lo, hi])
            .collect();
        addrs.sort_unstable();
        addrs.dedup();
        addrs
    }

    /// A cache of this kernel's `/proc/kallsyms`, written into a fresh folder: the folder, its
    /// path, the whole table read back from it, and the file's size. `None` (skipped) where the
    /// addresses are hidden.
    fn this_kernels_cache(
        name: &str,
    ) -> Option<(cache::Dir, std::path::PathBuf, cache::Core, u64)> {
        if let Some(why) = KernelSymbols::load_with(None).hidden() {
            println!("skipped: {why}");
            return None;
        }
        let whole = KernelSymbols::parse(&fs::read_to_string(KALLSYMS).unwrap());
        let dir = cache_folder(name);
        let d = cache::open_dir(&cache::Place::at(&dir)).expect("a fresh folder is ours");
        cache::write(&d, &synthetic_key(), whole.table());
        let len = fs::metadata(dir.join(cache::FILE)).unwrap().len();
        let all = cache::read_all(&d, &synthetic_key()).expect("the cache written");
        Some((d, dir, all, len))
    }

    /// A capture's end reads from this kernel's cache only what names its addresses (the header,
    /// the address array, the names of the symbols they fall in), far less than the file, and
    /// names a few hundred random addresses as reading the whole file does.
    #[test]
    fn a_captures_end_reads_only_what_names_its_addresses_from_the_cache() {
        if bytes_read().is_none() {
            println!("skipped: /proc/thread-self/io does not count the bytes read");
            return;
        }
        let Some((d, dir, all, len)) = this_kernels_cache("partial") else {
            return;
        };
        let whole = KernelSymbols {
            table: OnceLock::from(all.table.clone()),
            ..KernelSymbols::default()
        };
        let mut most = 0;
        for seed in 1..=20 {
            let addrs = random_addrs(all.lo, all.hi, 300, seed);
            let before = bytes_read().unwrap();
            let only = cache::read_for(&d, &synthetic_key(), &addrs).expect("the cache read");
            let read = bytes_read().unwrap() - before;
            most = most.max(read);
            assert!(only.table.entries.len() <= addrs.len());
            let k = KernelSymbols {
                only: OnceLock::from((addrs.clone(), only.table)),
                ..KernelSymbols::default()
            };
            for &a in &addrs {
                assert_eq!(k.find(a), whole.find(a), "{a:#x}");
            }
            assert!(
                read < len / 2,
                "{read} of the cache's {len} bytes read to name {} addresses",
                addrs.len()
            );
        }
        println!(
            "at most {most} of the cache's {len} bytes read to name 300 addresses ({} symbols)",
            all.table.entries.len()
        );
        let _ = fs::remove_dir_all(&dir);
    }

    /// This thread's CPU time so far (`/proc/thread-self/schedstat`), in nanoseconds: brought up
    /// to date at the scheduler's ticks, so only a long run's is meaningful.
    fn cpu_ns() -> Option<u64> {
        fs::read_to_string("/proc/thread-self/schedstat")
            .ok()?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    }

    /// Not a check: the CPU time of naming 300 random addresses from this kernel's cache
    /// (`cargo test --release -p perf-profile --lib cpu_time_of -- --ignored --nocapture`).
    #[test]
    #[ignore = "a measurement, run by hand in a release build"]
    fn cpu_time_of_naming_300_addresses_from_the_cache() {
        let Some((d, dir, all, len)) = this_kernels_cache("timing") else {
            return;
        };
        let Some(_) = cpu_ns() else {
            println!("skipped: no /proc/thread-self/schedstat");
            return;
        };
        const ROUNDS: u64 = 200;
        let sets: Vec<Vec<u64>> = (1..=ROUNDS)
            .map(|seed| random_addrs(all.lo, all.hi, 300, seed))
            .collect();
        for round in 0..3 {
            let start = cpu_ns().unwrap();
            for addrs in &sets {
                let only = cache::read_for(&d, &synthetic_key(), addrs).expect("the cache read");
                assert!(!only.table.entries.is_empty());
            }
            let per = (cpu_ns().unwrap() - start) / ROUNDS;
            println!("round {round}: read_for, 300 addresses, {len}-byte cache: {per} ns CPU each");
        }
        // What a bisection of the address array by reads would cost: 8-byte reads, as many as
        // 300 bisections of it take.
        use std::os::unix::fs::FileExt;
        let file = fs::File::open(dir.join(cache::FILE)).unwrap();
        let count = all.table.entries.len() as u64;
        let probes = 300 * (u64::BITS - count.leading_zeros()) as u64;
        let mut word = [0u8; 8];
        let start = cpu_ns().unwrap();
        for i in 0..probes * ROUNDS {
            file.read_exact_at(&mut word, (i * 7919 % count) * 8)
                .unwrap();
        }
        println!(
            "{probes} reads of 8 bytes, as 300 bisections of {count} entries: {} ns CPU",
            (cpu_ns().unwrap() - start) / ROUNDS
        );
        let _ = fs::remove_dir_all(&dir);
    }

    /// Against this kernel's cache: an entry of the address array made wrong (out of order, a
    /// name empty or past the names), wherever it is, refuses the cache for any addresses asked,
    /// as for all of them; and a byte flipped anywhere gives, for a few hundred addresses, the
    /// names reading it whole gives, or those of the cache before the flip where reading it
    /// whole refuses it, or a refusal.
    #[test]
    fn a_corrupted_cache_of_this_kernel_is_refused_or_names_as_when_read_whole() {
        let Some((_, dir, all, len)) = this_kernels_cache("corrupted") else {
            return;
        };
        let bytes = fs::read(dir.join(cache::FILE)).unwrap();
        let _ = fs::remove_dir_all(&dir);
        assert_eq!(bytes.len() as u64, len);
        let key = synthetic_key();
        let count = all.table.entries.len();
        let names_len = all.table.names.len();
        let entries_at = bytes.len() - names_len - count * 8;
        let addrs = random_addrs(all.lo, all.hi, 300, 7);
        let named = |b: &[u8]| {
            let core = cache::decode(b, b.len() as u64, &key, Some(&addrs))?;
            let k = KernelSymbols {
                only: OnceLock::from((addrs.clone(), core.table)),
                ..KernelSymbols::default()
            };
            Ok::<_, cache::Miss>(
                addrs
                    .iter()
                    .map(|&a| k.find(a).map(|s| (s.addr, s.name.to_owned())))
                    .collect::<Vec<_>>(),
            )
        };
        let truth = named(&bytes).expect("the cache as written");
        let word = |b: &[u8], i: usize, o: usize| {
            let at = entries_at + i * 8 + o;
            u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
        };
        let set = |b: &mut [u8], i: usize, o: usize, v: u32| {
            let at = entries_at + i * 8 + o;
            b[at..at + 4].copy_from_slice(&v.to_le_bytes());
        };
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut random = |n: usize| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n as u64) as usize
        };
        let mut wrong = 0;
        for _ in 0..12 {
            let i = 1 + random(count - 2);
            let (before, after) = (word(&bytes, i - 1, 0), word(&bytes, i + 1, 0));
            let mut cases: Vec<(u32, usize, u32)> = vec![
                // The name empty, past the names, longer than 64 KiB.
                (4, i, word(&bytes, i - 1, 4)),
                (4, i, names_len as u32 + 1),
                (4, i, word(&bytes, i - 1, 4) + 0x1_0000),
            ];
            // Below the one before, above the one after.
            if before > 0 {
                cases.push((0, i, before - 1));
            }
            if after < u32::MAX {
                cases.push((0, i, after + 1));
            }
            for (o, i, v) in cases {
                let mut b = bytes.clone();
                set(&mut b, i, o as usize, v);
                assert!(named(&b).is_err(), "entry {i} word {o} = {v:#x}");
                assert!(cache::decode(b.as_slice(), len, &key, None).is_err());
                wrong += 1;
            }
        }
        let mut only_read_sound = 0;
        for _ in 0..60 {
            let at = random(bytes.len());
            let mut b = bytes.clone();
            b[at] ^= [0x01, 0x20, 0x80, 0xff][random(4)];
            let Ok(only) = named(&b) else {
                continue;
            };
            match cache::decode(b.as_slice(), len, &key, None) {
                Ok(core) => {
                    let whole = KernelSymbols {
                        table: OnceLock::from(core.table),
                        ..KernelSymbols::default()
                    };
                    let whole: Vec<_> = addrs
                        .iter()
                        .map(|&a| whole.find(a).map(|s| (s.addr, s.name.to_owned())))
                        .collect();
                    assert_eq!(only, whole, "byte {at}");
                }
                Err(_) => {
                    assert_eq!(only, truth, "byte {at}");
                    only_read_sound += 1;
                }
            }
        }
        println!("{wrong} wrong entries refused; {only_read_sound} flips in names not read");
    }

    /// With a cache folder: the first capture's end reads `/proc/kallsyms` and writes the cache;
    /// the next names the image's addresses from it (a cache whose names were changed names them
    /// so), an address outside the image's text from `/proc/kallsyms`; the lazy lookups the same;
    /// and a cache of another key is replaced by this boot's.
    #[test]
    fn captures_after_the_first_name_the_image_from_the_cache() {
        if let Some(why) = KernelSymbols::load_with(None).hidden() {
            println!("skipped: {why}");
            return;
        }
        let dir = cache_folder("captures");
        let place = cache::Place::at(&dir);
        let file = dir.join(cache::FILE);
        let whole = KernelSymbols::parse(&fs::read_to_string(KALLSYMS).unwrap());
        let t = whole.table();
        let bytes = cache::encode(&synthetic_key(), t).unwrap();
        let hi = cache::decode(bytes.as_slice(), bytes.len() as u64, &synthetic_key(), None)
            .unwrap()
            .hi;
        let image: Vec<u64> = t
            .entries
            .iter()
            .filter(|e| e.module == 0 && e.addr <= hi)
            .step_by(300)
            .flat_map(|e| [e.addr, e.addr + 1])
            .collect();

        // The first: read live, the cache written.
        let first = KernelSymbols::load_with(Some(place.clone()));
        let (_, key) = first.cache.clone().expect("a cache key");
        first.read_only_for(image.iter().copied());
        let written = fs::read(&file).expect("the cache written");
        assert!(cache::is_current(
            &cache::open_dir(&place).expect("the folder is ours"),
            &key
        ));
        for &a in &image {
            assert_eq!(first.find(a), whole.find(a), "{a:#x}");
        }

        // The next, from the cache: its names (changed here) are the ones given.
        let mut changed = t.clone();
        changed.names.make_ascii_uppercase();
        fs::write(&file, cache::encode(&key, &changed).unwrap()).unwrap();
        let next = KernelSymbols::load_with(Some(place.clone()));
        next.read_only_for(image.iter().copied());
        for &a in &image {
            let w = whole.find(a).unwrap();
            let n = next.find(a).unwrap();
            assert_eq!(
                (n.addr, n.name),
                (w.addr, &*w.name.to_ascii_uppercase()),
                "{a:#x}"
            );
        }
        assert!(!next.is_read());

        // The cache as written names them as /proc/kallsyms does.
        fs::write(&file, &written).unwrap();
        let next = KernelSymbols::load_with(Some(place.clone()));
        next.read_only_for(image.iter().copied());
        for &a in &image {
            assert_eq!(next.find(a), whole.find(a), "{a:#x}");
        }
        assert!(!next.is_read());

        // An address beyond the image's running text: all read from /proc/kallsyms.
        fs::write(&file, cache::encode(&key, &changed).unwrap()).unwrap();
        let beyond = KernelSymbols::load_with(Some(place.clone()));
        let mut asked = image.clone();
        asked.push(hi + 1);
        beyond.read_only_for(asked.iter().copied());
        for &a in &image {
            assert_eq!(beyond.find(a), whole.find(a), "{a:#x}");
        }

        // Lazy lookups: the image's from the cache, another address from /proc/kallsyms.
        let lazy = KernelSymbols::load_with(Some(place.clone()));
        let a = image[image.len() / 2];
        assert_eq!(
            lazy.find(a).unwrap().name,
            whole.find(a).unwrap().name.to_ascii_uppercase()
        );
        assert!(!lazy.is_read());
        let _ = lazy.find(hi + 1);
        assert!(lazy.is_read());

        // Another key's cache: not used, and replaced.
        fs::write(&file, cache::encode(&synthetic_key(), &changed).unwrap()).unwrap();
        let other = KernelSymbols::load_with(Some(place.clone()));
        other.read_only_for(image.iter().copied());
        for &a in &image {
            assert_eq!(other.find(a), whole.find(a), "{a:#x}");
        }
        assert_eq!(fs::read(&file).unwrap(), written);
        let _ = fs::remove_dir_all(&dir);
    }

    /// A folder that is a symlink, another user's or writable by others is not used; nor is a
    /// cache file that is a symlink, a FIFO or another user's (and opening the FIFO does not
    /// wait).
    #[test]
    fn a_cache_folder_or_file_not_the_profilers_own_is_not_used() {
        let root = rustix::process::geteuid().is_root();
        let dir = cache_folder("unsafe");
        fs::create_dir_all(&dir).unwrap();
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &std::path::Path, m: u32| {
            fs::set_permissions(p, fs::Permissions::from_mode(m)).unwrap()
        };
        let own = dir.join("own");
        let d = cache::open_dir(&cache::Place::at(&own)).expect("a fresh folder is ours");
        assert_eq!(
            fs::metadata(&own).unwrap().permissions().mode() & 0o777,
            0o700
        );
        let whole = KernelSymbols::parse(&synthetic());
        let key = synthetic_key();
        cache::write(&d, &key, whole.table());
        assert!(cache::read_all(&d, &key).is_some());
        let file = own.join(cache::FILE);
        assert_eq!(
            fs::metadata(&file).unwrap().permissions().mode() & 0o777,
            0o600
        );

        let link = dir.join("link");
        std::os::unix::fs::symlink(&own, &link).unwrap();
        assert!(
            cache::open_dir(&cache::Place::at(&link)).is_none(),
            "a symlink"
        );
        let open = dir.join("open");
        fs::create_dir(&open).unwrap();
        mode(&open, 0o777);
        assert!(
            cache::open_dir(&cache::Place::at(&open)).is_none(),
            "mode 0777"
        );
        mode(&open, 0o770);
        assert!(
            cache::open_dir(&cache::Place::at(&open)).is_none(),
            "mode 0770"
        );

        // The file: a symlink to a good cache, then a FIFO.
        let elsewhere = dir.join("elsewhere");
        fs::rename(&file, &elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &file).unwrap();
        assert!(cache::read_all(&d, &key).is_none(), "a symlink");
        fs::remove_file(&file).unwrap();
        let s = std::process::Command::new("mkfifo")
            .arg(&file)
            .status()
            .unwrap();
        assert!(s.success());
        assert!(cache::read_all(&d, &key).is_none(), "a FIFO");
        assert!(!cache::is_current(&d, &key));
        fs::remove_file(&file).unwrap();
        fs::rename(&elsewhere, &file).unwrap();
        mode(&file, 0o622);
        assert!(cache::read_all(&d, &key).is_none(), "writable by others");
        mode(&file, 0o600);
        assert!(cache::read_all(&d, &key).is_some());
        if !root {
            println!("skipped (part): another user's folder and file need root to chown");
            let _ = fs::remove_dir_all(&dir);
            return;
        }
        let chown = |p: &std::path::Path| {
            let s = std::process::Command::new("chown")
                .args(["-h", "nobody"])
                .arg(p)
                .status()
                .unwrap();
            assert!(s.success());
        };
        chown(&file);
        assert!(cache::read_all(&d, &key).is_none(), "nobody's file");
        let nobodys = dir.join("nobodys");
        fs::create_dir(&nobodys).unwrap();
        mode(&nobodys, 0o700);
        chown(&nobodys);
        assert!(
            cache::open_dir(&cache::Place::at(&nobodys)).is_none(),
            "nobody's"
        );
        let _ = fs::remove_dir_all(&dir);
    }

    /// Writing a cache leaves one in the folder: older `kallsyms-*` files go (a link among them
    /// is removed, not followed), other files stay.
    #[test]
    fn the_cache_folder_holds_one_cache() {
        let dir = cache_folder("one");
        let d = cache::open_dir(&cache::Place::at(&dir)).unwrap();
        let target =
            std::env::temp_dir().join(format!("perf-profile-kc-target-{}", std::process::id()));
        fs::write(&target, b"keep").unwrap();
        fs::write(dir.join("kallsyms-v0"), b"old").unwrap();
        std::os::unix::fs::symlink(&target, dir.join("kallsyms-link")).unwrap();
        fs::write(dir.join("other"), b"stays").unwrap();
        cache::write(
            &d,
            &synthetic_key(),
            KernelSymbols::parse(&synthetic()).table(),
        );
        let mut names: Vec<String> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, [cache::FILE, "other"]);
        assert_eq!(fs::read(&target).unwrap(), b"keep");
        let _ = fs::remove_file(&target);
        let _ = fs::remove_dir_all(&dir);
    }
}
