//! The borrowed parse path allocates nothing: a counting global allocator watches a walk + typed parse and
//! a walk + lazy view of every captured fixture, with records split across the seam too.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use perf_core::record::*;
use perf_core::{Chunk, RawRecord, Records};
use perf_sys::PERF_RECORD_SAMPLE;

struct Counting;

thread_local! {
    /// Allocations made by this thread. Per thread, because the test harness and other tests
    /// allocate on their own threads meanwhile (a global count failed 1 run in ~20). A `const`
    /// initializer and no destructor: reading it never allocates nor registers anything.
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

fn count_one() {
    // `try_with`: during thread teardown the slot may already be gone; such allocations are not
    // the measured code's.
    let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
}

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_one();
        // SAFETY: the caller's contract for `alloc` is passed through.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_one();
        // SAFETY: the caller's contract for `realloc` is passed through.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Touches every field a consumer would, so nothing is optimized away.
fn fold(rec: &Record<'_>) -> u64 {
    let mut sum = rec.record_type() as u64;
    match rec {
        Record::Sample(s) => return fold_view(&RecordView::Sample(s.view())),
        Record::Mmap2(m) => sum ^= m.addr ^ m.filename.len() as u64,
        Record::Comm(c) => sum ^= c.comm.iter().map(u64::from).sum::<u64>(),
        Record::Namespaces(n) => sum ^= n.links().map(|l| l.ino).sum::<u64>(),
        Record::Lost(l) => sum ^= l.lost,
        other => sum ^= other.sample_id().and_then(|s| s.time).unwrap_or(0),
    }
    sum
}

/// The same fields through the lazy view, plus every other accessor.
fn fold_view(rec: &RecordView<'_>) -> u64 {
    let RecordView::Sample(s) = rec else {
        return match rec {
            RecordView::Other(r) => fold(&r.record()),
            _ => rec.record_type() as u64,
        };
    };
    let mut sum = PERF_RECORD_SAMPLE as u64;
    sum ^= s.ip().unwrap_or(0) ^ s.time().unwrap_or(0) ^ s.period().unwrap_or(0);
    if let Some(cc) = s.callchain() {
        for (_, ips) in cc.contexts() {
            sum = ips.iter().fold(sum, |a, w| a.wrapping_add(w));
        }
    }
    if let Some(raw) = s.raw() {
        sum ^= raw.len() as u64 ^ raw.iter().map(u64::from).sum::<u64>();
    }
    if let Some(ReadValues::Group(g)) = s.read() {
        sum ^= g.entries().map(|e| e.value).sum::<u64>();
    }
    if let Some(r) = s.regs_user() {
        sum ^= r.values.iter().sum::<u64>();
    }
    if let Some(st) = s.stack_user() {
        sum ^= st.dyn_size ^ st.data.len() as u64;
    }
    let words = [
        s.identifier(),
        s.addr(),
        s.id(),
        s.stream_id(),
        s.cpu().map(u64::from),
        s.weight().map(Weight::full),
        s.data_src(),
        s.transaction(),
        s.phys_addr(),
        s.cgroup(),
        s.data_page_size(),
        s.code_page_size(),
        s.thread().map(|t| t.pid as u64),
    ];
    sum ^= words.iter().map(|w| w.unwrap_or(0)).sum::<u64>();
    sum ^= s
        .branch_stack()
        .map_or(0, |b| b.entries().map(|e| e.from).sum::<u64>());
    sum ^= s.regs_intr().map_or(0, |r| r.values.len() as u64);
    sum ^= s.aux().map_or(0, |a| a.len() as u64);
    sum ^ s.misc().0 as u64
}

/// Allocations made by this thread while `f` runs.
fn allocations_during<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let before = ALLOCATIONS.with(Cell::get);
    let r = f();
    (r, ALLOCATIONS.with(Cell::get) - before)
}

/// The count is this thread's own: another thread allocating meanwhile (the test harness does, and
/// so do other tests) adds nothing, while this thread's allocations are all seen.
#[test]
fn the_count_is_per_thread() {
    // Fewer under Miri, which interprets every allocation.
    let enough = if cfg!(miri) { 50 } else { 1000 };
    let stop = AtomicBool::new(false);
    let made = AtomicU64::new(0);
    std::thread::scope(|s| {
        let noise = s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                black_box(vec![1u8; 64]);
                made.fetch_add(1, Ordering::Relaxed);
            }
        });
        // Let the other thread get going, then measure a stretch in which this thread does not
        // allocate while the other one does.
        while made.load(Ordering::Relaxed) < enough {
            std::hint::spin_loop();
        }
        // This thread spins (allocating nothing) until the other one has allocated `enough`
        // more times.
        let from = made.load(Ordering::Relaxed);
        let ((), quiet) = allocations_during(|| {
            while made.load(Ordering::Relaxed) < from + enough {
                std::hint::spin_loop();
            }
        });
        let (v, own) = allocations_during(|| black_box(Vec::<u64>::with_capacity(16)));
        stop.store(true, Ordering::Relaxed);
        noise.join().unwrap();
        black_box(v);
        assert_eq!(quiet, 0, "another thread's allocations were counted here");
        assert_eq!(own, 1, "this thread's allocation was not counted");
    });
}

#[test]
fn borrowed_parse_allocates_nothing() {
    let fixtures = common::fixture::all();
    let mut sum = 0u64;
    let mut records = 0usize;
    let ((), allocations) = allocations_during(|| {
        for f in &fixtures {
            for raw in Records::new(Chunk::contiguous(&f.bytes)) {
                let raw = raw.expect("walk");
                let rec = raw.parse(&f.cfg).expect("parse");
                sum = sum.wrapping_add(fold(&rec));
                sum ^= raw.time(&f.cfg).unwrap_or(0) ^ raw.id(&f.cfg).unwrap_or(0);
                // The same record wrapped at the seam.
                let body = raw.data();
                let bytes = body.as_contiguous().unwrap();
                let half = bytes.len() / 2;
                let split = RawRecord::new(
                    raw.record_type(),
                    raw.misc().0,
                    Chunk::new(&bytes[..half], &bytes[half..]),
                );
                sum = sum.wrapping_add(fold(&split.parse(&f.cfg).expect("parse split")));
                // The lazy view, whole and split.
                sum = sum.wrapping_add(fold_view(&raw.view(&f.cfg).expect("view")));
                sum = sum.wrapping_add(fold_view(&split.view(&f.cfg).expect("view split")));
                records += 1;
            }
        }
    });
    black_box(sum);
    assert!(records > 200, "{records} records");
    assert_eq!(
        allocations, 0,
        "{allocations} allocations while parsing {records} records"
    );
}
