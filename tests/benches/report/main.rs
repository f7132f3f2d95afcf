//! The benchmark report: every comparison in one process, one table of ratios.
//!
//! `cargo bench -p tests` (root for the tracepoint rows). Sections: 1. counter read, 2. record parse,
//! 3. ring drain, 4. async wake-up, 5. rdpmc. Contenders of a section run interleaved (A B C …, then
//! rotated, for several rounds) so VM drift hits all alike; figures are medians with their spread
//! (min–max over rounds); ratios are to the section's baseline from the same run. Section 1 times the
//! thread's CPU time per read (preemption on a loaded machine is not counted).
//!
//! Arguments (after `--`): `--quick` (CI smoke: few rounds, small sizes, seconds), `--long` (more
//! rounds and all ring sizes); or `PERF_BENCH=quick|long`; `--only=count,rdpmc` runs only the sections
//! named (`count`, `parse`, `drain`, `async`, `rdpmc`; `scripts/hw-x86.sh` runs those two). A preflight
//! prints the environment first.
#![allow(clippy::field_reassign_with_default)] // options are set field by field, as in the docs

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

mod async_wakeup;
mod count;
mod drain;
mod parse;
mod rdpmc;

// ---------------------------------------------------------------- counting allocator

struct Counting;
static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract is forwarded as is.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: the caller's contract is forwarded as is.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract is forwarded as is.
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations made by this process so far (all threads).
pub fn allocs() -> u64 {
    ALLOCS.load(Ordering::Relaxed)
}

// ---------------------------------------------------------------- run length

/// How long a run: `Quick` for CI smoke, `Normal` (≤ ~3 min), `Long`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Len {
    Quick,
    Normal,
    Long,
}

impl Len {
    /// Picks `q`, `n` or `l`.
    pub fn pick<T>(self, q: T, n: T, l: T) -> T {
        match self {
            Len::Quick => q,
            Len::Normal => n,
            Len::Long => l,
        }
    }
}

fn run_len() -> Len {
    let env = std::env::var("PERF_BENCH").unwrap_or_default();
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--quick") || env == "quick" {
        Len::Quick
    } else if args.iter().any(|a| a == "--long") || env == "long" {
        Len::Long
    } else {
        Len::Normal
    }
}

/// A section of the report: runs its contenders and appends their rows.
type Section = fn(Len, &mut Vec<Row>);

/// The sections `--only=a,b` names, or `None` for all; exits with a usage error on a name not in `known`.
fn only_sections(known: &[&str]) -> Option<Vec<String>> {
    let arg = std::env::args().find_map(|a| a.strip_prefix("--only=").map(str::to_owned))?;
    let names: Vec<String> = arg.split(',').map(str::to_owned).collect();
    if let Some(bad) = names.iter().find(|n| !known.contains(&n.as_str())) {
        eprintln!("report: no section {bad:?} (--only= takes some of {known:?}, comma-separated)");
        std::process::exit(2);
    }
    Some(names)
}

// ---------------------------------------------------------------- shared helpers

/// Pins the calling thread to `cpu` (best effort: ignored when the CPU is not allowed).
pub fn pin(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: CPU_SET writes inside the set for cpu < CPU_SETSIZE.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is valid for its size; 0 is the calling thread.
    unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
}

/// Median of `v` (upper median for even lengths); NaN when empty.
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s.get(s.len() / 2).copied().unwrap_or(f64::NAN)
}

/// (min, max) of `v`.
pub fn spread(v: &[f64]) -> (f64, f64) {
    v.iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
            (a.min(x), b.max(x))
        })
}

/// Runs `n` contenders for `rounds` rounds, rotating the order each round; `f(i)` measures contender
/// `i` once and returns its figure. Returns the figures per contender.
pub fn interleave(n: usize, rounds: usize, mut f: impl FnMut(usize) -> f64) -> Vec<Vec<f64>> {
    let mut out = vec![Vec::with_capacity(rounds); n];
    for round in 0..rounds {
        for k in 0..n {
            let i = (k + round) % n;
            out[i].push(f(i));
        }
    }
    out
}

/// One row of the report.
#[derive(Debug)]
pub struct Row {
    /// The section, e.g. "1 counter read".
    pub section: String,
    /// Who.
    pub name: String,
    /// The figures (per round); the median is shown with min–max.
    pub samples: Vec<f64>,
    /// Unit of the figures.
    pub unit: &'static str,
    /// The baseline's median, for the ratio column; `None`: no ratio.
    pub base: Option<f64>,
    /// Free text: allocations, lost, targets.
    pub note: String,
}

