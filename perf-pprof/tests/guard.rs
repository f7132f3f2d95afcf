//! The guard on the real kernel: a hot function is named in the report, inlined functions too,
//! threads started after the guard are sampled, and dropping the guard stops sampling.

use std::hint::black_box;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

mod common;
use common::{guard, samples_in};

/// Guards sample the whole process: one test at a time.
static ONE: Mutex<()> = Mutex::new(());

#[inline(never)]
fn spin_hot_outer(until: Instant) -> u64 {
    let mut x = 0u64;
    while Instant::now() < until {
        for i in 0..10_000u64 {
            x = black_box(x.wrapping_mul(31).wrapping_add(spin_inlined(i)));
        }
    }
    x
}

#[inline(always)]
fn spin_inlined(i: u64) -> u64 {
    black_box(i.rotate_left(7) ^ 0x9e37_79b9)
}

#[inline(never)]
fn later_thread_hot(until: Instant) -> u64 {
    let mut x = 1u64;
    while Instant::now() < until {
        x = black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
    x
}

fn share(report: &pprof::Report, name: &str) -> f64 {
    let total: isize = report.data.values().sum();
    samples_in(report, name) as f64 / total.max(1) as f64
}

#[test]
fn report_names_hot_functions_inlined_ones_and_later_threads() {
    let _one = ONE.lock().unwrap_or_else(PoisonError::into_inner);
    let Some(g) = guard(499) else { return };
    black_box(spin_hot_outer(Instant::now() + Duration::from_millis(700)));
    let t = std::thread::Builder::new()
        .name("later".into())
        .spawn(|| {
            black_box(later_thread_hot(
                Instant::now() + Duration::from_millis(700),
            ))
        })
        .unwrap();
    t.join().unwrap();
    let report = g.report().build().unwrap();
    let text = format!("{report:?}");
    let total: isize = report.data.values().sum();
    println!(
        "{total} samples; spin_hot_outer {:.2}, spin_inlined {:.2}, later_thread_hot {:.2}",
        share(&report, "spin_hot_outer"),
        share(&report, "spin_inlined"),
        share(&report, "later_thread_hot")
    );
    assert!(total > 100, "{total} samples in 1.4 s at 499 Hz");
    assert!(share(&report, "spin_hot_outer") > 0.3, "{text}");
    assert!(share(&report, "later_thread_hot") > 0.3, "{text}");
    // The debug info's inline records name the #[inline(always)] function.
    assert!(text.contains("spin_inlined"), "{text}");
    assert!(
        text.contains("FRAME: ") && text.contains("THREAD: "),
        "{text}"
    );
    assert_eq!(report.timing.frequency, 499);
    assert!(report.timing.duration >= Duration::from_millis(1400));

    // The post-processor sees every stack.
    let renamed = g
        .report()
        .frames_post_processor(|f| f.thread_name = "PROCESSED".into())
        .build()
        .unwrap();
    assert!(renamed.data.keys().all(|k| k.thread_name == "PROCESSED"));
    let unresolved = g.report().build_unresolved().unwrap();
    assert!(unresolved.data.values().sum::<isize>() >= total);
}

#[test]
fn drop_stops_sampling_and_joins_the_collector() {
    let _one = ONE.lock().unwrap_or_else(PoisonError::into_inner);
    let Some(g) = guard(999) else { return };
    black_box(later_thread_hot(
        Instant::now() + Duration::from_millis(200),
    ));
    drop(g);
    // The collector thread (named perf-pprof) is gone once the guard is.
    let names: Vec<String> = std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("comm")).ok())
        .collect();
    assert!(!names.iter().any(|n| n.trim() == "perf-pprof"), "{names:?}");
    // A new guard starts from nothing.
    let Some(g) = guard(999) else { return };
    let r = g.report().build().unwrap();
    assert!(r.data.values().sum::<isize>() < 50, "{r:?}");
}

#[inline(never)]
fn copy_big(until: Instant) -> usize {
    let src = vec![7u8; 8 << 20];
    let mut dst = vec![0u8; 8 << 20];
    let mut n = 0;
    while Instant::now() < until {
        // A copy this large is libc's memcpy/memmove.
        dst.copy_from_slice(black_box(&src));
        n += black_box(dst[n % dst.len()]) as usize;
    }
    n
}

/// Samples whose innermost frame is libc's copy routine, by count (named, or, where libc has no
/// `.symtab` for its local IFUNC variants, shown as `libc.so.6+0x...`).
fn libc_copy_leaves(r: &pprof::Report) -> isize {
    r.data
        .iter()
        .filter(|(k, _)| {
            k.frames.first().is_some_and(|f| {
                f.iter().any(|s| {
                    ["memmove", "memcpy", "libc.so"]
                        .iter()
                        .any(|n| s.name().contains(n))
                })
            })
        })
        .map(|(_, v)| *v)
        .sum()
}

