//! fd and memory hygiene: every fd the crate makes is close-on-exec; thousands of open/close
//! cycles leave the fd count and RSS flat; handles dropped in any order the borrow checker allows
//! are sound; the thread-safety bounds hold at compile time.
#![allow(clippy::field_reassign_with_default)] // options are set field by field, as in the docs

use std::sync::Mutex;
use std::time::Duration;

use perf_event::config::{Cpu, Opts, Proc, SampleOn};
use perf_event::count::{Counter, CounterGroup, PerCpu};
use perf_event::event::sw::Software;
use perf_event::event::Event;
use perf_event::sample::record::Record;
use perf_event::sample::{AsyncIter, CowIter, Iter, MergedIter, PerCpuSampler, Sampler};
use perf_event::Error;

const ME: (Proc, perf_event::config::All) = (Proc::CURRENT, Cpu::ALL);

/// Tests that count this process's fds or RSS run one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

// --- Compile-time thread-safety bounds (the crate docs state them) ---

const fn send_sync<T: Send + Sync>() {}
const fn send<T: Send>() {}
const _: () = {
    send_sync::<Counter>();
    send_sync::<CounterGroup>();
    send_sync::<PerCpu<Counter>>();
    send_sync::<Sampler>();
    send_sync::<PerCpuSampler>();
    send_sync::<Event>();
    send_sync::<Opts>();
    send_sync::<Record>();
    send_sync::<Error>();
    send::<Iter<'static>>();
    send::<CowIter<'static>>();
    send::<AsyncIter<'static>>();
    send::<MergedIter<'static>>();
};

fn user_sampling(period: u64) -> Opts {
    let mut o = Opts::default();
    o.exclude.kernel = true;
    o.exclude.hv = true;
    o.sample_on = SampleOn::Count(period);
    o.sample_format.data_addr = true;
    o
}

/// The `flags:` field (octal) of `/proc/self/fdinfo/<fd>`.
fn fd_flags(fd: &str) -> Option<u32> {
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).ok()?;
    info.lines()
        .find_map(|l| l.strip_prefix("flags:"))
        .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
}

/// Every open fd with what it points at.
fn fds() -> Vec<(String, String)> {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let target = std::fs::read_link(e.path()).ok()?;
            Some((name, target.to_string_lossy().into_owned()))
        })
        .collect()
}

fn fd_count() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// Resident set size in bytes.
fn rss() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * tests::page_size() as u64
}

#[test]
fn every_fd_is_cloexec() {
    let _g = serial();
    let counter = Counter::new(Software::PageFault, ME, user_sampling(1)).unwrap();
    let group = {
        let mut g = CounterGroup::new(Software::TaskClock, ME, user_sampling(0)).unwrap();
        g.add(
            Software::PageFault,
            perf_event::config::sibling::Opts::default(),
        )
        .unwrap();
        g
    };
    let sampler = counter.sampler(2).unwrap();
    let mut iter = sampler.iter().into_async().unwrap();
    iter.flush_every(Some(Duration::from_millis(50))).unwrap();

    let mut kinds = std::collections::BTreeMap::<String, usize>::new();
    let mut not_cloexec = Vec::new();
    for (fd, target) in fds() {
        let kind = match target.as_str() {
            "anon_inode:[perf_event]" => "perf_event",
            "anon_inode:[eventpoll]" => "epoll",
            "anon_inode:[timerfd]" => "timerfd",
            _ => continue,
        };
        let Some(flags) = fd_flags(&fd) else { continue };
        *kinds.entry(kind.to_owned()).or_default() += 1;
        if flags & libc::O_CLOEXEC as u32 == 0 {
            not_cloexec.push(format!("fd {fd} ({target}) flags {flags:o}"));
        }
    }
    println!("checked fds: {kinds:?}");
    assert!(not_cloexec.is_empty(), "not close-on-exec: {not_cloexec:?}");
    // The counter, its sampler's dup, the reactor's dup, two group members; the epoll set; the timer.
    assert!(
        kinds.get("perf_event").copied().unwrap_or(0) >= 5,
        "{kinds:?}"
    );
    assert!(kinds.contains_key("epoll"), "{kinds:?}");
    assert!(kinds.contains_key("timerfd"), "{kinds:?}");
    drop(iter);
    drop(sampler);
    drop((counter, group));
}

/// Opens and closes `n` handles with `cycle`, after a warm-up; returns the fd and RSS growth.
fn cycles(n: usize, mut cycle: impl FnMut(usize)) -> (isize, i64) {
    for i in 0..n / 20 {
        cycle(i);
    }
    let (fd0, rss0) = (fd_count(), rss());
    for i in 0..n {
        cycle(i);
    }
    let (fd1, rss1) = (fd_count(), rss());
    (fd1 as isize - fd0 as isize, rss1 as i64 - rss0 as i64)
}

