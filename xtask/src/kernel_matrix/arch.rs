//! What differs between the matrix's two architectures: the Debian packages, the Rust target, the qemu
//! machine and how each guest mode boots it.
//!
//! x86_64 guests under TCG have no PMU (qemu offers no virtual PMU without KVM), so they run the whole
//! suite in one mode. aarch64 guests (`-M virt -cpu max`) have qemu's emulated `armv8_pmuv3`: with
//! `-icount shift=0 -smp 1` every instruction is one cycle and counts are exact and identical on every
//! kernel (see `research/arm64-pmu.md`), so each kernel boots once in that **exact** mode for the hardware
//! tests, and the newest boots once more without icount on two vCPUs for the whole **suite**.

use std::path::PathBuf;

/// An architecture of the matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    /// `qemu-system-x86_64`, Debian's `amd64` cloud kernels.
    X86_64,
    /// `qemu-system-aarch64 -M virt -cpu max`, Debian's `arm64` cloud kernels.
    Aarch64,
}

/// How a guest runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Every test binary, on `--smp` vCPUs, without instruction counting.
    Suite,
    /// The hardware tests (`hw_*`) only, under `-icount shift=0 -smp 1`: exact PMU counts.
    Exact,
}

impl Mode {
    /// The name in the table and the log file names.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Suite => "suite",
            Mode::Exact => "exact",
        }
    }

    /// Parses `--mode`: `exact`, `suite` or `all`.
    pub fn parse_list(s: &str) -> Result<Vec<Mode>, String> {
        match s {
            "all" => Ok(vec![Mode::Exact, Mode::Suite]),
            "exact" => Ok(vec![Mode::Exact]),
            "suite" => Ok(vec![Mode::Suite]),
            other => Err(format!(
                "--mode {other:?}: pick exact, suite or all (aarch64 only; x86_64 runs the suite)"
            )),
        }
    }
}

impl Arch {
    /// Parses `--arch`: `x86_64` (or `amd64`), `aarch64` (or `arm64`), or `all`.
    pub fn parse_list(s: &str) -> Result<Vec<Arch>, String> {
        match s {
            "all" => Ok(vec![Arch::X86_64, Arch::Aarch64]),
            "x86_64" | "amd64" => Ok(vec![Arch::X86_64]),
            "aarch64" | "arm64" => Ok(vec![Arch::Aarch64]),
            other => Err(format!("--arch {other:?}: pick x86_64, aarch64 or all")),
        }
    }

