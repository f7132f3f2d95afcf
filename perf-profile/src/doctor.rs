//! A preflight check: what will and will not work here, and what to change, before a capture.
//!
//! [`doctor`] reads the kernel's settings and this process's privileges and, for a target binary,
//! its ELF file; it opens one counter to see whether a hardware PMU exists, and changes nothing
//! (it does not mount tracefs). Each [`Check`] says what was found, what it means and how to fix
//! it:
//!
//! - `perf_event_paranoid` and the capabilities that override it (`CAP_PERFMON`, `CAP_SYS_ADMIN`);
//! - the capabilities a profile of other users' processes needs instead of root
//!   ([`privilege`](crate::privilege)), each missing one with what it costs;
//! - the ring buffers' locked memory: `perf_event_mlock_kb` per CPU plus `RLIMIT_MEMLOCK`, unless
//!   `CAP_IPC_LOCK` (the trap of samply#25: `mmap` fails with `EPERM` although the events opened);
//! - `kptr_restrict` (whether kernel frames can be named);
//! - tracefs (off-CPU profiles sample `sched:sched_switch`, else the `context-switches` software
//!   event);
//! - a hardware PMU, or the `cpu-clock` fallback;
//! - for a binary ([`DoctorOptions::binary`]) and, with [`files`], for every executable file a
//!   process maps (shared libraries too, [`mapped_files`] of a short capture, those that hold the
//!   samples first, or [`mapped_now`]): symbols (`.symtab`, else `.dynsym`'s exported functions
//!   only, or an installed build-id debug file's), unwind tables (`.eh_frame` with
//!   `.eh_frame_hdr`, or `.debug_frame`, for DWARF unwinding), frame pointers (else `-g fp`
//!   stacks are truncated), a GNU build id (for symbolization elsewhere) and debug files (by
//!   build id beneath `/usr/lib/debug`, which the symbolizer reads, and the one
//!   `.gnu_debuglink` names). A mapped file is opened through [`crate::untrusted`] as the process
//!   names it: no link followed, regular files only.

use std::fmt;
use std::fs::{self, File};
use std::path::{Path, PathBuf};

use perf_event::config::{Opts, Proc};
use perf_event::count::Counter;
use perf_event::event::hw::Hardware;

use crate::elf::{self, Endian, SectionHeader, SHT_DYNSYM, SHT_SYMTAB, STT_FUNC};
use crate::privilege::{parse_caps, Caps};

/// How a check came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Status {
    /// Works.
    Ok,
    /// Works with less (a fallback, a part of the stacks missing).
    Warn,
    /// Will not work as asked.
    Fail,
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
        })
    }
}

/// One finding.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Check {
    /// What was checked (`perf_event_paranoid`, `frame pointers`, …).
    pub name: String,
    /// How it came out.
    pub status: Status,
    /// What was found and what it means.
    pub detail: String,
    /// What to change, when it is not [`Status::Ok`].
    pub fix: Option<String>,
}

/// Every check, in order.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct Report {
    /// The findings.
    pub checks: Vec<Check>,
}

impl Report {
    /// The worst status of all checks.
    pub fn worst(&self) -> Status {
        self.checks
            .iter()
            .map(|c| c.status)
            .max()
            .unwrap_or(Status::Ok)
    }

    /// The check named `name`.
    pub fn get(&self, name: &str) -> Option<&Check> {
        self.checks.iter().find(|c| c.name == name)
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in &self.checks {
            writeln!(f, "[{:>4}] {}: {}", c.status, c.name, c.detail)?;
            if let Some(fix) = &c.fix {
                writeln!(f, "       fix: {fix}")?;
            }
        }
        Ok(())
    }
}

/// What the capture will be.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct DoctorOptions {
    /// The binary to be profiled, checked for frame pointers, unwind tables and a build id.
    pub binary: Option<PathBuf>,
    /// Whether the whole system is to be sampled (`-a`).
    pub system_wide: bool,
    /// Each CPU's ring holds 2^`ring_pages_exp` pages (as [`Options::ring_pages_exp`](crate::Options)).
    pub ring_pages_exp: u8,
}

impl Default for DoctorOptions {
    fn default() -> Self {
        Self {
            binary: None,
            system_wide: false,
            ring_pages_exp: 6,
        }
    }
}

fn read_int(path: &str) -> Option<i64> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The soft `Max locked memory` of `/proc/self/limits` in bytes; `None` for unlimited.
fn parse_memlock(limits: &str) -> Option<Option<u64>> {
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max locked memory"))?;
    let soft = line["Max locked memory".len()..]
        .split_whitespace()
        .next()?;
    if soft == "unlimited" {
        return Some(None);
    }
    Some(Some(soft.parse().ok()?))
}

/// The page size, from `AT_PAGESZ` in `/proc/self/auxv` (4096 when unreadable).
fn page_size() -> u64 {
    const AT_PAGESZ: u64 = 6;
    let Ok(auxv) = fs::read("/proc/self/auxv") else {
        return 4096;
    };
    auxv.chunks_exact(16)
        .map(|c| {
            let w = |b: &[u8]| u64::from_ne_bytes(b.try_into().unwrap_or([0; 8]));
            (w(&c[..8]), w(&c[8..]))
        })
        .find(|&(k, _)| k == AT_PAGESZ)
        .map_or(4096, |(_, v)| v)
}

