//! The profiled program's slowdown with perf-pprof and with pprof-rs 0.15, at 99 Hz and 999 Hz,
//! and the cost of `report().build()` for the same profile: `cargo bench -p perf-pprof --bench
//! slowdown`.
//!
//! The workload (4 threads hashing and allocating) does a fixed amount of work; its cost is the
//! process's CPU time (user + system, every thread: pprof-rs's unwinding runs in the profiled
//! threads' signal handlers, ours on the collector thread, both are counted), the median of
//! `REPS` runs, divided by the unprofiled run's.

use std::hint::black_box;
use std::time::{Duration, Instant};

const THREADS: usize = 4;
const REPS: usize = 3;

#[inline(never)]
fn hash_work(rounds: u64) -> u64 {
    let mut x = 0u64;
    for i in 0..rounds {
        x = black_box(x.rotate_left(5) ^ i).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    x
}

#[inline(never)]
fn alloc_work(n: usize) -> usize {
    let v: Vec<Vec<u8>> = (0..n).map(|i| vec![i as u8; 32 + i % 512]).collect();
    black_box(v.iter().map(Vec::len).sum())
}

fn workload() {
    let threads: Vec<_> = (0..THREADS)
        .map(|_| {
            std::thread::spawn(|| {
                for _ in 0..120 {
                    black_box(hash_work(5_000_000));
                    black_box(alloc_work(20_000));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

/// This process's CPU time so far (user + system), from /proc/self/stat (clock ticks of 10 ms).
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = after.split(' ').collect();
    // Fields 14 and 15 (utime, stime); `after` starts at field 3.
    let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
    Duration::from_millis(ticks * 10)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The workload's CPU seconds under `profile` (which starts a profiler, runs the workload, builds
/// the report and returns how long that took and its sample count), less the report's time; the
/// report's time; the samples: medians of REPS.
fn measure(mut profile: impl FnMut() -> (Duration, isize)) -> (f64, f64, f64) {
    let mut cpu = Vec::new();
    let mut build = Vec::new();
    let mut samples = Vec::new();
    for _ in 0..REPS {
        let before = cpu_time();
        let (b, n) = profile();
        let during = cpu_time() - before;
        cpu.push(during.as_secs_f64() - b.as_secs_f64());
        build.push(b.as_secs_f64());
        samples.push(n as f64);
    }
    (median(cpu), median(build), median(samples))
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let (base, _, _) = measure(|| {
        workload();
        (Duration::ZERO, 0)
    });
    println!("| profiler | Hz | CPU s | slowdown | samples | report().build() |");
    println!("|---|---|---|---|---|---|");
    println!("| none | - | {base:.2} | 1.00 | - | - |");
    for hz in [99, 999] {
        let (theirs, theirs_build, theirs_n) = measure(|| {
            let g = pprof_rs::ProfilerGuard::new(hz).unwrap();
            workload();
            let t = Instant::now();
            let r = g.report().build().unwrap();
            (t.elapsed(), r.data.values().sum())
        });
        let (ours, ours_build, ours_n) = measure(|| {
            let g = pprof::ProfilerGuard::new(hz).unwrap();
            workload();
            let t = Instant::now();
            let r = g.report().build().unwrap();
            (t.elapsed(), r.data.values().sum())
        });
        println!(
            "| pprof-rs 0.15 | {hz} | {theirs:.2} | {:.3} | {theirs_n:.0} | {:.0} ms |",
            theirs / base,
            theirs_build * 1000.0
        );
        println!(
            "| perf-pprof | {hz} | {ours:.2} | {:.3} | {ours_n:.0} | {:.0} ms |",
            ours / base,
            ours_build * 1000.0
        );
    }
}
