//! The one door through which the profiler opens files that other users control, and the one
//! byte budget that what it keeps of them shares.
//!
//! A system-wide profiler runs as root (or with `CAP_PERFMON`) next to processes of every user,
//! and reads on their behalf: `/tmp/perf-PID.map`, every path in `/proc/PID/maps` and MMAP2
//! records, the ELF, DWARF and unwind tables inside those files, the debug files they lead to.
//! Each of those is the neighbour's to shape. Every such read goes through here, under these
//! rules:
//!
//! - **No path is followed.** A file is opened `O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC`
//!   with `openat2(2)` and `RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS`: a symlink in any
//!   component is refused (paths from `/proc/PID/maps` and MMAP2 records are canonical, so no
//!   honest path has one). `O_NONBLOCK` makes opening a FIFO return at once (and it is then
//!   refused): no open waits for a writer.
//! - **A process's path is the process's.** A path a process named is resolved in the process's
//!   own root (`/proc/PID/root`, with `RESOLVE_IN_ROOT`, so that even `..` and absolute names
//!   stay inside it): a process in its own mount namespace names its own files, not the host's.
//!   Once the process is gone (a mapping from the records of a process that has exited),
//!   `/proc/PID/root` is gone too and the path is resolved from the host's root, under the same
//!   rules; so is a path its root does not have (`/proc/PID/maps` shows a chrooted process's
//!   files as the reader sees them). The build id the kernel recorded (Linux 5.12+) then guards
//!   against a different file of that name, since every reader compares it. A JIT map is only
//!   ever the process's own.
//! - **Regular files only.** The opened handle is `fstat`ed: a FIFO, a device (`/dev/zero`), a
//!   socket or a directory is refused, whatever its name. The checks are on the handle, never on
//!   the path, and the handle, not the path, flows to every reader downstream (build id, ELF
//!   tables, unwind tables, blazesym as `/proc/self/fd/N`): a file swapped in between cannot
//!   mislead one of them.
//! - **JIT maps are their process's.** `/tmp/perf-PID.map` is read only when it is owned by one
//!   of the process's user ids, by root, or by the profiler's own user (perf's rule), so a link
//!   to someone else's file names nothing.
//! - **Debug files come from a root-owned tree.** A build-id debug file is opened beneath
//!   `/usr/lib/debug` with `RESOLVE_BENEATH` (symlinks that stay inside the tree are followed, as
//!   distributions install them) and must be owned by root.
//! - **Reads are bounded by what the reader budgets**, never by what the file or its metadata
//!   claims: [`Vetted::read_to_end`] stops at its limit, the ELF reader at each table's.
//! - **What is kept is charged to one [`Budget`]** (JIT maps, unwind tables, function tables;
//!   [`DEFAULT_MEMORY_BUDGET`]): each cache evicts its own least recently used files to make room
//!   and otherwise refuses the new file, which then costs its frames their names, never memory.
//!   A refused or failed file is remembered as failed and not read again per sample.
//!
//! Where `openat2` is not available (seccomp filters in some containers; it needs Linux 5.6,
//! older than the project's oldest kernel) the door falls back to `open` of
//! `/proc/PID/root/PATH` (or `PATH`) with `O_NOFOLLOW | O_NONBLOCK`, so only the last component
//! is checked for a link (a symlink in a folder of the path then resolves as the profiler sees
//! it), and the same checks on the handle.
//!
//! **Nothing blocks the capture.** The thread that drains the rings never opens or reads another
//! process's file itself: JIT maps, build ids of mappings and `-g dwarf` unwind tables are loaded
//! by a [`Loader`], a few worker threads with a bounded queue, which the drain path asks and waits
//! on for at most a few milliseconds ([`DRAIN_WAIT`]). A file not loaded by then is asked for
//! again later and its result, once there, is picked up: meanwhile the samples keep their
//! address-only frames (a process's unwinder is built again without the file, a JIT frame stays
//! an address, a mapping goes without its build id). Symbolization at a snapshot
//! (`Profiler::profile`, `cut`, `finish`) asks the same loader, per file, and waits at most
//! [`SNAPSHOT_WAIT`](crate::symbolize::SNAPSHOT_WAIT); a file's frames not resolved by then are
//! resolved by a later snapshot. A load still running is never waited for twice. A file on a hung
//! file system (FUSE, NFS) holds one worker for good and costs its frames; with all
//! [`MAX_WORKERS`] held, new files wait in the queue and their frames stay addresses, but the
//! capture goes on.
//!
//! # Budgets
//!
//! | what | bound |
//! |---|---|
//! | all JIT maps, unwind tables, function tables, kept symbolizers and lines kept | [`DEFAULT_MEMORY_BUDGET`] (`Options::memory_budget`) |
//! | one JIT map read | 256 MiB, and what the budget has left |
//! | one file's unwind sections | 256 MiB each, and what the budget has left (charged before read) |
//! | function tables ([`crate::symbolize::Mode::Functions`]) | [`FUNCTION_TABLES_BYTES`](crate::symbolize::FUNCTION_TABLES_BYTES), and the budget |
//! | kept symbolizers and lines ([`crate::symbolize::Mode::Local`]) | [`KEPT_FILES_BYTES`](crate::symbolize::KEPT_FILES_BYTES) + [`LINES_BYTES`](crate::symbolize::LINES_BYTES), and the budget |
//! | `/proc/kallsyms` | 128 MiB read |
//! | ELF header tables, section names | 1 MiB each |
//! | files remembered as failed | 4096 per cache |
//!
//! [`crate::symbolize::Mode::Local`] keeps each file's blazesym symbolizer within
//! [`KEPT_FILES_BYTES`](crate::symbolize::KEPT_FILES_BYTES), counted as the resident memory the
//! file's batches grew the process by, and the lines resolved within
//! [`LINES_BYTES`](crate::symbolize::LINES_BYTES), both charged to the budget; a file too large
//! to keep is let go after its batch (its memory then is outside the budget while the batch runs).

