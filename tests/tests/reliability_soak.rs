//! Soak: page faults with period 1 (every fault a sample: the kernel's maximum rate for the
//! event) on every online CPU, for every task, under a load that forks, execs and mmaps, read as
//! one merged stream while it runs.
//!
//! Checked: every record parses (no `Record::Unknown`); each CPU's times never go backwards in the
//! merged stream; per counter (CPU), the `PERF_RECORD_LOST` records read add up to the kernel's
//! own `PERF_FORMAT_LOST` count, less what was lost after the last record (reported with the next); and samples + lost never exceed the counter's value (each fault is one
//! overflow, which the kernel writes, counts as lost or, past `max_sample_rate / HZ` overflows a
//! tick, throttles: counted, neither written nor lost; the difference is printed). LOST also
//! counts side-band records, allowed for. Prints records/s and lost.
//!
//! `soak_short` runs by default for `PERF_SOAK_SECS` seconds (10); `soak_full` (ignored) for 60:
//! `cargo test -p tests --test reliability_soak -- --ignored --nocapture`.
#![allow(clippy::field_reassign_with_default)] // options are set field by field, as in the docs

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use perf_event::config::{Opts, Proc, SampleOn};
use perf_event::event::sw::Software;
use perf_event::sample::record::Record;
use perf_event::sample::PerCpuSampler;
use tests::{is_root, require, Skip};

#[derive(Default, Debug)]
struct PerCpuTally {
    samples: u64,
    lost_in_records: u64,
    throttles: u64,
    last_time: u64,
}

/// The load: threads that fork+exec `true`, and threads that map, touch and unmap memory.
fn load(stop: &AtomicBool, execs: &AtomicU64, pages: &AtomicU64) {
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                if Command::new("true").status().is_ok() {
                    execs.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                pages.fetch_add(tests::touch_pages(256) as u64, Ordering::Relaxed);
            }
        });
    });
}

