//! `perf stat`, with the safe API: counts events of a command, a running process, the whole
//! system, or a built-in workload, and prints them the way `perf stat` does.
//!
//! ```text
//! cargo run --release -p perf-event --example stat -- [OPTIONS] [CMD ARGS...]
//! cargo run --release -p perf-event --example stat -- --help
//! ```
//!
//! # Counting exactly a child, without unsafe code
//!
//! There is no safe way to run code between `fork` and `exec` (what `perf` does to open counters on
//! the child before it runs). Instead the counters are opened on **this** thread (`pid` 0),
//! disabled, with `inherit` (the child spawned next gets its own copies) and `enable_on_exec` (those
//! copies start at the child's `exec`; this process never execs, so its own copies never count).
//! When the child exits the kernel folds its counts into ours: one read after `wait` gives the
//! command's totals from its exec to its exit, its threads and children included. The counters are
//! opened right before the spawn, and no other thread of this process forks meanwhile.
//!
//! Without a command, the counters are enabled around a built-in workload run on this thread (so
//! the example prints real numbers anywhere), or, with `-p PID` or `--duration`, around a wait.
#![forbid(unsafe_code)]

#[path = "stat/args.rs"]
mod args;
#[path = "stat/report.rs"]
mod report;
#[path = "stat/workload.rs"]
mod workload;

use std::fs::{self, File};
use std::io::{self, Write};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::sleep;
use std::time::{Duration, Instant};

use perf_event::config::{online_cpus, sibling, Cpu, Inherit, OnExecve, Opts, Proc};
use perf_event::count::{Counter, CounterGroup};
use perf_event::event::Event;
use perf_event::perf_sys as sys;
use perf_event::Error;

use args::Args;
use report::{Kind, Report, Row, Value};

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
    kind: Kind,
    /// A default hardware event: any failure to open it reads `<not supported>`.
    optional: bool,
    /// In a group (`{a,b}`): the leader's index in the specs, and this event's place in the group
    /// (0 for the leader).
    group: Option<(usize, usize)>,
}

/// Where the counters are opened.
enum Target {
    /// This thread, inherited by the child and enabled by its exec.
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
    Denied(Error),
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
            File::create(path)
                .map_err(|e| Fail::Error(format!("cannot create {}: {e}", path.display())))?,
        ),
        None => Box::new(io::stderr()),
    };

    // Ctrl-C stops the counting of -p/--duration; with a command it reaches the command too (same
    // process group), which exits, and the counts are printed, as perf does.
    let interrupted = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGINT, Arc::clone(&interrupted))
        .map_err(|e| Fail::Error(format!("cannot install the SIGINT handler: {e}")))?;

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
    match target {
        Target::Child => {
            opts.inherit = Some(Inherit::NewChild);
            opts.on_execve = Some(OnExecve::Enable);
        }
        Target::Threads(_) => opts.inherit = Some(Inherit::NewChild),
        Target::Me | Target::Cpus(_) => {}
    }

    // Open every counter (as late as possible: right before what is measured starts).
    let mut opened = Vec::with_capacity(specs.len());
    for spec in &specs {
        opened.push(match spec.group {
            Some((leader, 0)) => open_group(&specs, leader, &target, &opts)?,
            Some((leader, index)) => Opened::Member { leader, index },
            None => open_event(spec, &target, &opts)?,
        });
    }
    if !opened
        .iter()
        .any(|o| matches!(o, Opened::Counters { .. } | Opened::Group(_)))
    {
        if let Some(Opened::Denied(Error::Permission { event, source, .. })) =
            opened.iter().find(|o| matches!(o, Opened::Denied(_)))
        {
            return Err(Fail::Error(format!(
                "no event could be opened: {event}: permission denied ({source})\n{}",
                permission_hint(&target)
            )));
        }
    }
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

    let before = proc_times();
    let mut exit = ExitCode::SUCCESS;
    let start;
    let elapsed;
    match what {
        Run::Command => {
            let mut cmd = Command::new(&a.command[0]);
            cmd.args(&a.command[1..]);
            if manual {
                each(&|c| c.enable())?;
            }
            start = Instant::now();
            let mut child = cmd.spawn().map_err(|e| {
                Fail::Error(format!(
                    "cannot run {}: {e}",
                    a.command[0].to_string_lossy()
                ))
            })?;
            let status = match a.duration {
                None => child.wait(),
                Some(d) => wait_until(&mut child, start + d, &interrupted),
            }
            .map_err(|e| Fail::Error(format!("waiting for the command: {e}")))?;
            elapsed = start.elapsed();
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
            loop {
                if interrupted.load(Ordering::Relaxed) {
                    break;
                }
                let now = Instant::now();
                if deadline.is_some_and(|d| now >= d) {
                    break;
                }
                if !a.pids.is_empty() && a.pids.iter().all(|&p| !alive(p)) {
                    break;
                }
                let step = Duration::from_millis(20);
                sleep(deadline.map_or(step, |d| step.min(d - now)));
            }
            elapsed = start.elapsed();
            each(&|c| c.disable())?;
        }
    }
    let after = proc_times();

    // Read and sum.
    let mut rows = Vec::with_capacity(specs.len());
    let mut user_only = Vec::new();
    let mut denied = Vec::new();
    for (spec, o) in specs.iter().zip(&opened) {
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
                let (counters, u) = match o {
                    Opened::Counters {
                        counters,
                        user_only,
                    } => (counters.iter().collect(), *user_only),
                    _ => (grouped, false),
                };
                let (mut count, mut enabled, mut running) = (0u64, 0u64, 0u64);
                for c in counters {
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
                (name, Value::from_sums(count, enabled, running))
            }
            Opened::NotSupported => (spec.name.clone(), Value::NotSupported),
            Opened::Denied(_) => {
                denied.push(spec.name.clone());
                (spec.name.clone(), Value::NotPermitted)
            }
        };
        rows.push(Row {
            name,
            kind: spec.kind,
            value,
        });
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
    let user_sys = match (&what, &target, before, after) {
        (Run::Command, Target::Child, _, Some(t)) => Some((t.child_user, t.child_sys)),
        (Run::Builtin, Target::Me, Some(b), Some(t)) => Some((t.user - b.user, t.sys - b.sys)),
        _ => None,
    };
    let report = Report {
        title,
        rows,
        elapsed,
        user_sys,
    };
    report
        .write(&mut out, a.csv.as_deref(), a.json)
        .map_err(|e| Fail::Error(format!("writing the counts: {e}")))?;

    if !user_only.is_empty() {
        eprintln!(
            "stat: counting kernel space was not permitted ({}), so these count user space only \
             (shown with :u): {}",
            paranoid_text(),
            user_only.join(", ")
        );
    }
    if !denied.is_empty() {
        eprintln!(
            "stat: not counted for lack of permission: {}\n{}",
            denied.join(", "),
            permission_hint(&target)
        );
    }
    Ok(exit)
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
    // The group each event is in: (leader index, place in the group).
    let group_of = |i: usize| {
        a.groups
            .iter()
            .find(|g| g.contains(&i))
            .map(|g| (g.start, i - g.start))
    };
    names
        .into_iter()
        .enumerate()
        .map(|(i, name)| {
            let event = Event::parse(&name).map_err(|e| {
                Fail::Error(format!(
                    "{e}\n(names as `perf list` prints them; tracepoints as system:name, PMU events \
                     as pmu/terms/)"
                ))
            })?;
            let kind = kind_of(&event);
            Ok(Spec {
                group: group_of(i),
                optional: optional_hw && event.ty() == sys::PERF_TYPE_HARDWARE,
                event,
                name,
                kind,
            })
        })
        .collect()
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
            open_on(&spec.event, target, &user).map(|c| (c, true))
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

