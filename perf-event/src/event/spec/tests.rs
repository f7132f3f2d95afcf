//! The parser on fixture sysfs trees shaped like real machines (`perf-event/tests/fixtures/sysfs`).

use std::path::{Path, PathBuf};

use perf_sys as sys;

use super::*;
use crate::config::Opts;

/// A fixture tree written to a fresh temporary directory, removed on drop.
pub(crate) struct Fixture {
    root: PathBuf,
}

impl Fixture {
    pub(crate) fn new(name: &str) -> Self {
        let text = match name {
            "alderlake" => include_str!("../../../tests/fixtures/sysfs/alderlake.txt"),
            "rk3399" => include_str!("../../../tests/fixtures/sysfs/rk3399.txt"),
            "zen3" => include_str!("../../../tests/fixtures/sysfs/zen3.txt"),
            "graviton3" => include_str!("../../../tests/fixtures/sysfs/graviton3.txt"),
            _ => panic!("no fixture {name}"),
        };
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let root = std::env::temp_dir().join(format!(
            "perf-event-spec-{}-{name}-{}",
            std::process::id(),
            N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let devices = root.join("devices");
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (path, content) = line.split_once(": ").expect("path: content");
            let p = devices.join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, format!("{content}\n")).unwrap();
        }
        // A small tracefs.
        for (sys, ev, id) in [
            ("sched", "sched_switch", 316),
            ("sched", "sched_wakeup", 318),
            ("sched", "sched_wakeup_new", 317),
            ("sched", "sched_process_exit", 305),
            ("irq", "irq_handler_entry", 120),
            ("probe", "do_sys_open", 2001),
            ("probe_libc", "malloc", 2002),
        ] {
            let d = root.join("tracing/events").join(sys).join(ev);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("id"), format!("{id}\n")).unwrap();
        }
        Self { root }
    }

    pub(crate) fn machine(&self) -> Machine {
        Machine::from_sysfs(self.root.join("devices")).with_tracefs(self.root.join("tracing"))
    }

    pub(crate) fn devices(&self) -> PathBuf {
        self.root.join("devices")
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn attr(e: &EventSpec) -> perf_sys::perf_event_attr {
    e.to_attr(&Opts::default())
}

fn tc(e: &EventSpec) -> (u32, u64) {
    (e.event.ty, e.event.config)
}

fn err(m: &Machine, s: &str) -> ParseError {
    m.parse(s).expect_err(s)
}

#[test]
fn hybrid_generic_events_open_once_per_core_pmu() {
    let f = Fixture::new("alderlake");
    let m = f.machine();
    assert!(m.is_hybrid());
    let names: Vec<String> = m.core_pmus().iter().map(|p| p.name().to_owned()).collect();
    assert_eq!(names, ["cpu_atom", "cpu_core"]);
    let l = m.parse("cycles:u").unwrap();
    assert_eq!(l.len(), 2);
    let hw = sys::PERF_TYPE_HARDWARE;
    assert_eq!(tc(&l.events()[0]), (hw, 8 << 32));
    assert_eq!(tc(&l.events()[1]), (hw, 4 << 32));
    assert_eq!(
        l.events()[0].cpus(),
        Some(&(16..24).collect::<Vec<_>>()[..])
    );
    assert_eq!(l.events()[1].cpus(), Some(&(0..16).collect::<Vec<_>>()[..]));
    assert_eq!(l.events()[0].name(), "cpu_atom/cycles:u/");
    assert!(l.iter().all(|e| e.merge_name() == "cycles:u"));
    assert_eq!(l.merged().len(), 1);
    assert!(l.iter().all(|e| attr(e).exclude_kernel() == 1));
    // Cache events too; raw events take each PMU's own type.
    let c = m.parse("L1-dcache-load-misses").unwrap();
    assert_eq!(
        tc(&c.events()[1]),
        (sys::PERF_TYPE_HW_CACHE, 4 << 32 | 0x10000)
    );
    let r = m.parse("r1a8").unwrap();
    assert_eq!(tc(&r.events()[0]), (8, 0x1a8));
    assert_eq!(tc(&r.events()[1]), (4, 0x1a8));
    // Software events are not copied.
    assert_eq!(m.parse("task-clock").unwrap().len(), 1);
    // A legacy name as a term of one core PMU.
    let one = m.parse("cpu_core/cycles/").unwrap();
    assert_eq!(one.len(), 1);
    assert_eq!(tc(&one.events()[0]), (hw, 4 << 32));
    // ...but an alias of that PMU wins.
    assert_eq!(
        tc(&m.parse("cpu_core/cpu-cycles/").unwrap().events()[0]),
        (4, 0x3c)
    );
}

#[test]
fn hybrid_sampling_opens_each_cpu_with_the_copy_of_its_pmu() {
    let f = Fixture::new("alderlake");
    let m = f.machine();
    let l = m.parse("cycles:u").unwrap();
    let merged = l.merged();
    let copies = &merged[0].1;
    // CPU 30 is in neither PMU's list: left out, as perf leaves it.
    let cpus: Vec<u32> = (0..24).chain([30]).collect();
    let plan = crate::sample::per_cpu::copy_per_cpu(copies, &cpus);
    assert_eq!(plan.len(), 24);
    for (cpu, copy) in &plan {
        let want = if *cpu < 16 { "cpu_core" } else { "cpu_atom" };
        assert_eq!(copy.pmu(), Some(want), "cpu {cpu}");
        assert_eq!(copy.event().config() >> 32, if *cpu < 16 { 4 } else { 8 });
    }
    // One copy without a CPU list (a software event) opens everywhere.
    let sw = m.parse("task-clock").unwrap();
    let sw = sw.merged();
    assert_eq!(
        crate::sample::per_cpu::copy_per_cpu(&sw[0].1, &cpus).len(),
        25
    );
}

#[test]
fn hybrid_groups_split_per_pmu() {
    let f = Fixture::new("alderlake");
    let m = f.machine();
    let l = m.parse("{cycles,instructions,page-faults}:S").unwrap();
    let groups: Vec<Vec<(String, bool)>> = l
        .groups()
        .map(|g| {
            g.iter()
                .map(|e| (e.name().to_owned(), e.is_leader()))
                .collect()
        })
        .collect();
    assert_eq!(
        groups,
        [
            vec![
                ("cpu_atom/cycles/".to_owned(), true),
                ("cpu_atom/instructions/".to_owned(), false),
                ("page-faults".to_owned(), false),
            ],
            vec![
                ("cpu_core/cycles/".to_owned(), true),
                ("cpu_core/instructions/".to_owned(), false),
            ],
        ]
    );
    assert!(l
        .iter()
        .all(|e| attr(e).sample_type & u64::from(sys::PERF_SAMPLE_READ) != 0));
}

#[test]
fn without_extended_types_one_legacy_event() {
    let f = Fixture::new("alderlake");
    let m = f.machine().with_extended_type(false);
    let l = m.parse("cycles").unwrap();
    assert_eq!(l.len(), 1);
    assert_eq!(tc(&l.events()[0]), (sys::PERF_TYPE_HARDWARE, 0));
    // Event::parse never splits.
    let u = f.machine().parse_unsplit("instructions").unwrap();
    assert_eq!(tc(&u.events()[0]), (sys::PERF_TYPE_HARDWARE, 1));
}

#[test]
fn arm_big_little_clusters() {
    let f = Fixture::new("rk3399");
    let m = f.machine();
    let l = m.parse("cycles,instructions:k").unwrap();
    let got: Vec<(u32, u64, Option<&[u32]>)> = l
        .iter()
        .map(|e| (e.event.ty, e.event.config, e.cpus()))
        .collect();
    let hw = sys::PERF_TYPE_HARDWARE;
    assert_eq!(
        got,
        [
            (hw, 8 << 32, Some(&[0, 1, 2, 3][..])),
            (hw, 9 << 32, Some(&[4, 5][..])),
            (hw, 8 << 32 | 1, Some(&[0, 1, 2, 3][..])),
            (hw, 9 << 32 | 1, Some(&[4, 5][..])),
        ]
    );
    // A sysfs alias that both clusters have: one event per PMU, merged under one name.
    let a = m.parse("l1d_cache_refill").unwrap();
    assert_eq!(a.iter().map(tc).collect::<Vec<_>>(), [(8, 3), (9, 3)]);
    assert_eq!(a.merged().len(), 1);
    // Only the A72 has inst_spec.
    assert_eq!(m.parse("inst_spec").unwrap().len(), 1);
    // The cluster PMUs by wildcard.
    let w = m.parse("armv8_cortex_*/event=0x11/").unwrap();
    assert_eq!(w.iter().map(tc).collect::<Vec<_>>(), [(8, 0x11), (9, 0x11)]);
    assert_eq!(w.events()[1].name(), "armv8_cortex_a72/event=0x11/");
}

#[test]
fn single_core_pmu_keeps_legacy_events() {
    let f = Fixture::new("graviton3");
    let m = f.machine();
    assert!(!m.is_hybrid());
    assert_eq!(tc(&m.parse("cycles").unwrap().events()[0]), (0, 0));
    // Formats in config1, config2 and config3.
    let l = m
        .parse(
            "arm_spe_0/ts_enable,load_filter,event_filter=0x5,min_latency=20,inv_event_filter=3/",
        )
        .unwrap();
    let e = &l.events()[0];
    let a = attr(e);
    assert_eq!(a.type_, 9);
    assert_eq!(a.config, 1 | 1 << 33);
    assert_eq!(
        (e.event.config1, e.event.config2, e.event.config3),
        (5, 20, 3)
    );
    let big = err(&m, "arm_spe_0/min_latency=4096/");
    assert_eq!(big.message(), "value too big for format, maximum is 4095");
    assert_eq!(big.position(), "arm_spe_0/min_latency=".len());
}

#[test]
fn split_bit_ranges_and_terms() {
    let f = Fixture::new("zen3");
    let m = f.machine();
    let cfg = |s: &str| m.parse(s).unwrap().events()[0].event.config;
    assert_eq!(cfg("cpu/event=0x1ff/"), 0x1_0000_00ff);
    assert_eq!(
        cfg("cpu/event=0xfff,umask=0x3,edge,inv,cmask=2/"),
        0xf_0284_03ff
    );
    assert_eq!(cfg("amd_df/event=0x3fff/"), 0x1800_000f_0000_00ff);
    // config= assigns, then format terms are OR-ed in (perf 6.1 order).
    assert_eq!(cfg("cpu/event=1,config=4/"), 5);
    // An alias combined with terms: OR-ed, as perf 6.1 does.
    assert_eq!(cfg("cpu/cache-misses,umask=0x2/"), 0x360);
    assert_eq!(cfg("cpu/config=0x12345/"), 0x12345);
    // The PMU's alias alone.
    let l = m.parse("energy-pkg").unwrap();
    let e = &l.events()[0];
    assert_eq!(tc(e), (10, 2));
    assert_eq!(e.scale(), Some(2.328_306_436_538_696_3e-10));
    assert_eq!(e.unit(), Some("Joules"));
    assert_eq!(e.cpus(), Some(&[0][..]));
    assert_eq!(
        m.parse("power/energy-pkg/").unwrap().events()[0].unit(),
        Some("Joules")
    );
    let e = err(&m, "cpu/event=0x1000/");
    assert_eq!(e.message(), "value too big for format, maximum is 4095");
    let e = err(&m, "cpu/foo=1/");
    assert_eq!(e.message(), "unknown term 'foo' for pmu 'cpu'");
    assert_eq!(e.position(), 4);
    assert!(e.help().unwrap().contains("event,inv,umask"), "{e}");
}

#[test]
fn uncore_pmus_by_prefix() {
    let f = Fixture::new("alderlake");
    let m = f.machine();
    for s in [
        "uncore_imc_free_running/data_read/",
        "imc_free_running/data_read/",
        "uncore_imc_free_running_*/data_read/",
    ] {
        let l = m.parse(s).unwrap();
        assert_eq!(
            l.iter().map(tc).collect::<Vec<_>>(),
            [(14, 0x20ff), (15, 0x20ff)],
            "{s}"
        );
        assert_eq!(l.events()[0].unit(), Some("MiB"));
        assert_eq!(
            l.events()[1].name(),
            format!("uncore_imc_free_running_1{}", &s[s.find('/').unwrap()..])
        );
        assert_eq!(l.merged().len(), 1);
    }
    // A bare alias of several PMUs.
    assert_eq!(m.parse("data_write").unwrap().len(), 2);
    // Not a prefix: no match.
    let e = err(&m, "uncore_imc_free/data_read/");
    assert_eq!(e.message(), "no PMU named \"uncore_imc_free\"");
    assert!(
        e.help()
            .unwrap()
            .starts_with("this system has: cpu_atom cpu_core"),
        "{e}"
    );
}

#[test]
fn tracepoints_and_probes() {
    let f = Fixture::new("zen3");
    let m = f.machine();
    let tp = sys::PERF_TYPE_TRACEPOINT;
    assert_eq!(
        tc(&m.parse("sched:sched_switch").unwrap().events()[0]),
        (tp, 316)
    );
    let g = m.parse("sched:sched_wake*:k").unwrap();
    assert_eq!(g.iter().map(tc).collect::<Vec<_>>(), [(tp, 317), (tp, 318)]);
    assert_eq!(g.events()[0].name(), "sched:sched_wakeup_new");
    assert!(g.iter().all(|e| attr(e).exclude_user() == 1));
    assert_eq!(m.parse("*:*").unwrap().len(), 7);
    assert_eq!(
        tc(&m.parse("probe:do_sys_open").unwrap().events()[0]),
        (tp, 2001)
    );
    assert_eq!(
        tc(&m.parse("probe_libc:malloc").unwrap().events()[0]),
        (tp, 2002)
    );
    let e = err(&m, "sched:nosuch");
    assert!(e.message().starts_with("unknown tracepoint"), "{e}");
    let e = err(&m, "sched:sched_switch/period=3/");
    assert_eq!(e.message(), "unknown term 'period'");
    let cg = m.parse("sched:sched_switch/call-graph=fp/").unwrap();
    assert_ne!(
        attr(&cg.events()[0]).sample_type & u64::from(sys::PERF_SAMPLE_CALLCHAIN),
        0
    );
    let none = Machine::from_sysfs(f.devices());
    assert!(err(&none, "sched:sched_switch")
        .message()
        .contains("no tracefs"));
}

#[test]
fn breakpoints() {
    let f = Fixture::new("zen3");
    let m = f.machine();
    let bp = |s: &str| {
        let l = m.parse(s).unwrap();
        let e = &l.events()[0].event;
        (e.ty, e.bp_type, e.config1, e.config2)
    };
    let b = sys::PERF_TYPE_BREAKPOINT;
    assert_eq!(bp("mem:0x1000"), (b, 3, 0x1000, 4));
    assert_eq!(bp("mem:0x1000/8:w"), (b, 2, 0x1000, 8));
    assert_eq!(bp("mem:4096:x"), (b, 4, 0x1000, 8));
    assert_eq!(bp("mem:0x1000:rwx"), (b, 7, 0x1000, 4));
    assert_eq!(bp("mem:0x1000:wu"), (b, 2, 0x1000, 4));
    assert_eq!(bp("mem:0x1000:w:u"), (b, 2, 0x1000, 4));
    assert_eq!(bp("mem:0x1000/0"), (b, 3, 0x1000, 4));
    let u = m.parse("mem:0x1000:u").unwrap();
    assert_eq!(attr(&u.events()[0]).exclude_kernel(), 1);
    assert_eq!(err(&m, "mem:0x1000:rrr").position(), "mem:0x1000:r".len());
    assert_eq!(err(&m, "mem:").position(), 4);
    assert_eq!(err(&m, "mem:0x").position(), 6);
}

#[test]
fn modifiers_and_config_terms() {
    let f = Fixture::new("zen3");
    let m = f.machine();
    let a = |s: &str| attr(&m.parse(s).unwrap().events()[0]);
    let x = a("cycles:uppp");
    assert_eq!(
        (x.exclude_user(), x.exclude_kernel(), x.precise_ip()),
        (0, 1, 3)
    );
    assert_eq!(a("task-clock:D").pinned(), 1);
    assert_eq!(a("task-clock:e").exclusive(), 1);
    assert_eq!(a("task-clock:I").exclude_idle(), 1);
    let gh = a("page-faults:G");
    assert_eq!((gh.exclude_host(), gh.exclude_guest()), (1, 0));
    let h = a("page-faults:H");
    assert_eq!((h.exclude_host(), h.exclude_guest()), (0, 1));
    // perf's implicit exclude_guest is reported, not set.
    let l = m.parse("page-faults,page-faults:k,page-faults:u").unwrap();
    let implicit: Vec<bool> = l.iter().map(EventSpec::perf_excludes_guest).collect();
    assert_eq!(implicit, [true, false, true]);
    assert!(l.iter().all(|e| attr(e).exclude_guest() == 0));
    let p = a("cpu-clock/period=1000/");
    assert_eq!((p.freq(), p.sample_period_or_freq()), (0, 1000));
    let q = a("cpu-clock/period=100,freq=10/");
    assert_eq!((q.freq(), q.sample_period_or_freq()), (1, 10));
    let c = a("cpu-clock/call-graph=dwarf,stack-size=4096/u");
    assert_eq!(c.sample_stack_user, 4096);
    assert_eq!(c.exclude_kernel(), 1);
    assert_eq!(a("cpu-clock/overwrite/").write_backward(), 1);
    assert_eq!(a("cpu-clock/no-inherit/").inherit(), 0);
    assert_eq!(a("cpu-clock/max-stack=5/").sample_max_stack, 5);
    assert_eq!(
        a("cpu-clock/branch_type=any/").branch_sample_type,
        u64::from(sys::PERF_SAMPLE_BRANCH_ANY)
    );
    let n = m.parse("msr/tsc,name=ticks/").unwrap();
    assert_eq!(n.events()[0].name(), "ticks");
    // Group modifiers continue from each member's own.
    let g = m.parse("{page-faults:k,minor-faults}:u").unwrap();
    let (l0, l1) = (attr(&g.events()[0]), attr(&g.events()[1]));
    assert_eq!(
        (l0.exclude_user(), l0.exclude_kernel(), l0.exclude_hv()),
        (0, 0, 1)
    );
    assert_eq!(
        (l1.exclude_user(), l1.exclude_kernel(), l1.exclude_hv()),
        (0, 1, 1)
    );
    assert!(g.events()[0].is_leader() && !g.events()[1].is_leader());
    assert_eq!(g.groups().count(), 1);
    let w = m.parse("{task-clock,page-faults}:W").unwrap();
    assert!(w.iter().all(EventSpec::weak_group));
}

#[test]
fn numeric_raw_and_tool_events() {
    let f = Fixture::new("zen3");
    let m = f.machine();
    let one = |s: &str| tc(&m.parse(s).unwrap().events()[0]);
    assert_eq!(one("1:2"), (1, 2));
    assert_eq!(one("4:0x1a8"), (4, 0x1a8));
    assert_eq!(one("r1A8"), (sys::PERF_TYPE_RAW, 0x1a8));
    assert_eq!(one("rABCDEF:u"), (sys::PERF_TYPE_RAW, 0xabcdef));
    assert_eq!(one("duration_time"), (1, 9));
    assert_eq!(
        m.parse("duration_time").unwrap().events()[0].tool(),
        Some(Tool::DurationTime)
    );
    assert_eq!(one("cpu-clock/config=5/"), (1, 5));
    assert_eq!(one(" page-faults , minor-faults "), (1, 2));
    assert_eq!(one("L1-icache-prefetches"), (3, 0x201));
}

#[test]
fn errors_point_at_the_character() {
    let f = Fixture::new("zen3");
    let m = f.machine();
    let cases: &[(&str, usize, &str)] = &[
        ("cycles:x", 7, "unknown modifier 'x'"),
        ("cycles:pppp", 7, "Bad modifier"),
        ("page-faults:u:k", 13, "unexpected ':'"),
        ("nosuch", 0, "unknown event 'nosuch'"),
        ("cycles,,instructions", 7, "unexpected ','"),
        ("{cycles", 0, "group not closed"),
        ("cycles}", 6, "unexpected '}'"),
        ("{}", 1, "empty group"),
        ("{cycles,{instructions}}", 8, "groups do not nest"),
        ("", 0, "no event given"),
        ("page-faults,", 12, "an event must follow ','"),
        ("msr/event=zz/", 10, "expected numeric value"),
        ("msr/event=18446744073709551616/", 10, "number too large"),
        ("nopmu/event=1/", 0, "no PMU named \"nopmu\""),
        ("msr/tsc/:k", 8, "unexpected ':'"),
        ("msr/,/", 4, "unexpected ','"),
        (
            "L1-icache-stores",
            0,
            "the cache of 'L1-icache-stores' has no such operation",
        ),
        ("r0x1a8", 0, "unknown event"),
        ("cycles/u", 8, "terms not closed"),
    ];
    for (s, pos, msg) in cases {
        let e = err(&m, s);
        assert!(e.message().starts_with(msg), "{s}: {e}");
        assert_eq!(e.position(), *pos, "{s}: {e}");
    }
    // The picture perf draws.
    assert_eq!(
        err(&m, "cycles:x").to_string(),
        "event syntax error: 'cycles:x'\n                            \\___ unknown modifier 'x' \
         (modifiers: ukhIpPGHSDeWb)"
    );
    // As a crate error.
    let e: crate::Error = err(&m, "cycles:x").into();
    assert!(
        e.to_string()
            .contains("unknown modifier 'x' (modifiers: ukhIpPGHSDeWb) (at character 8)"),
        "{e}"
    );
}

#[test]
fn pmu_event_api_uses_the_same_terms() {
    let f = Fixture::new("zen3");
    let cpu = Pmu::in_dir(&f.devices(), "cpu").unwrap();
    assert_eq!(cpu.event("event=0x1ff").unwrap().config, 0x1_0000_00ff);
    assert_eq!(cpu.event("").unwrap().config, 0);
    assert!(cpu.event("nope").is_err());
    assert!(Path::new(&f.devices()).join("cpu").exists());
}

#[test]
fn listing() {
    let f = Fixture::new("alderlake");
    let l = f.machine().list();
    let has = |n: &str, k: ListedKind| l.iter().any(|x| x.name == n && x.kind == k);
    assert!(has("cpu-cycles", ListedKind::Hardware));
    assert!(has("page-faults", ListedKind::Software));
    assert!(has("duration_time", ListedKind::Tool));
    assert!(has("L1-dcache-load-misses", ListedKind::Cache));
    assert!(has("L1-icache-loads", ListedKind::Cache));
    assert!(!has("L1-icache-stores", ListedKind::Cache));
    assert!(has("power/energy-pkg/", ListedKind::Pmu));
    assert!(has("sched:sched_switch", ListedKind::Tracepoint));
    let e = l.iter().find(|x| x.name == "power/energy-pkg/").unwrap();
    assert_eq!(
        (e.unit.as_deref(), e.terms.as_deref()),
        (Some("Joules"), Some("event=0x02"))
    );
    // Every listed name parses.
    let m = f.machine();
    for x in &l {
        m.parse(&x.name)
            .unwrap_or_else(|e| panic!("{}: {e}", x.name));
    }
    assert!(l[0].line().starts_with("  branch-instructions OR branches"));
}

#[cfg(feature = "pmu-events")]
#[test]
fn json_events_by_cpu_model() {
    let f = Fixture::new("alderlake");
    let m = f
        .machine()
        .with_cpuid(CpuId::X86("GenuineIntel-6-97-2".into()));
    assert_eq!(m.event_table(), Some("alderlake"));
    // On both core types, each with its own encoding, merged under one name.
    let l = m.parse("br_inst_retired.all_branches:u").unwrap();
    assert_eq!(l.iter().map(tc).collect::<Vec<_>>(), [(8, 0xc4), (4, 0xc4)]);
    assert_eq!(l.merged().len(), 1);
    assert!(l.iter().all(|e| attr(e).exclude_kernel() == 1));
    // The table's sampling period is not part of the event.
    assert_eq!(attr(&l.events()[0]).sample_period_or_freq(), 0);
    // Case does not matter, and the name works as a term of the PMU.
    assert_eq!(m.parse("BR_INST_RETIRED.ALL_BRANCHES").unwrap().len(), 2);
    let one = m
        .parse("cpu_core/br_inst_retired.all_branches,cmask=1/")
        .unwrap();
    assert_eq!(tc(&one.events()[0]), (4, 0x0100_00c4));
    // An uncore event on the PMU its Unit names.
    let unc = m.parse("unc_mc0_rdcas_count_freerun").unwrap();
    assert_eq!(unc.iter().map(tc).collect::<Vec<_>>(), [(14, 0x20ff)]);
    // Without a table the name is unknown.
    assert!(f.machine().parse("br_inst_retired.all_branches").is_err());
    // Listed with their topic and description.
    let list = m.list();
    let e = list
        .iter()
        .find(|x| x.name == "br_inst_retired.all_branches")
        .unwrap();
    assert_eq!(
        (e.kind, e.topic.as_deref()),
        (ListedKind::Model, Some("pipeline"))
    );
    assert!(e.description.is_some());

    let z = Fixture::new("zen3");
    let m = z
        .machine()
        .with_cpuid(CpuId::X86("AuthenticAMD-25-1-1".into()));
    assert_eq!(m.event_table(), Some("amdzen3"));
    assert_eq!(tc(&m.parse("ex_ret_instr").unwrap().events()[0]), (4, 0xc0));

    let r = Fixture::new("rk3399");
    let m = r.machine().with_cpuid(CpuId::Midr(0x410f_d034));
    assert_eq!(m.event_table(), Some("arm/cortex-a53"));
    // An architecture-standard event the model file names, on both clusters.
    let l = m.parse("exc_irq").unwrap();
    assert_eq!(l.iter().map(tc).collect::<Vec<_>>(), [(8, 0x86), (9, 0x86)]);
}

#[test]
fn arbitrary_text_never_panics() {
    // A small xorshift over pieces of the grammar and odd characters.
    let f = Fixture::new("alderlake");
    let m = f.machine();
    let pieces = [
        "cycles",
        ":",
        "u",
        "k",
        "pp",
        "/",
        "{",
        "}",
        ",",
        "=",
        "0x",
        "1f",
        "msr",
        "tsc",
        "cpu_core",
        "event",
        "mem",
        "sched",
        "*",
        "?",
        "[",
        "]",
        "é",
        "ß",
        "\u{1F600}",
        " ",
        "-",
        "r",
        "1a8",
        "L1-dcache",
        "period",
        "name",
        "9999999999999999999999",
        "",
        "..",
        "\t",
        "uncore_imc_free_running",
    ];
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..3000 {
        let mut s = String::new();
        for _ in 0..(x % 9) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            s.push_str(pieces[(x % pieces.len() as u64) as usize]);
        }
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        match m.parse(&s) {
            Ok(l) => {
                for e in &l {
                    let _ = e.to_attr(&Opts::default());
                }
            }
            Err(e) => {
                let _ = e.to_string();
                let _: crate::Error = e.into();
            }
        }
    }
}

