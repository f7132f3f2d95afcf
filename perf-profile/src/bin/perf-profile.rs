//! `perf-profile`: sample a command, processes or the whole system and write pprof, folded stacks
//! or a flame graph.
//!
//! ```text
//! perf-profile [-F HZ] [-a | -p PID,... | -- CMD ARGS...]
//!     [-d SECS] [-g fp|dwarf[,SIZE]] [--symbolize local|functions|none] [--service NAME]
//!     [--every SECS] [--push URL [--ca FILE] [--credentials FILE] [--queue-bytes N] [--label K=V]]
//!     [-o FILE ...]
//! ```
//!
//! `cargo install perf-profile` puts it on PATH (`--features flamegraph` for `.svg` outputs); in
//! this workspace `cargo run --release -p perf-profile -- ARGS` runs it.
//!
//! Continuous mode (`--every SECS`) cuts the profile at each interval and hands each cut to the
//! outputs (`{n}` in a file name is the interval's number; without it the file holds the latest)
//! and to `--push`. It names frames with `--symbolize functions` unless told otherwise (function
//! names from the symbol tables, as perf does, within 1% of one CPU; `local` adds DWARF lines and
//! inlined functions for 0.4-0.5% of one CPU system-wide at 99 Hz beside a build's churn, 0.2% in
//! the soak, against 0.36-0.44% for `functions` in the same runs, at twice its memory). Push credentials come from the environment (`PERF_PROFILE_PUSH_TOKEN`,
//! `PERF_PROFILE_PUSH_USER` + `PERF_PROFILE_PUSH_PASSWORD`, `PERF_PROFILE_PUSH_HEADERS`) or
//! `--credentials FILE`, never from the command line.
//!
//! The format follows each output's extension: `.pb.gz`/`.pprof` (pprof), `.folded`, `.svg`,
//! `.otlp` (OTLP profiles, alpha).
//! Ctrl-C (SIGINT), SIGTERM, SIGHUP, `-d` or the command's end stops the capture; every output is
//! then written (to a new temporary file beside it, renamed when complete: a link planted in a
//! shared folder is never followed). A command still running is sent the signal that stopped the
//! capture. A second signal ends the profiler at once. Exit status: 0 when the outputs were
//! written, 1 when the capture or a write failed, 2 for a bad command line (every number and
//! duration is range-checked).
#![forbid(unsafe_code)]

use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use perf_profile::collect::DEFAULT_STACK_SIZE;
use perf_profile::doctor::{DoctorOptions, Status};
use perf_profile::export::FoldedRoots;
use perf_profile::offcpu::Method;
use perf_profile::push::{Credentials, PushOptions, Pusher};
use perf_profile::symbolize::Mode;
use perf_profile::{CallGraph, Error, Format, Options, Profile, Profiler, Target};

