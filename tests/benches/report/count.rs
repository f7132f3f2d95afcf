//! Section 1, counter read latency: our `Counter::stat()` and 4-event group read against raw `read(2)`
//! on the same fd, `perf-event-open`'s and `perf-event2`'s reads of the same software event, and the
//! `getppid` syscall floor. ns of the thread's CPU time (user + system) per read, so a machine loaded by
//! other work shows less in the figures than it does in wall time (preemption is not counted); the
//! counting allocator checks that our reads do not allocate.

use std::hint::black_box;
use std::os::fd::{AsRawFd, RawFd};

use perf_event::config::{sibling, Cpu, Opts, Proc};
use perf_event::count::{Counter, CounterGroup};
use perf_event::event::sw::Software;

use crate::{allocs, interleave, median, Len, Row};

fn raw_read(fd: RawFd, buf: &mut [u8]) -> isize {
    // SAFETY: `buf` is a live, writable buffer of `buf.len()` bytes.
    unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) }
}

/// ns of thread CPU time per call of `f` over `iters` calls, adding allocations to `a`.
fn time(iters: u64, a: &mut u64, mut f: impl FnMut()) -> f64 {
    for _ in 0..1000 {
        f();
    }
    let a0 = allocs();
    let t = tests::thread_cpu_time();
    for _ in 0..iters {
        f();
    }
    let ns = (tests::thread_cpu_time() - t).as_nanos() as f64 / iters as f64;
    *a += allocs() - a0;
    ns
}

fn push(rows: &mut Vec<Row>, section: &str, names: &[&str], samples: Vec<Vec<f64>>, al: &[u64]) {
    let base = median(&samples[0]);
    for (i, s) in samples.into_iter().enumerate() {
        rows.push(Row {
            section: section.into(),
            name: names[i].into(),
            samples: s,
            unit: "ns/read",
            base: Some(base),
            note: format!("{} allocs", al[i]),
        });
    }
}

/// Runs section 1.
pub fn run(len: Len, rows: &mut Vec<Row>) {
    // Many short rounds: a VM shared with other work stalls now and then, and a median over many
    // rounds shrugs that off better than a few long ones.
    let iters = len.pick(5_000, 20_000, 50_000);
    let rounds = len.pick(3, 41, 101);
    let mut opts = Opts::default();
    opts.exclude.kernel = true;
    opts.exclude.hv = true;
    opts.enable = true;
    for (label, full) in [("fmt 0", false), ("fmt ENA|RUN|ID", true)] {
        let mut o = opts.clone();
        if full {
            o.stat_format.time_enabled = true;
            o.stat_format.time_running = true;
            o.stat_format.id = true;
        }
        single(label, &o, iters, rounds, rows);
    }
    group4(&opts, iters, rounds, rows);
}

fn single(label: &str, o: &Opts, iters: u64, rounds: usize, rows: &mut Vec<Row>) {
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

    let names = [
        "raw read(2), same fd",
        "perf-event Counter::stat()",
        "perf-event-open 0.5.1 Counter::stat()",
        "perf-event2 0.7.4 read_full()",
        "getppid (syscall floor)",
    ];
    let mut al = [0u64; 5];
    let mut buf = [0u8; 40];
    let samples = interleave(names.len(), rounds, |i| {
        let a = &mut al[i];
        match i {
            0 => time(iters, a, || {
                black_box(raw_read(fd, &mut buf[..size]));
            }),
            1 => time(iters, a, || {
                black_box(ours.stat().unwrap());
            }),
            2 => time(iters, a, || {
                black_box(peo.stat().unwrap());
            }),
            3 => time(iters, a, || {
                black_box(p2.read_full().unwrap());
            }),
            _ => time(iters, a, || {
                // SAFETY: getppid has no preconditions.
                black_box(unsafe { libc::getppid() });
            }),
        }
    });
    assert_eq!(al[1], 0, "Counter::stat() allocated");
    push(
        rows,
        &format!("1 counter read, page-faults, {label}"),
        &names,
        samples,
        &al,
    );
}

fn group4(opts: &Opts, iters: u64, rounds: usize, rows: &mut Vec<Row>) {
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

    let names = [
        "raw group read(2), same fd",
        "perf-event CounterGroup::stat()",
        "perf-event-open 0.5.1 leader().stat()",
        "perf-event2 0.7.4 Group::read()",
    ];
    let mut al = [0u64; 4];
    let mut buf = vec![0u8; size];
    let samples = interleave(names.len(), rounds, |i| {
        let a = &mut al[i];
        match i {
            0 => time(iters, a, || {
                black_box(raw_read(fd, &mut buf));
            }),
            1 => time(iters, a, || {
                let s = ours.stat().unwrap();
                black_box(s.count(3));
            }),
            2 => time(iters, a, || {
                black_box(peo.leader().stat().unwrap());
            }),
            _ => time(iters, a, || {
                black_box(g2.read().unwrap());
            }),
        }
    });
    assert_eq!(raw_read(fd, &mut buf), size as isize, "raw group read size");
    assert_eq!(al[1], 0, "CounterGroup::stat() allocated");
    push(
        rows,
        "1 counter read, group of 4, GROUP|ID|ENA|RUN",
        &names,
        samples,
        &al,
    );
}
