//! Targets: which task or cgroup, on which CPU.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Arc;

/// "Any": any CPU ([`Cpu::ALL`]) or any process ([`Proc::ALL`], i.e. CPU-wide counting).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct All;

/// A CPU number.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Cpu(pub u32);

impl Cpu {
    /// Any CPU (`cpu = -1`): the event follows its task wherever it runs.
    pub const ALL: All = All;
}

/// A process or thread id.
///
/// A pid counts the whole thread group only with [`Inherit`](super::Inherit) for threads created
/// later; the kernel attaches to exactly the task named.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Proc(pub u32);

impl Proc {
    /// Any process (`pid = -1`): CPU-wide counting; needs a CPU.
    pub const ALL: All = All;
    /// The calling thread (`pid = 0`): the thread that opens the counter, not the whole process.
    pub const CURRENT: Proc = Proc(0);
}

/// A cgroup v2 directory, opened with [`File::open`] (`PERF_FLAG_PID_CGROUP`): counts tasks of that
/// cgroup while they run on the given CPU. Needs a CPU; see
/// [`PerCpu`](crate::count::PerCpu) for every CPU at once.
#[derive(Copy, Clone, Debug)]
#[doc(alias = "PERF_FLAG_PID_CGROUP")]
pub struct Cgroup<'a>(pub &'a File);

/// Where an event counts: the `pid`, `cpu` and flags of `perf_event_open(2)`.
///
/// Built from a pair: `(Proc, Cpu)`, `(Proc, Cpu::ALL)`, `(Proc::ALL, Cpu)`, `(Cgroup, Cpu)`, in
/// either order.
///
/// The syscall takes `pid` and `cpu` as signed 32-bit numbers, where -1 means "every task" or "any
/// CPU". A [`Proc`] or [`Cpu`] above `i32::MAX` does not fit: rather than wrap (`Proc(u32::MAX)`
/// would become -1 and count every task), the target remembers it and the open fails with
/// [`Error::TargetOutOfRange`](crate::Error::TargetOutOfRange), naming the value.
#[derive(Clone, Debug)]
pub struct Target {
    pub(crate) pid: i32,
    pub(crate) cpu: i32,
    pub(crate) flags: u64,
    /// The cgroup directory, duplicated so that group members opened later can name it too.
    pub(crate) cgroup: Option<Result<Arc<OwnedFd>, i32>>,
    /// A pid or CPU that does not fit the syscall's `i32`; the open refuses the target.
    pub(crate) out_of_range: Option<OutOfRange>,
}

/// A pid or CPU number above `i32::MAX`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum OutOfRange {
    Pid(u32),
    Cpu(u32),
}

impl Target {
    /// The CPU, or `None` for any CPU (and for a CPU above `i32::MAX`, which cannot be opened).
    pub fn cpu(&self) -> Option<u32> {
        u32::try_from(self.cpu).ok()
    }

    /// The pid (0 = the calling thread, -1 = any), or `None` for a cgroup target (and for a pid
    /// above `i32::MAX`, which cannot be opened).
    pub fn pid(&self) -> Option<i32> {
        let bad_pid = matches!(self.out_of_range, Some(OutOfRange::Pid(_)));
        (self.cgroup.is_none() && !bad_pid).then_some(self.pid)
    }

    /// Whether this is a cgroup target.
    pub fn is_cgroup(&self) -> bool {
        self.cgroup.is_some()
    }

    /// A task target: `pid` (`None` = every task) on `cpu` (`None` = any CPU).
    pub(crate) fn task(pid: Option<u32>, cpu: Option<u32>) -> Self {
        let mut out_of_range = None;
        let pid = checked(pid, OutOfRange::Pid, &mut out_of_range);
        let cpu = checked(cpu, OutOfRange::Cpu, &mut out_of_range);
        Self {
            pid,
            cpu,
            flags: 0,
            cgroup: None,
            out_of_range,
        }
    }

    pub(crate) fn cgroup_on(dir: &File, cpu: u32) -> Self {
        let dup = dir
            .as_fd()
            .try_clone_to_owned()
            .map(Arc::new)
            .map_err(|e: io::Error| e.raw_os_error().unwrap_or(libc::EBADF));
        let mut out_of_range = None;
        let cpu = checked(Some(cpu), OutOfRange::Cpu, &mut out_of_range);
        Self {
            pid: -1,
            cpu,
            flags: u64::from(perf_sys::PERF_FLAG_PID_CGROUP),
            cgroup: Some(dup),
            out_of_range,
        }
    }

