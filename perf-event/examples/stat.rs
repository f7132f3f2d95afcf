//! `perf stat`, with the safe API: counts events of a command, a running process, the whole
//! system, or a built-in workload, and prints them the way `perf stat` does.
//!
//! ```text
//! cargo run --release -p perf-event-safe --example stat -- [OPTIONS] [CMD ARGS...]
//! cargo run --release -p perf-event-safe --example stat -- --help
//! ```
//!
//! # Counting exactly a child, without unsafe code
//!
//! There is no safe way to run code between `fork` and `exec` (what `perf` does to open counters on
//! the child before it runs). Instead [`perf_event::command::spawn`] opens the counters on a helper
//! thread (`pid` 0), disabled, with `inherit` (the child it spawns next gets its own copies) and
//! `enable_on_exec` (those copies start at the child's `exec`; the helper never execs, so its own
//! copies never count). When the child exits the kernel folds its counts into ours: one read after
//! `wait` gives the command's totals from its exec to its exit, its threads and children included.
//!
//! Without a command, the counters are enabled around a built-in workload run on this thread (so
//! the example prints real numbers anywhere), or, with `-p PID` or `--duration`, around a wait.
//!
//! On a hybrid CPU a generalized event (`cycles`) is opened once per core PMU (`cpu_core`,
//! `cpu_atom`); like perf, its rows are summed back into one `cycles` row (counts and times), and
//! `--no-merge` prints one row per PMU (`cpu_core/cycles/`, `cpu_atom/cycles/`).
//!
//! Ctrl-C (SIGINT), SIGTERM and SIGHUP end the counting promptly (well under a second on an idle machine) and the counts are
//! printed: a command still running is sent the same signal, and killed if it has not exited a
//! moment later. A second signal ends the process at once. `-o FILE` is created new
//! (`O_CREAT|O_EXCL|O_NOFOLLOW`, after removing an old file of that name), so a link planted in a
//! shared folder is never followed.
#![forbid(unsafe_code)]

#[path = "stat/args.rs"]
mod args;
#[path = "common/args.rs"]
mod cli;
#[path = "stat/report.rs"]
mod report;
#[path = "stat/workload.rs"]
mod workload;

use std::fs::{self, File};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::sleep;
use std::time::{Duration, Instant};

use nix::sys::resource::{getrusage, UsageWho};
use perf_event::command;
use perf_event::config::{online_cpus, sibling, Cpu, Inherit, Opts, Proc};
use perf_event::count::{Counter, CounterGroup};
use perf_event::event::spec::Machine;
use perf_event::event::Event;
use perf_event::perf_sys as sys;
use perf_event::Error;

use args::Args;
use report::{Kind, MergeKey, Report, Row, Value};

/// Why the run stopped early: a usage error (exit 2) or a failure (exit 1).
enum Fail {
    Usage(String),
    Error(String),
}

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(Fail::Usage(msg)) => {
            eprintln!("stat: {msg}");
            eprintln!("{}", args::USAGE.lines().next().unwrap_or_default());
            eprintln!("Run 'stat --help' for the options.");
            ExitCode::from(2)
        }
        Err(Fail::Error(msg)) => {
            eprintln!("stat: {msg}");
            ExitCode::from(1)
        }
    }
}

/// One event to count, as asked for.
struct Spec {
    event: Event,
    name: String,
    /// The name of the sum of one event's per-PMU copies, and this copy's PMU (see `report::merge`).
    merge_name: String,
    pmu: Option<String>,
    kind: Kind,
    /// A default hardware event: any failure to open it reads `<not supported>`.
    optional: bool,
    /// In a group (`{a,b}`): the leader's index in the specs, and this event's place in the group
    /// (0 for the leader).
    group: Option<(usize, usize)>,
}

impl From<Error> for Fail {
    fn from(e: Error) -> Self {
        Fail::Error(e.to_string())
    }
}

/// Where the counters are opened.
enum Target {
    /// The thread that spawns the command (perf_event::command), inherited by the child and
    /// enabled by its exec.
    Child,
    /// This thread, enabled around the built-in workload.
    Me,
    /// Every task, one counter per online CPU.
    Cpus(Vec<u32>),
    /// These threads (of the `-p` processes), and their future children.
    Threads(Vec<u32>),
}

/// What runs while counting.
enum Run {
    Command,
    Builtin,
    Wait,
}

/// An event's counters, or why it has none.
enum Opened {
    Counters {
        counters: Vec<Counter>,
        user_only: bool,
    },
    NotSupported,
    /// Refused: the library's error, which says why and what would work.
    Denied(Error),
    /// Counting the kernel was refused, and the event happens only in the kernel (a tracepoint,
    /// a context switch): the user-space-only fallback would count 0, so it is not counted.
    KernelOnly,
    /// A group's leader: one group per target (thread, CPU); the members' specs point here.
    Group(Vec<CounterGroup>),
    /// A group member: its leader's spec index and its place in the group.
    Member {
        leader: usize,
        index: usize,
    },
}

