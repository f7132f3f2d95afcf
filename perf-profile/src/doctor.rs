//! A preflight check: what will and will not work here, and what to change, before a capture.
//!
//! [`doctor`] reads the kernel's settings and this process's privileges and, for a target binary,
//! its ELF file; it opens one counter to see whether a hardware PMU exists, and changes nothing
//! (it does not mount tracefs). Each [`Check`] says what was found, what it means and how to fix
//! it:
//!
//! - `perf_event_paranoid` and the capabilities that override it (`CAP_PERFMON`, `CAP_SYS_ADMIN`);
//! - the ring buffers' locked memory: `perf_event_mlock_kb` per CPU plus `RLIMIT_MEMLOCK`, unless
//!   `CAP_IPC_LOCK` (the trap of samply#25: `mmap` fails with `EPERM` although the events opened);
//! - `kptr_restrict` (whether kernel frames can be named);
//! - tracefs (off-CPU profiles sample `sched:sched_switch`, else the `context-switches` software
//!   event);
//! - a hardware PMU, or the `cpu-clock` fallback;
//! - for a binary: frame pointers (else `-g fp` stacks are truncated), unwind tables
//!   (`.eh_frame`, for DWARF unwinding), a GNU build id (for symbolization elsewhere), symbols.

use std::fmt;
use std::fs::{self, File};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use perf_event::config::{Opts, Proc};
use perf_event::count::Counter;
use perf_event::event::hw::Hardware;

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

/// Capabilities of this process (`CapEff` of `/proc/self/status`) that perf cares about.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Caps {
    root: bool,
    perfmon: bool,
    sys_admin: bool,
    ipc_lock: bool,
    syslog: bool,
}

const CAP_IPC_LOCK: u32 = 14;
const CAP_SYS_ADMIN: u32 = 21;
const CAP_SYSLOG: u32 = 34;
const CAP_PERFMON: u32 = 38;

