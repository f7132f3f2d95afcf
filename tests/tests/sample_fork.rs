//! `fork()` while perf-event is in use: a child can never map its parent's ring (two consumers of one
//! `data_tail`), and no lock a thread held at the fork is left held in the child (which has only the
//! thread that forked): every call a child makes returns. Each test runs in a process of its own
//! (`tests::in_own_process`): it forks, which is only sound without libtest's other threads around. In
//! the lock tests a thread hammers one path in a loop while the main thread forks again and again; each
//! child runs its calls under a one-second `alarm` (ten on an emulated CPU), so a hang kills it and
//! fails the test instead of hanging the suite.

use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use perf_event::config::{Cpu, Opts, Proc, SampleOn, WakeUpOn};
use perf_event::count::Counter;
use perf_event::event::sw::Software;
use perf_event::Error;
use tests::{paranoid, Skip};

/// Forks this many times per test, a little later into the hammer's loop each time.
const FORKS: u32 = 25;

/// How long a child may take: one second, or ten on an emulated CPU (the kernel matrix's TCG guests,
/// where everything runs many times slower).
fn child_limit() -> u32 {
    if tests::emulated() {
        10
    } else {
        1
    }
}

/// Whether to run the test's body here: `false` in libtest's process (after a skip, or after running
/// the test again in a process of its own, which forks).
fn run_here(test: &str, flag: &str) -> bool {
    if !tests::may_sample_self() {
        tests::skip(
            Skip::Privilege,
            &format!("perf_event_paranoid {} > 2", paranoid()),
        );
        return false;
    }
    tests::in_own_process(test, flag)
}

/// Page faults of this process, sampled, user space only.
fn sampling() -> Opts {
    let mut opts = Opts::default();
    opts.exclude.kernel = true;
    opts.exclude.hv = true;
    opts.sample_on = SampleOn::Count(1);
    opts
}

fn fault_counter() -> Counter {
    Counter::new(Software::PageFault, (Proc::CURRENT, Cpu::ALL), sampling()).unwrap()
}

/// Runs `hammer` in a loop on another thread while this thread forks [`FORKS`] times; each child runs
/// `child` with a one-second alarm ([`child_limit`]) and must return `Ok` within it.
fn forks_while(hammer: impl Fn() + Sync, child: impl Fn() -> Result<(), String>) {
    let stop = AtomicBool::new(false);
    let mut failures = Vec::new();
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                hammer();
            }
        });
        std::thread::sleep(Duration::from_millis(20));
        for i in 0..FORKS {
            let pid = tests::fork_child(child_limit(), &child);
            if let Some(Err(e)) = tests::wait_child(pid, true) {
                failures.push(format!("fork {i}: {e}"));
            }
            std::thread::sleep(Duration::from_micros(300 + 137 * u64::from(i)));
        }
        stop.store(true, Ordering::Relaxed);
    });
    assert!(failures.is_empty(), "{failures:#?}");
}

/// In a fork child: the parent's event is refused, by perf-event and by perf-core, 200 times, and an event
/// of the child's own samples.
fn child_cannot_map(counter: &Counter) -> Result<(), String> {
    for _ in 0..200 {
        match counter.sampler(1) {
            Err(Error::Ring(e)) if matches!(e.kind(), perf_core::ErrorKind::InheritedFd { .. }) => {
            }
            // The parent's claim, copied while it held a sampler: no mapping either.
            Err(Error::SamplerExists) => {}
            Ok(_) => return Err("the child mapped its parent's ring".into()),
            Err(e) => return Err(format!("unexpected refusal: {e}")),
        }
        match perf_core::Ring::map_exclusive(counter.perf_fd(), 1, perf_core::RingMode::Normal) {
            Err(e) if matches!(e.kind(), perf_core::ErrorKind::InheritedFd { .. }) => {}
            Ok(_) => return Err("perf-core mapped the parent's ring in the child".into()),
            Err(e) => return Err(format!("perf-core: unexpected refusal: {e}")),
        }
    }
    own_sampler_works()
}

