//! Records captured from a real kernel (`examples/capture_fixtures.rs`) parse to the values the capture knew.

mod common;

use common::fixture::{self, Fixture};
use perf_core::record::*;
use perf_core::{Chunk, RawRecord, Records};
use perf_sys::*;

/// Every record of the fixture, parsed; any error fails the test.
fn parse_all(f: &Fixture) -> Vec<(RawRecord<'_>, Record<'_>)> {
    Records::new(Chunk::contiguous(&f.bytes))
        .map(|r| {
            let raw = r.unwrap_or_else(|e| panic!("{}: walk: {e}", f.name));
            let rec = raw
                .parse(&f.cfg)
                .unwrap_or_else(|e| panic!("{}: parse {raw:?}: {e}", f.name));
            (raw, rec)
        })
        .collect()
}

#[test]
fn summary() {
    for f in fixture::all() {
        let mut counts = std::collections::BTreeMap::new();
        for (raw, _) in parse_all(&f) {
            *counts
                .entry(record_type_name(raw.record_type()))
                .or_insert(0) += 1;
        }
        println!("{}: {counts:?}", f.name);
    }
}

fn samples<'a>(
    recs: &'a [(RawRecord<'_>, Record<'a>)],
) -> impl Iterator<Item = &'a Sample<'a>> + 'a {
    recs.iter().filter_map(|(_, r)| match r {
        Record::Sample(s) => Some(s),
        _ => None,
    })
}

#[test]
fn every_fixture_reencodes_to_its_bytes_and_parses_across_the_seam() {
    for f in fixture::all() {
        let mut out = Vec::new();
        let mut offset = 0;
        for (raw, rec) in parse_all(&f) {
            rec.encode(&f.cfg, &mut out)
                .unwrap_or_else(|e| panic!("{}: {e}", f.name));
            // The same record split into two halves at every 8-byte boundary parses the same.
            let bytes = &f.bytes[offset..offset + raw.size()];
            for split in common::seam_splits(bytes.len(), 8) {
                let (r2, _) =
                    RawRecord::from_chunk(Chunk::new(&bytes[..split], &bytes[split..])).unwrap();
                assert_eq!(r2.parse(&f.cfg).unwrap(), rec, "{} split {split}", f.name);
                assert_eq!(r2.time(&f.cfg), raw.time(&f.cfg));
            }
            offset += raw.size();
        }
        assert_eq!(out, f.bytes, "{}: re-encoding differs", f.name);
    }
}

#[test]
fn page_fault_samples() {
    let f = fixture::page_faults();
    let recs = parse_all(&f);
    let (start, len) = (f.fact("map_start"), f.fact("map_len"));
    let mut in_map = 0;
    let mut last_time = 0;
    let mut last_count = 0;
    for (raw, _) in &recs {
        // The cheap accessors agree with the capture.
        assert_eq!(raw.id(&f.cfg), Some(f.fact("id")));
        assert_eq!(
            raw.thread(&f.cfg),
            Some(ThreadId {
                pid: f.fact("pid") as u32,
                tid: f.fact("tid") as u32
            })
        );
        assert!(raw.cpu(&f.cfg).is_some_and(|c| c < 4096));
    }
    for s in samples(&recs) {
        assert_eq!(s.identifier(), Some(f.fact("id")));
        assert_eq!(s.id(), Some(f.fact("id")));
        assert_eq!(s.stream_id(), Some(f.fact("id")));
        assert_eq!(s.period(), Some(1));
        let t = s.time().unwrap();
        assert!(t >= last_time, "time goes forward");
        last_time = t;
        let addr = s.addr().unwrap();
        if (start..start + len).contains(&addr) {
            in_map += 1;
            assert_eq!(s.misc().cpumode(), CpuMode::User);
            assert_eq!(s.code_page_size(), Some(4096));
        }
        let Some(ReadValues::Single(r)) = s.read() else {
            panic!("single read")
        };
        assert_eq!(r.id, Some(f.fact("id")));
        assert_eq!(r.lost, Some(0));
        assert!(r.time_enabled >= r.time_running && r.time_running.unwrap() > 0);
        assert!(
            r.value > last_count,
            "the count grows by one fault per sample"
        );
        last_count = r.value;
        // A page fault's chain is the user one (the event fires with the user registers), starting at the ip.
        let cc = s.callchain().unwrap();
        let (ctx, ips) = cc.contexts().next().unwrap();
        assert_eq!(ctx, CallchainContext::User);
        assert_eq!(ips.get(0), s.ip());
        let user = s.regs_user().unwrap();
        assert_eq!(user.abi, PERF_SAMPLE_REGS_ABI_64 as u64);
        assert_eq!(user.values.len(), 0xff0fffu64.count_ones() as usize);
        // x86_64: PERF_REG_X86_IP is register 8; the user ip of the faulting store equals the sample ip.
        if cfg!(target_arch = "x86_64") {
            assert_eq!(user.get(8), s.ip());
        }
        let intr = s.regs_intr().unwrap();
        assert_eq!(intr.values.len(), 0xff0fffu64.count_ones() as usize);
        let stack = s.stack_user().unwrap();
        assert_eq!(stack.data.len() as u64, f.fact("stack_user"));
        assert!(stack.dyn_size > 0 && stack.dyn_size <= 256);
        assert!(
            s.weight().is_some()
                && s.data_src().is_some()
                && s.transaction().is_some()
                && s.phys_addr().is_some()
        );
        assert!(s.cgroup().is_some() && s.data_page_size().is_some());
    }
    assert!(
        in_map >= f.fact("pages"),
        "{in_map} samples in the touched pages"
    );
}

