//! Command-line options of the stat example, parsed by hand (no argument-parsing crate).

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

pub const USAGE: &str = "\
usage: stat [OPTIONS] [--] [CMD [ARGS...]]

Counts events of CMD (from its exec to its exit, children included) and prints them the way
`perf stat` does, on stderr. Without CMD it measures a short built-in workload (sorting, touching
fresh pages, a few sleeps), or, with -p or --duration, waits for the process or the time.

options:
  -e, --event EVENT[,EVENT...]  events by perf-list name, repeatable: task-clock, page-faults:u,
                                cycles:k, sched:sched_switch, msr/tsc/, cpu/event=0x3c/ ...;
                                '{a,b}' counts a group (on the PMU together, or not at all)
                                (default: task-clock, context-switches, cpu-migrations,
                                page-faults, cycles, instructions, branches, branch-misses)
  -a, --all-cpus                system-wide: every task on every online CPU (summed)
  -p, --pid PID[,PID...]        attach to running processes (all their threads) until they exit,
                                Ctrl-C, the end of CMD, or --duration
      --duration SECS           stop after SECS seconds (kills CMD if it still runs)
  -x, --field-separator SEP     CSV: value,unit,event,run time,% running,metric value,metric unit
  -j, --json                    one JSON object per event
  -o, --output FILE             write the counts to FILE instead of stderr
  -h, --help                    this help

exit status: CMD's own, 0 without CMD; 1 when counting fails; 2 for bad arguments.";

/// What the user asked for.
#[derive(Debug, Default)]
pub struct Args {
    pub events: Vec<String>,
    /// Event groups (`{a,b}`): index ranges of `events`, each scheduled on the PMU as one.
    pub groups: Vec<std::ops::Range<usize>>,
    pub all_cpus: bool,
    pub pids: Vec<u32>,
    pub duration: Option<Duration>,
    pub csv: Option<String>,
    pub json: bool,
    pub output: Option<PathBuf>,
    pub help: bool,
    pub command: Vec<OsString>,
}

/// Parses the arguments after the program name; `Err` is a usage message.
pub fn parse(mut it: impl Iterator<Item = OsString>) -> Result<Args, String> {
    let mut a = Args::default();
    while let Some(arg) = it.next() {
        let Some(s) = arg.to_str().map(str::to_owned) else {
            if arg.to_string_lossy().starts_with('-') {
                return Err(format!("option {arg:?} is not valid UTF-8"));
            }
            a.command.push(arg);
            break;
        };
        if s == "--" {
            break;
        }
        if let Some(long) = s.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v.to_owned())),
                None => (long, None),
            };
            let mut value = |what: &str| -> Result<String, String> {
                match inline.clone() {
                    Some(v) => Ok(v),
                    None => next_value(&mut it, &format!("--{name}"), what),
                }
            };
            match name {
                "event" => add_events(&mut a, &value("EVENT")?)?,
                "all-cpus" => a.all_cpus = flag(name, &inline)?,
                "pid" => a.pids.extend(parse_pids(&value("PID")?)?),
                "duration" => a.duration = Some(parse_duration(&value("SECS")?)?),
                "field-separator" => a.csv = Some(value("SEP")?),
                "json" => a.json = flag(name, &inline)?,
                "output" => a.output = Some(PathBuf::from(value("FILE")?)),
                "help" => a.help = flag(name, &inline)?,
                _ => return Err(format!("unknown option '--{name}'")),
            }
            continue;
        }
        if s.len() > 1 && s.starts_with('-') {
            // A cluster of short options: flags first, then at most one option taking a value
            // (attached, `-x,`, or the next argument, `-x ,`).
            for (i, c) in s[1..].char_indices() {
                let rest = &s[1 + i + c.len_utf8()..];
                let mut value = |what: &str| -> Result<String, String> {
                    if rest.is_empty() {
                        next_value(&mut it, &format!("-{c}"), what)
                    } else {
                        Ok(rest.to_owned())
                    }
                };
                match c {
                    'a' => a.all_cpus = true,
                    'j' => a.json = true,
                    'h' => a.help = true,
                    'e' => {
                        add_events(&mut a, &value("EVENT")?)?;
                        break;
                    }
                    'p' => {
                        a.pids.extend(parse_pids(&value("PID")?)?);
                        break;
                    }
                    'x' => {
                        a.csv = Some(value("SEP")?);
                        break;
                    }
                    'o' => {
                        a.output = Some(PathBuf::from(value("FILE")?));
                        break;
                    }
                    _ => return Err(format!("unknown option '-{c}'")),
                }
            }
            continue;
        }
        a.command.push(arg);
        break;
    }
    a.command.extend(it);
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
    Ok(a)
}

