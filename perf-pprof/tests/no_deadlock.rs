//! pprof-rs's deadlocks (its issues #36 and #203) come from unwinding and allocating in the
//! SIGPROF handler while the interrupted thread holds a lock: the allocator's, or the unwinder's
//! while `std::backtrace` runs. Here nothing runs in the profiled threads: many threads allocating
//! and capturing backtraces while sampled at 999 Hz (and reports built meanwhile) finish every
//! round, with every thread sampled.

use std::backtrace::Backtrace;
use std::hint::black_box;
use std::sync::mpsc;
use std::time::{Duration, Instant};

mod common;

const THREADS: usize = 8;

/// Rounds and each round's length: 3 of 2.5 s in the test suite; `PERF_PPROF_NO_DEADLOCK=ROUNDSxSECS`
/// sets them (`.ci/run` runs the 10 rounds of 10 s).
fn rounds() -> (usize, Duration) {
    let var = std::env::var("PERF_PPROF_NO_DEADLOCK").unwrap_or_default();
    match var.split_once('x').map(|(r, s)| (r.parse(), s.parse())) {
        Some((Ok(r), Ok(s))) => (r, Duration::from_secs_f64(s)),
        _ if var.is_empty() => (3, Duration::from_millis(2500)),
        _ => panic!("PERF_PPROF_NO_DEADLOCK={var:?}: want ROUNDSxSECS, e.g. 10x10"),
    }
}

#[inline(never)]
fn allocate_and_backtrace(until: Instant) -> usize {
    let mut n = 0;
    while Instant::now() < until {
        let v: Vec<Box<[u8]>> = (0..64).map(|i| vec![i as u8; 64 + i].into()).collect();
        let bt = Backtrace::force_capture();
        // Resolving the symbols takes std's backtrace lock and allocates.
        n += black_box(bt.to_string().len()) + black_box(v.len());
    }
    n
}

/// Starts the round's threads, each allocating and backtracing for `len`.
fn start_workers(len: Duration) -> mpsc::Receiver<usize> {
    let (done, finished) = mpsc::channel();
    for _ in 0..THREADS {
        let done = done.clone();
        std::thread::spawn(move || {
            let n = allocate_and_backtrace(Instant::now() + len);
            let _ = done.send(n);
        });
    }
    finished
}

/// Waits for every thread of a round; a deadlocked thread never sends: fail instead of hanging.
fn wait_workers(finished: &mpsc::Receiver<usize>, len: Duration, who: &str) {
    for i in 0..THREADS {
        let n = finished
            .recv_timeout(len + Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("{who}: thread {i} of {THREADS} did not finish"));
        assert!(n > 0);
    }
}

#[test]
fn sampling_at_999_hz_never_deadlocks_allocating_backtracing_threads() {
    let (rounds, round_len) = rounds();
    for round in 0..rounds {
        let guard = match pprof::ProfilerGuard::new(999) {
            Ok(g) => g,
            Err(e @ pprof::Error::PerfEventParanoid { .. }) => {
                tests::skip(tests::Skip::Privilege, &e.to_string());
                return;
            }
            Err(e) => panic!("{e}"),
        };
        let started = Instant::now();
        let finished = start_workers(round_len);
        // Reports built while the threads run: the symbolizer allocates too.
        let mid = guard.report().build().unwrap();
        black_box(mid.data.len());
        wait_workers(&finished, round_len, &format!("round {round}"));
        let report = guard.report().build().unwrap();
        let total: isize = report.data.values().sum();
        let hot: isize = common::samples_in(&report, "allocate_and_backtrace");
        println!(
            "round {round}: {:.1} s, {total} samples, {hot} in allocate_and_backtrace",
            started.elapsed().as_secs_f64()
        );
        assert!(hot * 2 > total, "round {round}: {hot} of {total}");
        drop(guard);
    }
}

/// The same workload under pprof-rs 0.15 (the "before"): run by hand,
/// `cargo test -p perf-pprof --test no_deadlock -- --ignored --nocapture`, under `timeout`; it
/// may hang or crash, which is why it is not part of the suite.
#[test]
#[ignore]
fn pprof_rs_under_the_same_workload() {
    let (rounds, round_len) = rounds();
    for round in 0..rounds {
        let guard = pprof_rs::ProfilerGuard::new(999).unwrap();
        let started = Instant::now();
        let finished = start_workers(round_len);
        wait_workers(&finished, round_len, &format!("pprof-rs, round {round}"));
        let report = guard.report().build().unwrap();
        println!(
            "pprof-rs round {round}: {:.1} s, {} samples",
            started.elapsed().as_secs_f64(),
            report.data.values().sum::<isize>()
        );
    }
}
