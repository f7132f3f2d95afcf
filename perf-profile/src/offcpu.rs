//! Off-CPU profiles: where threads wait rather than where they run.
//!
//! With [`Options::off_cpu`](crate::Options::off_cpu) the capture samples every switch-out, with
//! call chains: the sample is taken in the thread that is switched out, so each is the stack at
//! which it stopped running (the kernel's frames down to the scheduler, then the user frames).
//! Context-switch records (`PERF_RECORD_SWITCH`, Linux 4.3+) say when each thread runs again; the
//! stack is then added with the nanoseconds in between as its weight. Profiles carry sample types
//! `samples/count` (the switch-outs) and `off_cpu/nanoseconds`; folded stacks carry nanoseconds.
//!
//! Two events take the switch-out samples ([`Method`]); [`Options::off_cpu_method`] picks one, by
//! default the tracepoint where tracefs gives its id and the software event otherwise:
//!
//! - [`Method::SchedSwitch`]: the `sched:sched_switch` tracepoint (as `perf sched` and
//!   `offcputime` use). Its id comes from tracefs, which is often root-only or not mounted.
//! - [`Method::ContextSwitches`]: the `context-switches` software event
//!   (`PERF_COUNT_SW_CONTEXT_SWITCHES`) at a period of 1, which needs no tracefs. The kernel counts
//!   it in the scheduler's perf hook at the switch-out, in the thread switched out, so its samples
//!   are the same stacks at the same moments as the tracepoint's; only the innermost kernel frames
//!   differ (the perf hook rather than the tracepoint). The issue this fallback answers suggested
//!   the thread's next on-CPU (`cpu-clock`) sample after its switch-in instead; that stack is where
//!   the thread runs after the wait, not where it waited (a thread that barely runs, as a sleeping
//!   one, is sampled long after, or never), so the switch-out itself is sampled here.
//!
//! Both fire in the kernel: neither can be sampled with the kernel excluded, so off-CPU profiles
//! need kernel sampling to be permitted (`perf_event_paranoid` ≤ 1 or `CAP_PERFMON`); the capture
//! fails saying so otherwise. Each is subject to the kernel's sample throttling like any event
//! (counted in [`Stats::throttled`](crate::Stats::throttled)): a switch-out not sampled is a wait
//! not counted.
//!
//! A thread still switched out when the capture stops (sleeping, or exited) has no end to its
//! wait: that last wait is not counted.
//!
//! [`Options::off_cpu_method`]: crate::Options::off_cpu_method

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use perf_event::event::sw::Software;
use perf_event::event::tp::Tracepoint;
use perf_event::event::Event;

use crate::aggregate::Frame;
use crate::error::{Error, Result};
use crate::profile::Info;

/// The event an off-CPU profile samples with [`Method::SchedSwitch`], as [`Info::event`] names it.
pub const EVENT: &str = "sched:sched_switch";

/// The event an off-CPU profile samples with [`Method::ContextSwitches`], as [`Info::event`] names
/// it (`perf list`'s name).
pub const FALLBACK_EVENT: &str = "context-switches";

/// How an off-CPU capture samples the switch-outs (see the [module](self) documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Method {
    /// The `sched:sched_switch` tracepoint, sampled at every occurrence with call chains. Needs
    /// tracefs (for the tracepoint's id).
    #[doc(alias = "sched_switch")]
    SchedSwitch,
    /// The `context-switches` software event, sampled at every switch-out (a period of 1) with
    /// call chains; no tracefs. The same stacks and times as [`SchedSwitch`](Self::SchedSwitch)
    /// but for the innermost kernel frames (the scheduler's perf hook rather than the
    /// tracepoint).
    #[doc(alias = "PERF_COUNT_SW_CONTEXT_SWITCHES")]
    #[doc(alias = "cs")]
    ContextSwitches,
}

impl Method {
    /// The event sampled, as [`Info::event`] names it: [`EVENT`] or [`FALLBACK_EVENT`].
    pub const fn event(self) -> &'static str {
        match self {
            Self::SchedSwitch => EVENT,
            Self::ContextSwitches => FALLBACK_EVENT,
        }
    }

    /// The method an off-CPU profile was taken with; `None` for a CPU profile.
    pub fn of(info: &Info) -> Option<Self> {
        [Self::SchedSwitch, Self::ContextSwitches]
            .into_iter()
            .find(|m| info.event == m.event())
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.event())
    }
}

impl FromStr for Method {
    type Err = Error;

    /// `sched_switch` (or `sched:sched_switch`), `context-switches` (or `cs`, perf's short name).
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "sched_switch" | "sched:sched_switch" => Ok(Self::SchedSwitch),
            "context-switches" | "cs" => Ok(Self::ContextSwitches),
            _ => Err(Error::InvalidOption(format!(
                "an off-CPU method {s:?}: use sched_switch (the tracepoint, needs tracefs) or \
                 context-switches (the software event)"
            ))),
        }
    }
}

/// Whether `info` is of an off-CPU profile (its weights are nanoseconds off CPU).
pub fn is_off_cpu(info: &Info) -> bool {
    Method::of(info).is_some()
}

