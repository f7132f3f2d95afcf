//! Fuzz target `kallsyms`: `/proc/kallsyms` text, parsed whole and read in 3-byte pieces: both
//! agree, and lookups find the symbol at or below an address. Seeds: `seeds/kallsyms/`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| perf_profile::fuzzing::kallsyms(data));
