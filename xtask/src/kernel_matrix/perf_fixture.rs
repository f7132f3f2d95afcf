//! `cargo xtask arm64-perf-fixture`: runs Debian's arm64 `perf` on the arm64 event-name corpus in a
//! qemu `-M virt -cpu max` guest and saves what it printed, with the guest's PMU tree, as the fixture
//! of the arm64 leg of `tests/tests/event_names_vs_perf.rs`.
//!
//! 1. Fetches (cached under `target/xtask/matrix/arm64/`) the arm64 cloud kernel of the chosen series
//!    (`--kernel`, 6.12 by default), `busybox-static:arm64`, and bookworm's `linux-perf:arm64` (perf 6.1,
//!    the version the x86 leg compares against) with every `lib*` package it depends on, recursively.
//! 2. Packs into an initramfs `/usr/bin/perf`, its program interpreter and the shared libraries its
//!    `DT_NEEDED` closure names (nothing else of those packages), busybox, the corpus and an `/init`.
//! 3. The guest prints its kernel, MIDR, perf's version, every file of `/sys/bus/event_source/devices`
//!    that the parser reads (`type`, `cpus`, `cpumask`, `format/*`, `events/*`, `caps/*`), the ids of the
//!    `sched` tracepoints, and for every case `perf stat -vv -e STRING -- true` (or `perf record -vv`).
//! 4. Writes `tests/fixtures/perf-arm64/{sysfs,tracefs,perf}.txt` from the console log.
//!
//! The corpus is `tests/fixtures/perf-arm64/corpus.txt` (its format is described at its top).

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::arch::{Arch, Mode};
use super::{busybox, cpio, download, fetch_kernel, matrix_dir, run_guest, suite_for};
use crate::apt::{run, Apt};
use crate::workspace_root;

/// The suite whose `linux-perf` runs in the guest: bookworm's perf 6.1, the host's.
const PERF_SUITE: &str = "bookworm";
/// The Debian multiarch library folder of arm64.
const LIBDIR: &str = "usr/lib/aarch64-linux-gnu";
const MARK: &str = "@@perf-fixture";

/// Options of `arm64-perf-fixture`.
#[derive(Debug)]
struct Options {
    kernel: String,
    refresh: bool,
    timeout: Duration,
}

fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        kernel: "6.12".into(),
        refresh: false,
        timeout: Duration::from_secs(1200),
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--kernel" => {
                o.kernel = it
                    .next()
                    .ok_or("--kernel needs a series, e.g. 6.12")?
                    .clone()
            }
            "--refresh" => o.refresh = true,
            "--timeout" => {
                let s = it.next().ok_or("--timeout needs a number of seconds")?;
                o.timeout = Duration::from_secs(
                    s.parse()
                        .map_err(|_| format!("--timeout {s:?}: not a number of seconds"))?,
                );
            }
            other => return Err(format!("arm64-perf-fixture: unknown argument {other:?}")),
        }
    }
    Ok(o)
}

/// One case of the corpus.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Case {
    /// `PERF_CPUID` for perf, or `-` for the guest's own.
    pub cpuid: String,
    /// `s` (perf stat), `r` (perf record), `x` (perf stat, expected to reject) or `n` (perf stat,
    /// which perf 6.1 rejects and newer perf and this parser accept).
    pub mode: char,
    /// The event string, verbatim.
    pub text: String,
}

/// Reads the corpus file (see its header for the format).
pub fn read_corpus(text: &str) -> Result<Vec<Case>, String> {
    let mut cpuid = "-".to_string();
    let mut cases = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(id) = line.strip_prefix("@cpuid ") {
            cpuid = id.trim().to_string();
            continue;
        }
        let mut chars = line.chars();
        match (chars.next(), chars.next()) {
            (Some(m @ ('s' | 'r' | 'x' | 'n')), Some(' ')) => cases.push(Case {
                cpuid: cpuid.clone(),
                mode: m,
                text: line[2..].to_string(),
            }),
            _ => {
                return Err(format!(
                    "corpus line {}: {line:?}: not `MODE STRING`",
                    n + 1
                ))
            }
        }
    }
    Ok(cases)
}

fn fixture_dir() -> PathBuf {
    workspace_root().join("tests/fixtures/perf-arm64")
}

/// The `DT_NEEDED` entries and the program interpreter of an ELF file, by `readelf` (which reads any
/// architecture's ELF).
fn elf_deps(path: &Path) -> Result<(Vec<String>, Option<String>), String> {
    let out = run(
        Command::new("readelf").args(["-d", "-l", "-W"]).arg(path),
        &format!("readelf {}", path.display()),
    )?;
    let mut needed = Vec::new();
    let mut interp = None;
    for line in out.lines() {
        if line.contains("(NEEDED)") {
            if let Some(lib) = line.split('[').nth(1).and_then(|s| s.split(']').next()) {
                needed.push(lib.to_string());
            }
        }
        if let Some(rest) = line.split("Requesting program interpreter: ").nth(1) {
            interp = rest.split(']').next().map(str::to_string);
        }
    }
    Ok((needed, interp))
}

