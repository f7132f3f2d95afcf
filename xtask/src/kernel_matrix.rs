//! `cargo xtask kernel-matrix`: one static build of the integration tests, run on four Debian kernels
//! under qemu, for x86_64 (the default) and aarch64 (`--arch aarch64`, or `--arch all` for both).
//!
//! 1. Fetches (once; cached under `target/xtask/matrix/kernels/SUITE`, `.../matrix/arm64/kernels/SUITE`)
//!    the cloud kernel of bullseye (5.10), bookworm (6.1), trixie (6.12) and sid (the newest), through a
//!    private apt (see [`crate::apt`]); for aarch64 also `busybox-static:arm64`.
//! 2. Builds the test binaries of the `tests` crate for `<arch>-unknown-linux-musl` (static).
//! 3. Packs them with busybox into an initramfs whose `/init` mounts proc, sysfs, tracefs, debugfs and
//!    cgroup2, sets `perf_event_paranoid` to 2 (upstream's default; Debian kernels boot with 3), runs every
//!    binary with `--test-threads=1 --show-output` as root, prints `@@matrix` markers, and powers off.
//! 4. Boots each kernel with qemu (TCG) under a time limit, saves the serial console to
//!    `target/xtask/matrix/[arm64/]<kernel>[-mode].log`, and prints one table (`secs`: wall time of the
//!    boot; `cpu`: qemu's CPU time, what the boot takes on an idle host). Any failure makes the command
//!    fail.
//!
//! aarch64 guests have a hardware PMU (qemu's `armv8_pmuv3`), so each kernel boots in an **exact** mode
//! (`-icount shift=0 -smp 1`: the `hw_*` tests, with exact counts) and the newest once more in the **suite**
//! mode (every test binary, two vCPUs); see [`arch`]. The table's `hw` column sums the `hw_*` tests.

mod arch;
mod cpio;
pub mod perf_fixture;
mod report;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::apt::{run, Apt, MIRROR};
use crate::workspace_root;
use arch::{Arch, Mode};

/// The suites booted, oldest first, with the kernel series each one ships (`None`: whatever sid has now).
const SUITES: &[(&str, Option<&str>)] = &[
    ("bullseye", Some("5.10")),
    ("bookworm", Some("6.1")),
    ("trixie", Some("6.12")),
    ("sid", None),
];

/// The host's busybox (busybox-static), for x86_64 guests.
const BUSYBOX: &str = "/bin/busybox";
/// The suite whose `busybox-static` aarch64 guests get.
const BUSYBOX_SUITE: &str = "bookworm";
const DEFAULT_TIMEOUT: u64 = 300;
/// Test binaries whose names start with this are the hardware tests: the `hw` column, the exact mode.
const HW_PREFIX: &str = "hw_";
/// Test binaries the x86_64 suite leaves out on the kernels between the oldest and the newest
/// booted, unless `--test` names them: they test our own code (the stat example's output, soaks,
/// per-CPU and async plumbing, a command's spawn) more than the kernel's ABI, and take 390 of the
/// 448 s a 5.10 guest ran; the oldest and the newest kernel run them all.
const NOT_ON_MIDDLE_KERNELS: &[&str] = &[
    "stat_example",
    "reliability_soak",
    "sample_per_cpu",
    "async_stream",
    "count_targets",
    "command_spawn",
    "reliability_hygiene",
];

/// Command-line options of `kernel-matrix`.
#[derive(Debug)]
pub struct Options {
    /// Kernel series (`5.10`) or suite names (`sid`) to boot; all four when empty.
    kernels: Vec<String>,
    /// The time limit of one boot, tests included; by default [`DEFAULT_TIMEOUT`], and twice that for
    /// aarch64's suite (two emulated vCPUs of another architecture).
    timeout: Option<Duration>,
    /// Re-resolve and re-download the kernels even when cached.
    refresh: bool,
    /// Virtual CPUs of the guest.
    smp: u32,
    /// Only these integration tests (cargo's `--test NAME`); every test binary when empty.
    tests: Vec<String>,
    /// The architectures, in order.
    arches: Vec<Arch>,
    /// aarch64's guest modes.
    modes: Vec<Mode>,
    /// Exact-mode guests booted at once (each is one single-threaded qemu).
    jobs: usize,
}

