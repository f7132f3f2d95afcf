//! User-space counter reads (`SelfReadCounter`): the value read from the PMU register equals `read(2)`'s,
//! and where the kernel allows no such read the counter falls back to `read(2)` and says why.
//!
//! On arm64 (Linux 6.1+) the kernel allows them while `kernel.perf_user_access` is 1 (the kernel matrix's
//! guests set it) for events opened with the PMU's `rdpmc` bit: the cycles event gets the cycle counter
//! (page index 32, `PMCCNTR_EL0`), instructions an event counter (index n, `PMEVCNTR<n-1>_EL0`), both 32
//! bits wide (`pmc_width`), so the register value is sign-extended. 5.10 has no such reads: the page
//! says `cap_user_rdpmc` 0 and every read is a `read(2)`.
#![allow(clippy::field_reassign_with_default)] // options are set field by field, as in the docs

use perf_event::config::{Cpu, Opts, Proc};
use perf_event::count::{ReadPath, SelfReadCounter};
use perf_event::event::hw::Hardware;
use perf_event::event::sw::Software;
use tests::hw::{exact, kernel, spin};
use tests::{has_hardware_pmu, require, Skip};

const ME: (Proc, perf_event::config::All) = (Proc::CURRENT, Cpu::ALL);
const SYSCTL: &str = "/proc/sys/kernel/perf_user_access";

fn user() -> Opts {
    let mut o = Opts::default();
    o.exclude.kernel = true;
    o.exclude.hv = true;
    o.stat_format.time_enabled = true;
    o.stat_format.time_running = true;
    o
}

/// Whether this kernel and machine can read counters from user space at all (as the tests expect).
fn user_reads_expected() -> bool {
    if cfg!(target_arch = "aarch64") {
        std::fs::read_to_string(SYSCTL).is_ok_and(|v| v.trim() == "1")
    } else {
        true
    }
}

/// For `event`: its read path while counting, and the gaps `read(2) - user read` of three rounds.
fn gaps(event: Hardware, name: &str) -> Option<Vec<u64>> {
    let c = match SelfReadCounter::new(event.clone(), ME, user()) {
        Ok(c) => c,
        Err(e) => {
            println!("{name}: not offered here ({e})");
            return None;
        }
    };
    assert!(
        matches!(c.read_path().unwrap(), ReadPath::Syscall { .. }),
        "a disabled counter is not on the PMU"
    );
    c.enable().unwrap();
    let mut gaps = Vec::new();
    let mut last = 0;
    for round in 0..3 {
        spin(1_000_000);
        let path = c.read_path().unwrap();
        let fast = c.stat().unwrap();
        let slow = c.counter().stat().unwrap();
        println!(
            "{name} round {round}: {path:?}: user read {} read(2) {} (gap {}), times {:?}/{:?} vs {:?}/{:?}",
            fast.count,
            slow.count,
            slow.count as i64 - fast.count as i64,
            fast.time_enabled,
            fast.time_running,
            slow.time_enabled,
            slow.time_running
        );
        if user_reads_expected() {
            assert!(
                matches!(path, ReadPath::UserSpace { .. }),
                "{name}: expected a user-space read here: {path:?}"
            );
        }
        if let ReadPath::UserSpace { counter, pmc_width } = path {
            if cfg!(target_arch = "aarch64") {
                // Without the PMU's 64-bit user-access bit the kernel gives 32-bit counters.
                assert_eq!(pmc_width, 32);
                if event == Hardware::CpuCycle {
                    assert_eq!(counter, 31, "cycles on PMCCNTR_EL0 (index 32)");
                } else {
                    assert!(counter < 31, "{name} on an event counter: {counter}");
                }
            }
        }
        assert!(fast.count > last, "the count did not grow");
        assert!(
            slow.count >= fast.count,
            "read(2) after the user read saw less"
        );
        assert!(fast.time_enabled.unwrap() > 0 && fast.time_running.unwrap() > 0);
        last = slow.count;
        gaps.push(slow.count - fast.count);
    }
    c.disable().unwrap();
    // Disabled: off the PMU, so read(2), and the same value twice.
    let off = c.read_path().unwrap();
    assert!(matches!(off, ReadPath::Syscall { .. }), "{off:?}");
    assert_eq!(c.stat().unwrap().count, c.counter().stat().unwrap().count);
    Some(gaps)
}

