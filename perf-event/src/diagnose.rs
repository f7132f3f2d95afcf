//! The diagnosis of a failed `perf_event_open(2)`: turns a bare errno into an [`Error`] that says
//! what to change (the option, the Linux version that added it, the sysctl, the capability).
//!
//! Depends on [`crate::error`] (the type it builds) and [`crate::sys`] (facts about the system);
//! neither depends back on it.

use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use perf_sys as sys;

use crate::config::{OutOfRange, Target};
use crate::error::Error;
use crate::sys::{has_cpu_pmu, online_cpus, paranoid, pmu_name, pmus};
use crate::version::KernelVersion;

/// What was asked of `perf_event_open(2)`, for the diagnosis.
pub(crate) struct OpenRequest<'a> {
    pub event: &'a str,
    pub attr: &'a sys::perf_event_attr,
    pub pid: i32,
    pub cpu: i32,
    pub cgroup: bool,
    /// The size of the kernel's own `perf_event_attr`, as it wrote it back on `E2BIG`.
    pub kernel_attr_size: Option<u32>,
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

/// The refusal of `target`, whose pid or CPU (`bad`) does not fit the syscall's `i32`.
pub(crate) fn out_of_range(bad: OutOfRange, target: &Target) -> Error {
    // CPU-wide and cgroup counting need a real CPU: "any CPU" is no way out for them.
    let needs_cpu = target.is_cgroup() || target.pid == -1;
    let (what, value) = match bad {
        OutOfRange::Pid(v) => ("pid", v),
        OutOfRange::Cpu(v) => ("CPU", v),
    };
    let wrapped = value as i32;
    let mut detail = format!(
        "perf_event_open takes a {what} as a signed 32-bit number (at most {}), and this one \
         would wrap to {wrapped}",
        i32::MAX
    );
    match (bad, wrapped) {
        (OutOfRange::Pid(_), -1) => detail.push_str(
            ", which means every task; to count every task on a CPU, use Proc::ALL with that Cpu",
        ),
        (OutOfRange::Cpu(_), -1) if needs_cpu => detail.push_str(
            ", which means any CPU; CPU-wide and cgroup counting need one CPU per counter: \
             open one per CPU (PerCpu does)",
        ),
        (OutOfRange::Cpu(_), -1) => {
            detail.push_str(", which means any CPU; to follow the task on every CPU, use Cpu::ALL")
        }
        _ => {}
    }
    match bad {
        OutOfRange::Pid(_) => {
            if let Some(max) = crate::sys::pid_max() {
                detail.push_str(&format!("; pids here are below {max} (kernel.pid_max)"));
            }
        }
        OutOfRange::Cpu(_) => {
            if let Ok(online) = online_cpus() {
                detail.push_str(&format!("; online CPUs: {}", cpu_list(&online)));
            }
        }
    }
    Error::TargetOutOfRange {
        what,
        value,
        detail,
    }
}

/// The kernel's largest `sample_stack_user`: below `USHRT_MAX` (a record's size is 16-bit) and a
/// multiple of 8.
const MAX_USER_STACK: u32 = 65528;

/// Checks `attr` against the rules every kernel applies the same way (`perf_copy_attr`,
/// `perf_event_open`: part of the ABI, not a version's feature), so that breaking one is
/// explained before the syscall rather than left to a bare `EINVAL`.
pub(crate) fn check_fixed_rules(event: &str, a: &sys::perf_event_attr) -> Result<(), Error> {
    let refuse = |detail: String| {
        Err(Error::InvalidOption {
            event: event.to_owned(),
            detail,
        })
    };
    if a.sample_type & u64::from(sys::PERF_SAMPLE_STACK_USER) != 0 {
        let size = a.sample_stack_user;
        let shown = format!(
            "sample_format.user_stack = Some(Size({size})) (sample_stack_user) is refused by every \
             kernel:"
        );
        if size > MAX_USER_STACK {
            return refuse(format!(
                "{shown} the size must be below 65535 (a record's size is a 16-bit field) and a \
                 multiple of 8, so at most Size({MAX_USER_STACK})"
            ));
        }
        if !size.is_multiple_of(8) {
            let down = size / 8 * 8;
            return refuse(format!(
                "{shown} the size must be a multiple of 8, e.g. Size({down}) or Size({})",
                down + 8
            ));
        }
    }
    let period = a.sample_period_or_freq();
    if a.freq() == 1 && period == 0 {
        return refuse(
            "sample_on = SampleOn::Freq(0) (freq with sample_freq 0) never samples: the kernel \
             takes a frequency of 0 as counting only, so no sampler could read it. Count with \
             SampleOn::Count(0) (the default), or sample at a frequency above 0, e.g. \
             SampleOn::Freq(1000)"
                .to_owned(),
        );
    }
    if a.freq() == 0 && period >> 63 != 0 {
        return refuse(format!(
            "sample_on = SampleOn::Count({period}) (sample_period) is refused by every kernel: \
             a sample period must be below 2^63 ({})",
            1u64 << 63
        ));
    }
    Ok(())
}

