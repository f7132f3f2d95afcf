//! Hardware counting on a real PMU: cycles and instructions of a known loop, user/kernel filtering,
//! generic events the PMU lacks, multiplexing, and groups at and beyond the PMU's counters.
//!
//! Skips where there is no hardware PMU (VMs, this project's CI host). The arm64 guests of `cargo xtask
//! kernel-matrix --arch aarch64` have qemu's `armv8_pmuv3` (6 event counters + the cycle counter); in
//! their exact mode (`PERF_TEST_EXACT_PMU=1`: `-icount shift=0 -smp 1`, one cycle per instruction) the
//! values asserted are exact. Every test prints what it measured, for the matrix log.
#![allow(clippy::field_reassign_with_default)] // options are set field by field, as in the docs

use perf_event::config::{sibling, Cpu, Opts, Proc};
use perf_event::count::{Counter, CounterGroup, Scaled};
use perf_event::event::hw::Hardware;
use perf_event::Error;
use tests::hw::{cpu_pmu, cycles_group_capacity, exact, spin, INSNS_PER_ITERATION};
use tests::{has_hardware_pmu, require, Skip};

const ME: (Proc, perf_event::config::All) = (Proc::CURRENT, Cpu::ALL);
const NO_PMU: &str = "no hardware PMU here (sysfs lists no cpu or armv* PMU); the arm64 guests of \
                      `cargo xtask kernel-matrix --arch aarch64` have one";
/// qemu's armv8_pmuv3: PMCR_EL0.N = 6 event counters, plus the cycle counter.
const QEMU_COUNTERS: usize = 7;

/// User space only, with the times (so multiplexing shows).
fn user() -> Opts {
    let mut o = Opts::default();
    o.exclude.kernel = true;
    o.exclude.hv = true;
    o.stat_format.time_enabled = true;
    o.stat_format.time_running = true;
    o
}

fn sib(enable: bool) -> sibling::Opts {
    let mut o = sibling::Opts::default();
    o.exclude.kernel = true;
    o.exclude.hv = true;
    o.enable = enable;
    o
}

/// Whether the PMU counts retired instructions (qemu offers it only under icount).
fn has_instructions() -> bool {
    Counter::new(Hardware::Instr, ME, user()).is_ok()
}

/// Runs `iterations` of the loop with `group` counting; returns every member's count.
fn group_counts(group: &mut CounterGroup, iterations: u64) -> Vec<u64> {
    group.disable().unwrap();
    group.reset().unwrap();
    group.enable().unwrap();
    spin(iterations);
    group.disable().unwrap();
    let s = group.stat().unwrap();
    assert_eq!(
        s.time_enabled(),
        s.time_running(),
        "the group was not on the PMU the whole time"
    );
    s.iter().map(|m| m.count).collect()
}

#[test]
fn cycles_and_instructions_of_a_known_loop() {
    require!(has_hardware_pmu(), Skip::Hardware, "{NO_PMU}");
    let mut group = CounterGroup::new(Hardware::CpuCycle, ME, user()).unwrap();
    let with_instr = match group.add(Hardware::Instr, sib(false)) {
        Ok(_) => true,
        Err(e) => {
            assert!(!exact(), "exact mode: the PMU must count instructions: {e}");
            assert!(matches!(e, Error::NotSupported { .. }), "{e}");
            println!("instructions are not offered by this PMU ({e}); cycles only");
            false
        }
    };
    let n = 10_000_000u64;
    let mut runs = Vec::new();
    for iterations in [n, 2 * n, n, 2 * n] {
        let c = group_counts(&mut group, iterations);
        println!(
            "{iterations} iterations: cycles:u {}{}",
            c[0],
            c.get(1)
                .map(|i| format!(", instructions:u {i}"))
                .unwrap_or_default()
        );
        runs.push((iterations, c));
    }
    for (iterations, c) in &runs {
        let loop_insns = INSNS_PER_ITERATION * iterations;
        assert!(c[0] > 0, "no cycles counted");
        if !with_instr {
            continue;
        }
        let instr = c[1];
        assert!(
            instr >= loop_insns,
            "{instr} instructions for {iterations} iterations of {INSNS_PER_ITERATION}"
        );
        if exact() {
            // One cycle per instruction, and the loop's instructions plus the same few around it.
            assert_eq!(c[0], instr, "cycles == instructions under -icount shift=0");
            let overhead = instr - loop_insns;
            assert!(overhead < 1000, "{overhead} instructions beyond the loop's");
            let first = runs[0].1[1] - INSNS_PER_ITERATION * runs[0].0;
            assert_eq!(
                overhead, first,
                "the instructions around the loop differ between runs"
            );
        } else {
            // Real hardware: interrupts and skid at the ioctls, never more than a sliver.
            assert!(
                instr < loop_insns + loop_insns / 1000 + 10_000,
                "{instr} instructions for {loop_insns} in the loop"
            );
        }
    }
    if exact() && with_instr {
        let (i, c) = &runs[1];
        println!(
            "exact: {i} iterations of {INSNS_PER_ITERATION} instructions = {} instructions:u = {} cycles:u \
             (the loop's {} + {} around it)",
            c[1],
            c[0],
            INSNS_PER_ITERATION * i,
            c[1] - INSNS_PER_ITERATION * i
        );
    }
}

