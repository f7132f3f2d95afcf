//! Each diagnosed error, provoked on purpose, with its message checked.

use std::ffi::CString;
use std::process::Command;

use perf_event::config::{online_cpus, CallChain, Cgroup, Cpu, Opts, Proc};
use perf_event::count::Counter;
use perf_event::event::dp::DynamicPmu;
use perf_event::event::hw::Hardware;
use perf_event::event::sw::Software;
use perf_event::event::Event;
use perf_event::Error;
use tests::{has_hardware_pmu, is_root, require, Skip};

const ME: (Proc, perf_event::config::All) = (Proc::CURRENT, Cpu::ALL);
const CHILD_ENV: &str = "PERF_EVENT_ERRORS_CHILD";

/// Runs this test binary's `test` again, as `nobody` when `as_nobody`, with `CHILD_ENV` set to
/// `mode`; returns its stdout.
fn rerun(mode: &str, test: &str, as_nobody: bool) -> String {
    let how = tests::Rerun {
        as_nobody,
        ..Default::default()
    };
    tests::rerun_test(test, (CHILD_ENV, mode), how)
}

fn child_mode() -> Option<String> {
    std::env::var(CHILD_ENV).ok()
}

#[test]
fn unprivileged_kernel_counting_names_paranoid_and_the_fix() {
    if child_mode().as_deref() == Some("eacces") {
        let e = Counter::new(Software::TaskClock, ME, Opts::default()).unwrap_err();
        println!("ERROR: {e}");
        let e = Counter::new(Software::TaskClock, (Proc::ALL, Cpu(0)), {
            let mut o = Opts::default();
            o.exclude.kernel = true;
            o
        })
        .unwrap_err();
        println!("CPUWIDE: {e}");
        return;
    }
    require!(
        is_root(),
        Skip::Privilege,
        "switching to uid 65534 needs root"
    );
    let p = tests::paranoid();
    require!(
        p >= 2,
        Skip::Environment,
        "perf_event_paranoid is {p}: kernel counting is allowed"
    );
    require!(
        Command::new("setpriv").arg("--version").output().is_ok(),
        Skip::Environment,
        "no setpriv"
    );
    let out = rerun(
        "eacces",
        "unprivileged_kernel_counting_names_paranoid_and_the_fix",
        true,
    );
    let line = out
        .lines()
        .find_map(|l| l.split_once("ERROR: ").map(|(_, m)| m))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        line.contains(&format!("perf_event_paranoid is {p}")),
        "{line}"
    );
    assert!(line.contains("exclude.kernel = true"), "{line}");
    assert!(line.contains("CAP_PERFMON"), "{line}");
    assert!(line.contains("sysctl kernel.perf_event_paranoid"), "{line}");
    let cpu = out
        .lines()
        .find_map(|l| l.split_once("CPUWIDE: ").map(|(_, m)| m))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(cpu.contains("CPU-wide") && cpu.contains("<= 0"), "{cpu}");
}

#[test]
fn too_many_files_names_rlimit_nofile() {
    if child_mode().as_deref() == Some("emfile") {
        let lim = libc::rlimit {
            rlim_cur: 64,
            rlim_max: 64,
        };
        // SAFETY: a valid rlimit for this process.
        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) }, 0);
        let mut held = Vec::new();
        let e = loop {
            match Counter::new(Software::Dummy, ME, Opts::default()) {
                Ok(c) => held.push(c),
                Err(e) => break e,
            }
        };
        println!("ERROR: {e}");
        return;
    }
    let out = rerun("emfile", "too_many_files_names_rlimit_nofile", false);
    let line = out
        .lines()
        .find_map(|l| l.split_once("ERROR: ").map(|(_, m)| m))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(line.contains("RLIMIT_NOFILE is 64"), "{line}");
}

