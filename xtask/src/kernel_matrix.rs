//! `cargo xtask kernel-matrix`: one static build of the integration tests, run on four Debian kernels
//! under qemu.
//!
//! 1. Fetches (once; cached under `target/xtask/matrix/kernels/SUITE`) the cloud kernel of bullseye (5.10),
//!    bookworm (6.1), trixie (6.12) and sid (the newest), through a private apt (see [`crate::apt`]).
//! 2. Builds the test binaries of the `tests` crate for `x86_64-unknown-linux-musl` (static).
//! 3. Packs them with busybox into an initramfs whose `/init` mounts proc, sysfs, tracefs, debugfs and
//!    cgroup2, sets `perf_event_paranoid` to 2 (upstream's default; Debian kernels boot with 3), runs every
//!    binary with `--test-threads=1 --show-output` as root, prints `@@matrix` markers, and powers off.
//! 4. Boots each kernel with `qemu-system-x86_64` (TCG) under a time limit, saves the serial console to
//!    `target/xtask/matrix/<kernel>.log`, and prints one table. Any failure makes the command fail.

mod cpio;
mod report;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::apt::{run, Apt, MIRROR};
use crate::workspace_root;

/// The suites booted, oldest first, with the kernel series each one ships (`None`: whatever sid has now).
const SUITES: &[(&str, Option<&str>)] = &[
    ("bullseye", Some("5.10")),
    ("bookworm", Some("6.1")),
    ("trixie", Some("6.12")),
    ("sid", None),
];

const TARGET: &str = "x86_64-unknown-linux-musl";
const BUSYBOX: &str = "/bin/busybox";
const DEFAULT_TIMEOUT: u64 = 300;

/// Command-line options of `kernel-matrix`.
#[derive(Debug)]
pub struct Options {
    /// Kernel series (`5.10`) or suite names (`sid`) to boot; all four when empty.
    kernels: Vec<String>,
    /// The time limit of one boot, tests included.
    timeout: Duration,
    /// Re-resolve and re-download the kernels even when cached.
    refresh: bool,
    /// Virtual CPUs of the guest.
    smp: u32,
    /// Only these integration tests (cargo's `--test NAME`); every test binary when empty.
    tests: Vec<String>,
}

/// Parses `[--kernels LIST] [--timeout SECS] [--smp CPUS] [--test NAME]... [--refresh]`.
pub fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut opts = Options {
        kernels: Vec::new(),
        timeout: Duration::from_secs(DEFAULT_TIMEOUT),
        refresh: false,
        smp: 2,
        tests: Vec::new(),
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
                opts.timeout = Duration::from_secs(secs);
            }
            "--refresh" => opts.refresh = true,
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

/// Finds the package holding the kernel image of `suite`: `linux-image-cloud-amd64` depends on
/// `linux-image-<release>`, which holds `/boot/vmlinuz-<release>` up to trixie; in sid it is a metapackage
/// that depends on `linux-binary-<release>`, which holds `/usr/lib/modules/<release>/vmlinuz`.
fn resolve(apt: &Apt) -> Result<(String, String), String> {
    let depends = |pkg: &str| -> Result<Vec<String>, String> {
        Ok(apt
            .cache(&["depends", pkg])?
            .lines()
            .filter_map(|l| l.trim().strip_prefix("Depends: "))
            .map(|p| p.trim().to_string())
            .collect())
    };
    let image = depends("linux-image-cloud-amd64")?
        .into_iter()
        .find(|p| {
            p.strip_prefix("linux-image-")
                .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()))
        })
        .ok_or("linux-image-cloud-amd64 depends on no linux-image-<version> package")?;
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
    let listing = run(Command::new("dpkg-deb").arg("-c").arg(deb), "dpkg-deb -c")?;
    let candidates = [
        format!("./boot/vmlinuz-{release}"),
        format!("./usr/lib/modules/{release}/vmlinuz"),
        format!("./lib/modules/{release}/vmlinuz"),
    ];
    let member = listing
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| candidates.iter().any(|c| c == p))
        .ok_or_else(|| format!("{} holds no vmlinuz for {release}", deb.display()))?
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

