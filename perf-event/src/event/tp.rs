//! Tracepoints (`PERF_TYPE_TRACEPOINT`), by id or by `system:name` through tracefs.
//!
//! A tracepoint's id is a file in tracefs (`events/<system>/<name>/id`). [`tracefs`] finds tracefs
//! the way `perf` does, and mounts it when it is not mounted and the process may (root): a fresh
//! machine often boots with nothing at `/sys/kernel/tracing`, and tracepoints by name work there
//! all the same.
//!
//! ```no_run
//! use perf_event::config::{Cpu, Opts, Proc};
//! use perf_event::count::Counter;
//! use perf_event::event::tp::Tracepoint;
//!
//! // Finds (or, as root, mounts) tracefs and reads the id of sched:sched_switch.
//! let switch = Tracepoint::by_name("sched:sched_switch")?;
//! let counter = Counter::new(&switch, (Proc::CURRENT, Cpu::ALL), Opts::default())?;
//! counter.enable()?;
//! std::thread::sleep(std::time::Duration::from_millis(1));
//! counter.disable()?;
//! assert!(counter.stat()?.count >= 1);
//! # Ok::<(), perf_event::Error>(())
//! ```

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use perf_sys as sys;

use super::Event;
use crate::error::{Error, Result};

/// A tracepoint, by the id tracefs gives it (`events/<system>/<name>/id`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[doc(alias = "PERF_TYPE_TRACEPOINT")]
pub struct Tracepoint {
    /// The tracepoint id.
    pub id: u64,
}

impl Tracepoint {
    /// Looks up `system:name` (e.g. `"sched:sched_switch"`) in tracefs, which [`tracefs`] finds
    /// or mounts.
    ///
    /// # Errors
    ///
    /// [`Error::Parse`] when the text is not `system:name` or the tracepoint does not exist;
    /// [`Error::Io`] when tracefs cannot be had (not mounted and this process may not mount it,
    /// or not readable by this user: it is root-only on many systems). The message says which
    /// paths were tried and how to mount it; [`Error::kind`] is
    /// [`PermissionDenied`](io::ErrorKind::PermissionDenied) when privilege is what is missing.
    pub fn by_name(name: &str) -> Result<Self> {
        let (system, event) = name.split_once(':').ok_or_else(|| Error::Parse {
            input: name.into(),
            reason: "a tracepoint is named `system:name`".into(),
        })?;
        Self::new(system, event)
    }

    /// Looks up tracepoint `event` of `system` in tracefs.
    ///
    /// # Errors
    ///
    /// As [`by_name`](Self::by_name).
    pub fn new(system: &str, event: &str) -> Result<Self> {
        let input = format!("{system}:{event}");
        let bad = |c: &str| c.is_empty() || c.contains('/') || c.contains("..");
        if bad(system) || bad(event) {
            return Err(Error::Parse {
                input,
                reason: "not a tracepoint name".into(),
            });
        }
        let root = tracefs().map_err(|e| match e {
            Error::Io { what, source } => Error::Io {
                what: format!("cannot use tracepoint {input:?}: {what}"),
                source,
            },
            e => e,
        })?;
        let path = root.join("events").join(system).join(event).join("id");
        let text = fs::read_to_string(&path).map_err(|e| match e.kind() {
            io::ErrorKind::PermissionDenied => Error::Io {
                what: format!(
                    "cannot use tracepoint {input:?}: tracefs ({}) is not readable by this user \
                     (it is often root-only): run as root, or pass the id with `Tracepoint {{ id }}` \
                     (root can read it from {})",
                    root.display(),
                    path.display()
                ),
                source: e,
            },
            io::ErrorKind::NotFound => Error::Parse {
                input: input.clone(),
                reason: format!(
                    "no such tracepoint ({} does not exist; `perf list tracepoint` lists them){}",
                    path.display(),
                    super::spec::tracepoint_suggestion(&root.join("events"), system, event)
                ),
            },
            _ => Error::Parse {
                input: input.clone(),
                reason: format!("reading {}: {e}", path.display()),
            },
        })?;
        let id = text.trim().parse().map_err(|_| Error::Parse {
            input,
            reason: format!("{} does not hold a number", path.display()),
        })?;
        Ok(Self { id })
    }
}

