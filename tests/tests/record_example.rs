//! The `record` example of perf-event (`cargo run -p perf-event-safe --example record`), run as a user runs it
//! on a small C program: `perf script` and `perf report` open the file it writes without complaint, count
//! the samples it says it wrote, and put the busy loop's samples on the busy loop's symbol (with its caller
//! in the call chains); perf-core's reader reads the file back; bad arguments exit 2, failures 1.
//!
//! The example binary is built by the first test that needs it (`cargo build -p perf-event-safe --example
//! record`, same profile and target directory as these tests). The C program is compiled with `cc`; the
//! tests that need `perf` or `cc` print `skipped: <reason>` without them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use perf_core::perf_data::{PerfData, PERF_RECORD_FINISHED_ROUND};
use perf_core::record::{Mmap2File, ReadValues, Record, Sample};
use perf_sys::*;
use tests::{is_root, paranoid, require, Skip};

/// The example binary, built once.
fn record_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| tests::example_binary("record"))
}

fn record(args: &[&str], dir: &Path) -> Output {
    record_env(args, dir, &[])
}

/// Runs the example, which must succeed; its stderr (the summary).
fn record_ok(args: &[&str], dir: &Path, env: &[(&str, &Path)]) -> String {
    let o = record_env(args, dir, env);
    let err = text(&o.stderr);
    println!("{err}");
    assert!(o.status.success(), "record {args:?} failed: {err}");
    err
}

fn record_env(args: &[&str], dir: &Path, env: &[(&str, &Path)]) -> Output {
    Command::new(record_bin())
        .args(args)
        .envs(env.iter().copied())
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .expect("running the record example")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn has_perf() -> bool {
    Command::new("perf")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A fresh directory for one test, removed when dropped.
///
/// Not named `/tmp/perf-*`: perf takes every file under that prefix for a JIT map
/// (`/tmp/perf-PID.map`) and would not read the test program's symbols.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("record-example-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The test program: `busy_loop_fn` runs (called from `main`) for argv[1] seconds of its CPU time.
const BUSY_C: &str = r#"
#include <stdlib.h>
#include <time.h>
volatile unsigned long sink;
__attribute__((noinline)) unsigned long busy_loop_fn(unsigned long n) {
    unsigned long x = 1;
    for (unsigned long i = 0; i < n; i++) x = (x ^ i) * 3 + 1;
    return x;
}
int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 0.3;
    struct timespec a, b;
    /* Its own CPU time, not wall time: on a loaded machine it still runs `secs` on a CPU. */
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
    do {
        sink += busy_loop_fn(100000);
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
    } while ((b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9 < secs);
    return 0;
}
"#;

/// Compiles the test program into `dir` (frame pointers kept, so call chains reach `main`); `None`,
/// after printing why, when there is no C compiler.
fn busy_program(dir: &Path) -> Option<PathBuf> {
    compile(dir, "busy", &["-O0", "-fno-omit-frame-pointer"])
}

/// A program whose hot function `leaf` is two calls below `main` (`main` -> `top` -> `mid` ->
/// `leaf`), for call chains; it runs for argv[1] seconds of CPU time.
const CALLS_C: &str = r#"
#include <stdlib.h>
#include <time.h>
volatile unsigned long sink;
__attribute__((noinline)) unsigned long leaf(unsigned long n) {
    unsigned long x = 1;
    for (unsigned long i = 0; i < n; i++) x = (x ^ i) * 3 + 1;
    return x;
}
__attribute__((noinline)) unsigned long mid(unsigned long n) { sink += 1; return leaf(n) + sink; }
__attribute__((noinline)) unsigned long top(unsigned long n) { sink += 2; return mid(n) + sink; }
int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 0.3;
    struct timespec a, b;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
    do {
        sink += top(10000000 + (sink & 1));
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
    } while ((b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9 < secs);
    return 0;
}
"#;

/// Compiles the test program into `dir/name` with `flags`; `None`, after printing why, when there
/// is no C compiler.
fn compile(dir: &Path, name: &str, flags: &[&str]) -> Option<PathBuf> {
    compile_source(dir, name, BUSY_C, flags)
}

/// Compiles `source` into `dir/name` with `flags`; `None`, after printing why, when there is no C
/// compiler.
fn compile_source(dir: &Path, name: &str, source: &str, flags: &[&str]) -> Option<PathBuf> {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, source).unwrap();
    let bin = dir.join(name);
    let out = Command::new("cc")
        .args(flags)
        .arg("-o")
        .arg(&bin)
        .arg(&src)
        .output();
    match out {
        Ok(o) if o.status.success() => Some(bin),
        Ok(o) => panic!("cc failed to compile the test program: {}", text(&o.stderr)),
        Err(e) => {
            tests::skip(
                Skip::Environment,
                &format!("no C compiler (`cc`: {e}); install gcc"),
            );
            None
        }
    }
}

/// The sample count of the summary line `[ perf record: Captured and wrote X MB FILE (N samples) ]`.
fn summary_samples(stderr: &str) -> u64 {
    let line = stderr
        .lines()
        .find(|l| l.starts_with("[ perf record: Captured and wrote "))
        .unwrap_or_else(|| panic!("no summary line in:\n{stderr}"));
    let open = line.rfind('(').unwrap();
    line[open + 1..]
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no sample count in {line:?}"))
}

fn perf(args: &[&str], file: &Path) -> Output {
    let out = Command::new("perf")
        .args(args)
        .arg("-i")
        .arg(file)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "perf {args:?} failed: {}\n{}",
        out.status,
        text(&out.stderr)
    );
    out
}

