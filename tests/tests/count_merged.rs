//! `MergedCounter` on the real kernel: one event copied to several PMUs, opened on each PMU's
//! CPUs and read as one count (and per PMU, as `perf stat --no-merge` shows it).
//!
//! This machine has no hybrid CPU, so the test makes one up: a sysfs tree with two core PMUs,
//! `cpu_core` on CPU 0 and `cpu_atom` on CPU 1, whose type is the software PMU's and whose alias
//! `clock` is `cpu-clock`. Parsing `clock` gives one copy per PMU, each with its PMU's CPUs; the
//! kernel opens them as software events.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use perf_event::config::{online_cpus, Cpu, Opts, Proc};
use perf_event::count::MergedCounter;
use perf_event::event::spec::Machine;
use tests::{require, Skip};

struct Tree(PathBuf);

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn two_core_pmus() -> Tree {
    let root = std::env::temp_dir().join(format!("perf-event-merged-{}", std::process::id()));
    tests::two_core_pmus(&root);
    Tree(root)
}

#[test]
fn copies_open_on_their_cpus_and_merge() {
    let online = online_cpus().unwrap();
    require!(
        online.contains(&0) && online.contains(&1),
        Skip::Hardware,
        "needs CPUs 0 and 1 online (has {online:?})"
    );
    require!(
        tests::is_root() || tests::paranoid() <= 0,
        Skip::Privilege,
        "system-wide counters need root or perf_event_paranoid <= 0 (it is {})",
        tests::paranoid()
    );
    let tree = two_core_pmus();
    let m = Machine::from_sysfs(&tree.0);
    assert!(m.is_hybrid());
    let list = m.parse("clock").unwrap();
    assert_eq!(list.len(), 2);
    let merged = list.merged();
    assert_eq!(merged.len(), 1);
    let mut opts = Opts::default();
    opts.stat_format.time_enabled = true;
    opts.stat_format.time_running = true;
    let c = MergedCounter::on_cpus(merged[0].1.iter().copied(), Proc::ALL, &[0, 1], &opts).unwrap();
    // One counter per copy: cpu_atom on CPU 1, cpu_core on CPU 0.
    let placed: Vec<(Option<&str>, Option<u32>)> =
        c.counters().map(|(p, k)| (p, k.cpu())).collect();
    assert_eq!(
        placed,
        [(Some("cpu_atom"), Some(1)), (Some("cpu_core"), Some(0))]
    );
    // The wall clock spans enable to disable, so no count can exceed it however slow the ioctls.
    let t = Instant::now();
    c.enable().unwrap();
    std::thread::sleep(Duration::from_millis(50));
    c.disable().unwrap();
    let wall = t.elapsed().as_nanos() as u64;
    let s = c.stat().unwrap();
    assert_eq!(s.per_pmu.len(), 2);
    // cpu-clock counts wall time on each CPU: each PMU about the elapsed time, the merged count
    // their sum.
    for (pmu, st) in &s.per_pmu {
        assert!(
            st.count > wall / 2 && st.count <= wall + 5_000_000,
            "{pmu:?}: {} ns of {wall} ns",
            st.count
        );
    }
    let sum: u64 = s.per_pmu.iter().map(|(_, st)| st.count).sum();
    assert_eq!(s.count, sum);
    assert_eq!(s.scaled.value(), Some(sum));
    assert_eq!(c.name(), "clock");
}

#[test]
fn a_cpu_target_opens_only_the_copies_that_count_there() {
    let online = online_cpus().unwrap();
    require!(online.contains(&1), Skip::Hardware, "needs CPU 1 online");
    require!(
        tests::is_root() || tests::paranoid() <= 0,
        Skip::Privilege,
        "per-CPU counters of every task need root or perf_event_paranoid <= 0 (it is {})",
        tests::paranoid()
    );
    let tree = two_core_pmus();
    let list = Machine::from_sysfs(&tree.0).parse("clock").unwrap();
    let c = MergedCounter::new(list.events(), (Proc::ALL, Cpu(1)), Opts::default()).unwrap();
    let pmus: Vec<Option<&str>> = c.counters().map(|(p, _)| p).collect();
    assert_eq!(pmus, [Some("cpu_atom")]);
    // No copy counts on CPU 7.
    let e = MergedCounter::new(list.events(), (Proc::ALL, Cpu(7)), Opts::default()).unwrap_err();
    assert!(
        e.to_string()
            .contains("no PMU of this event counts on CPU 7 (cpu_atom on 1, cpu_core on 0)"),
        "{e}"
    );
}

#[test]
fn a_list_opens_per_task() {
    let list = Machine::current()
        .parse("page-faults:u,task-clock")
        .unwrap();
    let counters =
        MergedCounter::open_list(&list, (Proc::CURRENT, Cpu::ALL), Opts::default()).unwrap();
    assert_eq!(counters.len(), 2);
    for c in &counters {
        c.enable().unwrap();
    }
    let v: Vec<u8> = (0..(4 << 20)).map(|i| i as u8).collect();
    std::hint::black_box(&v);
    for c in &counters {
        c.disable().unwrap();
    }
    let faults = counters[0].stat().unwrap();
    assert!(
        faults.count >= 512,
        "{} page faults for 4 MiB",
        faults.count
    );
    assert_eq!(counters[0].name(), "page-faults:u");
    assert!(counters[1].stat().unwrap().count > 0);
}
