//! Command-line options of the record example, parsed by hand (no argument-parsing crate).

use std::ffi::OsString;
use std::path::PathBuf;

pub const USAGE: &str = "\
usage: record [OPTIONS] [--] CMD [ARGS...]
       record [OPTIONS] -a | -p PID[,PID...]

Samples CMD (from its exec to its exit, children and threads included), every CPU (-a) or running
processes (-p) and writes the samples, with the side-band records perf needs to name what was
sampled (comm, mmap2, fork/exit), to a perf.data file that `perf report` and `perf script` read.

options:
  -e, --event EVENT         the event to sample, by perf-list name: cpu-clock, cycles:u, page-faults
                            ... (default: cycles, or cpu-clock where there is no hardware PMU)
  -F, --freq HZ             sample at this average frequency (default: 4000)
  -c, --count N             sample every N events instead (a period)
  -g, --call-graph          record call chains (frame pointers)
  -o, --output FILE         the file to write (default: perf.data; an old one becomes perf.data.old)
  -a, --all-cpus            system-wide: every task on every online CPU
  -p, --pid PID[,PID...]    attach to running processes (all their threads) until they exit or Ctrl-C
  -m, --mmap-pages PAGES    data pages per CPU ring, a power of two (default: 128)
  -h, --help                this help

exit status: CMD's own (0 without CMD); 1 when recording fails; 2 for bad arguments.";

/// How often to sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rate {
    Freq(u64),
    Period(u64),
}

/// What the user asked for.
#[derive(Debug)]
pub struct Args {
    pub event: Option<String>,
    pub rate: Rate,
    pub call_graph: bool,
    pub output: PathBuf,
    pub all_cpus: bool,
    pub pids: Vec<u32>,
    /// log2 of the data pages per ring.
    pub pages_exp: u8,
    pub help: bool,
    pub command: Vec<OsString>,
}

impl Default for Args {
    fn default() -> Self {
        Args {
            event: None,
            rate: Rate::Freq(4000),
            call_graph: false,
            output: PathBuf::from("perf.data"),
            all_cpus: false,
            pids: Vec::new(),
            pages_exp: 7,
            help: false,
            command: Vec::new(),
        }
    }
}

/// Parses the arguments after the program name; `Err` is a usage message.
pub fn parse(mut it: impl Iterator<Item = OsString>) -> Result<Args, String> {
    let mut a = Args::default();
    let (mut freq, mut count) = (None, None);
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
                "event" => set_event(&mut a, value("EVENT")?)?,
                "freq" => freq = Some(number(&value("HZ")?, "--freq")?),
                "count" => count = Some(number(&value("N")?, "--count")?),
                "call-graph" => {
                    // `--call-graph fp` is what -g means; other unwinders are not offered.
                    match inline.as_deref() {
                        None | Some("fp") => a.call_graph = true,
                        Some(other) => {
                            return Err(format!(
                                "--call-graph={other} is not supported: only frame pointers (fp)"
                            ))
                        }
                    }
                }
                "output" => a.output = PathBuf::from(value("FILE")?),
                "all-cpus" => a.all_cpus = flag(name, &inline)?,
                "pid" => a.pids.extend(parse_pids(&value("PID")?)?),
                "mmap-pages" => a.pages_exp = pages(&value("PAGES")?)?,
                "help" => a.help = flag(name, &inline)?,
                _ => return Err(format!("unknown option '--{name}'")),
            }
            continue;
        }
        if s.len() > 1 && s.starts_with('-') {
            // A cluster of short flags, then at most one option taking a value (attached, `-F99`,
            // or the next argument, `-F 99`).
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
                    'g' => a.call_graph = true,
                    'a' => a.all_cpus = true,
                    'h' => a.help = true,
                    'e' => {
                        set_event(&mut a, value("EVENT")?)?;
                        break;
                    }
                    'F' => {
                        freq = Some(number(&value("HZ")?, "-F")?);
                        break;
                    }
                    'c' => {
                        count = Some(number(&value("N")?, "-c")?);
                        break;
                    }
                    'o' => {
                        a.output = PathBuf::from(value("FILE")?);
                        break;
                    }
                    'p' => {
                        a.pids.extend(parse_pids(&value("PID")?)?);
                        break;
                    }
                    'm' => {
                        a.pages_exp = pages(&value("PAGES")?)?;
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
    a.rate = match (freq, count) {
        (Some(_), Some(_)) => return Err("-F and -c cannot be combined".into()),
        (Some(f), None) => Rate::Freq(f),
        (None, Some(c)) => Rate::Period(c),
        (None, None) => a.rate,
    };
    if a.all_cpus && !a.pids.is_empty() {
        return Err("-a and -p cannot be combined".into());
    }
    if !a.pids.is_empty() && !a.command.is_empty() {
        return Err("-p and a command cannot be combined".into());
    }
    if a.command.is_empty() && !a.all_cpus && a.pids.is_empty() {
        return Err("nothing to record: give a command, -a or -p PID".into());
    }
    if a.output.as_os_str().is_empty() {
        return Err("-o needs a file name".into());
    }
    Ok(a)
}

fn set_event(a: &mut Args, e: String) -> Result<(), String> {
    if a.event.is_some() {
        return Err("only one event can be recorded by this example (-e given twice)".into());
    }
    let trimmed = e.trim();
    if trimmed.is_empty() {
        return Err("-e needs an event name".into());
    }
    // A comma outside `pmu/terms/` separates events.
    let mut in_pmu = false;
    for ch in trimmed.chars() {
        match ch {
            '/' => in_pmu = !in_pmu,
            ',' if !in_pmu => {
                return Err(format!(
                    "only one event can be recorded by this example, got the list {trimmed:?}"
                ))
            }
            '{' | '}' => return Err(format!("event groups are not supported: {trimmed:?}")),
            _ => {}
        }
    }
    a.event = Some(trimmed.to_owned());
    Ok(())
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

fn number(s: &str, opt: &str) -> Result<u64, String> {
    match s.trim().parse::<u64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!(
            "the value of '{opt}' must be a positive integer, not '{s}'"
        )),
    }
}

fn pages(s: &str) -> Result<u8, String> {
    match s.trim().parse::<u64>() {
        Ok(n) if n.is_power_of_two() && n <= 1 << 20 => Ok(n.trailing_zeros() as u8),
        _ => Err(format!(
            "--mmap-pages must be a power of two from 1 to 1048576, not '{s}'"
        )),
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