/// The method, the event to open, why, and a note for the profile when the automatic choice
/// could not have the tracepoint.
pub(crate) struct Chosen {
    pub(crate) method: Method,
    pub(crate) event: Event,
    pub(crate) reason: String,
    pub(crate) note: Option<String>,
}

/// Picks the method: `wanted`, or the tracepoint where its id can be read (from `tracefs`, or
/// tracefs found as perf does) and the software event otherwise.
pub(crate) fn choose(wanted: Option<Method>, tracefs: Option<&Path>) -> Result<Chosen> {
    const ENDS: &str =
        "weighted by the nanoseconds until the thread runs again (context-switch records)";
    let fallback = |note| Chosen {
        method: Method::ContextSwitches,
        event: Software::CtxSwitch.into(),
        reason: format!(
            "off-CPU: the stack at each switch-out (the context-switches software event with call \
             chains), {ENDS}"
        ),
        note,
    };
    match wanted {
        Some(Method::ContextSwitches) => return Ok(fallback(None)),
        Some(Method::SchedSwitch) | None => {}
    }
    match sched_switch(tracefs) {
        Ok(tp) => Ok(Chosen {
            method: Method::SchedSwitch,
            event: tp.into(),
            reason: format!(
                "off-CPU: the stack at each switch-out (sched:sched_switch with call chains), {ENDS}"
            ),
            note: None,
        }),
        Err(e) if wanted.is_none() => Ok(fallback(Some(format!(
            "off-CPU by the context-switches software event, as {EVENT} cannot be used ({e}): the \
             same switch-out stacks and wait times, the innermost kernel frames being the \
             scheduler's perf hook rather than the tracepoint"
        )))),
        Err(e) => Err(e),
    }
}

/// The `sched:sched_switch` tracepoint: from `tracefs` (its `events/sched/sched_switch/id`), or
/// from tracefs found (or mounted, as root) as perf does.
fn sched_switch(tracefs: Option<&Path>) -> Result<Tracepoint> {
    let Some(root) = tracefs else {
        return Ok(Tracepoint::by_name(EVENT)?);
    };
    let path: PathBuf = root.join("events/sched/sched_switch/id");
    let io = |source| Error::Io {
        path: path.clone(),
        source,
    };
    let text = std::fs::read_to_string(&path).map_err(io)?;
    let id = text.trim().parse().map_err(|_| {
        io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "not a tracepoint id (a number)",
        ))
    })?;
    Ok(Tracepoint { id })
}

/// Threads switched out and not yet back: the time and stack at which each left the CPU.
#[derive(Debug, Default)]
pub struct Waits {
    pending: HashMap<u32, (u64, Vec<Frame>)>,
}

impl Waits {
    /// No thread waiting.
    pub fn new() -> Self {
        Self::default()
    }

    /// Thread `tid` was switched out at `time` (ns) with the stack `leaf_first`.
    pub fn switched_out(&mut self, tid: u32, time: u64, leaf_first: &[Frame]) {
        let entry = self.pending.entry(tid).or_default();
        entry.0 = time;
        entry.1.clear();
        entry.1.extend_from_slice(leaf_first);
    }

    /// Thread `tid` runs again at `time`: its stack at the switch-out (leaf first) and the
    /// nanoseconds it was off the CPU, when its switch-out was seen.
    pub fn switched_in(&mut self, tid: u32, time: u64) -> Option<(Vec<Frame>, u64)> {
        let (out, frames) = self.pending.remove(&tid)?;
        Some((frames, time.saturating_sub(out)))
    }

    /// Whether thread `tid` is switched out (its switch-out seen, not yet its switch-in).
    pub fn contains(&self, tid: u32) -> bool {
        self.pending.contains_key(&tid)
    }

    /// Forgets thread `tid` (it exited).
    pub fn exited(&mut self, tid: u32) {
        self.pending.remove(&tid);
    }

    /// Forgets the threads that no longer exist (`/proc/TID`): a thread that exits after its
    /// last switch-out is seen never switches in.
    pub fn retain_alive(&mut self) {
        self.pending
            .retain(|tid, _| std::path::Path::new(&format!("/proc/{tid}")).exists());
    }

    /// Threads waiting now.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// Whether no thread is waiting.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_lasts_from_switch_out_to_switch_in_of_the_same_thread() {
        let mut w = Waits::new();
        let f = [Frame::Kernel { addr: 1 }, Frame::Unmapped { addr: 2 }];
        w.switched_out(7, 1_000, &f);
        w.switched_out(8, 1_500, &f[..1]);
        assert_eq!(w.switched_in(9, 2_000), None);
        assert_eq!(w.switched_in(7, 4_000), Some((f.to_vec(), 3_000)));
        assert_eq!(w.switched_in(7, 5_000), None, "counted once");
        // A second switch-out replaces a first that was never matched.
        w.switched_out(8, 2_500, &f);
        assert_eq!(w.switched_in(8, 2_600), Some((f.to_vec(), 100)));
        w.switched_out(3, 1, &f);
        w.exited(3);
        assert!(w.is_empty());
    }
}
