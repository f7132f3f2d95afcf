//! The rings and the mmap page on the real kernel: page-fault sampling read through a mapped ring, an
//! overwrite ring read newest first, the mmap page of a software event, and the mapping errors.
//!
//! These tests open events with `PerfFd::open`, the one fd type perf-core's safe constructors map. They need perf_event_open to be
//! allowed (root or a low `perf_event_paranoid`) and print `skipped: <reason>` otherwise (a failure when
//! `PERF_TEST_STRICT=1`).

use std::os::fd::AsFd;

use perf_core::{Capabilities, Error, ErrorKind, MappedPage, PerfFd, Ring, RingMode};
use perf_sys::*;

mod skip;

const SAMPLE: u32 = PERF_RECORD_SAMPLE;

fn page_fault_attr() -> perf_event_attr {
    let mut attr = perf_event_attr {
        type_: PERF_TYPE_SOFTWARE,
        size: std::mem::size_of::<perf_event_attr>() as u32,
        config: u64::from(PERF_COUNT_SW_PAGE_FAULTS),
        ..Default::default()
    };
    attr.__bindgen_anon_1.sample_period = 1;
    attr.sample_type = u64::from(PERF_SAMPLE_TID | PERF_SAMPLE_TIME);
    attr.set_disabled(1);
    attr.set_exclude_kernel(1);
    attr.set_exclude_hv(1);
    attr
}

/// Opens `attr` on this thread, or says why not (skip; a failure in strict mode).
fn open(attr: &perf_event_attr) -> Option<PerfFd> {
    match PerfFd::open(&mut { *attr }, 0, -1, None, u64::from(PERF_FLAG_FD_CLOEXEC)) {
        Ok(fd) => Some(fd),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EACCES) | Some(libc::EPERM)) => {
            skip::skip(&format!("perf_event_open not permitted here: {e}"));
            None
        }
        Err(e) => panic!("perf_event_open: {e}"),
    }
}

/// Touches `pages` fresh anonymous pages (a new mapping each time): one user-space page fault each.
fn touch_pages(pages: usize) {
    let page = perf_core::page_size() as usize;
    let len = pages * page;
    // SAFETY: an anonymous private mapping with no address hint has no preconditions.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(ptr, libc::MAP_FAILED);
    for i in 0..pages {
        // SAFETY: `i * page < len`, inside the writable mapping made above.
        unsafe { std::ptr::write_volatile(ptr.cast::<u8>().add(i * page), 1) };
    }
    // SAFETY: unmapping exactly the mapping made above, which nothing else refers to.
    unsafe { libc::munmap(ptr, len) };
}

#[test]
#[cfg_attr(miri, ignore)]
fn page_fault_samples_come_through_the_ring() {
    let Some(fd) = open(&page_fault_attr()) else {
        return;
    };
    let mut ring = Ring::map_exclusive(&fd, 16, RingMode::Normal).unwrap();
    assert_eq!(ring.size(), 16 * perf_core::page_size());
    assert_eq!(ring.page().data_size(), ring.size());
    let tid = {
        // SAFETY: gettid has no preconditions.
        unsafe { libc::gettid() }
    };
    perf_sys::ioctl::enable(fd.as_fd()).unwrap();
    touch_pages(200);
    perf_sys::ioctl::disable(fd.as_fd()).unwrap();
    let (mut samples, mut ours, mut last_time) = (0u64, 0u64, 0u64);
    let mut batch = ring.batch().unwrap();
    while let Some(rec) = batch.next_record().unwrap() {
        if rec.read_u32(0) == Some(SAMPLE) {
            // { pid, tid } then time.
            assert_eq!(rec.len(), 24);
            let time = rec.read_u64(16).unwrap();
            assert!(time >= last_time, "samples out of time order");
            last_time = time;
            samples += 1;
            if rec.read_u32(12) == Some(tid as u32) {
                ours += 1;
            }
        }
    }
    drop(batch);
    assert!(
        samples >= 200,
        "only {samples} page-fault samples for 200 touched pages"
    );
    assert_eq!(ours, samples, "samples of another thread");
    assert_eq!(ring.pending_bytes(), 0);
    // The tail we published is what the kernel sees: more samples arrive.
    perf_sys::ioctl::enable(fd.as_fd()).unwrap();
    touch_pages(10);
    perf_sys::ioctl::disable(fd.as_fd()).unwrap();
    let n = std::iter::from_fn(|| ring.next_with(|r| r.read_u32(0)).unwrap())
        .filter(|&t| t == Some(SAMPLE))
        .count();
    assert!(n >= 10, "{n}");
}

