//! Targets other than a plain command: this process (the library API, signal-free
//! self-profiling, a snapshot without stopping), running pids, a command that execs another
//! program (its address space replaced mid-capture), one that `dlopen`s a library after it starts
//! and a multithreaded one (both with frame pointers and with `-g dwarf`). Each decides at run
//! time whether it may sample and says why it skips.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{
    build_workload, cc, require_cc, require_sampling, samples_with, scratch, FRAME_POINTERS,
    NO_FRAME_POINTERS,
};
use perf_profile::{CallGraph, Options, Profile, Profiler, Target};
use tests::Skip;

/// Spins for `d` with its time in its own instructions (xorshift, no calls in the inner loop even
/// in a debug build), so that the sampled address names it whatever the frame pointers.
#[inline(never)]
fn spin_in_profile_self_test(d: Duration) -> u64 {
    let end = Instant::now() + d;
    let mut x = 1u64;
    while Instant::now() < end {
        let mut i = 0u32;
        while i < 100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            i += 1;
        }
    }
    x
}

#[test]
fn this_process_is_profiled_and_a_snapshot_does_not_stop_it() {
    require_sampling!();
    let mut opts = Options::default();
    opts.frequency = 499;
    let mut p = Profiler::start(Target::ThisProcess, &opts).unwrap();
    spin_in_profile_self_test(Duration::from_millis(400));
    p.poll(Duration::ZERO).unwrap();
    let first = p.profile();
    assert!(
        first.info.stats.samples > 0,
        "no samples in the first snapshot"
    );
    spin_in_profile_self_test(Duration::from_millis(400));
    let last = p.finish().unwrap();
    assert!(
        last.info.stats.samples > first.info.stats.samples,
        "sampling went on after the snapshot: {} then {}",
        first.info.stats.samples,
        last.info.stats.samples
    );
    let folded = last.folded();
    let spin: u64 = folded
        .iter()
        .filter(|(s, _)| s.contains("spin_in_profile_self_test"))
        .map(|(_, n)| n)
        .sum();
    let total: u64 = folded.iter().map(|(_, n)| n).sum();
    assert_eq!(total, last.info.stats.samples);
    // Every thread of this process is sampled, the other tests' too (they run in parallel): the
    // spin loop has some of the samples, not all.
    assert!(
        spin >= 10,
        "{spin} of {total} samples in the spin loop: {folded:#?}"
    );
}

