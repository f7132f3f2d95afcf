//! Sampling used adversarially but safely: second mappings, readers inside readers, forward reads of
//! overwrite rings, several waiters, fork, a failed reactor start, rings too small for one record, and a
//! stress run of every reader at once on the same samplers. Each test bounds its run time: a call that
//! never returns fails it instead of hanging the suite.

use std::collections::HashSet;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Barrier, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use perf_event::config::{Cpu, Inherit, Opts, Proc, SampleOn, Size, WakeUpOn};
use perf_event::count::Counter;
use perf_event::event::sw::Software;
use perf_event::sample::record::{Record, Task};
use perf_event::Error;

/// Runs `f` on a thread and fails if it does not return within `limit`: a hang becomes a failure.
fn within<T: Send + 'static>(
    limit: Duration,
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(limit) {
        Ok(v) => v,
        Err(_) => panic!("{what} did not return within {limit:?}"),
    }
}

/// User-space page faults of one thread, one sample each, with task, time and address.
fn fault_opts() -> Opts {
    let mut opts = Opts::default();
    opts.exclude.kernel = true;
    opts.exclude.hv = true;
    opts.sample_on = SampleOn::Count(1);
    opts.record_id_format.task = true;
    opts.record_id_format.time = true;
    opts.sample_format.data_addr = true;
    opts.stat_format.lost_records = true;
    opts
}

fn gettid() -> u32 {
    // SAFETY: gettid has no preconditions and cannot fail.
    unsafe { libc::gettid() as u32 }
}

/// A thread that faults on the pages of a 1 MiB arena (dropping them after each pass, so every touch
/// faults again) at about `rate` faults a second until stopped. Joining it gives the faults made.
struct Producer {
    tid: u32,
    stop: Arc<AtomicBool>,
    go: Arc<Barrier>,
    handle: Option<std::thread::JoinHandle<u64>>,
}

