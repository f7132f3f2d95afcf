//! The per-boot cache of the kernel image's text symbols (`maps::kernel`): the first capture of a
//! boot reads `/proc/kallsyms` and writes the cache; later ones name the image's frames from it.
//! Its folder and file are the profiler's own: a folder that is a symlink, someone else's or
//! writable by others is neither read nor written, and a cache file that is a symlink, someone
//! else's or a FIFO is ignored (without waiting); a cache of another boot is replaced.
//!
//! What proves the cache is read: a copy of it whose names are changed (`do_syscall_64` written
//! `DO_SYSCALL_64`, same length) names the capture's frames so. Every case runs the command with
//! `PERF_PROFILE_CACHE_DIR`, on `dd` between `/dev/zero` and `/dev/null`, whose stacks all pass
//! through `do_syscall_64`.

mod common;

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{command, folded_file, scratch, text};
use perf_profile::maps::KernelSymbols;
use tests::Skip;

/// The name every stack of `dd` passes through, and the same name as a tampered cache gives it.
const NAME: &str = "do_syscall_64";
const TAMPERED: &str = "DO_SYSCALL_64";

/// Whether these tests can run: root (they chown to `nobody`), and kernel addresses shown.
fn may_run() -> bool {
    if !tests::is_root() {
        tests::skip(
            Skip::Privilege,
            "needs root (chown to nobody, kernel addresses)",
        );
        return false;
    }
    if let Some(why) = KernelSymbols::load().hidden() {
        tests::skip(Skip::Privilege, why);
        return false;
    }
    true
}

/// Runs a capture of `dd` with `PERF_PROFILE_CACHE_DIR=cache` (it must succeed within a minute):
/// the function names of its folded stacks.
fn capture(out_dir: &Path, cache: &Path) -> Vec<String> {
    let out = out_dir.join("out.folded");
    let _ = fs::remove_file(&out);
    let mut child = Command::new(command())
        .args(["-F", "999", "-o"])
        .arg(&out)
        .args([
            "--",
            "dd",
            "if=/dev/zero",
            "of=/dev/null",
            "bs=512",
            "count=300000",
        ])
        .env("PERF_PROFILE_CACHE_DIR", cache)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("the capture with the cache at {cache:?} hung");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = child.wait_with_output().unwrap();
    assert!(
        o.status.success(),
        "capture with the cache at {cache:?} failed: {}",
        text(&o.stderr)
    );
    let stacks = folded_file(&out);
    let mut names: Vec<String> = stacks
        .keys()
        .flat_map(|s| s.split(';').map(str::to_owned))
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The kallsyms cache files in `dir`.
fn cache_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("kallsyms-"))
        })
        .collect();
    files.sort();
    files
}

/// `bytes` with every `from` replaced by `to` (same length), and whether there was one.
fn replace(bytes: &[u8], from: &[u8], to: &[u8]) -> (Vec<u8>, bool) {
    assert_eq!(from.len(), to.len());
    let mut out = bytes.to_vec();
    let mut found = false;
    let mut i = 0;
    while i + from.len() <= out.len() {
        if &out[i..i + from.len()] == from {
            out[i..i + from.len()].copy_from_slice(to);
            found = true;
            i += from.len();
        } else {
            i += 1;
        }
    }
    (out, found)
}

/// A fresh cache folder of mode 0700 under `dir`, and a valid cache for it, written by a first
/// capture: its bytes.
fn warm(dir: &Path, name: &str) -> (PathBuf, Vec<u8>) {
    let cache = dir.join(name);
    let names = capture(dir, &cache);
    assert!(names.iter().any(|n| n == NAME), "{NAME} in {names:?}");
    let files = cache_files(&cache);
    assert_eq!(
        files.len(),
        1,
        "one cache file after the first capture: {files:?}"
    );
    (cache, fs::read(&files[0]).unwrap())
}

fn chown_nobody(path: &Path) {
    let s = Command::new("chown")
        .args(["-h", "nobody"])
        .arg(path)
        .status()
        .unwrap();
    assert!(s.success());
}

