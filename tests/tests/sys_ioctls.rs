//! perf-sys on the real kernel: the syscall shim and every ioctl, each observed to change behaviour.

use std::ffi::CString;
use std::io::Read;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::Duration;

use perf_sys::*;
use tests::{busy_loop, is_root, require, thread_cpu_time, touch_pages, Skip};

fn attr(type_: u32, config: u64) -> perf_event_attr {
    let mut a = perf_event_attr {
        type_,
        size: core::mem::size_of::<perf_event_attr>() as u32,
        config,
        ..Default::default()
    };
    a.set_disabled(1);
    a.set_exclude_kernel(1);
    a.set_exclude_hv(1);
    a
}

fn open(a: &perf_event_attr, group: Option<BorrowedFd<'_>>) -> OwnedFd {
    perf_event_open(a, 0, -1, group, PERF_FLAG_FD_CLOEXEC as u64)
        .unwrap_or_else(|e| panic!("perf_event_open(type {} config {}): {e}", a.type_, a.config))
}

fn read_u64s<const N: usize>(fd: &OwnedFd) -> [u64; N] {
    let mut buf = [0u8; 8 * 64];
    let n = std::fs::File::from(fd.try_clone().unwrap())
        .read(&mut buf)
        .expect("read counter");
    assert!(n >= 8 * N, "short read: {n} bytes");
    let mut out = [0u64; N];
    for (i, v) in out.iter_mut().enumerate() {
        *v = u64::from_ne_bytes(buf[i * 8..i * 8 + 8].try_into().unwrap());
    }
    out
}

fn count(fd: &OwnedFd) -> u64 {
    read_u64s::<1>(fd)[0]
}

/// A minimal reader of the data ring, enough to count records by type.
struct Ring {
    base: *mut u8,
    len: usize,
    tail: u64,
}

impl Ring {
    fn map(fd: &OwnedFd, data_pages: usize) -> Ring {
        let page = tests::page_size();
        let len = (1 + data_pages) * page;
        // SAFETY: a shared mapping of a perf fd with 1 + 2^n pages, no address hint; checked below.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        assert_ne!(
            base,
            libc::MAP_FAILED,
            "mmap: {}",
            std::io::Error::last_os_error()
        );
        Ring {
            base: base.cast(),
            len,
            tail: 0,
        }
    }

    fn page(&self) -> *mut perf_event_mmap_page {
        self.base.cast()
    }

    /// Drains the ring; returns (type, bytes) of every record.
    fn drain(&mut self) -> Vec<(u32, Vec<u8>)> {
        let page = tests::page_size();
        let size = (self.len - page) as u64;
        // SAFETY: data_head is a u64 inside the mapped user page, written by the kernel; read atomically.
        let head = unsafe {
            std::sync::atomic::AtomicU64::from_ptr(std::ptr::addr_of_mut!((*self.page()).data_head))
                .load(std::sync::atomic::Ordering::Acquire)
        };
        let mut out = Vec::new();
        while self.tail < head {
            let mut rec = Vec::new();
            let at = |pos: u64| (page as u64 + pos % size) as usize;
            // SAFETY: reading 8 header bytes inside the data area ([tail, head) is published by the kernel).
            let hdr: [u8; 8] =
                unsafe { std::ptr::read_unaligned(self.base.add(at(self.tail)).cast()) };
            let ty = u32::from_ne_bytes(hdr[0..4].try_into().unwrap());
            let sz = u16::from_ne_bytes(hdr[6..8].try_into().unwrap()) as u64;
            assert!(sz >= 8, "corrupt record size {sz}");
            for i in 0..sz {
                // SAFETY: each byte of the record lies in the data area, at a masked offset.
                rec.push(unsafe { *self.base.add(at(self.tail + i)) });
            }
            out.push((ty, rec));
            self.tail += sz;
        }
        // SAFETY: data_tail is a u64 in the user page that only we write; Release orders our reads before it.
        unsafe {
            std::sync::atomic::AtomicU64::from_ptr(std::ptr::addr_of_mut!((*self.page()).data_tail))
                .store(self.tail, std::sync::atomic::Ordering::Release)
        };
        out
    }

    fn samples(&mut self) -> usize {
        self.drain()
            .iter()
            .filter(|(t, _)| *t == PERF_RECORD_SAMPLE)
            .count()
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the mapping made in `map`.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

#[test]
fn task_clock_counts_thread_cpu_time() {
    let fd = open(
        &attr(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK as u64),
        None,
    );
    let cpu0 = thread_cpu_time();
    ioctl::enable(fd.as_fd()).unwrap();
    busy_loop(Duration::from_millis(10));
    ioctl::disable(fd.as_fd()).unwrap();
    let cpu = (thread_cpu_time() - cpu0).as_nanos() as f64;
    let ns = count(&fd) as f64;
    assert!(
        (ns - cpu).abs() <= 0.5 * cpu,
        "task-clock {ns} ns vs thread CPU time {cpu} ns"
    );
}

#[test]
fn oversized_attr_is_refused_before_the_syscall() {
    let mut a = attr(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK as u64);
    a.size = 4096;
    let e = perf_event_open(&a, 0, -1, None, 0).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EINVAL));
}