#[test]
fn a_user_space_read_equals_read2_within_the_instructions_between() {
    require!(
        has_hardware_pmu(),
        Skip::Hardware,
        "no hardware PMU here (the arm64 guests of `cargo xtask kernel-matrix --arch aarch64` have one)"
    );
    let cycles = gaps(Hardware::CpuCycle, "cycles:u").expect("cycles open");
    let instructions = gaps(Hardware::Instr, "instructions:u");
    println!("gaps read(2) - user read: cycles {cycles:?}, instructions {instructions:?}");
    if let Some(g) = &instructions {
        // Instructions between the two reads in user space (the rest of `stat` and the entry of the
        // read(2)): a small constant.
        assert!(g.iter().all(|&v| v < 2_000), "{g:?}");
        if exact() && user_reads_expected() {
            assert!(g.iter().all(|&v| v == g[0]), "the gap varies: {g:?}");
        }
    }
    if exact() {
        assert!(instructions.is_some(), "exact mode counts instructions");
        if user_reads_expected() {
            // One cycle per instruction: the cycle counter's gap is the instructions' gap.
            assert_eq!(Some(&cycles), instructions.as_ref());
        }
    }
}

#[test]
fn without_kernel_support_reads_fall_back_and_say_why() {
    require!(
        has_hardware_pmu(),
        Skip::Hardware,
        "no hardware PMU here (the arm64 guests of `cargo xtask kernel-matrix --arch aarch64` have one)"
    );
    require!(
        cfg!(target_arch = "aarch64"),
        Skip::Hardware,
        "the user-access switch is arm64's kernel.perf_user_access"
    );
    let old = std::fs::read_to_string(SYSCTL).ok();
    if exact() {
        // The matrix's kernels: 5.10 has no user reads, 6.1 and later have the switch.
        assert_eq!(old.is_some(), kernel() >= (6, 1), "{SYSCTL}");
    }
    let expect_reason = |c: &SelfReadCounter, words: &str| {
        c.enable().unwrap();
        spin(100_000);
        let path = c.read_path().unwrap();
        let fast = c.stat().unwrap().count;
        let slow = c.counter().stat().unwrap().count;
        c.disable().unwrap();
        println!("{path:?}: {fast} then read(2) {slow}");
        match path {
            ReadPath::Syscall { reason } => assert!(reason.contains(words), "{reason}"),
            other => panic!("expected a read(2) fallback: {other:?}"),
        }
        assert!(fast > 0 && slow >= fast);
    };
    match old {
        None => {
            let c = SelfReadCounter::new(Hardware::CpuCycle, ME, user()).unwrap();
            expect_reason(&c, "Linux 6.1");
        }
        Some(v) => {
            require!(
                tests::is_root(),
                Skip::Privilege,
                "writing {SYSCTL} needs root"
            );
            std::fs::write(SYSCTL, "0\n").unwrap();
            let r = std::panic::catch_unwind(|| {
                let c = SelfReadCounter::new(Hardware::CpuCycle, ME, user()).unwrap();
                expect_reason(&c, "perf_user_access is 0");
            });
            std::fs::write(SYSCTL, v).unwrap();
            if let Err(p) = r {
                std::panic::resume_unwind(p);
            }
        }
    }
}

#[test]
fn a_software_counter_reads_with_read2_and_says_why() {
    let c = SelfReadCounter::new(Software::PageFault, ME, user()).unwrap();
    c.enable().unwrap();
    tests::touch_pages(8);
    match c.read_path().unwrap() {
        ReadPath::Syscall { reason } => {
            assert!(reason.contains("not a hardware CPU PMU event"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    let n = c.stat().unwrap().count;
    c.disable().unwrap();
    assert_eq!(n, 8);
    assert_eq!(c.stat().unwrap().count, 8);
}

#[test]
fn counters_only_read2_can_serve_say_so() {
    use perf_event::config::Inherit;
    let mut inherited = user();
    inherited.inherit = Some(Inherit::NewChild);
    let mut with_id = user();
    with_id.stat_format.id = true;
    for (opts, words) in [(inherited, "inherited"), (with_id, "read format")] {
        let c = SelfReadCounter::new(Hardware::CpuCycle, ME, &opts)
            .or_else(|_| SelfReadCounter::new(Software::TaskClock, ME, &opts))
            .unwrap();
        match c.read_path().unwrap() {
            ReadPath::Syscall { reason } => assert!(reason.contains(words), "{reason}"),
            other => panic!("{other:?}"),
        }
        c.enable().unwrap();
        tests::busy_loop(std::time::Duration::from_millis(2));
        c.disable().unwrap();
        assert_eq!(c.stat().unwrap(), c.counter().stat().unwrap());
    }
}
