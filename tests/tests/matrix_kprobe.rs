//! kprobe and kretprobe events through `perf-event` (`event::dp::{Kprobe, Kretprobe}`), counted and
//! sampled on a kernel function this test calls a known number of times from user space: the
//! `getppid(2)` system call's entry point. The kernels of `cargo xtask kernel-matrix` have the kprobe PMU;
//! where it is missing (the host VM has no CONFIG_KPROBE_EVENTS), every test skips.

use std::ffi::CString;

use perf_event::config::{Cpu, Opts, Proc, SampleOn};
use perf_event::count::Counter;
use perf_event::event::dp::{Kprobe, Kretprobe};
use perf_event::sample::record::Record;
use perf_event::Error;
use tests::{has_pmu, is_root, require, Skip};

const ME: (Proc, perf_event::config::All) = (Proc::CURRENT, Cpu::ALL);

/// `getppid(2)` entry points by architecture and kernel age; the first one the kernel has is probed.
const GETPPID_SYMBOLS: &[&str] = &["__x64_sys_getppid", "__arm64_sys_getppid", "sys_getppid"];

/// The probed function's name and, when `/proc/kallsyms` shows it (root, `kptr_restrict` < 2), its
/// address.
struct Target {
    name: &'static str,
    addr: Option<u64>,
}

/// Finds the `getppid` entry point in `/proc/kallsyms`.
fn getppid_symbol() -> Option<Target> {
    let syms = std::fs::read_to_string("/proc/kallsyms").ok()?;
    for want in GETPPID_SYMBOLS {
        for line in syms.lines() {
            let mut f = line.split_whitespace();
            let (Some(addr), Some(kind), Some(name)) = (f.next(), f.next(), f.next()) else {
                continue;
            };
            if name == *want && matches!(kind, "T" | "t") {
                let addr = u64::from_str_radix(addr, 16).ok().filter(|&a| a != 0);
                return Some(Target { name: want, addr });
            }
        }
    }
    None
}

/// Skips (returning `None`) where kprobes cannot run; otherwise the probe target.
fn setup() -> Option<Target> {
    if !has_pmu("kprobe") {
        tests::skip(Skip::Environment, "no kprobe PMU (CONFIG_KPROBES off)");
        return None;
    }
    if !is_root() {
        tests::skip(Skip::Privilege, "kprobes need CAP_PERFMON or root");
        return None;
    }
    let t = getppid_symbol();
    if t.is_none() {
        tests::skip(
            Skip::Environment,
            &format!("none of {GETPPID_SYMBOLS:?} in /proc/kallsyms"),
        );
    }
    t
}

/// Calls `getppid(2)` `n` times through the raw system call (no libc caching).
fn getppid_n(n: u64) {
    for _ in 0..n {
        // SAFETY: getppid takes no arguments and cannot fail.
        unsafe { libc::syscall(libc::SYS_getppid) };
    }
}

fn gettid() -> u32 {
    // SAFETY: gettid takes no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}

fn kprobe(name: &str) -> Kprobe {
    Kprobe::Symbol {
        name: CString::new(name).unwrap(),
        offset: 0,
    }
}

/// Counts `getppid` entries (or returns) of this thread with `event` over `n` calls.
fn count_calls<E>(event: E, n: u64) -> u64
where
    E: TryInto<perf_event::event::Event>,
    Error: From<E::Error>,
{
    let c = Counter::new(event, ME, Opts::default()).unwrap();
    c.enable().unwrap();
    getppid_n(n);
    c.disable().unwrap();
    c.stat().unwrap().count
}

#[test]
fn kprobe_counts_every_call() {
    let Some(t) = setup() else { return };
    for n in [1, 100, 1000] {
        assert_eq!(
            count_calls(kprobe(t.name), n),
            n,
            "kprobe {} over {n} calls",
            t.name
        );
    }
}

#[test]
fn kretprobe_counts_every_return() {
    let Some(t) = setup() else { return };
    let ret = Kretprobe::Symbol {
        name: CString::new(t.name).unwrap(),
        offset: 0,
    };
    for n in [1, 100, 1000] {
        assert_eq!(
            count_calls(&ret, n),
            n,
            "kretprobe {} over {n} calls",
            t.name
        );
    }
}

#[test]
fn kprobe_by_address_counts_like_by_name() {
    let Some(t) = setup() else { return };
    let Some(addr) = t.addr else {
        tests::skip(Skip::Environment, "/proc/kallsyms hides addresses");
        return;
    };
    assert_eq!(
        count_calls(Kprobe::Addr(addr), 500),
        500,
        "kprobe {addr:#x} ({})",
        t.name
    );
}

#[test]
fn kprobe_samples_every_call_with_task_and_ip() {
    let Some(t) = setup() else { return };
    let mut o = Opts {
        sample_on: SampleOn::Count(1),
        ..Opts::default()
    };
    o.sample_format.code_addr = true;
    o.record_id_format.task = true;
    let c = Counter::new(kprobe(t.name), ME, &o).unwrap();
    let sampler = c.sampler(4).unwrap();
    const N: u64 = 300;
    c.enable().unwrap();
    getppid_n(N);
    c.disable().unwrap();
    let (pid, tid) = (std::process::id(), gettid());
    let mut ips = Vec::new();
    for (_, r) in sampler.iter() {
        if let Record::Sample(s) = r {
            let task = s.record_id.task.expect("PERF_SAMPLE_TID asked for");
            assert_eq!((task.pid, task.tid), (pid, tid), "a sample of another task");
            ips.push(s.code_addr.expect("PERF_SAMPLE_IP asked for").0);
        }
    }
    assert_eq!(ips.len() as u64, N, "one sample per call");
    assert_eq!(c.stat().unwrap().count, N);
    ips.dedup();
    assert_eq!(ips.len(), 1, "one probe point, several ips: {ips:#x?}");
    let ip = ips[0];
    assert!(ip >= 0xffff_8000_0000_0000, "not a kernel address: {ip:#x}");
    if let Some(addr) = t.addr {
        // The probe hits at the function's entry (an int3 or the ftrace call site just after it).
        assert!(
            (addr..addr + 64).contains(&ip),
            "ip {ip:#x} is not at {} ({addr:#x})",
            t.name
        );
    }
}

#[test]
fn kprobe_on_a_missing_function_is_refused_by_name() {
    require!(
        has_pmu("kprobe"),
        Skip::Environment,
        "no kprobe PMU (CONFIG_KPROBES off)"
    );
    require!(
        is_root(),
        Skip::Privilege,
        "kprobes need CAP_PERFMON or root"
    );
    let e = Counter::new(kprobe("no_such_kernel_function_xyz"), ME, Opts::default()).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("no_such_kernel_function_xyz"), "{msg}");
    assert!(!matches!(e, Error::Permission { .. }), "{msg}");
}
