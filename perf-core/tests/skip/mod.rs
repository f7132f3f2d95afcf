//! Run-time skips of perf-core's kernel tests, as `tests::skip` does them for the `tests` crate
//! (which depends on perf-core, so perf-core's tests cannot use it).

/// Whether `PERF_TEST_STRICT=1` is set.
pub fn strict() -> bool {
    std::env::var("PERF_TEST_STRICT").is_ok_and(|v| v == "1")
}

/// Prints `skipped: <reason>` (the calling test then returns without running); with
/// `PERF_TEST_STRICT=1` panics instead. With `PERF_TEST_SKIP_LOG` set (by the README's test
/// command, `cargo run -p suite`), also appends `<test binary> TAB <test name> TAB whole TAB
/// <reason>` to that file, so the run's summary counts the test as skipped, not passed.
pub fn skip(reason: &str) {
    if strict() {
        panic!("PERF_TEST_STRICT=1 and this test would skip: {reason}");
    }
    if let Some(path) = std::env::var_os("PERF_TEST_SKIP_LOG") {
        use std::io::Write;
        let binary = std::env::current_exe()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_default();
        let thread = std::thread::current();
        // libtest runs each test on a thread named after it.
        let test = thread.name().filter(|n| *n != "main").unwrap_or("");
        let line = format!(
            "{binary}\t{test}\twhole\t{}\n",
            reason.replace(['\n', '\t'], " ")
        );
        if let Ok(mut f) = std::fs::OpenOptions::new().append(true).open(path) {
            let _ = f.write_all(line.as_bytes());
        }
    }
    println!("skipped: {reason}");
}
