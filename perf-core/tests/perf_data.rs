//! perf.data files: our reader reads back what our writer wrote; it reads what `perf record` wrote on this
//! machine; and `perf script` / `perf report` open what our writer wrote, without warnings, count the
//! samples we wrote and put the busy loop's samples on its symbol.
//!
//! The tests that run the perf tool print `skipped: <reason>` when `perf` is not installed or cannot record
//! here (a failure when `PERF_TEST_STRICT=1`).

use std::io::Cursor;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use perf_core::perf_data::*;
use perf_core::record::*;
use perf_core::{Chunk, RawRecord, Ring, RingMode};
use perf_sys::*;

// ---------------------------------------------------------------------------------------------------------
// helpers

mod skip;
use skip::skip;

/// `perf --version`, or `None` (after printing why) when the perf tool is missing.
fn perf_tool() -> Option<String> {
    match Command::new("perf").arg("--version").output() {
        Ok(o) if o.status.success() => Some(String::from_utf8_lossy(&o.stdout).trim().to_owned()),
        Ok(o) => {
            skip(&format!(
                "`perf --version` failed: {}",
                String::from_utf8_lossy(&o.stderr)
            ));
            None
        }
        Err(e) => {
            skip(&format!(
                "the perf tool is not installed ({e}); install linux-perf"
            ));
            None
        }
    }
}

/// A fresh directory for one test's files, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("perf-core-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
    fn path(&self, file: &str) -> PathBuf {
        self.0.join(file)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn perf(args: &[&str], file: &Path) -> Output {
    let out = Command::new("perf")
        .args(args)
        .arg("-i")
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "perf {args:?} failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The SAMPLE count `perf report --stats` prints for the whole file.
fn perf_stats_samples(file: &Path) -> u64 {
    let out = perf(&["report", "--stats"], file);
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| {
            let rest = l.trim().strip_prefix("SAMPLE events:")?;
            rest.split_whitespace().next()?.parse().ok()
        })
        .unwrap_or_else(|| panic!("no `SAMPLE events:` line in perf report --stats:\n{text}"))
}

/// Lines of stderr that look like perf complaining about the file.
fn complaints(stderr: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(stderr)
        .lines()
        .filter(|l| {
            let l = l.to_ascii_lowercase();
            [
                "warn",
                "error",
                "fail",
                "invalid",
                "corrupt",
                "unknown",
                "unexpected",
                "broken",
                "missing",
            ]
            .iter()
            .any(|w| l.contains(w))
        })
        .map(str::to_owned)
        .collect()
}

fn sw_attr(config: u32, sample_type: u32) -> perf_event_attr {
    let mut attr = perf_event_attr {
        type_: PERF_TYPE_SOFTWARE,
        size: std::mem::size_of::<perf_event_attr>() as u32,
        config: u64::from(config),
        sample_type: u64::from(sample_type),
        ..Default::default()
    };
    attr.__bindgen_anon_1.sample_period = 100_000;
    attr.set_disabled(1);
    attr.set_exclude_kernel(1);
    attr.set_exclude_hv(1);
    attr.set_sample_id_all(1);
    attr.set_mmap(1);
    attr.set_comm(1);
    attr.set_mmap2(1);
    attr
}

const ROUND_TRIP_SAMPLE: u32 = PERF_SAMPLE_IDENTIFIER
    | PERF_SAMPLE_IP
    | PERF_SAMPLE_TID
    | PERF_SAMPLE_TIME
    | PERF_SAMPLE_CPU
    | PERF_SAMPLE_PERIOD
    | PERF_SAMPLE_CALLCHAIN;

fn sid(cfg: &perf_core::ParseConfig, pid: u32, time: u64, id: u64) -> SampleId {
    let has = |b: u32| cfg.sample_type() & u64::from(b) != 0;
    SampleId {
        thread: has(PERF_SAMPLE_TID).then_some(ThreadId { pid, tid: pid }),
        time: has(PERF_SAMPLE_TIME).then_some(time),
        cpu: has(PERF_SAMPLE_CPU).then_some(1),
        identifier: has(PERF_SAMPLE_IDENTIFIER).then_some(id),
        id: None,
        stream_id: None,
    }
}

fn sample(cfg: &perf_core::ParseConfig, pid: u32, time: u64, ip: u64, id: u64) -> Record<'static> {
    let has = |b: u32| cfg.sample_type() & u64::from(b) != 0;
    let fields = SampleFields {
        misc: Misc(PERF_RECORD_MISC_USER as u16),
        identifier: has(PERF_SAMPLE_IDENTIFIER).then_some(id),
        ip: Some(ip),
        thread: Some(ThreadId { pid, tid: pid }),
        time: Some(time),
        cpu: has(PERF_SAMPLE_CPU).then_some(1),
        period: Some(100_000),
        callchain: has(PERF_SAMPLE_CALLCHAIN).then(|| Callchain {
            ips: U64s::from(vec![PERF_CONTEXT_USER, ip, ip + 0x40]),
        }),
        ..Default::default()
    };
    Record::Sample(Sample::from_fields(&fields, cfg).expect("the fields fit the config"))
}

