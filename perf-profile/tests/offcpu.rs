//! Off-CPU profiles without the `sched:sched_switch` tracepoint: the `context-switches` software
//! event samples the switch-outs (`perf_profile::offcpu::Method::ContextSwitches`), chosen by hand
//! or automatically where tracefs cannot give the tracepoint. Each test decides at run time whether
//! it can run here and says why not. The tracepoint's own accuracy test is in `fleet.rs`.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use perf_profile::offcpu::{Method, FALLBACK_EVENT};
use perf_profile::{Options, Profile, Profiler, Target};
use tests::{require, Skip};

mod common;
use common::{build_c, scratch, text};

/// `tests/workload/sleeps.c` (main -> wait_here, which sleeps 50 ms per round and prints its
/// measured time inside wait_here), built with frame pointers into `dir`.
fn sleeps(dir: &Path) -> PathBuf {
    build_c(dir, "sleeps")
}

/// Checks a run of the command on `sleeps.c` that took the context-switches method: it succeeded,
/// said which method it took, and put the time the workload measured (its stdout) in `main ->
/// wait_here` of `folded` within 10 %. Returns the folded stacks.
fn context_switches_run_ok(
    out: &std::process::Output,
    folded: &Path,
    what: &str,
) -> Vec<(String, u64)> {
    let err = text(&out.stderr);
    assert!(out.status.success(), "profile failed: {err}");
    assert!(
        err.lines()
            .any(|l| l.starts_with("profile: off-CPU by context-switches (")),
        "{err}"
    );
    let measured: f64 = text(&out.stdout).trim().parse().unwrap();
    let stacks = read_folded(folded);
    let (ours, _) = in_wait_here(&stacks);
    assert_within_ten_percent(&format!("context-switches ({what})"), ours, measured);
    stacks
}

/// The nanoseconds the folded stacks put in `main -> wait_here`, and in all.
fn in_wait_here(folded: &[(String, u64)]) -> (u64, u64) {
    let ours = folded
        .iter()
        .filter(|(s, _)| s.contains(";main;wait_here"))
        .map(|(_, ns)| ns)
        .sum();
    (ours, folded.iter().map(|(_, ns)| ns).sum())
}

/// A folded stacks file: `stack nanoseconds` lines.
fn read_folded(path: &Path) -> Vec<(String, u64)> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            let (s, n) = l.rsplit_once(' ').unwrap();
            (s.to_owned(), n.parse().unwrap())
        })
        .collect()
}

fn assert_within_ten_percent(what: &str, ns: u64, measured: f64) {
    let ours = ns as f64 / 1e9;
    println!(
        "{what}: off-CPU in wait_here: ours {ours:.4} s, the workload measured {measured:.4} s"
    );
    assert!(measured > 0.4, "{measured}");
    assert!(
        (ours / measured - 1.0).abs() <= 0.10,
        "{what}: ours {ours} s, the workload measured {measured} s"
    );
}

/// Profiles `sleeps ROUNDS` off CPU with `opts` through the library: the profile, and the time
/// the workload measured inside wait_here.
fn capture(opts: &Options, rounds: u32, dir: &Path) -> (Option<Method>, Profile, f64) {
    let mut cmd = Command::new(sleeps(dir));
    cmd.arg(rounds.to_string()).stdout(Stdio::piped());
    let mut p = Profiler::start(Target::Command(cmd), opts).unwrap();
    let method = p.off_cpu_method();
    while p
        .child_mut()
        .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    {
        p.poll(Duration::from_millis(50)).unwrap();
    }
    let mut out = String::new();
    p.child_mut()
        .unwrap()
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let profile = p.finish().unwrap();
    (method, profile, out.trim().parse().unwrap())
}

