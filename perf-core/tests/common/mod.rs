//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod fixture;
pub mod make;

/// Where the tests split a record of `len` bytes into the two halves of a ring's seam: every
/// `step`-th byte natively; under Miri, which runs them some thousand times slower and is there
/// for the unsafe copies rather than the parser's arithmetic, the ends, the first unaligned
/// splits, the middle (aligned and not) and the last word. Sorted, no repeats.
pub fn seam_splits(len: usize, step: usize) -> Vec<usize> {
    if !cfg!(miri) {
        return (0..=len).step_by(step).collect();
    }
    let mid = len / 2 / step * step;
    let mut v: Vec<usize> = [
        0,
        step,
        2 * step,
        3 * step,
        mid,
        mid + step,
        len.saturating_sub(step),
        len,
    ]
    .into_iter()
    .chain([1, 3, mid + 1].into_iter().filter(|_| step == 1))
    .filter(|&s| s <= len)
    .collect();
    v.sort_unstable();
    v.dedup();
    v
}
