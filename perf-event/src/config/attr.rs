//! Options + event → `perf_event_attr`.

use perf_sys as sys;
use sys::perf_event_attr;

use super::{Inherit, OnExecve, Opts, Repr, SampleOn, UseBuildId, WakeUpOn};
use crate::event::Event;

/// The attr size we encode: the newest ABI. Older kernels accept it while the fields they lack are
/// zero (every option left unset, or set to zero, leaves them zero), and answer `E2BIG` otherwise,
/// writing back the size of their own attr: diagnosed as [`crate::Error::KernelTooOld`] with that
/// size and every option set past it. The matrix proves Linux 5.10 and newer.
pub(crate) const ATTR_SIZE: u32 = core::mem::size_of::<perf_event_attr>() as u32;

/// Builds the attr for `event` with `opts`.
pub(crate) fn build(event: &Event, opts: &Opts) -> perf_event_attr {
    let mut a = perf_event_attr {
        size: ATTR_SIZE,
        ..Default::default()
    };
    let on = |b: bool| u64::from(b);
    event.apply(&mut a);

    let ex = &opts.exclude;
    a.set_exclude_user(on(ex.user));
    a.set_exclude_kernel(on(ex.kernel));
    a.set_exclude_hv(on(ex.hv));
    a.set_exclude_host(on(ex.host));
    a.set_exclude_guest(on(ex.guest));
    a.set_exclude_idle(on(ex.idle));
    a.set_exclusive(on(opts.only_group));
    a.set_pinned(on(opts.pin_on_pmu));
    match opts.inherit {
        Some(Inherit::NewChild) => a.set_inherit(1),
        Some(Inherit::NewThread) => {
            a.set_inherit(1);
            a.set_inherit_thread(1);
        }
        None => {}
    }
    match opts.on_execve {
        Some(OnExecve::Enable) => a.set_enable_on_exec(1),
        Some(OnExecve::Remove) => a.set_remove_on_exec(1),
        None => {}
    }
    let sf = &opts.stat_format;
    let mut rf = 0u32;
    for (set, bit) in [
        (sf.id, sys::PERF_FORMAT_ID),
        (sf.time_enabled, sys::PERF_FORMAT_TOTAL_TIME_ENABLED),
        (sf.time_running, sys::PERF_FORMAT_TOTAL_TIME_RUNNING),
        (sf.lost_records, sys::PERF_FORMAT_LOST),
        (sf.siblings, sys::PERF_FORMAT_GROUP),
    ] {
        if set {
            rf |= bit;
        }
    }
    a.read_format = u64::from(rf);
    a.set_disabled(on(!opts.enable));
    match opts.sample_on {
        SampleOn::Freq(f) => {
            a.set_freq(1);
            a.__bindgen_anon_1.sample_freq = f;
        }
        SampleOn::Count(n) => a.__bindgen_anon_1.sample_period = n,
    }
    a.set_precise_ip(opts.sample_skid.precise_ip());

    let fmt = &opts.sample_format;
    let mut st = 0u32;
    let mut bit = |set: bool, b: u32| {
        if set {
            st |= b;
        }
    };
    bit(fmt.stat, sys::PERF_SAMPLE_READ);
    bit(fmt.period, sys::PERF_SAMPLE_PERIOD);
    bit(fmt.cgroup, sys::PERF_SAMPLE_CGROUP);
    bit(fmt.data_addr, sys::PERF_SAMPLE_ADDR);
    bit(fmt.data_phys_addr, sys::PERF_SAMPLE_PHYS_ADDR);
    bit(fmt.data_page_size, sys::PERF_SAMPLE_DATA_PAGE_SIZE);
    bit(fmt.data_source, sys::PERF_SAMPLE_DATA_SRC);
    bit(fmt.code_addr, sys::PERF_SAMPLE_IP);
    bit(fmt.code_page_size, sys::PERF_SAMPLE_CODE_PAGE_SIZE);
    bit(fmt.raw, sys::PERF_SAMPLE_RAW);
    bit(fmt.txn, sys::PERF_SAMPLE_TRANSACTION);
    bit(fmt.call_chain.is_some(), sys::PERF_SAMPLE_CALLCHAIN);
    bit(fmt.user_stack.is_some(), sys::PERF_SAMPLE_STACK_USER);
    bit(fmt.user_regs.is_some(), sys::PERF_SAMPLE_REGS_USER);
    bit(fmt.intr_regs.is_some(), sys::PERF_SAMPLE_REGS_INTR);
    bit(fmt.lbr.is_some(), sys::PERF_SAMPLE_BRANCH_STACK);
    bit(fmt.aux.is_some(), sys::PERF_SAMPLE_AUX);
    bit(fmt.weight == Some(Repr::Full), sys::PERF_SAMPLE_WEIGHT);
    bit(
        fmt.weight == Some(Repr::Vars),
        sys::PERF_SAMPLE_WEIGHT_STRUCT,
    );
    let id = &opts.record_id_format;
    bit(id.id, sys::PERF_SAMPLE_ID);
    bit(id.stream_id, sys::PERF_SAMPLE_STREAM_ID);
    bit(id.cpu, sys::PERF_SAMPLE_CPU);
    bit(id.task, sys::PERF_SAMPLE_TID);
    bit(id.time, sys::PERF_SAMPLE_TIME);
    bit(id.identifier, sys::PERF_SAMPLE_IDENTIFIER);
    a.sample_type = u64::from(st);

    if let Some(cc) = &fmt.call_chain {
        a.set_exclude_callchain_user(on(cc.exclude_user));
        a.set_exclude_callchain_kernel(on(cc.exclude_kernel));
        a.set_defer_callchain(on(cc.defer_user));
        a.sample_max_stack = cc.max_stack_frames;
    }
    if let Some(s) = fmt.user_stack {
        a.sample_stack_user = s.0;
    }
    if let Some(m) = fmt.user_regs {
        a.sample_regs_user = m.0;
    }
    if let Some(m) = fmt.intr_regs {
        a.sample_regs_intr = m.0;
    }
    if let Some(s) = fmt.aux {
        a.aux_sample_size = s.0;
    }
    if let Some(lbr) = &fmt.lbr {
        let mut b = 0u32;
        let mut flag = |set: bool, f: u32| {
            if set {
                b |= f;
            }
        };
        if let Some(p) = &lbr.target_priv {
            flag(p.user, sys::PERF_SAMPLE_BRANCH_USER);
            flag(p.kernel, sys::PERF_SAMPLE_BRANCH_KERNEL);
            flag(p.hv, sys::PERF_SAMPLE_BRANCH_HV);
        }
        let t = &lbr.branch_type;
        flag(t.any, sys::PERF_SAMPLE_BRANCH_ANY);
        flag(t.any_return, sys::PERF_SAMPLE_BRANCH_ANY_RETURN);
        flag(t.cond, sys::PERF_SAMPLE_BRANCH_COND);
        flag(t.ind_jump, sys::PERF_SAMPLE_BRANCH_IND_JUMP);
        flag(t.call_stack, sys::PERF_SAMPLE_BRANCH_CALL_STACK);
        flag(t.call, sys::PERF_SAMPLE_BRANCH_CALL);
        flag(t.ind_call, sys::PERF_SAMPLE_BRANCH_IND_CALL);
        flag(t.any_call, sys::PERF_SAMPLE_BRANCH_ANY_CALL);
        flag(t.in_tx, sys::PERF_SAMPLE_BRANCH_IN_TX);
        flag(t.no_tx, sys::PERF_SAMPLE_BRANCH_NO_TX);
        flag(t.abort_tx, sys::PERF_SAMPLE_BRANCH_ABORT_TX);
        flag(lbr.hw_index, sys::PERF_SAMPLE_BRANCH_HW_INDEX);
        let e = &lbr.entry_format;
        flag(!e.flags, sys::PERF_SAMPLE_BRANCH_NO_FLAGS);
        flag(!e.cycles, sys::PERF_SAMPLE_BRANCH_NO_CYCLES);
        flag(e.counter, sys::PERF_SAMPLE_BRANCH_COUNTERS);
        flag(e.branch_type, sys::PERF_SAMPLE_BRANCH_TYPE_SAVE);
        flag(e.branch_priv, sys::PERF_SAMPLE_BRANCH_PRIV_SAVE);
        a.branch_sample_type = u64::from(b);
    }

    let x = &opts.extra_record;
    a.set_task(on(x.task));
    a.set_inherit_stat(on(x.read));
    a.set_comm(on(x.comm));
    a.set_comm_exec(on(x.comm_exec));
    a.set_mmap(on(x.mmap.code));
    a.set_mmap_data(on(x.mmap.data));
    if let Some(UseBuildId(build_id)) = x.mmap.ext {
        a.set_mmap(1);
        a.set_mmap2(1);
        a.set_build_id(on(build_id));
    }
    a.set_cgroup(on(x.cgroup));
    a.set_ksymbol(on(x.ksymbol));
    a.set_bpf_event(on(x.bpf_event));
    a.set_text_poke(on(x.text_poke));
    a.set_context_switch(on(x.ctx_switch));
    a.set_namespaces(on(x.namespaces));
    a.set_defer_output(on(x.call_chain_deferred));

    a.set_sample_id_all(on(opts.record_id_all));
    match opts.wake_up.on {
        WakeUpOn::Bytes(n) => {
            a.set_watermark(1);
            a.__bindgen_anon_2.wakeup_watermark = n;
        }
        WakeUpOn::Samples(n) => a.__bindgen_anon_2.wakeup_events = n,
    }
    a.aux_watermark = opts.wake_up.on_aux_bytes;
    if let Some(sig) = opts.sigtrap_on_sample {
        a.set_sigtrap(1);
        a.sig_data = sig.0;
    }
    if let Some(clock) = opts.timer {
        a.set_use_clockid(1);
        a.clockid = clock.clockid();
    }
    a.set_write_backward(on(opts.write_backward));
    a.set_aux_output(on(opts.aux_output));
    let mut aux_action = 0u32;
    if opts.pause_aux {
        aux_action |= 1;
    }
    match opts.aux_on_sample {
        Some(super::sibling::AuxTracer::Pause) => aux_action |= 2,
        Some(super::sibling::AuxTracer::Resume) => aux_action |= 4,
        None => {}
    }
    a.__bindgen_anon_5.aux_action = aux_action;

    // Modifiers written in an event name ("page-faults:u") win over `opts.exclude`.
    event.apply_modifiers(&mut a);
    a
}