fn getppid() {
    // SAFETY: getppid has no arguments and no preconditions.
    unsafe { libc::syscall(libc::SYS_getppid) };
}

/// User-only and kernel-only counts (of instructions, else cycles) of `syscalls` getppid calls and a loop.
fn user_and_kernel(group: &mut CounterGroup, syscalls: u64, iterations: u64) -> (u64, u64) {
    group.disable().unwrap();
    group.reset().unwrap();
    group.enable().unwrap();
    for _ in 0..syscalls {
        getppid();
    }
    spin(iterations);
    group.disable().unwrap();
    let s = group.stat().unwrap();
    (s.count(0).unwrap(), s.count(1).unwrap())
}

#[test]
fn user_and_kernel_filtering() {
    require!(has_hardware_pmu(), Skip::Hardware, "{NO_PMU}");
    let event = if has_instructions() {
        Hardware::Instr
    } else {
        Hardware::CpuCycle
    };
    let mut group = CounterGroup::new(event.clone(), ME, user()).unwrap();
    let mut kernel_only = sib(false);
    kernel_only.exclude = Default::default();
    kernel_only.exclude.user = true;
    kernel_only.exclude.hv = true;
    match group.add(event.clone(), kernel_only) {
        Ok(_) => {}
        Err(e @ Error::Permission { .. }) => {
            tests::skip(Skip::Privilege, &format!("counting kernel space: {e}"));
            return;
        }
        Err(e) => panic!("{e}"),
    }
    let name = if event == Hardware::Instr {
        "instructions"
    } else {
        "cycles"
    };
    let (n, k) = (5_000_000u64, 2_000u64);
    // Interrupts (timer ticks) count as kernel work too, and a guest on a loaded host takes more of
    // them during the same loop: one pair of runs once counted fewer kernel cycles with the system
    // calls than without. Interrupts only ever add, so the least of three interleaved runs of each
    // is the one closest to the work itself.
    let (mut u0, mut k0, mut u1, mut k1) = (u64::MAX, u64::MAX, u64::MAX, u64::MAX);
    for _ in 0..3 {
        let (u, kc) = user_and_kernel(&mut group, 0, n);
        (u0, k0) = (u0.min(u), k0.min(kc));
        let (u, kc) = user_and_kernel(&mut group, k, n);
        (u1, k1) = (u1.min(u), k1.min(kc));
    }
    println!(
        "{name}: loop alone user {u0} kernel {k0}; with {k} getppid calls user {u1} kernel {k1}: \
         {:.1} kernel and {:.1} user {name} per call",
        (k1 as f64 - k0 as f64) / k as f64,
        (u1 as f64 - u0 as f64) / k as f64
    );
    assert!(k1 > k0, "the system calls added no kernel {name}");
    if event == Hardware::Instr {
        let loop_insns = INSNS_PER_ITERATION * n;
        // The loop counts in user space only: what is counted in the kernel meanwhile (timer ticks) is
        // a sliver of it.
        assert!(
            u0 >= loop_insns && u0 < loop_insns + loop_insns / 1000 + 10_000,
            "{u0}"
        );
        assert!(
            k0 < loop_insns / 100,
            "{k0} kernel instructions during a user-space loop"
        );
        let per_call_kernel = (k1 - k0) / k;
        let per_call_user = u1.saturating_sub(u0) / k;
        // A getppid is a few hundred instructions in the kernel (316 to 492 on 5.10..7.2 under qemu)
        // and some in user space (the libc wrapper and the loop: about a hundred in a debug build).
        assert!(
            (50..5_000).contains(&per_call_kernel),
            "{per_call_kernel} kernel instructions per getppid"
        );
        assert!(
            per_call_user < 1000,
            "{per_call_user} user instructions per getppid"
        );
    }
}