/// Runs every check. It opens one counter (a `cycles` counter on this thread) and changes nothing.
pub fn doctor(opts: &DoctorOptions) -> Report {
    let mut r = Report::default();
    let caps = parse_caps(&fs::read_to_string("/proc/self/status").unwrap_or_default());
    let paranoid = read_int("/proc/sys/kernel/perf_event_paranoid");
    r.checks
        .push(paranoid_check(paranoid, caps, opts.system_wide));
    r.checks
        .push(crate::privilege::check(caps, opts.system_wide));
    r.checks.push(mlock_check(
        read_int("/proc/sys/kernel/perf_event_mlock_kb"),
        parse_memlock(&fs::read_to_string("/proc/self/limits").unwrap_or_default()),
        caps,
        paranoid,
        perf_event::config::online_cpus().map_or(1, |c| c.len() as u64),
        page_size(),
        opts.ring_pages_exp,
    ));
    r.checks
        .push(kptr_check(read_int("/proc/sys/kernel/kptr_restrict"), caps));
    r.checks.push(tracefs_check(
        &fs::read_to_string("/proc/mounts").unwrap_or_default(),
    ));
    r.checks.push(pmu_check());
    if let Some(bin) = &opts.binary {
        r.checks.extend(binary_checks(bin));
    }
    r
}

fn paranoid_check(paranoid: Option<i64>, caps: Caps, system_wide: bool) -> Check {
    let name = "perf_event_paranoid".to_owned();
    let privileged = caps.root || caps.perfmon() || caps.sys_admin();
    let who = if caps.root {
        "root".to_owned()
    } else if caps.perfmon() {
        "CAP_PERFMON".into()
    } else if caps.sys_admin() {
        "CAP_SYS_ADMIN".into()
    } else {
        "no capability that overrides it".into()
    };
    let Some(p) = paranoid else {
        return Check {
            name,
            status: Status::Fail,
            detail: "/proc/sys/kernel/perf_event_paranoid is missing: this kernel has no perf events (CONFIG_PERF_EVENTS)".into(),
            fix: Some("use a kernel built with CONFIG_PERF_EVENTS=y".into()),
        };
    };
    let meaning = match p {
        i64::MIN..=-1 => "no restrictions",
        0 => "CPU-wide and kernel sampling allowed, no raw tracepoint data",
        1 => "kernel sampling of own processes allowed; no CPU-wide events",
        2 => "user space of own processes only",
        _ => "perf events are off for unprivileged users (a distribution patch)",
    };
    let (status, fix) = if privileged {
        (Status::Ok, None)
    } else if system_wide && p > 0 {
        (
            Status::Fail,
            Some("run as root, grant CAP_PERFMON (setcap cap_perfmon+ep BINARY), or `sysctl kernel.perf_event_paranoid=0`".into()),
        )
    } else if p >= 3 {
        (
            Status::Fail,
            Some("grant CAP_PERFMON or `sysctl kernel.perf_event_paranoid=2` (own processes) or 1 (with the kernel)".into()),
        )
    } else if p == 2 {
        (
            Status::Warn,
            Some("kernel frames need `sysctl kernel.perf_event_paranoid=1` or CAP_PERFMON; the capture falls back to user space, and --off-cpu (sampled in the kernel) fails".into()),
        )
    } else {
        (Status::Ok, None)
    };
    Check {
        name,
        status,
        detail: format!("{p} ({meaning}); this process: {who}"),
        fix,
    }
}

fn mlock_check(
    mlock_kb: Option<i64>,
    memlock: Option<Option<u64>>,
    caps: Caps,
    paranoid: Option<i64>,
    cpus: u64,
    page: u64,
    exp: u8,
) -> Check {
    let name = "locked memory for the rings".to_owned();
    let need = cpus * ((1u64 << exp) + 1) * page;
    let per_cpu = mlock_kb.unwrap_or(516).max(0) as u64 * 1024;
    let free = per_cpu * cpus;
    let rlimit = memlock.flatten();
    let detail = format!(
        "the rings need {} KiB ({cpus} CPUs x {} pages of {page} bytes); perf_event_mlock_kb allows {} KiB \
         ({} KiB per CPU), then RLIMIT_MEMLOCK {}",
        need / 1024,
        (1u64 << exp) + 1,
        free / 1024,
        per_cpu / 1024,
        match memlock {
            Some(None) => "unlimited".to_owned(),
            Some(Some(b)) => format!("{} KiB", b / 1024),
            None => "unreadable".into(),
        }
    );
    let exempt = caps.root || caps.ipc_lock() || paranoid.is_some_and(|p| p < 0);
    let fits = need <= free || memlock == Some(None) || rlimit.is_some_and(|l| need <= free + l);
    let (status, fix) = if exempt || fits {
        (Status::Ok, None)
    } else {
        (
            Status::Fail,
            Some(format!(
                "mapping the rings will fail with EPERM: raise `sysctl kernel.perf_event_mlock_kb` to {} \
                 or more, raise `ulimit -l`, grant CAP_IPC_LOCK, or use smaller rings (fewer pages per CPU). \
                 Other perf users of the same user share the allowance",
                need.div_ceil(cpus * 1024)
            )),
        )
    };
    Check {
        name,
        status,
        detail: if exempt {
            format!("{detail}; not limited for this process (root, CAP_IPC_LOCK or paranoid -1)")
        } else {
            detail
        },
        fix,
    }
}

fn kptr_check(kptr: Option<i64>, caps: Caps) -> Check {
    let name = "kptr_restrict".to_owned();
    // What /proc/kallsyms shows this process is what counts.
    let visible = fs::read_to_string("/proc/kallsyms").ok().map(|t| {
        t.lines().take(1000).any(|l| {
            l.split(' ')
                .next()
                .is_some_and(|a| a.bytes().any(|b| b != b'0'))
        })
    });
    let k = kptr.map_or("unreadable".into(), |k| k.to_string());
    match visible {
        Some(true) => Check {
            name,
            status: Status::Ok,
            detail: format!("{k}: kernel addresses are visible, kernel frames are named"),
            fix: None,
        },
        _ => Check {
            name,
            status: Status::Warn,
            detail: format!(
                "{k}: /proc/kallsyms shows no addresses to this process{}: kernel frames show as [kernel]",
                if caps.syslog() { "" } else { " (no CAP_SYSLOG)" }
            ),
            fix: Some(
                "grant CAP_SYSLOG (kptr_restrict 1, or 0 with perf_event_paranoid 2, hide them \
                 without it), run as root, or `sysctl kernel.kptr_restrict=0 kernel.perf_event_paranoid=1`"
                    .into(),
            ),
        },
    }
}