// ---------------------------------------------------------------------------------------------------------
// our writer, our reader

#[test]
// Reads /proc for the host features and may run the perf tool: neither exists under Miri's isolation.
#[cfg_attr(miri, ignore)]
fn the_reader_reads_back_what_the_writer_wrote() {
    let a = EventAttr::new(sw_attr(PERF_COUNT_SW_CPU_CLOCK, ROUND_TRIP_SAMPLE))
        .with_ids([11, 12])
        .with_name("cpu-clock");
    let b = EventAttr::new(sw_attr(PERF_COUNT_SW_PAGE_FAULTS, ROUND_TRIP_SAMPLE))
        .with_ids([21])
        .with_name("page-faults");
    let cfg = a.parse_config();
    let mut w = PerfDataWriter::new(Cursor::new(Vec::new()), vec![a.clone(), b.clone()]).unwrap();

    // (event index, record) in file order.
    let mut written: Vec<(usize, Record<'static>)> = vec![
        (
            0,
            Record::Comm(Comm {
                misc: Misc(PERF_RECORD_MISC_COMM_EXEC as u16),
                pid: 7,
                tid: 7,
                comm: Bytes::from(b"worker".to_vec()),
                sample_id: sid(&cfg, 7, 100, 11),
            }),
        ),
        (
            1,
            Record::Mmap2(Mmap2 {
                misc: Misc(PERF_RECORD_MISC_USER as u16),
                pid: 7,
                tid: 7,
                addr: 0x5555_0000_0000,
                len: 0x2000,
                pgoff: 0x1000,
                file: Mmap2File::Inode {
                    maj: 8,
                    min: 1,
                    ino: 1234,
                    ino_generation: 0,
                },
                prot: 5,
                flags: 2,
                filename: Bytes::from(b"/usr/bin/worker".to_vec()),
                sample_id: sid(&cfg, 7, 101, 21),
            }),
        ),
    ];
    for i in 0..50u64 {
        let event = (i % 3 == 0) as usize;
        let id = if event == 0 { 11 + i % 2 } else { 21 };
        written.push((event, sample(&cfg, 7, 200 + i, 0x5555_0000_0100 + i, id)));
    }
    written.push((
        0,
        Record::Exit(Task {
            pid: 7,
            ppid: 1,
            tid: 7,
            ptid: 1,
            time: 300,
            sample_id: sid(&cfg, 7, 300, 12),
            ..Default::default()
        }),
    ));
    for (i, (event, rec)) in written.iter().enumerate() {
        w.write_record(*event, rec).unwrap();
        if i % 10 == 9 {
            w.finish_round().unwrap();
        }
    }
    // A record the kernel wrote, passed through as bytes.
    let mut raw_bytes = Vec::new();
    sample(&cfg, 8, 400, 0x1234, 21)
        .encode(&cfg, &mut raw_bytes)
        .unwrap();
    let (raw, _) = RawRecord::from_chunk(Chunk::contiguous(&raw_bytes)).unwrap();
    w.write_raw(&raw).unwrap();
    written.push((1, raw.parse(&cfg).unwrap().into_owned()));
    w.finish_round().unwrap();
    assert_eq!(w.samples_written(), 51);

    let mut features = Features::from_host();
    features.build_ids = vec![
        BuildIdEntry::user(vec![0xab; 20], "/usr/bin/worker"),
        BuildIdEntry::kernel(vec![1, 2, 3, 4, 5, 6, 7, 8], "[kernel.kallsyms]"),
    ];
    features
        .other
        .insert(Feature::CLOCKID.0, 1u64.to_ne_bytes().to_vec());
    let bytes = w.finish(&features).unwrap().into_inner();

    let file = PerfData::parse(&bytes).unwrap();
    // Header and events: the attrs are stored at the smallest size that holds them.
    let size = a.file_attr_size();
    assert_eq!(
        size, PERF_ATTR_SIZE_VER0,
        "only the first 64 bytes are used"
    );
    assert_eq!(file.header().attr_size, u64::from(size) + 16);
    let (mut a, mut b) = (a, b);
    a.attr.size = size;
    b.attr.size = size;
    assert_eq!(file.events(), &[a, b][..]);
    assert_eq!(file.event_of_id(12), Some(0));
    assert_eq!(file.event_of_id(21), Some(1));
    // Features: what we gave, plus the sample time span the writer saw.
    let mut expected = features.clone();
    expected.sample_time = Some(SampleTime {
        first: 200,
        last: 400,
    });
    assert_eq!(file.features(), &expected);
    assert!(file.header().has_feature(Feature::EVENT_DESC));
    assert!(file.header().has_feature(Feature::HOSTNAME));
    assert!(!file.header().has_feature(Feature::TRACING_DATA));
    assert!(
        features.hostname.is_some() && features.nr_cpus.is_some() && features.cmdline.is_some()
    );

    // Records: the same, each tagged with its event; rounds recognized by type.
    let mut got = Vec::new();
    let mut rounds = 0;
    for rec in file.records() {
        let rec = rec.unwrap();
        if rec.record_type() == PERF_RECORD_FINISHED_ROUND {
            assert!(rec.is_tool_record());
            assert_eq!(record_name(rec.record_type()), "FINISHED_ROUND");
            assert_eq!(rec.event, None);
            rounds += 1;
            continue;
        }
        got.push((rec.event.unwrap(), rec.parse().unwrap().into_owned()));
    }
    assert_eq!(rounds, 6);
    assert_eq!(got.len(), written.len());
    for (i, (g, w)) in got.iter().zip(&written).enumerate() {
        assert_eq!(g, w, "record {i}");
    }

    // perf, when installed, tells the two events apart by id and names them from EVENT_DESC.
    if Command::new("perf").arg("--version").output().is_ok() {
        let dir = TempDir::new("round-trip");
        let path = dir.path("perf.data");
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(perf_stats_samples(&path), 51);
        let out = perf(&["report", "--stats"], &path);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("cpu-clock stats"), "{text}");
        assert!(text.contains("page-faults stats"), "{text}");
        let list = perf(&["buildid-list"], &path);
        let list = String::from_utf8_lossy(&list.stdout);
        assert!(
            list.contains(&format!("{} /usr/bin/worker", "ab".repeat(20))),
            "{list}"
        );
    }
}

