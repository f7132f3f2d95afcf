//! A private apt for one Debian suite: its own sources list, package lists, cache and an empty dpkg status
//! under `target/xtask/apt/SUITE` (`SUITE-ARCH` for a foreign architecture such as `arm64`), so the host's
//! apt configuration and package state are never touched.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::workspace_root;

const KEYRING: &str = "/usr/share/keyrings/debian-archive-keyring.gpg";

/// The Debian archive every suite is fetched from.
pub const MIRROR: &str = "http://deb.debian.org/debian";

/// The folder that holds everything fetched for `suite`.
pub fn suite_dir(suite: &str) -> PathBuf {
    workspace_root().join("target/xtask/apt").join(suite)
}

/// Runs `cmd`; on failure the error names `what`, the archive, and the tail of stderr. Returns stdout.
pub fn run(cmd: &mut Command, what: &str) -> Result<String, String> {
    let out = cmd
        .output()
        .map_err(|e| format!("{what}: cannot run {:?}: {e}", cmd.get_program()))?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
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

/// apt-get / apt-cache for one suite, configured to use only its private folder.
#[derive(Debug)]
pub struct Apt {
    suite: String,
    dir: PathBuf,
    /// The Debian architecture whose packages are listed (`arm64`), or `None` for the host's.
    arch: Option<String>,
}

impl Apt {
    /// Prepares the private folder of `suite` (creates it, writes its sources list); touches no network.
    pub fn new(suite: &str) -> Result<Self, String> {
        Self::with_dir(suite, suite_dir(suite), None)
    }

    /// Like [`Apt::new`], for the packages of Debian architecture `arch` (`arm64`): its own folder
    /// `target/xtask/apt/SUITE-ARCH`, whose lists hold that architecture only. `amd64` is [`Apt::new`].
    pub fn for_arch(suite: &str, arch: &str) -> Result<Self, String> {
        if arch == "amd64" {
            return Self::new(suite);
        }
        let dir = suite_dir(&format!("{suite}-{arch}"));
        Self::with_dir(suite, dir, Some(arch.to_string()))
    }

    fn with_dir(suite: &str, dir: PathBuf, arch: Option<String>) -> Result<Self, String> {
        if !Path::new(KEYRING).is_file() {
            return Err(format!(
                "{KEYRING} is missing: install debian-archive-keyring"
            ));
        }
        for sub in ["lists/partial", "cache/archives/partial", "deb"] {
            fs::create_dir_all(dir.join(sub))
                .map_err(|e| format!("create {}: {e}", dir.display()))?;
        }
        fs::write(
            dir.join("sources.list"),
            format!("deb [signed-by={KEYRING}] {MIRROR} {suite} main\n"),
        )
        .map_err(|e| format!("write sources.list: {e}"))?;
        Ok(Self {
            suite: suite.to_string(),
            dir,
            arch,
        })
    }

    /// The private folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn options(&self) -> Vec<String> {
        let dir = &self.dir;
        let mut opts = vec![
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
        ];
        if let Some(arch) = &self.arch {
            // The foreign architecture as the "native" one of this private apt: its lists only, and
            // package names without an `:arch` suffix mean its packages.
            opts.push(format!("-oAPT::Architecture={arch}"));
            opts.push(format!("-oAPT::Architectures={arch}"));
        }
        opts
    }

    /// Whether package lists were downloaded before (by [`Apt::update`]).
    pub fn has_lists(&self) -> bool {
        fs::read_dir(self.dir.join("lists")).is_ok_and(|d| {
            d.filter_map(|e| e.ok())
                .any(|e| e.file_name().to_string_lossy().contains("_Packages"))
        })
    }

    /// `apt-get update`: downloads the package lists of the suite.
    pub fn update(&self) -> Result<(), String> {
        run(
            Command::new("apt-get")
                .args(self.options())
                .args(["update", "--error-on=any"]),
            &format!("apt-get update ({})", self.suite),
        )
        .map(drop)
    }

    /// `apt-cache ARGS` against the private lists; returns its stdout.
    pub fn cache(&self, args: &[&str]) -> Result<String, String> {
        run(
            Command::new("apt-cache").args(self.options()).args(args),
            &format!("apt-cache {} ({})", args.join(" "), self.suite),
        )
    }

    /// `apt-get download PACKAGE` into a fresh `deb/` folder; returns the path of the `.deb`.
    pub fn download(&self, package: &str) -> Result<PathBuf, String> {
        let deb_dir = self.dir.join("deb");
        let _ = fs::remove_dir_all(&deb_dir);
        fs::create_dir_all(&deb_dir).map_err(|e| format!("create {}: {e}", deb_dir.display()))?;
        run(
            Command::new("apt-get")
                .args(self.options())
                .args(["download", package])
                .current_dir(&deb_dir),
            &format!("apt-get download {package} ({})", self.suite),
        )?;
        fs::read_dir(&deb_dir)
            .map_err(|e| format!("read {}: {e}", deb_dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| p.extension().is_some_and(|x| x == "deb"))
            .ok_or_else(|| format!("no .deb downloaded into {}", deb_dir.display()))
    }
}
