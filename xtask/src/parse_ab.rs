//! `cargo xtask parse-ab`: perf-core's parse paths of an older commit against the working tree, in one
//! process.
//!
//! Two builds of the parse bench cannot be compared on this kind of machine: the same loop runs up to 2x
//! faster or slower from one build (code placement) or one process (the VM's phase) to the next, even for
//! code that did not change (`header walk` in `cargo bench -p perf-core --bench parse`). Here both versions
//! are linked into one harness (the old one renamed `perf-core-old`), each round times old and new back to
//! back on the same captured buffer by thread CPU time, alternating which goes first, and the report is the
//! median and quartiles of the per-round ratios, so that a slow phase of the machine hits both alike.
//!
//! ```text
//! cargo xtask parse-ab [--base REV] [--rounds N] [--input FILE] [--runs K]
//! ```
//! `REV` defaults to 8c3dda6 (before the one-pointer `perf_core::Error`); `FILE` is a buffer saved with
//! `PARSE_BENCH_SAVE` (captured with the parse bench when not given); `K` harness processes are run, each
//! reporting its own ratios (default 3).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The commit whose parse the issue measures gains against.
const DEFAULT_BASE: &str = "8c3dda6";

/// The harness: both versions' walk + parse/view loops, paired rounds, ratio report.
const HARNESS: &str = include_str!("../templates/parse_ab_main.rs");

struct Opts {
    base: String,
    rounds: u32,
    runs: u32,
    input: Option<PathBuf>,
}

fn parse_args(args: &[String]) -> Result<Opts, String> {
    let mut o = Opts {
        base: DEFAULT_BASE.into(),
        rounds: 21,
        runs: 3,
        input: None,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--base" => o.base = value()?.clone(),
            "--rounds" => o.rounds = value()?.parse().map_err(|e| format!("--rounds: {e}"))?,
            "--runs" => o.runs = value()?.parse().map_err(|e| format!("--runs: {e}"))?,
            "--input" => o.input = Some(PathBuf::from(value()?)),
            other => return Err(format!("unknown option {other}")),
        }
    }
    if o.rounds == 0 || o.runs == 0 {
        return Err("--rounds and --runs must be at least 1".into());
    }
    Ok(o)
}