fn run() -> Result<ExitCode, Fail> {
    let a = args::parse(std::env::args_os().skip(1)).map_err(Fail::Usage)?;
    if a.help {
        println!("{}", args::USAGE);
        return Ok(ExitCode::SUCCESS);
    }
    let specs = resolve_events(&a)?;
    let mut out: Box<dyn Write> = match &a.output {
        Some(path) => Box::new(
            create_output(path)
                .map_err(|e| Fail::Error(format!("cannot create {}: {e}", path.display())))?,
        ),
        None => Box::new(io::stderr()),
    };

    // Ctrl-C stops the counting of -p/--duration; with a command it reaches the command too (same
    // process group), which exits, and the counts are printed, as perf does.
    // SIGTERM (systemd's and docker's stop) and SIGHUP as Ctrl-C; `interrupted` holds the signal
    // (0: none yet). A second one ends the process at once.
    let interrupted = Arc::new(AtomicUsize::new(0));
    let again = Arc::new(AtomicBool::new(false));
    for sig in STOP_SIGNALS {
        signal_hook::flag::register_conditional_default(sig, Arc::clone(&again))
            .and_then(|_| signal_hook::flag::register(sig, Arc::clone(&again)))
            .and_then(|_| {
                signal_hook::flag::register_usize(sig, Arc::clone(&interrupted), sig as usize)
            })
            .map_err(|e| Fail::Error(format!("cannot install the handler of signal {sig}: {e}")))?;
    }

    let what = if !a.command.is_empty() {
        Run::Command
    } else if !a.pids.is_empty() || a.duration.is_some() {
        Run::Wait
    } else {
        Run::Builtin
    };
    let target = if a.all_cpus {
        Target::Cpus(online_cpus().map_err(|e| Fail::Error(e.to_string()))?)
    } else if !a.pids.is_empty() {
        Target::Threads(threads_of(&a.pids)?)
    } else if matches!(what, Run::Command) {
        Target::Child
    } else {
        Target::Me
    };
    if matches!(what, Run::Wait) && matches!(target, Target::Me) {
        return Err(Fail::Usage(
            "--duration without a command needs -a or -p (there is nothing else to wait for)"
                .into(),
        ));
    }

    let mut opts = Opts::default();
    opts.stat_format.time_enabled = true;
    opts.stat_format.time_running = true;
    // A command's counters take `FromExec::opts` (perf_event::command).
    if let Target::Threads(_) = target {
        opts.inherit = Some(Inherit::NewChild);
    }

    let runs = a.repeat.unwrap_or(1);
    let mut measured = Vec::with_capacity(runs);
    for _ in 0..runs {
        let m = measure(&a, &specs, &target, &what, &opts, &interrupted, &mut out)?;
        measured.push(m);
        if interrupted.load(Ordering::Relaxed) != 0 {
            break;
        }
    }

    let title = match (&target, &what) {
        (Target::Cpus(_), _) => "'system wide'".to_owned(),
        (Target::Threads(_), _) => {
            let pids: Vec<String> = a.pids.iter().map(u32::to_string).collect();
            format!("process id '{}'", pids.join(","))
        }
        (_, Run::Builtin) => format!("'{}'", workload::TITLE),
        _ => {
            let words: Vec<String> = a
                .command
                .iter()
                .map(|w| w.to_string_lossy().into_owned())
                .collect();
            format!("'{}'", words.join(" "))
        }
    };
    let Some(first) = measured.first() else {
        return Ok(ExitCode::SUCCESS);
    };
    let exit = measured.last().map_or(ExitCode::SUCCESS, |m| m.exit);
    // With -I the intervals were the output, as perf prints them.
    if a.interval.is_none() {
        let report = if measured.len() == 1 {
            Report {
                title,
                rows: first.rows.clone(),
                elapsed: first.elapsed,
                user_sys: first.user_sys,
                runs: None,
            }
        } else {
            report::repeated(
                title,
                &measured
                    .iter()
                    .map(|m| (m.rows.clone(), m.elapsed))
                    .collect::<Vec<_>>(),
            )
        };
        report
            .write(&mut out, a.csv.as_deref(), a.json)
            .map_err(|e| Fail::Error(format!("writing the counts: {e}")))?;
    }
    // What was not counted, and why: once, however many runs.
    let Notes {
        user_only,
        denied,
        kernel_only,
        user_space_of_kernel_event,
    } = &first.notes;
    let kernel_only: Vec<&str> = kernel_only.iter().map(String::as_str).collect();
    if !user_only.is_empty() {
        eprintln!(
            "stat: counting kernel space was not permitted ({}), so these count user space only \
             (shown with :u): {}",
            paranoid_text(),
            user_only.join(", ")
        );
    }
    for e in denied {
        eprintln!("stat: not counted: {e}");
    }
    if !denied.is_empty() {
        eprintln!("{}", cli_hint(&target).trim_start());
    }
    if !kernel_only.is_empty() {
        eprintln!("stat: not counted: {}", kernel_only_text(&kernel_only));
    }
    if !user_space_of_kernel_event.is_empty() {
        let one = user_space_of_kernel_event.len() == 1;
        eprintln!(
            "stat: {} {} user space only, where {} never {} (only the kernel has {}): 0 is all \
             {} can count; drop the :u",
            user_space_of_kernel_event.join(", "),
            if one { "counts" } else { "count" },
            if one { "this event" } else { "these events" },
            if one { "happens" } else { "happen" },
            if one { "it" } else { "them" },
            if one { "it" } else { "they" },
        );
    }
    Ok(exit)
}

