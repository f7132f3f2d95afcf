//! Why a hardware event could not join a group: the group would need more counters than the PMU has.
//!
//! The kernel checks, when a member joins, that the whole group fits on the PMU at once (`validate_group`
//! in each PMU driver) and refuses the member with a bare `EINVAL` otherwise. The number of counters is
//! not in sysfs, so on that error the group's own event is probed: how many copies of it the PMU takes
//! in one group. That number, the PMU's name and the group's size make the message.

use perf_sys as sys;
use sys::perf_event_attr;

use super::self_read::{cpu_pmu_name, is_on_cpu_pmu};
use super::CounterGroup;
use crate::error::Error;

/// The most members the probe tries (more counters than any PMU has).
const PROBE_LIMIT: usize = 64;

/// Explains `err`, the refusal of a member with `attr` by `group`, when it is the PMU's "does not fit":
/// an `EINVAL` for a CPU PMU event, and the PMU takes fewer such events in one group than the group
/// would hold. Any other error is returned as it is.
pub(super) fn explain_refused_member(
    group: &CounterGroup,
    err: Error,
    attr: &perf_event_attr,
) -> Error {
    let Error::Open { event, source, .. } = &err else {
        return err;
    };
    if source.raw_os_error() != Some(libc::EINVAL) || !is_on_cpu_pmu(attr.type_) {
        return err;
    }
    let on_pmu = 1 + std::iter::once(group.leader())
        .chain(group.siblings().iter().map(|s| &**s))
        .filter(|c| is_on_cpu_pmu(c.attr().type_))
        .count();
    let Some(fit) = probe_capacity(attr) else {
        return err;
    };
    if fit >= on_pmu {
        return err;
    }
    let pmu = cpu_pmu_name(attr.type_).unwrap_or_else(|| "the CPU PMU".into());
    let disabled_leader = group.leader().attr().disabled() != 0;
    Error::Open {
        event: event.clone(),
        detail: format!(
            "the group cannot be scheduled: with this member it would hold {on_pmu} hardware events, \
             and PMU {pmu} has {fit} counters for events like this one (a group is on the PMU all at \
             once or not at all){}. Use a smaller group, or separate counters, which the kernel \
             multiplexes",
            if disabled_leader {
                "; the kernel leaves a disabled leader out of this check, so a group that already \
                 holds more than that was accepted and will never count"
            } else {
                ""
            }
        ),
        source: std::io::Error::from_raw_os_error(libc::EINVAL),
    }
}

/// How many copies of the event of `attr` the PMU schedules in one group: a probe group on the calling
/// thread, its members enabled (the kernel checks enabled members only), closed again at once. `None`
/// when not even one opens.
fn probe_capacity(attr: &perf_event_attr) -> Option<usize> {
    let mut probe = perf_event_attr {
        type_: attr.type_,
        size: attr.size,
        config: attr.config,
        ..Default::default()
    };
    probe.__bindgen_anon_3.config1 = attr.config1();
    probe.__bindgen_anon_4.config2 = attr.config2();
    probe.config3 = attr.config3;
    probe.set_exclude_user(attr.exclude_user());
    probe.set_exclude_kernel(attr.exclude_kernel());
    probe.set_exclude_hv(attr.exclude_hv());
    probe.set_exclude_idle(attr.exclude_idle());
    probe.set_exclude_host(attr.exclude_host());
    probe.set_exclude_guest(attr.exclude_guest());
    let flags = u64::from(sys::PERF_FLAG_FD_CLOEXEC);
    let leader = sys::perf_event_open(&probe, 0, -1, None, flags).ok()?;
    let mut members = vec![];
    while members.len() + 1 < PROBE_LIMIT {
        match sys::perf_event_open(
            &probe,
            0,
            -1,
            Some(std::os::fd::AsFd::as_fd(&leader)),
            flags,
        ) {
            Ok(fd) => members.push(fd),
            Err(_) => break,
        }
    }
    Some(members.len() + 1)
}
