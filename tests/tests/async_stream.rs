//! The async iterators under tokio (multi-thread and current-thread) and `futures::executor`: they
//! yield samples, drain the ring and end once the target exits (EPOLLHUP), flush below the
//! watermark on request, and tokio's own reactor can drive a sampler through `AsFd`.
#![allow(clippy::field_reassign_with_default)] // options are set field by field, as in the docs

use std::os::fd::AsFd;
use std::pin::Pin;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Wake, Waker};
use std::time::Duration;

use futures::executor::block_on;
use perf_event::config::{Cpu, Opts, Proc, SampleOn, WakeUpOn};
use perf_event::count::Counter;
use perf_event::event::sw::Software;
use perf_event::sample::record::Record;
use perf_event::sample::Sampler;

/// A shell loop of `$1` steps (about 1 µs each), after a `read` that waits for the parent to open
/// its counters and close the pipe.
const GATED_SPIN: &str = "read x; i=0; while [ $i -lt $1 ]; do i=$((i+1)); done";

fn gated_child(iterations: u32) -> Child {
    Command::new("sh")
        .args(["-c", GATED_SPIN, "spin", &iterations.to_string()])
        .stdin(Stdio::piped())
        .spawn()
        .expect("spawn sh")
}

fn task_clock_opts(period_ns: u64, wake_every: u32) -> Opts {
    let mut opts = Opts::default();
    opts.sample_on = SampleOn::Count(period_ns);
    opts.sample_format.code_addr = true;
    opts.sample_format.period = true;
    opts.record_id_format.time = true;
    opts.record_id_format.cpu = true;
    opts.wake_up.on = WakeUpOn::Samples(wake_every);
    opts
}

/// A waker that counts its wakes.
struct Woken(AtomicUsize);
impl Wake for Woken {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn is_sample(r: &Record) -> bool {
    matches!(r, Record::Sample(_))
}

/// Checks that the stream of a finished child's task-clock sampler yielded every sample the kernel
/// wrote, and that their number fits the child's task time.
///
/// Delivery is checked exactly: nothing was lost and nothing is left in the ring once the stream
/// ended. The number of samples is not exact: the hrtimer behind task-clock sampling fires once per
/// expiry and skips the periods it overran, so when it fires late (a loaded machine: 386 samples
/// for 393 periods was seen under a parallel test run; qemu TCG guests: a quarter to a half) there
/// are fewer samples than periods, never more.
fn assert_all_samples(sampler: &Sampler, period: u64, samples: u64) {
    let leftover = sampler.iter().count();
    assert_eq!(
        leftover, 0,
        "{leftover} records were still in the ring after the stream ended"
    );
    let lost = sampler.lost().unwrap();
    assert_eq!(
        (lost.lost_records, lost.lost_samples),
        (0, 0),
        "records were lost"
    );
    let count = sampler.stat().unwrap().count;
    let expected = count / period;
    assert!(samples > 0, "no samples (count {count} ns)");
    let floor = if tests::emulated() {
        expected / 10
    } else {
        expected / 2
    };
    assert!(
        samples >= floor && samples <= expected + 2,
        "{samples} samples for {count} ns at a {period} ns period (expected at most {expected}, \
         and at least {floor}: late timer expiries skip periods)"
    );
}

#[test]
fn tokio_multi_thread_stream_ends_after_the_child_exits() {
    let mut child = gated_child(40_000);
    let period = 200_000;
    let counter = Counter::new(
        Software::TaskClock,
        (Proc(child.id()), Cpu::ALL),
        task_clock_opts(period, 4),
    )
    .unwrap();
    // The consumer runs on a worker thread of the runtime, so the sampler must be 'static.
    let counter: &'static Counter = Box::leak(Box::new(counter));
    let sampler = Box::leak(Box::new(counter.sampler(6).unwrap()));
    let mut stream = sampler.iter().into_async().unwrap();
    counter.enable().unwrap();
    drop(child.stdin.take());

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let samples = rt.block_on(async move {
        let consumer = tokio::spawn(async move {
            let mut n = 0u64;
            // The `futures::Stream` impl: items are `Result<(Priv, Record)>`.
            while let Some(item) = futures::StreamExt::next(&mut stream).await {
                let (_, record) = item.unwrap();
                n += u64::from(is_sample(&record));
            }
            n
        });
        tokio::time::timeout(Duration::from_secs(30), consumer)
            .await
            .expect("the stream did not end after the child exited")
            .unwrap()
    });
    assert!(child.wait().unwrap().success());
    assert_all_samples(sampler, period, samples);
}

#[test]
fn tokio_current_thread_stream_yields_samples_and_ends() {
    let mut child = gated_child(30_000);
    let period = 200_000;
    let counter = Counter::new(
        Software::TaskClock,
        (Proc(child.id()), Cpu::ALL),
        task_clock_opts(period, 1),
    )
    .unwrap();
    let sampler = counter.sampler(6).unwrap();
    let mut stream = sampler.iter().into_async().unwrap();
    counter.enable().unwrap();
    drop(child.stdin.take());

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (samples, times) = rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(30), async {
            let mut n = 0u64;
            let mut times = Vec::new();
            // The spec's form: `next().await` yields `(Priv, Record)`.
            while let Some((_, record)) = stream.next().await {
                if let Record::Sample(s) = &record {
                    n += 1;
                    times.extend(s.record_id.time.zip(s.record_id.cpu));
                }
            }
            (n, times)
        })
        .await
        .expect("the stream did not end after the child exited")
    });
    assert!(child.wait().unwrap().success());
    assert_all_samples(&sampler, period, samples);
    assert_eq!(
        times.len() as u64,
        samples,
        "every sample has a time and a CPU"
    );
    // The perf clock is per-CPU (local_clock): where it is not synchronized across CPUs (qemu TCG
    // guests), a task that migrates can see time step back between CPUs. Per CPU it never does.
    let mut last = std::collections::HashMap::new();
    for (time, cpu) in times {
        let prev = last.insert(cpu, time).unwrap_or(0);
        assert!(
            prev <= time,
            "cpu {cpu}: time went back from {prev} to {time}"
        );
    }
}

