//! The `perf-profile` command against perf, side by side in one run (issue 27's speed and memory
//! targets):
//!
//! 1. A system-wide capture, 5 s at 999 Hz with call chains (frame pointers), of the same load
//!    (two copies of the C workload `tests/workload/calls.c`, plus whatever else runs): `profile -a
//!    -F 999 -d 5 -o X.pb.gz` (a symbolized pprof) and, at the same time, `perf record -a -g -F 999
//!    -- sleep 5` followed by `perf script`. Each one's own CPU (user + system, from `wait4`) and
//!    peak RSS; the ratios. Targets: CPU <= 0.5x, peak RSS <= 64 MiB.
//! 2. `-g dwarf` on a command (the workload built `-O2 -fomit-frame-pointer`), 999 Hz, symbolized
//!    at the end: the profiler's own CPU per sample, with its default 8 KiB stack copies and
//!    with samply's 32000 bytes; `perf record --call-graph dwarf` + `perf script`'s on the same
//!    command; and samply 0.13.1's (`samply record --save-only --unstable-presymbolicate`, which
//!    also copies stacks, unwinds with framehop and symbolizes at the end), where `samply` is on
//!    `PATH` or `$SAMPLY` names it (`cargo install samply --version 0.13.1 --locked`); each run
//!    after the other, the same command. Without a PMU samply needs perf_event_paranoid <= 1
//!    even as root: `BENCH_SAMPLY_PARANOID=1` lowers it for samply's run and restores it.
//! 3. The workload's slowdown when profiled at 99 Hz: a fixed amount of work (a shell loop) timed
//!    alone and under `profile -F 99`, the median of 5 runs each.
//! 4. Issue 36's capture (`programs`): the same system-wide capture while 4 different programs are
//!    busy (the C workload, python3, xz, gzip), then 20 (those and sixteen more: compressors,
//!    checksums, interpreters; `BENCH_PROGRAMS=4,20` sets the counts): ours to a symbolized pprof
//!    and `perf record -a -g` alone, at the same time. Targets: CPU <= 0.4x, peak RSS <= 32 MiB.
//!    `BENCH_BASELINE=path/to/perf-profile` runs another build of the profiler at the same time
//!    too (before and after a change, on the same load).
//!
//! `cargo bench -p perf-profile --bench system` (root: system-wide sampling). `BENCH_SECONDS`
//! changes the capture's length; `BENCH_ONLY=dwarf` (a comma-separated list of `system`, `dwarf`,
//! `slowdown`, `programs`) runs only those parts; `BENCH_REPEAT=3` runs the `-g dwarf` part three
//! times and prints the spread of the ratios to samply. Prints `skipped: <reason>` where it cannot
//! run.

#[path = "../tests/common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{build_workload, have, NO_FRAME_POINTERS};

/// What `wait4` says of a finished child.
struct Usage {
    cpu: Duration,
    max_rss_kib: u64,
    wall: Duration,
    ok: bool,
}

/// Spawns `cmd` and reaps it with `wait4`, for its own CPU time and peak RSS (and its waited-for
/// descendants').
// The child is reaped by `wait4`, which std cannot see.
#[allow(clippy::zombie_processes)]
fn spawn_usage(cmd: &mut Command) -> impl FnOnce() -> Usage {
    let started = Instant::now();
    let child = cmd.spawn().expect("spawn");
    move || {
        let pid = child.id() as i32;
        // SAFETY: rusage is plain integers; all-zero is a valid value.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        let mut status = 0;
        // SAFETY: waits for our own child, once; `status` and `ru` are valid and writable.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
        assert_eq!(r, pid, "wait4: {}", std::io::Error::last_os_error());
        let tv = |t: libc::timeval| {
            Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
        };
        Usage {
            cpu: tv(ru.ru_utime) + tv(ru.ru_stime),
            max_rss_kib: ru.ru_maxrss as u64,
            wall: started.elapsed(),
            ok: libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        }
    }
}