/// Parses `[--arch x86_64|aarch64|all] [--mode exact|suite|all] [--kernels LIST] [--timeout SECS]
/// [--smp CPUS] [--jobs N] [--test NAME]... [--refresh]`.
pub fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut opts = Options {
        kernels: Vec::new(),
        timeout: None,
        refresh: false,
        smp: 2,
        tests: Vec::new(),
        arches: vec![Arch::X86_64],
        modes: vec![Mode::Exact, Mode::Suite],
        jobs: std::thread::available_parallelism().map_or(1, |n| n.get().min(4)),
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--kernels" => {
                let list = it
                    .next()
                    .ok_or("--kernels needs a list, e.g. 5.10,6.1,6.12,7.2")?;
                opts.kernels = list
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect();
            }
            "--timeout" => {
                let secs = it.next().ok_or("--timeout needs a number of seconds")?;
                let secs: u64 = secs
                    .parse()
                    .map_err(|_| format!("--timeout {secs:?}: not a number of seconds"))?;
                opts.timeout = Some(Duration::from_secs(secs));
            }
            "--refresh" => opts.refresh = true,
            "--arch" => {
                let a = it.next().ok_or("--arch needs x86_64, aarch64 or all")?;
                opts.arches = Arch::parse_list(a)?;
            }
            "--jobs" => {
                let n = it.next().ok_or("--jobs needs a number of guests")?;
                opts.jobs = n
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| format!("--jobs {n:?}: not a number of guests"))?;
            }
            "--mode" => {
                let m = it.next().ok_or("--mode needs exact, suite or all")?;
                opts.modes = Mode::parse_list(m)?;
            }
            "--test" => {
                let name = it
                    .next()
                    .ok_or("--test needs the name of an integration test")?;
                opts.tests.push(name.clone());
            }
            "--smp" => {
                let n = it.next().ok_or("--smp needs a number of CPUs")?;
                opts.smp = n
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| format!("--smp {n:?}: not a number of CPUs"))?;
            }
            other => return Err(format!("kernel-matrix: unknown argument {other:?}")),
        }
    }
    Ok(opts)
}

/// One kernel to boot.
#[derive(Debug, Clone)]
struct Kernel {
    arch: Arch,
    suite: String,
    /// `uname -r`, e.g. `6.1.0-50-cloud-amd64`.
    release: String,
    /// The series, e.g. `6.1`: the name of the log file and the table row.
    series: String,
    /// `package version`, for the log.
    source: String,
    vmlinuz: PathBuf,
}

fn matrix_dir() -> PathBuf {
    workspace_root().join("target/xtask/matrix")
}

/// `5.10.0-32-cloud-amd64` → `5.10`; `7.2.13+deb14-cloud-amd64` → `7.2`.
fn series_of(release: &str) -> String {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    match (parts.next(), parts.next()) {
        (Some(a), Some(b)) if !a.is_empty() && !b.is_empty() => format!("{a}.{b}"),
        _ => release.to_string(),
    }
}

/// The suite that ships the kernel `wanted` (a series like `6.1`, or a suite name).
fn suite_for(wanted: &str) -> &'static str {
    SUITES
        .iter()
        .find(|(suite, series)| *suite == wanted || *series == Some(wanted))
        .map(|(suite, _)| *suite)
        // Any other series can only be the newest: sid's. Checked once sid's kernel is known.
        .unwrap_or("sid")
}

/// Finds the package holding the kernel image of `suite`: `linux-image-cloud-<arch>` depends on
/// `linux-image-<release>`, which holds `/boot/vmlinuz-<release>` up to trixie; in sid it is a metapackage
/// that depends on `linux-binary-<release>`, which holds `/usr/lib/modules/<release>/vmlinuz`.
fn resolve(apt: &Apt, metapackage: &str) -> Result<(String, String), String> {
    let depends = |pkg: &str| -> Result<Vec<String>, String> {
        Ok(apt
            .cache(&["depends", pkg])?
            .lines()
            .filter_map(|l| l.trim().strip_prefix("Depends: "))
            .map(|p| p.trim().to_string())
            .collect())
    };
    let image = depends(metapackage)?
        .into_iter()
        .find(|p| {
            p.strip_prefix("linux-image-")
                .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()))
        })
        .ok_or_else(|| format!("{metapackage} depends on no linux-image-<version> package"))?;
    let release = image.trim_start_matches("linux-image-").to_string();
    let binary = format!("linux-binary-{release}");
    let package = if depends(&image)?.contains(&binary) {
        binary
    } else {
        image
    };
    Ok((package, release))
}

/// Extracts the kernel image from `deb` into `dest`.
fn extract_vmlinuz(deb: &Path, release: &str, dest: &Path) -> Result<(), String> {
    let candidates = [
        format!("./boot/vmlinuz-{release}"),
        format!("./usr/lib/modules/{release}/vmlinuz"),
        format!("./lib/modules/{release}/vmlinuz"),
    ];
    extract_member(deb, &candidates, dest)
        .map_err(|e| format!("{e} (looking for the vmlinuz of {release})"))
}

/// Extracts the first of `candidates` (paths as `dpkg-deb -c` lists them) that `deb` holds into `dest`.
fn extract_member(deb: &Path, candidates: &[String], dest: &Path) -> Result<(), String> {
    let listing = run(Command::new("dpkg-deb").arg("-c").arg(deb), "dpkg-deb -c")?;
    let member = listing
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| candidates.iter().any(|c| c == p))
        .ok_or_else(|| format!("{} holds none of {}", deb.display(), candidates.join(", ")))?
        .to_string();
    let tmp = dest.with_extension("part");
    let out = fs::File::create(&tmp).map_err(|e| format!("create {}: {e}", tmp.display()))?;
    let mut deb_cmd = Command::new("dpkg-deb")
        .arg("--fsys-tarfile")
        .arg(deb)
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run dpkg-deb: {e}"))?;
    let tar_in = deb_cmd.stdout.take().ok_or("dpkg-deb has no stdout")?;
    let status = Command::new("tar")
        .args(["-xO", "-f", "-", &member])
        .stdin(tar_in)
        .stdout(out)
        .status()
        .map_err(|e| format!("cannot run tar: {e}"))?;
    let deb_status = deb_cmd.wait().map_err(|e| format!("dpkg-deb: {e}"))?;
    if !status.success() || !deb_status.success() {
        return Err(format!("extracting {member} from {} failed", deb.display()));
    }
    fs::rename(&tmp, dest).map_err(|e| format!("rename to {}: {e}", dest.display()))
}