#[test]
fn the_writer_refuses_what_perf_could_not_read() {
    let out = || Cursor::new(Vec::new());
    let err = PerfDataWriter::new(out(), vec![]).unwrap_err();
    assert!(err.to_string().contains("at least one event"), "{err}");
    // Two events whose records carry no id.
    let plain = EventAttr::new(sw_attr(PERF_COUNT_SW_CPU_CLOCK, PERF_SAMPLE_IP));
    let err = PerfDataWriter::new(out(), vec![plain.clone(), plain.clone()]).unwrap_err();
    assert!(err.to_string().contains("PERF_SAMPLE_IDENTIFIER"), "{err}");
    // One id on two events.
    let a = EventAttr::new(sw_attr(PERF_COUNT_SW_CPU_CLOCK, ROUND_TRIP_SAMPLE)).with_ids([5]);
    let err = PerfDataWriter::new(out(), vec![a.clone(), a.clone()]).unwrap_err();
    assert!(err.to_string().contains("id 5"), "{err}");
    // An event index past the events.
    let mut w = PerfDataWriter::new(out(), vec![plain]).unwrap();
    let err = w
        .write_record(3, &Record::Lost(Lost::default()))
        .unwrap_err();
    assert!(err.to_string().contains("out of range"), "{err}");
}