use std::any::Any;
use std::collections::{HashSet, VecDeque};
use std::fs::{File, Metadata};
use std::io::{self, Read};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rustix::fs::{Mode, OFlags, ResolveFlags};

/// The bytes that JIT maps, unwind tables and function tables kept in memory share by default:
/// the profiler stays within about 64 MiB plus this.
pub const DEFAULT_MEMORY_BUDGET: usize = 128 << 20;

/// Where separate debug files are installed by build id (`.build-id/xx/yyyy.debug`).
pub const DEBUG_DIR: &str = "/usr/lib/debug";

/// A regular file opened through the door, with its metadata from the open handle.
#[derive(Debug)]
pub struct Vetted {
    file: File,
    meta: Metadata,
}

/// What identifies a file's contents as opened: device, inode, size and modification time.
pub type Identity = (u64, u64, u64, i64, i64);

impl Vetted {
    /// The open file.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// The open file, for readers that take it.
    pub fn into_file(self) -> File {
        self.file
    }

    /// Its size when opened.
    pub fn len(&self) -> u64 {
        self.meta.len()
    }

    /// Whether it was empty when opened.
    pub fn is_empty(&self) -> bool {
        self.meta.len() == 0
    }

    /// Its owner.
    pub fn uid(&self) -> u32 {
        self.meta.uid()
    }

    /// Device, inode, size and modification time, as `fstat` gave them.
    pub fn identity(&self) -> Identity {
        let m = &self.meta;
        (m.dev(), m.ino(), m.len(), m.mtime(), m.mtime_nsec())
    }

    /// The whole file when it holds at most `max` bytes, read from the handle whatever its size
    /// said; an error once more than `max` bytes come.
    ///
    /// # Errors
    ///
    /// A read error, or [`io::ErrorKind::FileTooLarge`] past `max` bytes.
    pub fn read_to_end(&self, max: u64) -> io::Result<Vec<u8>> {
        let mut out = Vec::with_capacity(usize::try_from(self.len().min(max)).unwrap_or(0));
        (&self.file)
            .take(max.saturating_add(1))
            .read_to_end(&mut out)?;
        if out.len() as u64 > max {
            return Err(io::Error::new(
                io::ErrorKind::FileTooLarge,
                format!("larger than the {max} bytes budgeted for it"),
            ));
        }
        Ok(out)
    }
}