const FORMAT_LOST: u64 = sys::PERF_FORMAT_LOST as u64;

/// Adds `PERF_FORMAT_LOST` to the attr of a sampling counter, as [`Opts::exact_stat_format`]
/// says, unless the running kernel has `refused` it already. Returns whether it added it (a
/// default, which the open may drop if the kernel refuses it); an explicit
/// `stat_format.lost_records` is in the attr already and is not a default.
pub(crate) fn add_default_lost(a: &mut perf_event_attr, opts: &Opts, refused: bool) -> bool {
    let sampling = a.sample_period_or_freq() != 0;
    let wanted = sampling && !opts.exact_stat_format && !refused;
    if !wanted || a.read_format & FORMAT_LOST != 0 {
        return false;
    }
    a.read_format |= FORMAT_LOST;
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{CallChain, SigData, Size, StatFormat};
    use crate::event::sw::Software;

    #[test]
    fn defaults_are_a_disabled_counter_of_the_newest_size() {
        let a = build(&Software::TaskClock.into(), &Opts::default());
        assert_eq!(a.size, ATTR_SIZE);
        assert_eq!(a.type_, sys::PERF_TYPE_SOFTWARE);
        assert_eq!(a.config, u64::from(sys::PERF_COUNT_SW_TASK_CLOCK));
        assert_eq!(a.disabled(), 1);
        assert_eq!(a.read_format, 0);
        assert_eq!(a.sample_type, 0);
        assert_eq!(a.sample_period_or_freq(), 0);
    }

    #[test]
    fn the_default_call_chain_has_kernel_and_user_frames_up_to_the_system_maximum() {
        let mut o = Opts {
            sample_on: SampleOn::Count(1000),
            ..Opts::default()
        };
        o.sample_format.call_chain = Some(CallChain::default());
        let a = build(&Software::TaskClock.into(), &o);
        assert_eq!(a.sample_type, u64::from(sys::PERF_SAMPLE_CALLCHAIN));
        assert_eq!(a.exclude_callchain_user(), 0);
        assert_eq!(a.exclude_callchain_kernel(), 0);
        assert_eq!(a.defer_callchain(), 0);
        assert_eq!(a.sample_max_stack, 0, "0 = kernel.perf_event_max_stack");
    }

    const LOST: u64 = sys::PERF_FORMAT_LOST as u64;

    /// `(added, read_format)` for `o` on a kernel that has (or, `refused`, lacks) the format.
    fn lost_default(o: &Opts, refused: bool) -> (bool, u64) {
        let mut a = build(&Software::TaskClock.into(), o);
        let added = add_default_lost(&mut a, o, refused);
        (added, a.read_format)
    }

    #[test]
    fn a_sampling_counter_reads_the_lost_count_by_default() {
        let mut o = Opts {
            sample_on: SampleOn::Count(1000),
            ..Opts::default()
        };
        assert_eq!(lost_default(&o, false), (true, LOST));
        o.sample_on = SampleOn::Freq(99);
        assert_eq!(lost_default(&o, false), (true, LOST));
        // Not where the kernel refused it already.
        assert_eq!(lost_default(&o, true), (false, 0));
        // Asked for explicitly: in the attr, but not a default that may be dropped.
        o.stat_format.lost_records = true;
        assert_eq!(lost_default(&o, false), (false, LOST));
        assert_eq!(lost_default(&o, true), (false, LOST));
        // Explicitly not: exactly the stat_format.
        o.stat_format.lost_records = false;
        o.exact_stat_format = true;
        assert_eq!(lost_default(&o, false), (false, 0));
        // Counting only (period 0, or frequency 0, which the kernel treats alike): nothing added.
        for on in [SampleOn::Count(0), SampleOn::Freq(0)] {
            let o = Opts {
                sample_on: on,
                ..Opts::default()
            };
            assert_eq!(lost_default(&o, false), (false, 0));
        }
    }

    #[test]
    fn options_map_to_their_bits() {
        let mut o = Opts::default();
        o.exclude.kernel = true;
        o.exclude.hv = true;
        o.stat_format = StatFormat {
            id: true,
            time_enabled: true,
            time_running: true,
            lost_records: true,
            siblings: true,
        };
        o.sample_on = SampleOn::Freq(999);
        o.sample_format.user_stack = Some(Size(8));
        o.sample_format.call_chain = Some(CallChain {
            exclude_user: false,
            exclude_kernel: true,
            defer_user: false,
            max_stack_frames: 7,
        });
        o.sigtrap_on_sample = Some(SigData(42));
        o.on_execve = Some(OnExecve::Remove);
        o.inherit = Some(Inherit::NewThread);
        o.wake_up.on = WakeUpOn::Bytes(64);
        o.pause_aux = true;
        let a = build(&Software::PageFault.into(), &o);
        assert_eq!(a.exclude_kernel(), 1);
        assert_eq!(a.exclude_hv(), 1);
        assert_eq!(a.exclude_user(), 0);
        assert_eq!(a.read_format, 0b11111);
        assert_eq!(a.freq(), 1);
        assert_eq!(a.sample_period_or_freq(), 999);
        assert_eq!(
            a.sample_type,
            u64::from(sys::PERF_SAMPLE_STACK_USER | sys::PERF_SAMPLE_CALLCHAIN)
        );
        assert_eq!(a.sample_stack_user, 8);
        assert_eq!(a.exclude_callchain_kernel(), 1);
        assert_eq!(a.sample_max_stack, 7);
        assert_eq!((a.sigtrap(), a.sig_data), (1, 42));
        assert_eq!(a.remove_on_exec(), 1);
        assert_eq!((a.inherit(), a.inherit_thread()), (1, 1));
        assert_eq!(a.watermark(), 1);
        assert_eq!(a.wakeup_events_or_watermark(), 64);
        assert_eq!(a.aux_action(), 1);
    }
}