#[test]
fn the_reader_refuses_what_is_not_a_perf_data_file() {
    let err = PerfData::parse(b"PERFFILE and then some more bytes").unwrap_err();
    assert!(err.to_string().contains("PERFILE2"), "{err}");
    let mut w = PerfDataWriter::new(
        Cursor::new(Vec::new()),
        vec![EventAttr::new(sw_attr(
            PERF_COUNT_SW_CPU_CLOCK,
            PERF_SAMPLE_IP,
        ))],
    )
    .unwrap();
    w.finish_round().unwrap();
    let bytes = w.finish(&Features::default()).unwrap().into_inner();
    assert!(PerfData::parse(&bytes).is_ok());
    // Every truncation is an error, never a panic.
    for len in 0..bytes.len() {
        assert!(
            PerfData::parse(&bytes[..len]).is_err(),
            "truncated to {len}"
        );
    }
    // A byte-swapped file says so.
    let mut swapped = bytes.clone();
    swapped[..8].reverse();
    let err = PerfData::parse(&swapped).unwrap_err();
    assert!(err.to_string().contains("byte order"), "{err}");
}

// ---------------------------------------------------------------------------------------------------------
// perf record -> our reader

#[test]
#[cfg_attr(miri, ignore)]
fn the_reader_reads_what_perf_record_wrote() {
    let Some(version) = perf_tool() else {
        return;
    };
    let dir = TempDir::new("perf-record");
    let file = dir.path("perf.data");
    let rec = Command::new("perf")
        // `--buildid-mmap` (build ids from the MMAP2 records): without it, Debian's perf 6.1.192 aborts
        // on this kernel in its build-id pass at the end ("assertion failed at util/build-id.c:1010", then
        // "stack smashing detected") whatever it recorded.
        .args(["record", "--buildid-mmap", "-e", "cpu-clock", "-o"])
        .arg(&file)
        .args([
            "--",
            "sh",
            "-c",
            "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done",
        ])
        .output()
        .unwrap();
    if !rec.status.success() {
        skip(&format!(
            "`perf record -e cpu-clock` cannot record here: {}",
            String::from_utf8_lossy(&rec.stderr)
        ));
        return;
    }
    let bytes = std::fs::read(&file).unwrap();
    let data = PerfData::parse(&bytes).unwrap();

    let ev = data.events();
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!(ev[0].attr.type_, PERF_TYPE_SOFTWARE);
    assert_eq!(ev[0].attr.config, u64::from(PERF_COUNT_SW_CPU_CLOCK));
    assert_eq!(ev[0].name.as_deref(), Some("cpu-clock"));
    assert!(!ev[0].ids.is_empty());
    let f = data.features();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    assert_eq!(f.hostname.as_deref(), Some(host.trim()));
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    assert_eq!(f.osrelease.as_deref(), Some(release.trim()));
    assert!(
        version.contains(f.version.as_deref().unwrap()),
        "{version} vs {:?}",
        f.version
    );
    assert_eq!(f.cmdline.as_ref().unwrap()[1], "record");
    let cpus = f.nr_cpus.unwrap();
    assert!(cpus.online >= 1 && cpus.available >= cpus.online);
    let st = f.sample_time.unwrap();
    assert!(st.first <= st.last);
    // perf fills in the first and last sample times in its pass over the events at the end, which
    // `--buildid-mmap` skips: 0 and 0 then.
    let timed = st.last != 0;

    let (mut samples, mut rounds, mut unknown_tool) = (0u64, 0u64, Vec::new());
    for rec in data.records() {
        let rec = rec.unwrap();
        if rec.is_tool_record() {
            if rec.record_type() == PERF_RECORD_FINISHED_ROUND {
                rounds += 1;
            }
            if record_name(rec.record_type()) == "UNKNOWN" {
                unknown_tool.push(rec.record_type());
            }
            continue;
        }
        // Every kernel record parses with the layout the file's attr gives.
        match rec.parse().unwrap() {
            Record::Sample(s) => {
                samples += 1;
                let t = s.time().unwrap();
                assert!(!timed || (st.first <= t && t <= st.last));
            }
            Record::Unknown(u) => panic!("kernel record type {} not parsed", u.record_type),
            _ => {}
        }
    }
    assert!(rounds >= 1, "no FINISHED_ROUND in a perf record file");
    assert!(
        unknown_tool.is_empty(),
        "unnamed tool records {unknown_tool:?}"
    );
    let perf_samples = perf_stats_samples(&file);
    assert_eq!(samples, perf_samples);
    let script = perf(&["script"], &file);
    assert_eq!(
        String::from_utf8_lossy(&script.stdout).lines().count() as u64,
        samples
    );
    assert!(samples > 0, "perf recorded no samples");
    println!("perf record wrote {samples} samples; our reader and `perf report --stats` agree");
}