#[test]
fn group_read_samples() {
    let f = fixture::page_faults_group();
    let recs = parse_all(&f);
    let mut n = 0;
    for s in samples(&recs) {
        let Some(ReadValues::Group(g)) = &s.read() else {
            panic!("group read")
        };
        let ids: Vec<_> = g.entries().map(|e| e.id).collect();
        assert_eq!(ids, [Some(f.fact("leader_id")), Some(f.fact("sibling_id"))]);
        assert!(g.entries().all(|e| e.lost == Some(0)));
        assert!(g.time_enabled.is_some() && g.time_running.is_some());
        assert!(s.addr().is_some());
        n += 1;
    }
    assert!(n >= f.fact("pages"));
}

#[test]
fn tracepoint_samples_carry_raw_fields() {
    let f = fixture::tracepoint();
    let recs = parse_all(&f);
    let mut n = 0;
    for s in samples(&recs) {
        let raw = s.raw().unwrap();
        assert_eq!(
            raw.len() % 8,
            4,
            "RAW is padded so the record stays 8-aligned"
        );
        // The first field of every trace event is common_type: the tracepoint id.
        let common_type = raw.chunk().read_u16(0).unwrap();
        assert_eq!(common_type as u64, f.fact("tp_id"));
        assert_eq!(s.thread().unwrap().pid as u64, f.fact("pid"));
        assert_eq!(s.id(), Some(f.fact("id")));
        assert_eq!(s.period(), Some(1));
        assert!(s
            .callchain()
            .as_ref()
            .unwrap()
            .contexts()
            .any(|(c, w)| c == CallchainContext::User && !w.is_empty()));
        n += 1;
    }
    assert_eq!(n, f.fact("calls"));
    let mmap = recs
        .iter()
        .find_map(|(_, r)| match r {
            Record::Mmap(m) => Some(m),
            _ => None,
        })
        .expect("an MMAP record");
    assert_eq!(mmap.addr, f.fact("exec_map"));
    assert_eq!(mmap.len, 4096);
    assert!(
        mmap.filename.to_string_lossy().ends_with("/true"),
        "{:?}",
        mmap.filename
    );
    assert_eq!(mmap.sample_id.thread.unwrap().pid as u64, f.fact("pid"));
    assert_eq!(mmap.sample_id.id, Some(f.fact("id")));
}

#[test]
fn sched_switch_samples_have_kernel_chains() {
    let f = fixture::sched_switch();
    let recs = parse_all(&f);
    let mut n = 0;
    for s in samples(&recs) {
        assert_eq!(
            s.raw().unwrap().chunk().read_u16(0).map(u64::from),
            Some(f.fact("tp_id"))
        );
        assert_eq!(s.thread().unwrap().tid as u64, f.fact("tid"));
        let cc = s.callchain().unwrap();
        let (ctx, ips) = cc.contexts().next().unwrap();
        assert_eq!(ctx, CallchainContext::Kernel);
        assert!(
            !ips.is_empty() && ips.iter().all(|ip| ip >= 0xffff_8000_0000_0000),
            "{ips:?}"
        );
        assert_eq!(s.misc().cpumode(), CpuMode::Kernel);
        n += 1;
    }
    assert!(n >= f.fact("sleeps"));
}