/// What `--off-cpu` does without the tracepoint, and how close it comes.
const OFF_CPU_FALLBACK: &str = "--off-cpu samples the context-switches software event instead: \
    the same switch-out stacks and wait times (the innermost kernel frames are the scheduler's \
    perf hook rather than the tracepoint's)";

/// Whether `sched:sched_switch` can be had from a tracefs that `mounts` (`/proc/mounts`) lists.
fn tracefs_check(mounts: &str) -> Check {
    let name = "tracefs".to_owned();
    let mounted: Vec<&str> = mounts
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (_, at, ty) = (f.next(), f.next()?, f.next()?);
            (ty == "tracefs").then_some(at)
        })
        .collect();
    // The first mount that gives the id, else the first refusal (tracefs is often root-only:
    // then the id's path cannot even be seen to exist).
    let mut refused = None;
    for at in &mounted {
        let id = Path::new(at).join("events/sched/sched_switch/id");
        match fs::read_to_string(&id) {
            Ok(_) => {
                return Check {
                    name,
                    status: Status::Ok,
                    detail: format!(
                        "{} is readable: --off-cpu can sample sched:sched_switch",
                        id.display()
                    ),
                    fix: None,
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                refused.get_or_insert((id, e));
            }
        }
    }
    match (mounted.first(), refused) {
        (_, Some((id, e))) => Check {
            name,
            status: Status::Warn,
            detail: format!("{}: {e}: {OFF_CPU_FALLBACK}", id.display()),
            fix: Some(
                "run as root or grant CAP_DAC_READ_SEARCH (tracefs is often root-only)".into(),
            ),
        },
        (Some(at), None) => Check {
            name,
            status: Status::Warn,
            detail: format!("mounted at {at} but without sched:sched_switch: {OFF_CPU_FALLBACK}"),
            fix: Some("use a kernel with CONFIG_FTRACE and scheduler tracepoints".into()),
        },
        (None, _) => Check {
            name,
            status: Status::Warn,
            detail: format!(
                "not mounted: --off-cpu mounts it at /sys/kernel/tracing as root (as perf does); \
                 without root {OFF_CPU_FALLBACK}"
            ),
            fix: Some("`mount -t tracefs nodev /sys/kernel/tracing`".into()),
        },
    }
}

fn pmu_check() -> Check {
    let name = "hardware PMU".to_owned();
    match Counter::new(
        Hardware::CpuCycle,
        (Proc::CURRENT, perf_event::config::Cpu::ALL),
        Opts::default(),
    ) {
        Ok(_) => Check {
            name,
            status: Status::Ok,
            detail: "cycles can be counted: profiles sample cycles".into(),
            fix: None,
        },
        Err(perf_event::Error::NotSupported { detail, .. }) => Check {
            name,
            status: Status::Warn,
            detail: format!(
                "{}: profiles sample the cpu-clock timer instead, as perf does",
                {
                    // The check's name says what is missing: not said twice.
                    let why = crate::collect::no_cycles(&detail);
                    match why.strip_prefix("no hardware PMU, so ") {
                        Some(rest) => format!("none here, so {rest}"),
                        None => why,
                    }
                }
            ),
            fix: Some("nothing to do for CPU profiles; a VM needs a virtual PMU (e.g. KVM -cpu host) for cycles".into()),
        },
        Err(e) => Check {
            name,
            status: Status::Warn,
            detail: format!("cannot tell: opening a cycles counter failed: {e}"),
            fix: None,
        },
    }
}

/// What is read of a symbol table or its names at most.
const MAX_SYMBOLS: u64 = 64 << 20;

/// Functions of the C runtime's start files, which never set up a frame pointer whatever the
/// program is built with: not counted.
const CRT_FUNCTIONS: &[&str] = &[
    "_start",
    "_init",
    "_fini",
    "deregister_tm_clones",
    "register_tm_clones",
    "__do_global_dtors_aux",
    "frame_dummy",
    "__libc_csu_init",
    "__libc_csu_fini",
    "_dl_relocate_static_pie",
];

/// A little-endian ELF file with its section headers, the way the checks of a binary read it.
struct Binary {
    elf: elf::Elf<File>,
    sections: Vec<SectionHeader>,
}

impl Binary {
    /// The ELF file at `path`; `None` when it is not one, is big-endian, or its section headers
    /// cannot be read. The path is the user's choice, so links in it are followed (to the
    /// canonical path), then the file is opened through [`crate::untrusted`] (a regular file,
    /// non-blocking) and every check reads that one open file.
    fn open(path: &Path) -> Option<Self> {
        let canonical = fs::canonicalize(path).ok()?;
        let file = crate::untrusted::open(canonical.to_str()?, None).ok()?;
        Self::of(file.into_file())
    }

    /// The ELF file open as `file`.
    fn of(file: File) -> Option<Self> {
        let mut elf = elf::of(file)?;
        if elf.header().endian != Endian::Little {
            return None;
        }
        let sections = elf.sections()?;
        Some(Self { elf, sections })
    }

    fn has(&self, name: &str) -> bool {
        self.sections.iter().any(|s| s.name == name.as_bytes())
    }