/// Page faults with period 1 give one sample per fault, so the stream's total is exact; a wake-up
/// threshold no child reaches means the only kernel wakeup is the EPOLLHUP at exit, so this also
/// checks that the hangup path drains the ring before ending.
#[test]
fn futures_block_on_drains_every_sample_after_hangup() {
    // `exec` maps a new program: dozens of page faults.
    let mut child = Command::new("sh")
        .args(["-c", "read x; exec cat /proc/self/status >/dev/null"])
        .stdin(Stdio::piped())
        .spawn()
        .expect("spawn sh");
    let mut opts = Opts::default();
    opts.sample_on = SampleOn::Count(1);
    opts.sample_format.data_addr = true;
    opts.wake_up.on = WakeUpOn::Samples(1_000_000);
    let counter = Counter::new(Software::PageFault, (Proc(child.id()), Cpu::ALL), &opts).unwrap();
    let sampler = counter.sampler(8).unwrap();
    let mut stream = sampler.iter().into_async().unwrap();
    counter.enable().unwrap();
    drop(child.stdin.take());

    let (tx, rx) = std::sync::mpsc::channel();
    let samples = std::thread::scope(|s| {
        s.spawn(move || {
            // A watchdog: the test fails rather than hangs if the stream never ends.
            if rx.recv_timeout(Duration::from_secs(30)).is_err() {
                eprintln!("the stream did not end 30 s after the child started");
                std::process::abort();
            }
        });
        let n = block_on(async {
            let mut n = 0u64;
            while let Some(item) = stream.try_next().await {
                let (_, record) = item.unwrap();
                n += u64::from(is_sample(&record));
            }
            n
        });
        tx.send(()).unwrap();
        n
    });
    assert!(child.wait().unwrap().success());
    let stat = counter.stat().unwrap();
    assert!(samples > 10, "only {samples} page-fault samples");
    assert_eq!(
        samples + stat.lost_records.unwrap_or(0),
        stat.count,
        "every fault is one sample, each drained before the end"
    );
}

/// A sampler's reactor registration lasts as long as the sampler, and the kernel reports EPOLLHUP
/// (edge-triggered) once: iterators made after the target exited still end at once, not at their
/// timeout.
#[test]
fn iterators_made_after_the_target_exited_end_at_once() {
    let mut child = gated_child(2_000);
    let counter = Counter::new(
        Software::TaskClock,
        (Proc(child.id()), Cpu::ALL),
        task_clock_opts(100_000, 1_000_000),
    )
    .unwrap();
    let sampler = counter.sampler(6).unwrap();
    let mut first = sampler.iter();
    // Registered before the child runs, so the hangup reaches this registration.
    assert!(first.next_timeout(Duration::ZERO).is_none());
    counter.enable().unwrap();
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
    let start = std::time::Instant::now();
    while first.next_timeout(Duration::from_secs(20)).is_some() {}
    drop(first);
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "{:?}",
        start.elapsed()
    );
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|s| {
        s.spawn(move || {
            // A watchdog: the test fails rather than hangs if a stream never ends.
            if rx.recv_timeout(Duration::from_secs(60)).is_err() {
                eprintln!("an async stream made after the target exited did not end in 60 s");
                std::process::abort();
            }
        });
        for round in 0..3 {
            let start = std::time::Instant::now();
            assert!(sampler
                .iter()
                .next_timeout(Duration::from_secs(20))
                .is_none());
            let took = start.elapsed();
            assert!(
                took < Duration::from_secs(5),
                "round {round}, sync: {took:?}"
            );
            let start = std::time::Instant::now();
            let mut stream = sampler.iter().into_async().unwrap();
            assert!(block_on(stream.next()).is_none());
            let took = start.elapsed();
            assert!(
                took < Duration::from_secs(5),
                "round {round}, async: {took:?}"
            );
        }
        tx.send(()).unwrap();
    });
}

