//! The privilege story, as user `nobody`: at `perf_event_paranoid` 2 the guard samples this
//! process (its rings fit the unprivileged mlock allowance); where the kernel refuses (kernels
//! with the Debian/Android level 3), `ProfilerGuard::new` names the setting, its value and the fix.
//! The sysctl is raised only for the child's run and restored even when the test fails.

use std::hint::black_box;
use std::process::Command;
use std::time::{Duration, Instant};

use tests::{is_root, require, Skip};

const CHILD_ENV: &str = "PERF_PPROF_PRIVILEGE_CHILD";
const PARANOID: &str = "/proc/sys/kernel/perf_event_paranoid";

/// One test at a time: one raises the sysctl, which the other's child must not see.
static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one() -> std::sync::MutexGuard<'static, ()> {
    ONE.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Runs this binary's `child` test as uid/gid 65534; its stdout.
fn as_nobody() -> String {
    as_nobody_with(None)
}

/// [`as_nobody`], with RLIMIT_MEMLOCK set to `memlock` bytes when given.
fn as_nobody_with(memlock: Option<u64>) -> String {
    let how = tests::Rerun {
        as_nobody: true,
        memlock,
    };
    tests::rerun_test("child", (CHILD_ENV, "1"), how)
}

/// The child: starts a guard, spins, prints `SAMPLES: <n>` or `ERROR: <message>`.
#[test]
fn child() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    match pprof::ProfilerGuard::new(499) {
        Ok(g) => {
            let until = Instant::now() + Duration::from_millis(300);
            let mut x = 0u64;
            while Instant::now() < until {
                x = black_box(x.wrapping_add(1));
            }
            let r = g.report().build().unwrap();
            println!("CALL GRAPH: {:?}", g.call_graph());
            println!("SAMPLES: {}", r.data.values().sum::<isize>());
        }
        Err(e) => println!("ERROR: {e}"),
    }
}

/// Puts the sysctl back when dropped, panic or not.
struct Restore(String);

impl Drop for Restore {
    fn drop(&mut self) {
        std::fs::write(PARANOID, &self.0).expect("restoring kernel.perf_event_paranoid");
    }
}

#[test]
fn unprivileged_guard_samples_or_names_paranoid_and_the_fix() {
    let _one = one();
    require!(
        is_root(),
        Skip::Privilege,
        "switching to uid 65534 needs root"
    );
    require!(
        Command::new("setpriv").arg("--version").output().is_ok(),
        Skip::Environment,
        "no setpriv"
    );
    let before = std::fs::read_to_string(PARANOID).unwrap();
    let level: i32 = before.trim().parse().unwrap();
    require!(
        level <= 2,
        Skip::Environment,
        "perf_event_paranoid is already {level}"
    );
    // At 2 (the mainline default) or lower an unprivileged process samples itself.
    let out = as_nobody();
    let samples: isize = out
        .lines()
        .find_map(|l| l.split_once("SAMPLES: ").map(|x| x.1))
        .unwrap_or_else(|| panic!("at paranoid {level}: {out}"))
        .trim()
        .parse()
        .unwrap();
    assert!(samples > 20, "{samples} samples in 300 ms at 499 Hz: {out}");

    // At 3: kernels with the Debian/Android patch refuse; mainline treats 3 as 2.
    let restore = Restore(before);
    std::fs::write(PARANOID, "3").unwrap();
    let out = as_nobody();
    drop(restore);
    assert_eq!(
        std::fs::read_to_string(PARANOID).unwrap().trim(),
        level.to_string()
    );
    if let Some(msg) = out
        .lines()
        .find_map(|l| l.split_once("ERROR: ").map(|x| x.1))
    {
        assert!(msg.contains("perf_event_paranoid is 3"), "{msg}");
        assert!(msg.contains("sysctl kernel.perf_event_paranoid=2"), "{msg}");
        assert!(msg.contains("CAP_PERFMON"), "{msg}");
    } else {
        assert!(out.contains("SAMPLES: "), "{out}");
        tests::skip(
            Skip::Environment,
            "this kernel has no paranoid level 3 (mainline treats it as 2): the refusal is not seen here",
        );
    }
}

/// An unprivileged user whose locked-memory budget cannot hold the stack-copy rings (2 MiB per
/// CPU) still samples, with frame-pointer chains in small rings; the error, had there been one,
/// would not blame perf_event_paranoid.
#[test]
fn over_the_memlock_budget_falls_back_to_frame_pointers() {
    let _one = one();
    require!(
        is_root(),
        Skip::Privilege,
        "switching to uid 65534 needs root"
    );
    require!(
        Command::new("prlimit").arg("--version").output().is_ok()
            && Command::new("setpriv").arg("--version").output().is_ok(),
        Skip::Environment,
        "no prlimit or setpriv (util-linux)"
    );
    let level: i32 = std::fs::read_to_string(PARANOID)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    require!(
        level <= 2,
        Skip::Environment,
        "perf_event_paranoid is {level}"
    );
    // 1 MiB of RLIMIT_MEMLOCK beside perf_event_mlock_kb's per-CPU allowance: not 2 MiB per CPU.
    let mlock_kb: u64 = std::fs::read_to_string("/proc/sys/kernel/perf_event_mlock_kb")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    require!(
        mlock_kb < 2048,
        Skip::Environment,
        "perf_event_mlock_kb is {mlock_kb}: the stack-copy rings fit anyway"
    );
    let out = as_nobody_with(Some(1 << 20));
    assert!(out.contains("CALL GRAPH: FramePointer"), "{out}");
    let samples: isize = out
        .lines()
        .find_map(|l| l.split_once("SAMPLES: ").map(|x| x.1))
        .unwrap_or_else(|| panic!("{out}"))
        .trim()
        .parse()
        .unwrap();
    assert!(samples > 20, "{samples} samples: {out}");
}