/// Downloads the package that `pick` names from `apt`'s lists (updated first when missing or on
/// `refresh`, and once more when the lists name a version the archive no longer has); returns the
/// package, what else `pick` said, and the `.deb`.
fn download<T>(
    apt: &Apt,
    suite: &str,
    refresh: bool,
    pick: impl Fn(&Apt) -> Result<(String, T), String>,
) -> Result<(String, T, PathBuf), String> {
    let update = || {
        eprintln!("kernel-matrix: apt-get update ({suite}) from {MIRROR}");
        apt.update()
    };
    let mut updated = false;
    if refresh || !apt.has_lists() {
        update()?;
        updated = true;
    }
    loop {
        let (package, extra) = pick(apt)?;
        eprintln!("kernel-matrix: downloading {package} ({suite})");
        match apt.download(&package) {
            Ok(deb) => return Ok((package, extra, deb)),
            Err(_) if !updated => {
                update()?;
                updated = true;
            }
            Err(e) => return Err(e),
        }
    }
}

/// The kernel of `suite` for `arch`: from the cache, or downloaded from the Debian archive.
fn fetch_kernel(arch: Arch, suite: &str, refresh: bool) -> Result<Kernel, String> {
    let dir = arch.dir(matrix_dir()).join("kernels").join(suite);
    let vmlinuz = dir.join("vmlinuz");
    let source_file = dir.join("source");
    if !refresh && vmlinuz.is_file() {
        if let Ok(source) = fs::read_to_string(&source_file) {
            // "<release> <package> <version>"
            let mut words = source.split_whitespace();
            if let (Some(release), Some(package), Some(version)) =
                (words.next(), words.next(), words.next())
            {
                return Ok(Kernel {
                    arch,
                    suite: suite.to_string(),
                    release: release.to_string(),
                    series: series_of(release),
                    source: format!("{package} {version}"),
                    vmlinuz,
                });
            }
        }
    }
    fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    let apt = Apt::for_arch(suite, arch.debian())?;
    let (package, release, deb) = download(&apt, suite, refresh, |apt| {
        resolve(apt, arch.kernel_metapackage())
    })?;
    let version = run(
        Command::new("dpkg-deb").arg("-f").arg(&deb).arg("Version"),
        "dpkg-deb -f",
    )?
    .trim()
    .to_string();
    extract_vmlinuz(&deb, &release, &vmlinuz)?;
    let _ = fs::remove_file(&deb);
    fs::write(&source_file, format!("{release} {package} {version}\n"))
        .map_err(|e| format!("write {}: {e}", source_file.display()))?;
    Ok(Kernel {
        arch,
        suite: suite.to_string(),
        series: series_of(&release),
        source: format!("{package} {version}"),
        release,
        vmlinuz,
    })
}

/// A test binary to run in the guest.
#[derive(Debug)]
struct TestBinary {
    name: String,
    path: PathBuf,
}

/// The value of the JSON string field `"key":"..."` at or after `from` in `line` (cargo's paths need no
/// unescaping beyond `\\` and `\"`).
fn json_str(line: &str, key: &str) -> Option<String> {
    let pat = format!("\"{key}\":\"");
    let start = line.find(&pat)? + pat.len();
    let mut out = String::new();
    let mut chars = line[start..].chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Some(out),
            '\\' => out.push(chars.next()?),
            c => out.push(c),
        }
    }
    None
}