const RSS_SLACK: i64 = 4 << 20;

#[test]
fn ten_thousand_counters_leave_fds_and_rss_flat() {
    let _g = serial();
    let opts = {
        let mut o = Opts::default();
        o.exclude.kernel = true;
        o.stat_format.time_enabled = true;
        o
    };
    let start = std::time::Instant::now();
    let (dfd, drss) = cycles(10_000, |i| {
        let c = Counter::new(Software::TaskClock, ME, &opts).unwrap();
        if i % 2 == 0 {
            c.enable().unwrap();
        }
        let _ = c.stat().unwrap();
    });
    println!(
        "10000 counters in {:?}: fd delta {dfd}, RSS delta {} KiB",
        start.elapsed(),
        drss / 1024
    );
    assert_eq!(dfd, 0, "fds leaked");
    assert!(drss < RSS_SLACK, "RSS grew by {drss} bytes");
}

#[test]
fn two_thousand_samplers_leave_fds_and_rss_flat() {
    let _g = serial();
    let opts = user_sampling(1);
    let start = std::time::Instant::now();
    let (dfd, drss) = cycles(2_000, |i| {
        let c = Counter::new(Software::PageFault, ME, &opts).unwrap();
        let s = c.sampler(1).unwrap();
        if i % 4 == 0 {
            s.enable().unwrap();
            tests::touch_pages(4);
            s.disable().unwrap();
            assert!(s.iter().count() >= 4);
        }
        // Alternate the drop order.
        if i % 2 == 0 {
            drop(c);
            drop(s);
        } else {
            drop(s);
            drop(c);
        }
    });
    println!(
        "2000 samplers in {:?}: fd delta {dfd}, RSS delta {} KiB",
        start.elapsed(),
        drss / 1024
    );
    assert_eq!(dfd, 0, "fds leaked");
    assert!(drss < RSS_SLACK, "RSS grew by {drss} bytes");
}

#[test]
fn async_registrations_leave_fds_flat() {
    let _g = serial();
    let opts = user_sampling(1);
    let (dfd, drss) = cycles(500, |i| {
        let c = Counter::new(Software::PageFault, ME, &opts).unwrap();
        let s = c.sampler(0).unwrap();
        let mut a = s.iter().into_async().unwrap();
        if i % 2 == 0 {
            a.flush_every(Some(Duration::from_millis(10))).unwrap();
        }
        if i % 3 == 0 {
            // Back to sync: the waiter goes (the registration stays with the sampler).
            let mut it = a.into_sync();
            drop(c);
            // The sync iterator still reads (the sampler holds its own fd) after the counter is gone.
            let _ = it.next();
        } else {
            drop(c);
            drop(a);
        }
        drop(s);
    });
    println!(
        "500 async registrations: fd delta {dfd}, RSS delta {} KiB",
        drss / 1024
    );
    assert_eq!(dfd, 0, "fds leaked");
    assert!(drss < RSS_SLACK, "RSS grew by {drss} bytes");
}

#[test]
fn a_waited_samplers_registration_lasts_until_it_drops_and_leaves_fds_flat() {
    // Issue 36, target 2: every iterator that waited registered its sampler with the reactor anew
    // (a dup of the fd, an epoll ADD) and dropped the registration with it (an epoll DEL, a close),
    // at every poll of a profiler. One registration (one dup) now lasts from the first wait until
    // the sampler drops, shared by every later iterator, and goes with the sampler.
    let _g = serial();
    let opts = user_sampling(1);
    let wait_on = |s: &Sampler, t: &Sampler| {
        assert!(s.iter().next_timeout(Duration::ZERO).is_none());
        assert!(s
            .iter()
            .into_cow()
            .next_timeout(Duration::ZERO, |_, _| ())
            .is_none());
        let mut merged = MergedIter::new([(0, s.iter()), (1, t.iter())]);
        assert!(merged.next_timeout(Duration::ZERO).is_none());
        drop(merged.into_async().unwrap());
    };
    // The reactor (its epoll set) is started before counting.
    {
        let c = Counter::new(Software::PageFault, ME, &opts).unwrap();
        let (s, t) = (
            c.sampler(0).unwrap(),
            Counter::new(Software::PageFault, ME, &opts).unwrap(),
        );
        let t = t.sampler(0).unwrap();
        wait_on(&s, &t);
    }
    let base = fd_count();
    let (c, d) = (
        Counter::new(Software::PageFault, ME, &opts).unwrap(),
        Counter::new(Software::PageFault, ME, &opts).unwrap(),
    );
    let (s, t) = (c.sampler(0).unwrap(), d.sampler(0).unwrap());
    let opened = fd_count();
    wait_on(&s, &t);
    let registered = fd_count();
    assert_eq!(
        registered,
        opened + 2,
        "one registration (a dup of the fd) per waited sampler, kept between iterators"
    );
    for _ in 0..100 {
        wait_on(&s, &t);
    }
    assert_eq!(
        fd_count(),
        registered,
        "later iterators reuse the registration"
    );
    drop((s, t));
    drop((c, d));
    assert_eq!(fd_count(), base, "the registrations go with their samplers");
    let (dfd, drss) = cycles(500, |i| {
        let c = Counter::new(Software::PageFault, ME, &opts).unwrap();
        let d = Counter::new(Software::PageFault, ME, &opts).unwrap();
        let (s, t) = (c.sampler(0).unwrap(), d.sampler(0).unwrap());
        wait_on(&s, &t);
        // Alternate the drop order.
        if i % 2 == 0 {
            drop((c, s));
        } else {
            drop((s, c));
        }
        drop((t, d));
    });
    println!(
        "500 waited sampler pairs: fd delta {dfd}, RSS delta {} KiB",
        drss / 1024
    );
    assert_eq!(dfd, 0, "fds leaked");
    assert!(drss < RSS_SLACK, "RSS grew by {drss} bytes");
}

