//! Section 2, record parse throughput on the same bytes: records captured from the running kernel at
//! start-up (a `syscalls:sys_enter_getppid` tracepoint and a `page-faults` event sharing one small ring,
//! `IP|TID|TIME|ID|CPU|PERIOD|RAW|CALLCHAIN`, `sample_id_all`, `mmap2/comm/task`, and LOST records from
//! overflowing it). Contenders: a bare header walk (the ceiling, the baseline), memcpy of the bytes, our
//! lazy view, borrowed typed fast path (`Records::next_record` + `RawRecord::sample_view`, with `view` for
//! what is not a sample) and borrowed parse (perf-core), our owned parse (perf-event's `Parser`), and
//! `perf-event-open` 0.5.1's `UnsafeParser` and 0.7.0's `Parser`. Every parser folds the same fields
//! (ip, time, period, id, cpu, pid/tid, raw length, lost count, one per other record) into a checksum
//! that must agree.

use std::hint::black_box;
use std::os::fd::AsFd;
use std::time::Instant;

use perf_core::record::{Record, RecordView};
use perf_core::{Chunk, ParseConfig, Records, Ring, RingMode};
use perf_sys::{self as sys, ioctl, perf_event_attr};

use crate::{allocs, interleave, median, skip_row, Len, Row};

fn capture(target: usize) -> std::io::Result<(Vec<u64>, usize, perf_event_attr)> {
    let tp: u64 =
        std::fs::read_to_string("/sys/kernel/tracing/events/syscalls/sys_enter_getppid/id")?
            .trim()
            .parse()
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    let mut a = perf_event_attr {
        size: std::mem::size_of::<perf_event_attr>() as u32,
        type_: sys::PERF_TYPE_TRACEPOINT,
        config: tp,
        ..Default::default()
    };
    a.__bindgen_anon_1.sample_period = 1;
    a.sample_type = (sys::PERF_SAMPLE_IP
        | sys::PERF_SAMPLE_TID
        | sys::PERF_SAMPLE_TIME
        | sys::PERF_SAMPLE_ID
        | sys::PERF_SAMPLE_CPU
        | sys::PERF_SAMPLE_PERIOD
        | sys::PERF_SAMPLE_RAW
        | sys::PERF_SAMPLE_CALLCHAIN) as u64;
    a.set_sample_id_all(1);
    a.set_mmap2(1);
    a.set_comm(1);
    a.set_task(1);
    a.set_disabled(1);
    let flags = sys::PERF_FLAG_FD_CLOEXEC as u64;
    let tp_fd = perf_core::PerfFd::open(&mut { a }, 0, -1, None, flags)?;
    let mut pf = a;
    pf.type_ = sys::PERF_TYPE_SOFTWARE;
    pf.config = sys::PERF_COUNT_SW_PAGE_FAULTS as u64;
    pf.set_mmap2(0);
    pf.set_comm(0);
    pf.set_task(0);
    let pf_fd = sys::perf_event_open(&pf, 0, -1, None, flags)?;
    let mut ring =
        Ring::map_exclusive(&tp_fd, 8, RingMode::Normal).map_err(std::io::Error::other)?;
    ioctl::set_output(pf_fd.as_fd(), Some(tp_fd.as_fd()))?;
    ioctl::enable(tp_fd.as_fd())?;
    ioctl::enable(pf_fd.as_fd())?;
    let mut out: Vec<u8> = Vec::with_capacity(target + 65536);
    let mut round = 0u32;
    while out.len() < target {
        for _ in 0..200 {
            // SAFETY: getppid has no preconditions.
            unsafe { libc::getppid() };
        }
        let v: Vec<u8> = vec![1; 4 * 4096 + round as usize % 4096];
        black_box(&v);
        drop(v);
        if round & 3 == 0 {
            let name = if round & 7 == 0 {
                c"bench-a"
            } else {
                c"bench-b"
            };
            // SAFETY: PR_SET_NAME with a NUL-terminated string.
            unsafe { libc::prctl(libc::PR_SET_NAME, name.as_ptr()) };
        }
        if round % 8 == 7 {
            for _ in 0..2000 {
                // SAFETY: as above.
                unsafe { libc::getppid() };
            }
        }
        let mut batch = ring.batch().map_err(std::io::Error::other)?;
        while let Some(c) = batch.next_chunk(None) {
            let at = out.len();
            out.resize(at + c.len(), 0);
            c.copy_to_slice(&mut out[at..]);
        }
        drop(batch);
        round += 1;
    }
    ioctl::disable(tp_fd.as_fd())?;
    ioctl::disable(pf_fd.as_fd())?;
    // SAFETY: PR_SET_NAME with a NUL-terminated string.
    unsafe { libc::prctl(libc::PR_SET_NAME, c"report".as_ptr()) };
    // Whole records only, up to `target`.
    let mut end = 0;
    for r in Records::new(Chunk::contiguous(&out)) {
        let Ok(r) = r else { break };
        if end + r.size() > target {
            break;
        }
        end += r.size();
    }
    // 8-byte aligned copy, as every parser here requires.
    let mut words = vec![0u64; end / 8];
    for (w, b) in words.iter_mut().zip(out[..end].chunks_exact(8)) {
        *w = u64::from_ne_bytes(b.try_into().unwrap());
    }
    Ok((words, end, a))
}