/// `cargo ARGS --target TARGET --message-format=json-render-diagnostics` with `arch`'s build environment;
/// returns its stdout (the JSON messages).
fn cargo_json(arch: Arch, args: &[&str], what: &str) -> Result<String, String> {
    let target = arch.rust_target();
    eprintln!("kernel-matrix: cargo {} --target {target}", args.join(" "));
    let out = crate::cargo()
        .args(args)
        .args([
            "--target",
            target,
            "--message-format=json-render-diagnostics",
        ])
        .envs(arch.cargo_env())
        .current_dir(workspace_root())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "building {what} for {target} failed ({}): see cargo's messages above (a missing target is \
             added with `rustup target add {target}`)",
            out.status
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Builds the test binaries of the `tests` crate for `arch`'s musl target; returns them.
fn build_tests(arch: Arch, only: &[String]) -> Result<Vec<TestBinary>, String> {
    let mut args = vec!["test", "-p", "tests", "--no-run"];
    for t in only {
        args.extend(["--test", t.as_str()]);
    }
    let stdout = cargo_json(arch, &args, "the tests")?;
    let mut bins = Vec::new();
    for line in stdout.lines() {
        if !line.contains("\"reason\":\"compiler-artifact\"") || !line.contains("\"test\":true") {
            continue;
        }
        let Some(exe) = json_str(line, "executable") else {
            continue;
        };
        let path = PathBuf::from(exe);
        let stem = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let name = stem
            .rsplit_once('-')
            .map_or(stem.as_str(), |(n, _)| n)
            .to_string();
        bins.push(TestBinary { name, path });
    }
    if bins.is_empty() {
        return Err("cargo built no test binary for the tests crate".into());
    }
    bins.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(bins)
}

/// Builds the examples of `perf-event` for `arch`'s musl target (the `*_example` tests drive them: in
/// the guest there is no cargo to build them); returns them.
fn build_examples(arch: Arch) -> Result<Vec<TestBinary>, String> {
    // With the features the tests crate gives perf-event, so the library built for the tests is reused.
    let stdout = cargo_json(
        arch,
        &[
            "build",
            "-p",
            "perf-event-safe",
            "--examples",
            "--features",
            "serde",
        ],
        "the perf-event examples",
    )?;
    let mut bins = Vec::new();
    for line in stdout.lines() {
        if !line.contains("\"reason\":\"compiler-artifact\"")
            || !line.contains("\"kind\":[\"example\"]")
        {
            continue;
        }
        // An example's executable is `target/<triple>/<profile>/examples/<name>` (no hash).
        let Some(path) = json_str(line, "executable").map(PathBuf::from) else {
            continue;
        };
        let Some(name) = path.file_name().map(|n| n.to_string_lossy().into_owned()) else {
            continue;
        };
        bins.push(TestBinary { name, path });
    }
    bins.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(bins)
}

/// The guest's `/init`: runs the test binaries `names`; `extra` are the lines of the architecture and
/// mode ([`Arch::init_lines`]).
fn init_script(names: &[&str], extra: &str, mode: Mode) -> String {
    format!(
        r#"#!/bin/busybox sh
/bin/busybox --install -s /bin
# busybox's setpriv lacks --reuid/--regid/--clear-groups: without it, tests that need util-linux's skip.
rm -f /bin/setpriv
export PATH=/bin HOME=/tmp
# Privilege skips are not failures here: the tests decide at run time, as root, what the kernel allows.
unset PERF_TEST_STRICT
# The examples that the *_example tests drive, built on the host (no cargo here).
export PERF_EVENT_EXAMPLES=/examples
# Software emulation (TCG): timers fire late, so hrtimer-driven sampling takes fewer samples than periods.
export PERF_TEST_EMULATED=1
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t tmpfs tmpfs /tmp
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null || echo "{m} note tracefs not mounted"
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mkdir -p /sys/fs/cgroup && mount -t cgroup2 cgroup2 /sys/fs/cgroup 2>/dev/null || echo "{m} note cgroup2 not mounted"
# Until something writes the root's subtree_control (systemd always does), new cgroups get no perf_event
# css and perf_event_open(PERF_FLAG_PID_CGROUP) on them fails with ENOENT. Do what a booted system did.
echo +pids > /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null
# Debian boots with 3 (no perf_event_open without CAP_PERFMON); use upstream's default like the host CI.
echo 2 > /proc/sys/kernel/perf_event_paranoid
{extra}ifconfig lo 127.0.0.1 up 2>/dev/null
echo "{m} kernel $(uname -r)"
echo "{m} mode {mode}"
echo "{m} pmus $(ls /sys/bus/event_source/devices | tr '\n' ' ')"
cd /tmp
for n in {names}; do
  echo "{m} begin $n"
  ( /tests/$n --test-threads=1 --show-output; echo $? > /tmp/rc ) 2>&1 | tee /tmp/out
  rc=$(cat /tmp/rc)
  echo "{m} end $n rc=$rc summary=$(grep '^test result:' /tmp/out | tail -n 1)"
done
echo "{m} done"
sync
poweroff -f
"#,
        m = report::MARKER,
        names = names.join(" "),
        mode = mode.name(),
    )
}

/// The toolchain's `rust-objcopy` (LLVM's objcopy: strips any architecture), if rustup installed it.
fn rust_objcopy() -> Option<PathBuf> {
    let out = Command::new("rustc")
        .args(["--print", "sysroot"])
        .output()
        .ok()?;
    let sysroot = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let host = Command::new("rustc").arg("-vV").output().ok()?;
    let host = String::from_utf8_lossy(&host.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_owned))?;
    let bin = sysroot
        .join("lib/rustlib")
        .join(host)
        .join("bin/rust-objcopy");
    bin.is_file().then_some(bin)
}

