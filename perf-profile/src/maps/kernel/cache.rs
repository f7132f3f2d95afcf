//! The per-boot cache of the kernel image's text symbols, so that only a boot's first capture
//! pays for reading `/proc/kallsyms` (tens of milliseconds of the kernel's time formatting it).
//!
//! Only the image's symbols are kept (those without a `[module]`), its init text's included: from
//! the first to the last, a range of the image's own that nothing loaded later shares (modules,
//! BPF programs and trampolines are placed in memory of their own, apart from the image; a cache
//! is not written where one of their symbols lies within it). Those come and go within a boot and
//! are always read live. A cache answers an address only within that range, and is one of this
//! boot's: its key is the boot id, the kernel release, and a fingerprint of the head of
//! `/proc/kallsyms` (KASLR moves every address at each boot).
//!
//! The folder is the profiler's own ([`place`]): created mode 0700, then used only when it is a
//! directory (not a symlink), owned by the effective user and writable by no one else. The file is
//! opened in it without following a link or waiting (a FIFO is refused), must be a regular file
//! of the effective user's of at most [`MAX_FILE`] bytes, and everything read of it is checked
//! (below): anything amiss and it is not used (the capture reads `/proc/kallsyms` instead). It is
//! written to a fresh temporary name and renamed into place, so two profilers at once each see a
//! whole file or none.
//!
//! # What is read, and checked, when
//!
//! The file is read by positioned reads (`pread`), never mapped: what was read is a copy that a
//! writer of the file cannot change afterwards.
//!
//! - Always, before anything else is used: the header whole (magic, version, the key equal to
//!   this boot's, `lo <= hi` within 4 GiB of each other, at least one symbol, and the sizes adding
//!   up to the file's size as opened).
//! - Always, whole, before any symbol is taken: the address array, every entry of it. Addresses
//!   sorted, the first at `lo`, the last (so all) within `hi`; every name's end after the one
//!   before and at most 64 KiB past it, the last one at the names' length (so all within it).
//!   Which symbol names an address depends on every entry below and above it, so the array is
//!   not bisected: a bisection by reads would see a few entries, and could not tell a corrupted
//!   one from the truth.
//! - Then the names, as they are read, every byte read [`name_byte`]s (ASCII, no space):
//!   [`read_all`] (continuous mode's lazy lookups) reads and checks every name; [`read_for`] (a
//!   capture's end: a few hundred addresses) only the names of the symbols those addresses fall
//!   in, neighbours closer than [`NAMES_GAP`] read at once, the bytes between them checked too.
//!   A name it does not read is not checked: it names nothing in that capture, and a byte amiss
//!   there cannot change what the names read say.
//! - Last: the file's last byte (a name's: checked) is there and nothing after it, so that a file
//!   cut short (or grown) since its size was taken is refused, as reading it whole would.
//!
//! So [`read_for`] answers every address it is asked as [`read_all`] on the same file does, or
//! refuses; it accepts where [`read_all`] refuses only for a byte it did not read.
//!
//! # Format (little-endian)
//!
//! | bytes | what |
//! |---|---|
//! | 8 | [`MAGIC`] |
//! | 4 | [`VERSION`] |
//! | 4 + n | the key's length (at most [`MAX_KEY`]), and the key |
//! | 8, 8 | the lowest and highest address answered (`lo`, `hi`, inclusive) |
//! | 4, 4 | the symbols' count, the names' length |
//! | 8 × count | per symbol, by address (the later line of equal addresses last): its address less `lo` (u32), where its name ends in the names (u32) |
//! | names | the names, one after the other (ASCII, no space) |

use std::ffi::CStr;
use std::fs::{self, DirBuilder, File};
use std::io::{BufWriter, ErrorKind, Write};
use std::os::fd::OwnedFd;
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

use super::{Entry, Table};

/// The environment variable that names the cache's folder; set and empty, there is no cache.
pub const DIR_ENV: &str = "PERF_PROFILE_CACHE_DIR";

/// The folder root's cache goes to.
const ROOT_DIR: &str = "/var/cache/perf-profile";

/// The cache file's name in its folder; every other `kallsyms-*` file there is an older one.
pub(crate) const FILE: &str = "kallsyms-v2";
const OURS: &[u8] = b"kallsyms-";

/// Temporary files being written: named apart from `kallsyms-*`, so that a writer tidying up
/// never removes another's file before it is renamed.
const TEMP: &str = ".tmp-kallsyms-";

