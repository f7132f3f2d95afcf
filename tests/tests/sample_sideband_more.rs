//! Side-band records the other sampling tests do not provoke: EXIT of a monitored process, and
//! KSYMBOL / BPF_EVENT around a BPF program's load and unload.
#![allow(clippy::field_reassign_with_default)] // options are set field by field, as in the docs

use std::os::fd::{FromRawFd, OwnedFd};
use std::process::Command;

use perf_event::config::{Cpu, Opts, Proc, UseBuildId};
use perf_event::count::Counter;
use perf_event::event::sw::Software;
use perf_event::sample::record::{BpfEventType, Info, Record};
use tests::{is_root, require, Skip};

#[test]
fn exit_of_a_monitored_process_is_recorded() {
    let mut child = Command::new("sleep")
        .arg("0.3")
        .spawn()
        .expect("spawn sleep");
    let pid = child.id();
    let mut opts = Opts::default();
    opts.exclude.kernel = true;
    opts.extra_record.task = true;
    opts.record_id_format.task = true;
    opts.record_id_all = true;
    let counter = Counter::new(Software::Dummy, (Proc(pid), Cpu::ALL), &opts).unwrap();
    let sampler = counter.sampler(3).unwrap();
    counter.enable().unwrap();
    assert!(child.wait().unwrap().success());
    let exits: Vec<_> = sampler
        .iter()
        .filter_map(|(_, r)| match r {
            Record::Exit(e) => Some(e),
            _ => None,
        })
        .collect();
    assert!(
        exits.iter().any(|e| e.task.pid == pid && e.task.tid == pid),
        "no EXIT record for pid {pid}: {exits:?}"
    );
}

/// Kernels leave `PERF_RECORD_MISC_MMAP_BUILD_ID` in the header of the MMAP2 records they write,
/// after an event that asked for build ids, for the other events on the CPU, which get device and
/// inode after it (Linux 6.18 here). An event that did not ask must never read a build id: with
/// events of both kinds on every CPU, the ones that asked see build ids for the same mappings the
/// others see with inodes.
#[test]
fn only_events_that_ask_for_build_ids_read_them() {
    require!(
        is_root(),
        Skip::Privilege,
        "system-wide mmap records need root (or CAP_PERFMON)"
    );
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    let open = |build_id: bool, cpu: u32| {
        let mut opts = Opts::default();
        opts.extra_record.mmap.code = true;
        opts.extra_record.mmap.ext = Some(UseBuildId(build_id));
        opts.enable = true;
        Counter::new(Software::Dummy, (Proc::ALL, Cpu(cpu)), &opts)
    };
    let mut samplers = Vec::new();
    for cpu in 0..cpus {
        // Asking, not asking, asking: the middle one reads records the first made the kernel mark.
        for build_id in [true, false, true] {
            let counter = match open(build_id, cpu) {
                Ok(c) => c,
                Err(e) if build_id && e.to_string().contains("5.12") => {
                    tests::skip(Skip::Environment, &format!("attr.build_id: {e}"));
                    return;
                }
                Err(e) => panic!("open on CPU {cpu}: {e}"),
            };
            let sampler = counter.sampler(5).unwrap();
            samplers.push((build_id, counter, sampler));
        }
    }
    for _ in 0..5 {
        assert!(Command::new("true").status().unwrap().success());
    }
    let (mut asked, mut not_asked, mut leaked) = (0, 0, 0);
    for (build_id, counter, sampler) in &samplers {
        counter.disable().unwrap();
        let mut records = sampler.iter().into_cow();
        while let Some(raw) = records.lending_next() {
            let (header, _) = perf_core::RawRecord::from_chunk(raw.as_raw().as_chunk()).unwrap();
            let (_, r) = raw.parse();
            let Record::Mmap(m) = r else { continue };
            if !build_id && m.ext.is_some() && header.misc().mmap_build_id() {
                leaked += 1; // the bit on a record with an inode
            }
            let Some(ext) = &m.ext else { continue };
            match (&ext.info, build_id) {
                (Info::BuildId(_), true) => asked += 1,
                (Info::Device { .. }, false) => not_asked += 1,
                (Info::BuildId(id), false) => {
                    panic!(
                        "a build id {id:02x?} for {:?} on an event that did not ask",
                        m.file
                    )
                }
                (Info::Device { .. }, true) => {} // a file without one, or not in memory
            }
        }
    }
    assert!(asked > 0, "no build id on the events that asked");
    assert!(
        not_asked > 0,
        "no MMAP2 record on the events that did not ask"
    );
    println!(
        "{asked} build ids where asked, {not_asked} inodes where not ({leaked} of them marked as \
         build ids by the kernel)"
    );
}