#[test]
fn a_dead_pid_is_named() {
    let mut child = Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    let e = Counter::new(Software::TaskClock, (Proc(pid), Cpu::ALL), Opts::default()).unwrap_err();
    assert!(matches!(e, Error::NoSuchProcess { .. }), "{e}");
    assert!(e.to_string().contains(&format!("pid {pid}")), "{e}");
    assert_eq!(e.raw_os_error(), Some(libc::ESRCH));
    let msg = e.to_string();
    let io: std::io::Error = e.into();
    assert_eq!(
        io.to_string(),
        msg,
        "the message survives `?` into io::Error"
    );
}

#[test]
fn a_bad_cpu_names_the_online_cpus() {
    let e = Counter::new(
        Software::TaskClock,
        (Proc::CURRENT, Cpu(9999)),
        Opts::default(),
    )
    .unwrap_err();
    let online = online_cpus().unwrap();
    let list = if online.len() > 1 {
        format!("{}-{}", online[0], online[online.len() - 1])
    } else {
        online[0].to_string()
    };
    assert!(matches!(e, Error::BadCpu { cpu: 9999, .. }), "{e}");
    assert!(
        e.to_string().contains(&format!("online CPUs: {list}")),
        "{e}"
    );
}

#[test]
fn a_made_up_pmu_is_named() {
    let e = Event::parse("nosuchpmu/event=1/").unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("no PMU named \"nosuchpmu\"") && msg.contains("software"),
        "{msg}"
    );
    let e = Counter::new(
        DynamicPmu {
            ty: 54321,
            config: 0,
            config1: 0,
            config2: 0,
            config3: 0,
        },
        ME,
        Opts::default(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("no PMU has type 54321"), "{e}");
    let e = Event::parse("software/nosuchterm=1/").unwrap_err();
    assert!(e.to_string().contains("nosuchterm"), "{e}");
}

#[test]
fn hardware_events_without_a_pmu_say_virtual_machine() {
    require!(
        !has_hardware_pmu(),
        Skip::Hardware,
        "this machine has a hardware PMU"
    );
    let e = Counter::new(Hardware::Instr, ME, Opts::default()).unwrap_err();
    assert!(matches!(e, Error::NotSupported { .. }), "{e}");
    assert!(
        e.to_string()
            .contains("no hardware PMU; this looks like a virtual machine"),
        "{e}"
    );
}

fn running() -> (u32, u32) {
    let r = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let mut it = r
        .trim()
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse().unwrap());
    (it.next().unwrap(), it.next().unwrap())
}

#[test]
fn an_option_the_kernel_lacks_names_option_version_and_kernel() {
    require!(
        running() < (6, 19),
        Skip::Environment,
        "this kernel has every option we know"
    );
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    // defer_callchain (bit 41) arrived in 6.19: older kernels refuse the reserved bit with EINVAL.
    let mut o = Opts::default();
    o.exclude.kernel = true;
    o.sample_format.call_chain = Some(CallChain {
        exclude_user: false,
        exclude_kernel: false,
        defer_user: true,
        max_stack_frames: 0,
    });
    let e = Counter::new(Software::TaskClock, ME, &o).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, Error::KernelTooOld { .. }), "{msg}");
    assert!(
        msg.contains("defer_callchain") && msg.contains("requires Linux 6.19"),
        "{msg}"
    );
    assert!(
        msg.contains(&format!("this kernel is {}", release.trim())),
        "{msg}"
    );
    // config4 lies beyond this kernel's attr: E2BIG.
    let e = Counter::new(Event::from(Software::TaskClock).with_config4(1), ME, &o).unwrap_err();
    assert!(e.to_string().contains("requires Linux 6.19"), "{e}");
    let mut plain = Opts::default();
    plain.exclude.kernel = true;
    let e = Counter::new(Event::from(Software::TaskClock).with_config4(1), ME, &plain).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::E2BIG), "{e}");
    assert!(e.to_string().contains("config4 requires Linux 6.19"), "{e}");
}