#[test]
fn sampler_outlives_its_counter() {
    let _g = serial();
    let c = Counter::new(Software::PageFault, ME, user_sampling(1)).unwrap();
    let s = c.sampler(3).unwrap();
    drop(c);
    s.enable().unwrap();
    tests::touch_pages(64);
    s.disable().unwrap();
    let n = s
        .iter()
        .filter(|(_, r)| matches!(r, Record::Sample(_)))
        .count();
    assert!(n >= 64, "{n} samples after the counter was dropped");
    assert!(s.stat().unwrap().count >= 64);
}

#[test]
fn a_dropped_sampler_frees_the_counter_for_another() {
    let _g = serial();
    let c = Counter::new(Software::PageFault, ME, user_sampling(1)).unwrap();
    for _ in 0..3 {
        let s = c.sampler(0).unwrap();
        assert!(matches!(c.sampler(0), Err(Error::SamplerExists)));
        drop(s);
    }
    // A sampler dropped on another thread frees it too.
    let s = c.sampler(0).unwrap();
    std::thread::spawn(move || drop(s)).join().unwrap();
    let s = c.sampler(1).unwrap();
    // The async iterator is dropped before its sampler (the borrow checker forbids the reverse),
    // the counter before both.
    let a = s.iter().into_async().unwrap();
    drop(c);
    drop(a);
    drop(s);
}

#[test]
fn samplers_and_async_iterators_dropped_on_other_threads() {
    let _g = serial();
    let counters: Vec<Counter> = (0..8)
        .map(|_| Counter::new(Software::PageFault, ME, user_sampling(1)).unwrap())
        .collect();
    let samplers: Vec<Sampler> = counters.iter().map(|c| c.sampler(1).unwrap()).collect();
    // The counters count this thread.
    for s in &samplers {
        s.enable().unwrap();
    }
    tests::touch_pages(8);
    for s in &samplers {
        s.disable().unwrap();
    }
    std::thread::scope(|scope| {
        for (i, s) in samplers.iter().enumerate() {
            scope.spawn(move || {
                let mut a = s.iter().into_async().unwrap();
                if i % 2 == 0 {
                    a.flush_every(Some(Duration::from_millis(5))).unwrap();
                }
                if i % 4 < 2 {
                    // Read one record through the reactor, leave the rest.
                    let r = futures::executor::block_on(futures::StreamExt::next(&mut a));
                    assert!(r.is_some());
                }
                drop(a);
            });
        }
    });
    // Counters first, samplers afterwards, in reverse order; what is left is still readable.
    // (An iterator that read one record had parsed its batch: dropping it dropped the rest.)
    drop(counters);
    for (i, s) in samplers.into_iter().enumerate().rev() {
        let left = s.iter().count();
        if i % 4 >= 2 {
            assert!(left >= 8, "sampler {i}: {left} records left");
        }
        drop(s);
    }
}

#[test]
fn per_cpu_sampler_drops_cleanly_with_records_unread() {
    let _g = serial();
    let fd0 = fd_count();
    {
        let set =
            PerCpuSampler::new(Software::PageFault, Proc::CURRENT, user_sampling(1), 2).unwrap();
        set.enable().unwrap();
        tests::touch_pages(100);
        set.disable().unwrap();
        let mut it = set.iter();
        // Read a few, leave the rest queued and in the rings.
        let _ = it.next();
        drop(it);
    }
    assert_eq!(fd_count(), fd0);
}