#[test]
#[cfg_attr(miri, ignore)]
fn a_small_ring_wraps_and_loses_and_says_so() {
    let mut attr = page_fault_attr();
    attr.read_format = u64::from(PERF_FORMAT_LOST);
    let Some(fd) = open(&attr) else {
        return;
    };
    // One data page, 24-byte samples: 170 fit; touch 2000 pages without reading.
    let mut ring = Ring::map_exclusive(&fd, 1, RingMode::Normal).unwrap();
    let mut samples = 0u64;
    let mut lost = 0u64;
    // The last round touches one page into a drained ring: its write carries the last LOST record.
    for pages in [500, 500, 500, 500, 1] {
        perf_sys::ioctl::enable(fd.as_fd()).unwrap();
        touch_pages(pages);
        perf_sys::ioctl::disable(fd.as_fd()).unwrap();
        let mut batch = ring.batch().unwrap();
        while let Some(rec) = batch.next_record().unwrap() {
            match rec.read_u32(0) {
                Some(SAMPLE) => samples += 1,
                Some(PERF_RECORD_LOST) => lost += rec.read_u64(16).unwrap(),
                _ => {}
            }
        }
    }
    assert!(lost > 0, "2000 faults into a 4 KiB ring lost nothing?");
    assert!(samples + lost >= 2001, "{samples} + {lost}");
    // read(2) with PERF_FORMAT_LOST (Linux 6.0) counts the same losses.
    let mut buf = [0u64; 2];
    // SAFETY: reading into a writable 16-byte buffer.
    let n = unsafe {
        libc::read(
            std::os::fd::AsRawFd::as_raw_fd(&fd),
            buf.as_mut_ptr().cast(),
            16,
        )
    };
    assert_eq!(n, 16);
    assert_eq!(buf[1], lost, "PERF_FORMAT_LOST vs LOST records");
    assert_eq!(buf[0], samples + lost, "count vs samples + lost");
}

#[test]
#[cfg_attr(miri, ignore)]
fn an_overwrite_ring_reads_newest_first_on_the_kernel() {
    let mut attr = page_fault_attr();
    attr.set_write_backward(1);
    let Some(fd) = open(&attr) else {
        return;
    };
    let mut ring = Ring::map_exclusive(&fd, 2, RingMode::Overwrite).unwrap();
    assert!(matches!(
        ring.batch().map_err(Error::into_kind),
        Err(ErrorKind::RingMode { .. })
    ));
    perf_sys::ioctl::enable(fd.as_fd()).unwrap();
    touch_pages(2000); // 2000 × 24 bytes: wraps the 8 KiB ring several times
    perf_sys::ioctl::pause_output(fd.as_fd(), true).unwrap();
    let mut copy = perf_core::BackwardCopy::new();
    ring.copy_backward(&mut copy).unwrap();
    assert_eq!(
        copy.late_bytes(),
        0,
        "paused and quiesced: nothing published during the copy"
    );
    let times: Vec<u64> = copy
        .records()
        .map(|r| r.unwrap())
        .filter(|r| r.read_u32(0) == Some(SAMPLE))
        .map(|r| r.read_u64(16).unwrap())
        .collect();
    perf_sys::ioctl::pause_output(fd.as_fd(), false).unwrap();
    perf_sys::ioctl::disable(fd.as_fd()).unwrap();
    let ring_bytes = 2 * perf_core::page_size() as usize;
    assert!(
        times.len() * 24 > ring_bytes - 48,
        "{} records",
        times.len()
    );
    assert!(times.len() * 24 <= ring_bytes);
    assert!(times.windows(2).all(|w| w[0] >= w[1]), "not newest first");
}