#[test]
fn the_context_switches_method_attributes_the_time_a_function_sleeps_within_ten_percent() {
    // Off-CPU samples are taken in the kernel: root, or a paranoid level that lets it be sampled.
    common::require_sampling!();
    common::require_cc!();
    let dir = scratch("cs");
    let bin = sleeps(&dir);
    let folded = dir.join("off.folded");
    let pprof = dir.join("off.pb.gz");
    let example = common::command();
    let out = Command::new(example)
        .arg("--off-cpu=context-switches")
        .args([
            "-o",
            folded.to_str().unwrap(),
            "-o",
            pprof.to_str().unwrap(),
        ])
        .arg("--")
        .args([bin.to_str().unwrap(), "20"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stacks = context_switches_run_ok(&out, &folded, "the command");
    // The stacks run into the kernel's sleep, below wait_here's system call.
    assert!(
        stacks
            .iter()
            .any(|(s, _)| s.contains(";main;wait_here;") && s.contains("nanosleep")),
        "{stacks:?}"
    );
    // pprof: off_cpu/nanoseconds, the same nanoseconds, and a comment naming the event.
    use prost::Message;
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&pprof).unwrap())
        .read_to_end(&mut raw)
        .unwrap();
    let p = perf_profile::proto::perftools::profiles::Profile::decode(&raw[..]).unwrap();
    let s = |i: i64| p.string_table[i as usize].as_str();
    let types: Vec<_> = p
        .sample_type
        .iter()
        .map(|t| (s(t.r#type), s(t.unit)))
        .collect();
    assert_eq!(
        types,
        [("samples", "count"), ("off_cpu", "nanoseconds")],
        "{types:?}"
    );
    let total_ns: i64 = p.sample.iter().map(|x| x.value[1]).sum();
    assert_eq!(total_ns as u64, stacks.iter().map(|(_, n)| n).sum::<u64>());
    assert!(
        p.comment
            .iter()
            .any(|&c| s(c).starts_with("event: context-switches (off-CPU")),
        "{:?}",
        p.comment.iter().map(|&c| s(c)).collect::<Vec<_>>()
    );
}

#[test]
fn without_a_usable_tracefs_the_automatic_choice_is_the_context_switches_event() {
    // Off-CPU samples are taken in the kernel: root, or a paranoid level that lets it be sampled.
    common::require_sampling!();
    common::require_cc!();
    let dir = scratch("auto");
    // A tracefs without the tracepoint: an empty directory (tracefs itself is left alone).
    let empty = dir.join("no-tracefs");
    std::fs::create_dir_all(&empty).unwrap();
    let mut opts = Options::default();
    opts.off_cpu = true;
    opts.tracefs = Some(empty.clone());
    let (method, profile, measured) = capture(&opts, 12, &dir);
    assert_eq!(method, Some(Method::ContextSwitches));
    assert_eq!(Method::of(&profile.info), Some(Method::ContextSwitches));
    assert_eq!(profile.info.event, FALLBACK_EVENT);
    // The profile says why: the tracepoint's id was not where it was looked for.
    let id = empty.join("events/sched/sched_switch/id");
    assert!(
        profile
            .info
            .notes
            .iter()
            .any(|n| n.contains("context-switches") && n.contains(id.to_str().unwrap())),
        "{:?}",
        profile.info.notes
    );
    let (ours, _) = in_wait_here(&profile.folded());
    assert_within_ten_percent("context-switches (automatic)", ours, measured);

    // Asked for by name, the tracepoint is an error naming where it was looked for.
    opts.off_cpu_method = Some(Method::SchedSwitch);
    let mut cmd = Command::new("true");
    cmd.stdout(Stdio::null());
    let e = Profiler::start(Target::Command(cmd), &opts).unwrap_err();
    assert!(e.to_string().contains(id.to_str().unwrap()), "{e}");

    // The same directory with the tracepoint's id in it: the automatic choice is the tracepoint.
    if let Ok(tp) = tests::tracepoint("sched:sched_switch") {
        std::fs::create_dir_all(id.parent().unwrap()).unwrap();
        std::fs::write(&id, format!("{}\n", tp.id)).unwrap();
        opts.off_cpu_method = None;
        let (method, profile, measured) = capture(&opts, 12, &dir);
        assert_eq!(method, Some(Method::SchedSwitch));
        assert!(
            !profile
                .info
                .notes
                .iter()
                .any(|n| n.contains("context-switches")),
            "{:?}",
            profile.info.notes
        );
        let (ours, _) = in_wait_here(&profile.folded());
        assert_within_ten_percent("sched:sched_switch (automatic)", ours, measured);
    }
}

#[test]
fn off_cpu_without_kernel_frames_still_samples_the_switch_outs() {
    // Off-CPU samples are taken in the kernel: root, or a paranoid level that lets it be sampled.
    common::require_sampling!();
    common::require_cc!();
    let dir = scratch("user");
    for method in [Method::ContextSwitches, Method::SchedSwitch] {
        if method == Method::SchedSwitch && tests::tracepoint("sched:sched_switch").is_err() {
            continue;
        }
        let mut opts = Options::default();
        opts.off_cpu = true;
        opts.off_cpu_method = Some(method);
        opts.kernel = false;
        let (_, profile, measured) = capture(&opts, 12, &dir);
        let folded = profile.folded();
        let (ours, _) = in_wait_here(&folded);
        assert_within_ten_percent(&format!("{method}, user frames only"), ours, measured);
        // wait_here is the leaf: the kernel's frames are left out.
        assert!(
            folded
                .iter()
                .filter(|(s, _)| s.contains(";wait_here"))
                .all(|(s, _)| s.ends_with(";main;wait_here")),
            "{folded:?}"
        );
    }
}

/// Runs `program args` as `nobody` with CAP_PERFMON (ambient): perf events as root has them, the
/// files (tracefs) as an ordinary user.
fn as_nobody_with_perfmon(program: &Path, args: &[&str]) -> std::io::Result<std::process::Output> {
    Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=+perfmon",
            "--ambient-caps=+perfmon",
        ])
        .arg(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
}

#[test]
fn a_user_who_cannot_read_tracefs_gets_the_context_switches_method_automatically() {
    require!(
        tests::is_root(),
        Skip::Privilege,
        "needs root, to run the profiler as another user"
    );
    common::require_cc!();
    let example = common::command();
    let works = |program: &Path, args: &[&str]| {
        as_nobody_with_perfmon(program, args).is_ok_and(|o| o.status.success())
    };
    require!(
        works(&example, &["--help"]),
        Skip::Environment,
        "setpriv with CAP_PERFMON (util-linux, Linux 5.8+) cannot run {} as nobody",
        example.display()
    );
    let tracefs_id = Path::new("/sys/kernel/tracing/events/sched/sched_switch/id");
    require!(
        !works(Path::new("cat"), &[tracefs_id.to_str().unwrap()]),
        Skip::Environment,
        "tracefs is readable by nobody here"
    );
    let dir = scratch("nobody");
    let bin = sleeps(&dir);
    // nobody writes the profile here.
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let folded = dir.join("off.folded");
    let out = as_nobody_with_perfmon(
        &example,
        &[
            "--off-cpu",
            "-o",
            folded.to_str().unwrap(),
            "--",
            bin.to_str().unwrap(),
            "20",
        ],
    )
    .unwrap();
    context_switches_run_ok(&out, &folded, "nobody with CAP_PERFMON");
    let err = text(&out.stderr);
    assert!(
        err.lines().any(
            |l| l.starts_with("profile: note: off-CPU by the context-switches")
                && l.contains("sched:sched_switch cannot be used")
        ),
        "{err}"
    );
}