/// The first capture writes the cache (a file of mode 0600 in a folder of mode 0700); the second
/// reads it and leaves it as it was; a cache whose names were changed names the frames so (it is
/// read, not `/proc/kallsyms`); a cache of another boot is ignored and replaced.
#[test]
fn a_second_capture_names_the_kernels_frames_from_the_cache() {
    if !may_run() {
        return;
    }
    let dir = scratch("kernel-cache");
    let (cache, written) = warm(&dir, "cache");
    assert_eq!(
        fs::metadata(&cache).unwrap().permissions().mode() & 0o777,
        0o700
    );
    let file = cache_files(&cache).remove(0);
    let meta = fs::metadata(&file).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);

    // Read, not written again: the same file, the same bytes, the live names.
    let names = capture(&dir, &cache);
    assert!(names.iter().any(|n| n == NAME), "{NAME} in {names:?}");
    assert!(!names.iter().any(|n| n == TAMPERED));
    let again = fs::metadata(&file).unwrap();
    assert_eq!(
        (again.ino(), again.mtime(), again.mtime_nsec()),
        (meta.ino(), meta.mtime(), meta.mtime_nsec()),
        "the cache was written again"
    );

    // Its names are the capture's names.
    let (tampered, found) = replace(&written, NAME.as_bytes(), TAMPERED.as_bytes());
    assert!(found, "{NAME} in the cache");
    fs::write(&file, &tampered).unwrap();
    let names = capture(&dir, &cache);
    assert!(
        names.iter().any(|n| n == TAMPERED),
        "the frames were not named from the cache: {names:?}"
    );

    // A cache of another boot (its boot id changed) is not used, and is replaced.
    let boot_id = fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    let boot_id = boot_id.trim();
    let other: String = boot_id
        .chars()
        .map(|c| {
            if c == '-' {
                c
            } else if c == '0' {
                '1'
            } else {
                '0'
            }
        })
        .collect();
    let (planted, found) = replace(&tampered, boot_id.as_bytes(), other.as_bytes());
    assert!(found, "the boot id in the cache");
    fs::write(&file, &planted).unwrap();
    let names = capture(&dir, &cache);
    assert!(names.iter().any(|n| n == NAME), "{NAME} in {names:?}");
    assert!(
        !names.iter().any(|n| n == TAMPERED),
        "another boot's cache used"
    );
    assert_eq!(cache_files(&cache), std::slice::from_ref(&file));
    assert_eq!(fs::read(&file).unwrap(), written, "replaced by this boot's");
    let _ = fs::remove_dir_all(&dir);
}

/// A cache folder that is a symlink, is owned by `nobody`, or is writable by everyone is neither
/// read (a tampered cache in it does not name the frames) nor written; the capture succeeds.
#[test]
fn an_unsafe_cache_folder_is_neither_read_nor_written() {
    if !may_run() {
        return;
    }
    let dir = scratch("kernel-cache-folder");
    let (good, written) = warm(&dir, "good");
    let (tampered, found) = replace(&written, NAME.as_bytes(), TAMPERED.as_bytes());
    assert!(found);
    let file_name = cache_files(&good)[0].file_name().unwrap().to_owned();
    // The real folder holds the tampered cache; each case reaches it its own way.
    fs::write(good.join(&file_name), &tampered).unwrap();

    let link = dir.join("link");
    std::os::unix::fs::symlink(&good, &link).unwrap();

    let nobodys = dir.join("nobodys");
    fs::create_dir(&nobodys).unwrap();
    fs::set_permissions(&nobodys, fs::Permissions::from_mode(0o700)).unwrap();
    fs::write(nobodys.join(&file_name), &tampered).unwrap();
    chown_nobody(&nobodys);

    let open = dir.join("open");
    fs::create_dir(&open).unwrap();
    fs::write(open.join(&file_name), &tampered).unwrap();
    fs::set_permissions(&open, fs::Permissions::from_mode(0o777)).unwrap();

    let empty_open = dir.join("empty-open");
    fs::create_dir(&empty_open).unwrap();
    fs::set_permissions(&empty_open, fs::Permissions::from_mode(0o777)).unwrap();

    for (case, cache) in [
        ("a symlink", &link),
        ("owned by nobody", &nobodys),
        ("mode 0777", &open),
        ("mode 0777, empty", &empty_open),
    ] {
        let names = capture(&dir, cache);
        assert!(
            !names.iter().any(|n| n == TAMPERED),
            "a cache folder {case} was read"
        );
        assert!(
            names.iter().any(|n| n == NAME),
            "{case}: {NAME} in {names:?}"
        );
    }
    assert_eq!(fs::read(good.join(&file_name)).unwrap(), tampered);
    assert_eq!(fs::read(nobodys.join(&file_name)).unwrap(), tampered);
    assert_eq!(fs::read(open.join(&file_name)).unwrap(), tampered);
    assert!(
        cache_files(&empty_open).is_empty(),
        "a cache folder writable by all was written"
    );
    let _ = fs::remove_dir_all(&dir);
}