super::into_event!(Tracepoint, v => Event::new(sys::PERF_TYPE_TRACEPOINT, v.id, format!("tracepoint {}", v.id)));

/// Where tracefs is mounted, preferred in this order, as `perf` looks for it.
const TRACEFS_PLACES: [&str; 4] = [
    "/sys/kernel/tracing",
    "/sys/kernel/debug/tracing",
    "/tracing",
    "/trace",
];
/// Where debugfs is mounted, preferred in this order; tracefs is its `tracing` folder.
const DEBUGFS_PLACES: [&str; 2] = ["/sys/kernel/debug", "/debug"];

/// One finder at a time, so that two threads never both mount tracefs (fork-safe: a child made while
/// another thread was finding takes it over).
static FINDING: perf_core::fork::Lock<()> = perf_core::fork::Lock::new(());

/// The tracefs folder (the one holding `events/`), found or mounted the way `perf` does.
///
/// 1. A mounted tracefs, from `/proc/self/mounts`: `/sys/kernel/tracing` first, then
///    `/sys/kernel/debug/tracing`, `/tracing`, `/trace`, then anywhere else.
/// 2. A mounted debugfs's `tracing` folder (since Linux 4.1 the kernel mounts tracefs there when
///    it is first visited; before, the tracing files were part of debugfs).
/// 3. Neither: mounts tracefs at `/sys/kernel/tracing`; when that fails, mounts debugfs at
///    `/sys/kernel/debug` and uses its `tracing` folder. Mounting needs `CAP_SYS_ADMIN` (root).
///    The mount stays after the process exits, as one made by `perf` does.
///
/// # Errors
///
/// [`Error::Io`] when tracefs is not mounted and mounting it failed. The message names the places
/// looked at and the command that mounts it; [`Error::kind`] is
/// [`PermissionDenied`](io::ErrorKind::PermissionDenied) when the process may not mount.
#[doc(alias = "debugfs")]
#[doc(alias = "tracing_path_mount")]
pub fn tracefs() -> Result<PathBuf> {
    let _one = FINDING.lock();
    if let Some(dir) = mounted() {
        return Ok(dir);
    }
    let tracing = Path::new(TRACEFS_PLACES[0]);
    let tracefs_err = match rustix::mount::mount(
        "tracefs",
        tracing,
        "tracefs",
        rustix::mount::MountFlags::empty(),
        None,
    ) {
        Ok(()) if tracing.join("events").is_dir() => return Ok(tracing.to_owned()),
        Ok(()) => io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "tracefs mounted at {} has no events folder",
                tracing.display()
            ),
        ),
        Err(e) => e.into(),
    };
    // Kernels older than 4.1 (or built without tracefs) keep the tracing files in debugfs.
    let debug = Path::new(DEBUGFS_PLACES[0]);
    if rustix::mount::mount(
        "debugfs",
        debug,
        "debugfs",
        rustix::mount::MountFlags::empty(),
        None,
    )
    .is_ok()
    {
        let dir = debug.join("tracing");
        if dir.join("events").is_dir() {
            return Ok(dir);
        }
    }
    let why = if tracefs_err.kind() == io::ErrorKind::PermissionDenied {
        "mounting it needs root (CAP_SYS_ADMIN)"
    } else {
        "this kernel may lack tracefs (CONFIG_TRACING)"
    };
    Err(Error::Io {
        what: format!(
            "tracefs is not mounted: /proc/self/mounts lists no tracefs (looked for {}) and no \
             debugfs with a tracing folder ({}); {why}. As root, `mount -t tracefs nodev {}` \
             mounts it. Mounting it from this process failed",
            TRACEFS_PLACES.join(", "),
            DEBUGFS_PLACES.join(", "),
            tracing.display()
        ),
        source: tracefs_err,
    })
}

