//! Least privilege: the capabilities a system-wide profile needs instead of root, and what each
//! missing one costs.
//!
//! Found by dropping each in turn from a `perf-profile -a` run as user `nobody` on Linux 6.18 (the
//! crate README's "Running without root"; test `tests/least_privilege.rs`):
//!
//! - `CAP_PERFMON` (Linux 5.8+; before it `CAP_SYS_ADMIN`): opening CPU-wide events under
//!   `perf_event_paranoid` > 0, sampling the kernel, and reading other users' `/proc/PID/maps`.
//!   Without it the capture does not start.
//! - `CAP_SYSLOG`: `/proc/kallsyms` addresses when `kptr_restrict` is 1, or 0 with
//!   `perf_event_paranoid` > 1; without it kernel frames are one `[kernel]` frame.
//! - `CAP_SYS_PTRACE`: `/proc/PID/root` and `/proc/PID/exe` of other users' processes (their files
//!   as their mount namespace names them, their executable); without it their files are looked up
//!   in the host's root (a container's binaries are not found) and their executable is unnamed.
//! - `CAP_DAC_READ_SEARCH` (or `CAP_DAC_OVERRIDE`): other users' binaries and JIT maps that are not
//!   world-readable, and tracefs (root-only) for `--off-cpu`'s `sched:sched_switch`; without it
//!   their frames are addresses and `--off-cpu` samples the `context-switches` event.
//! - `CAP_IPC_LOCK`, only for rings larger than `perf_event_mlock_kb` plus `RLIMIT_MEMLOCK` allow
//!   (the default rings, 65 pages per CPU, fit the default 516 KiB per CPU).
//!
//! Not needed: `CAP_SYS_ADMIN` (it would cover `CAP_PERFMON`, and mount tracefs: let the system
//! mount it), `CAP_DAC_OVERRIDE` (reading is enough), and writing outputs needs none (give the
//! profiler a directory of its own).

use std::fmt;

/// A capability that system-wide profiling uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Capability {
    /// `CAP_PERFMON`.
    Perfmon,
    /// `CAP_SYSLOG`.
    Syslog,
    /// `CAP_SYS_PTRACE`.
    SysPtrace,
    /// `CAP_DAC_READ_SEARCH`.
    DacReadSearch,
    /// `CAP_IPC_LOCK`.
    IpcLock,
}

/// The capabilities a system-wide profile (`-a`) needs instead of root, the ones it needs always
/// first. [`Capability::IpcLock`] is not among them: the default rings do not need it.
pub const SYSTEM_WIDE: [Capability; 4] = [
    Capability::Perfmon,
    Capability::Syslog,
    Capability::SysPtrace,
    Capability::DacReadSearch,
];