    /// The Rust name (`uname -m`).
    pub fn name(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64",
            Arch::Aarch64 => "aarch64",
        }
    }

    /// The Debian architecture.
    pub fn debian(self) -> &'static str {
        match self {
            Arch::X86_64 => "amd64",
            Arch::Aarch64 => "arm64",
        }
    }

    /// The Rust target the test binaries are built for: musl, so they are static.
    pub fn rust_target(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64-unknown-linux-musl",
            Arch::Aarch64 => "aarch64-unknown-linux-musl",
        }
    }

    /// The metapackage that depends on the current cloud kernel of a suite.
    pub fn kernel_metapackage(self) -> &'static str {
        match self {
            Arch::X86_64 => "linux-image-cloud-amd64",
            Arch::Aarch64 => "linux-image-cloud-arm64",
        }
    }

    /// Where kernels, the initramfs and the logs of this architecture go, under `matrix`.
    /// x86_64 keeps the folder layout it always had.
    pub fn dir(self, matrix: PathBuf) -> PathBuf {
        match self {
            Arch::X86_64 => matrix,
            Arch::Aarch64 => matrix.join("arm64"),
        }
    }

    /// The guest modes this architecture runs, of those asked for.
    pub fn modes(self, asked: &[Mode]) -> Vec<Mode> {
        match self {
            Arch::X86_64 => vec![Mode::Suite],
            Arch::Aarch64 => asked.to_vec(),
        }
    }

    /// Environment for `cargo` when building for this architecture (a variable the user set wins).
    ///
    /// aarch64 links with the toolchain's `rust-lld` (no cross gcc needed) and asks for a GNU build-id
    /// note, which rust-lld writes only on request and the MMAP2 build-id test needs. Its binaries are
    /// built with `-C opt-level=1 -C debuginfo=0`: emulating another architecture, unoptimized code
    /// made the suite guest take 291 s instead of 104 s (the stat example's built-in workload, the soak),
    /// for about 10 % more build time; the debug info would be stripped from the initramfs anyway.
    pub fn cargo_env(self) -> Vec<(&'static str, &'static str)> {
        match self {
            Arch::X86_64 => Vec::new(),
            Arch::Aarch64 => [
                ("CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_LINKER", "rust-lld"),
                (
                    "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_RUSTFLAGS",
                    "-C link-arg=--build-id -C opt-level=1 -C debuginfo=0",
                ),
            ]
            .into_iter()
            .filter(|(k, _)| std::env::var_os(k).is_none())
            .collect(),
        }
    }

    /// The qemu binary, and the Debian package that has it.
    pub fn qemu(self) -> (&'static str, &'static str) {
        match self {
            Arch::X86_64 => ("qemu-system-x86_64", "qemu-system-x86"),
            Arch::Aarch64 => ("qemu-system-aarch64", "qemu-system-arm"),
        }
    }

    /// The machine part of the qemu command line for `mode` with `smp` vCPUs (suite mode).
    pub fn machine_args(self, mode: Mode, smp: u32) -> Vec<String> {
        let mut args: Vec<String> = Vec::new();
        match (self, mode) {
            // Single-threaded TCG: with one host thread per vCPU (MTTCG) the kernel's live code patching
            // (static keys, kprobes: int3-based text_poke) raced with other vCPUs' translated code and
            // oopsed with a stray int3 (seen on 7.2 in reliability_hygiene, on 6.12 at boot).
            (Arch::X86_64, _) => {
                args.extend(["-accel", "tcg,thread=single"].map(String::from));
                args.extend(["-smp".into(), smp.to_string()]);
            }
            // `pauth-impdef`: qemu's own pointer-authentication hash instead of the architected QARMA5,
            // which is slow to emulate (it halves the boot time on qemu 7.2).
            (Arch::Aarch64, Mode::Exact) => {
                args.extend(
                    [
                        "-M",
                        "virt",
                        "-cpu",
                        "max,pauth-impdef=on",
                        // One vCPU: under icount the instructions counter also counts other vCPUs.
                        "-smp",
                        "1",
                        // One instruction per virtual nanosecond, one cycle per instruction: exact and
                        // reproducible counts (icount implies single-threaded TCG). `sleep=off`: an
                        // idle guest jumps to its next timer instead of waiting for it in real time.
                        "-icount",
                        "shift=0,sleep=off",
                        "-accel",
                        "tcg,thread=single",
                    ]
                    .map(String::from),
                );
            }
            // Multi-threaded TCG is safe here (48 of 48 two-vCPU boots were clean in the research run,
            // unlike x86's) and runs the suite's threads in parallel.
            (Arch::Aarch64, Mode::Suite) => {
                args.extend(
                    [
                        "-M",
                        "virt",
                        "-cpu",
                        "max,pauth-impdef=on",
                        "-accel",
                        "tcg,thread=multi",
                    ]
                    .map(String::from),
                );
                args.extend(["-smp".into(), smp.to_string()]);
            }
        }
        args
    }

    /// The kernel command line.
    pub fn append(self) -> &'static str {
        match self {
            Arch::X86_64 => "console=ttyS0 panic=-1 quiet",
            Arch::Aarch64 => "console=ttyAMA0 panic=-1 quiet",
        }
    }

    /// Lines of the guest's `/init` for this architecture and mode, before the tests run.
    pub fn init_lines(self, mode: Mode) -> String {
        let mut lines = String::new();
        if self == Arch::Aarch64 {
            lines.push_str(
                "# User-space counter reads (Linux 6.1+; 5.10 has no switch and falls back to read(2)).\n\
                 echo 1 > /proc/sys/kernel/perf_user_access 2>/dev/null\n\
                 # PMU interrupts look slow under emulation: keep the kernel from lowering\n\
                 # perf_event_max_sample_rate while the tests sample (the record example asks 4000 Hz).\n\
                 echo 0 > /proc/sys/kernel/perf_cpu_time_max_percent\n",
            );
            if mode == Mode::Exact {
                lines.push_str(
                    "# qemu's PMU under -icount shift=0 -smp 1: the hw_* tests assert exact counts.\n\
                     export PERF_TEST_EXACT_PMU=1\n",
                );
            }
        }
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse() {
        assert_eq!(
            Arch::parse_list("all").unwrap(),
            vec![Arch::X86_64, Arch::Aarch64]
        );
        assert_eq!(Arch::parse_list("arm64").unwrap(), vec![Arch::Aarch64]);
        assert!(Arch::parse_list("riscv64").is_err());
        assert_eq!(Mode::parse_list("exact").unwrap(), vec![Mode::Exact]);
        assert_eq!(Arch::X86_64.modes(&[Mode::Exact]), vec![Mode::Suite]);
        let exact = Arch::Aarch64.machine_args(Mode::Exact, 2);
        assert!(exact
            .windows(2)
            .any(|w| w == ["-icount", "shift=0,sleep=off"]));
        assert!(exact.windows(2).any(|w| w == ["-smp", "1"]));
    }
}