/// The zero-copy async form: the closure sees each record in the ring; it ends at the hangup.
#[test]
fn async_cow_iter_parses_in_place_and_ends() {
    let mut child = gated_child(20_000);
    let counter = Counter::new(
        Software::TaskClock,
        (Proc(child.id()), Cpu::ALL),
        task_clock_opts(200_000, 2),
    )
    .unwrap();
    let sampler = counter.sampler(6).unwrap();
    let mut iter = sampler.iter().into_cow().into_async().unwrap();
    counter.enable().unwrap();
    drop(child.stdin.take());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (samples, bytes) = rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(30), async {
            let (mut n, mut bytes) = (0u64, 0usize);
            while let Some((len, parsed)) = iter
                .next(|chunk, parser| (chunk.as_bytes().len(), parser.parse(chunk)))
                .await
            {
                bytes += len;
                n += u64::from(is_sample(&parsed.1));
            }
            assert!(iter.take_error().is_none());
            (n, bytes)
        })
        .await
        .expect("the async cow iterator did not end after the child exited")
    });
    assert!(child.wait().unwrap().success());
    assert!(samples > 5, "{samples} samples");
    assert!(
        bytes >= samples as usize * 24,
        "{bytes} bytes for {samples} samples"
    );
}

/// With the default wake-up (half the ring) a few samples never wake the reader; a flush interval
/// delivers them anyway.
#[test]
fn flush_every_delivers_records_below_the_watermark() {
    // A producer thread, sampled by tid, touches 10 pages per request.
    let (go_tx, go_rx) = std::sync::mpsc::channel::<Duration>();
    let (tid_tx, tid_rx) = std::sync::mpsc::channel();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let producer = std::thread::spawn(move || {
        // SAFETY: gettid has no preconditions.
        tid_tx.send(unsafe { libc::gettid() }).unwrap();
        for delay in go_rx {
            std::thread::sleep(delay);
            tests::touch_pages(10);
            done_tx.send(()).unwrap();
        }
    });
    let tid = tid_rx.recv().unwrap() as u32;
    let mut opts = Opts::default();
    opts.sample_on = SampleOn::Count(1);
    opts.sample_format.data_addr = true;
    opts.exclude.kernel = true;
    opts.enable = true;
    let counter = Counter::new(Software::PageFault, (Proc(tid), Cpu::ALL), &opts).unwrap();
    let sampler = counter.sampler(7).unwrap(); // 512 KiB: 10 samples are far below half of it
    let mut stream = sampler.iter().into_async().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // The records are in the ring before the first poll, which finds them.
    go_tx.send(Duration::ZERO).unwrap();
    done_rx.recv().unwrap();
    let n = rt.block_on(async {
        let mut n = 0;
        while let Ok(Some(_)) =
            tokio::time::timeout(Duration::from_millis(100), stream.next()).await
        {
            n += 1;
        }
        n
    });
    assert!(n >= 10, "{n} records");
    // Now the task waits first, and the producer writes 50 ms later: no kernel wakeup comes.
    let woken = Arc::new(Woken(AtomicUsize::new(0)));
    let waker = Waker::from(woken.clone());
    let mut cx = Context::from_waker(&waker);
    assert!(Pin::new(&mut stream).poll_next(&mut cx).is_pending());
    go_tx.send(Duration::from_millis(50)).unwrap();
    done_rx.recv().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        woken.0.load(Ordering::SeqCst),
        0,
        "woken below the watermark without a flush interval"
    );
    stream.flush_every(Some(Duration::from_millis(10))).unwrap();
    let start = std::time::Instant::now();
    while woken.0.load(Ordering::SeqCst) == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "the flush interval did not wake the task"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    match Pin::new(&mut stream).poll_next(&mut cx) {
        std::task::Poll::Ready(Some(_)) => {}
        other => panic!("woken by the flush timer, but no record: {other:?}"),
    }
    drop(go_tx);
    producer.join().unwrap();
}

/// The caller's own reactor: tokio's `AsyncFd` on the sampler's fd (the module docs' example).
#[test]
fn tokio_async_fd_drives_a_sampler() {
    let mut child = gated_child(30_000);
    let counter = Counter::new(
        Software::TaskClock,
        (Proc(child.id()), Cpu::ALL),
        task_clock_opts(200_000, 1),
    )
    .unwrap();
    let sampler = counter.sampler(6).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let n = rt.block_on(async {
        let fd = sampler.as_fd().try_clone_to_owned().unwrap();
        // SAFETY: the AsyncFd owns `fd`, so it stays open, and the same, while registered.
        let ready = unsafe {
            tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE)
        }
        .unwrap();
        let mut iter = sampler.iter();
        counter.enable().unwrap();
        drop(child.stdin.take());
        let mut n = 0u64;
        while n < 10 {
            let mut guard = tokio::time::timeout(Duration::from_secs(10), ready.readable())
                .await
                .expect("tokio never saw the sampler readable")
                .unwrap();
            for (_, record) in iter.by_ref() {
                n += u64::from(is_sample(&record));
            }
            guard.clear_ready();
        }
        n
    });
    assert!(n >= 10);
    child.wait().unwrap();
}