/// arm64 `perf` and the files it needs: `(path in the guest, path here)`; the extracted packages are
/// cached in `target/xtask/matrix/arm64/perf`. Also returns the `linux-perf` version.
fn fetch_perf(refresh: bool) -> Result<(Vec<(String, PathBuf)>, String), String> {
    let dir = Arch::Aarch64.dir(matrix_dir()).join("perf");
    let root = dir.join("root");
    let stamp = dir.join("version");
    if refresh || !stamp.is_file() {
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&root).map_err(|e| format!("create {}: {e}", root.display()))?;
        let apt = Apt::for_arch(PERF_SUITE, Arch::Aarch64.debian())?;
        if refresh || !apt.has_lists() {
            apt.update()?;
        }
        let tree = apt.cache(&[
            "depends",
            "--recurse",
            "--no-recommends",
            "--no-suggests",
            "--no-conflicts",
            "--no-breaks",
            "--no-replaces",
            "--no-enhances",
            "linux-perf",
        ])?;
        // Shared libraries only: perl and python themselves are not needed by `perf stat`.
        let packages: BTreeSet<&str> = tree
            .lines()
            .filter(|l| !l.starts_with(' ') && !l.starts_with('<'))
            .map(str::trim)
            .filter(|p| *p == "linux-perf" || p.starts_with("lib") || *p == "zlib1g")
            .collect();
        let mut version = String::new();
        for p in &packages {
            let (_, (), deb) = download(&apt, PERF_SUITE, false, |_| Ok((p.to_string(), ())))?;
            if *p == "linux-perf" {
                version = run(
                    Command::new("dpkg-deb").arg("-f").arg(&deb).arg("Version"),
                    "dpkg-deb -f",
                )?
                .trim()
                .to_string();
            }
            run(
                Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&root),
                &format!("dpkg-deb -x {}", deb.display()),
            )?;
            let _ = fs::remove_file(&deb);
        }
        eprintln!(
            "arm64-perf-fixture: extracted linux-perf {version} and {} library packages",
            packages.len() - 1
        );
        fs::write(&stamp, &version).map_err(|e| format!("write {}: {e}", stamp.display()))?;
    }
    let version =
        fs::read_to_string(&stamp).map_err(|e| format!("read {}: {e}", stamp.display()))?;
    let find = |name: &str| -> Option<PathBuf> {
        ["lib/aarch64-linux-gnu", LIBDIR, "lib", "usr/lib"]
            .iter()
            .map(|d| root.join(d).join(name))
            .find(|p| p.exists())
    };
    let perf = root.join("usr/bin/perf");
    if !perf.is_file() {
        return Err(format!(
            "{} is missing: linux-perf has no /usr/bin/perf",
            perf.display()
        ));
    }
    let mut files = vec![("usr/bin/perf".to_string(), perf.clone())];
    let mut todo = vec![perf];
    let mut seen = BTreeSet::new();
    while let Some(elf) = todo.pop() {
        let (needed, interp) = elf_deps(&elf)?;
        if let Some(interp) = interp {
            let name = interp.trim_start_matches('/').to_string();
            if seen.insert(name.clone()) {
                let base = Path::new(&interp)
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let here = find(&base).ok_or_else(|| format!("no {interp} in libc6:arm64"))?;
                files.push((name, here));
            }
        }
        for lib in needed {
            if !seen.insert(lib.clone()) {
                continue;
            }
            let here = find(&lib).ok_or_else(|| {
                format!(
                    "{} needs {lib}, which no extracted package holds (looked under {})",
                    elf.display(),
                    root.display()
                )
            })?;
            files.push((format!("{LIBDIR}/{lib}"), here.clone()));
            todo.push(here);
        }
    }
    Ok((files, version.trim().to_string()))
}