#[test]
#[cfg_attr(miri, ignore)]
fn the_mmap_page_of_a_software_event_offers_no_user_read() {
    let mut attr = page_fault_attr();
    attr.__bindgen_anon_1.sample_period = 0;
    attr.sample_type = 0;
    let Some(fd) = open(&attr) else {
        return;
    };
    let page = MappedPage::map(fd.as_fd()).unwrap();
    perf_sys::ioctl::enable(fd.as_fd()).unwrap();
    touch_pages(10);
    let snap = page.page().snapshot().unwrap();
    assert_eq!(
        snap.index, 0,
        "software events are never on a hardware counter"
    );
    assert_eq!(snap.lock % 2, 0);
    assert!(snap.capabilities.contains(Capabilities::BIT0_IS_DEPRECATED));
    assert!(!snap.capabilities.contains(Capabilities::BIT0));
    assert_eq!(
        page.page().read_self().unwrap(),
        None,
        "must fall back to read(2)"
    );
    perf_sys::ioctl::disable(fd.as_fd()).unwrap();
}

#[test]
#[cfg_attr(miri, ignore)]
fn mapping_errors_say_what_to_change() {
    let Some(fd) = open(&page_fault_attr()) else {
        return;
    };
    assert!(matches!(
        Ring::map_exclusive(&fd, 3, RingMode::Normal).map_err(Error::into_kind),
        Err(ErrorKind::BadRingSize { size: 3, .. })
    ));
    assert!(matches!(
        Ring::map_exclusive(&fd, 0, RingMode::Normal).map_err(Error::into_kind),
        Err(ErrorKind::BadRingSize { size: 0, .. })
    ));
    assert!(matches!(
        Ring::map_exclusive(&fd, 1 << 62, RingMode::Normal).map_err(Error::into_kind),
        Err(ErrorKind::SizeOverflow { .. })
    ));
    let mut ring = Ring::map_exclusive(&fd, 1, RingMode::Normal).unwrap();
    // The same fd mapped again with another size: EINVAL, explained. (No second consumer results: the
    // kernel refuses the mapping.)
    // SAFETY: the kernel refuses a second mapping of another size (asserted), so no second ring exists.
    let err = unsafe { Ring::map(fd.as_fd(), 2, RingMode::Normal) }.unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::Map { source, .. } if source.raw_os_error() == Some(libc::EINVAL))
    );
    assert!(err.to_string().contains("another size"));
    // No AUX area on a software event: the offset is written into the page, the kernel refuses the mapping.
    let err = ring.map_aux_exclusive(1, RingMode::Normal).unwrap_err();
    println!("AUX on a software event: {err}");
    assert!(
        matches!(err.kind(), ErrorKind::Map { area: "aux", .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("no AUX area"), "{err}");
    assert_eq!(
        ring.page().aux_offset(),
        ring.page().data_offset() + ring.size()
    );
    assert_eq!(ring.page().aux_size(), perf_core::page_size());
    assert!(matches!(
        ring.map_aux_exclusive(3, RingMode::Normal)
            .map_err(Error::into_kind),
        Err(ErrorKind::BadRingSize { area: "aux", .. })
    ));
}

/// Writes `n` page-fault samples into `fd`'s ring (which must be enabled).
fn faults(fd: &PerfFd, n: usize) {
    perf_sys::ioctl::enable(fd.as_fd()).unwrap();
    touch_pages(n);
    perf_sys::ioctl::disable(fd.as_fd()).unwrap();
}

#[test]
#[cfg_attr(miri, ignore)]
fn a_second_consumer_of_a_mapped_event_is_refused() {
    let Some(fd) = open(&page_fault_attr()) else {
        return;
    };
    let mut ring = Ring::map_exclusive(&fd, 4, RingMode::Normal).unwrap();
    // The kernel would attach a second mapping of the same event to this ring: the same fd, a duplicate,
    // the same size: every one is refused.
    let dup = fd.try_clone().unwrap();
    for f in [&fd, &dup] {
        let err = Ring::map_exclusive(f, 4, RingMode::Normal).unwrap_err();
        assert!(
            matches!(err.kind(), ErrorKind::AlreadyMapped { .. }),
            "{err:?}"
        );
        println!("second consumer: {err}");
    }
    // The first ring still reads every record.
    faults(&fd, 10);
    let mut samples = 0;
    while let Some(r) = ring.next_record().unwrap() {
        samples += usize::from(r.read_u32(0) == Some(SAMPLE));
    }
    assert!(samples >= 10, "{samples}");
    // Once the ring is gone, the event can be mapped again.
    drop(ring);
    Ring::map_exclusive(&fd, 4, RingMode::Normal).unwrap();
}

#[test]
#[cfg_attr(miri, ignore)]
fn map_exclusive_detaches_a_redirection_and_maps_the_events_own_ring() {
    let (Some(a), Some(b)) = (open(&page_fault_attr()), open(&page_fault_attr())) else {
        return;
    };
    let mut ring_a = Ring::map_exclusive(&a, 2, RingMode::Normal).unwrap();
    perf_sys::ioctl::set_output(b.as_fd(), Some(a.as_fd())).unwrap();
    // Old kernels would map a's ring for b (a second consumer of it): map_exclusive detaches b first.
    let mut ring_b = Ring::map_exclusive(&b, 2, RingMode::Normal).unwrap();
    faults(&b, 5);
    let count = |ring: &mut Ring<perf_core::Data>| {
        let mut n = 0;
        while let Some(r) = ring.next_record().unwrap() {
            n += usize::from(r.read_u32(0) == Some(SAMPLE));
        }
        n
    };
    assert!(count(&mut ring_b) >= 5, "b writes into its own ring");
    assert_eq!(count(&mut ring_a), 0, "nothing of b's reaches a's ring");
}

#[test]
#[cfg_attr(miri, ignore)]
fn a_fork_child_gets_placeholders_not_the_parents_ring() {
    let Some(fd) = open(&page_fault_attr()) else {
        return;
    };
    let mut ring = Ring::map_exclusive(&fd, 4, RingMode::Normal).unwrap();
    let page = ring.mapped_page().unwrap();
    faults(&fd, 10);
    // One record read before the fork: the ring has seen a head past its tail, so the child's next read
    // takes the path that loads neither the head nor the tail, and must be refused as well.
    let mut samples = usize::from(ring.next_record().unwrap().unwrap().read_u32(0) == Some(SAMPLE));
    // SAFETY: the child only runs the code below (no locks another thread could hold are taken: the ring's
    // calls are lock-free, the fork handlers use their own lock) and leaves with `_exit`.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        // The kernel did not copy the mapping (VM_DONTCOPY): reading it would fault. perf-core mapped zeroed
        // placeholders over it and refuses to read.
        let refused = ring.next_seen().is_none()
            && matches!(
                ring.next_record().map_err(Error::into_kind),
                Err(ErrorKind::ForkedChild { .. })
            )
            && matches!(
                ring.next_span().map_err(Error::into_kind),
                Err(ErrorKind::ForkedChild { .. })
            )
            && matches!(
                ring.batch().map_err(Error::into_kind),
                Err(ErrorKind::ForkedChild { .. })
            );
        let zeroed =
            ring.page().data_size() == 0 && page.page().snapshot().is_ok_and(|s| s.lock == 0);
        drop(ring);
        drop(page);
        // SAFETY: ends the child at once, without running the parent's atexit handlers or destructors.
        unsafe { libc::_exit(if refused && zeroed { 0 } else { 1 }) };
    }
    let mut status = 0;
    // SAFETY: waits for the child made above; `status` is a valid out-pointer.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status), "child died: status {status:#x}");
    assert_eq!(libc::WEXITSTATUS(status), 0, "child saw the parent's ring");
    // The parent's ring is untouched.
    while let Some(r) = ring.next_record().unwrap() {
        samples += usize::from(r.read_u32(0) == Some(SAMPLE));
    }
    assert!(samples >= 10, "{samples}");
    assert_ne!(page.page().data_size(), 0);
}
