//! Issue 33, attacks 1-7: a root `profile` next to an unprivileged neighbour (`nobody`, through
//! `setpriv`) that plants files where the profiler reads on its behalf: `/tmp/perf-PID.map`, the
//! paths of its mappings, the debug link of its binary, the unwind tables of files it maps. Each
//! test plays the attacker for real (`tests/workload/attacker.c`) and asserts that the capture
//! ends on time (the profiler runs under a deadline and is killed past it, so a hang is a
//! failure, not a stuck test), that the profile is written, that no foreign file's content names
//! a frame, and that peak RSS stays within 64 MiB + the memory budget (`prlimit` caps the address
//! space, so a runaway read fails the test instead of the machine).

mod common;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{build_c, cc, folded_file, require_cc, scratch, text};
use tests::{require, Skip};

/// The memory budget `profile` runs with in these tests (its default).
const BUDGET_MIB: u64 = (perf_profile::untrusted::DEFAULT_MEMORY_BUDGET >> 20) as u64;

/// What the profiler may use beside the budget (the bound).
const BASE_MIB: u64 = 64;

/// The uid and gid `setpriv --reuid=nobody --regid=nogroup` gives (`None`: it cannot here).
fn nobody_ids() -> Option<(u32, u32)> {
    static IDS: std::sync::OnceLock<Option<(u32, u32)>> = std::sync::OnceLock::new();
    *IDS.get_or_init(|| {
        let id = |flag: &str| {
            let o = as_nobody(Path::new("id")).arg(flag).output().ok()?;
            o.status.success().then_some(())?;
            text(&o.stdout).trim().parse().ok()
        };
        Some((id("-u")?, id("-g")?))
    })
}

/// `path` given to `nobody:nogroup`.
fn give_to_nobody(path: &Path) {
    let (uid, gid) = nobody_ids().expect("checked by require_attack!");
    std::os::unix::fs::chown(path, Some(uid), Some(gid)).unwrap();
}

/// Returns from the test with a skip unless it can play both sides: root (to profile another
/// user and to become `nobody`), a C compiler, `setpriv`, `prlimit`, GNU `time`, x86_64 or aarch64.
macro_rules! require_attack {
    () => {
        require!(
            tests::is_root(),
            Skip::Privilege,
            "needs root: the profiler runs as root, the attacker as nobody"
        );
        require_cc!();
        require!(
            nobody_ids().is_some() && common::have("prlimit", "--version"),
            Skip::Environment,
            "setpriv and prlimit (util-linux), or the user nobody, are missing"
        );
        require!(
            Path::new("/usr/bin/time").exists(),
            Skip::Environment,
            "GNU time (/usr/bin/time)"
        );
        require!(
            cfg!(any(target_arch = "x86_64", target_arch = "aarch64")),
            Skip::Environment,
            "the attacker generates x86_64 or aarch64 code"
        );
    };
}

/// A scratch folder for one test and, inside it, a folder of `nobody`'s where it keeps its files.
fn dirs(name: &str) -> (PathBuf, PathBuf) {
    let dir = scratch(name);
    let own = dir.join("nobody");
    std::fs::create_dir(&own).unwrap();
    give_to_nobody(&own);
    (dir, own)
}

/// `cmd` as `nobody:nogroup` with no supplementary groups.
fn as_nobody(program: &Path) -> Command {
    let mut c = Command::new("setpriv");
    c.args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
        .arg(program);
    c
}

/// The attacker, running as nobody with `args` (after the seconds), once it says it planted.
struct Attacker(Child, u32);

impl Attacker {
    fn start(bin: &Path, secs: &str, args: &[&str]) -> Self {
        let mut child = as_nobody(bin)
            .arg(secs)
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let pid = line
            .strip_prefix("ready ")
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| panic!("the attacker did not get ready: {line:?}"));
        Self(child, pid)
    }
}

impl Drop for Attacker {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        let _ = std::fs::remove_file(format!("/tmp/perf-{}.map", self.1));
    }
}

