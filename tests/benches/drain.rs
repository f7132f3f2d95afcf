//! End-to-end sampling drain: a producer thread loops `getppid` under the `syscalls:sys_enter_getppid`
//! tracepoint (period 1, IP|TID|TIME: 32-byte records) into 2^k-page rings; the main thread drains
//! them, waiting with `poll(2)` when the ring is empty. Contenders: a minimal raw reader (the
//! baseline), this workspace's cow iterator (per-record `next` and per-batch `drain`) and owned
//! iterator, `perf-event-open`'s owned and cow iterators, and `perf-event2`'s `Sampler`.
//!
//! `cargo bench -p tests --bench drain [-- CALLS]` (root). Each run asserts samples + lost == the
//! counter's value (`PERF_FORMAT_LOST`) and prints records/s, lost, and the drainer's CPU time per
//! record (`CLOCK_THREAD_CPUTIME_ID` / records). Producer pinned to CPU 0, drainer to CPU 1.
#![allow(clippy::field_reassign_with_default)] // options are set field by field, as in the docs

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use perf_sys as sys;

const SAMPLE: u32 = sys::PERF_RECORD_SAMPLE;

fn pin(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET stays within it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is valid for its size; 0 is the calling thread.
    unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
}

fn wait_readable(fd: RawFd) {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut p, 1, 10) };
}

struct Producer {
    tid: i32,
    go: mpsc::Sender<u64>,
    done: Arc<AtomicBool>,
}

fn producer() -> Producer {
    let (tid_tx, tid_rx) = mpsc::channel();
    let (go, go_rx) = mpsc::channel::<u64>();
    let done = Arc::new(AtomicBool::new(false));
    let d = Arc::clone(&done);
    std::thread::spawn(move || {
        pin(0);
        // SAFETY: gettid has no preconditions.
        tid_tx.send(unsafe { libc::gettid() }).unwrap();
        while let Ok(n) = go_rx.recv() {
            for _ in 0..n {
                // SAFETY: getppid has no preconditions.
                unsafe { libc::syscall(libc::SYS_getppid) };
            }
            d.store(true, Ordering::Release);
        }
    });
    Producer {
        tid: tid_rx.recv().unwrap(),
        go,
        done,
    }
}

/// One drain pass: returns (records seen, samples seen).
trait Drainer {
    fn fd(&self) -> RawFd;
    fn enable(&mut self);
    fn disable(&mut self);
    fn drain(&mut self) -> (u64, u64);
    /// (count, lost) from the counter.
    fn read(&mut self) -> (u64, u64);
}

struct Outcome {
    samples: u64,
    lost: u64,
    count: u64,
    secs: f64,
    cpu_ns_per_record: f64,
}

