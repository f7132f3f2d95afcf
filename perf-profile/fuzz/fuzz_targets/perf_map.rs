//! Fuzz target `perf_map`: the text of a JIT map (`/tmp/perf-PID.map`, written by whatever runs as
//! that process's user): the symbols come out sorted, without overlaps, named. Seeds:
//! `seeds/perf_map/`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| perf_profile::fuzzing::perf_map(data));