/// `/proc/sys/kernel/perf_event_max_stack`, when readable.
fn max_stack() -> Option<u32> {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_max_stack")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Why the kernel said `EOVERFLOW`: a call chain deeper than `kernel.perf_event_max_stack`
/// (`get_callchain_buffers`).
fn overflow_detail(a: &sys::perf_event_attr) -> Option<String> {
    if a.sample_type & u64::from(sys::PERF_SAMPLE_CALLCHAIN) == 0 {
        return None;
    }
    let frames = a.sample_max_stack;
    let limit = match max_stack() {
        Some(max) => format!("which is {max} here"),
        None => "unreadable here (127 unless changed)".to_owned(),
    };
    Some(format!(
        "call_chain.max_stack_frames = {frames} (sample_max_stack) is above \
         kernel.perf_event_max_stack, {limit}: ask for fewer frames (0 means that maximum), or \
         raise the limit with `sysctl kernel.perf_event_max_stack={frames}` (as root, while no \
         event with call chains is open)"
    ))
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
            let hint = permission_hint(req, paranoid, refuses_every_event);
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
                    detail: None,
                    source,
                };
            }
            Error::NotSupported {
                event,
                detail: missing_detail(req, errno),
                source,
            }
        }
        libc::E2BIG if req.kernel_attr_size.is_some_and(|k| k < req.attr.size) => {
            let kernel_size = req.kernel_attr_size.unwrap_or_default();
            let running = KernelVersion::running();
            let release = running.as_ref().map_or_else(
                || {
                    rustix::system::uname()
                        .release()
                        .to_string_lossy()
                        .into_owned()
                },
                |(_, r)| r.clone(),
            );
            let version = running.map(|(v, _)| v);
            too_big(event, req.attr, kernel_size, version, release, source)
        }
        libc::EINVAL | libc::E2BIG | libc::ENODEV => {
            if let Some((option, since, running)) = too_new_option(req.attr) {
                return Error::KernelTooOld {
                    event,
                    option,
                    since,
                    running,
                    detail: None,
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
        libc::EOVERFLOW => Error::Open {
            event,
            detail: overflow_detail(req.attr).unwrap_or_else(|| "perf_event_open failed".into()),
            source,
        },
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

/// Whether this kernel refuses every perf event to this process, as kernels carrying the
/// Debian/Android patch do at `perf_event_paranoid` 3 and above (mainline has no such level: above
/// 2 it acts as 2). Decided by what the kernel does, not by the level: the least any level allows,
/// user-space task-clock of this thread, is opened (and closed at once).
fn refuses_every_event() -> bool {
    let mut a = sys::perf_event_attr {
        type_: sys::PERF_TYPE_SOFTWARE,
        size: crate::config::attr::ATTR_SIZE,
        config: u64::from(sys::PERF_COUNT_SW_TASK_CLOCK),
        ..Default::default()
    };
    a.set_disabled(1);
    a.set_exclude_kernel(1);
    a.set_exclude_hv(1);
    let flags = u64::from(sys::PERF_FLAG_FD_CLOEXEC);
    match sys::perf_event_open_mut(&mut a, 0, -1, None, flags) {
        Ok(_fd) => false,
        Err(e) => matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM)),
    }
}

/// What the permission error should say; `refuses_everything` is asked only at level 3 and above
/// (see [`refuses_every_event`]).
fn permission_hint(
    req: &OpenRequest<'_>,
    paranoid: Option<i32>,
    refuses_everything: impl FnOnce() -> bool,
) -> String {
    let level = paranoid.map_or_else(|| "unreadable".to_owned(), |p| p.to_string());
    let mut hint = format!("perf_event_paranoid is {level}");
    let cpu_wide = req.pid == -1 || req.cgroup;
    let kernel_counted = req.attr.exclude_kernel() == 0;
    let uprobe = pmu_name(req.attr.type_).is_some_and(|n| n == "uprobe" || n == "kprobe");
    if uprobe {
        hint.push_str(
            "; kprobe/uprobe events need CAP_PERFMON (or CAP_SYS_ADMIN) at every paranoid level",
        );
    } else if paranoid.is_some_and(|p| p >= 3) && refuses_everything() {
        hint.push_str(
            "; this kernel refuses every perf event to unprivileged users at level 3 and above \
             (a Debian/Android restriction, not in mainline Linux): lower it to 2 to count your \
             own processes in user space",
        );
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
        // The kernel says EINVAL for an unknown id and for many other refusals alike: blame the id only
        // when tracefs confirms that no tracepoint has it.
        return Some(match crate::event::tp::name_of_id(a.config) {
            Some(None) => format!(
                "no tracepoint has id {} (ids are in tracefs, events/<system>/<name>/id; \
                 Tracepoint::by_name looks them up)",
                a.config
            ),
            Some(Some(name)) => format!(
                "tracepoint {name} (id {}) exists; the kernel refused this combination of options \
                 with it",
                a.config
            ),
            None => format!(
                "invalid argument: the kernel refused this combination of options, or tracepoint id \
                 {} (tracefs could not be read to check that id)",
                a.config
            ),
        });
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

/// The oldest kernel the matrix (`cargo xtask kernel-matrix`) boots: what this crate is proven on.
const PROVEN_SINCE: KernelVersion = KernelVersion::new(5, 10);

/// The fields of `perf_event_attr` from byte 96 (`PERF_ATTR_SIZE_VER3`, Linux 3.7) on: where each
/// starts, the option that sets it, the Linux version that added it (the one whose attr first
/// reached past it), and whether an attr sets it. A kernel whose attr ends before a field refuses
/// a non-zero value there with `E2BIG`, and takes it zero.
type TailField = (
    usize,
    &'static str,
    KernelVersion,
    fn(&sys::perf_event_attr) -> bool,
);
const TAIL_FIELDS: [TailField; 8] = {
    use core::mem::offset_of;
    use sys::perf_event_attr as A;
    let v = KernelVersion::new;
    [
        (
            offset_of!(A, sample_regs_intr),
            "sample_format.intr_regs (sample_regs_intr)",
            v(3, 19),
            |a| a.sample_regs_intr != 0,
        ),
        (
            offset_of!(A, aux_watermark),
            "wake_up.on_aux_bytes (aux_watermark)",
            v(4, 1),
            |a| a.aux_watermark != 0,
        ),
        (
            offset_of!(A, sample_max_stack),
            "call_chain.max_stack_frames (sample_max_stack)",
            v(4, 8),
            |a| a.sample_max_stack != 0,
        ),
        (
            offset_of!(A, aux_sample_size),
            "sample_format.aux size (aux_sample_size)",
            v(5, 5),
            |a| a.aux_sample_size != 0,
        ),
        (
            offset_of!(A, __bindgen_anon_5),
            "pause_aux / aux_on_sample (aux_action)",
            v(6, 13),
            |a| a.aux_action() != 0,
        ),
        (
            offset_of!(A, sig_data),
            "sigtrap_on_sample data (sig_data)",
            v(5, 13),
            |a| a.sig_data != 0,
        ),
        (offset_of!(A, config3), "config3", v(6, 3), |a| {
            a.config3 != 0
        }),
        (offset_of!(A, config4), "config4", v(6, 19), |a| {
            a.config4 != 0
        }),
    ]
};

/// The options `a` sets at or past byte `from`, with the Linux version each needs.
fn set_from(a: &sys::perf_event_attr, from: u32) -> Vec<(&'static str, KernelVersion)> {
    TAIL_FIELDS
        .iter()
        .filter(|(at, _, _, set)| *at >= from as usize && set(a))
        .map(|&(_, name, since, _)| (name, since))
        .collect()
}

/// The refusal of an attr with options past the end of the kernel's own (`E2BIG`; the kernel's
/// attr has `kernel_size` bytes): the option needing the newest kernel leads, the detail lists
/// every one with its version, and a kernel older than the proven range (or of unknown version)
/// is told so.
fn too_big(
    event: String,
    a: &sys::perf_event_attr,
    kernel_size: u32,
    version: Option<KernelVersion>,
    running: String,
    source: io::Error,
) -> Error {
    let past = set_from(a, kernel_size);
    let Some(&(option, since)) = past.iter().max_by_key(|(_, since)| *since) else {
        // Nothing we know of is set past it: the kernel's ABI is not what we think.
        return Error::Open {
            event,
            detail: format!(
                "this kernel's perf_event_attr has {kernel_size} bytes and it refused a field \
                 past them that is set; check what Counter::new_with's edit wrote there"
            ),
            source,
        };
    };
    let fields = match past.as_slice() {
        [_] => format!("{option} lies past them"),
        more => {
            let list: Vec<String> = more
                .iter()
                .map(|(name, since)| format!("{name} (Linux {since})"))
                .collect();
            format!("these options lie past them: {}", list.join(", "))
        }
    };
    let mut detail = format!(
        "its perf_event_attr has {kernel_size} bytes and {fields} (a kernel takes this crate's \
         {}-byte attr only while the bytes it does not know are zero)",
        a.size
    );
    if version.is_none_or(|v| v < PROVEN_SINCE) {
        detail.push_str(&format!(
            "; this crate is tested on Linux {PROVEN_SINCE} and newer only"
        ));
    }
    Error::KernelTooOld {
        event,
        option,
        since,
        running,
        detail: Some(detail),
        source,
    }
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
    fn fixed_rules_are_the_kernels_boundaries() {
        let mut a = sys::perf_event_attr {
            sample_type: u64::from(sys::PERF_SAMPLE_STACK_USER),
            ..Default::default()
        };
        for (size, ok) in [
            (0, true),
            (8, true),
            (65528, true),
            (4, false),
            (65536, false),
        ] {
            a.sample_stack_user = size;
            assert_eq!(check_fixed_rules("e", &a).is_ok(), ok, "stack {size}");
        }
        a.sample_stack_user = 8;
        a.__bindgen_anon_1.sample_period = 1 << 63;
        let e = check_fixed_rules("e", &a).unwrap_err();
        assert!(
            e.to_string().starts_with("e: sample_on = SampleOn::Count("),
            "{e}"
        );
        // A frequency is checked against kernel.perf_event_max_sample_rate, after the open.
        a.set_freq(1);
        assert!(check_fixed_rules("e", &a).is_ok());
        // A frequency of 0 is not sampling to the kernel: refused before the open.
        a.__bindgen_anon_1.sample_freq = 0;
        let e = check_fixed_rules("e", &a).unwrap_err().to_string();
        assert!(
            e.contains("SampleOn::Freq(0)") && e.contains("never samples"),
            "{e}"
        );
    }

    /// What a kernel without `config3`, `sig_data`, ... says: `E2BIG`, its own size written back.
    fn e2big_from(
        a: &sys::perf_event_attr,
        kernel_size: u32,
        version: Option<KernelVersion>,
    ) -> String {
        let e = too_big(
            "task-clock".into(),
            a,
            kernel_size,
            version,
            "4.19.0-27-amd64".into(),
            io::Error::from_raw_os_error(libc::E2BIG),
        );
        assert!(matches!(e, Error::KernelTooOld { .. }), "{e}");
        e.to_string()
    }

    #[test]
    fn e2big_names_the_kernels_size_and_every_option_past_it() {
        let mut a = crate::config::attr::build(
            &crate::event::sw::Software::TaskClock.into(),
            &crate::config::Opts::default(),
        );
        a.config3 = 1;
        a.sig_data = 7;
        // Linux 4.19: a 112-byte attr (PERF_ATTR_SIZE_VER5), older than the matrix.
        let msg = e2big_from(&a, 112, Some(KernelVersion::new(4, 19)));
        assert_eq!(
            msg,
            format!(
                "task-clock: config3 requires Linux 6.3; this kernel is 4.19.0-27-amd64; its \
                 perf_event_attr has 112 bytes and these options lie past them: sigtrap_on_sample \
                 data (sig_data) (Linux 5.13), config3 (Linux 6.3) (a kernel takes this crate's \
                 {}-byte attr only while the bytes it does not know are zero); this crate is \
                 tested on Linux 5.10 and newer only (Argument list too long (os error 7))",
                a.size
            )
        );
        // Linux 6.1 (128 bytes) lacks only config3; it is in the proven range.
        let msg = e2big_from(&a, 128, Some(KernelVersion::new(6, 1)));
        assert!(
            msg.contains("128 bytes and config3 lies past them"),
            "{msg}"
        );
        assert!(!msg.contains("sig_data") && !msg.contains("5.10"), "{msg}");
        // An unknown version is not claimed.
        assert!(e2big_from(&a, 112, None).contains("tested on Linux 5.10 and newer"));
    }

    #[test]
    fn options_left_unset_or_zero_send_nothing_an_old_kernel_refuses() {
        use crate::config::{CallChain, Opts, SampleOn, SigData, Size};
        let event = crate::event::sw::Software::TaskClock.into();
        let mut o = Opts::default();
        let a = crate::config::attr::build(&event, &o);
        // Past Linux 3.7's 96-byte attr, a default attr is all zero.
        assert_eq!(set_from(&a, 96), []);
        // Options present with zero values are zero there too: the bits that switch them on are
        // explained by `too_new_option` after an EINVAL, never by E2BIG.
        o.sample_on = SampleOn::Count(1000);
        o.sample_format.call_chain = Some(CallChain::default());
        o.sample_format.aux = Some(Size(0));
        o.sigtrap_on_sample = Some(SigData(0));
        o.wake_up.on_aux_bytes = 0;
        let a = crate::config::attr::build(&event, &o);
        assert_eq!(set_from(&a, 96), []);
        // What is set is found, at its own offset.
        o.sigtrap_on_sample = Some(SigData(1));
        o.sample_format.call_chain = Some(CallChain {
            max_stack_frames: 8,
            ..CallChain::default()
        });
        let a = crate::config::attr::build(&event, &o);
        let names: Vec<_> = set_from(&a, 0).into_iter().map(|(n, _)| n).collect();
        assert_eq!(
            names,
            [
                "call_chain.max_stack_frames (sample_max_stack)",
                "sigtrap_on_sample data (sig_data)"
            ]
        );
        assert_eq!(
            set_from(&a, 120).len(),
            1,
            "only sig_data is past 5.10's attr"
        );
    }

    #[test]
    fn cpu_ranges() {
        assert_eq!(cpu_list(&[0, 1, 2, 3, 5, 7, 8]), "0-3,5,7-8");
        assert_eq!(cpu_list(&[0]), "0");
        assert_eq!(cpu_list(&[]), "");
    }

    /// Level 3 and above: the Debian/Android advice only where the kernel refuses everything; on
    /// mainline (where such levels act as 2) the advice of level 2.
    #[test]
    fn paranoid_3_advice_follows_what_the_kernel_refuses() {
        let a = sys::perf_event_attr {
            type_: sys::PERF_TYPE_SOFTWARE,
            ..Default::default()
        };
        let req = OpenRequest {
            event: "task-clock",
            attr: &a,
            pid: 0,
            cpu: -1,
            cgroup: false,
            kernel_attr_size: None,
        };
        for level in [3, 4] {
            let patched = permission_hint(&req, Some(level), || true);
            assert!(
                patched.contains(
                    "refuses every perf event to unprivileged users at level 3 and above"
                ) && patched.contains("Debian/Android"),
                "{patched}"
            );
            let mainline = permission_hint(&req, Some(level), || false);
            assert!(!mainline.contains("every perf event"), "{mainline}");
            assert!(
                mainline.contains("counting kernel space needs perf_event_paranoid <= 1"),
                "{mainline}"
            );
        }
        // Below 3 the kernel is not asked.
        let two = permission_hint(&req, Some(2), || panic!("asked at level 2"));
        assert!(two.contains("counting kernel space"), "{two}");
    }
}