/// Waits for `child` until `deadline` or Ctrl-C, then kills it.
fn wait_until(
    child: &mut std::process::Child,
    deadline: Instant,
    interrupted: &AtomicBool,
) -> io::Result<std::process::ExitStatus> {
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        if Instant::now() >= deadline || interrupted.load(Ordering::Relaxed) {
            // Already exited between the two calls is fine: kill then reports an error we ignore.
            let _ = child.kill();
            return child.wait();
        }
        sleep(Duration::from_millis(5));
    }
}

/// CPU seconds from `/proc/self/stat` (clock ticks of USER_HZ = 100).
#[derive(Clone, Copy)]
struct Times {
    user: f64,
    sys: f64,
    child_user: f64,
    child_sys: f64,
}

fn proc_times() -> Option<Times> {
    let stat = fs::read_to_string("/proc/self/stat").ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    // Fields after the command name start at field 3 (state); utime is field 14.
    let f: Vec<&str> = rest.split_whitespace().collect();
    let tick =
        |i: usize| -> Option<f64> { f.get(i)?.parse::<u64>().ok().map(|t| t as f64 / 100.0) };
    Some(Times {
        user: tick(11)?,
        sys: tick(12)?,
        child_user: tick(13)?,
        child_sys: tick(14)?,
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

/// What the paranoid level allows, and what would work.
fn permission_hint(target: &Target) -> String {
    let level = paranoid_level();
    let why = match level {
        Some(p) if p >= 3 => {
            "level 3 and above forbid every perf event to unprivileged users (a Debian/Ubuntu \
             patch); nothing but privilege or a lower level helps"
        }
        Some(p) if p >= 1 && matches!(target, Target::Cpus(_)) => {
            "system-wide counting (-a) needs perf_event_paranoid <= 0; without -a, your own \
             commands can be counted"
        }
        Some(p) if p >= 2 => {
            "level 2 allows user-space counting of your own processes only (the :u modifier); \
             kernel space needs <= 1, system-wide (-a) <= 0"
        }
        _ if matches!(target, Target::Threads(_)) => {
            "attaching to another user's process needs ptrace access to it (same user, or \
             CAP_PERFMON/CAP_SYS_PTRACE)"
        }
        _ => "some events (kprobes, raw tracepoint data) need privilege at any level",
    };
    format!(
        "hint: {}: {why}. What works everywhere: run as root or with CAP_PERFMON (Linux 5.8+), or \
         lower the level: sysctl kernel.perf_event_paranoid=<n>",
        paranoid_text()
    )
}
