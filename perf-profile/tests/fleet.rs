//! Fleet features of the `profile` example and the library, each test deciding at run time whether
//! it can run here and saying why not:
//!
//! - OTLP: the `.otlp` file decodes with the official `opentelemetry-proto` Python package (in a
//!   venv made under the target directory, or `PERF_PROFILE_PYTHON`) into the same stacks and
//!   totals as the folded output of the same capture, with the resource attributes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use tests::{require, Skip};

fn have(tool: &str, arg: &str) -> bool {
    Command::new(tool)
        .arg(arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A fresh directory for one test's files (not `/tmp/perf-*`, which perf takes for JIT maps).
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("profile-fleet-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn may_sample_commands() -> bool {
    tests::is_root() || tests::paranoid() <= 1
}

/// Builds `tests/workload/NAME.c` with frame pointers into `dir`.
fn build_c(dir: &Path, name: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/workload/{name}.c"));
    let bin = dir.join(name);
    let out = Command::new("cc")
        .args(["-O0", "-g", "-fno-omit-frame-pointer", "-fno-inline", "-o"])
        .arg(&bin)
        .arg(&src)
        .output()
        .unwrap();
    assert!(out.status.success(), "cc failed: {}", text(&out.stderr));
    bin
}

fn profile(args: &[&str]) -> Output {
    let bin = tests::package_example_binary("perf-profile", "profile");
    Command::new(bin)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// A Python with the official `opentelemetry-proto` package: `PERF_PROFILE_PYTHON`, else a venv
/// made once under the target directory (`python3 -m venv`, `pip install opentelemetry-proto`).
fn otel_python() -> Result<PathBuf, String> {
    static PY: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    PY.get_or_init(|| {
        if let Some(p) = std::env::var_os("PERF_PROFILE_PYTHON") {
            return Ok(PathBuf::from(p));
        }
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let target = exe
            .ancestors()
            .nth(3)
            .ok_or("no target directory")?
            .to_owned();
        let venv = target.join("pyvenv-otel");
        let py = venv.join("bin/python");
        let ok = |c: &mut Command| c.output().is_ok_and(|o| o.status.success());
        if ok(Command::new(&py).args(["-c", "import opentelemetry.proto"])) {
            return Ok(py);
        }
        if !ok(Command::new("python3").args(["-m", "venv"]).arg(&venv)) {
            return Err("python3 -m venv failed (Debian: python3-venv)".into());
        }
        let pip = Command::new(&py)
            .args(["-m", "pip", "install", "-q", "opentelemetry-proto==1.45.2"])
            .output()
            .map_err(|e| e.to_string())?;
        if !pip.status.success() {
            return Err(format!(
                "pip install opentelemetry-proto failed: {}",
                text(&pip.stderr)
            ));
        }
        Ok(py)
    })
    .clone()
}

/// The decoded request (see `tests/py/otlp_decode.py`).
fn decode_otlp(py: &Path, file: &Path) -> serde_json::Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/py/otlp_decode.py");
    let out = Command::new(py).arg(script).arg(file).output().unwrap();
    assert!(
        out.status.success(),
        "the official decoder refused {}: {}",
        file.display(),
        text(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn folded_file(path: &Path) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for line in std::fs::read_to_string(path).unwrap().lines() {
        let (stack, n) = line.rsplit_once(' ').expect("stack count");
        *out.entry(stack.to_owned()).or_default() += n.parse::<u64>().unwrap();
    }
    out
}

fn folded_json(v: &serde_json::Value) -> BTreeMap<String, u64> {
    v.as_object()
        .unwrap()
        .iter()
        .map(|(k, n)| (k.clone(), n.as_u64().unwrap()))
        .collect()
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_owned()
}

#[test]
fn otlp_file_decodes_officially_into_the_folded_stacks_with_the_resource() {
    require!(
        may_sample_commands(),
        Skip::Privilege,
        "needs root or perf_event_paranoid <= 1 (it is {})",
        tests::paranoid()
    );
    require!(have("cc", "--version"), Skip::Environment, "no C compiler");
    let py = match otel_python() {
        Ok(py) => py,
        Err(e) => return tests::skip(Skip::Environment, &e),
    };
    let dir = scratch("otlp");
    let calls = build_c(&dir, "calls");
    let otlp = dir.join("out.otlp");
    let folded = dir.join("out.folded");
    let out = profile(&[
        "-F",
        "499",
        "--service",
        "checkout-svc",
        "-o",
        otlp.to_str().unwrap(),
        "-o",
        folded.to_str().unwrap(),
        "--",
        calls.to_str().unwrap(),
        "0.6",
    ]);
    assert!(
        out.status.success(),
        "profile failed: {}",
        text(&out.stderr)
    );
    let d = decode_otlp(&py, &otlp);

    let r = &d["resource"];
    assert_eq!(r["service.name"], "checkout-svc");
    assert_eq!(r["host.name"], host_name());
    assert!(r["process.pid"].as_u64().unwrap() > 1, "{r}");
    assert_eq!(r["process.executable.name"], "calls");
    assert_eq!(d["scope"][0], "perf-profile");

    let profiles = d["profiles"].as_array().unwrap();
    assert_eq!(profiles.len(), 2, "{d}");
    assert_eq!(
        profiles[0]["sample_type"],
        serde_json::json!(["samples", "count"])
    );
    assert_eq!(
        profiles[1]["sample_type"],
        serde_json::json!(["cpu", "nanoseconds"])
    );
    let ours = folded_file(&folded);
    let theirs = folded_json(&profiles[0]["folded"]);
    assert_eq!(
        theirs, ours,
        "the OTLP stacks differ from the folded output"
    );
    let total: u64 = ours.values().sum();
    assert!(total > 50, "only {total} samples");
    assert_eq!(profiles[0]["total"].as_u64().unwrap(), total);
    assert_eq!(profiles[0]["attributes"]["perf_profile.samples"], total);
    // The period profile has the same stacks; cpu-clock periods are ~1/499 s each.
    let periods = folded_json(&profiles[1]["folded"]);
    assert_eq!(
        periods.keys().collect::<Vec<_>>(),
        ours.keys().collect::<Vec<_>>()
    );
    let ns = profiles[1]["total"].as_u64().unwrap() as f64;
    let expect = total as f64 * 1e9 / 499.0;
    assert!(
        (ns / expect - 1.0).abs() < 0.5,
        "{ns} ns for {total} samples"
    );
    assert!(
        ours.keys().any(|k| k.contains("main;outer;hot_a;leaf")),
        "{ours:?}"
    );
}
