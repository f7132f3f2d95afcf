//! Smoke test of the kernel matrix (`cargo xtask kernel-matrix`): counts and samples through `perf_sys`
//! alone, so it exercises the raw ABI on every kernel of the matrix, and prints the running kernel so each
//! matrix log shows which kernel ran it. Runs on the host as well.
//!
//! # Safety
//!
//! The sampling test maps an anonymous buffer and the event's ring buffer with `mmap`, and reads the
//! kernel's records from the ring through raw pointers bounded by the mapping's length.

use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::{fence, Ordering};
use std::time::{Duration, Instant};

use perf_sys::*;
use tests::{busy_cpu, page_size, thread_cpu_time, Skip};

/// `uname -r` of the running kernel.
fn kernel_release() -> String {
    // SAFETY: `utsname` is plain old data; all-zero is a valid value.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid, writable utsname.
    if unsafe { libc::uname(&mut u) } != 0 {
        return "unknown".into();
    }
    // SAFETY: uname NUL-terminates `release` inside the array.
    let release = unsafe { std::ffi::CStr::from_ptr(u.release.as_ptr()) };
    release.to_string_lossy().into_owned()
}

fn software_attr(config: perf_sw_ids) -> perf_event_attr {
    let mut attr = perf_event_attr {
        type_: PERF_TYPE_SOFTWARE,
        size: std::mem::size_of::<perf_event_attr>() as u32,
        config: config as u64,
        ..Default::default()
    };
    attr.set_disabled(1);
    attr.set_exclude_kernel(1);
    attr.set_exclude_hv(1);
    attr
}

/// Opens `attr` on the calling thread; `None` (after printing the skip) when privilege is missing.
fn open(attr: &perf_event_attr) -> Option<OwnedFd> {
    match perf_event_open(attr, 0, -1, None, PERF_FLAG_FD_CLOEXEC as u64) {
        Ok(fd) => Some(fd),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM)) => {
            tests::skip(
                Skip::Privilege,
                &format!(
                    "perf_event_open: {e} (perf_event_paranoid = {})",
                    tests::paranoid()
                ),
            );
            None
        }
        Err(e) => panic!("perf_event_open on Linux {}: {e}", kernel_release()),
    }
}

#[test]
fn task_clock_counts_busy_loop() {
    println!("matrix_smoke: running on Linux {}", kernel_release());
    let mut attr = software_attr(PERF_COUNT_SW_TASK_CLOCK);
    attr.read_format = (PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING) as u64;
    let Some(fd) = open(&attr) else { return };
    let cpu_before = thread_cpu_time();
    let wall_before = Instant::now();
    ioctl::enable(fd.as_fd()).expect("enable");
    // 50 ms of this thread's CPU time: a loaded machine stretches the wall time, not the count.
    std::hint::black_box(busy_cpu(Duration::from_millis(50)));
    ioctl::disable(fd.as_fd()).expect("disable");
    let wall = wall_before.elapsed();
    let cpu = thread_cpu_time() - cpu_before;

    let mut buf = [0u8; 24];
    let mut file = std::fs::File::from(fd);
    file.read_exact(&mut buf).expect("read the counter");
    let word = |i: usize| u64::from_ne_bytes(buf[8 * i..8 * i + 8].try_into().unwrap());
    let (count, enabled, running) = (word(0), word(1), word(2));
    println!(
        "task-clock {count} ns, enabled {enabled}, running {running}, thread CPU time {cpu:?}, wall {wall:?}"
    );
    assert!(
        count >= 25_000_000,
        "task-clock counted only {count} ns for a loop of 50 ms of thread CPU time"
    );
    // One thread cannot run longer than the wall time around it. (Not compared with the thread's CPU time:
    // under qemu's TCG the two clocks drift apart by several ms when the thread moves between vCPUs.)
    assert!(
        count <= wall.as_nanos() as u64 + 2_000_000,
        "task-clock {count} ns exceeds the {wall:?} of wall time around it"
    );
    assert_eq!(enabled, running, "a software event is never multiplexed");
    assert!(enabled >= count, "time enabled {enabled} < count {count}");
}

/// An anonymous mapping, unmapped on drop.
struct Mapping {
    ptr: *mut u8,
    len: usize,
}

