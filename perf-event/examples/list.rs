//! `perf list`, with the safe API: every event this machine offers, printed as perf prints it.
//!
//! ```text
//! cargo run -p perf-event --example list -- [--all] [--details] [PATTERN...]
//! ```
//!
//! As `perf list`, hardware and cache events are shown only when they open here (a virtual
//! machine usually has none); `--all` shows them anyway. A PATTERN keeps the events whose name
//! contains it, or matches it as a wildcard (`sched:*wake*`). `--details` adds what each PMU
//! event stands for (its terms, scale and unit) and the description of generic events. Built with
//! perf-event's `pmu-events` feature, the CPU model's events from the kernel's JSON tables are
//! listed too, by topic (`cargo run -p perf-event --features pmu-events --example list`).
#![forbid(unsafe_code)]

use std::io::{self, Write};
use std::process::ExitCode;

use perf_event::config::{Cpu, Opts, Proc};
use perf_event::count::Counter;
use perf_event::event::spec::{Listed, ListedKind, Machine};

const USAGE: &str = "usage: list [--all] [--details] [PATTERN...]";

fn main() -> ExitCode {
    let (mut all, mut details, mut patterns) = (false, false, Vec::new());
    for a in std::env::args().skip(1) {
        match a.as_str() {
            "--all" => all = true,
            "-v" | "--details" => details = true,
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            s if s.starts_with('-') => {
                eprintln!("list: unknown option '{s}'\n{USAGE}");
                return ExitCode::from(2);
            }
            s => patterns.push(s.to_owned()),
        }
    }
    let machine = Machine::current();
    let events = machine.list();
    let mut out = io::stdout().lock();
    let shown = |l: &Listed| {
        patterns.is_empty()
            || patterns
                .iter()
                .any(|p| l.name.contains(p.as_str()) || wildcard(p, &l.name))
    };
    let mut descriptors_done = false;
    let mut topic: Option<&str> = None;
    for l in &events {
        if l.kind == ListedKind::Tracepoint && !descriptors_done {
            descriptors_done = true;
            print_descriptors(&mut out, &patterns);
        }
        if !shown(l) {
            continue;
        }
        if !all && matches!(l.kind, ListedKind::Hardware | ListedKind::Cache) && !opens(&machine, l)
        {
            continue;
        }
        if l.kind == ListedKind::Model {
            // As perf: under the table's topic, the description on the next line.
            if l.deprecated && !all {
                continue;
            }
            if topic != l.topic.as_deref() {
                topic = l.topic.as_deref();
                let _ = writeln!(out, "\n{}:", topic.unwrap_or("other"));
            }
            let _ = writeln!(out, "  {}", l.name);
            if let Some(d) = &l.description {
                let _ = writeln!(out, "       [{d}]");
            }
            if details {
                if let Some(t) = &l.terms {
                    let pmu = l.pmu.as_deref().unwrap_or("cpu");
                    let _ = writeln!(out, "       [{pmu}/{t}/]");
                }
            }
            continue;
        }
        let _ = writeln!(out, "{}", l.line());
        if details {
            let mut d = Vec::new();
            if let Some(t) = &l.terms {
                d.push(format!("{}/{t}/", l.pmu.as_deref().unwrap_or("")));
            }
            if let Some(s) = l.scale {
                d.push(format!("scale {s}"));
            }
            if let Some(u) = &l.unit {
                d.push(format!("unit {u}"));
            }
            if let Some(desc) = &l.description {
                d.push(desc.clone());
            }
            if !d.is_empty() {
                let _ = writeln!(out, "       [{}]", d.join(", "));
            }
        }
    }
    if !descriptors_done {
        print_descriptors(&mut out, &patterns);
    }
    ExitCode::SUCCESS
}

/// perf's reminders of the forms that are not names.
fn print_descriptors(out: &mut impl Write, patterns: &[String]) {
    if !patterns.is_empty() {
        return;
    }
    for (form, kind) in [
        ("rNNN", "Raw hardware event descriptor"),
        (
            "cpu/t1=v1[,t2=v2,t3 ...]/modifier",
            "Raw hardware event descriptor",
        ),
        ("mem:<addr>[/len][:access]", "Hardware breakpoint"),
    ] {
        let _ = writeln!(out, "  {form:<50} [{kind}]");
    }
}

/// Whether a generic hardware or cache event opens here (user space only, this thread), as
/// `perf list` decides what to show.
fn opens(machine: &Machine, l: &Listed) -> bool {
    let Ok(list) = machine.parse(&l.name) else {
        return false;
    };
    let mut opts = Opts::default();
    opts.exclude.kernel = true;
    opts.exclude.hv = true;
    list.iter()
        .any(|e| Counter::new(e.event(), (Proc::CURRENT, Cpu::ALL), &opts).is_ok())
}

/// `*` and `?` wildcards over the whole name.
fn wildcard(p: &str, name: &str) -> bool {
    fn go(p: &[u8], s: &[u8]) -> bool {
        match (p.first(), s.first()) {
            (None, None) => true,
            (Some(b'*'), _) => go(&p[1..], s) || (!s.is_empty() && go(p, &s[1..])),
            (Some(b'?'), Some(_)) => go(&p[1..], &s[1..]),
            (Some(a), Some(b)) if a == b => go(&p[1..], &s[1..]),
            _ => false,
        }
    }
    (p.contains('*') || p.contains('?')) && go(p.as_bytes(), name.as_bytes())
}
