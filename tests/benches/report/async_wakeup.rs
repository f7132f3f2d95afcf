//! Section 4, wake-up latency of the async iterators, and the threads they cost, for 1 and 16 samplers.
//!
//! Section 4. Each sampler watches one producer thread's page
//! faults (period 1, `wakeup_events = 1`). The consumer asks one producer at a time to fault one
//! page and measures the time from just before the fault to the record in its hands:
//! - `poll(2)`: the sync `Iter::next_timeout` on the fd (one sampler; the baseline);
//! - `async`: `AsyncIter` under `futures::executor::block_on`, woken through the shared reactor
//!   thread (one extra hop: kernel → reactor thread → executor thread), with 1 and 16 samplers.
//!
//! Threads are counted in `/proc/self/task` before the samplers go async and after.
#![allow(clippy::field_reassign_with_default)] // options are set field by field, as in the docs

use std::future::poll_fn;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use perf_event::config::{Cpu, Opts, Proc, SampleOn, WakeUpOn};
use perf_event::count::Counter;
use perf_event::event::sw::Software;
use perf_event::sample::record::Record;
use perf_event::sample::Sampler;

use crate::{skip_row, Len, Row};

fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(0, |d| d.count())
}

/// A thread that faults one fresh page each time it is asked, stamping the time just before.
struct Producer {
    go: Sender<()>,
    stamp: Arc<AtomicU64>,
    counter: Counter,
}

fn producers(n: usize, base: Instant) -> Vec<Producer> {
    (0..n)
        .map(|_| {
            let (go, rx) = channel::<()>();
            let (tid_tx, tid_rx) = channel();
            let stamp = Arc::new(AtomicU64::new(0));
            let s = stamp.clone();
            std::thread::spawn(move || {
                // SAFETY: gettid has no preconditions.
                tid_tx.send(unsafe { libc::gettid() }).unwrap();
                for () in rx {
                    s.store(base.elapsed().as_nanos() as u64, Ordering::SeqCst);
                    tests::touch_pages(1);
                }
            });
            let tid = tid_rx.recv().unwrap() as u32;
            let mut opts = Opts::default();
            opts.sample_on = SampleOn::Count(1);
            opts.sample_format.data_addr = true;
            opts.exclude.kernel = true;
            opts.wake_up.on = WakeUpOn::Samples(1);
            opts.enable = true;
            let counter = Counter::new(Software::PageFault, (Proc(tid), Cpu::ALL), &opts).unwrap();
            Producer { go, stamp, counter }
        })
        .collect()
}

fn summary(name: &str, ns: Vec<u64>, threads: (usize, usize)) -> (String, Vec<f64>, String) {
    let mut sorted = ns.clone();
    sorted.sort_unstable();
    let pct = |p: f64| sorted[((sorted.len() - 1) as f64 * p) as usize] as f64 / 1e3;
    let note = format!(
        "p90 {:.1} µs, p99 {:.1} µs; threads {} → {}",
        pct(0.9),
        pct(0.99),
        threads.0,
        threads.1
    );
    (
        name.into(),
        ns.iter().map(|&x| x as f64 / 1e3).collect(),
        note,
    )
}

fn is_sample(r: &Record) -> bool {
    matches!(r, Record::Sample(_))
}

fn bench_poll(base: Instant, rounds: usize) -> (String, Vec<f64>, String) {
    let p = producers(1, base);
    let sampler = p[0].counter.sampler(4).unwrap();
    let mut iter = sampler.iter();
    let t0 = threads();
    let mut ns = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        p[0].go.send(()).unwrap();
        loop {
            let (_, r) = iter
                .next_timeout(Duration::from_secs(5))
                .expect("no sample within 5 s");
            if is_sample(&r) {
                break;
            }
        }
        ns.push(base.elapsed().as_nanos() as u64 - p[0].stamp.load(Ordering::SeqCst));
    }
    summary("poll(2), 1 sampler", ns, (t0, threads()))
}

fn bench_async(base: Instant, n: usize, rounds: usize) -> (String, Vec<f64>, String) {
    let p = producers(n, base);
    let samplers: Vec<Sampler> = p.iter().map(|p| p.counter.sampler(4).unwrap()).collect();
    let t0 = threads();
    let mut streams: Vec<_> = samplers
        .iter()
        .map(|s| s.iter().into_async().unwrap())
        .collect();
    // The reactor thread may already exist from an earlier contender: report both counts.
    let mut ns = Vec::with_capacity(rounds);
    futures::executor::block_on(async {
        for i in 0..rounds {
            let k = i % n;
            p[k].go.send(()).unwrap();
            poll_fn(|cx| {
                let mut got = false;
                for s in streams.iter_mut() {
                    while let Poll::Ready(Some(item)) = Pin::new(&mut *s).poll_try_next(cx) {
                        got |= is_sample(&item.unwrap().1);
                    }
                }
                if got {
                    Poll::Ready(())
                } else {
                    Poll::Pending
                }
            })
            .await;
            ns.push(base.elapsed().as_nanos() as u64 - p[k].stamp.load(Ordering::SeqCst));
        }
    });
    summary(
        &format!("async, {n} sampler{}", if n == 1 { "" } else { "s" }),
        ns,
        (t0, threads()),
    )
}

/// Runs section 4.
pub fn run(len: Len, rows: &mut Vec<Row>) {
    let section = "4 async wake-up, page fault → record in hand";
    if !(tests::is_root() || tests::paranoid() <= 2) {
        skip_row(
            rows,
            section,
            "cannot sample page faults here (paranoid > 2, not root)",
        );
        return;
    }
    let rounds = len.pick(200, 2000, 5000);
    let base = Instant::now();
    let results = [
        bench_poll(base, rounds),
        bench_async(base, 1, rounds),
        bench_async(base, 16, rounds),
    ];
    let reactors = std::fs::read_dir("/proc/self/task")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| {
                    std::fs::read_to_string(e.path().join("comm"))
                        .is_ok_and(|c| c.trim() == "perf-event-io")
                })
                .count()
        })
        .unwrap_or(0);
    let poll = crate::median(&results[0].1);
    for (i, (name, samples, note)) in results.into_iter().enumerate() {
        let note = if i == 2 {
            format!("{note}; reactor threads after 1 + 16 samplers: {reactors}")
        } else {
            note
        };
        rows.push(Row {
            section: section.into(),
            name,
            samples,
            unit: "µs",
            base: Some(poll),
            note,
        });
    }
}