/// Lines of perf's stderr that complain about the file.
fn complaints(stderr: &[u8]) -> Vec<String> {
    text(stderr)
        .lines()
        .filter(|l| {
            let l = l.to_ascii_lowercase();
            [
                "warn",
                "error",
                "fail",
                "invalid",
                "corrupt",
                "unknown",
                "unexpected",
                "broken",
                "missing",
                "lost",
                "not found",
            ]
            .iter()
            .any(|w| l.contains(w))
        })
        .map(str::to_owned)
        .collect()
}

/// The SAMPLE count of `perf report --stats`.
fn perf_stats_samples(file: &Path) -> u64 {
    let out = perf(&["report", "--stats"], file);
    let t = text(&out.stdout);
    t.lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("SAMPLE events:")?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no `SAMPLE events:` in perf report --stats:\n{t}"))
}

/// The percentage `perf report` gives `symbol` (self time, no call graphs), 0 when absent.
fn report_percent(file: &Path, symbol: &str) -> f64 {
    let out = perf(
        &[
            "report",
            "--stdio",
            "--no-children",
            "-g",
            "none",
            "--sort",
            "sym",
        ],
        file,
    );
    let bad = complaints(&out.stderr);
    assert!(bad.is_empty(), "perf report complained: {bad:#?}");
    let t = text(&out.stdout);
    let pct = t
        .lines()
        .filter(|l| !l.starts_with('#') && l.contains(symbol))
        .filter_map(|l| {
            l.split_whitespace()
                .next()?
                .trim_end_matches('%')
                .parse::<f64>()
                .ok()
        })
        .sum();
    println!(
        "perf report --sort sym: {}",
        t.lines()
            .find(|l| !l.starts_with('#') && l.contains(symbol))
            .unwrap_or("(no line)")
            .trim()
    );
    pct
}

/// Checks what perf makes of `file` (`samples` written): `perf script` and `perf report` complain about
/// nothing and count `samples`, and more than half of them are in `busy_loop_fn`. With call chains,
/// most `busy_loop_fn` samples have `main` as the caller.
fn perf_reads(file: &Path, samples: u64, call_chains: bool) {
    let script = perf(&["script"], file);
    let bad = complaints(&script.stderr);
    assert!(bad.is_empty(), "perf script complained: {bad:#?}");
    let out = text(&script.stdout);
    // A sample is a line; its call chain frames follow, each indented with a tab.
    let blocks: Vec<Vec<&str>> = out
        .split("\n\n")
        .flat_map(|b| {
            let mut v: Vec<Vec<&str>> = Vec::new();
            for l in b.lines().filter(|l| !l.trim().is_empty()) {
                if !l.starts_with('\t') {
                    v.push(vec![l]);
                } else if let Some(last) = v.last_mut() {
                    last.push(l);
                }
            }
            v
        })
        .collect();
    assert_eq!(blocks.len() as u64, samples, "perf script:\n{out}");
    println!(
        "perf script: {}",
        blocks
            .iter()
            .find(|b| b.iter().any(|l| l.contains("busy_loop_fn")))
            .map(|b| b.join("\n"))
            .unwrap_or_default()
    );
    if call_chains {
        let in_busy: Vec<&Vec<&str>> = blocks
            .iter()
            .filter(|b| b.get(1).is_some_and(|l| l.contains("busy_loop_fn")))
            .collect();
        let with_main = in_busy
            .iter()
            .filter(|b| b.get(2).is_some_and(|l| l.contains(" main+")))
            .count();
        assert!(
            !in_busy.is_empty() && with_main * 10 >= in_busy.len() * 8,
            "{with_main} of {} busy_loop_fn samples have main as the caller",
            in_busy.len()
        );
    }

    let report = perf(&["report", "--stdio"], file);
    let bad = complaints(&report.stderr);
    assert!(bad.is_empty(), "perf report complained: {bad:#?}");
    let t = text(&report.stdout);
    if let Some(l) = t.lines().find(|l| l.starts_with("# Samples:")) {
        println!("perf report: {l}");
    }
    assert_eq!(perf_stats_samples(file), samples);
    let pct = report_percent(file, "busy_loop_fn");
    assert!(pct > 50.0, "busy_loop_fn has {pct}% of the samples");
}

/// What perf-core's reader finds in the file: (samples, records by type).
fn read_back(file: &Path) -> (Vec<Record<'static>>, PerfDataSummary) {
    let bytes = std::fs::read(file).unwrap();
    let data = PerfData::parse(&bytes).unwrap();
    let events = data.events();
    assert_eq!(events.len(), 1, "{events:?}");
    let name = events[0].name.clone().unwrap_or_default();
    let mut records = Vec::new();
    let mut rounds = 0;
    for rec in data.records() {
        let rec = rec.unwrap();
        if rec.record_type() == PERF_RECORD_FINISHED_ROUND {
            rounds += 1;
            continue;
        }
        assert!(!rec.is_tool_record(), "{rec:?}");
        assert_eq!(rec.event, Some(0));
        records.push(rec.parse().unwrap().into_owned());
    }
    let summary = PerfDataSummary {
        name,
        ids: events[0].ids.len(),
        rounds,
        cmdline: data.features().cmdline.clone().unwrap_or_default(),
        build_ids: data
            .features()
            .build_ids
            .iter()
            .map(|b| b.filename.clone())
            .collect(),
        sample_type: events[0].attr.sample_type,
    };
    (records, summary)
}

