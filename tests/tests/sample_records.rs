//! Sampling on the real kernel: one sample per page fault with its address, side-band records,
//! call chains and user state, lost records under a tiny ring, shared and overwrite rings.
#![allow(clippy::field_reassign_with_default)] // options are set field by field, as in the docs

use std::collections::BTreeSet;
use std::time::Duration;

use perf_event::config::{CallChain, Cpu, Opts, Proc, RegsMask, SampleOn, Size, UseBuildId};
use perf_event::count::Counter;
use perf_event::event::sw::Software;
use perf_event::sample::record::{Info, Record, Switch};
use perf_event::Error;
use tests::{is_root, page_size, require, Skip};

#[test]
fn page_faults_one_sample_per_page_with_address() {
    tests::require_self_sampling!();
    let mut opts = Opts::default();
    opts.exclude.kernel = true;
    opts.sample_on = SampleOn::Count(1);
    opts.sample_format.data_addr = true;
    opts.sample_format.code_addr = true;
    let counter = Counter::new(Software::PageFault, (Proc::CURRENT, Cpu::ALL), &opts).unwrap();
    let sampler = counter.sampler(4).unwrap();
    let page = page_size();
    let pages = 64;
    let mut v = vec![0u8; (pages + 2) * page];
    let start = (v.as_ptr() as usize).div_ceil(page) * page + page;
    let offset = start - v.as_ptr() as usize;
    counter.enable().unwrap();
    for i in 0..pages {
        v[offset + i * page] = 1;
    }
    counter.disable().unwrap();
    let want: BTreeSet<u64> = (0..pages).map(|i| (start + i * page) as u64).collect();
    let mut got = Vec::new();
    for (_, r) in sampler.iter() {
        if let Record::Sample(s) = r {
            let a = s.data_addr.expect("data_addr asked for");
            if want.contains(&a) {
                got.push(a);
            }
        }
    }
    let unique: BTreeSet<u64> = got.iter().copied().collect();
    assert_eq!(got.len(), pages, "one sample per touched page");
    assert_eq!(unique, want);
    std::hint::black_box(&v);
}

/// The kernel writes `PERF_MEM_NA` (every field's "not available" bit) as the data source of a
/// software event's sample (task-clock here): decoded into 0.5.1's types, each of the five flag fields says `na` and
/// nothing else, and the word round-trips. Newer kernels (6.18 here, not 5.10) put
/// `PERF_MEM_LVLNUM_NA` in `PERF_MEM_NA` too.
#[test]
fn software_samples_decode_their_data_source_as_not_available() {
    use perf_event::sample::record::{DataSource, MemHop, MemLevel2};
    tests::require_self_sampling!();
    let mut opts = Opts::default();
    opts.sample_on = SampleOn::Count(100_000); // every 100 us of task clock
    opts.sample_format.data_source = true;
    let counter = Counter::new(Software::TaskClock, (Proc::CURRENT, Cpu::ALL), &opts).unwrap();
    let sampler = counter.sampler(4).unwrap();
    counter.enable().unwrap();
    let start = std::time::Instant::now();
    while start.elapsed() < Duration::from_millis(30) {
        std::hint::black_box(start.elapsed());
    }
    counter.disable().unwrap();
    // PERF_MEM_NA: OP_NA << 0 | LVL_NA << 5 | SNOOP_NA << 19 | LOCK_NA << 24 | TLB_NA << 26.
    let na: u64 = 1 | 1 << 5 | 1 << 19 | 1 << 24 | 1 << 26;
    let mut seen = 0;
    for (_, r) in sampler.iter() {
        if let Record::Sample(s) = r {
            let d: DataSource = s.data_source.expect("data_source asked for");
            assert!(d.op.na && !d.op.load && !d.op.store, "{d:?}");
            assert!(d.level.na && !d.level.hit && !d.level.l1, "{d:?}");
            assert!(d.snoop.na && !d.snoop.hit && !d.snoop.fwd, "{d:?}");
            assert!(d.lock.na && !d.lock.locked, "{d:?}");
            assert!(d.tlb.na && !d.tlb.hit && !d.tlb.walker, "{d:?}");
            let lvlnum_na = match d.level2 {
                MemLevel2::Unknown => 0,
                MemLevel2::Na => 0xf << 33,
                other => panic!("level2 {other:?}: {d:?}"),
            };
            assert_eq!((d.remote, d.hops), (false, MemHop::Unknown), "{d:?}");
            assert!(!d.block.na && !d.block.data && !d.block.addr, "{d:?}");
            assert_eq!(d.to_bits(), na | lvlnum_na, "{d:?}");
            seen += 1;
        }
    }
    assert!(seen > 0, "no sample in 30 ms of task clock");
}

