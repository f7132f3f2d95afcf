//! Shared support for the integration tests and benchmarks: run-time skips, privilege probes, workloads.
//!
//! A test that cannot run here (no privilege, no hardware PMU, no tracefs) calls [`skip`], which prints
//! `skipped: <reason>`. With `PERF_TEST_STRICT=1` (set by `.ci/run`) a skip for missing *privilege* panics,
//! so CI, which runs as root, always runs those tests. Run through the README's test command
//! (`cargo run -q -p suite`), skips are counted and their reasons listed at the end.
#![warn(missing_docs)]

/// The READMEs of `perf-sys` and `perf-core` (crates.io shows them), compiled and run as doc tests
/// here, where both crates are dependencies. (perf-event's README is a doc test of perf-event.)
#[cfg(doctest)]
#[doc = include_str!("../../perf-sys/README.md")]
#[doc = include_str!("../../perf-core/README.md")]
pub struct ReadmeDoctests;

use std::time::{Duration, Instant};

pub mod hw;

/// Why a test cannot run here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skip {
    /// Not allowed: not root, paranoid level too high, missing capability. A failure in strict mode.
    Privilege,
    /// The machine lacks it: no hardware PMU, no AUX PMU, no kprobes. Never a failure.
    Hardware,
    /// Something of the environment is missing (a tool, a mount). Never a failure.
    Environment,
}

/// Whether `PERF_TEST_STRICT=1` is set.
pub fn strict() -> bool {
    std::env::var("PERF_TEST_STRICT").is_ok_and(|v| v == "1")
}

/// Prints `skipped: <reason>` (the calling test then returns without running); in strict mode a
/// [`Skip::Privilege`] skip panics instead.
///
/// With `PERF_TEST_SKIP_LOG` set (by the README's test command, `cargo run -p suite`), also appends
/// the skip to that file, so the run's summary counts the test as skipped rather than passed and
/// lists the reason: libtest shows such a test as `ok` and hides what it printed.
pub fn skip(kind: Skip, reason: &str) {
    if kind == Skip::Privilege && strict() {
        panic!("PERF_TEST_STRICT=1 and this test would skip for missing privilege: {reason}");
    }
    log_skip("whole", reason);
    println!("skipped: {reason}");
}

/// [`skip`] for one part of a test that goes on with the rest (one case of a table of cases):
/// prints `skipped (part): <reason>`, and the summary lists the reason without counting the test
/// as skipped. Strict mode as for [`skip`].
pub fn skip_part(kind: Skip, reason: &str) {
    if kind == Skip::Privilege && strict() {
        panic!(
            "PERF_TEST_STRICT=1 and a part of this test would skip for missing privilege: {reason}"
        );
    }
    log_skip("part", reason);
    println!("skipped (part): {reason}");
}

/// Appends `<test binary> TAB <test name> TAB <scope> TAB <reason>` to the file `PERF_TEST_SKIP_LOG`
/// names, if set (the format `suite/src/tally.rs` reads). libtest runs each test on a thread named
/// after it. Errors are ignored: a child re-run as another user cannot open the file, and a missing
/// log line only makes the summary count a skipped test as passed.
fn log_skip(scope: &str, reason: &str) {
    use std::io::Write;
    let Some(path) = std::env::var_os("PERF_TEST_SKIP_LOG") else {
        return;
    };
    let binary = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    let thread = std::thread::current();
    let test = thread.name().filter(|n| *n != "main").unwrap_or("");
    let line = format!(
        "{binary}\t{test}\t{scope}\t{}\n",
        reason.replace(['\n', '\t'], " ")
    );
    // One write of one short line to a file opened for appending: lines of parallel tests do not mix.
    if let Ok(mut f) = std::fs::OpenOptions::new().append(true).open(path) {
        let _ = f.write_all(line.as_bytes());
    }
}

/// Returns early from the calling test with [`skip`] when `$cond` is false.
#[macro_export]
macro_rules! require {
    ($cond:expr, $kind:expr, $($reason:tt)+) => {
        if !$cond {
            $crate::skip($kind, &format!($($reason)+));
            return;
        }
    };
}

/// Whether this process may sample its own threads: as root, or at `perf_event_paranoid` 2 or lower
/// (user space only at 2).
pub fn may_sample_self() -> bool {
    is_root() || paranoid() <= 2
}

/// Returns early from the calling test with a [`Skip::Privilege`] skip unless [`may_sample_self`].
#[macro_export]
macro_rules! require_self_sampling {
    () => {
        $crate::require!(
            $crate::may_sample_self(),
            $crate::Skip::Privilege,
            "perf_event_paranoid {} > 2",
            $crate::paranoid()
        );
    };
}

