//! pprof-rs 0.15's own published examples, built against this crate with only the package
//! swapped (`pprof = { package = "perf-pprof", ... }`), run, and their outputs naming the functions
//! they make hot.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tests::Skip;

/// pprof-rs 0.15.0's unpacked source, as cargo fetched it for this package's dev-dependency.
fn pprof_rs_source() -> PathBuf {
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let manifest = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "pprof" && p["version"] == "0.15.0")
        .and_then(|p| p["manifest_path"].as_str())
        .expect("pprof 0.15.0 in cargo metadata");
    Path::new(manifest).parent().unwrap().to_owned()
}

/// The workspace's target directory and this test binary's profile folder.
fn target_dir() -> (PathBuf, PathBuf) {
    let exe = std::env::current_exe().unwrap();
    let profile = exe.parent().and_then(Path::parent).unwrap().to_owned();
    (profile.parent().unwrap().to_owned(), profile)
}

const EXAMPLES: [&str; 9] = [
    "flamegraph",
    "prime_number",
    "multithread",
    "multithread_flamegraph",
    "post_processor",
    "backtrace_while_sampling",
    "criterion",
    "profile_proto_with_prost",
    "profile_proto_with_protobuf_codec",
];

/// A crate holding pprof-rs's examples, its `pprof` dependency this package; built once.
fn build_examples() -> PathBuf {
    let src = pprof_rs_source();
    let (target, _) = target_dir();
    let krate = target.join("pprof-rs-examples");
    std::fs::create_dir_all(krate.join("examples")).unwrap();
    for e in EXAMPLES {
        let file = format!("{e}.rs");
        std::fs::copy(
            src.join("examples").join(&file),
            krate.join("examples").join(&file),
        )
        .unwrap();
    }
    std::fs::create_dir_all(krate.join("src")).unwrap();
    std::fs::write(krate.join("src/lib.rs"), "").unwrap();
    let ours = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::write(
        krate.join("Cargo.toml"),
        format!(
            r#"[package]
name = "pprof-rs-examples"
version = "0.0.0"
edition = "2021"
publish = false

[workspace]

[dependencies]
pprof = {{ package = "perf-pprof", path = "{}", features = ["flamegraph", "prost-codec", "protobuf-codec", "protobuf", "criterion"] }}
backtrace = "0.3"
criterion = {{ version = "0.5", default-features = false }}
"#,
            ours.display()
        ),
    )
    .unwrap();
    // The workspace's versions, so that its built dependencies are reused.
    std::fs::copy(ours.join("../Cargo.lock"), krate.join("Cargo.lock")).unwrap();
    let status = Command::new(env!("CARGO"))
        .args(["build", "-q", "--examples", "--target-dir"])
        .arg(&target)
        .current_dir(&krate)
        .status()
        .unwrap();
    assert!(
        status.success(),
        "building pprof-rs's examples against perf-pprof failed"
    );
    target.join("debug/examples")
}

/// Runs `bin` in `dir` with `args` for at most `limit` (the looping examples never end), its stdout.
fn run(bin: &Path, args: &[&str], dir: &Path, limit: Duration, env: &[(&str, &Path)]) -> String {
    let mut cmd = Command::new(bin);
    cmd.args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let start = Instant::now();
    while start.elapsed() < limit {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if stdout.contains("perf_event_paranoid")
        || String::from_utf8_lossy(&out.stderr).contains("perf_event_paranoid")
    {
        tests::skip(Skip::Privilege, "the kernel refuses to sample");
    }
    stdout
}

/// The share of `report` lines (pprof-rs's Debug: one stack and its count per line) whose stack
/// names `f`, by count.
fn share(report: &str, f: &str) -> f64 {
    let (mut hit, mut total) = (0i64, 0i64);
    for line in report.lines().filter(|l| l.contains("THREAD: ")) {
        let n: i64 = line
            .rsplit(' ')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        total += n;
        if line.contains(f) {
            hit += n;
        }
    }
    hit as f64 / total.max(1) as f64
}

#[test]
fn pprof_rs_examples_compile_run_and_name_their_hot_functions() {
    if !tests::may_sample_self() {
        tests::skip(Skip::Privilege, "perf_event_paranoid > 2");
        return;
    }
    let bins = build_examples();
    let tmp = std::env::temp_dir().join(format!("perf-pprof-examples-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let mut seen = Vec::new();
    for e in EXAMPLES {
        let dir = tmp.join(e);
        std::fs::create_dir_all(&dir).unwrap();
        let bin = bins.join(e);
        let (args, limit): (&[&str], _) = match e {
            "criterion" => (
                &["--bench", "--profile-time", "2", "--exact", "Fibonacci"],
                60,
            ),
            "prime_number" | "multithread" | "post_processor" => (&[], 4),
            _ => (&[], 60),
        };
        let out = run(
            &bin,
            args,
            &dir,
            Duration::from_secs(limit),
            &[("CRITERION_HOME", &dir)],
        );
        let (hot, svg) = match e {
            "backtrace_while_sampling" => ("deep_recursive", Some(dir.join("flamegraph.svg"))),
            "criterion" => (
                "fibonacci",
                Some(dir.join("Fibonacci/profile/flamegraph.svg")),
            ),
            "flamegraph" | "multithread_flamegraph" => {
                ("is_prime_number", Some(dir.join("flamegraph.svg")))
            }
            _ => ("is_prime_number", None),
        };
        if e != "criterion" {
            let s = share(&out, hot);
            println!("{e}: {hot} in {:.0}% of the samples", s * 100.0);
            assert!(out.contains(hot), "{e}: {hot} not named:\n{out}");
            // prime_number builds a report after each short loop, and every report with new
            // frames has perf-profile read the binary's DWARF again: there the report building is
            // what is hot (the README says so).
            // backtrace_while_sampling: backtrace's DWARF loading (miniz_oxide's inflater) has
            // stack frames larger than the 8 KiB copied per sample, so its deeper stacks are cut
            // before they reach deep_recursive (about 40% reach it; 63% with 16 KiB copies).
            let least = match e {
                "prime_number" => 0.0,
                "backtrace_while_sampling" => 0.25,
                _ => 0.5,
            };
            assert!(s > least, "{e}: {hot} in {s:.2} of the samples:\n{out}");
        }
        if let Some(svg) = svg {
            let text = std::fs::read_to_string(&svg)
                .unwrap_or_else(|err| panic!("{e}: {}: {err}\n{out}", svg.display()));
            assert!(
                text.contains(hot),
                "{e}: {} does not name {hot}",
                svg.display()
            );
            println!("{e}: {} names {hot}", svg.display());
        }
        match e {
            // The #[inline(always)] one is named from the debug info's inline records.
            // (is_prime_number1 sees even numbers only, which return at once: too few samples
            // to be sure of one.)
            "flamegraph" | "profile_proto_with_prost" | "profile_proto_with_protobuf_codec" => {
                for f in ["is_prime_number2", "is_prime_number3"] {
                    assert!(out.contains(f), "{e}: {f} not named:\n{out}");
                }
            }
            "post_processor" => assert!(out.contains("THREAD: PROCESSED"), "{out}"),
            _ => {}
        }
        if e.starts_with("profile_proto") {
            use prost::Message;
            let pb = std::fs::read(dir.join("profile.pb")).unwrap();
            let p = pprof::protos::Profile::decode(&pb[..]).unwrap();
            assert!(p.string_table.iter().any(|s| s.contains("is_prime_number")));
        }
        seen.push(e);
    }
    let _ = std::fs::remove_dir_all(&tmp);
    assert_eq!(seen.len(), 9);
}