#[test]
fn generic_events_the_pmu_lacks_are_not_supported_by_name() {
    require!(has_hardware_pmu(), Skip::Hardware, "{NO_PMU}");
    let pmu = cpu_pmu().expect("a CPU PMU");
    let mut missing = Vec::new();
    for (event, name) in [
        (Hardware::CacheAccess, "cache-references"),
        (Hardware::CacheMiss, "cache-misses"),
        (Hardware::BranchInstr, "branches"),
        (Hardware::BranchMiss, "branch-misses"),
        (Hardware::BusCycle, "bus-cycles"),
        (Hardware::RefCpuCycle, "ref-cycles"),
    ] {
        match Counter::new(event, ME, user()) {
            Ok(_) => println!("{name}: counted by {pmu}"),
            Err(e) => {
                let msg = e.to_string();
                println!("{name}: {msg}");
                assert!(matches!(e, Error::NotSupported { .. }), "{name}: {e:?}");
                assert!(msg.starts_with(&format!("{name}:")), "{msg}");
                assert!(msg.contains(&pmu), "the message names no PMU: {msg}");
                assert!(msg.contains("generic hardware event"), "{msg}");
                missing.push(name);
            }
        }
    }
    if exact() {
        // qemu's PMU implements cycles, instructions (under icount) and stall events only.
        assert_eq!(missing.len(), 6, "qemu lacks all six: {missing:?}");
    }
}

#[test]
fn more_events_than_counters_are_multiplexed_and_scaled() {
    require!(has_hardware_pmu(), Skip::Hardware, "{NO_PMU}");
    let (event, name) = if has_instructions() {
        (Hardware::Instr, "instructions:u")
    } else {
        (Hardware::CpuCycle, "cycles:u")
    };
    // Every counter of the process starts and stops at one prctl, so each sees the same window. 160 M
    // instructions: 40 rotations of the 4 ms multiplexing tick.
    let n = 80_000_000u64;
    let truth = {
        let c = Counter::new(event.clone(), ME, user()).unwrap();
        Counter::enable_all().unwrap();
        spin(n);
        Counter::disable_all().unwrap();
        let s = c.stat().unwrap();
        assert_eq!(
            s.time_enabled, s.time_running,
            "one counter alone runs all the time"
        );
        s.count
    };
    let counters: Vec<Counter> = (0..10)
        .map(|_| Counter::new(event.clone(), ME, user()).unwrap())
        .collect();
    Counter::enable_all().unwrap();
    spin(n);
    Counter::disable_all().unwrap();
    let mut worst = 0f64;
    let mut shares = Vec::new();
    for c in &counters {
        let s = c.stat().unwrap();
        let (value, running) = match s.scaled() {
            Scaled::Estimate { value, running } => (value, running),
            other => panic!("10 counters on a PMU with fewer: {other:?} ({s:?})"),
        };
        let err = (value as f64 - truth as f64).abs() / truth as f64;
        worst = worst.max(err);
        shares.push(running);
        println!(
            "{name}: raw {} ran {:.2}% scaled {value} (truth {truth}, off by {:.4}%)",
            s.count,
            running * 100.0,
            err * 100.0
        );
    }
    println!(
        "10 x {name} over {n} iterations: truth {truth}, worst scaled error {:.4}%, mean running {:.2}%",
        worst * 100.0,
        shares.iter().sum::<f64>() * 10.0
    );
    if exact() {
        assert!(worst < 0.001, "a scaled count is {:.4}% off", worst * 100.0);
        // Six or seven of ten counters on at a time.
        let mean = shares.iter().sum::<f64>() / shares.len() as f64;
        assert!((0.5..0.8).contains(&mean), "mean running fraction {mean}");
    } else if event == Hardware::Instr {
        assert!(worst < 0.05, "a scaled count is {:.2}% off", worst * 100.0);
    } else {
        // Cycles of another run are no truth: they follow the clock (frequency scaling on hardware,
        // the host's wall time and load under qemu without icount). Each counter was multiplexed
        // (an Estimate with 0 < running < 1, checked above).
        println!("cycles: the truth of another run is not comparable; values not compared");
    }
}

