//! Robustness of the reader: a ring whose producer writes garbage (perf-core's simulated kernel
//! memory) never makes the reader panic, loop forever or read out of bounds.
//!
//! perf-event's `Sampler` over simulated memory is crate-private, so the reader here is what the
//! sampler's iterators run: perf-core's [`Ring`] batch loop (with `discard_pending` on a corrupt
//! record, as `Iter` does) feeding perf-event's public [`Parser`]. Every loop is bounded by a
//! step count and a time limit; a reader that spins fails the test instead of hanging it.

use std::time::{Duration, Instant};

use perf_core::sim::{Sim, SimConfig, SimOutput};
use perf_core::{Data, Ring};
use perf_event::perf_sys as sys;
use perf_event::sample::record::Record;
use perf_event::sample::Parser;

/// xorshift64*: deterministic garbage.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// A parser that expects every field: each garbage record walks the longest path.
fn greedy_parser() -> Parser {
    let mut a = sys::perf_event_attr::default();
    let all = [
        sys::PERF_SAMPLE_IDENTIFIER,
        sys::PERF_SAMPLE_IP,
        sys::PERF_SAMPLE_TID,
        sys::PERF_SAMPLE_TIME,
        sys::PERF_SAMPLE_ADDR,
        sys::PERF_SAMPLE_ID,
        sys::PERF_SAMPLE_STREAM_ID,
        sys::PERF_SAMPLE_CPU,
        sys::PERF_SAMPLE_PERIOD,
        sys::PERF_SAMPLE_READ,
        sys::PERF_SAMPLE_CALLCHAIN,
        sys::PERF_SAMPLE_RAW,
        sys::PERF_SAMPLE_BRANCH_STACK,
        sys::PERF_SAMPLE_REGS_USER,
        sys::PERF_SAMPLE_STACK_USER,
        sys::PERF_SAMPLE_WEIGHT,
        sys::PERF_SAMPLE_DATA_SRC,
        sys::PERF_SAMPLE_TRANSACTION,
        sys::PERF_SAMPLE_REGS_INTR,
        sys::PERF_SAMPLE_PHYS_ADDR,
        sys::PERF_SAMPLE_AUX,
        sys::PERF_SAMPLE_CGROUP,
        sys::PERF_SAMPLE_DATA_PAGE_SIZE,
        sys::PERF_SAMPLE_CODE_PAGE_SIZE,
    ];
    for bit in all {
        a.sample_type |= u64::from(bit);
    }
    a.read_format = u64::from(
        sys::PERF_FORMAT_GROUP
            | sys::PERF_FORMAT_ID
            | sys::PERF_FORMAT_TOTAL_TIME_ENABLED
            | sys::PERF_FORMAT_TOTAL_TIME_RUNNING
            | sys::PERF_FORMAT_LOST,
    );
    a.sample_regs_user = 0xff_ffff;
    a.sample_regs_intr = 0xff_ffff;
    a.branch_sample_type = u64::from(sys::PERF_SAMPLE_BRANCH_HW_INDEX);
    a.set_sample_id_all(1);
    Parser::from_attr(&a)
}

/// Drains `ring` as perf-event's `Iter` does: batches of records parsed one by one; on a corrupt
/// record, the pending bytes are discarded. Returns (records, corrupt batches). Panics if the
/// reader needs more than `max_steps` steps or `limit` of time.
fn drain(
    ring: &mut Ring<Data>,
    parser: &Parser,
    max_steps: usize,
    limit: Duration,
) -> (usize, usize) {
    let start = Instant::now();
    let (mut records, mut corrupt, mut steps) = (0, 0, 0);
    loop {
        assert!(
            steps < max_steps,
            "reader did not finish in {max_steps} steps"
        );
        assert!(
            start.elapsed() < limit,
            "reader did not finish in {limit:?}"
        );
        steps += 1;
        let mut failed = false;
        let mut got = 0;
        match ring.batch() {
            Ok(mut batch) => loop {
                match batch.next_record() {
                    Ok(Some(chunk)) => {
                        let len = chunk.len();
                        let (_, r) = parser.parse_chunk(chunk);
                        // Whatever it is, it came from inside the record.
                        if let Record::Unknown(b) = &r {
                            assert!(b.len() <= len);
                        }
                        std::hint::black_box(&r);
                        records += 1;
                        got += 1;
                        steps += 1;
                        assert!(steps < max_steps, "reader did not finish");
                    }
                    Ok(None) => break,
                    Err(_) => {
                        failed = true;
                        break;
                    }
                }
            },
            Err(_) => failed = true,
        }
        if failed {
            corrupt += 1;
            ring.discard_pending()
                .expect("a normal ring can always discard");
            continue;
        }
        if got == 0 {
            return (records, corrupt);
        }
    }
}