    /// The functions of `.symtab` (else `.dynsym`) of 16 bytes or more, but the C runtime's:
    /// their addresses.
    fn functions(&mut self) -> Vec<u64> {
        let of = |kind| self.sections.iter().find(|s| s.kind == kind);
        let Some(table) = of(SHT_SYMTAB).or_else(|| of(SHT_DYNSYM)).cloned() else {
            return Vec::new();
        };
        let Some(data) = self.elf.section_data(&table, MAX_SYMBOLS) else {
            return Vec::new();
        };
        let names = self
            .sections
            .get(table.link as usize)
            .cloned()
            .and_then(|t| self.elf.section_data(&t, MAX_SYMBOLS))
            .unwrap_or_default();
        let mut out: Vec<u64> = elf::symbols(&data, &names, self.elf.header(), table.entsize)
            .filter(|s| {
                s.kind == STT_FUNC
                    && s.value != 0
                    && s.size >= 16
                    && !CRT_FUNCTIONS.iter().any(|f| f.as_bytes() == s.name)
            })
            .map(|s| s.value)
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }
}

/// Whether `code` (a function's first bytes) sets up a frame pointer, for ELF `machine`.
fn sets_frame_pointer(machine: u16, code: &[u8]) -> bool {
    const EM_X86_64: u16 = 62;
    const EM_AARCH64: u16 = 183;
    match machine {
        EM_X86_64 => {
            // endbr64 is allowed first; then push %rbp; mov %rsp,%rbp (either encoding).
            let c = code.strip_prefix(&[0xf3, 0x0f, 0x1e, 0xfa]).unwrap_or(code);
            c.starts_with(&[0x55, 0x48, 0x89, 0xe5]) || c.starts_with(&[0x55, 0x48, 0x8b, 0xec])
        }
        EM_AARCH64 => {
            // (paciasp) stp x29, x30, [sp, #-N]! ... mov x29, sp within the first instructions.
            let insns: Vec<u32> = code
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            let stp = insns.iter().position(|&i| i & 0xffc0_7fff == 0xa980_7bfd);
            stp.is_some_and(|at| insns[at..].iter().take(4).any(|&i| i == 0x9100_03fd))
        }
        _ => false,
    }
}

/// Checks of the binary at `path` (the user's choice: links followed).
fn binary_checks(path: &Path) -> Vec<Check> {
    let shown = path.display().to_string();
    let Some(mut bin) = Binary::open(path) else {
        return vec![Check {
            name: "binary".into(),
            status: Status::Warn,
            detail: format!("{shown} is not a little-endian ELF file that can be read: its frames may not be named"),
            fix: None,
        }];
    };
    let canonical = fs::canonicalize(path).map(|p| p.to_string_lossy().into_owned());
    checks_of(&mut bin, &shown, canonical.as_deref().ok(), None)
}

/// The checks of `bin`, a file shown as `shown`, at `path` as process `pid` names it (where its
/// `.gnu_debuglink` is looked for): symbols, unwind tables, frame pointers, build id, debug file.
fn checks_of(bin: &mut Binary, shown: &str, path: Option<&str>, pid: Option<u32>) -> Vec<Check> {
    let build_id = crate::maps::build_id::of_file(bin.elf.source());
    let (debug, by_id) = debug_check(bin, shown, build_id.as_deref(), path, pid);
    vec![
        symbols_check(bin, shown, by_id),
        unwind_check(bin, shown),
        frame_pointer_check(bin, shown),
        build_id_check(shown, build_id.as_deref()),
        debug,
    ]
}

/// Frame pointers: the share of sizeable functions whose prologue sets one up.
fn frame_pointer_check(bin: &mut Binary, shown: &str) -> Check {
    let funcs = bin.functions();
    let step = (funcs.len() / 2000).max(1);
    let (mut with, mut seen) = (0u64, 0u64);
    let machine = bin.elf.header().machine;
    for &addr in funcs.iter().step_by(step) {
        if let Some(code) = bin.elf.read_addr(&bin.sections, addr, 16) {
            seen += 1;
            if sets_frame_pointer(machine, &code) {
                with += 1;
            }
        }
    }
    let name = "frame pointers".to_owned();
    match (with * 100).checked_div(seen) {
        None => Check {
            name,
            status: Status::Warn,
            detail: format!("{shown} has no function symbols to look at (stripped): cannot tell"),
            fix: None,
        },
        Some(share) => {
            let detail =
                format!("{with} of {seen} functions of {shown} set up a frame pointer ({share}%)");
            if share >= 80 {
                Check {
                    name,
                    status: Status::Ok,
                    detail,
                    fix: None,
                }
            } else {
                Check {
                    name,
                    status: Status::Warn,
                    detail: format!("{detail}: -g fp stacks through the others are truncated"),
                    fix: Some(
                        "rebuild with -fno-omit-frame-pointer (Rust: -C force-frame-pointers=yes), \
                         or use -g dwarf"
                            .into(),
                    ),
                }
            }
        }
    }
}

fn unwind_check(bin: &Binary, shown: &str) -> Check {
    let eh = bin.has(".eh_frame");
    let hdr = bin.has(".eh_frame_hdr");
    let dbg = bin.has(".debug_frame");
    if (eh && hdr) || dbg {
        Check {
            name: "unwind tables".into(),
            status: Status::Ok,
            detail: format!(
                "{shown} has {}: -g dwarf can unwind it",
                [
                    (eh, ".eh_frame"),
                    (hdr, ".eh_frame_hdr"),
                    (dbg, ".debug_frame")
                ]
                .iter()
                .filter(|(h, _)| *h)
                .map(|(_, n)| *n)
                .collect::<Vec<_>>()
                .join(", ")
            ),
            fix: None,
        }
    } else {
        Check {
            name: "unwind tables".into(),
            status: Status::Warn,
            detail: format!("{shown} has no .eh_frame (with .eh_frame_hdr) nor .debug_frame: -g dwarf cannot unwind it"),
            fix: Some("build without -fno-asynchronous-unwind-tables (Rust: without panic=abort plus -C force-unwind-tables=no)".into()),
        }
    }
}

