//! The `/debug/pprof/profile` recipe: profile this process for some seconds and return a gzip'd
//! pprof profile, which `go tool pprof` reads. The `http_endpoint` example serves it on a
//! loopback port.

use std::io::Write;
use std::os::raw::c_int;
use std::time::Duration;

use crate::error::Result;
use crate::profiler::ProfilerGuardBuilder;

/// The frequency `/debug/pprof/profile` samples at (Go's default is 100 Hz; 99 avoids lockstep
/// with timer ticks).
pub const DEFAULT_FREQUENCY: c_int = 99;

/// Profiles every thread of this process for `duration` at `frequency` Hz and returns the profile
/// as gzip'd `profile.proto` bytes (with mappings, addresses, inlined functions and file:line, as
/// perf-profile writes it), the body a `/debug/pprof/profile?seconds=N` handler returns.
///
/// # Errors
///
/// As [`ProfilerGuardBuilder::build`]; [`Error::IoError`](crate::Error::IoError) when the profile cannot be compressed.
pub fn profile_gzipped_pprof(duration: Duration, frequency: c_int) -> Result<Vec<u8>> {
    let guard = ProfilerGuardBuilder::default()
        .frequency(frequency)
        .build()?;
    std::thread::sleep(duration);
    let profile = guard.profile();
    drop(guard);
    let lines = crate::symbols::frame_lines(&profile);
    let mut pb = profile.to_pprof();
    crate::symbols::name_pprof(&lines, &mut pb);
    // User frames only, as the reports: location `i + 1` is frame `i`.
    let stacks = profile.stacks();
    for sample in &mut pb.sample {
        sample.location_id.retain(|&l| {
            !matches!(
                l.checked_sub(1)
                    .and_then(|f| stacks.frame(perf_profile::aggregate::FrameId(f as u32))),
                Some(
                    perf_profile::aggregate::Frame::Kernel { .. }
                        | perf_profile::aggregate::Frame::KernelHidden
                )
            )
        });
    }
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&prost::Message::encode_to_vec(&pb))?;
    Ok(gz.finish()?)
}

/// The `seconds` parameter of a request target such as `/debug/pprof/profile?seconds=5`: `None`
/// when the path is another, 30 (Go's default) when the parameter is absent or not a number in 1
/// to 3600.
pub fn profile_seconds(target: &str) -> Option<u64> {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    if path != "/debug/pprof/profile" {
        return None;
    }
    let seconds = query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == "seconds")
        .and_then(|(_, v)| v.parse::<u64>().ok())
        .filter(|s| (1..=3600).contains(s))
        .unwrap_or(30);
    Some(seconds)
}