struct PerfDataSummary {
    name: String,
    ids: usize,
    rounds: usize,
    cmdline: Vec<String>,
    build_ids: Vec<String>,
    sample_type: u64,
}

fn samples_of(records: &[Record<'_>]) -> u64 {
    records
        .iter()
        .filter(|r| matches!(r, Record::Sample(_)))
        .count() as u64
}

fn online_cpus() -> usize {
    perf_event::config::online_cpus().unwrap().len()
}

#[test]
fn records_a_command_that_perf_reads() {
    require!(
        has_perf(),
        Skip::Environment,
        "the perf tool is not installed (Debian: apt-get install linux-perf)"
    );
    let dir = TempDir::new("cmd");
    let Some(busy) = busy_program(&dir.0) else {
        return;
    };
    let file = dir.0.join("perf.data");
    let o = record(
        &[
            "-F",
            "999",
            "-g",
            "-o",
            "perf.data",
            "--",
            busy.to_str().unwrap(),
            "0.4",
        ],
        &dir.0,
    );
    let err = text(&o.stderr);
    println!("{err}");
    assert!(o.status.success(), "record failed: {err}");
    assert!(!err.contains("lost"), "{err}");
    let samples = summary_samples(&err);
    assert!(samples >= 50, "only {samples} samples of 0.4 s at 999 Hz");

    perf_reads(&file, samples, true);

    let (records, s) = read_back(&file);
    assert_eq!(samples_of(&records), samples);
    assert!(
        s.name == "cpu-clock" || s.name.starts_with("cycles") || s.name.starts_with("cpu-clock:"),
        "{}",
        s.name
    );
    assert_eq!(s.ids, online_cpus(), "one counter per online CPU");
    assert!(s.rounds >= 2, "{} rounds", s.rounds);
    assert!(s.cmdline.iter().any(|a| a == "-g"), "{:?}", s.cmdline);
    assert!(s.sample_type & u64::from(PERF_SAMPLE_CALLCHAIN) != 0);
    // The exec's COMM and the program's MMAP2 came from the kernel.
    let comm = records
        .iter()
        .find_map(|r| match r {
            Record::Comm(c) if c.comm.to_vec() == b"busy" => Some(c.clone()),
            _ => None,
        })
        .expect("no COMM record for the program");
    assert!(comm.misc.comm_exec(), "{comm:?}");
    let busy_path = busy.to_str().unwrap();
    let mmap = records
        .iter()
        .find_map(|r| match r {
            Record::Mmap2(m) if m.filename.to_string_lossy() == busy_path => Some(m.clone()),
            _ => None,
        })
        .expect("no MMAP2 record for the program");
    assert_eq!(mmap.pid, comm.pid);
    // With build ids in MMAP2 (Linux 5.12+), they are also in the BUILD_ID feature.
    if let Mmap2File::BuildId(_) = mmap.file {
        assert!(
            s.build_ids.iter().any(|b| b == busy_path),
            "{:?}",
            s.build_ids
        );
    }
    // Every sample is the program's, and has a call chain.
    for r in &records {
        if let Record::Sample(smp) = r {
            assert_eq!(smp.thread().unwrap().pid, comm.pid);
            assert!(smp.callchain().as_ref().is_some_and(|c| !c.ips.is_empty()));
        }
    }
}

#[test]
fn attaches_to_a_running_process_with_synthesized_mappings() {
    require!(
        has_perf(),
        Skip::Environment,
        "the perf tool is not installed (Debian: apt-get install linux-perf)"
    );
    let dir = TempDir::new("pid");
    let Some(busy) = busy_program(&dir.0) else {
        return;
    };
    record_bin(); // built before the program starts its second
    let mut child = Command::new(&busy).arg("1.0").spawn().unwrap();
    let pid = child.id();
    // Let it exec and start looping: its COMM and mappings now predate the recording.
    std::thread::sleep(Duration::from_millis(100));
    let file = dir.0.join("pid.data");
    let o = record(
        &["-F", "999", "-o", "pid.data", "-p", &pid.to_string()],
        &dir.0,
    );
    child.wait().unwrap();
    let err = text(&o.stderr);
    println!("{err}");
    assert!(o.status.success(), "record -p failed: {err}");
    let samples = summary_samples(&err);
    assert!(samples >= 50, "only {samples} samples");

    perf_reads(&file, samples, false);

    let (records, _) = read_back(&file);
    assert_eq!(samples_of(&records), samples);
    // Synthesized: the thread's name and the program's mapping, from /proc, at time 0.
    let comm = records.iter().find_map(|r| match r {
        Record::Comm(c) if c.pid == pid => Some(c.clone()),
        _ => None,
    });
    let comm = comm.expect("no synthesized COMM");
    assert_eq!(comm.comm.to_vec(), b"busy");
    assert_eq!(comm.sample_id.time, Some(0));
    let busy_path = busy.to_str().unwrap();
    let mmap = records
        .iter()
        .find_map(|r| match r {
            Record::Mmap2(m) if m.pid == pid && m.filename.to_string_lossy() == busy_path => {
                Some(m.clone())
            }
            _ => None,
        })
        .expect("no synthesized MMAP2 of the program");
    assert!(
        matches!(mmap.file, Mmap2File::Inode { ino, .. } if ino != 0),
        "{mmap:?}"
    );
    assert_eq!(mmap.prot & libc::PROT_EXEC as u32, libc::PROT_EXEC as u32);
}

#[test]
fn system_wide_recording_names_the_command() {
    require!(
        has_perf(),
        Skip::Environment,
        "the perf tool is not installed (Debian: apt-get install linux-perf)"
    );
    require!(
        is_root() || paranoid() <= 0,
        Skip::Privilege,
        "system-wide sampling needs root or perf_event_paranoid <= 0 (it is {})",
        paranoid()
    );
    let dir = TempDir::new("all");
    let Some(busy) = busy_program(&dir.0) else {
        return;
    };
    let file = dir.0.join("all.data");
    let o = record(
        &[
            "-a",
            "-F",
            "499",
            "-o",
            "all.data",
            "--",
            busy.to_str().unwrap(),
            "0.4",
        ],
        &dir.0,
    );
    let err = text(&o.stderr);
    println!("{err}");
    assert!(o.status.success(), "record -a failed: {err}");
    let samples = summary_samples(&err);
    let script = perf(&["script"], &file);
    let bad = complaints(&script.stderr);
    assert!(bad.is_empty(), "perf script complained: {bad:#?}");
    assert_eq!(perf_stats_samples(&file), samples);
    let out = text(&script.stdout);
    let busy_lines = out.lines().filter(|l| l.contains("busy_loop_fn")).count();
    assert!(
        busy_lines >= 20,
        "{busy_lines} busy_loop_fn samples of {samples}:\n{out}"
    );
    // Every process that ran before the recording has a synthesized COMM (pid 1 at least).
    let (records, _) = read_back(&file);
    assert!(
        records
            .iter()
            .any(|r| matches!(r, Record::Comm(c) if c.pid == 1 && c.sample_id.time == Some(0))),
        "no COMM for pid 1"
    );
}

#[test]
fn bad_arguments_exit_2_and_failures_exit_1() {
    let dir = TempDir::new("args");
    for args in [
        &[][..],
        &["-F"],
        &["-F", "0", "--", "true"],
        &["-F", "10", "-c", "10", "--", "true"],
        &["--bogus", "true"],
        &["-m", "3", "--", "true"],
        &["-a", "-p", "1"],
        &["-c", "9223372036854775808", "--", "true"],
    ] {
        let o = record(args, &dir.0);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("usage: record"), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    for (args, says) in [
        (
            &["--", "/nonexistent/command"][..],
            "cannot run /nonexistent/command",
        ),
        (&["-e", "no_such_event", "--", "true"], "no_such_event"),
        (
            &["-e", "page-fautls", "--", "true"],
            "did you mean 'page-faults'?",
        ),
        (
            &["-e", "{cpu-clock,task-clock", "--", "true"],
            "event syntax error",
        ),
        (&["-p", "999999999"], "no such process"),
        (
            &["-o", "/nonexistent/dir/x.data", "--", "true"],
            "/nonexistent/dir/x.data",
        ),
    ] {
        let o = record(args, &dir.0);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    // An output that cannot be written fails before any counter is opened: here a user stack
    // every kernel refuses would fail the open, and the error is the file's, named once.
    let o = record(
        &[
            "-o",
            "/nonexistent/dir/x.data",
            "-e",
            "cpu-clock/call-graph=dwarf,stack-size=70000/",
            "--",
            "true",
        ],
        &dir.0,
    );
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("cannot create /nonexistent/dir/x.data: No such file or directory"),
        "{err}"
    );
    assert_eq!(err.matches("x.data").count(), 1, "{err}");
    // The command's exit status is passed on.
    let o = record(&["-o", "f.data", "--", "sh", "-c", "exit 3"], &dir.0);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o.stderr));
    summary_samples(&text(&o.stderr));
    // perf's convention: the previous file is kept as FILE.old.
    let o = record(&["-o", "f.data", "--", "true"], &dir.0);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(dir.0.join("f.data.old").exists());
}

