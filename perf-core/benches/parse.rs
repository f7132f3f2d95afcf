//! Record parse throughput: a bare header walk (the ceiling) beside the lazy sample view and the full borrowed
//! typed parse, all folding the same fields into a checksum (which must agree), on the same
//! 512 KiB of records captured from the running kernel at start-up (design: perf-anchors.md §4b).
//!
//! `cargo bench -p perf-core --bench parse [-- WORD]` (WORD: run only the contenders whose name contains it)
//!
//! The fast walk is `next_record + sample_view` (or `walk + sample_view`: with a one-pointer
//! `perf_core::Error` the iterator's item costs no more than [`Records::next_record`]'s):
//! [`RawRecord::sample_view`](perf_core::RawRecord::sample_view) returns an `Option`;
//! [`RawRecord::view`](perf_core::RawRecord::view) returns a small `Result<RecordView, Error>` (88 bytes: an
//! other record is an `OtherView`, not a parsed `Record`), which also stays in registers.
//!
//! The capture: a `syscalls:sys_enter_getppid` tracepoint and a `page-faults` event, both with
//! `IP|TID|TIME|ID|CPU|PERIOD|RAW|CALLCHAIN` and `sample_id_all`, `mmap2/comm/task`, sharing one ring
//! (`SET_OUTPUT`), drained until 512 KiB; a pass with a full ring adds LOST records. Without the privilege
//! or tracefs it falls back to the checked-in fixtures (say so in its output).

use std::hint::black_box;
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use perf_core::record::*;
use perf_core::{Chunk, ParseConfig, ParseFields, Records};
use perf_sys::*;

#[path = "../examples/support/ring.rs"]
#[allow(dead_code)]
mod ring;

const TARGET: usize = 512 * 1024;

fn capture() -> std::io::Result<(Vec<u8>, ParseConfig)> {
    let tp: u64 =
        std::fs::read_to_string("/sys/kernel/tracing/events/syscalls/sys_enter_getppid/id")?
            .trim()
            .parse()
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    let mut a = perf_event_attr {
        size: std::mem::size_of::<perf_event_attr>() as u32,
        type_: PERF_TYPE_TRACEPOINT,
        config: tp,
        ..Default::default()
    };
    a.__bindgen_anon_1.sample_period = 1;
    a.sample_type = (PERF_SAMPLE_IP
        | PERF_SAMPLE_TID
        | PERF_SAMPLE_TIME
        | PERF_SAMPLE_ID
        | PERF_SAMPLE_CPU
        | PERF_SAMPLE_PERIOD
        | PERF_SAMPLE_RAW
        | PERF_SAMPLE_CALLCHAIN) as u64;
    a.set_sample_id_all(1);
    a.set_mmap2(1);
    a.set_comm(1);
    a.set_task(1);
    a.set_disabled(1);
    let flags = PERF_FLAG_FD_CLOEXEC as u64;
    let tp_fd = perf_event_open(&a, 0, -1, None, flags)?;
    let mut pf = a;
    pf.type_ = PERF_TYPE_SOFTWARE;
    pf.config = PERF_COUNT_SW_PAGE_FAULTS as u64;
    pf.set_mmap2(0);
    pf.set_comm(0);
    pf.set_task(0);
    let pf_fd = perf_event_open(&pf, 0, -1, None, flags)?;
    let ring = ring::Ring::map(tp_fd.try_clone()?, 8)?; // 32 KiB: small enough to lose some records
    ioctl::set_output(pf_fd.as_fd(), Some(tp_fd.as_fd()))?;
    ioctl::enable(tp_fd.as_fd())?;
    ioctl::enable(pf_fd.as_fd())?;
    let mut out = Vec::with_capacity(TARGET + 65536);
    let mut round = 0u32;
    while out.len() < TARGET {
        for _ in 0..200 {
            // SAFETY: getppid has no preconditions.
            unsafe { libc::getppid() };
        }
        // Page faults with callchains: map, touch and unmap a few pages.
        let v: Vec<u8> = vec![1; 4 * 4096 + round as usize % 4096];
        black_box(&v);
        drop(v);
        // Side-band: a COMM record now and then.
        if round & 3 == 0 {
            let name = if round & 7 == 0 {
                c"parse-bench-a"
            } else {
                c"parse-bench-b"
            };
            // SAFETY: PR_SET_NAME with a NUL-terminated string.
            unsafe { libc::prctl(libc::PR_SET_NAME, name.as_ptr()) };
        }
        // Now and then let the ring overflow, so LOST records appear.
        if round % 8 == 7 {
            for _ in 0..2000 {
                // SAFETY: as above.
                unsafe { libc::getppid() };
            }
        }
        ring.drain(&mut out);
        round += 1;
    }
    ioctl::disable(tp_fd.as_fd())?;
    ioctl::disable(pf_fd.as_fd())?;
    // Whole records only, up to 512 KiB.
    let mut end = 0;
    for r in Records::new(Chunk::contiguous(&out)) {
        let Ok(r) = r else { break };
        if end + r.size() > TARGET {
            break;
        }
        end += r.size();
    }
    out.truncate(end);
    Ok((out, ParseConfig::from_attr(&a)))
}