    /// The `pid` argument: the cgroup fd for cgroup targets.
    pub(crate) fn pid_arg(&self) -> Result<i32, i32> {
        match &self.cgroup {
            None => Ok(self.pid),
            Some(Ok(fd)) => Ok(fd.as_raw_fd()),
            Some(Err(errno)) => Err(*errno),
        }
    }
}

/// `None` (every task, any CPU) is -1; a number above `i32::MAX` is recorded in `bad` (the first
/// one wins) and stands in as -1, which the open never sends.
fn checked(id: Option<u32>, what: fn(u32) -> OutOfRange, bad: &mut Option<OutOfRange>) -> i32 {
    match id {
        None => -1,
        Some(v) => i32::try_from(v).unwrap_or_else(|_| {
            bad.get_or_insert(what(v));
            -1
        }),
    }
}

impl From<(Proc, Cpu)> for Target {
    fn from((Proc(pid), Cpu(cpu)): (Proc, Cpu)) -> Self {
        Self::task(Some(pid), Some(cpu))
    }
}
impl From<(Cpu, Proc)> for Target {
    fn from((c, p): (Cpu, Proc)) -> Self {
        (p, c).into()
    }
}
impl From<(Proc, All)> for Target {
    fn from((Proc(pid), _): (Proc, All)) -> Self {
        Self::task(Some(pid), None)
    }
}
impl From<(All, Proc)> for Target {
    fn from((a, p): (All, Proc)) -> Self {
        (p, a).into()
    }
}
impl From<(All, Cpu)> for Target {
    fn from((_, Cpu(cpu)): (All, Cpu)) -> Self {
        Self::task(None, Some(cpu))
    }
}
impl From<(Cpu, All)> for Target {
    fn from((c, a): (Cpu, All)) -> Self {
        (a, c).into()
    }
}
impl From<(Cgroup<'_>, Cpu)> for Target {
    fn from((Cgroup(dir), Cpu(cpu)): (Cgroup<'_>, Cpu)) -> Self {
        Self::cgroup_on(dir, cpu)
    }
}
impl From<(Cpu, Cgroup<'_>)> for Target {
    fn from((c, g): (Cpu, Cgroup<'_>)) -> Self {
        (g, c).into()
    }
}

/// Who a [`PerCpu`](crate::count::PerCpu) set counts on each CPU: every task ([`Proc::ALL`]), one
/// task ([`Proc`]) or one cgroup ([`Cgroup`]).
pub trait CpuScope {
    /// The target on `cpu`.
    fn on(&self, cpu: u32) -> Target;
}

impl CpuScope for All {
    fn on(&self, cpu: u32) -> Target {
        Target::task(None, Some(cpu))
    }
}
impl CpuScope for Proc {
    fn on(&self, cpu: u32) -> Target {
        Target::task(Some(self.0), Some(cpu))
    }
}
impl CpuScope for Cgroup<'_> {
    fn on(&self, cpu: u32) -> Target {
        Target::cgroup_on(self.0, cpu)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_above_i32_max_are_kept_not_wrapped() {
        let t = Target::from((Proc(u32::MAX), Cpu(0)));
        assert_eq!(t.out_of_range, Some(OutOfRange::Pid(u32::MAX)));
        assert_eq!(t.pid(), None);
        let t = Target::from((Proc::CURRENT, Cpu(1 << 31)));
        assert_eq!(t.out_of_range, Some(OutOfRange::Cpu(1 << 31)));
        assert_eq!(t.cpu(), None);
        let t = Target::from((Proc(i32::MAX as u32), Cpu(i32::MAX as u32)));
        assert_eq!((t.pid, t.cpu, t.out_of_range), (i32::MAX, i32::MAX, None));
        let t = Target::from((Proc::ALL, Cpu(3)));
        assert_eq!((t.pid(), t.cpu()), (Some(-1), Some(3)));
        assert_eq!(
            Proc(u32::MAX).on(1).out_of_range,
            Some(OutOfRange::Pid(u32::MAX))
        );
    }
}