/// Resolves tracepoint `name` (`system:event`) through perf-event, which finds tracefs or, as root,
/// mounts it. `Err` says why it cannot, as a skip: [`Skip::Privilege`] when tracefs cannot be had
/// (not mounted and this process may not mount it, or root-only), [`Skip::Environment`] when this
/// kernel has no such tracepoint.
pub fn tracepoint(name: &str) -> Result<perf_event::event::tp::Tracepoint, (Skip, String)> {
    perf_event::event::tp::Tracepoint::by_name(name).map_err(|e| match e {
        perf_event::Error::Parse { .. } => (Skip::Environment, e.to_string()),
        e => (Skip::Privilege, e.to_string()),
    })
}

/// Evaluates to the [`tracepoint`] `$name`, or returns early from the calling test with [`skip`].
#[macro_export]
macro_rules! require_tracepoint {
    ($name:expr) => {
        match $crate::tracepoint($name) {
            Ok(tp) => tp,
            Err((kind, reason)) => {
                $crate::skip(kind, &reason);
                return;
            }
        }
    };
}

/// Whether the tests run on an emulated CPU (`PERF_TEST_EMULATED=1`, set by `cargo xtask kernel-matrix`
/// for its qemu TCG guests): timers fire late there, so timer-driven sampling (task-clock, cpu-clock)
/// takes fewer samples than elapsed periods. Tests relax such timing bounds, never exact counts.
pub fn emulated() -> bool {
    std::env::var("PERF_TEST_EMULATED").is_ok_and(|v| v == "1")
}

/// Whether the effective uid is 0.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// `/proc/sys/kernel/perf_event_paranoid`, or 2 (the kernel default) when unreadable.
pub fn paranoid() -> i32 {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(2)
}

/// Whether the PMU `name` exists under `/sys/bus/event_source/devices`.
pub fn has_pmu(name: &str) -> bool {
    std::path::Path::new("/sys/bus/event_source/devices")
        .join(name)
        .exists()
}

/// Whether a hardware CPU PMU exists (`cpu`, `cpu_core` or `armv8_pmuv3*`).
pub fn has_hardware_pmu() -> bool {
    std::fs::read_dir("/sys/bus/event_source/devices")
        .map(|d| {
            d.filter_map(|e| e.ok()).any(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                n == "cpu" || n == "cpu_core" || n == "cpu_atom" || n.starts_with("armv")
            })
        })
        .unwrap_or(false)
}

/// CPU time consumed by the calling thread (`CLOCK_THREAD_CPUTIME_ID`).
pub fn thread_cpu_time() -> Duration {
    clock(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// CPU time consumed by this process, every thread, user and system
/// (`CLOCK_PROCESS_CPUTIME_ID`, to the nanosecond, where `/proc/self/stat` counts 10 ms ticks).
pub fn process_cpu_time() -> Duration {
    clock(libc::CLOCK_PROCESS_CPUTIME_ID)
}

fn clock(id: libc::clockid_t) -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(id, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Spins on the CPU for `d` of wall time; returns a value the optimizer cannot drop.
#[inline(never)]
pub fn busy_loop(d: Duration) -> u64 {
    let start = Instant::now();
    let mut x = 0u64;
    while start.elapsed() < d {
        for i in 0..1000u64 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
        }
    }
    x
}

/// Spins until the calling thread has had `d` of CPU time (however busy the machine is, unlike
/// [`busy_loop`]'s wall time); returns a value the optimizer cannot drop.
pub fn busy_cpu(d: Duration) -> u64 {
    let start = thread_cpu_time();
    let mut x = 0;
    while thread_cpu_time() - start < d {
        x ^= busy_loop(Duration::from_micros(200));
    }
    x
}

/// Touches `pages` fresh anonymous pages (one write each, so exactly one page fault each in user space);
/// returns how many it touched.
pub fn touch_pages(pages: usize) -> usize {
    let page = page_size();
    let len = pages * page;
    // SAFETY: an anonymous private mapping with no address hint has no preconditions.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(ptr, libc::MAP_FAILED, "mmap of {len} bytes failed");
    // Where transparent huge pages are `always` (the kernel matrix's Debian guests), one fault would
    // map a whole aligned 2 MiB (1000 pages touched gave 489 faults there): ask for small pages.
    // SAFETY: advice on exactly the mapping made above; MADV_NOHUGEPAGE changes no contents.
    let _ = unsafe { libc::madvise(ptr, len, libc::MADV_NOHUGEPAGE) };
    let base = ptr.cast::<u8>();
    for i in 0..pages {
        // SAFETY: `i * page < len`, inside the writable mapping made above.
        unsafe { std::ptr::write_volatile(base.add(i * page), 1) };
    }
    // SAFETY: unmapping exactly the mapping made above, which nothing else refers to.
    unsafe { libc::munmap(ptr, len) };
    pages
}

/// Runs the example `name` of perf-event (built once per test binary, see [`example_binary`]) with
/// `args` and stdin closed, as a user runs it; its exit status and output.
pub fn run_example(name: &str, args: &[&str]) -> std::process::Output {
    static BINS: std::sync::Mutex<std::collections::BTreeMap<String, std::path::PathBuf>> =
        std::sync::Mutex::new(std::collections::BTreeMap::new());
    let bin = BINS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .entry(name.to_owned())
        .or_insert_with(|| example_binary(name))
        .clone();
    std::process::Command::new(&bin)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", bin.display()))
}

/// Copies the executable `from` to `to` (mode 0755) so that it can be executed right away, even while
/// other test threads of this process spawn children.
///
/// Copying in this process would hold a write descriptor on `to`; a child forked meanwhile by another
/// thread inherits it until its own `exec`, and executing `to` in that window fails with `ETXTBSY`
/// ("Text file busy"; `errors_open` failed so about one run in 40). So `cp` writes the file: the
/// write descriptor exists only in that child, which has exited when this returns, and no process
/// forked from this one ever holds it.
pub fn copy_executable(from: &std::path::Path, to: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    let out = std::process::Command::new("cp")
        .arg("--")
        .arg(from)
        .arg(to)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "running cp (coreutils or busybox) to copy {}: {e}",
                from.display()
            )
        });
    assert!(
        out.status.success(),
        "cp {} {} failed: {}",
        from.display(),
        to.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    // chmod by path: no descriptor is opened.
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o755))
        .unwrap_or_else(|e| panic!("chmod 0755 {}: {e}", to.display()));
}

