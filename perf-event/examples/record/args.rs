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
  -g                        record call chains by frame pointers (--call-graph fp); warns
                            when most user chains are 1-2 frames deep (no frame pointers)
      --call-graph MODE     record call chains, as perf: fp (frame pointers, walked by the
                            kernel), dwarf[,SIZE] (the user registers and SIZE bytes of user
                            stack, default 8192, at most 65528, for perf report to unwind: for
                            code built without frame pointers, such as Rust release builds), or
                            lbr (the CPU's last-branch records: Intel hardware PMUs only)
  -o, --output FILE         the file to write (default: perf.data; an old one becomes perf.data.old)
  -a, --all-cpus            system-wide: every task on every online CPU
  -p, --pid PID[,PID...]    attach to running processes (all their threads) until they exit or Ctrl-C
  -m, --mmap-pages PAGES    data pages per CPU ring, a power of two (default: 128)
  -h, --help                this help

exit status: CMD's own (0 without CMD); 1 when recording fails; 2 for bad arguments.
environment: PERF_EVENT_PMU_ROOT=DIR reads the PMUs from DIR instead of
/sys/bus/event_source/devices (the tests stand in for a hybrid CPU so).";

/// How call chains are recorded (`-g`, `--call-graph`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallGraph {
    /// Frame pointers, walked by the kernel.
    Fp,
    /// User registers and this many bytes of user stack, unwound offline with DWARF CFI.
    Dwarf(u32),
    /// The last-branch-record call stack.
    Lbr,
}

/// perf's default user stack copy for `dwarf`.
const DWARF_DEFAULT: u32 = 8192;
/// The kernel's largest `sample_stack_user` (below 65535, a multiple of 8).
const DWARF_MAX: u32 = 65528;

/// `fp`, `dwarf`, `dwarf,SIZE` or `lbr`, as perf takes them (`SIZE` rounded up to a multiple of 8).
pub fn call_graph(s: &str) -> Result<CallGraph, String> {
    let (mode, size) = match s.split_once(',') {
        Some((m, size)) => (m, Some(size)),
        None => (s, None),
    };
    match (mode, size) {
        ("fp", None) => Ok(CallGraph::Fp),
        ("lbr", None) => Ok(CallGraph::Lbr),
        ("dwarf", None) => Ok(CallGraph::Dwarf(DWARF_DEFAULT)),
        ("dwarf", Some(size)) => match size.trim().parse::<u32>() {
            Ok(n) if n > 0 && n.div_ceil(8) * 8 <= DWARF_MAX => {
                Ok(CallGraph::Dwarf(n.div_ceil(8) * 8))
            }
            _ => Err(format!(
                "--call-graph dwarf,{size}: the stack size must be from 8 to {DWARF_MAX} bytes"
            )),
        },
        ("fp" | "lbr", Some(_)) => Err(format!(
            "--call-graph {s}: only dwarf takes a size (dwarf,SIZE)"
        )),
        _ => Err(format!(
            "--call-graph {s}: the mode is fp, dwarf[,SIZE] or lbr"
        )),
    }
}

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
    pub call_graph: Option<CallGraph>,
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
            call_graph: None,
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
            Arg::Short('g') => a.call_graph = Some(CallGraph::Fp),
            // `--call-graph dwarf` and `--call-graph=dwarf,16384`: the mode is required, as in
            // perf (so that `--call-graph dwarf CMD` never runs a program called dwarf).
            Arg::Long("call-graph") => {
                a.call_graph = Some(call_graph(&cli::value(&mut p, "MODE")?)?)
            }
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
