//! Counter read latency: this workspace's `Counter::stat()` and group read against raw `read(2)` on the
//! same fd, and against the `perf-event-open` and `perf-event2` crates reading the same software event.
//!
//! `cargo bench -p tests --bench count`. One process, contenders interleaved for 7 rounds (so VM drift
//! hits all alike), the measuring thread pinned to CPU 0; medians and minimums of per-round ns/read,
//! ratios to raw. A counting global allocator asserts that our reads do not allocate.

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use perf_event::config::{sibling, Cpu, Opts, Proc};
use perf_event::count::{Counter, CounterGroup};
use perf_event::event::sw::Software;

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

const ITERS: u64 = 200_000;
const ROUNDS: usize = 7;

fn pin_cpu0() {
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET writes inside it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(0, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

fn raw_read(fd: RawFd, buf: &mut [u8]) -> isize {
    // SAFETY: `buf` is a live, writable buffer of `buf.len()` bytes.
    unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) }
}

/// ns per call of `f`, and allocations during the run.
fn time(mut f: impl FnMut()) -> (f64, u64) {
    for _ in 0..1000 {
        f();
    }
    let a0 = ALLOCS.load(Ordering::Relaxed);
    let t = Instant::now();
    for _ in 0..ITERS {
        f();
    }
    let ns = t.elapsed().as_nanos() as f64 / ITERS as f64;
    (ns, ALLOCS.load(Ordering::Relaxed) - a0)
}

struct Row {
    name: &'static str,
    samples: Vec<f64>,
    allocs: u64,
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s[s.len() / 2]
}

fn report(title: &str, rows: &[Row]) {
    println!("\n{title}");
    println!(
        "{:<40} {:>10} {:>10} {:>8} {:>8}",
        "contender", "median ns", "min ns", "ratio", "allocs"
    );
    let base = median(&rows[0].samples);
    for r in rows {
        let m = median(&r.samples);
        let min = r.samples.iter().copied().fold(f64::INFINITY, f64::min);
        println!(
            "{:<40} {:>10.1} {:>10.1} {:>7.3}x {:>8}",
            r.name,
            m,
            min,
            m / base,
            r.allocs
        );
    }
}

fn main() {
    pin_cpu0();
    let uname = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let paranoid =
        std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid").unwrap_or_default();
    println!(
        "kernel {} | paranoid {} | cpus {} | {ITERS} reads x {ROUNDS} interleaved rounds, pinned to CPU 0",
        uname.trim(),
        paranoid.trim(),
        perf_event::config::online_cpus().map(|c| c.len()).unwrap_or(0)
    );

    let mut opts = Opts::default();
    opts.exclude.kernel = true;
    opts.exclude.hv = true;
    opts.enable = true;
    for (label, full) in [
        ("read_format = 0", false),
        ("read_format = ENA|RUN|ID", true),
    ] {
        let mut o = opts.clone();
        if full {
            o.stat_format.time_enabled = true;
            o.stat_format.time_running = true;
            o.stat_format.id = true;
        }
        single(label, &o);
    }
    group4(&opts);
}

fn single(label: &str, o: &Opts) {
    let ours = Counter::new(Software::PageFault, (Proc::CURRENT, Cpu::ALL), o).unwrap();
    let fd = ours.as_raw_fd();
    let size = if o.stat_format.id { 32 } else { 8 };

    let mut peo_opts = perf_event_open::config::Opts::default();
    peo_opts.exclude.kernel = true;
    peo_opts.exclude.hv = true;
    peo_opts.enable = true;
    peo_opts.stat_format.time_enabled = o.stat_format.time_enabled;
    peo_opts.stat_format.time_running = o.stat_format.time_running;
    peo_opts.stat_format.id = o.stat_format.id;
    let peo = perf_event_open::count::Counter::new(
        perf_event_open::event::sw::Software::PageFault,
        (
            perf_event_open::config::Proc::CURRENT,
            perf_event_open::config::Cpu::ALL,
        ),
        &peo_opts,
    )
    .unwrap();

    let mut b = perf_event2::Builder::new(perf_event2::events::Software::PAGE_FAULTS);
    b.observe_self()
        .any_cpu()
        .exclude_kernel(true)
        .exclude_hv(true)
        .enabled(true);
    if o.stat_format.id {
        b.read_format(
            perf_event2::ReadFormat::TOTAL_TIME_ENABLED
                | perf_event2::ReadFormat::TOTAL_TIME_RUNNING
                | perf_event2::ReadFormat::ID,
        );
    }
    let mut p2 = b.build().unwrap();

    let mut rows = vec![
        Row {
            name: "raw read(2), same fd",
            samples: vec![],
            allocs: 0,
        },
        Row {
            name: "perf-event Counter::stat()",
            samples: vec![],
            allocs: 0,
        },
        Row {
            name: "perf-event-open 0.5.1 Counter::stat()",
            samples: vec![],
            allocs: 0,
        },
        Row {
            name: "perf-event2 0.7.4 read_full()",
            samples: vec![],
            allocs: 0,
        },
        Row {
            name: "getppid (syscall floor)",
            samples: vec![],
            allocs: 0,
        },
    ];
    let mut buf = [0u8; 40];
    for round in 0..ROUNDS {
        // Rotate the order each round so that no contender always runs first or last.
        for k in 0..rows.len() {
            let i = (k + round) % rows.len();
            let (ns, a) = match i {
                0 => time(|| {
                    black_box(raw_read(fd, &mut buf[..size]));
                }),
                1 => time(|| {
                    black_box(ours.stat().unwrap());
                }),
                2 => time(|| {
                    black_box(peo.stat().unwrap());
                }),
                3 => time(|| {
                    black_box(p2.read_full().unwrap());
                }),
                _ => time(|| {
                    // SAFETY: getppid has no preconditions.
                    black_box(unsafe { libc::getppid() });
                }),
            };
            rows[i].samples.push(ns);
            rows[i].allocs += a;
        }
    }
    report(&format!("single page-faults counter, {label}"), &rows);
    assert_eq!(rows[1].allocs, 0, "Counter::stat() allocated");
}

