//! The crate's error type, and the diagnosis that turns a bare errno from `perf_event_open(2)` into a
//! message that says what to change.

use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use perf_sys as sys;

use crate::config::Target;
use crate::sys::{has_cpu_pmu, online_cpus, paranoid, pmu_name, pmus, KernelVersion};

/// A `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong opening, controlling or reading a perf event.
///
/// Opening errors are diagnosed: the message names what was refused and what would work (the
/// `perf_event_paranoid` level, a missing PMU, an option newer than the running kernel, ...).
/// `?` converts it into [`io::Error`] for I/O code; the message is kept.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// `EACCES`/`EPERM`: the kernel refused the event for lack of privilege.
    #[error("{event}: permission denied ({source}); {hint}")]
    Permission {
        /// The event that was refused.
        event: String,
        /// `/proc/sys/kernel/perf_event_paranoid`, when readable.
        paranoid: Option<i32>,
        /// What would work.
        hint: String,
        /// The errno.
        source: io::Error,
    },
    /// `ENOENT`/`EOPNOTSUPP`: the PMU or the event does not exist here.
    #[error("{event}: {detail} ({source})")]
    NotSupported {
        /// The event that was refused.
        event: String,
        /// Which PMU or event is missing.
        detail: String,
        /// The errno.
        source: io::Error,
    },
    /// `EINVAL`/`E2BIG` on an option the running kernel does not know.
    #[error("{event}: {option} requires Linux {since}; this kernel is {running} ({source})")]
    KernelTooOld {
        /// The event that was refused.
        event: String,
        /// The option (attr field or bit) that is newer than the kernel.
        option: &'static str,
        /// The first Linux version that has it.
        since: KernelVersion,
        /// The running kernel's release (`uname -r`).
        running: String,
        /// The errno.
        source: io::Error,
    },
    /// A cgroup target (`PERF_FLAG_PID_CGROUP`) was refused: the directory is not a cgroup the
    /// kernel can count in (`EBADF`), or the kernel has no perf_event state for it (`ENOENT`).
    #[error("{event}: cannot count in cgroup {path}: {detail} ({source})")]
    Cgroup {
        /// The event that was refused.
        event: String,
        /// The cgroup directory, as `/proc/self/fd` names it (or `the target cgroup` when unknown).
        path: String,
        /// What is wrong and what would work.
        detail: String,
        /// The errno.
        source: io::Error,
    },
    /// `EMFILE`: the process ran out of file descriptors.
    #[error(
        "too many open files: RLIMIT_NOFILE is {soft} (hard limit {hard}); every counter is one fd. \
         Raise the limit (`ulimit -n`, setrlimit) or open fewer counters ({source})"
    )]
    TooManyFiles {
        /// The soft limit, or `unlimited`.
        soft: String,
        /// The hard limit, or `unlimited`.
        hard: String,
        /// The errno.
        source: io::Error,
    },
    /// `ESRCH`: the target process or thread does not exist.
    #[error("no such process: pid {pid} does not exist (or has exited) ({source})")]
    NoSuchProcess {
        /// The pid that was asked for.
        pid: i32,
        /// The errno.
        source: io::Error,
    },
    /// The CPU asked for is not online (or does not exist).
    #[error("CPU {cpu} is not online; online CPUs: {online} ({source})")]
    BadCpu {
        /// The CPU that was asked for.
        cpu: i32,
        /// The online CPUs, as a list like `0-3`.
        online: String,
        /// The errno.
        source: io::Error,
    },
    /// `ENOSPC` on a breakpoint: every debug register is taken.
    #[error(
        "{event}: no free hardware breakpoint slot (the CPU has a few debug registers, 4 on x86, \
         shared by every breakpoint of the task) ({source})"
    )]
    NoBreakpointSlot {
        /// The event that was refused.
        event: String,
        /// The errno.
        source: io::Error,
    },
    /// Any other refusal by `perf_event_open(2)`.
    #[error("{event}: {detail} ({source})")]
    Open {
        /// The event that was refused.
        event: String,
        /// What is known about the cause.
        detail: String,
        /// The errno.
        source: io::Error,
    },
    /// A pinned counter could not be kept on the PMU and is in error state: `read` returns end of
    /// file until it is re-enabled. The count would be stale, so none is returned.
    #[error(
        "the pinned counter is in error state: the PMU could not keep it scheduled (another pinned or \
         exclusive event took the counters); disable and re-enable it, or do not pin it"
    )]
    PinnedCounterInError,
    /// `read` returned fewer bytes than the read format implies.
    #[error("short read from a perf event: expected {expected} bytes, got {got}")]
    ShortRead {
        /// Bytes the read format implies.
        expected: usize,
        /// Bytes returned.
        got: usize,
    },
    /// Text that names an event (`"cpu/event=0x3c/"`, `"sched:sched_switch"`) could not be resolved.
    #[error("cannot use event {input:?}: {reason}")]
    Parse {
        /// The text.
        input: String,
        /// Why.
        reason: String,
    },
    /// A system call other than the open failed (an ioctl, a read, a sysfs file).
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: io::Error,
    },
    /// A ring buffer could not be mapped or read (perf-core's explanation: the locked-memory
    /// budget, EBUSY for a redirected counter, a corrupt ring...).
    #[error(transparent)]
    Ring(#[from] perf_core::Error),
    /// The counter already has a [`Sampler`](crate::sample::Sampler): a ring has one consumer.
    #[error(
        "this counter already has a Sampler (a ring buffer has one consumer); use that one, or drop it \
         before making another"
    )]
    SamplerExists,
    /// A sampling operation that does not fit the sampler or counter, with what to do instead.
    #[error("{0}")]
    Sampling(String),
}

