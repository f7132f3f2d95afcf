//! The command as a user gets it: `cargo install --path perf-profile` into a fresh root puts a
//! `perf-profile` on PATH that says its version and profiles a command.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

mod common;
use common::{build_workload, folded_file, samples_with, scratch, text};

/// The target directory of this test binary (`target/<profile>/deps/<name>-<hash>`): the install
/// builds there (in `release`), so it reuses what an earlier `cargo build --release` compiled and
/// CI's release build for the soaks reuses it.
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.ancestors()
        .nth(3)
        .expect("the test binary lies in target/<profile>/deps")
        .to_path_buf()
}

#[test]
fn cargo_install_puts_a_perf_profile_command_on_path_that_profiles() {
    let root = scratch("install");
    let package = Path::new(env!("CARGO_MANIFEST_DIR"));
    // Offline and locked: the dependencies were fetched to build this test, at the lock file's
    // versions.
    let o = Command::new(env!("CARGO"))
        .args(["install", "-q", "--offline", "--locked", "--path"])
        .arg(package)
        .arg("--root")
        .arg(&root)
        .arg("--target-dir")
        .arg(target_dir())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "cargo install failed: {}",
        text(&o.stderr)
    );
    let bin = root.join("bin/perf-profile");
    assert!(bin.is_file(), "{} was not installed", bin.display());
    let installed: Vec<_> = std::fs::read_dir(root.join("bin"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(installed, ["perf-profile"], "the only command installed");

    let v = Command::new(&bin).arg("--version").output().unwrap();
    assert!(v.status.success(), "{}", text(&v.stderr));
    assert_eq!(
        text(&v.stdout),
        format!("perf-profile {}\n", env!("CARGO_PKG_VERSION"))
    );

    // Built with the default features (no `flamegraph`): an SVG output is refused before any
    // sampling, with what to do instead.
    let svg = root.join("out.svg");
    let o = Command::new(&bin)
        .arg("-o")
        .arg(&svg)
        .args(["--", "true"])
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("--features flamegraph"), "{err}");
    assert!(!svg.exists());

    common::require_sampling!();
    common::require_cc!();
    // The workload of known shape (main -> outer -> hot_a / hot_b -> leaf), half a second of CPU.
    let calls = build_workload(&root);
    let out = root.join("out.folded");
    let o = Command::new(&bin)
        .args(["-F", "999", "-o"])
        .arg(&out)
        .arg("--")
        .arg(&calls)
        .arg("0.5")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert!(o.status.success(), "perf-profile failed: {err}");
    assert!(
        err.lines().any(|l| l.starts_with("profile: wrote ")),
        "{err}"
    );
    let stacks = folded_file(&out);
    let samples: u64 = stacks.values().sum();
    let in_leaf = samples_with(&stacks, "main;outer;hot_a;leaf")
        + samples_with(&stacks, "main;outer;hot_b;leaf");
    assert!(samples >= 50, "{samples} samples: {stacks:?}\n{err}");
    assert!(
        in_leaf * 10 >= samples * 8,
        "{in_leaf} of {samples} samples in main;outer;hot_?;leaf: {stacks:?}"
    );
    let _ = std::fs::remove_dir_all(&root);
}
