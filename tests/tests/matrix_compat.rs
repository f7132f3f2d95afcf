//! Runtime compatibility through the `perf-event` API: every option newer than some kernel of the matrix
//! (`cargo xtask kernel-matrix`: 5.10, 6.1, 6.12 and the newest) either works, where the kernel has it, or
//! fails with [`Error::KernelTooOld`], whose message names the option, the Linux version that added it and
//! the running kernel (`uname -r`).
//!
//! The outcome is decided by what the kernel does (the open's result); the running version only predicts
//! which outcome must occur, so a wrong version table in `perf-event` (or a kernel that refuses an option
//! it should have) fails the test. Runs on the host too.

use std::time::Duration;

use perf_event::config::sibling::AuxTracer;
use perf_event::config::{
    CallChain, Cpu, Inherit, OnExecve, Opts, Proc, SampleOn, SigData, UseBuildId,
};
use perf_event::count::Counter;
use perf_event::event::dp::DynamicPmu;
use perf_event::event::sw::Software;
use perf_event::event::Event;
use perf_event::Error;
use tests::{busy_loop, paranoid, Skip};

const ME: (Proc, perf_event::config::All) = (Proc::CURRENT, Cpu::ALL);

/// `(major, minor)` and `uname -r` of the running kernel.
fn running() -> ((u32, u32), String) {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .expect("read /proc/sys/kernel/osrelease")
        .trim()
        .to_string();
    let mut it = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let v = (it.next().unwrap_or(0), it.next().unwrap_or(0));
    (v, release)
}

/// A user-space task-clock counter's options: what every unprivileged caller may open at paranoid 2.
fn user_opts() -> Opts {
    let mut o = Opts::default();
    o.exclude.kernel = true;
    o.exclude.hv = true;
    o
}

/// What a kernel that has the option does with it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Where {
    /// The open succeeds, and the counter counts.
    Opens,
    /// The option needs an AUX PMU (Intel PT, ARM SPE/TRBE) as group leader; with a task-clock it is
    /// refused for that reason, never as "too old".
    RefusedWithoutAux,
}

/// One option newer than some matrix kernel.
struct Case {
    /// What the test prints.
    what: &'static str,
    /// A piece of the option's name that the `KernelTooOld` message must contain.
    names: &'static str,
    /// The Linux release that added it.
    since: (u32, u32),
    /// Older series whose stable kernels carry it too: either outcome is right there.
    backported_to: &'static [(u32, u32)],
    /// What happens on a kernel that has it.
    present: Where,
    open: fn() -> Result<Counter, Error>,
}

fn task_clock(o: &Opts) -> Result<Counter, Error> {
    Counter::new(Software::TaskClock, ME, o)
}

/// Debian's 6.12.117 treats `aux_action` as 6.13 does (observed in the matrix: `aux_start_paused` on
/// a software PMU is refused with EOPNOTSUPP, not EINVAL), so either outcome is right on 6.12.
const AUX_ACTION_BACKPORTS: &[(u32, u32)] = &[(6, 12)];