// ---------------------------------------------------------------------------------------------------------
// our writer -> perf script / perf report

/// Keeps `x` opaque to the optimizer without a call, so every sample of a loop lands in the loop itself
/// (in a debug build, `black_box` and even integer methods are calls into other functions).
#[inline(always)]
fn opaque(mut x: u64) -> u64 {
    // SAFETY: an empty asm block that only claims to read and write a register; it touches no memory.
    unsafe { std::arch::asm!("/* {0} */", inout(reg) x, options(nomem, nostack, preserves_flags)) };
    x
}

/// The function whose samples perf must attribute by name: a loop with no calls in it.
#[inline(never)]
#[no_mangle]
pub extern "C" fn perf_data_test_busy_loop(iters: u64) -> u64 {
    let (mut x, mut i) = (1u64, 0u64);
    while i < iters {
        x = opaque((x ^ i) >> 1);
        i += 1;
    }
    x
}

/// A second function, so the report has something to split with.
#[inline(never)]
#[no_mangle]
pub extern "C" fn perf_data_test_other_loop(iters: u64) -> u64 {
    let (mut x, mut i) = (3u64, 0u64);
    while i < iters {
        x = opaque((x | i) << 1);
        i += 1;
    }
    x
}

/// The executable mapping of this test binary that holds `addr`, from /proc/self/maps, as an MMAP2 record.
fn exec_mapping(addr: u64, pid: u32, cfg: &perf_core::ParseConfig) -> Mmap2<'static> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    for line in maps.lines() {
        let mut f = line.split_whitespace();
        let (Some(range), Some(perms), Some(off), Some(dev), Some(ino)) =
            (f.next(), f.next(), f.next(), f.next(), f.next())
        else {
            continue;
        };
        let path = f.collect::<Vec<_>>().join(" ");
        let (s, e) = range.split_once('-').unwrap();
        let (start, end) = (
            u64::from_str_radix(s, 16).unwrap(),
            u64::from_str_radix(e, 16).unwrap(),
        );
        if !(start..end).contains(&addr) {
            continue;
        }
        assert!(perms.contains('x'), "{line}");
        let (maj, min) = dev.split_once(':').unwrap();
        return Mmap2 {
            misc: Misc(PERF_RECORD_MISC_USER as u16),
            pid,
            tid: pid,
            addr: start,
            len: end - start,
            pgoff: u64::from_str_radix(off, 16).unwrap(),
            file: Mmap2File::Inode {
                maj: u32::from_str_radix(maj, 16).unwrap(),
                min: u32::from_str_radix(min, 16).unwrap(),
                ino: ino.parse().unwrap(),
                ino_generation: 0,
            },
            prot: (libc::PROT_READ | libc::PROT_EXEC) as u32,
            flags: libc::MAP_PRIVATE as u32,
            filename: Bytes::from(path.into_bytes()),
            sample_id: sid(cfg, pid, 1, 0),
        };
    }
    panic!("no mapping holds {addr:#x}:\n{maps}");
}