/// A tracefs (or debugfs `tracing` folder) that is mounted now and has `events/`.
fn mounted() -> Option<PathBuf> {
    let mounts = fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let (tracefs, debugfs) = mount_points(&mounts);
    // A root-only tracefs (mode 0700) counts as found: reading it then says "not readable".
    let has_events = |d: &PathBuf| match fs::metadata(d.join("events")) {
        Ok(m) => m.is_dir(),
        Err(e) => e.kind() == io::ErrorKind::PermissionDenied,
    };
    let by_preference = |dirs: Vec<PathBuf>, places: &[&str]| -> Vec<PathBuf> {
        let (mut known, other): (Vec<PathBuf>, Vec<PathBuf>) = dirs
            .into_iter()
            .partition(|d| places.iter().any(|p| Path::new(p) == d));
        known.sort_by_key(|d| places.iter().position(|p| Path::new(p) == d));
        known.extend(other);
        known
    };
    if let Some(d) = by_preference(tracefs, &TRACEFS_PLACES)
        .into_iter()
        .find(has_events)
    {
        return Some(d);
    }
    // A mounted debugfs: visiting its `tracing` folder mounts tracefs there (Linux 4.1+).
    by_preference(debugfs, &DEBUGFS_PLACES)
        .into_iter()
        .map(|d| d.join("tracing"))
        .find(has_events)
}

/// What the mounted tracefs says of tracepoint `id` (nothing is mounted): `Some(Some("system:name"))`
/// when a tracepoint has it, `Some(None)` when none of those readable has it, `None` when tracefs is not
/// mounted or no id in it could be read. For error messages, which must not guess.
pub(crate) fn name_of_id(id: u64) -> Option<Option<String>> {
    let events = mounted()?.join("events");
    let mut read_any = false;
    for system in fs::read_dir(&events).ok()?.flatten() {
        let Ok(names) = fs::read_dir(system.path()) else {
            continue;
        };
        for name in names.flatten() {
            let Ok(text) = fs::read_to_string(name.path().join("id")) else {
                continue;
            };
            read_any = true;
            if text.trim().parse::<u64>() == Ok(id) {
                return Some(Some(format!(
                    "{}:{}",
                    system.file_name().to_string_lossy(),
                    name.file_name().to_string_lossy()
                )));
            }
        }
    }
    read_any.then_some(None)
}

/// The tracefs and the debugfs mount points listed in `/proc/self/mounts` text, in its order.
fn mount_points(mounts: &str) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let (mut tracefs, mut debugfs) = (Vec::new(), Vec::new());
    for line in mounts.lines() {
        let mut f = line.split_whitespace();
        let (Some(_), Some(dir), Some(fstype)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        let dir = PathBuf::from(unescape(dir));
        match fstype {
            "tracefs" => tracefs.push(dir),
            "debugfs" => debugfs.push(dir),
            _ => {}
        }
    }
    (tracefs, debugfs)
}

/// Undoes the octal escapes of `/proc/mounts` (`\040` for a space, `\011` tab, `\012`, `\134`).
fn unescape(field: &str) -> String {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match (b[i], octal) {
            (b'\\', Some(d)) => {
                let v = d.iter().fold(0u32, |v, c| v * 8 + u32::from(c - b'0'));
                out.push(u8::try_from(v).unwrap_or(b'?'));
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_lines() {
        let text = "sysfs /sys sysfs rw 0 0\n\
                    debugfs /sys/kernel/debug debugfs rw 0 0\n\
                    none /mnt/my\\040trace tracefs rw 0 0\n\
                    tracefs /sys/kernel/tracing tracefs rw 0 0\n\
                    short line\n";
        let (t, d) = mount_points(text);
        assert_eq!(
            t,
            [
                PathBuf::from("/mnt/my trace"),
                PathBuf::from("/sys/kernel/tracing")
            ]
        );
        assert_eq!(d, [PathBuf::from("/sys/kernel/debug")]);
        assert_eq!(unescape("a\\134b\\011c\\9"), "a\\b\tc\\9");
    }

    #[test]
    fn bad_names_are_refused_before_tracefs() {
        for (s, e) in [("..", "id"), ("sched", ""), ("a/b", "c"), ("", "x")] {
            let err = Tracepoint::new(s, e).unwrap_err();
            assert!(matches!(err, Error::Parse { .. }), "{err}");
        }
    }
}