#[test]
fn enable_disable_reset_and_id() {
    let mut a = attr(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS as u64);
    a.read_format = PERF_FORMAT_ID as u64;
    let fd = open(&a, None);
    touch_pages(10);
    assert_eq!(count(&fd), 0, "disabled counter counted");
    ioctl::enable(fd.as_fd()).unwrap();
    touch_pages(10);
    let c1 = count(&fd);
    assert!(c1 >= 10, "enabled counter saw {c1} faults for 10 pages");
    ioctl::disable(fd.as_fd()).unwrap();
    touch_pages(10);
    assert_eq!(count(&fd), c1, "disable did not stop counting");
    ioctl::reset(fd.as_fd()).unwrap();
    assert_eq!(count(&fd), 0, "reset did not zero");

    let id = ioctl::id(fd.as_fd()).unwrap();
    assert_ne!(id, 0);
    assert_eq!(
        read_u64s::<2>(&fd)[1],
        id,
        "PERF_FORMAT_ID disagrees with IOC_ID"
    );
}

#[test]
fn group_variants_act_on_every_member() {
    let mut a = attr(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS as u64);
    a.read_format = PERF_FORMAT_GROUP as u64;
    let leader = open(&a, None);
    let mut m = attr(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MIN as u64);
    m.set_disabled(0);
    let member = open(&m, Some(leader.as_fd()));
    ioctl::enable_group(member.as_fd()).unwrap();
    touch_pages(20);
    ioctl::disable_group(leader.as_fd()).unwrap();
    let [nr, a1, b1] = read_u64s::<3>(&leader);
    assert_eq!(nr, 2);
    assert!(a1 >= 20 && b1 >= 20, "group counts {a1} {b1}");
    touch_pages(20);
    assert_eq!(
        read_u64s::<3>(&leader),
        [2, a1, b1],
        "disable_group left a member running"
    );
    ioctl::reset_group(leader.as_fd()).unwrap();
    assert_eq!(
        read_u64s::<3>(&leader),
        [2, 0, 0],
        "reset_group left a count"
    );
    drop(member);
}

#[test]
fn refresh_stops_after_n_overflows() {
    let mut a = attr(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS as u64);
    a.__bindgen_anon_1.sample_period = 1;
    let fd = open(&a, None);
    ioctl::refresh(fd.as_fd(), 3).unwrap();
    touch_pages(20);
    assert_eq!(count(&fd), 3, "REFRESH 3 should stop after 3 overflows");
}

#[test]
fn period_changes_the_sample_count() {
    let mut a = attr(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS as u64);
    a.__bindgen_anon_1.sample_period = 1;
    a.sample_type = PERF_SAMPLE_IP as u64;
    let fd = open(&a, None);
    let mut ring = Ring::map(&fd, 8);
    ioctl::enable(fd.as_fd()).unwrap();
    touch_pages(100);
    let before = ring.samples();
    ioctl::period(fd.as_fd(), 10).unwrap();
    touch_pages(100);
    let after = ring.samples();
    assert!(before >= 100, "period 1: {before} samples for 100 faults");
    assert!(
        (9..=20).contains(&after),
        "period 10: {after} samples for 100 faults"
    );
    assert_eq!(
        ioctl::period(fd.as_fd(), 0).map_err(|e| e.raw_os_error()),
        Err(Some(libc::EINVAL))
    );
}