/// Of the samples in `leaf` (of [`CALLS_C`]), how many perf unwinds to `mid`, `top` and `main`
/// above it (DWARF from the recorded stack, or the kernel's frame-pointer walk), and how many there
/// are.
fn callers_in_perf_script(file: &Path) -> (usize, usize) {
    let out = perf(&["script", "-F", "ip,sym"], file);
    let text = text(&out.stdout);
    let (mut with_main, mut total) = (0, 0);
    // Each sample: one line per frame, `ADDRESS SYMBOL`, and a blank line after.
    for sample in text.split("\n\n") {
        let frames: Vec<&str> = sample
            .lines()
            .filter_map(|l| l.split_whitespace().nth(1))
            .collect();
        if frames.first() == Some(&"leaf") {
            total += 1;
            with_main += usize::from(frames.get(1..4) == Some(&["mid", "top", "main"][..]));
        }
    }
    (with_main, total)
}

/// `--call-graph` as perf takes it: `dwarf` (a separate word, not a program to run) and
/// `=dwarf,SIZE` record the user registers, the stack and the data mappings, so that perf unwinds
/// code built without frame pointers past the sampled function; `-g` on such code warns once;
/// `lbr` without a hardware PMU is refused with the reason.
#[test]
fn call_graphs_as_perf_takes_them() {
    require!(
        has_perf(),
        Skip::Environment,
        "perf is not installed (linux-perf)"
    );
    let dir = TempDir::new("callgraph");
    let Some(nofp) = compile_source(&dir.0, "nofp", CALLS_C, &["-O2", "-fomit-frame-pointer"])
    else {
        return;
    };
    let nofp = nofp.to_str().unwrap();
    for (args, stack) in [
        (&["--call-graph", "dwarf"][..], 8192),
        (&["--call-graph=dwarf,16380"][..], 16384),
    ] {
        let mut all = vec!["-F", "999", "-o", "dw.data"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--", nofp, "0.3"]);
        let err = record_ok(&all, &dir.0, &[]);
        assert!(summary_samples(&err) > 0, "{err}");
        let file = dir.0.join("dw.data");
        let bytes = std::fs::read(&file).unwrap();
        let data = PerfData::parse(&bytes).unwrap();
        let attr = &data.events()[0].attr;
        assert_eq!(attr.sample_stack_user, stack, "{args:?}");
        assert_eq!(
            attr.mmap_data(),
            1,
            "{args:?}: the data mappings are recorded"
        );
        assert_eq!(attr.exclude_callchain_user(), 1, "{args:?}");
        let (with_main, total) = callers_in_perf_script(&file);
        println!("{args:?}: {with_main} of {total} leaf samples unwound to mid;top;main");
        assert!(total >= 20, "{total} leaf samples");
        assert!(
            with_main * 10 >= total * 9,
            "{args:?}: perf unwound only {with_main} of {total} samples past the leaf"
        );
    }
    // -g on the same program: the kernel's walk stops at the leaf, and the tool says why, once.
    let err = record_ok(
        &["-F", "999", "-g", "-o", "fp.data", "--", nofp, "0.3"],
        &dir.0,
        &[],
    );
    assert_eq!(err.matches("--call-graph dwarf").count(), 1, "{err}");
    assert!(err.contains("-C force-frame-pointers=yes"), "{err}");
    let (with_main, total) = callers_in_perf_script(&dir.0.join("fp.data"));
    println!("-g: {with_main} of {total} leaf samples unwound to mid;top;main");
    // With frame pointers: whole chains, no warning.
    let Some(fp) = compile_source(&dir.0, "fp", CALLS_C, &["-O2", "-fno-omit-frame-pointer"])
    else {
        return;
    };
    let err = record_ok(
        &[
            "-F",
            "999",
            "-g",
            "-o",
            "fp.data",
            "--",
            fp.to_str().unwrap(),
            "0.3",
        ],
        &dir.0,
        &[],
    );
    assert!(!err.contains("frame pointers"), "{err}");
    // Bad modes are usage errors; lbr needs a hardware PMU.
    for bad in ["foo", "dwarf,70000", "fp,8"] {
        let o = record(&["--call-graph", bad, "--", "true"], &dir.0);
        assert_eq!(o.status.code(), Some(2), "{bad}: {}", text(&o.stderr));
    }
    if !tests::has_hardware_pmu() {
        let o = record(&["--call-graph", "lbr", "--", "true"], &dir.0);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(
            err.contains("--call-graph lbr needs a hardware PMU"),
            "{err}"
        );
    }
}

/// `-F` above `kernel.perf_event_max_sample_rate` is lowered to it with a warning that names `-F`,
/// as perf does, and the file's event says so; no library type name reaches the user.
#[test]
fn a_frequency_above_the_limit_is_lowered_to_it() {
    require!(
        !tests::emulated(),
        Skip::Environment,
        "sampling at the kernel's maximum rate stalls an emulated CPU (an arm64 TCG guest's PMU at 100 kHz: \
         a 22 s soft lockup)"
    );
    let Some(max) = std::fs::read_to_string("/proc/sys/kernel/perf_event_max_sample_rate")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
    else {
        tests::skip(
            Skip::Environment,
            "kernel.perf_event_max_sample_rate is unreadable",
        );
        return;
    };
    let dir = TempDir::new("maxfreq");
    let hz = (max * 10).to_string();
    let err = record_ok(&["-F", &hz, "-o", "f.data", "--", "true"], &dir.0, &[]);
    assert!(
        err.contains(&format!(
            "-F {hz} is above kernel.perf_event_max_sample_rate ({max} Hz): sampling at {max} Hz"
        )),
        "{err}"
    );
    assert!(!err.contains("SampleOn"), "{err}");
    let bytes = std::fs::read(dir.0.join("f.data")).unwrap();
    let data = PerfData::parse(&bytes).unwrap();
    let attr = &data.events()[0].attr;
    assert_eq!(attr.freq(), 1);
    assert_eq!(attr.sample_period_or_freq(), max);
    // The default event is the one this machine has: cpu-clock without a hardware PMU.
    let name = data.events()[0].name.clone().unwrap_or_default();
    let expected = if tests::has_hardware_pmu() {
        "cycles"
    } else {
        "cpu-clock"
    };
    assert!(name.starts_with(expected), "{name}");
}

/// As an unprivileged user at paranoid 2: the kernel is left out (user space only), and `-a` is
/// refused with the paranoid level named.
#[test]
fn permission_limits_are_explained() {
    require!(
        is_root(),
        Skip::Privilege,
        "needs root to switch to uid 65534"
    );
    let setpriv = Path::new("/usr/bin/setpriv");
    require!(
        setpriv.exists(),
        Skip::Environment,
        "setpriv (util-linux) is not installed"
    );
    let level = paranoid();
    require!(
        level >= 1,
        Skip::Environment,
        "perf_event_paranoid is {level}: nothing is refused to unprivileged users"
    );
    let dir = TempDir::new("nobody");
    use std::os::unix::fs::PermissionsExt;
    let bin = dir.0.join("record");
    tests::copy_executable(record_bin(), &bin);
    std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o777)).unwrap();
    let as_nobody = |args: &[&str]| {
        Command::new(setpriv)
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(&bin)
            .args(args)
            .current_dir(&dir.0)
            .stdin(Stdio::null())
            .output()
            .expect("setpriv")
    };
    let o = as_nobody(&["-a", "-o", "a.data", "--", "true"]);
    let err = text(&o.stderr);
    println!("paranoid {level}, -a as uid 65534: {err}");
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("perf_event_paranoid is {level}")),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    if level == 2 {
        let o = as_nobody(&["-o", "u.data", "--", "true"]);
        let err = text(&o.stderr);
        assert!(o.status.success(), "{err}");
        assert!(err.contains("recording user space only"), "{err}");
        let bytes = std::fs::read(dir.0.join("u.data")).unwrap();
        let data = PerfData::parse(&bytes).unwrap();
        assert_eq!(data.events()[0].attr.exclude_kernel(), 1);
        assert!(data.events()[0]
            .name
            .as_deref()
            .unwrap_or("")
            .ends_with(":u"));
    }
}