fn init_script() -> String {
    format!(
        r#"#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/usr/bin:/bin HOME=/tmp LD_LIBRARY_PATH=/{LIBDIR}
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t tmpfs tmpfs /tmp
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
# Keep kernel messages off the console: it carries perf's output.
dmesg -n 1
echo 2 > /proc/sys/kernel/perf_event_paranoid
echo 0 > /proc/sys/kernel/perf_cpu_time_max_percent
echo "{m} kernel $(uname -r)"
echo "{m} midr $(cat /sys/devices/system/cpu/cpu0/regs/identification/midr_el1)"
echo "{m} perf $(perf --version)"
cd /sys/bus/event_source/devices
for d in *; do
  for f in $d/type $d/cpus $d/cpumask $d/format/* $d/events/* $d/caps/*; do
    [ -f "$f" ] && echo "{m} sysfs $f: $(cat "$f" 2>/dev/null)"
  done
done
cd /sys/kernel/tracing/events
for f in sched/*/id; do echo "{m} trace events/$f: $(cat $f)"; done
cd /tmp
i=0
while IFS= read -r line; do
  cpuid=${{line%%	*}}; rest=${{line#*	}}; mode=${{rest%%	*}}; ev=${{rest#*	}}
  echo "{m} case $i"
  if [ "$cpuid" = - ]; then unset PERF_CPUID; else export PERF_CPUID=$cpuid; fi
  if [ "$mode" = r ]; then
    perf record -vv -o /tmp/perf.data -e "$ev" -- true
  else
    perf stat -vv -e "$ev" -- true
  fi < /dev/null 2>&1
  i=$((i+1))
done < /cases
echo "{m} done"
sync
poweroff -f
"#,
        m = MARK
    )
}

/// What the guest printed.
#[derive(Debug, Default)]
struct Capture {
    kernel: String,
    midr: String,
    perf: String,
    sysfs: Vec<String>,
    trace: Vec<String>,
    cases: Vec<String>,
    done: bool,
}

fn parse_log(log: &str) -> Capture {
    let mut c = Capture::default();
    let mut cur: Option<usize> = None;
    for line in log.lines() {
        let line = line.trim_end_matches('\r');
        if let Some(rest) = line.strip_prefix(MARK).and_then(|r| r.strip_prefix(' ')) {
            let (key, val) = rest.split_once(' ').unwrap_or((rest, ""));
            cur = None;
            match key {
                "kernel" => c.kernel = val.to_string(),
                "midr" => c.midr = val.to_string(),
                "perf" => c.perf = val.to_string(),
                "sysfs" => c.sysfs.push(val.to_string()),
                "trace" => c.trace.push(val.to_string()),
                "case" => {
                    c.cases.push(String::new());
                    cur = Some(c.cases.len() - 1);
                }
                "done" => c.done = true,
                _ => {}
            }
            continue;
        }
        if let Some(i) = cur {
            c.cases[i].push_str(line);
            c.cases[i].push('\n');
        }
    }
    c
}

/// Runs `cargo xtask arm64-perf-fixture ARGS`.
pub fn main(args: &[String]) -> Result<(), String> {
    let opts = parse_args(args)?;
    let started = Instant::now();
    let corpus_path = fixture_dir().join("corpus.txt");
    let corpus = read_corpus(
        &fs::read_to_string(&corpus_path)
            .map_err(|e| format!("read {}: {e}", corpus_path.display()))?,
    )?;
    let arch = Arch::Aarch64;
    let kernel = fetch_kernel(arch, suite_for(&opts.kernel), opts.refresh)?;
    if kernel.series != opts.kernel && kernel.suite != opts.kernel {
        return Err(format!(
            "--kernel {}: the matrix has {} ({}) for that suite",
            opts.kernel, kernel.series, kernel.release
        ));
    }
    let busybox = busybox(arch, opts.refresh)?;
    let (perf_files, perf_version) = fetch_perf(opts.refresh)?;

    let dir = arch.dir(matrix_dir());
    let initrd = dir.join("initrd-perf.gz");
    let mut a = cpio::Archive::default();
    for d in [
        "bin", "dev", "proc", "sys", "tmp", "lib", "usr", "usr/bin", "usr/lib", LIBDIR,
    ] {
        a.dir(d);
    }
    a.char_dev("dev/console", 5, 1);
    a.char_dev("dev/null", 1, 3);
    a.file("bin/busybox", 0o755, &busybox);
    a.symlink("bin/sh", "busybox");
    a.file("init", 0o755, init_script().as_bytes());
    let mut cases = String::new();
    for c in &corpus {
        writeln!(cases, "{}\t{}\t{}", c.cpuid, c.mode, c.text).unwrap();
    }
    a.file("cases", 0o644, cases.as_bytes());
    let mut lib_bytes = 0;
    for (guest, here) in &perf_files {
        let data = fs::read(here).map_err(|e| format!("read {}: {e}", here.display()))?;
        lib_bytes += data.len();
        a.file(guest, 0o755, &data);
    }
    a.write_gz(&initrd)?;
    eprintln!(
        "arm64-perf-fixture: perf {perf_version}: {} files, {:.1} MiB; initramfs {:.1} MiB; {} cases",
        perf_files.len(),
        lib_bytes as f64 / (1024.0 * 1024.0),
        fs::metadata(&initrd).map_or(0, |m| m.len()) as f64 / (1024.0 * 1024.0),
        corpus.len()
    );

    let log = dir.join("perf-fixture.log");
    eprintln!(
        "arm64-perf-fixture: booting {} ({}); console in {}",
        kernel.release,
        kernel.source,
        log.display()
    );
    // The exact mode's machine (`-icount shift=0`, one vCPU): only under icount does qemu's PMU
    // offer INST_RETIRED, so only then is `inst_retired` in the guest's sysfs.
    let guest = run_guest(
        arch,
        Mode::Exact,
        1,
        &kernel.vmlinuz,
        &initrd,
        &log,
        opts.timeout,
    )?;
    if guest.status.is_none() {
        return Err(format!(
            "the guest ran past {} s; see {}",
            opts.timeout.as_secs(),
            log.display()
        ));
    }
    let cpu = guest.cpu;
    let guest_secs = guest.wall.as_secs_f64();
    let bytes = fs::read(&log).map_err(|e| format!("read {}: {e}", log.display()))?;
    let cap = parse_log(&String::from_utf8_lossy(&bytes));
    if !cap.done || cap.cases.len() != corpus.len() {
        return Err(format!(
            "the guest printed {} of {} cases (done: {}); see {}",
            cap.cases.len(),
            corpus.len(),
            cap.done,
            log.display()
        ));
    }
    if cap.kernel != kernel.release {
        return Err(format!(
            "the guest ran kernel {:?}, expected {}",
            cap.kernel, kernel.release
        ));
    }

    let fx = fixture_dir();
    let origin = format!(
        "qemu-system-aarch64 -M virt -cpu max (MIDR {}), Linux {} ({}), {}",
        cap.midr, cap.kernel, kernel.source, cap.perf
    );
    let regen = "Regenerate with `cargo xtask arm64-perf-fixture`. Do not edit.";
    let mut sysfs =
        format!("# {origin}: /sys/bus/event_source/devices as the guest had it. {regen}\n");
    for l in &cap.sysfs {
        sysfs.push_str(l);
        sysfs.push('\n');
    }
    let mut trace = format!("# {origin}: the ids of the sched tracepoints. {regen}\n");
    for l in &cap.trace {
        trace.push_str(l);
        trace.push('\n');
    }
    let mut perf = format!(
        "# {origin} (linux-perf {perf_version} from Debian {PERF_SUITE}): `perf stat -vv -e STRING -- true` \
         (`perf record -vv` for mode r) on every case of corpus.txt; `@@@ CPUID MODE STRING` opens each. {regen}\n"
    );
    for (c, out) in corpus.iter().zip(&cap.cases) {
        writeln!(perf, "@@@ {} {} {}", c.cpuid, c.mode, c.text).unwrap();
        perf.push_str(out);
    }
    let mut total = 0;
    for (name, text) in [
        ("sysfs.txt", &sysfs),
        ("tracefs.txt", &trace),
        ("perf.txt", &perf),
    ] {
        let p = fx.join(name);
        fs::write(&p, text).map_err(|e| format!("write {}: {e}", p.display()))?;
        total += text.len();
        eprintln!(
            "arm64-perf-fixture: wrote {} ({} bytes)",
            p.display(),
            text.len()
        );
    }
    println!(
        "arm64-perf-fixture: {} cases, {} sysfs files, fixture {total} bytes; guest {guest_secs:.1} s \
         (qemu cpu {}), {:.1} s in all",
        corpus.len(),
        cap.sysfs.len(),
        cpu.map_or_else(|| "?".into(), |c| format!("{:.1} s", c.as_secs_f64())),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corpus() {
        let c = read_corpus("# x\n@cpuid -\ns cycles\nx  a\n@cpuid 0x1\nr b/c/\n").unwrap();
        assert_eq!(c.len(), 3);
        assert_eq!((c[1].mode, c[1].text.as_str()), ('x', " a"));
        assert_eq!((c[2].cpuid.as_str(), c[2].mode), ("0x1", 'r'));
        assert!(read_corpus("q cycles\n").is_err());
        let text = fs::read_to_string(fixture_dir().join("corpus.txt")).unwrap();
        assert!(read_corpus(&text).unwrap().len() >= 100);
    }

    #[test]
    fn log() {
        let cap = parse_log(
            "boot\r\n@@perf-fixture kernel 6.12\r\n@@perf-fixture sysfs a/type: 8\r\n\
             @@perf-fixture case 0\r\nperf_event_attr:\r\n@@perf-fixture case 1\r\n@@perf-fixture done\r\n",
        );
        assert_eq!(cap.kernel, "6.12");
        assert_eq!(cap.sysfs, ["a/type: 8"]);
        assert_eq!(cap.cases, ["perf_event_attr:\n", ""]);
        assert!(cap.done);
    }
}