/// Spins in its own body, so samples' instruction pointers (the first user entry of the call chain)
/// lie inside it.
#[inline(never)]
fn marker_function(counter: &Counter) {
    counter.enable().unwrap();
    let end = std::time::Instant::now() + Duration::from_millis(30);
    let mut x = 0u64;
    while std::time::Instant::now() < end {
        for _ in 0..200_000 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
    }
    counter.disable().unwrap();
}

#[test]
fn callchain_user_stack_and_regs() {
    tests::require_self_sampling!();
    let mut opts = Opts::default();
    opts.exclude.kernel = true;
    opts.sample_on = SampleOn::Count(200_000);
    opts.sample_format.code_addr = true;
    opts.sample_format.call_chain = Some(CallChain {
        exclude_user: false,
        exclude_kernel: true,
        defer_user: false,
        max_stack_frames: 64,
    });
    opts.sample_format.user_stack = Some(Size(256));
    opts.sample_format.user_regs = Some(RegsMask(0xff));
    let counter = Counter::new(Software::TaskClock, (Proc::CURRENT, Cpu::ALL), &opts).unwrap();
    let sampler = counter.sampler(6).unwrap();
    marker_function(&counter);
    let f = marker_function as *const () as u64;
    let mut samples = 0;
    let mut in_marker = 0;
    for (_, r) in sampler.iter() {
        if let Record::Sample(s) = r {
            samples += 1;
            let chain = s.call_chain.as_ref().expect("call chain asked for");
            // An address inside marker_function (its code is well under 4 KiB).
            if chain.ips().iter().any(|&ip| ip > f && ip < f + 4096) {
                in_marker += 1;
            }
            let stack = s.user_stack.as_ref().expect("user stack asked for");
            assert!(!stack.is_empty());
            let (regs, _abi) = s.user_regs.as_ref().expect("user regs asked for");
            assert_eq!(regs.len(), 8);
        }
    }
    assert!(samples > 10, "{samples} samples in 30 ms at 200 µs");
    // Debug builds call out of the loop body (black_box, Instant::now), and without frame pointers
    // the kernel cannot walk past the sampled instruction, so only a part of the samples land in it.
    assert!(
        in_marker > 0,
        "none of {samples} call chains contains marker_function's address"
    );
}

