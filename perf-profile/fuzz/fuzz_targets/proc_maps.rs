//! Fuzz target `proc_maps`: the text of `/proc/PID/maps` (its paths are the process's to choose),
//! line by line into an address space: each mapping is found at its start, in a fork too, and
//! compaction keeps it. Seeds: `seeds/proc_maps/`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| perf_profile::fuzzing::proc_maps(data));