fn as_bytes(words: &[u64]) -> &[u8] {
    // SAFETY: u64s reinterpreted as their bytes: same memory, weaker alignment, every byte initialised.
    unsafe { std::slice::from_raw_parts(words.as_ptr().cast(), words.len() * 8) }
}

/// Each record's byte range (offset, size), from the headers.
fn spans(bytes: &[u8]) -> Vec<(usize, usize)> {
    let mut v = Vec::new();
    let mut at = 0;
    while let Some(h) = bytes.get(at..at + 8) {
        let size = u16::from_ne_bytes([h[6], h[7]]) as usize;
        if size < 8 {
            break;
        }
        v.push((at, size));
        at += size;
    }
    v
}

#[inline(always)]
fn fold_sample(
    sum: u64,
    w: [Option<u64>; 5],
    thread: Option<(u32, u32)>,
    raw: Option<usize>,
) -> u64 {
    let sum = w.iter().fold(sum, |a, x| a.rotate_left(5) ^ x.unwrap_or(0));
    sum.wrapping_add(thread.map_or(0, |(p, t)| (p as u64) << 32 | t as u64))
        .wrapping_add(raw.unwrap_or(0) as u64)
}

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

fn ours_view(bytes: &[u8], cfg: &ParseConfig) -> (usize, u64) {
    let (mut n, mut sum) = (0usize, 0u64);
    for raw in Records::new(Chunk::contiguous(bytes)) {
        let Ok(raw) = raw else { break };
        n += 1;
        sum = match raw.view(cfg) {
            Ok(RecordView::Sample(s)) => fold_sample(
                sum,
                [s.ip(), s.time(), s.period(), s.id(), s.cpu().map(u64::from)],
                s.thread().map(|t| (t.pid, t.tid)),
                s.raw().map(|r| r.len()),
            ),
            Ok(RecordView::Other(other)) => match other.record() {
                Record::Lost(l) => sum.wrapping_add(l.lost),
                _ => sum.wrapping_add(1),
            },
            Ok(_) => sum.wrapping_add(1),
            Err(_) => sum.wrapping_add(0xbad),
        };
    }
    (n, sum)
}

/// The fast path: `Records::next_record` + `RawRecord::sample_view`, neither returning a `Result`; what
/// `sample_view` leaves (other records, a refused sample) goes through `view`, so LOST counts fold as above.
fn ours_typed(bytes: &[u8], cfg: &ParseConfig) -> (usize, u64) {
    let (mut n, mut sum) = (0usize, 0u64);
    let mut records = Records::new(Chunk::contiguous(bytes));
    while let Some(raw) = records.next_record() {
        n += 1;
        sum = match raw.sample_view(cfg) {
            Some(s) => fold_sample(
                sum,
                [s.ip(), s.time(), s.period(), s.id(), s.cpu().map(u64::from)],
                s.thread().map(|t| (t.pid, t.tid)),
                s.raw().map(|r| r.len()),
            ),
            None => match raw.view(cfg) {
                Ok(RecordView::Other(other)) => match other.record() {
                    Record::Lost(l) => sum.wrapping_add(l.lost),
                    _ => sum.wrapping_add(1),
                },
                Ok(_) => sum.wrapping_add(1),
                Err(_) => sum.wrapping_add(0xbad),
            },
        };
    }
    (n, sum)
}

