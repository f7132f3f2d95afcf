//! Off-CPU profiles: where threads wait rather than where they run.
//!
//! With [`Options::off_cpu`](crate::Options::off_cpu) the capture samples the
//! `sched:sched_switch` tracepoint at every occurrence, with call chains: the tracepoint fires in
//! the thread that is switched out, so each sample is the stack at which it stopped running (the
//! kernel's frames down to `__schedule`, then the user frames). Context-switch records
//! (`PERF_RECORD_SWITCH`, Linux 4.3+) say when each thread runs again; the stack is then added with
//! the nanoseconds in between as its weight. Profiles carry sample types `samples/count` (the
//! switch-outs) and `off_cpu/nanoseconds`; folded stacks carry nanoseconds.
//!
//! A thread still switched out when the capture stops (sleeping, or exited) has no end to its
//! wait: that last wait is not counted.
//!
//! Where the tracepoint cannot be had (no tracefs, or not permitted), the capture fails with the
//! reason; `profile --doctor` says beforehand whether tracefs is usable.

use std::collections::HashMap;

use crate::aggregate::Frame;
use crate::profile::Info;

/// The event an off-CPU profile samples, as [`Info::event`] names it.
pub const EVENT: &str = "sched:sched_switch";

/// Whether `info` is of an off-CPU profile (its weights are nanoseconds off CPU).
pub fn is_off_cpu(info: &Info) -> bool {
    info.event == EVENT
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
