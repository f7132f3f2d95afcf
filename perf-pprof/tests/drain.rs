//! A report that symbolizes for a long time does not stop the collector thread from draining the
//! rings: sampling at 999 Hz goes on meanwhile, and no record is lost. The symbols read stay: a
//! later guard's report of the same code is cheap.
//!
//! The slow symbolization is this test binary's own: a debug build's DWARF (every dependency's
//! too) read for the first time, hundreds of milliseconds to seconds, while a ring holds about 250
//! samples (8 KiB stack copies in 2 MiB). One test in this binary, so that its first report is the
//! first to read that DWARF.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;

#[inline(never)]
fn drain_spin(stop: &AtomicBool) -> u64 {
    let mut x = 1u64;
    while !stop.load(Ordering::Relaxed) {
        x = black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
    x
}

#[test]
fn a_slow_first_report_loses_no_samples_at_999_hz_and_its_names_stay() {
    let Some(g) = common::guard(999) else {
        return;
    };
    let stop = Arc::new(AtomicBool::new(false));
    // One spinning thread per CPU: each CPU's ring fills at up to 999 samples a second.
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    let spinners: Vec<_> = (0..cpus)
        .map(|_| {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || black_box(drain_spin(&stop)))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let before = g.profile().info.stats;
    let t = Instant::now();
    let report = g.report().build().unwrap();
    let took = t.elapsed();
    // Sampling goes on as long again after the report, so that what the report kept from
    // the collector shows as lost records once the rings are read.
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    for s in spinners {
        s.join().unwrap();
    }
    let after = g.profile().info.stats;
    let samples: isize = report.data.values().sum();
    println!(
        "first report: {took:?} for {samples} samples; records lost before it {}, after it {} \
         (samples lost {}), samples {} -> {}",
        before.lost_records, after.lost_records, after.lost_samples, before.samples, after.samples,
    );
    assert!(samples > 0);
    // The DWARF read stays: a later report, and a later guard's, name the new addresses only.
    let t = Instant::now();
    let again = g.report().build().unwrap();
    let later = t.elapsed();
    let t = Instant::now();
    let third = g.report().build().unwrap();
    println!(
        "third report: {:?} for {} samples",
        t.elapsed(),
        third.data.values().sum::<isize>()
    );
    drop(g);
    let g2 = pprof::ProfilerGuard::new(999).unwrap();
    let stop2 = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| black_box(drain_spin(&stop2)));
        std::thread::sleep(Duration::from_millis(300));
        stop2.store(true, Ordering::Relaxed);
    });
    let t = Instant::now();
    let other = g2.report().build().unwrap();
    let other_guard = t.elapsed();
    println!(
        "later report: {later:?} for {} samples; a new guard's first report: {other_guard:?} \
         for {} samples",
        again.data.values().sum::<isize>(),
        other.data.values().sum::<isize>()
    );
    // The later reports of the same guard name the addresses sampled since, among them the
    // symbolizing thread's own (in a debug build, parts of the DWARF not yet read): they are
    // printed, not bounded. The new guard's stacks are those the first report named.
    assert!(other_guard < took / 4, "{other_guard:?} after {took:?}");
    assert_eq!(
        after.lost_records, 0,
        "the collector could not drain the rings for the {took:?} the report took"
    );
}