fn refused(why: &str) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, why.to_owned())
}

/// The flags of every open through the door.
fn oflags() -> OFlags {
    OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY
}

/// `path` opened at `dir` with `resolve`, falling back to a plain `O_NOFOLLOW` open where
/// `openat2` is not there (then `path` must be absolute and is taken from the host's root).
fn openat2_or_open(
    dir: Option<&File>,
    path: &str,
    resolve: ResolveFlags,
    fallback: &str,
) -> io::Result<File> {
    let r = match dir {
        Some(d) => rustix::fs::openat2(d, path, oflags(), Mode::empty(), resolve),
        None => rustix::fs::openat2(rustix::fs::CWD, path, oflags(), Mode::empty(), resolve),
    };
    match r {
        Ok(fd) => Ok(File::from(fd)),
        Err(e) if e == rustix::io::Errno::NOSYS || e == rustix::io::Errno::PERM => {
            std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
                .open(fallback)
        }
        Err(e) => Err(e.into()),
    }
}

/// Checks that `file` is a regular file.
fn vet(file: File) -> io::Result<Vetted> {
    let meta = file.metadata()?;
    if !meta.file_type().is_file() {
        return Err(refused("not a regular file"));
    }
    Ok(Vetted { file, meta })
}

/// `/proc/PID/root`, the root of `pid`'s file system view: `Ok(None)` once the process is gone;
/// an error where its root exists but may not be entered (`EACCES` without CAP_SYS_PTRACE for
/// another user's process), which is not the same thing: a JIT map must then not be looked up in
/// the host's root, where another user could plant it.
fn process_root(pid: u32) -> io::Result<Option<File>> {
    match rustix::fs::open(
        format!("/proc/{pid}/root"),
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => Ok(Some(File::from(fd))),
        Err(rustix::io::Errno::NOENT | rustix::io::Errno::SRCH) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The regular file at the absolute `path` as process `pid` names it (in its own root while it
/// lives; from the host's root for `None` or a process that is gone), no symlink followed.
///
/// A path the process's root does not have is looked up in the host's root too: the kernel writes
/// `/proc/PID/maps` paths as the *reader* sees them, so a process in a chroot (same mount
/// namespace) has host paths there, while its MMAP2 records have paths of its own root. Either
/// way the file found passes the same checks, and a build id the kernel recorded is compared by
/// every reader.
///
/// # Errors
///
/// The open's error (`ELOOP` for a symlink, `ENOENT`, ...), or `PermissionDenied` for a relative
/// path or something other than a regular file.
pub fn open(path: &str, pid: Option<u32>) -> io::Result<Vetted> {
    match open_as(path, pid, Root::HostIfDenied) {
        Err(e) if pid.is_some() && e.kind() == io::ErrorKind::NotFound => {
            open_as(path, None, Root::HostIfDenied)
        }
        r => r,
    }
}

/// What [`open_as`] does when a live process's root may not be entered.
#[derive(Clone, Copy, PartialEq)]
enum Root {
    /// Look in the host's root (what a mapped file's build id is then checked against).
    HostIfDenied,
    /// Fail with the error: the file must be the process's own.
    Own,
}

/// [`open`] in `pid`'s root only (none, or a process that is gone: the host's).
fn open_as(path: &str, pid: Option<u32>, denied: Root) -> io::Result<Vetted> {
    #[cfg(test)]
    stall::wait_while_held(path);
    if !path.starts_with('/') {
        return Err(refused("not an absolute path"));
    }
    let no_links = ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    let root = match pid {
        None => None,
        Some(p) => match process_root(p) {
            Ok(root) => root.map(|r| (p, r)),
            Err(e) if denied == Root::Own => return Err(e),
            Err(_) => None,
        },
    };
    let file = match root {
        // Without openat2, `/proc/PID/root/PATH`: the process's file still, though a symlink in
        // a folder of the path would then resolve as the caller sees it.
        Some((pid, root)) => openat2_or_open(
            Some(&root),
            path,
            no_links | ResolveFlags::IN_ROOT,
            &format!("/proc/{pid}/root{path}"),
        )?,
        None => openat2_or_open(None, path, no_links, path)?,
    };
    vet(file)
}

/// The JIT map `path` of process `pid` (`/tmp/perf-PID.map`), in the process's root only (the
/// host's once the process is gone; an error where the profiler may not enter that root, e.g.
/// another user's process without CAP_SYS_PTRACE): [`open`]'s rules, and it must be
/// owned by one of the process's user ids, by root, or by the profiler's own effective user.
///
/// # Errors
///
/// As [`open`], and `PermissionDenied` for a map owned by anyone else.
pub fn open_jit_map(path: &str, pid: u32) -> io::Result<Vetted> {
    // The process's own map only: not the host's file of that name.
    let f = open_as(path, Some(pid), Root::Own)?;
    let uid = f.uid();
    let own = std::fs::metadata("/proc/self").map(|m| m.uid()).ok();
    if uid == 0 || Some(uid) == own || process_uids(pid).contains(&uid) {
        Ok(f)
    } else {
        Err(refused("owned by a user the process does not run as"))
    }
}

/// The real, effective, saved and file-system user ids of `pid` (none once it is gone).
fn process_uids(pid: u32) -> Vec<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .map(|ids| {
            ids.split_whitespace()
                .filter_map(|i| i.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The separate debug file `rel` (e.g. `.build-id/ab/cdef.debug`) beneath [`DEBUG_DIR`]:
/// symlinks inside the tree are followed, none out of it; the file must be root's.
///
/// # Errors
///
/// The open's error, or `PermissionDenied` for a file not owned by root or not regular.
pub fn open_debug_file(rel: &str) -> io::Result<Vetted> {
    open_beneath(Path::new(DEBUG_DIR), rel)
}

fn open_beneath(dir: &Path, rel: &str) -> io::Result<Vetted> {
    let root = File::from(rustix::fs::open(
        dir,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?);
    let fallback = dir.join(rel);
    let file = openat2_or_open(
        Some(&root),
        rel,
        ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
        &fallback.to_string_lossy(),
    )?;
    let f = vet(file)?;
    if f.uid() != 0 {
        return Err(refused("a debug file not owned by root"));
    }
    Ok(f)
}

/// A kernel or system file the profiler reads for itself (`/proc/kallsyms`): opened without
/// following a symlink at its last component, non-blocking; regular files and the kernel's
/// `/proc` files only.
///
/// # Errors
///
/// The open's error.
pub fn open_system(path: &str) -> io::Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
}

/// A file the operator named (`--credentials`, `--ca`): read whole when it is a regular file of
/// at most `max` bytes. Links are followed, since the operator chose the path (Kubernetes mounts
/// secrets as symlinks), but the open does not block (a FIFO planted at a shared path is refused,
/// not waited on) and the read stops at `max` whatever the file says.
///
/// # Errors
///
/// The open's or read's error; `PermissionDenied` for something other than a regular file;
/// `FileTooLarge` past `max` bytes.
pub fn read_operator_file(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    vet(file)?.read_to_end(max)
}

/// The bytes that everything kept from other users' files shares: JIT maps, unwind tables,
/// function tables. Clones share the count. A [`Charge`] holds bytes until it is dropped, so a
/// cache keeps a file's charge beside its data and both go together.
#[derive(Clone, Debug)]
pub struct Budget {
    limit: usize,
    used: Arc<AtomicUsize>,
}

impl Default for Budget {
    fn default() -> Self {
        Self::new(DEFAULT_MEMORY_BUDGET)
    }
}

impl Budget {
    /// A budget of `limit` bytes, nothing used.
    pub fn new(limit: usize) -> Self {
        Self {
            limit,
            used: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// The limit.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// The bytes charged now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// The bytes that may still be charged.
    pub fn available(&self) -> usize {
        self.limit.saturating_sub(self.used())
    }

    /// `bytes` charged, when they fit.
    pub fn charge(&self, bytes: usize) -> Option<Charge> {
        let mut now = self.used.load(Ordering::Relaxed);
        loop {
            let after = now.checked_add(bytes).filter(|&a| a <= self.limit)?;
            match self
                .used
                .compare_exchange_weak(now, after, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => {
                    return Some(Charge {
                        used: Arc::clone(&self.used),
                        bytes,
                    })
                }
                Err(v) => now = v,
            }
        }
    }
}

/// Bytes charged to a [`Budget`] until dropped.
#[derive(Debug)]
pub struct Charge {
    used: Arc<AtomicUsize>,
    bytes: usize,
}

impl Charge {
    /// The bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.used.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

/// How long the thread that drains the rings waits for a file it asked the [`Loader`] for.
pub const DRAIN_WAIT: Duration = Duration::from_millis(5);

/// Worker threads of a [`Loader`], at most: each file on a hung file system holds one.
pub const MAX_WORKERS: usize = 4;

/// Loads waiting for a worker, at most; more are not queued (asked again later).
const MAX_QUEUE: usize = 256;

/// Results kept for askers that have not come back for them, at most (the oldest go).
const MAX_DONE: usize = 256;

type Job = Box<dyn FnOnce() -> Box<dyn Any + Send> + Send>;

/// The answer of [`Loader::ask`].
#[derive(Debug)]
pub enum Asked<T> {
    /// The load's result.
    Ready(T),
    /// Not done yet (or not queued, the queue being full): ask again later.
    Pending,
}

/// Opens and reads files on worker threads, so that the caller waits for a file only as long as
/// it says: see the module's documentation. Clones share the workers.
#[derive(Clone, Default)]
pub struct Loader {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Loader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let st = self.shared.lock();
        f.debug_struct("Loader")
            .field("workers", &st.workers)
            .field("queued", &st.queue.len())
            .field("done", &st.done.len())
            .finish()
    }
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    /// A load was queued: one idle worker wakes for it.
    queued: Condvar,
    /// A load is done: its askers wake (and no idle worker, which would find nothing to do).
    done: Condvar,
}

#[derive(Default)]
struct State {
    queue: VecDeque<(u64, Job)>,
    /// Keys queued or being loaded.
    in_flight: HashSet<u64>,
    done: VecDeque<(u64, Box<dyn Any + Send>)>,
    workers: usize,
    idle: usize,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A job that panicked is the only way to poison the lock; the state stays consistent.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Loader {
    /// A loader; its workers start when first needed.
    pub fn new() -> Self {
        Self::default()
    }

    /// The result of the load named `key`: one done earlier (since asked), else `job` queued and
    /// waited for at most `wait`. A load of `key` queued or running already is not queued again
    /// nor waited for.
    pub fn ask<T: Send + 'static>(
        &self,
        key: u64,
        wait: Duration,
        job: impl FnOnce() -> T + Send + 'static,
    ) -> Asked<T> {
        let mut deadline = Instant::now() + wait;
        let mut st = self.shared.lock();
        if st.in_flight.contains(&key) {
            // Asked before and still loading: slow or stuck, and waiting again would not help.
            deadline = Instant::now();
        } else if !st.done.iter().any(|(k, _)| *k == key) {
            if st.queue.len() >= MAX_QUEUE {
                return Asked::Pending;
            }
            st.queue.push_back((
                key,
                Box::new(move || Box::new(job()) as Box<dyn Any + Send>),
            ));
            st.in_flight.insert(key);
            if st.idle == 0 && st.workers < MAX_WORKERS {
                st.workers += 1;
                let shared = Arc::clone(&self.shared);
                let spawned = std::thread::Builder::new()
                    .name("perf-profile-loader".into())
                    .spawn(move || work(&shared));
                if spawned.is_err() {
                    st.workers -= 1;
                }
            }
            self.shared.queued.notify_one();
        }
        loop {
            if let Some(i) = st.done.iter().position(|(k, _)| *k == key) {
                let (_, result) = st.done.remove(i).expect("found at i");
                return match result.downcast::<T>() {
                    Ok(r) => Asked::Ready(*r),
                    Err(_) => Asked::Pending,
                };
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Asked::Pending;
            }
            st = self
                .shared
                .done
                .wait_timeout(st, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

/// A worker: runs queued loads until the loader is gone.
fn work(shared: &Arc<Shared>) {
    let mut st = shared.lock();
    loop {
        let Some((key, job)) = st.queue.pop_front() else {
            // The loader's owners are gone when only the workers hold it.
            if Arc::strong_count(shared) <= st.workers {
                st.workers -= 1;
                return;
            }
            st.idle += 1;
            st = shared
                .queued
                .wait_timeout(st, Duration::from_secs(1))
                .unwrap_or_else(|e| e.into_inner())
                .0;
            st.idle -= 1;
            continue;
        };
        drop(st);
        // A reader that panics on a file (a parser's bug) loses that load, not the worker.
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
        st = shared.lock();
        st.in_flight.remove(&key);
        if let Ok(result) = result {
            st.done.push_back((key, result));
            if st.done.len() > MAX_DONE {
                st.done.pop_front();
            }
        }
        shared.done.notify_all();
    }
}

/// A key for [`Loader::ask`] from anything hashable.
pub fn key(of: impl std::hash::Hash) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault};
    BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default().hash_one(of)
}

/// Tests' stand-in for a file on a hung file system: opening a held path blocks until released.
#[cfg(test)]
pub(crate) mod stall {
    use std::sync::{Condvar, Mutex};

    static HELD: Mutex<Vec<String>> = Mutex::new(Vec::new());
    static RELEASED: Condvar = Condvar::new();

    /// Opens of `path` block from now on.
    pub(crate) fn hold(path: &str) {
        HELD.lock().unwrap().push(path.to_owned());
    }

    /// Opens of `path` go on.
    pub(crate) fn release(path: &str) {
        HELD.lock().unwrap().retain(|p| p != path);
        RELEASED.notify_all();
    }

    pub(super) fn wait_while_held(path: &str) {
        let mut held = HELD.lock().unwrap();
        while held.iter().any(|p| p == path) {
            held = RELEASED.wait(held).unwrap();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn dir(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("pp-door-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn regular_files_open_links_fifos_and_devices_do_not() {
        let d = dir("kinds");
        let file = d.join("file");
        std::fs::write(&file, "1000 10 f\n").unwrap();
        let s = |p: &Path| p.to_str().unwrap().to_owned();
        let f = open(&s(&file), None).unwrap();
        assert_eq!(f.read_to_end(100).unwrap(), b"1000 10 f\n");
        assert_eq!(
            f.read_to_end(3).map_err(|e| e.kind()).err(),
            None,
            "the handle is at its end: nothing more comes"
        );
        let f = open(&s(&file), None).unwrap();
        assert_eq!(
            f.read_to_end(3).unwrap_err().kind(),
            io::ErrorKind::FileTooLarge
        );
        let link = d.join("link");
        symlink(&file, &link).unwrap();
        assert!(open(&s(&link), None).is_err(), "a symlink");
        // A link in a directory component too.
        let dlink = d.join("dlink");
        symlink(&d, &dlink).unwrap();
        assert!(open(&s(&dlink.join("file")), None).is_err());
        // A FIFO opens at once (no writer needed) and is refused.
        let fifo = d.join("fifo");
        assert!(Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        let started = std::time::Instant::now();
        assert!(open(&s(&fifo), None).is_err());
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        assert!(open("/dev/zero", None).is_err(), "a device");
        assert!(open("/proc/self/exe", None).is_err(), "a magic link");
        assert!(open("relative/path", None).is_err());
        // The operator's own files: links followed, FIFOs and devices still refused.
        assert_eq!(read_operator_file(&link, 100).unwrap(), b"1000 10 f\n");
        assert!(read_operator_file(&fifo, 100).is_err());
        assert!(read_operator_file(Path::new("/dev/zero"), 100).is_err());
        // In this process's own root, the same file.
        let mine = open(&s(&file), Some(std::process::id())).unwrap();
        assert_eq!(mine.identity(), open(&s(&file), None).unwrap().identity());
        let _ = std::fs::remove_dir_all(&d);
    }

    use std::process::Command;

    #[test]
    fn a_jit_map_of_another_user_is_refused() {
        // As root: a file owned by nobody is neither root's nor this process's.
        if !std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0) {
            println!("skipped: needs root to give a file to another user");
            return;
        }
        let d = dir("owner");
        let map = d.join("perf-1.map");
        std::fs::write(&map, "1000 10 f\n").unwrap();
        let p = map.to_str().unwrap();
        assert!(open_jit_map(p, std::process::id()).is_ok(), "root's");
        std::os::unix::fs::chown(&map, Some(65534), None).unwrap();
        assert!(open_jit_map(p, std::process::id()).is_err(), "nobody's");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn charges_fit_the_budget_and_return_when_dropped() {
        let b = Budget::new(100);
        let a = b.charge(60).unwrap();
        assert!(b.charge(50).is_none());
        let c = b.clone().charge(40).unwrap();
        assert_eq!((b.used(), b.available()), (100, 0));
        drop(a);
        assert_eq!(b.used(), 40);
        drop(c);
        assert_eq!(b.used(), 0);
        assert!(b.charge(101).is_none());
        assert!(b.charge(usize::MAX).is_none());
    }

    /// A load stuck for good (a file on a hung file system, simulated by a job that waits on a
    /// channel nobody sends on until the end) costs its asker a few milliseconds, not the
    /// caller: other loads go on, and a load's late result is picked up when asked again.
    #[test]
    fn a_stuck_load_costs_its_wait_not_the_caller() {
        let loader = Loader::new();
        let (release, stuck) = std::sync::mpsc::channel::<()>();
        let started = Instant::now();
        let a = loader.ask(key("stuck"), DRAIN_WAIT, move || stuck.recv().is_ok());
        assert!(matches!(a, Asked::Pending));
        // Asked again while in flight: not queued twice, not waited for, still pending.
        let again = loader.ask(key("stuck"), Duration::from_secs(60), || false);
        assert!(matches!(again, Asked::Pending));
        // Another file loads meanwhile, on another worker.
        let b = loader.ask(key("other"), Duration::from_secs(10), || 42);
        assert!(matches!(b, Asked::Ready(42)));
        assert!(started.elapsed() < Duration::from_secs(5));
        // Once the stuck one finishes, its result waits for the asker.
        release.send(()).unwrap();
        let mut late = Asked::Pending;
        for _ in 0..1000 {
            late = loader.ask(key("stuck"), Duration::from_millis(10), || false);
            if matches!(late, Asked::Ready(_)) {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(matches!(late, Asked::Ready(true)), "{late:?}");
        // Taken once: asked again, it is loaded again.
        assert!(matches!(
            loader.ask(key("stuck"), Duration::from_secs(10), || false),
            Asked::Ready(false)
        ));
    }

    /// A load that panics is lost, not its worker: the worker goes on with the next.
    #[test]
    fn a_load_that_panics_leaves_the_worker_working() {
        let loader = Loader::new();
        // As many as there may be workers: without the catch, none would be left.
        for i in 0..MAX_WORKERS {
            let r: Asked<u8> = loader.ask(key(("panics", i)), Duration::from_millis(200), || {
                panic!("bad file")
            });
            assert!(matches!(r, Asked::Pending));
        }
        for i in 0..2 * MAX_WORKERS {
            let r = loader.ask(key(("after", i)), Duration::from_secs(10), move || i);
            assert!(matches!(r, Asked::Ready(n) if n == i), "{r:?}");
        }
    }

    /// With every worker held by a stuck load, new loads wait (pending) and the caller does not.
    #[test]
    fn all_workers_stuck_leaves_new_loads_pending() {
        let loader = Loader::new();
        let (release, stuck) = std::sync::mpsc::channel::<()>();
        let stuck = Arc::new(Mutex::new(stuck));
        for i in 0..MAX_WORKERS {
            let s = Arc::clone(&stuck);
            let _ = loader.ask(key(("stuck", i)), DRAIN_WAIT, move || {
                let _ = s.lock().unwrap().recv();
            });
        }
        let started = Instant::now();
        let r = loader.ask(key("new"), Duration::from_millis(50), || 1);
        assert!(matches!(r, Asked::Pending));
        assert!(started.elapsed() < Duration::from_secs(5));
        drop(release);
        let mut r = Asked::Pending;
        for _ in 0..1000 {
            r = loader.ask(key("new"), Duration::from_millis(10), || 1);
            if matches!(r, Asked::Ready(_)) {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(matches!(r, Asked::Ready(1)));
    }
}
