//! Tracepoints by name on a machine where tracefs is not mounted: perf-event finds tracefs or mounts
//! it, the way `perf` does, and counts.
//!
//! The test re-executes its own binary in a private mount namespace (`unshare(CLONE_NEWNS)`, what
//! `unshare -m` does, with every mount made private as `mount --make-rprivate /` does) where every
//! tracefs and debugfs is unmounted, so the host's mounts are untouched. Two cases:
//!
//! - `fresh`: nothing mounted. The library mounts tracefs at `/sys/kernel/tracing`; the `stat`
//!   example does too.
//! - `debugfs-fallback`: `/sys/kernel` is an empty tmpfs but for `debug/`, so mounting tracefs at
//!   `/sys/kernel/tracing` fails; the library mounts debugfs at `/sys/kernel/debug` and uses its
//!   `tracing` folder, as perf does.

use std::ffi::CString;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output};

use perf_event::config::{Cpu, Opts, Proc};
use perf_event::count::Counter;
use perf_event::event::tp::{self, Tracepoint};
use perf_event::event::Event;
use tests::{is_root, require, Skip};

const CHILD_ENV: &str = "PERF_EVENT_TRACEFS_MOUNT_CHILD";
const TEST_NAME: &str = "tracepoints_by_name_mount_tracefs_in_a_namespace_without_it";

/// The `tracefs` and `debugfs` lines of `/proc/self/mounts`: (mount point, fstype).
fn trace_mounts() -> Vec<(String, String)> {
    std::fs::read_to_string("/proc/self/mounts")
        .unwrap()
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() > 2 && (f[2] == "tracefs" || f[2] == "debugfs"))
                .then(|| (f[1].to_owned(), f[2].to_owned()))
        })
        .collect()
}

/// Runs `cmd` in a private mount namespace with every tracefs and debugfs unmounted; for
/// `debugfs_fallback`, `/sys/kernel` is also covered by a tmpfs holding only `debug/`.
fn in_namespace_without_tracefs(mut cmd: Command, debugfs_fallback: bool) -> Output {
    // Everything the child does after fork is prepared here: it may only make system calls.
    let mut points: Vec<CString> = trace_mounts()
        .into_iter()
        .map(|(dir, _)| CString::new(dir.replace("\\040", " ")).unwrap())
        .collect();
    points.reverse(); // the innermost (mounted last) first
    let root = CString::new("/").unwrap();
    let sys_kernel = CString::new("/sys/kernel").unwrap();
    let debug = CString::new("/sys/kernel/debug").unwrap();
    let tmpfs = CString::new("tmpfs").unwrap();
    // No allocation after fork (another thread may hold the allocator's lock): bare errnos.
    let fail = |_what: &str| std::io::Error::last_os_error();
    let setup = move || -> std::io::Result<()> {
        // SAFETY: unshare(2) with a flag only; the child is single-threaded after fork.
        if unsafe { libc::unshare(libc::CLONE_NEWNS) } != 0 {
            return Err(fail("unshare(CLONE_NEWNS)"));
        }
        // SAFETY: valid NUL-terminated strings; MS_REC | MS_PRIVATE on "/" changes propagation
        // only, so nothing done below reaches the host's mount namespace.
        let r = unsafe {
            libc::mount(
                std::ptr::null(),
                root.as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            )
        };
        if r != 0 {
            return Err(fail("mount --make-rprivate /"));
        }
        for p in &points {
            // SAFETY: a valid NUL-terminated path. An already detached one fails: ignored.
            unsafe { libc::umount2(p.as_ptr(), libc::MNT_DETACH) };
        }
        if debugfs_fallback {
            // SAFETY: valid NUL-terminated strings and no data.
            let r = unsafe {
                libc::mount(
                    tmpfs.as_ptr(),
                    sys_kernel.as_ptr(),
                    tmpfs.as_ptr(),
                    0,
                    std::ptr::null(),
                )
            };
            if r != 0 {
                return Err(fail("mount tmpfs on /sys/kernel"));
            }
            // SAFETY: a valid NUL-terminated path.
            if unsafe { libc::mkdir(debug.as_ptr(), 0o700) } != 0 {
                return Err(fail("mkdir /sys/kernel/debug"));
            }
        }
        Ok(())
    };
    // SAFETY: `setup` makes system calls only (no allocation, no locks) on data made before fork.
    unsafe { cmd.pre_exec(setup) };
    cmd.output().expect("spawning the namespaced child")
}