fn soak(secs: u64) {
    require!(
        is_root() || tests::paranoid() <= 0,
        Skip::Privilege,
        "CPU-wide sampling needs root or perf_event_paranoid <= 0 (it is {})",
        tests::paranoid()
    );
    let mut opts = Opts::default();
    opts.sample_on = SampleOn::Count(1);
    opts.sample_format.period = true;
    opts.sample_format.data_addr = true;
    opts.sample_format.code_addr = true;
    opts.record_id_format.time = true;
    opts.record_id_format.cpu = true;
    opts.record_id_format.task = true;
    opts.record_id_format.id = true;
    opts.record_id_all = true;
    opts.extra_record.task = true;
    opts.extra_record.comm = true;
    opts.extra_record.mmap.code = true;
    opts.stat_format.lost_records = true;
    opts.stat_format.id = true;
    let set = PerCpuSampler::new(Software::PageFault, Proc::ALL, &opts, 7).unwrap();
    let ids: BTreeMap<u64, u32> = set
        .counters()
        .iter()
        .map(|(cpu, c)| (c.id().unwrap(), cpu))
        .collect();

    let mut tally: BTreeMap<u32, PerCpuTally> = BTreeMap::new();
    let mut records = 0u64;
    let check = |cpu: u32, record: &Record, tally: &mut BTreeMap<u32, PerCpuTally>| {
        let t = tally.entry(cpu).or_default();
        if let Some(time) = record.record_id().and_then(|id| id.time) {
            assert!(
                time >= t.last_time,
                "cpu{cpu}: time went back from {} to {time}: {record:?}",
                t.last_time
            );
            t.last_time = time;
        }
        match record {
            Record::Sample(s) => {
                t.samples += 1;
                assert_eq!(s.period, Some(1), "{s:?}");
                assert_eq!(s.record_id.cpu, Some(cpu), "{s:?}");
                assert_eq!(ids.get(&s.record_id.id.unwrap()), Some(&cpu), "{s:?}");
            }
            Record::LostRecords(l) => {
                assert_eq!(ids.get(&l.id), Some(&cpu), "{l:?}");
                t.lost_in_records += l.lost_records;
            }
            Record::Throttle(_) => t.throttles += 1,
            Record::Unknown(b) => panic!("cpu{cpu}: a record did not parse: {b:?}"),
            _ => {}
        }
    };

    let stop = AtomicBool::new(false);
    let (execs, pages) = (AtomicU64::new(0), AtomicU64::new(0));
    let start = Instant::now();
    set.enable().unwrap();
    /// Stops the load when the reader leaves, also by a failed assertion (which would otherwise wait
    /// for the load forever).
    struct StopOnDrop<'a>(&'a AtomicBool);
    impl Drop for StopOnDrop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    std::thread::scope(|s| {
        s.spawn(|| load(&stop, &execs, &pages));
        let _stop = StopOnDrop(&stop);
        let mut iter = set.iter();
        while start.elapsed() < Duration::from_secs(secs) {
            match iter.next_timeout(Duration::from_millis(50)) {
                Some((cpu, _, r)) => {
                    records += 1;
                    check(cpu, &r, &mut tally);
                }
                None => continue,
            }
        }
        stop.store(true, Ordering::Relaxed);
    });
    set.disable().unwrap();
    let elapsed = start.elapsed();
    for (cpu, _, r) in set.iter() {
        records += 1;
        check(cpu, &r, &mut tally);
    }

    let mut total_samples = 0;
    let mut total_lost = 0;
    for (cpu, sampler) in set.samplers() {
        let stat = sampler.stat().unwrap();
        let t = tally.remove(&cpu).unwrap_or_default();
        let format_lost = stat.lost_records.expect("PERF_FORMAT_LOST was asked for");
        println!(
            "cpu{cpu}: {} faults counted, {} samples, {} lost (LOST records), {} lost \
             (PERF_FORMAT_LOST), {} throttles",
            stat.count, t.samples, t.lost_in_records, format_lost, t.throttles
        );
        // The kernel reports a loss with the next record that fits; what was lost after the
        // last one is only in PERF_FORMAT_LOST.
        assert!(
            t.lost_in_records <= format_lost,
            "cpu{cpu}: LOST records exceed PERF_FORMAT_LOST"
        );
        let pending = format_lost - t.lost_in_records;
        println!("cpu{cpu}: lost after the last record (not yet reported): {pending}");
        // Each fault is one overflow: a sample, a lost record, or (throttled: more than
        // max_sample_rate / HZ overflows in a tick) neither. LOST also counts side-band records
        // (comm, mmap, fork: a few per fork+exec of the load) that did not fit.
        let gap = stat.count as i64 - (t.samples + format_lost) as i64;
        println!("cpu{cpu}: neither sampled nor lost (throttled): {gap}");
        let side_band = 10 * execs.load(Ordering::Relaxed) as i64 + 1000;
        assert!(
            t.samples <= stat.count,
            "cpu{cpu}: more samples than faults"
        );
        assert!(
            gap >= -side_band,
            "cpu{cpu}: samples + lost = {} exceeds the {} faults counted",
            t.samples + format_lost,
            stat.count
        );
        total_samples += t.samples;
        total_lost += format_lost;
    }
    let secs_f = elapsed.as_secs_f64();
    println!(
        "soak {secs} s: {records} records ({:.0}/s), {total_samples} samples, {total_lost} lost; \
         load: {} fork+execs, {} pages touched",
        records as f64 / secs_f,
        execs.load(Ordering::Relaxed),
        pages.load(Ordering::Relaxed)
    );
    assert!(total_samples > 1000, "{total_samples} samples");
    assert!(execs.load(Ordering::Relaxed) > 0);
}

#[test]
fn soak_short() {
    let secs = std::env::var("PERF_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    soak(secs);
}

#[test]
#[ignore = "60 s; run on demand"]
fn soak_full() {
    soak(60);
}
