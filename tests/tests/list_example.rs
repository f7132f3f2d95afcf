//! The `list` example (`cargo run -p perf-event --example list`) against `perf list`: every event
//! line perf prints for the kinds the library lists (hardware, software, tool, cache, sysfs PMU
//! aliases, tracepoints, the descriptor reminders) is printed by the example too, in perf's order.
//! perf's JSON-table events and metrics are not compared.

use std::process::Command;

use tests::{require, Skip};

const KINDS: &[&str] = &[
    "[Hardware event]",
    "[Software event]",
    "[Tool event]",
    "[Hardware cache event]",
    "[Kernel PMU event]",
    "[Raw hardware event descriptor]",
    "[Hardware breakpoint]",
    "[Tracepoint event]",
];

fn event_lines(text: &str) -> Vec<String> {
    text.lines()
        .take_while(|l| !l.starts_with("Metric Groups:"))
        .filter(|l| KINDS.iter().any(|k| l.trim_end().ends_with(k)))
        .map(|l| l.trim_end().to_owned())
        .collect()
}

fn example(args: &[&str]) -> String {
    let out = Command::new(tests::example_binary("list"))
        .args(args)
        .output()
        .expect("running the list example");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn lists_what_perf_lists() {
    let perf = Command::new("perf").arg("list").output();
    let perf_ok = perf.as_ref().is_ok_and(|o| o.status.success());
    require!(
        perf_ok,
        Skip::Environment,
        "perf is not installed (Debian: apt-get install linux-perf)"
    );
    let theirs = event_lines(&String::from_utf8_lossy(&perf.unwrap().stdout));
    let ours = event_lines(&example(&[]));
    assert!(
        theirs.len() > 10,
        "perf list printed {} event lines",
        theirs.len()
    );
    assert_eq!(ours, theirs, "the list example and `perf list` differ");
    println!("{} lines equal", ours.len());
}

#[test]
fn patterns_details_and_all() {
    let all = example(&["--all"]);
    assert!(all.contains("  cpu-cycles OR cycles "), "{all}");
    assert!(all.contains("  L1-dcache-load-misses "), "{all}");
    let sw = example(&["faults"]);
    let names: Vec<&str> = sw
        .lines()
        .map(|l| l.split_whitespace().next().unwrap_or(""))
        .collect();
    assert!(
        names.contains(&"page-faults") && names.contains(&"minor-faults"),
        "{sw}"
    );
    assert!(!sw.contains("task-clock"), "{sw}");
    let d = example(&["--details", "task-clock"]);
    assert!(d.contains("[Time the task ran, in ns]"), "{d}");
    let bad = Command::new(tests::example_binary("list"))
        .arg("--nope")
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
}
