//! What sampling does with default options on the real kernel: `CallChain::default()` records
//! call chains; a sampling counter reads the kernel's own lost-record count (`PERF_FORMAT_LOST`)
//! unless told not to.
#![allow(clippy::field_reassign_with_default)] // options are set field by field, as in the docs

use std::time::Duration;

use perf_event::config::{sibling, CallChain, Cpu, Opts, Proc, SampleOn};
use perf_event::count::{Counter, CounterGroup};
use perf_event::event::sw::Software;
use perf_event::perf_sys::PERF_FORMAT_LOST;
use perf_event::sample::record::Record;
use tests::{require, Skip};

#[test]
fn the_default_call_chain_records_user_frames() {
    tests::require_self_sampling!();
    let mut opts = Opts::default();
    opts.exclude.kernel = true;
    opts.sample_on = SampleOn::Count(100_000);
    opts.sample_format.call_chain = Some(CallChain::default());
    let counter = Counter::new(Software::TaskClock, (Proc::CURRENT, Cpu::ALL), &opts).unwrap();
    assert_eq!(counter.attr().sample_max_stack, 0);
    let sampler = counter.sampler(6).unwrap();
    counter.enable().unwrap();
    tests::busy_loop(Duration::from_millis(20));
    counter.disable().unwrap();
    let mut samples = 0;
    let mut with_frames = 0;
    for (_, r) in sampler.iter() {
        if let Record::Sample(s) = r {
            samples += 1;
            let chain = s.call_chain.as_ref().expect("call chain asked for");
            if !chain.is_empty() {
                with_frames += 1;
            }
        }
    }
    assert!(samples > 0, "no sample in 20 ms at one per 100 µs");
    assert!(
        with_frames > 0,
        "none of {samples} samples has a call chain"
    );
}

const LOST: u64 = PERF_FORMAT_LOST as u64;

/// Whether this kernel takes `PERF_FORMAT_LOST` (Linux 6.0, and stable kernels that took the
/// 2023 group-read fixes, such as Debian's 5.10.223): asked of the kernel, not of its version.
fn kernel_has_format_lost() -> bool {
    let mut o = Opts::default();
    o.exclude.kernel = true;
    o.stat_format.lost_records = true;
    Counter::new(Software::Dummy, (Proc::CURRENT, Cpu::ALL), o).is_ok()
}

/// Writes to `pages` fresh pages of an anonymous mapping kept out of transparent huge pages, so
/// that each is one page fault (with THP a 2 MiB page takes one fault for 512).
fn fault_pages(pages: usize) {
    let page = tests::page_size();
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
    assert_ne!(ptr, libc::MAP_FAILED, "mmap of {len} bytes failed");
    // SAFETY: advice on the mapping made above; failure (no THP support) changes nothing.
    unsafe { libc::madvise(ptr, len, libc::MADV_NOHUGEPAGE) };
    let base = ptr.cast::<u8>();
    for i in 0..pages {
        // SAFETY: `i * page < len`, inside the writable mapping made above.
        unsafe { std::ptr::write_volatile(base.add(i * page), 1) };
    }
    // SAFETY: unmapping exactly the mapping made above, which nothing else refers to.
    unsafe { libc::munmap(ptr, len) };
}

fn sampling() -> Opts {
    let mut o = Opts::default();
    o.exclude.kernel = true;
    o.sample_on = SampleOn::Count(1);
    o
}

#[test]
fn a_sampling_counter_reads_the_kernels_lost_count_by_default() {
    tests::require_self_sampling!();
    let me = (Proc::CURRENT, Cpu::ALL);
    let counter = Counter::new(Software::PageFault, me, sampling()).unwrap();
    if !kernel_has_format_lost() {
        // The open fell back without it (and remembers): the attr says what was opened.
        assert_eq!(counter.attr().read_format & LOST, 0);
        assert_eq!(counter.stat().unwrap().lost_records, None);
        tests::skip(Skip::Environment, "this kernel has no PERF_FORMAT_LOST");
        return;
    }
    assert_eq!(counter.attr().read_format & LOST, LOST, "the attr opened");
    assert_eq!(
        counter.stat().unwrap().lost_records,
        Some(0),
        "stat() decodes it"
    );
    // A counter that does not sample reads exactly its stat_format.
    let mut counting = Opts::default();
    counting.exclude.kernel = true;
    let c = Counter::new(Software::PageFault, me, &counting).unwrap();
    assert_eq!(c.attr().read_format, 0);
    // Nor does a sampling counter that asks for exactly its stat_format.
    let mut exact = sampling();
    exact.exact_stat_format = true;
    let c = Counter::new(Software::PageFault, me, &exact).unwrap();
    assert_eq!(c.attr().read_format, 0);
    assert_eq!(c.stat().unwrap().lost_records, None);
    // Through the escape hatch, clearing the bit is respected too.
    let c = Counter::new_with(Software::PageFault, me, sampling(), |a| {
        a.read_format &= !LOST
    })
    .unwrap();
    assert_eq!(c.attr().read_format, 0);
    // A group: the leader's group read and a sampling member's own read carry it.
    let mut group = CounterGroup::new(Software::PageFault, me, sampling()).unwrap();
    let mut member = sibling::Opts::default();
    member.exclude.kernel = true;
    member.sample_on = SampleOn::Count(1);
    let m = group.add(Software::PageFault, &member).unwrap();
    assert_eq!(m.attr().read_format & LOST, LOST);
    let g = group.stat().unwrap();
    assert_eq!(g.len(), 2);
    assert_eq!(g.to_stat().lost_records, Some(0));
}