#[test]
fn misspelt_names_get_the_nearest_ones() {
    let f = Fixture::new("zen3");
    let m = f.machine();
    for (s, near) in [
        ("page-fautls", "'page-faults'"),
        ("cycels", "'cycles'"),
        ("task_clock", "'task-clock'"),
        ("L1-dcache-laod-misses", "'L1-dcache-load-misses'"),
        ("msrr/tsc/", "'msr'"),
        ("cpu/evnt=1/", "'event'"),
        ("cycles/perod=10/", "'period'"),
        ("sched:sched_swich", "'sched:sched_switch'"),
        ("shced:sched_switch", "'sched:sched_switch'"),
        ("sched:sched_switch/stack-sise=8/", "'stack-size'"),
    ] {
        let e = err(&m, s);
        assert!(
            e.message().ends_with(&format!("; did you mean {near}?")),
            "{s}: {e}"
        );
    }
    // Nothing near: no suggestion.
    assert!(!err(&m, "nosuch").message().contains("did you mean"));
    // A PMU looked up by name.
    let e = crate::event::pmu::Pmu::in_dir(&f.devices(), "msrr").unwrap_err();
    assert!(e.to_string().contains("did you mean 'msr'?"), "{e}");
    // The crate's error carries it too.
    let e: crate::Error = err(&m, "page-fautls").into();
    assert!(e.to_string().contains("did you mean 'page-faults'?"), "{e}");
}