fn group4(opts: &Opts) {
    let mut sib = sibling::Opts::default();
    sib.exclude.kernel = true;
    sib.exclude.hv = true;
    sib.enable = true;
    let mut o = opts.clone();
    o.stat_format.time_enabled = true;
    o.stat_format.time_running = true;
    let mut ours = CounterGroup::new(Software::PageFault, (Proc::CURRENT, Cpu::ALL), &o).unwrap();
    for ev in [
        Software::MinorPageFault,
        Software::Dummy,
        Software::MajorPageFault,
    ] {
        ours.add(ev, &sib).unwrap();
    }
    let fd = ours.leader().as_raw_fd();
    let size = 8 * (3 + 2 * 4);

    let mut peo_opts = perf_event_open::config::Opts::default();
    peo_opts.exclude.kernel = true;
    peo_opts.exclude.hv = true;
    peo_opts.enable = true;
    peo_opts.stat_format.siblings = true;
    peo_opts.stat_format.id = true;
    peo_opts.stat_format.time_enabled = true;
    peo_opts.stat_format.time_running = true;
    let leader = perf_event_open::count::Counter::new(
        perf_event_open::event::sw::Software::PageFault,
        (
            perf_event_open::config::Proc::CURRENT,
            perf_event_open::config::Cpu::ALL,
        ),
        &peo_opts,
    )
    .unwrap();
    let mut peo = perf_event_open::count::group::CounterGroup::from(leader);
    let mut peo_sib = perf_event_open::config::sibling::Opts::default();
    peo_sib.exclude.kernel = true;
    peo_sib.exclude.hv = true;
    peo_sib.enable = true;
    use perf_event_open::event::sw::Software as S;
    for ev in [S::MinorPageFault, S::Dummy, S::MajorPageFault] {
        peo.add(ev, &peo_sib).unwrap();
    }

    let mut g2 = perf_event2::Group::builder()
        .observe_self()
        .any_cpu()
        .read_format(
            perf_event2::ReadFormat::GROUP
                | perf_event2::ReadFormat::ID
                | perf_event2::ReadFormat::TOTAL_TIME_ENABLED
                | perf_event2::ReadFormat::TOTAL_TIME_RUNNING,
        )
        .build_group()
        .unwrap();
    let mut members = Vec::new();
    for ev in [
        perf_event2::events::Software::PAGE_FAULTS,
        perf_event2::events::Software::PAGE_FAULTS_MIN,
        perf_event2::events::Software::DUMMY,
        perf_event2::events::Software::PAGE_FAULTS_MAJ,
    ] {
        members.push(
            perf_event2::Builder::new(ev)
                .observe_self()
                .any_cpu()
                .exclude_kernel(true)
                .exclude_hv(true)
                .build_with_group(&mut g2)
                .unwrap(),
        );
    }
    g2.enable().unwrap();

    let mut rows = vec![
        Row {
            name: "raw group read(2), same fd",
            samples: vec![],
            allocs: 0,
        },
        Row {
            name: "perf-event CounterGroup::stat()",
            samples: vec![],
            allocs: 0,
        },
        Row {
            name: "perf-event-open 0.5.1 leader().stat()",
            samples: vec![],
            allocs: 0,
        },
        Row {
            name: "perf-event2 0.7.4 Group::read()",
            samples: vec![],
            allocs: 0,
        },
    ];
    let mut buf = vec![0u8; size];
    for round in 0..ROUNDS {
        for k in 0..rows.len() {
            let i = (k + round) % rows.len();
            let (ns, a) = match i {
                0 => time(|| {
                    black_box(raw_read(fd, &mut buf));
                }),
                1 => time(|| {
                    let s = ours.stat().unwrap();
                    black_box(s.count(3));
                }),
                2 => time(|| {
                    black_box(peo.leader().stat().unwrap());
                }),
                _ => time(|| {
                    black_box(g2.read().unwrap());
                }),
            };
            rows[i].samples.push(ns);
            rows[i].allocs += a;
        }
    }
    assert_eq!(raw_read(fd, &mut buf), size as isize, "raw group read size");
    report("group of 4 software events, GROUP|ID|ENA|RUN", &rows);
    assert_eq!(rows[1].allocs, 0, "CounterGroup::stat() allocated");
}
