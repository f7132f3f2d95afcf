//! The unprivileged path: a subset run as uid 65534 (`setpriv`) at the machine's paranoid level
//! (2 or more): what should work works (user-space counting, own-process sampling) and what
//! should not fails with the error that explains it (kernel counting, CPU-wide, another user's
//! process, a ring beyond the locked-memory budget, unreadable tracefs).
//!
//! The test re-executes its own binary, copied to the temp dir so that uid 65534 can run it.
#![allow(clippy::field_reassign_with_default)] // options are set field by field, as in the docs

use std::process::Command;

use perf_event::config::{Cpu, Opts, Proc, SampleOn};
use perf_event::count::Counter;
use perf_event::event::sw::Software;
use perf_event::event::tp::Tracepoint;
use perf_event::sample::record::Record;
use perf_event::Error;
use tests::{is_root, require, Skip};

const ME: (Proc, perf_event::config::All) = (Proc::CURRENT, Cpu::ALL);
const CHILD_ENV: &str = "PERF_EVENT_RELIABILITY_UNPRIV_CHILD";

fn user() -> Opts {
    let mut o = Opts::default();
    o.exclude.kernel = true;
    o.exclude.hv = true;
    o
}

/// The checks, as uid 65534. Panics (so the child fails) on the first one that does not hold.
fn as_nobody() {
    // SAFETY: getuid has no preconditions.
    assert_eq!(unsafe { libc::getuid() }, 65534, "not running as nobody");
    let p = tests::paranoid();
    let mut n = 0;

    // Works: user-space counting of this process.
    let c = Counter::new(Software::TaskClock, ME, user()).unwrap();
    c.enable().unwrap();
    // Spin until this thread has had 10 ms of CPU (the machine may be busy).
    let t0 = tests::thread_cpu_time();
    while tests::thread_cpu_time() - t0 < std::time::Duration::from_millis(10) {
        tests::busy_loop(std::time::Duration::from_millis(1));
    }
    c.disable().unwrap();
    let ns = c.stat().unwrap().count;
    assert!(ns > 5_000_000, "task-clock counted {ns} ns");
    let c = Counter::new(Software::PageFault, ME, user()).unwrap();
    c.enable().unwrap();
    tests::touch_pages(50);
    c.disable().unwrap();
    assert!(c.stat().unwrap().count >= 50, "page faults counted");
    n += 2;

    // Works: sampling this process.
    let mut o = user();
    o.sample_on = SampleOn::Count(1);
    o.sample_format.data_addr = true;
    let c = Counter::new(Software::PageFault, ME, &o).unwrap();
    let s = c.sampler(3).unwrap();
    s.enable().unwrap();
    tests::touch_pages(32);
    s.disable().unwrap();
    let samples = s
        .iter()
        .filter(|(_, r)| matches!(r, Record::Sample(_)))
        .count();
    assert!(samples >= 32, "{samples} samples");
    n += 1;

    // Fails, explained: kernel-inclusive counting.
    let e = Counter::new(Software::TaskClock, ME, Opts::default()).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, Error::Permission { .. }), "{msg}");
    assert!(
        msg.contains(&format!("perf_event_paranoid is {p}")),
        "{msg}"
    );
    assert!(msg.contains("exclude.kernel = true"), "{msg}");
    println!("kernel-inclusive: {msg}");
    n += 1;

    // Fails, explained: a kernel-only event.
    let mut o = Opts::default();
    o.exclude.user = true;
    let e = Counter::new(Software::PageFault, ME, &o).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, Error::Permission { .. }), "{msg}");
    assert!(msg.contains("exclude.kernel = true"), "{msg}");
    println!("kernel-only: {msg}");
    n += 1;

    // Fails, explained: CPU-wide, even user space only.
    let e = Counter::new(Software::TaskClock, (Proc::ALL, Cpu(0)), user()).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, Error::Permission { .. }), "{msg}");
    assert!(msg.contains("CPU-wide") && msg.contains("<= 0"), "{msg}");
    println!("cpu-wide: {msg}");
    n += 1;

    // Fails, explained: another user's process (init).
    let e = Counter::new(Software::TaskClock, (Proc(1), Cpu::ALL), user()).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, Error::Permission { .. }), "{msg}");
    assert!(msg.contains("ptrace"), "{msg}");
    println!("other user's pid: {msg}");
    n += 1;

    // Fails, explained: a ring beyond perf_event_mlock_kb + RLIMIT_MEMLOCK (2^14 pages: 64 MiB).
    let mut o = user();
    o.sample_on = SampleOn::Count(1000);
    let c = Counter::new(Software::PageFault, ME, &o).unwrap();
    let e = c.sampler(14).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, Error::Ring(_)), "{msg}");
    assert!(
        msg.contains("perf_event_mlock_kb") && msg.contains("RLIMIT_MEMLOCK"),
        "{msg}"
    );
    println!("mlock: {msg}");
    n += 1;
    // The same counter can still get a ring that fits: the failed one did not keep the claim.
    let _s = c.sampler(1).unwrap();

    // Fails, explained: tracefs is not readable by this user (root-only mode 0700 where it is
    // mounted), or not mounted and this user may not mount it (a fresh machine).
    match Tracepoint::by_name("sched:sched_switch") {
        Ok(_) => println!("tracefs is readable by nobody here: case skipped"),
        Err(e) => {
            let msg = e.to_string();
            assert!(matches!(e, Error::Io { .. }), "{msg}");
            assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied, "{msg}");
            let unreadable =
                msg.contains("not readable by this user") && msg.contains("Tracepoint { id }");
            let unmounted = msg
                .contains("tracefs is not mounted: /proc/self/mounts lists no tracefs")
                && msg.contains("mounting it needs root")
                && msg.contains("mount -t tracefs nodev /sys/kernel/tracing");
            assert!(unreadable || unmounted, "{msg}");
            println!("tracefs: {msg}");
            n += 1;
        }
    }
    println!("UNPRIVILEGED CASES PASSED: {n}");
}

#[test]
fn unprivileged_subset_at_the_machines_paranoid_level() {
    if std::env::var(CHILD_ENV).is_ok() {
        as_nobody();
        return;
    }
    require!(
        Command::new("setpriv").arg("--version").output().is_ok(),
        Skip::Environment,
        "no setpriv"
    );
    require!(
        is_root(),
        Skip::Privilege,
        "switching to uid 65534 needs root"
    );
    let p = tests::paranoid();
    require!(
        p >= 2,
        Skip::Environment,
        "perf_event_paranoid is {p}: this subset expects 2 (kernel counting refused)"
    );
    let exe = std::env::current_exe().unwrap();
    let copy = std::env::temp_dir().join(format!("perf-event-unpriv-{}", std::process::id()));
    tests::copy_executable(&exe, &copy);
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(&copy)
        .args([
            "unprivileged_subset_at_the_machines_paranoid_level",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, "1")
        .current_dir(std::env::temp_dir())
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&copy);
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "the unprivileged child failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let n: usize = stdout
        .lines()
        .find_map(|l| l.strip_prefix("UNPRIVILEGED CASES PASSED: "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("the child did not run the cases:\n{stdout}"));
    assert!(n >= 8, "{n} cases");
}