impl Producer {
    fn spawn(rate: u64) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let go = Arc::new(Barrier::new(2));
        let (tx, rx) = mpsc::channel();
        let handle = std::thread::spawn({
            let (stop, go) = (stop.clone(), go.clone());
            move || {
                tx.send(gettid()).unwrap();
                go.wait();
                let page = tests::page_size();
                let pages = 256;
                // SAFETY: an anonymous private mapping with no address hint has no preconditions.
                let arena = unsafe {
                    libc::mmap(
                        std::ptr::null_mut(),
                        pages * page,
                        libc::PROT_READ | libc::PROT_WRITE,
                        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                        -1,
                        0,
                    )
                };
                assert_ne!(arena, libc::MAP_FAILED);
                let start = Instant::now();
                let mut faults = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    for i in 0..pages {
                        // SAFETY: `i * page` lies inside the writable arena mapped above.
                        unsafe { std::ptr::write_volatile(arena.cast::<u8>().add(i * page), 1) };
                        faults += 1;
                    }
                    // SAFETY: drops the arena's pages (not the mapping), so the next pass faults again.
                    unsafe { libc::madvise(arena, pages * page, libc::MADV_DONTNEED) };
                    let due = Duration::from_secs_f64(faults as f64 / rate as f64);
                    if let Some(ahead) = due.checked_sub(start.elapsed()) {
                        std::thread::sleep(ahead);
                    }
                }
                // SAFETY: unmapping exactly the arena, which nothing else refers to.
                unsafe { libc::munmap(arena, pages * page) };
                faults
            }
        });
        let tid = rx.recv().unwrap();
        Producer {
            tid,
            stop,
            go,
            handle: Some(handle),
        }
    }

    fn start(&self) {
        self.go.wait();
    }

    fn finish(&mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.take().map_or(0, |h| h.join().unwrap())
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// A page-fault sample of `task`, or what is wrong with the record.
fn check_sample(r: &Record, task: Task) -> Result<Option<(u64, u64)>, String> {
    match r {
        Record::Sample(s) => {
            let id = &s.record_id;
            if id.task != Some(task) {
                return Err(format!("sample of another task (torn?): {r:-?}"));
            }
            let time = id.time.ok_or_else(|| format!("no time: {r:-?}"))?;
            let addr = s.data_addr.ok_or_else(|| format!("no address: {r:-?}"))?;
            Ok(Some((time, addr)))
        }
        Record::LostRecords(_) => Ok(None),
        other => Err(format!("unexpected record (torn?): {other:-?}")),
    }
}

#[test]
fn a_second_consumer_of_a_sampled_counter_is_refused() {
    tests::require_self_sampling!();
    let counter =
        Counter::new(Software::PageFault, (Proc::CURRENT, Cpu::ALL), fault_opts()).unwrap();
    let sampler = counter.sampler(2).unwrap();
    // Issue: perf-core's safe mapping attached to the sampler's ring (two consumers of one tail).
    let err = perf_core::Ring::map_exclusive(counter.perf_fd(), 2, perf_core::RingMode::Normal)
        .unwrap_err();
    assert!(
        matches!(err.kind(), perf_core::ErrorKind::AlreadyMapped { .. }),
        "{err:?}"
    );
    // perf-event's own second sampler is refused too.
    assert!(matches!(counter.sampler(2), Err(Error::SamplerExists)));
    counter.enable().unwrap();
    tests::touch_pages(8);
    counter.disable().unwrap();
    assert!(sampler.iter().count() >= 8);
}

#[test]
fn forward_reads_of_an_overwrite_ring_end_with_one_error() {
    tests::require_self_sampling!();
    // Issue: Iter::next, next_timeout, the merged per-CPU round and the async Stream spun forever.
    within(
        Duration::from_secs(20),
        "forward reads of an overwrite ring",
        || {
            let mut opts = fault_opts();
            opts.write_backward = true;
            let counter =
                Counter::new(Software::PageFault, (Proc::CURRENT, Cpu::ALL), &opts).unwrap();
            let sampler = counter.sampler(2).unwrap();
            counter.enable().unwrap();
            tests::touch_pages(16);
            assert!(sampler.iter().next().is_none());
            let mut it = sampler.iter();
            let first = it.try_next();
            assert!(
                matches!(
                    &first,
                    Some(Err(Error::Ring(e))) if matches!(e.kind(), perf_core::ErrorKind::RingMode { .. })
                ),
                "{first:?}"
            );
            assert!(it.try_next().is_none(), "one error, then the end");
            let start = Instant::now();
            assert!(sampler
                .iter()
                .next_timeout(Duration::from_secs(5))
                .is_none());
            assert!(
                start.elapsed() < Duration::from_secs(1),
                "next_timeout waited {:?}",
                start.elapsed()
            );
            let mut cow = sampler.iter().into_cow();
            assert!(cow.next(|_, _| ()).is_none());
            assert!(cow
                .next_timeout(Duration::from_secs(5), |_, _| ())
                .is_none());
            let mut merged = perf_event::sample::MergedIter::new([(0, sampler.iter())]);
            assert!(merged.next().is_none());
            assert!(merged.next_timeout(Duration::from_secs(5)).is_none());
            let items: Vec<_> = futures::executor::block_on(async {
                use futures::StreamExt;
                let stream = sampler.iter().into_async().unwrap();
                stream.collect::<Vec<_>>().await
            });
            assert_eq!(items.len(), 1, "one error item, then the end");
            assert!(items[0].is_err());
            // The ring itself is fine: newest() reads it.
            assert!(!sampler.newest(4).unwrap().is_empty());
        },
    );
}

#[test]
fn sampler_methods_inside_a_cow_closure_return_instead_of_blocking() {
    tests::require_self_sampling!();
    // Issue: calling a sampler method inside a CowIter closure deadlocked on the ring lock.
    within(
        Duration::from_secs(20),
        "sampler calls inside a closure",
        || {
            let counter =
                Counter::new(Software::PageFault, (Proc::CURRENT, Cpu::ALL), fault_opts()).unwrap();
            let sampler = counter.sampler(3).unwrap();
            counter.enable().unwrap();
            tests::touch_pages(16);
            counter.disable().unwrap();
            let mut cow = sampler.iter().into_cow();
            let seen = cow
                .next(|_, _| {
                    let inner = sampler.iter().try_next();
                    assert!(matches!(inner, Some(Err(Error::RingBusy))), "{inner:?}");
                    assert!(sampler.iter().next().is_none());
                    assert!(sampler
                        .iter()
                        .next_timeout(Duration::from_millis(20))
                        .is_none());
                    assert!(sampler.counter_time_enabled().is_ok());
                    assert!(sampler.lost().unwrap().format_lost.is_some());
                    assert!(sampler.stat().is_ok());
                    assert!(matches!(sampler.aux_tracer(0), Err(Error::RingBusy)));
                    assert!(matches!(sampler.newest(1), Err(Error::Ring(_))));
                    sampler.pause().unwrap();
                    sampler.resume().unwrap();
                })
                .is_some();
            assert!(seen);
            // Once the first reader is gone the ring is everybody's again, with nothing lost.
            drop(cow);
            assert!(sampler.iter().count() >= 15);
        },
    );
}

/// A waker that counts its wakes.
struct Woken(AtomicUsize);
impl Wake for Woken {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn wait_until(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while !f() {
        if start.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    true
}

#[test]
fn every_waiter_of_one_sampler_is_woken() {
    tests::require_self_sampling!();
    // Issue: perf_poll hands EPOLLIN to one registration per wakeup: with two async iterators (or one
    // and next_timeout) on a sampler, 50 wakeups woke task A 0 times.
    let mut producer = Producer::spawn(2000);
    let mut opts = fault_opts();
    opts.wake_up.on = WakeUpOn::Samples(1);
    let counter = Counter::new(Software::PageFault, (Proc(producer.tid), Cpu::ALL), &opts).unwrap();
    let sampler = counter.sampler(4).unwrap();
    let mut a = sampler.iter().into_async().unwrap();
    let mut b = sampler.iter().into_async().unwrap();
    let (wa, wb) = (
        Arc::new(Woken(AtomicUsize::new(0))),
        Arc::new(Woken(AtomicUsize::new(0))),
    );
    let (waker_a, waker_b) = (Waker::from(wa.clone()), Waker::from(wb.clone()));
    let park = |a: &mut perf_event::sample::AsyncIter<'_>,
                b: &mut perf_event::sample::AsyncIter<'_>| {
        while let Poll::Ready(Some(_)) =
            Pin::new(&mut *a).poll_next(&mut Context::from_waker(&waker_a))
        {}
        while let Poll::Ready(Some(_)) =
            Pin::new(&mut *b).poll_next(&mut Context::from_waker(&waker_b))
        {}
    };
    counter.enable().unwrap();
    producer.start();
    for round in 1..=50 {
        let (before_a, before_b) = (wa.0.load(Ordering::SeqCst), wb.0.load(Ordering::SeqCst));
        // Drain and park both tasks; the next sample must wake both.
        park(&mut a, &mut b);
        assert!(
            wait_until(Duration::from_secs(5), || wa.0.load(Ordering::SeqCst)
                > before_a
                && wb.0.load(Ordering::SeqCst) > before_b),
            "round {round}: A woken {} times, B {} times",
            wa.0.load(Ordering::SeqCst),
            wb.0.load(Ordering::SeqCst)
        );
    }
    // A blocking wait shares the registration with the async waiters.
    let mut it = sampler.iter();
    let before = wa.0.load(Ordering::SeqCst);
    park(&mut a, &mut b);
    let got = it.next_timeout(Duration::from_secs(5));
    assert!(got.is_some(), "next_timeout was not woken");
    assert!(wait_until(Duration::from_secs(5), || wa
        .0
        .load(Ordering::SeqCst)
        > before));
    producer.finish();
}

#[test]
fn a_fork_child_gets_a_reactor_of_its_own() {
    tests::require_self_sampling!();
    // Issue: after fork() the reactor existed in the child without its thread, sharing the parent's
    // epoll set: the child was never woken. Forking is only safe without other test threads around.
    if !tests::in_own_process(
        "a_fork_child_gets_a_reactor_of_its_own",
        "PERF_TEST_FORK_CHILD",
    ) {
        return;
    }
    let mut opts = fault_opts();
    opts.wake_up.on = WakeUpOn::Samples(1);
    let woken = |opts: &Opts| {
        // The stream parks first; a producer thread's faults must wake it.
        let mut producer = Producer::spawn(1000);
        let counter =
            Counter::new(Software::PageFault, (Proc(producer.tid), Cpu::ALL), opts).unwrap();
        let sampler = counter.sampler(3).unwrap();
        let mut stream = sampler.iter().into_async().unwrap();
        counter.enable().unwrap();
        producer.start();
        let got = futures::executor::block_on(stream.next()).is_some();
        producer.finish();
        got
    };
    // The parent's reactor starts and works.
    assert!(woken(&opts));
    // The child gets a reactor of its own (within 10 s).
    let pid = tests::fork_child(10, || {
        woken(&opts)
            .then_some(())
            .ok_or_else(|| "the child's stream was never woken".to_string())
    });
    if let Some(Err(e)) = tests::wait_child(pid, true) {
        panic!("{e}");
    }
}

#[test]
fn a_failed_reactor_start_is_not_remembered() {
    tests::require_self_sampling!();
    // Issue: a transient EMFILE on the reactor's first start was kept in a LazyLock forever. This needs
    // a process whose reactor never started.
    if !tests::in_own_process(
        "a_failed_reactor_start_is_not_remembered",
        "PERF_TEST_EMFILE_CHILD",
    ) {
        return;
    }
    let counter =
        Counter::new(Software::PageFault, (Proc::CURRENT, Cpu::ALL), fault_opts()).unwrap();
    let sampler = counter.sampler(2).unwrap();
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid rlimit to write.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
    let open = std::fs::read_dir("/proc/self/fd").unwrap().count() as u64;
    let low = libc::rlimit {
        rlim_cur: open + 8,
        rlim_max: lim.rlim_max,
    };
    // SAFETY: `low` is a valid rlimit.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &low) }, 0);
    // Use up every fd left below the limit.
    let mut hog = Vec::new();
    while let Ok(f) = std::fs::File::open("/dev/null") {
        hog.push(f);
    }
    let err = sampler.iter().into_async().map(drop).unwrap_err();
    println!("out of fds: {err}");
    assert!(matches!(&err, Error::Io { .. }), "{err:?}");
    drop(hog);
    // SAFETY: restores the limit read above.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) }, 0);
    let mut stream = sampler
        .iter()
        .into_async()
        .expect("the reactor starts once fds are free again");
    counter.enable().unwrap();
    tests::touch_pages(4);
    assert!(futures::executor::block_on(stream.next()).is_some());
}

#[test]
fn rings_that_can_never_work_are_refused_with_the_reason() {
    tests::require_self_sampling!();
    // Issue: a user stack of 65528 bytes on a 16 KiB ring gave 0 records and 0 lost.
    let mut opts = fault_opts();
    opts.sample_format.user_stack = Some(Size(65528));
    let c = Counter::new(Software::PageFault, (Proc::CURRENT, Cpu::ALL), &opts).unwrap();
    let err = c.sampler(2).unwrap_err();
    let msg = err.to_string();
    println!("{msg}");
    assert!(matches!(err, Error::Sampling(_)));
    assert!(
        msg.contains("65528 bytes") && msg.contains("16376 bytes"),
        "{msg}"
    );
    assert!(msg.contains("sampler(5)"), "{msg}");
    c.sampler(5).unwrap();
    // A counter that neither samples nor asks for side-band records.
    let c = Counter::new(
        Software::PageFault,
        (Proc::CURRENT, Cpu::ALL),
        Opts::default(),
    )
    .unwrap();
    let msg = c.sampler(2).unwrap_err().to_string();
    assert!(
        msg.contains("does not sample") && msg.contains("sample_on"),
        "{msg}"
    );
    // Side-band records alone are fine.
    let mut o = Opts::default();
    o.extra_record.mmap.code = true;
    let c = Counter::new(Software::Dummy, (Proc::CURRENT, Cpu::ALL), &o).unwrap();
    c.sampler(2).unwrap();
    // An inherited counter on every CPU: the kernel refuses its ring; say so and point the way.
    let mut o = fault_opts();
    o.inherit = Some(Inherit::NewChild);
    let c = Counter::new(Software::PageFault, (Proc::CURRENT, Cpu::ALL), &o).unwrap();
    let msg = c.sampler(2).unwrap_err().to_string();
    assert!(
        msg.contains("inherited") && msg.contains("PerCpuSampler"),
        "{msg}"
    );
    // Too many pages for any address space.
    let c = Counter::new(Software::PageFault, (Proc::CURRENT, Cpu::ALL), fault_opts()).unwrap();
    let msg = c.sampler(40).unwrap_err().to_string();
    assert!(
        msg.contains("sampler(40)") && msg.contains("2^18 pages"),
        "{msg}"
    );
}

#[test]
fn period_and_frequency_changes_say_what_the_kernel_refuses() {
    tests::require_self_sampling!();
    let mut o = fault_opts();
    o.sample_on = SampleOn::Freq(100);
    let c = Counter::new(Software::CpuClock, (Proc::CURRENT, Cpu::ALL), &o).unwrap();
    let s = c.sampler(2).unwrap();
    let msg = s.set_frequency(u64::MAX).unwrap_err().to_string();
    assert!(msg.contains("kernel.perf_event_max_sample_rate"), "{msg}");
    s.set_frequency(50).unwrap();
    let c = Counter::new(Software::PageFault, (Proc::CURRENT, Cpu::ALL), fault_opts()).unwrap();
    let s = c.sampler(2).unwrap();
    let msg = s.set_period(1 << 63).unwrap_err().to_string();
    assert!(msg.contains("below 2^63"), "{msg}");
    s.set_period(2).unwrap();
    // SampleOn::Freq(0) is not sampling to the kernel: refused at the open, not at sampler().
    let mut o = fault_opts();
    o.sample_on = SampleOn::Freq(0);
    o.extra_record.comm = true;
    let e = Counter::new(Software::CpuClock, (Proc::CURRENT, Cpu::ALL), &o).unwrap_err();
    assert!(
        matches!(e, perf_event::Error::InvalidOption { .. }),
        "{e:?}"
    );
    let msg = e.to_string();
    assert!(
        msg.contains("SampleOn::Freq(0)") && msg.contains("SampleOn::Count(0)"),
        "{msg}"
    );
}

/// Collected by the stress test's readers of the normal ring.
#[derive(Default)]
struct Seen {
    samples: AtomicU64,
    keys: Mutex<HashSet<(u64, u64)>>,
    problems: Mutex<Vec<String>>,
}

impl Seen {
    fn take(&self, r: &Record, task: Task, last_time: &mut u64) {
        match check_sample(r, task) {
            Ok(Some(key)) => {
                if key.0 < *last_time {
                    self.problem(format!(
                        "time went back in one reader: {} after {last_time}",
                        key.0
                    ));
                }
                *last_time = key.0;
                // On an emulated CPU (the kernel matrix's TCG guests) the sample clock can stand still
                // for a whole pass over the arena, so a page faulting again repeats (time, address):
                // there the count check (delivered + lost = the kernel's count) is what catches a record
                // delivered twice.
                if !self.keys.lock().unwrap().insert(key) && !tests::emulated() {
                    self.problem(format!("record delivered twice: {key:?}"));
                }
                self.samples.fetch_add(1, Ordering::Relaxed);
            }
            Ok(None) => {}
            Err(e) => self.problem(e),
        }
    }

    fn problem(&self, p: String) {
        let mut v = self.problems.lock().unwrap();
        if v.len() < 10 {
            v.push(p);
        }
    }
}

#[test]
fn every_reader_at_once_on_the_same_samplers() {
    tests::require_self_sampling!();
    let secs: u64 = std::env::var("PERF_STRESS_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(if tests::emulated() { 3 } else { 10 });
    let limit = Duration::from_secs(secs * 3 + 30);
    within(limit, "the stress run", move || {
        stress(Duration::from_secs(secs))
    });
}

fn stress(run: Duration) {
    // Below the kernel's throttling (perf_event_max_sample_rate per tick), so every fault is either a
    // sample or counted lost.
    let mut producer = Producer::spawn(20_000);
    let task = Task {
        pid: std::process::id(),
        tid: producer.tid,
    };
    let target = (Proc(producer.tid), Cpu::ALL);
    let mut o = fault_opts();
    o.wake_up.on = WakeUpOn::Samples(16);
    let normal = Counter::new(Software::PageFault, target, &o).unwrap();
    let mut ob = fault_opts();
    ob.write_backward = true;
    let overwrite = Counter::new(Software::PageFault, target, &ob).unwrap();
    // Small rings, so readers contend and records are lost.
    let sampler = Arc::new(normal.sampler(3).unwrap());
    let recorder = Arc::new(overwrite.sampler(2).unwrap());
    let overwrite = Arc::new(overwrite);
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicBool::new(false)); // the producer has exited
    let seen = Arc::new(Seen::default());
    let mut threads = Vec::new();
    let spawn = |threads: &mut Vec<std::thread::JoinHandle<()>>, f: Box<dyn FnOnce() + Send>| {
        threads.push(std::thread::spawn(f));
    };
    // Normal ring: owned iterator, drain, cow next, blocking waits, async, lost(), pause/resume.
    {
        let (s, seen, stop) = (sampler.clone(), seen.clone(), stop.clone());
        spawn(
            &mut threads,
            Box::new(move || {
                let mut last = 0;
                while !stop.load(Ordering::Relaxed) {
                    for (_, r) in s.iter() {
                        seen.take(&r, task, &mut last);
                    }
                    std::thread::sleep(Duration::from_micros(200));
                }
            }),
        );
    }
    {
        let (s, seen, stop) = (sampler.clone(), seen.clone(), stop.clone());
        spawn(
            &mut threads,
            Box::new(move || {
                let mut last = 0;
                let mut cow = s.iter().into_cow();
                while !stop.load(Ordering::Relaxed) {
                    cow.drain(64, |cc, p| seen.take(&p.parse(cc).1, task, &mut last));
                    cow.next(|cc, p| seen.take(&p.parse(cc).1, task, &mut last));
                    std::thread::yield_now();
                }
            }),
        );
    }
    {
        let (s, seen, stop) = (sampler.clone(), seen.clone(), stop.clone());
        spawn(
            &mut threads,
            Box::new(move || {
                let mut last = 0;
                let mut it = s.iter();
                while !stop.load(Ordering::Relaxed) {
                    if let Some((_, r)) = it.next_timeout(Duration::from_millis(20)) {
                        seen.take(&r, task, &mut last);
                    }
                }
            }),
        );
    }
    {
        let (s, seen, stop, done) = (sampler.clone(), seen.clone(), stop.clone(), done.clone());
        spawn(
            &mut threads,
            Box::new(move || {
                let mut last = 0;
                let mut stream = s.iter().into_async().unwrap();
                stream.flush_every(Some(Duration::from_millis(1))).unwrap();
                futures::executor::block_on(std::future::poll_fn(|cx| loop {
                    match Pin::new(&mut stream).poll_next(cx) {
                        Poll::Ready(Some((_, r))) => seen.take(&r, task, &mut last),
                        Poll::Ready(None) => return Poll::Ready(()),
                        Poll::Pending
                            if stop.load(Ordering::Relaxed) && done.load(Ordering::Relaxed) =>
                        {
                            return Poll::Ready(())
                        }
                        Poll::Pending => return Poll::Pending,
                    }
                }));
            }),
        );
    }
    {
        let (s, stop) = (sampler.clone(), stop.clone());
        spawn(
            &mut threads,
            Box::new(move || {
                while !stop.load(Ordering::Relaxed) {
                    let lost = s.lost().unwrap();
                    assert!(lost.format_lost.is_some());
                    std::thread::sleep(Duration::from_millis(1));
                }
            }),
        );
    }
    {
        let (s, stop) = (sampler.clone(), stop.clone());
        spawn(
            &mut threads,
            Box::new(move || {
                while !stop.load(Ordering::Relaxed) {
                    s.pause().unwrap();
                    std::thread::sleep(Duration::from_micros(500));
                    s.resume().unwrap();
                    std::thread::sleep(Duration::from_millis(20));
                }
            }),
        );
    }
    // Overwrite ring: two threads reading newest() while a third keeps resuming the output.
    let flight = Arc::new(Seen::default());
    for _ in 0..2 {
        let (r, flight, stop) = (recorder.clone(), flight.clone(), stop.clone());
        spawn(
            &mut threads,
            Box::new(move || {
                while !stop.load(Ordering::Relaxed) {
                    let batch = r.newest(10_000).unwrap();
                    let mut prev = u64::MAX;
                    for (_, rec) in &batch {
                        match check_sample(rec, task) {
                            Ok(Some(key)) => {
                                if key.0 > prev {
                                    flight.problem(format!(
                                        "not newest first: {} after {prev}",
                                        key.0
                                    ));
                                }
                                prev = key.0;
                                // An emulated CPU's sample clock can stand still for a pass over
                                // the arena (a 6.1 TCG guest: ten pages faulted again at one time),
                                // so there a (time, address) seen twice is not a record seen twice.
                                if !flight.keys.lock().unwrap().insert(key) && !tests::emulated() {
                                    flight.problem(format!(
                                        "newest() returned a record twice: {key:?}"
                                    ));
                                }
                                flight.samples.fetch_add(1, Ordering::Relaxed);
                            }
                            Ok(None) => {}
                            Err(e) => flight.problem(e),
                        }
                    }
                    // Each copy keeps the output paused for an RCU grace period (milliseconds): leave it
                    // running in between, as a flight recorder read on demand would.
                    std::thread::sleep(Duration::from_millis(15));
                }
            }),
        );
    }
    {
        let (r, c, stop) = (recorder.clone(), overwrite.clone(), stop.clone());
        spawn(
            &mut threads,
            Box::new(move || {
                while !stop.load(Ordering::Relaxed) {
                    r.resume().unwrap();
                    c.pause_output(false).unwrap();
                    std::thread::sleep(Duration::from_micros(100));
                }
            }),
        );
    }
    normal.enable().unwrap();
    overwrite.enable().unwrap();
    producer.start();
    std::thread::sleep(run);
    let faults = producer.finish();
    done.store(true, Ordering::Relaxed);
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    // What the readers left behind.
    let mut last = 0;
    while let Some((_, r)) = sampler.iter().next() {
        seen.take(&r, task, &mut last);
    }
    let count = normal.stat().unwrap().count;
    let lost = sampler.lost().unwrap().format_lost.unwrap();
    let samples = seen.samples.load(Ordering::Relaxed);
    println!(
        "{faults} faults in {run:?}: normal ring {samples} samples + {lost} lost = {} (count {count}); \
         flight recorder {} samples",
        samples + lost,
        flight.samples.load(Ordering::Relaxed)
    );
    let problems = seen.problems.lock().unwrap();
    assert!(problems.is_empty(), "normal ring: {problems:#?}");
    let problems = flight.problems.lock().unwrap();
    assert!(problems.is_empty(), "overwrite ring: {problems:#?}");
    assert!(samples > 0 && flight.samples.load(Ordering::Relaxed) > 0);
    assert_eq!(
        samples + lost,
        count,
        "every counted fault is a sample or counted lost"
    );
}

/// A waker whose drop drops a reader: what an executor's task that owns its future does when that future
/// holds an async iterator of the same sampler.
struct DropsAReader(Mutex<Option<perf_event::sample::AsyncIter<'static>>>);

impl Wake for DropsAReader {
    fn wake(self: Arc<Self>) {}
}

impl Drop for DropsAReader {
    fn drop(&mut self) {
        let reader = self.0.get_mut().map(Option::take);
        drop(reader);
    }
}

#[test]
fn a_waker_may_drop_a_reader_of_the_same_sampler_when_a_reader_drops_it() {
    // Issue 37, item 2: `Waiter::drop` dropped the stored waker while holding the sampler's waiter-slot
    // lock (and `Waiter::take` dropped the one it replaced under it): a waker whose drop drops another
    // async iterator of the same sampler took the same lock on the same thread and spun forever.
    tests::require_self_sampling!();
    let counter =
        Counter::new(Software::PageFault, (Proc::CURRENT, Cpu::ALL), fault_opts()).unwrap();
    // A disabled counter: every poll is pending, so the waker stays stored.
    let sampler: &'static perf_event::sample::Sampler =
        Box::leak(Box::new(counter.sampler(2).unwrap()));
    for replaced in [false, true] {
        within(
            Duration::from_secs(10),
            if replaced {
                "a poll that replaced a waker whose drop drops a reader"
            } else {
                "dropping a reader whose waker's drop drops a reader"
            },
            move || {
                let mut a = sampler.iter().into_async().unwrap();
                let b = sampler.iter().into_async().unwrap();
                let waker = Waker::from(Arc::new(DropsAReader(Mutex::new(Some(b)))));
                let polled = Pin::new(&mut a).poll_next(&mut Context::from_waker(&waker));
                assert!(polled.is_pending(), "{polled:?}");
                // The reader's slot holds the last reference.
                drop(waker);
                if replaced {
                    let polled =
                        Pin::new(&mut a).poll_next(&mut Context::from_waker(Waker::noop()));
                    assert!(polled.is_pending(), "{polled:?}");
                }
                drop(a);
            },
        );
    }
}

/// A waker whose wake drops a reader of the same sampler, then says so.
struct WakeDropsAReader {
    reader: Mutex<Option<perf_event::sample::AsyncIter<'static>>>,
    woken: Mutex<mpsc::Sender<()>>,
}

impl Wake for WakeDropsAReader {
    fn wake(self: Arc<Self>) {
        drop(self.reader.lock().unwrap().take());
        let _ = self.woken.lock().unwrap().send(());
    }
}

#[test]
fn a_wake_that_drops_a_reader_of_the_same_sampler_returns() {
    // Issue 37, item 2's class, next attack: the reactor thread wakes a waker whose wake drops another
    // reader of the same sampler (whose drop takes the sampler's waiter-slot lock): the reactor must
    // hold no lock while it wakes.
    tests::require_self_sampling!();
    within(
        Duration::from_secs(10),
        "a wake that drops a reader",
        || {
            let mut opts = fault_opts();
            opts.wake_up.on = WakeUpOn::Samples(1);
            let counter =
                Counter::new(Software::PageFault, (Proc::CURRENT, Cpu::ALL), opts).unwrap();
            let sampler: &'static perf_event::sample::Sampler =
                Box::leak(Box::new(counter.sampler(3).unwrap()));
            let mut a = sampler.iter().into_async().unwrap();
            let (tx, rx) = mpsc::channel();
            let waker = Waker::from(Arc::new(WakeDropsAReader {
                reader: Mutex::new(Some(sampler.iter().into_async().unwrap())),
                woken: Mutex::new(tx),
            }));
            assert!(Pin::new(&mut a)
                .poll_next(&mut Context::from_waker(&waker))
                .is_pending());
            drop(waker);
            counter.enable().unwrap();
            tests::touch_pages(10);
            rx.recv_timeout(Duration::from_secs(5))
                .expect("the kernel's wakeup never reached the waker");
            // The reactor still works: the next wakeup reaches the next waker.
            let (count, waker) = {
                let (tx, rx) = mpsc::channel();
                let w = Waker::from(Arc::new(WakeDropsAReader {
                    reader: Mutex::new(None),
                    woken: Mutex::new(tx),
                }));
                (rx, w)
            };
            while let Poll::Ready(Some(_)) =
                Pin::new(&mut a).poll_next(&mut Context::from_waker(&waker))
            {}
            tests::touch_pages(10);
            count
                .recv_timeout(Duration::from_secs(5))
                .expect("the reactor stopped after a wake that dropped a reader");
            drop(a);
        },
    );
}

/// Page faults of the calling thread on every CPU, one sample each, with time (for the merge).
fn per_cpu_faults() -> perf_event::sample::PerCpuSampler {
    let mut opts = Opts::default();
    opts.exclude.kernel = true;
    opts.exclude.hv = true;
    opts.sample_on = SampleOn::Count(1);
    opts.record_id_format.time = true;
    opts.stat_format.lost_records = true;
    perf_event::sample::PerCpuSampler::new(Software::PageFault, Proc::CURRENT, &opts, 6).unwrap()
}

fn lost_total(set: &perf_event::sample::PerCpuSampler) -> u64 {
    set.samplers().map(|(_, s)| s.lost().unwrap().total()).sum()
}

#[test]
fn records_a_dropped_merged_iterator_had_read_are_read_by_the_next_one() {
    // Issue 37, item 3: the first `next()` of a merged iterator read every ring into its queue and
    // published the tails; dropping it after `take(10)` threw the queue away: 1000 samples, 10 taken,
    // 0 readable afterwards, 0 counted lost.
    tests::require_self_sampling!();
    let set = per_cpu_faults();
    set.enable().unwrap();
    tests::touch_pages(1000);
    set.disable().unwrap();
    let first = set.iter().take(10).count();
    let rest = set.iter().count();
    let lost = lost_total(&set);
    println!("sync: {first} taken, then {rest} read, {lost} lost");
    assert_eq!(first, 10);
    assert_eq!(lost, 0, "a 64-page ring per CPU holds 1000 samples");
    assert!(first + rest >= 1000, "{first} + {rest} of at least 1000");

    // The async form, dropped after 10 (a cancelled task).
    set.enable().unwrap();
    tests::touch_pages(1000);
    set.disable().unwrap();
    let mut stream = set.iter_async().unwrap();
    let first = futures::executor::block_on(async {
        let mut n = 0;
        while n < 10 && stream.next().await.is_some() {
            n += 1;
        }
        n
    });
    drop(stream);
    let rest = set.iter().count();
    let lost = lost_total(&set);
    println!("async: {first} taken, then {rest} read, {lost} lost");
    assert_eq!(first, 10);
    assert_eq!(lost, 0);
    assert!(first + rest >= 1000, "{first} + {rest} of at least 1000");
}

#[test]
fn wake_up_watermarks_no_ring_can_reach_are_refused_with_the_ring_size() {
    // Issue 37, item 4: `WakeUpOn::Bytes(w)` with `w` at or above the ring's size was accepted; the
    // kernel clamps it to the size, which the ring never fills past, so no reader was ever woken.
    tests::require_self_sampling!();
    let bytes = 4 * tests::page_size() as u64; // sampler(2)
    for w in [bytes as u32, bytes as u32 - 8, u32::MAX] {
        let mut opts = fault_opts();
        opts.wake_up.on = WakeUpOn::Bytes(w);
        let c = Counter::new(Software::PageFault, (Proc::CURRENT, Cpu::ALL), &opts).unwrap();
        match c.sampler(2) {
            Ok(_) => panic!("WakeUpOn::Bytes({w}) accepted on a ring of {bytes} bytes"),
            Err(e) => {
                let msg = e.to_string();
                println!("{msg}");
                assert!(matches!(e, Error::Sampling(_)), "{e:?}");
                assert!(
                    msg.contains(&format!("{bytes} bytes")) && msg.contains(&format!("Bytes({w})")),
                    "{msg}"
                );
            }
        }
    }
    // The next attack: a sample count the ring cannot hold before it fills. The kernel wakes at half
    // the ring as well, so a waiting reader is still woken (nothing to refuse).
    let mut opts = fault_opts();
    opts.wake_up.on = WakeUpOn::Samples(u32::MAX);
    let c = Counter::new(Software::PageFault, (Proc::CURRENT, Cpu::ALL), &opts).unwrap();
    let sampler = c.sampler(2).unwrap();
    c.enable().unwrap();
    let woken = std::thread::scope(|s| {
        let waiter = s.spawn(|| {
            let start = Instant::now();
            let got = sampler
                .iter()
                .next_timeout(Duration::from_secs(5))
                .is_some();
            (got, start.elapsed())
        });
        std::thread::sleep(Duration::from_millis(50));
        tests::touch_pages(1000);
        waiter.join().unwrap()
    });
    c.disable().unwrap();
    assert!(woken.0 && woken.1 < Duration::from_secs(4), "{woken:?}");
    // A watermark the ring reaches: accepted, and a waiting reader is woken by it.
    let mut opts = fault_opts();
    opts.wake_up.on = WakeUpOn::Bytes(1024);
    let c = Counter::new(Software::PageFault, (Proc::CURRENT, Cpu::ALL), &opts).unwrap();
    let sampler = c.sampler(2).unwrap();
    c.enable().unwrap();
    tests::touch_pages(200);
    let start = Instant::now();
    let got = sampler.iter().next_timeout(Duration::from_secs(5));
    assert!(got.is_some() && start.elapsed() < Duration::from_secs(4));
}
