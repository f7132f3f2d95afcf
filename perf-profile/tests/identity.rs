//! Who ran, in every output: a two-thread program whose threads name themselves
//! (`pthread_setname_np`; one renames itself halfway, so a name read once would be wrong for half
//! its samples) is profiled, and each output must tell the threads apart, each sample under the
//! name its thread had then:
//!
//! - pprof: `go tool pprof -tags` lists the pid, both tids and the three thread names, and
//!   `-tagfocus=thread_name:NAME` keeps that name's function and drops the others;
//! - folded: `--per-thread` puts `NAME-TID` and `--per-process` `COMM-PID` at each stack's root;
//! - pprof, in a container: run in a cgroup named as docker names its containers', the samples
//!   carry the container id (root only: the test makes the cgroup);
//! - OTLP: the official decoder reads `process.pid`, `thread.id`, `thread.name` and
//!   `process.executable.name` on the samples (skipped without the decoder).

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{
    cc, command, folded_file, have, profile_ok, require_cc, require_sampling, scratch, text,
    FRAME_POINTERS,
};
use tests::{require, Skip};

/// Each name a thread of `named_threads` has, the function it runs under that name, and the name
/// the workload prints its tid under (`spin-alpha` renames itself `spin-omega`).
const NAMES: [(&str, &str, &str); 3] = [
    ("spin-alpha", "alpha_spin", "spin-alpha"),
    ("spin-beta", "beta_spin", "spin-beta"),
    ("spin-omega", "omega_spin", "spin-alpha"),
];

/// Whether `stack` holds a function of `NAMES` other than `mine`.
fn others(stack: &str, mine: &str) -> bool {
    NAMES
        .iter()
        .any(|&(_, f, _)| f != mine && stack.contains(f))
}

/// The ids `named_threads` printed.
struct Run {
    pid: u32,
    /// Thread name to tid.
    tids: BTreeMap<String, u32>,
}