/// The kernel of `suite`: from the cache, or downloaded from the Debian archive.
fn fetch_kernel(suite: &str, refresh: bool) -> Result<Kernel, String> {
    let dir = matrix_dir().join("kernels").join(suite);
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
    let apt = Apt::new(suite)?;
    let mut updated = false;
    if refresh || !apt.has_lists() {
        eprintln!("kernel-matrix: apt-get update ({suite}) from {MIRROR}");
        apt.update()?;
        updated = true;
    }
    let (package, release, deb) = loop {
        let (package, release) = resolve(&apt)?;
        eprintln!("kernel-matrix: downloading {package} ({suite})");
        match apt.download(&package) {
            Ok(deb) => break (package, release, deb),
            // Lists from an earlier run may name a version the archive no longer has.
            Err(_) if !updated => {
                eprintln!("kernel-matrix: apt-get update ({suite}) from {MIRROR}");
                apt.update()?;
                updated = true;
            }
            Err(e) => return Err(e),
        }
    };
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

/// Builds the test binaries of the `tests` crate for the musl target; returns them.
fn build_tests(only: &[String]) -> Result<Vec<TestBinary>, String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    eprintln!("kernel-matrix: cargo test -p tests --no-run --target {TARGET}");
    let out = Command::new(cargo)
        .args(["test", "-p", "tests", "--no-run", "--target", TARGET])
        .args(["--message-format=json-render-diagnostics"])
        .args(only.iter().flat_map(|t| ["--test", t.as_str()]))
        .current_dir(workspace_root())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "building the tests for {TARGET} failed ({}): see cargo's messages above (a missing target is \
             added with `rustup target add {TARGET}`)",
            out.status
        ));
    }
    let mut bins = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
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

/// Builds the examples of `perf-event` for the musl target (the `*_example` tests drive them: in the
/// guest there is no cargo to build them); returns them.
fn build_examples() -> Result<Vec<TestBinary>, String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    eprintln!("kernel-matrix: cargo build -p perf-event-safe --examples --target {TARGET}");
    let out = Command::new(cargo)
        .args([
            "build",
            "-p",
            "perf-event-safe",
            "--examples",
            "--target",
            TARGET,
        ])
        .args(["--message-format=json-render-diagnostics"])
        .current_dir(workspace_root())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "building the perf-event examples for {TARGET} failed ({}): see cargo's messages above",
            out.status
        ));
    }
    let mut bins = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
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

/// The guest's `/init`.
fn init_script(bins: &[TestBinary]) -> String {
    let names: Vec<&str> = bins.iter().map(|b| b.name.as_str()).collect();
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
ifconfig lo 127.0.0.1 up 2>/dev/null
echo "{m} kernel $(uname -r)"
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
    )
}

/// Copies `path` without its debug info (by the host's `strip`, when there is one).
fn stripped(path: &Path, scratch: &Path) -> Result<Vec<u8>, String> {
    let tmp = scratch.join("stripped");
    let ok = Command::new("strip")
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

/// Writes the initramfs (busybox, `/init`, the test binaries) to `target/xtask/matrix/initrd.gz`.
fn build_initramfs(bins: &[TestBinary], examples: &[TestBinary]) -> Result<PathBuf, String> {
    let busybox =
        fs::read(BUSYBOX).map_err(|e| format!("read {BUSYBOX}: {e}; install busybox-static"))?;
    let dir = matrix_dir();
    fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    let mut a = cpio::Archive::default();
    for d in [
        "bin", "dev", "proc", "sys", "tmp", "tests", "examples", "root",
    ] {
        a.dir(d);
    }
    a.char_dev("dev/console", 5, 1);
    a.char_dev("dev/null", 1, 3);
    a.file("bin/busybox", 0o755, &busybox);
    a.symlink("bin/sh", "busybox");
    a.file("init", 0o755, init_script(bins).as_bytes());
    for b in bins {
        a.file(
            &format!("tests/{}", b.name),
            0o755,
            &stripped(&b.path, &dir)?,
        );
    }
    for b in examples {
        a.file(
            &format!("examples/{}", b.name),
            0o755,
            &stripped(&b.path, &dir)?,
        );
    }
    let _ = fs::remove_file(dir.join("stripped"));
    let path = dir.join("initrd.gz");
    a.write_gz(&path)?;
    Ok(path)
}

/// How one boot ended.
#[derive(Debug)]
struct Outcome {
    kernel: Kernel,
    run: report::Run,
    /// Why the kernel failed, if it did.
    problem: Option<String>,
    log: PathBuf,
    wall: Duration,
}

/// Boots `kernel` with the initramfs under `timeout`; the console goes to `target/xtask/matrix/<series>.log`.
fn boot(kernel: Kernel, initrd: &Path, opts: &Options) -> Result<Outcome, String> {
    let timeout = opts.timeout;
    let log = matrix_dir().join(format!("{}.log", kernel.series));
    let out = fs::File::create(&log).map_err(|e| format!("create {}: {e}", log.display()))?;
    let start = Instant::now();
    let mut child = Command::new("qemu-system-x86_64")
        // Single-threaded TCG: with one host thread per vCPU (MTTCG) the kernel's live code patching
        // (static keys, kprobes: int3-based text_poke) raced with other vCPUs' translated code and
        // oopsed with a stray int3 (seen on 7.2 in reliability_hygiene, on 6.12 at boot).
        .args([
            "-nographic",
            "-no-reboot",
            "-m",
            "1G",
            "-accel",
            "tcg,thread=single",
        ])
        .args(["-smp", &opts.smp.to_string()])
        // No NIC: the guest needs none, and its option ROM (iPXE) only slows the boot.
        .args(["-nic", "none"])
        .arg("-kernel")
        .arg(&kernel.vmlinuz)
        .arg("-initrd")
        .arg(initrd)
        .args(["-append", "console=ttyS0 panic=-1 quiet"])
        .stdin(Stdio::null())
        .stdout(
            out.try_clone()
                .map_err(|e| format!("{}: {e}", log.display()))?,
        )
        .stderr(out)
        .spawn()
        .map_err(|e| format!("cannot run qemu-system-x86_64: {e}; install qemu-system-x86"))?;
    let mut problem = None;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                if !status.success() {
                    problem = Some(format!("qemu exited with {status}"));
                }
                break;
            }
            Ok(None) if start.elapsed() >= timeout => {
                let _ = child.kill();
                let _ = child.wait();
                problem = Some(format!("timed out after {} s", timeout.as_secs()));
                break;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(100)),
            Err(e) => return Err(format!("waiting for qemu: {e}")),
        }
    }
    let wall = start.elapsed();
    let bytes = fs::read(&log).map_err(|e| format!("read {}: {e}", log.display()))?;
    let run = report::parse(&String::from_utf8_lossy(&bytes));
    if problem.is_none() {
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
        } else {
            None
        };
    }
    Ok(Outcome {
        kernel,
        run,
        problem,
        log,
        wall,
    })
}