#[test]
fn side_band_records_appear() {
    require!(
        is_root(),
        Skip::Privilege,
        "cgroup and build-id records need root here"
    );
    let mut opts = Opts::default();
    opts.exclude.kernel = true;
    opts.extra_record.task = true;
    opts.extra_record.comm = true;
    opts.extra_record.mmap.code = true;
    opts.extra_record.mmap.ext = Some(UseBuildId(true));
    opts.extra_record.ctx_switch = true;
    opts.extra_record.cgroup = true;
    opts.extra_record.namespaces = true;
    opts.record_id_format.task = true;
    opts.record_id_format.time = true;
    opts.record_id_all = true;
    // Build ids in MMAP2 arrived in Linux 5.12; before, the record carries the inode data.
    let (counter, build_id) = match Counter::new(Software::Dummy, (Proc::CURRENT, Cpu::ALL), &opts)
    {
        Ok(c) => (c, true),
        Err(Error::KernelTooOld { option, .. }) if option.contains("build_id") => {
            opts.extra_record.mmap.ext = Some(UseBuildId(false));
            let c = Counter::new(Software::Dummy, (Proc::CURRENT, Cpu::ALL), &opts).unwrap();
            (c, false)
        }
        Err(e) => panic!("{e}"),
    };
    let sampler = counter.sampler(6).unwrap();
    counter.enable().unwrap();
    // fork + namespaces (the new thread), comm (its name), context switches (join, sleep).
    std::thread::Builder::new()
        .name("sampled-child".into())
        .spawn(|| {})
        .unwrap()
        .join()
        .unwrap();
    std::thread::sleep(Duration::from_millis(2));
    // comm: rename this thread, then restore its name.
    let mut old = [0u8; 16];
    // SAFETY: PR_GET_NAME writes at most 16 bytes into `old`.
    unsafe { libc::prctl(libc::PR_GET_NAME, old.as_mut_ptr()) };
    // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes.
    unsafe { libc::prctl(libc::PR_SET_NAME, c"sampled-comm".as_ptr()) };
    // SAFETY: as above; `old` is NUL-terminated (16 bytes, the kernel's limit includes the NUL).
    unsafe { libc::prctl(libc::PR_SET_NAME, old.as_ptr()) };
    // An executable file mapping: MMAP2 with a build id.
    let exe = std::fs::File::open("/proc/self/exe").unwrap();
    // SAFETY: mapping a readable file read+exec, private; unmapped below, never dereferenced.
    let p = unsafe {
        use std::os::fd::AsRawFd;
        libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ | libc::PROT_EXEC,
            libc::MAP_PRIVATE,
            exe.as_raw_fd(),
            0,
        )
    };
    assert_ne!(p, libc::MAP_FAILED);
    // A new cgroup.
    // cgroup v2: at /sys/fs/cgroup/unified on hybrid hosts, at /sys/fs/cgroup elsewhere.
    let root = ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"]
        .into_iter()
        .find(|d| std::path::Path::new(d).join("cgroup.controllers").exists())
        .unwrap_or("/sys/fs/cgroup/unified");
    let cg = format!("{root}/perf-rs-test-{}", std::process::id());
    let made_cgroup = std::fs::create_dir(&cg).is_ok();
    counter.disable().unwrap();
    // SAFETY: unmapping the mapping made above.
    unsafe { libc::munmap(p, 4096) };
    if made_cgroup {
        let _ = std::fs::remove_dir(&cg);
    }
    let records: Vec<Record> = sampler.iter().map(|(_, r)| r).collect();
    let has = |f: &dyn Fn(&Record) -> bool| records.iter().any(f);
    assert!(has(&|r| matches!(r, Record::Fork(_))), "FORK");
    assert!(
        has(&|r| matches!(r, Record::Comm(c) if c.comm.to_bytes() == b"sampled-comm")),
        "COMM"
    );
    assert!(has(&|r| matches!(r, Record::Namespaces(_))), "NAMESPACES");
    assert!(
        has(&|r| matches!(r, Record::CtxSwitch(c) if matches!(c.info, Switch::OutTo { .. }))),
        "SWITCH out"
    );
    assert!(
        has(&|r| matches!(r, Record::CtxSwitch(c) if matches!(c.info, Switch::InFrom(_)))),
        "SWITCH in"
    );
    if build_id {
        assert!(
            has(
                &|r| matches!(r, Record::Mmap(m) if m.executable && matches!(&m.ext, Some(e) if matches!(&e.info, Info::BuildId(id) if !id.is_empty())))
            ),
            "MMAP2 with a build id"
        );
    } else {
        assert!(
            has(
                &|r| matches!(r, Record::Mmap(m) if m.executable && matches!(&m.ext, Some(e) if matches!(e.info, Info::Device { inode, .. } if inode != 0)))
            ),
            "MMAP2 (with inode data: this kernel predates build ids)"
        );
    }
    if made_cgroup {
        assert!(
            has(
                &|r| matches!(r, Record::Cgroup(c) if c.path.to_string_lossy().contains("perf-rs-test"))
            ),
            "CGROUP"
        );
    } else {
        tests::skip_part(
            Skip::Environment,
            &format!("CGROUP records (cannot create a cgroup under {root})"),
        );
    }
    for r in records.iter().filter(|r| !matches!(r, Record::Unknown(_))) {
        let id = r.record_id().expect("sample_id_all trailer");
        assert!(id.task.is_some() && id.time.is_some(), "{r:-?}");
    }
}

#[test]
fn tiny_ring_reports_lost_records() {
    require!(is_root(), Skip::Privilege, "tracepoints need root here");
    let tp = tests::require_tracepoint!("syscalls:sys_enter_getppid");
    let mut opts = Opts::default();
    opts.sample_on = SampleOn::Count(1);
    opts.stat_format.lost_records = true;
    let counter = Counter::new(tp, (Proc::CURRENT, Cpu::ALL), &opts).unwrap();
    let sampler = counter.sampler(0).unwrap();
    counter.enable().unwrap();
    for _ in 0..20_000 {
        // SAFETY: getppid has no preconditions.
        unsafe { libc::getppid() };
    }
    counter.disable().unwrap();
    let samples = sampler
        .iter()
        .filter(|(_, r)| matches!(r, Record::Sample(_)))
        .count() as u64;
    let stat = counter.stat().unwrap();
    let lost = sampler.lost().unwrap();
    let format_lost = lost.format_lost.expect("PERF_FORMAT_LOST asked for");
    assert!(
        format_lost > 0,
        "a one-page ring under 20k records must lose some"
    );
    assert_eq!(
        samples + format_lost,
        stat.count,
        "samples + lost == the counter's value"
    );
    assert!(lost.lost_records <= format_lost);
}

#[test]
fn second_sampler_is_refused_and_allowed_after_drop() {
    tests::require_self_sampling!();
    let mut opts = Opts::default();
    opts.sample_on = SampleOn::Count(1);
    let counter = Counter::new(Software::Dummy, (Proc::CURRENT, Cpu::ALL), opts).unwrap();
    let first = counter.sampler(1).unwrap();
    assert!(matches!(counter.sampler(1), Err(Error::SamplerExists)));
    drop(first);
    counter.sampler(1).unwrap();
}