fn ours_borrowed(bytes: &[u8], cfg: &ParseConfig) -> (usize, u64) {
    let (mut n, mut sum) = (0usize, 0u64);
    for raw in Records::new(Chunk::contiguous(bytes)) {
        let Ok(raw) = raw else { break };
        n += 1;
        sum = match raw.parse(cfg) {
            Ok(Record::Sample(s)) => fold_sample(
                sum,
                [s.ip(), s.time(), s.period(), s.id(), s.cpu().map(u64::from)],
                s.thread().map(|t| (t.pid, t.tid)),
                s.raw().as_ref().map(|r| r.len()),
            ),
            Ok(Record::Lost(l)) => sum.wrapping_add(l.lost),
            Ok(_) => sum.wrapping_add(1),
            Err(_) => sum.wrapping_add(0xbad),
        };
    }
    (n, sum)
}

fn ours_owned(
    bytes: &[u8],
    spans: &[(usize, usize)],
    p: &perf_event::sample::Parser,
) -> (usize, u64) {
    use perf_event::sample::record::Record as R;
    let mut sum = 0u64;
    for &(at, size) in spans {
        let (_, r) = p.parse_bytes(&bytes[at..at + size]);
        sum = match r {
            R::Sample(s) => fold_sample(
                sum,
                [
                    s.code_addr.map(|c| c.0),
                    s.record_id.time,
                    s.period,
                    s.record_id.id,
                    s.record_id.cpu.map(u64::from),
                ],
                s.record_id.task.map(|t| (t.pid, t.tid)),
                s.raw.as_ref().map(|r| r.len()),
            ),
            R::LostRecords(l) => sum.wrapping_add(l.lost_records),
            _ => sum.wrapping_add(1),
        };
    }
    (spans.len(), sum)
}

fn peo_parse(
    bytes: &[u8],
    spans: &[(usize, usize)],
    p: &perf_event_open::sample::record::UnsafeParser,
) -> (usize, u64) {
    use perf_event_open::sample::record::Record as R;
    let mut sum = 0u64;
    for &(at, size) in spans {
        // SAFETY: the bytes are whole records written by the kernel for an event with this parser's
        // attr, 8-byte aligned (the buffer is a Vec<u64> and sizes are multiples of 8).
        let (_, r, _) = unsafe { p.parse(&bytes[at..at + size]) };
        sum = match r {
            R::Sample(s) => fold_sample(
                sum,
                [
                    s.code_addr.map(|c| c.0),
                    s.record_id.time,
                    s.period,
                    s.record_id.id,
                    s.record_id.cpu.map(u64::from),
                ],
                s.record_id.task.map(|t| (t.pid, t.tid)),
                s.raw.as_ref().map(|r| r.len()),
            ),
            R::LostRecords(l) => sum.wrapping_add(l.lost_records),
            _ => sum.wrapping_add(1),
        };
    }
    (spans.len(), sum)
}

fn peo7_parse(
    bytes: &[u8],
    spans: &[(usize, usize)],
    p: &perf_event_open_07::sample::record::Parser,
) -> (usize, u64) {
    use perf_event_open_07::sample::record::Record as R;
    let mut sum = 0u64;
    for &(at, size) in spans {
        // SAFETY: as for `peo_parse`: whole, 8-byte aligned records of an event with this parser's attr.
        let (_, r, _) = unsafe { p.parse(&bytes[at..at + size]) };
        sum = match r {
            R::Sample(s) => fold_sample(
                sum,
                [
                    s.code_addr.map(|c| c.0),
                    s.record_id.time,
                    s.period,
                    s.record_id.id,
                    s.record_id.cpu.map(u64::from),
                ],
                s.record_id.task.map(|t| (t.pid, t.tid)),
                s.raw.as_ref().map(|r| r.len()),
            ),
            R::LostRecords(l) => sum.wrapping_add(l.lost_records),
            _ => sum.wrapping_add(1),
        };
    }
    (spans.len(), sum)
}