#[test]
fn set_output_redirects_and_detaches() {
    let mut a = attr(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS as u64);
    a.__bindgen_anon_1.sample_period = 1;
    a.sample_type = (PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP) as u64;
    let fa = open(&a, None);
    a.config = PERF_COUNT_SW_PAGE_FAULTS_MIN as u64;
    let fb = open(&a, None);
    let mut ring = Ring::map(&fa, 8);
    ioctl::set_output(fb.as_fd(), Some(fa.as_fd())).unwrap();
    let (ida, idb) = (
        ioctl::id(fa.as_fd()).unwrap(),
        ioctl::id(fb.as_fd()).unwrap(),
    );
    ioctl::enable(fa.as_fd()).unwrap();
    ioctl::enable(fb.as_fd()).unwrap();
    touch_pages(20);
    ioctl::disable(fa.as_fd()).unwrap();
    ioctl::disable(fb.as_fd()).unwrap();
    let recs = ring.drain();
    let id_of = |r: &Vec<u8>| u64::from_ne_bytes(r[8..16].try_into().unwrap());
    let from_a = recs
        .iter()
        .filter(|(t, r)| *t == PERF_RECORD_SAMPLE && id_of(r) == ida)
        .count();
    let from_b = recs
        .iter()
        .filter(|(t, r)| *t == PERF_RECORD_SAMPLE && id_of(r) == idb)
        .count();
    assert!(
        from_a >= 20 && from_b >= 20,
        "a={from_a} b={from_b} in A's ring"
    );
    // Detaching takes -1 as a long; afterwards B may map its own ring again.
    ioctl::set_output(fb.as_fd(), None).unwrap();
    let _ring_b = Ring::map(&fb, 1);
}

#[test]
fn pause_output_drops_records_and_counts_them_lost() {
    let mut a = attr(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS as u64);
    a.__bindgen_anon_1.sample_period = 1;
    a.sample_type = PERF_SAMPLE_IP as u64;
    a.read_format = PERF_FORMAT_LOST as u64;
    let fd = open(&a, None);
    let mut ring = Ring::map(&fd, 8);
    ioctl::enable(fd.as_fd()).unwrap();
    touch_pages(10);
    assert!(ring.samples() >= 10);
    ioctl::pause_output(fd.as_fd(), true).unwrap();
    // Faults of the drain above (its allocations) landed before the pause: consume them first.
    ring.drain();
    touch_pages(10);
    assert_eq!(ring.samples(), 0, "paused ring received samples");
    ioctl::pause_output(fd.as_fd(), false).unwrap();
    touch_pages(10);
    let recs = ring.drain();
    assert!(
        recs.iter().any(|(t, _)| *t == PERF_RECORD_LOST),
        "no LOST record after resume"
    );
    assert!(
        read_u64s::<2>(&fd)[1] >= 10,
        "PERF_FORMAT_LOST missed the paused samples"
    );
}

#[test]
fn set_filter_filters_a_tracepoint() {
    require!(
        is_root(),
        Skip::Privilege,
        "tracefs is root-only; run as root"
    );
    let id = tests::require_tracepoint!("syscalls:sys_enter_write").id;
    let fd = open(&attr(PERF_TYPE_TRACEPOINT, id), None);
    ioctl::set_filter(fd.as_fd(), &CString::new("fd == 99").unwrap()).unwrap();
    ioctl::enable(fd.as_fd()).unwrap();
    for _ in 0..5 {
        // SAFETY: write(2) on a (likely closed) fd with a valid 1-byte buffer; the result is ignored.
        unsafe { libc::write(99, b"x".as_ptr().cast(), 1) };
    }
    for _ in 0..7 {
        // SAFETY: as above.
        unsafe { libc::write(98, b"x".as_ptr().cast(), 1) };
    }
    ioctl::disable(fd.as_fd()).unwrap();
    assert_eq!(
        count(&fd),
        5,
        "filter fd == 99 should pass exactly the 5 writes to fd 99"
    );
    let bad = ioctl::set_filter(fd.as_fd(), &CString::new("no_such_field == 1").unwrap());
    assert!(bad.is_err(), "a bad filter expression was accepted");
}