pub fn main(args: &[String]) -> Result<(), String> {
    let opts = parse_args(args)?;
    let root = crate::workspace_root();
    let dir = root.join("target/xtask/parse-ab");
    let old = dir.join("old");
    if old.exists() {
        std::fs::remove_dir_all(&old).map_err(|e| format!("removing {}: {e}", old.display()))?;
    }
    std::fs::create_dir_all(&old).map_err(|e| format!("creating {}: {e}", old.display()))?;
    extract(&root, &opts.base, &old)?;
    let workspace = git(&root, &["show", &format!("{}:Cargo.toml", opts.base)])?;
    for member in ["perf-sys", "perf-core"] {
        let path = old.join(member).join("Cargo.toml");
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        std::fs::write(&path, standalone_manifest(&text, &workspace)?)
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    let harness = dir.join("harness");
    std::fs::create_dir_all(harness.join("src")).map_err(|e| format!("{e}"))?;
    std::fs::write(harness.join("src/main.rs"), HARNESS).map_err(|e| format!("{e}"))?;
    std::fs::write(
        harness.join("Cargo.toml"),
        harness_manifest(&root.join("perf-core"), &old.join("perf-core")),
    )
    .map_err(|e| format!("{e}"))?;
    let input = match opts.input {
        Some(p) => p,
        None => capture(&root, &dir)?,
    };
    let status = crate::cargo()
        .args(["build", "--release", "--manifest-path"])
        .arg(harness.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(dir.join("target"))
        .status()
        .map_err(|e| format!("cargo build: {e}"))?;
    if !status.success() {
        return Err(format!("building the harness failed ({status})"));
    }
    println!(
        "old = {} (perf-core-old), new = the working tree; input {}",
        opts.base,
        input.display()
    );
    for run in 1..=opts.runs {
        println!("-- process {run} of {}", opts.runs);
        let status = Command::new(dir.join("target/release/parse-ab"))
            .arg(&input)
            .arg(opts.rounds.to_string())
            .status()
            .map_err(|e| format!("running the harness: {e}"))?;
        if !status.success() {
            return Err(format!("the harness failed ({status})"));
        }
    }
    Ok(())
}

/// `perf-sys` and `perf-core` of `rev`, unpacked under `into`.
fn extract(root: &Path, rev: &str, into: &Path) -> Result<(), String> {
    let tar = into.join("src.tar");
    let output = format!("--output={}", tar.display());
    git(
        root,
        &[
            "archive",
            "--format=tar",
            &output,
            rev,
            "perf-sys",
            "perf-core",
        ],
    )?;
    let status = Command::new("tar")
        .arg("-xf")
        .arg(&tar)
        .arg("-C")
        .arg(into)
        .status()
        .map_err(|e| format!("tar: {e}"))?;
    if !status.success() {
        return Err(format!("tar -xf {} failed", tar.display()));
    }
    Ok(())
}

/// `git -C root ARGS`; its stdout, or an error with its stderr.
fn git(root: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run git: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "git {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    String::from_utf8(out.stdout).map_err(|e| format!("git {}: {e}", args.join(" ")))
}

/// The buffer the parse bench captures (or its fixtures, without the privilege), saved under `dir`.
fn capture(root: &Path, dir: &Path) -> Result<PathBuf, String> {
    let path = dir.join("input.bin");
    // A filter that names no contender: the bench captures, saves and times nothing.
    let status = crate::cargo()
        .current_dir(root)
        .args([
            "bench",
            "-p",
            "perf-core",
            "--bench",
            "parse",
            "--",
            "=none=",
        ])
        .env("PARSE_BENCH_SAVE", &path)
        .status()
        .map_err(|e| format!("cargo bench: {e}"))?;
    if !status.success() {
        return Err(format!("capturing with the parse bench failed ({status})"));
    }
    Ok(path)
}

fn harness_manifest(new: &Path, old: &Path) -> String {
    format!(
        "[package]\nname = \"parse-ab\"\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n\n\
         [dependencies]\nnew = {{ path = {:?}, package = \"perf-core\" }}\n\
         old = {{ path = {:?}, package = \"perf-core-old\" }}\nlibc = \"0.2\"\n\n\
         [profile.release]\ndebug = 1\n\n[workspace]\n",
        new.display().to_string(),
        old.display().to_string()
    )
}

/// A member's manifest made standalone: `x.workspace = true` replaced from the workspace's
/// `[workspace.package]` and `[workspace.dependencies]`, the package renamed `NAME-old` (and `perf-sys`
/// pointed at its renamed sibling), and the sections a dependency does not need dropped (lints inherit
/// from the workspace; benches and dev-dependencies are only built for the package itself).
fn standalone_manifest(member: &str, workspace: &str) -> Result<String, String> {
    let package = table(workspace, "workspace.package");
    let deps = table(workspace, "workspace.dependencies");
    let mut out = String::new();
    let mut section = String::new();
    for line in member.lines() {
        let t = line.trim();
        if t.starts_with('[') {
            section = t.trim_matches(|c| c == '[' || c == ']').to_string();
        }
        if matches!(
            section.as_str(),
            "lints" | "bench" | "dev-dependencies" | "features"
        ) {
            continue;
        }
        if let Some(name) = t.strip_prefix("name = ") {
            if section == "package" {
                out.push_str(&format!("name = \"{}-old\"\n", name.trim_matches('"')));
                continue;
            }
        }
        if let Some(key) = t.strip_suffix(".workspace = true") {
            let value = match section.as_str() {
                "package" if key == "rust-version" => continue,
                "package" => package
                    .get(key)
                    .ok_or_else(|| format!("no {key} in [workspace.package]"))?
                    .clone(),
                _ if key == "perf-sys" => {
                    "{ path = \"../perf-sys\", package = \"perf-sys-old\" }".to_string()
                }
                _ => deps
                    .get(key)
                    .ok_or_else(|| format!("no {key} in [workspace.dependencies]"))?
                    .clone(),
            };
            out.push_str(&format!("{key} = {value}\n"));
            continue;
        }
        if t.starts_with("serde") && section == "dependencies" {
            // Optional, and only behind the dropped `serde` feature.
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    Ok(out)
}

/// `key = value` lines of `[name]` in a TOML text (values kept verbatim; comments skipped).
fn table(text: &str, name: &str) -> BTreeMap<String, String> {
    let mut in_table = false;
    let mut map = BTreeMap::new();
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('[') {
            in_table = t == format!("[{name}]");
            continue;
        }
        if !in_table || t.starts_with('#') {
            continue;
        }
        if let Some((k, v)) = t.split_once(" = ") {
            map.insert(k.trim().to_string(), v.trim().to_string());
        }
    }
    map
}

#[cfg(test)]
mod tests {
    use super::*;

    const WORKSPACE: &str = "[workspace]\nmembers = [\"perf-sys\"]\n\n[workspace.package]\nversion = \"0.1.0\"\n\
        edition = \"2021\"\n# why\nrust-version = \"1.87\"\n\n[workspace.dependencies]\n\
        perf-sys = { path = \"perf-sys\", version = \"0.1.0\" }\nlibc = \"0.2.172\"\n\n[workspace.lints.rust]\nx = \"deny\"\n";

    #[test]
    fn a_members_manifest_stands_alone_under_a_new_name() {
        let member = "[package]\nname = \"perf-core\"\nversion.workspace = true\nedition.workspace = true\n\
            rust-version.workspace = true\n\n[features]\nserde = [\"dep:serde\"]\n\n[dependencies]\n\
            perf-sys.workspace = true\nlibc.workspace = true\nserde = { version = \"1\", optional = true }\n\n\
            [dev-dependencies]\nproptest = \"1\"\n\n[[bench]]\nname = \"parse\"\nharness = false\n\n\
            [lints]\nworkspace = true\n";
        let out = standalone_manifest(member, WORKSPACE).unwrap();
        assert_eq!(
            out,
            "[package]\nname = \"perf-core-old\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
             [dependencies]\nperf-sys = { path = \"../perf-sys\", package = \"perf-sys-old\" }\n\
             libc = \"0.2.172\"\n\n"
        );
    }

    #[test]
    fn a_key_the_workspace_lacks_is_an_error() {
        let member = "[package]\nname = \"a\"\nlicense.workspace = true\n";
        assert_eq!(
            standalone_manifest(member, WORKSPACE),
            Err("no license in [workspace.package]".into())
        );
    }

    #[test]
    fn options_are_checked() {
        let args = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        let o = parse_args(&args("--base abc --rounds 5 --runs 2")).unwrap();
        assert_eq!((o.base.as_str(), o.rounds, o.runs), ("abc", 5, 2));
        assert!(parse_args(&args("--rounds 0")).is_err());
        assert!(parse_args(&args("--rounds")).is_err());
        assert!(parse_args(&args("--bogus")).is_err());
    }
}