/// `perf script -F fields` reads the file without complaint and shows every event of `names`.
fn perf_script_shows(file: &Path, fields: &str, names: &[String]) {
    let script = perf(&["script", "-F", fields], file);
    let bad = complaints(&script.stderr);
    assert!(bad.is_empty(), "perf script complained: {bad:#?}");
    let out = text(&script.stdout);
    for name in names {
        assert!(
            out.contains(&format!("{name}:")),
            "no {name} in perf script:\n{out}"
        );
    }
}

/// Every sample of a file with its event's index and name (perf-core's reader).
fn samples_by_event(file: &Path) -> (Vec<String>, Vec<(usize, Sample<'static>)>) {
    let bytes = std::fs::read(file).unwrap();
    let data = PerfData::parse(&bytes).unwrap();
    let names = data
        .events()
        .iter()
        .map(|e| e.name.clone().unwrap_or_default())
        .collect();
    let mut samples = Vec::new();
    for rec in data.records() {
        let rec = rec.unwrap();
        if rec.record_type() == PERF_RECORD_FINISHED_ROUND {
            continue;
        }
        let event = rec.event;
        if let Record::Sample(smp) = rec.parse().unwrap().into_owned() {
            samples.push((event.expect("a sample of no event"), smp));
        }
    }
    (names, samples)
}

/// `-e` takes perf's grammar: a list is one attr per event in the file, all of them in each CPU's
/// ring, and `{a,b}:S` is a group whose leader's samples carry both counts (perf script shows the
/// member's count as its own sample line).
#[test]
fn event_lists_and_groups_are_recorded_as_perf_records_them() {
    require!(
        has_perf(),
        Skip::Environment,
        "the perf tool is not installed (Debian: apt-get install linux-perf)"
    );
    let dir = TempDir::new("lists");
    let Some(busy) = busy_program(&dir.0) else {
        return;
    };
    let busy = busy.to_str().unwrap();
    let err = record_ok(
        &[
            "-e",
            "cpu-clock,task-clock",
            "-F",
            "999",
            "-o",
            "l.data",
            "--",
            busy,
            "0.3",
        ],
        &dir.0,
        &[],
    );
    let file = dir.0.join("l.data");
    let (names, samples) = samples_by_event(&file);
    assert_eq!(names, ["cpu-clock", "task-clock"]);
    assert_eq!(samples.len() as u64, summary_samples(&err));
    for (event, name) in names.iter().enumerate() {
        let n = samples.iter().filter(|(e, _)| *e == event).count();
        assert!(n >= 100, "{n} samples of {name} in 0.3 s at 999 Hz");
    }
    perf_script_shows(&file, "event", &names);

    // A group sampled by its leader: every sample reads both counters; the member never samples.
    record_ok(
        &[
            "-e",
            "{cpu-clock,page-faults}:S",
            "-c",
            "1000000",
            "-o",
            "g.data",
            "--",
            busy,
            "0.2",
        ],
        &dir.0,
        &[],
    );
    let file = dir.0.join("g.data");
    let (names, samples) = samples_by_event(&file);
    assert_eq!(names, ["cpu-clock", "page-faults"]);
    assert!(samples.len() >= 100, "{} samples", samples.len());
    let mut faults = 0;
    for (event, smp) in &samples {
        assert_eq!(*event, 0, "the member sampled: {smp:?}");
        let Some(ReadValues::Group(read)) = &smp.read() else {
            panic!("a sample without the group's counts: {smp:?}");
        };
        let members: Vec<u64> = read.entries().map(|v| v.value).collect();
        assert_eq!(members.len(), 2, "{read:?}");
        faults = faults.max(members[1]);
    }
    // The program touches its pages and libc's: page faults were counted along.
    assert!(faults > 0, "the group read never counted a page fault");
    let evlist = perf(&["evlist", "-v"], &file);
    let v = text(&evlist.stdout);
    assert!(
        v.lines().all(|l| l.contains("READ") && l.contains("GROUP")),
        "perf evlist -v:\n{v}"
    );
    // perf script shows the member's count from the leader's samples as its own line.
    perf_script_shows(&file, "event,period", &names);
}

/// A hybrid CPU's generic event (`cycles` on `cpu_core` + `cpu_atom`) is opened once per core PMU,
/// each copy on its PMU's CPUs, and written as one attr per copy, as perf records it. This machine
/// has no hybrid CPU: `PERF_EVENT_PMU_ROOT` points the example at [`tests::two_core_pmus`]
/// (`cpu_core` on CPU 0, `cpu_atom` on CPU 1, `clock` = `cpu-clock`), so the kernel opens the
/// copies for real.
#[test]
fn a_hybrid_event_is_recorded_per_pmu_on_its_cpus() {
    require!(
        has_perf(),
        Skip::Environment,
        "the perf tool is not installed (Debian: apt-get install linux-perf)"
    );
    let online = perf_event::config::online_cpus().unwrap();
    require!(
        online.contains(&0) && online.contains(&1),
        Skip::Hardware,
        "needs CPUs 0 and 1 online (has {online:?})"
    );
    let taskset = Path::new("/usr/bin/taskset");
    require!(
        taskset.exists(),
        Skip::Environment,
        "taskset (util-linux) is not installed"
    );
    let dir = TempDir::new("hybrid");
    let Some(busy) = busy_program(&dir.0) else {
        return;
    };
    let pmus = dir.0.join("pmus");
    tests::two_core_pmus(&pmus);
    let busy = busy.to_str().unwrap();
    let both = format!("taskset -c 0 {busy} 0.2 & taskset -c 1 {busy} 0.2; wait");
    let err = record_ok(
        &[
            "-e", "clock", "-F", "999", "-o", "h.data", "--", "sh", "-c", &both,
        ],
        &dir.0,
        &[("PERF_EVENT_PMU_ROOT", &pmus)],
    );
    let file = dir.0.join("h.data");
    let bytes = std::fs::read(&file).unwrap();
    let data = PerfData::parse(&bytes).unwrap();
    let ids: Vec<usize> = data.events().iter().map(|e| e.ids.len()).collect();
    // One counter per copy: each PMU has one CPU.
    assert_eq!(ids, [1, 1]);
    let (names, samples) = samples_by_event(&file);
    // In the PMUs' order, as perf lists the copies.
    assert_eq!(names, ["cpu_atom/clock/", "cpu_core/clock/"]);
    assert_eq!(samples.len() as u64, summary_samples(&err));
    for (event, cpu) in [(0, 1), (1, 0)] {
        let on: Vec<Option<u32>> = samples
            .iter()
            .filter(|(e, _)| *e == event)
            .map(|(_, s)| s.cpu())
            .collect();
        assert!(on.len() >= 50, "{} samples of {}", on.len(), names[event]);
        assert!(
            on.iter().all(|c| *c == Some(cpu)),
            "{} sampled off CPU {cpu}: {on:?}",
            names[event]
        );
    }
    perf_script_shows(&file, "cpu,event", &names);
}

/// Waits (up to a minute) for `file` to exist, lets `child` run `after` more, sends it `signal`
/// (by `kill`, to it alone): its exit status, and the seconds from the signal to its exit (a child that
/// is still running 20 s after the signal is killed).
fn signal_once_running(
    mut child: std::process::Child,
    file: &Path,
    after: Duration,
    signal: &str,
) -> (std::process::ExitStatus, f64) {
    let t = std::time::Instant::now();
    while !file.exists() && t.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(file.exists(), "{} never appeared", file.display());
    std::thread::sleep(after);
    let sent = std::time::Instant::now();
    let k = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(k.success());
    while child.try_wait().unwrap().is_none() && sent.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let took = sent.elapsed().as_secs_f64();
    let _ = child.kill();
    (child.wait().unwrap(), took)
}

/// SIGTERM (systemd's and docker's stop), SIGHUP and SIGINT sent to `record` alone end the
/// recording promptly with a complete file: `perf report` and `perf script` read it and
/// count the samples the summary says, for a command and for `-p`.
#[test]
fn sigterm_sighup_and_sigint_end_the_recording_with_a_file_perf_reads() {
    require!(
        has_perf(),
        Skip::Environment,
        "the perf tool is not installed (Debian: apt-get install linux-perf)"
    );
    let dir = TempDir::new("signals");
    let Some(busy) = busy_program(&dir.0) else {
        return;
    };
    let bin = record_bin();
    // Its stderr into a file: the command it runs inherits a pipe and would hold it open.
    let spawn = |args: &[&str], log: &Path| {
        Command::new(bin)
            .args(args)
            .current_dir(&dir.0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .unwrap()
    };
    let cases = [
        ("cmd-TERM.data", "TERM"),
        ("cmd-HUP.data", "HUP"),
        ("cmd-INT.data", "INT"),
        ("pid-TERM.data", "TERM"),
    ];
    for (name, signal) in cases {
        // The command would run for a minute.
        let target = name.starts_with("pid").then(|| {
            Command::new(&busy)
                .arg("60")
                .stdout(Stdio::null())
                .spawn()
                .unwrap()
        });
        let log = dir.0.join(format!("{name}.log"));
        let child = match &target {
            Some(t) => spawn(&["-F", "999", "-o", name, "-p", &t.id().to_string()], &log),
            None => spawn(
                &["-F", "999", "-o", name, "--", busy.to_str().unwrap(), "60"],
                &log,
            ),
        };
        let file = dir.0.join(name);
        let (status, took) = signal_once_running(child, &file, Duration::from_millis(700), signal);
        if let Some(mut t) = target {
            let _ = t.kill();
            let _ = t.wait();
        }
        let err = std::fs::read_to_string(&log).unwrap();
        println!("{name}: SIG{signal}: {status} {took:.2} s after the signal\n{err}");
        // Well under a second on an idle machine (printed above); the bound allows a loaded one.
        assert!(
            took < tests::PROMPT_SECS,
            "{name}: SIG{signal}: {took:.2} s to end the recording: {err}"
        );
        let samples = summary_samples(&err);
        assert!(samples >= 50, "{name}: only {samples} samples");
        perf_reads(&file, samples, false);
    }
}

/// Whether `setpriv` (util-linux) runs perl as `nobody` here (as root).
fn can_be_nobody() -> bool {
    Command::new("setpriv")
        .args([
            "--reuid=nobody",
            "--regid=nogroup",
            "--clear-groups",
            "perl",
            "-e",
            "1",
        ])
        .status()
        .is_ok_and(|s| s.success())
}

/// A sticky world-writable folder (as /tmp) where the user nobody re-plants a link to a root-owned
/// file at the output's name as fast as it can while `record -o` runs again and again: the file
/// outside the output never changes (the output is created new, `O_EXCL|O_NOFOLLOW`, after the old
/// one is moved aside; a link planted in between fails the create instead of being followed).
#[test]
fn a_link_planted_at_the_output_is_never_followed() {
    require!(
        is_root(),
        Skip::Privilege,
        "playing the user nobody next to a root recorder needs root"
    );
    require!(
        can_be_nobody(),
        Skip::Environment,
        "setpriv (util-linux), perl or the user nobody is missing"
    );
    let dir = TempDir::new("links");
    use std::os::unix::fs::PermissionsExt;
    let shared = dir.0.join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o755)).unwrap();
    let victim = dir.0.join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    let out = shared.join("out.data");
    let bin = record_bin();
    let mut attacker = Command::new("setpriv")
        .args([
            "--reuid=nobody",
            "--regid=nogroup",
            "--clear-groups",
            "perl",
            "-e",
        ])
        .arg(format!(
            "my $end = time + 60; while (time < $end) {{ symlink('{}', '{}') }}",
            victim.display(),
            out.display()
        ))
        .spawn()
        .unwrap();
    let (mut ok, mut refused) = (0, 0);
    for _ in 0..40 {
        let o = Command::new(bin)
            .args(["-e", "cpu-clock", "-o"])
            .arg(&out)
            .args(["--", "true"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        if o.status.success() {
            ok += 1;
        } else {
            refused += 1;
            let err = text(&o.stderr);
            assert!(err.contains("cannot create"), "{err}");
        }
        if std::fs::read(&victim).unwrap() != b"precious\n" {
            break;
        }
    }
    let _ = attacker.kill();
    let _ = attacker.wait();
    println!("{ok} recordings written, {refused} refused the name the attacker took");
    assert_eq!(
        std::fs::read(&victim).unwrap(),
        b"precious\n",
        "the root-owned file outside -o was written through the planted link"
    );
}

/// Every number on the command line is range-checked: out of range, the message names the value,
/// and the exit status is 2, never a panic.
#[test]
fn numbers_out_of_range_exit_2_never_a_panic() {
    let dir = TempDir::new("ranges");
    let bad: &[(&str, &[&str])] = &[
        ("-F", &["0", "-1", "1e3", "18446744073709551616"]),
        ("-c", &["0", "9223372036854775808", "18446744073709551616"]),
        ("-m", &["0", "3", "2097152", "18446744073709551616"]),
        (
            "--call-graph",
            &["dwarf,0", "dwarf,65536", "dwarf,4294967296", "dwarf,-8"],
        ),
    ];
    for (flag, values) in bad {
        for v in *values {
            let o = record(&[flag, v, "-o", "x.data", "--", "true"], &dir.0);
            let err = text(&o.stderr);
            assert!(!err.contains("panicked"), "{flag} {v}: {err}");
            assert_eq!(o.status.code(), Some(2), "{flag} {v}: {err}");
            let shown = v.rsplit(',').next().unwrap();
            assert!(err.contains(shown), "{flag} {v}: the value is named: {err}");
        }
    }
}
