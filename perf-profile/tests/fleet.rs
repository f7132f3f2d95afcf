//! Fleet features of the `perf-profile` command and the library, each test deciding at run time whether
//! it can run here and saying why not:
//!
//! - OTLP: the `.otlp` file decodes with the official `opentelemetry-proto` Python package (in a
//!   venv made under the target directory, or `PERF_PROFILE_PYTHON`) into the same stacks and
//!   totals as the folded output of the same capture, with the resource attributes.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use common::receiver::Receiver;
use common::{
    build_c, command, folded_file, go_pprof_raw, have, may_sample_commands, profile, profile_ok,
    require_cc, require_sampling, samples_with, scratch, text,
};
use tests::{require, Skip};

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
    require_sampling!();
    require_cc!();
    let py = match otel_python() {
        Ok(py) => py,
        Err(e) => return tests::skip(Skip::Environment, &e),
    };
    let dir = scratch("otlp");
    let calls = build_c(&dir, "calls");
    let otlp = dir.join("out.otlp");
    let folded = dir.join("out.folded");
    profile_ok(&[
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
    let d = decode_otlp(&py, &otlp);

    let r = &d["resource"];
    assert_eq!(r["service.name"], "checkout-svc");
    assert_eq!(r["host.name"], host_name());
    assert!(r["process.pid"].as_u64().unwrap() > 1, "{r}");
    assert_eq!(r["process.executable.name"], "calls");
    assert_eq!(d["scope"][0], "perf-profile");

    let profiles = d["profiles"].as_array().unwrap();
    assert_eq!(profiles.len(), 2, "{d}");
    // Each profile has its own profile_id, 16 bytes.
    let ids: Vec<&str> = profiles
        .iter()
        .map(|p| p["profile_id"].as_str().unwrap())
        .collect();
    assert!(ids.iter().all(|id| id.len() == 32), "{ids:?}");
    assert_ne!(ids[0], ids[1]);
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

/// The number after `prefix` in `text`.
fn number_after(text: &str, prefix: &str) -> u64 {
    let at = text
        .find(prefix)
        .unwrap_or_else(|| panic!("no {prefix:?} in:\n{text}"));
    text[at + prefix.len()..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// The example's first line of `err` that has `what`.
fn line_with<'a>(err: &'a str, what: &str) -> &'a str {
    err.lines()
        .find(|l| l.contains(what))
        .unwrap_or_else(|| panic!("no {what:?} in:\n{err}"))
}

/// The example on `calls SECS` at 499 Hz, cut every `every` s into `DIR/cut-{n}.folded`, each cut
/// pushed to `url`, with the `extra` options: its stderr.
fn push_every(
    dir: &Path,
    calls: &Path,
    url: &str,
    every: &str,
    extra: &[&str],
    secs: &str,
) -> String {
    let cuts = dir.join("cut-{n}.folded");
    let mut args = vec!["-F", "499", "--every", every, "--push", url];
    args.extend(extra);
    args.extend([
        "-o",
        cuts.to_str().unwrap(),
        "--",
        calls.to_str().unwrap(),
        secs,
    ]);
    text(&profile_ok(&args).stderr)
}

/// The interval files [`push_every`] wrote into `dir`.
fn cuts(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("cut-"))
        .map(|e| e.path())
        .collect()
}

#[test]
fn continuous_pushes_survive_refusals_and_deliver_every_sample_once() {
    require_sampling!();
    require_cc!();
    let dir = scratch("continuous");
    let calls = build_c(&dir, "calls");
    // The first three requests are refused with 503.
    let rx = Receiver::start(|n| if n < 3 { 503 } else { 200 });
    let url = format!("http://127.0.0.1:{}/v1development/profiles", rx.port);
    let err = push_every(&dir, &calls, &url, "0.3", &["--retry-max", "0.2"], "1.5");
    let (line, push) = (
        line_with(&err, "samples in total"),
        line_with(&err, "profile: push: sent"),
    );
    let total = number_after(line, "profile: ");
    println!("{push}; the capture's total: {total} samples");
    assert_eq!(number_after(push, "retried; "), 0, "none rejected: {push}");
    assert_eq!(
        number_after(push, "samples; "),
        3,
        "3 failed attempts: {push}"
    );
    assert_eq!(number_after(push, "dropped "), 0, "{push}");
    // The accepted bodies hold every sample once: their sum is the capture's total.
    use prost::Message;
    let got = rx.got.lock().unwrap().clone();
    assert!(got.len() >= 2, "{} requests accepted", got.len());
    let mut arrived = 0i64;
    for a in &got {
        assert_eq!(a.path, "/v1development/profiles");
        assert_eq!(
            a.header("content-encoding"),
            Some("gzip"),
            "OTLP bodies are gzip'd"
        );
        let r = opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest::decode(&a.content()[..]).unwrap();
        let p = &r.resource_profiles[0].scope_profiles[0].profiles[0];
        arrived += p.samples.iter().map(|s| s.values[0]).sum::<i64>();
    }
    assert!(total > 100, "{total} samples:\n{err}");
    assert_eq!(arrived as u64, total, "{err}");
    // The interval files add up to the total too, stack by stack, and to what the official
    // decoder reads from the pushed bodies.
    let mut files = BTreeMap::new();
    for cut in cuts(&dir) {
        for (stack, n) in folded_file(&cut) {
            *files.entry(stack).or_insert(0) += n;
        }
    }
    assert_eq!(files.values().sum::<u64>(), total);
    match otel_python() {
        Ok(py) => {
            let mut pushed = BTreeMap::new();
            for (i, a) in got.iter().enumerate() {
                let f = dir.join(format!("body-{i}.otlp"));
                std::fs::write(&f, a.content()).unwrap();
                let d = decode_otlp(&py, &f);
                for (stack, n) in folded_json(&d["profiles"][0]["folded"]) {
                    *pushed.entry(stack).or_insert(0) += n;
                }
                assert_eq!(d["resource"]["process.executable.name"], "calls");
            }
            assert_eq!(pushed, files);
        }
        Err(e) => println!(
            "the official decoder is not available ({e}): pushed bodies decoded with prost only"
        ),
    }
}

#[test]
fn pyroscope_ingest_gets_pprof_that_go_tool_pprof_reads() {
    require_sampling!();
    require_cc!();
    require!(
        have("go", "version"),
        Skip::Environment,
        "go is not installed (Debian: golang-go)"
    );
    let dir = scratch("ingest");
    let calls = build_c(&dir, "calls");
    let rx = Receiver::start(|_| 200);
    let url = format!("http://127.0.0.1:{}/ingest", rx.port);
    let err = text(
        &profile_ok(&[
            "-F",
            "499",
            "--push",
            &url,
            "--label",
            "env=test",
            "--",
            calls.to_str().unwrap(),
            "0.5",
        ])
        .stderr,
    );
    let got = rx.got.lock().unwrap().clone();
    assert_eq!(got.len(), 1, "{err}");
    let (path, body) = (&got[0].path, &got[0].body);
    // The body is pprof's own gzip file, not a compressed transfer.
    assert_eq!(got[0].header("content-encoding"), None);
    // /ingest?name=calls{hostname=HOST,env=test}&from=..&until=..&format=pprof&...
    assert!(path.starts_with("/ingest?"), "{path}");
    let query: BTreeMap<&str, &str> = path["/ingest?".len()..]
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .collect();
    assert_eq!(query["format"], "pprof");
    assert_eq!(query["spyName"], "perf-profile");
    assert_eq!(query["sampleRate"], "499");
    let name = query["name"]
        .replace("%7B", "{")
        .replace("%7D", "}")
        .replace("%3D", "=")
        .replace("%2C", ",");
    assert_eq!(name, format!("calls{{hostname={},env=test}}", host_name()));
    let (from, until): (u64, u64) = (
        query["from"].parse().unwrap(),
        query["until"].parse().unwrap(),
    );
    assert!(from <= until && until - from < 30, "{from} {until}");
    let file = dir.join("ingest.pb.gz");
    std::fs::write(&file, body).unwrap();
    let raw = go_pprof_raw(&file).unwrap();
    assert!(raw.contains("samples/count cpu/nanoseconds"), "{raw}");
    for f in ["main", "outer", "hot_a", "hot_b", "leaf"] {
        assert!(
            raw.contains(&format!(" {f} ")) || raw.contains(&format!(" {f}\n")),
            "{f} missing:\n{raw}"
        );
    }
}

#[test]
fn off_cpu_time_in_a_sleeping_function_is_attributed_within_ten_percent() {
    require!(
        may_sample_commands(),
        Skip::Privilege,
        "needs root or perf_event_paranoid <= 1 (it is {})",
        tests::paranoid()
    );
    require!(have("cc", "--version"), Skip::Environment, "no C compiler");
    if let Err((kind, why)) = tests::tracepoint("sched:sched_switch") {
        return tests::skip(kind, &why);
    }
    let dir = scratch("offcpu");
    let sleeps = build_c(&dir, "sleeps");
    let folded = dir.join("off.folded");
    let pprof = dir.join("off.pb.gz");
    let out = profile(&[
        "--off-cpu",
        "-o",
        folded.to_str().unwrap(),
        "-o",
        pprof.to_str().unwrap(),
        "--",
        sleeps.to_str().unwrap(),
        "20",
    ]);
    assert!(
        out.status.success(),
        "profile failed: {}",
        text(&out.stderr)
    );
    // The workload's own measure of its time inside wait_here.
    let measured: f64 = text(&out.stdout).trim().parse().unwrap();
    let stacks = folded_file(&folded);
    let ours: u64 = stacks
        .iter()
        .filter(|(s, _)| s.contains(";main;wait_here;"))
        .map(|(_, ns)| ns)
        .sum();
    let ours = ours as f64 / 1e9;
    println!("off-CPU in wait_here: ours {ours:.4} s, measured {measured:.4} s");
    assert!(measured > 0.9, "{measured}");
    assert!(
        (ours / measured - 1.0).abs() <= 0.10,
        "ours {ours} s, the workload measured {measured} s: {stacks:?}"
    );
    // pprof: samples/count and off_cpu/nanoseconds, the same nanoseconds.
    use prost::Message;
    let mut raw = Vec::new();
    std::io::Read::read_to_end(
        &mut flate2::read::GzDecoder::new(std::fs::File::open(&pprof).unwrap()),
        &mut raw,
    )
    .unwrap();
    let p = perf_profile::proto::perftools::profiles::Profile::decode(&raw[..]).unwrap();
    let st = |i: usize| {
        let vt = &p.sample_type[i];
        (
            p.string_table[vt.r#type as usize].as_str(),
            p.string_table[vt.unit as usize].as_str(),
        )
    };
    assert_eq!(st(0), ("samples", "count"));
    assert_eq!(st(1), ("off_cpu", "nanoseconds"));
    let total_ns: i64 = p.sample.iter().map(|s| s.value[1]).sum();
    assert_eq!(total_ns as u64, stacks.values().sum::<u64>());
}

#[test]
fn jit_frames_are_named_from_the_perf_map_also_after_the_process_deleted_it_and_exited() {
    require_sampling!();
    require_cc!();
    require!(
        cfg!(any(target_arch = "x86_64", target_arch = "aarch64")),
        Skip::Environment,
        "the JIT stand-in generates x86_64 or aarch64 code"
    );
    let dir = scratch("jit");
    let jit = build_c(&dir, "jit");
    let folded = dir.join("jit.folded");
    profile_ok(&[
        "-F",
        "499",
        "-o",
        folded.to_str().unwrap(),
        "--",
        jit.to_str().unwrap(),
        "0.4",
    ]);
    let stacks = folded_file(&folded);
    let (first, second) = (
        samples_with(&stacks, "jit_first"),
        samples_with(&stacks, "jit_second"),
    );
    let total: u64 = stacks.values().sum();
    println!("jit_first {first}, jit_second {second} of {total} samples");
    // Each ran for 0.4 s of the ~0.8 s: most samples are named (jit_second only after a miss).
    assert!(first * 4 > total && second * 4 > total, "{stacks:?}");
    assert!(first + second > total * 3 / 4, "{stacks:?}");
}

#[test]
fn doctor_reads_frame_pointers_unwind_tables_build_ids_and_symbols_of_a_binary() {
    use perf_profile::doctor::{doctor, DoctorOptions, Status};
    require_cc!();
    let dir = scratch("doctor");
    let cc = |out: &str, flags: &[&str]| common::cc(&dir, out, "calls.c", flags, &[]);
    let with = cc("fp", &["-O0", "-fno-omit-frame-pointer", "-Wl,--build-id"]);
    let without = cc(
        "nofp",
        &["-O1", "-fomit-frame-pointer", "-Wl,--build-id=none"],
    );
    let check = |bin: &Path| {
        let mut o = DoctorOptions::default();
        o.binary = Some(bin.to_owned());
        let r = doctor(&o);
        print!("{r}");
        r
    };
    let r = check(&with);
    assert_eq!(r.get("frame pointers").unwrap().status, Status::Ok, "{r}");
    assert_eq!(r.get("unwind tables").unwrap().status, Status::Ok, "{r}");
    assert_eq!(r.get("build id").unwrap().status, Status::Ok, "{r}");
    assert_eq!(r.get("symbols").unwrap().status, Status::Ok, "{r}");
    // The build id is the one readelf prints, where readelf is installed.
    if let Ok(o) = Command::new("readelf").arg("-n").arg(&with).output() {
        let notes = text(&o.stdout);
        if let Some(id) = notes.split("Build ID: ").nth(1) {
            let id = id.split_whitespace().next().unwrap();
            assert!(r.get("build id").unwrap().detail.contains(id), "{r}");
        }
    }
    let r = check(&without);
    let fp = r.get("frame pointers").unwrap();
    assert_eq!(fp.status, Status::Warn, "{r}");
    assert!(fp
        .fix
        .as_deref()
        .unwrap()
        .contains("-fno-omit-frame-pointer"));
    assert_eq!(r.get("build id").unwrap().status, Status::Warn, "{r}");
    if have("strip", "--version") {
        let stripped = dir.join("stripped");
        assert!(Command::new("strip")
            .arg("-o")
            .arg(&stripped)
            .arg(&without)
            .status()
            .unwrap()
            .success());
        let r = check(&stripped);
        assert_eq!(r.get("symbols").unwrap().status, Status::Warn, "{r}");
    }
    // The system checks: each names what it found.
    for name in [
        "perf_event_paranoid",
        "locked memory for the rings",
        "kptr_restrict",
        "tracefs",
        "hardware PMU",
    ] {
        let c = r
            .get(name)
            .unwrap_or_else(|| panic!("no {name} check: {r}"));
        assert!(!c.detail.is_empty());
        assert!(c.status == Status::Ok || c.fix.is_some(), "{c:?}");
    }
    let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid").unwrap();
    assert!(r
        .get("perf_event_paranoid")
        .unwrap()
        .detail
        .starts_with(paranoid.trim()));
    // The command's --doctor prints the same (on stderr: stdout is the command's) and exits 0
    // unless something will fail.
    let out = profile(&["--doctor", "--", with.to_str().unwrap()]);
    let printed = text(&out.stderr);
    assert!(
        printed.contains("frame pointers:") && printed.contains("build id:"),
        "{printed}"
    );
    assert_eq!(
        out.status.success(),
        !printed.contains("[FAIL]"),
        "{printed}"
    );
}

/// `/proc/PID/status` VmRSS in KiB and utime + stime in clock ticks of `/proc/PID/stat`.
fn rss_and_ticks(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let f: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    // Fields 14 and 15 (utime, stime) are the 12th and 13th after the command name.
    let ticks = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some((rss, ticks))
}

/// The soak: the whole system at 99 Hz, a profile pushed every 10 s, for
/// `PERF_PROFILE_SOAK_SECS` seconds (default 600; `.ci/run` runs 60 on a release build). After the
/// warm-up (the first minute, or half of a shorter run) RSS must not grow (5% + 1 MiB slack), and
/// on a release build the profiler's CPU must stay within 1% of one CPU. `--symbolize none` by
/// default, as fleet agents run (the backend symbolizes); `PERF_PROFILE_SOAK_SYMBOLIZE=local`
/// measures local symbolization instead (as
/// [`continuous_local_symbolization_rss_flat_and_cpu_within_one_percent`] does).
#[test]
#[ignore = "a soak of 10 minutes; .ci/run runs it for 60 s"]
fn soak_system_wide_with_pushes_rss_flat_and_cpu_within_one_percent() {
    let symbolize = std::env::var("PERF_PROFILE_SOAK_SYMBOLIZE").unwrap_or("none".into());
    soak(&symbolize);
}

/// The soak with `--symbolize local`: every frame named on this machine (blazesym for user space,
/// /proc/kallsyms for the kernel) while the capture runs, each interval's new frames resolved once;
/// each file's symbolizer and the lines resolved are kept across intervals within their bounds
/// (`KEPT_FILES_BYTES`, `LINES_BYTES`), so RSS stays within them above the first minute.
/// `PERF_PROFILE_SOAK_SECS` as for the soak (default 600; 300 is enough to see a trend). Not in `.ci/run`: its CPU follows how many new binaries the machine runs
/// (a busy build machine's compilers and debug test binaries, each parsed when first sampled).
#[test]
#[ignore = "a soak of 10 minutes with local symbolization"]
fn continuous_local_symbolization_rss_flat_and_cpu_within_one_percent() {
    soak("local");
}

/// The soak with `--symbolize functions` (continuous mode's default): function names from the ELF
/// symbol tables, no DWARF, each file's table read once and kept while stacks name the file
/// (within 16 MiB). RSS between batches no higher at the end than after the first minute (5% + 1
/// MiB), and meanwhile never more than the tables' bound above it (they come and go with what
/// runs); CPU within 1% of one CPU. `PERF_PROFILE_SOAK_SECS` as for the soak (default 600).
#[test]
#[ignore = "a soak of 10 minutes with function names from the symbol tables"]
fn continuous_function_symbolization_rss_flat_and_cpu_within_one_percent() {
    soak("functions");
}

fn soak(symbolize: &str) {
    require!(
        tests::is_root() || tests::paranoid() <= 0,
        Skip::Privilege,
        "system-wide sampling needs root or perf_event_paranoid <= 0 (it is {})",
        tests::paranoid()
    );
    let secs: u64 = std::env::var("PERF_PROFILE_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(600);
    let warm = (secs / 2).min(60);
    let tck: u64 = Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| text(&o.stdout).trim().parse().ok())
        .unwrap_or(100);
    // Built before the receiver's clock starts.
    let bin = command();
    let rx = Receiver::start_for(std::time::Duration::from_secs(secs + 120), |_| 200);
    let url = format!("http://127.0.0.1:{}/v1development/profiles", rx.port);
    let release = bin.to_string_lossy().contains("/release/");
    let mut child = Command::new(&bin)
        .args(["-a", "-F", "99", "--every", "10", "--symbolize", symbolize])
        .args(["--push", &url, "-d", &secs.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let start = std::time::Instant::now();
    let mut points: Vec<(f64, u64, u64)> = Vec::new();
    while let Some((rss, ticks)) = rss_and_ticks(pid) {
        points.push((start.elapsed().as_secs_f64(), rss, ticks));
        if start.elapsed().as_secs() > secs + 30 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_secs(1));
        if matches!(child.try_wait(), Ok(Some(_))) {
            break;
        }
    }
    let out = child.wait_with_output().unwrap();
    let err = text(&out.stderr);
    assert!(out.status.success(), "profile failed: {err}");
    // The last reading before the end of sampling (the final flush is not steady state).
    let steady: Vec<_> = points
        .iter()
        .filter(|p| p.0 >= warm as f64 && p.0 <= secs as f64 - 1.0)
        .copied()
        .collect();
    assert!(steady.len() >= 2, "too few readings: {points:?}");
    let (t0, rss0, ticks0) = steady[0];
    let (t1, rss1, ticks1) = steady[steady.len() - 1];
    let rss_max = steady.iter().map(|p| p.1).max().unwrap();
    let cpu = (ticks1 - ticks0) as f64 / tck as f64 / (t1 - t0) * 100.0;
    let (tl, _, ticks_last) = *points.last().unwrap();
    let cpu_all = ticks_last as f64 / tck as f64 / tl * 100.0;
    let pushes = rx.got.lock().unwrap().len();
    let push = err
        .lines()
        .find(|l| l.starts_with("profile: push: sent"))
        .unwrap_or_default();
    println!(
        "soak {secs} s ({}, --symbolize {symbolize}): RSS {rss0} KiB at {t0:.0} s, at most {rss_max} KiB after, \
         {rss1} KiB at {t1:.0} s; \
         CPU {cpu:.2}% of one CPU from {t0:.0} to {t1:.0} s ({cpu_all:.2}% over the whole run, start-up \
         included); {pushes} pushes accepted; {push}",
        if release { "release" } else { "debug" }
    );
    assert!(pushes as u64 >= secs / 10, "{pushes} pushes:\n{err}");
    assert!(push.contains("dropped 0 profiles"), "{push}");
    if symbolize == "none" {
        assert!(
            rss_max <= rss0 + rss0 / 20 + 1024,
            "RSS grew after the warm-up: {rss0} -> {rss_max} KiB: {points:?}"
        );
    } else {
        // Symbolizing, each cut maps the files its new frames are in for the length of their batch
        // (up to a second, a large debug binary: tens of MiB), a transient the readings catch now
        // and then. Growth is judged on the RSS between batches: each interval's (ten readings')
        // lowest.
        let floors: Vec<(f64, u64)> = steady
            .chunks(10)
            .map(|w| (w[0].0, w.iter().map(|p| p.1).min().unwrap()))
            .collect();
        let (base, top) = (floors[0].1, floors.iter().map(|f| f.1).max().unwrap());
        println!(
            "RSS between batches, by interval: {}",
            floors
                .iter()
                .map(|(t, r)| format!("{t:.0} s {r}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        if symbolize == "functions" {
            // The function tables of the files stacks name come and go with what runs (a
            // compiler's 4 MiB table while a build runs), within their bound: no growth from the
            // first minute to the end, and never more than the bound above it.
            let last = floors[floors.len() - 1].1;
            let bound = (perf_profile::symbolize::FUNCTION_TABLES_BYTES / 1024) as u64;
            assert!(
                last <= base + base / 20 + 1024 && top <= base + base / 20 + bound,
                "RSS grew after the warm-up: {base} -> {last} KiB between batches (at most \
                 {top}; the tables' bound {bound} KiB): {floors:?}"
            );
        } else {
            // The files' symbolizers and the lines kept across intervals fill their bounds as
            // new files and addresses come (minutes on a busy machine): never more than the
            // bounds above the first minute.
            let bound = ((perf_profile::symbolize::KEPT_FILES_BYTES
                + perf_profile::symbolize::LINES_BYTES)
                / 1024) as u64;
            assert!(
                top <= base + base / 20 + bound,
                "RSS grew after the warm-up: {base} -> {top} KiB between batches (the kept \
                 files' and lines' bound {bound} KiB): {floors:?}"
            );
        }
    }
    if release {
        assert!(cpu <= 1.0, "CPU {cpu:.2}% of one CPU");
    } else {
        println!("(a debug build: the 1% CPU budget is checked on release builds)");
    }
}

#[test]
fn a_slow_endpoint_does_not_hold_up_sampling_or_the_intervals() {
    require_sampling!();
    require_cc!();
    let dir = scratch("slow");
    let calls = build_c(&dir, "calls");
    // Each answer takes 0.8 s: far longer than an interval.
    let rx = Receiver::start(|_| {
        std::thread::sleep(std::time::Duration::from_millis(800));
        200
    });
    let url = format!("http://127.0.0.1:{}/v1development/profiles", rx.port);
    let started = std::time::Instant::now();
    let err = push_every(&dir, &calls, &url, "0.2", &[], "2.0");
    // The intervals were cut on time while pushes waited: one file per 0.2 s of the capture (10 for
    // 2 s of workload; a loaded machine starts the capture late, so at least 5 are asked for, where
    // cuts that waited on the 0.8 s pushes would give 3 at most).
    let capture = line_with(&err, "samples in total in");
    let intervals = number_after(capture, "samples in total in ");
    assert_eq!(cuts(&dir).len() as u64, intervals);
    assert!(intervals >= 5, "{intervals} intervals:\n{err}");
    let total = number_after(capture, "profile: ");
    let push = line_with(&err, "profile: push: sent");
    println!(
        "{push}; {intervals} intervals, {total} samples, {:.1} s",
        started.elapsed().as_secs_f64()
    );
    // Fewer requests than intervals (pending ones merged or sent one at a time), every sample once.
    assert_eq!(number_after(push, "requests with "), total, "{push}");
    assert!(err.contains("lost 0 records and 0 samples"), "{err}");
}
