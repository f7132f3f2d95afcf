//! `perf_core::fork::Lock` across `fork()`: a child takes over only a lock whose holder does not exist in
//! it, and a takeover never lets two references reach one value.
//!
//! Each test runs in a process of its own (`tests::in_own_process`), since it forks; each child runs under
//! an `alarm`, so a hang kills it and fails the test.

use perf_core::fork::Lock;

/// One second, or ten on an emulated CPU.
fn child_limit() -> u32 {
    if tests::emulated() {
        10
    } else {
        1
    }
}

#[test]
fn a_fork_child_cannot_take_a_lock_its_own_thread_holds() {
    // Issue 37, item 1: a thread holding a guard forked; in the child the same thread's `try_lock`
    // "took over" the lock (its holder's generation was older) and handed out a second guard while the
    // first lived: two `&mut` to one value.
    if !tests::in_own_process(
        "a_fork_child_cannot_take_a_lock_its_own_thread_holds",
        "PERF_TEST_FORK_LOCK_OWN",
    ) {
        return;
    }
    let lock = Lock::new(vec![1u8, 2, 3]);
    let mut first = lock.lock();
    first.push(4);
    let pid = tests::fork_child(child_limit(), || {
        if let Some(mut second) = lock.try_lock() {
            second.push(5);
            return Err(format!(
                "try_lock handed out a second guard while this thread's first lives (the first now \
                 sees {:?})",
                *first
            ));
        }
        // A thread of the child's own cannot take it either: its holder (the thread that forked)
        // lives here.
        let other = std::thread::scope(|s| s.spawn(|| lock.try_lock().is_some()).join());
        if other.map_err(|_| "the child's thread panicked")? {
            return Err(
                "a thread made in the child took over a lock the forking thread holds".into(),
            );
        }
        if *first != [1, 2, 3, 4] {
            return Err(format!("the first guard sees {:?}", *first));
        }
        Ok(())
    });
    let end = tests::wait_child(pid, true).expect("blocking wait");
    drop(first);
    assert_eq!(*lock.lock(), [1, 2, 3, 4]);
    end.unwrap();
}

#[test]
fn a_takeover_in_a_fork_child_leaves_borrows_from_before_the_fork_alone() {
    // The next attack of item 1's class: the holder (the main thread) does not exist in the child, so
    // the lock is taken over, but the thread that forked borrowed the value through the holder's guard
    // (a scoped thread): the new guard must not reach what that borrow sees.
    if !tests::in_own_process(
        "a_takeover_in_a_fork_child_leaves_borrows_from_before_the_fork_alone",
        "PERF_TEST_FORK_LOCK_BORROW",
    ) {
        return;
    }
    let lock = Lock::new(vec![7u8; 64]);
    let guard = lock.lock();
    let seen: &Vec<u8> = &guard;
    let end = std::thread::scope(|s| {
        s.spawn(|| {
            let pid = tests::fork_child(child_limit(), || {
                let mut taken = lock
                    .try_lock()
                    .ok_or("a lock stranded by the fork (its holder is not in the child) was not taken over")?;
                if !taken.is_empty() {
                    return Err(format!("the taken-over value is {:?}, not the default", *taken));
                }
                taken.extend_from_slice(&[9; 256]);
                if seen.len() != 64 || seen.iter().any(|&b| b != 7) {
                    return Err(format!(
                        "a borrow from before the fork sees what the new guard wrote: len {}",
                        seen.len()
                    ));
                }
                drop(taken);
                // Released and taken again in the child: the same (new) value.
                let again = lock.try_lock().ok_or("not free after the new guard's drop")?;
                if again.len() != 256 {
                    return Err(format!("the value after a release is {} long", again.len()));
                }
                Ok(())
            });
            tests::wait_child(pid, true).expect("blocking wait")
        })
        .join()
        .unwrap()
    });
    assert_eq!(seen.len(), 64);
    drop(guard);
    end.unwrap();
}