fn build_id_check(shown: &str, id: Option<&[u8]>) -> Check {
    match id {
        Some(id) => Check {
            name: "build id".into(),
            status: Status::Ok,
            detail: format!("{shown} has GNU build id {}", hex(id)),
            fix: None,
        },
        None => Check {
            name: "build id".into(),
            status: Status::Warn,
            detail: format!("{shown} has no GNU build id: a backend cannot match it to its debug info, and a rebuilt file is not noticed"),
            fix: Some("link with -Wl,--build-id".into()),
        },
    }
}

fn hex(id: &[u8]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// What installs debug files, for a fix.
const INSTALL_DEBUG: &str = "install the package's debug symbols (Debian, Ubuntu: its -dbgsym or \
    -dbg package; Fedora: dnf debuginfo-install), which put them under /usr/lib/debug/.build-id";

/// Symbols: `.symtab`, else `.dynsym` (exported functions only), else its debug file's
/// (`by_id`: the build-id debug file is installed, whose `.symtab` the symbolizer reads).
fn symbols_check(bin: &Binary, shown: &str, by_id: bool) -> Check {
    let name = "symbols".to_owned();
    let symtab = bin.has(".symtab");
    let dwarf = bin.has(".debug_info");
    if symtab || dwarf {
        return Check {
            name,
            status: Status::Ok,
            detail: format!(
                "{shown} has {}: its functions are named",
                match (symtab, dwarf) {
                    (true, true) => ".symtab and DWARF",
                    (true, false) => ".symtab",
                    _ => "DWARF",
                }
            ),
            fix: None,
        };
    }
    if by_id {
        return Check {
            name,
            status: Status::Ok,
            detail: format!(
                "{shown} has no .symtab (stripped), but its debug file has: its functions are named"
            ),
            fix: None,
        };
    }
    let only = if bin.has(".dynsym") {
        format!(
            "only the functions .dynsym exports are named, the others show as [{}+0xOFFSET]",
            shown.rsplit('/').next().unwrap_or(shown)
        )
    } else {
        "no .dynsym either: none of its functions is named".to_owned()
    };
    Check {
        name,
        status: Status::Warn,
        detail: format!("{shown} has no .symtab (stripped): {only}"),
        fix: Some(format!("{INSTALL_DEBUG}, or do not strip it")),
    }
}

/// The file name a `.gnu_debuglink` section holds (up to its NUL).
fn debuglink(bin: &mut Binary) -> Option<String> {
    let s = bin
        .sections
        .iter()
        .find(|s| s.name == b".gnu_debuglink")?
        .clone();
    let data = bin.elf.section_data(&s, 4096)?;
    let name = &data[..data.iter().position(|&b| b == 0)?];
    // A file name, nothing that climbs out of the folders it is looked for in.
    (!name.is_empty() && !name.contains(&b'/') && name != b"..")
        .then(|| String::from_utf8_lossy(name).into_owned())
}

/// Debug files: the build-id one beneath /usr/lib/debug (what the symbolizer reads), and the one
/// `.gnu_debuglink` names, where gdb looks for it (beneath /usr/lib/debug, and the file's folder's
/// `.debug`), each through the untrusted-file door. Also whether the build-id one is installed.
fn debug_check(
    bin: &mut Binary,
    shown: &str,
    build_id: Option<&[u8]>,
    path: Option<&str>,
    pid: Option<u32>,
) -> (Check, bool) {
    let name = "debug file".to_owned();
    let by_id = build_id.filter(|id| id.len() >= 2).map(|id| {
        let h = hex(id);
        format!(".build-id/{}/{}.debug", &h[..2], &h[2..])
    });
    let found = by_id
        .as_deref()
        .is_some_and(|rel| crate::untrusted::open_debug_file(rel).is_ok());
    let dir = path.and_then(|p| p.rsplit_once('/')).map(|(d, _)| d);
    let link = debuglink(bin);
    let link_at = link.as_deref().and_then(|l| {
        let dir = dir?;
        let beneath = format!("{}/{l}", dir.trim_start_matches('/'));
        if crate::untrusted::open_debug_file(&beneath).is_ok() {
            return Some(format!("{}/{beneath}", crate::untrusted::DEBUG_DIR));
        }
        let beside = format!("{dir}/.debug/{l}");
        crate::untrusted::open(&beside, pid)
            .is_ok()
            .then_some(beside)
    });
    let dwarf = bin.has(".debug_info");
    let debug_dir = crate::untrusted::DEBUG_DIR;
    if found {
        let rel = by_id.unwrap_or_default();
        return (
            Check {
                name,
                status: Status::Ok,
                detail: format!(
                    "{debug_dir}/{rel} is installed: {shown}'s functions are named from it"
                ),
                fix: None,
            },
            true,
        );
    }
    if dwarf && link.is_none() {
        return (
            Check {
                name,
                status: Status::Ok,
                detail: format!(
                    "none needed: {shown} carries its DWARF (file:line, inlined functions)"
                ),
                fix: None,
            },
            false,
        );
    }
    let looked = match &by_id {
        Some(rel) => format!("not at {debug_dir}/{rel}"),
        None => "no build id to look one up by".to_owned(),
    };
    let (detail, fix) = match (&link, &link_at) {
        (Some(l), Some(at)) => (
            format!(
                "{looked}; the one its .gnu_debuglink names ({l}) is at {at}, but the profiler \
                 reads debug files by build id only"
            ),
            "install the debug file under /usr/lib/debug/.build-id as well (the distributions' \
             debug packages do)"
                .to_owned(),
        ),
        (Some(l), None) => (
            format!(
                "none: {looked}, nor the one its .gnu_debuglink names ({l}): {}",
                missing_means(bin)
            ),
            INSTALL_DEBUG.to_owned(),
        ),
        (None, _) => (
            format!(
                "none: {looked}, and no .gnu_debuglink: {}",
                missing_means(bin)
            ),
            INSTALL_DEBUG.to_owned(),
        ),
    };
    (
        Check {
            name,
            status: Status::Warn,
            detail,
            fix: Some(fix),
        },
        false,
    )
}

/// What a file without a debug file loses.
fn missing_means(bin: &Binary) -> &'static str {
    if bin.has(".symtab") {
        "there is no file:line"
    } else {
        "the functions it does not export stay unnamed, and there is no file:line"
    }
}