const CASES: &[Case] = &[
    Case {
        what: "extra_record.mmap.ext = UseBuildId(true)",
        names: "build_id",
        since: (5, 12),
        backported_to: &[],
        present: Where::Opens,
        open: || {
            let mut o = user_opts();
            o.extra_record.mmap.code = true;
            o.extra_record.mmap.ext = Some(UseBuildId(true));
            task_clock(&o)
        },
    },
    Case {
        what: "on_execve = Remove",
        names: "remove_on_exec",
        since: (5, 13),
        backported_to: &[],
        present: Where::Opens,
        open: || {
            let mut o = user_opts();
            o.on_execve = Some(OnExecve::Remove);
            task_clock(&o)
        },
    },
    Case {
        what: "sigtrap_on_sample (+ on_execve = Remove)",
        names: "sigtrap",
        since: (5, 13),
        backported_to: &[],
        present: Where::Opens,
        open: || {
            let mut o = user_opts();
            o.on_execve = Some(OnExecve::Remove);
            o.sigtrap_on_sample = Some(SigData(0x5151));
            task_clock(&o)
        },
    },
    Case {
        what: "inherit = NewThread",
        names: "inherit_thread",
        since: (5, 13),
        backported_to: &[],
        present: Where::Opens,
        open: || {
            let mut o = user_opts();
            o.inherit = Some(Inherit::NewThread);
            task_clock(&o)
        },
    },
    Case {
        what: "Software::CgroupSwitch",
        names: "PERF_COUNT_SW_CGROUP_SWITCHES",
        since: (5, 13),
        backported_to: &[],
        present: Where::Opens,
        open: || Counter::new(Software::CgroupSwitch, ME, user_opts()),
    },
    Case {
        what: "stat_format.lost_records",
        names: "PERF_FORMAT_LOST",
        since: (6, 0),
        // Linux 5.10.y took it with the 2023 group-read fixes: Debian's 5.10.223 accepts it.
        backported_to: &[(5, 10)],
        present: Where::Opens,
        open: || {
            let mut o = user_opts();
            o.stat_format.lost_records = true;
            task_clock(&o)
        },
    },
    Case {
        what: "DynamicPmu { config3 }",
        names: "config3",
        since: (6, 3),
        backported_to: &[],
        present: Where::Opens,
        open: || {
            let pmu = DynamicPmu {
                ty: perf_sys::PERF_TYPE_SOFTWARE,
                config: u64::from(perf_sys::PERF_COUNT_SW_TASK_CLOCK),
                config1: 0,
                config2: 0,
                config3: 1,
            };
            Counter::new(pmu, ME, user_opts())
        },
    },
    Case {
        what: "pause_aux",
        names: "aux_start_paused",
        since: (6, 13),
        backported_to: AUX_ACTION_BACKPORTS,
        present: Where::RefusedWithoutAux,
        open: || {
            let mut o = user_opts();
            o.pause_aux = true;
            task_clock(&o)
        },
    },
    Case {
        what: "aux_on_sample = Pause",
        names: "aux_pause",
        since: (6, 13),
        backported_to: AUX_ACTION_BACKPORTS,
        present: Where::RefusedWithoutAux,
        open: || {
            let mut o = user_opts();
            o.sample_on = SampleOn::Count(1_000_000);
            o.aux_on_sample = Some(AuxTracer::Pause);
            task_clock(&o)
        },
    },
    Case {
        what: "aux_on_sample = Resume",
        names: "aux_resume",
        since: (6, 13),
        backported_to: AUX_ACTION_BACKPORTS,
        present: Where::RefusedWithoutAux,
        open: || {
            let mut o = user_opts();
            o.sample_on = SampleOn::Count(1_000_000);
            o.aux_on_sample = Some(AuxTracer::Resume);
            task_clock(&o)
        },
    },
    Case {
        what: "call_chain.defer_user",
        names: "defer_callchain",
        since: (6, 19),
        backported_to: &[],
        present: Where::Opens,
        open: || {
            let mut o = user_opts();
            o.sample_on = SampleOn::Count(1_000_000);
            o.sample_format.call_chain = Some(CallChain {
                exclude_user: false,
                exclude_kernel: true,
                defer_user: true,
                max_stack_frames: 0,
            });
            task_clock(&o)
        },
    },
    Case {
        what: "Event::with_config4",
        names: "config4",
        since: (6, 19),
        backported_to: &[],
        present: Where::Opens,
        open: || {
            Counter::new(
                Event::from(Software::TaskClock).with_config4(1),
                ME,
                user_opts(),
            )
        },
    },
];

/// Why `result` is wrong for `case` on the kernel `version` (`release`), or `None` when it is right.
fn verdict(
    case: &Case,
    version: (u32, u32),
    release: &str,
    result: Result<Counter, Error>,
) -> Option<String> {
    let has = version >= case.since;
    let maybe = !has && case.backported_to.contains(&version);
    match result {
        Ok(counter) => {
            if !has && !maybe {
                return Some("accepted, but the kernel predates it".into());
            }
            if case.present == Where::RefusedWithoutAux {
                // Only an AUX PMU leader makes these valid; a task-clock alone never is.
                return Some("accepted on a task-clock, which has no AUX area".into());
            }
            // The counter really counts: the option did not break the event.
            let work = || -> Result<u64, Error> {
                counter.enable()?;
                std::hint::black_box(busy_loop(Duration::from_millis(5)));
                counter.disable()?;
                Ok(counter.stat()?.count)
            };
            match work() {
                Ok(_) => None,
                Err(e) => Some(format!("opened, but does not count: {e}")),
            }
        }
        Err(e) => {
            let msg = e.to_string();
            let too_old = matches!(e, Error::KernelTooOld { .. });
            if has {
                return match case.present {
                    Where::Opens => Some(format!("refused on a kernel that has it: {msg}")),
                    Where::RefusedWithoutAux if too_old || msg.contains("requires Linux") => Some(
                        format!("blamed the kernel version, but {release} has it: {msg}"),
                    ),
                    Where::RefusedWithoutAux => None,
                };
            }
            if maybe && !too_old && case.present == Where::RefusedWithoutAux {
                // The backport refused it for want of an AUX PMU, as a kernel that has it does.
                return None;
            }
            if matches!(e, Error::Permission { .. }) {
                return Some(format!("refused for privilege, not for the version: {msg}"));
            }
            let since = format!("requires Linux {}.{}", case.since.0, case.since.1);
            let kernel = format!("this kernel is {release}");
            if !too_old
                || !msg.contains(case.names)
                || !msg.contains(&since)
                || !msg.contains(&kernel)
            {
                return Some(format!(
                    "refused without the explanation (KernelTooOld naming {:?}, {since:?}, {kernel:?}): {msg}",
                    case.names
                ));
            }
            None
        }
    }
}