/// What one run measured.
struct Measured {
    /// One row per event as written (per-PMU copies summed unless --no-merge).
    rows: Vec<Row>,
    elapsed: Duration,
    user_sys: Option<(f64, f64)>,
    exit: ExitCode,
    notes: Notes,
}

/// What was not counted as asked, and why (printed after the counts).
#[derive(Default)]
struct Notes {
    user_only: Vec<String>,
    denied: Vec<String>,
    kernel_only: Vec<String>,
    user_space_of_kernel_event: Vec<String>,
}

/// Opens the counters, runs what is measured (printing `-I` intervals meanwhile), and reads them.
fn measure(
    a: &Args,
    specs: &[Spec],
    target: &Target,
    what: &Run,
    opts: &Opts,
    interrupted: &AtomicUsize,
    out: &mut Box<dyn Write>,
) -> Result<Measured, Fail> {
    // A cumulative count: `cargo run` execs this program in cargo's process, whose children
    // (every rustc of the build) are already in it.
    let usage_of = match what {
        Run::Builtin => UsageWho::RUSAGE_SELF,
        _ => UsageWho::RUSAGE_CHILDREN,
    };
    let before = rusage(usage_of);
    // Open every counter (as late as possible: right before what is measured starts). A command
    // counted from its exec is spawned by perf_event::command right after its counters open.
    let mut start = Instant::now();
    let (opened, mut child) = if matches!(target, Target::Child) {
        let mut cmd = Command::new(&a.command[0]);
        cmd.args(&a.command[1..]);
        let (child, (opened, t)) = command::spawn(&mut cmd, |exec| {
            let opened = open_all(specs, target, &exec.opts(opts))?;
            Ok::<_, Fail>((opened, Instant::now()))
        })?;
        start = t;
        (opened, Some(child))
    } else {
        (open_all(specs, target, opts)?, None)
    };
    let manual = !matches!(target, Target::Child);
    let each = |f: &dyn Fn(&Counter) -> perf_event::Result<()>| -> Result<(), Fail> {
        for o in &opened {
            // A group's members are opened enabled and count while their leader does.
            let counters: Vec<&Counter> = match o {
                Opened::Counters { counters, .. } => counters.iter().collect(),
                Opened::Group(groups) => groups.iter().map(CounterGroup::leader).collect(),
                _ => Vec::new(),
            };
            for c in counters {
                f(c).map_err(|e| Fail::Error(e.to_string()))?;
            }
        }
        Ok(())
    };

    let mut exit = ExitCode::SUCCESS;
    let elapsed;
    match what {
        Run::Command => {
            let mut child = match child.take() {
                Some(c) => c,
                // -a or -p with a command: counted from now until it exits.
                None => {
                    each(&|c| c.enable())?;
                    start = Instant::now();
                    Command::new(&a.command[0])
                        .args(&a.command[1..])
                        .spawn()
                        .map_err(|e| {
                            Fail::Error(format!(
                                "cannot run {}: {e}",
                                a.command[0].to_string_lossy()
                            ))
                        })?
                }
            };
            let mut ticker = a.interval.map(|every| Ticker::new(start, every));
            let mut failed = None;
            let mut tick = || {
                if let Some(t) = ticker.as_mut() {
                    if let Err(e) = t.maybe_print(a, specs, &opened, out, false) {
                        failed.get_or_insert(e);
                    }
                }
            };
            // A deadline past any run: -I without --duration waits for the command's exit.
            let deadline = a
                .duration
                .map_or(start + Duration::from_secs(1 << 40), |d| start + d);
            // Not a plain wait: a signal sent to this process alone must end it too.
            let status = wait_until(&mut child, deadline, interrupted, &mut tick)
                .map_err(|e| Fail::Error(format!("waiting for the command: {e}")))?;
            elapsed = start.elapsed();
            if let Some(e) = failed {
                return Err(e);
            }
            // perf prints the last, partial interval too.
            if let Some(t) = ticker.as_mut() {
                t.maybe_print(a, specs, &opened, out, true)?;
            }
            if manual {
                each(&|c| c.disable())?;
            }
            let code = match (status.code(), status.signal()) {
                (Some(c), _) => c,
                (None, Some(sig)) => 128 + sig,
                _ => 1,
            };
            exit = ExitCode::from(code.clamp(0, 255) as u8);
        }
        Run::Builtin => {
            each(&|c| c.enable())?;
            start = Instant::now();
            workload::run();
            elapsed = start.elapsed();
            each(&|c| c.disable())?;
        }
        Run::Wait => {
            each(&|c| c.enable())?;
            start = Instant::now();
            let deadline = a.duration.map(|d| start + d);
            let mut ticker = a.interval.map(|every| Ticker::new(start, every));
            loop {
                if let Some(t) = ticker.as_mut() {
                    t.maybe_print(a, specs, &opened, out, false)?;
                }
                if interrupted.load(Ordering::Relaxed) != 0 {
                    break;
                }
                let now = Instant::now();
                if deadline.is_some_and(|d| now >= d) {
                    break;
                }
                if !a.pids.is_empty() && a.pids.iter().all(|&p| !alive(p)) {
                    break;
                }
                let step = Duration::from_millis(if ticker.is_some() { 2 } else { 20 });
                sleep(deadline.map_or(step, |d| step.min(d - now)));
            }
            elapsed = start.elapsed();
            if let Some(t) = ticker.as_mut() {
                t.maybe_print(a, specs, &opened, out, true)?;
            }
            each(&|c| c.disable())?;
        }
    }
    let after = rusage(usage_of);
    let (rows, keys, notes) = read_all(specs, &opened)?;
    // As perf: the user and system time of what was started (a command, or the workload).
    let user_sys = match (what, before, after) {
        (Run::Command | Run::Builtin, Some(b), Some(t)) => Some((t.user - b.user, t.sys - b.sys)),
        _ => None,
    };
    // One row per event as written, its per-PMU copies summed, unless --no-merge.
    let rows = if a.no_merge {
        rows
    } else {
        report::merge(rows, &keys)
    };
    Ok(Measured {
        rows,
        elapsed,
        user_sys,
        exit,
        notes,
    })
}