/// An executable file (or `[kernel]`, `[vdso]`, `[jit]`, `[unknown]`) of the profiled processes,
/// with the samples whose innermost frame is in it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Mapped {
    /// Its path as the kernel names it, or the bracketed name of what is not a file.
    pub path: String,
    /// The samples that ended in it.
    pub samples: u64,
}

impl Mapped {
    /// `path` with `samples`.
    pub fn new(path: impl Into<String>, samples: u64) -> Self {
        Self {
            path: path.into(),
            samples,
        }
    }

    fn is_file(&self) -> bool {
        self.path.starts_with('/')
    }
}

/// The executable files `profile`'s processes mapped (every mapping its records saw), each with
/// the samples that ended in it; samples outside every file as `[kernel]`, `[jit]`, `[unknown]`
/// or the mapping's own name (`[vdso]`). Most samples first, then by path.
pub fn mapped_files(profile: &crate::Profile) -> Vec<Mapped> {
    use crate::aggregate::Frame;
    use std::collections::BTreeMap;
    let mut by: BTreeMap<String, u64> = BTreeMap::new();
    for m in profile.mappings() {
        if m.is_file() {
            by.entry(m.path.to_string()).or_default();
        }
    }
    let stacks = profile.stacks();
    for (stack, counts) in stacks.sampled() {
        let leaf = stacks.frames_of(stack).next().and_then(|f| stacks.frame(f));
        let name = match leaf {
            Some(Frame::User { mapping, .. }) => profile
                .mappings()
                .get(mapping.0 as usize)
                .map_or("[unknown]".to_owned(), |m| m.path.to_string()),
            Some(Frame::Kernel { .. } | Frame::KernelHidden) => "[kernel]".into(),
            Some(Frame::Jit { .. }) => "[jit]".into(),
            Some(Frame::Unmapped { .. }) | None => "[unknown]".into(),
        };
        *by.entry(name).or_default() += counts.samples;
    }
    let mut out: Vec<Mapped> = by.into_iter().map(|(p, n)| Mapped::new(p, n)).collect();
    out.sort_by(|a, b| b.samples.cmp(&a.samples).then_with(|| a.path.cmp(&b.path)));
    out
}

/// The executable files `/proc/PID/maps` lists now, without samples (where none could be taken).
pub fn mapped_now(pid: u32) -> Vec<Mapped> {
    let maps = fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    let mut paths: Vec<String> = maps
        .lines()
        .filter_map(|l| {
            let mut f = l.splitn(6, ' ');
            let perms = f.nth(1)?;
            let path = f.nth(3)?.trim_start();
            (perms.as_bytes().get(2) == Some(&b'x') && path.starts_with('/'))
                .then(|| path.to_owned())
        })
        .collect();
    paths.sort();
    paths.dedup();
    paths.into_iter().map(|p| Mapped::new(p, 0)).collect()
}

/// One file's findings.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct FileReport {
    /// The file, and the samples that ended in it.
    pub file: Mapped,
    /// Its checks (none for what is not a file): symbols, unwind tables, frame pointers, build
    /// id, debug file.
    pub checks: Vec<Check>,
}

impl FileReport {
    /// The check named `name`.
    pub fn get(&self, name: &str) -> Option<&Check> {
        self.checks.iter().find(|c| c.name == name)
    }
}

/// The doctor's look at every executable file of the profiled processes, the files that hold
/// the samples first.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct Files {
    /// What the samples were (`412 cpu-clock samples at 99 Hz over 3.0 s`: it starts with their
    /// number), or why there are none (`not sampled: ...`).
    pub sampled: String,
    /// The files, most samples first.
    pub files: Vec<FileReport>,
}

impl Files {
    /// The worst status of all checks.
    pub fn worst(&self) -> Status {
        self.files
            .iter()
            .flat_map(|f| &f.checks)
            .map(|c| c.status)
            .max()
            .unwrap_or(Status::Ok)
    }

    /// The report of the file at `path`.
    pub fn get(&self, path: &str) -> Option<&FileReport> {
        self.files.iter().find(|f| f.file.path == path)
    }
}

/// Checks each file of `mapped` (from [`mapped_files`] or [`mapped_now`]), opened as process
/// `pid` names it through [`crate::untrusted`]: no link followed, regular files only, in the
/// process's root while it runs. `sampled` says what the samples were.
pub fn files(mapped: &[Mapped], pid: Option<u32>, sampled: &str) -> Files {
    let files = mapped
        .iter()
        .filter(|m| m.samples > 0 || m.is_file())
        .map(|m| FileReport {
            file: m.clone(),
            checks: if m.is_file() {
                mapped_checks(&m.path, pid)
            } else {
                Vec::new()
            },
        })
        .collect();
    Files {
        sampled: sampled.to_owned(),
        files,
    }
}

/// The checks of the mapped file `path`, shown by its file name (the report's heading has the
/// path).
fn mapped_checks(path: &str, pid: Option<u32>) -> Vec<Check> {
    let shown = path.rsplit('/').next().unwrap_or(path);
    let file = match crate::untrusted::open(path, pid) {
        Ok(f) => f,
        Err(e) => {
            return vec![Check {
                name: "file".into(),
                status: Status::Warn,
                detail: format!(
                    "cannot be read without following a link, as a regular file ({e}): its \
                     frames are not named"
                ),
                fix: None,
            }]
        }
    };
    let Some(mut bin) = Binary::of(file.into_file()) else {
        return vec![Check {
            name: "file".into(),
            status: Status::Warn,
            detail: "not a little-endian ELF file that can be read: its frames are not named"
                .into(),
            fix: None,
        }];
    };
    checks_of(&mut bin, shown, Some(path), pid)
}