/// A temporary file older than this was left by a writer that died.
const STALE_TEMP_SECS: i64 = 600;

const MAGIC: &[u8; 8] = b"ppksyms\0";
/// 2: the range is the image's first to last text symbol, its init text's included. A version 1
/// file (written by builds of the cache's first days) may end at `_etext`: the idle tasks' frames
/// (`start_kernel`, in init text) were then out of its range, and every capture that sampled an
/// idle CPU read `/proc/kallsyms` whole (37 ms of the kernel's CPU) though the file was this
/// boot's. Its new name leaves such a file aside (and the next writer removes it).
const VERSION: u32 = 2;

/// The largest cache file read (a distribution kernel's is ~4 MiB).
pub const MAX_FILE: u64 = 64 << 20;

/// The longest key read.
const MAX_KEY: usize = 4096;

/// How much of the head of `/proc/kallsyms` the key's fingerprint covers.
pub const HEAD_BYTES: usize = 4096;

/// The cache is written, and its address array read, in pieces this large; a run of names read
/// at once is at most this long.
const NAMES_PIECE: usize = 64 << 10;

/// Where the cache's folder is, and whether the folders above it may be created.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Place {
    path: PathBuf,
    parents: bool,
}

impl Place {
    /// The folder `path`, created (mode 0700) if missing, but not the folders above it.
    pub fn at(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            parents: false,
        }
    }
}

/// Where the cache goes: [`DIR_ENV`] where set (set and empty: no cache); else root's
/// `/var/cache/perf-profile`, another user's `$XDG_CACHE_HOME/perf-profile` or
/// `$HOME/.cache/perf-profile`.
pub fn place() -> Option<Place> {
    match std::env::var_os(DIR_ENV) {
        Some(dir) if dir.is_empty() => None,
        Some(dir) => Some(Place::at(dir)),
        None => {
            let base = if rustix::process::geteuid().is_root() {
                PathBuf::from(ROOT_DIR)
            } else {
                let absolute = |v: &str| {
                    std::env::var_os(v)
                        .map(PathBuf::from)
                        .filter(|p| p.is_absolute())
                };
                absolute("XDG_CACHE_HOME")
                    .or_else(|| absolute("HOME").map(|h| h.join(".cache")))?
                    .join("perf-profile")
            };
            Some(Place {
                path: base,
                parents: true,
            })
        }
    }
}

/// What names a boot's kernel image: a cache of another key is not used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Key(Vec<u8>);

impl Key {
    /// This boot's key, with `head` the fingerprint of the head of `/proc/kallsyms`
    /// ([`Fingerprint`]); `None` where the boot id or the release cannot be read.
    pub fn of_this_boot(head: u64) -> Option<Self> {
        let boot_id = fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
        let release = fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
        Self::new(boot_id.trim(), release.trim(), head)
    }

    pub(super) fn new(boot_id: &str, release: &str, head: u64) -> Option<Self> {
        let key = format!("{boot_id}\n{release}\n{head:016x}").into_bytes();
        (key.len() <= MAX_KEY).then_some(Self(key))
    }
}

/// FNV-1a over the head of `/proc/kallsyms`: stable across builds of the profiler, unlike std's
/// hasher (the key is compared with files other builds wrote).
#[derive(Clone, Copy, Debug)]
pub struct Fingerprint {
    hash: u64,
    bytes: usize,
}

impl Default for Fingerprint {
    fn default() -> Self {
        Self {
            hash: 0xcbf2_9ce4_8422_2325,
            bytes: 0,
        }
    }
}

