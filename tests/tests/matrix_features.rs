//! Which `perf_event_attr` options the running kernel accepts, checked against the release that added
//! each one. Through `perf_sys` alone, so it pins down the raw ABI behaviour that the version-naming errors
//! of `perf-event` rely on: an older kernel refuses an unknown attr bit or `read_format` flag with `EINVAL`,
//! and a non-zero field past its own `perf_event_attr` size with `E2BIG`. `cargo xtask kernel-matrix` runs
//! it on 5.10, 6.1, 6.12 and the newest kernel; it also runs on the host.

use std::io;
use std::os::fd::OwnedFd;

use perf_sys::*;
use tests::Skip;

/// `(major, minor)` of the running kernel, from `uname -r`.
fn kernel_version() -> (u32, u32) {
    // SAFETY: `utsname` is plain old data; all-zero is a valid value.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid, writable utsname.
    assert_eq!(unsafe { libc::uname(&mut u) }, 0, "uname failed");
    // SAFETY: uname NUL-terminates `release` inside the array.
    let release = unsafe { std::ffi::CStr::from_ptr(u.release.as_ptr()) }.to_string_lossy();
    let mut parts = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let version = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    println!("running on Linux {release} ({}.{})", version.0, version.1);
    version
}

/// A disabled task-clock counter on the calling thread, user space only.
fn base_attr() -> perf_event_attr {
    let mut attr = perf_event_attr {
        type_: PERF_TYPE_SOFTWARE,
        size: std::mem::size_of::<perf_event_attr>() as u32,
        config: PERF_COUNT_SW_TASK_CLOCK as u64,
        ..Default::default()
    };
    attr.set_disabled(1);
    attr.set_exclude_kernel(1);
    attr.set_exclude_hv(1);
    attr
}

fn open(attr: &perf_event_attr) -> io::Result<OwnedFd> {
    perf_event_open(attr, 0, -1, None, PERF_FLAG_FD_CLOEXEC as u64)
}

/// One option, the release that added it, and how an older kernel refuses it.
struct Feature {
    name: &'static str,
    since: (u32, u32),
    refused_with: i32,
    /// Older series whose stable releases carry it too (so either outcome is right there).
    backported_to: &'static [(u32, u32)],
    set: fn(&mut perf_event_attr),
}

const FEATURES: &[Feature] = &[
    Feature {
        name: "cgroup (PERF_RECORD_CGROUP)",
        since: (5, 7),
        refused_with: libc::EINVAL,
        backported_to: &[],
        set: |a| a.set_cgroup(1),
    },
    Feature {
        name: "text_poke (PERF_RECORD_TEXT_POKE)",
        since: (5, 9),
        refused_with: libc::EINVAL,
        backported_to: &[],
        set: |a| a.set_text_poke(1),
    },
    Feature {
        name: "build_id in MMAP2",
        since: (5, 12),
        refused_with: libc::EINVAL,
        backported_to: &[],
        set: |a| {
            a.set_mmap2(1);
            a.set_build_id(1);
        },
    },
    Feature {
        name: "inherit_thread",
        since: (5, 13),
        refused_with: libc::EINVAL,
        backported_to: &[],
        set: |a| {
            a.set_inherit(1);
            a.set_inherit_thread(1);
        },
    },
    Feature {
        name: "remove_on_exec",
        since: (5, 13),
        refused_with: libc::EINVAL,
        backported_to: &[],
        set: |a| a.set_remove_on_exec(1),
    },
    Feature {
        name: "sigtrap",
        since: (5, 13),
        refused_with: libc::EINVAL,
        backported_to: &[],
        set: |a| {
            a.set_remove_on_exec(1);
            a.set_sigtrap(1);
        },
    },
    Feature {
        name: "PERF_FORMAT_LOST",
        since: (6, 0),
        refused_with: libc::EINVAL,
        // Linux 5.10.y took it with the 2023 group-read fixes: Debian's 5.10.223 accepts it.
        backported_to: &[(5, 10)],
        set: |a| a.read_format |= PERF_FORMAT_LOST as u64,
    },
    Feature {
        name: "config3 (PERF_ATTR_SIZE_VER8)",
        since: (6, 3),
        refused_with: libc::E2BIG,
        backported_to: &[],
        set: |a| a.config3 = 1,
    },
];

#[test]
fn attr_options_match_the_kernel_release() {
    let running = kernel_version();
    if let Err(e) = open(&base_attr()) {
        if matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM)) {
            tests::skip(
                Skip::Privilege,
                &format!("task-clock: {e} (paranoid {})", tests::paranoid()),
            );
            return;
        }
        panic!("the plain task-clock counter does not open: {e}");
    }
    let mut wrong = Vec::new();
    for f in FEATURES {
        let mut attr = base_attr();
        (f.set)(&mut attr);
        let result = open(&attr);
        let has = running >= f.since;
        let maybe = !has && f.backported_to.contains(&running);
        let verdict = match (&result, has) {
            (Ok(_), true) => None,
            (Ok(_), false) if maybe => None,
            (Err(e), false) if e.raw_os_error() == Some(f.refused_with) => None,
            (Ok(_), false) => Some("accepted, but the kernel predates it".to_string()),
            (Err(e), _) => Some(format!("refused with {e}")),
        };
        println!(
            "{:<36} since {}.{:<3} {}",
            f.name,
            f.since.0,
            f.since.1,
            match &result {
                Ok(_) => "accepted".to_string(),
                Err(e) => format!("refused: {e}"),
            }
        );
        if let Some(v) = verdict {
            wrong.push(format!(
                "{} (since {}.{}): {v}",
                f.name, f.since.0, f.since.1
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "on Linux {}.{}: {}",
        running.0,
        running.1,
        wrong.join("; ")
    );
}

/// Where the kernel accepts `PERF_FORMAT_LOST` (6.0, and 5.10.y by backport), `read` really returns the
/// lost count after the value; where it refuses it, the kernel is older than 6.0.
#[test]
fn format_lost_is_honoured_where_accepted() {
    let running = kernel_version();
    let mut attr = base_attr();
    attr.read_format = PERF_FORMAT_LOST as u64;
    match open(&attr) {
        Ok(fd) => {
            let mut buf = [0u8; 24];
            let n = std::io::Read::read(&mut std::fs::File::from(fd), &mut buf)
                .expect("read the counter");
            assert_eq!(
                n, 16,
                "value + lost expected with PERF_FORMAT_LOST on {running:?}"
            );
            let lost = u64::from_ne_bytes(buf[8..16].try_into().unwrap());
            assert_eq!(lost, 0, "a counting event loses no samples");
        }
        Err(e) if matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM)) => {
            tests::skip(Skip::Privilege, &format!("task-clock: {e}"));
        }
        Err(e) => {
            assert!(
                running < (6, 0),
                "Linux {running:?} refused PERF_FORMAT_LOST: {e}"
            );
            assert_eq!(e.raw_os_error(), Some(libc::EINVAL), "{e}");
        }
    }
}
