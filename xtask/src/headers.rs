//! `cargo xtask fetch-headers SUITE`: Debian's `linux-libc-dev` for one suite, unpacked under `target/`.
//!
//! apt runs with a private sources list, lists folder, cache and an empty dpkg status, so the host's apt
//! configuration and package state are never touched.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{workspace_root, SUITES};

/// The file, next to the unpacked headers, that names the package they came from.
pub const SOURCE_FILE: &str = ".perf-sys-source";

const KEYRING: &str = "/usr/share/keyrings/debian-archive-keyring.gpg";
const MIRROR: &str = "http://deb.debian.org/debian";

/// The folder that holds everything fetched for `suite`.
pub fn suite_dir(suite: &str) -> PathBuf {
    workspace_root().join("target/xtask/apt").join(suite)
}

/// The unpacked include folder of `suite`, if it was fetched before.
pub fn cached_include_dir(suite: &str) -> Option<PathBuf> {
    let include = suite_dir(suite).join("root/usr/include");
    include.join(SOURCE_FILE).is_file().then_some(include)
}

fn run(cmd: &mut Command, what: &str) -> Result<(), String> {
    let out = cmd
        .output()
        .map_err(|e| format!("{what}: cannot run {:?}: {e}", cmd.get_program()))?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let tail: Vec<&str> = stderr.lines().rev().take(6).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    Err(format!(
        "{what} failed ({}); is {MIRROR} reachable?\n{}",
        out.status,
        tail.join("\n")
    ))
}

fn apt_options(dir: &Path) -> Vec<String> {
    vec![
        format!(
            "-oDir::Etc::SourceList={}",
            dir.join("sources.list").display()
        ),
        "-oDir::Etc::SourceParts=/dev/null".into(),
        format!("-oDir::State::Lists={}", dir.join("lists").display()),
        format!("-oDir::Cache={}", dir.join("cache").display()),
        "-oDir::State::status=/dev/null".into(),
        "-oAcquire::Languages=none".into(),
        "-oAPT::Sandbox::User=root".into(),
        "-qq".into(),
    ]
}

/// Downloads and unpacks `linux-libc-dev` of `suite`; returns its include folder. Cached: a second call
/// for the same suite does no network access.
pub fn fetch(suite: &str) -> Result<PathBuf, String> {
    if !SUITES.contains(&suite) {
        return Err(format!(
            "unknown suite {suite:?}; known: {}",
            SUITES.join(", ")
        ));
    }
    if let Some(include) = cached_include_dir(suite) {
        return Ok(include);
    }
    if !Path::new(KEYRING).is_file() {
        return Err(format!(
            "{KEYRING} is missing: install debian-archive-keyring"
        ));
    }
    let dir = suite_dir(suite);
    for sub in ["lists/partial", "cache/archives/partial", "deb"] {
        fs::create_dir_all(dir.join(sub)).map_err(|e| format!("create {}: {e}", dir.display()))?;
    }
    fs::write(
        dir.join("sources.list"),
        format!("deb [signed-by={KEYRING}] {MIRROR} {suite} main\n"),
    )
    .map_err(|e| format!("write sources.list: {e}"))?;
    let opts = apt_options(&dir);
    run(
        Command::new("apt-get").args(&opts).arg("update"),
        &format!("apt-get update ({suite})"),
    )?;
    let deb_dir = dir.join("deb");
    run(
        Command::new("apt-get")
            .args(&opts)
            .args(["download", "linux-libc-dev"])
            .current_dir(&deb_dir),
        &format!("apt-get download linux-libc-dev ({suite})"),
    )?;
    let deb = fs::read_dir(&deb_dir)
        .map_err(|e| format!("read {}: {e}", deb_dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "deb"))
        .ok_or_else(|| format!("no .deb downloaded into {}", deb_dir.display()))?;
    // linux-libc-dev_<version>_<arch>.deb
    let name = deb
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    let version = name.split('_').nth(1).unwrap_or("unknown").to_string();
    let root = dir.join("root");
    let _ = fs::remove_dir_all(&root);
    run(
        Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&root),
        "dpkg-deb -x",
    )?;
    let include = root.join("usr/include");
    fs::write(
        include.join(SOURCE_FILE),
        format!("Debian {suite} linux-libc-dev {version}"),
    )
    .map_err(|e| format!("write {SOURCE_FILE}: {e}"))?;
    Ok(include)
}