/// Reads every counter: one row per spec, the keys that merge per-PMU copies, and the notes.
fn read_all(specs: &[Spec], opened: &[Opened]) -> Result<(Vec<Row>, Vec<MergeKey>, Notes), Fail> {
    let mut user_only = Vec::new();
    let mut denied = Vec::new();
    let mut kernel_only = Vec::new();
    let mut user_space_of_kernel_event = Vec::new();
    let mut rows = Vec::with_capacity(specs.len());
    let mut keys = Vec::with_capacity(specs.len());
    for (spec, o) in specs.iter().zip(opened) {
        // Every member reads its own fd: its count and the group's times, children's included.
        let grouped: Vec<&Counter> = match o {
            Opened::Group(groups) => groups.iter().map(CounterGroup::leader).collect(),
            Opened::Member { leader, index } => match &opened[*leader] {
                Opened::Group(groups) => groups
                    .iter()
                    .filter_map(|g| g.siblings().get(index - 1).map(|c| &**c))
                    .collect(),
                _ => Vec::new(),
            },
            _ => Vec::new(),
        };
        let (name, value) = match o {
            Opened::Counters { .. } | Opened::Group(_) | Opened::Member { .. } => {
                let (counters, u): (Vec<&Counter>, bool) = match o {
                    Opened::Counters {
                        counters,
                        user_only,
                    } => (counters.iter().collect(), *user_only),
                    _ => (grouped, false),
                };
                let (mut count, mut enabled, mut running) = (0u64, 0u64, 0u64);
                for c in &counters {
                    let s = c
                        .stat()
                        .map_err(|e| Fail::Error(format!("reading {}: {e}", spec.name)))?;
                    count = count.saturating_add(s.count);
                    enabled = enabled.saturating_add(s.time_enabled.unwrap_or(0));
                    running = running.saturating_add(s.time_running.unwrap_or(0));
                }
                let name = if u {
                    user_only.push(spec.name.clone());
                    format!("{}:u", spec.name)
                } else {
                    spec.name.clone()
                };

                // Asked for as user space only (`sched:sched_switch:u`): it can only count 0.
                if !u
                    && happens_in_kernel(&spec.event)
                    && counters.iter().all(|c| c.attr().exclude_kernel() == 1)
                {
                    user_space_of_kernel_event.push(spec.name.clone());
                }
                (name, Value::from_sums(count, enabled, running))
            }
            Opened::NotSupported => (spec.name.clone(), Value::NotSupported),
            Opened::Denied(e) => {
                denied.push(e.to_string());
                (spec.name.clone(), Value::NotPermitted)
            }
            Opened::KernelOnly => {
                kernel_only.push(spec.name.clone());
                (spec.name.clone(), Value::NotPermitted)
            }
        };
        // The copies of one event on several PMUs sum to one row (with the `:u` of a fallback).
        let suffix = if name.ends_with(":u") && !spec.name.ends_with(":u") {
            ":u"
        } else {
            ""
        };
        keys.push(MergeKey {
            name: format!("{}{suffix}", spec.merge_name),
            pmu: spec.pmu.clone(),
        });
        rows.push(Row {
            name,
            kind: spec.kind,
            value,
        });
    }

    Ok((
        rows,
        keys,
        Notes {
            user_only,
            denied,
            kernel_only,
            user_space_of_kernel_event,
        },
    ))
}