#[test]
fn blocklist_leaves_out_samples_in_the_listed_libraries() {
    let _one = ONE.lock().unwrap_or_else(PoisonError::into_inner);
    let Some(g) = guard(499) else { return };
    black_box(copy_big(Instant::now() + Duration::from_millis(500)));
    let without = libc_copy_leaves(&g.report().build().unwrap());
    drop(g);
    assert!(
        without > 10,
        "{without} samples in libc's memcpy without a blocklist"
    );
    let g = pprof::ProfilerGuardBuilder::default()
        .frequency(499)
        .blocklist(&["libc.so", "libc-"])
        .build()
        .unwrap();
    black_box(copy_big(Instant::now() + Duration::from_millis(500)));
    // Outside libc: still there.
    black_box(spin_hot_outer(Instant::now() + Duration::from_millis(300)));
    let r = g.report().build().unwrap();
    assert_eq!(libc_copy_leaves(&r), 0, "{r:?}");
    let spun: isize = samples_in(&r, "spin_hot_outer");
    assert!(spun > 30, "{spun} samples in spin_hot_outer: {r:?}");
}

#[test]
fn each_stack_names_the_thread_that_ran_it() {
    let _one = ONE.lock().unwrap_or_else(PoisonError::into_inner);
    let Some(g) = guard(499) else { return };
    let spin = |name: &str| {
        std::thread::Builder::new()
            .name(name.into())
            .spawn(|| {
                black_box(later_thread_hot(
                    Instant::now() + Duration::from_millis(400),
                ))
            })
            .unwrap()
    };
    let (a, b) = (spin("pprof-alpha"), spin("pprof-beta"));
    a.join().unwrap();
    b.join().unwrap();
    let report = g.report().build().unwrap();
    let mut ids: std::collections::BTreeMap<&str, std::collections::BTreeSet<u64>> =
        Default::default();
    for (k, n) in &report.data {
        if k.frames
            .iter()
            .flatten()
            .any(|s| s.name().contains("later_thread_hot"))
        {
            ids.entry(k.thread_name.as_str())
                .or_default()
                .insert(k.thread_id);
            assert!(*n > 0);
        }
    }
    println!("threads of later_thread_hot: {ids:?}");
    let pid = u64::from(std::process::id());
    for name in ["pprof-alpha", "pprof-beta"] {
        let tids = ids
            .get(name)
            .unwrap_or_else(|| panic!("no {name}: {ids:?}"));
        assert_eq!(tids.len(), 1, "{name}: {ids:?}");
        assert!(
            !tids.contains(&pid),
            "{name}: the pid for a thread id: {ids:?}"
        );
    }
    assert_ne!(ids["pprof-alpha"], ids["pprof-beta"]);
    // The flame graph's roots are the threads.
    let text = format!("{report:?}");
    assert!(text.contains("THREAD: pprof-alpha"), "{text}");
}

#[inline(never)]
fn zero_reads(until: Instant) -> usize {
    use std::io::Read;
    let mut f = std::fs::File::open("/dev/zero").unwrap();
    let mut buf = vec![1u8; 1 << 20];
    let mut n = 0;
    while Instant::now() < until {
        // Nearly all of it in the kernel, clearing the buffer.
        n += f.read(black_box(&mut buf)).unwrap();
    }
    n
}

/// pprof-rs's frequency counts the process's CPU time, user and system (ITIMER_PROF): time spent
/// in the kernel is sampled too, charged to the user stack that entered it.
#[test]
fn time_in_the_kernel_is_charged_to_the_user_stack_that_entered_it() {
    let _one = ONE.lock().unwrap_or_else(PoisonError::into_inner);
    if tests::paranoid() > 1 && !tests::is_root() {
        println!("skipped: sampling the kernel needs perf_event_paranoid <= 1 or CAP_PERFMON");
        return;
    }
    let Some(g) = guard(499) else { return };
    let cpu = || {
        let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
        let f: Vec<u64> = stat[stat.rfind(')').unwrap() + 2..]
            .split(' ')
            .skip(11)
            .take(2)
            .map(|v| v.parse().unwrap())
            .collect();
        // utime, stime in clock ticks (100 a second).
        (f[0], f[1])
    };
    let before = cpu();
    black_box(zero_reads(Instant::now() + Duration::from_millis(800)));
    let after = cpu();
    let r = g.report().build().unwrap();
    let (user, system) = (after.0 - before.0, after.1 - before.1);
    let n: isize = samples_in(&r, "zero_reads");
    // At 499 Hz, about 5 samples a tick of CPU time.
    let expected = (user + system) as f64 * 4.99;
    println!(
        "{n} samples in zero_reads at 499 Hz for {user} ticks of user and {system} of system time \
         (about {expected:.0} expected)"
    );
    assert!(
        system > user,
        "zero_reads ran in user space: {user} {system}"
    );
    assert!(
        n as f64 > expected / 2.0,
        "{n} samples in zero_reads for {expected:.0} expected: time in the kernel not sampled"
    );
}