/// A one-page ring that nobody reads while 20000 page faults each make a sample: the kernel
/// counts what it dropped, and `Sampler::lost` reports that count without the user asking for it.
#[test]
fn a_tiny_ring_reports_the_kernels_lost_count() {
    tests::require_self_sampling!();
    require!(
        kernel_has_format_lost(),
        Skip::Environment,
        "this kernel has no PERF_FORMAT_LOST"
    );
    let counter = Counter::new(Software::PageFault, (Proc::CURRENT, Cpu::ALL), sampling()).unwrap();
    let sampler = counter.sampler(0).unwrap();
    counter.enable().unwrap();
    fault_pages(20_000);
    counter.disable().unwrap();
    let samples = sampler
        .iter()
        .filter(|(_, r)| matches!(r, Record::Sample(_)))
        .count() as u64;
    let count = counter.stat().unwrap().count;
    let lost = sampler.lost().unwrap();
    let kernel_lost = lost
        .format_lost
        .expect("the default read format has PERF_FORMAT_LOST");
    println!(
        "{count} faults: {samples} samples read, {kernel_lost} lost (kernel), {} in LOST records",
        lost.lost_records
    );
    assert!(
        kernel_lost > 0,
        "a one-page ring under 20000 samples loses some"
    );
    assert_eq!(
        samples + kernel_lost,
        count,
        "samples + lost == the counter's value"
    );
    assert!(lost.lost_records <= kernel_lost);
}

/// A group leader's sampler (read format `PERF_FORMAT_GROUP`, as `{a,b}:S` opens it) reads the
/// group: `stat` gives the leader with the member in `siblings`, and `lost` the leader's kernel
/// count of lost records, as for a single counter.
#[test]
fn a_group_leaders_sampler_reads_the_group_and_its_lost_count() {
    tests::require_self_sampling!();
    let me = (Proc::CURRENT, Cpu::ALL);
    let mut group = CounterGroup::new(Software::PageFault, me, sampling()).unwrap();
    let mut member = sibling::Opts {
        enable: true,
        ..Default::default()
    };
    member.exclude.kernel = true;
    group.add(Software::PageFault, &member).unwrap();
    // A one-page ring nobody reads while 2000 faults each make a sample: some are lost.
    let sampler = group.leader().sampler(0).unwrap();
    group.enable().unwrap();
    fault_pages(2_000);
    group.disable().unwrap();
    let st = sampler.stat().unwrap();
    assert_eq!(st.siblings.len(), 1, "{st:?}");
    assert!(st.count >= 2_000, "{st:?}");
    assert_eq!(
        st.siblings[0].count, st.count,
        "both count the same faults: {st:?}"
    );
    let lost = sampler.lost().unwrap();
    if kernel_has_format_lost() {
        let kernel_lost = lost.format_lost.expect("the leader's PERF_FORMAT_LOST");
        assert!(
            kernel_lost > 0,
            "a one-page ring under 2000 samples loses some"
        );
        assert_eq!(Some(kernel_lost), st.lost_records);
    } else {
        assert_eq!(lost.format_lost, None);
    }
}

/// With `sample_format.stat` (PERF_SAMPLE_READ) the kernel writes the read format into every
/// sample: the default `PERF_FORMAT_LOST` changes that layout, and the parser, built from the attr
/// the counter was opened with, reads it.
#[test]
fn samples_with_read_values_parse_with_the_lost_count() {
    tests::require_self_sampling!();
    require!(
        kernel_has_format_lost(),
        Skip::Environment,
        "this kernel has no PERF_FORMAT_LOST"
    );
    let mut o = sampling();
    o.sample_format.stat = true;
    // The call chain follows the read values in a sample: misread values would shift it.
    o.sample_format.call_chain = Some(CallChain::default());
    o.stat_format.time_enabled = true;
    let counter = Counter::new(Software::PageFault, (Proc::CURRENT, Cpu::ALL), &o).unwrap();
    assert_eq!(counter.attr().read_format & LOST, LOST);
    let sampler = counter.sampler(4).unwrap();
    counter.enable().unwrap();
    fault_pages(64);
    counter.disable().unwrap();
    let mut counts = Vec::new();
    for (_, r) in sampler.iter() {
        if let Record::Sample(s) = r {
            let stat = s.stat.expect("sample_format.stat asked for");
            assert_eq!(stat.lost_records, Some(0), "{stat:?}");
            assert!(stat.time_enabled.is_some(), "{stat:?}");
            let chain = s.call_chain.expect("call chain asked for").into_ips();
            assert!(chain.len() < 1024, "{} frames", chain.len());
            counts.push(stat.count);
        }
    }
    assert!(counts.len() >= 64, "{} samples for 64 faults", counts.len());
    assert!(counts.windows(2).all(|w| w[0] < w[1]), "{counts:?}");
}
