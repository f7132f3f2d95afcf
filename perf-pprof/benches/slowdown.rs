//! The profiled program's slowdown with perf-pprof and with pprof-rs 0.15, at 99 Hz and 999 Hz,
//! and the cost of `report().build()` for the same profile (the first report of a guard, and a
//! later one after a tenth more of the work): `cargo bench -p perf-pprof --bench slowdown`.
//!
//! pprof-rs's `setitimer(ITIMER_PROF)` fires at most once per kernel tick, so its "999 Hz" takes
//! the tick rate (250 a CPU second with `CONFIG_HZ=250`), where ours takes 999: the last row runs
//! ours at the rate pprof-rs reached, for a comparison at equal samples.
//!
//! The workload (4 threads hashing and allocating, then a tenth more on one thread between the two
//! reports) does a fixed amount of work; its cost is the process's CPU time
//! (`CLOCK_PROCESS_CPUTIME_ID`: user + system, every thread: pprof-rs's unwinding runs in the
//! profiled threads' signal handlers, ours on the collector thread, both are counted) less the
//! reports' time, the median of `REPS` runs, divided by the unprofiled runs'. The runs go in
//! rounds, each round one run of every row in turn, so that a drift of the machine over the
//! bench's minutes falls on every row alike.

use std::hint::black_box;
use std::time::{Duration, Instant};

const THREADS: usize = 4;
const REPS: usize = 5;

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

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// What one profiled run gave.
struct Run {
    /// The first report's build time, and that of a second report built after a tenth more of
    /// the workload.
    first: Duration,
    later: Duration,
    /// Samples in the first report.
    samples: isize,
    /// CPU time of the profiler's own thread (ours: the collector), if it has one.
    collector: Duration,
}

/// Medians of the REPS runs of a row (each started a profiler, ran the workload, built the
/// reports): the workload's CPU seconds less the reports' time, first and later report times,
/// samples, the collector's CPU seconds; and the very first run's first report (the process's
/// first report at this point of the bench).
struct Measured {
    cpu: f64,
    first: f64,
    later: f64,
    samples: f64,
    collector: f64,
    first_of_all: f64,
}

/// One run of `profile` (which starts a profiler, runs the workload, builds the reports): the
/// workload's CPU seconds, less the reports' time, and what the run gave.
fn timed(profile: impl FnOnce() -> Run) -> (f64, Run) {
    let before = tests::process_cpu_time();
    let r = profile();
    let during = tests::process_cpu_time() - before;
    (
        during.as_secs_f64() - r.first.as_secs_f64() - r.later.as_secs_f64(),
        r,
    )
}

fn summarize(runs: &[(f64, Run)]) -> Measured {
    let of = |f: &dyn Fn(&(f64, Run)) -> f64| median(runs.iter().map(f).collect());
    Measured {
        first_of_all: runs[0].1.first.as_secs_f64(),
        cpu: of(&|r| r.0),
        first: of(&|r| r.1.first.as_secs_f64()),
        later: of(&|r| r.1.later.as_secs_f64()),
        samples: of(&|r| r.1.samples as f64),
        collector: of(&|r| r.1.collector.as_secs_f64()),
    }
}

/// The CPU time of this process's thread named `name` (clock ticks of 10 ms).
fn thread_cpu_time(name: &str) -> Duration {
    for e in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
        if comm.trim() != name {
            continue;
        }
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        let Some(i) = stat.rfind(')') else { continue };
        let f: Vec<&str> = stat[i + 2..].split(' ').collect();
        let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
        return Duration::from_millis(ticks * 10);
    }
    Duration::ZERO
}

/// A tenth of the workload, between the first and the later report.
fn more_work() {
    for _ in 0..12 {
        black_box(hash_work(5_000_000));
        black_box(alloc_work(20_000));
    }
}