#[test]
fn shared_ring_attributes_records_to_counters() {
    require!(is_root(), Skip::Privilege, "tracepoints need root here");
    let tp = tests::require_tracepoint!("syscalls:sys_enter_getppid");
    let mut opts = Opts::default();
    opts.sample_on = SampleOn::Count(1);
    opts.record_id_format.identifier = true;
    let a = Counter::new(tp, (Proc::CURRENT, Cpu::ALL), &opts).unwrap();
    opts.exclude.kernel = true;
    let b = Counter::new(Software::PageFault, (Proc::CURRENT, Cpu::ALL), &opts).unwrap();
    let sampler = a.sampler(4).unwrap();
    sampler.attach(&b).unwrap();
    // The attached counter cannot be mapped itself any more.
    assert!(b.sampler(1).is_err());
    a.enable().unwrap();
    b.enable().unwrap();
    for _ in 0..100 {
        // SAFETY: getppid has no preconditions.
        unsafe { libc::getppid() };
    }
    tests::touch_pages(50);
    a.disable().unwrap();
    b.disable().unwrap();
    let (ida, idb) = (a.id().unwrap(), b.id().unwrap());
    let (mut na, mut nb) = (0u64, 0u64);
    for (_, r) in sampler.iter() {
        if let Record::Sample(s) = r {
            match s.record_id.id {
                Some(id) if id == ida => na += 1,
                Some(id) if id == idb => nb += 1,
                other => panic!("sample from an unknown counter {other:?}"),
            }
        }
    }
    assert_eq!(na, a.stat().unwrap().count);
    assert_eq!(nb, b.stat().unwrap().count);
    assert!(
        na >= 100 && nb >= 50,
        "{na} getppid, {nb} page-fault samples"
    );
}

#[test]
fn overwrite_ring_returns_newest_records() {
    require!(is_root(), Skip::Privilege, "tracepoints need root here");
    let tp = tests::require_tracepoint!("syscalls:sys_enter_getppid");
    let mut opts = Opts::default();
    opts.sample_on = SampleOn::Count(1);
    opts.write_backward = true;
    opts.sample_format.period = true;
    opts.record_id_format.time = true;
    let counter = Counter::new(tp, (Proc::CURRENT, Cpu::ALL), &opts).unwrap();
    let sampler = counter.sampler(1).unwrap();
    counter.enable().unwrap();
    for _ in 0..10_000 {
        // SAFETY: getppid has no preconditions.
        unsafe { libc::getppid() };
    }
    counter.disable().unwrap();
    let newest = sampler.newest(10).unwrap();
    assert_eq!(newest.len(), 10);
    let times: Vec<u64> = newest
        .iter()
        .map(|(_, r)| match r {
            Record::Sample(s) => s.record_id.time.unwrap(),
            other => panic!("{other:-?}"),
        })
        .collect();
    // Newest first. Not strictly: under qemu's emulated CPU (the kernel matrix's 5.10 guest) four
    // consecutive samples once had the same time.
    assert!(
        times.windows(2).all(|w| w[0] >= w[1]) && times[0] > times[9],
        "newest first: {times:?}"
    );
    // The forward iterator does not apply to an overwrite ring, and nothing new was written.
    assert!(sampler.newest(10).unwrap().is_empty());
}

#[test]
fn sampler_and_iterators_are_send() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<perf_event::sample::Sampler>();
    send::<perf_event::sample::Iter<'static>>();
    send::<perf_event::sample::CowIter<'static>>();
    send::<perf_event::sample::AuxTracer<'static>>();
}

/// Dropping an owned iterator after one record gives nothing away: the next iterator sees the rest.
#[test]
fn dropping_an_iterator_loses_no_records() {
    tests::require_self_sampling!();
    let mut opts = Opts::default();
    opts.exclude.kernel = true;
    opts.sample_on = SampleOn::Count(1);
    let counter = Counter::new(Software::PageFault, (Proc::CURRENT, Cpu::ALL), &opts).unwrap();
    let sampler = counter.sampler(4).unwrap();
    counter.enable().unwrap();
    tests::touch_pages(100);
    counter.disable().unwrap();
    let faults = counter.stat().unwrap().count;
    let first = sampler.iter().next();
    assert!(matches!(first, Some((_, Record::Sample(_)))), "{first:?}");
    let rest = sampler
        .iter()
        .filter(|(_, r)| matches!(r, Record::Sample(_)))
        .count() as u64;
    assert_eq!(
        1 + rest,
        faults,
        "records lost when the first iterator was dropped"
    );
}