#[test]
fn newer_options_work_or_name_the_version_they_need() {
    let (version, release) = running();
    println!("running on Linux {release}");
    if let Err(e) = task_clock(&user_opts()) {
        if matches!(e, Error::Permission { .. }) {
            tests::skip(
                Skip::Privilege,
                &format!("task-clock: {e} (paranoid {})", paranoid()),
            );
            return;
        }
        panic!("the plain task-clock counter does not open: {e}");
    }
    let mut wrong = Vec::new();
    for case in CASES {
        let result = (case.open)();
        let shown = match &result {
            Ok(_) => "opened".to_string(),
            Err(e) => format!("refused: {e}"),
        };
        println!(
            "{:<42} since {}.{:<3} {shown}",
            case.what, case.since.0, case.since.1
        );
        if let Some(why) = verdict(case, version, &release, result) {
            wrong.push(format!(
                "{} (since {}.{}): {why}",
                case.what, case.since.0, case.since.1
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "on Linux {release}:\n{}",
        wrong.join("\n")
    );
}

/// Where `PERF_FORMAT_LOST` is accepted, a counter's stat carries the lost count (0 for a counter
/// without a ring); where it is refused, the kernel predates 6.0 and the error says so.
#[test]
fn lost_records_in_stat_where_the_kernel_has_them() {
    let (version, release) = running();
    let mut o = user_opts();
    o.stat_format.lost_records = true;
    match task_clock(&o) {
        Ok(c) => {
            c.enable().unwrap();
            std::hint::black_box(busy_loop(Duration::from_millis(5)));
            c.disable().unwrap();
            let stat = c.stat().unwrap();
            assert!(stat.count > 0, "task-clock counted nothing: {stat:?}");
            assert_eq!(stat.lost_records, Some(0), "{stat:?}");
        }
        Err(e) if matches!(e, Error::Permission { .. }) => {
            tests::skip(Skip::Privilege, &format!("task-clock: {e}"));
        }
        Err(e) => {
            assert!(
                version < (6, 0),
                "Linux {release} refused PERF_FORMAT_LOST: {e}"
            );
            let msg = e.to_string();
            assert!(matches!(e, Error::KernelTooOld { .. }), "{msg}");
            assert!(
                msg.contains("PERF_FORMAT_LOST") && msg.contains("requires Linux 6.0"),
                "{msg}"
            );
        }
    }
}

/// Runs `sh -c` with a user-space loop in a child, under a task-clock counter of this process that
/// children inherit, with `remove_on_exec` or without; returns the nanoseconds counted.
fn count_exec_child(sh: &str, remove: bool) -> Result<u64, Error> {
    let mut o = user_opts();
    o.inherit = Some(Inherit::NewChild);
    if remove {
        o.on_execve = Some(OnExecve::Remove);
    }
    let c = Counter::new(Software::TaskClock, ME, &o)?;
    let mut cmd = std::process::Command::new(sh);
    if sh.ends_with("busybox") {
        cmd.arg("sh");
    }
    cmd.args(["-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"]);
    c.enable()?;
    let status = cmd.status().expect("spawn the shell");
    c.disable()?;
    assert!(status.success(), "the shell loop failed: {status}");
    Ok(c.stat()?.count)
}

/// `on_execve = Remove` does what it says where the kernel has it: the copy of an inherited counter in
/// a child that execs is removed, so the exec'd program is not counted (without it, it is).
#[test]
fn remove_on_exec_stops_counting_the_new_program() {
    let (version, release) = running();
    let Some(sh) = ["/bin/sh", "/bin/busybox"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
    else {
        tests::skip(Skip::Environment, "no /bin/sh to exec");
        return;
    };
    let control = match count_exec_child(sh, false) {
        Ok(n) => n,
        Err(e) if matches!(e, Error::Permission { .. }) => {
            tests::skip(Skip::Privilege, &format!("task-clock: {e}"));
            return;
        }
        Err(e) => panic!("an inherited task-clock counter does not open: {e}"),
    };
    let removed = match count_exec_child(sh, true) {
        Ok(n) => n,
        Err(e) => {
            assert!(
                version < (5, 13),
                "Linux {release} refused remove_on_exec: {e}"
            );
            assert!(matches!(e, Error::KernelTooOld { .. }), "{e}");
            println!("Linux {release}: {e}");
            return;
        }
    };
    println!(
        "task-clock with the exec'd child counted: {control} ns; with remove_on_exec: {removed} ns"
    );
    // What remains with remove_on_exec is this thread's spawn and wait and the child's few steps
    // between fork and exec; the loop of 20000 shell iterations is far more.
    assert!(
        removed * 2 < control,
        "remove_on_exec left {removed} ns of {control} ns: the exec'd program was still counted"
    );
}
