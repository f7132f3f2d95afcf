//! `cargo xtask`: workspace automation.
//!
//! ```text
//! cargo xtask fetch-headers SUITE            download Debian's linux-libc-dev for SUITE into target/xtask/headers/SUITE
//! cargo xtask bindgen --headers DIR          generate perf-sys/src/bindings/linux_X_Y.rs from the UAPI headers in DIR
//! cargo xtask bindgen --check [--fetch]      regenerate from every cached header set and fail on any difference
//! cargo xtask kernel-matrix [--arch x86_64|aarch64|all] [--mode exact|suite|all] [--kernels 5.10,6.1,6.12,7.2]
//!                            [--timeout SECS] [--smp CPUS] [--jobs N] [--test NAME]... [--refresh]
//!                                            run the tests crate on each Debian kernel under qemu
//! cargo xtask pmu-events [--source DIR] [--check]
//!                                            regenerate perf-event's table of the kernel's JSON events
//! cargo xtask arm64-perf-fixture [--kernel 6.12] [--timeout SECS] [--refresh]
//!                                            run arm64 perf on tests/fixtures/perf-arm64/corpus.txt in a
//!                                            qemu guest; save its output and the guest's PMU tree there
//! cargo xtask parse-ab [--base REV] [--rounds N] [--runs K] [--input FILE]
//!                                            perf-core's parse paths of REV against the working tree, in
//!                                            one process, as medians of paired ratios
//! cargo xtask pprof-proto [--check]          regenerate perf-profile's pprof types from its vendored profile.proto
//! cargo xtask dropin [--check] [--audit] [--fetch]
//!                                            list perf-event-open 0.5.1's public API (rustdoc JSON, nightly)
//!                                            and regenerate the compile test that names it in perf_event
//! cargo xtask pprof-api [--check] [--fetch]  list pprof-rs 0.15's public items (rustdoc JSON, nightly) into
//!                                            perf-pprof/tests/api/items.txt, which tests/api.rs checks
//! ```
//!
//! bindgen (and so libclang) is a dependency of this crate only: users of perf-sys never need it.

mod apt;
mod bindings;
mod dropin;
mod headers;
mod kernel_matrix;
mod parse_ab;
mod pmu_events;
mod pprof_api;
mod pprof_proto;

use std::path::PathBuf;
use std::process::ExitCode;

/// The suites `fetch-headers` knows, oldest first. Each gives one committed bindings module.
pub const SUITES: &[&str] = &["bullseye", "bookworm", "trixie", "sid"];

fn usage() -> ExitCode {
    eprintln!(
        "usage:\n  cargo xtask fetch-headers SUITE   (one of {})\n  cargo xtask bindgen --headers DIR\n  cargo xtask bindgen --check [--fetch]\n  cargo xtask kernel-matrix [--arch x86_64|aarch64|all] [--mode exact|suite|all] [--kernels 5.10,6.1,6.12,7.2] [--timeout SECS] [--smp CPUS] [--jobs N] [--test NAME]... [--refresh]\n  cargo xtask pmu-events [--source DIR] [--check]\n  cargo xtask arm64-perf-fixture [--kernel 6.12] [--timeout SECS] [--refresh]\n  cargo xtask parse-ab [--base REV] [--rounds N] [--runs K] [--input FILE]\n  cargo xtask pprof-proto [--check]\n  cargo xtask dropin [--check] [--audit] [--fetch]\n  cargo xtask pprof-api [--check] [--fetch]",
        SUITES.join(", ")
    );
    ExitCode::from(2)
}

/// The cargo that runs this xtask (`$CARGO`), or `cargo` from `PATH`.
pub fn cargo() -> std::process::Command {
    std::process::Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

/// The workspace root (the parent of this crate's folder).
pub fn workspace_root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map(PathBuf::from).unwrap_or(manifest)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("fetch-headers") => match args.get(1) {
            Some(suite) => headers::fetch(suite).map(|dir| {
                println!("{}", dir.display());
            }),
            None => return usage(),
        },
        Some("bindgen") => {
            let rest = &args[1..];
            if rest.iter().any(|a| a == "--check") {
                let fetch = rest.iter().any(|a| a == "--fetch");
                bindings::check_all(fetch)
            } else if let Some(pos) = rest.iter().position(|a| a == "--headers") {
                match rest.get(pos + 1) {
                    Some(dir) => bindings::generate_into_tree(&PathBuf::from(dir)).map(|path| {
                        println!("wrote {}", path.display());
                    }),
                    None => return usage(),
                }
            } else {
                return usage();
            }
        }
        Some("pmu-events") => pmu_events::main(&args[1..]),
        Some("dropin") => dropin::main(&args[1..]),
        Some("parse-ab") => parse_ab::main(&args[1..]),
        Some("pprof-proto") => pprof_proto::main(&args[1..]),
        Some("pprof-api") => pprof_api::main(&args[1..]),
        Some("arm64-perf-fixture") => kernel_matrix::perf_fixture::main(&args[1..]),
        Some("kernel-matrix") => match kernel_matrix::parse_args(&args[1..]) {
            Ok(opts) => kernel_matrix::main(&opts),
            Err(e) => {
                eprintln!("xtask: {e}");
                return usage();
            }
        },
        _ => return usage(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}
