//! A report shows the program, not the profiler: the collector thread and the thread that names
//! frames are sampled as every thread of the process is, and reports leave them out. A test
//! binary of its own, so that its first report is a cold one (the names are kept for the process):
//! reading this debug binary's DWARF takes the naming thread about a second of CPU at 999 Hz.

use std::hint::black_box;
use std::time::{Duration, Instant};

mod common;

#[inline(never)]
fn spin_in_the_program(until: Instant) -> u64 {
    let mut x = 0u64;
    while Instant::now() < until {
        for i in 0..10_000u64 {
            x = black_box(x.wrapping_mul(31).wrapping_add(i));
        }
    }
    x
}

#[test]
fn reports_leave_out_the_profilers_own_threads() {
    let Some(guard) = common::guard(999) else {
        return;
    };
    black_box(spin_in_the_program(
        Instant::now() + Duration::from_millis(300),
    ));
    // The cold report: the naming thread reads this binary's DWARF while sampling goes on.
    let cold = Instant::now();
    black_box(guard.report().build().unwrap().data.len());
    let cold = cold.elapsed();
    black_box(spin_in_the_program(
        Instant::now() + Duration::from_millis(300),
    ));
    let report = guard.report().build().unwrap();
    let mut by_thread = std::collections::BTreeMap::<String, isize>::new();
    for (frames, n) in &report.data {
        *by_thread.entry(frames.thread_name.clone()).or_default() += n;
    }
    println!("cold report {cold:?}; samples by thread: {by_thread:?}");
    for own in ["perf-pprof", "pprof-symbols"] {
        assert!(!by_thread.contains_key(own), "{own}: {by_thread:?}");
    }
    assert!(
        !by_thread.keys().any(|t| t.starts_with("perf-profile-")),
        "{by_thread:?}"
    );
    let spun: isize = common::samples_in(&report, "spin_in_the_program");
    // 0.6 s of spinning at 999 Hz; a loaded machine may give it less of a CPU, never none.
    assert!(spun > 60, "{spun} in spin_in_the_program: {by_thread:?}");
}