/// Copies `path` without its debug info (by the toolchain's `rust-objcopy`, else the host's `strip`,
/// which knows only the host's architecture; unstripped when neither works).
fn stripped(path: &Path, scratch: &Path, objcopy: Option<&Path>) -> Result<Vec<u8>, String> {
    let tmp = scratch.join("stripped");
    let strip = |tool: &Path| {
        Command::new(tool)
            .arg("--strip-debug")
            .arg(path)
            .arg(&tmp)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    let ok = objcopy.is_some_and(strip)
        || Command::new("strip")
            .arg("--strip-debug")
            .arg("-o")
            .arg(&tmp)
            .arg(path)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
    let from = if ok { tmp.as_path() } else { path };
    fs::read(from).map_err(|e| format!("read {}: {e}", from.display()))
}

/// The busybox binary for `arch`: the host's for x86_64; for aarch64 Debian's `busybox-static:arm64`,
/// fetched once into `target/xtask/matrix/arm64/busybox`.
fn busybox(arch: Arch, refresh: bool) -> Result<Vec<u8>, String> {
    match arch {
        Arch::X86_64 => {
            fs::read(BUSYBOX).map_err(|e| format!("read {BUSYBOX}: {e}; install busybox-static"))
        }
        Arch::Aarch64 => {
            let dest = arch.dir(matrix_dir()).join("busybox");
            if refresh || !dest.is_file() {
                let dir = arch.dir(matrix_dir());
                fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
                let apt = Apt::for_arch(BUSYBOX_SUITE, arch.debian())?;
                let (_, (), deb) = download(&apt, BUSYBOX_SUITE, refresh, |_| {
                    Ok(("busybox-static".to_string(), ()))
                })?;
                extract_member(&deb, &["./bin/busybox".to_string()], &dest)?;
                let _ = fs::remove_file(&deb);
            }
            fs::read(&dest).map_err(|e| format!("read {}: {e}", dest.display()))
        }
    }
}

/// Writes an initramfs (busybox, `/init`, the test binaries, the examples) to `path`.
fn build_initramfs(
    path: &Path,
    busybox: &[u8],
    init: &str,
    bins: &[&TestBinary],
    examples: &[TestBinary],
) -> Result<(), String> {
    let dir = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    let objcopy = rust_objcopy();
    let mut a = cpio::Archive::default();
    for d in [
        "bin", "dev", "proc", "sys", "tmp", "tests", "examples", "root",
    ] {
        a.dir(d);
    }
    a.char_dev("dev/console", 5, 1);
    a.char_dev("dev/null", 1, 3);
    a.file("bin/busybox", 0o755, busybox);
    a.symlink("bin/sh", "busybox");
    a.file("init", 0o755, init.as_bytes());
    for b in bins {
        a.file(
            &format!("tests/{}", b.name),
            0o755,
            &stripped(&b.path, dir, objcopy.as_deref())?,
        );
    }
    for b in examples {
        a.file(
            &format!("examples/{}", b.name),
            0o755,
            &stripped(&b.path, dir, objcopy.as_deref())?,
        );
    }
    let _ = fs::remove_file(dir.join("stripped"));
    a.write_gz(path)
}

/// How one boot ended.
#[derive(Debug)]
struct Outcome {
    kernel: Kernel,
    mode: Mode,
    run: report::Run,
    /// Why the kernel failed, if it did.
    problem: Option<String>,
    log: PathBuf,
    wall: Duration,
    /// CPU time qemu used (user + system), when /proc showed it: on an idle host the wall time of a
    /// single-threaded guest, whatever else ran meanwhile.
    cpu: Option<Duration>,
}

/// Boots `kernel` in `mode` with the initramfs under `timeout`; the console goes to the log file
/// (`<series>.log` for x86_64, `arm64/<series>-<mode>.log` for aarch64).
fn boot(kernel: Kernel, mode: Mode, initrd: &Path, opts: &Options) -> Result<Outcome, String> {
    let timeout = opts
        .timeout
        .unwrap_or(Duration::from_secs(match (kernel.arch, mode) {
            (Arch::Aarch64, Mode::Suite) => 2 * DEFAULT_TIMEOUT,
            _ => DEFAULT_TIMEOUT,
        }));
    let arch = kernel.arch;
    let name = match arch {
        Arch::X86_64 => format!("{}.log", kernel.series),
        Arch::Aarch64 => format!("{}-{}.log", kernel.series, mode.name()),
    };
    let log = arch.dir(matrix_dir()).join(name);
    let guest = run_guest(arch, mode, opts.smp, &kernel.vmlinuz, initrd, &log, timeout)?;
    let mut problem = match guest.status {
        None => Some(format!("timed out after {} s", timeout.as_secs())),
        Some(status) if !status.success() => Some(format!("qemu exited with {status}")),
        Some(_) => None,
    };
    let (wall, cpu) = (guest.wall, guest.cpu);
    let bytes = fs::read(&log).map_err(|e| format!("read {}: {e}", log.display()))?;
    let run = report::parse(&String::from_utf8_lossy(&bytes));
    if problem.is_none() {
        let hw_skipped = run.hw_totals(HW_PREFIX).2;
        problem = if run.release.as_deref() != Some(kernel.release.as_str()) {
            Some(format!(
                "the guest reported kernel {:?}, expected {}",
                run.release, kernel.release
            ))
        } else if !run.done {
            Some("the guest stopped before running every test binary".into())
        } else if run.binaries.is_empty() {
            Some("no test binary ran".into())
        } else if run.totals().1 > 0 {
            Some("tests failed".into())
        } else if mode == Mode::Exact && hw_skipped > 0 {
            // The exact guest exists to run them: a skip there hides a broken PMU or test.
            Some(format!(
                "{hw_skipped} hardware tests skipped in the exact mode (its PMU must run them all)"
            ))
        } else {
            None
        };
    }
    Ok(Outcome {
        kernel,
        mode,
        run,
        problem,
        log,
        wall,
        cpu,
    })
}

/// How a qemu guest run ended.
pub(crate) struct GuestRun {
    /// qemu's exit status; `None` when it ran past the timeout and was killed.
    pub(crate) status: Option<std::process::ExitStatus>,
    /// qemu's CPU time (user + system), read while it was a zombie.
    pub(crate) cpu: Option<Duration>,
    /// Wall time from the spawn to the end.
    pub(crate) wall: Duration,
}

/// Boots `vmlinuz` with `initrd` on `arch`'s machine for `mode` with `smp` vCPUs, the console
/// (stdout and stderr) into `log`, and waits for qemu to exit, at most `timeout` (then kills it).
pub(crate) fn run_guest(
    arch: Arch,
    mode: Mode,
    smp: u32,
    vmlinuz: &Path,
    initrd: &Path,
    log: &Path,
    timeout: Duration,
) -> Result<GuestRun, String> {
    let out = fs::File::create(log).map_err(|e| format!("create {}: {e}", log.display()))?;
    let (qemu, qemu_package) = arch.qemu();
    let start = Instant::now();
    let mut child = Command::new(qemu)
        .args(["-nographic", "-no-reboot", "-m", "1G"])
        .args(arch.machine_args(mode, smp))
        // No NIC: the guest needs none, and its option ROM (iPXE) only slows the boot.
        .args(["-nic", "none"])
        .arg("-kernel")
        .arg(vmlinuz)
        .arg("-initrd")
        .arg(initrd)
        .args(["-append", arch.append()])
        .stdin(Stdio::null())
        .stdout(
            out.try_clone()
                .map_err(|e| format!("{}: {e}", log.display()))?,
        )
        .stderr(out)
        .spawn()
        .map_err(|e| format!("cannot run {qemu}: {e}; install {qemu_package}"))?;
    let mut cpu = None;
    loop {
        // A qemu that exited is a zombie until waited for, and its times are still in /proc.
        if let Some(t) = zombie_cpu_time(child.id()) {
            cpu = Some(t);
        }
        match child.try_wait() {
            Ok(Some(status)) => {
                return Ok(GuestRun {
                    status: Some(status),
                    cpu,
                    wall: start.elapsed(),
                })
            }
            Ok(None) if start.elapsed() >= timeout => {
                let _ = child.kill();
                let _ = child.wait();
                return Ok(GuestRun {
                    status: None,
                    cpu,
                    wall: start.elapsed(),
                });
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(100)),
            Err(e) => return Err(format!("waiting for qemu: {e}")),
        }
    }
}

/// The CPU time (utime + stime, in USER_HZ = 100 ticks per second) of process `pid` once it is a
/// zombie; `None` while it runs or when /proc cannot tell.
fn zombie_cpu_time(pid: u32) -> Option<Duration> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    if f.first() != Some(&"Z") {
        return None;
    }
    // After the command: state is field 3, utime 14 and stime 15 (1-based).
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

/// The last `n` lines of `path`.
fn tail(path: &Path, n: usize) -> String {
    let text = fs::read(path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let lines: Vec<String> = text.lines().map(report::clean).collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// The kernels of `opts` for `arch`, fetched.
fn kernels_of(arch: Arch, opts: &Options) -> Result<Vec<Kernel>, String> {
    let mut suites: Vec<&str> = if opts.kernels.is_empty() {
        SUITES.iter().map(|(s, _)| *s).collect()
    } else {
        opts.kernels.iter().map(|k| suite_for(k)).collect()
    };
    let mut seen = Vec::new();
    suites.retain(|s| {
        let first = !seen.contains(s);
        seen.push(*s);
        first
    });
    // Oldest first, whatever order --kernels gave.
    suites.sort_by_key(|s| SUITES.iter().position(|(x, _)| x == s));
    let mut kernels = Vec::new();
    for suite in &suites {
        let kernel = fetch_kernel(arch, suite, opts.refresh)?;
        eprintln!(
            "kernel-matrix: {} {suite}: {} ({})",
            arch.name(),
            kernel.release,
            kernel.source
        );
        kernels.push(kernel);
    }
    // A series no fixed suite ships must be sid's current one.
    for wanted in &opts.kernels {
        let known = kernels
            .iter()
            .any(|k| k.series == *wanted || k.suite == *wanted);
        if !known {
            let sid = kernels.iter().find(|k| k.suite == "sid");
            return Err(format!(
                "no kernel {wanted} in the matrix: sid ships {}; pick from 5.10, 6.1, 6.12, {} (or suite names)",
                sid.map_or("?", |k| k.release.as_str()),
                sid.map_or("sid", |k| k.series.as_str())
            ));
        }
    }
    Ok(kernels)
}

/// Boots `kernel` in `mode`, once more when the guest died before `/init` ran.
fn boot_retrying(
    kernel: &Kernel,
    mode: Mode,
    initrd: &Path,
    opts: &Options,
) -> Result<Outcome, String> {
    eprintln!(
        "kernel-matrix: booting {} {} ({}, {} mode)",
        kernel.arch.name(),
        kernel.series,
        kernel.release,
        mode.name()
    );
    let mut outcome = boot(kernel.clone(), mode, initrd, opts)?;
    if outcome.run.release.is_none() {
        // The guest died before /init ran: under TCG, SMP kernels now and then oops while
        // patching their own text at boot (seen on x86 6.12: int3 in sched_clock_cpu). Boot once more;
        // the first log is kept as <name>.boot1.log.
        let first = outcome.log.with_extension("boot1.log");
        let _ = fs::rename(&outcome.log, &first);
        eprintln!(
            "kernel-matrix: {} died before /init ({}); log in {}; booting once more",
            kernel.series,
            outcome.problem.as_deref().unwrap_or("no kernel line"),
            first.display()
        );
        outcome = boot(kernel.clone(), mode, initrd, opts)?;
    }
    eprintln!(
        "kernel-matrix: {} {} {} done in {:.1} s (qemu cpu {}): {}",
        kernel.arch.name(),
        kernel.series,
        mode.name(),
        outcome.wall.as_secs_f64(),
        outcome
            .cpu
            .map_or_else(|| "?".to_string(), |c| format!("{:.1} s", c.as_secs_f64())),
        outcome.problem.as_deref().unwrap_or("ok")
    );
    Ok(outcome)
}

/// Boots each of `kernels` in `mode`, `jobs` at a time; the outcomes in the order of `kernels`.
fn boot_all(
    kernels: &[&Kernel],
    mode: Mode,
    initrd: &Path,
    opts: &Options,
    jobs: usize,
) -> Result<Vec<Outcome>, String> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;

    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<Outcome, String>>>> =
        Mutex::new((0..kernels.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..jobs.clamp(1, kernels.len().max(1)) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(kernel) = kernels.get(i) else { break };
                let r = boot_retrying(kernel, mode, initrd, opts);
                if let Ok(mut slots) = results.lock() {
                    slots[i] = Some(r);
                }
            });
        }
    });
    let slots = results
        .into_inner()
        .map_err(|_| "a boot thread panicked".to_string())?;
    slots
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err("a boot thread panicked".into())))
        .collect()
}

