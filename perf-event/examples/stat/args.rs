//! Command-line options of the stat example (parsed with lexopt through `common/args.rs`).

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use crate::cli::{self, Arg, Parser};

pub const USAGE: &str = "\
usage: stat [OPTIONS] [--] [CMD [ARGS...]]

Counts events of CMD (from its exec to its exit, children included) and prints them the way
`perf stat` does, on stderr. Without CMD it measures a short built-in workload (sorting, touching
fresh pages, a few sleeps), or, with -p or --duration, waits for the process or the time.

options:
  -e, --event EVENT[,EVENT...]  events by perf-list name, repeatable: task-clock, page-faults:u,
                                cycles:k, sched:sched_switch, msr/tsc/, cpu/event=0x3c/ ...,
                                '{a,b}' counts a group (on the PMU together, or not at all)
                                (default: task-clock, context-switches, cpu-migrations,
                                page-faults, cycles, instructions, branches, branch-misses)
  -a, --all-cpus                system-wide: every task on every online CPU (summed)
  -p, --pid PID[,PID...]        attach to running processes (all their threads) until they exit,
                                Ctrl-C, the end of CMD, or --duration
      --duration SECS           stop after SECS seconds (kills CMD if it still runs)
  -r, --repeat N                run CMD (or the built-in workload) N times and print the means,
                                each with its variation as perf prints it: ( +-  1.23% ), the
                                standard deviation of the mean in percent of the mean
  -I, --interval-print MS       print the counts of every MS milliseconds (at least 10) while
                                CMD, -p or -a --duration runs, one line per event, as perf does
  -x, --field-separator SEP     CSV: value,unit,event,run time,% running,metric value,metric unit
  -j, --json                    one JSON object per event
      --no-merge                one row per PMU for an event counted on several (a hybrid CPU's
                                cycles as cpu_core/cycles/ and cpu_atom/cycles/); by default
                                their counts are summed into one row, as perf does
  -o, --output FILE             write the counts to FILE instead of stderr
  -h, --help                    this help

exit status: CMD's own, 0 without CMD; 1 when counting fails; 2 for bad arguments.";

/// What the user asked for.
#[derive(Debug, Default)]
pub struct Args {
    pub events: Vec<String>,
    pub all_cpus: bool,
    pub pids: Vec<u32>,
    pub duration: Option<Duration>,
    /// `-r N`: how many runs.
    pub repeat: Option<usize>,
    /// `-I MS`: print every interval.
    pub interval: Option<Duration>,
    pub csv: Option<String>,
    pub json: bool,
    pub no_merge: bool,
    pub output: Option<PathBuf>,
    pub help: bool,
    pub command: Vec<OsString>,
}

/// Parses the arguments after the program name; `Err` is a usage message.
pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Args, String> {
    let mut a = Args::default();
    let mut p = Parser::from_args(args);
    while let Some(arg) = p.next().map_err(cli::usage)? {
        match arg {
            // The whole list goes to perf's grammar (commas inside `pmu/terms/`, groups `{a,b}`).
            Arg::Short('e') | Arg::Long("event") => a.events.push(cli::value(&mut p, "EVENT")?),
            Arg::Short('a') | Arg::Long("all-cpus") => a.all_cpus = true,
            Arg::Short('p') | Arg::Long("pid") => {
                a.pids.extend(cli::pids(&cli::value(&mut p, "PID")?)?)
            }
            Arg::Long("duration") => a.duration = Some(duration(&cli::value(&mut p, "SECS")?)?),
            Arg::Short('r') | Arg::Long("repeat") => {
                let v = cli::value(&mut p, "N")?;
                match v.trim().parse::<usize>() {
                    Ok(n) if (1..=100_000).contains(&n) => a.repeat = Some(n),
                    _ => return Err(format!("-r needs a number of runs from 1, not '{v}'")),
                }
            }
            Arg::Short('I') | Arg::Long("interval-print") => {
                let v = cli::value(&mut p, "MS")?;
                match v.trim().parse::<u64>() {
                    Ok(ms) if ms >= 10 => a.interval = Some(Duration::from_millis(ms)),
                    _ => {
                        return Err(format!(
                            "-I needs an interval of at least 10 milliseconds, not '{v}'"
                        ))
                    }
                }
            }
            Arg::Short('x') | Arg::Long("field-separator") => {
                a.csv = Some(cli::value(&mut p, "SEP")?)
            }
            Arg::Short('j') | Arg::Long("json") => a.json = true,
            Arg::Long("no-merge") => a.no_merge = true,
            Arg::Short('o') | Arg::Long("output") => {
                a.output = Some(PathBuf::from(cli::value(&mut p, "FILE")?))
            }
            Arg::Short('h') | Arg::Long("help") => a.help = true,
            Arg::Value(first) => {
                a.command = cli::command(&mut p, first);
                break;
            }
            other => return Err(cli::usage(other.unexpected())),
        }
    }
    if a.help {
        return Ok(a);
    }
    if a.csv.is_some() && a.json {
        return Err("-x and --json cannot be combined".into());
    }
    if a.csv.as_deref() == Some("") {
        return Err("-x needs a non-empty separator".into());
    }
    if a.all_cpus && !a.pids.is_empty() {
        return Err("-a and -p cannot be combined".into());
    }
    if a.repeat.is_some_and(|n| n > 1) && !a.pids.is_empty() {
        return Err("-r repeats a command: it cannot be combined with -p".into());
    }
    if a.interval.is_some() && a.repeat.is_some_and(|n| n > 1) {
        return Err("-I and -r cannot be combined".into());
    }
    if a.interval.is_some() && a.json {
        return Err("-I prints lines of text or CSV: it cannot be combined with --json".into());
    }
    if a.interval.is_some() && a.command.is_empty() && a.pids.is_empty() && a.duration.is_none() {
        return Err(
            "-I needs a command, -p PID, or --duration (something that runs a while)".into(),
        );
    }
    Ok(a)
}

/// `--duration SECS`: from a microsecond to 1e9 s (about 31 years, far from `Instant`'s limit);
/// NaN, infinities, negative numbers and values that round to zero are refused.
fn duration(s: &str) -> Result<Duration, String> {
    s.trim()
        .parse::<f64>()
        .ok()
        .filter(|x| (1e-6..1e9).contains(x))
        .and_then(|x| Duration::try_from_secs_f64(x).ok())
        .ok_or_else(|| {
            format!("'{s}' is not a duration in seconds (a number from 1e-6 to 1e9, e.g. 1.5)")
        })
}
