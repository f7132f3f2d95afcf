//! System-wide profiling without root: the `profile` example run as `nobody` with exactly the
//! capabilities `perf_profile::privilege::SYSTEM_WIDE` lists (ambient, the bounding set holding
//! nothing else) profiles workloads of another user (root), in binaries only root may read, one of
//! them in a mount namespace of its own, and names their frames; without `CAP_PERFMON` it fails
//! with an error that names it; without `CAP_DAC_READ_SEARCH` the workload's frames are
//! addresses; without `CAP_SYS_PTRACE` the contained workload's are; without `CAP_SYSLOG`, where
//! `/proc/kallsyms` needs it, kernel frames are one `[kernel]` frame.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use common::{folded_file, samples_with, scratch, FRAME_POINTERS};
use perf_profile::privilege::{Capability, SYSTEM_WIDE};
use tests::{require, Skip};

/// `program args` as `nobody` with exactly `caps`, ambient so that they survive the `exec`.
fn as_nobody_with(caps: &[Capability], program: &Path, args: &[&str]) -> Command {
    let list = caps
        .iter()
        .map(|c| format!("+{}", c.short_name()))
        .collect::<Vec<_>>()
        .join(",");
    let mut cmd = Command::new("setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"]);
    if caps.is_empty() {
        cmd.args(["--inh-caps=-all", "--bounding-set=-all"]);
    } else {
        cmd.arg(format!("--inh-caps={list}"))
            .arg(format!("--ambient-caps={list}"))
            .arg(format!("--bounding-set=-all,{list}"));
    }
    cmd.arg(program).args(args).stdin(Stdio::null());
    cmd
}

/// Whether `/proc/kallsyms` hides the kernel's addresses from a reader without `CAP_SYSLOG`:
/// `kptr_restrict` 1, or 0 with `perf_event_paranoid` above 1 (`kallsyms_show_value`).
fn kallsyms_needs_syslog() -> bool {
    let kptr = std::fs::read_to_string("/proc/sys/kernel/kptr_restrict")
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok());
    match kptr {
        Some(0) => tests::paranoid() > 1,
        Some(1) => true,
        _ => false,
    }
}

/// How long the four captures of 2 s may take, symbolizing included, on a loaded machine.
const DEADLINE: Duration = Duration::from_secs(180);

/// How a capture ended: its exit status (`None`: killed at the deadline), what it printed on
/// stderr, its output file.
struct Finished<S = Option<ExitStatus>> {
    status: S,
    err: String,
    file: PathBuf,
}

impl Finished {
    /// The capture, which must have ended by itself.
    fn ended(self) -> Finished<ExitStatus> {
        let status = self.status.unwrap_or_else(|| {
            panic!(
                "{}: still running {DEADLINE:?} after it started, killed (blocked on a file \
                 another process planted, such as a FIFO?): {}",
                self.file.display(),
                self.err
            )
        });
        Finished {
            status,
            err: self.err,
            file: self.file,
        }
    }
}

/// The workload's stack: frames of `calls.c`, named.
const WORKLOAD: &str = "main;outer;hot_a;leaf";

