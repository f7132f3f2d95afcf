//! Written by `cargo xtask parse-ab` (xtask/templates/parse_ab_main.rs): perf-core's walk + parse paths of
//! an older commit (`old`, the package `perf-core-old`) against the working tree (`new`), in one process, on
//! one captured buffer. Each round times old and new back to back by this thread's CPU time, alternating
//! which goes first; the report is the median and quartiles of the per-round ratios new/old.
//!
//! usage: parse-ab FILE [ROUNDS]   (FILE as the parse bench's PARSE_BENCH_SAVE writes it)

use std::hint::black_box;
use std::time::Duration;

fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_THREAD_CPUTIME_ID needs nothing else.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// The same loops for each version: they fold the fields a consumer reads into a checksum, as the parse
/// bench does, so both versions must agree.
/// A sample's field: a public field before `Sample` became compact (`s.ip`), an accessor after (`s.ip()`).
macro_rules! get {
    (field, $s:ident . $f:ident) => {
        $s.$f
    };
    (method, $s:ident . $f:ident) => {
        $s.$f()
    };
}

macro_rules! paths {
    ($m:ident, $pc:ident, $get:ident) => {
        mod $m {
            use $pc::record::*;
            use $pc::{Chunk, ParseConfig, ParseFields, Records};

            pub fn cfg(w: [u64; 5], sample_id_all: bool) -> ParseConfig {
                ParseConfig::new(ParseFields {
                    sample_type: w[0],
                    read_format: w[1],
                    branch_sample_type: w[2],
                    sample_regs_user: w[3],
                    sample_regs_intr: w[4],
                    sample_id_all,
                    // Builds before build_id was a field have no more fields.
                    ..ParseFields::default()
                })
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

            #[inline(always)]
            fn fold_record(sum: u64, rec: Result<Record<'_>, $pc::Error>) -> u64 {
                match rec {
                    Ok(Record::Sample(s)) => fold_sample(
                        sum,
                        [
                            get!($get, s.ip),
                            get!($get, s.time),
                            get!($get, s.period),
                            get!($get, s.id),
                            get!($get, s.cpu).map(u64::from),
                        ],
                        get!($get, s.thread),
                        get!($get, s.raw).as_ref().map(|r| r.len()),
                        get!($get, s.callchain).as_ref().map(|c| c.len()),
                    ),
                    Ok(other) => fold_other(sum, &other),
                    Err(_) => sum.wrapping_add(1),
                }
            }

            #[inline(always)]
            fn fold_view(sum: u64, view: &SampleView<'_>) -> u64 {
                fold_sample(
                    sum,
                    [view.ip(), view.time(), view.period(), view.id(), view.cpu().map(u64::from)],
                    view.thread(),
                    view.raw().map(|r| r.len()),
                    view.callchain().map(|c| c.len()),
                )
            }

            /// The iterator + `RawRecord::parse`.
            #[inline(never)]
            pub fn parse(bytes: &[u8], cfg: &ParseConfig) -> (usize, u64) {
                let (mut n, mut sum) = (0, 0);
                for raw in Records::new(Chunk::contiguous(bytes)) {
                    let Ok(raw) = raw else { break };
                    n += 1;
                    sum = fold_record(sum, raw.parse(cfg));
                }
                (n, sum)
            }

            /// `Records::next_record` + `RawRecord::parse`.
            #[inline(never)]
            pub fn parse_next_record(bytes: &[u8], cfg: &ParseConfig) -> (usize, u64) {
                let (mut n, mut sum) = (0, 0);
                let mut records = Records::new(Chunk::contiguous(bytes));
                while let Some(raw) = records.next_record() {
                    n += 1;
                    sum = fold_record(sum, raw.parse(cfg));
                }
                (n, sum)
            }

            /// The iterator + `RawRecord::view`.
            #[inline(never)]
            pub fn view(bytes: &[u8], cfg: &ParseConfig) -> (usize, u64) {
                let (mut n, mut sum) = (0, 0);
                for raw in Records::new(Chunk::contiguous(bytes)) {
                    let Ok(raw) = raw else { break };
                    n += 1;
                    sum = match raw.view(cfg) {
                        Ok(RecordView::Sample(s)) => fold_view(sum, &s),
                        Ok(view @ RecordView::Other(_)) => fold_other(sum, &view.to_record()),
                        Ok(_) => sum,
                        Err(_) => sum.wrapping_add(1),
                    };
                }
                (n, sum)
            }

            /// The iterator + `RawRecord::sample_view`, with `view` for the rest.
            #[inline(never)]
            pub fn sample_view(bytes: &[u8], cfg: &ParseConfig) -> (usize, u64) {
                let (mut n, mut sum) = (0, 0);
                for raw in Records::new(Chunk::contiguous(bytes)) {
                    let Ok(raw) = raw else { break };
                    n += 1;
                    sum = match raw.sample_view(cfg) {
                        Some(s) => fold_view(sum, &s),
                        None => match raw.view(cfg) {
                            Ok(view @ RecordView::Other(_)) => fold_other(sum, &view.to_record()),
                            Ok(_) => sum,
                            Err(_) => sum.wrapping_add(1),
                        },
                    };
                }
                (n, sum)
            }
        }
    };
}
paths!(o, old, field);
paths!(n, new, method);

type Path<'a> = Box<dyn Fn() -> (usize, u64) + 'a>;

fn main() {
    let mut args = std::env::args().skip(1);
    let file = std::fs::read(args.next().expect("usage: parse-ab FILE [ROUNDS]")).expect("FILE");
    let rounds: usize = args.next().map_or(21, |r| r.parse().expect("ROUNDS"));
    assert!(file.len() > 41, "FILE is not a PARSE_BENCH_SAVE buffer");
    let w = |i: usize| u64::from_ne_bytes(file[i * 8..i * 8 + 8].try_into().unwrap());
    let words = [w(0), w(1), w(2), w(3), w(4)];
    let bytes = file[41..].to_vec();
    let (oc, nc) = (o::cfg(words, file[40] != 0), n::cfg(words, file[40] != 0));
    let cases: [(&str, Path, Path); 4] = [
        (
            "walk + parse",
            Box::new(|| o::parse(black_box(&bytes), &oc)),
            Box::new(|| n::parse(black_box(&bytes), &nc)),
        ),
        (
            "next_record + parse",
            Box::new(|| o::parse_next_record(black_box(&bytes), &oc)),
            Box::new(|| n::parse_next_record(black_box(&bytes), &nc)),
        ),
        (
            "walk + view",
            Box::new(|| o::view(black_box(&bytes), &oc)),
            Box::new(|| n::view(black_box(&bytes), &nc)),
        ),
        (
            "walk + sample_view",
            Box::new(|| o::sample_view(black_box(&bytes), &oc)),
            Box::new(|| n::sample_view(black_box(&bytes), &nc)),
        ),
    ];
    let reference = n::parse(&bytes, &nc);
    for (name, old, new) in &cases {
        assert_eq!(old(), reference, "{name}: the old version's checksum differs");
        assert_eq!(new(), reference, "{name}: the new version's checksum differs");
    }
    println!(
        "{} records; {rounds} rounds of 100 passes each side",
        reference.0
    );
    let time = |f: &Path| {
        let start = thread_cpu_time();
        let mut records = 0;
        for _ in 0..100 {
            records += black_box(f()).0;
        }
        records as f64 / (thread_cpu_time() - start).as_secs_f64()
    };
    let median = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    println!(
        "{:<20} {:>12} {:>12} {:>8}  {:>15}",
        "path", "old rec/s", "new rec/s", "new/old", "quartiles"
    );
    for (name, old, new) in &cases {
        let (mut ratios, mut olds, mut news) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..rounds {
            let (a, b) = if round % 2 == 0 {
                let a = time(old);
                (a, time(new))
            } else {
                let b = time(new);
                (time(old), b)
            };
            ratios.push(b / a);
            olds.push(a);
            news.push(b);
        }
        let mut sorted = ratios.clone();
        sorted.sort_by(|a, b| a.total_cmp(b));
        let (q1, q3) = (sorted[sorted.len() / 4], sorted[3 * sorted.len() / 4]);
        println!(
            "{name:<20} {:>10.1} M {:>10.1} M {:>7.3}x  {q1:.3}-{q3:.3}",
            median(&mut olds) / 1e6,
            median(&mut news) / 1e6,
            median(&mut ratios)
        );
    }
}