#[test]
fn random_bytes_never_panic_the_parser() {
    let parser = greedy_parser();
    let plain = Parser::from_attr(&sys::perf_event_attr::default());
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < Duration::from_secs(2) && n < 200_000 {
        let len = rng.below(600) as usize;
        let mut bytes = rng.bytes(len);
        // Make the header plausible half the time, so the body parser runs.
        if len >= 8 && rng.next() & 1 == 0 {
            let ty = (rng.below(24)) as u32;
            bytes[0..4].copy_from_slice(&ty.to_ne_bytes());
            bytes[6..8].copy_from_slice(&(len as u16).to_ne_bytes());
        }
        std::hint::black_box(parser.parse_bytes(&bytes));
        std::hint::black_box(plain.parse_bytes(&bytes));
        n += 1;
    }
    println!("parsed {n} random records in {:?}", start.elapsed());
    assert!(n > 1000);
}

#[test]
fn garbage_records_from_the_producer_are_survived() {
    let parser = greedy_parser();
    let mut rng = Rng(42);
    for round in 0..40u64 {
        let size = 4096u64 << (round % 3);
        let Sim {
            mut kernel,
            mut ring,
            ..
        } = Sim::new(SimConfig::new(size)).unwrap();
        let mut written = 0;
        for _ in 0..(rng.below(200) + 1) {
            // Well-framed records of any type, with garbage bodies of any length.
            let ty = rng.below(30) as u32;
            let len = rng.below(300) as usize;
            let body = rng.bytes(len);
            match kernel.output(ty, rng.next() as u16, &body).unwrap() {
                SimOutput::Written { .. } => written += 1,
                SimOutput::Lost => {
                    drain(&mut ring, &parser, 100_000, Duration::from_secs(5));
                }
            }
            if rng.below(8) == 0 {
                // Garbage over the published bytes, headers included.
                let pos = ring.tail() + rng.below(size);
                let len = rng.below(64) as usize + 1;
                let junk = rng.bytes(len);
                kernel.corrupt(&mut ring, pos, &junk).unwrap();
            }
        }
        let (records, corrupt) = drain(&mut ring, &parser, 100_000, Duration::from_secs(5));
        assert!(
            records <= written + 1000,
            "round {round}: {records} records of {written}"
        );
        let _ = corrupt;
        assert_eq!(ring.pending_bytes(), 0, "the reader caught up");
    }
}

#[test]
fn impossible_heads_are_survived() {
    let parser = greedy_parser();
    let mut rng = Rng(7);
    let Sim {
        mut kernel,
        mut ring,
        ..
    } = Sim::new(SimConfig::new(8192)).unwrap();
    let cases: Vec<(u64, u64)> = vec![
        (u64::MAX, 0),                   // head a whole ring (and more) ahead
        (0, u64::MAX),                   // head behind the tail
        (8192, 0),                       // exactly full: never seen from a real producer
        (8191, 0),                       // not a multiple of 8
        (u64::MAX - 7, u64::MAX - 4095), // wraps the u64
        (12, 4),                         // tail not aligned
        (1 << 40, (1 << 40) - 64),
    ];
    for (i, (head, tail)) in cases.into_iter().enumerate() {
        // Garbage in the whole area first.
        let junk = rng.bytes(8192);
        kernel.corrupt(&mut ring, 0, &junk).unwrap();
        kernel.set_positions(&mut ring, head, tail).unwrap();
        let (records, corrupt) = drain(&mut ring, &parser, 10_000, Duration::from_secs(5));
        println!("case {i}: head {head:#x} tail {tail:#x}: {records} records, {corrupt} corrupt");
        assert_eq!(ring.pending_bytes(), 0, "case {i}: the reader caught up");
    }
}

#[test]
fn zero_and_max_sizes_do_not_loop() {
    let parser = greedy_parser();
    let Sim {
        mut kernel,
        mut ring,
        ..
    } = Sim::new(SimConfig::new(4096)).unwrap();
    // A record whose header says size 0, then one that says 0xffff: both corrupt, neither loops.
    for size in [0u16, 4, 0xffff, 0xfff8] {
        kernel
            .output(sys::PERF_RECORD_SAMPLE, 0, &[0u8; 64])
            .unwrap();
        let pos = ring.tail();
        let mut header = Vec::new();
        header.extend_from_slice(&sys::PERF_RECORD_SAMPLE.to_ne_bytes());
        header.extend_from_slice(&0u16.to_ne_bytes());
        header.extend_from_slice(&size.to_ne_bytes());
        kernel.corrupt(&mut ring, pos, &header).unwrap();
        let (records, corrupt) = drain(&mut ring, &parser, 1000, Duration::from_secs(2));
        assert_eq!((records, corrupt), (0, 1), "size {size}");
    }
}