/// Loads `r0 = 0; exit` as a program of `prog_type`; `None` with the errno when the kernel refuses.
fn load_trivial_bpf(prog_type: u32) -> Result<OwnedFd, std::io::Error> {
    // struct bpf_insn: code, dst:4|src:4, off (i16), imm (i32).
    let insns: [u64; 2] = [
        u64::from_le_bytes([0xb7, 0, 0, 0, 0, 0, 0, 0]), // BPF_ALU64 | BPF_MOV | BPF_K, r0 = 0
        u64::from_le_bytes([0x95, 0, 0, 0, 0, 0, 0, 0]), // BPF_JMP | BPF_EXIT
    ];
    let license = b"GPL\0";
    // union bpf_attr, BPF_PROG_LOAD part: prog_type, insn_cnt, insns, license; the rest zero.
    let mut attr = [0u64; 16];
    attr[0] = prog_type as u64 | (2u64 << 32);
    attr[1] = insns.as_ptr() as u64;
    attr[2] = license.as_ptr() as u64;
    const BPF_PROG_LOAD: libc::c_long = 5;
    // SAFETY: bpf(2) reads `size_of_val(&attr)` bytes of a zero-padded attr whose pointers refer to live
    // locals (the instructions and the NUL-terminated license).
    let fd = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_PROG_LOAD,
            attr.as_ptr(),
            core::mem::size_of_val(&attr),
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: bpf(2) returned a new fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

#[test]
fn set_bpf_and_query_bpf_on_a_tracepoint() {
    require!(
        is_root(),
        Skip::Privilege,
        "BPF_PROG_LOAD needs CAP_BPF/root"
    );
    let id = tests::require_tracepoint!("syscalls:sys_enter_getppid").id;
    const BPF_PROG_TYPE_TRACEPOINT: u32 = 5;
    let prog = match load_trivial_bpf(BPF_PROG_TYPE_TRACEPOINT) {
        Ok(p) => p,
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
            tests::skip(Skip::Privilege, &format!("BPF_PROG_LOAD refused: {e}"));
            return;
        }
        Err(e) => panic!("BPF_PROG_LOAD: {e}"),
    };
    let mut a = attr(PERF_TYPE_TRACEPOINT, id);
    a.set_exclude_kernel(0);
    let fd = open(&a, None);
    ioctl::enable(fd.as_fd()).unwrap();
    // SAFETY: getppid has no preconditions.
    unsafe { libc::getppid() };
    assert_eq!(
        count(&fd),
        1,
        "tracepoint did not count before the program was attached"
    );
    ioctl::set_bpf(fd.as_fd(), prog.as_fd()).unwrap();
    for _ in 0..3 {
        // SAFETY: as above.
        unsafe { libc::getppid() };
    }
    // A program returning 0 tells the kernel not to count the event.
    assert_eq!(
        count(&fd),
        1,
        "the attached program (returns 0) did not suppress counting"
    );
    let mut ids = [0u32; 4];
    let n = ioctl::query_bpf(fd.as_fd(), &mut ids).unwrap();
    assert_eq!(n, 1);
    assert_ne!(ids[0], 0);
}

static mut BP_VAR_1: u64 = 0;
static mut BP_VAR_2: u64 = 0;

#[test]
fn modify_attributes_moves_a_breakpoint() {
    let mut a = attr(PERF_TYPE_BREAKPOINT, 0);
    a.set_disabled(0);
    a.bp_type = HW_BREAKPOINT_W;
    a.__bindgen_anon_3.bp_addr = std::ptr::addr_of!(BP_VAR_1) as u64;
    a.__bindgen_anon_4.bp_len = HW_BREAKPOINT_LEN_8 as u64;
    let fd = match perf_event_open(&a, 0, -1, None, PERF_FLAG_FD_CLOEXEC as u64) {
        Ok(fd) => fd,
        Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => {
            tests::skip(Skip::Hardware, "no free debug register");
            return;
        }
        Err(e) => panic!("breakpoint open: {e}"),
    };
    let bump = |p: *mut u64| {
        // SAFETY: volatile read-modify-write of a static only this test touches.
        unsafe { std::ptr::write_volatile(p, std::ptr::read_volatile(p) + 1) }
    };
    for _ in 0..5 {
        bump(std::ptr::addr_of_mut!(BP_VAR_1));
    }
    assert_eq!(count(&fd), 5);
    let mut m = a;
    m.__bindgen_anon_3.bp_addr = std::ptr::addr_of!(BP_VAR_2) as u64;
    ioctl::modify_attributes(fd.as_fd(), &m).unwrap();
    for _ in 0..7 {
        bump(std::ptr::addr_of_mut!(BP_VAR_1));
        bump(std::ptr::addr_of_mut!(BP_VAR_2));
    }
    assert_eq!(
        count(&fd),
        12,
        "after the move only the 7 writes to BP_VAR_2 count"
    );
    // On a software event the kernel refuses it.
    let sw = open(
        &attr(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS as u64),
        None,
    );
    let sw_attr = attr(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS as u64);
    let e = ioctl::modify_attributes(sw.as_fd(), &sw_attr).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EOPNOTSUPP));
}

#[test]
fn task_perf_events_prctl_fences_counting() {
    let mut a = attr(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS as u64);
    a.set_disabled(0);
    let fd = open(&a, None);
    task_perf_events(false).unwrap();
    touch_pages(10);
    let off = count(&fd);
    task_perf_events(true).unwrap();
    touch_pages(10);
    let on = count(&fd) - off;
    assert!(
        off < 10,
        "PR_TASK_PERF_EVENTS_DISABLE left the counter running ({off})"
    );
    assert!(on >= 10, "PR_TASK_PERF_EVENTS_ENABLE did not resume ({on})");
}