fn comm(pid: u32, tid: u32, cfg: &perf_core::ParseConfig) -> Comm<'static> {
    let exe = std::env::current_exe().unwrap();
    let name = exe.file_name().unwrap().to_string_lossy();
    let name: String = name.chars().take(15).collect();
    Comm {
        misc: Misc(0),
        pid,
        tid,
        comm: Bytes::from(name.into_bytes()),
        sample_id: SampleId {
            thread: Some(ThreadId { pid, tid }),
            ..sid(cfg, pid, 1, 0)
        },
    }
}

/// Runs `perf script` and `perf report --stdio` on `file`: asserts they complain about nothing and agree
/// that there are `samples` samples; returns (script lines naming the busy loop, its report percentage).
fn perf_opens(file: &Path, samples: u64) -> (u64, f64) {
    // To look at the file by hand: PERF_CORE_KEEP_PERF_DATA=DIR keeps a copy.
    if let Some(dir) = std::env::var_os("PERF_CORE_KEEP_PERF_DATA") {
        let name = format!("{}.data", std::thread::current().name().unwrap_or("perf"));
        std::fs::copy(file, Path::new(&dir).join(name)).unwrap();
    }
    let script = perf(&["script"], file);
    let bad = complaints(&script.stderr);
    assert!(bad.is_empty(), "perf script complained: {bad:#?}");
    let out = String::from_utf8_lossy(&script.stdout).into_owned();
    assert_eq!(out.lines().count() as u64, samples, "perf script:\n{out}");
    let busy_lines = out
        .lines()
        .filter(|l| l.contains("perf_data_test_busy_loop"))
        .count() as u64;
    println!(
        "perf script, first line: {}",
        out.lines().next().unwrap_or_default()
    );

    let report = perf(&["report", "--stdio"], file);
    let bad = complaints(&report.stderr);
    assert!(bad.is_empty(), "perf report complained: {bad:#?}");
    let text = String::from_utf8_lossy(&report.stdout).into_owned();
    let line = text
        .lines()
        .find(|l| !l.starts_with('#') && l.contains("perf_data_test_busy_loop"))
        .unwrap_or_else(|| panic!("perf report does not name the busy loop:\n{text}"));
    println!("perf report: {}", line.trim());
    let percent: f64 = line
        .split_whitespace()
        .next()
        .unwrap()
        .trim_end_matches('%')
        .parse()
        .unwrap();
    let count_line = text
        .lines()
        .find(|l| l.starts_with("# Samples:"))
        .unwrap_or_else(|| panic!("no `# Samples:` line:\n{text}"));
    println!("perf report: {count_line}");
    assert_eq!(perf_stats_samples(file), samples);
    (busy_lines, percent)
}

fn test_event(sample_type: u32) -> EventAttr {
    EventAttr::new(sw_attr(PERF_COUNT_SW_CPU_CLOCK, sample_type))
        .with_ids([1])
        .with_name("cpu-clock")
}