/// Adds a row that says why a section did not run (and prints `skipped: …`).
pub fn skip_row(rows: &mut Vec<Row>, section: &str, why: &str) {
    println!("skipped: {section}: {why}");
    rows.push(Row {
        section: section.into(),
        name: "-".into(),
        samples: vec![],
        unit: "",
        base: None,
        note: format!("skipped: {why}"),
    });
}

/// Formats a figure with a sensible number of digits.
fn fmt(x: f64) -> String {
    if !x.is_finite() {
        "-".into()
    } else if x >= 1e6 {
        format!("{:.2}M", x / 1e6)
    } else if x >= 100.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

fn print_table(rows: &[Row]) {
    println!(
        "\n| section | contender | median | spread (min–max) | unit | ratio | note |\n|---|---|---:|---:|---|---:|---|"
    );
    for r in rows {
        let m = median(&r.samples);
        let (lo, hi) = spread(&r.samples);
        let ratio = match r.base {
            Some(b) if b.is_finite() && b != 0.0 && m.is_finite() => format!("{:.3}×", m / b),
            _ => "".into(),
        };
        let sp = if r.samples.len() > 1 {
            format!("{}–{}", fmt(lo), fmt(hi))
        } else {
            "".into()
        };
        println!(
            "| {} | {} | {} | {} | {} | {} | {} |",
            r.section,
            r.name,
            fmt(m),
            sp,
            r.unit,
            ratio,
            r.note
        );
    }
}

// ---------------------------------------------------------------- preflight

fn read_trim(path: &str) -> String {
    std::fs::read_to_string(path).map_or_else(|_| "?".into(), |s| s.trim().to_string())
}

fn preflight() {
    let len_kind = run_len();
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: writes one rlimit.
    unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut lim) };
    let memlock = if lim.rlim_cur == libc::RLIM_INFINITY {
        "unlimited".to_string()
    } else {
        format!("{} KiB", lim.rlim_cur / 1024)
    };
    let pmus: Vec<String> = std::fs::read_dir("/sys/bus/event_source/devices")
        .map(|d| {
            let mut v: Vec<String> = d
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            v.sort();
            v
        })
        .unwrap_or_default();
    let tracefs = if std::path::Path::new("/sys/kernel/tracing/events").exists() {
        "/sys/kernel/tracing"
    } else if std::path::Path::new("/sys/kernel/debug/tracing/events").exists() {
        "/sys/kernel/debug/tracing"
    } else {
        "absent"
    };
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "?".into());
    println!("# perf-event benchmark report ({len_kind:?} run)");
    println!(
        "kernel {} | {} | vCPUs {} | {model}",
        read_trim("/proc/sys/kernel/osrelease"),
        std::env::consts::ARCH,
        perf_event::config::online_cpus().map_or(0, |c| c.len())
    );
    println!(
        "uid {} | perf_event_paranoid {} | perf_event_mlock_kb {} | RLIMIT_MEMLOCK {memlock} | max_sample_rate {}",
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() },
        read_trim("/proc/sys/kernel/perf_event_paranoid"),
        read_trim("/proc/sys/kernel/perf_event_mlock_kb"),
        read_trim("/proc/sys/kernel/perf_event_max_sample_rate"),
    );
    println!("PMUs: {} | tracefs: {tracefs}", pmus.join(" "));
    println!("probe mapping: {}", rdpmc::probe_caps());
}

fn main() {
    let len = run_len();
    preflight();
    let started = std::time::Instant::now();
    pin(0);
    let mut rows = Vec::new();
    let sections: [(&str, Section); 5] = [
        ("count", count::run),
        ("parse", parse::run),
        ("drain", drain::run),
        ("async", async_wakeup::run),
        ("rdpmc", rdpmc::run),
    ];
    let only = only_sections(&sections.map(|(name, _)| name));
    for (name, run) in sections {
        if only.as_ref().is_none_or(|o| o.iter().any(|n| n == name)) {
            run(len, &mut rows);
        }
    }
    print_table(&rows);
    println!(
        "\ntotal {:.1} s; ratios are to each section's first row (the baseline) from this run",
        started.elapsed().as_secs_f64()
    );
}
