//! `cargo xtask fetch-headers SUITE`: Debian's `linux-libc-dev` for one suite, unpacked under `target/`.
//!
//! apt runs with a private sources list, lists folder, cache and an empty dpkg status, so the host's apt
//! configuration and package state are never touched.

use std::fs;
use std::path::PathBuf;
use std::process::Command;

use crate::apt::{run, suite_dir, Apt};
use crate::SUITES;

/// The file, next to the unpacked headers, that names the package they came from.
pub const SOURCE_FILE: &str = ".perf-sys-source";

/// The unpacked include folder of `suite`, if it was fetched before.
pub fn cached_include_dir(suite: &str) -> Option<PathBuf> {
    let include = suite_dir(suite).join("root/usr/include");
    include.join(SOURCE_FILE).is_file().then_some(include)
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
    let apt = Apt::new(suite)?;
    apt.update()?;
    let deb = apt.download("linux-libc-dev")?;
    let dir = apt.dir();
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
