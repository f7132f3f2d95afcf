//! Command-line options of the record example (parsed with lexopt through `common/args.rs`).

use std::ffi::OsString;
use std::path::PathBuf;

use crate::cli::{self, Arg, Parser};

pub const USAGE: &str = "\
usage: record [OPTIONS] [--] CMD [ARGS...]
       record [OPTIONS] -a | -p PID[,PID...]

Samples CMD (from its exec to its exit, children and threads included), every CPU (-a) or running
processes (-p) and writes the samples, with the side-band records perf needs to name what was
sampled (comm, mmap2, fork/exit), to a perf.data file that `perf report` and `perf script` read.

options:
  -e, --event EVENT[,...]   events to sample in perf's grammar, repeatable: cpu-clock, cycles:u,
                            cpu/event=0x3c/, sched:sched_switch, {cpu-clock,page-faults}:S ...
                            (default: cycles, or cpu-clock where there is no hardware PMU); a
                            hybrid CPU's cycles is opened once per core PMU, each on its CPUs
  -F, --freq HZ             sample at this average frequency (default: 4000)
  -c, --count N             sample every N events instead (a period)
  -g, --call-graph          record call chains (frame pointers)
  -o, --output FILE         the file to write (default: perf.data; an old one becomes perf.data.old)
  -a, --all-cpus            system-wide: every task on every online CPU
  -p, --pid PID[,PID...]    attach to running processes (all their threads) until they exit or Ctrl-C
  -m, --mmap-pages PAGES    data pages per CPU ring, a power of two (default: 128)
  -h, --help                this help

exit status: CMD's own (0 without CMD); 1 when recording fails; 2 for bad arguments.
environment: PERF_EVENT_PMU_ROOT=DIR reads the PMUs from DIR instead of
/sys/bus/event_source/devices (the tests stand in for a hybrid CPU so).";

/// How often to sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rate {
    Freq(u64),
    Period(u64),
}

/// What the user asked for.
#[derive(Debug)]
pub struct Args {
    /// The `-e` texts, in order (empty: the default event).
    pub events: Vec<String>,
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
            events: Vec::new(),
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
pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Args, String> {
    let mut a = Args::default();
    let (mut freq, mut count) = (None, None);
    let mut p = Parser::from_args(args);
    while let Some(arg) = p.next().map_err(cli::usage)? {
        match arg {
            Arg::Short('e') | Arg::Long("event") => a.events.push(cli::value(&mut p, "EVENT")?),
            Arg::Short('F') | Arg::Long("freq") => {
                freq = Some(positive(&cli::value(&mut p, "HZ")?, "-F")?)
            }
            Arg::Short('c') | Arg::Long("count") => {
                let n = positive(&cli::value(&mut p, "N")?, "-c")?;
                if n >> 63 != 0 {
                    return Err(format!("-c {n}: a sample period must be below 2^63"));
                }
                count = Some(n)
            }
            Arg::Short('g') => a.call_graph = true,
            // `--call-graph=fp` is what -g means; other unwinders are not offered.
            Arg::Long("call-graph") => match p.optional_value() {
                None => a.call_graph = true,
                Some(v) if v == "fp" => a.call_graph = true,
                Some(other) => {
                    return Err(format!(
                        "--call-graph={} is not supported: only frame pointers (fp)",
                        other.to_string_lossy()
                    ))
                }
            },
            Arg::Short('o') | Arg::Long("output") => {
                a.output = PathBuf::from(cli::value(&mut p, "FILE")?)
            }
            Arg::Short('a') | Arg::Long("all-cpus") => a.all_cpus = true,
            Arg::Short('p') | Arg::Long("pid") => {
                a.pids.extend(cli::pids(&cli::value(&mut p, "PID")?)?)
            }
            Arg::Short('m') | Arg::Long("mmap-pages") => {
                a.pages_exp = pages(&cli::value(&mut p, "PAGES")?)?
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

/// A positive integer, the value of `opt`.
fn positive(s: &str, opt: &str) -> Result<u64, String> {
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