fn theirs(hz: i32) -> Run {
    let g = pprof_rs::ProfilerGuard::new(hz).unwrap();
    workload();
    let t = Instant::now();
    let r = g.report().build().unwrap();
    let first = t.elapsed();
    more_work();
    let t = Instant::now();
    black_box(g.report().build().unwrap());
    Run {
        first,
        later: t.elapsed(),
        samples: r.data.values().sum(),
        collector: Duration::ZERO,
    }
}

fn ours(hz: i32) -> Run {
    let g = pprof::ProfilerGuard::new(hz).unwrap();
    workload();
    let t = Instant::now();
    let r = g.report().build().unwrap();
    let first = t.elapsed();
    more_work();
    let t = Instant::now();
    black_box(g.report().build().unwrap());
    let later = t.elapsed();
    Run {
        first,
        later,
        samples: r.data.values().sum(),
        collector: thread_cpu_time("perf-pprof"),
    }
}

fn row(name: &str, hz: i32, m: &Measured, base: f64) {
    println!(
        "| {name} | {hz} | {:.2} | {:.3} | {:.0} | {:.0} | {:.2} | {:.1} ms ({:.1} ms) | {:.1} ms |",
        m.cpu,
        m.cpu / base,
        m.samples,
        m.samples / m.cpu,
        m.collector,
        m.first * 1000.0,
        m.first_of_all * 1000.0,
        m.later * 1000.0,
    );
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    // Rows: none, pprof-rs and ours at 99 Hz, at 999 Hz, and ours at the rate pprof-rs's "999 Hz"
    // reached in the same round (its timer fires at most once per kernel tick).
    let mut runs: Vec<Vec<(f64, Run)>> = (0..6).map(|_| Vec::new()).collect();
    let mut their_rates = Vec::new();
    for _ in 0..REPS {
        runs[0].push(timed(|| {
            workload();
            more_work();
            Run {
                first: Duration::ZERO,
                later: Duration::ZERO,
                samples: 0,
                collector: Duration::ZERO,
            }
        }));
        runs[1].push(timed(|| theirs(99)));
        runs[2].push(timed(|| ours(99)));
        let t = timed(|| theirs(999));
        let rate = t.1.samples as f64 / t.0;
        runs[3].push(t);
        runs[4].push(timed(|| ours(999)));
        their_rates.push(rate);
        runs[5].push(timed(|| ours(rate.round() as i32)));
    }
    let base = summarize(&runs[0]).cpu;
    println!(
        "| profiler | Hz | CPU s | slowdown | samples | samples per CPU s | collector CPU s | \
         first report (first run's) | later report |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    println!("| none | - | {base:.2} | 1.00 | - | - | - | - | - |");
    row("pprof-rs 0.15", 99, &summarize(&runs[1]), base);
    row("perf-pprof", 99, &summarize(&runs[2]), base);
    row("pprof-rs 0.15", 999, &summarize(&runs[3]), base);
    row("perf-pprof", 999, &summarize(&runs[4]), base);
    let hz = median(their_rates).round() as i32;
    row(
        "perf-pprof at pprof-rs's 999 Hz rate",
        hz,
        &summarize(&runs[5]),
        base,
    );
    // Each round's rows against that round's unprofiled run: the spread of the ratios.
    let ratios = |row: usize| -> String {
        let mut r: Vec<String> = runs[row]
            .iter()
            .zip(&runs[0])
            .map(|(p, b)| format!("{:.3}", p.0 / b.0))
            .collect();
        r.sort();
        r.join(" ")
    };
    println!();
    println!("Per round, each row against that round's unprofiled run (sorted):");
    for (i, name) in [
        "pprof-rs 0.15 at 99 Hz",
        "perf-pprof at 99 Hz",
        "pprof-rs 0.15 at 999 Hz",
        "perf-pprof at 999 Hz",
        "perf-pprof at pprof-rs's rate",
    ]
    .iter()
    .enumerate()
    {
        println!("  {name}: {}", ratios(i + 1));
    }
}