#[test]
fn running_pids_are_profiled() {
    require_sampling!();
    let mut child = Command::new("sh")
        .args(["-c", "i=0; while :; do i=$((i+1)); done"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    // Wait for the exec: maps read before it would describe the forked test binary.
    let exe = |pid: u32| std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
    let me = std::env::current_exe().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while exe(child.id()) == me && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(50));
    let mut opts = Options::default();
    opts.frequency = 499;
    let mut p = Profiler::start(Target::Pids(vec![child.id()]), &opts).unwrap();
    let end = Instant::now() + Duration::from_millis(500);
    while Instant::now() < end {
        p.poll(Duration::from_millis(50)).unwrap();
    }
    let profile = p.finish().unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(profile.info.stats.samples > 20, "{:?}", profile.info.stats);
    // The shell was running before the capture: its mappings came from /proc/PID/maps and name
    // its frames (dash or bash, whichever sh is).
    let folded = profile.folded();
    let named = folded
        .iter()
        .filter(|(s, _)| {
            !s.split(';')
                .all(|f| f.starts_with("0x") || f == perf_profile::symbolize::UNKNOWN)
        })
        .count();
    assert!(named > 0, "{folded:#?}");
    assert!(
        profile.mappings().iter().any(|m| m.path.contains("sh")),
        "no shell mapping: {:?}",
        profile
            .mappings()
            .iter()
            .map(|m| &m.path)
            .collect::<Vec<_>>()
    );
}

#[test]
fn a_command_that_execs_is_followed_into_the_new_program() {
    require_sampling!();
    require_cc!();
    let dir = scratch("exec");
    let calls = build_workload(&dir);
    // The shell runs a little, then replaces itself with the workload: its mappings must go and
    // the workload's come, for the workload's frames to be named.
    let mut cmd = Command::new("sh");
    cmd.args([
        "-c",
        "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; exec \"$0\" 0.5",
    ])
    .arg(&calls)
    .stdout(Stdio::null());
    let mut opts = Options::default();
    opts.frequency = 499;
    let mut p = Profiler::start(Target::Command(cmd), &opts).unwrap();
    while p
        .child_mut()
        .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    {
        p.poll(Duration::from_millis(50)).unwrap();
    }
    let profile = p.finish().unwrap();
    // The workload's frames are named after the exec: most of its samples are in hot_a or hot_b.
    // How they split between the two is not this test's business: at 499 Hz the sampling period
    // (2.004 ms of CPU) can be a multiple of one outer iteration (three -O0 leaf calls, about
    // 2 ms on a 3 GHz core), and then the samples alias onto one phase of it (246 against 7 seen).
    let (_, hot_a, _) = with_frames(&profile, "hot_a");
    let (folded, hot_b, _) = with_frames(&profile, "hot_b");
    assert!(hot_a + hot_b > 100, "{folded:#?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Each call-graph mode with the C flags its workloads are built with: frame pointers kept, or
/// dropped for `-g dwarf` (x86_64 and aarch64).
fn modes() -> Vec<(CallGraph, &'static [&'static str])> {
    let mut m = vec![(CallGraph::FramePointer, FRAME_POINTERS)];
    if cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
        m.push((
            CallGraph::Dwarf {
                stack_size: perf_profile::collect::DEFAULT_STACK_SIZE,
            },
            NO_FRAME_POINTERS,
        ));
    } else {
        tests::skip(Skip::Environment, "-g dwarf unwinds on x86_64 and aarch64");
    }
    m
}

/// Profiles `cmd` at 499 Hz until it ends.
fn profile_command(cmd: Command, call_graph: CallGraph) -> Profile {
    let mut opts = Options::default();
    opts.frequency = 499;
    opts.call_graph = call_graph;
    let mut p = Profiler::start(Target::Command(cmd), &opts).unwrap();
    while p
        .child_mut()
        .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    {
        p.poll(Duration::from_millis(50)).unwrap();
    }
    let status = p.child_mut().unwrap().wait().unwrap();
    assert!(status.success(), "the workload failed: {status}");
    p.finish().unwrap()
}

/// The profile's folded stacks, the samples whose stack has `frames` (consecutive, root first), and
/// all samples.
fn with_frames(profile: &Profile, frames: &str) -> (Vec<(String, u64)>, u64, u64) {
    let folded = profile.folded();
    let hit = samples_with(folded.iter().map(|(s, n)| (s, n)), frames);
    let total = folded.iter().map(|(_, n)| n).sum();
    (folded, hit, total)
}

#[test]
fn a_library_dlopened_after_the_start_has_its_frames_named() {
    require_sampling!();
    require_cc!();
    for (mode, flags) in modes() {
        let dir = scratch("dlopen");
        let mut lib_flags = flags.to_vec();
        lib_flags.extend(["-shared", "-fPIC"]);
        let lib = cc(&dir, "libplugin.so", "plugin.c", &lib_flags, &[]);
        let host = cc(&dir, "dlopen", "dlopen.c", flags, &["-ldl"]);
        // The library is not mapped at the exec, where the capture starts: only its MMAP2 record
        // tells where it is.
        let mut cmd = Command::new(&host);
        cmd.arg(&lib).arg("0.5");
        let profile = profile_command(cmd, mode);
        let (folded, hit, total) = with_frames(&profile, "main;plugin_spin;plugin_leaf");
        println!("{mode:?}: main;plugin_spin;plugin_leaf in {hit} of {total} samples");
        assert!(
            hit > 100 && hit * 10 >= total * 8,
            "{mode:?}: {hit} of {total}: {folded:#?}"
        );
        assert!(
            profile
                .mappings()
                .iter()
                .any(|m| m.path.ends_with("libplugin.so")),
            "no mapping of the library"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn every_thread_of_a_multithreaded_process_is_sampled() {
    require_sampling!();
    require_cc!();
    for (mode, flags) in modes() {
        let dir = scratch("threads");
        let bin = cc(&dir, "threads", "threads.c", flags, &["-pthread"]);
        // Three threads created after the start, 0.3 s of CPU each: ~450 samples at 499 Hz
        // (cpu-clock counts each thread's own time), whatever the load on the machine.
        let mut cmd = Command::new(&bin);
        cmd.arg("0.3");
        let profile = profile_command(cmd, mode);
        let (folded, hit, total) = with_frames(&profile, "worker;thread_spin");
        println!("{mode:?}: worker;thread_spin in {hit} of {total} samples");
        assert!(
            hit >= 300 && hit * 10 >= total * 8,
            "{mode:?}: {hit} of {total} (one thread alone would give ~150): {folded:#?}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