/// How [`rerun_test`] runs the copy of the test binary.
#[derive(Clone, Copy, Debug, Default)]
pub struct Rerun {
    /// As uid and gid 65534 (`nobody`), no supplementary groups (by `setpriv`; needs root).
    pub as_nobody: bool,
    /// With RLIMIT_MEMLOCK set to this many bytes, soft and hard (by `prlimit`).
    pub memlock: Option<u64>,
}

/// Runs the calling test binary again with only `test` selected (`--exact --nocapture`, one
/// thread) and the environment variable `env.0` set to `env.1`, the way `how` says; returns its
/// stdout, and fails the calling test when the child fails. The binary runs from a copy in the
/// temporary directory, which another user can execute where the build tree is not reachable.
pub fn rerun_test(test: &str, env: (&str, &str), how: Rerun) -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    let exe = std::env::current_exe().expect("the test binary's path");
    let name = exe
        .file_name()
        .map_or("test".into(), |n| n.to_string_lossy());
    let copy = std::env::temp_dir().join(format!(
        "{name}-rerun-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    copy_executable(&exe, &copy);
    let mut args: Vec<std::ffi::OsString> = Vec::new();
    if let Some(bytes) = how.memlock {
        args.extend([
            "prlimit".into(),
            format!("--memlock={bytes}:{bytes}").into(),
        ]);
    }
    if how.as_nobody {
        args.extend(
            [
                "setpriv",
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
            ]
            .map(Into::into),
        );
    }
    args.push(copy.clone().into());
    let out = std::process::Command::new(&args[0])
        .args(&args[1..])
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(env.0, env.1)
        .current_dir(std::env::temp_dir())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("running {args:?}: {e}"));
    let _ = std::fs::remove_file(&copy);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{test}, run again as {how:?}, failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// A made-up hybrid CPU for tests on a machine without one: a sysfs PMU tree at `root` with two core
/// PMUs, `cpu_core` on CPU 0 and `cpu_atom` on CPU 1, whose type is the software PMU's (1) and
/// whose one alias `clock` is `config=0` (`cpu-clock`). Parsing `clock` against it gives one copy
/// per PMU, each with its PMU's CPUs, which the kernel opens as software events.
pub fn two_core_pmus(root: &std::path::Path) {
    for (pmu, cpus) in [("cpu_core", "0"), ("cpu_atom", "1")] {
        let d = root.join(pmu);
        std::fs::create_dir_all(d.join("events")).unwrap();
        std::fs::write(d.join("type"), "1\n").unwrap();
        std::fs::write(d.join("cpus"), format!("{cpus}\n")).unwrap();
        // PERF_COUNT_SW_CPU_CLOCK
        std::fs::write(d.join("events/clock"), "config=0\n").unwrap();
    }
}

/// The system page size.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}

/// The path of perf-event's example `name`, built on first use.
///
/// With `PERF_EVENT_EXAMPLES` set (the kernel matrix's guest has no cargo), `$PERF_EVENT_EXAMPLES/name`.
/// Otherwise `cargo build -p perf-event-safe --example name` runs once, with the calling test binary's profile and
/// target directory (a test runs as `target/<profile>/deps/<name>-<hash>`), so `cargo test -p tests` works
/// alone.
pub fn example_binary(name: &str) -> std::path::PathBuf {
    package_example_binary("perf-event-safe", name)
}

/// [`example_binary`] of any workspace package (`perf-sys`'s `count`, ...).
pub fn package_example_binary(package: &str, name: &str) -> std::path::PathBuf {
    use std::path::Path;
    if let Some(dir) = std::env::var_os("PERF_EVENT_EXAMPLES") {
        let mut bin = Path::new(&dir).join(name);
        // A relative directory is the workspace root's (`cargo test` runs each package's tests in
        // that package's folder), where it is not the working directory's.
        if bin.is_relative() && !bin.exists() {
            bin = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(bin);
        }
        assert!(bin.exists(), "{} does not exist", bin.display());
        return bin;
    }
    let exe = std::env::current_exe().expect("current_exe");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("the test binary lies in target/<profile>/deps");
    let target_dir = profile_dir.parent().expect("target/<profile>");
    let profile = profile_dir
        .file_name()
        .and_then(|n| n.to_str())
        .expect("profile directory name");
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root");
    let mut cargo = std::process::Command::new(env!("CARGO"));
    cargo
        .current_dir(workspace)
        .args(["build", "-q", "-p", package, "--example", name])
        .arg("--target-dir")
        .arg(target_dir);
    match profile {
        "debug" => {}
        "release" => {
            cargo.arg("--release");
        }
        other => {
            cargo.args(["--profile", other]);
        }
    }
    let status = cargo.status().expect("running cargo build");
    assert!(status.success(), "cargo build of the {name} example failed");
    let bin = profile_dir.join("examples").join(name);
    assert!(bin.exists(), "{} was not built", bin.display());
    bin
}

/// Runs the calling test again in a process of its own (only that test, with `flag` set): for tests that
/// fork, or that need a process whose reactor has never started. Returns whether this is that run.
pub fn in_own_process(test: &str, flag: &str) -> bool {
    if std::env::var_os(flag).is_some() {
        return true;
    }
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(exe)
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(flag, "1")
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    println!("{text}");
    assert!(
        out.status.success(),
        "the run in a process of its own failed"
    );
    assert!(
        text.contains("1 passed"),
        "the test did not run in its own process"
    );
    false
}

/// Forks; the child runs `f` with an `alarm` of `secs` seconds (a hang kills it with `SIGALRM`) and
/// leaves with `_exit`: 0 when `f` returned `Ok`, 1 when it returned `Err` (the reason goes to fd 2
/// without Rust's stderr lock, which a thread of the parent may have held), 2 when it panicked. Returns
/// the child's pid, for [`wait_child`].
///
/// Call it only in a process that runs one test ([`in_own_process`]): the child has only the calling
/// thread, and must not need a lock another thread of the parent held.
pub fn fork_child(secs: u32, f: impl FnOnce() -> Result<(), String>) -> libc::pid_t {
    // SAFETY: the caller runs one test in this process (see above); the child only runs `f` and leaves
    // with `_exit`.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed: {}", std::io::Error::last_os_error());
    if pid != 0 {
        return pid;
    }
    // SAFETY: arms SIGALRM (default action: terminate) for this child only.
    unsafe { libc::alarm(secs) };
    let code = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(Ok(())) => 0,
        Ok(Err(why)) => {
            let text = format!("child: {why}\n");
            // SAFETY: writes `text.len()` readable bytes to fd 2; a failed write only loses the text.
            let _ = unsafe { libc::write(2, text.as_ptr().cast(), text.len()) };
            1
        }
        Err(_) => 2,
    };
    // SAFETY: ends the child at once, without running the parent's destructors.
    unsafe { libc::_exit(code) }
}

/// Waits for a child made by [`fork_child`] (`block`: or only looks, `None` while it runs): `Ok` when
/// it exited 0, else what happened to it.
pub fn wait_child(pid: libc::pid_t, block: bool) -> Option<Result<(), String>> {
    let mut status = 0;
    let flags = if block { 0 } else { libc::WNOHANG };
    // SAFETY: waits for our own child; `status` is a valid out-pointer.
    let done = unsafe { libc::waitpid(pid, &mut status, flags) };
    assert!(done >= 0, "waitpid: {}", std::io::Error::last_os_error());
    if done == 0 {
        return None;
    }
    Some(
        if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
            Ok(())
        } else if libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGALRM {
            Err("the child hung (killed by its alarm)".into())
        } else {
            Err(format!("the child failed (wait status {status:#x})"))
        },
    )
}

/// The most seconds a signalled command-line tool (`stat`, `record`) may take to end in the tests:
/// they end well under a second on an idle machine (the tests print how long), and this allows a
/// machine loaded by other work (the README's test command under two CPU hogs took 1.04 s once
/// against a 1 s bound) while still telling an ending by the signal from waiting for the command.
pub const PROMPT_SECS: f64 = 5.0;
