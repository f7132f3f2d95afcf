//! Fuzz target `credentials`: a `--credentials` file's text: parsed or refused, and neither the
//! credentials' `Debug` text nor the error shows a token, password or header value of it. Seeds:
//! `seeds/credentials/`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| perf_profile::fuzzing::credentials(data));