/// Opens the counters of every spec on `target` (a group once per thread or CPU); `Err` when not
/// one event could be opened.
fn open_all(specs: &[Spec], target: &Target, opts: &Opts) -> Result<Vec<Opened>, Fail> {
    let mut opened = Vec::with_capacity(specs.len());
    for spec in specs {
        opened.push(match spec.group {
            Some((leader, 0)) => open_group(specs, leader, target, opts)?,
            Some((leader, index)) => Opened::Member { leader, index },
            None => open_event(spec, target, opts)?,
        });
    }
    if !opened
        .iter()
        .any(|o| matches!(o, Opened::Counters { .. } | Opened::Group(_)))
    {
        if let Some(Opened::Denied(e)) = opened.iter().find(|o| matches!(o, Opened::Denied(_))) {
            return Err(Fail::Error(format!(
                "no event could be opened: {e}{}",
                cli_hint(target)
            )));
        }
        if opened.iter().any(|o| matches!(o, Opened::KernelOnly)) {
            let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
            return Err(Fail::Error(format!(
                "no event could be opened: {}",
                kernel_only_text(&names)
            )));
        }
    }
    Ok(opened)
}

/// The events of `-e`, or the default set.
fn resolve_events(a: &Args) -> Result<Vec<Spec>, Fail> {
    let (names, optional_hw): (Vec<String>, bool) = if a.events.is_empty() {
        let clock = if a.all_cpus {
            "cpu-clock"
        } else {
            "task-clock"
        };
        let names = [
            clock,
            "context-switches",
            "cpu-migrations",
            "page-faults",
            "cycles",
            "instructions",
            "branches",
            "branch-misses",
        ];
        (names.iter().map(|s| (*s).to_owned()).collect(), true)
    } else {
        (a.events.clone(), false)
    };
    let mut specs = Vec::new();
    for name in names {
        // A group's index in this `-e` list -> its leader's index in `specs`.
        let mut leaders: Vec<(usize, usize)> = Vec::new();
        for (event, name, group, merge_name, pmu) in parse_events(&name).map_err(Fail::Error)? {
            let kind = kind_of(&event);
            let group = group.map(|g| match leaders.iter().find(|(id, _)| *id == g) {
                Some(&(_, leader)) => (leader, specs.len() - leader),
                None => {
                    leaders.push((g, specs.len()));
                    (specs.len(), 0)
                }
            });
            specs.push(Spec {
                group,
                optional: optional_hw && event.ty() == sys::PERF_TYPE_HARDWARE,
                event,
                name,
                merge_name,
                pmu,
                kind,
            });
        }
    }
    Ok(specs)
}

/// One parsed event: the event, the name to print, the index of its group in the list, the name of
/// its per-PMU copies' sum, and its PMU.
type Parsed = (Event, String, Option<usize>, String, Option<String>);

/// The events `text` names in perf's grammar (`cycles:u`, `msr/tsc/`, `sched:sched_*`, a comma
/// list, groups `{a,b}`): one per PMU for a hybrid CPU's `cycles` (`cpu_core/cycles/`,
/// `cpu_atom/cycles/`), which `report::merge` sums back to one `cycles` row unless `--no-merge`.
fn parse_events(text: &str) -> Result<Vec<Parsed>, String> {
    let list = Machine::current()
        .parse(text)
        .map_err(|e| event_error(text, Error::from(e.clone()), &e.to_string()))?;
    Ok(list
        .into_iter()
        .map(|e| {
            let (name, group) = (e.name().to_owned(), e.group());
            let (merge_name, pmu) = (e.merge_name().to_owned(), e.pmu().map(str::to_owned));
            (e.into_event(), name, group, merge_name, pmu)
        })
        .collect())
}

