//! pprof-rs 0.15's public items, each named in a never-run check that is compiled twice: against
//! pprof-rs 0.15 itself (so each check is known to hold there) and against this crate.
//!
//! The items are those of `api/items.txt`, listed from pprof-rs's rustdoc JSON by `cargo xtask
//! pprof-api` (`--check` in CI: the list is that of the published crate). Each line of it is
//! named by a check here (`// item: LINE`), by `DIFFERENCES` (left out or different on purpose,
//! with the reason; the README's "What differs" section says the same) or by `ELSEWHERE` (checked
//! by another test); `every_listed_item_is_checked_or_a_difference` fails otherwise, and for an
//! `// item:` that names no line: the checks cannot drift from what pprof-rs exports.

#![allow(dead_code, unused_variables, unused_imports, clippy::all)]

/// pprof-rs 0.15 items (lines of `api/items.txt`; `~` a part of lines) not checked against this
/// crate, and why.
pub const DIFFERENCES: &[(&str, &str)] = &[
    (
        "variant Error::NixError",
        "no nix here; Error::PerfEventParanoid and Error::Perf instead",
    ),
    (
        "impl From<Errno> for Error",
        "no nix here: this crate makes no nix call",
    ),
    (
        "impl Send for Symbol",
        "pprof-rs asserts it with unsafe; this crate has no unsafe (Symbol::addr is a raw pointer)",
    ),
    ("auto Send for Frames", "as `impl Send for Symbol`"),
    ("auto Send for Report", "as `impl Send for Symbol`"),
    ("~Collector", "internals of pprof-rs's signal handler"),
    ("~HashCounter", "internals of pprof-rs's signal handler"),
    ("fn validate", "internals of pprof-rs's signal handler"),
    (
        "impl From<&T> for Symbol",
        "built from backtrace-rs symbols in pprof-rs's signal handler; here from DWARF",
    ),
    (
        "impl StructuralPartialEq for Frames",
        "compiler-internal (derive(PartialEq)); `PartialEq for Frames` is checked",
    ),
];

/// pprof-rs 0.15 items checked by another test, and which.
pub const ELSEWHERE: &[(&str, &str)] = &[(
    "~criterion",
    "tests/pprof_rs.rs builds pprof-rs's criterion example (PProfProfiler::new, \
     Output::Flamegraph, the Profiler impl) against this crate with feature criterion",
)];

