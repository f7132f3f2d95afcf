//! Support for the hardware-PMU tests (`tests/tests/hw_*.rs`): a loop with a known instruction count, and
//! what the machine's PMU is.
//!
//! On most machines that run the suite (VMs, this project's CI host) there is no hardware PMU and these
//! tests skip. `cargo xtask kernel-matrix --arch aarch64` boots Debian's arm64 kernels under qemu, whose
//! emulated `armv8_pmuv3` counts for real; its **exact** mode (`-icount shift=0 -smp 1`) makes every
//! instruction one cycle and sets `PERF_TEST_EXACT_PMU=1`, and the tests then assert exact values.

use std::ops::Range;

#[cfg(target_arch = "aarch64")]
std::arch::global_asm!(
    ".text",
    ".p2align 4",
    ".global perf_tests_spin",
    ".type perf_tests_spin, %function",
    "perf_tests_spin:",
    // A frame record, so that the kernel's frame-pointer walk of a sample's user stack finds the caller.
    "stp x29, x30, [sp, #-16]!",
    "mov x29, sp",
    "2:",
    "subs x0, x0, #1",
    "b.ne 2b",
    "ldp x29, x30, [sp], #16",
    "ret",
    ".size perf_tests_spin, . - perf_tests_spin",
    ".global perf_tests_spin_end",
    "perf_tests_spin_end:",
);

#[cfg(target_arch = "x86_64")]
std::arch::global_asm!(
    ".text",
    ".p2align 4",
    ".global perf_tests_spin",
    ".type perf_tests_spin, @function",
    "perf_tests_spin:",
    "push rbp",
    "mov rbp, rsp",
    "2:",
    "dec rdi",
    "jnz 2b",
    "pop rbp",
    "ret",
    ".size perf_tests_spin, . - perf_tests_spin",
    ".global perf_tests_spin_end",
    "perf_tests_spin_end:",
);

#[cfg(any(target_arch = "aarch64", target_arch = "x86_64"))]
extern "C" {
    fn perf_tests_spin(iterations: u64);
    static perf_tests_spin_end: u8;
}

/// Instructions per iteration of [`spin`]'s loop.
pub const INSNS_PER_ITERATION: u64 = 2;

/// Runs `iterations` (at least 1) of a two-instruction loop (`subs`/`b.ne` on aarch64, `dec`/`jnz` on
/// x86_64), in a function with a frame record; `2 * iterations + 4` instructions from its first to
/// its last.
///
/// # Panics
///
/// If `iterations` is 0, or on an architecture without the loop.
#[inline(never)]
pub fn spin(iterations: u64) {
    assert!(iterations > 0, "spin(0) would run 2^64 iterations");
    #[cfg(any(target_arch = "aarch64", target_arch = "x86_64"))]
    // SAFETY: the function only counts its argument register down to 0 and keeps the ABI (it saves and
    // restores the frame pointer and link register, touches no memory beyond its own stack slot).
    unsafe {
        perf_tests_spin(iterations)
    };
    #[cfg(not(any(target_arch = "aarch64", target_arch = "x86_64")))]
    panic!("no spin loop for this architecture");
}

/// The code addresses of [`spin`]'s function, where samples taken while it runs must lie.
pub fn spin_code() -> Range<u64> {
    #[cfg(any(target_arch = "aarch64", target_arch = "x86_64"))]
    {
        let start = perf_tests_spin as *const () as u64;
        // Only the symbol's address is taken (safe for an extern static), never its content.
        let end = std::ptr::addr_of!(perf_tests_spin_end) as u64;
        start..end
    }
    #[cfg(not(any(target_arch = "aarch64", target_arch = "x86_64")))]
    {
        0..0
    }
}

/// Whether the tests run under the kernel matrix's exact mode (`PERF_TEST_EXACT_PMU=1`): qemu's
/// emulated PMU with one cycle per instruction, where counts are exact and reproducible.
pub fn exact() -> bool {
    std::env::var("PERF_TEST_EXACT_PMU").is_ok_and(|v| v == "1")
}

/// The CPU PMU's sysfs name (`cpu`, `cpu_core`, `armv8_pmuv3_0`, ...), if there is one.
pub fn cpu_pmu() -> Option<String> {
    let dir = std::fs::read_dir("/sys/bus/event_source/devices").ok()?;
    let mut names: Vec<String> = dir
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n == "cpu" || n == "cpu_core" || n == "cpu_atom" || n.starts_with("armv"))
        .collect();
    names.sort();
    names.into_iter().next()
}

/// The running kernel's `(major, minor)`.
pub fn kernel() -> (u32, u32) {
    let r = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut it = r
        .trim()
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse().unwrap_or(0));
    (it.next().unwrap_or(0), it.next().unwrap_or(0))
}

/// The executable mappings of this process's own binary, from `/proc/self/maps`.
pub fn own_code() -> Vec<Range<u64>> {
    let exe = std::fs::read_link("/proc/self/exe").unwrap_or_default();
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    maps.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let range = f.next()?;
            let perms = f.next()?;
            let path = f.nth(3)?;
            if !perms.contains('x') || std::path::Path::new(path) != exe {
                return None;
            }
            let (a, b) = range.split_once('-')?;
            Some(u64::from_str_radix(a, 16).ok()?..u64::from_str_radix(b, 16).ok()?)
        })
        .collect()
}

/// How many user-space cycles counters the PMU schedules in one group: a group of them, leader and
/// members opened enabled (the kernel checks enabled events as each member joins), grown until the
/// kernel refuses a member. 0 when not even the leader opens.
pub fn cycles_group_capacity() -> usize {
    use perf_event::config::{sibling, Cpu, Opts, Proc};
    use perf_event::count::CounterGroup;
    use perf_event::event::hw::Hardware;

    let mut leader = Opts::default();
    leader.exclude.kernel = true;
    leader.exclude.hv = true;
    leader.enable = true;
    let member = sibling::Opts {
        exclude: leader.exclude.clone(),
        enable: true,
        ..Default::default()
    };
    let Ok(mut g) = CounterGroup::new(Hardware::CpuCycle, (Proc::CURRENT, Cpu::ALL), leader) else {
        return 0;
    };
    while g.len() < 64 && g.add(Hardware::CpuCycle, &member).is_ok() {}
    g.len()
}