/// Why `-e NAME` cannot be used, for someone at a shell; `picture` is the parser's pointer at the
/// offending character.
fn event_error(name: &str, e: Error, picture: &str) -> String {
    let tracepoint = name.contains(':') && !name.contains('/');
    // A tracepoint name needs a readable tracefs: say how to get one, not where the parser stopped.
    let tracefs_unusable = perf_event::event::tp::tracefs()
        .map_or(true, |root| std::fs::read_dir(root.join("events")).is_err());
    if !tracepoint || !(e.kind() == io::ErrorKind::PermissionDenied || tracefs_unusable) {
        // The parser's picture says it all (what, where, the nearest names, what is valid), once;
        // on a line of its own, so that its pointer lines up.
        return format!("cannot use -e {name}:\n{picture}");
    }
    match perf_event::event::tp::tracefs() {
        // Not mounted, and this user may not mount it: the library says where it looked and how.
        Err(_) => format!(
            "{e}\nhint: run stat as root: it mounts tracefs, as perf does (tracefs is usually \
             readable by root only, and counting a tracepoint needs kernel counting: {})",
            paranoid_text()
        ),
        // Mounted, but root-only.
        Ok(root) => {
            let (system, event) = name.split_once(':').unwrap_or((name, ""));
            let event = event.split(':').next().unwrap_or(event);
            let cause =
                std::error::Error::source(&e).map_or_else(String::new, |c| format!(" ({c})"));
            format!(
                "cannot use event {name:?}: tracepoints are looked up by name in tracefs ({}), \
                 which this user cannot read{cause}.\n\
                 hint: run stat as root. Or let root read the tracepoint's number from \
                 {}/events/{system}/{event}/id and count it as -e tracepoint/config=NUMBER/; \
                 counting a tracepoint also needs kernel counting ({}; sysctl \
                 kernel.perf_event_paranoid=1 allows it)",
                root.display(),
                root.display(),
                paranoid_text()
            )
        }
    }
}

fn kind_of(e: &Event) -> Kind {
    let c = e.config();
    match e.ty() {
        sys::PERF_TYPE_SOFTWARE
            if c == u64::from(sys::PERF_COUNT_SW_TASK_CLOCK)
                || c == u64::from(sys::PERF_COUNT_SW_CPU_CLOCK) =>
        {
            Kind::Clock
        }
        sys::PERF_TYPE_HARDWARE => match c as u32 {
            sys::PERF_COUNT_HW_CPU_CYCLES => Kind::Cycles,
            sys::PERF_COUNT_HW_INSTRUCTIONS => Kind::Instructions,
            sys::PERF_COUNT_HW_BRANCH_INSTRUCTIONS => Kind::Branches,
            sys::PERF_COUNT_HW_BRANCH_MISSES => Kind::BranchMisses,
            _ => Kind::Other,
        },
        _ => Kind::Other,
    }
}

/// Opens `spec` on `target`; when counting the kernel is refused, retries for user space only.
fn open_event(spec: &Spec, target: &Target, opts: &Opts) -> Result<Opened, Fail> {
    let first = open_on(&spec.event, target, opts);
    let result = match first {
        Err(Error::Permission { .. }) => {
            let mut user = opts.clone();
            user.exclude.kernel = true;
            user.exclude.hv = true;
            match open_on(&spec.event, target, &user) {
                // Allowed in user space only, where it never happens: it would count 0.
                Ok(_) if happens_in_kernel(&spec.event) => return Ok(Opened::KernelOnly),
                r => r.map(|c| (c, true)),
            }
        }
        r => r.map(|c| (c, false)),
    };
    match result {
        Ok((counters, user_only)) => Ok(Opened::Counters {
            counters,
            user_only,
        }),
        Err(Error::NotSupported { .. }) => Ok(Opened::NotSupported),
        Err(e @ Error::Permission { .. }) => Ok(Opened::Denied(e)),
        Err(_) if spec.optional => Ok(Opened::NotSupported),
        Err(e) => Err(Fail::Error(e.to_string())),
    }
}

