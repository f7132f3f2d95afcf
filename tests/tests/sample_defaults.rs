//! What sampling does with default options on the real kernel: `CallChain::default()` records
//! call chains; a sampling counter reads the kernel's own lost-record count (`PERF_FORMAT_LOST`)
//! unless told not to.
#![allow(clippy::field_reassign_with_default)] // options are set field by field, as in the docs

use std::time::Duration;

use perf_event::config::{CallChain, Cpu, Opts, Proc, SampleOn};
use perf_event::count::Counter;
use perf_event::event::sw::Software;
use perf_event::sample::record::Record;
use tests::{is_root, paranoid, require, Skip};

fn may_sample_self() -> bool {
    is_root() || paranoid() <= 2
}

#[test]
fn the_default_call_chain_records_user_frames() {
    require!(
        may_sample_self(),
        Skip::Privilege,
        "perf_event_paranoid {} > 2",
        paranoid()
    );
    let mut opts = Opts::default();
    opts.exclude.kernel = true;
    opts.sample_on = SampleOn::Count(100_000);
    opts.sample_format.call_chain = Some(CallChain::default());
    let counter = Counter::new(Software::TaskClock, (Proc::CURRENT, Cpu::ALL), &opts).unwrap();
    assert_eq!(counter.attr().sample_max_stack, 0);
    let sampler = counter.sampler(6).unwrap();
    counter.enable().unwrap();
    tests::busy_loop(Duration::from_millis(20));
    counter.disable().unwrap();
    let mut samples = 0;
    let mut with_frames = 0;
    for (_, r) in sampler.iter() {
        if let Record::Sample(s) = r {
            samples += 1;
            let chain = s.call_chain.as_ref().expect("call chain asked for");
            if !chain.is_empty() {
                with_frames += 1;
            }
        }
    }
    assert!(samples > 0, "no sample in 20 ms at one per 100 µs");
    assert!(
        with_frames > 0,
        "none of {samples} samples has a call chain"
    );
}