const USAGE: &str = "\
usage: perf-profile [-F HZ] [-a | -p PID,... | -- CMD ARGS...] [-d SECS] [-g fp|dwarf[,SIZE]]
                    [--symbolize local|functions|none] [--off-cpu[=METHOD]] [--doctor]
                    [--per-process | --per-thread]
                    [--service NAME] [--every SECS] [--memory-budget BYTES]
                    [--push URL [--ca FILE] [--credentials FILE] [--queue-bytes N] [--label K=V]
                     [--retry-max SECS] [--allow-insecure-http]] [-o FILE ...]
       perf-profile --version

  -F HZ              samples per second per CPU, 1 to 100000 (default 99)
  -a                 every task on every CPU (root, or perf_event_paranoid <= 0)
  -p PID,...         these running processes, their new threads and children
  -- CMD ARGS...     run CMD and profile it and its children
  -d SECS            stop after SECS seconds (default: Ctrl-C, SIGTERM or SIGHUP, or the command's
                     or processes' end)
  -g fp              call chains from frame pointers, user and kernel (default)
  -g dwarf[,SIZE]    copy SIZE bytes of user stack (default 8192) and unwind with .eh_frame
  --symbolize MODE   local: function names, file:line and inlined functions from the binaries'
                     ELF symbols and DWARF (default without --every);
                     functions: function names only, from the ELF symbol tables (.symtab,
                     .dynsym, an installed build-id debug file's .symtab), as perf names frames;
                     each file read once and kept (16 MiB of tables at most): within 1% of one
                     CPU in continuous mode (default with --every);
                     none: addresses, mappings and build ids, for a backend that symbolizes
  --off-cpu[=METHOD] where threads wait instead of where they run: the stack at each switch-out
                     weighted by the nanoseconds until the thread runs again (pprof
                     off_cpu/nanoseconds; folded weights in ns). METHOD samples the switch-outs:
                     sched_switch (the tracepoint; needs tracefs) or context-switches (the
                     software event), or auto (default): the tracepoint where tracefs has it,
                     else the software event. Needs the kernel sampled (perf_event_paranoid <= 1)
  --doctor           check what will and will not work here (privileges, locked memory,
                     kptr_restrict, tracefs, PMU), say how to fix it, and exit; with -p or
                     -- CMD it samples them for -d SECS (default 3; a command still running
                     then is ended) and checks every executable file they map, those that
                     hold the samples first: symbols, unwind tables, frame pointers, build id,
                     debug file. The report goes to stdout, or with a command to stderr
                     (stdout is the command's)
  --service NAME     the service name OTLP and pushed profiles carry (default: the command's or
                     process's name)
  --every SECS       continuous: cut the profile every SECS seconds and hand each cut to the
                     outputs ({n} in a file name: the interval's number) and to --push
  --memory-budget BYTES  what JIT maps, unwind tables and function tables read from the
                     profiled processes' files may keep in all (default 134217728); the
                     profiler stays within about 64 MiB plus this
  --push URL         send each profile: OTLP/HTTP when the path ends in /v1development/profiles,
                     Pyroscope when it ends in /ingest. Credentials from PERF_PROFILE_PUSH_TOKEN,
                     PERF_PROFILE_PUSH_USER + PERF_PROFILE_PUSH_PASSWORD, PERF_PROFILE_PUSH_HEADERS
                     (Name=value,...), or --credentials FILE; credentials go over https only,
                     or to a loopback address (127.0.0.0/8, ::1, localhost)
  --ca FILE          trust the CA certificates of this PEM file (default: the system's)
  --credentials FILE token = ..., user = ..., password = ..., header = Name: value lines
  --queue-bytes N    the most bytes of profiles kept pending while the endpoint fails (default
                     8388608); older ones merge, then the oldest are dropped (counted, reported)
  --label K=V        a Pyroscope label (repeatable)
  --retry-max SECS   the longest delay between retries (default 30)
  --allow-insecure-http  send credentials over http:// to a host that is not loopback (with a
                     warning): anyone on the path reads them
  --per-process      folded stacks and flame graphs start with a frame COMM-PID naming the
                     process each stack ran in (as stackcollapse-perf.pl --pid)
  --per-thread       ... with a frame COMM-TID naming the thread (its name, as
                     pthread_setname_np sets it; as stackcollapse-perf.pl --tid). pprof and OTLP
                     outputs always say who ran: labels pid, tid, comm, thread_name,
                     container_id; attributes process.pid, thread.id, process.executable.name,
                     thread.name, container.id
  -o FILE            an output; the extension says the format: .pb.gz or .pprof (pprof),
                     .folded (folded stacks), .svg (flame graph), .otlp (OTLP profiles, alpha).
                     May be given several times.
  -V, --version      print perf-profile's version and exit

The kernel image's symbols are cached per boot, so that only a boot's first capture reads
/proc/kallsyms: in $PERF_PROFILE_CACHE_DIR, else root's /var/cache/perf-profile, another user's
$XDG_CACHE_HOME/perf-profile or ~/.cache/perf-profile; PERF_PROFILE_CACHE_DIR= (empty) turns it off.";

enum Fail {
    Usage(String),
    Error(String),
}

struct Args {
    frequency: u64,
    all: bool,
    pids: Vec<u32>,
    command: Vec<OsString>,
    duration: Option<Duration>,
    call_graph: CallGraph,
    /// `None`: the default (`functions` with --every, else `local`).
    symbolize: Option<Mode>,
    service: Option<String>,
    off_cpu: bool,
    off_cpu_method: Option<Method>,
    doctor: bool,
    every: Option<Duration>,
    push: Option<String>,
    ca: Option<PathBuf>,
    credentials: Option<PathBuf>,
    queue_bytes: Option<usize>,
    labels: Vec<(String, String)>,
    retry_max: Option<Duration>,
    allow_insecure_http: bool,
    memory_budget: Option<usize>,
    outputs: Vec<(PathBuf, Format)>,
    /// `--per-process` / `--per-thread`: a root frame naming who ran in folded stacks and SVGs.
    folded_roots: FoldedRoots,
    /// `--version`: print it, do nothing else.
    version: bool,
}

/// The shortest and the longest duration the command line takes (`-d`, `--every`, `--retry-max`):
/// a millisecond, and about 31 years (far from `Instant`'s and `Duration`'s limits).
const SECS_RANGE: (f64, f64) = (0.001, 1e9);

/// `v`, the value of `flag`, as a duration in seconds within [`SECS_RANGE`].
fn seconds(flag: &str, v: &str) -> Result<Duration, Fail> {
    v.trim()
        .parse::<f64>()
        .ok()
        .filter(|s| (SECS_RANGE.0..=SECS_RANGE.1).contains(s))
        .and_then(|s| Duration::try_from_secs_f64(s).ok())
        .ok_or_else(|| {
            Fail::Usage(format!(
                "{flag} {v}: give seconds from {} to {:e}, e.g. {flag} 5 or {flag} 0.5",
                SECS_RANGE.0, SECS_RANGE.1
            ))
        })
}

/// The kernel's highest sampling frequency (`perf_event_max_sample_rate` caps it lower).
const MAX_FREQUENCY: u64 = 100_000;

fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Option<Args>, Fail> {
    use lexopt::prelude::*;
    let usage = |e: lexopt::Error| Fail::Usage(e.to_string());
    let mut p =
        lexopt::Parser::from_iter(std::iter::once(OsString::from("perf-profile")).chain(args));
    let mut a = Args {
        frequency: 99,
        all: false,
        pids: Vec::new(),
        command: Vec::new(),
        duration: None,
        call_graph: CallGraph::FramePointer,
        symbolize: None,
        service: None,
        off_cpu: false,
        off_cpu_method: None,
        doctor: false,
        every: None,
        push: None,
        ca: None,
        credentials: None,
        queue_bytes: None,
        labels: Vec::new(),
        retry_max: None,
        allow_insecure_http: false,
        memory_budget: None,
        outputs: Vec::new(),
        folded_roots: FoldedRoots::None,
        version: false,
    };
    while let Some(arg) = p.next().map_err(usage)? {
        match arg {
            Short('h') | Long("help") => return Ok(None),
            Short('V') | Long("version") => {
                a.version = true;
                return Ok(Some(a));
            }
            Short('F') => {
                let v: String = p.value().map_err(usage)?.string().map_err(usage)?;
                a.frequency = v
                    .trim()
                    .parse()
                    .ok()
                    .filter(|f| (1..=MAX_FREQUENCY).contains(f))
                    .ok_or_else(|| {
                        Fail::Usage(format!(
                            "-F {v}: give samples per second from 1 to {MAX_FREQUENCY}, e.g. -F 99"
                        ))
                    })?;
            }
            Short('a') => a.all = true,
            Short('p') => {
                let v: String = p.value().map_err(usage)?.string().map_err(usage)?;
                for pid in v.split(',') {
                    a.pids.push(pid.trim().parse().map_err(|_| {
                        Fail::Usage(format!(
                            "-p {v}: give process ids separated by commas, e.g. -p 1234,5678"
                        ))
                    })?);
                }
            }
            Short('d') => {
                let v: String = p.value().map_err(usage)?.string().map_err(usage)?;
                a.duration = Some(seconds("-d", &v)?);
            }
            Short('g') => {
                let v: String = p.value().map_err(usage)?.string().map_err(usage)?;
                a.call_graph = call_graph(&v)?;
            }
            Long("symbolize") => {
                let v: String = p.value().map_err(usage)?.string().map_err(usage)?;
                a.symbolize = Some(match v.as_str() {
                    "local" => Mode::Local,
                    "functions" => Mode::Functions,
                    "none" => Mode::None,
                    _ => {
                        return Err(Fail::Usage(format!(
                            "--symbolize {v}: use local, functions or none"
                        )))
                    }
                });
            }
            Long("every") | Long("retry-max") => {
                let which = if let Long(w) = arg {
                    w.to_owned()
                } else {
                    String::new()
                };
                let v: String = p.value().map_err(usage)?.string().map_err(usage)?;
                let d = Some(seconds(&format!("--{which}"), &v)?);
                if which == "every" {
                    a.every = d;
                } else {
                    a.retry_max = d;
                }
            }
            Long("off-cpu") => {
                a.off_cpu = true;
                if let Some(v) = p.optional_value() {
                    let v = v.string().map_err(usage)?;
                    a.off_cpu_method = match v.as_str() {
                        "auto" => None,
                        m => Some(m.parse().map_err(|e: Error| {
                            Fail::Usage(format!("--off-cpu={m}: {e}, or auto"))
                        })?),
                    };
                }
            }
            Long("doctor") => a.doctor = true,
            Long("allow-insecure-http") => a.allow_insecure_http = true,
            Long("per-process") => a.folded_roots = FoldedRoots::PerProcess,
            Long("per-thread") => a.folded_roots = FoldedRoots::PerThread,
            Long("push") => a.push = Some(p.value().map_err(usage)?.string().map_err(usage)?),
            Long("ca") => a.ca = Some(PathBuf::from(p.value().map_err(usage)?)),
            Long("credentials") => a.credentials = Some(PathBuf::from(p.value().map_err(usage)?)),
            Long("memory-budget") => {
                let v: String = p.value().map_err(usage)?.string().map_err(usage)?;
                a.memory_budget = Some(v.parse().map_err(|_| {
                    Fail::Usage(format!("--memory-budget {v}: give bytes, e.g. 134217728"))
                })?);
            }
            Long("queue-bytes") => {
                let v: String = p.value().map_err(usage)?.string().map_err(usage)?;
                a.queue_bytes = Some(
                    v.trim()
                        .parse()
                        .ok()
                        .filter(|&n: &usize| n > 0)
                        .ok_or_else(|| {
                            Fail::Usage(format!("--queue-bytes {v}: give bytes, e.g. 8388608"))
                        })?,
                );
            }
            Long("label") => {
                let v: String = p.value().map_err(usage)?.string().map_err(usage)?;
                let (k, val) = v
                    .split_once('=')
                    .ok_or_else(|| Fail::Usage(format!("--label {v}: give KEY=VALUE")))?;
                a.labels.push((k.to_owned(), val.to_owned()));
            }
            Long("service") => {
                a.service = Some(p.value().map_err(usage)?.string().map_err(usage)?);
            }
            Short('o') => {
                let path = PathBuf::from(p.value().map_err(usage)?);
                let format = Format::from_path(&path).map_err(|e| Fail::Usage(e.to_string()))?;
                // Refused before the capture, not after it.
                if matches!(format, Format::Svg) && !cfg!(feature = "flamegraph") {
                    return Err(Fail::Usage(format!(
                        "-o {}: this perf-profile was built without flame graphs; build it with \
                         --features flamegraph (inferno, CDDL-1.0), or write .folded",
                        path.display()
                    )));
                }
                a.outputs.push((path, format));
            }
            Value(v) => {
                a.command.push(v);
                a.command.extend(p.raw_args().map_err(usage)?);
            }
            _ => return Err(usage(arg.unexpected())),
        }
    }
    let targets =
        usize::from(a.all) + usize::from(!a.pids.is_empty()) + usize::from(!a.command.is_empty());
    if a.doctor && targets <= 1 {
        return Ok(Some(a));
    }
    if targets == 0 {
        return Err(Fail::Usage(
            "nothing to profile: give -a, -p PID,... or -- CMD ARGS...".into(),
        ));
    }
    if targets > 1 {
        return Err(Fail::Usage(
            "give only one of -a, -p PID,... and -- CMD ARGS...".into(),
        ));
    }
    if a.outputs.is_empty() && a.push.is_none() {
        return Err(Fail::Usage(
            "no output: give -o FILE (.pb.gz, .pprof, .folded, .svg or .otlp) or --push URL".into(),
        ));
    }
    Ok(Some(a))
}

/// `-g`: frame pointers, or DWARF unwinding of a copy of the user stack.
fn call_graph(v: &str) -> Result<CallGraph, Fail> {
    if v == "fp" {
        return Ok(CallGraph::FramePointer);
    }
    let size = match v.strip_prefix("dwarf") {
        Some("") => DEFAULT_STACK_SIZE,
        Some(rest) => rest
            .strip_prefix(',')
            .and_then(|s| s.parse::<u32>().ok())
            .ok_or_else(|| Fail::Usage(format!("-g {v}: use fp, dwarf or dwarf,SIZE")))?,
        None => return Err(Fail::Usage(format!("-g {v}: use fp, dwarf or dwarf,SIZE"))),
    };
    if size == 0 || size % 8 != 0 || size > 65528 {
        return Err(Fail::Usage(format!(
            "-g {v}: the user stack size must be a multiple of 8 from 8 to 65528 (the kernel's limit)"
        )));
    }
    Ok(CallGraph::Dwarf { stack_size: size })
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(Fail::Usage(msg)) => {
            eprintln!("profile: {msg}");
            eprintln!("{}", USAGE.lines().next().unwrap_or_default());
            eprintln!("Run 'perf-profile --help' for the options.");
            ExitCode::from(2)
        }
        Err(Fail::Error(msg)) => {
            eprintln!("profile: {msg}");
            ExitCode::from(1)
        }
    }
}

fn run() -> Result<(), Fail> {
    let Some(a) = parse(std::env::args_os().skip(1))? else {
        println!("{USAGE}");
        return Ok(());
    };
    if a.version {
        println!("perf-profile {}", env!("CARGO_PKG_VERSION"));
        return Ok(());
    }
    let fail = |e: Error| Fail::Error(e.to_string());
    if a.doctor {
        return doctor(&a);
    }
    // Refuse an unwritable output before the capture rather than after it.
    for (path, _) in &a.outputs {
        check_writable(path)?;
    }
    let pusher = match &a.push {
        Some(url) => Some(start_pusher(url, &a)?),
        None => None,
    };
    // What systemd, docker and a closed terminal send, besides Ctrl-C: each ends the capture
    // and the outputs are written; a second one ends the process at once (a stuck write or push).
    let stop = Arc::new(AtomicBool::new(false));
    let stopped_by = Arc::new(AtomicUsize::new(0));
    for sig in STOP_SIGNALS {
        signal_hook::flag::register_conditional_default(sig, Arc::clone(&stop))
            .and_then(|_| signal_hook::flag::register(sig, Arc::clone(&stop)))
            .and_then(|_| {
                signal_hook::flag::register_usize(sig, Arc::clone(&stopped_by), sig as usize)
            })
            .map_err(|e| Fail::Error(format!("cannot install the handler of signal {sig}: {e}")))?;
    }

    let target = if a.all {
        Target::System
    } else if !a.pids.is_empty() {
        Target::Pids(a.pids.clone())
    } else {
        let mut cmd = Command::new(&a.command[0]);
        cmd.args(&a.command[1..]);
        Target::Command(cmd)
    };
    let mut opts = Options::default();
    opts.frequency = a.frequency;
    // Continuous profiling names frames the way perf does by default (function names from the
    // symbol tables): DWARF lines for every interval's new frames cost more than its CPU budget.
    opts.symbolize = a.symbolize.unwrap_or(if a.every.is_some() {
        Mode::Functions
    } else {
        Mode::Local
    });
    opts.call_graph = a.call_graph;
    opts.service = a.service.clone();
    opts.off_cpu = a.off_cpu;
    opts.off_cpu_method = a.off_cpu_method;
    if let Some(bytes) = a.memory_budget {
        opts.memory_budget = bytes;
    }
    let mut p = Profiler::start(target, &opts).map_err(fail)?;
    let (event, why) = p.event();
    if let Some(method) = p.off_cpu_method() {
        let why = why.strip_prefix("off-CPU: ").unwrap_or(why);
        eprintln!("profile: off-CPU by {method} ({why})");
    } else {
        // The reason is a sentence of its own (it may hold parentheses): not put in more.
        eprintln!("profile: sampling {event} at {} Hz: {why}", a.frequency);
    }

    let started = Instant::now();
    let mut next_cut = a.every.map(|e| started + e);
    let mut interval = 0u64;
    let mut failed = None;
    let tty = std::io::stderr().is_terminal();
    let mut last_progress = started;
    let mut progressed = false;
    let mut status = None;
    loop {
        p.poll(Duration::from_millis(100)).map_err(fail)?;
        if stop.load(Ordering::Relaxed) {
            break;
        }
        if let (Some(at), Some(every)) = (next_cut, a.every) {
            if Instant::now() >= at {
                let mut cut = p.cut();
                cut.set_folded_roots(a.folded_roots);
                deliver(&cut, interval, &a, pusher.as_ref(), &mut failed);
                interval += 1;
                next_cut = Some(at + every);
            }
        }
        if a.duration.is_some_and(|d| started.elapsed() >= d) {
            break;
        }
        if let Some(child) = p.child_mut() {
            match child.try_wait() {
                Ok(Some(s)) => {
                    status = Some(s);
                    break;
                }
                Ok(None) => {}
                Err(e) => return Err(Fail::Error(format!("waiting for the command: {e}"))),
            }
        }
        if !a.pids.is_empty() && a.pids.iter().all(|&pid| !alive(pid)) {
            break;
        }
        let every = if tty {
            Duration::from_secs(1)
        } else {
            Duration::from_secs(5)
        };
        if last_progress.elapsed() >= every {
            last_progress = Instant::now();
            let s = p.stats();
            let line = format!(
                "profile: {:.0} s, {} samples, {} lost",
                started.elapsed().as_secs_f64(),
                s.samples,
                s.lost_records + s.lost_samples
            );
            if tty {
                eprint!("\r{line}");
                progressed = true;
            } else {
                eprintln!("{line}");
            }
        }
    }
    if progressed {
        eprintln!();
    }
    let signal = stopped_by.load(Ordering::Relaxed);
    if signal != 0 {
        eprintln!("profile: signal {signal}: ending the capture");
        // perf's way: the command still running is told to end too, with the same signal.
        if status.is_none() {
            if let Some(child) = p.child_mut() {
                if let Some(sig) = i32::try_from(signal)
                    .ok()
                    .and_then(rustix::process::Signal::from_named_raw)
                {
                    let _ =
                        rustix::process::kill_process(rustix::process::Pid::from_child(child), sig);
                }
            }
        }
    }
    p.stop().map_err(fail)?;
    let total = p.stats().samples;
    let mut profile = p.finish().map_err(fail)?;
    profile.set_folded_roots(a.folded_roots);
    let s = &profile.info.stats;
    eprintln!(
        "profile: {} samples in {} stacks over {:.1} s; lost {} records and {} samples; throttled {} times",
        s.samples,
        profile.stacks().sampled().count(),
        profile.info.duration.as_secs_f64(),
        s.lost_records,
        s.lost_samples,
        s.throttled
    );
    for note in &profile.info.notes {
        eprintln!("profile: note: {note}");
    }
    deliver(&profile, interval, &a, pusher.as_ref(), &mut failed);
    if a.every.is_some() {
        eprintln!(
            "profile: {total} samples in total in {} intervals",
            interval + 1
        );
    }
    if let Some(pusher) = pusher {
        let st = pusher.finish(Duration::from_secs(10));
        eprintln!(
            "profile: push: sent {} requests with {} samples; {} failed attempts retried; {} rejected; \
             {} merges; dropped {} profiles with {} samples",
            st.sent,
            st.sent_samples,
            st.failed_attempts,
            st.rejected,
            st.merges,
            st.dropped_profiles,
            st.dropped_samples
        );
        if st.dropped_profiles > 0 && failed.is_none() {
            failed = Some(Error::InvalidOption(format!(
                "{} profiles ({} samples) were not delivered{}",
                st.dropped_profiles,
                st.dropped_samples,
                st.last_error.map(|e| format!(": {e}")).unwrap_or_default()
            )));
        }
    }
    if let Some(st) = status.filter(|s| !s.success()) {
        eprintln!("profile: the command ended with {st}");
    }
    let _ = std::io::stderr().flush();
    match failed {
        Some(e) => Err(fail(e)),
        None => Ok(()),
    }
}

/// The signals that end a capture, with every output written.
const STOP_SIGNALS: [i32; 3] = [
    signal_hook::consts::SIGINT,
    signal_hook::consts::SIGTERM,
    signal_hook::consts::SIGHUP,
];

/// How long `--doctor` samples a command or processes without `-d`: long enough for a command to
/// have loaded its libraries and spent time in them.
const DOCTOR_SECS: f64 = 3.0;

/// `--doctor`: what will and will not work here; with `-p` or `-- CMD` the target is sampled for
/// a while (`-d`, else [`DOCTOR_SECS`]) and every executable file it maps is checked, those that
/// hold the samples first.
fn doctor(a: &Args) -> Result<(), Fail> {
    let mut o = DoctorOptions::default();
    o.system_wide = a.all;
    // With a command the report goes to stderr, as perf stat's does: stdout is the command's
    // (`perf-profile --doctor -- xz -c FILE > /dev/null`).
    let mut out: Box<dyn Write> = if a.command.is_empty() {
        Box::new(std::io::stdout())
    } else {
        Box::new(std::io::stderr())
    };
    let report = perf_profile::doctor::doctor(&o);
    let _ = write!(out, "{report}");
    let _ = out.flush();
    let mut worst = report.worst();
    if !a.pids.is_empty() || !a.command.is_empty() {
        let files = doctor_files(a)?;
        let _ = write!(out, "\n{files}");
        worst = worst.max(files.worst());
    }
    let _ = out.flush();
    match worst {
        Status::Fail => Err(Fail::Error(
            "some of it will not work here: see the fixes above".into(),
        )),
        _ => Ok(()),
    }
}

/// The doctor's look at the files of the command or processes: sampled for a while, every
/// executable file they mapped; where sampling is refused, the files mapped now (`-p`) or the
/// command's binary.
fn doctor_files(a: &Args) -> Result<perf_profile::doctor::Files, Fail> {
    use perf_profile::doctor::{files, mapped_files, mapped_now, Mapped};
    let target = if !a.pids.is_empty() {
        Target::Pids(a.pids.clone())
    } else {
        let mut cmd = Command::new(&a.command[0]);
        cmd.args(&a.command[1..]);
        Target::Command(cmd)
    };
    let mut opts = Options::default();
    opts.frequency = a.frequency;
    opts.call_graph = a.call_graph;
    // Which file each sample ended in is all the doctor needs: no names.
    opts.symbolize = Mode::None;
    let mut p = match Profiler::start(target, &opts) {
        Ok(p) => p,
        Err(e @ Error::Spawn { .. }) => return Err(Fail::Error(e.to_string())),
        Err(e) => {
            let why = format!("not sampled: {e}");
            return Ok(match a.pids.first() {
                Some(&pid) => files(&mapped_now(pid), Some(pid), &why),
                None => {
                    let bin = command_path(&a.command[0]);
                    let mapped: Vec<Mapped> = bin
                        .and_then(|b| std::fs::canonicalize(b).ok())
                        .map(|b| Mapped::new(b.to_string_lossy(), 0))
                        .into_iter()
                        .collect();
                    files(&mapped, None, &why)
                }
            });
        }
    };
    let pid = match p.child_mut() {
        Some(c) => Some(c.id()),
        None => a.pids.first().copied(),
    };
    let window = a.duration.unwrap_or(Duration::from_secs_f64(DOCTOR_SECS));
    let started = Instant::now();
    let fail = |e: Error| Fail::Error(e.to_string());
    let mut ended = false;
    while started.elapsed() < window {
        p.poll(Duration::from_millis(50)).map_err(fail)?;
        if let Some(child) = p.child_mut() {
            if matches!(child.try_wait(), Ok(Some(_)) | Err(_)) {
                ended = true;
                break;
            }
        }
        if !a.pids.is_empty() && a.pids.iter().all(|&pid| !alive(pid)) {
            ended = true;
            break;
        }
    }
    let took = started.elapsed();
    if !ended {
        if let Some(child) = p.child_mut() {
            // The doctor has seen what it needs: the command is ended as Ctrl-C would.
            eprintln!(
                "profile: doctor: sampled the command for {:.1} s (-d sets how long); ending it",
                took.as_secs_f64()
            );
            let _ = rustix::process::kill_process(
                rustix::process::Pid::from_child(child),
                rustix::process::Signal::TERM,
            );
            let _ = child.wait();
        }
    }
    p.stop().map_err(fail)?;
    let (event, _) = p.event();
    let event = event.to_owned();
    let profile = p.finish().map_err(fail)?;
    let sampled = format!(
        "{} {event} samples at {} Hz over {:.1} s",
        profile.info.stats.samples,
        a.frequency,
        took.as_secs_f64()
    );
    Ok(files(&mapped_files(&profile), pid, &sampled))
}

/// Where `cmd` is found: itself when it has a folder, else the first file of that name in PATH.
fn command_path(cmd: &OsString) -> Option<PathBuf> {
    let cmd = PathBuf::from(cmd);
    if cmd.components().count() > 1 {
        return Some(cmd);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(&cmd))
        .find(|p| p.is_file())
}

/// The pusher of `--push URL`, its credentials from `--credentials FILE` or the environment.
fn start_pusher(url: &str, a: &Args) -> Result<Pusher, Fail> {
    let fail = |e: Error| Fail::Error(e.to_string());
    let mut o = PushOptions::new(url);
    o.credentials = match &a.credentials {
        Some(f) => Credentials::from_file(f),
        None => Credentials::from_env(),
    }
    .map_err(fail)?;
    o.ca_file = a.ca.clone();
    o.allow_insecure_http = a.allow_insecure_http;
    // The URL and where its credentials may go are the command line's to fix: exit 2.
    o.check().map_err(|e| Fail::Usage(e.to_string()))?;
    o.labels = a.labels.clone();
    if let Some(q) = a.queue_bytes {
        o.queue_bytes = q;
    }
    if let Some(m) = a.retry_max {
        o.backoff.1 = m;
        o.backoff.0 = o.backoff.0.min(m);
    }
    o.log = Arc::new(|line| eprintln!("profile: push: {line}"));
    Pusher::start(o).map_err(fail)
}

/// Writes `profile` to the outputs (`{n}` replaced by `interval`) and hands it to the pusher.
fn deliver(
    profile: &Profile,
    interval: u64,
    a: &Args,
    pusher: Option<&Pusher>,
    failed: &mut Option<Error>,
) {
    for (path, _) in &a.outputs {
        let path = PathBuf::from(path.to_string_lossy().replace("{n}", &interval.to_string()));
        match profile.write_to_file(&path) {
            Ok(()) => eprintln!("profile: wrote {}", path.display()),
            Err(e) => {
                eprintln!("profile: {e}");
                *failed = Some(e);
            }
        }
    }
    if let Some(p) = pusher {
        p.push(profile.clone());
    }
}

/// Fails when a file cannot be created in `path`'s folder (the way the output will be: a new file
/// of an unpredictable name, no link followed).
fn check_writable(path: &std::path::Path) -> Result<(), Fail> {
    let path = PathBuf::from(path.to_string_lossy().replace("{n}", "0"));
    perf_profile::export::check_writable(&path)
        .map_err(|e| Fail::Error(format!("cannot write {e}")))
}

/// Whether the process runs (a zombie counts as gone).
fn alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next());
    !matches!(state, Some("Z" | "X" | "x") | None)
}