#[test]
fn nobody_with_the_listed_capabilities_profiles_the_whole_system_and_names_other_users_frames() {
    require!(
        tests::is_root(),
        Skip::Privilege,
        "needs root, to run the profiler as nobody with capabilities and a workload as root"
    );
    common::require_cc!();
    let example = common::command();
    require!(
        as_nobody_with(&SYSTEM_WIDE, &example, &["--help"])
            .output()
            .is_ok_and(|o| o.status.success()),
        Skip::Environment,
        "setpriv (util-linux) cannot run {} as nobody with ambient CAP_PERFMON (Linux 5.8+)",
        example.display()
    );
    let dir = scratch("least-privilege");
    // The workload: root's, in a folder only root may enter, a binary only root may read.
    let private = dir.join("private");
    std::fs::create_dir(&private).unwrap();
    let bin = common::cc(&private, "calls", "calls.c", FRAME_POINTERS, &[]);
    std::fs::set_permissions(&bin, PermissionsExt::from_mode(0o700)).unwrap();
    std::fs::set_permissions(&private, PermissionsExt::from_mode(0o700)).unwrap();
    // nobody writes the profiles here.
    let out = dir.join("out");
    std::fs::create_dir(&out).unwrap();
    std::fs::set_permissions(&out, PermissionsExt::from_mode(0o777)).unwrap();
    let mut workload = Command::new(&bin).arg("60").spawn().unwrap();
    // The same, its functions renamed, in a mount namespace of its own (a container's): its binary
    // is on a tmpfs mounted there only, so only its own root (/proc/PID/root) has it.
    let renamed = [
        "-Douter=contained_outer",
        "-Dhot_a=contained_hot_a",
        "-Dleaf=contained_leaf",
    ];
    let contained_bin = common::cc(&private, "contained", "calls.c", FRAME_POINTERS, &renamed);
    let ns = dir.join("ns");
    std::fs::create_dir(&ns).unwrap();
    let mut contained = Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c"])
        .arg(r#"mount -t tmpfs none "$1" && cp "$2" "$1/contained" && exec "$1/contained" 60"#)
        .arg("sh")
        .args([&ns, &contained_bin])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let contained_runs = contained.try_wait().unwrap().is_none();

    // The captures at once: each samples the whole system for 2 s, the workload included.
    let start = |name: &str, caps: &[Capability]| {
        let file = out.join(format!("{name}.folded"));
        let child = as_nobody_with(
            caps,
            &example,
            &[
                "-a",
                "-d",
                "2",
                "--symbolize",
                "functions",
                "-o",
                file.to_str().unwrap(),
            ],
        )
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(out.join(format!("{name}.stderr"))).unwrap())
        .spawn()
        .unwrap();
        (child, file, out.join(format!("{name}.stderr")))
    };
    let without = |dropped: Capability| -> Vec<Capability> {
        SYSTEM_WIDE.into_iter().filter(|&c| c != dropped).collect()
    };
    let all = start("all", &SYSTEM_WIDE);
    let no_perfmon = start("no-perfmon", &without(Capability::Perfmon));
    let no_dac = start("no-dac", &without(Capability::DacReadSearch));
    let no_ptrace = start("no-ptrace", &without(Capability::SysPtrace));
    let no_syslog =
        kallsyms_needs_syslog().then(|| start("no-syslog", &without(Capability::Syslog)));
    // Each must end within the deadline, else it is killed; the test fails once all are ended and
    // the workload too, so that nothing is left running.
    let deadline = Instant::now() + DEADLINE;
    let finish = |(mut child, file, stderr): (Child, PathBuf, PathBuf)| {
        let status = loop {
            match child.try_wait().unwrap() {
                Some(status) => break Some(status),
                None if Instant::now() >= deadline => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break None;
                }
                None => std::thread::sleep(Duration::from_millis(100)),
            }
        };
        Finished {
            status,
            err: std::fs::read_to_string(stderr).unwrap_or_default(),
            file,
        }
    };
    let all = finish(all);
    let no_perfmon = finish(no_perfmon);
    let no_dac = finish(no_dac);
    let no_ptrace = finish(no_ptrace);
    let no_syslog = no_syslog.map(finish);
    for w in [&mut workload, &mut contained] {
        let _ = w.kill();
        let _ = w.wait();
    }
    let [all, no_perfmon, no_dac, no_ptrace] =
        [all, no_perfmon, no_dac, no_ptrace].map(Finished::ended);
    let no_syslog = no_syslog.map(Finished::ended);
    let (all_file, no_perfmon_file, no_dac_file) = (&all.file, &no_perfmon.file, &no_dac.file);

    assert!(
        all.status.success(),
        "nobody with {SYSTEM_WIDE:?}: {}",
        all.err
    );
    let stacks = folded_file(all_file);
    assert!(
        samples_with(&stacks, WORKLOAD) > 0,
        "root's workload, in a file only root may read, is not named for nobody with \
         {SYSTEM_WIDE:?}: {stacks:?}"
    );
    assert!(
        !stacks.keys().any(|s| s.contains("[kernel]")),
        "kernel frames are not named with CAP_SYSLOG: {stacks:?}"
    );

    // Without CAP_PERFMON a system-wide capture does not start, and says what it needs.
    let err = &no_perfmon.err;
    assert_eq!(no_perfmon.status.code(), Some(1), "{err}");
    assert!(err.contains("CAP_PERFMON"), "{err}");
    assert!(!no_perfmon_file.exists());

    // Without CAP_DAC_READ_SEARCH the workload's binary cannot be read: its frames are addresses.
    assert!(no_dac.status.success(), "{}", no_dac.err);
    let stacks = folded_file(no_dac_file);
    assert_eq!(samples_with(&stacks, WORKLOAD), 0, "{stacks:?}");
    assert!(
        stacks.keys().any(|s| s.contains("calls+0x")),
        "no sample of the workload, as an address: {stacks:?}"
    );

    // Without CAP_SYS_PTRACE another user's process's root (/proc/PID/root) cannot be entered: the
    // contained workload's binary, which only its mount namespace has, is not found.
    const CONTAINED: &str = "contained_outer;contained_hot_a;contained_leaf";
    if contained_runs {
        assert!(no_ptrace.status.success(), "{}", no_ptrace.err);
        let stacks = folded_file(&all.file);
        assert!(
            samples_with(&stacks, CONTAINED) > 0,
            "a contained process's frames are not named with {SYSTEM_WIDE:?}: {stacks:?}"
        );
        let stacks = folded_file(&no_ptrace.file);
        assert_eq!(samples_with(&stacks, CONTAINED), 0, "{stacks:?}");
        assert!(
            stacks.keys().any(|s| s.contains("contained+0x")),
            "no sample of the contained workload, as an address: {stacks:?}"
        );
    } else {
        tests::skip_part(
            Skip::Environment,
            "unshare cannot run a workload in a mount namespace of its own here",
        );
    }

    // Without CAP_SYSLOG, where kallsyms needs it, kernel frames are one [kernel] frame.
    match no_syslog {
        Some(no_syslog) => {
            assert!(no_syslog.status.success(), "{}", no_syslog.err);
            let stacks = folded_file(&no_syslog.file);
            assert!(stacks.keys().any(|s| s.contains("[kernel]")), "{stacks:?}");
        }
        None => tests::skip_part(
            Skip::Environment,
            "kptr_restrict and perf_event_paranoid show kallsyms without CAP_SYSLOG here",
        ),
    }
    let _ = std::fs::remove_dir_all(&dir);
}
