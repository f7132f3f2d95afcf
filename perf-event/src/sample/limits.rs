//! How large a counter's records can get: a ring that cannot hold the largest one loses every such record
//! silently, so [`Counter::sampler`](crate::count::Counter::sampler) refuses it.

use perf_sys as sys;
use sys::perf_event_attr;

use crate::count::Stat;

/// `perf_event_header.size` is a u16 and records are 8-byte multiples; the kernel shrinks the user-stack
/// dump so that a sample stays below it.
const MAX_RECORD: u64 = 0xfff8;

fn bit(sample_type: u64, flag: u32) -> bool {
    sample_type & u64::from(flag) != 0
}

/// A sysctl under /proc/sys/kernel, or `default` when unreadable.
fn sysctl(name: &str, default: u64) -> u64 {
    std::fs::read_to_string(format!("/proc/sys/kernel/{name}"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(default)
}

/// The `sample_id` trailer of non-sample records (with `sample_id_all`).
fn sample_id_len(attr: &perf_event_attr) -> u64 {
    if attr.sample_id_all() == 0 {
        return 0;
    }
    let t = attr.sample_type;
    [
        sys::PERF_SAMPLE_TID,
        sys::PERF_SAMPLE_TIME,
        sys::PERF_SAMPLE_ID,
        sys::PERF_SAMPLE_STREAM_ID,
        sys::PERF_SAMPLE_CPU,
        sys::PERF_SAMPLE_IDENTIFIER,
    ]
    .into_iter()
    .filter(|&f| bit(t, f))
    .count() as u64
        * 8
}

/// Bytes of a `PERF_RECORD_LOST`, which the kernel writes together with the next record after a loss.
pub(crate) fn lost_record(attr: &perf_event_attr) -> u64 {
    8 + 16 + sample_id_len(attr)
}

/// The largest `PERF_RECORD_SAMPLE` this attr can make, counting every variable part at its kernel
/// maximum where the attr bounds it (callchain depth, register sets, user stack, AUX sample) and at its
/// minimum where nothing does (raw data, branch stacks, group members beyond the leader).
pub(crate) fn largest_record(attr: &perf_event_attr) -> u64 {
    let t = attr.sample_type;
    let mut size = 8u64; // header
    for flag in [
        sys::PERF_SAMPLE_IDENTIFIER,
        sys::PERF_SAMPLE_IP,
        sys::PERF_SAMPLE_TID,
        sys::PERF_SAMPLE_TIME,
        sys::PERF_SAMPLE_ADDR,
        sys::PERF_SAMPLE_ID,
        sys::PERF_SAMPLE_STREAM_ID,
        sys::PERF_SAMPLE_CPU,
        sys::PERF_SAMPLE_PERIOD,
        sys::PERF_SAMPLE_WEIGHT,
        sys::PERF_SAMPLE_WEIGHT_STRUCT,
        sys::PERF_SAMPLE_DATA_SRC,
        sys::PERF_SAMPLE_TRANSACTION,
        sys::PERF_SAMPLE_PHYS_ADDR,
        sys::PERF_SAMPLE_CGROUP,
        sys::PERF_SAMPLE_DATA_PAGE_SIZE,
        sys::PERF_SAMPLE_CODE_PAGE_SIZE,
    ] {
        if bit(t, flag) {
            size += 8;
        }
    }
    if bit(t, sys::PERF_SAMPLE_READ) {
        size += Stat::read_size(attr.read_format, 1) as u64;
    }
    if bit(t, sys::PERF_SAMPLE_CALLCHAIN) {
        let frames = match attr.sample_max_stack {
            0 => sysctl("perf_event_max_stack", 127),
            n => u64::from(n),
        };
        let contexts = sysctl("perf_event_max_contexts_per_stack", 8);
        size += 8 + 8 * (frames + contexts);
    }
    if bit(t, sys::PERF_SAMPLE_RAW) {
        size += 8; // u32 size + at least 4 bytes, kept 8-aligned
    }
    if bit(t, sys::PERF_SAMPLE_BRANCH_STACK) {
        size += 8;
    }
    if bit(t, sys::PERF_SAMPLE_REGS_USER) {
        size += 8 + 8 * u64::from(attr.sample_regs_user.count_ones());
    }
    if bit(t, sys::PERF_SAMPLE_STACK_USER) {
        let stack = u64::from(attr.sample_stack_user);
        size += if stack == 0 { 8 } else { 16 + stack };
    }
    if bit(t, sys::PERF_SAMPLE_REGS_INTR) {
        size += 8 + 8 * u64::from(attr.sample_regs_intr.count_ones());
    }
    if bit(t, sys::PERF_SAMPLE_AUX) {
        size += 8 + u64::from(attr.aux_sample_size).div_ceil(8) * 8;
    }
    size.min(MAX_RECORD)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_user_stack_makes_the_largest_record_the_kernels_limit() {
        let mut attr = perf_event_attr {
            sample_type: u64::from(
                sys::PERF_SAMPLE_IP | sys::PERF_SAMPLE_TID | sys::PERF_SAMPLE_STACK_USER,
            ),
            sample_stack_user: 65528,
            ..Default::default()
        };
        assert_eq!(largest_record(&attr), MAX_RECORD);
        attr.sample_stack_user = 8192;
        assert_eq!(largest_record(&attr), 8 + 8 + 8 + 16 + 8192);
        attr.sample_type = u64::from(sys::PERF_SAMPLE_IP);
        assert_eq!(largest_record(&attr), 16);
    }

    #[test]
    fn callchains_count_their_frames_and_contexts() {
        let mut attr = perf_event_attr {
            sample_type: u64::from(sys::PERF_SAMPLE_CALLCHAIN),
            ..Default::default()
        };
        attr.sample_max_stack = 10;
        let contexts = sysctl("perf_event_max_contexts_per_stack", 8);
        assert_eq!(largest_record(&attr), 8 + 8 + 8 * (10 + contexts));
    }

    #[test]
    fn lost_records_carry_the_sample_id_trailer() {
        let mut attr = perf_event_attr {
            sample_type: u64::from(sys::PERF_SAMPLE_TID | sys::PERF_SAMPLE_TIME),
            ..Default::default()
        };
        assert_eq!(lost_record(&attr), 24);
        attr.set_sample_id_all(1);
        assert_eq!(lost_record(&attr), 40);
    }
}