/// How a capture went.
#[derive(Debug)]
struct Run {
    /// `None`: it was still running at the deadline (then killed).
    ok: Option<bool>,
    elapsed: Duration,
    peak_rss_mib: u64,
    /// What it said (shown when a test fails).
    #[allow(dead_code)]
    stderr: String,
}

/// Runs the `profile` example with `args` under `deadline`, its address space capped at 4 GiB.
fn capture(dir: &Path, args: &[&str], deadline: Duration) -> Run {
    let rss_file = dir.join("rss");
    let example = common::command();
    let started = Instant::now();
    let mut child = Command::new("prlimit")
        .arg(format!("--as={}", 4u64 << 30))
        .args(["--", "/usr/bin/time", "-f", "%M", "-o"])
        .arg(&rss_file)
        .arg(example)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut ok = None;
    while started.elapsed() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            ok = Some(status.success());
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    if ok.is_none() {
        // prlimit execs time; time's child is the profiler.
        let children = format!("/proc/{0}/task/{0}/children", child.id());
        for pid in std::fs::read_to_string(children)
            .unwrap_or_default()
            .split_whitespace()
        {
            let _ = Command::new("kill").args(["-9", pid]).status();
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    let elapsed = started.elapsed();
    let stderr = text(
        &child
            .wait_with_output()
            .map(|o| o.stderr)
            .unwrap_or_default(),
    );
    let rss = std::fs::read_to_string(&rss_file).unwrap_or_default();
    let peak_rss_mib = rss
        .lines()
        .filter_map(|l| l.trim().parse::<u64>().ok())
        .next_back()
        .unwrap_or(0)
        / 1024;
    let run = Run {
        ok,
        elapsed,
        peak_rss_mib,
        stderr,
    };
    println!(
        "profile {args:?}: {:?} in {:.1} s, peak RSS {} MiB",
        run.ok,
        run.elapsed.as_secs_f64(),
        run.peak_rss_mib
    );
    run
}

/// The capture ended by itself, succeeded and wrote `out`.
fn assert_finished(run: &Run, out: &Path) {
    assert_eq!(
        run.ok,
        Some(true),
        "the capture did not end on time or failed: {run:?}"
    );
    assert!(out.exists(), "no profile written: {run:?}");
}

/// The attacker workload, built once per test into its own folder.
fn attacker(dir: &Path) -> PathBuf {
    build_c(dir, "attacker")
}

/// Deadline for a one-second capture on a loaded machine.
const DEADLINE: Duration = Duration::from_secs(40);

/// Attack 1: a FIFO at `/tmp/perf-PID.map`.
#[test]
fn a_fifo_as_the_jit_map_does_not_hang_the_capture() {
    require_attack!();
    let (dir, _) = dirs("fifo-map");
    let bin = attacker(&dir);
    let a = Attacker::start(&bin, "30", &["jit-fifo"]);
    let out = dir.join("out.folded");
    let run = capture(
        &dir,
        &[
            "-p",
            &a.1.to_string(),
            "-d",
            "1",
            "-o",
            out.to_str().unwrap(),
        ],
        DEADLINE,
    );
    assert_finished(&run, &out);
}

/// Attack 2: a library mapped, then deleted, FIFOs planted at its path and at the path with
/// " (deleted)" that `/proc/PID/maps` shows: seeding the space and symbolizing open them.
#[test]
fn a_fifo_at_a_mapped_files_path_does_not_hang_the_capture() {
    require_attack!();
    let (dir, own) = dirs("fifo-mapped");
    let bin = attacker(&dir);
    let lib = cc(
        &own,
        "libplug.so",
        "plugin.c",
        &["-O0", "-g", "-fPIC", "-shared"],
        &[],
    );
    give_to_nobody(&lib);
    let a = Attacker::start(&bin, "30", &["deleted", lib.to_str().unwrap()]);
    for mode in ["local", "functions"] {
        for call_graph in ["fp", "dwarf"] {
            let out = dir.join(format!("out-{mode}-{call_graph}.folded"));
            let run = capture(
                &dir,
                &[
                    "-p",
                    &a.1.to_string(),
                    "-d",
                    "1",
                    "-g",
                    call_graph,
                    "--symbolize",
                    mode,
                    "-o",
                    out.to_str().unwrap(),
                ],
                DEADLINE,
            );
            assert_finished(&run, &out);
        }
    }
}

/// Attack 3: the attacker's binary's `.gnu_debuglink` names a FIFO beside it; `--symbolize local`
/// must not open it.
#[test]
fn a_debug_link_to_a_fifo_does_not_hang_local_symbolization() {
    require_attack!();
    require!(
        common::have("objcopy", "--version"),
        Skip::Environment,
        "objcopy (binutils)"
    );
    let (dir, own) = dirs("debuglink");
    let bin = build_c(&own, "calls");
    let debug = own.join("calls.debug");
    let objcopy = |args: &[&str]| {
        let o = Command::new("objcopy").args(args).output().unwrap();
        assert!(o.status.success(), "objcopy {args:?}: {}", text(&o.stderr));
    };
    objcopy(&[
        "--only-keep-debug",
        bin.to_str().unwrap(),
        debug.to_str().unwrap(),
    ]);
    objcopy(&[
        "--strip-debug",
        &format!("--add-gnu-debuglink={}", debug.display()),
        bin.to_str().unwrap(),
    ]);
    std::fs::remove_file(&debug).unwrap();
    give_to_nobody(&bin);
    // The attacker plants the FIFO, in its own folder.
    let st = as_nobody(Path::new("/usr/bin/mkfifo"))
        .arg(&debug)
        .status()
        .unwrap();
    assert!(st.success());
    let out = dir.join("out.folded");
    let run = capture(
        &dir,
        &[
            "--symbolize",
            "local",
            "-o",
            out.to_str().unwrap(),
            "--",
            "setpriv",
            "--reuid=nobody",
            "--regid=nogroup",
            "--clear-groups",
            bin.to_str().unwrap(),
            "0.5",
        ],
        DEADLINE,
    );
    assert_finished(&run, &out);
    // The binary's own symbols still name its frames.
    let stacks = folded_file(&out);
    assert!(common::samples_with(&stacks, "hot_a") > 0, "{stacks:?}");
}

/// Attack 4: `/tmp/perf-PID.map` a symlink to a file only root may read, whose lines look like a
/// map: they must not name frames.
#[test]
fn a_jit_map_linked_to_a_root_only_file_does_not_show_its_lines() {
    require_attack!();
    let (dir, _) = dirs("secret-map");
    let bin = attacker(&dir);
    let secret = dir.join("secret");
    std::fs::write(&secret, "0 7fffffffffff ROOT_ONLY_SECRET_LINE\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let a = Attacker::start(&bin, "30", &["jit-link", secret.to_str().unwrap()]);
    let out = dir.join("out.folded");
    let run = capture(
        &dir,
        &[
            "-p",
            &a.1.to_string(),
            "-d",
            "1",
            "-o",
            out.to_str().unwrap(),
        ],
        DEADLINE,
    );
    assert_finished(&run, &out);
    let folded = std::fs::read_to_string(&out).unwrap();
    assert!(!folded.contains("ROOT_ONLY_SECRET"), "{folded}");
    assert!(!folded.is_empty(), "no samples of the attacker");
}

/// Attack 5: `/tmp/perf-PID.map` -> `/dev/zero` (0 bytes by its metadata, endless when read).
#[test]
fn a_jit_map_linked_to_dev_zero_does_not_exhaust_memory() {
    require_attack!();
    let (dir, _) = dirs("zero-map");
    let bin = attacker(&dir);
    let a = Attacker::start(&bin, "30", &["jit-link", "/dev/zero"]);
    let out = dir.join("out.folded");
    let run = capture(
        &dir,
        &[
            "-p",
            &a.1.to_string(),
            "-d",
            "1",
            "-o",
            out.to_str().unwrap(),
        ],
        DEADLINE,
    );
    assert_finished(&run, &out);
    assert!(run.peak_rss_mib <= BASE_MIB + BUDGET_MIB, "{run:?}");
}

/// Attack 6: one large map (the attacker's own file) hard-linked as two processes' maps.
#[test]
fn one_large_jit_map_under_two_pids_stays_within_the_budget() {
    require_attack!();
    let (dir, own) = dirs("large-map");
    let bin = attacker(&dir);
    let map = own.join("big.map");
    // 2 million lines of 19 bytes: 38 MB.
    let mut s = String::with_capacity(40 << 20);
    for i in 0..2_000_000u64 {
        use std::fmt::Write;
        let _ = writeln!(s, "{:012x} 10 f{:03}", 0x1000_0000 + i * 16, i % 1000);
    }
    std::fs::write(&map, s).unwrap();
    give_to_nobody(&map);
    let a = Attacker::start(&bin, "30", &["jit-hardlink", map.to_str().unwrap()]);
    let b = Attacker::start(&bin, "30", &["jit-hardlink", map.to_str().unwrap()]);
    let out = dir.join("out.folded");
    let pids = format!("{},{}", a.1, b.1);
    let run = capture(
        &dir,
        &["-p", &pids, "-d", "2", "-o", out.to_str().unwrap()],
        DEADLINE,
    );
    assert_finished(&run, &out);
    assert!(run.peak_rss_mib <= BASE_MIB + BUDGET_MIB, "{run:?}");
    // A budget below the map: it is not read, and the bound follows the budget.
    let small = 16u64 << 20;
    let run = capture(
        &dir,
        &[
            "-p",
            &pids,
            "-d",
            "2",
            "--memory-budget",
            &small.to_string(),
            "-o",
            out.to_str().unwrap(),
        ],
        DEADLINE,
    );
    assert_finished(&run, &out);
    assert!(run.peak_rss_mib <= BASE_MIB + (small >> 20), "{run:?}");
}

/// A sparse 64-bit little-endian ELF file whose `.eh_frame` claims `eh_frame` bytes (zeros on
/// disk, no blocks), with a `PT_LOAD` segment so that a mapping of it has a load bias.
fn sparse_elf(path: &Path, eh_frame: u64) {
    let mut f = vec![0u8; 0x1000];
    let put = |f: &mut Vec<u8>, at: usize, v: &[u8]| f[at..at + v.len()].copy_from_slice(v);
    let names = b"\0.text\0.eh_frame\0.shstrtab\0";
    // ELF header.
    put(&mut f, 0, b"\x7fELF\x02\x01\x01");
    put(&mut f, 16, &3u16.to_le_bytes()); // ET_DYN
    put(&mut f, 18, &62u16.to_le_bytes());
    put(&mut f, 20, &1u32.to_le_bytes());
    put(&mut f, 32, &64u64.to_le_bytes()); // e_phoff
    put(&mut f, 40, &0x400u64.to_le_bytes()); // e_shoff
    put(&mut f, 52, &64u16.to_le_bytes());
    put(&mut f, 54, &56u16.to_le_bytes());
    put(&mut f, 56, &1u16.to_le_bytes());
    put(&mut f, 58, &64u16.to_le_bytes());
    put(&mut f, 60, &4u16.to_le_bytes());
    put(&mut f, 62, &3u16.to_le_bytes()); // e_shstrndx
                                          // PT_LOAD r-x of the whole file.
    let end = 0x2000 + eh_frame;
    put(&mut f, 64, &1u32.to_le_bytes());
    put(&mut f, 68, &5u32.to_le_bytes());
    put(&mut f, 64 + 32, &end.to_le_bytes());
    put(&mut f, 64 + 40, &end.to_le_bytes());
    put(&mut f, 64 + 48, &0x1000u64.to_le_bytes());
    put(&mut f, 0x200, names);
    // Section headers: null, .text, .eh_frame, .shstrtab.
    let sh = |f: &mut Vec<u8>, i: usize, name: u32, kind: u32, addr: u64, off: u64, size: u64| {
        let at = 0x400 + i * 64;
        put(f, at, &name.to_le_bytes());
        put(f, at + 4, &kind.to_le_bytes());
        put(f, at + 16, &addr.to_le_bytes());
        put(f, at + 24, &off.to_le_bytes());
        put(f, at + 32, &size.to_le_bytes());
    };
    sh(&mut f, 1, 1, 1, 0x1000, 0x1000, 0x10);
    sh(&mut f, 2, 7, 1, 0x2000, 0x2000, eh_frame);
    sh(&mut f, 3, 17, 3, 0, 0x200, names.len() as u64);
    std::fs::write(path, &f).unwrap();
    let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    file.set_len(end).unwrap();
    give_to_nobody(path);
}

/// Attack 7: `-g dwarf` and six sparse ELF files mapped, each claiming a 100 MiB `.eh_frame`.
#[test]
fn sparse_elfs_claiming_large_unwind_tables_stay_within_the_budget() {
    require_attack!();
    let (dir, own) = dirs("sparse-elf");
    let bin = attacker(&dir);
    let files: Vec<String> = (0..6)
        .map(|i| {
            let p = own.join(format!("sparse{i}.so"));
            sparse_elf(&p, 100 << 20);
            p.to_str().unwrap().to_owned()
        })
        .collect();
    let mut args = vec!["map"];
    args.extend(files.iter().map(String::as_str));
    let a = Attacker::start(&bin, "30", &args);
    let out = dir.join("out.folded");
    let run = capture(
        &dir,
        &[
            "-p",
            &a.1.to_string(),
            "-d",
            "2",
            "-g",
            "dwarf",
            "-o",
            out.to_str().unwrap(),
        ],
        DEADLINE,
    );
    assert_finished(&run, &out);
    assert!(run.peak_rss_mib <= BASE_MIB + BUDGET_MIB, "{run:?}");
}

/// The door resolves a process's path in the process's own root: a process in its own mount
/// namespace, with a tmpfs over a folder, names the file inside its tmpfs, not the host's file of
/// the same path; once the process is gone, the host's.
#[test]
fn a_process_in_its_own_mount_namespace_names_its_own_files() {
    require!(
        tests::is_root(),
        Skip::Privilege,
        "needs root to make a mount namespace"
    );
    require!(
        common::have("unshare", "--version"),
        Skip::Environment,
        "unshare (util-linux)"
    );
    let dir = scratch("mntns");
    let file = dir.join("f");
    std::fs::write(&file, "host\n").unwrap();
    // Hidden in the namespace by its tmpfs: looked up in the host's root (a chroot's case).
    let only_host = dir.join("only-host");
    std::fs::write(&only_host, "host only\n").unwrap();
    let script = format!(
        "mount -t tmpfs none {0} && echo inside > {0}/f && echo ready && exec sleep 30",
        dir.display()
    );
    let mut child = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &script])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "ready");
    let pid = child.id();
    let path = file.to_str().unwrap();
    let read = |pid| {
        let f = perf_profile::untrusted::open(path, pid).unwrap();
        String::from_utf8(f.read_to_end(100).unwrap()).unwrap()
    };
    assert_eq!(read(Some(pid)), "inside\n");
    assert_eq!(read(None), "host\n");
    let hidden = perf_profile::untrusted::open(only_host.to_str().unwrap(), Some(pid)).unwrap();
    assert_eq!(hidden.read_to_end(100).unwrap(), b"host only\n");
    // Not a JIT map: that is the process's own or none.
    assert!(perf_profile::untrusted::open_jit_map(only_host.to_str().unwrap(), pid).is_err());
    let _ = child.kill();
    let _ = child.wait();
    // Gone: its root is gone too, and the path is the host's.
    assert_eq!(read(Some(pid)), "host\n");
}