/// A cache file that is a symlink to a (tampered) cache, owned by `nobody`, or a FIFO is ignored,
/// without waiting on the FIFO; the capture succeeds and names the frames as /proc/kallsyms does.
#[test]
fn an_unsafe_cache_file_is_ignored() {
    if !may_run() {
        return;
    }
    let dir = scratch("kernel-cache-file");
    let (cache, written) = warm(&dir, "cache");
    let file = cache_files(&cache).remove(0);
    let (tampered, found) = replace(&written, NAME.as_bytes(), TAMPERED.as_bytes());
    assert!(found);
    let elsewhere = dir.join("elsewhere");
    fs::write(&elsewhere, &tampered).unwrap();
    fs::set_permissions(&elsewhere, fs::Permissions::from_mode(0o600)).unwrap();

    type Plant = fn(&Path, &Path, &[u8]);
    let cases: [(&str, Plant); 3] = [
        ("a symlink", |file, elsewhere, _| {
            std::os::unix::fs::symlink(elsewhere, file).unwrap()
        }),
        ("owned by nobody", |file, _, tampered| {
            fs::write(file, tampered).unwrap();
            fs::set_permissions(file, fs::Permissions::from_mode(0o600)).unwrap();
            chown_nobody(file);
        }),
        ("a FIFO", |file, _, _| {
            let s = Command::new("mkfifo").arg(file).status().unwrap();
            assert!(s.success());
        }),
    ];
    for (case, plant) in cases {
        let _ = fs::remove_file(&file);
        plant(&file, &elsewhere, &tampered);
        let names = capture(&dir, &cache);
        assert!(
            !names.iter().any(|n| n == TAMPERED),
            "a cache file {case} was read"
        );
        assert!(
            names.iter().any(|n| n == NAME),
            "{case}: {NAME} in {names:?}"
        );
    }
    assert_eq!(
        fs::read(&elsewhere).unwrap(),
        tampered,
        "written through a link"
    );
    let _ = fs::remove_dir_all(&dir);
}

/// Set in the copy of this test binary that [`a_system_wide_capture_names_every_kernel_frame_from_the_cache`]
/// runs with `PERF_PROFILE_CACHE_DIR`.
const CHILD: &str = "KERNEL_CACHE_TEST_CHILD";