impl Fingerprint {
    /// Adds `bytes` (a line) while fewer than [`HEAD_BYTES`] were added.
    pub fn add(&mut self, bytes: &[u8]) {
        if self.full() {
            return;
        }
        for &b in bytes {
            self.hash = (self.hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        self.bytes += bytes.len();
    }

    /// Whether [`HEAD_BYTES`] were added.
    pub fn full(&self) -> bool {
        self.bytes >= HEAD_BYTES
    }

    /// The fingerprint.
    pub fn get(&self) -> u64 {
        self.hash
    }
}

/// The cache's folder, open, once it is known to be the profiler's own.
#[derive(Debug)]
pub struct Dir(OwnedFd);

/// The folder at `place`, created (mode 0700) where missing; `None` unless it is a directory
/// (not a symlink), owned by the effective user and writable by no one else.
pub fn open_dir(place: &Place) -> Option<Dir> {
    let made = DirBuilder::new()
        .mode(0o700)
        .recursive(place.parents)
        .create(&place.path);
    if let Err(e) = made {
        if e.kind() != ErrorKind::AlreadyExists {
            return None;
        }
    }
    let fd = rustix::fs::open(
        &place.path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    let st = rustix::fs::fstat(&fd).ok()?;
    let own = FileType::from_raw_mode(st.st_mode) == FileType::Directory
        && st.st_uid == rustix::process::geteuid().as_raw()
        && st.st_mode & 0o022 == 0;
    own.then_some(Dir(fd))
}

/// The kernel image's symbols from a cache: those from `lo` to `hi`, or those that name the
/// addresses asked for.
#[derive(Clone, Debug)]
pub struct Core {
    /// The lowest address the cache answers.
    pub lo: u64,
    /// The highest address the cache answers (inclusive).
    pub hi: u64,
    /// The symbols (module 0).
    pub table: Table,
}

impl Core {
    /// Whether the cache names `addr` as `/proc/kallsyms` does.
    pub fn covers(&self, addr: u64) -> bool {
        (self.lo..=self.hi).contains(&addr)
    }
}

/// Why a cache did not answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Miss {
    /// None, another key's, or not one that can be used: write this boot's.
    Absent,
    /// This boot's, but an address asked for is not the image's.
    OutOfRange,
}

/// The cache file in `dir`, when it is one the profiler may read: a regular file (opened without
/// following a link or waiting for a writer), the effective user's, writable by no one else, at
/// most [`MAX_FILE`] bytes; and its size.
fn open_file(dir: &Dir) -> Option<(File, u64)> {
    let fd = rustix::fs::openat(
        &dir.0,
        FILE,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY,
        Mode::empty(),
    )
    .ok()?;
    let file = File::from(fd);
    let m = file.metadata().ok()?;
    let ok = m.file_type().is_file()
        && m.uid() == rustix::process::geteuid().as_raw()
        && m.mode() & 0o022 == 0
        && m.len() <= MAX_FILE;
    ok.then_some((file, m.len()))
}

/// The kernel image's symbols that name `addrs` (sorted, unique) from the cache in `dir`, when
/// it is `key`'s and covers them all. Only the header, the address array and the names of the
/// symbols picked are read (see the module's documentation).
pub fn read_for(dir: &Dir, key: &Key, addrs: &[u64]) -> Result<Core, Miss> {
    let (file, len) = open_file(dir).ok_or(Miss::Absent)?;
    decode_at(&file, len, key, Some(addrs))
}

/// All the kernel image's symbols from the cache in `dir`, when it is `key`'s.
pub fn read_all(dir: &Dir, key: &Key) -> Option<Core> {
    let (file, len) = open_file(dir)?;
    decode_at(&file, len, key, None).ok()
}

/// Whether the cache in `dir` is `key`'s (its header alone is read).
pub fn is_current(dir: &Dir, key: &Key) -> bool {
    open_file(dir).is_some_and(|(file, len)| header(&file, len, key).is_some())
}

/// Bytes read where they are: the cache file (`pread`), or in tests its bytes.
pub(super) trait At {
    /// Reads into `buf` from `offset` on: how many bytes came (0: none there).
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize>;
}

impl At for File {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        FileExt::read_at(self, buf, offset)
    }
}

impl At for [u8] {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        let from = usize::try_from(offset).map_or(self.len(), |o| o.min(self.len()));
        let n = buf.len().min(self.len() - from);
        buf[..n].copy_from_slice(&self[from..from + n]);
        Ok(n)
    }
}

