//! Counts task-clock, page-faults and context-switches of a command through the raw FFI only.
//!
//! ```text
//! cargo run -p perf-sys --example count -- CMD [ARGS...]
//! ```
//!
//! The counters are opened on this process, disabled, with `inherit` (the child about to be spawned, its
//! threads and its children get their own copies) and `enable_on_exec` (the child's copies start counting
//! exactly when it execs; this process never execs, so its own copy stays off). When the child exits, the
//! kernel folds its counts into ours, and one read gives the command's totals.
//! This shows the "depend on just the sys crate" use; `perf-event` wraps all of it safely.

use std::ffi::OsString;
use std::io::{self, Read};
use std::os::fd::OwnedFd;
use std::process::{Command, ExitCode};
use std::time::Instant;

use perf_sys::*;

struct Event {
    name: &'static str,
    config: u32,
    fd: Option<OwnedFd>,
    note: String,
}

fn open_on(pid: libc::pid_t, config: u32) -> io::Result<(OwnedFd, bool)> {
    let mut attr = perf_event_attr {
        type_: PERF_TYPE_SOFTWARE,
        size: core::mem::size_of::<perf_event_attr>() as u32,
        config: config as u64,
        read_format: (PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING) as u64,
        ..Default::default()
    };
    attr.set_disabled(1);
    attr.set_inherit(1);
    attr.set_enable_on_exec(1);
    attr.set_exclude_hv(1);
    // Context switches happen in the kernel: try with the kernel included first, and fall back to user
    // space only when perf_event_paranoid forbids it.
    match perf_event_open(&attr, pid, -1, None, PERF_FLAG_FD_CLOEXEC as u64) {
        Ok(fd) => Ok((fd, false)),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM)) => {
            attr.set_exclude_kernel(1);
            perf_event_open(&attr, pid, -1, None, PERF_FLAG_FD_CLOEXEC as u64).map(|fd| (fd, true))
        }
        Err(e) => Err(e),
    }
}

const USAGE: &str = "usage: count [--] CMD [ARGS...]";

fn main() -> ExitCode {
    let mut args: Vec<OsString> = std::env::args_os().skip(1).collect();
    match args.first().and_then(|a| a.to_str()) {
        // `count -- ls -l`: the usual end of options, as `perf stat -- ls -l`.
        Some("--") => {
            args.remove(0);
        }
        Some("-h" | "--help") => {
            println!("{USAGE}\nCounts task-clock, context-switches and page-faults of CMD.");
            return ExitCode::SUCCESS;
        }
        Some(opt) if opt.starts_with('-') => {
            eprintln!("count: unknown option {opt:?} (no options are taken)\n{USAGE}");
            return ExitCode::from(2);
        }
        _ => {}
    }
    let Some((program, rest)) = args.split_first() else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };

    let mut events = [
        ("task-clock", PERF_COUNT_SW_TASK_CLOCK),
        ("context-switches", PERF_COUNT_SW_CONTEXT_SWITCHES),
        ("page-faults", PERF_COUNT_SW_PAGE_FAULTS),
    ]
    .map(|(name, config)| match open_on(0, config) {
        Ok((fd, user_only)) => Event {
            name,
            config,
            fd: Some(fd),
            note: if user_only {
                "(user space only: perf_event_paranoid forbids counting the kernel)".into()
            } else {
                String::new()
            },
        },
        Err(e) => Event {
            name,
            config,
            fd: None,
            note: format!("<not counted: {e}>"),
        },
    });

    let start = Instant::now();
    let status = match Command::new(program).args(rest).status() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("count: cannot run {program:?}: {e}");
            return ExitCode::from(127);
        }
    };
    let wall = start.elapsed();

    let words: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    println!("\n Performance counter stats for '{}':\n", words.join(" "));
    for ev in &mut events {
        let Some(fd) = ev.fd.take() else {
            println!("{:>18}      {:<18} {}", "", ev.name, ev.note);
            continue;
        };
        let mut buf = [0u8; 24];
        let mut file = std::fs::File::from(fd);
        if let Err(e) = file.read_exact(&mut buf) {
            println!("{:>18}      {:<18} <read failed: {e}>", "", ev.name);
            continue;
        }
        let word =
            |i: usize| u64::from_ne_bytes(buf[i * 8..i * 8 + 8].try_into().unwrap_or_default());
        let (value, enabled, running) = (word(0), word(1), word(2));
        let scaled = if running == 0 {
            0.0
        } else {
            value as f64 * enabled as f64 / running as f64
        };
        if ev.config == PERF_COUNT_SW_TASK_CLOCK {
            let msec = scaled / 1e6;
            let utilized = msec / (wall.as_secs_f64() * 1e3);
            println!(
                "{msec:>18.2} msec {:<18} # {utilized:8.3} CPUs utilized {}",
                ev.name, ev.note
            );
        } else {
            println!("{:>18} {:<23} {}", scaled.round() as u64, ev.name, ev.note);
        }
    }
    println!("\n{:>18.9} seconds time elapsed\n", wall.as_secs_f64());
    match status.code() {
        Some(0) => ExitCode::SUCCESS,
        Some(c) => ExitCode::from(c.clamp(1, 255) as u8),
        None => ExitCode::FAILURE,
    }
}