/// Fetches, builds and boots everything of `arch`; returns the outcomes, oldest kernel first.
fn run_arch(arch: Arch, opts: &Options) -> Result<Vec<Outcome>, String> {
    let started = Instant::now();
    let kernels = kernels_of(arch, opts)?;
    let busybox = busybox(arch, opts.refresh)?;
    let fetched = started.elapsed();
    let bins = build_tests(arch, &opts.tests)?;
    let examples = build_examples(arch)?;
    let built = started.elapsed();
    let dir = arch.dir(matrix_dir());
    let mut outcomes = Vec::new();
    for mode in arch.modes(&opts.modes) {
        let chosen: Vec<&TestBinary> = match mode {
            Mode::Suite => bins.iter().collect(),
            Mode::Exact => bins
                .iter()
                .filter(|b| b.name.starts_with(HW_PREFIX))
                .collect(),
        };
        if chosen.is_empty() {
            eprintln!(
                "kernel-matrix: {} {} mode: no {HW_PREFIX}* test binary among those built; skipped",
                arch.name(),
                mode.name()
            );
            continue;
        }
        let initrd = match arch {
            Arch::X86_64 => dir.join("initrd.gz"),
            Arch::Aarch64 => dir.join(format!("initrd-{}.gz", mode.name())),
        };
        // The exact mode needs the stat example too (the hardware tests drive it).
        build_image(arch, mode, &initrd, &busybox, &chosen, &examples)?;
        // The suite runs on every x86_64 kernel, but on aarch64 only on the newest (the whole suite
        // on four TCG kernels does not fit the CI budget; the exact mode covers the hardware on all).
        let on: Vec<&Kernel> = match (arch, mode) {
            (Arch::Aarch64, Mode::Suite) => kernels.last().into_iter().collect(),
            _ => kernels.iter().collect(),
        };
        // Exact-mode guests count in virtual time (icount), so their results do not depend on the
        // host's load: boot several at once. Suite guests run timing-sensitive tests: one at a time.
        let jobs = if mode == Mode::Exact { opts.jobs } else { 1 };
        // x86_64's suite: the kernels between the oldest and the newest get a smaller image
        // (NOT_ON_MIDDLE_KERNELS), unless `--test` chose the binaries.
        let (ends, middle): (Vec<&Kernel>, &[&Kernel]) = match (arch, mode) {
            (Arch::X86_64, Mode::Suite) if opts.tests.is_empty() && on.len() > 2 => {
                (vec![on[0], on[on.len() - 1]], &on[1..on.len() - 1])
            }
            _ => (on.clone(), &[]),
        };
        outcomes.extend(boot_all(&ends, mode, &initrd, opts, jobs)?);
        if !middle.is_empty() {
            let fewer: Vec<&TestBinary> = chosen
                .iter()
                .copied()
                .filter(|b| !NOT_ON_MIDDLE_KERNELS.contains(&b.name.as_str()))
                .collect();
            let initrd = dir.join("initrd-middle.gz");
            build_image(arch, mode, &initrd, &busybox, &fewer, &examples)?;
            outcomes.extend(boot_all(middle, mode, &initrd, opts, jobs)?);
        }
    }
    // Oldest kernel first, exact before suite.
    outcomes.sort_by_key(|o| {
        (
            SUITES.iter().position(|(s, _)| *s == o.kernel.suite),
            o.mode == Mode::Suite,
        )
    });
    eprintln!(
        "kernel-matrix: {}: {} boots in {:.1} s (fetch {:.1} s, build {:.1} s)",
        arch.name(),
        outcomes.len(),
        started.elapsed().as_secs_f64(),
        fetched.as_secs_f64(),
        (built - fetched).as_secs_f64(),
    );
    Ok(outcomes)
}