/// The last `n` lines of `path`.
fn tail(path: &Path, n: usize) -> String {
    let text = fs::read(path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let lines: Vec<String> = text.lines().map(report::clean).collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Runs the matrix; `Err` when a kernel failed or the matrix could not run.
pub fn main(opts: &Options) -> Result<(), String> {
    let started = Instant::now();
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
    let mut kernels = Vec::new();
    for suite in &suites {
        let kernel = fetch_kernel(suite, opts.refresh)?;
        eprintln!(
            "kernel-matrix: {suite}: {} ({})",
            kernel.release, kernel.source
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
    let fetched = started.elapsed();
    let bins = build_tests(&opts.tests)?;
    let examples = build_examples()?;
    let built = started.elapsed();
    let initrd = build_initramfs(&bins, &examples)?;
    let size = fs::metadata(&initrd).map(|m| m.len()).unwrap_or(0);
    eprintln!(
        "kernel-matrix: {} test binaries ({}), examples ({}), initramfs {:.1} MiB",
        bins.len(),
        bins.iter()
            .map(|b| b.name.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        examples
            .iter()
            .map(|b| b.name.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        size as f64 / (1024.0 * 1024.0)
    );
    let mut outcomes = Vec::new();
    for kernel in kernels {
        eprintln!(
            "kernel-matrix: booting {} ({})",
            kernel.series, kernel.release
        );
        let mut outcome = boot(kernel.clone(), &initrd, opts)?;
        if outcome.run.release.is_none() {
            // The guest died before /init ran: under TCG, SMP kernels now and then oops while
            // patching their own text at boot (seen on 6.12: int3 in sched_clock_cpu). Boot once more;
            // the first log is kept as <series>.boot1.log.
            let first = outcome.log.with_extension("boot1.log");
            let _ = fs::rename(&outcome.log, &first);
            eprintln!(
                "kernel-matrix: {} died before /init ({}); log in {}; booting once more",
                kernel.series,
                outcome.problem.as_deref().unwrap_or("no kernel line"),
                first.display()
            );
            outcome = boot(kernel, &initrd, opts)?;
        }
        eprintln!(
            "kernel-matrix: {} done in {:.1} s: {}",
            outcome.kernel.series,
            outcome.wall.as_secs_f64(),
            outcome.problem.as_deref().unwrap_or("ok")
        );
        outcomes.push(outcome);
    }

    println!(
        "{:<7} {:<28} {:>6} {:>6} {:>7} {:>6}  result",
        "kernel", "release", "passed", "failed", "skipped", "secs"
    );
    for o in &outcomes {
        let (p, f, s) = o.run.totals();
        println!(
            "{:<7} {:<28} {:>6} {:>6} {:>7} {:>6.1}  {}",
            o.kernel.series,
            o.kernel.release,
            p,
            f,
            s,
            o.wall.as_secs_f64(),
            match &o.problem {
                None => "ok".to_string(),
                Some(p) => format!("FAIL: {p}"),
            }
        );
    }
    let failed: Vec<&Outcome> = outcomes.iter().filter(|o| o.problem.is_some()).collect();
    for o in &failed {
        println!(
            "\n== {} ({}): {}",
            o.kernel.series,
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
        "kernel-matrix: {} kernels in {:.1} s (fetch {:.1} s, build {:.1} s); logs in {}",
        outcomes.len(),
        started.elapsed().as_secs_f64(),
        fetched.as_secs_f64(),
        (built - fetched).as_secs_f64(),
        matrix_dir().display()
    );
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} of {} kernels failed",
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