macro_rules! checks {
    ($name:ident, $krate:path) => {
        mod $name {
            use std::borrow::Cow;
            use std::collections::HashMap;
            use std::os::raw::{c_int, c_void};
            use std::path::PathBuf;
            use std::time::SystemTime;

            use krate::{
                Error, Frames, ProfilerGuard, ProfilerGuardBuilder, Report, ReportBuilder, Result,
                Symbol, UnresolvedReport,
            };
            use $krate as krate;

            // item: const MAX_DEPTH
            // item: const MAX_THREAD_NAME
            fn consts() -> (usize, usize) {
                (krate::MAX_DEPTH, krate::MAX_THREAD_NAME)
            }

            // item: struct ProfilerGuard
            // item: method ProfilerGuard::new
            // item: type Result
            // item: impl Drop for ProfilerGuard
            fn guard_new(f: c_int) -> Result<ProfilerGuard<'static>> {
                ProfilerGuard::new(f)
            }

            // item: method ProfilerGuard::report
            fn guard_report<'a>(g: &'a ProfilerGuard<'a>) -> ReportBuilder<'a> {
                g.report()
            }

            // item: struct ProfilerGuardBuilder
            // item: impl Clone for ProfilerGuardBuilder
            // item: impl Default for ProfilerGuardBuilder
            // item: method ProfilerGuardBuilder::blocklist
            // item: method ProfilerGuardBuilder::build
            // item: method ProfilerGuardBuilder::frequency
            fn builder() -> Result<ProfilerGuard<'static>> {
                let b: ProfilerGuardBuilder = ProfilerGuardBuilder::default();
                let b: ProfilerGuardBuilder = b.clone().frequency(1000 as c_int);
                let b = b.blocklist(&["libc", "libgcc"]);
                let b = b.blocklist(&[String::from("pthread")]);
                b.build()
            }

            // item: struct ReportBuilder
            // item: method ReportBuilder::build
            // item: method ReportBuilder::build_unresolved
            // item: method ReportBuilder::frames_post_processor
            fn report_builder(g: &ProfilerGuard<'_>) -> (Result<Report>, Result<UnresolvedReport>) {
                let mut rb = g.report();
                let rb: &mut ReportBuilder = rb.frames_post_processor(|f: &mut Frames| {
                    f.thread_name = "x".into();
                });
                (rb.build(), rb.build_unresolved())
            }

            // item: struct Report
            // item: field Report::data
            // item: field Report::timing
            // item: impl Debug for Report
            fn report(r: Report) -> String {
                let Report { data, timing } = &r;
                let data: &HashMap<Frames, isize> = data;
                let (freq, start, duration): (i32, SystemTime, std::time::Duration) =
                    (timing.frequency, timing.start_time, timing.duration);
                let timing2 = timing.clone();
                format!("{r:?}")
            }

            // item: struct UnresolvedReport
            // item: field UnresolvedReport::data
            // item: field UnresolvedReport::timing
            fn unresolved(r: UnresolvedReport) {
                let UnresolvedReport { data, timing } = r;
                for (k, v) in &data {
                    let (name, len, id, at): (&[u8; 16], usize, u64, SystemTime) = (
                        &k.thread_name,
                        k.thread_name_length,
                        k.thread_id,
                        k.sample_timestamp,
                    );
                    let v: isize = *v;
                    let k2 = k.clone();
                    let _ = format!("{k:?}");
                    let _ = k == &k2;
                }
            }

            // item: struct Frames
            // item: field Frames::frames
            // item: field Frames::sample_timestamp
            // item: field Frames::thread_id
            // item: field Frames::thread_name
            // item: impl Clone for Frames
            // item: impl Debug for Frames
            // item: impl Eq for Frames
            // item: impl Hash for Frames
            // item: impl PartialEq for Frames
            // item: method Frames::thread_name_or_id
            fn frames(f: Frames) -> String {
                let Frames {
                    frames,
                    thread_name,
                    thread_id,
                    sample_timestamp,
                } = f.clone();
                let frames: Vec<Vec<Symbol>> = frames;
                let (n, id, at): (String, u64, SystemTime) =
                    (thread_name, thread_id, sample_timestamp);
                let _ = f == f.clone();
                let mut set = std::collections::HashSet::new();
                set.insert(f.clone());
                format!("{f:?}{}", f.thread_name_or_id())
            }

            // item: struct Symbol
            // item: field Symbol::addr
            // item: field Symbol::filename
            // item: field Symbol::lineno
            // item: field Symbol::name
            // item: impl Clone for Symbol
            // item: impl Debug for Symbol
            // item: impl Display for Symbol
            // item: impl Hash for Symbol
            // item: impl PartialEq for Symbol
            // item: method Symbol::filename
            // item: method Symbol::lineno
            // item: method Symbol::name
            // item: method Symbol::raw_name
            // item: method Symbol::sys_name
            fn symbol() -> String {
                let s = Symbol {
                    name: Some(b"main".to_vec()),
                    addr: None::<*mut c_void>,
                    lineno: Some(1u32),
                    filename: Some(PathBuf::from("main.rs")),
                };
                let (raw, name, sys, file, line): (&[u8], String, Cow<str>, Cow<str>, u32) = (
                    s.raw_name(),
                    s.name(),
                    s.sys_name(),
                    s.filename(),
                    s.lineno(),
                );
                let _ = s == s.clone();
                let mut h = std::collections::hash_map::DefaultHasher::new();
                std::hash::Hash::hash(&s, &mut h);
                format!("{s} {s:?}")
            }

            // item: enum Error
            // item: variant Error::CreatingError
            // item: variant Error::IoError
            // item: variant Error::NotRunning
            // item: variant Error::Running
            // item: impl Debug for Error
            // item: impl Display for Error
            // item: impl Error for Error
            // item: impl From<Error> for Error
            // item: auto Send for Error
            // item: auto Sync for Error
            fn errors(e: Error) -> Option<Box<dyn std::error::Error + Send + Sync>> {
                match &e {
                    Error::IoError(io) => {
                        let _: &std::io::Error = io;
                    }
                    Error::CreatingError | Error::Running | Error::NotRunning => {}
                    _ => {}
                }
                let _ = Error::from(std::io::Error::other("x"));
                let _ = format!("{e} {e:?}");
                Some(Box::new(e))
            }

            fn send<T: Send>() {}
            fn sync<T: Sync>() {}

            // item: auto Send for ProfilerGuard
            // item: auto Sync for ProfilerGuard
            // item: auto Send for ProfilerGuardBuilder
            // item: auto Sync for ProfilerGuardBuilder
            // item: auto Send for UnresolvedReport
            // item: auto Sync for UnresolvedReport
            fn auto_traits() {
                send::<ProfilerGuard<'static>>();
                sync::<ProfilerGuard<'static>>();
                send::<ProfilerGuardBuilder>();
                sync::<ProfilerGuardBuilder>();
                send::<UnresolvedReport>();
                sync::<UnresolvedReport>();
            }
        }
    };
}