/// `buf` filled from `offset` on; `None` where the bytes end first or reading fails.
fn read_exact_at(src: &(impl At + ?Sized), mut buf: &mut [u8], mut offset: u64) -> Option<()> {
    while !buf.is_empty() {
        match src.read_at(buf, offset) {
            Ok(0) => return None,
            Ok(n) => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    Some(())
}

/// A cache's header: `lo`, `hi`, the count, the names' length, and where its address array
/// starts.
struct Header {
    lo: u64,
    hi: u64,
    count: u32,
    names_len: u32,
    entries_at: u64,
}

impl Header {
    /// Where the names start.
    fn names_at(&self) -> u64 {
        self.entries_at + u64::from(self.count) * 8
    }
}

/// The header of a cache of `len` bytes, when it is `key`'s and its counts add up to `len`: read
/// at once (its size is known from `key`'s).
fn header(src: &(impl At + ?Sized), len: u64, key: &Key) -> Option<Header> {
    let key_len = key.0.len();
    let mut b = vec![0u8; 8 + 4 + 4 + key_len + 8 + 8 + 4 + 4];
    read_exact_at(src, &mut b, 0)?;
    let u32_at = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
    let u64_at = |o: usize| u64::from(u32_at(o)) | u64::from(u32_at(o + 4)) << 32;
    if &b[..8] != MAGIC || u32_at(8) != VERSION {
        return None;
    }
    if usize::try_from(u32_at(12)).ok()? != key_len || b[16..16 + key_len] != key.0[..] {
        return None;
    }
    let o = 16 + key_len;
    let h = Header {
        lo: u64_at(o),
        hi: u64_at(o + 8),
        count: u32_at(o + 16),
        names_len: u32_at(o + 20),
        entries_at: b.len() as u64,
    };
    let expected = h.names_at() + u64::from(h.names_len);
    let fits = h.lo <= h.hi && h.hi - h.lo <= u64::from(u32::MAX) && h.count > 0;
    (fits && expected == len).then_some(h)
}

/// A byte a cached name may have: what a `/proc/kallsyms` name the cache keeps has (the writer
/// keeps none with other bytes).
fn name_byte(b: u8) -> bool {
    b.is_ascii_graphic()
}

/// Names closer than this to the one before are read with it, the bytes between included: a
/// `pread` costs more than copying this much.
const NAMES_GAP: u32 = 1 << 10;

/// The cache `r` gives (`len` bytes), as [`decode_at`] its bytes.
#[cfg(test)]
pub(super) fn decode(
    mut r: impl std::io::Read,
    len: u64,
    key: &Key,
    want: Option<&[u64]>,
) -> Result<Core, Miss> {
    let mut bytes = Vec::new();
    r.read_to_end(&mut bytes).map_err(|_| Miss::Absent)?;
    decode_at(bytes.as_slice(), len, key, want)
}

/// The cache `src` holds (`len` bytes), checked as it is read (see the module's documentation,
/// "What is read, and checked, when"): `key`'s, symbols sorted from `lo` within `hi`, every name
/// end within the names, after the one before and at most 64 KiB after it, the last at the
/// names' end; the names' length and the file's size what the header says. Without `want`, every
/// symbol, every name checked of [`name_byte`]s. With `want`, only the symbols that name those
/// addresses (sorted, unique: the last symbol at or below each), only their names read and
/// checked (and the bytes between neighbours read with them), and [`Miss::OutOfRange`] when one
/// is not within `lo..=hi`.
pub(super) fn decode_at(
    src: &(impl At + ?Sized),
    len: u64,
    key: &Key,
    want: Option<&[u64]>,
) -> Result<Core, Miss> {
    let h = header(src, len, key).ok_or(Miss::Absent)?;
    if let Some(addrs) = want {
        if addrs.iter().any(|a| !(h.lo..=h.hi).contains(a)) {
            return Err(Miss::OutOfRange);
        }
    }
    let bad = Miss::Absent;
    let mut t = Table::default();
    if want.is_none() {
        t.entries.reserve_exact(h.count as usize);
    }
    // With `want`: the symbols that name its addresses (address, name start and end), in order.
    let mut picks: Vec<(u64, u32, u32)> = Vec::new();
    // The next address asked for, less `lo` (within u32: checked above); none: past them all.
    let wanted = |next: usize| {
        want.and_then(|a| a.get(next))
            .map_or(u64::MAX, |a| a - h.lo)
    };
    let mut next = 0;
    let mut next_at = wanted(next);
    // The last symbol's address less `lo`, and its name's start and end. Before the first: at
    // `lo` (the first must be there), its name ending at 0.
    let mut last = (0u32, 0u32, 0u32);
    // The array is read whole, in pieces, and taken apart in place: the order of every symbol
    // and the bounds of every name are what make the few picked right (a bisection by `pread`s
    // would see a few entries, and could not tell a corrupted one from the truth).
    let mut piece = vec![0u8; NAMES_PIECE.min(h.count as usize * 8)];
    let mut piece_at = h.entries_at;
    let mut first = u32::MAX;
    let mut left = h.count as usize * 8;
    while left > 0 {
        let piece = &mut piece[..left.min(NAMES_PIECE)];
        read_exact_at(src, piece, piece_at).ok_or(bad)?;
        if piece_at == h.entries_at {
            first = u32::from_le_bytes([piece[0], piece[1], piece[2], piece[3]]);
        }
        piece_at += piece.len() as u64;
        left -= piece.len();
        for entry in piece.chunks_exact(8) {
            let word =
                |o: usize| u32::from_le_bytes([entry[o], entry[o + 1], entry[o + 2], entry[o + 3]]);
            let (delta, end) = (word(0), word(4));
            // Sorted; the name after the last one, not empty, shorter than 64 KiB. Where the
            // ends rise, only the last one need be checked against the names' length; where
            // the addresses do, only the last one against `hi` (after the array).
            if delta < last.0 || end.wrapping_sub(last.2).wrapping_sub(1) >= u32::from(u16::MAX) {
                return Err(bad);
            }
            // The addresses below this symbol are named by the one before (there is one: the
            // first symbol is at `lo`, and no address is below it).
            if u64::from(delta) > next_at {
                if picks.last().is_none_or(|p| p.2 != last.2) {
                    picks.push((h.lo.wrapping_add(last.0.into()), last.1, last.2));
                }
                while next_at < u64::from(delta) {
                    next += 1;
                    next_at = wanted(next);
                }
            }
            if want.is_none() {
                t.entries.push(Entry {
                    addr: h.lo.wrapping_add(delta.into()),
                    name_at: last.2,
                    name_len: end.wrapping_sub(last.2) as u16,
                    module: 0,
                });
            }
            last = (delta, last.2, end);
        }
    }
    drop(piece);
    // The first symbol at `lo`, the last within `hi` (so that no address overflowed), its name
    // ending the names.
    if first != 0 || u64::from(last.0) > h.hi - h.lo || last.2 != h.names_len {
        return Err(bad);
    }
    // Addresses at or above the last symbol: named by it.
    if next_at != u64::MAX && picks.last().is_none_or(|p| p.2 != last.2) {
        picks.push((h.lo + u64::from(last.0), last.1, last.2));
    }
    let names_at = h.names_at();
    if want.is_none() {
        t.names = vec![0u8; h.names_len as usize];
        read_exact_at(src, &mut t.names, names_at).ok_or(bad)?;
        if !t.names.iter().all(|&b| name_byte(b)) {
            return Err(bad);
        }
    } else {
        // The picked names lie in order, apart (their ends rise): each run of neighbours is
        // read at once, and every byte read is checked.
        let mut run = Vec::new();
        let mut k = 0;
        while let Some(&(_, from, _)) = picks.get(k) {
            let mut to = k + 1;
            while picks.get(to).is_some_and(|p| {
                p.1 - picks[to - 1].2 <= NAMES_GAP && p.2 - from <= NAMES_PIECE as u32
            }) {
                to += 1;
            }
            let upto = picks[to - 1].2;
            run.resize((upto - from) as usize, 0);
            read_exact_at(src, &mut run, names_at + u64::from(from)).ok_or(bad)?;
            if !run.iter().all(|&b| name_byte(b)) {
                return Err(bad);
            }
            for &(addr, s, e) in &picks[k..to] {
                let name_at = u32::try_from(t.names.len()).map_err(|_| bad)?;
                t.names
                    .extend_from_slice(&run[(s - from) as usize..(e - from) as usize]);
                t.entries.push(Entry {
                    addr,
                    name_at,
                    name_len: (e - s) as u16,
                    module: 0,
                });
            }
            k = to;
        }
    }
    // The file ends where the header says, as it did when its size was taken: its last byte
    // (the last name's) is there, and nothing after it. (The names not asked for are not
    // read: a file cut short after its size was taken would not be seen otherwise.)
    let mut tail = [0u8; 2];
    if !matches!(src.read_at(&mut tail, len - 1), Ok(1) if name_byte(tail[0])) {
        return Err(bad);
    }
    t.lines = t.entries.len();
    Ok(Core {
        lo: h.lo,
        hi: h.hi,
        table: t,
    })
}

/// The cache of `t` for `key` (see [`Plan::of`]), in memory.
#[cfg(test)]
pub(super) fn encode(key: &Key, t: &Table) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    Plan::of(t)?.write(key, t, &mut out).ok()?;
    Some(out)
}

/// What a cache of a table holds: its range, count and names' length.
struct Plan {
    lo: u64,
    hi: u64,
    count: u32,
    names_len: u32,
}

impl Plan {
    /// The cache of the kernel image's symbols of `t` (`/proc/kallsyms` read whole, or its
    /// image's symbols): `None` where they are not as a cache needs them (none; a module's, BPF
    /// program's or trampoline's among them; a name with other than [`name_byte`]s; more than 4
    /// GiB of text).
    fn of(t: &Table) -> Option<Self> {
        let image = || t.entries.iter().filter(|e| e.module == 0);
        // Init text too (after `_etext`): freed after boot, but the idle tasks' stacks still
        // start there (`start_kernel`, `start_secondary`), in every system-wide capture.
        let lo = image().next()?.addr;
        let hi = image().next_back()?.addr;
        if t.entries
            .iter()
            .any(|e| e.module != 0 && (lo..=hi).contains(&e.addr))
        {
            return None;
        }
        u32::try_from(hi - lo).ok()?;
        let mut names_len = 0u32;
        for e in image() {
            let name = t.name_of(e);
            if name.is_empty() || !name.iter().all(|&b| name_byte(b)) {
                return None;
            }
            names_len = names_len.checked_add(u32::from(e.name_len))?;
        }
        Some(Self {
            lo,
            hi,
            count: u32::try_from(image().count()).ok()?,
            names_len,
        })
    }

    /// Writes the cache of `t` for `key` to `w`.
    fn write(&self, key: &Key, t: &Table, mut w: impl Write) -> std::io::Result<()> {
        let key_len = key.0.len() as u32;
        w.write_all(MAGIC)?;
        w.write_all(&VERSION.to_le_bytes())?;
        w.write_all(&key_len.to_le_bytes())?;
        w.write_all(&key.0)?;
        w.write_all(&self.lo.to_le_bytes())?;
        w.write_all(&self.hi.to_le_bytes())?;
        w.write_all(&self.count.to_le_bytes())?;
        w.write_all(&self.names_len.to_le_bytes())?;
        let image = || t.entries.iter().filter(|e| e.module == 0);
        let mut end = 0u32;
        for e in image() {
            // Within u32: checked by `of`.
            end += u32::from(e.name_len);
            w.write_all(&((e.addr - self.lo) as u32).to_le_bytes())?;
            w.write_all(&end.to_le_bytes())?;
        }
        for e in image() {
            w.write_all(t.name_of(e))?;
        }
        Ok(())
    }
}

/// Writes the cache of `t` (see [`Plan::of`]) into `dir` for `key`: to a fresh file of mode 0600,
/// renamed into place, then the older cache files removed. Failing, nothing is said: the capture
/// goes on without a cache.
pub fn write(dir: &Dir, key: &Key, t: &Table) {
    let Some(plan) = Plan::of(t) else {
        return;
    };
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let temp = format!(
        "{TEMP}{}-{nanos}-{}",
        std::process::id(),
        WRITES.fetch_add(1, Ordering::Relaxed)
    );
    let Ok(fd) = rustix::fs::openat(
        &dir.0,
        &temp,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    ) else {
        return;
    };
    // Straight to the file: the first capture of a boot holds the table already.
    let mut out = BufWriter::with_capacity(NAMES_PIECE, File::from(fd));
    let written = plan.write(key, t, &mut out).and_then(|()| out.flush());
    drop(out);
    if written.is_err() || rustix::fs::renameat(&dir.0, &temp, &dir.0, FILE).is_err() {
        let _ = rustix::fs::unlinkat(&dir.0, &temp, AtFlags::empty());
        return;
    }
    tidy(dir);
}

/// Removes the folder's other cache files (`kallsyms-*` but [`FILE`]), and temporary files a
/// writer that died left: the folder holds one cache. Links are removed, never followed.
fn tidy(dir: &Dir) {
    let Ok(entries) = rustix::fs::Dir::read_from(&dir.0) else {
        return;
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    for entry in entries {
        let Ok(entry) = entry else {
            break;
        };
        let name: &CStr = entry.file_name();
        let bytes = name.to_bytes();
        let old = bytes.starts_with(OURS) && bytes != FILE.as_bytes();
        let stale = bytes.starts_with(TEMP.as_bytes())
            && rustix::fs::statat(&dir.0, name, AtFlags::SYMLINK_NOFOLLOW)
                .is_ok_and(|st| now.saturating_sub(st.st_mtime) > STALE_TEMP_SECS);
        if old || stale {
            let _ = rustix::fs::unlinkat(&dir.0, name, AtFlags::empty());
        }
    }
}
