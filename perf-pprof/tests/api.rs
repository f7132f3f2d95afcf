//! pprof-rs 0.15's public items (its default features), each named in a never-run check that is
//! compiled twice: against pprof-rs 0.15 itself (so each check is known to hold there) and
//! against this crate. Items deliberately left out or different are listed in `DIFFERENCES`, with
//! the reason; the README's "What differs" section says the same. (A hand-kept list: the
//! rustdoc-JSON listing of `cargo xtask dropin` is not built for pprof-rs yet.)

#![allow(dead_code, unused_variables, unused_imports, clippy::all)]

/// pprof-rs 0.15 items not checked against this crate, and why.
pub const DIFFERENCES: &[(&str, &str)] = &[
    (
        "Error::NixError(nix::Error)",
        "no nix here; Error::PerfEventParanoid and Error::Perf instead",
    ),
    (
        "impl Send for Symbol (and so Report: Send)",
        "pprof-rs asserts it with unsafe; this crate has no unsafe (Symbol::addr is a raw pointer)",
    ),
    (
        "Collector, HashCounter, validate",
        "internals of pprof-rs's signal handler",
    ),
    (
        "UnresolvedFrames::frames: SmallVec<[backtrace frame; MAX_DEPTH]>",
        "here Vec<usize> of addresses",
    ),
    (
        "UnresolvedFrames::new",
        "built from backtrace frames in pprof-rs's signal handler",
    ),
    (
        "ReportTiming not nameable in pprof-rs (private module)",
        "here pprof::ReportTiming",
    ),
];

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

            fn consts() -> (usize, usize) {
                (krate::MAX_DEPTH, krate::MAX_THREAD_NAME)
            }

            fn guard_new(f: c_int) -> Result<ProfilerGuard<'static>> {
                ProfilerGuard::new(f)
            }

            fn guard_report<'a>(g: &'a ProfilerGuard<'a>) -> ReportBuilder<'a> {
                g.report()
            }

            fn builder() -> Result<ProfilerGuard<'static>> {
                let b: ProfilerGuardBuilder = ProfilerGuardBuilder::default();
                let b: ProfilerGuardBuilder = b.clone().frequency(1000 as c_int);
                let b = b.blocklist(&["libc", "libgcc"]);
                let b = b.blocklist(&[String::from("pthread")]);
                b.build()
            }

            fn report_builder(g: &ProfilerGuard<'_>) -> (Result<Report>, Result<UnresolvedReport>) {
                let mut rb = g.report();
                let rb: &mut ReportBuilder = rb.frames_post_processor(|f: &mut Frames| {
                    f.thread_name = "x".into();
                });
                (rb.build(), rb.build_unresolved())
            }

            fn report(r: Report) -> String {
                let Report { data, timing } = &r;
                let data: &HashMap<Frames, isize> = data;
                let (freq, start, duration): (i32, SystemTime, std::time::Duration) =
                    (timing.frequency, timing.start_time, timing.duration);
                let timing2 = timing.clone();
                format!("{r:?}")
            }

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
        }
    };
}

checks!(pprof_rs_0_15, pprof_rs);
checks!(perf_pprof, pprof);

/// With the features pprof-rs's examples use: what they call, against this crate.
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

#[test]
fn differences_are_listed_with_reasons() {
    for (item, why) in DIFFERENCES {
        assert!(!item.is_empty() && why.len() > 10, "{item}");
    }
}