/// A system-wide capture's kernel frames (the idle tasks' first ones are in the image's init
/// text) are named from the cache once it is written: a cache whose names were changed names
/// every frame so, and the cache as written names them as `/proc/kallsyms` does. Run in a copy of
/// this binary with `PERF_PROFILE_CACHE_DIR` set (the library reads it; the environment is the
/// process's).
#[test]
fn a_system_wide_capture_names_every_kernel_frame_from_the_cache() {
    if std::env::var_os(CHILD).is_some() {
        return system_wide_child();
    }
    if !may_run() {
        return;
    }
    let dir = scratch("kernel-cache-system");
    let o = Command::new(std::env::current_exe().unwrap())
        .args([
            "a_system_wide_capture_names_every_kernel_frame_from_the_cache",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .env("PERF_PROFILE_CACHE_DIR", dir.join("cache"))
        .output()
        .unwrap();
    print!("{}", text(&o.stdout));
    assert!(
        o.status.success() && text(&o.stdout).contains("1 passed"),
        "the child failed: {}{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    let _ = fs::remove_dir_all(&dir);
}

/// A second of the whole system: each kernel frame's address, the name the profile gives it, and
/// the name `/proc/kallsyms` gives it when it is the kernel image's.
fn system_wide() -> Vec<(u64, String, String)> {
    use perf_profile::aggregate::{Frame, FrameId};
    use perf_profile::{Options, Profiler, Target};
    let mut opts = Options::default();
    opts.frequency = 999;
    let mut p = Profiler::start(Target::System, &opts).unwrap();
    let end = Instant::now() + Duration::from_secs(1);
    while Instant::now() < end {
        p.poll(Duration::from_millis(50)).unwrap();
    }
    let profile = p.finish().unwrap();
    let whole = KernelSymbols::parse(&fs::read_to_string("/proc/kallsyms").unwrap());
    let mut out = Vec::new();
    for (i, f) in profile.stacks().frames().iter().enumerate() {
        let Frame::Kernel { addr } = *f else {
            continue;
        };
        let Some(s) = whole.find(addr).filter(|s| s.module.is_none()) else {
            continue;
        };
        let lines = profile.lines(FrameId(i as u32));
        assert_eq!(lines.len(), 1, "{addr:#x}: {lines:?}");
        out.push((addr, lines[0].function.clone(), s.name.to_owned()));
    }
    assert!(
        out.len() > 3,
        "kernel frames of a system-wide second: {out:?}"
    );
    out
}

fn system_wide_child() {
    let cache = PathBuf::from(std::env::var_os("PERF_PROFILE_CACHE_DIR").unwrap());
    // The first: /proc/kallsyms read, the cache written.
    let first = system_wide();
    for (addr, named, live) in &first {
        assert_eq!(named, live, "{addr:#x}");
    }
    let files = cache_files(&cache);
    assert_eq!(files.len(), 1, "{files:?}");
    let written = fs::read(&files[0]).unwrap();

    // The names the first capture gave, each written in capitals in the cache: a capture
    // named from it gives them so (or partly so, where one contains another).
    let mut seen: Vec<&str> = first.iter().map(|f| f.2.as_str()).collect();
    seen.sort_by_key(|n| std::cmp::Reverse(n.len()));
    seen.dedup();
    let mut changed = written.clone();
    for name in seen.iter().filter(|n| n.len() >= 6) {
        changed = replace(
            &changed,
            name.as_bytes(),
            name.to_ascii_uppercase().as_bytes(),
        )
        .0;
    }
    fs::write(&files[0], &changed).unwrap();
    let second = system_wide();
    let mut from_cache = 0;
    for (addr, named, live) in &second {
        if seen.contains(&live.as_str())
            && live.len() >= 6
            && live.chars().any(|c| c.is_ascii_lowercase())
        {
            assert!(
                named != live && named.eq_ignore_ascii_case(live),
                "{addr:#x}: {named} not from the cache"
            );
            from_cache += 1;
        }
    }
    assert!(
        from_cache > 0,
        "no frame of the second capture was named in the first: {second:?}"
    );

    // The cache as written names every kernel frame as /proc/kallsyms does.
    fs::write(&files[0], &written).unwrap();
    for (addr, named, live) in system_wide() {
        assert_eq!(named, live, "{addr:#x}");
    }
    println!(
        "{} kernel frames named from /proc/kallsyms, then {from_cache} of {} from the cache",
        first.len(),
        second.len()
    );
}