/// Opens the group whose leader is `specs[leader]`, once per thread or CPU of `target`: the leader as
/// `opts` say, the members enabled (they count while the leader does, as `perf stat` opens them).
fn open_group(specs: &[Spec], leader: usize, target: &Target, opts: &Opts) -> Result<Opened, Fail> {
    let members: Vec<&Spec> = specs
        .iter()
        .filter(|s| s.group.is_some_and(|(l, _)| l == leader))
        .collect();
    let names: Vec<&str> = members.iter().map(|s| s.name.as_str()).collect();
    let fail = |e: Error| Fail::Error(format!("group {{{}}}: {e}", names.join(",")));
    let member_opts = sibling::Opts {
        exclude: opts.exclude.clone(),
        inherit: opts.inherit,
        stat_format: sibling::StatFormat {
            time_enabled: true,
            time_running: true,
            ..Default::default()
        },
        enable: true,
        ..Default::default()
    };
    let mut groups = Vec::new();
    for leader_counter in open_on(&members[0].event, target, opts).map_err(fail)? {
        let mut g = CounterGroup::from(leader_counter);
        for m in &members[1..] {
            g.add(&m.event, &member_opts).map_err(fail)?;
        }
        groups.push(g);
    }
    Ok(Opened::Group(groups))
}

fn open_on(event: &Event, target: &Target, opts: &Opts) -> perf_event::Result<Vec<Counter>> {
    match target {
        Target::Child | Target::Me => {
            Ok(vec![Counter::new(event, (Proc::CURRENT, Cpu::ALL), opts)?])
        }
        Target::Cpus(cpus) => cpus
            .iter()
            .map(|&cpu| Counter::new(event, (Proc::ALL, Cpu(cpu)), opts))
            .collect(),
        Target::Threads(tids) => {
            let mut out = Vec::with_capacity(tids.len());
            let mut gone = None;
            for &tid in tids {
                match Counter::new(event, (Proc(tid), Cpu::ALL), opts) {
                    Ok(c) => out.push(c),
                    // The thread exited since we listed it.
                    Err(e @ Error::NoSuchProcess { .. }) => gone = Some(e),
                    Err(e) => return Err(e),
                }
            }
            match gone {
                Some(e) if out.is_empty() => Err(e),
                _ => Ok(out),
            }
        }
    }
}

/// Every thread of the processes, from `/proc/PID/task`.
fn threads_of(pids: &[u32]) -> Result<Vec<u32>, Fail> {
    let mut tids = Vec::new();
    for &pid in pids {
        let dir = format!("/proc/{pid}/task");
        let entries = fs::read_dir(&dir).map_err(|e| {
            Fail::Error(if e.kind() == io::ErrorKind::NotFound {
                format!("no such process: pid {pid} does not exist")
            } else {
                format!("cannot list the threads of pid {pid} ({dir}): {e}")
            })
        })?;
        for entry in entries.flatten() {
            if let Some(tid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) {
                tids.push(tid);
            }
        }
    }
    Ok(tids)
}

/// Whether the process runs (a zombie counts as gone).
fn alive(pid: u32) -> bool {
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next());
    !matches!(state, Some("Z" | "X" | "x") | None)
}

/// `-I`: prints the counts of each interval that has ended, as perf does.
struct Ticker {
    start: Instant,
    every: Duration,
    /// The end of the interval being counted.
    next: Instant,
    /// When the last printed interval ended (from `start`), and the counts then.
    last: Duration,
    before: Option<Vec<Row>>,
    printed: usize,
}

impl Ticker {
    fn new(start: Instant, every: Duration) -> Self {
        Ticker {
            start,
            every,
            next: start + every,
            last: Duration::ZERO,
            before: None,
            printed: 0,
        }
    }

    /// Prints the interval that has ended (or, with `last`, the one running now, unless empty).
    fn maybe_print(
        &mut self,
        a: &Args,
        specs: &[Spec],
        opened: &[Opened],
        out: &mut Box<dyn Write>,
        last: bool,
    ) -> Result<(), Fail> {
        let now = Instant::now();
        if !last && now < self.next {
            return Ok(());
        }
        let at = now - self.start;
        if last && at <= self.last {
            return Ok(());
        }
        while self.next <= now {
            self.next += self.every;
        }
        let (rows, keys, _) = read_all(specs, opened)?;
        let rows = if a.no_merge {
            rows
        } else {
            report::merge(rows, &keys)
        };
        let delta: Vec<Row> = match &self.before {
            Some(before) => rows
                .iter()
                .zip(before)
                .map(|(r, b)| Row {
                    value: r.value.minus(b.value),
                    ..r.clone()
                })
                .collect(),
            None => rows.clone(),
        };
        let report = Report {
            title: String::new(),
            rows: delta,
            elapsed: at - self.last,
            user_sys: None,
            runs: None,
        };
        // perf repeats its header every 25 intervals.
        let text = report.interval(
            at.as_secs_f64(),
            a.csv.as_deref(),
            self.printed.is_multiple_of(25),
        );
        out.write_all(text.as_bytes())
            .and_then(|()| out.flush())
            .map_err(|e| Fail::Error(format!("writing the counts: {e}")))?;
        self.printed += 1;
        self.last = at;
        self.before = Some(rows);
        Ok(())
    }
}

