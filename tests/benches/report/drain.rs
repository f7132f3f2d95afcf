//! Section 3, end-to-end drain: a producer thread loops `getppid` under the `syscalls:sys_enter_getppid`
//! tracepoint (period 1, IP|TID|TIME: 32-byte records) into 2^k-page rings; the main thread drains
//! them, waiting with `poll(2)` when the ring is empty. Contenders: a minimal raw reader (the
//! baseline); this workspace's cow iterator (per-record `next`, with and without `p.parse(cc)` in the
//! closure, the lending `lending_next`, with and without `rr.parse()`, and per-batch `drain`) and
//! owned iterator; `perf-event-open` 0.5.1's owned and cow iterators (with and without the parse in
//! the closure) and 0.7.0's owned iterator and `lending_next` (with and without the parse); and
//! `perf-event2`'s `Sampler`.
//!
//! Each run asserts samples + lost == the counter's value (`PERF_FORMAT_LOST`); rows give the median
//! records/s, the worst lost count, and the drainer's CPU time per record, with its ratio to the same
//! path of each `perf-event-open` version. Producer on CPU 0, drainer on CPU 1.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use perf_sys as sys;

use crate::{interleave, median, pin, skip_row, Len, Row};

const SAMPLE: u32 = sys::PERF_RECORD_SAMPLE;

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