checks!(pprof_rs_0_15, pprof_rs);
checks!(perf_pprof, pprof);

/// With the features pprof-rs's examples use: what they call, against this crate (pprof-rs is a
/// dev-dependency with its default features only).
// item: method Report::flamegraph
// item: method Report::flamegraph_with_options
// item: reexport flamegraph = inferno::flamegraph
#[allow(deprecated)]
fn features(r: &pprof::Report) -> pprof::Result<()> {
    use pprof::protos::Message;
    let mut opts = pprof::flamegraph::Options::default();
    r.flamegraph(Vec::new())?;
    r.flamegraph_with_options(Vec::new(), &mut opts)?;
    let p: pprof::protos::Profile = r.pprof()?;
    let mut buf = Vec::new();
    p.encode(&mut buf).unwrap();
    Ok(())
}

fn names(key: &str, line: &str) -> bool {
    match key.strip_prefix('~') {
        Some(part) => line.contains(part),
        None => key == line,
    }
}

#[test]
fn every_listed_item_is_checked_or_a_difference() {
    let list: Vec<&str> = include_str!("api/items.txt")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .collect();
    let checked: Vec<&str> = include_str!("api.rs")
        .lines()
        .filter_map(|l| l.trim().strip_prefix("// item: "))
        .collect();
    let mut missing = Vec::new();
    for line in &list {
        // A negative auto impl (`!Sync`) promises nothing code can rely on.
        let ok = line.starts_with("auto !")
            || checked.contains(line)
            || DIFFERENCES
                .iter()
                .chain(ELSEWHERE)
                .any(|(k, _)| names(k, line));
        if !ok {
            missing.push(*line);
        }
    }
    assert!(
        missing.is_empty(),
        "pprof-rs items neither checked (`// item: LINE`) nor listed as a difference: {missing:#?}"
    );
    let stale: Vec<&&str> = checked.iter().filter(|c| !list.contains(c)).collect();
    assert!(
        stale.is_empty(),
        "`// item:` naming no item of pprof-rs: {stale:?}"
    );
    for (key, why) in DIFFERENCES.iter().chain(ELSEWHERE) {
        assert!(why.len() > 10, "{key}: no reason");
        assert!(
            list.iter().any(|l| names(key, l)),
            "{key} names no item of pprof-rs: remove or fix it"
        );
    }
}