#[test]
fn a_cgroup_target_that_is_not_a_cgroup_is_named() {
    require!(is_root(), Skip::Privilege, "cgroup counting needs root");
    // A directory outside cgroupfs: the kernel says EBADF.
    let dir = std::env::temp_dir();
    let f = std::fs::File::open(&dir).unwrap();
    let e = Counter::new(Software::TaskClock, (Cgroup(&f), Cpu(0)), Opts::default()).unwrap_err();
    let msg = e.to_string();
    println!("{msg}");
    assert!(matches!(e, Error::Cgroup { .. }), "{msg}");
    assert_eq!(e.raw_os_error(), Some(libc::EBADF), "{msg}");
    let shown = std::fs::canonicalize(&dir).unwrap();
    assert!(
        msg.contains(&format!("{} is not a cgroup directory", shown.display())),
        "{msg}"
    );
}

#[test]
fn a_cgroup_without_perf_event_state_is_named_not_the_event() {
    require!(
        is_root(),
        Skip::Privilege,
        "mounting a cgroup hierarchy needs root"
    );
    // A named cgroup v1 hierarchy with no controller: the kernel finds no perf_event state for its
    // root and says ENOENT, as for a v2 cgroup made before anything wrote subtree_control.
    let dir = std::env::temp_dir().join(format!("perf-event-cg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let target = CString::new(dir.as_os_str().as_encoded_bytes()).unwrap();
    let opts = CString::new(format!("none,name=perf-event-test-{}", std::process::id())).unwrap();
    // SAFETY: valid NUL-terminated strings; mounts a new named hierarchy on our own directory.
    let r = unsafe {
        libc::mount(
            c"cgroup".as_ptr(),
            target.as_ptr(),
            c"cgroup".as_ptr(),
            0,
            opts.as_ptr().cast(),
        )
    };
    if r != 0 {
        let err = std::io::Error::last_os_error();
        let _ = std::fs::remove_dir(&dir);
        require!(
            false,
            Skip::Environment,
            "this kernel cannot mount a named cgroup v1 hierarchy: {err}"
        );
    }
    let f = std::fs::File::open(&dir).unwrap();
    let res = Counter::new(Software::TaskClock, (Cgroup(&f), Cpu(0)), Opts::default());
    drop(f);
    // SAFETY: unmounts what we mounted above.
    unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
    let _ = std::fs::remove_dir(&dir);
    let e = res.expect_err("counting in a cgroup without perf_event opened");
    let msg = e.to_string();
    println!("{msg}");
    assert!(matches!(e, Error::Cgroup { .. }), "{msg}");
    assert_eq!(e.raw_os_error(), Some(libc::ENOENT), "{msg}");
    assert!(msg.contains(&dir.display().to_string()), "{msg}");
    assert!(
        msg.contains("not a cgroup v2 directory") && msg.contains("perf_event"),
        "{msg}"
    );
    assert!(!msg.contains("does not know event"), "{msg}");
}

/// `fn main() -> Result<(), perf_event::Error>` prints `Error: {e:?}` when it returns an error
/// (std's `Termination` for `Result`), so `Debug` is the message and what caused it: never a
/// struct dump (`Ring(Map { area: "aux", .., hint: ": this event's PMU ..." })` before).
#[test]
fn debug_is_the_message_main_prints() {
    let mut child = Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    let dead = Counter::new(Software::TaskClock, (Proc(pid), Cpu::ALL), Opts::default());
    let mut o = Opts::default();
    o.exclude.kernel = true;
    o.sample_on = perf_event::config::SampleOn::Count(1000);
    let c = Counter::new(Software::Dummy, ME, &o).unwrap();
    let s = c.sampler(0).unwrap();
    let errors = [
        dead.unwrap_err(),
        s.aux_tracer(2).unwrap_err(),
        Event::parse("nosuchpmu/event=1/").unwrap_err(),
        Counter::new(Software::TaskClock, (Proc::CURRENT, Cpu(9999)), &o).unwrap_err(),
    ];
    for e in errors {
        let display = e.to_string();
        let debug = format!("{e:?}");
        println!("Error: {debug}");
        assert!(debug.starts_with(&display), "{debug}");
        for dump in [" { ", "source:", "Os {", "hint:"] {
            assert!(!debug.contains(dump), "a struct dump: {debug}");
        }
        assert!(
            !display.starts_with(": ") && !display.contains(": :") && !display.contains("(): "),
            "{display}"
        );
        // `{:#?}` adds which variant it is, for people matching on it.
        let alt = format!("{e:#?}");
        assert!(alt.starts_with("Error::") && alt.ends_with(&debug), "{alt}");
    }
}

/// The rules refused before the open are the kernel's own, not stricter: the largest user stack
/// (65528 bytes), the largest period (2^63 - 1) and exactly `kernel.perf_event_max_stack` frames
/// open, one step further is refused with the explanation.
#[test]
fn the_limits_checked_before_the_open_are_the_kernels() {
    use perf_event::config::{SampleOn, Size};
    let sampling = |f: &dyn Fn(&mut Opts)| {
        let mut o = Opts::default();
        o.exclude.kernel = true;
        o.sample_on = SampleOn::Count(1_000_000);
        f(&mut o);
        Counter::new(Software::TaskClock, ME, o)
    };
    sampling(&|o| o.sample_format.user_stack = Some(Size(65528))).unwrap();
    let e = sampling(&|o| o.sample_format.user_stack = Some(Size(65536))).unwrap_err();
    assert!(matches!(e, Error::InvalidOption { .. }), "{e}");
    sampling(&|o| o.sample_format.user_stack = Some(Size(8))).unwrap();
    let e = sampling(&|o| o.sample_format.user_stack = Some(Size(12))).unwrap_err();
    assert!(e.to_string().contains("Size(8) or Size(16)"), "{e}");
    sampling(&|o| o.sample_on = SampleOn::Count((1 << 63) - 1)).unwrap();
    let e = sampling(&|o| o.sample_on = SampleOn::Count(u64::MAX)).unwrap_err();
    assert!(matches!(e, Error::InvalidOption { .. }), "{e}");
    let max: u16 = std::fs::read_to_string("/proc/sys/kernel/perf_event_max_stack")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let frames = |n: u16| {
        move |o: &mut Opts| {
            o.sample_format.call_chain = Some(CallChain {
                max_stack_frames: n,
                ..CallChain::default()
            })
        }
    };
    sampling(&frames(max)).unwrap();
    let e = sampling(&frames(max + 1)).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EOVERFLOW), "{e}");
    assert!(
        e.to_string()
            .contains(&format!("kernel.perf_event_max_stack, which is {max} here")),
        "{e}"
    );
}

