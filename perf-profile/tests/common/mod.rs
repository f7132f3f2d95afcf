//! What the perf-profile tests and the `system` bench share: the tools this machine has, a
//! scratch folder per test, the C workloads of `tests/workload/` built, the `perf-profile` command run,
//! folded stacks read, and a loopback HTTP(S) receiver ([`receiver`]). A test file takes it with
//! `mod common;`, the bench with `#[path]`.

// Each test binary (and the bench) uses some of these.
#![allow(dead_code)]

pub mod receiver;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// Whether `tool arg` runs and succeeds (`have("cc", "--version")`).
pub fn have(tool: &str, arg: &str) -> bool {
    Command::new(tool)
        .arg(arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A program's output as text.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A fresh directory for one test's files. Not `/tmp/perf-*`: perf takes any file under that prefix
/// for a JIT map (`/tmp/perf-PID.map`) and leaves its frames `[unknown]`.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("profile-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Whether this process may sample the commands it starts, and itself: root, or
/// perf_event_paranoid <= 1.
pub fn may_sample_commands() -> bool {
    tests::is_root() || tests::paranoid() <= 1
}

/// Returns from the calling test with a privilege skip unless [`may_sample_commands`].
#[allow(unused_macros)]
macro_rules! require_sampling {
    () => {
        tests::require!(
            crate::common::may_sample_commands(),
            tests::Skip::Privilege,
            "needs root or perf_event_paranoid <= 1 (it is {})",
            tests::paranoid()
        )
    };
}
#[allow(unused_imports)]
pub(crate) use require_sampling;

/// Returns from the calling test with an environment skip when there is no C compiler.
#[allow(unused_macros)]
macro_rules! require_cc {
    () => {
        tests::require!(
            crate::common::have("cc", "--version"),
            tests::Skip::Environment,
            "no C compiler (cc)"
        )
    };
}
#[allow(unused_imports)]
pub(crate) use require_cc;

/// C flags for frame pointers in every function: `-O0` keeps them in leaf functions and makes no
/// tail calls that would drop callers from the chains.
pub const FRAME_POINTERS: &[&str] = &["-O0", "-g", "-fno-omit-frame-pointer", "-fno-inline"];

/// C flags for optimized code without frame pointers, which `-g dwarf` unwinds with `.eh_frame`.
pub const NO_FRAME_POINTERS: &[&str] = &["-O2", "-g", "-fomit-frame-pointer"];

/// `cc FLAGS -o DIR/OUT tests/workload/SRC EXTRA...`: the binary's path.
pub fn cc(dir: &Path, out: &str, src: &str, flags: &[&str], extra: &[&str]) -> PathBuf {
    let bin = dir.join(out);
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/workload")
        .join(src);
    let o = Command::new("cc")
        .args(flags)
        .arg("-o")
        .arg(&bin)
        .arg(&src)
        .args(extra)
        .output()
        .unwrap();
    assert!(o.status.success(), "cc {src:?} failed: {}", text(&o.stderr));
    bin
}

/// Builds `tests/workload/NAME.c` with [`FRAME_POINTERS`] into `DIR/NAME`.
pub fn build_c(dir: &Path, name: &str) -> PathBuf {
    cc(dir, name, &format!("{name}.c"), FRAME_POINTERS, &[])
}

/// Builds the workload of known shape, `calls.c` (`main -> outer -> {hot_a -> leaf (2/3), hot_b ->
/// leaf (1/3)}`), with [`FRAME_POINTERS`] into `DIR/calls`.
pub fn build_workload(dir: &Path) -> PathBuf {
    build_c(dir, "calls")
}

/// The `perf-profile` command: `$PERF_PROFILE_BIN` where set (CI's release build for the soaks),
/// else the one cargo built with this test binary (before any test's clock started).
pub fn command() -> PathBuf {
    match std::env::var_os("PERF_PROFILE_BIN") {
        Some(bin) => {
            let bin = PathBuf::from(bin);
            assert!(
                bin.is_file(),
                "PERF_PROFILE_BIN={} is no file",
                bin.display()
            );
            bin
        }
        None => PathBuf::from(env!("CARGO_BIN_EXE_perf-profile")),
    }
}

/// Runs the `perf-profile` command with `args`, stdin closed.
pub fn profile(args: &[&str]) -> Output {
    Command::new(command())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// [`profile`], which must succeed (else the test fails with its stderr).
pub fn profile_ok(args: &[&str]) -> Output {
    let out = profile(args);
    assert!(
        out.status.success(),
        "profile {args:?} failed: {}",
        text(&out.stderr)
    );
    out
}

/// The samples of the folded `stacks` whose stack holds `frames`: one frame, or consecutive ones
/// (`main;outer`).
pub fn samples_with<'a>(
    stacks: impl IntoIterator<Item = (&'a String, &'a u64)>,
    frames: &str,
) -> u64 {
    let needle = format!(";{frames};");
    stacks
        .into_iter()
        .filter(|(s, _)| format!(";{s};").contains(&needle))
        .map(|(_, n)| n)
        .sum()
}

/// What `go tool pprof -raw -symbolize=none FILE` prints (it must succeed; `HOME` is the file's
/// folder, so that pprof keeps nothing in the user's); `None`, said as a skip, where go is not
/// installed.
pub fn go_pprof_raw(file: &Path) -> Option<String> {
    if !have("go", "version") {
        tests::skip(
            tests::Skip::Environment,
            "go tool pprof: go is not installed (Debian: golang-go)",
        );
        return None;
    }
    let raw = Command::new("go")
        .args(["tool", "pprof", "-raw", "-symbolize=none"])
        .arg(file)
        .env("HOME", file.parent().unwrap())
        .output()
        .unwrap();
    assert!(
        raw.status.success(),
        "go tool pprof failed: {}",
        text(&raw.stderr)
    );
    Some(text(&raw.stdout))
}

/// The samples per stack of folded text (`a;b;c 42` lines), a stack's lines added up.
pub fn folded(text: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let (stack, n) = line.rsplit_once(' ').expect("folded line: stack count");
        let n: u64 = n.parse().expect("folded count");
        *out.entry(stack.to_owned()).or_default() += n;
    }
    out
}

/// [`folded`] of the file at `path`.
pub fn folded_file(path: &Path) -> BTreeMap<String, u64> {
    folded(&std::fs::read_to_string(path).unwrap())
}