/// Loads `r0 = 0; exit` as a socket filter, which every kernel with BPF accepts from root.
fn load_trivial_bpf() -> std::io::Result<OwnedFd> {
    let insns: [u64; 2] = [
        u64::from_le_bytes([0xb7, 0, 0, 0, 0, 0, 0, 0]), // BPF_ALU64 | BPF_MOV | BPF_K: r0 = 0
        u64::from_le_bytes([0x95, 0, 0, 0, 0, 0, 0, 0]), // BPF_JMP | BPF_EXIT
    ];
    let license = b"GPL\0";
    const BPF_PROG_TYPE_SOCKET_FILTER: u64 = 1;
    let mut attr = [0u64; 16]; // union bpf_attr, the BPF_PROG_LOAD part; the rest zero
    attr[0] = BPF_PROG_TYPE_SOCKET_FILTER | (2u64 << 32);
    attr[1] = insns.as_ptr() as u64;
    attr[2] = license.as_ptr() as u64;
    const BPF_PROG_LOAD: libc::c_long = 5;
    // SAFETY: bpf(2) reads `size_of_val(&attr)` bytes of a zero-padded attr whose pointers refer to
    // live locals (the instructions and the NUL-terminated license).
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
fn ksymbol_and_bpf_event_records_follow_a_program_load() {
    require!(
        is_root(),
        Skip::Privilege,
        "loading a BPF program needs root"
    );
    let mut opts = Opts::default();
    opts.exclude.kernel = true;
    opts.extra_record.ksymbol = true;
    opts.extra_record.bpf_event = true;
    opts.record_id_format.task = true;
    opts.record_id_all = true;
    let counter = Counter::new(Software::Dummy, (Proc::CURRENT, Cpu::ALL), &opts).unwrap();
    let sampler = counter.sampler(3).unwrap();
    counter.enable().unwrap();
    let prog = match load_trivial_bpf() {
        Ok(p) => p,
        Err(e) => {
            tests::skip(Skip::Privilege, &format!("BPF_PROG_LOAD refused: {e}"));
            return;
        }
    };
    drop(prog);
    // The unload runs after an RCU grace period, from a worker: give it a moment.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    let (mut ksyms, mut loads, mut unloads) = (Vec::new(), Vec::new(), Vec::new());
    while std::time::Instant::now() < deadline && (ksyms.is_empty() || loads.is_empty()) {
        for (_, r) in sampler.iter() {
            match r {
                Record::Ksymbol(k) => ksyms.push(k),
                Record::BpfEvent(b) if matches!(b.ty, BpfEventType::ProgLoad) => loads.push(b),
                Record::BpfEvent(b) => unloads.push(b),
                _ => {}
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(
        ksyms
            .iter()
            .any(|k| k.name.to_bytes().starts_with(b"bpf_prog_") && k.addr != 0 && k.len > 0),
        "no KSYMBOL for the program: {ksyms:?}"
    );
    assert_eq!(loads.len(), 1, "BPF_EVENT prog-load records: {loads:?}");
    assert_ne!(loads[0].id, 0);
    assert!(
        unloads.iter().all(|u| u.id == loads[0].id),
        "an unload names another program: {unloads:?}"
    );
}