/// Opens, samples and reads a counter of the child's own: what a child is meant to do.
fn own_sampler_works() -> Result<(), String> {
    let counter = fault_counter();
    let sampler = counter
        .sampler(2)
        .map_err(|e| format!("own sampler: {e}"))?;
    counter.enable().map_err(|e| e.to_string())?;
    tests::touch_pages(4);
    counter.disable().map_err(|e| e.to_string())?;
    let n = sampler.iter().count();
    if n < 4 {
        return Err(format!("own sampler read {n} records, expected at least 4"));
    }
    Ok(())
}

#[test]
fn a_fork_child_cannot_map_its_parents_event() {
    // Issue (soundness round 3): the safe mapping proved exclusivity with SET_OUTPUT(fd, -1), checked
    // only within the process; parent and child share the fd, both passed the check, and the kernel
    // attached the child's mapping to the parent's ring: two consumers of one tail.
    if !run_here(
        "a_fork_child_cannot_map_its_parents_event",
        "PERF_TEST_FORK_MAP",
    ) {
        return;
    }
    let counter = fault_counter();
    // No other thread (nothing a fork could strand): parent and child each map the one event and drop
    // the ring in a loop, as the reproduction did, 10 times over.
    for round in 0..10 {
        let pid = tests::fork_child(child_limit(), || child_cannot_map(&counter));
        let mut maps = 0;
        let end = loop {
            if let Ok(sampler) = counter.sampler(1) {
                maps += 1;
                drop(sampler);
            }
            if let Some(end) = tests::wait_child(pid, false) {
                break end;
            }
        };
        if let Err(e) = end {
            panic!("round {round}: {e} while the parent mapped {maps} times");
        }
    }
    // The parent's own counter is still its to map, and the message tells a child what to do.
    let sampler = counter.sampler(1).unwrap();
    drop(sampler);
    let fd = counter.perf_fd().try_clone().unwrap();
    assert!(fd.opened_here());
    let text =
        perf_core::Error::from(perf_core::ErrorKind::InheritedFd { area: "data" }).to_string();
    assert!(text.contains("open the event again in the child"), "{text}");
    assert!(fd.as_raw_fd() >= 0);
}

#[test]
fn a_fork_while_a_thread_maps_a_ring_leaves_no_lock_held() {
    // Issue (soundness round 3): a fork while a thread was inside the mapping's in-process lock left it
    // locked in the child, whose first `Counter::sampler` blocked forever (on the first fork, every run).
    if !run_here(
        "a_fork_while_a_thread_maps_a_ring_leaves_no_lock_held",
        "PERF_TEST_FORK_EXCLUSIVE",
    ) {
        return;
    }
    forks_while(
        || {
            let counter = fault_counter();
            let _ = counter.sampler(1);
        },
        own_sampler_works,
    );
}

#[test]
fn a_fork_while_a_thread_registers_waiters_leaves_no_lock_held() {
    // Issue (soundness round 3): the reactor's slot (held across its start and every registration) and
    // a sampler's waiters lock could be left held by a fork.
    if !run_here(
        "a_fork_while_a_thread_registers_waiters_leaves_no_lock_held",
        "PERF_TEST_FORK_REACTOR",
    ) {
        return;
    }
    let counter = fault_counter();
    let sampler = counter.sampler(2).unwrap();
    forks_while(
        // Each blocking wait takes a waiter of the sampler's reactor registration (made at the first
        // wait, kept until the sampler drops).
        || {
            let _ = sampler.iter().next_timeout(Duration::ZERO);
        },
        || {
            // The parent's sampler: its waits end at once (its ring is the parent's) ...
            if sampler
                .iter()
                .next_timeout(Duration::from_millis(5))
                .is_some()
            {
                return Err("a record from the parent's ring".into());
            }
            // ... and a sampler of the child's own waits through a reactor of the child's own.
            let counter = fault_counter();
            let own = counter.sampler(2).map_err(|e| e.to_string())?;
            if own.iter().next_timeout(Duration::from_millis(5)).is_some() {
                return Err("a record from a disabled counter".into());
            }
            let stream = own.iter().into_async().map_err(|e| e.to_string())?;
            drop(stream);
            Ok(())
        },
    );
}

