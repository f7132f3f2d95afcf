//! The two examples of the `perf-event-open` 0.5.1 docs (the spec), with only the crate name changed.
#![allow(clippy::field_reassign_with_default)] // options are set field by field, as in the docs

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tests::{has_pmu, is_root, require, Skip};

/// Keeps a user-space spinner on CPU 0 so that CPU-0 samples with a user stack exist.
fn spin_on_cpu0(stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes inside it.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: CPU 0 is within the set's size.
        unsafe { libc::CPU_SET(0, &mut set) };
        // SAFETY: `set` is a valid cpu_set_t of the size passed; 0 means the calling thread.
        unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
        let mut x = 0u64;
        while !stop.load(Ordering::Relaxed) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
    })
}

// The spec's code is kept verbatim, unsafe blocks without SAFETY comments included.
#[allow(clippy::undocumented_unsafe_blocks)]
#[test]
fn cow_iter_example() {
    require!(
        is_root(),
        Skip::Privilege,
        "CPU-wide sampling (Proc::ALL) needs root or paranoid <= 0"
    );
    let stop = Arc::new(AtomicBool::new(false));
    let spinner = spin_on_cpu0(Arc::clone(&stop));

    // --- the spec example, `perf_event_open::` → `perf_event::` ---
    use perf_event::config::{Cpu, Opts, Proc, SampleOn, Size};
    use perf_event::count::Counter;
    use perf_event::event::sw::Software;

    let event = Software::TaskClock;
    let target = (Proc::ALL, Cpu(0));

    let mut opts = Opts::default();
    opts.sample_on = SampleOn::Count(50_000); // 50us
    opts.sample_format.user_stack = Some(Size(8)); // Dump 8-bytes user stack in sample.

    let counter = Counter::new(event, target, &opts).unwrap();
    let sampler = counter.sampler(5).unwrap();
    let mut iter = sampler.iter().into_cow();

    counter.enable().unwrap();

    let mut skipped = 0;
    let it = loop {
        let it = iter
            .next(|cc, p| {
                // ABI layout:
                // u32 type
                // u16 misc
                // u16 size
                // u64 len
                // [u8; len] bytes

                let ptr = cc.as_bytes().as_ptr();
                let ty = ptr as *const u32;

                // Only parse sample record with stack dumped.
                if unsafe { *ty } == 9 {
                    let len = unsafe { ptr.offset(8) } as *const u64;
                    if unsafe { *len } > 0 {
                        return Some(p.parse(cc));
                    }
                }

                skipped += 1;
                None
            })
            .flatten();

        if let Some(it) = it {
            break it;
        }
    };

    // (Not "skipped: N": the kernel matrix's report reads that prefix as a skipped test.)
    println!("records passed over: {}", skipped);
    println!("{:-?}", it);
    // --- end of the example ---

    // The spec's test of `len` reads the requested stack size (8 in every sample), so the sample it
    // stops at may be of a kernel thread, whose dumped size (dyn_size) is 0. The spinner pinned to
    // CPU 0 runs in user space: some sample within a few seconds must carry 8 real stack bytes.
    let mut dumped = stack_len(&it.1);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while dumped != Some(8) && std::time::Instant::now() < deadline {
        if let Some(n) = iter.next(|cc, p| stack_len(&p.parse(cc).1)) {
            dumped = dumped.max(n);
        }
    }
    stop.store(true, Ordering::Relaxed);
    spinner.join().unwrap();
    assert_eq!(
        dumped,
        Some(8),
        "no sample carried 8 valid bytes of user stack"
    );
}

/// The number of user-stack bytes a sample carries (`None` for other records).
fn stack_len(record: &perf_event::sample::record::Record) -> Option<usize> {
    match record {
        perf_event::sample::record::Record::Sample(s) => s.user_stack.as_ref().map(|st| st.len()),
        _ => None,
    }
}

#[allow(clippy::undocumented_unsafe_blocks)]
#[test]
fn aux_example() {
    require!(has_pmu("intel_pt"), Skip::Hardware, "no intel_pt PMU here (the AUX path is tested on simulated memory in perf-event's unit tests)");
    require!(
        is_root(),
        Skip::Privilege,
        "Intel PT on another thread needs privilege"
    );

    // --- the spec example, `perf_event_open::` → `perf_event::` ---
    use std::fs::read_to_string;
    use std::sync::mpsc::channel;
    use std::thread;
    use std::time::Duration;

    use perf_event::config::{Cpu, Opts, Proc};
    use perf_event::count::Counter;
    use perf_event::event::dp::DynamicPmu;

    let (tid_tx, tid_rx) = channel();
    thread::spawn(move || {
        tid_tx.send(unsafe { libc::gettid() }).unwrap();
        loop {
            std::hint::spin_loop();
        }
    });

    // Intel PT
    let ty = read_to_string("/sys/bus/event_source/devices/intel_pt/type");

    let event = DynamicPmu {
        ty: ty.unwrap().lines().next().unwrap().parse().unwrap(),
        config: 0,
        config1: 0,
        config2: 0,
        config3: 0,
    };
    let target = (Proc(tid_rx.recv().unwrap() as _), Cpu::ALL);
    let opts = Opts::default();

    let counter = Counter::new(event, target, opts).unwrap();
    let sampler = counter.sampler(10).unwrap();
    let aux = sampler.aux_tracer(10).unwrap();

    counter.enable().unwrap();
    thread::sleep(Duration::from_millis(1));
    counter.disable().unwrap();

    for it in sampler.iter() {
        println!("{:-?}", it);
    }
    while let Some(it) = aux.iter().next(None) {
        let bytes = it.len();
        println!("{:.2} KB", bytes as f64 / 1000.0);
    }
}
