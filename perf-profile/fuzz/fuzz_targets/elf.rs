//! Fuzz target `elf`: the bytes of an ELF file, through every reader of ELF files (headers, notes
//! and the build id, sections and their decompressed bytes, symbol tables, code by address, the
//! unwind sections, the `--symbolize functions` table). Binaries are other users' files: nothing in
//! them may panic the profiler or make it allocate what they claim. Seeds: `seeds/elf/`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| perf_profile::fuzzing::elf(data));
