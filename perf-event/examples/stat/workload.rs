//! The built-in workload measured when no command is given: a little of everything the default
//! events count (CPU time, page faults, context switches), about 100-300 ms in a release build.

use std::hint::black_box;
use std::thread::sleep;
use std::time::Duration;

/// What the workload does, for the title line.
pub const TITLE: &str =
    "built-in workload: sort 4 MiB, touch 16 MiB of fresh pages, sleep 3 x 10 ms";

const SORT_ROUNDS: usize = 3;
const SORT_LEN: usize = 1 << 20; // u32s: 4 MiB
const TOUCH_BYTES: usize = 16 << 20;
const PAGE: usize = 4096;

/// Runs the workload on the calling thread; returns a value that depends on all of it.
pub fn run() -> u64 {
    let mut acc = 0u64;
    // Sorting: CPU time, branches, cache traffic.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut v: Vec<u32> = Vec::with_capacity(SORT_LEN);
    for _ in 0..SORT_ROUNDS {
        v.clear();
        v.extend((0..SORT_LEN).map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u32
        }));
        v.sort_unstable();
        acc = acc.wrapping_add(u64::from(v.get(SORT_LEN / 2).copied().unwrap_or(0)));
    }
    drop(black_box(v));

    // Fresh zeroed pages from the kernel (a large calloc is an mmap): one fault per page written.
    let mut buf = black_box(vec![0u8; TOUCH_BYTES]);
    for chunk in buf.chunks_mut(PAGE) {
        if let Some(b) = chunk.first_mut() {
            *b = 1;
        }
    }
    acc = acc.wrapping_add(
        black_box(&buf)
            .iter()
            .step_by(PAGE)
            .map(|&b| u64::from(b))
            .sum::<u64>(),
    );
    drop(buf);

    // Sleeps: voluntary context switches.
    for _ in 0..3 {
        sleep(Duration::from_millis(10));
    }
    black_box(acc)
}