impl Error {
    pub(crate) fn io(what: impl Into<String>, source: io::Error) -> Self {
        Self::Io {
            what: what.into(),
            source,
        }
    }

    /// The errno behind this error, when there is one.
    pub fn raw_os_error(&self) -> Option<i32> {
        self.source_io().and_then(io::Error::raw_os_error)
    }

    /// The [`io::ErrorKind`] that best describes this error.
    pub fn kind(&self) -> io::ErrorKind {
        match self {
            Self::PinnedCounterInError => io::ErrorKind::Other,
            Self::ShortRead { .. } => io::ErrorKind::UnexpectedEof,
            Self::Parse { .. } => io::ErrorKind::InvalidInput,
            _ => self
                .source_io()
                .map_or(io::ErrorKind::Other, io::Error::kind),
        }
    }

    fn source_io(&self) -> Option<&io::Error> {
        match self {
            Self::Permission { source, .. }
            | Self::NotSupported { source, .. }
            | Self::KernelTooOld { source, .. }
            | Self::Cgroup { source, .. }
            | Self::TooManyFiles { source, .. }
            | Self::NoSuchProcess { source, .. }
            | Self::BadCpu { source, .. }
            | Self::NoBreakpointSlot { source, .. }
            | Self::Open { source, .. }
            | Self::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<Error> for io::Error {
    fn from(e: Error) -> Self {
        io::Error::new(e.kind(), e)
    }
}

impl From<std::convert::Infallible> for Error {
    fn from(e: std::convert::Infallible) -> Self {
        match e {}
    }
}

/// What was asked of `perf_event_open(2)`, for the diagnosis.
pub(crate) struct OpenRequest<'a> {
    pub event: &'a str,
    pub attr: &'a sys::perf_event_attr,
    pub pid: i32,
    pub cpu: i32,
    pub cgroup: bool,
}

/// Turns the errno of a failed open on `target` into an [`Error`] that explains it; a refused
/// cgroup is named by its path.
pub(crate) fn diagnose_open_on(source: io::Error, req: &OpenRequest<'_>, target: &Target) -> Error {
    let path = match &target.cgroup {
        Some(Ok(fd)) => std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok(),
        _ => None,
    };
    diagnose(source, req, path)
}

fn diagnose(source: io::Error, req: &OpenRequest<'_>, cgroup_path: Option<PathBuf>) -> Error {
    let event = req.event.to_owned();
    let errno = source.raw_os_error().unwrap_or(0);
    if req.cgroup {
        if let Some(detail) = cgroup_detail(req, errno, cgroup_path.as_deref()) {
            return Error::Cgroup {
                event,
                path: cgroup_path.map_or_else(
                    || "(the target cgroup)".to_owned(),
                    |p| p.display().to_string(),
                ),
                detail,
                source,
            };
        }
    }
    match errno {
        libc::EACCES | libc::EPERM => {
            let paranoid = paranoid();
            let hint = permission_hint(req, paranoid);
            Error::Permission {
                event,
                paranoid,
                hint,
                source,
            }
        }
        libc::ENOENT | libc::EOPNOTSUPP => {
            // An event kind newer than the kernel is unknown to its PMU: ENOENT, not EINVAL.
            if let Some((option, since, running)) = too_new_event(req.attr) {
                return Error::KernelTooOld {
                    event,
                    option,
                    since,
                    running,
                    source,
                };
            }
            Error::NotSupported {
                event,
                detail: missing_detail(req, errno),
                source,
            }
        }
        libc::EINVAL | libc::E2BIG | libc::ENODEV => {
            if let Some((option, since, running)) = too_new_option(req.attr) {
                return Error::KernelTooOld {
                    event,
                    option,
                    since,
                    running,
                    source,
                };
            }
            if req.cpu >= 0 {
                if let Ok(online) = online_cpus() {
                    if !online.contains(&(req.cpu as u32)) {
                        return Error::BadCpu {
                            cpu: req.cpu,
                            online: cpu_list(&online),
                            source,
                        };
                    }
                }
            }
            Error::Open {
                event,
                detail: invalid_detail(req, errno),
                source,
            }
        }
        libc::EMFILE => {
            let lim = rustix::process::getrlimit(rustix::process::Resource::Nofile);
            let show = |v: Option<u64>| v.map_or_else(|| "unlimited".to_owned(), |v| v.to_string());
            Error::TooManyFiles {
                soft: show(lim.current),
                hard: show(lim.maximum),
                source,
            }
        }
        libc::ESRCH => Error::NoSuchProcess {
            pid: req.pid,
            source,
        },
        libc::ENOSPC if req.attr.type_ == sys::PERF_TYPE_BREAKPOINT => {
            Error::NoBreakpointSlot { event, source }
        }
        libc::EBUSY => Error::Open {
            event,
            detail: "the PMU is busy: an exclusive or pinned event, or another user (e.g. a \
                     hypervisor or the NMI watchdog), holds the counters it needs"
                .into(),
            source,
        },
        _ => Error::Open {
            event,
            detail: "perf_event_open failed".into(),
            source,
        },
    }
}

fn permission_hint(req: &OpenRequest<'_>, paranoid: Option<i32>) -> String {
    let level = paranoid.map_or_else(|| "unreadable".to_owned(), |p| p.to_string());
    let mut hint = format!("perf_event_paranoid is {level}");
    let cpu_wide = req.pid == -1 || req.cgroup;
    let kernel_counted = req.attr.exclude_kernel() == 0;
    let uprobe = pmu_name(req.attr.type_).is_some_and(|n| n == "uprobe" || n == "kprobe");
    if uprobe {
        hint.push_str(
            "; kprobe/uprobe events need CAP_PERFMON (or CAP_SYS_ADMIN) at every paranoid level",
        );
    } else if paranoid.is_some_and(|p| p >= 3) {
        hint.push_str("; level 3 forbids every unprivileged perf event");
    } else if cpu_wide && paranoid.is_some_and(|p| p >= 1) {
        hint.push_str(
            "; CPU-wide and cgroup counting needs perf_event_paranoid <= 0 (or CAP_PERFMON)",
        );
    } else if kernel_counted && paranoid.is_some_and(|p| p >= 2) {
        hint.push_str(
            "; counting kernel space needs perf_event_paranoid <= 1: set `opts.exclude.kernel = true` \
             (and `exclude.hv`) to count user space only",
        );
    } else if req.attr.type_ == sys::PERF_TYPE_TRACEPOINT {
        hint.push_str("; this tracepoint (or its RAW data) needs a lower paranoid level");
    } else if req.pid > 0 {
        hint.push_str("; observing another user's process needs ptrace access to it");
    }
    hint.push_str(
        "; what works everywhere: run with CAP_PERFMON (Linux 5.8+) or CAP_SYS_ADMIN, or lower \
         the level with `sysctl kernel.perf_event_paranoid=<n>`",
    );
    hint
}

fn missing_detail(req: &OpenRequest<'_>, errno: i32) -> String {
    let ty = req.attr.type_;
    let hw = matches!(
        ty,
        sys::PERF_TYPE_HARDWARE | sys::PERF_TYPE_HW_CACHE | sys::PERF_TYPE_RAW
    );
    if hw && !has_cpu_pmu() {
        let names: Vec<String> = pmus().into_iter().map(|(n, _)| n).collect();
        return format!(
            "no hardware PMU; this looks like a virtual machine (sysfs lists only: {})",
            names.join(" ")
        );
    }
    // The CPU PMU by its sysfs name (`cpu`, `armv8_pmuv3_0`, ...): the generic types go to it.
    let cpu_names: Vec<String> = pmus()
        .into_iter()
        .map(|(n, _)| n)
        .filter(|n| crate::sys::is_cpu_pmu(n))
        .collect();
    let cpu_pmu = || format!("the hardware PMU {}", cpu_names.join("/"));
    if hw && errno == libc::ENOENT && ty != sys::PERF_TYPE_RAW {
        let what = if ty == sys::PERF_TYPE_HARDWARE {
            "generic hardware event"
        } else {
            "generic cache event"
        };
        let pmu_dir = match cpu_names.as_slice() {
            [one] => one.as_str(),
            _ => "<pmu>",
        };
        return format!(
            "{} does not count this {what} (config {:#x}); the events it has are listed in {}/{pmu_dir}/events",
            cpu_pmu(),
            req.attr.config,
            crate::sys::PMU_DIR
        );
    }
    let pmu = match ty {
        sys::PERF_TYPE_HARDWARE => cpu_pmu(),
        sys::PERF_TYPE_SOFTWARE => "the software PMU".to_owned(),
        sys::PERF_TYPE_TRACEPOINT => "the tracepoint PMU".to_owned(),
        sys::PERF_TYPE_HW_CACHE => format!("{} (cache events)", cpu_pmu()),
        sys::PERF_TYPE_RAW => format!("{} (raw events)", cpu_pmu()),
        sys::PERF_TYPE_BREAKPOINT => "the breakpoint PMU".to_owned(),
        t => match pmu_name(t) {
            Some(n) => format!("PMU {n:?} (type {t})"),
            None => {
                return format!("no PMU has type {t} (see {})", crate::sys::PMU_DIR);
            }
        },
    };
    if errno == libc::EOPNOTSUPP {
        if req.attr.sample_type & u64::from(sys::PERF_SAMPLE_BRANCH_STACK) != 0 {
            return format!("{pmu} has no branch stack (LBR) support");
        }
        if req.attr.aux_output() != 0 {
            return format!("{pmu} cannot take aux_output (needs an AUX group leader)");
        }
        return format!("{pmu} does not support this event or option");
    }
    format!("{pmu} does not know event config {:#x}", req.attr.config)
}

fn invalid_detail(req: &OpenRequest<'_>, errno: i32) -> String {
    let a = req.attr;
    if let Some(detail) = invalid_option_detail(a, errno) {
        return detail;
    }
    let excl = a.exclude_user() | a.exclude_kernel() | a.exclude_hv() | a.exclude_idle();
    let builtin = a.type_ < sys::PERF_TYPE_MAX;
    if a.type_ == sys::PERF_TYPE_BREAKPOINT {
        #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
        if a.bp_type == sys::HW_BREAKPOINT_R {
            return "x86 has no read-only breakpoints; use a read/write (Rw) breakpoint".into();
        }
        if cfg!(target_arch = "aarch64") {
            return "the breakpoint was refused: on arm64 a data breakpoint must lie inside one \
                    aligned 8-byte doubleword (address % 8 + length <= 8) and an execution \
                    breakpoint needs a 4-byte aligned user-space address"
                .into();
        }
        return "the breakpoint was refused: check the address (user space, aligned to its \
                length) and the length (1, 2, 4 or 8 for data, the instruction size for X)"
            .into();
    }
    if !builtin && excl != 0 {
        if let Some(n) = pmu_name(a.type_) {
            return format!(
                "invalid argument; PMU {n:?} may reject exclude_* bits (the msr PMU does): \
                 try without `opts.exclude`"
            );
        }
    }
    if errno == libc::E2BIG {
        return "the kernel's perf_event_attr is smaller than ours and a field it lacks is set"
            .into();
    }
    if req.cgroup && req.cpu < 0 {
        return "a cgroup target needs a CPU: open one counter per CPU".into();
    }
    if req.pid == -1 && req.cpu < 0 {
        return "pid -1 (any process) needs a CPU".into();
    }
    "invalid argument: the kernel refused this combination of options".into()
}

/// `/proc/sys/kernel/perf_event_max_sample_rate`, when readable.
fn max_sample_rate() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_max_sample_rate")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The kernel's `EINVAL` rules on option combinations (`perf_copy_attr`, `perf_event_open`),
/// checked against `a`: the first one `a` breaks, as advice. `None` when none applies.
fn invalid_option_detail(a: &sys::perf_event_attr, errno: i32) -> Option<String> {
    if errno != libc::EINVAL {
        return None;
    }
    let st = a.sample_type;
    if a.freq() != 0 {
        if let Some(max) = max_sample_rate() {
            let freq = a.sample_period_or_freq();
            if freq > max {
                return Some(format!(
                    "sample frequency {} Hz is above kernel.perf_event_max_sample_rate ({max} Hz): \
                     lower SampleOn::Freq, or raise the limit with `sysctl \
                     kernel.perf_event_max_sample_rate=<hz>`",
                    freq
                ));
            }
        }
    }
    if a.sigtrap() != 0 && a.remove_on_exec() == 0 {
        return Some(
            "sigtrap_on_sample (sigtrap) needs on_execve = Some(OnExecve::Remove) \
             (remove_on_exec), so that no signal reaches a program after execve"
                .into(),
        );
    }
    let read = u64::from(sys::PERF_SAMPLE_READ);
    let tid = u64::from(sys::PERF_SAMPLE_TID);
    if a.inherit() != 0 && st & read != 0 && st & tid == 0 {
        return Some(
            "an inherited counter (opts.inherit) with sample_format.stat (PERF_SAMPLE_READ) \
             needs record_id_format.task = true (PERF_SAMPLE_TID; Linux 6.12+, older kernels \
             refuse inherit with PERF_SAMPLE_READ altogether)"
                .into(),
        );
    }
    // Bits above the newest this crate knows; options_set explains the known new ones.
    let unknown_sample = st & !(u64::from(sys::PERF_SAMPLE_WEIGHT_STRUCT) * 2 - 1);
    if unknown_sample != 0 {
        return Some(format!(
            "sample_type has bits no kernel known to this crate defines ({unknown_sample:#x})"
        ));
    }
    let unknown_read = a.read_format & !(u64::from(sys::PERF_FORMAT_LOST) * 2 - 1);
    if unknown_read != 0 {
        return Some(format!(
            "read_format has bits no kernel known to this crate defines ({unknown_read:#x})"
        ));
    }
    if a.type_ == sys::PERF_TYPE_TRACEPOINT {
        return Some(format!(
            "no tracepoint has id {} (ids are in tracefs, events/<system>/<name>/id; \
             Tracepoint::by_name looks them up)",
            a.config
        ));
    }
    None
}

/// Why a cgroup target was refused, when the errno points at the cgroup rather than the event.
///
/// `EBADF`: the fd is not a cgroup directory. `ENOENT`: either the event is unknown (then the
/// same event opened on the calling thread fails alike) or the cgroup has no perf_event state.
fn cgroup_detail(req: &OpenRequest<'_>, errno: i32, path: Option<&Path>) -> Option<String> {
    let shown = path.map_or_else(|| "the directory".to_owned(), |p| p.display().to_string());
    match errno {
        libc::EBADF => Some(format!(
            "{shown} is not a cgroup directory; open a directory of the cgroup v2 hierarchy \
             (usually under /sys/fs/cgroup) with File::open"
        )),
        libc::ENOENT => {
            // Tell an unknown event from a cgroup without perf_event state: open the same event,
            // disabled, on the calling thread. Only an ENOENT there blames the event.
            let mut probe = *req.attr;
            probe.set_disabled(1);
            probe.set_inherit(0);
            let flags = u64::from(sys::PERF_FLAG_FD_CLOEXEC);
            if let Err(e) = sys::perf_event_open(&probe, 0, -1, None, flags) {
                if e.raw_os_error() == Some(libc::ENOENT) {
                    return None;
                }
            }
            let v2 = path.is_some_and(|p| p.join("cgroup.controllers").exists());
            if path.is_some() && !v2 {
                return Some(format!(
                    "{shown} is not a cgroup v2 directory (it has no cgroup.controllers) and its \
                     hierarchy has no perf_event controller; use a cgroup of the v2 hierarchy \
                     (usually under /sys/fs/cgroup) or of a v1 hierarchy mounted with perf_event"
                ));
            }
            let root = path.and_then(cgroup_v2_root);
            let control = root.as_ref().map_or_else(
                || "the root cgroup's cgroup.subtree_control".to_owned(),
                |r| r.join("cgroup.subtree_control").display().to_string(),
            );
            let empty = root
                .as_ref()
                .and_then(|r| std::fs::read_to_string(r.join("cgroup.subtree_control")).ok())
                .is_some_and(|c| c.trim().is_empty());
            Some(format!(
                "the kernel has no perf_event state for this cgroup (cgroup v2 is required, and on \
                 v2 the implicit perf_event controller is set up only once something has written \
                 {control}{now}; systemd does at boot). Enable a controller there (e.g. \
                 `echo +pids > {control}`), then create the cgroup",
                now = if empty { ", which is empty" } else { "" },
            ))
        }
        _ => None,
    }
}

/// The top of the cgroup v2 hierarchy that holds `dir`: the highest ancestor with
/// `cgroup.controllers`.
fn cgroup_v2_root(dir: &Path) -> Option<PathBuf> {
    let mut root = None;
    let mut at = Some(dir);
    while let Some(d) = at {
        if !d.join("cgroup.controllers").exists() {
            break;
        }
        root = Some(d.to_path_buf());
        at = d.parent();
    }
    root
}

/// Formats CPUs as ranges: `0-3,5`.
pub(crate) fn cpu_list(cpus: &[u32]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < cpus.len() {
        let start = cpus[i];
        let mut end = start;
        while i + 1 < cpus.len() && cpus[i + 1] == end + 1 {
            i += 1;
            end = cpus[i];
        }
        if !out.is_empty() {
            out.push(',');
        }
        if start == end {
            out.push_str(&start.to_string());
        } else {
            out.push_str(&format!("{start}-{end}"));
        }
        i += 1;
    }
    out
}

/// The first option set in `attr` that the running kernel is too old for.
fn too_new_option(attr: &sys::perf_event_attr) -> Option<(&'static str, KernelVersion, String)> {
    let (running, release) = KernelVersion::running()?;
    options_set(attr)
        .into_iter()
        .filter(|(_, since)| *since > running)
        .max_by_key(|(_, since)| *since)
        .map(|(o, s)| (o, s, release))
}

/// Event kinds newer than Linux 4.0: `(type, config, name, since)`. The kernel refuses an unknown
/// one with `ENOENT` (the PMU does not know the config).
const NEW_EVENT_KINDS: &[(u32, u32, &str, KernelVersion)] = &[
    (
        sys::PERF_TYPE_SOFTWARE,
        sys::PERF_COUNT_SW_BPF_OUTPUT,
        "Software::BpfOutput (PERF_COUNT_SW_BPF_OUTPUT)",
        KernelVersion::new(4, 4),
    ),
    (
        sys::PERF_TYPE_SOFTWARE,
        sys::PERF_COUNT_SW_CGROUP_SWITCHES,
        "Software::CgroupSwitch (PERF_COUNT_SW_CGROUP_SWITCHES)",
        KernelVersion::new(5, 13),
    ),
];

/// The event kind of `attr`, when the running kernel is older than the version that added it.
///
/// Only used to explain a refusal the kernel reported: a kernel with the event backported accepts
/// it, and then nothing is refused.
fn too_new_event(attr: &sys::perf_event_attr) -> Option<(&'static str, KernelVersion, String)> {
    let (running, release) = KernelVersion::running()?;
    NEW_EVENT_KINDS
        .iter()
        .find(|(ty, config, _, since)| {
            attr.type_ == *ty && attr.config == u64::from(*config) && *since > running
        })
        .map(|&(_, _, name, since)| (name, since, release))
}

/// Every option in `attr` that needs a kernel newer than 4.0, with the version that added it.
pub(crate) fn options_set(a: &sys::perf_event_attr) -> Vec<(&'static str, KernelVersion)> {
    let v = KernelVersion::new;
    let mut out = Vec::new();
    let mut add = |on: bool, name: &'static str, since: KernelVersion| {
        if on {
            out.push((name, since));
        }
    };
    let st = a.sample_type;
    let s = |bit: u32| st & u64::from(bit) != 0;
    add(
        s(sys::PERF_SAMPLE_PHYS_ADDR),
        "sample_format.data_phys_addr (PERF_SAMPLE_PHYS_ADDR)",
        v(4, 14),
    );
    add(
        s(sys::PERF_SAMPLE_AUX),
        "sample_format.aux (PERF_SAMPLE_AUX)",
        v(5, 5),
    );
    add(
        s(sys::PERF_SAMPLE_CGROUP),
        "sample_format.cgroup (PERF_SAMPLE_CGROUP)",
        v(5, 7),
    );
    add(
        s(sys::PERF_SAMPLE_DATA_PAGE_SIZE),
        "sample_format.data_page_size (PERF_SAMPLE_DATA_PAGE_SIZE)",
        v(5, 11),
    );
    add(
        s(sys::PERF_SAMPLE_CODE_PAGE_SIZE),
        "sample_format.code_page_size (PERF_SAMPLE_CODE_PAGE_SIZE)",
        v(5, 11),
    );
    add(
        s(sys::PERF_SAMPLE_WEIGHT_STRUCT),
        "sample_format.weight = Vars (PERF_SAMPLE_WEIGHT_STRUCT)",
        v(5, 12),
    );
    add(
        a.read_format & u64::from(sys::PERF_FORMAT_LOST) != 0,
        "stat_format.lost_records (PERF_FORMAT_LOST)",
        v(6, 0),
    );
    add(a.use_clockid() != 0, "timer (use_clockid)", v(4, 1));
    add(
        a.context_switch() != 0,
        "extra_record.ctx_switch (context_switch)",
        v(4, 3),
    );
    add(a.write_backward() != 0, "write_backward", v(4, 7));
    add(a.namespaces() != 0, "extra_record.namespaces", v(4, 12));
    add(a.ksymbol() != 0, "extra_record.ksymbol", v(5, 1));
    add(a.bpf_event() != 0, "extra_record.bpf_event", v(5, 1));
    add(a.aux_output() != 0, "aux_output", v(5, 4));
    add(a.cgroup() != 0, "extra_record.cgroup", v(5, 7));
    add(a.text_poke() != 0, "extra_record.text_poke", v(5, 9));
    add(
        a.build_id() != 0,
        "extra_record.mmap.ext = Some(UseBuildId(true)) (build_id)",
        v(5, 12),
    );
    add(
        a.inherit_thread() != 0,
        "inherit = NewThread (inherit_thread)",
        v(5, 13),
    );
    add(
        a.remove_on_exec() != 0,
        "on_execve = Remove (remove_on_exec)",
        v(5, 13),
    );
    add(a.sigtrap() != 0, "sigtrap_on_sample (sigtrap)", v(5, 13));
    add(
        a.defer_callchain() != 0,
        "call_chain.defer_user (defer_callchain)",
        v(6, 19),
    );
    add(
        a.defer_output() != 0,
        "extra_record.call_chain_deferred (defer_output)",
        v(6, 19),
    );
    add(
        a.aux_watermark != 0,
        "wake_up.on_aux_bytes (aux_watermark)",
        v(4, 1),
    );
    add(
        a.sample_max_stack != 0,
        "call_chain.max_stack_frames (sample_max_stack)",
        v(4, 8),
    );
    add(
        a.aux_sample_size != 0,
        "sample_format.aux size (aux_sample_size)",
        v(5, 5),
    );
    add(
        a.sig_data != 0,
        "sigtrap_on_sample data (sig_data)",
        v(5, 13),
    );
    add(a.config3 != 0, "config3", v(6, 3));
    add(a.config4 != 0, "config4", v(6, 19));
    let aux_action = a.aux_action();
    add(
        aux_action & 1 != 0,
        "pause_aux (aux_start_paused)",
        v(6, 13),
    );
    add(
        aux_action & 2 != 0,
        "on_sample.aux = Pause (aux_pause)",
        v(6, 13),
    );
    add(
        aux_action & 4 != 0,
        "on_sample.aux = Resume (aux_resume)",
        v(6, 13),
    );
    let bst = a.branch_sample_type;
    let b =
        |bit: u32| st & u64::from(sys::PERF_SAMPLE_BRANCH_STACK) != 0 && bst & u64::from(bit) != 0;
    add(
        b(sys::PERF_SAMPLE_BRANCH_CALL_STACK),
        "branch call_stack",
        v(4, 1),
    );
    add(
        b(sys::PERF_SAMPLE_BRANCH_IND_JUMP),
        "branch ind_jump",
        v(4, 2),
    );
    add(b(sys::PERF_SAMPLE_BRANCH_CALL), "branch call", v(4, 4));
    add(
        b(sys::PERF_SAMPLE_BRANCH_NO_FLAGS),
        "branch entry_format.flags = false (NO_FLAGS)",
        v(4, 5),
    );
    add(
        b(sys::PERF_SAMPLE_BRANCH_NO_CYCLES),
        "branch entry_format.cycles = false (NO_CYCLES)",
        v(4, 5),
    );
    add(
        b(sys::PERF_SAMPLE_BRANCH_TYPE_SAVE),
        "branch entry_format.branch_type (TYPE_SAVE)",
        v(4, 14),
    );
    add(
        b(sys::PERF_SAMPLE_BRANCH_HW_INDEX),
        "lbr.hw_index (HW_INDEX)",
        v(5, 7),
    );
    add(
        b(sys::PERF_SAMPLE_BRANCH_PRIV_SAVE),
        "branch entry_format.branch_priv (PRIV_SAVE)",
        v(6, 1),
    );
    add(
        b(sys::PERF_SAMPLE_BRANCH_COUNTERS),
        "branch entry_format.counter (COUNTERS)",
        v(6, 8),
    );
    if a.type_ == sys::PERF_TYPE_BREAKPOINT {
        let len = a.config2();
        add(
            matches!(len, 3 | 5 | 6 | 7),
            "breakpoint length 3, 5, 6 or 7",
            v(4, 10),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_ranges() {
        assert_eq!(cpu_list(&[0, 1, 2, 3, 5, 7, 8]), "0-3,5,7-8");
        assert_eq!(cpu_list(&[0]), "0");
        assert_eq!(cpu_list(&[]), "");
    }
}