/// Profiles `named_threads` (0.3 s of CPU per thread) at 499 Hz with `extra` arguments.
fn run(bin: &Path, extra: &[&str]) -> Run {
    let bin = bin.to_str().unwrap();
    let mut args = vec!["-F", "499"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", bin, "0.3"]);
    let out = profile_ok(&args);
    let mut pid = 0;
    let mut tids = BTreeMap::new();
    for line in text(&out.stdout).lines() {
        let (name, id) = line.split_once(' ').expect("NAME ID");
        let id: u32 = id.parse().unwrap();
        if name == "pid" {
            pid = id;
        } else {
            tids.insert(name.to_owned(), id);
        }
    }
    assert!(
        pid != 0 && tids.len() == 2,
        "workload output: {}",
        text(&out.stdout)
    );
    Run { pid, tids }
}

/// `named_threads` built into `dir`.
fn build(dir: &Path) -> PathBuf {
    cc(
        dir,
        "named_threads",
        "named_threads.c",
        FRAME_POINTERS,
        &["-pthread"],
    )
}

fn go_pprof(dir: &Path, args: &[&str], file: &Path) -> String {
    let out = Command::new("go")
        .args(["tool", "pprof", "-symbolize=none"])
        .args(args)
        .arg(file)
        .env("HOME", dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "go tool pprof {args:?} failed: {}",
        text(&out.stderr)
    );
    text(&out.stdout)
}

#[test]
fn go_tool_pprof_sees_pid_tid_and_thread_names_and_focuses_on_one_thread() {
    require_sampling!();
    require_cc!();
    require!(
        have("go", "version"),
        Skip::Environment,
        "go is not installed (Debian: golang-go)"
    );
    let dir = scratch("identity-pprof");
    let bin = build(&dir);
    let file = dir.join("out.pb.gz");
    let r = run(&bin, &["-o", file.to_str().unwrap()]);

    let tags = go_pprof(&dir, &["-tags"], &file);
    println!("go tool pprof -tags:\n{tags}");
    for key in ["pid:", "tid:", "comm:", "thread_name:"] {
        assert!(tags.contains(key), "no {key} in -tags:\n{tags}");
    }
    assert!(
        tags.contains(&r.pid.to_string()),
        "pid {} not in -tags:\n{tags}",
        r.pid
    );
    for (name, _, tid_of) in NAMES {
        let tid = r.tids[tid_of];
        assert!(tags.contains(name), "{name} not in -tags:\n{tags}");
        assert!(
            tags.contains(&tid.to_string()),
            "tid {tid} not in -tags:\n{tags}"
        );
    }
    assert!(
        tags.contains("named_threads"),
        "the process's comm not in -tags:\n{tags}"
    );

    for (name, mine, _) in NAMES {
        let top = go_pprof(
            &dir,
            &["-top", &format!("-tagfocus=thread_name:{name}")],
            &file,
        );
        assert!(top.contains(mine), "-tagfocus={name}: no {mine}:\n{top}");
        assert!(
            !others(&top, mine),
            "-tagfocus={name}: another's kept:\n{top}"
        );
    }
    let by_tid = go_pprof(
        &dir,
        &["-top", &format!("-tagfocus=tid={}", r.tids["spin-beta"])],
        &file,
    );
    assert!(
        by_tid.contains("beta_spin") && !others(&by_tid, "beta_spin"),
        "-tagfocus=tid=...:\n{by_tid}"
    );
}

#[test]
fn folded_roots_name_the_thread_or_the_process() {
    require_sampling!();
    require_cc!();
    let dir = scratch("identity-folded");
    let bin = build(&dir);
    let threads = dir.join("threads.folded");
    let r = run(&bin, &["--per-thread", "-o", threads.to_str().unwrap()]);
    let stacks = folded_file(&threads);
    for (name, mine, tid_of) in NAMES {
        let root = format!("{name}-{};", r.tids[tid_of]);
        let (with, n): (Vec<&String>, u64) = stacks
            .iter()
            .filter(|(s, _)| s.starts_with(&root))
            .fold((Vec::new(), 0), |(mut v, n), (s, c)| {
                v.push(s);
                (v, n + c)
            });
        assert!(n >= 20, "{n} samples under {root}: {stacks:#?}");
        assert!(with.iter().any(|s| s.contains(mine)), "{root}: {with:#?}");
        assert!(with.iter().all(|s| !others(s, mine)), "{root}: {with:#?}");
    }
    // Every stack starts with a thread.
    assert!(stacks
        .keys()
        .all(|s| s.split(';').next().unwrap().rsplit_once('-').is_some()));

    let procs = dir.join("procs.folded");
    let r = run(&bin, &["--per-process", "-o", procs.to_str().unwrap()]);
    let stacks = folded_file(&procs);
    let root = format!("named_threads-{};", r.pid);
    let (mine, all): (u64, u64) = stacks.iter().fold((0, 0), |(m, a), (s, n)| {
        (m + if s.starts_with(&root) { *n } else { 0 }, a + n)
    });
    assert!(
        mine >= 60 && mine == all,
        "{mine} of {all} under {root}: {stacks:#?}"
    );
}

/// A Python with the official `opentelemetry-proto` package: `PERF_PROFILE_PYTHON`, else the venv
/// the fleet tests make under the target directory.
fn otel_python() -> Option<PathBuf> {
    let py = match std::env::var_os("PERF_PROFILE_PYTHON") {
        Some(p) => PathBuf::from(p),
        None => std::env::current_exe()
            .ok()?
            .ancestors()
            .nth(3)?
            .join("pyvenv-otel/bin/python"),
    };
    Command::new(&py)
        .args(["-c", "import opentelemetry.proto"])
        .output()
        .is_ok_and(|o| o.status.success())
        .then_some(py)
}

#[test]
fn otlp_samples_carry_who_ran_by_the_semantic_conventions() {
    require_sampling!();
    require_cc!();
    let Some(py) = otel_python() else {
        tests::skip(
            Skip::Environment,
            "no Python with opentelemetry-proto (PERF_PROFILE_PYTHON, or run the fleet tests once)",
        );
        return;
    };
    let dir = scratch("identity-otlp");
    let bin = build(&dir);
    let file = dir.join("out.otlp");
    let r = run(&bin, &["-o", file.to_str().unwrap()]);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/py/otlp_decode.py");
    let out = Command::new(py).arg(script).arg(&file).output().unwrap();
    assert!(out.status.success(), "decoder: {}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let samples = v["profiles"][0]["samples"].as_array().unwrap();
    for (name, mine, tid_of) in NAMES {
        let tid = r.tids[tid_of];
        let of: Vec<&serde_json::Value> = samples
            .iter()
            .filter(|s| s["attributes"]["thread.name"] == name)
            .collect();
        assert!(!of.is_empty(), "no sample of {name}");
        for s in &of {
            let a = &s["attributes"];
            assert_eq!(a["process.pid"], r.pid, "{s}");
            assert_eq!(a["thread.id"], tid, "{s}");
            assert_eq!(a["process.executable.name"], "named_threads", "{s}");
            assert!(!others(s["stack"].as_str().unwrap(), mine), "{s}");
        }
        assert!(of
            .iter()
            .any(|s| s["stack"].as_str().unwrap().contains(mine)));
    }
}

/// A cgroup made for a test, removed (once empty) when dropped.
struct Cgroup(PathBuf);

impl Drop for Cgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
        if let Some(parent) = self.0.parent() {
            let _ = std::fs::remove_dir(parent);
        }
    }
}