/// Runs section 2.
pub fn run(len: Len, rows: &mut Vec<Row>) {
    let section = "2 parse, captured records (512 KiB)";
    let (words, nbytes, attr) = match capture(512 * 1024) {
        Ok(c) if c.1 > 0 => c,
        Ok(_) => return skip_row(rows, section, "the capture was empty"),
        Err(e) => return skip_row(rows, section, &format!("cannot capture records ({e})")),
    };
    let bytes = &as_bytes(&words)[..nbytes];
    let cfg = ParseConfig::from_attr(&attr);
    let spans = spans(bytes);
    let ours = perf_event::sample::Parser::from_attr(&attr);
    let peo = perf_event_open::sample::record::UnsafeParser {
        sample_id_all: attr.sample_id_all() != 0,
        sample_type: attr.sample_type,
        read_format: attr.read_format,
        user_regs: attr.sample_regs_user.count_ones() as usize,
        intr_regs: attr.sample_regs_intr.count_ones() as usize,
        branch_sample_type: attr.branch_sample_type,
    };
    let peo7 = perf_event_open_07::sample::record::Parser {
        sample_id_all: attr.sample_id_all() != 0,
        sample_type: attr.sample_type,
        read_format: attr.read_format,
        user_regs: attr.sample_regs_user.count_ones() as usize,
        intr_regs: attr.sample_regs_intr.count_ones() as usize,
        branch_sample_type: attr.branch_sample_type,
    };
    let samples_n = Records::new(Chunk::contiguous(bytes))
        .flatten()
        .filter(|r| r.record_type() == sys::PERF_RECORD_SAMPLE)
        .count();
    let lost_n = Records::new(Chunk::contiguous(bytes))
        .flatten()
        .filter(|r| r.record_type() == sys::PERF_RECORD_LOST)
        .count();
    // The cross-check: every parser folds the same fields to the same sum.
    let sums = [
        ("our view", ours_view(bytes, &cfg)),
        ("our typed fast path", ours_typed(bytes, &cfg)),
        ("our borrowed parse", ours_borrowed(bytes, &cfg)),
        ("our owned parse", ours_owned(bytes, &spans, &ours)),
        ("perf-event-open 0.5.1", peo_parse(bytes, &spans, &peo)),
        ("perf-event-open 0.7.0", peo7_parse(bytes, &spans, &peo7)),
    ];
    for (name, (n, s)) in &sums {
        assert_eq!(
            *n,
            spans.len(),
            "{name} saw {n} records, not {}",
            spans.len()
        );
        assert_eq!(
            *s, sums[0].1 .1,
            "{name}: checksum {s:#x} differs from {:#x}",
            sums[0].1 .1
        );
    }
    println!(
        "parse: {nbytes} bytes, {} records ({samples_n} samples, {lost_n} LOST); checksum {:#018x} agreed by all {} parsers",
        spans.len(),
        sums[0].1 .1,
        sums.len()
    );
    let names = [
        "header walk (ceiling)",
        "memcpy of the bytes",
        "ours borrowed view (RawRecord::view)",
        "ours borrowed typed (next_record + sample_view)",
        "ours borrowed parse (RawRecord::parse)",
        "ours owned parse (Parser::parse_bytes)",
        "perf-event-open 0.5.1 UnsafeParser::parse",
        "perf-event-open 0.7.0 Parser::parse",
    ];
    let reps = len.pick(5, 60, 200);
    let rounds = len.pick(3, 7, 11);
    let mut dst = vec![0u64; words.len()];
    let mut al = [0u64; 8];
    let samples = interleave(names.len(), rounds, |i| {
        let a0 = allocs();
        let t = Instant::now();
        for _ in 0..reps {
            let r = match i {
                0 => header_walk(black_box(bytes)),
                1 => {
                    dst.copy_from_slice(black_box(&words));
                    (spans.len(), dst[0])
                }
                2 => ours_view(black_box(bytes), &cfg),
                3 => ours_typed(black_box(bytes), &cfg),
                4 => ours_borrowed(black_box(bytes), &cfg),
                5 => ours_owned(black_box(bytes), &spans, &ours),
                6 => peo_parse(black_box(bytes), &spans, &peo),
                _ => peo7_parse(black_box(bytes), &spans, &peo7),
            };
            black_box(r);
        }
        let secs = t.elapsed().as_secs_f64();
        al[i] += allocs() - a0;
        (reps * spans.len()) as f64 / secs
    });
    let base = median(&samples[0]);
    let peo_rate = median(&samples[names.len() - 2]);
    let peo7_rate = median(&samples[names.len() - 1]);
    let total = (reps * rounds * spans.len()) as f64;
    for (i, s) in samples.into_iter().enumerate() {
        let m = median(&s);
        rows.push(Row {
            section: section.into(),
            name: names[i].into(),
            samples: s,
            unit: "records/s",
            base: Some(base),
            note: format!(
                "{:.2} ns/rec, {:.2} GB/s, {:.2}× peo 0.5.1, {:.2}× peo 0.7.0, {:.2} allocs/rec",
                1e9 / m,
                m * nbytes as f64 / spans.len() as f64 / 1e9,
                m / peo_rate,
                m / peo7_rate,
                al[i] as f64 / total
            ),
        });
    }
}