/// In the namespace: tracefs is not there, perf-event mounts it and counts tracepoints by name.
fn child(case: &str) {
    assert_eq!(
        trace_mounts(),
        [],
        "the namespace still has tracefs/debugfs"
    );
    let root = tp::tracefs().unwrap_or_else(|e| panic!("no tracefs: {e}"));
    let mounts = trace_mounts();
    match case {
        "fresh" => {
            assert_eq!(root, Path::new("/sys/kernel/tracing"));
            assert_eq!(
                mounts,
                [("/sys/kernel/tracing".to_owned(), "tracefs".to_owned())]
            );
        }
        "debugfs-fallback" => {
            assert_eq!(root, Path::new("/sys/kernel/debug/tracing"));
            assert_eq!(mounts[0], ("/sys/kernel/debug".into(), "debugfs".into()));
        }
        other => panic!("unknown case {other}"),
    }
    // A second lookup finds the mount made by the first and mounts nothing more.
    let getppid = Tracepoint::by_name("syscalls:sys_enter_getppid").unwrap();
    assert_eq!(trace_mounts(), mounts);

    let by_id = Counter::new(&getppid, (Proc::CURRENT, Cpu::ALL), Opts::default()).unwrap();
    let by_name = Counter::new(
        Event::parse("syscalls:sys_enter_getppid").unwrap(),
        (Proc::CURRENT, Cpu::ALL),
        Opts::default(),
    )
    .unwrap();
    by_id.enable().unwrap();
    by_name.enable().unwrap();
    for _ in 0..10 {
        // SAFETY: getppid has no preconditions.
        std::hint::black_box(unsafe { libc::getppid() });
    }
    by_id.disable().unwrap();
    by_name.disable().unwrap();
    let (a, b) = (by_id.stat().unwrap().count, by_name.stat().unwrap().count);
    assert_eq!((a, b), (10, 10));
    println!(
        "CHILD {case}: tracefs {} mounted by perf-event; 10 getppid calls counted {a} and {b}",
        root.display()
    );
}

#[test]
fn tracepoints_by_name_mount_tracefs_in_a_namespace_without_it() {
    if let Ok(case) = std::env::var(CHILD_ENV) {
        child(&case);
        return;
    }
    require!(
        is_root(),
        Skip::Privilege,
        "a mount namespace and mounting tracefs need root"
    );
    let host_before = trace_mounts();
    let exe = std::env::current_exe().unwrap();
    for case in ["fresh", "debugfs-fallback"] {
        let mut cmd = Command::new(&exe);
        cmd.args([TEST_NAME, "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, case);
        let out = in_namespace_without_tracefs(cmd, case == "debugfs-fallback");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "the {case} child failed:\n{stdout}\n{stderr}"
        );
        let tag = format!("CHILD {case}:");
        let line = stdout
            .lines()
            .find_map(|l| l.find(&tag).map(|at| &l[at..]))
            .unwrap_or_else(|| panic!("the {case} child did not run:\n{stdout}\n{stderr}"));
        println!("{line}");
    }

    // The stat example, in a fresh namespace: it mounts tracefs too, and counts the exec of `true`.
    let mut stat = Command::new(tests::example_binary("stat"));
    stat.args([
        "-x,",
        "-e",
        "sched:sched_process_exec,syscalls:sys_enter_getppid",
        "--",
        "true",
    ]);
    let out = in_namespace_without_tracefs(stat, false);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stat failed:\n{stderr}");
    // The count of `event`; `None` where, on an emulated CPU only, the counter ran for no time at
    // all: a TCG guest's clock can stand still for the whole of `true` (a 5.10 guest on a loaded
    // host printed `<not counted>,,EVENT,0,100.00,,`: running 0, as perf prints it).
    let count = |event: &str| -> Option<u64> {
        let line = stderr
            .lines()
            .find(|l| l.split(',').nth(2) == Some(event))
            .unwrap_or_else(|| panic!("no line for {event} in:\n{stderr}"));
        let fields: Vec<&str> = line.split(',').collect();
        if tests::emulated() && fields[0] == "<not counted>" && fields[3] == "0" {
            println!("{event}: the guest's clock stood still: {line}");
            return None;
        }
        Some(
            fields[0]
                .parse()
                .unwrap_or_else(|_| panic!("no count of {event} in:\n{stderr}")),
        )
    };
    for (event, want) in [
        ("sched:sched_process_exec", 1),
        ("syscalls:sys_enter_getppid", 0),
    ] {
        if let Some(n) = count(event) {
            assert_eq!(n, want, "{event}: {stderr}");
        }
    }
    println!("stat in a namespace without tracefs:\n{stderr}");

    assert_eq!(
        trace_mounts(),
        host_before,
        "the host's tracefs/debugfs mounts changed"
    );
}
