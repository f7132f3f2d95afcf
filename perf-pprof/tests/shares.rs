//! One workload profiled by pprof-rs 0.15 and by this crate in the same test: the hot functions'
//! shares agree within 5 points.

use std::hint::black_box;
use std::time::{Duration, Instant};

#[inline(never)]
fn spin(n: u64) -> u64 {
    let mut x = 1u64;
    for i in 0..n {
        x = black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
    }
    x
}

#[inline(never)]
fn share_one() -> u64 {
    spin(100_000)
}

#[inline(never)]
fn share_two() -> u64 {
    spin(200_000)
}

#[inline(never)]
fn share_three() -> u64 {
    spin(300_000)
}

fn workload(d: Duration) {
    let until = Instant::now() + d;
    while Instant::now() < until {
        black_box(share_one() + share_two() + share_three());
    }
}

const NAMES: [&str; 3] = ["share_one", "share_two", "share_three"];

/// Each function's share of the samples whose stack names any of them, from (names, count) pairs.
fn shares(stacks: impl Iterator<Item = (Vec<String>, isize)>) -> [f64; 3] {
    let mut hits = [0isize; 3];
    let mut total = 0;
    for (names, n) in stacks {
        if let Some(i) = NAMES
            .iter()
            .position(|f| names.iter().any(|s| s.ends_with(f)))
        {
            hits[i] += n;
            total += n;
        }
    }
    hits.map(|h| h as f64 * 100.0 / total.max(1) as f64)
}

#[test]
fn hot_function_shares_match_pprof_rs_within_5_points() {
    if !tests::may_sample_self() {
        tests::skip(tests::Skip::Privilege, "perf_event_paranoid > 2");
        return;
    }
    const RUN: Duration = Duration::from_secs(3);
    let theirs = {
        let g = pprof_rs::ProfilerGuard::new(499).unwrap();
        workload(RUN);
        let r = g.report().build().unwrap();
        drop(g);
        shares(
            r.data
                .iter()
                .map(|(k, &v)| (k.frames.iter().flatten().map(|s| s.name()).collect(), v)),
        )
    };
    let ours = {
        let g = pprof::ProfilerGuard::new(499).unwrap();
        workload(RUN);
        let r = g.report().build().unwrap();
        shares(
            r.data
                .iter()
                .map(|(k, &v)| (k.frames.iter().flatten().map(|s| s.name()).collect(), v)),
        )
    };
    println!("shares (%) of {NAMES:?}: pprof-rs {theirs:.1?}, perf-pprof {ours:.1?}");
    for i in 0..3 {
        assert!(
            (theirs[i] - ours[i]).abs() <= 5.0,
            "{}: pprof-rs {:.1}%, perf-pprof {:.1}%",
            NAMES[i],
            theirs[i],
            ours[i]
        );
    }
}