impl fmt::Display for Files {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let total: u64 = self.files.iter().map(|r| r.file.samples).sum();
        let count = self.files.iter().filter(|r| r.file.is_file()).count();
        if self.sampled.starts_with(|c: char| c.is_ascii_digit()) {
            writeln!(
                f,
                "{count} executable files mapped, by their share of {}:",
                self.sampled
            )?;
        } else {
            writeln!(f, "{count} executable files mapped ({}):", self.sampled)?;
        }
        for r in &self.files {
            let share = if total == 0 {
                0.0
            } else {
                r.file.samples as f64 * 100.0 / total as f64
            };
            if r.file.samples == 0 && total > 0 && !r.checks.is_empty() {
                // A file without samples beside files with: one line, each check's name and
                // status (with no samples at all, every file is shown in full).
                let summary: Vec<String> = r
                    .checks
                    .iter()
                    .map(|c| format!("{} {}", c.name, c.status))
                    .collect();
                writeln!(f, "{share:>6.1}%  {}: {}", r.file.path, summary.join(", "))?;
                continue;
            }
            writeln!(f, "{share:>6.1}%  {}", r.file.path)?;
            for c in &r.checks {
                writeln!(f, "        [{:>4}] {}: {}", c.status, c.name, c.detail)?;
                if let Some(fix) = &c.fix {
                    writeln!(f, "               fix: {fix}")?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_sched_switch_the_tracefs_check_names_the_off_cpu_fallback() {
        let dir = std::env::temp_dir().join(format!("doctor-tracefs-{}", std::process::id()));
        let id = dir.join("events/sched/sched_switch");
        fs::create_dir_all(&id).unwrap();
        let mounts = |at: &Path| format!("nodev {} tracefs rw,relatime 0 0\n", at.display());
        // Not mounted; mounted without the tracepoint: the software event is sampled instead.
        for m in [
            "proc /proc proc rw 0 0\n".to_owned(),
            mounts(&dir.join("events")),
        ] {
            let c = tracefs_check(&m);
            assert_eq!(c.status, Status::Warn, "{c:?}");
            assert!(
                c.detail.contains("context-switches software event instead"),
                "{c:?}"
            );
            assert!(!c.detail.contains("fail"), "{c:?}");
            assert!(c.fix.is_some());
        }
        fs::write(id.join("id"), "316\n").unwrap();
        let c = tracefs_check(&mounts(&dir));
        assert_eq!(c.status, Status::Ok, "{c:?}");
        assert!(c.detail.contains("can sample sched:sched_switch"), "{c:?}");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn capabilities_and_limits_parse() {
        let status = "Name:\tx\nUid:\t1000\t0\t0\t0\nCapEff:\t0000004000004000\n";
        let c = parse_caps(status);
        assert!(
            c.root && c.perfmon() && c.ipc_lock() && !c.sys_admin() && !c.syslog(),
            "{c:?}"
        );
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max locked memory         8388608              8388608              bytes\n";
        assert_eq!(parse_memlock(limits), Some(Some(8 << 20)));
        let limits = "Max locked memory         unlimited            unlimited            bytes\n";
        assert_eq!(parse_memlock(limits), Some(None));
    }

    #[test]
    fn the_mlock_trap_is_caught_and_privilege_lifts_it() {
        let user = Caps::default();
        // 64 CPUs x 65 pages of 4 KiB = 16.25 MiB; 516 KiB per CPU = 32.25 MiB: fits.
        let c = mlock_check(Some(516), Some(Some(64 << 10)), user, Some(2), 64, 4096, 6);
        assert_eq!(c.status, Status::Ok, "{c:?}");
        // 2^10 pages per CPU do not fit 516 KiB per CPU plus 64 KiB.
        let c = mlock_check(Some(516), Some(Some(64 << 10)), user, Some(2), 64, 4096, 10);
        assert_eq!(c.status, Status::Fail, "{c:?}");
        assert!(c.fix.unwrap().contains("perf_event_mlock_kb"));
        let c = mlock_check(Some(516), Some(None), user, Some(2), 64, 4096, 10);
        assert_eq!(c.status, Status::Ok);
        let lock = Caps {
            effective: 1 << 14, // CAP_IPC_LOCK
            ..user
        };
        assert_eq!(
            mlock_check(Some(516), Some(Some(0)), lock, Some(2), 64, 4096, 10).status,
            Status::Ok
        );
    }

    #[test]
    fn paranoid_levels_say_what_works() {
        let user = Caps::default();
        assert_eq!(paranoid_check(Some(2), user, false).status, Status::Warn);
        assert_eq!(paranoid_check(Some(2), user, true).status, Status::Fail);
        assert_eq!(paranoid_check(Some(1), user, false).status, Status::Ok);
        assert_eq!(paranoid_check(Some(4), user, false).status, Status::Fail);
        let root = Caps { root: true, ..user };
        assert_eq!(paranoid_check(Some(4), root, true).status, Status::Ok);
        assert_eq!(paranoid_check(None, root, false).status, Status::Fail);
    }

    #[test]
    fn a_binary_is_read_for_its_functions_prologues_unwind_tables_and_symbols() {
        use crate::elf::tests::{build_with, symbol_table, TestSection};
        use crate::elf::SHT_PROGBITS;
        let fp = [0x55, 0x48, 0x89, 0xe5];
        let endbr_fp = [0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x48, 0x89, 0xe5];
        let no_fp = [0x48, 0x83, 0xec, 0x08];
        // Five functions of 16 bytes from 0x1000: with a frame pointer (twice), without, the C
        // runtime's _start (not counted) and one of 8 bytes (too small to count).
        let mut code = Vec::new();
        for f in [&fp[..], &endbr_fp, &no_fp, &no_fp, &no_fp] {
            let at = code.len();
            code.extend_from_slice(f);
            code.resize(at + 16, 0x90);
        }
        let names = b"\0a\0b\0c\0_start\0tiny\0data\0";
        let syms = symbol_table(
            true,
            Endian::Little,
            &[
                (0, 0, 0, 0),
                (1, STT_FUNC, 0x1000, 16),
                (3, STT_FUNC, 0x1010, 16),
                (5, STT_FUNC, 0x1020, 16),
                (7, STT_FUNC, 0x1030, 16),
                (14, STT_FUNC, 0x1040, 8),
                (19, 1, 0x1000, 64),
            ],
        );
        let section = |name, kind, addr, bytes| TestSection {
            name,
            kind,
            addr,
            bytes,
            ..TestSection::default()
        };
        let sections = [
            section(".text", SHT_PROGBITS, 0x1000, &code[..]),
            TestSection {
                link: 3,
                entsize: 24,
                ..section(".symtab", SHT_SYMTAB, 0, &syms)
            },
            section(".strtab", 3, 0, names),
            section(".eh_frame", SHT_PROGBITS, 0x2000, &[0; 8]),
            section(".eh_frame_hdr", SHT_PROGBITS, 0x2008, &[0; 8]),
        ];
        let dir = std::env::temp_dir().join(format!("doctor-elf-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bin");
        fs::write(&path, build_with(true, Endian::Little, &[], &sections)).unwrap();
        let checks = binary_checks(&path);
        let get = |name: &str| checks.iter().find(|c| c.name == name).unwrap();
        let fp = get("frame pointers");
        assert_eq!(fp.status, Status::Warn, "{checks:?}");
        assert!(
            fp.detail.starts_with(&format!(
                "2 of 3 functions of {} set up a frame pointer (66%)",
                path.display()
            )),
            "{fp:?}"
        );
        assert_eq!(get("unwind tables").status, Status::Ok, "{checks:?}");
        assert!(get("unwind tables")
            .detail
            .ends_with("has .eh_frame, .eh_frame_hdr: -g dwarf can unwind it"));
        assert_eq!(get("build id").status, Status::Warn, "{checks:?}");
        assert_eq!(get("symbols").status, Status::Ok, "{checks:?}");

        // The same big-endian, or cut short of its section headers: not read.
        for file in [
            build_with(true, Endian::Big, &[], &sections),
            build_with(true, Endian::Little, &[], &sections)[..200].to_vec(),
        ] {
            fs::write(&path, file).unwrap();
            let checks = binary_checks(&path);
            assert_eq!(checks.len(), 1, "{checks:?}");
            assert_eq!(
                (checks[0].name.as_str(), checks[0].status),
                ("binary", Status::Warn)
            );
        }
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_missing_pmu_is_said_once_without_nested_parentheses() {
        let detail = "no hardware PMU; this looks like a virtual machine (sysfs lists only: \
                      breakpoint msr software tracepoint uprobe)";
        let why = crate::collect::no_cycles(detail);
        assert_eq!(
            why,
            "no hardware PMU, so no cycles; this looks like a virtual machine (sysfs lists only \
             breakpoint msr software tracepoint uprobe)"
        );
        assert_eq!(
            crate::collect::no_cycles("the kernel said no"),
            "cycles cannot be counted here: the kernel said no"
        );
    }

    #[test]
    fn a_mapped_file_is_read_through_the_door_and_a_link_is_not_followed() {
        let dir = std::env::temp_dir().join(format!("doctor-link-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let exe = std::env::current_exe().unwrap();
        let copy = dir.join("lib.so");
        fs::copy(&exe, &copy).unwrap();
        let link = dir.join("link.so");
        let _ = fs::remove_file(&link);
        std::os::unix::fs::symlink(&copy, &link).unwrap();
        let (copy, link) = (copy.to_str().unwrap(), link.to_str().unwrap());
        let mapped = [
            Mapped::new(link, 3),
            Mapped::new(copy, 7),
            Mapped::new("[kernel]", 1),
            Mapped::new("[vdso]", 0),
        ];
        let r = files(&mapped, None, "11 samples");
        // What is not a file and has no samples is left out; what is not a file has no checks.
        assert_eq!(r.files.len(), 3, "{r}");
        assert!(r.get("[kernel]").unwrap().checks.is_empty());
        let l = r.get(link).unwrap();
        assert_eq!(l.checks.len(), 1, "{r}");
        assert_eq!(
            (l.checks[0].name.as_str(), l.checks[0].status),
            ("file", Status::Warn)
        );
        assert!(
            l.checks[0].detail.contains("without following a link"),
            "{r}"
        );
        // The file itself: every check, by the file's name (its path heads the block).
        let c = r.get(copy).unwrap();
        let names: Vec<&str> = c.checks.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "symbols",
                "unwind tables",
                "frame pointers",
                "build id",
                "debug file"
            ]
        );
        assert!(
            c.get("symbols").unwrap().detail.starts_with("lib.so has"),
            "{r}"
        );
        let shown = r.to_string();
        assert!(shown.starts_with("2 executable files mapped, by their share of 11 samples:\n"));
        assert!(shown.contains(&format!("\n  27.3%  {link}\n")), "{shown}");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn prologues_with_and_without_frame_pointers() {
        assert!(sets_frame_pointer(62, &[0x55, 0x48, 0x89, 0xe5, 0x90]));
        assert!(sets_frame_pointer(
            62,
            &[0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x48, 0x89, 0xe5]
        ));
        assert!(!sets_frame_pointer(62, &[0x48, 0x83, 0xec, 0x08]));
        // stp x29, x30, [sp, #-16]!; mov x29, sp
        let a64 = [0xa9bf7bfdu32, 0x910003fd]
            .iter()
            .flat_map(|i| i.to_le_bytes())
            .collect::<Vec<_>>();
        assert!(sets_frame_pointer(183, &a64));
        assert!(!sets_frame_pointer(183, &0xd65f03c0u32.to_le_bytes()));
    }
}
