//! Sixteen async samplers run on at most one helper thread (the shared reactor), under one
//! `futures::executor` thread, and each of them is woken and yields its own samples.
//! One test in this binary, so no other test's threads mix into `/proc/self/task`.
#![allow(clippy::field_reassign_with_default)] // options are set field by field, as in the docs

use std::future::poll_fn;
use std::pin::Pin;
use std::task::Poll;
use std::time::{Duration, Instant};

use perf_event::config::{Cpu, Opts, Proc, SampleOn, WakeUpOn};
use perf_event::count::Counter;
use perf_event::event::sw::Software;
use perf_event::sample::record::Record;

fn threads() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| {
            std::fs::read_to_string(e.path().join("comm"))
                .unwrap_or_default()
                .trim()
                .to_owned()
        })
        .collect()
}

#[test]
fn sixteen_samplers_share_one_helper_thread() {
    let before = threads();
    let mut opts = Opts::default();
    opts.sample_on = SampleOn::Count(1);
    opts.sample_format.data_addr = true;
    opts.exclude.kernel = true;
    opts.wake_up.on = WakeUpOn::Samples(1);
    let counters: Vec<Counter> = (0..16)
        .map(|_| Counter::new(Software::PageFault, (Proc::CURRENT, Cpu::ALL), &opts).unwrap())
        .collect();
    let samplers: Vec<_> = counters.iter().map(|c| c.sampler(2).unwrap()).collect();
    let mut streams: Vec<_> = samplers
        .iter()
        .map(|s| s.iter().into_async().unwrap())
        .collect();
    // The reactor thread names itself when it starts running: give it a moment.
    let mut after_register = threads();
    let start = Instant::now();
    while !after_register.iter().any(|n| n == "perf-event-io")
        && start.elapsed() < Duration::from_secs(2)
    {
        std::thread::sleep(Duration::from_millis(1));
        after_register = threads();
    }
    assert!(
        after_register.len() <= before.len() + 1,
        "16 async samplers added {} threads: {before:?} -> {after_register:?}",
        after_register.len() - before.len()
    );
    assert_eq!(
        after_register
            .iter()
            .filter(|n| *n == "perf-event-io")
            .count(),
        1,
        "one reactor thread: {after_register:?}"
    );

    // Each stream is polled (and left pending) first, then the faults happen on this thread, and
    // every stream must be woken by the reactor and yield samples.
    let mut got = [0u64; 16];
    futures::executor::block_on(async {
        let mut touched = false;
        let deadline = Instant::now() + Duration::from_secs(10);
        poll_fn(|cx| {
            for (stream, n) in streams.iter_mut().zip(got.iter_mut()) {
                while let Poll::Ready(Some(item)) = Pin::new(&mut *stream).poll_try_next(cx) {
                    let (_, record) = item.unwrap();
                    *n += u64::from(matches!(record, Record::Sample(_)));
                }
            }
            if got.iter().all(|&n| n >= 8) {
                return Poll::Ready(());
            }
            assert!(Instant::now() < deadline, "samples per stream: {got:?}");
            if !touched {
                touched = true;
                for c in &counters {
                    c.enable().unwrap();
                }
                tests::touch_pages(8);
                for c in &counters {
                    c.disable().unwrap();
                }
            }
            Poll::Pending
        })
        .await;
    });
    assert!(got.iter().all(|&n| n >= 8), "{got:?}");
    let after = threads();
    assert!(after.len() <= before.len() + 1, "{before:?} -> {after:?}");
    println!(
        "threads: {} before, {} with 16 async samplers",
        before.len(),
        after.len()
    );
}