#[test]
fn a_full_group_counts_as_one() {
    require!(has_hardware_pmu(), Skip::Hardware, "{NO_PMU}");
    let k = cycles_group_capacity();
    println!("{k} cycles counters fit in one group");
    if exact() {
        assert_eq!(k, QEMU_COUNTERS);
    }
    let mut leader_opts = user();
    leader_opts.enable = true;
    let mut g = CounterGroup::new(Hardware::CpuCycle, ME, leader_opts).unwrap();
    for _ in 1..k {
        g.add(Hardware::CpuCycle, sib(true)).unwrap();
    }
    let c = group_counts(&mut g, 10_000_000);
    println!("group of {k} cycles:u: {c:?}");
    assert_eq!(c.len(), k);
    if exact() {
        assert!(c.iter().all(|&v| v == c[0]), "members differ: {c:?}");
    } else {
        let (lo, hi) = (c.iter().min().unwrap(), c.iter().max().unwrap());
        assert!(hi - lo <= hi / 1000 + 100, "members differ: {c:?}");
    }
}

#[test]
fn a_member_beyond_the_counters_is_refused_with_their_number() {
    require!(has_hardware_pmu(), Skip::Hardware, "{NO_PMU}");
    let pmu = cpu_pmu().expect("a CPU PMU");
    let mut leader_opts = user();
    leader_opts.enable = true;
    let mut g = CounterGroup::new(Hardware::CpuCycle, ME, leader_opts).unwrap();
    let err = loop {
        match g.add(Hardware::CpuCycle, sib(true)) {
            Ok(_) => assert!(g.len() < 64, "64 members fit: no limit found"),
            Err(e) => break e,
        }
    };
    let k = g.len();
    let msg = err.to_string();
    println!("member {} refused: {msg}", k + 1);
    if exact() {
        assert_eq!(k, QEMU_COUNTERS);
    }
    assert!(matches!(err, Error::Open { .. }), "{err:?}");
    assert_eq!(err.raw_os_error(), Some(libc::EINVAL));
    for words in [
        "cannot be scheduled",
        &format!("PMU {pmu} has {k} counters"),
        &format!("{} hardware events", k + 1),
    ] {
        assert!(msg.contains(words), "{words:?} not in: {msg}");
    }
}

#[test]
fn a_group_that_can_never_fit_is_not_counted() {
    require!(has_hardware_pmu(), Skip::Hardware, "{NO_PMU}");
    let k = cycles_group_capacity();
    // A disabled leader and enabled members (as `perf stat` opens a group): the kernel checks only
    // enabled events when a member joins, so it accepts one more than fits, and the group can never be
    // put on the PMU. (Members opened disabled would be enabled one by one by the group enable, and
    // the group would run, counting nothing, until the last one is.)
    let mut g = CounterGroup::new(Hardware::CpuCycle, ME, user()).unwrap();
    for _ in 0..k {
        g.add(Hardware::CpuCycle, sib(true)).unwrap();
    }
    g.enable().unwrap();
    spin(5_000_000);
    g.disable().unwrap();
    let s = g.stat().unwrap();
    println!(
        "group of {}: enabled {:?} ns, running {:?} ns, counts {:?}",
        s.len(),
        s.time_enabled(),
        s.time_running(),
        s.iter().map(|m| m.count).collect::<Vec<_>>()
    );
    assert_eq!(s.len(), k + 1);
    assert!(s.time_enabled().unwrap() > 0);
    assert_eq!(s.time_running(), Some(0));
    for i in 0..s.len() {
        assert_eq!(s.scaled(i), Some(Scaled::NotCounted), "member {i}");
        assert_eq!(s.count(i), Some(0));
    }
}