/// Writes the initramfs `initrd` that runs `chosen` in `mode`, and says what it holds.
fn build_image(
    arch: Arch,
    mode: Mode,
    initrd: &Path,
    busybox: &[u8],
    chosen: &[&TestBinary],
    examples: &[TestBinary],
) -> Result<(), String> {
    let names: Vec<&str> = chosen.iter().map(|b| b.name.as_str()).collect();
    let init = init_script(&names, &arch.init_lines(mode), mode);
    build_initramfs(initrd, busybox, &init, chosen, examples)?;
    let size = fs::metadata(initrd).map(|m| m.len()).unwrap_or(0);
    eprintln!(
        "kernel-matrix: {} {} mode, {}: {} test binaries ({}), examples ({}), initramfs {:.1} MiB",
        arch.name(),
        mode.name(),
        initrd.file_name().unwrap_or_default().to_string_lossy(),
        names.len(),
        names.join(", "),
        examples
            .iter()
            .map(|b| b.name.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        size as f64 / (1024.0 * 1024.0)
    );
    Ok(())
}

/// `passed/failed/skipped` of the hardware tests, or `-` when none ran.
fn hw_cell(run: &report::Run) -> String {
    let (p, f, s) = run.hw_totals(HW_PREFIX);
    if p + f + s == 0 {
        "-".into()
    } else {
        format!("{p}/{f}/{s}")
    }
}

/// Runs the matrix; `Err` when a kernel failed or the matrix could not run.
pub fn main(opts: &Options) -> Result<(), String> {
    let started = Instant::now();
    let mut outcomes = Vec::new();
    let mut arch_secs = Vec::new();
    for &arch in &opts.arches {
        let t = Instant::now();
        outcomes.extend(run_arch(arch, opts)?);
        arch_secs.push(format!(
            "{} {:.1} s",
            arch.name(),
            t.elapsed().as_secs_f64()
        ));
    }

    println!(
        "{:<8} {:<7} {:<6} {:<28} {:>6} {:>6} {:>7} {:>9} {:>6} {:>6}  result",
        "arch",
        "kernel",
        "mode",
        "release",
        "passed",
        "failed",
        "skipped",
        "hw p/f/s",
        "secs",
        "cpu"
    );
    for o in &outcomes {
        let (p, f, s) = o.run.totals();
        println!(
            "{:<8} {:<7} {:<6} {:<28} {:>6} {:>6} {:>7} {:>9} {:>6.1} {:>6}  {}",
            o.kernel.arch.name(),
            o.kernel.series,
            o.mode.name(),
            o.kernel.release,
            p,
            f,
            s,
            hw_cell(&o.run),
            o.wall.as_secs_f64(),
            o.cpu
                .map_or_else(|| "?".to_string(), |c| format!("{:.1}", c.as_secs_f64())),
            match &o.problem {
                None => "ok".to_string(),
                Some(p) => format!("FAIL: {p}"),
            }
        );
    }
    let failed: Vec<&Outcome> = outcomes.iter().filter(|o| o.problem.is_some()).collect();
    for o in &failed {
        println!(
            "\n== {} {} {} ({}): {}",
            o.kernel.arch.name(),
            o.kernel.series,
            o.mode.name(),
            o.kernel.release,
            o.problem.as_deref().unwrap_or("")
        );
        let mut shown = false;
        for b in o.run.binaries.iter().filter(|b| b.failed > 0) {
            println!("-- {}: {}", b.name, b.failures.join(", "));
            if b.rc.is_some() {
                for line in b.detail.iter().take(80) {
                    println!("   {line}");
                }
                shown = true;
            }
        }
        if !shown || !o.run.done {
            println!(
                "-- last lines of {}:\n{}",
                o.log.display(),
                tail(&o.log, 40)
            );
        }
    }
    println!(
        "kernel-matrix: {} boots in {:.1} s ({}); logs in {}",
        outcomes.len(),
        started.elapsed().as_secs_f64(),
        arch_secs.join(", "),
        matrix_dir().display()
    );
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} of {} boots failed",
            failed.len(),
            outcomes.len()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series() {
        assert_eq!(series_of("5.10.0-32-cloud-amd64"), "5.10");
        assert_eq!(series_of("6.12.117+deb13-cloud-amd64"), "6.12");
        assert_eq!(series_of("7.2.13+deb14-cloud-amd64"), "7.2");
        assert_eq!(suite_for("6.1"), "bookworm");
        assert_eq!(suite_for("trixie"), "trixie");
        assert_eq!(suite_for("7.2"), "sid");
    }

    #[test]
    fn cargo_json() {
        let line = r#"{"reason":"compiler-artifact","target":{"kind":["test"],"name":"matrix_smoke"},"profile":{"test":true},"executable":"/w/target/x/debug/deps/matrix_smoke-0123abcd"}"#;
        assert_eq!(
            json_str(line, "executable").as_deref(),
            Some("/w/target/x/debug/deps/matrix_smoke-0123abcd")
        );
        assert_eq!(json_str(r#"{"a":"x\"y"}"#, "a").as_deref(), Some("x\"y"));
    }
}