fn fallback() -> (Vec<u8>, ParseConfig) {
    let bin = include_bytes!("../tests/fixtures/tracepoint.bin");
    let cfg = ParseConfig::new(ParseFields {
        sample_type: (PERF_SAMPLE_IP
            | PERF_SAMPLE_TID
            | PERF_SAMPLE_TIME
            | PERF_SAMPLE_ID
            | PERF_SAMPLE_CPU
            | PERF_SAMPLE_PERIOD
            | PERF_SAMPLE_RAW
            | PERF_SAMPLE_CALLCHAIN) as u64,
        sample_id_all: true,
        ..Default::default()
    });
    let mut out = Vec::new();
    while out.len() + bin.len() <= TARGET {
        out.extend_from_slice(bin);
    }
    (out, cfg)
}

/// The ceiling: read each header and step by its size.
fn header_walk(bytes: &[u8]) -> (usize, u64) {
    let (mut at, mut n, mut sum) = (0usize, 0usize, 0u64);
    while let Some(h) = bytes.get(at..at + 8) {
        let size = u16::from_ne_bytes([h[6], h[7]]) as usize;
        if size < 8 {
            break;
        }
        sum = sum.wrapping_add(h[0] as u64);
        at += size;
        n += 1;
    }
    (n, sum)
}

/// Walk + borrowed typed parse (the full [`Sample`]), folding the fields a consumer reads.
fn typed_parse(bytes: &[u8], cfg: &ParseConfig) -> (usize, u64) {
    let (mut n, mut sum) = (0usize, 0u64);
    for raw in Records::new(Chunk::contiguous(bytes)) {
        let Ok(raw) = raw else { break };
        n += 1;
        sum = fold_record(sum, raw.parse(cfg));
    }
    (n, sum)
}

/// Walk + lazy sample view, folding the same fields as [`typed_parse`] (so the checksums match).
fn view_parse(bytes: &[u8], cfg: &ParseConfig) -> (usize, u64) {
    let (mut n, mut sum) = (0usize, 0u64);
    for raw in Records::new(Chunk::contiguous(bytes)) {
        let Ok(raw) = raw else { break };
        n += 1;
        sum = fold_view(sum, raw.view(cfg));
    }
    (n, sum)
}

/// [`view_parse`] walking with [`Records::next_record`] instead of the iterator.
fn view_parse_next_record(bytes: &[u8], cfg: &ParseConfig) -> (usize, u64) {
    let (mut n, mut sum) = (0usize, 0u64);
    let mut records = Records::new(Chunk::contiguous(bytes));
    while let Some(raw) = records.next_record() {
        n += 1;
        sum = fold_view(sum, raw.view(cfg));
    }
    (n, sum)
}

/// The fast path: [`Records::next_record`] + [`RawRecord::sample_view`](perf_core::RawRecord::sample_view),
/// with [`RawRecord::view`](perf_core::RawRecord::view) for what is not a valid sample (other records, errors).
fn sample_view_next_record(bytes: &[u8], cfg: &ParseConfig) -> (usize, u64) {
    let (mut n, mut sum) = (0usize, 0u64);
    let mut records = Records::new(Chunk::contiguous(bytes));
    while let Some(raw) = records.next_record() {
        n += 1;
        sum = match raw.sample_view(cfg) {
            Some(s) => fold_sample_view(sum, &s),
            None => fold_view(sum, raw.view(cfg)),
        };
    }
    (n, sum)
}

/// [`sample_view_next_record`] through the iterator.
fn sample_view_iter(bytes: &[u8], cfg: &ParseConfig) -> (usize, u64) {
    let (mut n, mut sum) = (0usize, 0u64);
    for raw in Records::new(Chunk::contiguous(bytes)) {
        let Ok(raw) = raw else { break };
        n += 1;
        sum = match raw.sample_view(cfg) {
            Some(s) => fold_sample_view(sum, &s),
            None => fold_view(sum, raw.view(cfg)),
        };
    }
    (n, sum)
}

/// [`typed_parse`] walking with [`Records::next_record`].
fn typed_parse_next_record(bytes: &[u8], cfg: &ParseConfig) -> (usize, u64) {
    let (mut n, mut sum) = (0usize, 0u64);
    let mut records = Records::new(Chunk::contiguous(bytes));
    while let Some(raw) = records.next_record() {
        n += 1;
        sum = fold_record(sum, raw.parse(cfg));
    }
    (n, sum)
}