#[test]
#[cfg_attr(miri, ignore)]
fn perf_opens_a_file_of_synthesized_samples_and_names_the_busy_loop() {
    if perf_tool().is_none() {
        return;
    }
    let dir = TempDir::new("synth");
    let path = dir.path("perf.data");
    let event =
        test_event(PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_PERIOD);
    let cfg = event.parse_config();
    let pid = std::process::id();
    let busy = perf_data_test_busy_loop as *const () as usize as u64;
    let other = perf_data_test_other_loop as *const () as usize as u64;

    let mut w = PerfDataWriter::create(&path, vec![event]).unwrap();
    w.write_record(0, &Record::Comm(comm(pid, pid, &cfg)))
        .unwrap();
    w.write_record(0, &Record::Mmap2(exec_mapping(busy, pid, &cfg)))
        .unwrap();
    let (n_busy, n_other) = (300u64, 100u64);
    for i in 0..n_busy + n_other {
        let ip = if i % 4 == 3 { other } else { busy } + i % 4;
        w.write_record(0, &sample(&cfg, pid, 1_000 + i * 100_000, ip, 1))
            .unwrap();
        if i % 64 == 63 {
            w.finish_round().unwrap();
        }
    }
    w.finish_round().unwrap();
    assert_eq!(w.samples_written(), n_busy + n_other);
    w.finish(&Features::from_host()).unwrap();

    let (busy_lines, percent) = perf_opens(&path, n_busy + n_other);
    assert_eq!(busy_lines, n_busy);
    assert!((percent - 75.0).abs() < 0.01, "{percent}");
}

#[test]
#[cfg_attr(miri, ignore)]
fn perf_opens_a_file_of_samples_the_kernel_took_of_the_busy_loop() {
    if perf_tool().is_none() {
        return;
    }
    let event =
        test_event(PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_PERIOD);
    let cfg = event.parse_config();
    let fd = match perf_core::PerfFd::open(
        &mut { event.attr },
        0,
        -1,
        None,
        u64::from(PERF_FLAG_FD_CLOEXEC),
    ) {
        Ok(fd) => fd,
        Err(e) => {
            skip(&format!("cannot open a cpu-clock sampler: {e}"));
            return;
        }
    };
    let id = perf_sys::ioctl::id(fd.as_fd()).unwrap();
    let event = event.with_ids([id]);
    let mut ring = Ring::map_exclusive(&fd, 128, RingMode::Normal).unwrap();

    let dir = TempDir::new("kernel");
    let path = dir.path("perf.data");
    let pid = std::process::id();
    let busy = perf_data_test_busy_loop as *const () as usize as u64;
    let mut w = PerfDataWriter::create(&path, vec![event]).unwrap();
    // The mappings and name the kernel will not tell us about, since they predate the event.
    let tid = {
        // SAFETY: gettid has no preconditions.
        unsafe { libc::gettid() }
    } as u32;
    w.write_record(0, &Record::Comm(comm(pid, tid, &cfg)))
        .unwrap();
    w.write_record(0, &Record::Mmap2(exec_mapping(busy, pid, &cfg)))
        .unwrap();

    perf_sys::ioctl::enable(fd.as_fd()).unwrap();
    let start = std::time::Instant::now();
    while start.elapsed() < std::time::Duration::from_millis(150) {
        std::hint::black_box(perf_data_test_busy_loop(std::hint::black_box(100_000)));
    }
    perf_sys::ioctl::disable(fd.as_fd()).unwrap();

    let mut batch = ring.batch().unwrap();
    while let Some(chunk) = batch.next_record().unwrap() {
        let (raw, _) = RawRecord::from_chunk(chunk).unwrap();
        w.write_raw(&raw).unwrap();
    }
    drop(batch);
    w.finish_round().unwrap();
    let samples = w.samples_written();
    assert!(samples >= 100, "only {samples} samples in 150 ms at 10 kHz");
    w.finish(&Features::from_host()).unwrap();

    let (busy_lines, percent) = perf_opens(&path, samples);
    assert!(
        busy_lines * 10 >= samples * 8,
        "perf put {busy_lines} of {samples} samples on the busy loop"
    );
    assert!(percent >= 80.0, "{percent}");
}