#[test]
fn sideband_records() {
    let f = fixture::sideband();
    let recs = parse_all(&f);
    let (pid, child) = (f.fact("pid") as u32, f.fact("child") as u32);
    let mut seen = std::collections::BTreeSet::new();
    let mut switches = (0, 0);
    let mut bpf_ids = Vec::new();
    for (raw, rec) in &recs {
        let sid = rec.sample_id().unwrap();
        assert!(sid.thread.is_some() && sid.time.is_some() && sid.cpu.is_some());
        assert_eq!(sid.identifier, sid.id);
        assert_eq!(raw.id(&f.cfg), sid.identifier);
        assert_eq!(raw.time(&f.cfg), sid.time);
        match rec {
            Record::Comm(c) if !c.misc.comm_exec() => {
                assert_eq!(c.comm, *b"pc-fixture".as_slice());
                assert_eq!((c.pid, c.tid), (pid, pid));
                seen.insert("comm");
            }
            Record::Comm(c) => {
                assert_eq!(c.comm, *b"true".as_slice());
                assert_eq!(c.pid, child);
                seen.insert("comm exec");
            }
            Record::Fork(t) => {
                assert_eq!((t.pid, t.ppid, t.tid, t.ptid), (child, pid, child, pid));
                seen.insert("fork");
            }
            Record::Exit(t) => {
                assert_eq!((t.pid, t.ppid), (child, pid));
                seen.insert("exit");
            }
            Record::Mmap2(m) if m.misc.mmap_data() => {
                if m.filename == *b"/etc/passwd".as_slice() {
                    assert_eq!(m.addr, f.fact("data_map"));
                    assert_eq!(m.prot, libc::PROT_READ as u32);
                    seen.insert("mmap2 data");
                }
            }
            Record::Mmap2(m) => {
                assert_eq!(m.pid, child);
                if m.filename.to_string_lossy().ends_with("/true") {
                    assert!(m.misc.mmap_build_id());
                    let Mmap2File::BuildId(b) = m.file else {
                        panic!("build id")
                    };
                    assert_eq!(b.as_bytes().len(), 20);
                    assert_ne!(b.as_bytes(), [0; 20]);
                    assert_eq!(m.prot & libc::PROT_EXEC as u32, libc::PROT_EXEC as u32);
                    seen.insert("mmap2 build id");
                }
            }
            Record::Cgroup(c) => {
                assert_eq!(c.path.to_string_lossy(), f.facts["cgroup"]);
                assert!(c.id > 1);
                seen.insert("cgroup");
            }
            Record::Ksymbol(k) => {
                assert_eq!(k.ksym_type as u32, PERF_RECORD_KSYMBOL_TYPE_BPF);
                assert!(
                    k.name.to_string_lossy().starts_with("bpf_prog_"),
                    "{:?}",
                    k.name
                );
                assert!(k.addr > 0 && k.len > 0);
                seen.insert(
                    if k.flags as u32 & PERF_RECORD_KSYMBOL_FLAGS_UNREGISTER != 0 {
                        "ksymbol unregister"
                    } else {
                        "ksymbol"
                    },
                );
            }
            Record::BpfEvent(b) => {
                bpf_ids.push((b.event_type as u32, b.id));
                seen.insert("bpf event");
            }
            Record::Namespaces(n) => {
                assert_eq!(n.pid, child);
                assert!(n.links().count() >= 7);
                assert!(n.links().all(|l| l.ino != 0));
                seen.insert("namespaces");
            }
            Record::Switch(s) => {
                if s.misc.switch_out() {
                    switches.0 += 1;
                } else {
                    switches.1 += 1;
                }
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    let want = [
        "comm",
        "comm exec",
        "fork",
        "exit",
        "mmap2 data",
        "mmap2 build id",
        "namespaces",
    ];
    for w in want {
        assert!(seen.contains(w), "no {w} in {seen:?}");
    }
    if f.facts.contains_key("cgroup") {
        assert!(seen.contains("cgroup"));
    }
    if f.facts.contains_key("bpf") {
        assert!(seen.contains("ksymbol") && seen.contains("ksymbol unregister"));
        assert_eq!(bpf_ids.len(), 2);
        assert_eq!(bpf_ids[0].0, PERF_BPF_EVENT_PROG_LOAD);
        assert_eq!(bpf_ids[1], (PERF_BPF_EVENT_PROG_UNLOAD, bpf_ids[0].1));
    }
    assert!(switches.0 > 0 && switches.1 > 0, "{switches:?}");
}

#[test]
fn cpu_wide_switches() {
    let f = fixture::switch_cpu_wide();
    let recs = parse_all(&f);
    assert!(!recs.is_empty());
    let (mut out, mut inn) = (0, 0);
    for (raw, rec) in &recs {
        let Record::SwitchCpuWide(s) = rec else {
            panic!("{rec:?}")
        };
        assert_eq!(s.sample_id.cpu, Some(f.fact("cpu") as u32));
        assert_eq!(raw.cpu(&f.cfg), Some(f.fact("cpu") as u32));
        if s.misc.switch_out() {
            out += 1;
        } else {
            inn += 1;
        }
    }
    assert!(out > 0 && inn > 0);
}

#[test]
fn lost_record() {
    let f = fixture::lost();
    let recs = parse_all(&f);
    let lost: Vec<_> = recs
        .iter()
        .filter_map(|(_, r)| match r {
            Record::Lost(l) => Some(l),
            _ => None,
        })
        .collect();
    assert_eq!(lost.len(), 1);
    assert_eq!(lost[0].id, f.fact("id"));
    assert!(lost[0].lost > 0);
    assert_eq!(lost[0].sample_id.thread.unwrap().pid as u64, f.fact("pid"));
    assert!(samples(&recs).all(|s| s.id() == Some(f.fact("id"))));
}