fn skip(why: &str) {
    println!("skipped: {why}");
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else is taken.
    if !tests::is_root() {
        return skip("system-wide sampling needs root");
    }
    if !have("perf", "--version") {
        return skip("perf is not installed (Debian: linux-perf)");
    }
    if !have("cc", "--version") {
        return skip("no C compiler (cc)");
    }
    let secs: u64 = std::env::var("BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let profile = common::command();
    let dir = std::env::temp_dir().join(format!("profile-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let calls = build_workload(&dir);
    let only = std::env::var("BENCH_ONLY").unwrap_or_default();
    let run = |part: &str| only.is_empty() || only.split(',').any(|p| p == part);
    if run("system") {
        system_wide(&profile, &calls, &dir, secs);
    }
    if run("programs") {
        let counts = std::env::var("BENCH_PROGRAMS").unwrap_or_else(|_| "4,20".into());
        for n in counts.split(',').filter_map(|n| n.trim().parse().ok()) {
            programs(&profile, &calls, &dir, secs, n);
        }
    }
    if run("dwarf") {
        if cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
            dwarf(&profile, &dir);
        } else {
            skip("-g dwarf unwinds on x86_64 and aarch64");
        }
    }
    if run("slowdown") {
        slowdown(&profile);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn system_wide(profile: &Path, calls: &Path, dir: &Path, secs: u64) {
    println!(
        "system-wide, {secs} s at 999 Hz with call chains (fp), a symbolized pprof at the end:"
    );
    // The load, on every CPU, outlasting both captures.
    let load: Vec<_> = (0..2)
        .map(|_| {
            Command::new(calls)
                .arg((secs + 3).to_string())
                .spawn()
                .unwrap()
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let data = dir.join("perf.data");
    let (ours, rec, our_samples) = side_by_side(profile, dir, secs);
    for mut l in load {
        let _ = l.kill();
        let _ = l.wait();
    }
    let script_out = dir.join("perf.script");
    let script = spawn_usage(
        Command::new("perf")
            .args(["script", "-i"])
            .arg(&data)
            .stdout(std::fs::File::create(&script_out).unwrap())
            .stderr(Stdio::null()),
    )();
    assert!(script.ok, "perf script failed");
    let perf_samples = read(&script_out)
        .split("\n\n")
        .filter(|b| !b.trim().is_empty())
        .count();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let mib = |k: u64| k as f64 / 1024.0;
    println!(
        "  profile:          {:7.0} ms CPU, peak RSS {:6.1} MiB, {our_samples} samples",
        ms(ours.cpu),
        mib(ours.max_rss_kib)
    );
    println!(
        "  perf record -a -g:{:7.0} ms CPU, peak RSS {:6.1} MiB",
        ms(rec.cpu),
        mib(rec.max_rss_kib)
    );
    println!(
        "  perf script:      {:7.0} ms CPU, peak RSS {:6.1} MiB, {perf_samples} samples ({:.1} s)",
        ms(script.cpu),
        mib(script.max_rss_kib),
        script.wall.as_secs_f64()
    );
    let perf_cpu = rec.cpu + script.cpu;
    println!(
        "  CPU ratio profile / (perf record + perf script): {:.3} (target <= 0.5)",
        ours.cpu.as_secs_f64() / perf_cpu.as_secs_f64().max(1e-9)
    );
    println!(
        "  peak RSS of profile: {:.1} MiB (target <= 64); perf script's {:.1} MiB",
        mib(ours.max_rss_kib),
        mib(script.max_rss_kib)
    );
}

/// Busy programs, each a different binary (the first four: the C workload, python3, xz, gzip),
/// as `sh -c` lines run with `exec` so that killing the child ends the program itself.
const BUSY: &[(&str, &str)] = &[
    ("calls", "exec \"$CALLS\" 1000"),
    ("python3", "exec python3 -c 'while True: pass'"),
    ("xz", "exec xz -c </dev/zero >/dev/null"),
    ("gzip", "exec gzip -c </dev/zero >/dev/null"),
    ("bzip2", "exec bzip2 -c </dev/zero >/dev/null"),
    ("zstd", "exec zstd -q -c </dev/zero >/dev/null"),
    ("lz4", "exec lz4 -q -c </dev/zero >/dev/null"),
    ("perl", "exec perl -e 'while (1) { $i++ }'"),
    ("node", "exec node -e 'for (;;) {}'"),
    ("tclsh", "exec tclsh \"$DIR/loop.tcl\""),
    ("mawk", "exec mawk 'BEGIN { while (1) i++ }'"),
    ("bc", "exec bc -q \"$DIR/loop.bc\""),
    ("sha1sum", "exec sha1sum /dev/zero"),
    ("sha256sum", "exec sha256sum /dev/zero"),
    ("sha512sum", "exec sha512sum /dev/zero"),
    ("md5sum", "exec md5sum /dev/zero"),
    ("b2sum", "exec b2sum /dev/zero"),
    ("cksum", "exec cksum /dev/zero"),
    ("base64", "exec base64 </dev/zero >/dev/null"),
    ("tr", "exec tr a b </dev/zero >/dev/null"),
    ("sha384sum", "exec sha384sum /dev/zero"),
    ("od", "exec od /dev/zero >/dev/null"),
];

/// Issue 36's capture: `n` different busy programs (4: a C loop, python3, xz, gzip; 20: those and
/// sixteen more), `profile -a -F 999 -d 5` to a symbolized pprof and `perf record -a -g -F 999`
/// at the same time; each one's own CPU and peak RSS. Target: ours <= 0.4x perf record's CPU,
/// peak RSS <= 32 MiB, at 4 programs and at 20.
fn programs(profile: &Path, calls: &Path, dir: &Path, secs: u64, n: usize) {
    std::fs::write(dir.join("loop.tcl"), "while 1 {}\n").unwrap();
    std::fs::write(dir.join("loop.bc"), "while (1) { i += 1 }\n").unwrap();
    let mut names = Vec::new();
    let mut load = Vec::new();
    for (name, line) in BUSY {
        if names.len() == n {
            break;
        }
        if *name != "calls" && !on_path(name) {
            continue;
        }
        load.push(
            Command::new("sh")
                .args(["-c", line])
                .env("CALLS", calls)
                .env("DIR", dir)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        names.push(*name);
    }
    println!(
        "{} different busy programs ({}), {secs} s system-wide at 999 Hz with call chains (fp), \
         a symbolized pprof; ours and perf record at the same time:",
        names.len(),
        names.join(" ")
    );
    if names.len() < n {
        println!("  (only {} of {n} programs are installed)", names.len());
    }
    std::thread::sleep(Duration::from_millis(300));
    // A baseline build of the profiler (`BENCH_BASELINE=path`), at the same time as the others.
    let baseline = std::env::var_os("BENCH_BASELINE").map(|b| {
        spawn_usage(
            Command::new(b)
                .args(["-a", "-F", "999", "-d", &secs.to_string(), "-o"])
                .arg(dir.join("baseline.pb.gz"))
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
        )
    });
    let (ours, rec, samples) = side_by_side(profile, dir, secs);
    let baseline = baseline.map(|b| b());
    for mut l in load {
        let _ = l.kill();
        let _ = l.wait();
    }
    let (ms, mib) = (
        |d: Duration| d.as_secs_f64() * 1e3,
        |k: u64| k as f64 / 1024.0,
    );
    println!(
        "  profile:           {:7.0} ms CPU, peak RSS {:6.1} MiB, {samples} samples",
        ms(ours.cpu),
        mib(ours.max_rss_kib)
    );
    println!(
        "  perf record -a -g: {:7.0} ms CPU, peak RSS {:6.1} MiB",
        ms(rec.cpu),
        mib(rec.max_rss_kib)
    );
    if let Some(b) = baseline {
        println!(
            "  baseline profile:  {:7.0} ms CPU, peak RSS {:6.1} MiB (ratio {:.3})",
            ms(b.cpu),
            mib(b.max_rss_kib),
            b.cpu.as_secs_f64() / rec.cpu.as_secs_f64().max(1e-9)
        );
    }
    println!(
        "  CPU ratio profile / perf record: {:.3} (target <= 0.4); peak RSS {:.1} MiB (target <= 32)",
        ours.cpu.as_secs_f64() / rec.cpu.as_secs_f64().max(1e-9),
        mib(ours.max_rss_kib)
    );
}

/// Whether `name` is a file in a `PATH` directory.
fn on_path(name: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(name).is_file()))
}

/// `profile -a -F 999 -d SECS -o ours.pb.gz` and `perf record -a -g -F 999 -- sleep SECS`
/// started together: their `wait4` figures and our sample count.
fn side_by_side(profile: &Path, dir: &Path, secs: u64) -> (Usage, Usage, String) {
    let data = dir.join("perf.data");
    let perf_record = spawn_usage(
        Command::new("perf")
            .args(["record", "-a", "-g", "-F", "999", "--buildid-mmap", "-o"])
            .arg(&data)
            .args(["--", "sleep", &secs.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    );
    let ours_err = dir.join("ours.stderr");
    let ours = spawn_usage(
        Command::new(profile)
            .args(["-a", "-F", "999", "-d", &secs.to_string(), "-o"])
            .arg(dir.join("ours.pb.gz"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&ours_err).unwrap()),
    );
    let ours = ours();
    let rec = perf_record();
    assert!(ours.ok, "profile failed: {}", read(&ours_err));
    assert!(rec.ok, "perf record failed");
    let samples = read(&ours_err)
        .lines()
        .find_map(|l| {
            l.strip_prefix("profile: ")?
                .split_once(" samples in ")
                .map(|(n, _)| n.to_owned())
        })
        .unwrap_or_default();
    (ours, rec, samples)
}

fn dwarf(profile: &Path, dir: &Path) {
    let bin = common::cc(dir, "calls-O2", "calls.c", NO_FRAME_POINTERS, &[]);
    println!("-g dwarf, a command for 3 s of CPU at 999 Hz, symbolized at the end:");
    let rounds: usize = std::env::var("BENCH_REPEAT")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1)
        .max(1);
    let samply = samply_version();
    // (ours/samply with the same stack size, ours at 8 KiB/samply) of each round samply finished.
    let mut ratios = Vec::new();
    for round in 1..=rounds {
        if rounds > 1 {
            println!(" round {round} of {rounds}:");
        }
        let (own_8k, samples_8k) = dwarf_perf(profile, &bin, dir);
        if let Some((samply, version)) = &samply {
            let samply = (samply.as_path(), version.as_str());
            ratios.extend(dwarf_samply(profile, &bin, dir, samply, own_8k, samples_8k));
        }
    }
    if ratios.len() > 1 {
        let spread = |pick: fn(&(f64, f64)) -> f64| {
            let mut v: Vec<f64> = ratios.iter().map(pick).collect();
            v.sort_by(f64::total_cmp);
            let list: Vec<String> = v.iter().map(|r| format!("{r:.3}")).collect();
            list.join(" / ")
        };
        println!(
            "  ratio ours/samply per sample over {} rounds (low to high): {} (same stack size), \
             {} (ours at 8 KiB) (target <= 0.7)",
            ratios.len(),
            spread(|r| r.0),
            spread(|r| r.1)
        );
    }
}

/// One round of ours (8 KiB stacks) and `perf record --call-graph dwarf` + `perf script` on `bin
/// 3`: our own CPU and sample count.
fn dwarf_perf(profile: &Path, bin: &Path, dir: &Path) -> (Duration, u64) {
    let (own, samples, ours) = dwarf_ours(profile, bin, dir, "dwarf");
    let data = dir.join("dwarf.data");
    let rec = spawn_usage(
        Command::new("perf")
            .args([
                "record",
                "-q",
                "--buildid-mmap",
                "--call-graph",
                "dwarf",
                "-F",
                "999",
                "-o",
            ])
            .arg(&data)
            .arg("--")
            .arg(bin)
            .arg("3")
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    )();
    let script = spawn_usage(
        Command::new("perf")
            .args(["script", "-i"])
            .arg(&data)
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    )();
    assert!(rec.ok && script.ok, "perf failed");
    let perf_own = rec.cpu.saturating_sub(Duration::from_secs(3)) + script.cpu;
    let per = |d: Duration| d.as_secs_f64() * 1e6 / samples.max(1) as f64;
    println!(
        "  profile (8 KiB stacks): {:.0} ms CPU of its own for {samples} samples ({:.0} us per \
         sample), peak RSS {:.1} MiB",
        own.as_secs_f64() * 1e3,
        per(own),
        ours.max_rss_kib as f64 / 1024.0
    );
    println!(
        "  perf record --call-graph dwarf + perf script: {:.0} ms ({:.0} us per sample of ours); \
         ratio {:.3}",
        perf_own.as_secs_f64() * 1e3,
        per(perf_own),
        own.as_secs_f64() / perf_own.as_secs_f64().max(1e-9)
    );
    (own, samples)
}

/// `profile -F 999 -g <call_graph>` on `bin 3`: its own CPU (less the command's 3 s), its sample
/// count and its `wait4` figures.
fn dwarf_ours(profile: &Path, bin: &Path, dir: &Path, call_graph: &str) -> (Duration, u64, Usage) {
    let err = dir.join("dwarf.stderr");
    let ours = spawn_usage(
        Command::new(profile)
            .args(["-F", "999", "-g", call_graph, "-o"])
            .arg(dir.join("dwarf.pb.gz"))
            .arg("--")
            .arg(bin)
            .arg("3")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&err).unwrap()),
    )();
    assert!(ours.ok, "profile failed: {}", read(&err));
    // The command's CPU is in `ours.cpu` too (a waited-for child): take it out with the
    // command's own 3 s of CPU (it runs until its CPU time reaches 3 s).
    let samples: u64 = read(&err)
        .lines()
        .find_map(|l| {
            l.strip_prefix("profile: ")?
                .split_once(" samples in ")
                .and_then(|(n, _)| n.parse().ok())
        })
        .unwrap_or(0);
    (
        ours.cpu.saturating_sub(Duration::from_secs(3)),
        samples,
        ours,
    )
}

/// samply (`$SAMPLY`, else `samply` on `PATH`) and its `--version` line, or `None` (said why).
fn samply_version() -> Option<(PathBuf, String)> {
    let samply = std::env::var_os("SAMPLY")
        .map(PathBuf::from)
        .unwrap_or_else(|| "samply".into());
    match Command::new(&samply).arg("--version").output() {
        Ok(o) if o.status.success() => {
            let version = String::from_utf8_lossy(&o.stdout).trim().to_owned();
            Some((samply, version))
        }
        _ => {
            skip(&format!(
                "{} not found or not runnable: no samply comparison (cargo install samply \
                 --version 0.13.1 --locked; then put it on PATH or set SAMPLY)",
                samply.display()
            ));
            None
        }
    }
}

/// One round of ours with samply's 32000-byte stack copies, then of samply on the same command,
/// right after the round's `own_8k` for `samples_8k` (ours at 8 KiB; the machine's load moves
/// slowly). The ratios ours/samply per sample (same stack size, ours at 8 KiB), or `None` where
/// samply failed (said why).
fn dwarf_samply(
    profile: &Path,
    bin: &Path,
    dir: &Path,
    (samply, version): (&Path, &str),
    own_8k: Duration,
    samples_8k: u64,
) -> Option<(f64, f64)> {
    // samply copies 32000 bytes of stack per sample (its Linux default): ours with the same.
    let (own_32k, samples_32k, _) = dwarf_ours(profile, bin, dir, "dwarf,32000");
    let per = |d: Duration, n: u64| d.as_secs_f64() * 1e6 / n.max(1) as f64;
    let ours_32k = per(own_32k, samples_32k);
    println!(
        "  profile -g dwarf,32000 (samply's stack size): {:.0} ms CPU of its own for \
         {samples_32k} samples ({ours_32k:.0} us per sample)",
        own_32k.as_secs_f64() * 1e3
    );
    let out = dir.join("samply.json.gz");
    let err = dir.join("samply.stderr");
    // samply 0.13.1 tries `cycles` first and, where that fails (no PMU: ENOENT) while
    // perf_event_paranoid is above 1, exits (it takes any failure then for a permission
    // problem, even as root) instead of falling back to `cpu-clock`. BENCH_SAMPLY_PARANOID=1 lowers
    // the sysctl to 1 for samply's run only and restores it after.
    const PARANOID: &str = "/proc/sys/kernel/perf_event_paranoid";
    let paranoid = read(Path::new(PARANOID)).trim().to_owned();
    let lower = std::env::var_os("BENCH_SAMPLY_PARANOID").is_some_and(|v| v == "1")
        && paranoid.parse::<i32>().is_ok_and(|l| l > 1);
    if lower {
        std::fs::write(PARANOID, "1").expect("lowering perf_event_paranoid");
    }
    let run = spawn_usage(
        Command::new(samply)
            .args([
                "record",
                "--save-only",
                "--unstable-presymbolicate",
                "-r",
                "999",
                "-o",
            ])
            .arg(&out)
            .arg("--")
            .arg(bin)
            .arg("3")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&err).unwrap()),
    )();
    if lower {
        std::fs::write(PARANOID, &paranoid).expect("restoring perf_event_paranoid");
    }
    if !run.ok || !out.exists() {
        // Its message, or the first panic's, without backtraces.
        let err = read(&err);
        let why = err
            .lines()
            .position(|l| l.contains("panicked at"))
            .map_or_else(
                || err.trim().to_owned(),
                |i| err.lines().skip(i).take(2).collect::<Vec<_>>().join(" "),
            );
        skip(&format!(
            "{version} failed, no samply comparison (perf_event_paranoid {}; without a PMU \
             samply needs 1 or lower: BENCH_SAMPLY_PARANOID=1): {why}",
            if lower { "lowered to 1" } else { &paranoid }
        ));
        return None;
    }
    // samply waits for the command too: its CPU is in samply's figure.
    let own = run.cpu.saturating_sub(Duration::from_secs(3));
    let samples = samply_samples(&out).unwrap_or(samples_32k);
    let (theirs, ours_8k) = (per(own, samples), per(own_8k, samples_8k));
    println!(
        "  {version} (--unstable-presymbolicate, 32000-byte stacks): {:.0} ms CPU of its own for \
         {samples} samples ({theirs:.0} us per sample), peak RSS {:.1} MiB",
        own.as_secs_f64() * 1e3,
        run.max_rss_kib as f64 / 1024.0
    );
    let ratios = (ours_32k / theirs.max(1e-9), ours_8k / theirs.max(1e-9));
    println!(
        "  ratio ours/samply per sample: {:.3} (same stack size), {:.3} (ours at 8 KiB) (target \
         <= 0.7)",
        ratios.0, ratios.1
    );
    Some(ratios)
}

/// The number of samples in samply's profile (gzip'd Firefox profiler JSON): the sum of each
/// thread's `"samples":{..."length":N`.
fn samply_samples(path: &Path) -> Option<u64> {
    use std::io::Read;
    let mut json = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).ok()?)
        .read_to_string(&mut json)
        .ok()?;
    let mut total = 0;
    let mut found = false;
    for part in json.split("\"samples\":{").skip(1) {
        let Some(at) = part.find("\"length\":") else {
            continue;
        };
        let digits: String = part[at + 9..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        if let Ok(n) = digits.parse::<u64>() {
            total += n;
            found = true;
        }
    }
    found.then_some(total)
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

/// A fixed amount of work, a shell loop of `n` steps, that prints how long it took in ns (its
/// own time, not the profiler's start or its writing the profile).
const WORK: &str = "s=$(date +%s%N); i=0; while [ $i -lt $1 ]; do i=$((i+1)); done; \
                    e=$(date +%s%N); echo $((e-s))";

fn timed(cmd: &mut Command) -> Duration {
    let out = cmd.stderr(Stdio::null()).output().unwrap();
    assert!(out.status.success(), "{cmd:?} failed");
    let ns: u64 = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("the loop prints its time in ns");
    Duration::from_nanos(ns)
}

fn slowdown(profile: &Path) {
    const N: &str = "1000000";
    const RUNS: usize = 5;
    let median = |v: &[Duration]| {
        let mut v = v.to_vec();
        v.sort();
        v[v.len() / 2]
    };
    let out = std::env::temp_dir().join(format!("profile-bench-{}.folded", std::process::id()));
    let (mut plain, mut profiled) = (Vec::new(), Vec::new());
    // Alternating, so that a change in the machine's load falls on both.
    for _ in 0..RUNS {
        plain.push(timed(Command::new("sh").args(["-c", WORK, "sh", N])));
        profiled.push(timed(
            Command::new(profile)
                .args(["-F", "99", "-o"])
                .arg(&out)
                .args(["--", "sh", "-c", WORK, "sh", N]),
        ));
    }
    let _ = std::fs::remove_file(&out);
    let (p, q) = (median(&plain), median(&profiled));
    println!(
        "workload slowdown at 99 Hz (a {N}-step shell loop timing itself, median of {RUNS}): \
         alone {:.0} ms, profiled {:.0} ms: {:+.1}%",
        p.as_secs_f64() * 1e3,
        q.as_secs_f64() * 1e3,
        100.0 * (q.as_secs_f64() / p.as_secs_f64() - 1.0)
    );
    let ms = |v: &[Duration]| v.iter().map(Duration::as_millis).collect::<Vec<_>>();
    println!(
        "  alone (ms):    {:?}\n  profiled (ms): {:?}",
        ms(&plain),
        ms(&profiled)
    );
}