/// A new cgroup `perf-profile-test-PID/NAME` in a hierarchy this process may write (cgroup v2, or
/// v1's `pids`), or `None`.
fn make_cgroup(name: &str) -> Option<Cgroup> {
    for root in [
        "/sys/fs/cgroup",
        "/sys/fs/cgroup/unified",
        "/sys/fs/cgroup/pids",
    ] {
        if !Path::new(root).join("cgroup.procs").is_file() {
            continue;
        }
        let dir = Path::new(root)
            .join(format!("perf-profile-test-{}", std::process::id()))
            .join(name);
        if std::fs::create_dir_all(&dir).is_ok() {
            return Some(Cgroup(dir));
        }
    }
    None
}

#[test]
fn a_container_is_named_by_its_cgroup() {
    require_sampling!();
    require_cc!();
    require!(
        tests::is_root(),
        Skip::Privilege,
        "making a cgroup needs root"
    );
    require!(
        have("go", "version"),
        Skip::Environment,
        "go is not installed (Debian: golang-go)"
    );
    const ID: &str = "5e1f0c2b9a8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f";
    let Some(cgroup) = make_cgroup(&format!("docker-{ID}.scope")) else {
        tests::skip(Skip::Environment, "no writable cgroup hierarchy");
        return;
    };
    let dir = scratch("identity-container");
    let bin = build(&dir);
    let file = dir.join("out.pb.gz");
    // The profiler (and the command it runs) joins the cgroup first, as a container's processes are
    // in theirs.
    let script = format!(
        "echo $$ > {}/cgroup.procs && exec \"$0\" \"$@\"",
        cgroup.0.display()
    );
    let out = Command::new("sh")
        .args(["-c", &script])
        .arg(command())
        .args(["-F", "499", "-o", file.to_str().unwrap(), "--"])
        .arg(&bin)
        .arg("0.1")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let tags = go_pprof(&dir, &["-tags"], &file);
    println!("go tool pprof -tags:\n{tags}");
    assert!(tags.contains("container_id:"), "{tags}");
    assert!(tags.contains(ID), "{tags}");
    let top = go_pprof(
        &dir,
        &["-top", &format!("-tagfocus=container_id:{ID}")],
        &file,
    );
    assert!(top.contains("alpha_spin"), "{top}");
}