impl Capability {
    /// Its name as `capabilities(7)` writes it (`CAP_PERFMON`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Perfmon => "CAP_PERFMON",
            Self::Syslog => "CAP_SYSLOG",
            Self::SysPtrace => "CAP_SYS_PTRACE",
            Self::DacReadSearch => "CAP_DAC_READ_SEARCH",
            Self::IpcLock => "CAP_IPC_LOCK",
        }
    }

    /// Its name as `setpriv` and systemd take it, without `CAP_`, lower case (`perfmon`).
    pub fn short_name(self) -> &'static str {
        match self {
            Self::Perfmon => "perfmon",
            Self::Syslog => "syslog",
            Self::SysPtrace => "sys_ptrace",
            Self::DacReadSearch => "dac_read_search",
            Self::IpcLock => "ipc_lock",
        }
    }

    /// What profiling does with it.
    pub fn why(self) -> &'static str {
        match self {
            Self::Perfmon => {
                "opens CPU-wide events and samples the kernel above perf_event_paranoid 0, and reads \
                 other users' /proc/PID/maps"
            }
            Self::Syslog => {
                "shows the kernel's addresses in /proc/kallsyms (kptr_restrict 1, or 0 with \
                 perf_event_paranoid 2)"
            }
            Self::SysPtrace => {
                "reads other users' processes' files through /proc/PID/root and their executable \
                 (/proc/PID/exe)"
            }
            Self::DacReadSearch => {
                "reads other users' binaries and JIT maps that are not world-readable, and tracefs \
                 for --off-cpu's sched:sched_switch"
            }
            Self::IpcLock => {
                "locks ring pages beyond perf_event_mlock_kb and RLIMIT_MEMLOCK (larger rings only)"
            }
        }
    }

    /// What is lost without it.
    pub fn cost(self) -> &'static str {
        match self {
            Self::Perfmon => {
                "a system-wide capture does not start (perf_event_open fails with EACCES) unless \
                 perf_event_paranoid <= 0"
            }
            Self::Syslog => "kernel frames are one [kernel] frame",
            Self::SysPtrace => {
                "other users' processes' files are looked up in the host's root instead of their \
                 own (a container's binaries are not found: their frames are addresses), and \
                 their executable is unnamed"
            }
            Self::DacReadSearch => {
                "other users' frames in files they do not let others read are bare addresses, and \
                 --off-cpu samples the context-switches event instead of the tracepoint"
            }
            Self::IpcLock => "rings larger than the locked-memory allowance fail with EPERM",
        }
    }

    /// Whether `caps` has it, or one that covers it (`CAP_SYS_ADMIN` covers `CAP_PERFMON`,
    /// `CAP_DAC_OVERRIDE` covers `CAP_DAC_READ_SEARCH`).
    pub fn held_in(self, caps: Caps) -> bool {
        let has = |bit: u32| caps.has(bit);
        match self {
            Self::Perfmon => has(CAP_PERFMON) || has(CAP_SYS_ADMIN),
            Self::Syslog => has(CAP_SYSLOG),
            Self::SysPtrace => has(CAP_SYS_PTRACE),
            Self::DacReadSearch => has(CAP_DAC_READ_SEARCH) || has(CAP_DAC_OVERRIDE),
            Self::IpcLock => has(CAP_IPC_LOCK),
        }
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

const CAP_DAC_OVERRIDE: u32 = 1;
const CAP_DAC_READ_SEARCH: u32 = 2;
const CAP_IPC_LOCK: u32 = 14;
const CAP_SYS_PTRACE: u32 = 19;
const CAP_SYS_ADMIN: u32 = 21;
const CAP_SYSLOG: u32 = 34;
const CAP_PERFMON: u32 = 38;

/// A process's effective capabilities (`CapEff` of `/proc/PID/status`) and whether its effective
/// uid is 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Caps {
    /// The effective uid is 0. Root without capabilities (a container's, or after `setpriv`) is
    /// not privileged: the kernel checks capabilities.
    pub root: bool,
    /// The `CapEff` bit mask.
    pub effective: u64,
}

impl Caps {
    /// This process's.
    pub fn current() -> Self {
        parse_caps(&std::fs::read_to_string("/proc/self/status").unwrap_or_default())
    }

    /// `CAP_PERFMON` itself.
    pub(crate) fn perfmon(self) -> bool {
        self.has(CAP_PERFMON)
    }

    /// `CAP_SYS_ADMIN` itself.
    pub(crate) fn sys_admin(self) -> bool {
        self.has(CAP_SYS_ADMIN)
    }

    /// `CAP_IPC_LOCK` itself.
    pub(crate) fn ipc_lock(self) -> bool {
        self.has(CAP_IPC_LOCK)
    }

    /// `CAP_SYSLOG` itself.
    pub(crate) fn syslog(self) -> bool {
        self.has(CAP_SYSLOG)
    }

    fn has(self, bit: u32) -> bool {
        self.effective & (1u64 << bit) != 0
    }

    /// Of `needed`, those missing here.
    pub fn missing(self, needed: &[Capability]) -> Vec<Capability> {
        needed
            .iter()
            .copied()
            .filter(|c| !c.held_in(self))
            .collect()
    }
}

