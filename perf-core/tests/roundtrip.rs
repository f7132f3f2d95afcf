//! encode → parse is the identity, for every record type and random layouts, and across the ring's seam.

mod common;

use common::make::{self as gen, Gen, KNOWN_FORMAT_BITS, KNOWN_SAMPLE_BITS};
use perf_core::record::*;
use perf_core::{Chunk, Error, ErrorKind};
use perf_sys::*;
use proptest::prelude::*;

fn layouts() -> impl Strategy<Value = ParseConfig> {
    (
        any::<u64>(),
        0u64..=KNOWN_FORMAT_BITS,
        prop_oneof![
            Just(0u64),
            Just(PERF_SAMPLE_BRANCH_HW_INDEX as u64),
            Just(PERF_SAMPLE_BRANCH_COUNTERS as u64),
            Just(
                (PERF_SAMPLE_BRANCH_HW_INDEX | PERF_SAMPLE_BRANCH_COUNTERS | PERF_SAMPLE_BRANCH_ANY)
                    as u64
            )
        ],
        any::<u64>(),
        any::<u64>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(st, rf, bst, ru, ri, all, build_id)| {
            ParseConfig::new(ParseFields {
                sample_type: st & KNOWN_SAMPLE_BITS,
                read_format: rf,
                branch_sample_type: bst,
                // Sparse masks keep records small; any popcount works.
                sample_regs_user: ru & (ru >> 7) & (ru >> 13),
                sample_regs_intr: ri & (ri >> 5) & (ri >> 11),
                sample_id_all: all,
                build_id,
            })
        })
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: if cfg!(miri) { 4 } else { 512 },
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Checks `rec` survives encode → parse at every split of its bytes into two halves (every byte natively,
/// a few under Miri: `common::seam_splits`), and that the cheap accessors agree with the typed parse.
fn check_roundtrip(rec: &Record<'static>, cfg: &ParseConfig) {
    let mut bytes = Vec::new();
    let size = rec
        .encode(cfg, &mut bytes)
        .unwrap_or_else(|e| panic!("encode {rec:?}: {e}"));
    assert_eq!(size, bytes.len());
    assert_eq!(size % 8, 0);
    for split in common::seam_splits(bytes.len(), 1) {
        let chunk = Chunk::new(&bytes[..split], &bytes[split..]);
        let (raw, n) = RawRecord::from_chunk(chunk).expect("header");
        assert_eq!(n, size);
        assert_eq!(raw.record_type(), rec.record_type());
        let parsed = raw
            .parse(cfg)
            .unwrap_or_else(|e| panic!("parse at split {split}: {e}\n{rec:?}"));
        assert_eq!(&parsed, rec, "split {split}");

        // The cheap accessors read the same values as the typed parse.
        let (time, id, cpu, stream, thread) = match &parsed {
            Record::Sample(s) => (
                s.time(),
                s.identifier().or(s.id()),
                s.cpu(),
                s.stream_id(),
                s.thread(),
            ),
            Record::Unknown(_) => (None, None, None, None, None),
            other => {
                let sid = other.sample_id().expect("trailer");
                (
                    sid.time,
                    sid.identifier.or(sid.id),
                    sid.cpu,
                    sid.stream_id,
                    sid.thread,
                )
            }
        };
        assert_eq!(raw.time(cfg), time);
        assert_eq!(raw.id(cfg), id);
        assert_eq!(raw.cpu(cfg), cpu);
        assert_eq!(raw.stream_id(cfg), stream);
        assert_eq!(raw.thread(cfg), thread);

        // The lazy view reads the same record.
        assert_view_agrees(&raw, cfg);

        // Re-encoding the borrowed parse gives the same bytes.
        let mut again = Vec::new();
        parsed.encode(cfg, &mut again).expect("re-encode");
        assert_eq!(again, bytes);
    }
    // An owned record outlives the buffer it was parsed from, split at the wrap point or not: its bytes are
    // copies, so scribbling over the ring and freeing it changes nothing (Miri reports any read of the freed
    // buffer).
    for split in [0, bytes.len() / 2, bytes.len() / 2 + 4, bytes.len()] {
        let split = split.min(bytes.len());
        let (mut first, mut second) = (bytes[..split].to_vec(), bytes[split..].to_vec());
        let owned = {
            let (raw, _) = RawRecord::from_chunk(Chunk::new(&first, &second)).expect("header");
            raw.parse(cfg).expect("parse").into_owned()
        };
        first.fill(0xa5);
        second.fill(0x5a);
        drop((first, second));
        assert_eq!(&owned, rec, "owned, split {split}");
        let mut again = Vec::new();
        owned.encode(cfg, &mut again).expect("re-encode owned");
        assert_eq!(again, bytes, "owned re-encode, split {split}");
    }
    // Every proper prefix is an error (truncated) or a different, shorter record; never a panic.
    for cut in common::seam_splits(bytes.len(), 8) {
        if cut == bytes.len() {
            continue;
        }
        let _ = RawRecord::from_chunk(Chunk::contiguous(&bytes[..cut])).map(|(r, _)| r.parse(cfg));
    }
}

/// [`RawRecord::view`] agrees with [`RawRecord::parse`]: the same record field by field, or the same error.
fn assert_view_agrees(raw: &RawRecord<'_>, cfg: &ParseConfig) {
    // `sample_view` gives the view of exactly the samples the parse accepts, `None` for everything else.
    let fast = raw.sample_view(cfg).map(|v| Record::Sample(v.to_sample()));
    let want = match raw.parse(cfg) {
        Ok(r @ Record::Sample(_)) => Some(r),
        _ => None,
    };
    assert_eq!(fast, want, "sample_view disagrees with parse");
    match (raw.parse(cfg), raw.view(cfg)) {
        (Ok(full), Ok(view)) => {
            assert_eq!(view.record_type(), full.record_type());
            assert_eq!(view.to_record(), full);
            match (&full, &view) {
                (Record::Sample(s), RecordView::Sample(v)) => {
                    // Each accessor on its own (to_sample reads them all, but check a few directly).
                    assert_eq!(v.misc(), s.misc());
                    assert_eq!(v.identifier(), s.identifier());
                    assert_eq!(v.ip(), s.ip());
                    assert_eq!(v.thread(), s.thread());
                    assert_eq!(v.time(), s.time());
                    assert_eq!(v.addr(), s.addr());
                    assert_eq!(v.id(), s.id());
                    assert_eq!(v.stream_id(), s.stream_id());
                    assert_eq!(v.cpu(), s.cpu());
                    assert_eq!(v.period(), s.period());
                    assert_eq!(v.read(), s.read());
                    assert_eq!(v.callchain(), s.callchain());
                    assert_eq!(v.raw(), s.raw());
                    assert_eq!(v.branch_stack(), s.branch_stack());
                    assert_eq!(v.regs_user(), s.regs_user());
                    assert_eq!(v.stack_user(), s.stack_user());
                    assert_eq!(v.weight(), s.weight());
                    assert_eq!(v.data_src(), s.data_src());
                    assert_eq!(v.transaction(), s.transaction());
                    assert_eq!(v.regs_intr(), s.regs_intr());
                    assert_eq!(v.phys_addr(), s.phys_addr());
                    assert_eq!(v.cgroup(), s.cgroup());
                    assert_eq!(v.data_page_size(), s.data_page_size());
                    assert_eq!(v.code_page_size(), s.code_page_size());
                    assert_eq!(v.aux(), s.aux());
                    assert_eq!(v.data(), raw.data());
                    assert_eq!(v.to_sample(), *s);
                }
                (Record::Sample(_), _) => panic!("a sample viewed as {view:?}"),
                (_, RecordView::Other(r)) => {
                    assert_eq!(r.record(), full);
                    assert_eq!(r.record_type(), full.record_type());
                    assert_eq!(r.raw(), *raw);
                }
                (_, _) => panic!("{full:?} viewed as {view:?}"),
            }
        }
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
        (full, view) => panic!("parse gave {full:?}, view gave {view:?}"),
    }
}

proptest! {
    #![proptest_config(config())]

    /// A valid sample with bytes overwritten and its size changed: the view accepts exactly what the parse
    /// accepts and reads the same values, at every seam.
    #[test]
    fn view_agrees_with_parse_on_damaged_samples(
        cfg in layouts(),
        seed in any::<u64>(),
        damage in proptest::collection::vec((any::<u16>(), any::<u8>()), 0..4),
        resize in any::<Option<u16>>(),
    ) {
        let mut rng = Gen::new(seed);
        let rec = Record::Sample(gen::sample(&mut rng, &cfg));
        let mut bytes = Vec::new();
        rec.encode(&cfg, &mut bytes).expect("encode");
        for (at, b) in damage {
            let len = bytes.len() - 8;
            if len > 0 {
                bytes[8 + at as usize % len] = b;
            }
        }
        if let Some(size) = resize {
            let size = 8 + (size as usize % (bytes.len() - 7));
            bytes.truncate(size);
            bytes[6..8].copy_from_slice(&(size as u16).to_ne_bytes());
        }
        for split in common::seam_splits(bytes.len(), 1) {
            let chunk = Chunk::new(&bytes[..split], &bytes[split..]);
            let (raw, _) = RawRecord::from_chunk(chunk).expect("header");
            assert_view_agrees(&raw, &cfg);
        }
    }

    #[test]
    fn every_record_type_roundtrips(cfg in layouts(), seed in any::<u64>(), ty in 0u32..=24) {
        let mut rng = Gen::new(seed);
        let rec = gen::record(&mut rng, &cfg, ty);
        check_roundtrip(&rec, &cfg);
    }

    #[test]
    fn samples_roundtrip(cfg in layouts(), seed in any::<u64>()) {
        let mut rng = Gen::new(seed);
        let rec = Record::Sample(gen::sample(&mut rng, &cfg));
        check_roundtrip(&rec, &cfg);
    }

    #[test]
    fn arbitrary_bytes_never_panic(cfg in layouts(), bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        for rec in Records::new(Chunk::contiguous(&bytes)) {
            let Ok(rec) = rec else { break };
            assert_view_agrees(&rec, &cfg);
            // The same bytes as a sample, whatever their header said.
            assert_view_agrees(&RawRecord::new(PERF_RECORD_SAMPLE, rec.misc().0, rec.data()), &cfg);
            if let Ok(parsed) = rec.parse(&cfg) {
                let _ = parsed.into_owned();
            }
            let _ = (rec.time(&cfg), rec.id(&cfg), rec.cpu(&cfg), rec.thread(&cfg), rec.stream_id(&cfg));
        }
    }
}

#[test]
fn every_type_with_every_sample_bit() {
    // One deterministic pass over all types with the fullest layout, so no type depends on proptest's luck.
    let cfg = ParseConfig::new(ParseFields {
        sample_type: KNOWN_SAMPLE_BITS & !(PERF_SAMPLE_WEIGHT as u64),
        read_format: KNOWN_FORMAT_BITS,
        branch_sample_type: (PERF_SAMPLE_BRANCH_HW_INDEX | PERF_SAMPLE_BRANCH_COUNTERS) as u64,
        sample_regs_user: 0xff0fff,
        sample_regs_intr: 0x3,
        sample_id_all: true,
        build_id: true,
    });
    let mut rng = Gen::new(7);
    for ty in 0..=PERF_RECORD_MAX {
        for _ in 0..if cfg!(miri) { 1 } else { 8 } {
            let rec = gen::record(&mut rng, &cfg, ty);
            check_roundtrip(&rec, &cfg);
        }
    }
}

fn future_layout() -> ParseConfig {
    ParseConfig::new(ParseFields {
        sample_type: 1 << 40,
        ..Default::default()
    })
}

#[test]
fn truncation_and_inconsistency_are_errors() {
    let cfg = ParseConfig::new(ParseFields {
        sample_type: (PERF_SAMPLE_IP | PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_TID) as u64,
        sample_id_all: true,
        ..Default::default()
    });
    let fields = SampleFields {
        ip: Some(1),
        thread: Some(ThreadId { pid: 2, tid: 3 }),
        callchain: Some(Callchain {
            ips: vec![PERF_CONTEXT_USER, 0x400000].into(),
        }),
        ..Default::default()
    };
    let rec = Record::Sample(Sample::from_fields(&fields, &cfg).unwrap());
    // A field missing its bit's value is refused when the sample is built, as encode refuses it.
    let partial = SampleFields {
        thread: None,
        ..fields.clone()
    };
    assert!(Sample::from_fields(&partial, &cfg).is_err());
    // Into another config with the same fields: re-encoded from the fields, and parses back equal.
    let other = ParseConfig::new(ParseFields {
        sample_id_all: false,
        ..cfg.fields()
    });
    let mut again = Vec::new();
    rec.encode(&other, &mut again).unwrap();
    let (raw2, _) = RawRecord::from_chunk(Chunk::contiguous(&again)).unwrap();
    assert_eq!(raw2.parse(&other).unwrap(), rec);
    let mut bytes = Vec::new();
    rec.encode(&cfg, &mut bytes).unwrap();
    // A callchain nr that claims more words than there are.
    let mut bad = bytes.clone();
    bad[24..32].copy_from_slice(&u64::MAX.to_ne_bytes());
    let (raw, _) = RawRecord::from_chunk(Chunk::contiguous(&bad)).unwrap();
    assert_view_agrees(&raw, &cfg);
    assert!(matches!(
        raw.parse(&cfg).map_err(Error::into_kind),
        Err(ErrorKind::Truncated {
            record: "SAMPLE",
            field: "callchain.ips",
            ..
        })
    ));
    // A header size that is too small, and one that overruns the buffer.
    let mut short = bytes.clone();
    short[6..8].copy_from_slice(&4u16.to_ne_bytes());
    assert!(matches!(
        RawRecord::from_chunk(Chunk::contiguous(&short)).map_err(Error::into_kind),
        Err(ErrorKind::RecordTooShort { size: 4 })
    ));
    assert!(matches!(
        RawRecord::from_chunk(Chunk::contiguous(&bytes[..bytes.len() - 8]))
            .map_err(Error::into_kind),
        Err(ErrorKind::RecordOverrun { .. })
    ));
    // Parsing with the wrong layout: extra bytes are reported.
    let narrower = ParseConfig::new(ParseFields {
        sample_type: PERF_SAMPLE_IP as u64,
        ..Default::default()
    });
    let (raw, _) = RawRecord::from_chunk(Chunk::contiguous(&bytes)).unwrap();
    assert_view_agrees(&raw, &narrower);
    assert_view_agrees(&raw, &future_layout());
    assert!(matches!(
        raw.parse(&narrower).map_err(Error::into_kind),
        Err(ErrorKind::TrailingBytes {
            record: "SAMPLE",
            ..
        })
    ));
    // A layout with bits this parser does not know.
    let future = future_layout();
    assert!(matches!(
        raw.parse(&future).map_err(Error::into_kind),
        Err(ErrorKind::UnknownLayout { .. })
    ));
    // A non-sample record shorter than its trailer.
    let comm = Record::Comm(Comm {
        comm: b"x".to_vec().into(),
        sample_id: SampleId {
            thread: Some(ThreadId::default()),
            ..Default::default()
        },
        ..Default::default()
    });
    let mut cb = Vec::new();
    comm.encode(&cfg, &mut cb).unwrap();
    let (raw, _) = RawRecord::from_chunk(Chunk::contiguous(&cb)).unwrap();
    let wide = ParseConfig::new(ParseFields {
        sample_type: KNOWN_SAMPLE_BITS,
        sample_id_all: true,
        ..Default::default()
    });
    assert!(raw.parse(&wide).is_err());
    // Encoding a record that does not fit the layout is an error and leaves the buffer as it was.
    let mut out = vec![1, 2, 3];
    assert!(matches!(
        Record::Sample(Sample::default())
            .encode(&cfg, &mut out)
            .map_err(Error::into_kind),
        Err(ErrorKind::Encode { .. })
    ));
    assert_eq!(out, [1, 2, 3]);
}

#[test]
fn callchain_contexts_split_at_markers() {
    let cc = Callchain {
        ips: vec![
            0x1,
            PERF_CONTEXT_KERNEL,
            0xffff_ffff_8100_0000,
            0xffff_ffff_8100_0010,
            PERF_CONTEXT_USER,
            0x40_1000,
            PERF_CONTEXT_USER_DEFERRED,
            77,
        ]
        .into(),
    };
    let ctx: Vec<(CallchainContext, Vec<u64>)> =
        cc.contexts().map(|(c, w)| (c, w.to_vec())).collect();
    assert_eq!(
        ctx,
        vec![
            (CallchainContext::Unmarked, vec![0x1]),
            (
                CallchainContext::Kernel,
                vec![0xffff_ffff_8100_0000, 0xffff_ffff_8100_0010]
            ),
            (CallchainContext::User, vec![0x40_1000]),
            (CallchainContext::UserDeferred, vec![77]),
        ]
    );
    assert_eq!(cc.deferred_cookie(), Some(77));
}

#[test]
fn misc_bits_decode() {
    assert_eq!(
        Misc(PERF_RECORD_MISC_USER as u16 | PERF_RECORD_MISC_EXACT_IP as u16).cpumode(),
        CpuMode::User
    );
    assert!(Misc(PERF_RECORD_MISC_EXACT_IP as u16).exact_ip());
    assert!(Misc(PERF_RECORD_MISC_COMM_EXEC as u16).comm_exec());
    assert!(Misc(PERF_RECORD_MISC_MMAP_DATA as u16).mmap_data());
    assert!(Misc(PERF_RECORD_MISC_SWITCH_OUT as u16).switch_out());
    assert!(Misc(PERF_RECORD_MISC_SWITCH_OUT_PREEMPT as u16).switch_out_preempt());
    assert!(Misc(PERF_RECORD_MISC_MMAP_BUILD_ID as u16).mmap_build_id());
    assert_eq!(
        Misc(PERF_RECORD_MISC_KERNEL as u16).cpumode(),
        CpuMode::Kernel
    );
    assert_eq!(
        Misc(PERF_RECORD_MISC_GUEST_USER as u16).cpumode(),
        CpuMode::GuestUser
    );
    assert_eq!(Misc(7).cpumode(), CpuMode::Other(7));
    let r = Regs {
        abi: 2,
        mask: 0b1011_0000,
        values: vec![10, 20, 30].into(),
    };
    assert_eq!(
        (r.get(4), r.get(5), r.get(6), r.get(7), r.get(64)),
        (Some(10), Some(20), None, Some(30), None)
    );
}