#[test]
fn a_fork_childs_copy_of_a_waited_sampler_leaves_the_parents_wakeups_alone() {
    // Issue 36, target 2: a sampler's reactor registration now lasts until the sampler drops, so a
    // child made after a wait holds a copy of it, over the parent's epoll set (which a fork shares).
    // The child's waits and its drop of the copy must leave the parent's registration in place and
    // its wakeups to the parent: a waiting parent thread is still woken.
    if !run_here(
        "a_fork_childs_copy_of_a_waited_sampler_leaves_the_parents_wakeups_alone",
        "PERF_TEST_FORK_KEPT_REGISTRATION",
    ) {
        return;
    }
    let mut opts = sampling();
    opts.wake_up.on = WakeUpOn::Samples(1);
    let counter = Counter::new(Software::PageFault, (Proc::CURRENT, Cpu::ALL), &opts).unwrap();
    let mut kept = Some(counter.sampler(4).unwrap());
    let sampler = kept.as_ref().unwrap();
    assert!(sampler.iter().next_timeout(Duration::ZERO).is_none());
    drop(sampler.iter().into_async().unwrap());
    for _ in 0..5 {
        let pid = tests::fork_child(child_limit(), || {
            let sampler = kept.take().ok_or("no sampler")?;
            // The parent's ring: the wait ends at once, without polling the shared event.
            if sampler
                .iter()
                .next_timeout(Duration::from_millis(5))
                .is_some()
            {
                return Err("a record from the parent's ring".into());
            }
            // Closes the child's duplicate only; the parent's set is not the child's to change.
            drop(sampler);
            own_sampler_works()
        });
        tests::wait_child(pid, true).unwrap().unwrap();
    }
    let sampler = kept.as_ref().unwrap();
    let mut woken = 0;
    for round in 0..5 {
        let (got, took) = std::thread::scope(|s| {
            let waiting = s.spawn(|| {
                let start = Instant::now();
                let got = sampler.iter().next_timeout(Duration::from_secs(10));
                (got.is_some(), start.elapsed())
            });
            std::thread::sleep(Duration::from_millis(50));
            counter.enable().unwrap();
            tests::touch_pages(4);
            counter.disable().unwrap();
            waiting.join().unwrap()
        });
        assert!(got, "round {round}: no record after {took:?}");
        assert!(
            took < Duration::from_secs(5),
            "round {round}: woken after {took:?}"
        );
        woken += usize::from(took >= Duration::from_millis(40));
        let _ = sampler.iter().count();
    }
    println!("{woken} of 5 waits were woken by the kernel (the others found records at once)");
}

#[test]
fn a_fork_while_a_thread_reads_or_pauses_a_sampler_leaves_no_lock_held() {
    // Issue (soundness round 3): a sampler's ring and holds locks could be left held by a fork.
    if !run_here(
        "a_fork_while_a_thread_reads_or_pauses_a_sampler_leaves_no_lock_held",
        "PERF_TEST_FORK_SAMPLER",
    ) {
        return;
    }
    let counter = fault_counter();
    let sampler = counter.sampler(2).unwrap();
    counter.enable().unwrap();
    forks_while(
        || {
            let _ = sampler.pause();
            let _ = sampler.iter().next();
            let _ = sampler.resume();
            tests::touch_pages(1);
        },
        || {
            // The parent's sampler, used in the child: every call returns.
            sampler.pause().map_err(|e| format!("pause: {e}"))?;
            sampler.resume().map_err(|e| format!("resume: {e}"))?;
            counter
                .pause_output(true)
                .map_err(|e| format!("pause_output: {e}"))?;
            counter
                .pause_output(false)
                .map_err(|e| format!("resume_output: {e}"))?;
            let mut it = sampler.iter();
            match it.try_next() {
                Some(Err(Error::Ring(e)))
                    if matches!(e.kind(), perf_core::ErrorKind::ForkedChild { .. }) => {}
                other => return Err(format!("reading the parent's ring: {other:?}")),
            }
            if it.next().is_some() {
                return Err("the reader went on after ForkedChild".into());
            }
            sampler.lost().map_err(|e| format!("lost: {e}"))?;
            own_sampler_works()
        },
    );
    counter.disable().unwrap();
}