fn parse_caps(status: &str) -> Caps {
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::trim)
    };
    let eff = field("CapEff:")
        .and_then(|v| u64::from_str_radix(v, 16).ok())
        .unwrap_or(0);
    let euid = field("Uid:")
        .and_then(|v| v.split_whitespace().nth(1))
        .and_then(|v| v.parse::<u32>().ok());
    let has = |bit: u32| eff & (1u64 << bit) != 0;
    Caps {
        root: euid == Some(0),
        perfmon: has(CAP_PERFMON),
        sys_admin: has(CAP_SYS_ADMIN),
        ipc_lock: has(CAP_IPC_LOCK),
        syslog: has(CAP_SYSLOG),
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
    let privileged = caps.root || caps.perfmon || caps.sys_admin;
    let who = if caps.root {
        "root".to_owned()
    } else if caps.perfmon {
        "CAP_PERFMON".into()
    } else if caps.sys_admin {
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
    let exempt = caps.root || caps.ipc_lock || paranoid.is_some_and(|p| p < 0);
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
                if caps.syslog { "" } else { " (no CAP_SYSLOG)" }
            ),
            fix: Some(
                "`sysctl kernel.kptr_restrict=0`, or run as root with kptr_restrict 1".into(),
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
            fix: Some("run as root (tracefs is often root-only)".into()),
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
            detail: format!("no cycles counter ({detail}): profiles sample the cpu-clock timer instead (as perf does)"),
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

/// An ELF section header, as far as needed.
#[derive(Clone, Debug)]
struct Section {
    name: String,
    ty: u32,
    addr: u64,
    offset: u64,
    size: u64,
    link: u32,
}

/// An ELF file's sections, symbols and code, read as little as needed.
struct Elf {
    file: File,
    is64: bool,
    machine: u16,
    sections: Vec<Section>,
}

/// What is read of an ELF table at most.
const MAX_TABLE: u64 = 64 << 20;

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

impl Elf {
    fn open(path: &Path) -> Option<Self> {
        let mut file = File::open(path).ok()?;
        let mut h = [0u8; 64];
        file.read_exact(&mut h).ok()?;
        if &h[..4] != b"\x7fELF" || h[5] != 1 {
            return None; // Not ELF, or big-endian.
        }
        let is64 = h[4] == 2;
        let u16_at = |o: usize| u16::from_le_bytes([h[o], h[o + 1]]);
        let machine = u16_at(18);
        let (shoff, shentsize, shnum, shstrndx) = if is64 {
            (le64(&h, 40)?, u16_at(58), u16_at(60), u16_at(62))
        } else {
            (u64::from(le32(&h, 32)?), u16_at(46), u16_at(48), u16_at(50))
        };
        let mut elf = Self {
            file,
            is64,
            machine,
            sections: Vec::new(),
        };
        let table = elf.read(shoff, u64::from(shentsize) * u64::from(shnum))?;
        let mut raw = Vec::new();
        for e in table.chunks_exact(usize::from(shentsize).max(1)) {
            let (name, ty) = (le32(e, 0)?, le32(e, 4)?);
            let (addr, offset, size, link) = if is64 {
                (le64(e, 16)?, le64(e, 24)?, le64(e, 32)?, le32(e, 40)?)
            } else {
                (
                    u64::from(le32(e, 12)?),
                    u64::from(le32(e, 16)?),
                    u64::from(le32(e, 20)?),
                    le32(e, 24)?,
                )
            };
            raw.push((name, ty, addr, offset, size, link));
        }
        let &(_, _, _, stroff, strsize, _) = raw.get(usize::from(shstrndx))?;
        let names = elf.read(stroff, strsize)?;
        for (name, ty, addr, offset, size, link) in raw {
            elf.sections.push(Section {
                name: c_str(&names, name as usize),
                ty,
                addr,
                offset,
                size,
                link,
            });
        }
        Some(elf)
    }

    fn read(&mut self, off: u64, len: u64) -> Option<Vec<u8>> {
        if len > MAX_TABLE {
            return None;
        }
        self.file.seek(SeekFrom::Start(off)).ok()?;
        let mut buf = vec![0u8; usize::try_from(len).ok()?];
        self.file.read_exact(&mut buf).ok()?;
        Some(buf)
    }

    fn has(&self, name: &str) -> bool {
        self.sections.iter().any(|s| s.name == name)
    }

    /// The functions of `.symtab` (else `.dynsym`) of 16 bytes or more, but the C runtime's:
    /// their addresses.
    fn functions(&mut self) -> Vec<u64> {
        const SHT_SYMTAB: u32 = 2;
        const SHT_DYNSYM: u32 = 11;
        const STT_FUNC: u8 = 2;
        let table = self
            .sections
            .iter()
            .find(|s| s.ty == SHT_SYMTAB)
            .or_else(|| self.sections.iter().find(|s| s.ty == SHT_DYNSYM))
            .cloned();
        let Some(table) = table else {
            return Vec::new();
        };
        let Some(data) = self.read(table.offset, table.size) else {
            return Vec::new();
        };
        let strtab = self.sections.get(table.link as usize).cloned();
        let names = strtab
            .and_then(|t| self.read(t.offset, t.size))
            .unwrap_or_default();
        let ent = if self.is64 { 24 } else { 16 };
        let mut out = Vec::new();
        for s in data.chunks_exact(ent) {
            let parsed = if self.is64 {
                (|| Some((le32(s, 0)?, s[4], le64(s, 8)?, le64(s, 16)?)))()
            } else {
                (|| {
                    Some((
                        le32(s, 0)?,
                        s[12],
                        u64::from(le32(s, 4)?),
                        u64::from(le32(s, 8)?),
                    ))
                })()
            };
            let Some((name, info, value, size)) = parsed else {
                continue;
            };
            if info & 0xf == STT_FUNC
                && value != 0
                && size >= 16
                && !CRT_FUNCTIONS.contains(&c_str(&names, name as usize).as_str())
            {
                out.push(value);
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The first `n` bytes of the code at virtual address `addr`.
    fn code_at(&mut self, addr: u64, n: u64) -> Option<Vec<u8>> {
        const SHT_PROGBITS: u32 = 1;
        let s = self
            .sections
            .iter()
            .find(|s| {
                s.ty == SHT_PROGBITS && s.addr != 0 && addr >= s.addr && addr + n <= s.addr + s.size
            })?
            .clone();
        self.read(s.offset + (addr - s.addr), n)
    }
}

/// The NUL-terminated string at `at` of a string table.
fn c_str(table: &[u8], at: usize) -> String {
    let s = table.get(at..).unwrap_or_default();
    String::from_utf8_lossy(&s[..s.iter().position(|&b| b == 0).unwrap_or(s.len())]).into_owned()
}

fn le32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn le64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
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

/// Checks of the binary at `path`.
fn binary_checks(path: &Path) -> Vec<Check> {
    let shown = path.display();
    let Some(mut elf) = Elf::open(path) else {
        return vec![Check {
            name: "binary".into(),
            status: Status::Warn,
            detail: format!("{shown} is not a little-endian ELF file that can be read: its frames may not be named"),
            fix: None,
        }];
    };
    let mut out = Vec::new();
    // Frame pointers: the share of sizeable functions whose prologue sets one up.
    let funcs = elf.functions();
    let step = (funcs.len() / 2000).max(1);
    let (mut with, mut seen) = (0u64, 0u64);
    for &addr in funcs.iter().step_by(step) {
        if let Some(code) = elf.code_at(addr, 16) {
            seen += 1;
            if sets_frame_pointer(elf.machine, &code) {
                with += 1;
            }
        }
    }
    let fp = match (with * 100).checked_div(seen) {
        None => Check {
            name: "frame pointers".into(),
            status: Status::Warn,
            detail: format!("{shown} has no function symbols to look at (stripped): cannot tell"),
            fix: None,
        },
        Some(share) => {
            let detail =
                format!("{with} of {seen} functions of {shown} set up a frame pointer ({share}%)");
            if share >= 80 {
                Check {
                    name: "frame pointers".into(),
                    status: Status::Ok,
                    detail,
                    fix: None,
                }
            } else {
                Check {
                    name: "frame pointers".into(),
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
    };
    out.push(fp);
    let eh = elf.has(".eh_frame");
    let hdr = elf.has(".eh_frame_hdr");
    let dbg = elf.has(".debug_frame");
    out.push(if (eh && hdr) || dbg {
        Check {
            name: "unwind tables".into(),
            status: Status::Ok,
            detail: format!(
                "{shown} has {}: -g dwarf can unwind it",
                [(eh, ".eh_frame"), (hdr, ".eh_frame_hdr"), (dbg, ".debug_frame")]
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
    });
    out.push(match crate::maps::build_id::read(path) {
        Some(id) => Check {
            name: "build id".into(),
            status: Status::Ok,
            detail: format!(
                "{shown} has GNU build id {}",
                id.iter().map(|b| format!("{b:02x}")).collect::<String>()
            ),
            fix: None,
        },
        None => Check {
            name: "build id".into(),
            status: Status::Warn,
            detail: format!("{shown} has no GNU build id: a backend cannot match it to its debug info, and a rebuilt file is not noticed"),
            fix: Some("link with -Wl,--build-id".into()),
        },
    });
    let symtab = elf.has(".symtab");
    let debug = elf.has(".debug_info");
    out.push(Check {
        name: "symbols".into(),
        status: if symtab || debug {
            Status::Ok
        } else {
            Status::Warn
        },
        detail: format!(
            "{shown}: {}{}",
            if symtab {
                ".symtab present"
            } else {
                "no .symtab (stripped): only exported functions are named"
            },
            if elf.has(".debug_info") {
                ", DWARF line info"
            } else if elf.has(".gnu_debuglink") {
                ", a .gnu_debuglink to separate debug info"
            } else {
                ", no DWARF: no file:line"
            }
        ),
        fix: (!symtab && !debug).then(|| {
            "install the package's debug symbols (-dbg/-dbgsym/-debuginfo), or do not strip".into()
        }),
    });
    out
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
            c.root && c.perfmon && c.ipc_lock && !c.sys_admin && !c.syslog,
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
            ipc_lock: true,
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