fn run(p: &Producer, calls: u64, d: &mut dyn Drainer) -> Outcome {
    p.done.store(false, Ordering::Release);
    d.enable();
    let start = Instant::now();
    let cpu0 = tests::thread_cpu_time();
    p.go.send(calls).unwrap();
    let (mut records, mut samples) = (0u64, 0u64);
    loop {
        let (r, s) = d.drain();
        records += r;
        samples += s;
        if r == 0 {
            if p.done.load(Ordering::Acquire) {
                d.disable();
                let (r, s) = d.drain();
                records += r;
                samples += s;
                break;
            }
            wait_readable(d.fd());
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let cpu = tests::thread_cpu_time() - cpu0;
    let (count, lost) = d.read();
    Outcome {
        samples,
        lost,
        count,
        secs,
        cpu_ns_per_record: cpu.as_nanos() as f64 / records.max(1) as f64,
    }
}

// ---------------------------------------------------------------- raw baseline

struct Raw {
    fd: OwnedFd,
    base: *mut u8,
    len: usize,
    data_off: usize,
    data_size: u64,
}

impl Raw {
    fn new(tp: u64, tid: i32, exp: u32) -> Raw {
        let mut attr = sys::perf_event_attr {
            type_: sys::PERF_TYPE_TRACEPOINT,
            size: std::mem::size_of::<sys::perf_event_attr>() as u32,
            config: tp,
            ..Default::default()
        };
        attr.__bindgen_anon_1.sample_period = 1;
        attr.sample_type =
            (sys::PERF_SAMPLE_IP | sys::PERF_SAMPLE_TID | sys::PERF_SAMPLE_TIME) as u64;
        attr.read_format = sys::PERF_FORMAT_LOST as u64;
        attr.set_disabled(1);
        let fd =
            sys::perf_event_open(&attr, tid, -1, None, sys::PERF_FLAG_FD_CLOEXEC as u64).unwrap();
        let page = tests::page_size();
        let len = page * (1 + (1usize << exp));
        // SAFETY: mapping a perf fd's ring, shared, read-write; checked below.
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
        assert_ne!(base, libc::MAP_FAILED);
        Raw {
            fd,
            base: base.cast(),
            len,
            data_off: page,
            data_size: (len - page) as u64,
        }
    }

    fn field(&self, offset: usize) -> &AtomicU64 {
        // SAFETY: an aligned u64 field of the mapped page, shared with the kernel, accessed atomically.
        unsafe { AtomicU64::from_ptr(self.base.add(offset).cast()) }
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        // SAFETY: unmapping the mapping made in `new`.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

impl Drainer for Raw {
    fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
    fn enable(&mut self) {
        sys::ioctl::enable(self.fd.as_fd_b()).unwrap();
    }
    fn disable(&mut self) {
        sys::ioctl::disable(self.fd.as_fd_b()).unwrap();
    }
    fn drain(&mut self) -> (u64, u64) {
        let head_off = std::mem::offset_of!(sys::perf_event_mmap_page, data_head);
        let tail_off = std::mem::offset_of!(sys::perf_event_mmap_page, data_tail);
        let head = self.field(head_off).load(Ordering::Acquire);
        let mut tail = self.field(tail_off).load(Ordering::Relaxed);
        let (mut records, mut samples) = (0, 0);
        let mask = self.data_size - 1;
        while tail < head {
            let off = (tail & mask) as usize;
            // SAFETY: an 8-aligned header inside the data area, published by the kernel.
            let (ty, size) = unsafe {
                let h = self.base.add(self.data_off + off);
                (
                    std::ptr::read(h.cast::<u32>()),
                    std::ptr::read(h.add(6).cast::<u16>()),
                )
            };
            records += 1;
            samples += u64::from(ty == SAMPLE);
            tail += u64::from(size);
        }
        self.field(tail_off).store(tail, Ordering::Release);
        (records, samples)
    }
    fn read(&mut self) -> (u64, u64) {
        let mut buf = [0u64; 2];
        // SAFETY: reading 16 bytes into a 16-byte buffer.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), 16) };
        assert_eq!(n, 16);
        (buf[0], buf[1])
    }
}

trait AsFdB {
    fn as_fd_b(&self) -> std::os::fd::BorrowedFd<'_>;
}
impl AsFdB for OwnedFd {
    fn as_fd_b(&self) -> std::os::fd::BorrowedFd<'_> {
        std::os::fd::AsFd::as_fd(self)
    }
}

// ---------------------------------------------------------------- this workspace

mod ours {
    use super::*;
    use perf_event::config::{Cpu, Opts, Proc, SampleOn};
    use perf_event::count::Counter;
    use perf_event::event::tp::Tracepoint;
    use perf_event::sample::record::Record;
    use perf_event::sample::{CowIter, Iter, Sampler};

    pub enum Mode {
        CowNext,
        CowDrain,
        Owned,
    }

    pub struct Ours {
        counter: Counter,
        sampler: Box<Sampler>,
        mode: Mode,
    }

    pub fn new(tp: u64, tid: i32, exp: u8, mode: Mode) -> Ours {
        let mut opts = Opts::default();
        opts.sample_on = SampleOn::Count(1);
        opts.sample_format.code_addr = true;
        opts.record_id_format.task = true;
        opts.record_id_format.time = true;
        opts.stat_format.lost_records = true;
        let counter =
            Counter::new(Tracepoint { id: tp }, (Proc(tid as u32), Cpu::ALL), &opts).unwrap();
        let sampler = Box::new(counter.sampler(exp).unwrap());
        Ours {
            counter,
            sampler,
            mode,
        }
    }

    fn cow(s: &Sampler) -> CowIter<'_> {
        s.iter().into_cow()
    }

    fn owned(s: &Sampler) -> Iter<'_> {
        s.iter()
    }

    impl Drainer for Ours {
        fn fd(&self) -> RawFd {
            self.counter.as_raw_fd()
        }
        fn enable(&mut self) {
            self.counter.enable().unwrap();
        }
        fn disable(&mut self) {
            self.counter.disable().unwrap();
        }
        fn drain(&mut self) -> (u64, u64) {
            let (mut records, mut samples) = (0u64, 0u64);
            match self.mode {
                Mode::CowNext => {
                    let mut it = cow(&self.sampler);
                    while let Some(ty) = it.next(|cc, _| cc.record_type()) {
                        records += 1;
                        samples += u64::from(ty == SAMPLE);
                    }
                }
                Mode::CowDrain => {
                    let mut it = cow(&self.sampler);
                    records += it.drain(usize::MAX, |cc, _| {
                        samples += u64::from(cc.record_type() == SAMPLE);
                    }) as u64;
                }
                Mode::Owned => {
                    for (_, r) in owned(&self.sampler) {
                        records += 1;
                        samples += u64::from(matches!(r, Record::Sample(_)));
                    }
                }
            }
            (records, samples)
        }
        fn read(&mut self) -> (u64, u64) {
            let s = self.counter.stat().unwrap();
            (s.count, s.lost_records.unwrap())
        }
    }
}

// ---------------------------------------------------------------- perf-event-open

mod peo {
    use super::*;
    use perf_event_open::config::{Cpu, Opts, Proc, SampleOn};
    use perf_event_open::count::Counter;
    use perf_event_open::event::tp::Tracepoint;
    use perf_event_open::sample::record::Record;
    use perf_event_open::sample::Sampler;

    pub struct Peo {
        counter: Counter,
        sampler: Sampler,
        cow: bool,
    }

    pub fn new(tp: u64, tid: i32, exp: u8, cow: bool) -> Peo {
        let mut opts = Opts::default();
        opts.sample_on = SampleOn::Count(1);
        opts.sample_format.code_addr = true;
        opts.record_id_format.task = true;
        opts.record_id_format.time = true;
        opts.stat_format.lost_records = true;
        let counter =
            Counter::new(Tracepoint { id: tp }, (Proc(tid as u32), Cpu::ALL), &opts).unwrap();
        let sampler = counter.sampler(exp).unwrap();
        Peo {
            counter,
            sampler,
            cow,
        }
    }

    impl Drainer for Peo {
        fn fd(&self) -> RawFd {
            self.counter.file().as_raw_fd()
        }
        fn enable(&mut self) {
            self.counter.enable().unwrap();
        }
        fn disable(&mut self) {
            self.counter.disable().unwrap();
        }
        fn drain(&mut self) -> (u64, u64) {
            let (mut records, mut samples) = (0u64, 0u64);
            if self.cow {
                let mut it = self.sampler.iter().into_cow();
                while let Some(ty) = it.next(|cc, _| {
                    let b = cc.as_bytes();
                    u32::from_ne_bytes([b[0], b[1], b[2], b[3]])
                }) {
                    records += 1;
                    samples += u64::from(ty == SAMPLE);
                }
            } else {
                for (_, r) in self.sampler.iter() {
                    records += 1;
                    samples += u64::from(matches!(r, Record::Sample(_)));
                }
            }
            (records, samples)
        }
        fn read(&mut self) -> (u64, u64) {
            let s = self.counter.stat().unwrap();
            (s.count, s.lost_records.unwrap())
        }
    }
}

// ---------------------------------------------------------------- perf-event2

mod p2 {
    use super::*;
    use perf_event2::events::Tracepoint;
    use perf_event2::{Builder, ReadFormat, SampleFlag, Sampler};

    pub struct P2 {
        sampler: Sampler,
    }

    pub fn new(tp: u64, tid: i32, exp: u32) -> P2 {
        let counter = Builder::new(Tracepoint::with_id(tp))
            .observe_pid(tid)
            .any_cpu()
            .sample_period(1)
            .sample(SampleFlag::IP | SampleFlag::TID | SampleFlag::TIME)
            .read_format(ReadFormat::LOST)
            .enabled(false)
            .build()
            .unwrap();
        let len = tests::page_size() << exp;
        P2 {
            sampler: counter.sampled(len).unwrap(),
        }
    }

    impl Drainer for P2 {
        fn fd(&self) -> RawFd {
            self.sampler.as_raw_fd()
        }
        fn enable(&mut self) {
            self.sampler.enable().unwrap();
        }
        fn disable(&mut self) {
            self.sampler.disable().unwrap();
        }
        fn drain(&mut self) -> (u64, u64) {
            let (mut records, mut samples) = (0u64, 0u64);
            while let Some(r) = self.sampler.next_record() {
                records += 1;
                samples += u64::from(r.ty() == SAMPLE);
                std::hint::black_box(r.parse_record().ok());
            }
            (records, samples)
        }
        fn read(&mut self) -> (u64, u64) {
            let d = self.sampler.read_full().unwrap();
            (d.count(), d.lost().unwrap())
        }
    }
}

fn main() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!(
            "skipped: the drain bench needs root (tracepoints, rings above the mlock allowance)"
        );
        return;
    }
    let tp =
        match std::fs::read_to_string("/sys/kernel/tracing/events/syscalls/sys_enter_getppid/id") {
            Ok(s) => s.trim().parse::<u64>().unwrap(),
            Err(e) => {
                println!("skipped: no syscalls:sys_enter_getppid tracepoint ({e})");
                return;
            }
        };
    let calls: u64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    pin(1);
    let p = producer();
    let names = [
        "raw baseline",
        "ours cow next",
        "ours cow drain",
        "ours owned",
        "peo owned",
        "peo cow",
        "perf-event2",
    ];
    println!("{calls} getppid calls per run; records/s, lost, drainer CPU ns/record");
    println!(
        "{:>5} {:<16} {:>12} {:>10} {:>10}",
        "pages", "contender", "records/s", "lost", "ns/rec"
    );
    for exp in [3u32, 7, 10, 12] {
        for (i, name) in names.iter().enumerate() {
            let mut d: Box<dyn Drainer> = match i {
                0 => Box::new(Raw::new(tp, p.tid, exp)),
                1 => Box::new(ours::new(tp, p.tid, exp as u8, ours::Mode::CowNext)),
                2 => Box::new(ours::new(tp, p.tid, exp as u8, ours::Mode::CowDrain)),
                3 => Box::new(ours::new(tp, p.tid, exp as u8, ours::Mode::Owned)),
                4 => Box::new(peo::new(tp, p.tid, exp as u8, false)),
                5 => Box::new(peo::new(tp, p.tid, exp as u8, true)),
                _ => Box::new(p2::new(tp, p.tid, exp)),
            };
            let o = run(&p, calls, d.as_mut());
            assert_eq!(
                o.samples + o.lost,
                o.count,
                "{name} 2^{exp}: samples {} + lost {} != count {}",
                o.samples,
                o.lost,
                o.count
            );
            println!(
                "{:>5} {:<16} {:>12.0} {:>10} {:>10.1}",
                1u64 << exp,
                name,
                o.samples as f64 / o.secs,
                o.lost,
                o.cpu_ns_per_record
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