/// A counter of this thread's page faults with an overwrite ring (`write_backward`).
fn overwrite_fault_counter() -> Counter {
    let mut opts = sampling();
    opts.write_backward = true;
    Counter::new(Software::PageFault, (Proc::CURRENT, Cpu::ALL), opts).unwrap()
}

fn is_forked_child(e: &Error) -> bool {
    matches!(e, Error::Ring(e) if matches!(e.kind(), perf_core::ErrorKind::ForkedChild { .. }))
}

#[test]
fn a_fork_childs_newest_leaves_the_parents_paused_ring_paused() {
    // Issue 37, item 5: a child's `newest()` paused and resumed output on the fd it shares with the
    // parent (from its copy of the pause state) before it noticed it was a child: the parent's paused
    // overwrite ring received 20 records.
    if !run_here(
        "a_fork_childs_newest_leaves_the_parents_paused_ring_paused",
        "PERF_TEST_FORK_NEWEST_PAUSE",
    ) {
        return;
    }
    let counter = overwrite_fault_counter();
    let sampler = counter.sampler(4).unwrap();
    counter.enable().unwrap();
    tests::touch_pages(5);
    let before = sampler.newest(usize::MAX).unwrap().len();
    assert!(before >= 5, "{before} records before the pause");
    // Paused through the fd (as a user may, with the sampler's `AsFd`): the sampler's pause state,
    // which the child copies, does not know it.
    perf_sys::ioctl::pause_output(counter.fd(), true).unwrap();
    let pid = tests::fork_child(child_limit(), || {
        match sampler.newest(10) {
            Err(e) if is_forked_child(&e) => {}
            other => return Err(format!("newest in the child: {:?}", other.map(|v| v.len()))),
        }
        match sampler.iter().try_next() {
            Some(Err(e)) if is_forked_child(&e) => {}
            other => return Err(format!("a forward read in the child: {other:?}")),
        }
        // Registering the shared fd with the child's reactor (an epoll ADD polls it) would take the
        // parent's pending wakeup: refused before it.
        match sampler.iter().into_async() {
            Err(e) if is_forked_child(&e) => Ok(()),
            Err(e) => Err(format!("into_async in the child: {e}")),
            Ok(_) => Err("into_async in the child registered the parent's event".into()),
        }
    });
    tests::wait_child(pid, true).unwrap().unwrap();
    tests::touch_pages(100);
    // A few faults may land between the last `newest` (which resumed the output) and the pause; the
    // 100 pages touched after the child ran must not.
    let after = sampler.newest(usize::MAX).unwrap().len();
    assert!(
        after < 50,
        "the parent's paused ring received {after} records (100 pages touched while paused)"
    );
    perf_sys::ioctl::pause_output(counter.fd(), false).unwrap();
    tests::touch_pages(5);
    assert!(sampler.newest(usize::MAX).unwrap().len() >= 5);
    counter.disable().unwrap();
}

#[test]
fn a_fork_during_another_threads_newest_makes_the_childs_error_forked_child() {
    // Issue 37, item 5: a fork that landed while another thread copied the overwrite ring (holding its
    // lock) made the child's `newest()` say RingBusy instead of ForkedChild.
    if !run_here(
        "a_fork_during_another_threads_newest_makes_the_childs_error_forked_child",
        "PERF_TEST_FORK_NEWEST_BUSY",
    ) {
        return;
    }
    let counter = overwrite_fault_counter();
    let sampler = counter.sampler(4).unwrap();
    counter.enable().unwrap();
    forks_while(
        || {
            tests::touch_pages(2);
            let _ = sampler.newest(100);
        },
        || {
            for _ in 0..3 {
                match sampler.newest(10) {
                    Err(e) if is_forked_child(&e) => {}
                    other => {
                        return Err(format!("newest in the child: {:?}", other.map(|v| v.len())))
                    }
                }
            }
            Ok(())
        },
    );
    counter.disable().unwrap();
}