fn next_value(
    it: &mut impl Iterator<Item = OsString>,
    opt: &str,
    what: &str,
) -> Result<String, String> {
    let v = it
        .next()
        .ok_or_else(|| format!("option '{opt}' needs a value ({what})"))?;
    v.into_string()
        .map_err(|v| format!("the value of '{opt}' is not valid UTF-8: {v:?}"))
}

fn flag(name: &str, inline: &Option<String>) -> Result<bool, String> {
    match inline {
        None => Ok(true),
        Some(_) => Err(format!("option '--{name}' takes no value")),
    }
}

fn parse_pids(s: &str) -> Result<Vec<u32>, String> {
    s.split(',')
        .map(|p| match p.trim().parse::<u32>() {
            Ok(n) if n > 0 && n <= i32::MAX as u32 => Ok(n),
            _ => Err(format!("'{p}' is not a process id (a positive integer)")),
        })
        .collect()
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    match s.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 && x < 1e9 => Ok(Duration::from_secs_f64(x)),
        _ => Err(format!(
            "'{s}' is not a duration in seconds (a positive number, e.g. 1.5)"
        )),
    }
}

/// Adds the events (and groups) of one `-e` value.
fn add_events(a: &mut Args, s: &str) -> Result<(), String> {
    let (events, groups) = split_events(s)?;
    let base = a.events.len();
    a.events.extend(events);
    a.groups
        .extend(groups.into_iter().map(|g| g.start + base..g.end + base));
    Ok(())
}

/// Splits `-e` text on the commas between events, not on those inside `pmu/terms/`; `{a,b}` makes a
/// group (returned as index ranges of the events).
pub fn split_events(s: &str) -> Result<(Vec<String>, Vec<std::ops::Range<usize>>), String> {
    let mut out = Vec::new();
    let mut groups = Vec::new();
    let mut cur = String::new();
    let mut in_pmu = false;
    let mut group_start = None;
    let mut closed = false;
    for c in s.chars() {
        if closed && c != ',' {
            return Err(format!(
                "modifiers after a group ('}}:u') are not supported by this example; put them on each \
                 event: {s:?}"
            ));
        }
        match c {
            '/' => {
                in_pmu = !in_pmu;
                cur.push(c);
            }
            '{' if !in_pmu => {
                if group_start.is_some() || !cur.trim().is_empty() {
                    return Err(format!("a '{{' inside an event or a group: {s:?}"));
                }
                group_start = Some(out.len());
            }
            '}' if !in_pmu => {
                let Some(start) = group_start.take() else {
                    return Err(format!("a '}}' without its '{{': {s:?}"));
                };
                out.push(std::mem::take(&mut cur));
                groups.push(start..out.len());
                closed = true;
            }
            ',' if !in_pmu => {
                if closed {
                    closed = false;
                } else {
                    out.push(std::mem::take(&mut cur));
                }
            }
            _ => cur.push(c),
        }
    }
    if group_start.is_some() {
        return Err(format!("a '{{' without its '}}': {s:?}"));
    }
    if !closed {
        out.push(cur);
    }
    let out: Vec<String> = out.into_iter().map(|e| e.trim().to_owned()).collect();
    if out.iter().any(String::is_empty) {
        return Err(format!("empty event name in {s:?}"));
    }
    Ok((out, groups))
}
