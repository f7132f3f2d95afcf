//! What perf-pprof's tests share: a guard or a printed skip, and the samples a report has in a
//! function. A test file takes it with `mod common;`.
#![allow(dead_code)] // each test binary uses some of it

/// The guard, or `None` (printing why) where the kernel refuses; with `PERF_TEST_STRICT` set a
/// refusal fails the test.
pub fn guard(freq: i32) -> Option<pprof::ProfilerGuard<'static>> {
    match pprof::ProfilerGuard::new(freq) {
        Ok(g) => Some(g),
        Err(e @ pprof::Error::PerfEventParanoid { .. }) => {
            assert!(
                std::env::var_os("PERF_TEST_STRICT").is_none(),
                "strict: {e}"
            );
            println!("skipped: {e}");
            None
        }
        Err(e) => panic!("{e}"),
    }
}

/// The samples of `report` with a frame whose name contains `name`.
pub fn samples_in(report: &pprof::Report, name: &str) -> isize {
    report
        .data
        .iter()
        .filter(|(k, _)| k.frames.iter().flatten().any(|s| s.name().contains(name)))
        .map(|(_, v)| *v)
        .sum()
}