fn run_one(p: &Producer, calls: u64, d: &mut dyn Drainer) -> Outcome {
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
        CowNextParse,
        Lending,
        LendingParse,
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
                Mode::CowNextParse => {
                    let mut it = cow(&self.sampler);
                    while let Some((_, r)) = it.next(|cc, p| p.parse(cc)) {
                        records += 1;
                        samples += u64::from(matches!(r, Record::Sample(_)));
                    }
                }
                Mode::Lending => {
                    let mut it = cow(&self.sampler);
                    while let Some(rr) = it.lending_next() {
                        let b = rr.as_raw().as_bytes();
                        records += 1;
                        samples +=
                            u64::from(u32::from_ne_bytes([b[0], b[1], b[2], b[3]]) == SAMPLE);
                    }
                }
                Mode::LendingParse => {
                    let mut it = cow(&self.sampler);
                    while let Some(rr) = it.lending_next() {
                        let (_, r) = rr.parse();
                        records += 1;
                        samples += u64::from(matches!(r, Record::Sample(_)));
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

    pub enum Mode {
        Owned,
        Cow,
        CowParse,
    }

    pub struct Peo {
        counter: Counter,
        sampler: Sampler,
        mode: Mode,
    }

    pub fn new(tp: u64, tid: i32, exp: u8, mode: Mode) -> Peo {
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
            mode,
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
            match self.mode {
                Mode::Cow => {
                    let mut it = self.sampler.iter().into_cow();
                    while let Some(ty) = it.next(|cc, _| {
                        let b = cc.as_bytes();
                        u32::from_ne_bytes([b[0], b[1], b[2], b[3]])
                    }) {
                        records += 1;
                        samples += u64::from(ty == SAMPLE);
                    }
                }
                Mode::CowParse => {
                    let mut it = self.sampler.iter().into_cow();
                    while let Some((_, r)) = it.next(|cc, p| p.parse(cc)) {
                        records += 1;
                        samples += u64::from(matches!(r, Record::Sample(_)));
                    }
                }
                Mode::Owned => {
                    for (_, r) in self.sampler.iter() {
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

// ---------------------------------------------------------------- perf-event-open 0.7

mod peo7 {
    use super::*;
    use perf_event_open_07::config::{Cpu, Opts, Proc, SampleOn};
    use perf_event_open_07::count::Counter;
    use perf_event_open_07::event::tp::Tracepoint;
    use perf_event_open_07::sample::record::Record;
    use perf_event_open_07::sample::Sampler;

    pub enum Mode {
        Owned,
        Lending,
        LendingParse,
    }

    pub struct Peo7 {
        counter: Counter,
        sampler: Sampler,
        mode: Mode,
    }

    pub fn new(tp: u64, tid: i32, exp: u8, mode: Mode) -> Peo7 {
        let mut opts = Opts::default();
        opts.sample_on = SampleOn::Count(1);
        opts.sample_format.code_addr = true;
        opts.record_id_format.task = true;
        opts.record_id_format.time = true;
        opts.stat_format.lost_records = true;
        let counter =
            Counter::new(Tracepoint { id: tp }, (Proc(tid as u32), Cpu::ALL), &opts).unwrap();
        let sampler = counter.sampler(exp).unwrap();
        Peo7 {
            counter,
            sampler,
            mode,
        }
    }

    impl Drainer for Peo7 {
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
            // One iterator at a time per sampler (0.7's `iter()` is `None` while another lives).
            let it = self.sampler.iter().expect("no other iterator");
            match self.mode {
                Mode::Lending => {
                    let mut it = it.into_cow();
                    while let Some(rr) = it.lending_next() {
                        let b = rr.as_raw().as_bytes();
                        records += 1;
                        samples +=
                            u64::from(u32::from_ne_bytes([b[0], b[1], b[2], b[3]]) == SAMPLE);
                    }
                }
                Mode::LendingParse => {
                    let mut it = it.into_cow();
                    while let Some(rr) = it.lending_next() {
                        let (_, r) = rr.parse();
                        records += 1;
                        samples += u64::from(matches!(r, Record::Sample(_)));
                    }
                }
                Mode::Owned => {
                    for (_, r) in it {
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

/// Runs section 3.
pub fn run(len: Len, rows: &mut Vec<Row>) {
    let section = "3 drain, tracepoint getppid, period 1";
    if !tests::is_root() {
        skip_row(
            rows,
            section,
            "needs root (tracepoint, rings above the mlock allowance)",
        );
        return;
    }
    let tp =
        match std::fs::read_to_string("/sys/kernel/tracing/events/syscalls/sys_enter_getppid/id") {
            Ok(s) => s.trim().parse::<u64>().unwrap(),
            Err(e) => {
                skip_row(
                    rows,
                    section,
                    &format!("no syscalls:sys_enter_getppid tracepoint ({e})"),
                );
                return;
            }
        };
    let calls: u64 = len.pick(100_000, 500_000, 1_000_000);
    let repeats = len.pick(1, 5, 7);
    let exps: &[u32] = len.pick(&[7], &[3, 10], &[3, 7, 10, 12]);
    pin(1);
    let p = producer();
    // (name, the same path in perf-event-open 0.5.1 and in 0.7.0, by index: None where it has none).
    let contenders: [(&str, Option<usize>, Option<usize>); 14] = [
        ("raw reader (baseline)", None, None),
        ("ours CowIter::next", Some(8), Some(11)),
        ("ours CowIter::next + p.parse(cc)", Some(9), Some(12)),
        ("ours CowIter::lending_next", Some(8), Some(11)),
        ("ours CowIter::lending_next + rr.parse()", Some(9), Some(12)),
        ("ours CowIter::drain", Some(8), Some(11)),
        ("ours Iter (owned)", Some(7), Some(10)),
        ("perf-event-open 0.5.1 owned iter", None, None),
        ("perf-event-open 0.5.1 cow next", None, None),
        ("perf-event-open 0.5.1 cow next + p.parse(cc)", None, None),
        ("perf-event-open 0.7.0 owned iter", None, None),
        ("perf-event-open 0.7.0 lending_next", None, None),
        (
            "perf-event-open 0.7.0 lending_next + rr.parse()",
            None,
            None,
        ),
        ("perf-event2 Sampler::next_record", None, None),
    ];
    let names: Vec<&str> = contenders.iter().map(|c| c.0).collect();
    for &exp in exps {
        let mut outcomes: Vec<Vec<Outcome>> = (0..names.len()).map(|_| Vec::new()).collect();
        let _ = interleave(names.len(), repeats, |i| {
            let e = exp as u8;
            let mut d: Box<dyn Drainer> = match i {
                0 => Box::new(Raw::new(tp, p.tid, exp)),
                1 => Box::new(ours::new(tp, p.tid, e, ours::Mode::CowNext)),
                2 => Box::new(ours::new(tp, p.tid, e, ours::Mode::CowNextParse)),
                3 => Box::new(ours::new(tp, p.tid, e, ours::Mode::Lending)),
                4 => Box::new(ours::new(tp, p.tid, e, ours::Mode::LendingParse)),
                5 => Box::new(ours::new(tp, p.tid, e, ours::Mode::CowDrain)),
                6 => Box::new(ours::new(tp, p.tid, e, ours::Mode::Owned)),
                7 => Box::new(peo::new(tp, p.tid, e, peo::Mode::Owned)),
                8 => Box::new(peo::new(tp, p.tid, e, peo::Mode::Cow)),
                9 => Box::new(peo::new(tp, p.tid, e, peo::Mode::CowParse)),
                10 => Box::new(peo7::new(tp, p.tid, e, peo7::Mode::Owned)),
                11 => Box::new(peo7::new(tp, p.tid, e, peo7::Mode::Lending)),
                12 => Box::new(peo7::new(tp, p.tid, e, peo7::Mode::LendingParse)),
                _ => Box::new(p2::new(tp, p.tid, exp)),
            };
            let o = run_one(&p, calls, d.as_mut());
            assert_eq!(
                o.samples + o.lost,
                o.count,
                "{} 2^{exp}: samples {} + lost {} != count {}",
                names[i],
                o.samples,
                o.lost,
                o.count
            );
            drop(d);
            std::thread::sleep(Duration::from_millis(10));
            outcomes[i].push(o);
            0.0
        });
        let rate = |o: &Outcome| o.samples as f64 / o.secs;
        let base = median(&outcomes[0].iter().map(rate).collect::<Vec<_>>());
        let cpu: Vec<f64> = outcomes
            .iter()
            .map(|os| median(&os.iter().map(|o| o.cpu_ns_per_record).collect::<Vec<_>>()))
            .collect();
        for (i, os) in outcomes.iter().enumerate() {
            let worst = os.iter().map(|o| o.lost).max().unwrap_or(0);
            let (_, v05, v07) = contenders[i];
            let vs = |peer: Option<usize>, version: &str| {
                peer.map_or(String::new(), |j| {
                    format!("; {:.2}× peo {version}", cpu[i] / cpu[j])
                })
            };
            rows.push(Row {
                section: format!("{section}, 2^{exp} pages"),
                name: names[i].into(),
                samples: os.iter().map(rate).collect(),
                unit: "records/s",
                base: Some(base),
                note: format!(
                    "lost ≤ {worst}; CPU {:.1} ns/rec{}{}",
                    cpu[i],
                    vs(v05, "0.5.1"),
                    vs(v07, "0.7.0")
                ),
            });
        }
    }
}