impl Mapping {
    fn new(len: usize, fd: Option<&OwnedFd>) -> io::Result<Self> {
        let (flags, raw) = match fd {
            Some(fd) => (libc::MAP_SHARED, fd.as_raw_fd()),
            None => (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1),
        };
        // SAFETY: a fresh mapping with no address hint; `raw` is a live fd or -1 for an anonymous one.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                raw,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Self {
            ptr: ptr.cast(),
            len,
        })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the mapping made in `new`, which nothing refers to any more.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

#[test]
fn page_fault_sampler_sees_every_touched_page() {
    println!("matrix_smoke: running on Linux {}", kernel_release());
    const PAGES: usize = 100;
    const DATA_PAGES: usize = 8;
    let page = page_size();
    let mut attr = software_attr(PERF_COUNT_SW_PAGE_FAULTS);
    attr.__bindgen_anon_1.sample_period = 1;
    attr.sample_type = (PERF_SAMPLE_TID | PERF_SAMPLE_ADDR) as u64;
    let Some(fd) = open(&attr) else { return };
    let ring = Mapping::new((1 + DATA_PAGES) * page, Some(&fd)).expect("mmap the ring");
    let buffer = Mapping::new(PAGES * page, None).expect("mmap the buffer");

    ioctl::enable(fd.as_fd()).expect("enable");
    for i in 0..PAGES {
        // SAFETY: `i * page < buffer.len`, inside the writable mapping.
        unsafe { std::ptr::write_volatile(buffer.ptr.add(i * page), 1) };
    }
    ioctl::disable(fd.as_fd()).expect("disable");

    let meta = ring.ptr.cast::<perf_event_mmap_page>();
    // SAFETY: the first page of the ring is the kernel's perf_event_mmap_page; `data_head` is read once,
    // volatile, and the fence orders the record reads after it (the ring protocol's acquire).
    let head = unsafe { std::ptr::read_volatile(std::ptr::addr_of!((*meta).data_head)) };
    fence(Ordering::Acquire);
    let data_len = DATA_PAGES * page;
    assert!(
        head as usize <= data_len,
        "ring wrapped: {head} bytes for {PAGES} samples"
    );
    // SAFETY: the data area starts one page into the ring and is `data_len` bytes long; the kernel wrote
    // `head` bytes (checked above to fit without wrapping) and writes no more while the event is disabled.
    let data = unsafe { std::slice::from_raw_parts(ring.ptr.add(page), head as usize) };

    let base = buffer.ptr as u64;
    let end = base + (PAGES * page) as u64;
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() } as u32;
    let (mut samples, mut inside, mut lost) = (0, 0, 0);
    let mut off = 0;
    while off + 8 <= data.len() {
        let u32_at = |o: usize| u32::from_ne_bytes(data[o..o + 4].try_into().unwrap());
        let u64_at = |o: usize| u64::from_ne_bytes(data[o..o + 8].try_into().unwrap());
        let kind = u32_at(off);
        let size = u16::from_ne_bytes(data[off + 6..off + 8].try_into().unwrap()) as usize;
        assert!(
            size >= 8 && off + size <= data.len(),
            "bad record size {size} at {off}"
        );
        match kind {
            PERF_RECORD_SAMPLE => {
                samples += 1;
                // pid, tid, addr
                assert_eq!(u32_at(off + 12), tid, "sample from another thread");
                let addr = u64_at(off + 16);
                if (base..end).contains(&addr) {
                    inside += 1;
                }
            }
            PERF_RECORD_LOST => lost += 1,
            _ => {}
        }
        off += size;
    }
    let mut count = [0u8; 8];
    std::fs::File::from(fd)
        .read_exact(&mut count)
        .expect("read the counter");
    let count = u64::from_ne_bytes(count);
    println!("page faults: count {count}, samples {samples}, inside the buffer {inside}, ring {head} bytes");
    assert_eq!(lost, 0, "lost records");
    assert_eq!(inside, PAGES, "one sample per touched page");
    assert!(
        count >= PAGES as u64,
        "counted {count} faults for {PAGES} touched pages"
    );
    assert_eq!(
        samples as u64, count,
        "every counted fault (period 1) is sampled"
    );
}