/// The doctor's finding: which of [`SYSTEM_WIDE`] this process lacks and what each costs; a
/// warning for a system-wide capture, else a note (they matter only for other users' processes).
pub(crate) fn check(caps: Caps, system_wide: bool) -> crate::doctor::Check {
    let missing = caps.missing(&SYSTEM_WIDE);
    let names = |list: &[Capability]| list.iter().map(|c| c.name()).collect::<Vec<_>>().join(" ");
    let (status, detail, fix) = if missing.is_empty() {
        (
            crate::doctor::Status::Ok,
            format!(
                "{} held: other users' processes are profiled in full",
                names(&SYSTEM_WIDE)
            ),
            None,
        )
    } else {
        let costs: Vec<String> = missing
            .iter()
            .map(|c| format!("without {c} {}", c.cost()))
            .collect();
        let status = if system_wide {
            crate::doctor::Status::Warn
        } else {
            crate::doctor::Status::Ok
        };
        (
            status,
            format!(
                "{}{}",
                if system_wide {
                    ""
                } else {
                    "for other users' processes: "
                },
                costs.join("; ")
            ),
            Some(format!(
                "run as root, or with exactly these capabilities (README: Running without root): \
                 systemd `AmbientCapabilities={all}` and `CapabilityBoundingSet={all}`, or \
                 `setpriv --inh-caps={list} --ambient-caps={list} …`",
                all = names(&SYSTEM_WIDE),
                list = SYSTEM_WIDE
                    .iter()
                    .map(|c| format!("+{}", c.short_name()))
                    .collect::<Vec<_>>()
                    .join(","),
            )),
        )
    };
    crate::doctor::Check {
        name: "capabilities".into(),
        status,
        detail,
        fix,
    }
}

/// The capabilities of the text of a `/proc/PID/status` file (none where it has no `CapEff`).
pub(crate) fn parse_caps(status: &str) -> Caps {
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::trim)
    };
    let effective = field("CapEff:")
        .and_then(|v| u64::from_str_radix(v, 16).ok())
        .unwrap_or(0);
    let euid = field("Uid:")
        .and_then(|v| v.split_whitespace().nth(1))
        .and_then(|v| v.parse::<u32>().ok());
    Caps {
        root: euid == Some(0),
        effective,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capabilities_parse_from_status_and_cover_each_other() {
        // nobody with perfmon, syslog, sys_ptrace and dac_read_search, as setpriv leaves it.
        let status =
            "Name:\tprofile\nUid:\t65534\t65534\t65534\t65534\nCapInh:\t0000004400080004\n\
                      CapEff:\t0000004400080004\n";
        let c = parse_caps(status);
        assert!(!c.root);
        assert_eq!(c.missing(&SYSTEM_WIDE), []);
        assert_eq!(c.missing(&[Capability::IpcLock]), [Capability::IpcLock]);
        let none = parse_caps("Uid:\t0\t0\t0\t0\nCapEff:\t0000000000000000\n");
        assert!(none.root, "root by uid");
        assert_eq!(
            none.missing(&SYSTEM_WIDE),
            SYSTEM_WIDE,
            "root without capabilities"
        );
        // CAP_SYS_ADMIN (bit 21) covers CAP_PERFMON, CAP_DAC_OVERRIDE (bit 1) CAP_DAC_READ_SEARCH.
        let old = parse_caps("CapEff:\t0000000000200002\n");
        assert_eq!(
            old.missing(&SYSTEM_WIDE),
            [Capability::Syslog, Capability::SysPtrace]
        );
        assert_eq!(parse_caps(""), Caps::default());
    }

    #[test]
    fn the_doctor_names_each_missing_capability_and_its_cost() {
        let user = parse_caps("CapEff:\t0000004000000000\n");
        let c = check(user, true);
        assert_eq!(c.status, crate::doctor::Status::Warn, "{c:?}");
        assert!(!c.detail.contains("CAP_PERFMON"), "{c:?}");
        for lost in [
            "without CAP_SYSLOG kernel frames are one [kernel] frame",
            "CAP_SYS_PTRACE",
            "CAP_DAC_READ_SEARCH",
        ] {
            assert!(c.detail.contains(lost), "{lost}: {c:?}");
        }
        assert!(c
            .fix
            .unwrap()
            .contains("AmbientCapabilities=CAP_PERFMON CAP_SYSLOG"));
        assert_eq!(check(user, false).status, crate::doctor::Status::Ok);
        let all = parse_caps("CapEff:\t0000004400080004\n");
        let c = check(all, true);
        assert_eq!((c.status, c.fix), (crate::doctor::Status::Ok, None));
    }
}