#[inline(always)]
fn fold_sample_view(sum: u64, s: &SampleView<'_>) -> u64 {
    fold_sample(
        sum,
        [s.ip(), s.time(), s.period(), s.id(), s.cpu().map(u64::from)],
        s.thread(),
        s.raw().map(|r| r.len()),
        s.callchain().map(|c| c.len()),
    )
}

#[inline(always)]
fn fold_view(sum: u64, view: Result<RecordView<'_>, perf_core::Error>) -> u64 {
    match view {
        Ok(RecordView::Sample(s)) => fold_sample_view(sum, &s),
        Ok(RecordView::Other(other)) => fold_other(sum, &other.record()),
        Ok(_) => sum,
        Err(_) => sum.wrapping_add(1),
    }
}

#[inline(always)]
fn fold_record(sum: u64, rec: Result<Record<'_>, perf_core::Error>) -> u64 {
    match rec {
        Ok(Record::Sample(s)) => fold_sample(
            sum,
            [s.ip(), s.time(), s.period(), s.id(), s.cpu().map(u64::from)],
            s.thread(),
            s.raw().map(|r| r.len()),
            s.callchain().map(|c| c.len()),
        ),
        Ok(other) => fold_other(sum, &other),
        Err(_) => sum.wrapping_add(1),
    }
}

#[inline(always)]
fn fold_sample(
    sum: u64,
    words: [Option<u64>; 5],
    thread: Option<ThreadId>,
    raw_len: Option<usize>,
    callchain_len: Option<usize>,
) -> u64 {
    let mut sum = words
        .iter()
        .fold(sum, |a, w| a.rotate_left(5) ^ w.unwrap_or(0));
    sum = sum.wrapping_add(thread.map_or(0, |t| (t.pid as u64) << 32 | t.tid as u64));
    sum = sum.wrapping_add(raw_len.unwrap_or(0) as u64);
    sum.wrapping_add(callchain_len.unwrap_or(0) as u64)
}

#[inline(always)]
fn fold_other(sum: u64, rec: &Record<'_>) -> u64 {
    match rec {
        Record::Lost(l) => sum.wrapping_add(l.lost),
        other => sum.wrapping_add(other.record_type() as u64),
    }
}

/// Walk + the cheap accessors only (time and id), no typed parse.
fn cheap_fields(bytes: &[u8], cfg: &ParseConfig) -> (usize, u64) {
    let (mut n, mut sum) = (0usize, 0u64);
    for raw in Records::new(Chunk::contiguous(bytes)) {
        let Ok(raw) = raw else { break };
        n += 1;
        sum = sum
            .wrapping_add(raw.time(cfg).unwrap_or(0))
            .wrapping_add(raw.id(cfg).unwrap_or(0));
    }
    (n, sum)
}

/// The wall clock, or this thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`).
enum Clock {
    Wall(Instant),
    Cpu(Duration),
}

impl Clock {
    fn now(cpu: bool) -> Self {
        if cpu {
            Clock::Cpu(thread_cpu_time())
        } else {
            Clock::Wall(Instant::now())
        }
    }

    fn elapsed(&self) -> Duration {
        match self {
            Clock::Cpu(start) => thread_cpu_time().saturating_sub(*start),
            Clock::Wall(start) => start.elapsed(),
        }
    }
}

fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_THREAD_CPUTIME_ID exists on every Linux we run on.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn main() {
    // PARSE_BENCH_INPUT=FILE parses the buffer a run saved with PARSE_BENCH_SAVE=FILE (the layout's six
    // fields, then the records), so that A/B runs of two builds time the same records.
    let saved = std::env::var_os("PARSE_BENCH_INPUT").map(|path| {
        let file = std::fs::read(path).expect("PARSE_BENCH_INPUT");
        let word = |i: usize| u64::from_ne_bytes(file[i * 8..i * 8 + 8].try_into().unwrap());
        let fields = ParseFields {
            sample_type: word(0),
            read_format: word(1),
            branch_sample_type: word(2),
            sample_regs_user: word(3),
            sample_regs_intr: word(4),
            sample_id_all: file[40] != 0,
            ..ParseFields::default()
        };
        (file[41..].to_vec(), ParseConfig::new(fields))
    });
    let captured = match saved {
        Some((b, c)) => Ok((b, c)),
        None => capture(),
    };
    let (bytes, cfg, source) = match captured {
        Ok((b, c)) if !b.is_empty() => (b, c, "captured at start-up"),
        Ok(_) => {
            let (b, c) = fallback();
            (b, c, "fixtures (the capture was empty)")
        }
        Err(e) => {
            let (b, c) = fallback();
            eprintln!("capture failed ({e}); using the fixtures");
            (b, c, "fixtures")
        }
    };
    if let Some(path) = std::env::var_os("PARSE_BENCH_SAVE") {
        let f = cfg.fields();
        let mut out = Vec::new();
        for w in [
            f.sample_type,
            f.read_format,
            f.branch_sample_type,
            f.sample_regs_user,
            f.sample_regs_intr,
        ] {
            out.extend_from_slice(&w.to_ne_bytes());
        }
        out.push(f.sample_id_all as u8);
        out.extend_from_slice(&bytes);
        std::fs::write(path, out).expect("PARSE_BENCH_SAVE");
    }
    let bytes = &bytes[..];

    let mut kinds = std::collections::BTreeMap::new();
    for r in Records::new(Chunk::contiguous(bytes)).flatten() {
        *kinds
            .entry(record_type_name(r.record_type()))
            .or_insert(0usize) += 1;
    }
    let errors = Records::new(Chunk::contiguous(bytes))
        .flatten()
        .filter(|r| r.parse(&cfg).is_err())
        .count();
    println!(
        "buffer: {} bytes from {source}; records {kinds:?}; parse errors {errors}",
        bytes.len()
    );

    type Contender<'a> = (&'a str, Box<dyn Fn() -> (usize, u64) + 'a>);
    let contenders: Vec<Contender<'_>> = vec![
        (
            "header walk (ceiling)",
            Box::new(|| header_walk(black_box(bytes))),
        ),
        (
            "walk + time/id accessors",
            Box::new(|| cheap_fields(black_box(bytes), &cfg)),
        ),
        (
            "walk + view (SampleView)",
            Box::new(|| view_parse(black_box(bytes), &cfg)),
        ),
        (
            "walk + full parse (Sample)",
            Box::new(|| typed_parse(black_box(bytes), &cfg)),
        ),
        (
            "next_record + view",
            Box::new(|| view_parse_next_record(black_box(bytes), &cfg)),
        ),
        (
            "next_record + sample_view",
            Box::new(|| sample_view_next_record(black_box(bytes), &cfg)),
        ),
        (
            "walk + sample_view",
            Box::new(|| sample_view_iter(black_box(bytes), &cfg)),
        ),
        (
            "next_record + full parse",
            Box::new(|| typed_parse_next_record(black_box(bytes), &cfg)),
        ),
    ];
    let (_, view_sum) = view_parse(bytes, &cfg);
    let (_, fast_sum) = sample_view_next_record(bytes, &cfg);
    let (_, full_sum) = typed_parse(bytes, &cfg);
    println!(
        "checksum: view {view_sum:#018x}, sample_view {fast_sum:#018x}, full parse {full_sum:#018x} ({})",
        if view_sum == full_sum && fast_sum == full_sum {
            "same"
        } else {
            "DIFFERENT"
        }
    );
    assert_eq!(view_sum, full_sum, "the view and the full parse disagree");
    assert_eq!(
        fast_sum, full_sum,
        "sample_view and the full parse disagree"
    );
    // `cargo bench --bench parse -- WORD` runs only the contenders whose name contains WORD.
    let filter = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let contenders: Vec<Contender<'_>> = contenders
        .into_iter()
        .filter(|(name, _)| filter.as_ref().is_none_or(|f| name.contains(f.as_str())))
        .collect();
    // PARSE_BENCH_CLOCK=cpu: time each round by this thread's CPU time, not the wall clock, so that on a
    // machine shared with other jobs the time this thread waits for a CPU is not counted.
    let cpu_time = std::env::var("PARSE_BENCH_CLOCK").is_ok_and(|v| v == "cpu");
    if cpu_time {
        println!("clock: this thread's CPU time (PARSE_BENCH_CLOCK=cpu)");
    }
    let rounds = 7;
    let iters = 200;
    let mut results: Vec<Vec<f64>> = vec![Vec::new(); contenders.len()];
    for _ in 0..rounds {
        // Interleaved so drift hits all contenders alike.
        for (i, (_, f)) in contenders.iter().enumerate() {
            let t = Clock::now(cpu_time);
            let mut n = 0;
            for _ in 0..iters {
                let (k, s) = f();
                black_box(s);
                n += k;
            }
            results[i].push(n as f64 / t.elapsed().as_secs_f64());
        }
    }
    println!(
        "{:<30} {:>14} {:>14} {:>10}",
        "contender", "median rec/s", "max rec/s", "ns/record"
    );
    for (i, (name, _)) in contenders.iter().enumerate() {
        let mut r = results[i].clone();
        r.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let median = r[r.len() / 2];
        println!(
            "{name:<30} {:>12.1} M {:>12.1} M {:>10.2}",
            median / 1e6,
            r[r.len() - 1] / 1e6,
            1e9 / median
        );
    }
}