#[test]
fn an_invalid_tracepoint_open_blames_the_id_only_when_tracefs_lacks_it() {
    // Issue 37, item 6: any EINVAL on a tracepoint open was reported as "no tracepoint has id N", also
    // for an id that exists and an option the kernel refused (`user_regs = Some(RegsMask(0))` on
    // syscalls:sys_enter_getppid, which opens without it).
    let tp = tests::require_tracepoint!("syscalls:sys_enter_getppid");
    let mut opts = Opts::default();
    Counter::new(tp.clone(), ME, &opts).unwrap();
    opts.sample_format.user_regs = Some(perf_event::config::RegsMask(0));
    let err = match Counter::new(tp.clone(), ME, &opts) {
        Ok(_) => {
            tests::skip(
                Skip::Environment,
                "this kernel accepts an empty user_regs mask",
            );
            return;
        }
        Err(e) => e,
    };
    let msg = err.to_string();
    println!("{msg}");
    assert!(!msg.contains("no tracepoint has id"), "{msg}");
    assert!(
        msg.contains(&tp.id.to_string()) || msg.contains("sys_enter_getppid"),
        "{msg}"
    );
    // An id tracefs does not have is still named as such.
    let missing = perf_event::event::tp::Tracepoint {
        id: u64::from(u32::MAX) - 7,
    };
    let msg = Counter::new(missing, ME, Opts::default())
        .unwrap_err()
        .to_string();
    println!("{msg}");
    assert!(
        msg.contains(&format!("no tracepoint has id {}", u64::from(u32::MAX) - 7)),
        "{msg}"
    );
}