/// Waits for `child` until `deadline`, then kills it, or until a signal in `interrupted`, then
/// hands that signal on to it and kills it if it has not exited after [`GRACE`]; `tick` runs every
/// few ms.
fn wait_until(
    child: &mut std::process::Child,
    deadline: Instant,
    interrupted: &AtomicUsize,
    tick: &mut dyn FnMut(),
) -> io::Result<std::process::ExitStatus> {
    let mut told: Option<Instant> = None;
    loop {
        tick();
        if let Some(status) = try_wait(child)? {
            return Ok(status);
        }
        let sig = interrupted.load(Ordering::Relaxed);
        if sig != 0 && told.is_none() {
            if let Some(s) = i32::try_from(sig)
                .ok()
                .and_then(rustix::process::Signal::from_named_raw)
            {
                let _ = rustix::process::kill_process(rustix::process::Pid::from_child(child), s);
            }
            told = Some(Instant::now());
        }
        if Instant::now() >= deadline || told.is_some_and(|t| t.elapsed() >= GRACE) {
            // Already exited between the two calls is fine: kill then reports an error we ignore.
            let _ = child.kill();
            return child.wait();
        }
        sleep(Duration::from_millis(2));
    }
}

/// `Child::try_wait`, retried when a signal interrupts it.
fn try_wait(child: &mut std::process::Child) -> io::Result<Option<std::process::ExitStatus>> {
    loop {
        match child.try_wait() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => return r,
        }
    }
}

/// The signals that end the counting with the counts printed.
const STOP_SIGNALS: [i32; 3] = [
    signal_hook::consts::SIGINT,
    signal_hook::consts::SIGTERM,
    signal_hook::consts::SIGHUP,
];

/// How long a command sent the signal that ended the counting may take to exit before it is
/// killed.
const GRACE: Duration = Duration::from_millis(300);

/// `-o FILE`, created new (`O_CREAT|O_EXCL|O_NOFOLLOW`): an old file of that name, or a link
/// planted there in a shared folder, is removed (the link itself, never what it points to) and the
/// create tried again.
fn create_output(path: &std::path::Path) -> io::Result<File> {
    let mut tries = 0;
    loop {
        match fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)
        {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && tries < 3 => {
                tries += 1;
                fs::remove_file(path)?;
            }
            r => return r,
        }
    }
}

/// User and system CPU seconds, from `getrusage(2)`: of this process (`RUSAGE_SELF`), or of the
/// children it has waited for (`RUSAGE_CHILDREN`, cumulative: the difference across one command's
/// run is that command's, its own children included).
#[derive(Clone, Copy)]
struct Times {
    user: f64,
    sys: f64,
}

fn rusage(who: UsageWho) -> Option<Times> {
    let u = getrusage(who).ok()?;
    let secs = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
    Some(Times {
        user: secs(u.user_time()),
        sys: secs(u.system_time()),
    })
}

fn paranoid_level() -> Option<i32> {
    fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()?
        .trim()
        .parse()
        .ok()
}

fn paranoid_text() -> String {
    match paranoid_level() {
        Some(p) => format!("perf_event_paranoid is {p}"),
        None => "perf_event_paranoid is unreadable".into(),
    }
}

/// What the library's permission errors cannot know: what this tool's options change.
fn cli_hint(target: &Target) -> String {
    match (paranoid_level(), target) {
        // The library's error has said what CPU-wide counting needs; not again.
        (Some(p), Target::Cpus(_)) if p >= 1 => {
            "\nhint: -a counts every task; without -a, stat counts your own commands".to_owned()
        }
        // Level 3 and above: the library's error says whether this kernel refuses everything.
        _ => String::new(),
    }
}

/// Events that happen only in kernel context: counting user space only gives 0 for them.
fn happens_in_kernel(e: &Event) -> bool {
    let sw = |c: u32| e.ty() == sys::PERF_TYPE_SOFTWARE && e.config() == u64::from(c);
    e.ty() == sys::PERF_TYPE_TRACEPOINT
        || sw(sys::PERF_COUNT_SW_CONTEXT_SWITCHES)
        || sw(sys::PERF_COUNT_SW_CPU_MIGRATIONS)
}

/// Why kernel-only events are not counted, and what allows them.
fn kernel_only_text(names: &[&str]) -> String {
    format!(
        "{} {} in the kernel, and {}, which lets unprivileged users count user space only \
         (where {} would count 0). Run stat as root or with CAP_PERFMON, or allow kernel \
         counting: sysctl kernel.perf_event_paranoid=1",
        names.join(", "),
        if names.len() == 1 {
            "happens"
        } else {
            "happen"
        },
        paranoid_text(),
        if names.len() == 1 { "it" } else { "they" },
    )
}
